//! Runs one stage to a decision: spawn the agent, follow its stream, classify how it ended,
//! then do what [`retry::next_step`] says — retry a transient failure, wait out a usage
//! limit, move the stage to the other agent, give up with a note, or stop the run for the
//! person.
//!
//! This is where the agent layer (argv, stream parsing, classification), the supervisor
//! (processes, timeouts, signals) and the stage record meet; the loop above only sees a
//! [`StageRun`]: the stage's own report, typed, or kern's note saying why the stage failed.
//! Each try's record is written once: a try the stage goes on from (retry, wait, the other
//! agent) at once, so `jq .kern.outcome stageN.json` says how the stage stands while it runs;
//! the stage's last try by [`StageRun::write`], after the loop's audit added what it found.
//! `kern.agent` names the agent of the last try and `kern.switches` every move between the
//! two. A stage starts on the agent [`retry::choose_side`] picks from the run's
//! [`AgentLimits`], which the runner updates whenever an agent hits its usage limit.
//!
//! No unit test here: it spawns the agent and writes the stage record; held by
//! tests/integration/pipeline.rs, agents.rs and crash.rs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::agent::failure::{self, FailureClass};
use crate::agent::stream::RateLimit;
use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::pipeline::ledger::Pause;
use crate::pipeline::teller::Teller;
use crate::reporter::Reporter;
use crate::retry::{self, AgentLimits, Side, Step};
use crate::settings::Settings;
use crate::stage::record::{Outcome, StageRecord, Switch, Wait, WaitKind};
use crate::stage::{Report, extract_report};
use crate::state::StateDir;
use crate::supervisor::EndReason;
use crate::supervisor::interrupt::Interrupt;
use crate::text;
use crate::timestamp::Timestamp;

use super::attempt::{millis, run_once};
use super::plan::StagePlan;

/// The stderr kept per stage (tail).
pub(super) const STDERR_CAP: usize = 64 * 1024;

/// What the loop needs to run a stage: shared, read-only context.
pub(crate) struct StageContext<'a> {
    /// Resolved settings.
    pub settings: &'a Settings,
    /// The state folder.
    pub state_dir: &'a StateDir,
    /// The repository's top folder (the agent's working folder).
    pub cwd: &'a Path,
    /// What the person sees (the agent's latest tool call on the status line).
    pub reporter: &'a Reporter,
    /// The one door for telling what happens.
    pub teller: &'a Teller<'a>,
    /// Ctrl-C / SIGTERM.
    pub interrupt: &'a Interrupt,
    /// The usage-limit pause every task of the run shares (`-j`).
    pub pause: &'a Pause,
}

/// Makes the state folder again when a tmp cleaner removed it (`StateDir::remake`) `when`
/// (`during the implement stage`), and says so: kern's own records go on in a folder that
/// passes the check, instead of a raw "No such file" from the next write. True when it was
/// gone.
pub(crate) fn remake_state_dir(
    state_dir: &StateDir,
    teller: &Teller<'_>,
    when: &str,
) -> Result<bool> {
    let remade = state_dir.remake()?;
    if remade {
        teller.emit(RunEvent::Told(Told::StateDirRemade {
            dir: state_dir.dir().display().to_string(),
            when: when.to_string(),
        }));
    }
    Ok(remade)
}

/// What the runner tells the run as a stage goes, for the run to record where `kern status`,
/// a watchdog and a kern taking over after a crash look (the run's lock listens: see
/// `stage/mod.rs`). The agent's output is the run's heartbeat of progress, as the ticks of a
/// wait are (told through the run's teller).
pub(crate) trait StageWatch {
    /// `stage`'s agent is running (again).
    fn running(&mut self, stage: crate::stage::Stage) -> Result<()>;
    /// `stage` waits for a usage limit to reset.
    fn waiting(&mut self, stage: crate::stage::Stage) -> Result<()>;
    /// `stage`'s agent printed: `bytes` so far in this try.
    fn output(&mut self, stage: crate::stage::Stage, bytes: u64);
    /// The agent's process group, while it lives: a kern taking over stops it first.
    fn agent_group(&mut self, group: Option<&crate::supervisor::ProcessGroup>) -> Result<()>;
}

