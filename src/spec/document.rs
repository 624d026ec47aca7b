//! The SPEC.md document model: tasks with their exact byte ranges, states, notes and
//! identities, and the queries the loop asks of them (find a task again, its ancestors, its
//! block, the counts).
//!
//! The one decision a reader must know: a task is identified by its title path (the titles of
//! its ancestors and its own), never by its line or index, and found again with the characters
//! formatters re-spell ignored; so a person may move, reorder or reformat tasks under a running
//! kern. The text is parsed into this model by [`crate::spec::parse`].

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, Severity};
use super::dialect::TaskKind;
use super::lines::LineIndex;
pub use super::marker::TaskState;
use super::must::{TestsFirst, TestsNote};
pub use super::notes::NoteKind;

/// The line ending a file uses; kern writes inserted lines with the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    /// `\n`
    Lf,
    /// `\r\n`
    CrLf,
}

impl LineEnding {
    /// The bytes of this line ending.
    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::CrLf => "\r\n",
        }
    }
}

/// One note of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What kind of note.
    pub kind: NoteKind,
    /// The text after the header and on the continuation lines, each line stripped of its `>`
    /// and surrounding blanks, joined with `\n`, the same whatever the note's shape (see
    /// [`crate::spec::notes`]). Research bullets read `- ` (whatever their marker) and the
    /// Research note has no blank lines.
    pub text: String,
    /// 1-based line of the header.
    pub line: usize,
    /// Byte range of the note's whole lines, final line ending included.
    pub range: Range<usize>,
}

/// One acceptance criterion of a task: a checkbox item of a list under an `Acceptance
/// criteria` label or heading, which is the task's, not a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criterion {
    /// Its text after the box, whitespace-normalised.
    pub text: String,
    /// Its box says done (`[x]`).
    pub done: bool,
    /// Byte range of the character inside its box.
    pub marker: std::ops::Range<usize>,
}

/// One task: a list item whose first paragraph starts with a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The state read from the box (pending for a task held elsewhere: see `kind`).
    pub state: TaskState,
    /// kern's own task, an optional one (`[ ]*`), or one another tool holds (`[-]`, `[/]`).
    pub kind: TaskKind,
    /// The 1-based line of the heading that closed this task's section (`## Phase 2 [x]`,
    /// `### Done ✅`): the task is done by the heading, whatever its box says.
    pub closed_by: Option<usize>,
    /// A pending task whose title says it waits (`(deferred)`, `BLOCKED:`, `— SKIPPED`) or
    /// that it is an example (`Example:`, `(example)`): listed by `status`, never taken, nor
    /// its subtasks.
    pub deferred: bool,
    /// The rest of the first line after the box, whitespace-normalised.
    pub title: String,
    /// 1-based line of the box's `[`.
    pub line: usize,
    /// 1-based column (in characters) of the box's `[`.
    pub column: usize,
    /// Byte range of the state character inside the box (always one byte).
    pub marker: Range<usize>,
    /// Byte range of the whole list item, nested content included: from the bullet to the end
    /// of the item as pulldown-cmark reports it (trailing blank lines included).
    pub item: Range<usize>,
    /// Number of task ancestors (0 for a top-level task).
    pub depth: usize,
    /// Index of the nearest enclosing task in [`Document::tasks`].
    pub parent: Option<usize>,
    /// Indices of the tasks whose parent this is, in document order.
    pub children: Vec<usize>,
    /// The task's notes in document order.
    pub notes: Vec<Note>,
    /// The task's acceptance criteria (see `Criterion`).
    pub criteria: Vec<Criterion>,
    /// The person's own text in the item: every line after the first that is neither a note
    /// nor inside a subtask, dedented by the content indentation, blank ends trimmed and runs
    /// of blank lines made one.
    pub free_text: String,
    /// The whitespace that puts a line into this item's content (the bullet replaced by blanks).
    pub content_indent: String,
    /// Byte offset just past the item's first paragraph (the title paragraph), used to insert
    /// the first note.
    pub(crate) title_end: usize,
    /// True when the item's list is loose (its items or their blocks are separated by blank
    /// lines): formatters then separate every block of the item by a blank line, and so does
    /// kern.
    pub(crate) loose: bool,
    /// The task's notes blocks: each block quote holding notes, with the range of its whole
    /// lines and the indices of its notes in `notes`.
    pub(crate) blocks: Vec<NotesBlock>,
}

