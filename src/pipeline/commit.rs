//! kern's commit of a task: the work, SPEC.md with the task `[x]`, and LEARNINGS.md, in one
//! commit — journaled so that a crash at any moment commits it exactly once.
//!
//! The order a reader must know: write `commit.json` (the message and HEAD before), mark the
//! task done in SPEC.md, append the learnings, commit, remove `commit.json`. A run that finds
//! `commit.json` at its next iteration finishes the commit when HEAD is still where the
//! journal says, and drops the journal when HEAD moved (the commit landed).

use crate::error::{Error, Result};
use crate::pipeline::decide::{self, Attempts};
use crate::pipeline::{Run, TaskRun};
use crate::reporter::text;
use crate::repository::CommitRequest;
use crate::spec::TaskState;
use crate::stage::{ImplementReport, ReviewReport};
use crate::state::journal::{self, PendingCommit, TaskStart};
use crate::state::lock::Phase;
use crate::state::run_log::{IterationEnd, LeftOutFile, RunEvent};

impl Run<'_> {
    /// COMMIT: mark the task done, append the learnings, commit — journaled.
    pub(super) fn commit(
        &mut self,
        it: &TaskRun,
        implement: &ImplementReport,
        review: &ReviewReport,
    ) -> Result<IterationEnd> {
        self.lock.set_phase(Phase::Committing)?;
        let message = decide::commit_message(review, &it.title);
        let pending = PendingCommit {
            identity: it.identity.clone(),
            title: it.title.clone(),
            message: message.clone(),
            head_before: self.ws.repo.head_oid().map(|o| o.to_string()),
        };
        journal::save(&self.ws.state_dir.pending_commit(), &pending)?;
        self.edit(&it.identity, &decide::commit_edits())?;
        let learned: Vec<String> = implement
            .learnings
            .iter()
            .chain(review.learnings.iter())
            .cloned()
            .collect();
        let date = chrono::Local::now().format("%Y-%m-%d").to_string();
        let learnings_before =
            crate::learnings::append(&self.ws.learnings_path, &date, &it.title, &learned)?;
        match self.make_commit(it, &message) {
            Ok(end) => {
                journal::remove(&self.ws.state_dir.pending_commit());
                journal::remove(&self.ws.state_dir.task_start());
                self.last_failed = false;
                Ok(end)
            }
            Err(Error::HookFailed { hook, output }) => {
                journal::remove(&self.ws.state_dir.pending_commit());
                if let Some(before) = learnings_before {
                    crate::atomic_file::write(&self.ws.learnings_path, before.as_bytes())?;
                }
                let doc = self.spec.reload()?;
                let attempts = doc
                    .find(&it.identity)
                    .map(|t| Attempts::of(&doc.tasks()[t]))
                    .unwrap_or_default();
                let decision = decide::after_refused_commit(
                    &hook,
                    &output,
                    &attempts,
                    self.settings.max_attempts,
                );
                self.end_task(it, decision)
            }
            Err(e) => Err(e),
        }
    }

    /// Commits the work tree as it is, with `message`; logs and reports the commit.
    fn make_commit(&mut self, it: &TaskRun, message: &str) -> Result<IterationEnd> {
        let outcome = self.ws.repo.commit(&CommitRequest {
            message,
            exclude: &it.start.excluded,
            no_verify: self.settings.no_verify,
        })?;
        for left in &outcome.left_out {
            self.reporter.warn(&format!(
                "left out of the commit: `{}` ({})",
                left.path, left.reason
            ));
        }
        let left_out: Vec<LeftOutFile> = outcome
            .left_out
            .iter()
            .map(|l| LeftOutFile {
                path: l.path.clone(),
                reason: l.reason.clone(),
            })
            .collect();
        let Some(sha) = outcome.sha else {
            return Err(Error::Internal(
                "the commit holds no change, not even SPEC.md".into(),
            ));
        };
        let sha = sha.to_string();
        let short = text::short_oid(&sha).to_string();
        self.reporter.info(&format!(
            "committed {short} {}",
            message.lines().next().unwrap_or("")
        ));
        self.summary.committed.push((it.title.clone(), short));
        self.log.event(RunEvent::Commit {
            task: it.title.clone(),
            sha,
            left_out,
        });
        Ok(IterationEnd::Committed)
    }

    /// A crash between marking the task done and committing: finish the commit, exactly once.
    pub(super) fn finish_pending_commit(&mut self) -> Result<()> {
        let path = self.ws.state_dir.pending_commit();
        let Some(pending) = journal::load::<PendingCommit>(&path) else {
            return Ok(());
        };
        let head = self.ws.repo.head_oid().map(|o| o.to_string());
        if head != pending.head_before {
            journal::remove(&path);
            return Ok(());
        }
        // The lock must say so: a kill inside this commit can leave `.git/index.lock`, which
        // the next run removes only when the dead run's phase was `committing`.
        self.lock.set_phase(Phase::Committing)?;
        self.reporter.info(&format!(
            "finishing the commit of `{}` that the last run could not make",
            pending.title
        ));
        let start = journal::load::<TaskStart>(&self.ws.state_dir.task_start())
            .filter(|s| s.covers(&pending.identity))
            .unwrap_or(TaskStart {
                identity: pending.identity.clone(),
                base_commit: None,
                excluded: Vec::new(),
            });
        let it = TaskRun {
            title: pending.title.clone(),
            identity: pending.identity.clone(),
            line: 0,
            start,
        };
        let doc = self.spec.reload()?;
        if let Some(task) = doc.find(&it.identity)
            && doc.tasks()[task].state != TaskState::Done
        {
            self.edit(&it.identity, &decide::commit_edits())?;
        }
        self.make_commit(&it, &pending.message)?;
        journal::remove(&path);
        journal::remove(&self.ws.state_dir.task_start());
        self.ws.state_dir.clear_iteration_files()?;
        Ok(())
    }
}
