//! The loop: take the lock, recover what a dead run left, run the iterations, finish with a
//! summary and an exit that says how the run ended.
//!
//! kern, not the agent, decides: it selects the task, writes every marker and note in SPEC.md,
//! and makes every commit. The agents only report (structured output); the pure policy in
//! [`decide`] turns reports into edits. The files: `iteration` (one task as a straight
//! sequence of stages), `decide` (the policy), `audit` (what a stage may not change),
//! `commit` (the journaled commit), `recovery` (after a dead run), `check` (the check gate).
//!
//! Decisions a reader must know:
//! - One [`SpecFile`] is held for the whole run: every read and write of SPEC.md goes through
//!   it, so it can tell the person's edits from its own and fold them in.
//! - "No progress": [`MAX_IDLE_ITERATIONS`] iterations in a row that only skipped tasks end
//!   the run (exit 4) rather than spin through the skipped tasks forever.
//! - The budget stops the run after the stage that crossed it: its result is applied, the next
//!   stage does not start, and the stage files stay for the next run to resume from.

mod audit;
pub mod check;
mod commit;
mod decide;
mod iteration;
mod recovery;

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::prompt::inputs::{StageInputs, model_for};
use crate::reporter::{Reporter, StageLine, Summary};
use crate::settings::Settings;
use crate::spec::{self, Document, Edit, SpecFile, TaskIdentity};
use crate::stage::Report;
use crate::stage::record::{Outcome, TaskRef, WaitKind};
use crate::stage::runner::{self, StageContext, StageRequest, StageRun};
use crate::state::journal::{self, LeftOut, TaskStart};
use crate::state::lock::{Phase, RunLock};
use crate::state::run_log::{IterationEnd, RunEvent, RunLog};
use crate::supervisor::interrupt::Interrupt;
use crate::timestamp::Timestamp;
use crate::workspace::Workspace;

/// Iterations in a row that change nothing (no commit, no SPEC.md change) before a run stops
/// instead of spinning.
pub const MAX_IDLE_ITERATIONS: u32 = 3;

/// A run in progress: its counters and the things every iteration needs.
pub(crate) struct Run<'a> {
    settings: &'a Settings,
    ws: &'a Workspace,
    reporter: &'a Reporter,
    interrupt: &'a Interrupt,
    lock: RunLock,
    log: RunLog,
    spec: SpecFile,
    summary: Summary,
    last_failed: bool,
    started: Instant,
    detached: bool,
    /// Changed files kern left out of its commits: they stay, and never block a start.
    left_out: LeftOut,
}

/// The task an iteration works on.
pub(crate) struct TaskRun {
    title: String,
    identity: TaskIdentity,
    line: usize,
    /// The marker kern last left on the task (a different one now is the person's).
    state: crate::spec::TaskState,
    start: TaskStart,
    /// Changes of SPEC.md during this task's stages that kern did not make.
    hand_edits: Vec<String>,
}

/// Runs the loop in the workspace `ws`. `Ok` is exit 0; the other ends are errors (see
/// `error.rs`).
pub async fn run(
    settings: &Settings,
    ws: &Workspace,
    reporter: &Reporter,
    interrupt: &Interrupt,
) -> Result<()> {
    // Identity, signing key, operation in progress, filter drivers: before any agent runs.
    ws.repo.ensure_ready()?;
    ws.state_dir.create(ws.repo.top())?;
    // Orphans of agents are re-parented to kern, so none can outlive its stage unseen.
    if !crate::supervisor::reaper::become_subreaper() {
        tracing::debug!(
            "cannot become a child subreaper: escaped agent processes may outlive their stage"
        );
    }
    let (lock, takeover) = RunLock::acquire(
        &ws.repo.run_lock_path(),
        &ws.state_dir
            .legacy_lock_dir(ws.repo.top(), &ws.repo.branch_name()?),
        &settings.argv,
    )?;
    // A run looks at the work tree many times: from here on each look costs what changed.
    ws.repo.watch_work_tree();
    let (spec, _) = SpecFile::load_as(&ws.spec_path, &ws.spec_display)?;
    let run_id = format!("{}-{}", std::process::id(), Timestamp::now());
    let mut run = Run {
        settings,
        ws,
        reporter,
        interrupt,
        lock,
        log: RunLog::new(ws.state_dir.run_log(), run_id),
        spec,
        summary: Summary {
            state_dir: ws.state_dir.dir(),
            ..Summary::default()
        },
        last_failed: false,
        started: Instant::now(),
        detached: false,
        left_out: journal::load(&ws.state_dir.left_out()).unwrap_or_default(),
    };
    run.recover(takeover)?;
    if let crate::repository::Head::Detached(oid) = ws.repo.head()? {
        run.reporter.warn(&format!(
            "HEAD is detached at {}: kern's commits will be on no branch — keep them afterwards with `git branch <name> HEAD`",
            crate::reporter::text::short_oid(&oid.to_string())
        ));
        run.detached = true;
    }
    run.log.event(RunEvent::RunStart {
        iterations: settings.iterations,
        delay_s: settings.delay.as_secs(),
        agent: settings.agent.to_string(),
    });
    let result = match run.baseline_check().await {
        Ok(()) => run.iterations().await,
        Err(e) => Err(e),
    };
    run.finish(result)
}

