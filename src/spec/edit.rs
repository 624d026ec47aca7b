//! kern's edits of SPEC.md: byte-preserving splices, each verified by re-parsing.
//!
//! The one decision a reader must know: kern never re-renders markdown. A state change rewrites
//! the one byte inside the box; notes and subtasks are inserted as whole lines with the item's
//! own content indentation and the file's own line ending. The result is parsed again and must
//! show exactly the intended change — same tasks with the same titles, kinds, parents, notes
//! and free text except for what the edit says, the same malformed-box problems, and every
//! byte outside the spliced ranges unchanged — or the edit is refused and nothing is written.
//!
//! Where things go:
//! - a new note goes after the task's last note (a blank `>` line between them), or else right
//!   after the title paragraph; notes are written in the layout of [`crate::spec::notes`];
//! - in a loose list (blocks separated by blank lines) a new notes block and a new subtask list
//!   get a blank line before them, as formatters would write them, so that prettier and
//!   mdformat leave kern's edits as they are;
//! - when what follows a new note would become part of it (a table, the person's own quote,
//!   a lazy continuation line), a blank line goes after the note too;
//! - adding a note to a task whose notes block is in an older shape (kern.sh, earlier kern, a
//!   formatter's nesting) first rewrites that block in kern's layout, every note's text kept;
//!   [`Applied::rewrote_notes`] says so;
//! - new subtasks go at the end of the item, indented like its existing subtasks (else at the
//!   content indentation) and with their bullet (`-`, `*`, `+`, or the next number of an
//!   ordered list, the same number when the list repeats one), else `-`.
//!
//! Agent text is cleaned by [`crate::spec::sanitise`]; the re-parse check is
//! [`crate::spec::verify`]'s.

use std::ops::Range;

use super::document::normalise;
use super::document::{Document, NoteKind, Quoted, TaskIdentity, TaskState};
use super::notes;
use super::plan::Plan;
use super::sanitise::{note_text, sanitise};
use super::verify::{splice, verify};

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
    /// Add a Review note naming the branch the task's commit waits on (`--review`).
    AddReview(String),
    /// Add an `Out of scope` note: what the task changed outside its Scope, set aside.
    AddOutOfScope(String),
    /// Add a Must note with these must-haves (research proposed them), one a bullet.
    AddMust(Vec<String>),
    /// Add a Scope note with these paths and globs (research proposed them).
    AddScope(Vec<String>),
    /// Tick every acceptance criterion of the task (`[ ]` → `[x]`): it is done.
    TickCriteria,
    /// Append these pending subtasks (titles) at the end of the task's item.
    InsertSubtasks(Vec<String>),
    /// Mark `[~]` every pending ancestor: a task in progress puts its whole chain in progress
    /// (DESIGN.md section 2: one in-progress chain).
    StartParents,
    /// Mark `[x]` every pending or in-progress ancestor whose subtasks are now all done,
    /// nearest first, stopping at the first that is not. Optional subtasks (`[ ]*`) do not
    /// hold a parent open, as in Kiro.
    CompleteParents,
    /// Mark `[!]` every pending or in-progress ancestor that is now stuck: no subtask pending
    /// or in progress, at least one blocked. Use after blocking a subtask so that no `[~]`
    /// parent is left behind that could form a second in-progress chain.
    BlockParents,
}

impl Edit {
    /// What the edit adds or changes, in words (`Attempt note`, `subtasks`).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Edit::SetState(_) => "state change",
            Edit::AddResearch(_) => "Research note",
            Edit::AddAttempt(_) => "Attempt note",
            Edit::AddSkipped(_) => "Skipped note",
            Edit::AddBlocked(_) => "Blocked note",
            Edit::AddReview(_) => "Review note",
            Edit::AddOutOfScope(_) => "Out of scope note",
            Edit::AddMust(_) => "Must note",
            Edit::AddScope(_) => "Scope note",
            Edit::TickCriteria => "ticked acceptance criteria",
            Edit::InsertSubtasks(_) => "subtasks",
            Edit::StartParents => "in-progress marks of the parents",
            Edit::CompleteParents => "done marks of the parents",
            Edit::BlockParents => "blocked marks of the parents",
        }
    }
}

/// Why an edit was refused; the file is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// No task has this identity any more.
    #[error("task {} is no longer in the file — was it renamed or removed by hand?", Quoted(.task))]
    TaskNotFound {
        /// The identity, displayed.
        task: String,
    },
    /// The edit's text cannot be written (an empty subtask title).
    #[error("{0}")]
    InvalidText(String),
    /// Re-parsing the result did not show exactly the intended change: the markdown around the
    /// task would read differently with kern's lines in it.
    #[error("the edit of task {} did not verify: {reason} — the file was left unchanged", Quoted(.task))]
    Verification {
        /// The task, displayed.
        task: String,
        /// What differed.
        reason: String,
        /// 1-based line of the task's box.
        line: usize,
        /// 1-based column of the task's box.
        column: usize,
    },
}

