//! One iteration: select the task, find where it resumes, then run what is left of research →
//! (a task tested first: its tests, red) → implement → check gate (and green) → review →
//! commit as a straight sequence. After each stage the pure
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
//!
//! No unit test here: this file is the shell that runs the sequence; each step's decision is a
//! pure function with its table (`decide.rs`, `resume`, `scope.rs`), and the sequence is held by
//! tests/integration/pipeline.rs, crash.rs and nothing_lost.rs.

use std::path::PathBuf;

use crate::error::Result;
use crate::event::{IterationEnd, RunEvent, Told};
use crate::pipeline::commit::Tried;
use crate::pipeline::decide::{self, MESSAGE_REQUESTS, Next};
use crate::pipeline::guard::{SpecGuard, TaskNow};
use crate::pipeline::stage::inputs::RefusedMessage;
use crate::pipeline::{Run, Target, TaskRun};
use crate::spec::{self, Edit};
use crate::stage::{ImplementReport, ImplementStatus, ResearchReport, ReviewReport, TestsReport};
use crate::state::journal::{self};
use crate::state::lock::{Phase, RunLock};
use crate::state::resume::{self, ResumePoint, StageFiles};

impl Run<'_> {
    /// Runs iteration `index` of `total`.
    pub(super) async fn iteration(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        let parses_before = crate::spec::Document::parse_count();
        let reads_before = spec::SpecFile::read_count();
        let looks_before = crate::repository::StatusCounts::now();
        let end = self.iteration_inner(index, total).await;
        let looks = crate::repository::StatusCounts::now().since(looks_before);
        tracing::debug!(
            index,
            spec_reads = spec::SpecFile::read_count() - reads_before,
            spec_parses = crate::spec::Document::parse_count() - parses_before,
            status_looks = looks.looks,
            status_walks = looks.walks,
            status_asks = looks.asks,
            "iteration done"
        );
        end
    }

    async fn iteration_inner(&mut self, index: u32, total: u32) -> Result<IterationEnd> {
        let guard = SpecGuard::step(self.cx, &self.spec, &self.teller);
        self.lock.set_phase(Phase::Selecting)?;
        crate::pipeline::commit::finish_pending_commit(
            &guard,
            &mut self.lock,
            &mut self.left_out,
            &mut self.target,
        )?;
        guard.apply_pending_edits()?;
        let doc = self.spec.reload()?;
        let lines = self.cx.ws.validate(&doc)?;
        if !lines.is_empty() {
            self.teller
                .emit(RunEvent::Told(Told::SpecWarnings { lines }));
        }
        let options = self.cx.ws.select_options(self.cx.settings, &doc);
        let selection = match self.target.task() {
            None => spec::select_with(&doc, &options),
            // A parallel task's run takes its own task, when that is still workable.
            Some(task) => doc.find(task).and_then(|target| {
                spec::select_avoiding(&doc, &options, &|i| i != target).filter(|s| s.task == target)
            }),
        };
        let Some(selection) = selection else {
            journal::remove(&self.cx.ws.state_dir.task_start());
            if self.target.task().is_some() {
                return Ok(IterationEnd::NothingLeft);
            }
            let unlisted = doc.unlisted_tasks();
            if !unlisted.is_empty() {
                let lines: Vec<String> = unlisted
                    .iter()
                    .map(|d| d.render(&self.cx.ws.spec_display))
                    .collect();
                self.teller.emit(RunEvent::Told(Told::Unlisted { lines }));
            }
            return Ok(IterationEnd::NothingLeft);
        };
        let task = &doc.tasks()[selection.task];
        let identity = doc.identity(selection.task);
        let files = StageFiles::read(&self.cx.ws.state_dir, &identity);
        for (path, title) in &files.stale {
            self.teller.emit(RunEvent::Told(Told::StaleStageFile {
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
        let issue = task.issue().map(|i| i.to_string());
        self.teller.emit(RunEvent::IterationStart {
            index,
            of: total,
            task: task.title.clone(),
            line: task.line,
            resume: point.name().to_string(),
            issue: issue.clone(),
        });
        self.teller.emit(RunEvent::Told(Told::TaskSelected {
            task: task.title.clone(),
            spec: self.cx.ws.spec_display.clone(),
            line: task.line,
            why: selection.reason.to_string(),
            next: point.name().to_string(),
            issue: issue.clone(),
        }));
        let mut it = TaskRun::new(
            task.title.clone(),
            identity.clone(),
            (task.line, task.state),
            super::start::task_start(
                self.cx,
                &self.teller,
                &mut self.left_out,
                &doc,
                selection.task,
            )?,
        );
        it.issue = issue;
        let top = self.cx.ws.repo.top().to_path_buf();
        it.level = super::discovery::level(
            &doc,
            selection.task,
            &|p| top.join(p).exists(),
            self.cx.settings.level,
        );
        self.teller.emit(RunEvent::Level {
            task: it.title.clone(),
            level: it.level.level,
            why: it.level.why.clone(),
        });
        let end = self.run_task(&mut it, point).await?;
        self.teller.emit(RunEvent::IterationEnd {
            index,
            task: it.title.clone(),
            end,
        });
        Ok(end)
    }

    /// The stages that are left, from `point` on.
    async fn run_task(&mut self, it: &mut TaskRun, point: ResumePoint) -> Result<IterationEnd> {
        let (implement, review) = match point {
            ResumePoint::Research
                // (Whether research runs does not depend on the tests step.)
                if !super::stage::plan::stages_left(Some(&point), it.level.level, false)
                    .contains(&crate::stage::Stage::Research) =>
            {
                // Level 0: no research; the task starts as research would have started it.
                self.teller
                    .emit(RunEvent::Told(Told::ResearchSkipped { level_zero: true }));
                let edits = super::stage::plan::start_without_research();
                match self.guard().task_now(it, &edits)? {
                    TaskNow::Ours(ticket) => self.guard().edit_task(it, ticket, &edits)?,
                    other => return self.follow_person(it, &other),
                }
                (None, None)
            }
            ResumePoint::Research => {
                let run = self.stage::<ResearchReport>(it, None).await?;
                if let Some(end) = research_done(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it, run.outcome)? {
                    return Ok(end);
                }
                (None, None)
            }
            ResumePoint::ApplyResearch(report) => {
                if let Some(end) = research_done(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it, Ok(report))? {
                    return Ok(end);
                }
                (None, None)
            }
            ResumePoint::Implement => {
                self.teller
                    .emit(RunEvent::Told(Told::ResearchSkipped { level_zero: false }));
                (None, None)
            }
            ResumePoint::Review(implement) => match implement_done(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &self.left_out.paths,
                it, Ok(implement))? {
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
                // A task tested first: its tests, red on the base commit, before implement.
                if let Some(end) = self.tests_step(it).await? {
                    return Ok(end);
                }
                let run = self.stage::<ImplementReport>(it, None).await?;
                match implement_done(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &self.left_out.paths,
                    it,
                    run.outcome,
                )? {
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
                if let Some(end) = super::tests_first::tests_held(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it,
                )? {
                    return Ok(end);
                }
                if let Some(end) = super::check::check_gate(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it,
                )
                .await?
                {
                    return Ok(end);
                }
                if let Some(end) = super::tests_first::green_gate(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it,
                )
                .await?
                {
                    return Ok(end);
                }
                if let Some(end) = super::verify::verify_gate(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it,
                )
                .await?
                {
                    return Ok(end);
                }
                if let Some(end) = super::scope::scope_gate(
                    &SpecGuard::new(self.cx, &self.spec, &self.teller),
                    &mut self.lock,
                    &self.left_out.paths,
                    it,
                )? {
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
                    .and_then(|_| journal::load(&self.cx.ws.state_dir.refused_message()));
                let run = self
                    .stage_with::<ReviewReport>(it, Some(&implement), refused.as_ref())
                    .await?;
                let attempts = self.guard().attempts(it)?;
                match decide::after_review(run.outcome, &attempts, self.cx.settings.max_attempts) {
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

    /// Before implement: for a task tested first whose tests were not seen red yet, the tests
    /// step, then the red check (see the module docs); `Some` when the iteration ended.
    pub(super) async fn tests_step(&mut self, it: &mut TaskRun) -> Result<Option<IterationEnd>> {
        let Some(command) = it.start.tests_first.clone() else {
            return Ok(None);
        };
        if it.start.red_of(&it.identity).is_some() {
            return Ok(None);
        }
        let attempts = self.guard().attempts(it)?;
        if decide::decomposition_due(&attempts, self.cx.settings.max_attempts) {
            return Ok(None);
        }
        // A run that stopped after the tests step goes on from its record.
        let outcome = match StageFiles::read(&self.cx.ws.state_dir, &it.identity).tests {
            Some(report) => Ok(report),
            None => {
                if let Some(end) = self.still_ours(it)? {
                    return Ok(Some(end));
                }
                self.stage::<TestsReport>(it, None).await?.outcome
            }
        };
        super::tests_first::red_check(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.lock,
            &self.left_out.paths,
            it,
            command,
            outcome,
        )
        .await
    }

    /// COMMIT: mark the task done, append the learnings, commit — journaled; a refused
    /// message goes back to the review for a new one (see the module docs).
    pub(in crate::pipeline) async fn commit_asking_review(
        &mut self,
        it: &mut TaskRun,
        implement: &ImplementReport,
        review: ReviewReport,
    ) -> Result<IterationEnd> {
        let mut review = review;
        let mut refusals = 0u32;
        loop {
            let (hook, output, message) = match super::commit::try_commit(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.lock,
                &mut self.left_out,
                &mut self.target,
                it,
                implement,
                &review,
            )? {
                Tried::Ended(end) => return Ok(end),
                Tried::HookFailed { hook, output } => {
                    return super::commit::refused(
                        &SpecGuard::new(self.cx, &self.spec, &self.teller),
                        &mut self.lock,
                        &self.left_out.paths,
                        it,
                        &hook,
                        &output,
                    );
                }
                Tried::MessageRefused {
                    hook,
                    output,
                    message,
                } => (hook, output, message),
            };
            refusals += 1;
            if let Some(end) = super::commit::refused_too_often(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.lock,
                &self.left_out.paths,
                it,
                &hook,
                &output,
                refusals,
            )? {
                return Ok(end);
            }
            self.teller.emit(RunEvent::Told(Told::MessageRefused {
                hook: hook.clone(),
                subject: message.lines().next().unwrap_or("").to_string(),
                refusals,
                of: MESSAGE_REQUESTS,
                on_branch: false,
            }));
            if let Some(end) = self.still_ours(it)? {
                return Ok(end);
            }
            let refused = RefusedMessage {
                hook,
                output,
                message,
                request: refusals,
                requests: MESSAGE_REQUESTS,
            };
            let run = self
                .stage_with::<ReviewReport>(it, Some(implement), Some(&refused))
                .await?;
            let attempts = self.guard().attempts(it)?;
            match decide::after_message_review(
                run.outcome,
                &review,
                &attempts,
                self.cx.settings.max_attempts,
            ) {
                Next::End(decision) => return self.end_task(it, decision),
                Next::Go(report) => review = report,
            }
        }
    }
}

/// Implement finished (or its report was found on resume): what it means, with kern
/// judging a SUCCESS by the work — a path that differs from the task's base commit
/// (`TaskStart::base_commit`; commits an agent made on top of it count), kern's own
/// files, `--allow-dirty` paths and left-out files aside: what the review's diff shows.
fn implement_done(
    guard: &SpecGuard<'_, '_>,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    outcome: std::result::Result<ImplementReport, String>,
) -> Result<Next<ImplementReport>> {
    let success = matches!(&outcome, Ok(r) if r.status == ImplementStatus::Success);
    let changed = success && {
        let keep = super::audit::untouchable(guard.cx.ws, &it.start.excluded, left_out);
        let keep: Vec<&std::path::Path> = keep.iter().map(PathBuf::as_path).collect();
        guard.cx.ws.repo.changed_since(it.start.base_oid(), &keep)?
    };
    let attempts = guard.attempts(it)?;
    let next = decide::after_implement(outcome, changed, &attempts, guard.cx.settings.max_attempts);
    if let Next::Go(report) = &next {
        it.approach = Some(report.summary.clone());
    }
    Ok(next)
}

/// Research finished: apply the decision; `Some(end)` when the iteration ends here.
fn research_done(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    outcome: std::result::Result<ResearchReport, String>,
) -> Result<Option<IterationEnd>> {
    let attempts = guard.attempts(it)?;
    let doc = guard.spec.reload()?;
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
    match decide::after_research(outcome, &attempts, guard.cx.settings.max_attempts, persons) {
        Next::End(decision) => super::end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(edits) => match guard.task_now(it, &edits)? {
            TaskNow::Ours(ticket) => {
                guard.edit_task(it, ticket, &edits)?;
                // kern wrote research's proposals as the task's notes: they hold from now
                // as if the task had started with them.
                if edits
                    .iter()
                    .any(|e| matches!(e, Edit::AddMust(_) | Edit::AddScope(_)))
                {
                    let doc = guard.spec.reload()?;
                    if let Some(t) = doc.find(&it.identity) {
                        let task = &doc.tasks()[t];
                        it.start.must =
                            super::verify::held_at_start(guard.cx.ws.repo.top(), &task.must_text());
                        it.start.scope = task.scope();
                        crate::state::journal::save(
                            &guard.cx.ws.state_dir.task_start(),
                            &it.start,
                        )?;
                    }
                }
                Ok(None)
            }
            other => super::end::follow_person(guard, lock, left_out, it, &other).map(Some),
        },
    }
}
