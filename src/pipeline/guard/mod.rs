//! The person's file in front of every step ([`SpecGuard`]): is the task still as kern left it
//! (`task_now`: ours, gone, or set by the person), how many attempts SPEC.md records, and
//! kern's own edits of the task; and where a step begins — an iteration's guard
//! ([`SpecGuard::step`]), or the end of an effect that may write the file, run through the
//! guard ([`SpecGuard::after`], [`SpecGuard::after_await`]: a check, a commit's hooks, a
//! put-back of paths) or, where only the shared file is at hand, through the file itself
//! (`SharedSpec::after`, `SharedSpec::after_await`: an agent's stage, the audit's put-backs).
//! The shared view itself is `shared.rs`; nothing outside `guard/` can end a step without an
//! effect.
//!
//! The decision a reader must know: the person's SPEC.md wins, also mid-stage (DESIGN.md
//! section 2). Before kern writes its edit of a task it asks [`ticket`] of the file as it is
//! now; a task the person removed or re-marked is followed, never resurrected. A file that no
//! longer validates is left exactly as it is and kern's edit waits in a journal for the next run.

use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::pipeline::decide::Attempts;
use crate::pipeline::teller::Teller;
use crate::pipeline::{Cx, TaskRun};
use crate::spec::{Document, Edit, Quoted, TaskIdentity, TaskState};
use crate::state::journal::{self, PendingEdits};

mod shared;

pub(crate) use shared::SharedSpec;

/// What SPEC.md allows kern to do with its task now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TaskNow {
    /// The task is there as kern left it: go on, with the ticket kern's edit of it takes.
    Ours(Ticket),
    /// The task is gone from the file, or renamed.
    Gone,
    /// The person set the task's marker to this.
    SetByPerson(TaskState),
}

/// Proof that the person's file was asked at this step and the task is still kern's: kern's
/// edit of its task ([`SpecGuard::edit_task`]) takes one, and only [`ticket`] makes one, so no step
/// can write the task without asking first.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Ticket(());

/// Whether the task `identity`, which kern last left marked `left`, is still kern's in `doc`:
/// gone when no task has its identity; set by the person when its marker is neither the one
/// kern left nor `[~]` (kern's own mark of work under way, which a resumed task may carry).
pub(super) fn ticket(doc: &Document, identity: &TaskIdentity, left: TaskState) -> TaskNow {
    let Some(task) = doc.find(identity) else {
        return TaskNow::Gone;
    };
    let state = doc.tasks()[task].state;
    if state != left && state != TaskState::InProgress {
        return TaskNow::SetByPerson(state);
    }
    TaskNow::Ours(Ticket(()))
}

/// SPEC.md as a task's step sees it: the run's shared file, the workspace that validates it,
/// and the door that tells kern's own rewrites. It borrows them for one step; the loop makes
/// one where it needs one ([`SpecGuard::new`]).
pub(super) struct SpecGuard<'r, 'a> {
    pub(super) cx: Cx<'a>,
    pub(super) spec: &'r SharedSpec,
    pub(super) teller: &'r Teller<'a>,
}

impl<'r, 'a> SpecGuard<'r, 'a> {
    pub(super) fn new(cx: Cx<'a>, spec: &'r SharedSpec, teller: &'r Teller<'a>) -> Self {
        SpecGuard { cx, spec, teller }
    }

    /// The guard of a new step, at an iteration's start: the person may have written SPEC.md
    /// while the run did not look, so its first question reads the file again.
    pub(super) fn step(cx: Cx<'a>, spec: &'r SharedSpec, teller: &'r Teller<'a>) -> Self {
        spec.end_step();
        SpecGuard::new(cx, spec, teller)
    }

    /// Runs `effect`, which may write SPEC.md (a commit's hooks, a put-back of paths), and
    /// begins a new step when it returns.
    pub(super) fn after<T>(&self, effect: impl FnOnce() -> T) -> T {
        self.spec.after(effect)
    }

    /// Awaits `effect`, which may write SPEC.md (a check), and begins a new step when it is
    /// done (the shared file's own [`SharedSpec::after_await`], not wrapped in a future of its
    /// own, which would hold the effect twice).
    pub(super) fn after_await<T>(
        &self,
        effect: impl Future<Output = T>,
    ) -> impl Future<Output = T> {
        self.spec.after_await(effect)
    }

    /// The task's failed attempts as SPEC.md records them now.
    pub(super) fn attempts(&self, it: &TaskRun) -> Result<Attempts> {
        let doc = self.spec.reload()?;
        let mut attempts = doc
            .find(&it.identity)
            .map(|t| Attempts::of(&doc.tasks()[t]))
            .unwrap_or_default();
        attempts.approach.clone_from(&it.approach);
        Ok(attempts)
    }