/// An applied edit: the new text, its parse, and whether a notes block was rewritten.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The new file text.
    pub text: String,
    /// The new text, parsed.
    pub document: Document,
    /// True when the task's notes were in an older or a formatter's shape and kern rewrote
    /// them in its layout (their text unchanged) before adding its note.
    pub rewrote_notes: bool,
}

/// Applies `edit` to the task with identity `task` and returns the new text, verified by
/// re-parsing.
pub fn apply(doc: &Document, task: &TaskIdentity, edit: &Edit) -> Result<String, EditError> {
    apply_edit(doc, task, edit).map(|a| a.text)
}

#[cfg(test)]
/// [`apply`], also returning the parsed result (saves a parse when edits are chained).
pub(crate) fn apply_parsed(
    doc: &Document,
    task: &TaskIdentity,
    edit: &Edit,
) -> Result<(String, Document), EditError> {
    apply_edit(doc, task, edit).map(|a| (a.text, a.document))
}

/// [`apply`], returning everything about the result.
pub fn apply_edit(doc: &Document, task: &TaskIdentity, edit: &Edit) -> Result<Applied, EditError> {
    apply_edits(doc, task, std::slice::from_ref(edit))
}

/// Applies `edits` in order to the task as one change: one splice set, one parse to verify.
pub(crate) fn apply_edits(
    doc: &Document,
    task: &TaskIdentity,
    edits: &[Edit],
) -> Result<Applied, EditError> {
    let index = doc.find(task).ok_or_else(|| EditError::TaskNotFound {
        task: task.to_string(),
    })?;
    let mut plan = plan(doc, index, edits, false)?;
    let mut attempt = try_plan(doc, index, &plan);
    if attempt.is_err() && !plan.notes.is_empty() {
        // What follows the note would join it: a blank line after the note keeps it apart.
        plan = self::plan(doc, index, edits, true)?;
        attempt = try_plan(doc, index, &plan);
    }
    let t = &doc.tasks()[index];
    let (text, document) = attempt.map_err(|reason| EditError::Verification {
        task: task.to_string(),
        reason,
        line: t.line,
        column: t.column,
    })?;
    Ok(Applied {
        text,
        document,
        rewrote_notes: plan.rewrote,
    })
}

fn try_plan(doc: &Document, index: usize, plan: &Plan) -> Result<(String, Document), String> {
    let new_text = splice(doc.text(), &plan.splices);
    let new_doc = Document::parse(&new_text);
    verify(doc, &new_doc, index, plan)?;
    Ok((new_text, new_doc))
}

/// The plan of `edits`, applied in order to task `index`, as one set of splices: later edits
/// see the states earlier ones set, and all new notes go in as one block.
fn plan(
    doc: &Document,
    index: usize,
    edits: &[Edit],
    blank_after: bool,
) -> Result<Plan, EditError> {
    let mut plan = Plan::default();
    let mut notes: Vec<(NoteKind, String)> = Vec::new();
    let mut subtasks: Vec<(Range<usize>, String)> = Vec::new();
    for edit in edits {
        plan_one(doc, index, edit, &mut notes, &mut plan)?;
        // New subtasks go in after new notes at the same place: kept aside until the notes are.
        if let Edit::InsertSubtasks(_) = edit
            && let Some(splice) = plan.splices.pop()
        {
            subtasks.push(splice);
        }
    }
    if !notes.is_empty() {
        add_notes(doc, index, &notes, blank_after, &mut plan);
    }
    plan.splices.extend(subtasks);
    // A stable sort: at one offset, notes stay before subtasks.
    plan.splices.sort_by_key(|(r, _)| (r.start, r.end));
    Ok(plan)
}