impl Run<'_> {
    async fn iterations(&mut self) -> Result<()> {
        let total = self.settings.iterations;
        let mut idle = 0u32;
        for index in 1..=total {
            if let Some(signal) = self.interrupt.requested() {
                return Err(Error::Interrupted { signal });
            }
            self.summary.iterations = index;
            let end = self.iteration(index, total).await?;
            self.ws.state_dir.clear_iteration_files()?;
            match end {
                IterationEnd::NothingLeft => {
                    self.summary.iterations = index - 1;
                    self.summary.ended = "nothing left to do".into();
                    return Ok(());
                }
                IterationEnd::Skipped => idle += 1,
                IterationEnd::Committed | IterationEnd::Progressed => idle = 0,
            }
            if idle >= MAX_IDLE_ITERATIONS {
                return Err(Error::Unfinished(format!(
                    "{idle} iterations in a row changed nothing (every task left was skipped) — read the Skipped notes in {} and edit the tasks",
                    self.ws.spec_display
                )));
            }
            self.check_budget()?;
            if index < total && !self.settings.delay.is_zero() && self.has_work()? {
                self.lock.set_phase(Phase::Sleeping)?;
                self.reporter.waiting("next iteration", self.settings.delay);
                if self.interrupt.sleep_or_interrupt(self.settings.delay).await {
                    return Err(Error::Interrupted {
                        signal: self.interrupt.requested().unwrap_or(2),
                    });
                }
            }
        }
        self.summary.ended = format!("all {total} iterations ran");
        Ok(())
    }

    /// Runs `--check` once before any agent when the run starts a new task on the commit it
    /// starts from (not when it resumes a task whose work is in the tree): a check that fails
    /// there would fail every task's gate, one paid attempt after another.
    async fn baseline_check(&mut self) -> Result<()> {
        let Some(command) = self.settings.check.clone() else {
            return Ok(());
        };
        if self.settings.check_baseline == crate::cli::CheckBaseline::Skip {
            return Ok(());
        }
        let doc = self.spec.reload()?;
        let Some(selection) = spec::select_with(&doc, &self.settings.select_options()) else {
            return Ok(());
        };
        let resuming = doc.tasks()[selection.task].state != spec::TaskState::Pending
            || doc
                .ancestors(selection.task)
                .iter()
                .any(|&a| doc.tasks()[a].state == spec::TaskState::InProgress);
        if resuming {
            self.reporter.info(&format!(
                "baseline check skipped: a task is in progress, its work is in the tree (`{command}` runs as its gate)"
            ));
            return Ok(());
        }
        self.lock.set_phase(Phase::Check)?;
        self.reporter.info(&format!(
            "baseline check: `{command}` on the starting commit"
        ));
        let result = check::run(
            &command,
            self.ws.repo.top(),
            self.settings.check_timeout,
            &self.ws.state_dir.baseline_log(),
            self.interrupt,
        )
        .await?;
        self.log.event(RunEvent::Check {
            command: command.clone(),
            passed: result == check::CheckResult::Passed,
        });
        match result {
            check::CheckResult::Passed => Ok(()),
            check::CheckResult::Failed(output) => {
                Err(Error::CheckFailsAtBaseline { command, output })
            }
        }
    }

    /// `Err(BudgetSpent)` once the run has cost `--max-cost` or more.
    fn check_budget(&self) -> Result<()> {
        match self.settings.max_cost {
            Some(limit) if self.summary.cost_usd >= limit => Err(Error::BudgetSpent {
                spent: self.summary.cost_usd,
                limit,
            }),
            _ => Ok(()),
        }
    }

    fn has_work(&mut self) -> Result<bool> {
        let doc = self.spec.reload()?;
        Ok(spec::select_with(&doc, &self.settings.select_options()).is_some())
    }

    /// Prints the summary, logs the end, and decides the exit.
    fn finish(mut self, result: Result<()>) -> Result<()> {
        self.summary.elapsed = self.started.elapsed();
        if self.detached && !self.summary.committed.is_empty() {
            let head = self
                .ws
                .repo
                .head_oid()
                .map(|o| o.to_string())
                .unwrap_or_default();
            self.summary.notes.push(format!(
                "kern's commits are on no branch (HEAD is detached) — keep them with `git branch <name> {}`",
                crate::reporter::text::short_oid(&head)
            ));
        }
        let result = result.and_then(|()| {
            let doc = self.spec.reload()?;
            let blocked = doc.counts().blocked;
            if blocked > 0 {
                Err(Error::Unfinished(format!(
                    "{blocked} task{} blocked [!] — read the Blocked note{} in {}, fix, and set the task back to [ ]",
                    if blocked == 1 { " is" } else { "s are" },
                    if blocked == 1 { "" } else { "s" },
                    self.ws.spec_display
                )))
            } else if self.last_failed && spec::select_with(&doc, &self.settings.select_options()).is_some() {
                Err(Error::Unfinished("the last task failed; its Attempt note says why — run kern again to retry".into()))
            } else {
                Ok(())
            }
        });
        if let Err(e) = &result
            && self.summary.ended.is_empty()
        {
            self.summary.ended = e.to_string();
        }
        self.log.event(RunEvent::RunEnd {
            ended: self.summary.ended.clone(),
            cost_usd: self.summary.cost_usd,
            exit_code: result.as_ref().map_or_else(Error::exit_code, |()| 0),
        });
        self.reporter.finish();
        self.reporter.summary(&self.summary);
        result
    }

    /// Applies `edits` to the task (re-read, re-located, verified, atomic) and returns the
    /// document written.
    fn edit(&mut self, task: &TaskIdentity, edits: &[Edit]) -> Result<Document> {
        let written = self.spec.apply_reporting(task, edits)?;
        if written.rewrote_notes {
            self.reporter.info(&format!(
                "rewrote the notes of `{}` in kern's current layout (their words kept; a formatter or an older kern had written them another way)",
                task.path.last().map_or("", String::as_str)
            ));
        }
        Ok(written.document)
    }

    /// Renders the prompt and runs one stage, with the audit after it. `implement_summary` is
    /// what implement said (for the review).
    async fn stage<R: Report>(
        &mut self,
        it: &mut TaskRun,
        implement_summary: Option<&str>,
    ) -> Result<StageRun<R>> {
        let stage = R::STAGE;
        self.check_budget()?;
        let doc = self.spec.reload()?;
        let task = doc.find(&it.identity).ok_or_else(|| Error::SpecEdit {
            path: self.ws.spec_path.clone(),
            message: format!("task `{}` is gone from the file", it.title),
        })?;
        let inputs = StageInputs::gather(
            self.ws,
            self.settings,
            &doc,
            task,
            stage,
            Some(&it.start),
            implement_summary,
        )?;
        let prompt = self.ws.templates.get(stage).render(&inputs.prompt_inputs());
        for cut in &prompt.cuts {
            tracing::debug!(stage = stage.name(), cut = %cut, "prompt input cut to its budget");
        }
        let request = StageRequest {
            model: model_for(self.settings, &self.ws.templates, stage),
            prompt: prompt.text,
            task: TaskRef {
                title: it.title.clone(),
                identity: it.identity.clone(),
                line: it.line,
            },
            attempt: doc.tasks()[task].attempts() + 1,
        };
        let before = self.before_stage(stage, doc)?;
        let ctx = StageContext {
            settings: self.settings,
            state_dir: &self.ws.state_dir,
            cwd: self.ws.repo.top(),
            reporter: self.reporter,
            interrupt: self.interrupt,
        };
        self.log.event(RunEvent::StageStart {
            stage,
            task: it.title.clone(),
            prompt_bytes: request.prompt.len() as u64,
        });
        let mut run = match runner::run_stage::<R>(&ctx, &mut self.lock, &request).await {
            Ok(run) => run,
            Err(e) => {
                self.log.event(RunEvent::StageEnd {
                    stage,
                    outcome: None,
                    cost_usd: 0.0,
                    duration_ms: 0,
                    retries: 0,
                    failure: None,
                    error: Some(e.to_string()),
                });
                return Err(e);
            }
        };
        self.count(&run);
        let found = self.audit(stage, &before, it)?;
        if !found.violations.is_empty() {
            for v in &found.violations {
                self.reporter.warn(&format!("violation: {v}"));
            }
            self.log.event(RunEvent::Violation {
                stage,
                violations: found.violations.clone(),
                reverted: found.reverted.clone(),
                saved: found.saved.clone(),
            });
            run.record.kern.violations = found.violations;
            run.record.kern.reverted = found.reverted;
            if stage.tools().is_read_only() || found.history_moved {
                run.record.kern.outcome = Outcome::Violated;
                let mut note = run.record.kern.violations.join("; ");
                if found.history_moved {
                    note.push_str(&format!(
                        " — what the agent made is kept under `{}`",
                        found.saved.join("`, `")
                    ));
                }
                run.outcome = Err(note);
            }
            run.record.write(&self.ws.state_dir.stage_record(stage))?;
        }
        self.notice_hand_edits(stage, &before.doc, it)?;
        let record = &run.record;
        self.reporter.stage_finished(
            stage,
            &StageLine {
                outcome: outcome_word(&run),
                duration: Duration::from_millis(record.kern.duration_ms),
                cost_usd: run.cost_usd,
                turns: record
                    .agent_result
                    .get("num_turns")
                    .and_then(serde_json::Value::as_u64),
                note: run.outcome.as_ref().err().cloned(),
            },
        );
        self.log.event(RunEvent::StageEnd {
            stage,
            outcome: Some(record.kern.outcome),
            cost_usd: run.cost_usd,
            duration_ms: record.kern.duration_ms,
            retries: record.kern.retries,
            failure: run.outcome.as_ref().err().cloned(),
            error: None,
        });
        Ok(run)
    }

    /// Reports the changes of SPEC.md during the stage that kern did not make, by name.
    fn notice_hand_edits(
        &mut self,
        stage: crate::stage::Stage,
        before: &Document,
        it: &mut TaskRun,
    ) -> Result<()> {
        let after = self.spec.reload()?;
        let changes = audit::hand_edits(before, &after);
        if changes.is_empty() {
            return Ok(());
        }
        self.reporter.warn(&format!(
            "{} changed during the {} stage, not by kern: {}",
            self.ws.spec_display,
            stage.name(),
            changes.join("; ")
        ));
        self.log.event(RunEvent::HandEdit {
            stage,
            changes: changes.clone(),
        });
        it.hand_edits.extend(changes);
        Ok(())
    }

    /// Adds a stage's cost, retries and waits to the run's totals.
    fn count<R>(&mut self, run: &StageRun<R>) {
        self.summary.cost_usd += run.cost_usd;
        self.summary.retries += run.record.kern.retries;
        for wait in run
            .record
            .kern
            .waits
            .iter()
            .filter(|w| w.kind == WaitKind::UsageLimit)
        {
            self.summary.waits += 1;
            self.summary.wait_time += Duration::from_millis(wait.duration_ms);
        }
        self.reporter.cost_so_far(self.summary.cost_usd);
    }
}

/// The word a stage line shows: the report's status or verdict, the number of research notes,
/// else the outcome.
fn outcome_word<R: Report>(run: &StageRun<R>) -> String {
    use crate::stage::StageReport;
    match run.outcome.as_ref().ok().map(|r| r.clone().into()) {
        Some(StageReport::Implement(r)) => r.status.as_str().to_string(),
        Some(StageReport::Review(r)) => format!("{:?}", r.verdict).to_uppercase(),
        Some(StageReport::Research(r)) => format!(
            "{} note{}",
            r.notes.len(),
            if r.notes.len() == 1 { "" } else { "s" }
        ),
        None => serde_json::to_value(run.record.kern.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    }
}