/// One block quote of a task's item that holds notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotesBlock {
    /// Byte range of its whole lines, the last line's ending included.
    pub(crate) lines: Range<usize>,
    /// Indices into the task's `notes`.
    pub(crate) notes: Range<usize>,
}

impl Task {
    /// The highest `N` of the task's `Attempt N` notes, 0 when there is none.
    pub fn attempts(&self) -> u32 {
        self.notes
            .iter()
            .filter_map(|n| match n.kind {
                NoteKind::Attempt(k) => Some(k),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The latest Research note, if any.
    pub fn research(&self) -> Option<&Note> {
        self.notes
            .iter()
            .rev()
            .find(|n| n.kind == NoteKind::Research)
    }

    /// True when kern may take this task: its own or an optional one, in a section no heading
    /// closed, not deferred by its title. Its state decides the rest.
    pub fn is_takeable(&self) -> bool {
        self.kind.is_kerns() && self.closed_by.is_none() && !self.deferred
    }

    /// The character in the task's box as written: kern's own state, or another tool's
    /// marker (`-`, `/`).
    pub fn state_marker_shown(&self) -> char {
        match self.kind {
            super::TaskKind::HeldElsewhere(c) => c,
            _ => self.state.marker_char(),
        }
    }

    /// True when the title carries spec-kit's `[P]` tag: it may run beside its siblings.
    pub fn is_parallel(&self) -> bool {
        super::dialect::title_is_parallel(&self.title)
    }

    /// True for an optional task (`[ ]*`).
    pub fn is_optional(&self) -> bool {
        self.kind == TaskKind::Optional
    }

    /// The state kern acts on: done for a task whose section a heading closed, else the box's.
    pub fn effective_state(&self) -> TaskState {
        if self.closed_by.is_some() {
            TaskState::Done
        } else {
            self.state
        }
    }

    /// The title as output quotes it (see [`quote_title`]).
    pub fn quoted_title(&self) -> String {
        quote_title(&self.title)
    }

    /// True when the task has a Skipped note.
    pub fn is_skipped(&self) -> bool {
        self.notes.iter().any(|n| n.kind == NoteKind::Skipped)
    }

    /// The branch of the task's last Review note (`--review`), when it has one.
    pub fn review_branch(&self) -> Option<&str> {
        self.notes
            .iter()
            .rev()
            .find(|n| n.kind == NoteKind::Review)
            .map(|n| n.text.trim().trim_matches('`'))
    }

    /// The titles the task's After notes name (one title per note).
    pub fn after(&self) -> Vec<&str> {
        self.notes
            .iter()
            .filter(|n| n.kind == NoteKind::After)
            .map(|n| n.text.trim())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// The text of every Must note of the task, joined (one must-have a line).
    pub fn must_text(&self) -> String {
        self.notes
            .iter()
            .filter(|n| n.kind == NoteKind::Must)
            .map(|n| n.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The paths and globs of the task's Scope notes.
    pub fn scope(&self) -> Vec<String> {
        self.notes
            .iter()
            .filter(|n| n.kind == NoteKind::Scope)
            .flat_map(|n| super::must::scope_patterns(&n.text))
            .collect()
    }

    /// True when the task's Tests note says `read-only`.
    pub fn tests_read_only(&self) -> bool {
        self.notes.iter().any(|n| {
            n.kind == NoteKind::Tests && super::must::tests_note(&n.text) == TestsNote::ReadOnly
        })
    }

    /// The task's (last) `> **Tests:** first [<command>]` note: its command, empty when it
    /// names none (the task's Check is the command then).
    pub fn tests_first(&self) -> Option<String> {
        self.notes
            .iter()
            .rev()
            .filter(|n| n.kind == NoteKind::Tests)
            .find_map(|n| match super::must::tests_note(&n.text) {
                TestsNote::First(command) => Some(command),
                _ => None,
            })
    }

    /// How the task is tested first (`must::tests_first`): `flag` is `--tests-first`,
    /// `fallback` the run's `--check`.
    pub(crate) fn tests_first_command(&self, flag: bool, fallback: Option<&str>) -> TestsFirst {
        super::must::tests_first(
            self.tests_first().as_deref(),
            flag,
            self.check_command(),
            fallback,
        )
    }

    /// The task's Issue note, when it has one (the first).
    pub(crate) fn issue_note(&self) -> Option<&Note> {
        self.notes.iter().find(|n| n.kind == NoteKind::Issue)
    }

    /// The tracker issue the task came from, when its Issue note names one.
    pub(crate) fn issue(&self) -> Option<super::issue::IssueRef> {
        self.issue_note()
            .and_then(|n| super::issue::IssueRef::parse(&n.text))
    }

    /// The command of the task's (last) Check note, if it has a non-empty one.
    pub fn check_command(&self) -> Option<&str> {
        self.notes
            .iter()
            .rev()
            .find(|n| n.kind == NoteKind::Check)
            .map(|n| n.text.as_str())
            .filter(|t| !t.is_empty())
    }
}

/// A title quoted for output so that it shows as written: in backticks, or in double quotes
/// when it holds a backtick itself (`` `run `gh` first` `` would read as two code spans).
pub(crate) fn quote_title(title: &str) -> String {
    Quoted(title).to_string()
}

/// A task title in a message, quoted as [`quote_title`] does: `format!("task {}",
/// Quoted(&title))`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quoted<'a>(pub(crate) &'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.contains('`') {
            write!(f, "\"{}\"", self.0)
        } else {
            write!(f, "`{}`", self.0)
        }
    }
}

/// How kern names a task across edits and runs: the titles from the top-level ancestor down
/// to the task, plus which of several tasks with that same path it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskIdentity {
    /// Ancestor titles, root first, then the task's own title.
    pub path: Vec<String>,
    /// 0 for the first task with this path in document order, 1 for the second, …
    pub occurrence: usize,
}

impl fmt::Display for TaskIdentity {
    /// `A › B`, with ` (#2)` appended for the second task of the same path and so on.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.join(" › "))?;
        if self.occurrence > 0 {
            write!(f, " (#{})", self.occurrence + 1)?;
        }
        Ok(())
    }
}

/// Task counts by state, subtasks included. A task whose section a heading closed counts as
/// done; a task held elsewhere (`[-]`, `[/]`) is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// `[ ]`
    pub pending: usize,
    /// `[~]`
    pub in_progress: usize,
    /// `[x]`
    pub done: usize,
    /// `[!]`
    pub blocked: usize,
}

