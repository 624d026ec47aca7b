//! One stage of a task, as the loop runs it: the prompt rendered from what the task has now,
//! the agent run through the stage runner (retries, waits, a move to the fallback agent), the
//! audit of what the stage changed, the changes of SPEC.md that were not kern's, and the
//! stage's line and `run.jsonl` events.
//!
//! The one decision a reader must know: the audit runs after every stage, whatever its
//! outcome, and a read-only stage or one that moved history cannot succeed, whatever its
//! report says. The stage's record is written once, with the audit's findings in it
//! ([`runner::StageRun::write`]).
//!
//! Children: `plan.rs` is the stage's plan (agents, prompt, budget — the one the dry run
//! prints), `inputs.rs` gathers what the stage sees for it, `runner.rs`
//! runs it to a decision (retry, wait, switch agents, give up), `attempt.rs` is one try.
//!
//! No unit test here: a stage spawns an agent; its plan is `plan`'s and its inputs `inputs`'
//! (tested there); held by tests/integration/pipeline.rs and stage_plan.rs.

pub(crate) mod attempt;
pub(crate) mod inputs;
pub(crate) mod plan;
pub(crate) mod runner;

use crate::error::{Error, Result};
use crate::event::RunEvent;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::ledger::{Ledger, StageCount};
use crate::pipeline::teller::Teller;
use crate::pipeline::{Run, TaskRun};
use crate::spec::Quoted;
use crate::stage::record::{Outcome, WaitKind};
use crate::stage::{ImplementReport, Report};
use crate::state::lock::{AgentGroup, Beat, Moved, Phase, RunLock};
use plan::{PlanFor, StagePlan};
use runner::{StageContext, StageRun};

