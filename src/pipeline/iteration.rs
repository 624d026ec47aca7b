//! One iteration: select the task, find where it resumes, then run what is left of research →
//! implement → check gate → review → commit as a straight sequence. After each stage the pure
//! policy (`decide`) says whether to go on or to end the iteration with which SPEC.md edits.
//!
//! Decisions a reader must know:
//! - SPEC.md is the person's, also mid-stage. Before kern writes its edit, it looks at the file
//!   as it is now: a file that no longer validates is kept exactly as it is, kern's edit is
//!   kept in `edits.json` for the next run, and the run stops (exit 2); a task that is gone or
//!   renamed is followed (never resurrected); a task whose marker the person changed keeps the
//!   person's marker. In the last two cases the task's work is set aside.
//! - kern judges an implement SUCCESS by the work: a task whose files are as they were at its
//!   start needs the report's `no_change_reason` and the review's COMMIT (`decide`).
//! - A task that ends without a commit for good (skipped, blocked, stopped by the person) and
//!   leaves changes has exactly those changes saved under `refs/kern/attempts/<task>/<n>` and
//!   put back to HEAD, so the next task starts on a clean tree and the night goes on. The note
//!   in SPEC.md names the ref.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::pipeline::check;
use crate::pipeline::decide::{self, Attempts, Decision, Next, TaskOutcome};
use crate::pipeline::{Run, Target, TaskRun};
use crate::reporter::voice::NEEDS_PERSON;
use crate::spec::{self, Document, Edit, Quoted, TaskState};
use crate::stage::{ImplementReport, ImplementStatus, ResearchReport, ReviewReport};
use crate::state::journal::{self, PendingEdits, TaskStart};
use crate::state::lock::Phase;
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::state::run_log::{IterationEnd, RunEvent, TaskTaken, Told};

/// What SPEC.md allows kern to do with its task now.
pub(super) enum TaskNow {
    /// The task is there as kern left it: go on.
    Ours,
    /// The task is gone from the file, or renamed.
    Gone,
    /// The person set the task's marker to this.
    SetByPerson(TaskState),
}

