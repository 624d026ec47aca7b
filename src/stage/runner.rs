//! Runs one stage to a decision: spawn the agent, follow its stream, classify how it ended,
//! then do what [`retry::next_step`] says — retry a transient failure, wait out a usage
//! limit, give up with a note, or stop the run for the person.
//!
//! This is where the agent layer (argv, stream parsing, classification), the supervisor
//! (processes, timeouts, signals) and the stage record meet; the loop above only sees a
//! [`StageRun`]: the stage's own report, typed, or kern's note saying why the stage failed. A
//! stage record is written after every try, so `jq .kern.outcome stageN.json` is true at any
//! moment.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::agent::failure::{self, FailureClass};
use crate::agent::stream::{AgentOutput, LineSignal, StreamParser};
use crate::agent::{Agent, InvocationRequest};
use crate::error::{Error, Result};
use crate::reporter::Reporter;
use crate::reporter::text;
use crate::retry::{self, Step};
use crate::settings::Settings;
use crate::stage::record::{
    KernEnvelope, Outcome, SCHEMA_VERSION, StageRecord, TaskRef, Wait, WaitKind,
};
use crate::stage::{Report, Stage, extract_report};
use crate::state::StateDir;
use crate::state::lock::{AgentGroup, Phase, RunLock};
use crate::supervisor::interrupt::Interrupt;
use crate::supervisor::{self, EndReason, Invocation, LineAction, SpawnError, StreamFiles};
use crate::timestamp::Timestamp;

/// The stderr kept per stage (tail).
const STDERR_CAP: usize = 64 * 1024;

/// What the loop needs to run a stage: shared, read-only context.
pub struct StageContext<'a> {
    /// Resolved settings.
    pub settings: &'a Settings,
    /// The state folder.
    pub state_dir: &'a StateDir,
    /// The repository's top folder (the agent's working folder).
    pub cwd: &'a Path,
    /// What the person sees.
    pub reporter: &'a Reporter,
    /// Ctrl-C / SIGTERM.
    pub interrupt: &'a Interrupt,
    /// The usage-limit pause every task of the run shares (`-j`).
    pub pause: &'a Pause,
}

/// Until when no stage of the run starts: a usage limit one task's agent hit holds for every
/// task (they share the account), so the others wait for the same reset instead of each
/// hitting it in turn. Shared by the tasks of one run (one thread).
#[derive(Debug, Clone, Default)]
pub struct Pause(std::rc::Rc<std::cell::Cell<Option<Instant>>>);

impl Pause {
    /// No stage starts before `until` (a later pause wins).
    pub fn until(&self, until: Instant) {
        if self.0.get().is_none_or(|t| t < until) {
            self.0.set(Some(until));
        }
    }