fn plan_one(
    doc: &Document,
    index: usize,
    edit: &Edit,
    notes: &mut Vec<(NoteKind, String)>,
    plan: &mut Plan,
) -> Result<(), EditError> {
    let tasks = doc.tasks();
    let task = &tasks[index];
    let le = doc.line_ending().as_str();
    // A task's state as the edits so far leave it.
    let state_in = |plan: &Plan, i: usize| plan.states.get(&i).copied().unwrap_or(tasks[i].state);
    match edit {
        Edit::SetState(state) => set_state(doc, index, *state, plan),
        Edit::AddResearch(bullets) => {
            let mut lines = Vec::new();
            for bullet in bullets {
                for (k, part) in sanitise(bullet).into_iter().enumerate() {
                    if k == 0 {
                        lines.push(format!("- {part}"));
                    } else {
                        lines.push(part);
                    }
                }
            }
            notes.push((NoteKind::Research, lines.join("\n")));
        }
        Edit::AddAttempt(text) => {
            let kind = NoteKind::Attempt(task.attempts().saturating_add(1));
            notes.push((kind, note_text(text)));
        }
        Edit::AddSkipped(text) => notes.push((NoteKind::Skipped, note_text(text))),
        Edit::AddBlocked(text) => notes.push((NoteKind::Blocked, note_text(text))),
        Edit::AddReview(branch) => {
            notes.push((NoteKind::Review, note_text(&format!("`{branch}`"))));
        }
        Edit::AddOutOfScope(text) => notes.push((NoteKind::OutOfScope, note_text(text))),
        Edit::AddMust(lines) => {
            let lines: Vec<String> = lines
                .iter()
                .map(|l| format!("- {}", note_text(l)))
                .collect();
            notes.push((NoteKind::Must, lines.join("\n")));
        }
        Edit::AddScope(patterns) => notes.push((NoteKind::Scope, note_text(&patterns.join(", ")))),
        Edit::TickCriteria => {
            for c in task.criteria.iter().filter(|c| !c.done) {
                plan.splices.push((c.marker.clone(), "x".to_string()));
            }
            plan.ticked = true;
        }
        Edit::InsertSubtasks(titles) => {
            let titles: Vec<String> = titles.iter().map(|t| normalise(t)).collect();
            if titles.iter().any(String::is_empty) {
                return Err(EditError::InvalidText(
                    "a subtask title is empty — the agent must name every subtask".to_string(),
                ));
            }
            let style = child_style(doc, index);
            let mut bullet = style.bullet;
            let mut block = String::new();
            if style.blank_before {
                block.push_str(le);
            }
            for (k, title) in titles.iter().enumerate() {
                if k > 0 && style.loose {
                    block.push_str(le);
                }
                block.push_str(&format!(
                    "{}{} [ ] {title}{le}",
                    style.indent,
                    bullet.text()
                ));
                bullet = bullet.next();
            }
            insert_lines(doc, item_end(doc, index), &block, plan);
            plan.subtasks.extend(titles);
        }
        Edit::StartParents => {
            for parent in doc.ancestors(index) {
                if state_in(plan, parent) == TaskState::Pending {
                    set_state(doc, parent, TaskState::InProgress, plan);
                }
            }
        }
        Edit::CompleteParents => {
            for parent in doc.ancestors(index) {
                let all_done = tasks[parent].children.iter().all(|&c| {
                    state_in(plan, c) == TaskState::Done || (tasks[c].is_optional() && c != index)
                });
                let state = state_in(plan, parent);
                if !all_done || state == TaskState::Blocked || !tasks[parent].kind.is_kerns() {
                    break;
                }
                if state != TaskState::Done {
                    set_state(doc, parent, TaskState::Done, plan);
                }
            }
        }
        Edit::BlockParents => {
            for parent in doc.ancestors(index) {
                let t = &tasks[parent];
                let open = t
                    .children
                    .iter()
                    .any(|&c| state_in(plan, c).is_unfinished());
                let some_blocked = t
                    .children
                    .iter()
                    .any(|&c| state_in(plan, c) == TaskState::Blocked);
                if open
                    || !some_blocked
                    || !state_in(plan, parent).is_unfinished()
                    || !t.kind.is_kerns()
                {
                    break;
                }
                set_state(doc, parent, TaskState::Blocked, plan);
            }
        }
    }
    Ok(())
}

/// Sets task `index` to `state` (a later state for the same task replaces an earlier one).
fn set_state(doc: &Document, index: usize, state: TaskState, plan: &mut Plan) {
    let task = &doc.tasks()[index];
    plan.states.insert(index, state);
    plan.splices.retain(|(range, _)| *range != task.marker);
    if task.state != state {
        plan.splices
            .push((task.marker.clone(), state.marker_char().to_string()));
    }
}

