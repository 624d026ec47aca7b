//! SPEC.md: the task list, parsed with source offsets, validated, selected from and edited
//! byte for byte.
//!
//! The one decision a reader must know: kern reads SPEC.md through pulldown-cmark's offsets and
//! writes it only by splicing bytes (a box character, whole inserted lines, and the one
//! rewrite of a task's notes block from an older shape into kern's layout), each edit verified
//! by parsing the result again; it never re-renders anything else.
//!
//! The files, each using only those named before it: `diagnostic` (a finding with
//! `FILE:LINE:COL` and the fix), `issue` (the tracker issue an `Issue` note names), `marker`
//! (kern's own box states), `lines` (a text's line
//! index, shared by the parser and the document), `dialect` (other tools'
//! markers: Kiro, Obsidian Tasks, spec-kit), `notes` (the one reader and writer of kern's note
//! layout), `grep` (how a `grep` must-have reads a file), `must` (the person's
//! must-haves), `document` (the [`Document`] of [`Task`]s and
//! its queries), `parse` (text -> document: the pulldown-cmark walk; `parse/item.rs` reads an
//! item's notes and free text), `after` (the After notes as waits: a ring of them, and what
//! waits on a blocked task), `validate` (errors and warnings), `select` (the next task and
//! why), `plan` (what an edit will splice and must show), `verify` (the re-parse check),
//! `append` (new tasks at the end of the file: `kern import`), `sanitise` (agent text made
//! safe to splice), `edit` (the splices of an edit), `changes` (what changed between two
//! readings, one sentence each) and `file` (reading and atomically writing SPEC.md without
//! losing a concurrent hand edit).

mod after;
mod append;
mod changes;
mod diagnostic;
mod dialect;
mod document;
mod edit;
mod file;
mod grep;
mod issue;
mod lines;
mod marker;
mod must;
mod notes;
mod parse;
mod plan;
mod sanitise;
mod select;
mod validate;
mod verify;

pub(crate) use after::waiting_on_blocked;
pub(crate) use append::NewTask;
pub(crate) use changes::changes;
pub(crate) use diagnostic::{Diagnostic, Severity};
pub(crate) use dialect::{TaskKind, names_criteria};
#[cfg(test)]
use document::LineEnding;
pub use document::{Document, NoteKind, Task, TaskIdentity, TaskState};
pub(crate) use document::{Quoted, quote_title};
pub(crate) use edit::apply_edits;
pub use edit::{Applied, Edit, apply, apply_edit};
pub use file::SpecFile;
pub(crate) use file::Written;
pub(crate) use grep::{compile as compile_grep, grep_file};
pub(crate) use issue::IssueRef;
pub(crate) use must::{
    MustHave, TestsFirst, is_test_path, parse as parse_must, path_looks_like_a_pattern,
    scope_patterns,
};
pub(crate) use notes::error_signature;
pub use select::select;
pub(crate) use select::{SelectOptions, Selection, select_avoiding, select_with, why_not_taken};
pub use validate::validate;
