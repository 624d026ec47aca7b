//! kern's commit of a task: the work, SPEC.md with the task `[x]`, and LEARNINGS.md, in one
//! commit — journaled so that a crash at any moment commits it exactly once.
//!
//! The order a reader must know: write `commit.json` (the message and HEAD before), mark the
//! task done in SPEC.md, append the learnings, commit, remove `commit.json`. A run that finds
//! `commit.json` at its next iteration finishes the commit when HEAD is still where the
//! journal says, and drops the journal when HEAD moved (the commit landed).
//!
//! The person's SPEC.md wins over the plan: the commit applies the state the file has now — a
//! pending subtask the person added keeps the task open (it is taken next), a task the person
//! set to `[!]`, `[ ]` or `[x]` is not committed (its work is set aside). Changes of SPEC.md
//! kern did not make are named in the commit message, never committed silently as kern's.
//! Nothing to commit (a gitignored SPEC.md, a task that needed no change) ends the task
//! cleanly, without a commit.

use crate::error::{Error, Result};
use crate::pipeline::decide::{self, Attempts};
use crate::pipeline::iteration::TaskNow;
use crate::pipeline::{Run, TaskRun};
use crate::reporter::text;
use crate::repository::CommitRequest;
use crate::spec::{Edit, TaskState};
use crate::stage::{ImplementReport, ReviewReport};
use crate::state::journal::{self, PendingCommit, TaskStart};
use crate::state::lock::Phase;
use crate::state::run_log::{IterationEnd, LeftOutFile, RunEvent};

impl Run<'_> {
    /// COMMIT: mark the task done, append the learnings, commit — journaled.
    pub(super) fn commit(
        &mut self,
        it: &mut TaskRun,
        implement: &ImplementReport,
        review: &ReviewReport,
    ) -> Result<IterationEnd> {
        self.lock.set_phase(Phase::Committing)?;
        let doc = self.spec.reload()?;
        let mut edits = doc
            .find(&it.identity)
            .map(|t| decide::commit_edits(&doc, t))
            .unwrap_or_default();
        if let Some(branch) = self.review_branch()
            && !edits.is_empty()
        {
            edits.push(Edit::AddReview(branch));
        }
        match self.task_now(it, &edits)? {
            TaskNow::Ours => {}
            other => return self.follow_person(it, &other),
        }
        let message = decide::commit_message(review, &it.title, &it.hand_edits);
        let pending = PendingCommit {
            identity: it.identity.clone(),
            title: it.title.clone(),
            message: message.clone(),
            head_before: self.ws.repo.head_oid().map(|o| o.to_string()),
        };
        journal::save(&self.ws.state_dir.pending_commit(), &pending)?;
        if edits.is_empty() {
            self.reporter.info(&format!(
                "`{}` stays open: it has a pending subtask (added by hand), taken next",
                it.title
            ));
        }
        self.edit_task(it, &edits)?;
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
            Err(
                Error::HookFailed { hook, output } | Error::CommitMessageRefused { hook, output },
            ) => {
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
        let reporter = self.reporter;
        // A parallel task's worktree holds copies of SPEC.md and LEARNINGS.md: nobody's work.
        let mut exclude = it.start.excluded.clone();
        exclude.extend(self.ws.copies.iter().cloned());
        let outcome = self.ws.repo.commit(&CommitRequest {
            message,
            exclude: &exclude,
            no_verify: self.settings.no_verify,
            notify: Some(&|text: &str| reporter.warn(text)),
        })?;
        for note in &outcome.notes {
            self.reporter.info(note);
        }
        let mut outcome = outcome;
        outcome.left_out.retain(|l| {
            !self
                .ws
                .copies
                .iter()
                .any(|c| std::path::Path::new(&l.path) == c)
        });
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
        self.remember_left_out(&outcome.left_out)?;
        let Some(sha) = outcome.sha else {
            let why = "nothing changed that kern commits (SPEC.md outside the repository or ignored, and no work)".to_string();
            self.reporter.info(&format!(
                "`{}` is done with nothing to commit: {why}",
                it.title
            ));
            self.summary
                .notes
                .push(format!("`{}` was done without a commit: {why}", it.title));
            self.log.event(RunEvent::NoCommit {
                task: it.title.clone(),
                why,
            });
            return Ok(IterationEnd::Progressed);
        };
        let sha = sha.to_string();
        let short = text::short_oid(&sha).to_string();
        self.reporter.info(&format!(
            "committed {short} {}",
            message.lines().next().unwrap_or("")
        ));
        let review_branch = self.review_branch();
        match &review_branch {
            Some(branch) => self.summary.review.push((it.title.clone(), branch.clone())),
            None => self.summary.committed.push((it.title.clone(), short)),
        }
        self.log.event(RunEvent::Commit {
            task: it.title.clone(),
            sha,
            subject: message.lines().next().unwrap_or("").to_string(),
            left_out,
            review_branch,
        });
        Ok(IterationEnd::Committed)
    }

    /// `--review`: the task branch this run's commit goes to.
    fn review_branch(&self) -> Option<String> {
        self.job.as_ref().and_then(|j| j.review_branch.clone())
    }

    /// Remembers the changed files a commit left out (secrets, too large): they stay in the
    /// tree and never block a start or get set aside.
    fn remember_left_out(&mut self, left_out: &[crate::repository::LeftOut]) -> Result<()> {
        let before = self.left_out.paths.len();
        for l in left_out {
            let path = std::path::PathBuf::from(&l.path);
            if !self.left_out.paths.contains(&path) {
                self.left_out.paths.push(path);
            }
        }
        if self.left_out.paths.len() != before {
            journal::save(&self.ws.state_dir.left_out(), &self.left_out)?;
        }
        Ok(())
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
                check: None,
            });
        let doc = self.spec.reload()?;
        let it = TaskRun {
            title: pending.title.clone(),
            identity: pending.identity.clone(),
            line: 0,
            state: TaskState::InProgress,
            start,
            hand_edits: Vec::new(),
        };
        if let Some(task) = doc.find(&it.identity)
            && doc.tasks()[task].state == TaskState::InProgress
        {
            self.edit(&it.identity, &decide::commit_edits(&doc, task))?;
        }
        self.make_commit(&it, &pending.message)?;
        journal::remove(&path);
        journal::remove(&self.ws.state_dir.task_start());
        self.ws.state_dir.clear_iteration_files()?;
        Ok(())
    }
}