/// Adds notes in kern's layout, in order, as one block: appended to the task's notes
/// (rewriting blocks in an older shape first), else as a new block after the title paragraph.
fn add_notes(
    doc: &Document,
    index: usize,
    new: &[(NoteKind, String)],
    blank_after: bool,
    plan: &mut Plan,
) {
    let task = &doc.tasks()[index];
    let le = doc.line_ending().as_str();
    let indent = &task.content_indent;
    let source = doc.text();
    // Blocks in another shape are rewritten first; the last block's final line tells whether
    // a separating blank `>` line is still needed.
    let mut ends_blank = false;
    for block in &task.blocks {
        let lines: Vec<&str> = source[block.lines.clone()]
            .split_inclusive('\n')
            .map(|l| l.trim_end_matches(['\n', '\r']))
            .collect();
        let texts: Vec<(NoteKind, &str)> = task.notes[block.notes.clone()]
            .iter()
            .map(|n| (n.kind, n.text.as_str()))
            .collect();
        match notes::rewrite(&lines, &texts, indent, le) {
            Some(replacement) => {
                plan.splices.push((block.lines.clone(), replacement));
                plan.rewrote = true;
                ends_blank = false;
            }
            None => {
                ends_blank = lines
                    .last()
                    .is_some_and(|l| notes::content(l).trim().is_empty());
            }
        }
    }
    let mut contents = Vec::new();
    let at = match task.notes.last() {
        Some(note) => {
            if !ends_blank {
                contents.push(String::new());
            }
            note.range.end
        }
        None => doc.line_end_after(task.title_end.saturating_sub(1).max(task.marker.start)),
    };
    for (k, (kind, text)) in new.iter().enumerate() {
        if k > 0 {
            contents.push(String::new());
        }
        contents.extend(notes::layout(*kind, text));
    }
    let mut block = String::new();
    if task.notes.is_empty() && task.loose {
        block.push_str(le);
    }
    block.push_str(&notes::quote_lines(&contents, indent, le));
    if blank_after {
        block.push_str(le);
    }
    insert_lines(doc, at, &block, plan);
    plan.notes.extend(new.iter().cloned());
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
    /// `N.` or `N)`, and whether the list repeats one number (`1.` `1.` `1.`).
    Number(u64, char, bool),
}

impl Bullet {
    fn text(&self) -> String {
        match self {
            Bullet::Char(c) => c.to_string(),
            Bullet::Number(n, d, _) => format!("{n}{d}"),
        }
    }

    fn next(self) -> Bullet {
        match self {
            Bullet::Number(n, d, false) => Bullet::Number(n.saturating_add(1), d, false),
            other => other,
        }
    }
}

/// How new subtasks are written.
struct ChildStyle {
    indent: String,
    bullet: Bullet,
    /// A blank line before the first one (a new list in a loose item, or a loose list).
    blank_before: bool,
    /// A blank line between them (they continue a loose list).
    loose: bool,
}

