//! kern's edits of SPEC.md: byte-preserving splices, each verified by re-parsing.
//!
//! The one decision a reader must know: kern never re-renders markdown. A state change rewrites
//! the one byte inside the box; notes and subtasks are inserted as whole lines with the item's
//! own content indentation and the file's own line ending. The result is parsed again and must
//! show exactly the intended change — same tasks with the same titles, parents, notes and free
//! text except for what the edit says, the same malformed-box problems, and every byte outside
//! the spliced ranges unchanged — or the edit is refused and nothing is written.
//!
//! Where things go:
//! - a new note goes after the task's last note, or else right after the title paragraph
//!   (after the first line, and after any lines that continue that paragraph, so that the
//!   person's description is never split by a block quote);
//! - new subtasks go at the end of the item, indented like its existing subtasks (else at the
//!   content indentation) and with their bullet (`-`, `*`, `+`, or the next number of an
//!   ordered list), else `-`.
//!
//! Agent text is data, never structure. Note text is split into lines; each line is trimmed,
//! control characters and tabs become spaces, empty lines are dropped, and a line starting with
//! ASCII punctuation (`>`, `#`, `-`, `*`, `[`, `` ` ``, `|`, `<`, …) gets a backslash in front, as
//! does the `.`/`)` of a leading `1.`/`1)`: it renders as written but cannot open a quote,
//! heading, list, fence, table or note header. Continuation lines are written `>   text`, so no
//! agent line ever stands where a note header (`> **Kind:**`) or a task could begin. Subtask
//! titles are flattened to one line (whitespace runs become one space) and otherwise kept as
//! given, because the title is the task's identity.

use std::collections::HashMap;
use std::ops::Range;

use super::parse::{Document, NoteKind, TaskIdentity, TaskState, normalise};

/// One change kern makes to a task (serialisable: an edit the person's file cannot take yet is
/// kept in the state folder for the next run).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edit {
    /// Rewrite the box to this state (a done `[X]` stays `[X]`).
    SetState(TaskState),
    /// Add a Research note with these bullets (stage 1's notes).
    AddResearch(Vec<String>),
    /// Add an `Attempt N` note, `N` one more than the task's highest attempt.
    AddAttempt(String),
    /// Add a Skipped note with the agent's reason.
    AddSkipped(String),
    /// Add a Blocked note saying why kern gave up.
    AddBlocked(String),
    /// Append these pending subtasks (titles) at the end of the task's item.
    InsertSubtasks(Vec<String>),
    /// Mark `[~]` every pending ancestor: a task in progress puts its whole chain in progress
    /// (DESIGN.md section 2: one in-progress chain).
    StartParents,
    /// Mark `[x]` every pending or in-progress ancestor whose subtasks are now all done,
    /// nearest first, stopping at the first that is not.
    CompleteParents,
    /// Mark `[!]` every pending or in-progress ancestor that is now stuck: no subtask pending
    /// or in progress, at least one blocked. Use after blocking a subtask so that no `[~]`
    /// parent is left behind that could form a second in-progress chain.
    BlockParents,
}

/// Why an edit was refused; the file is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// No task has this identity any more.
    #[error("task `{task}` is no longer in the file — was it renamed or removed by hand?")]
    TaskNotFound {
        /// The identity, displayed.
        task: String,
    },
    /// The edit's text cannot be written (an empty subtask title).
    #[error("{0}")]
    InvalidText(String),
    /// Re-parsing the result did not show exactly the intended change.
    #[error("the edit of task `{task}` did not verify: {reason} — the file was left unchanged")]
    Verification {
        /// The task, displayed.
        task: String,
        /// What differed.
        reason: String,
    },
}

/// Applies `edit` to the task with identity `task` and returns the new text, verified by
/// re-parsing.
pub fn apply(doc: &Document, task: &TaskIdentity, edit: &Edit) -> Result<String, EditError> {
    apply_parsed(doc, task, edit).map(|(text, _)| text)
}

/// [`apply`], also returning the parsed result (saves a parse when edits are chained).
pub fn apply_parsed(
    doc: &Document,
    task: &TaskIdentity,
    edit: &Edit,
) -> Result<(String, Document), EditError> {
    let index = doc.find(task).ok_or_else(|| EditError::TaskNotFound {
        task: task.to_string(),
    })?;
    let plan = plan(doc, index, edit)?;
    let new_text = splice(doc.text(), &plan.splices);
    let new_doc = Document::parse(&new_text);
    verify(doc, &new_doc, index, &plan).map_err(|reason| EditError::Verification {
        task: task.to_string(),
        reason,
    })?;
    Ok((new_text, new_doc))
}

