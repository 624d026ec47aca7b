//! How a task's iteration ends for good: kern's decision applied, or the person followed, and
//! what either does to the work tree.
//!
//! The decision a reader must know: a task that ends without a commit (skipped, blocked, taken
//! away by the person) leaves no work in the tree and loses none: its changed paths are saved
//! under `refs/kern/attempts/<task>/<n>` and exactly those paths put back to HEAD.

use crate::error::Result;
use crate::pipeline::decide::{Decision, TaskOutcome};
use crate::pipeline::guard::TaskNow;
use crate::pipeline::{Run, TaskRun};
use crate::reporter::voice::NEEDS_PERSON;
use crate::spec::{Edit, Quoted};
use crate::state::journal;
use crate::state::lock::Phase;
use crate::state::run_log::{IterationEnd, RunEvent, TaskTaken, Told};

impl Run<'_> {
    /// Ends the iteration as `decision` says: the person's file first, then the task's work
    /// set aside when it ends for good, then the edits, output, summary and log.
    pub(super) fn end_task(
        &mut self,
        it: &mut TaskRun,
        decision: Decision,
    ) -> Result<IterationEnd> {
        match self.task_now(it, &decision.edits)? {
            TaskNow::Ours => {}
            other => return self.follow_person(it, &other),
        }
        let why = match &decision.outcome {
            TaskOutcome::Skipped { .. } => Some("skipped"),
            TaskOutcome::Blocked { .. } | TaskOutcome::NeedsPerson { .. } => Some("blocked"),
            _ => None,
        };
        let mut edits = decision.edits;
        if let Some(why) = why
            && let Some(saved) = self.set_aside(it, why)?
        {
            let where_ = format!(" — its work is saved at `{saved}`");
            for edit in &mut edits {
                if let Edit::AddSkipped(text) | Edit::AddBlocked(text) = edit {
                    text.push_str(&where_);
                }
            }
        }
        self.edit_task(it, &edits)?;
        let task = it.title.clone();
        let blocked = |why| RunEvent::Blocked {
            task: it.title.clone(),
            why,
            line: it.line,
        };
        let ended = match decision.outcome {
            TaskOutcome::Skipped { reason } => vec![RunEvent::Skipped { task, reason }],
            TaskOutcome::Decomposed { subtasks } => vec![RunEvent::Decomposed { task, subtasks }],
            TaskOutcome::Failed { attempt, note } => vec![RunEvent::AttemptFailed {
                task,
                attempt,
                note,
                ends_task: false,
            }],
            TaskOutcome::NeedsPerson { question } => {
                vec![blocked(format!("{NEEDS_PERSON}{question}"))]
            }
            TaskOutcome::Blocked { attempt, note, why } => vec![
                RunEvent::AttemptFailed {
                    task,
                    attempt,
                    note,
                    ends_task: true,
                },
                blocked(why),
            ],
        };
        for event in ended {
            if let RunEvent::Blocked { .. } = &event {
                journal::remove(&self.ws.state_dir.task_start());
            }
            self.emit(event);
        }
        Ok(decision.end)
    }

    /// The person took the task away (removed, renamed, or set its marker): kern follows —
    /// it resurrects nothing and marks nothing in its place — and sets the task's work aside.
    pub(super) fn follow_person(
        &mut self,
        it: &mut TaskRun,
        now: &TaskNow,
    ) -> Result<IterationEnd> {
        let how = match now {
            TaskNow::Gone => TaskTaken::Gone,
            TaskNow::SetByPerson(state) => TaskTaken::SetTo(state.marker_char()),
            TaskNow::Ours => return Ok(IterationEnd::Progressed),
        };
        let saved = self.set_aside(it, "taken away by the person")?;
        self.emit(RunEvent::Told(Told::TaskTaken {
            task: it.title.clone(),
            how,
            saved,
        }));
        journal::remove(&self.ws.state_dir.task_start());
        Ok(IterationEnd::Progressed)
    }

    /// Saves the task's changes under `refs/kern/attempts/<task>/<n>` and puts exactly those
    /// paths back to HEAD; the ref, or `None` when the task left nothing.
    pub(super) fn set_aside(&mut self, it: &TaskRun, why: &str) -> Result<Option<String>> {
        let paths = self.changed_paths(it)?;
        if paths.is_empty() {
            return Ok(None);
        }
        self.lock.set_phase(Phase::Writing)?;
        let slug = crate::text::slug(&it.title);
        let git_ref = self.next_ref(&format!("refs/kern/attempts/{slug}/"))?;
        self.ws.repo.save_paths(
            &git_ref,
            &paths,
            &format!(
                "kern: the work of {}, set aside ({why})\n",
                Quoted(&it.title)
            ),
        )?;
        self.ws.repo.restore_paths(&paths)?;
        self.spec.next_step();
        self.emit(RunEvent::SetAside {
            task: it.title.clone(),
            git_ref: git_ref.clone(),
            paths: paths.iter().map(|p| p.display().to_string()).collect(),
            why: why.to_string(),
        });
        Ok(Some(git_ref))
    }
}
