//! One iteration: select the task, find where it resumes, then run what is left of research →
//! implement → check gate → review → commit as a straight sequence. After each stage the pure
//! policy (`decide`) says whether to go on or to end the iteration with which SPEC.md edits.

use crate::error::{Error, Result};
use crate::pipeline::check;
use crate::pipeline::decide::{self, Attempts, Decision, Next, TaskOutcome};
use crate::pipeline::{Run, TaskRun};
use crate::spec::{self, Document, TaskState};
use crate::stage::{ImplementReport, ResearchReport, ReviewReport};
use crate::state::journal::{self, TaskStart};
use crate::state::lock::Phase;
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::state::run_log::{IterationEnd, RunEvent};

impl Run<'_> {
    /// Runs iteration `index` of `total`.
    pub(super) async fn iteration(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        self.lock.set_phase(Phase::Selecting)?;
        self.finish_pending_commit()?;
        let doc = self.spec.reload()?;
        for w in self.ws.validate(&doc)? {
            self.reporter.warn(&w);
        }
        let Some(selection) = spec::select(&doc) else {
            journal::remove(&self.ws.state_dir.task_start());
            return Ok(IterationEnd::NothingLeft);
        };
        let task = &doc.tasks()[selection.task];
        let identity = doc.identity(selection.task);
        let files = StageFiles::read(&self.ws.state_dir, &identity);
        for (path, title) in &files.stale {
            self.reporter.info(&format!(
                "ignoring stale `{}`: it belongs to task `{title}`",
                path.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            journal::remove(path);
        }
        let point = resume::infer(&files, task.research().is_some());
        tracing::debug!(task = %identity, line = task.line, reason = %selection.reason, resume = point.name(), "selected");
        self.reporter.iteration(index, total, &task.title);
        self.reporter.info(&format!(
            "task `{}` ({}:{}): {}; next stage: {}",
            task.title,
            self.ws.spec_display,
            task.line,
            selection.reason,
            point.name()
        ));
        self.log.event(RunEvent::IterationStart {
            index,
            task: task.title.clone(),
            line: task.line,
            resume: point.name().to_string(),
        });
        let it = TaskRun {
            title: task.title.clone(),
            identity: identity.clone(),
            line: task.line,
            start: self.task_start(&doc, selection.task)?,
        };
        let end = self.run_task(&it, point).await?;
        self.log.event(RunEvent::IterationEnd {
            index,
            task: it.title.clone(),
            end,
        });
        Ok(end)
    }

    /// The task's start record: reused when it belongs to this task (or the decomposed task
    /// it is part of), else made now — which for a new task enforces the clean-tree rule.
    fn task_start(&mut self, doc: &Document, task: usize) -> Result<TaskStart> {
        let identity = doc.identity(task);
        let path = self.ws.state_dir.task_start();
        if let Some(start) = journal::load::<TaskStart>(&path).filter(|s| s.covers(&identity)) {
            return Ok(start);
        }
        let chain_started = doc
            .ancestors(task)
            .iter()
            .any(|&a| doc.tasks()[a].state == TaskState::InProgress);
        let is_new = doc.tasks()[task].state == TaskState::Pending && !chain_started;
        let mut excluded = Vec::new();
        if is_new {
            let own = self.ws.own_files();
            let own_refs: Vec<&std::path::Path> =
                own.iter().map(std::path::PathBuf::as_path).collect();
            let dirty = self.ws.repo.dirty_paths(&own_refs)?;
            if !dirty.is_empty() {
                if !self.settings.allow_dirty {
                    return Err(Error::DirtyTree { files: dirty });
                }
                self.reporter.warn(&format!(
                    "--allow-dirty: these paths stay out of kern's commits: {}",
                    dirty.join(", ")
                ));
                excluded = dirty.into_iter().map(std::path::PathBuf::from).collect();
            }
        }
        let start = TaskStart {
            identity,
            base_commit: self.ws.repo.head_oid().map(|o| o.to_string()),
            excluded,
        };
        journal::save(&path, &start)?;
        Ok(start)
    }

    /// The stages that are left, from `point` on.
    async fn run_task(&mut self, it: &TaskRun, point: ResumePoint) -> Result<IterationEnd> {
        let (implement, review) = match point {
            ResumePoint::Research => {
                let run = self.stage::<ResearchReport>(it, None).await?;
                if let Some(end) = self.research_done(it, run.outcome)? {
                    return Ok(end);
                }
                (None, None)
            }
            ResumePoint::ApplyResearch(report) => {
                if let Some(end) = self.research_done(it, Ok(report))? {
                    return Ok(end);
                }
                (None, None)
            }
            ResumePoint::Implement => {
                self.reporter
                    .info("research: skipped, the task already has a Research note");
                (None, None)
            }
            ResumePoint::Review(implement) => (Some(implement), None),
            ResumePoint::Commit(implement, review) => (Some(implement), Some(review)),
        };
        let implement = match implement {
            Some(report) => report,
            None => {
                let run = self.stage::<ImplementReport>(it, None).await?;
                let attempts = self.attempts(it)?;
                match decide::after_implement(run.outcome, &attempts, self.settings.max_attempts) {
                    Next::End(decision) => return self.end_task(it, decision),
                    Next::Go(report) => report,
                }
            }
        };
        let review = match review {
            Some(report) => report,
            None => {
                if let Some(end) = self.check_gate(it).await? {
                    return Ok(end);
                }
                let run = self
                    .stage::<ReviewReport>(it, Some(&implement.summary))
                    .await?;
                let attempts = self.attempts(it)?;
                match decide::after_review(run.outcome, &attempts, self.settings.max_attempts) {
                    Next::End(decision) => return self.end_task(it, decision),
                    Next::Go(report) => report,
                }
            }
        };
        self.commit(it, &implement, &review)
    }

    /// Research finished: apply the decision; `Some(end)` when the iteration ends here.
    fn research_done(
        &mut self,
        it: &TaskRun,
        outcome: std::result::Result<ResearchReport, String>,
    ) -> Result<Option<IterationEnd>> {
        let attempts = self.attempts(it)?;
        match decide::after_research(outcome, &attempts, self.settings.max_attempts) {
            Next::End(decision) => self.end_task(it, decision).map(Some),
            Next::Go(edits) => {
                self.edit(&it.identity, &edits)?;
                Ok(None)
            }
        }
    }

    /// Runs the check gate; `Some(end)` when it failed.
    async fn check_gate(&mut self, it: &TaskRun) -> Result<Option<IterationEnd>> {
        let doc = self.spec.reload()?;
        let own = doc
            .find(&it.identity)
            .and_then(|t| doc.tasks()[t].check_command().map(str::to_string));
        let Some(command) = own.or_else(|| self.settings.check.clone()) else {
            return Ok(None);
        };
        self.lock.set_phase(Phase::Check)?;
        self.reporter.info(&format!("check: `{command}`"));
        let result = check::run(
            &command,
            self.ws.repo.top(),
            self.settings.check_timeout,
            &self.ws.state_dir.check_log(),
            self.interrupt,
        )
        .await?;
        self.log.event(RunEvent::Check {
            command,
            passed: result == check::CheckResult::Passed,
        });
        if let check::CheckResult::Failed(note) = &result {
            self.reporter
                .warn(note.lines().next().unwrap_or("check failed"));
        } else {
            self.reporter.info("check passed");
        }
        let attempts = self.attempts(it)?;
        match decide::after_check(result, &attempts, self.settings.max_attempts) {
            Next::End(decision) => self.end_task(it, decision).map(Some),
            Next::Go(_) => Ok(None),
        }
    }

    /// The task's failed attempts as SPEC.md records them now.
    fn attempts(&mut self, it: &TaskRun) -> Result<Attempts> {
        let doc = self.spec.reload()?;
        Ok(doc
            .find(&it.identity)
            .map(|t| Attempts::of(&doc.tasks()[t]))
            .unwrap_or_default())
    }

    /// Ends the iteration as `decision` says: edits, output, summary and log.
    pub(super) fn end_task(&mut self, it: &TaskRun, decision: Decision) -> Result<IterationEnd> {
        self.edit(&it.identity, &decision.edits)?;
        match decision.outcome {
            TaskOutcome::Skipped { .. } => self.summary.skipped.push(it.title.clone()),
            TaskOutcome::Decomposed { subtasks } => {
                self.reporter
                    .info(&format!("decomposed into {} subtasks", subtasks.len()));
                self.log.event(RunEvent::Decomposed {
                    task: it.title.clone(),
                    subtasks,
                });
            }
            TaskOutcome::Failed { attempt, note } => {
                self.summary.failed_attempts += 1;
                self.last_failed = true;
                self.reporter.warn(&format!(
                    "attempt {attempt} of `{}` failed: {}",
                    it.title,
                    note.lines().next().unwrap_or("")
                ));
            }
            TaskOutcome::Blocked { why, .. } => {
                self.summary.failed_attempts += 1;
                self.last_failed = true;
                self.reporter
                    .warn(&format!("blocked `{}`: {why}", it.title));
                self.summary.blocked.push(it.title.clone());
                self.log.event(RunEvent::Blocked {
                    task: it.title.clone(),
                    why,
                });
                journal::remove(&self.ws.state_dir.task_start());
            }
        }
        Ok(decision.end)
    }
}