    /// How long from now the pause lasts, if it does.
    pub fn remaining(&self) -> Option<Duration> {
        self.0
            .get()
            .map(|t| t.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
    }
}

/// One stage's prompt and task.
pub struct StageRequest {
    /// The model (template front matter or `--model`); None lets the agent choose.
    pub model: Option<String>,
    /// The rendered prompt.
    pub prompt: String,
    /// The task, for the record and `KERN_TASK`.
    pub task: TaskRef,
    /// Which attempt at the task this is (1-based).
    pub attempt: u32,
}

/// How a stage ended, once retries and waits are over.
#[derive(Debug)]
pub struct StageRun<R> {
    /// The record, as written to `stageN.json`.
    pub record: StageRecord,
    /// The stage's report, or kern's note saying why there is none (e.g. "agent timed out
    /// after 1h (after 3 retries)").
    pub outcome: std::result::Result<R, String>,
    /// What the stage cost (all tries).
    pub cost_usd: f64,
}

/// Runs `request` as stage `R::STAGE` with retries and waits. `Err` means the run must stop:
/// the agent needs the person, or the run was interrupted (the record says `interrupted`).
pub async fn run_stage<R: Report>(
    ctx: &StageContext<'_>,
    lock: &mut RunLock,
    request: &StageRequest,
) -> Result<StageRun<R>> {
    let settings = ctx.settings;
    let stage = R::STAGE;
    let state_dir = ctx.state_dir;
    // Rewritten before every stage run, so no fsync: a crash cannot make them matter.
    crate::atomic_file::write_unsynced(&state_dir.stage_prompt(stage), request.prompt.as_bytes())?;
    // The schema never changes: written once and kept across iterations (it is not a stage
    // file of DESIGN.md section 3), which spares three file creations per iteration.
    let schema_path = state_dir.stage_schema(stage);
    if std::fs::read(&schema_path).ok().as_deref() != Some(stage.schema().as_bytes()) {
        crate::atomic_file::write_unsynced(&schema_path, stage.schema().as_bytes())?;
    }
    lock.set_phase(Phase::Stage(stage))?;

    let delays = retry::retry_delays(&settings.retry);
    let mut tries = Tries::default();
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
            lock.set_phase(Phase::Waiting(stage))?;
            if countdown(ctx, &reason, rest).await {
                return Err(interrupted(ctx));
            }
            lock.set_phase(Phase::Stage(stage))?;
        }
        let mut attempt = run_once(ctx, lock, request, stage, &tries).await?;
        tries.cost += attempt.output.cost_usd;
        let class = match &attempt.end {
            EndReason::Interrupted(signal) => {
                let signal = *signal;
                attempt.finish(state_dir, Outcome::Interrupted, Some("interrupted".into()))?;
                return Err(Error::Interrupted { signal });
            }
            EndReason::StageTimeout => Some(FailureClass::Transient(format!(
                "agent timed out after {}",
                text::duration(settings.limits.stage_timeout)
            ))),
            EndReason::IdleTimeout => Some(FailureClass::Transient(format!(
                "agent printed nothing for {}",
                text::duration(settings.limits.idle_timeout)
            ))),
            EndReason::Stopped(_) | EndReason::Exited | EndReason::AfterResultGrace => {
                failure::classify(&settings.agent, &attempt.output)
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
                    let record = attempt.finish(state_dir, Outcome::Succeeded, None)?;
                    Ok(StageRun {
                        record,
                        outcome: Ok(report),
                        cost_usd: tries.cost,
                    })
                }
                // A stage limit: no blind retry.
                Ok(None) | Err(_) => {
                    let reason = report
                        .err()
                        .unwrap_or_else(|| "a report of another stage".into());
                    let note = format!("{stage} stage gave no usable result: {reason}");
                    attempt.fail(state_dir, Outcome::Failed, note, tries.cost)
                }
            };
        };
        let timed_out = matches!(
            attempt.end,
            EndReason::StageTimeout | EndReason::IdleTimeout
        );
        let step = retry::next_step(
            &class,
            tries.retries,
            tries.waited,
            &settings.retry,
            &delays,
            Timestamp::now().epoch_seconds(),
        );
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
                ctx.reporter.warn(&format!(
                    "{stage} failed ({reason}); retry {} of {} in {}",
                    tries.retries,
                    delays.len(),
                    text::duration(delay)
                ));
                if countdown(ctx, &format!("retrying {stage}"), delay).await {
                    return Err(interrupted(ctx));
                }
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
                ctx.reporter.usage_limit_wait(
                    stage,
                    &request.task.title,
                    &message,
                    resets_at,
                    wait,
                );
                lock.set_phase(Phase::Waiting(stage))?;
                if countdown(ctx, &message, wait).await {
                    return Err(interrupted(ctx));
                }
                lock.set_phase(Phase::Stage(stage))?;
            }
            Step::Fail(note) => {
                let note = match class {
                    FailureClass::StageLimit(_) => format!("{stage} stage stopped: {note}"),
                    _ => note,
                };
                let outcome = if timed_out {
                    Outcome::TimedOut
                } else {
                    Outcome::Failed
                };
                return attempt.fail(state_dir, outcome, note, tries.cost);
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
struct Tries {
    retries: u32,
    waits: Vec<Wait>,
    waited: Duration,
    cost: f64,
}

/// One run of the agent, not yet judged.
struct Attempt {
    output: AgentOutput,
    end: EndReason,
    envelope: KernEnvelope,
}

impl Attempt {
    /// Sets how the try ended, writes `stageN.json`, and returns the record.
    fn finish(
        &mut self,
        state_dir: &StateDir,
        outcome: Outcome,
        failure: Option<String>,
    ) -> Result<StageRecord> {
        self.envelope.outcome = outcome;
        self.envelope.failure = failure;
        let record = StageRecord::from_output(&self.output, self.envelope.clone());
        record.write(&state_dir.stage_record(self.envelope.stage))?;
        Ok(record)
    }

    /// The stage failed for good: its record, and kern's note for the Attempt.
    fn fail<R>(
        mut self,
        state_dir: &StateDir,
        outcome: Outcome,
        note: String,
        cost: f64,
    ) -> Result<StageRun<R>> {
        let record = self.finish(state_dir, outcome, Some(note.clone()))?;
        Ok(StageRun {
            record,
            outcome: Err(note),
            cost_usd: cost,
        })
    }
}

/// Spawns the agent once and follows it to its end.
async fn run_once(
    ctx: &StageContext<'_>,
    lock: &mut RunLock,
    request: &StageRequest,
    stage: Stage,
    tries: &Tries,
) -> Result<Attempt> {
    let settings = ctx.settings;
    let state_dir = ctx.state_dir;
    ctx.reporter.stage_started(stage, &request.task.title);
    let invocation = settings.agent.invocation(InvocationRequest {
        stage,
        model: request.model.as_deref(),
        prompt: request.prompt.clone().into_bytes(),
        cwd: ctx.cwd,
        schema_path: &state_dir.stage_schema(stage),
        state_dir: &state_dir.dir(),
        task_title: &request.task.title,
        max_budget_usd: None,
        sandbox: false,
    });
    let files = StreamFiles {
        stdout_cap: crate::supervisor::STDOUT_CAP,
        stdout: state_dir.stage_stream(stage),
        stderr: state_dir.stage_stderr(stage),
        stderr_cap: STDERR_CAP,
    };
    let started_at = Timestamp::now();
    let clock = Instant::now();
    let mut parser = StreamParser::new(settings.agent.stream_format());
    tracing::debug!(
        stage = stage.name(),
        program = %invocation.program.display(),
        args = ?invocation.args,
        prompt_bytes = invocation.stdin.len(),
        retries = tries.retries,
        "starting the agent"
    );
    let mut spawned = false;
    let mut on_spawn = |g: supervisor::ProcessGroup| {
        // Recorded in the lock so that a kern taking over after a crash can stop an
        // orphaned agent before it resumes the task.
        let group = AgentGroup {
            pgid: g.pgid,
            leader_start_time: g.leader.start_time,
        };
        if let Err(e) = lock.set_agent_group(Some(group)) {
            tracing::warn!(error = %e, "cannot record the agent group in the lock");
        }
        spawned = true;
    };
    let reporter = ctx.reporter;
    let mut on_line = |line: &str| match parser.push_line(line) {
        LineSignal::Continue => LineAction::Continue,
        LineSignal::Progress(p) => {
            reporter.progress(&p.tool, &p.detail);
            LineAction::Continue
        }
        LineSignal::ResultSeen => LineAction::ResultSeen,
        LineSignal::StopNow(class) => LineAction::StopNow(class.message().to_string()),
    };
    let finished = supervisor::run(
        &invocation,
        &settings.limits,
        &files,
        ctx.interrupt,
        &mut on_spawn,
        &mut on_line,
    )
    .await;
    match &finished {
        Ok(f) => tracing::debug!(
            stage = stage.name(),
            exit_code = ?f.exit_code,
            signal = ?f.signal,
            end = ?f.end,
            duration_ms = millis(f.duration),
            stdout_bytes = f.stdout_bytes,
            "agent finished"
        ),
        Err(e) => tracing::debug!(stage = stage.name(), error = %e, "agent did not start"),
    }
    if spawned {
        // The group is gone now; a record of it would only mislead a later takeover.
        lock.set_agent_group(None)?;
    }
    let finished = finished.map_err(|e| spawn_error(&settings.agent, e))?;
    if !finished.escaped.is_empty() {
        // Stopped, not held against the stage: a CLI's own helpers (Codex's sandbox) may still
        // be winding down when it exits, and nothing they do counts after this point.
        let pids: Vec<String> = finished.escaped.iter().map(i32::to_string).collect();
        ctx.reporter.warn(&format!(
            "stopped {} process{} the {stage} stage left running outside its process group (pids {})",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" },
            pids.join(", ")
        ));
    }
    let output = parser.finish(finished.exit_code, &finished.stderr_tail);
    let envelope = KernEnvelope {
        schema: SCHEMA_VERSION,
        stage,
        task: request.task.clone(),
        agent: settings.agent.to_string(),
        argv: argv(&invocation),
        model: request.model.clone(),
        started_at,
        finished_at: Timestamp::now(),
        duration_ms: millis(clock.elapsed()),
        exit_code: finished.exit_code,
        attempt: request.attempt,
        retries: tries.retries,
        waits: tries.waits.clone(),
        outcome: Outcome::Succeeded,
        report: None,
        failure: None,
        violations: Vec::new(),
        reverted: Vec::new(),
        prompt_bytes: request.prompt.len() as u64,
    };
    Ok(Attempt {
        output,
        end: finished.end,
        envelope,
    })
}

/// The full command line: the program, then its arguments.
fn argv(invocation: &Invocation) -> Vec<String> {
    std::iter::once(invocation.program.to_string_lossy().into_owned())
        .chain(invocation.args.iter().cloned())
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits `total`, showing a countdown; true when interrupted.
async fn countdown(ctx: &StageContext<'_>, reason: &str, total: Duration) -> bool {
    let end = Instant::now() + total;
    loop {
        let now = Instant::now();
        if now >= end {
            return false;
        }
        let remaining = end - now;
        ctx.reporter.waiting(reason, remaining);
        let step = remaining.min(Duration::from_secs(1));
        if ctx.interrupt.sleep_or_interrupt(step).await {
            return true;
        }
    }
}

fn interrupted(ctx: &StageContext<'_>) -> Error {
    Error::Interrupted {
        signal: ctx.interrupt.requested().unwrap_or(2),
    }
}

fn spawn_error(agent: &Agent, error: SpawnError) -> Error {
    match error {
        SpawnError::NotFound(program) => Error::AgentNeedsUser {
            message: format!(
                "`{}` not found on PATH — {}",
                program.display(),
                match agent {
                    Agent::Claude =>
                        "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent",
                    Agent::Codex =>
                        "install Codex (`npm install -g @openai/codex`) or choose another agent with --agent",
                    Agent::Program(_) => "check the path given to --agent program:<path>",
                }
            ),
        },
        SpawnError::PermissionDenied(program) => Error::AgentNeedsUser {
            message: format!(
                "`{}` is not executable — `chmod +x` it or check --agent",
                program.display()
            ),
        },
        SpawnError::Other(path, source) | SpawnError::Output(path, source) => {
            Error::io(path, source)
        }
    }
}
