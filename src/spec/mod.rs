//! SPEC.md: the task list, parsed with source offsets, validated, selected from and edited
//! byte for byte.
//!
//! The one decision a reader must know: kern reads SPEC.md through pulldown-cmark's offsets and
//! writes it only by splicing bytes (a box character, whole inserted lines), each edit verified
//! by parsing the result again; it never re-renders markdown. The files:
//! `parse` (text -> [`Document`] of [`Task`]s), `validate` (errors and warnings with
//! `FILE:LINE:COL`), `select` (the next task and why), `edit` (verified splices) and `file`
//! (reading and atomically writing SPEC.md without losing a concurrent hand edit).

mod edit;
mod file;
mod parse;
mod select;
mod validate;

pub use edit::{Edit, EditError, apply, apply_parsed};
pub use file::SpecFile;
pub use parse::{Counts, Document, LineEnding, Note, NoteKind, Task, TaskIdentity, TaskState};
pub use select::{SelectReason, Selection, select};
pub use validate::{Diagnostic, Severity, validate};