/// How a stage ended, once retries and waits are over.
#[derive(Debug)]
pub(crate) struct StageRun<R> {
    /// The record, for `stageN.json`: written once, by [`StageRun::write`], after the audit
    /// has added what it found.
    pub record: StageRecord,
    /// The stage's report, or kern's note saying why there is none (e.g. "agent timed out
    /// after 1h (after 3 retries)").
    pub outcome: std::result::Result<R, String>,
    /// What the stage cost (all tries).
    pub cost_usd: f64,
    /// The latest subscription rate-limit state an agent reported during the stage (Claude's
    /// `rate_limit_event`), with the agent's name.
    pub rate_limit: Option<(String, RateLimit)>,
    /// The agent stopped at the `--max-budget-usd` kern gave it (what was left of
    /// `--max-cost`): the run's budget is spent, which is no failure of the task.
    pub budget_spent: bool,
}

impl<R> StageRun<R> {
    /// Writes the stage's record to `stageN.json`: the one write of a stage's end.
    pub(crate) fn write(&self, state_dir: &StateDir) -> Result<()> {
        self.record
            .write_record(&state_dir.stage_record(self.record.kern.stage))
    }
}

/// Adds to the finished `stage`'s record what kern found after it (the must-haves it checked,
/// the red and green of a task tested first), for jq; nothing when the stage has no record.
pub(crate) fn annotate_record(
    state_dir: &StateDir,
    stage: crate::stage::Stage,
    add: impl FnOnce(&mut crate::stage::record::KernEnvelope),
) -> Result<()> {
    let path = state_dir.stage_record(stage);
    if let Some(mut record) = StageRecord::load(&path) {
        add(&mut record.kern);
        record.write_record(&path)?;
    }
    Ok(())
}