/// A parsed SPEC.md: its exact text and the tasks found in it.
#[derive(Debug, Clone)]
pub struct Document {
    pub(super) text: String,
    pub(super) lines: LineIndex,
    pub(super) line_ending: LineEnding,
    pub(super) tasks: Vec<Task>,
    pub(super) problems: Vec<Diagnostic>,
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) unlisted: Vec<Diagnostic>,
}

impl Document {
    /// Checks that the bytes are a text file (UTF-8, no NUL byte) and parses them. The error
    /// names the line and column of the first offending byte.
    pub fn from_bytes(bytes: &[u8]) -> Result<Document, Diagnostic> {
        check_text(bytes).map(Document::parse)
    }

    /// The exact text that was parsed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file's line ending: that of its first line, LF for a file without one.
    pub fn line_ending(&self) -> LineEnding {
        self.line_ending
    }

    /// Every task in document order (the order of their boxes); parents precede children and a
    /// task's descendants directly follow it.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// True when a pending task of the file is an example (its title says so, as the ones of
    /// `kern init`'s starter do): with nothing else to take, the file is a starter whose
    /// examples were never replaced.
    pub(crate) fn has_pending_examples(&self) -> bool {
        self.tasks.iter().any(|t| {
            t.state == TaskState::Pending
                && t.closed_by.is_none()
                && super::dialect::title_is_example(&t.title)
        })
    }

    /// Malformed boxes found while parsing (reported by `validate`).
    pub(crate) fn problems(&self) -> &[Diagnostic] {
        &self.problems
    }

