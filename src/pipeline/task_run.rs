//! The task an iteration works on ([`TaskRun`]): its title and identity, the marker kern last
//! left on it, how it started, and what the iteration heard of it so far (hand edits, the
//! must-haves kern checked, what the fence denied, its discovery level, implement's approach).
//!
//! The one decision a reader must know: it is the iteration's own record, passed as
//! `&mut TaskRun` to what changes it; the run's owners (the lock, the SPEC.md guard, the
//! ledger, the target) are not in it. Its own file, so the rooms that read a task need not
//! import the loop (`mod.rs`).
//! No unit test here: a record with one constructor; held by every test of the loop
//! (tests/integration/pipeline.rs).

use super::discovery;
use crate::spec::TaskIdentity;
use crate::state::journal::TaskStart;

/// The task an iteration works on.
pub(crate) struct TaskRun {
    pub(super) title: String,
    pub(super) identity: TaskIdentity,
    pub(super) line: usize,
    /// The marker kern last left on the task (a different one now is the person's).
    pub(super) state: crate::spec::TaskState,
    pub(super) start: TaskStart,
    /// Changes of SPEC.md during this task's stages that kern did not make.
    pub(super) hand_edits: Vec<String>,
    /// What kern's own check of the must-haves found (`verify`), for the review.
    pub(super) verified: Vec<String>,
    /// What the fence denied this task's processes (stages, check, must-haves), one sentence
    /// each, for the review.
    pub(super) denied: Vec<String>,
    /// The task's discovery level (`discovery`): how much research it earns.
    pub(super) level: discovery::Level,
    /// What implement said it did in this iteration, when it reported SUCCESS: the approach
    /// a failure after it records (`error_research`).
    pub(super) approach: Option<String>,
    /// The tracker issue the task's Issue note names (`owner/repo#N`), for the events the
    /// tracker hears.
    pub(super) issue: Option<String>,
}

impl TaskRun {
    /// The task `title` (`identity`) at its `(line, marker)` as kern last saw them, started
    /// as `start` says: nothing heard of it yet, at the default discovery level.
    pub(super) fn new(
        title: String,
        identity: TaskIdentity,
        (line, state): (usize, crate::spec::TaskState),
        start: TaskStart,
    ) -> TaskRun {
        TaskRun {
            title,
            identity,
            line,
            state,
            start,
            hand_edits: Vec::new(),
            verified: Vec::new(),
            denied: Vec::new(),
            level: discovery::Level {
                level: 2,
                why: String::new(),
            },
            approach: None,
            issue: None,
        }
    }
}