/// Runs the plan `request` as stage `R::STAGE` with retries, waits and switches between its agents;
/// `limits` is the run's memory of which agent is at its usage limit until when. `Err` means
/// the run must stop: the agent needs the person, or the run was interrupted (the record says
/// `interrupted`).
pub(crate) async fn run_stage<R: Report>(
    ctx: &StageContext<'_>,
    watch: &mut dyn StageWatch,
    limits: &mut AgentLimits,
    request: &StagePlan,
) -> Result<StageRun<R>> {
    let settings = ctx.settings;
    let stage = R::STAGE;
    let state_dir = ctx.state_dir;
    remake_state_dir(
        ctx.state_dir,
        ctx.teller,
        &format!("before the {stage} stage"),
    )?;
    // Rewritten before every stage run, so no fsync: a crash cannot make them matter.
    crate::atomic_file::write_unsynced_private(
        &state_dir.stage_prompt(stage),
        request.prompt.as_bytes(),
    )?;
    // The schema never changes: written once and kept across iterations (it is not a stage
    // file of DESIGN.md section 3), which spares three file creations per iteration.
    let schema_path = state_dir.stage_schema(stage);
    if crate::private_file::read(&schema_path).ok().as_deref() != Some(stage.schema().as_bytes()) {
        crate::atomic_file::write_unsynced_private(&schema_path, stage.schema().as_bytes())?;
    }
    watch.running(stage)?;

    let delays = retry::retry_delays(&settings.retry);
    let mut tries = Tries::default();
    let agents = &request.agents;
    let name_of = |side: Side| match (side, &agents.fallback) {
        (Side::Fallback, Some(fallback)) => fallback.agent.to_string(),
        _ => agents.primary.agent.to_string(),
    };
    let now = Timestamp::now().epoch_seconds();
    let primary_until = limits.limited_until(&name_of(Side::Primary), now);
    let fallback_name = agents.fallback.as_ref().map(|f| f.agent.to_string());
    let mut side = retry::choose_side(
        primary_until,
        limits.other(fallback_name.as_deref(), now),
        now,
    );
    if side == Side::Fallback {
        let (from, to) = (name_of(Side::Primary), name_of(Side::Fallback));
        let reason = format!(
            "{from} is at its usage limit until {} (seen earlier in this run)",
            until_text(primary_until)
        );
        ctx.teller.emit(RunEvent::Told(Told::StartsOnOther {
            stage,
            reason: reason.clone(),
            to: to.clone(),
        }));
        tries.switches.push(Switch {
            from,
            to,
            reason,
            at: Timestamp::now(),
            limited_until: primary_until,
        });
    }
    loop {
        if let Some(rest) = ctx.pause.remaining() {
            let reason = "usage limit (hit by another task)".to_string();
            tries.waits.push(Wait {
                kind: WaitKind::UsageLimit,
                reason: reason.clone(),
                started_at: Timestamp::now(),
                duration_ms: millis(rest),
                resets_at: None,
            });
            tries.waited += rest;
            watch.waiting(stage)?;
            countdown(ctx, &reason, rest).await?;
            watch.running(stage)?;
        }
        let current = match (side, &agents.fallback) {
            (Side::Fallback, Some(fallback)) => fallback,
            _ => &agents.primary,
        };
        if let Some(deadline) = &settings.deadline
            && crate::pipeline::clock::time_left(deadline).is_zero()
        {
            return Err(crate::pipeline::clock::came(
                deadline,
                &format!("the {stage} stage"),
            ));
        }
        let mut attempt = run_once(ctx, watch, request, stage, current, &tries).await?;
        tries.cost += attempt.output.cost_usd;
        tries.fence.clone_from(&attempt.envelope.sandbox);
        if let Some(limit) = &attempt.output.rate_limit {
            tries.rate_limit = Some((current.agent.to_string(), limit.clone()));
        }
        let class = match &attempt.end {
            EndReason::Interrupted(signal) => {
                let signal = *signal;
                attempt.finish(state_dir, Outcome::Interrupted, Some("interrupted".into()))?;
                return Err(Error::Interrupted { signal });
            }
            // Each try gets no more than the time left: stopped at the deadline, the stage
            // resumes on the next run.
            EndReason::StageTimeout
                if settings
                    .deadline
                    .as_ref()
                    .is_some_and(|d| crate::pipeline::clock::time_left(d).is_zero()) =>
            {
                let deadline = settings
                    .deadline
                    .as_ref()
                    .map_or(String::new(), |d| d.shown.clone());
                attempt.finish(
                    state_dir,
                    Outcome::Interrupted,
                    Some(format!("stopped at the deadline {deadline}")),
                )?;
                return Err(crate::pipeline::clock::came_at(
                    settings.deadline.as_ref(),
                    &format!("the {stage} stage"),
                ));
            }
            EndReason::StageTimeout => Some(FailureClass::Transient(format!(
                "agent timed out after {}",
                text::duration(settings.limits.stage_timeout)
            ))),
            // An agent that printed its report and then lingers silent has done the stage:
            // what it printed is read as at its exit (DESIGN.md section 5's fallbacks too).
            EndReason::IdleTimeout if reported::<R>(stage, &attempt.output) => None,
            EndReason::IdleTimeout => Some(FailureClass::Transient(format!(
                "agent printed nothing for {}",
                text::duration(settings.limits.idle_timeout)
            ))),
            EndReason::Stopped(_) | EndReason::Exited | EndReason::AfterResultGrace => {
                failure::classify(&current.agent, &attempt.output)
            }
        };
        let Some(class) = class else {
            let report = extract_report(
                stage,
                attempt.output.structured_output.as_ref(),
                &attempt.output.result_text,
            )
            .map(R::from_report);
            return match report {
                Ok(Some(report)) => {
                    attempt.envelope.report = Some(report.clone().into());
                    let record = attempt.close(Outcome::Succeeded, None);
                    Ok(StageRun {
                        record,
                        outcome: Ok(report),
                        cost_usd: tries.cost,
                        rate_limit: tries.rate_limit,
                        budget_spent: false,
                    })
                }
                // A stage limit: no blind retry.
                Ok(None) | Err(_) => {
                    let reason = report
                        .err()
                        .unwrap_or_else(|| "a report of another stage".into());
                    let note = format!("{stage} stage gave no usable result: {reason}");
                    Ok(attempt.fail(Outcome::Failed, note, tries))
                }
            };
        };
        let timed_out = matches!(
            attempt.end,
            EndReason::StageTimeout | EndReason::IdleTimeout
        );
        let now = Timestamp::now().epoch_seconds();
        let other = match side {
            Side::Primary => limits.other(fallback_name.as_deref(), now),
            Side::Fallback => limits.other(Some(&name_of(Side::Primary)), now),
        };
        let step = retry::next_step(
            &class,
            tries.retries,
            tries.waited,
            other,
            &settings.retry,
            &delays,
            now,
        );
        let goes_on = matches!(step, Step::Retry(_) | Step::Wait(_) | Step::Switch(_));
        if let Some(left) = request
            .budget_left
            .filter(|left| goes_on && tries.cost >= *left)
        {
            let note = format!(
                "{stage} stage stopped: the --max-cost budget is spent ({} left when the stage started, {} spent by its tries) — {}",
                text::cost(left),
                text::cost(tries.cost),
                class.message()
            );
            let mut run = attempt.fail(Outcome::Failed, note, tries);
            run.budget_spent = true;
            return Ok(run);
        }
        // Remember the limit for the rest of the run, so that later stages go straight to
        // the agent that can work.
        if let FailureClass::UsageLimit { resets_at, .. } = &class {
            let wait = retry::usage_wait(*resets_at, &settings.retry, now);
            let until = now.saturating_add(i64::try_from(wait.as_secs()).unwrap_or(i64::MAX));
            limits.set(&current.agent.to_string(), until);
        }
        match step {
            Step::Retry(delay) => {
                let reason = class.message().to_string();
                let outcome = if timed_out {
                    Outcome::TimedOut
                } else {
                    Outcome::Failed
                };
                attempt.finish(state_dir, outcome, Some(reason.clone()))?;
                tries.retries += 1;
                tries.waits.push(Wait {
                    kind: WaitKind::Retry,
                    reason: reason.clone(),
                    started_at: Timestamp::now(),
                    duration_ms: millis(delay),
                    resets_at: None,
                });
                ctx.teller.emit(RunEvent::Told(Told::Retrying {
                    stage,
                    reason: reason.clone(),
                    retry: tries.retries,
                    of: delays.len(),
                    delay,
                }));
                countdown(ctx, &format!("retrying {stage}"), delay).await?;
            }
            Step::Wait(wait) => {
                let message = class.message().to_string();
                attempt.finish(state_dir, Outcome::Failed, Some(message.clone()))?;
                let resets_at = match &class {
                    FailureClass::UsageLimit { resets_at, .. } => *resets_at,
                    _ => None,
                };
                tries.waits.push(Wait {
                    kind: WaitKind::UsageLimit,
                    reason: message.clone(),
                    started_at: Timestamp::now(),
                    duration_ms: millis(wait),
                    resets_at,
                });
                tries.waited += wait;
                ctx.pause.until(Instant::now() + wait);
                ctx.teller.emit(RunEvent::Told(Told::UsageLimitWait {
                    stage,
                    task: request.task.title.clone(),
                    reason: message.clone(),
                    resets_at,
                    wait,
                }));
                watch.waiting(stage)?;
                countdown(ctx, &message, wait).await?;
                watch.running(stage)?;
            }
            Step::Switch(wait) => {
                let message = class.message().to_string();
                let (from, to) = (name_of(side), name_of(side.other()));
                let limited_until = limits.limited_until(&from, now);
                ctx.teller.emit(RunEvent::Told(Told::Switching {
                    stage,
                    from: from.clone(),
                    to: to.clone(),
                    message: message.clone(),
                    until: until_text(limited_until),
                    wait,
                }));
                tries.switches.push(Switch {
                    from,
                    to,
                    reason: message.clone(),
                    at: Timestamp::now(),
                    limited_until,
                });
                // The record says at once where the stage went, while the other agent runs.
                attempt.envelope.switches.clone_from(&tries.switches);
                attempt.finish(state_dir, Outcome::Failed, Some(message.clone()))?;
                if !wait.is_zero() {
                    tries.waits.push(Wait {
                        kind: WaitKind::UsageLimit,
                        reason: message.clone(),
                        started_at: Timestamp::now(),
                        duration_ms: millis(wait),
                        resets_at: limits.limited_until(&name_of(side.other()), now),
                    });
                    tries.waited += wait;
                    watch.waiting(stage)?;
                    countdown(ctx, &message, wait).await?;
                    watch.running(stage)?;
                }
                side = side.other();
            }
            Step::Fail(note) => {
                let note = match class {
                    FailureClass::StageLimit(_) => format!("{stage} stage stopped: {note}"),
                    _ => note,
                };
                // The cap kern gave is what was left of --max-cost: the run's budget is spent.
                if request.budget_left.is_some()
                    && attempt.output.subtype.as_deref() == Some("error_max_budget_usd")
                {
                    let mut run = attempt.fail(Outcome::Failed, note, tries);
                    run.budget_spent = true;
                    return Ok(run);
                }
                let outcome = if timed_out {
                    Outcome::TimedOut
                } else {
                    Outcome::Failed
                };
                return Ok(attempt.fail(outcome, note, tries));
            }
            Step::Stop(message) => {
                attempt.finish(
                    state_dir,
                    Outcome::Failed,
                    Some(class.message().to_string()),
                )?;
                return Err(Error::AgentNeedsUser { message });
            }
        }
    }
}