/// The style of new subtasks: that of the last existing subtask when it ends the item (so the
/// new ones continue its list), else a new `-` list at the content indentation.
fn child_style(doc: &Document, index: usize) -> ChildStyle {
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
            let number = |at: usize| -> Option<(u64, char)> {
                let rest = &text[at..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                let n = rest[..digits].parse().ok()?;
                Some((n, rest[digits..].chars().next().unwrap_or('.')))
            };
            let bullet = match number(child.item.start) {
                Some((n, delimiter)) => {
                    let siblings = &task.children;
                    let repeats = siblings.len() >= 2
                        && number(tasks[siblings[siblings.len() - 2]].item.start)
                            .is_some_and(|(m, _)| m == n);
                    if repeats {
                        Bullet::Number(n, delimiter, true)
                    } else {
                        Bullet::Number(n.saturating_add(1), delimiter, false)
                    }
                }
                None => Bullet::Char(text[child.item.start..].chars().next().unwrap_or('-')),
            };
            return ChildStyle {
                indent,
                bullet,
                blank_before: child.loose,
                loose: child.loose,
            };
        }
    }
    ChildStyle {
        indent: task.content_indent.clone(),
        bullet: Bullet::Char('-'),
        blank_before: task.loose,
        loose: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "an optional box keeps its star",
                "- [ ]* a\n",
                0,
                Edit::SetState(TaskState::Done),
                "- [x]* a\n",
            ),
            (
                "first note after the title paragraph",
                "- [ ] a\n  more a\n\n  para\n- [ ] b\n",
                0,
                Edit::AddAttempt("it broke".into()),
                "- [ ] a\n  more a\n\n  > **Attempt 1:** it broke\n\n  para\n- [ ] b\n",
            ),
            (
                "front matter stays byte for byte",
                "---\ntags:\n- [ ] meta\n---\n- [ ] a\n",
                0,
                Edit::AddAttempt("it broke".into()),
                "---\ntags:\n- [ ] meta\n---\n- [ ] a\n  > **Attempt 1:** it broke\n",
            ),
            (
                "front matter and a state",
                "---\r\n- [ ] meta\r\n---\r\n- [ ] a\r\n",
                0,
                Edit::SetState(TaskState::Done),
                "---\r\n- [ ] meta\r\n---\r\n- [x] a\r\n",
            ),
            (
                "first note in a tight list",
                "- [ ] a\n  - [ ] s\n- [ ] b\n",
                0,
                Edit::AddAttempt("it broke".into()),
                "- [ ] a\n  > **Attempt 1:** it broke\n  - [ ] s\n- [ ] b\n",
            ),
            (
                "attempt numbers follow the highest, a blank quote line between notes",
                "- [~] a\n  > **Attempt 3:** x\n  - [ ] s\n",
                0,
                Edit::AddAttempt("two\nlines".into()),
                "- [~] a\n  > **Attempt 3:** x\n  >\n  > **Attempt 4:** two\n  > lines\n  - [ ] s\n",
            ),
            (
                "new note after notes that follow subtasks",
                "- [~] a\n  - [ ] s\n  > **Attempt 1:** x\n- [ ] b\n",
                0,
                Edit::AddBlocked("gave up".into()),
                "- [~] a\n  - [ ] s\n  > **Attempt 1:** x\n  >\n  > **Blocked:** gave up\n- [ ] b\n",
            ),
            (
                "research bullets, crlf, nested indentation",
                "- [ ] p\r\n   1. [ ] a\r\n",
                1,
                Edit::AddResearch(vec!["read x".into(), "then\ny".into()]),
                "- [ ] p\r\n   1. [ ] a\r\n      > **Research:**\r\n      >\r\n      > - read x\r\n      > - then\r\n      >   y\r\n",
            ),
            (
                "agent text is escaped where it could open a block, and only there",
                "- [ ] a\n",
                0,
                Edit::AddSkipped(
                    "# big\n- [ ] sneaky\n> **Blocked:** no\n1. one\n`code` first\n(paren) and [link](x)\n**Attempt 9:** no\n```rust\n---\n\t\n"
                        .into(),
                ),
                "- [ ] a\n  > **Skipped:** # big\n  > \\- [ ] sneaky\n  > \\> **Blocked:** no\n  > 1\\. one\n  > `code` first\n  > (paren) and [link](x)\n  > \\**Attempt 9:** no\n  > \\`\\`\\`rust\n  > \\---\n",
            ),
            (
                "research bullets are escaped from their first character",
                "- [ ] a\n",
                0,
                Edit::AddResearch(vec!["# heading".into(), "`src/a.rs` first".into()]),
                "- [ ] a\n  > **Research:**\n  >\n  > - \\# heading\n  > - `src/a.rs` first\n",
            ),
            (
                "empty reason",
                "- [ ] a",
                0,
                Edit::AddBlocked("  ".into()),
                "- [ ] a\n  > **Blocked:**",
            ),
            (
                "loose list: a blank line before a new notes block",
                "- [ ] a\n\n- [ ] b\n",
                0,
                Edit::AddResearch(vec!["x".into()]),
                "- [ ] a\n\n  > **Research:**\n  >\n  > - x\n\n- [ ] b\n",
            ),
            (
                "loose list, last item, no final newline",
                "- [ ] a\n\n- [ ] b",
                1,
                Edit::AddAttempt("x".into()),
                "- [ ] a\n\n- [ ] b\n\n  > **Attempt 1:** x",
            ),
            (
                "a table after the title is kept out of the note",
                "- [ ] a\n  | k | v |\n  |---|---|\n  | 1 | 2 |\n- [ ] b\n",
                0,
                Edit::AddAttempt("x".into()),
                "- [ ] a\n  > **Attempt 1:** x\n\n  | k | v |\n  |---|---|\n  | 1 | 2 |\n- [ ] b\n",
            ),
            (
                "the person's quote after the title is kept out of the note",
                "- [ ] a\n  > my own words\n- [ ] b\n",
                0,
                Edit::AddResearch(vec!["x".into()]),
                "- [ ] a\n  > **Research:**\n  >\n  > - x\n\n  > my own words\n- [ ] b\n",
            ),
            (
                "a lazy line after the person's quote is kept out of the note",
                "1. [ ] a\n   > my own words\nlazy line\n2. [ ] b\n",
                0,
                Edit::AddAttempt("x".into()),
                "1. [ ] a\n   > **Attempt 1:** x\n\n   > my own words\nlazy line\n2. [ ] b\n",
            ),
            (
                "an old-layout block is rewritten before the new note",
                "- [~] a\n  > **Research:**\n  >   - r1\n  >     more\n  > **Attempt 1:** one\n  >   line two\n  - [ ] s\n",
                0,
                Edit::AddAttempt("two".into()),
                "- [~] a\n  > **Research:**\n  >\n  > - r1\n  >   more\n  >\n  > **Attempt 1:** one\n  > line two\n  >\n  > **Attempt 2:** two\n  - [ ] s\n",
            ),
            (
                "a block a formatter nested is rewritten",
                "- [~] a\n  > **Research:**\n  >\n  > - r1\n  >   **Attempt 1:** one\n  >   **Check:** cargo test\n",
                0,
                Edit::AddAttempt("two".into()),
                "- [~] a\n  > **Research:**\n  >\n  > - r1\n  >\n  > **Attempt 1:** one\n  >\n  > **Check:** cargo test\n  >\n  > **Attempt 2:** two\n",
            ),
            (
                "subtasks with default bullet",
                "* [ ] a\n  text\n\n* [ ] b\n",
                0,
                Edit::InsertSubtasks(vec!["one".into(), " two  words ".into()]),
                "* [ ] a\n  text\n\n  - [ ] one\n  - [ ] two words\n\n* [ ] b\n",
            ),
            (
                "subtasks in a tight list",
                "- [ ] a\n  text\n- [ ] b\n",
                0,
                Edit::InsertSubtasks(vec!["one".into()]),
                "- [ ] a\n  text\n  - [ ] one\n- [ ] b\n",
            ),
            (
                "subtasks continue an ordered child list",
                "- [ ] a\n    1) [x] one\n    2) [ ] two\n",
                0,
                Edit::InsertSubtasks(vec!["three".into()]),
                "- [ ] a\n    1) [x] one\n    2) [ ] two\n    3) [ ] three\n",
            ),
            (
                "subtasks keep a list's repeated number",
                "- [ ] a\n  1. [x] one\n  1. [ ] two\n",
                0,
                Edit::InsertSubtasks(vec!["three".into(), "four".into()]),
                "- [ ] a\n  1. [x] one\n  1. [ ] two\n  1. [ ] three\n  1. [ ] four\n",
            ),
            (
                "subtasks continue a loose child list",
                "- [ ] a\n\n  - [x] one\n\n  - [ ] two\n",
                0,
                Edit::InsertSubtasks(vec!["three".into(), "four".into()]),
                "- [ ] a\n\n  - [x] one\n\n  - [ ] two\n\n  - [ ] three\n\n  - [ ] four\n",
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
                "optional subtasks do not hold a parent open",
                "- [~] a\n  - [x] b\n  - [ ]* c\n",
                1,
                Edit::CompleteParents,
                "- [x] a\n  - [x] b\n  - [ ]* c\n",
            ),
            (
                "complete parents stops at a parent held elsewhere",
                "- [-] a\n  - [x] c\n",
                1,
                Edit::CompleteParents,
                "- [-] a\n  - [x] c\n",
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
            let doc = Document::parse(text);
            let got =
                apply(&doc, &doc.identity(*task), edit).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, *expected, "{name}");
        }
    }

    #[test]
    fn the_rewrite_is_reported_once() {
        let doc = Document::parse("- [~] a\n  > **Attempt 1:** one\n  > **Attempt 2:** two\n");
        let id = doc.identity(0);
        let first = apply_edit(&doc, &id, &Edit::AddAttempt("three".into())).unwrap();
        assert!(first.rewrote_notes);
        assert_eq!(
            first.text,
            "- [~] a\n  > **Attempt 1:** one\n  >\n  > **Attempt 2:** two\n  >\n  > **Attempt 3:** three\n"
        );
        let second = apply_edit(&first.document, &id, &Edit::AddAttempt("four".into())).unwrap();
        assert!(!second.rewrote_notes);
        let state = apply_edit(&doc, &id, &Edit::SetState(TaskState::Blocked)).unwrap();
        assert!(!state.rewrote_notes, "only adding a note rewrites");
    }

    #[test]
    fn a_formatter_respelled_title_is_found_again() {
        let before = Document::parse("- [ ] use *fast* path\n- [ ] b\n");
        let id = before.identity(0);
        let after = Document::parse("- [ ] use _fast_ path\n- [ ] b\n");
        assert_eq!(after.find(&id), Some(0));
        let text = apply(&after, &id, &Edit::SetState(TaskState::InProgress)).unwrap();
        assert_eq!(text, "- [~] use _fast_ path\n- [ ] b\n");
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
        assert!(
            new.text().ends_with("  > - use `x`\n  > - \\* star\n"),
            "{}",
            new.text()
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

    /// The tree with a Research note and the Attempt notes of every task, in kern's layout
    /// (`new`) or the old one (no blank `>` lines, `>   - ` bullets).
    fn render_notes(nodes: &[Node], indent: &str, new: bool, out: &mut String) {
        for n in nodes {
            let inner = format!("{indent}  ");
            out.push_str(&format!("{indent}- [{}] {}\n", n.state, n.title.trim()));
            let mut notes: Vec<Vec<String>> = Vec::new();
            let bullets = [
                format!("read {}", n.title.trim()).trim_end().to_string(),
                "then test".to_string(),
            ];
            notes.push(if new {
                let mut r = vec!["**Research:**".to_string(), String::new()];
                r.extend(bullets.iter().map(|b| format!("- {b}")));
                r
            } else {
                let mut r = vec!["**Research:**".to_string()];
                r.extend(bullets.iter().map(|b| format!("  - {b}")));
                r
            });
            for (a, note) in n.notes.iter().enumerate() {
                let head = format!("**Attempt {}:** {}", a + 1, note.trim());
                let mut lines = vec![head.trim_end().to_string()];
                if !note.trim().is_empty() {
                    // (kern writes a second line only after a first one)
                    lines.push(if new { "more" } else { "  more" }.to_string());
                }
                notes.push(lines);
            }
            for (k, lines) in notes.iter().enumerate() {
                if new && k > 0 {
                    out.push_str(&format!("{inner}>\n"));
                }
                for l in lines {
                    if l.is_empty() {
                        out.push_str(&format!("{inner}>\n"));
                    } else {
                        out.push_str(&format!("{inner}> {l}\n"));
                    }
                }
            }
            render_notes(&n.children, &inner, new, out);
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

    /// The edit batches the loop writes (`pipeline::decide`).
    fn batch() -> impl Strategy<Value = Vec<Edit>> {
        prop_oneof![
            prop::collection::vec("[a-z ]{1,20}", 1..3).prop_map(|notes| vec![
                Edit::AddResearch(notes),
                Edit::SetState(TaskState::InProgress),
                Edit::StartParents,
            ]),
            Just(vec![Edit::SetState(TaskState::Done), Edit::CompleteParents]),
            "[a-z ]{1,30}".prop_map(|note| vec![Edit::AddAttempt(note)]),
            "[a-z ]{1,30}".prop_map(|note| vec![
                Edit::AddAttempt(note.clone()),
                Edit::SetState(TaskState::Blocked),
                Edit::AddBlocked(format!("because {note}")),
                Edit::BlockParents,
            ]),
            "[a-z ]{1,30}".prop_map(|note| vec![
                Edit::SetState(TaskState::InProgress),
                Edit::AddAttempt(note),
                Edit::SetState(TaskState::Blocked),
                Edit::AddBlocked("gave up".into()),
                Edit::BlockParents,
            ]),
            "[a-z ]{1,30}"
                .prop_map(|note| vec![Edit::SetState(TaskState::Pending), Edit::AddSkipped(note),]),
            prop::collection::vec("[a-z][a-z ]{0,12}", 1..3)
                .prop_map(|t| vec![Edit::AddResearch(vec!["r".into()]), Edit::InsertSubtasks(t),]),
        ]
    }

    proptest! {
        /// A batch of edits written as one change gives the same file as the edits one by one.
        #[test]
        fn a_batch_is_the_same_as_its_edits_one_by_one(
            tree in prop::collection::vec(node(), 1..5),
            crlf in any::<bool>(),
            top in prop::sample::select(vec!["-", "*", "+", "1."]),
            pick in any::<prop::sample::Index>(),
            edits in batch(),
        ) {
            let le = if crlf { "\r\n" } else { "\n" };
            let mut text = format!("# Spec{le}{le}Intro text.{le}{le}");
            render(&tree, "", top, le, &mut text);
            let doc = Document::parse(&text);
            let task = pick.index(doc.tasks().len());
            let id = doc.identity(task);
            let mut one_by_one = doc.clone();
            let mut sequential = Ok(text.clone());
            for edit in &edits {
                match apply_edit(&one_by_one, &id, edit) {
                    Ok(a) => {
                        sequential = Ok(a.text);
                        one_by_one = a.document;
                    }
                    Err(e) => {
                        sequential = Err(e);
                        break;
                    }
                }
            }
            let batch = apply_edits(&doc, &id, &edits).map(|a| a.text);
            if let Ok(seq) = &sequential {
                prop_assert_eq!(batch.as_ref().ok(), Some(seq), "{}", text);
            }
        }
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

        /// The old layout and kern's read the same; a note added in kern's layout never
        /// rewrites anything, one added to an old block rewrites it once, and the result reads
        /// as before plus the note.
        #[test]
        fn every_note_layout_reads_the_same_and_is_rewritten_once(
            tree in prop::collection::vec(node(), 1..4),
            pick in any::<prop::sample::Index>(),
            note in ".{0,40}",
        ) {
            let (mut old, mut new) = (String::new(), String::new());
            render_notes(&tree, "", false, &mut old);
            render_notes(&tree, "", true, &mut new);
            let (o, n) = (Document::parse(&old), Document::parse(&new));
            type Reading = Vec<(String, Vec<(NoteKind, String)>, String)>;
            let reading = |d: &Document| -> Reading {
                d.tasks()
                    .iter()
                    .map(|t| {
                        let notes = t.notes.iter().map(|x| (x.kind, x.text.clone())).collect();
                        (t.title.clone(), notes, t.free_text.clone())
                    })
                    .collect()
            };
            prop_assert_eq!(reading(&o), reading(&n));
            let index = pick.index(n.tasks().len());
            let id = n.identity(index);
            let edit = Edit::AddAttempt(note);
            let kept = apply_edit(&n, &id, &edit).map_err(|e| TestCaseError::fail(format!("{e}\n{new}")))?;
            prop_assert!(!kept.rewrote_notes, "kern's layout is never rewritten");
            let once = apply_edit(&o, &id, &edit).map_err(|e| TestCaseError::fail(format!("{e}\n{old}")))?;
            prop_assert!(once.rewrote_notes, "the old layout is rewritten");
            prop_assert_eq!(reading(&once.document), reading(&kept.document));
            let again = apply_edit(&once.document, &id, &Edit::AddBlocked("stop".into())).unwrap();
            prop_assert!(!again.rewrote_notes, "and only once");
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
                let c = text.as_bytes()[t.marker.start] as char;
                match t.kind {
                    crate::spec::TaskKind::HeldElsewhere(held) => prop_assert_eq!(c, held),
                    _ => prop_assert!(TaskState::from_marker(c).is_some()),
                }
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
        applied: &Applied,
    ) -> Result<(), TestCaseError> {
        let (new_text, new_doc) = (applied.text.as_str(), &applied.document);
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
                if applied.rewrote_notes {
                    // The task's notes blocks were rewritten in kern's layout: every change lies
                    // inside the item after the box, and the notes read the same.
                    let old_notes: Vec<(NoteKind, &str)> = task
                        .notes
                        .iter()
                        .map(|n| (n.kind, n.text.as_str()))
                        .collect();
                    let new_task = &new_doc.tasks()[new_doc.find(&doc.identity(index)).unwrap()];
                    let new_notes: Vec<(NoteKind, &str)> = new_task
                        .notes
                        .iter()
                        .map(|n| (n.kind, n.text.as_str()))
                        .collect();
                    prop_assert_eq!(&new_notes[..old_notes.len()], &old_notes[..]);
                    prop_assert_eq!(&new_task.free_text, &task.free_text);
                    prop_assert!(!task.blocks.is_empty());
                    prop_assert!(prefix >= task.marker.end, "changed before the box");
                    prop_assert!(
                        text.len() - suffix
                            <= doc
                                .line_end_after(task.item.end.saturating_sub(1))
                                .max(task.item.end),
                        "changed after the item"
                    );
                    return Ok(());
                }
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
                if let Ok(applied) = apply_edit(&doc, &id, &edit) {
                    check_applied(&doc, index, &edit, &applied)
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
#[cfg(test)]
mod criteria_tests {
    use super::*;

    #[test]
    fn notes_go_in_before_a_tasks_criteria_and_its_criteria_are_ticked() {
        let text = "- [ ] Add login\n  Acceptance criteria:\n  - [ ] a user logs in\n  - [x] a wrong password is refused\n- [ ] Next\n";
        let doc = Document::parse(text);
        assert_eq!(doc.tasks().len(), 2);
        assert_eq!(doc.tasks()[0].criteria.len(), 2);
        let id = doc.identity(0);
        let noted = apply(&doc, &id, &Edit::AddAttempt("x".into())).unwrap();
        let doc = Document::parse(&noted);
        assert_eq!(doc.tasks()[0].criteria.len(), 2, "{noted}");
        let ticked = apply(&doc, &id, &Edit::TickCriteria).unwrap();
        assert!(
            ticked.contains("  - [x] a user logs in\n  - [x] a wrong"),
            "{ticked}"
        );
    }
}
