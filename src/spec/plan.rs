//! What an edit of SPEC.md will do ([`Plan`]): the byte splices, and the change the re-parse
//! must show — `edit` makes a plan, `verify` checks the new text against it.

use std::collections::HashMap;
use std::ops::Range;

use super::document::{NoteKind, TaskState};

/// What an edit will do: the splices and the change the re-parse must show.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// (range of the old text, replacement), sorted, not overlapping.
    pub(super) splices: Vec<(Range<usize>, String)>,
    /// Old task index -> its new state.
    pub(super) states: HashMap<usize, TaskState>,
    /// The notes the target gains, in order, with the text the parser must read back.
    pub(super) notes: Vec<(NoteKind, String)>,
    /// The subtasks the target gains, in order.
    pub(super) subtasks: Vec<String>,
    /// A notes block was rewritten in kern's layout.
    pub(super) rewrote: bool,
    /// The target's acceptance criteria were ticked.
    pub(super) ticked: bool,
}