/// What the tries of one stage have added up to so far.
#[derive(Default)]
pub(super) struct Tries {
    pub(super) retries: u32,
    pub(super) waits: Vec<Wait>,
    pub(super) waited: Duration,
    pub(super) cost: f64,
    pub(super) switches: Vec<Switch>,
    pub(super) rate_limit: Option<(String, RateLimit)>,
    /// What the fence denied in the tries so far.
    pub(super) fence: Option<crate::sandbox::FenceReport>,
}

/// An epoch time as the local clock shows it (`14:05`, or the date when not today), for the
/// person; `unknown` when there is none.
fn until_text(epoch: Option<i64>) -> String {
    use chrono::TimeZone;
    let Some(at) = epoch.and_then(|e| chrono::Local.timestamp_opt(e, 0).single()) else {
        return "an unknown time".into();
    };
    if at.date_naive() == chrono::Local::now().date_naive() {
        at.format("%H:%M").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    }
}

/// Waits `total`, showing a countdown: `Err(Interrupted)` when a stop is asked for meanwhile,
/// `Err(DeadlineReached)` at once when the wait would end after the night's deadline.
async fn countdown(ctx: &StageContext<'_>, reason: &str, total: Duration) -> Result<()> {
    if let Some(deadline) = &ctx.settings.deadline
        && let Some(past) = crate::pipeline::clock::wait_past(deadline, reason, total)
    {
        return Err(past);
    }
    let end = Instant::now() + total;
    loop {
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        let remaining = end - now;
        ctx.teller.emit(RunEvent::Told(Told::Waiting {
            reason: reason.to_string(),
            remaining,
        }));
        let step = remaining.min(Duration::from_secs(1));
        if ctx.interrupt.sleep_or_interrupt(step).await {
            return Err(interrupted(ctx));
        }
    }
}

fn interrupted(ctx: &StageContext<'_>) -> Error {
    Error::Interrupted {
        signal: ctx.interrupt.requested().unwrap_or(2),
    }
}
/// True when what the agent printed holds a report of `stage` that reads as `R`: the
/// structured output, else the last JSON object or fenced `json` block of its text, else
/// (implement) a status word on the last line.
fn reported<R: Report>(
    stage: crate::stage::Stage,
    output: &crate::agent::stream::AgentOutput,
) -> bool {
    matches!(
        extract_report(
            stage,
            output.structured_output.as_ref(),
            &output.result_text
        )
        .map(R::from_report),
        Ok(Some(_))
    )
}