/// What an edit will do: the splices and the change the re-parse must show.
#[derive(Debug, Default)]
struct Plan {
    /// (range of the old text, replacement), sorted, not overlapping.
    splices: Vec<(Range<usize>, String)>,
    /// Old task index -> its new state.
    states: HashMap<usize, TaskState>,
    /// The note the target gains, with the text the parser must read back.
    note: Option<(NoteKind, String)>,
    /// The subtasks the target gains, in order.
    subtasks: Vec<String>,
}

fn plan(doc: &Document, index: usize, edit: &Edit) -> Result<Plan, EditError> {
    let tasks = doc.tasks();
    let task = &tasks[index];
    let le = doc.line_ending().as_str();
    let mut plan = Plan::default();
    match edit {
        Edit::SetState(state) => set_state(doc, index, *state, &mut plan),
        Edit::AddResearch(bullets) => {
            let mut lines = vec!["**Research:**".to_string()];
            let mut expected = Vec::new();
            for bullet in bullets {
                let parts = sanitise(bullet);
                for (k, part) in parts.iter().enumerate() {
                    if k == 0 {
                        lines.push(format!("  - {part}"));
                        expected.push(format!("- {part}"));
                    } else {
                        lines.push(format!("    {part}"));
                        expected.push(part.clone());
                    }
                }
            }
            add_note(
                doc,
                index,
                NoteKind::Research,
                lines,
                expected.join("\n"),
                &mut plan,
            );
        }
        Edit::AddAttempt(text) => {
            let kind = NoteKind::Attempt(task.attempts().saturating_add(1));
            simple_note(doc, index, kind, text, &mut plan);
        }
        Edit::AddSkipped(text) => simple_note(doc, index, NoteKind::Skipped, text, &mut plan),
        Edit::AddBlocked(text) => simple_note(doc, index, NoteKind::Blocked, text, &mut plan),
        Edit::InsertSubtasks(titles) => {
            let titles: Vec<String> = titles.iter().map(|t| normalise(t)).collect();
            if titles.iter().any(String::is_empty) {
                return Err(EditError::InvalidText(
                    "a subtask title is empty — the agent must name every subtask".to_string(),
                ));
            }
            let (indent, mut bullet) = child_style(doc, index);
            let mut block = String::new();
            for title in &titles {
                block.push_str(&format!("{indent}{} [ ] {title}{le}", bullet.text()));
                bullet = bullet.next();
            }
            insert_lines(doc, item_end(doc, index), &block, &mut plan);
            plan.subtasks = titles;
        }
        Edit::StartParents => {
            for parent in doc.ancestors(index) {
                if tasks[parent].state == TaskState::Pending {
                    set_state(doc, parent, TaskState::InProgress, &mut plan);
                }
            }
        }
        Edit::CompleteParents => {
            let mut done: Vec<usize> = Vec::new();
            for parent in doc.ancestors(index) {
                let all_done = tasks[parent]
                    .children
                    .iter()
                    .all(|&c| tasks[c].state == TaskState::Done || done.contains(&c));
                if !all_done || tasks[parent].state == TaskState::Blocked {
                    break;
                }
                if tasks[parent].state != TaskState::Done {
                    set_state(doc, parent, TaskState::Done, &mut plan);
                    done.push(parent);
                }
            }
        }
        Edit::BlockParents => {
            let mut blocked: Vec<usize> = Vec::new();
            for parent in doc.ancestors(index) {
                let t = &tasks[parent];
                let state_of = |c: usize| {
                    if blocked.contains(&c) {
                        TaskState::Blocked
                    } else {
                        tasks[c].state
                    }
                };
                let open = t.children.iter().any(|&c| state_of(c).is_unfinished());
                let some_blocked = t
                    .children
                    .iter()
                    .any(|&c| state_of(c) == TaskState::Blocked);
                if open || !some_blocked || !t.state.is_unfinished() {
                    break;
                }
                set_state(doc, parent, TaskState::Blocked, &mut plan);
                blocked.push(parent);
            }
        }
    }
    plan.splices.sort_by_key(|(r, _)| (r.start, r.end));
    Ok(plan)
}

fn set_state(doc: &Document, index: usize, state: TaskState, plan: &mut Plan) {
    let task = &doc.tasks()[index];
    plan.states.insert(index, state);
    if task.state != state {
        plan.splices
            .push((task.marker.clone(), state.marker_char().to_string()));
    }
}

fn simple_note(doc: &Document, index: usize, kind: NoteKind, text: &str, plan: &mut Plan) {
    let parts = sanitise(text);
    let header = format!("**{}:**", kind.header());
    let mut lines = Vec::new();
    match parts.first() {
        Some(first) => lines.push(format!("{header} {first}")),
        None => lines.push(header),
    }
    lines.extend(parts.iter().skip(1).map(|p| format!("  {p}")));
    add_note(doc, index, kind, lines, parts.join("\n"), plan);
}