impl Run<'_> {
    /// Renders the prompt and runs one stage, with the audit after it. `implement` is what
    /// implement reported (for the review).
    pub(super) async fn stage<R: Report>(
        &mut self,
        it: &mut TaskRun,
        implement: Option<&ImplementReport>,
    ) -> Result<StageRun<R>> {
        self.stage_with(it, implement, None).await
    }

    /// [`Run::stage`]; with `refused`, the review is asked for a new commit message only.
    pub(super) async fn stage_with<R: Report>(
        &mut self,
        it: &mut TaskRun,
        implement: Option<&ImplementReport>,
        refused: Option<&crate::pipeline::stage::inputs::RefusedMessage>,
    ) -> Result<StageRun<R>> {
        let stage = R::STAGE;
        super::check_budget(self.cx.settings, &self.ledger)?;
        super::clock::check_deadline(self.cx.settings, self.ledger.median_ms(stage), stage)?;
        let agent = match (stage, &self.cx.settings.review_agent) {
            (crate::stage::Stage::Review, Some(reviewer)) => reviewer.to_string(),
            _ => self.cx.settings.agent.to_string(),
        };
        super::pacing::pace_before(
            (self.cx, &self.teller, &self.ledger),
            &mut self.lock,
            &agent,
            stage,
            &it.title,
        )
        .await?;
        // A --pace pause may have eaten the time left: ask the deadline again.
        super::clock::check_deadline(self.cx.settings, self.ledger.median_ms(stage), stage)?;
        let doc = self.spec.reload()?;
        let task = doc.find(&it.identity).ok_or_else(|| Error::SpecEdit {
            path: self.cx.ws.spec_path.clone(),
            message: format!("task {} is gone from the file", Quoted(&it.title)),
        })?;
        let request = StagePlan::new(
            self.cx.ws,
            self.cx.settings,
            &PlanFor {
                doc: &doc,
                task,
                stage,
                level: it.level.level,
                start: Some(&it.start),
                implement,
                refused,
                verified: &it.verified,
                denied: &it.denied,
                spent: self.ledger.spent(),
            },
        )?;
        for cut in &request.cuts {
            tracing::debug!(stage = stage.name(), cut = %cut, "prompt input cut to its budget");
        }
        let before = super::audit::before(self.cx.ws, &self.spec, stage)?;
        let ctx = StageContext {
            settings: self.cx.settings,
            state_dir: &self.cx.ws.state_dir,
            cwd: self.cx.ws.repo.top(),
            reporter: self.cx.reporter,
            teller: &self.teller,
            interrupt: self.cx.interrupt,
            pause: &self.ledger.pause,
        };
        self.teller.emit(RunEvent::StageStart {
            stage,
            task: it.title.clone(),
            prompt_bytes: request.prompt.len() as u64,
            agent: request.agents.primary.agent.to_string(),
            model: request.agents.primary.model.clone(),
            attempt: request.attempt,
        });
        let mut limits = self.ledger.limits();
        let mut watch = LockWatch {
            lock: &mut self.lock,
            beat: self.ledger.beat.clone(),
            quiet: self.cx.settings.limits.idle_timeout,
        };
        let stage_run = runner::run_stage::<R>(&ctx, &mut watch, &mut limits, &request);
        let ran = self.spec.after_await(stage_run).await;
        self.ledger.merge_limits(&limits);
        let mut run = match ran {
            Ok(run) => run,
            Err(e) => {
                self.teller.emit(RunEvent::StageEnd {
                    task: Some(it.title.clone()),
                    stage,
                    outcome: None,
                    cost_usd: 0.0,
                    duration_ms: 0,
                    retries: 0,
                    failure: None,
                    error: Some(e.to_string()),
                    agent: request.agents.primary.agent.to_string(),
                    model: request.agents.primary.model.clone(),
                    turns: None,
                    waits: Vec::new(),
                    said: None,
                    fence: None,
                    window: Vec::new(),
                    tokens: None,
                });
                return Err(e);
            }
        };
        count(&self.ledger, &self.teller, &mut run);
        for switch in &run.record.kern.switches {
            self.teller.emit(RunEvent::AgentSwitch {
                task: Some(it.title.clone()),
                stage,
                from: switch.from.clone(),
                to: switch.to.clone(),
                reason: switch.reason.clone(),
                limited_until: switch.limited_until,
            });
        }
        // A kill while refs or the index are rewritten must let the next run clean up.
        let found = match self
            .lock
            .set_phase(crate::state::lock::Phase::Writing)
            .and_then(|()| {
                let keep =
                    super::audit::untouchable(self.cx.ws, &it.start.excluded, &self.left_out.paths);
                super::audit::audit(self.cx.ws, &self.spec, &keep, stage, &before, &it.title)
            }) {
            Ok(found) => found,
            Err(e) => {
                // The stage ended: its record stays for the next run, whatever stopped the audit.
                run.write(&self.cx.ws.state_dir)?;
                return Err(e);
            }
        };
        if !found.shared.is_empty() {
            self.teller.emit(RunEvent::SharedRef {
                task: Some(it.title.clone()),
                stage,
                moved: found.shared.clone(),
                saved: found.shared_kept.clone(),
            });
        }
        if !found.commits.is_empty() {
            self.teller.emit(RunEvent::BranchMoved {
                task: Some(it.title.clone()),
                stage,
                commits: found.commits.clone(),
            });
        }
        if !found.violations.is_empty() {
            self.teller.emit(RunEvent::Violation {
                task: Some(it.title.clone()),
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
        }
        run.write(&self.cx.ws.state_dir)?;
        let fenced = run.record.kern.sandbox.clone();
        let said = crate::pipeline::fence::fence_denied(
            self.cx,
            &self.teller,
            Some(&it.title),
            stage.name(),
            fenced.as_ref(),
        );
        it.heard_denied(said);
        notice_hand_edits(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            stage,
            before.spec_mark,
            it,
        )?;
        let record = &run.record;
        let turns = record
            .agent_result
            .get("num_turns")
            .and_then(serde_json::Value::as_u64);
        self.teller.emit(RunEvent::StageEnd {
            task: Some(it.title.clone()),
            stage,
            outcome: Some(record.kern.outcome),
            cost_usd: run.cost_usd,
            duration_ms: record.kern.duration_ms,
            retries: record.kern.retries,
            failure: run.outcome.as_ref().err().cloned(),
            error: None,
            agent: record.kern.agent.clone(),
            model: record.kern.model.clone().or_else(|| reported_model(record)),
            turns,
            waits: record.kern.waits.clone(),
            said: Some(outcome_word(&run)),
            fence: fence_remark(record.kern.sandbox.as_ref()),
            window: record.kern.window.clone(),
            tokens: reported_tokens(record),
        });
        if run.budget_spent {
            // Claude stopped at the cap kern gave it: the budget is spent, and the task is
            // not to blame — no Attempt note; the stage files stay for the next run.
            return Err(Error::BudgetSpent {
                spent: self.ledger.spent(),
                limit: self
                    .cx
                    .settings
                    .max_cost
                    .unwrap_or_else(|| self.ledger.spent()),
            });
        }
        Ok(run)
    }
}

/// Reports the changes of SPEC.md during the stage that kern did not make, by name.
fn notice_hand_edits(
    guard: &SpecGuard<'_, '_>,
    stage: crate::stage::Stage,
    mark: usize,
    it: &mut TaskRun,
) -> Result<()> {
    guard.spec.reload()?;
    let changes = guard.spec.changes_since(mark);
    if changes.is_empty() {
        return Ok(());
    }
    guard.teller.emit(RunEvent::HandEdit {
        task: Some(it.title.clone()),
        stage,
        changes: changes.clone(),
        spec: guard.cx.ws.spec_display.clone(),
    });
    it.hand_edits.extend(changes);
    Ok(())
}

/// Adds a stage's cost, retries, waits and agent to the run's totals, and its use of each
/// usage window its agent reported to its record (`kern.window`) and the run's readings, in
/// the `ledger`; told through `teller`.
fn count<R>(ledger: &Ledger, teller: &Teller, run: &mut StageRun<R>) {
    if let Some((agent, limit)) = &run.rate_limit {
        let reported = crate::agent::stream::window::windows(limit);
        run.record.kern.window = ledger.read_windows(run.record.kern.stage, agent, &reported);
    }
    let kern = &run.record.kern;
    let waits: Vec<(WaitKind, u64)> = kern.waits.iter().map(|w| (w.kind, w.duration_ms)).collect();
    let total = ledger.count_stage(&StageCount {
        agent: &kern.agent,
        cost_usd: run.cost_usd,
        retries: kern.retries,
        switched: !kern.switches.is_empty(),
        waits: &waits,
        succeeded: (kern.outcome == Outcome::Succeeded && run.outcome.is_ok())
            .then_some((kern.stage, kern.duration_ms)),
    });
    teller.emit(RunEvent::Told(crate::event::Told::CostSoFar { usd: total }));
}

/// The stage line's word on the fence: said whenever the stage ran without kern's fence, and
/// when the fence denied something.
fn fence_remark(report: Option<&crate::sandbox::FenceReport>) -> Option<String> {
    let report = report?;
    match report.mode {
        crate::sandbox::Mode::Off => Some("unfenced: --sandbox off".into()),
        crate::sandbox::Mode::Agent => Some("no kern fence: --sandbox agent".into()),
        crate::sandbox::Mode::Kern if report.total() > 0 => {
            Some(format!("fence denied {}", report.total()))
        }
        crate::sandbox::Mode::Kern => None,
    }
}

/// The model the agent reported using (the first of Claude's `modelUsage`), when it did.
fn reported_model(record: &crate::stage::record::StageRecord) -> Option<String> {
    record
        .agent_result
        .get("modelUsage")
        .and_then(serde_json::Value::as_object)
        .and_then(|models| models.keys().next().cloned())
}

/// The tokens the agent reported (`usage`: input, cache reads and writes, output), when it did.
fn reported_tokens(record: &crate::stage::record::StageRecord) -> Option<u64> {
    let usage = record.agent_result.get("usage")?.as_object()?;
    let counts: Vec<u64> = [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "output_tokens",
    ]
    .iter()
    .filter_map(|k| usage.get(*k).and_then(serde_json::Value::as_u64))
    .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// The word a stage line shows: the report's status or verdict, the number of research notes,
/// else the outcome.
fn outcome_word<R: Report>(run: &StageRun<R>) -> String {
    use crate::stage::StageReport;
    match run.outcome.as_ref().ok().map(|r| r.clone().into()) {
        Some(StageReport::Implement(r)) => r.status.as_str().to_string(),
        Some(StageReport::Tests(r)) => format!(
            "{} test file{}",
            r.tests.len(),
            if r.tests.len() == 1 { "" } else { "s" }
        ),
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
/// The run's lock listens to the stage runner: the phase `kern status` shows, the agent's
/// process group a kern taking over stops first — this task's own lock, with `-j` — and the
/// run's heartbeat of progress (`beat`: the run's own lock, which a watchdog reads).
struct LockWatch<'l> {
    lock: &'l mut RunLock,
    beat: Beat,
    /// How long the agent may print nothing before the run itself stops it.
    quiet: std::time::Duration,
}

impl runner::StageWatch for LockWatch<'_> {
    fn running(&mut self, stage: crate::stage::Stage) -> Result<()> {
        self.lock.set_phase(Phase::Stage(stage))?;
        self.beat.moved(Moved::Phase, Some(self.quiet));
        Ok(())
    }

    fn waiting(&mut self, stage: crate::stage::Stage) -> Result<()> {
        self.lock.set_phase(Phase::Waiting(stage))?;
        self.beat.moved(Moved::Phase, None);
        Ok(())
    }

    fn output(&mut self, stage: crate::stage::Stage, bytes: u64) {
        self.beat
            .moved(Moved::Output { stage, bytes }, Some(self.quiet));
    }

    fn agent_group(&mut self, group: Option<&crate::supervisor::ProcessGroup>) -> Result<()> {
        self.lock.set_agent_group(group.map(|g| AgentGroup {
            pgid: g.pgid,
            leader_start_time: g.leader.start_time,
        }))
    }
}