impl Run<'_> {
    /// Runs iteration `index` of `total`.
    pub(super) async fn iteration(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        let parses_before = crate::spec::Document::parse_count();
        let reads_before = spec::SpecFile::read_count();
        let end = self.iteration_inner(index, total).await;
        tracing::debug!(
            index,
            spec_reads = spec::SpecFile::read_count() - reads_before,
            spec_parses = crate::spec::Document::parse_count() - parses_before,
            "iteration done"
        );
        end
    }

    async fn iteration_inner(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        self.spec.next_step();
        self.lock.set_phase(Phase::Selecting)?;
        self.finish_pending_commit()?;
        self.apply_pending_edits()?;
        let doc = self.spec.reload()?;
        let lines = self.ws.validate(&doc)?;
        if !lines.is_empty() {
            self.emit(RunEvent::Told(Told::SpecWarnings { lines }));
        }
        let options = self.ws.select_options(self.settings, &doc);
        let selection = match self.target.task() {
            None => spec::select_with(&doc, &options),
            // A parallel task's run takes its own task, when that is still workable.
            Some(task) => doc.find(task).and_then(|target| {
                spec::select_avoiding(&doc, &options, &|i| i != target).filter(|s| s.task == target)
            }),
        };
        let Some(selection) = selection else {
            journal::remove(&self.ws.state_dir.task_start());
            if self.target.task().is_some() {
                return Ok(IterationEnd::NothingLeft);
            }
            let unlisted = doc.unlisted_tasks();
            if !unlisted.is_empty() {
                let lines: Vec<String> = unlisted
                    .iter()
                    .map(|d| d.render(&self.ws.spec_display))
                    .collect();
                self.emit(RunEvent::Told(Told::Unlisted { lines }));
            }
            return Ok(IterationEnd::NothingLeft);
        };
        let task = &doc.tasks()[selection.task];
        let identity = doc.identity(selection.task);
        let files = StageFiles::read(&self.ws.state_dir, &identity);
        for (path, title) in &files.stale {
            self.emit(RunEvent::Told(Told::StaleStageFile {
                file: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                task: title.clone(),
            }));
            journal::remove(path);
        }
        let point = resume::infer(&files, task.research().is_some());
        tracing::debug!(task = %identity, line = task.line, reason = %selection.reason, resume = point.name(), "selected");
        self.reporter.iteration(index, total, &task.title);
        self.emit(RunEvent::Told(Told::TaskSelected {
            task: task.title.clone(),
            spec: self.ws.spec_display.clone(),
            line: task.line,
            why: selection.reason.to_string(),
            next: point.name().to_string(),
        }));
        self.log.event(RunEvent::IterationStart {
            index,
            task: task.title.clone(),
            line: task.line,
            resume: point.name().to_string(),
        });
        let mut it = TaskRun {
            title: task.title.clone(),
            identity: identity.clone(),
            line: task.line,
            state: task.state,
            start: self.task_start(&doc, selection.task)?,
            hand_edits: Vec::new(),
            verified: Vec::new(),
            level: crate::pipeline::discovery::Level {
                level: 2,
                why: String::new(),
            },
            approach: None,
        };
        let top = self.ws.repo.top().to_path_buf();
        it.level = super::discovery::level(
            &doc,
            selection.task,
            &|p| top.join(p).exists(),
            self.settings.level,
        );
        self.emit(RunEvent::Level {
            task: it.title.clone(),
            level: it.level.level,
            why: it.level.why.clone(),
        });
        let end = self.run_task(&mut it, point).await?;
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
            self.remember_persons(&start.excluded);
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
            let own: Vec<&std::path::Path> = own.iter().map(PathBuf::as_path).collect();
            // Files kern left out of a commit (secrets, too large) never block a start; the
            // person's own dirty paths always count, however often kern has left them out.
            let dirty: Vec<PathBuf> = self
                .ws
                .repo
                .dirty_files(&own)?
                .into_iter()
                .filter(|p| !self.left_out.paths.contains(p))
                .collect();
            if !dirty.is_empty() && !self.settings.allow_dirty {
                return Err(Error::DirtyTree {
                    files: dirty
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect(),
                });
            }
            let new: Vec<String> = dirty
                .iter()
                .filter(|p| !self.left_out.persons.contains(p))
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if !new.is_empty() {
                self.emit(RunEvent::Told(Told::PersonsPaths { paths: new }));
            }
            self.remember_persons(&dirty);
            excluded.clone_from(&self.left_out.persons);
        }
        let start = TaskStart {
            identity,
            base_commit: self.ws.repo.head_oid().map(|o| o.to_string()),
            excluded,
            check: doc.tasks()[task].check_command().map(str::to_string),
            must: super::verify::held_at_start(self.ws.repo.top(), &doc.tasks()[task].must_text()),
            tests_read_only: doc.tasks()[task].tests_read_only(),
            scope: doc.tasks()[task].scope(),
        };
        journal::save(&path, &start)?;
        Ok(start)
    }

    /// Adds `paths` to the person's `--allow-dirty` paths of this run.
    fn remember_persons(&mut self, paths: &[PathBuf]) {
        for path in paths {
            if !self.left_out.persons.contains(path) {
                self.left_out.persons.push(path.clone());
            }
        }
    }

    /// The stages that are left, from `point` on.
    async fn run_task(&mut self, it: &mut TaskRun, point: ResumePoint) -> Result<IterationEnd> {
        let (implement, review) = match point {
            ResumePoint::Research if it.level.level == 0 => {
                // Level 0: no research; the task starts as research would have started it.
                self.emit(RunEvent::Told(Told::ResearchSkipped { level_zero: true }));
                let edits = [Edit::SetState(TaskState::InProgress), Edit::StartParents];
                match self.task_now(it, &edits)? {
                    TaskNow::Ours => self.edit_task(it, &edits)?,
                    other => return self.follow_person(it, &other),
                }
                (None, None)
            }
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
                self.emit(RunEvent::Told(Told::ResearchSkipped { level_zero: false }));
                (None, None)
            }
            ResumePoint::Review(implement) => match self.implement_done(it, Ok(implement))? {
                Next::End(decision) => return self.end_task(it, decision),
                Next::Go(report) => (Some(report), None),
            },
            ResumePoint::Commit(implement, review) => (Some(implement), Some(review)),
        };
        let implement = match implement {
            Some(report) => report,
            None => {
                if let Some(end) = self.still_ours(it)? {
                    return Ok(end);
                }
                let run = self.stage::<ImplementReport>(it, None).await?;
                match self.implement_done(it, run.outcome)? {
                    Next::End(decision) => return self.end_task(it, decision),
                    Next::Go(report) => report,
                }
            }
        };
        let review = match review {
            Some(report) => report,
            None => {
                if let Some(end) = self.still_ours(it)? {
                    return Ok(end);
                }
                if let Some(end) = self.check_gate(it).await? {
                    return Ok(end);
                }
                if let Some(end) = self.verify_gate(it).await? {
                    return Ok(end);
                }
                if let Some(end) = self.scope_gate(it)? {
                    return Ok(end);
                }
                if let Some(end) = self.still_ours(it)? {
                    return Ok(end);
                }
                // A parallel task whose message a hook refused at integration: asked for a
                // new message (see commit.rs).
                let refused = self
                    .target
                    .task()
                    .and_then(|_| journal::load(&self.ws.state_dir.refused_message()));
                let run = self
                    .stage_with::<ReviewReport>(it, Some(&implement), refused.as_ref())
                    .await?;
                let attempts = self.attempts(it)?;
                match decide::after_review(run.outcome, &attempts, self.settings.max_attempts) {
                    Next::End(decision) => return self.end_task(it, decision),
                    Next::Go(report) => report,
                }
            }
        };
        match self.target {
            Target::Job(_) => Ok(IterationEnd::Ready),
            Target::Branch(_) | Target::Review { .. } => {
                self.commit_asking_review(it, &implement, review).await
            }
        }
    }

    /// Implement finished (or its report was found on resume): what it means, with kern
    /// judging a SUCCESS by the work — a path that differs from the task's base commit
    /// (`TaskStart::base_commit`; commits an agent made on top of it count), kern's own
    /// files, `--allow-dirty` paths and left-out files aside: what the review's diff shows.
    fn implement_done(
        &mut self,
        it: &mut TaskRun,
        outcome: std::result::Result<ImplementReport, String>,
    ) -> Result<Next<ImplementReport>> {
        let success = matches!(&outcome, Ok(r) if r.status == ImplementStatus::Success);
        let changed = success && {
            let keep = self.untouchable(it);
            let keep: Vec<&std::path::Path> = keep.iter().map(PathBuf::as_path).collect();
            self.ws.repo.changed_since(it.start.base_oid(), &keep)?
        };
        let attempts = self.attempts(it)?;
        let next = decide::after_implement(outcome, changed, &attempts, self.settings.max_attempts);
        if let Next::Go(report) = &next {
            it.approach = Some(report.summary.clone());
        }
        Ok(next)
    }

    /// Research finished: apply the decision; `Some(end)` when the iteration ends here.
    fn research_done(
        &mut self,
        it: &mut TaskRun,
        outcome: std::result::Result<ResearchReport, String>,
    ) -> Result<Option<IterationEnd>> {
        let attempts = self.attempts(it)?;
        let doc = self.spec.reload()?;
        let persons = doc
            .find(&it.identity)
            .map(|t| {
                let task = &doc.tasks()[t];
                decide::Proposals {
                    must: !task.must_text().trim().is_empty(),
                    scope: !task.scope().is_empty(),
                }
            })
            .unwrap_or_default();
        match decide::after_research(outcome, &attempts, self.settings.max_attempts, persons) {
            Next::End(decision) => self.end_task(it, decision).map(Some),
            Next::Go(edits) => match self.task_now(it, &edits)? {
                TaskNow::Ours => {
                    self.edit_task(it, &edits)?;
                    // kern wrote research's proposals as the task's notes: they hold from now
                    // as if the task had started with them.
                    if edits
                        .iter()
                        .any(|e| matches!(e, Edit::AddMust(_) | Edit::AddScope(_)))
                    {
                        let doc = self.spec.reload()?;
                        if let Some(t) = doc.find(&it.identity) {
                            let task = &doc.tasks()[t];
                            it.start.must =
                                super::verify::held_at_start(self.ws.repo.top(), &task.must_text());
                            it.start.scope = task.scope();
                            crate::state::journal::save(
                                &self.ws.state_dir.task_start(),
                                &it.start,
                            )?;
                        }
                    }
                    Ok(None)
                }
                other => self.follow_person(it, &other).map(Some),
            },
        }
    }

    /// Runs the check gate — the task's own Check command as it was when the task started,
    /// else `--check`; `Some(end)` when it failed.
    async fn check_gate(&mut self, it: &mut TaskRun) -> Result<Option<IterationEnd>> {
        let Some(command) = it
            .start
            .check
            .clone()
            .or_else(|| self.settings.check.clone())
        else {
            return Ok(None);
        };
        self.lock.set_phase(Phase::Check)?;
        self.emit(RunEvent::Told(Told::CheckStarted {
            command: command.clone(),
        }));
        let result = check::run(
            &command,
            self.ws.repo.top(),
            self.settings.check_timeout,
            &self.ws.state_dir.check_log(),
            self.interrupt,
        )
        .await?;
        self.spec.next_step();
        crate::pipeline::stage::runner::remake_state_dir(
            &self.ws.state_dir,
            self.reporter,
            "during the check",
        )?;
        self.emit(RunEvent::Check {
            task: Some(it.title.clone()),
            command,
            passed: result == check::CheckResult::Passed,
            output: match &result {
                check::CheckResult::Failed(note) => Some(note.clone()),
                check::CheckResult::Passed => None,
            },
        });
        let attempts = self.attempts(it)?;
        match decide::after_check(result, &attempts, self.settings.max_attempts) {
            Next::End(decision) => self.end_task(it, decision).map(Some),
            Next::Go(()) => Ok(None),
        }
    }

    /// The task's failed attempts as SPEC.md records them now.
    pub(super) fn attempts(&mut self, it: &TaskRun) -> Result<Attempts> {
        let doc = self.spec.reload()?;
        let mut attempts = doc
            .find(&it.identity)
            .map(|t| Attempts::of(&doc.tasks()[t]))
            .unwrap_or_default();
        attempts.approach.clone_from(&it.approach);
        Ok(attempts)
    }

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

    /// What SPEC.md allows now, before kern writes `pending` (kern's edit of the task). A file
    /// that no longer validates is kept as it is: `pending` is journaled for the next run, the
    /// stage files are cleared (the decision is made), and the run stops with exit 2.
    pub(super) fn task_now(&mut self, it: &TaskRun, pending: &[Edit]) -> Result<TaskNow> {
        let doc = self.spec.reload()?;
        if let Err(Error::SpecInvalid { report }) = self.ws.validate(&doc) {
            if !pending.is_empty() {
                journal::save(
                    &self.ws.state_dir.pending_edits(),
                    &PendingEdits {
                        identity: it.identity.clone(),
                        title: it.title.clone(),
                        edits: pending.to_vec(),
                    },
                )?;
                self.ws.state_dir.clear_iteration_files(self.log.run_id())?;
            }
            return Err(Error::SpecInvalid {
                report: format!(
                    "{report}\n{} no longer validates (edited during the run) — kern kept it exactly as it is{}; fix it and run kern again",
                    self.ws.spec_display,
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
        let Some(task) = doc.find(&it.identity) else {
            return Ok(TaskNow::Gone);
        };
        let state = doc.tasks()[task].state;
        if state != it.state && state != TaskState::InProgress {
            return Ok(TaskNow::SetByPerson(state));
        }
        Ok(TaskNow::Ours)
    }

    /// `Some(end)` when the person took the task away since kern last wrote it (kern then
    /// follows), before the next stage starts.
    pub(super) fn still_ours(&mut self, it: &mut TaskRun) -> Result<Option<IterationEnd>> {
        match self.task_now(it, &[])? {
            TaskNow::Ours => Ok(None),
            other => self.follow_person(it, &other).map(Some),
        }
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

    /// Applies kern's `edits` to its task and remembers the marker kern left.
    pub(super) fn edit_task(&mut self, it: &mut TaskRun, edits: &[Edit]) -> Result<()> {
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
    pub(super) fn apply_pending_edits(&mut self) -> Result<()> {
        let path = self.ws.state_dir.pending_edits();
        let Some(pending) = journal::load::<PendingEdits>(&path) else {
            return Ok(());
        };
        let doc = self.spec.reload()?;
        self.ws.validate(&doc).map_err(|e| match e {
            Error::SpecInvalid { report } => Error::SpecInvalid {
                report: format!(
                    "{report}\n{} still does not validate — kern keeps its edit of {} until it does; fix the file and run kern again",
                    self.ws.spec_display, Quoted(&pending.title)
                ),
            },
            other => other,
        })?;
        let applied = doc.find(&pending.identity).is_some();
        if applied {
            self.edit(&pending.identity, &pending.edits)?;
        }
        self.emit(RunEvent::Told(Told::WaitingEdit {
            task: pending.title.clone(),
            spec: self.ws.spec_display.clone(),
            applied,
        }));
        journal::remove(&path);
        Ok(())
    }
}