/// Inserts `> line` for each line after the task's last note, else after its title paragraph.
fn add_note(
    doc: &Document,
    index: usize,
    kind: NoteKind,
    lines: Vec<String>,
    expected: String,
    plan: &mut Plan,
) {
    let task = &doc.tasks()[index];
    let le = doc.line_ending().as_str();
    let at = match task.notes.last() {
        Some(note) => note.range.end,
        None => doc.line_end_after(task.title_end.saturating_sub(1).max(task.marker.start)),
    };
    let mut block = String::new();
    for line in lines {
        block.push_str(&task.content_indent);
        block.push_str("> ");
        block.push_str(&line);
        block.push_str(le);
    }
    insert_lines(doc, at, &block, plan);
    plan.note = Some((kind, expected));
}

/// Inserts whole lines at a line start; at the end of a file without a final line ending, the
/// line ending goes first and the block's last one is dropped, so the file keeps its style.
fn insert_lines(doc: &Document, at: usize, block: &str, plan: &mut Plan) {
    let text = doc.text();
    let le = doc.line_ending().as_str();
    let replacement = if at == text.len() && !text.is_empty() && !text.ends_with('\n') {
        format!("{le}{}", block.strip_suffix(le).unwrap_or(block))
    } else {
        block.to_string()
    };
    plan.splices.push((at..at, replacement));
}

/// Just past the line ending of the item's last non-blank line.
fn item_end(doc: &Document, index: usize) -> usize {
    let item = &doc.tasks()[index].item;
    let body = doc.text()[item.clone()].trim_end();
    doc.line_end_after(item.start + body.len().max(1) - 1)
}

/// A list bullet kern writes for a new subtask.
#[derive(Debug, Clone)]
enum Bullet {
    /// `-`, `*` or `+`.
    Char(char),
    /// `N.` or `N)`.
    Number(u64, char),
}

impl Bullet {
    fn text(&self) -> String {
        match self {
            Bullet::Char(c) => c.to_string(),
            Bullet::Number(n, d) => format!("{n}{d}"),
        }
    }

    fn next(self) -> Bullet {
        match self {
            Bullet::Number(n, d) => Bullet::Number(n.saturating_add(1), d),
            other => other,
        }
    }
}