    /// What SPEC.md allows now, before kern writes `pending` (kern's edit of the task). A file
    /// that no longer validates is kept as it is: `pending` is journaled for the next run, the
    /// stage files are cleared (the decision is made), and the run stops with exit 2.
    pub(super) fn task_now(&self, it: &TaskRun, pending: &[Edit]) -> Result<TaskNow> {
        let doc = self.spec.reload()?;
        if let Err(Error::SpecInvalid { report }) = self.cx.ws.validate(&doc) {
            if !pending.is_empty() {
                journal::save(
                    &self.cx.ws.state_dir.pending_edits(),
                    &PendingEdits {
                        identity: it.identity.clone(),
                        title: it.title.clone(),
                        edits: pending.to_vec(),
                    },
                )?;
                self.cx
                    .ws
                    .state_dir
                    .clear_iteration_files(self.teller.run_id())?;
            }
            return Err(Error::SpecInvalid {
                report: format!(
                    "{report}\n{} no longer validates (edited during the run) — kern kept it exactly as it is{}; fix it and run kern again",
                    self.cx.ws.spec_display,
                    if pending.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " and keeps its own edit of {} for the next run",
                            Quoted(&it.title)
                        )
                    }
                ),
            });
        }
        Ok(ticket(&doc, &it.identity, it.state))
    }

    /// Applies `edits` to the task (re-read, re-located, verified, atomic) and returns the
    /// document written.
    pub(super) fn edit(&self, task: &TaskIdentity, edits: &[Edit]) -> Result<Document> {
        let written = self.spec.apply_reporting(task, edits)?;
        if written.rewrote_notes {
            self.teller.emit(RunEvent::Told(Told::NotesRewritten {
                task: task.path.last().cloned().unwrap_or_default(),
            }));
        }
        Ok(written.document)
    }

    /// Applies kern's `edits` to its task, which `_ticket` says is still kern's, and remembers
    /// the marker kern left.
    pub(super) fn edit_task(
        &self,
        it: &mut TaskRun,
        _ticket: Ticket,
        edits: &[Edit],
    ) -> Result<()> {
        if edits.is_empty() {
            return Ok(());
        }
        let doc = self.edit(&it.identity, edits)?;
        if let Some(task) = doc.find(&it.identity) {
            it.state = doc.tasks()[task].state;
        }
        Ok(())
    }

    /// Applies kern's edits that the person's file could not take in an earlier run.
    pub(super) fn apply_pending_edits(&self) -> Result<()> {
        let path = self.cx.ws.state_dir.pending_edits();
        let Some(pending) = journal::load::<PendingEdits>(&path) else {
            return Ok(());
        };
        let doc = self.spec.reload()?;
        self.cx.ws.validate(&doc).map_err(|e| match e {
            Error::SpecInvalid { report } => Error::SpecInvalid {
                report: format!(
                    "{report}\n{} still does not validate — kern keeps its edit of {} until it does; fix the file and run kern again",
                    self.cx.ws.spec_display, Quoted(&pending.title)
                ),
            },
            other => other,
        })?;
        let applied = doc.find(&pending.identity).is_some();
        if applied {
            self.edit(&pending.identity, &pending.edits)?;
        }
        self.teller.emit(RunEvent::Told(Told::WaitingEdit {
            task: pending.title.clone(),
            spec: self.cx.ws.spec_display.clone(),
            applied,
        }));
        journal::remove(&path);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_is_kerns_until_the_person_removes_renames_or_re_marks_it() {
        let doc = |text: &str| Document::parse(text);
        let before = doc("- [~] Parse dates\n- [ ] Other\n");
        let task = before.identity(0);
        let ticket_in = |text: &str, left| ticket(&doc(text), &task, left);
        // As kern left it, or under way.
        assert_eq!(
            ticket_in("- [~] Parse dates\n", TaskState::InProgress),
            TaskNow::Ours(Ticket(()))
        );
        assert_eq!(
            ticket_in("- [~] Parse dates\n", TaskState::Pending),
            TaskNow::Ours(Ticket(()))
        );
        assert_eq!(
            ticket_in("- [ ] Parse dates\n", TaskState::Pending),
            TaskNow::Ours(Ticket(()))
        );
        // Removed, or renamed.
        assert_eq!(
            ticket_in("- [ ] Other\n", TaskState::InProgress),
            TaskNow::Gone
        );
        assert_eq!(
            ticket_in("- [~] Parse times\n", TaskState::InProgress),
            TaskNow::Gone
        );
        // Re-marked by the person.
        for (text, state) in [
            ("- [x] Parse dates\n", TaskState::Done),
            ("- [ ] Parse dates\n", TaskState::Pending),
            ("- [!] Parse dates\n", TaskState::Blocked),
        ] {
            assert_eq!(
                ticket_in(text, TaskState::InProgress),
                TaskNow::SetByPerson(state),
                "{text}"
            );
        }
    }
}