    /// Other tools' one-character boxes (`[P]`, `[?]`) found while parsing: warnings.
    pub(crate) fn foreign_boxes(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Lines that look like tasks but are not list items (`[ ] Implement search` as a plain
    /// line), as warnings with their line, column and the fix. The loop names them when it
    /// finds nothing to do; `status` and `-n` warn about them.
    pub fn unlisted_tasks(&self) -> &[Diagnostic] {
        &self.unlisted
    }

    /// The identity of task `task`.
    pub fn identity(&self, task: usize) -> TaskIdentity {
        let mut path: Vec<String> = self
            .ancestors(task)
            .into_iter()
            .rev()
            .map(|a| self.tasks[a].title.clone())
            .collect();
        path.push(self.tasks[task].title.clone());
        let occurrence = (0..task)
            .filter(|&j| self.path_is(j, &path, |a, b| a == b))
            .count();
        TaskIdentity { path, occurrence }
    }

    /// The index of the task with this identity, if it is still there. When no title path
    /// matches exactly, the titles are compared without the characters formatters re-spell
    /// (`*`, `_` and `\\`: prettier writes `*a*` as `_a_`, mdformat escapes), so that a task
    /// is found again after a formatter rewrote SPEC.md.
    pub fn find(&self, id: &TaskIdentity) -> Option<usize> {
        (0..self.tasks.len())
            .filter(|&j| self.path_is(j, &id.path, |a, b| a == b))
            .nth(id.occurrence)
            .or_else(|| {
                let path: Vec<String> = id.path.iter().map(|t| loose_title(t)).collect();
                (0..self.tasks.len())
                    .filter(|&j| self.path_is(j, &path, |a, b| loose_title(a) == *b))
                    .nth(id.occurrence)
            })
    }

    fn path_is(&self, task: usize, path: &[String], same: impl Fn(&str, &String) -> bool) -> bool {
        let mut current = Some(task);
        for title in path.iter().rev() {
            match current {
                Some(i) if same(&self.tasks[i].title, title) => current = self.tasks[i].parent,
                _ => return false,
            }
        }
        current.is_none()
    }

    /// The task's ancestors, nearest (the parent) first, the top-level task last.
    pub fn ancestors(&self, task: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut current = self.tasks[task].parent;
        while let Some(p) = current {
            out.push(p);
            current = self.tasks[p].parent;
        }
        out
    }

    /// The item's source text (bullet, box, title, notes, free text and subtasks, trailing
    /// blank lines left out), as it is handed to the agent.
    pub fn task_block(&self, task: usize) -> &str {
        let item = &self.tasks[task].item;
        self.text[item.clone()].trim_end()
    }

    /// Tasks by state, subtasks included.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for t in self.tasks.iter().filter(|t| t.kind.is_kerns()) {
            match t.effective_state() {
                TaskState::Pending => c.pending += 1,
                TaskState::InProgress => c.in_progress += 1,
                TaskState::Done => c.done += 1,
                TaskState::Blocked => c.blocked += 1,
            }
        }
        c
    }

    /// 1-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.lines.line_of(offset)
    }

    /// Byte offset of the start of the line holding `offset`.
    pub(crate) fn line_start(&self, offset: usize) -> usize {
        self.lines.line_start(offset)
    }

    /// Byte offset just past the line ending of the line holding `offset` (the text's end for
    /// a last line without one).
    pub(crate) fn line_end_after(&self, offset: usize) -> usize {
        self.lines.next_line(offset)
    }
}

/// The bytes as text, or an error at the first byte that is not UTF-8 or is NUL.
pub(crate) fn check_text(bytes: &[u8]) -> Result<&str, Diagnostic> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let (line, column) = position_in(&bytes[..e.valid_up_to()]);
            return Err(Diagnostic {
                severity: Severity::Error,
                line,
                column,
                message: format!("not valid UTF-8 (byte 0x{:02x})", bytes[e.valid_up_to()]),
                fix: "save the file as UTF-8".to_string(),
            });
        }
    };
    if let Some(nul) = text.find('\0') {
        let (line, column) = position_in(&bytes[..nul]);
        return Err(Diagnostic {
            severity: Severity::Error,
            line,
            column,
            message: "contains a NUL byte: this is not a text file".to_string(),
            fix: "point kern at a markdown task list (--spec PATH)".to_string(),
        });
    }
    Ok(text)
}

/// 1-based (line, column in characters) just after `prefix`.
fn position_in(prefix: &[u8]) -> (usize, usize) {
    let line = 1 + prefix.iter().filter(|&&b| b == b'\n').count();
    let start = prefix
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = 1 + String::from_utf8_lossy(&prefix[start..]).chars().count();
    (line, column)
}

/// A title without the characters formatters re-spell, for [`Document::find`].
pub(super) fn loose_title(title: &str) -> String {
    normalise(&title.replace(['*', '_', '\\'], ""))
}

/// Collapses every run of whitespace to one space and trims.
pub(crate) fn normalise(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