/// The indentation and bullet of a new subtask: those of the last existing subtask when it
/// ends the item (so the new one continues its list), else the content indentation and `-`.
fn child_style(doc: &Document, index: usize) -> (String, Bullet) {
    let tasks = doc.tasks();
    let task = &tasks[index];
    let text = doc.text();
    if let Some(&last) = task.children.last() {
        let child = &tasks[last];
        if item_end(doc, last) == item_end(doc, index) {
            let indent: String = text[doc.line_start(child.item.start)..child.item.start]
                .chars()
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let rest = &text[child.item.start..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let bullet = if digits > 0 {
                let n: u64 = rest[..digits].parse().unwrap_or(0);
                let delimiter = rest[digits..].chars().next().unwrap_or('.');
                Bullet::Number(n.saturating_add(1), delimiter)
            } else {
                Bullet::Char(rest.chars().next().unwrap_or('-'))
            };
            return (indent, bullet);
        }
    }
    (task.content_indent.clone(), Bullet::Char('-'))
}

/// Agent text -> safe lines (see the module doc).
fn sanitise(text: &str) -> Vec<String> {
    text.split(['\n', '\r'])
        .map(|line| {
            let flat: String = line
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            escape_start(flat.trim())
        })
        .filter(|l| !l.is_empty())
        .collect()
}

fn escape_start(line: &str) -> String {
    let Some(first) = line.chars().next() else {
        return String::new();
    };
    if first.is_ascii_punctuation() {
        return format!("\\{line}");
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && line[digits..].starts_with(['.', ')']) {
        return format!("{}\\{}", &line[..digits], &line[digits..]);
    }
    line.to_string()
}

fn splice(text: &str, splices: &[(Range<usize>, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (range, replacement) in splices {
        out.push_str(&text[at..range.start]);
        out.push_str(replacement);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Checks that `new` shows exactly the change `plan` intended on `old`.
fn verify(old: &Document, new: &Document, index: usize, plan: &Plan) -> Result<(), String> {
    // Every byte outside the splices is unchanged.
    let (a, b) = (old.text(), new.text());
    let (mut i, mut j) = (0, 0);
    for (range, replacement) in &plan.splices {
        let keep = range.start - i;
        if b.get(j..j + keep) != Some(&a[i..range.start]) {
            return Err(format!("bytes before offset {} changed", range.start));
        }
        j += keep + replacement.len();
        i = range.end;
    }
    if b.get(j..) != Some(&a[i..]) {
        return Err("bytes after the edit changed".to_string());
    }
    let (ot, nt) = (old.tasks(), new.tasks());
    if nt.len() != ot.len() + plan.subtasks.len() {
        return Err(format!(
            "expected {} tasks, found {}",
            ot.len() + plan.subtasks.len(),
            nt.len()
        ));
    }
    if new.problems().len() != old.problems().len() {
        return Err("a malformed task marker appeared".to_string());
    }
    // Old task -> new task, by where its box moved.
    let shift = |offset: usize| -> usize {
        let mut moved = offset as isize;
        for (range, replacement) in &plan.splices {
            if range.end <= offset {
                moved += replacement.len() as isize - range.len() as isize;
            }
        }
        moved as usize
    };
    let by_marker: HashMap<usize, usize> = nt
        .iter()
        .enumerate()
        .map(|(k, t)| (t.marker.start, k))
        .collect();
    let mut map = Vec::with_capacity(ot.len());
    for t in ot {
        match by_marker.get(&shift(t.marker.start)) {
            Some(&k) => map.push(k),
            None => return Err(format!("task `{}` moved or vanished", t.title)),
        }
    }
    for (k, t) in ot.iter().enumerate() {
        let n = &nt[map[k]];
        let state = plan.states.get(&k).copied().unwrap_or(t.state);
        if n.title != t.title || n.state != state || n.parent != t.parent.map(|p| map[p]) {
            return Err(format!(
                "task `{}` changed its title, state or parent",
                t.title
            ));
        }
        if n.free_text != t.free_text {
            return Err(format!("the text of task `{}` changed", t.title));
        }
        let mut notes: Vec<(NoteKind, &str)> =
            t.notes.iter().map(|x| (x.kind, x.text.as_str())).collect();
        if k == index
            && let Some((kind, text)) = &plan.note
        {
            notes.push((*kind, text.as_str()));
        }
        let found: Vec<(NoteKind, &str)> =
            n.notes.iter().map(|x| (x.kind, x.text.as_str())).collect();
        if found != notes {
            return Err(format!(
                "the notes of task `{}` are not as intended",
                t.title
            ));
        }
    }
    if !plan.subtasks.is_empty() {
        let parent = map[index];
        let children = &nt[parent].children;
        let added = &children[children.len().saturating_sub(plan.subtasks.len())..];
        let ok = added.len() == plan.subtasks.len()
            && added.iter().zip(&plan.subtasks).all(|(&c, title)| {
                let s = &nt[c];
                s.title == *title
                    && s.state == TaskState::Pending
                    && s.notes.is_empty()
                    && s.children.is_empty()
                    && !map.contains(&c)
            });
        if !ok {
            return Err("the new subtasks did not land under the task".to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edited(text: &str, task: usize, edit: Edit) -> String {
        let doc = Document::parse(text);
        apply(&doc, &doc.identity(task), &edit).unwrap()
    }

    #[test]
    fn edit_table() {
        let cases: &[(&str, &str, usize, Edit, &str)] = &[
            (
                "set state rewrites one byte",
                "- [ ] a\n- [ ] b\n",
                1,
                Edit::SetState(TaskState::InProgress),
                "- [ ] a\n- [~] b\n",
            ),
            (
                "done keeps a capital X",
                "- [X] a\n",
                0,
                Edit::SetState(TaskState::Done),
                "- [X] a\n",
            ),
            (
                "first note after the title paragraph",
                "- [ ] a\n  more a\n\n  para\n- [ ] b\n",
                0,
                Edit::AddAttempt("it broke".into()),
                "- [ ] a\n  more a\n  > **Attempt 1:** it broke\n\n  para\n- [ ] b\n",
            ),
            (
                "attempt numbers follow the highest",
                "- [~] a\n  > **Attempt 3:** x\n  - [ ] s\n",
                0,
                Edit::AddAttempt("two\nlines".into()),
                "- [~] a\n  > **Attempt 3:** x\n  > **Attempt 4:** two\n  >   lines\n  - [ ] s\n",
            ),
            (
                "new note after notes that follow subtasks",
                "- [~] a\n  - [ ] s\n  > **Attempt 1:** x\n- [ ] b\n",
                0,
                Edit::AddBlocked("gave up".into()),
                "- [~] a\n  - [ ] s\n  > **Attempt 1:** x\n  > **Blocked:** gave up\n- [ ] b\n",
            ),
            (
                "research bullets, crlf, nested indentation",
                "- [ ] p\r\n   1. [ ] a\r\n",
                1,
                Edit::AddResearch(vec!["read x".into(), "then\ny".into()]),
                "- [ ] p\r\n   1. [ ] a\r\n      > **Research:**\r\n      >   - read x\r\n      >   - then\r\n      >     y\r\n",
            ),
            (
                "agent text is escaped",
                "- [ ] a\n",
                0,
                Edit::AddSkipped("# big\n- [ ] sneaky\n> **Blocked:** no\n1. one\n\t\n".into()),
                "- [ ] a\n  > **Skipped:** \\# big\n  >   \\- [ ] sneaky\n  >   \\> **Blocked:** no\n  >   1\\. one\n",
            ),
            (
                "empty reason",
                "- [ ] a",
                0,
                Edit::AddBlocked("  ".into()),
                "- [ ] a\n  > **Blocked:**",
            ),
            (
                "subtasks with default bullet",
                "* [ ] a\n  text\n\n* [ ] b\n",
                0,
                Edit::InsertSubtasks(vec!["one".into(), " two  words ".into()]),
                "* [ ] a\n  text\n  - [ ] one\n  - [ ] two words\n\n* [ ] b\n",
            ),
            (
                "subtasks continue an ordered child list",
                "- [ ] a\n    1) [x] one\n    2) [ ] two\n",
                0,
                Edit::InsertSubtasks(vec!["three".into()]),
                "- [ ] a\n    1) [x] one\n    2) [ ] two\n    3) [ ] three\n",
            ),
            (
                "subtasks continue a star child list",
                "- [ ] a\n  * [ ] one\n    - [ ] deep\n",
                0,
                Edit::InsertSubtasks(vec!["two".into()]),
                "- [ ] a\n  * [ ] one\n    - [ ] deep\n  * [ ] two\n",
            ),
            (
                "complete parents up the chain",
                "- [~] a\n  - [~] b\n    - [x] c\n  - [x] d\n- [ ] e\n",
                2,
                Edit::CompleteParents,
                "- [x] a\n  - [x] b\n    - [x] c\n  - [x] d\n- [ ] e\n",
            ),
            (
                "complete parents stops at an open sibling",
                "- [~] a\n  - [~] b\n    - [x] c\n  - [ ] d\n",
                2,
                Edit::CompleteParents,
                "- [~] a\n  - [x] b\n    - [x] c\n  - [ ] d\n",
            ),
            (
                "block stuck parents",
                "- [~] a\n  - [~] b\n    - [!] c\n  - [!] d\n",
                2,
                Edit::BlockParents,
                "- [!] a\n  - [!] b\n    - [!] c\n  - [!] d\n",
            ),
        ];
        for (name, text, task, edit, expected) in cases {
            assert_eq!(edited(text, *task, edit.clone()), *expected, "{name}");
        }
    }

    #[test]
    fn refusals() {
        let doc = Document::parse("- [ ] a\n");
        let gone = TaskIdentity {
            path: vec!["b".into()],
            occurrence: 0,
        };
        assert_eq!(
            apply(&doc, &gone, &Edit::SetState(TaskState::Done))
                .unwrap_err()
                .to_string(),
            "task `b` is no longer in the file — was it renamed or removed by hand?"
        );
        assert_eq!(
            apply(
                &doc,
                &doc.identity(0),
                &Edit::InsertSubtasks(vec![" \n ".into()])
            )
            .unwrap_err()
            .to_string(),
            "a subtask title is empty — the agent must name every subtask"
        );
    }

    #[test]
    fn verification_refuses_a_note_that_would_swallow_text() {
        // An unclosed fence at the end of the item swallows anything appended after it, so the
        // subtask cannot land as a task: the edit must be refused rather than written.
        let doc = Document::parse("- [ ] a\n  ```\n  code\n");
        let err = apply(
            &doc,
            &doc.identity(0),
            &Edit::InsertSubtasks(vec!["s".into()]),
        )
        .unwrap_err();
        assert!(matches!(err, EditError::Verification { .. }), "{err:?}");
    }

    #[test]
    fn notes_parse_back_as_written() {
        let doc = Document::parse("- [ ] a\n");
        let (_, new) = apply_parsed(
            &doc,
            &doc.identity(0),
            &Edit::AddResearch(vec!["use `x`".into(), "* star".into()]),
        )
        .unwrap();
        let n = &new.tasks()[0].notes[0];
        assert_eq!(
            (n.kind, n.text.as_str()),
            (NoteKind::Research, "- use `x`\n- \\* star")
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::spec::LineEnding;
    use proptest::prelude::*;

    /// A generated task tree rendered as markdown, for round-trip properties.
    #[derive(Debug, Clone)]
    struct Node {
        state: char,
        title: String,
        notes: Vec<String>,
        text: Option<String>,
        children: Vec<Node>,
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = (
            prop::sample::select(vec![' ', '~', 'x', 'X', '!']),
            "[a-zA-Zé ]{1,12}",
            prop::collection::vec("[a-z ]{0,10}", 0..3),
            prop::option::of("[a-z]{1,8}"),
        )
            .prop_map(|(state, title, notes, text)| Node {
                state,
                title,
                notes,
                text,
                children: Vec::new(),
            });
        leaf.prop_recursive(3, 24, 4, |inner| {
            (
                prop::sample::select(vec![' ', 'x', '!']),
                "[a-zA-Z ]{1,12}",
                prop::collection::vec("[a-z ]{0,10}", 0..2),
                prop::option::of("[a-z]{1,8}"),
                prop::collection::vec(inner, 1..4),
            )
                .prop_map(|(state, title, notes, text, children)| Node {
                    state,
                    title,
                    notes,
                    text,
                    children,
                })
        })
    }

    fn render(nodes: &[Node], indent: &str, bullet: &str, le: &str, out: &mut String) {
        for (k, n) in nodes.iter().enumerate() {
            let b = if bullet == "1." {
                format!("{}.", k + 1)
            } else {
                bullet.to_string()
            };
            let inner = format!("{indent}{}", " ".repeat(b.len() + 1));
            out.push_str(&format!("{indent}{b} [{}] {}{le}", n.state, n.title.trim()));
            if let Some(t) = &n.text {
                out.push_str(&format!("{inner}{t}{le}"));
            }
            for (a, note) in n.notes.iter().enumerate() {
                out.push_str(&format!(
                    "{inner}> **Attempt {}:** {}{le}",
                    a + 1,
                    note.trim()
                ));
            }
            let child_bullet = match k % 3 {
                0 => "-",
                1 => "*",
                _ => "1.",
            };
            render(&n.children, &inner, child_bullet, le, out);
        }
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            prop::sample::select(vec![
                TaskState::Pending,
                TaskState::InProgress,
                TaskState::Done,
                TaskState::Blocked
            ])
            .prop_map(Edit::SetState),
            prop::collection::vec(".{0,30}", 0..3).prop_map(Edit::AddResearch),
            ".{0,60}".prop_map(Edit::AddAttempt),
            ".{0,60}".prop_map(Edit::AddSkipped),
            ".{0,60}".prop_map(Edit::AddBlocked),
            prop::collection::vec("[a-z][a-z #>*-]{0,20}", 1..3).prop_map(Edit::InsertSubtasks),
            Just(Edit::StartParents),
            Just(Edit::CompleteParents),
            Just(Edit::BlockParents),
        ]
    }

    proptest! {
        #[test]
        fn random_edits_change_only_what_they_say(
            tree in prop::collection::vec(node(), 1..5),
            crlf in any::<bool>(),
            top in prop::sample::select(vec!["-", "*", "+", "1."]),
            pick in any::<prop::sample::Index>(),
            edit in edit(),
        ) {
            let le = if crlf { "\r\n" } else { "\n" };
            let mut text = format!("# Spec{le}{le}Intro text.{le}{le}");
            render(&tree, "", top, le, &mut text);
            let doc = Document::parse(&text);
            prop_assert!(!doc.tasks().is_empty());
            let task = pick.index(doc.tasks().len());
            let id = doc.identity(task);
            // Edits of valid documents must apply; verification is the property's judge, and
            // it is re-checked here independently for the state and the untouched prefix.
            let (new_text, new_doc) = apply_parsed(&doc, &id, &edit).map_err(|e| {
                TestCaseError::fail(format!("{e}\n{text}"))
            })?;
            let changed_at = text
                .bytes()
                .zip(new_text.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(text.len().min(new_text.len()));
            let target = new_doc.find(&id).expect("task still there");
            match &edit {
                Edit::SetState(s) => {
                    prop_assert_eq!(new_doc.tasks()[target].state, *s);
                    prop_assert_eq!(new_text.len(), text.len());
                    let diff = text.bytes().zip(new_text.bytes()).filter(|(a, b)| a != b).count();
                    prop_assert!(diff <= 1);
                }
                Edit::InsertSubtasks(t) => {
                    prop_assert_eq!(new_doc.tasks().len(), doc.tasks().len() + t.len());
                    prop_assert!(changed_at >= doc.tasks()[task].marker.end);
                }
                Edit::StartParents | Edit::CompleteParents | Edit::BlockParents => {
                    prop_assert_eq!(new_text.len(), text.len());
                }
                _ => {
                    prop_assert_eq!(new_doc.tasks()[target].notes.len(), doc.tasks()[task].notes.len() + 1);
                    prop_assert!(changed_at > doc.tasks()[task].marker.end);
                    prop_assert!(new_text.starts_with(&text[..changed_at]));
                    if crlf {
                        prop_assert!(!new_text.replace("\r\n", "").contains('\n'));
                    }
                }
            }
            prop_assert_eq!(new_doc.problems().len(), doc.problems().len());
        }

        #[test]
        fn parse_never_panics_on_strings(text in ".{0,400}") {
            let doc = Document::parse(&text);
            let _ = super::super::validate::validate(&doc);
            let _ = super::super::select::select(&doc);
            for i in 0..doc.tasks().len() {
                prop_assert_eq!(doc.find(&doc.identity(i)), Some(i));
            }
        }

        #[test]
        fn parse_never_panics_on_markdownish_strings(
            text in "([-*+] |[0-9][.)] |  |\t|>|\\[|\\]|[ ~xX!o-]|```|\r?\n|[a-z]|\\*\\*Attempt 1:\\*\\*)*"
        ) {
            let doc = Document::parse(&text);
            let _ = super::super::validate::validate(&doc);
            let _ = super::super::select::select(&doc);
            for i in 0..doc.tasks().len() {
                let t = &doc.tasks()[i];
                prop_assert_eq!(t.marker.len(), 1);
                prop_assert!(TaskState::from_marker(text.as_bytes()[t.marker.start] as char).is_some());
                let _ = doc.task_block(i);
            }
        }

        #[test]
        fn from_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = Document::from_bytes(&bytes);
        }
    }

    /// One line of an arbitrary, often malformed, SPEC.md: tasks with every box and bullet
    /// (also near-miss boxes), notes of every kind, fences, HTML, tables, headings, tabs and
    /// free text, at assorted indentations.
    fn noisy_line() -> impl Strategy<Value = String> {
        let indent = prop::sample::select(vec![
            "", "", " ", "  ", "   ", "    ", "\t", "  \t", "      ",
        ]);
        let bullet = prop::sample::select(vec!["-", "*", "+", "1.", "2)", "10.", "-", ""]);
        let boxed = prop::sample::select(vec![
            "[ ]", "[ ]", "[x]", "[X]", "[~]", "[!]", "[-]", "[o]", "[]", "[ x]", "[~ ]", "[[ ]",
            "[docs]", "[ ]",
        ]);
        let title = "[a-zA-Z0-9 é`*_\\[\\]<>#|-]{0,16}";
        let task = (indent.clone(), bullet, boxed, title)
            .prop_map(|(i, b, x, t)| format!("{i}{b} {x} {t}"));
        let note = (
            indent.clone(),
            prop::sample::select(vec![
                "> **Research:**",
                ">   - a finding",
                "> **Attempt 1:** failed",
                "> **Attempt 7:** again",
                "> **Skipped:** not now",
                "> **Blocked:** stuck",
                "> **Check:** cargo test",
                "> plain quote",
                ">",
                "> > nested",
            ]),
        )
            .prop_map(|(i, n)| format!("{i}{n}"));
        let block = (
            indent,
            prop::sample::select(vec![
                "```",
                "~~~",
                "```rust",
                "<div>",
                "</div>",
                "<!-- x",
                "-->",
                "| a | b |",
                "|---|---|",
                "# Heading",
                "Heading",
                "===",
                "---",
                "text",
                "",
                "",
                "    - [ ] code",
                "1. item",
                "* item",
            ]),
        )
            .prop_map(|(i, b)| format!("{i}{b}"));
        prop_oneof![4 => task, 2 => note, 2 => block, 1 => ".{0,24}"]
    }

    /// Each edit kind once, with texts that try to break out of their place.
    fn every_edit(text: &str) -> Vec<Edit> {
        vec![
            Edit::SetState(TaskState::Pending),
            Edit::SetState(TaskState::InProgress),
            Edit::SetState(TaskState::Done),
            Edit::SetState(TaskState::Blocked),
            Edit::AddResearch(vec![
                text.to_string(),
                "- [ ] not a task".into(),
                String::new(),
            ]),
            Edit::AddAttempt(text.to_string()),
            Edit::AddSkipped(format!("> **Blocked:** {text}")),
            Edit::AddBlocked(format!("{text}\n```\n- [x] fenced")),
            Edit::InsertSubtasks(vec![format!("sub {text}"), "second [ ] one".into()]),
            Edit::StartParents,
            Edit::CompleteParents,
            Edit::BlockParents,
        ]
    }

    /// Checks one applied edit against the old document from the outside: the bytes that
    /// changed, where, and that the result parses to the same tasks plus what the edit says.
    fn check_applied(
        doc: &Document,
        index: usize,
        edit: &Edit,
        new_text: &str,
        new_doc: &Document,
    ) -> Result<(), TestCaseError> {
        let text = doc.text();
        let task = &doc.tasks()[index];
        let again = Document::parse(new_text);
        prop_assert_eq!(
            again.tasks(),
            new_doc.tasks(),
            "the result re-parses the same"
        );
        prop_assert_eq!(
            again.problems().len(),
            doc.problems().len(),
            "no new malformed box"
        );
        prop_assert!(
            new_doc.find(&doc.identity(index)).is_some(),
            "the task is still found"
        );
        match edit {
            Edit::SetState(_) | Edit::StartParents | Edit::CompleteParents | Edit::BlockParents => {
                prop_assert_eq!(new_text.len(), text.len());
                let allowed: Vec<usize> = match edit {
                    Edit::SetState(_) => vec![task.marker.start],
                    _ => doc
                        .ancestors(index)
                        .iter()
                        .map(|&a| doc.tasks()[a].marker.start)
                        .collect(),
                };
                for (at, (a, b)) in text.bytes().zip(new_text.bytes()).enumerate() {
                    if a != b {
                        prop_assert!(
                            allowed.contains(&at),
                            "byte {} changed outside the boxes",
                            at
                        );
                        prop_assert!(TaskState::from_marker(b as char).is_some());
                    }
                }
                prop_assert_eq!(new_doc.tasks().len(), doc.tasks().len());
            }
            _ => {
                // A pure insertion: some split of the old text is a prefix and a suffix of the
                // new one. Every split point in `lowest..=prefix` works; one of them must lie
                // between the task's box and the end of its item.
                let prefix = text
                    .bytes()
                    .zip(new_text.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let suffix = text
                    .bytes()
                    .rev()
                    .zip(new_text.bytes().rev())
                    .take_while(|(a, b)| a == b)
                    .count();
                prop_assert!(new_text.len() > text.len());
                prop_assert!(prefix + suffix >= text.len(), "only an insertion");
                let lowest = text.len() - suffix;
                let item_end = doc
                    .line_end_after(task.item.end.saturating_sub(1))
                    .max(task.item.end);
                prop_assert!(
                    lowest.max(task.marker.end) <= prefix.min(item_end),
                    "inserted outside the item ({}..={} vs {}..={})",
                    lowest,
                    prefix,
                    task.marker.end,
                    item_end
                );
                let added = match edit {
                    Edit::InsertSubtasks(t) => t.len(),
                    _ => 0,
                };
                prop_assert_eq!(new_doc.tasks().len(), doc.tasks().len() + added);
                if doc.line_ending() == LineEnding::CrLf && text.ends_with("\r\n") {
                    prop_assert!(!new_text.replace("\r\n", "").contains('\n'), "CRLF kept");
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary documents (not only well-formed ones): every edit kind on a task that
        /// exists either applies and passes the outside checks, or is refused; never a panic.
        #[test]
        fn every_edit_on_arbitrary_documents_touches_only_its_range_and_reparses(
            lines in prop::collection::vec(noisy_line(), 1..30),
            crlf in any::<bool>(),
            final_newline in any::<bool>(),
            pick in any::<prop::sample::Index>(),
            note in ".{0,40}",
        ) {
            let le = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.join(le);
            if final_newline {
                text.push_str(le);
            }
            let doc = Document::parse(&text);
            let _ = super::super::validate::validate(&doc);
            let _ = super::super::select::select(&doc);
            if doc.tasks().is_empty() {
                return Ok(());
            }
            let index = pick.index(doc.tasks().len());
            let id = doc.identity(index);
            for edit in every_edit(&note) {
                if let Ok((new_text, new_doc)) = apply_parsed(&doc, &id, &edit) {
                    check_applied(&doc, index, &edit, &new_text, &new_doc)
                        .map_err(|e| TestCaseError::fail(format!("{e}\nedit {edit:?}\ntext {text:?}")))?;
                }
            }
        }

        /// The same on plain strings, every task, the edits chained on the growing text.
        #[test]
        fn chained_edits_on_any_string_never_panic(text in ".{0,300}") {
            let mut doc = Document::parse(&text);
            for index in 0..doc.tasks().len() {
                let id = doc.identity(index);
                for edit in every_edit("x") {
                    if let Ok((_, next)) = apply_parsed(&doc, &id, &edit) {
                        doc = next;
                    }
                }
            }
        }
    }
}
