//! SPEC.md: the task list, parsed with source offsets, validated, selected from and edited
//! byte for byte.
//!
//! The one decision a reader must know: kern reads SPEC.md through pulldown-cmark's offsets and
//! writes it only by splicing bytes (a box character, whole inserted lines, and the one
//! rewrite of a task's notes block from an older shape into kern's layout), each edit verified
//! by parsing the result again; it never re-renders anything else. The files: `parse` (text ->
//! [`Document`] of [`Task`]s), `dialect` (other tools' markers: Kiro, Obsidian Tasks,
//! spec-kit), `notes` (the one reader and writer of kern's note layout), `validate` (errors and
//! warnings with `FILE:LINE:COL`), `select` (the next task and why), `edit` (verified splices)
//! and `file` (reading and atomically writing SPEC.md without losing a concurrent hand edit).

mod dialect;
mod edit;
mod file;
mod notes;
mod parse;
mod select;
mod validate;

pub use dialect::TaskKind;
pub use edit::{Applied, Edit, EditError, apply, apply_edit, apply_parsed};
pub use file::{SpecFile, Written};
pub use parse::{
    Counts, Document, LineEnding, Note, NoteKind, Task, TaskIdentity, TaskState, quote_title,
};
pub use select::{SelectOptions, SelectReason, Selection, select, select_avoiding, select_with};
pub use validate::{Diagnostic, Severity, validate};
