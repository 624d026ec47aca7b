//! Runs one stage to a decision: spawn the agent, follow its stream, classify how it ended,
//! retry transient failures, wait out usage limits, stop the run when the person is needed.
//!
//! This is where the agent layer (argv, stream parsing, classification), the supervisor
//! (processes, timeouts, signals) and the stage record meet; the pipeline above only sees a
//! [`StageRun`]: a report to apply, or kern's own note saying why the stage failed. A stage
//! record is written after every try, so `jq .kern.outcome stageN.json` is true at any moment.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::agent::failure::{self, FailureClass};
use crate::agent::stream::{LineSignal, StreamParser};
use crate::agent::{Agent, InvocationRequest};
use crate::error::{Error, Result};
use crate::reporter::Reporter;
use crate::retry;
use crate::settings::Settings;
use crate::stage::record::{KernEnvelope, Outcome, StageRecord, TaskRef, Wait, WaitKind};
use crate::stage::{self, Stage, StageReport};
use crate::state::StateDir;
use crate::state::lock::{AgentGroup, RunLock};
use crate::supervisor::interrupt::Interrupt;
use crate::supervisor::{self, EndReason, LineAction, SpawnError, StreamFiles};

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
}

/// One stage's prompt and task.
pub struct StageRequest {
    /// Which stage.
    pub stage: Stage,
    /// The model (template front matter or `--model`); None lets the agent choose.
    pub model: Option<String>,
    /// The rendered prompt.
    pub prompt: String,
    /// The task, for the record and `KERN_TASK`.
    pub task: TaskRef,
    /// The task's failed attempts so far (for the record).
    pub attempt: u32,
}

/// How a stage ended, once retries and waits are over.
#[derive(Debug)]
pub struct StageRun {
    /// The record, as written to `stageN.json`.
    pub record: StageRecord,
    /// The parsed report when the stage succeeded.
    pub report: Option<StageReport>,
    /// kern's own note when it did not (e.g. "agent timed out after 60m").
    pub failure: Option<String>,
    /// What the stage cost (all tries).
    pub cost_usd: f64,
}

/// Runs `request` with retries and waits. `Err` means the run must stop: the agent needs the
/// person, or the run was interrupted (the record says `interrupted`).
pub async fn run_stage(
    ctx: &StageContext<'_>,
    lock: &mut RunLock,
    request: &StageRequest,
) -> Result<StageRun> {
    let settings = ctx.settings;
    let stage = request.stage;
    let state_dir = ctx.state_dir;
    // Rewritten before every stage run, so no fsync: a crash cannot make them matter.
    let prompt_path = state_dir.stage_prompt(stage);
    crate::atomic_file::write_unsynced(&prompt_path, request.prompt.as_bytes())?;
    // The schema never changes: written once and kept across iterations (it is not a stage
    // file of DESIGN.md section 3), which spares three file creations per iteration.
    let schema_path = state_dir.stage_schema(stage);
    if std::fs::read(&schema_path).ok().as_deref() != Some(stage.schema().as_bytes()) {
        crate::atomic_file::write_unsynced(&schema_path, stage.schema().as_bytes())?;
    }
    lock.set_phase(stage.name())?;

    let delays = retry::retry_delays(&settings.retry);
    let mut retries = 0u32;
    let mut waits: Vec<Wait> = Vec::new();
    let mut waited = Duration::ZERO;
    let mut cost = 0.0;
    loop {
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
            stdout: state_dir.stage_stream(stage),
            stderr: state_dir.stage_stderr(stage),
            stderr_cap: STDERR_CAP,
        };
        let started_at = SystemTime::now();
        let clock = Instant::now();
        let mut parser = StreamParser::new(settings.agent.stream_format());
        tracing::debug!(
            stage = stage.name(),
            program = %invocation.program.display(),
            args = ?invocation.args,
            prompt_bytes = invocation.stdin.len(),
            retries,
            "starting the agent"
        );
        let mut spawned = false;
        let mut on_spawn = |g: supervisor::ProcessGroup| {
            ctx.interrupt.set_child_group(Some(g.pgid));
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
            LineSignal::StopNow(class) => LineAction::StopNow(describe(&class)),
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
        ctx.interrupt.set_child_group(None);
        match &finished {
            Ok(f) => tracing::debug!(
                stage = stage.name(),
                exit_code = ?f.exit_code,
                signal = ?f.signal,
                end = ?f.end,
                duration_ms = f.duration.as_millis() as u64,
                stdout_bytes = f.stdout_bytes,
                "agent finished"
            ),
            Err(e) => tracing::debug!(stage = stage.name(), error = %e, "agent did not start"),
        }
        if spawned {
            // The group is gone now; a record of it would only mislead a later takeover.
            lock.set_agent_group(None)?;
        }
        let finished = match finished {
            Ok(f) => f,
            Err(e) => return Err(spawn_error(&settings.agent, e)),
        };
        let output = parser.finish(finished.exit_code, &finished.stderr_tail);
        cost += output.cost_usd;

        let mut envelope = KernEnvelope {
            schema: 1,
            stage,
            task: request.task.clone(),
            agent: settings.agent.to_string(),
            argv: std::iter::once(invocation.program.to_string_lossy().into_owned())
                .chain(invocation.args.iter().cloned())
                .collect(),
            model: request.model.clone(),
            started_at: rfc3339(started_at),
            finished_at: rfc3339(SystemTime::now()),
            duration_ms: clock.elapsed().as_millis() as u64,
            exit_code: finished.exit_code,
            attempt: request.attempt,
            retries,
            waits: waits.clone(),
            outcome: Outcome::Succeeded,
            report: None,
            failure: None,
            violations: Vec::new(),
            reverted: Vec::new(),
            prompt_bytes: request.prompt.len() as u64,
        };

        // How did it end?
        let class = match &finished.end {
            EndReason::Interrupted(signal) => {
                let failure = Some("interrupted".to_string());
                write_record(state_dir, &output, envelope, Outcome::Interrupted, failure)?;
                return Err(Error::Interrupted { signal: *signal });
            }
            EndReason::StageTimeout => Some(FailureClass::Transient(format!(
                "agent timed out after {}",
                human_duration(settings.limits.stage_timeout)
            ))),
            EndReason::IdleTimeout => Some(FailureClass::Transient(format!(
                "agent printed nothing for {}",
                human_duration(settings.limits.idle_timeout)
            ))),
            EndReason::Stopped(_) | EndReason::Exited | EndReason::AfterResultGrace => {
                failure::classify(&settings.agent, &output)
            }
        };
        let timed_out = matches!(
            finished.end,
            EndReason::StageTimeout | EndReason::IdleTimeout
        );

        match class {
            None => {
                let report = stage::extract_report(
                    stage,
                    output.structured_output.as_ref(),
                    &output.result_text,
                );
                match report {
                    Ok(report) => {
                        envelope.report = Some(report.clone());
                        let record =
                            write_record(state_dir, &output, envelope, Outcome::Succeeded, None)?;
                        return Ok(StageRun {
                            record,
                            report: Some(report),
                            failure: None,
                            cost_usd: cost,
                        });
                    }
                    Err(reason) => {
                        // A stage limit: no blind retry.
                        let note =
                            format!("{} stage gave no usable result: {reason}", stage.name());
                        return failed(state_dir, &output, envelope, Outcome::Failed, note, cost);
                    }
                }
            }
            Some(FailureClass::NeedsUser(message)) => {
                let failure = Some(message.clone());
                write_record(state_dir, &output, envelope, Outcome::Failed, failure)?;
                return Err(Error::AgentNeedsUser { message });
            }
            Some(FailureClass::StageLimit(reason)) => {
                let note = format!("{} stage stopped: {reason}", stage.name());
                return failed(state_dir, &output, envelope, Outcome::Failed, note, cost);
            }
            Some(FailureClass::UsageLimit { resets_at, message }) => {
                let now = SystemTime::now();
                let until = resets_at
                    .map(|t| SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64))
                    .unwrap_or(now + settings.retry.first_delay)
                    + settings.retry.reset_margin;
                let wait = until
                    .duration_since(now)
                    .unwrap_or(settings.retry.reset_margin);
                let failure = Some(message.clone());
                write_record(state_dir, &output, envelope, Outcome::Failed, failure)?;
                if waited + wait > settings.retry.max_wait {
                    return Err(Error::AgentNeedsUser {
                        message: format!(
                            "{message} — the reset is {} away, longer than --max-wait ({}); run kern again after the reset, or raise --max-wait",
                            human_duration(wait),
                            human_duration(settings.retry.max_wait)
                        ),
                    });
                }
                waits.push(Wait {
                    kind: WaitKind::UsageLimit,
                    reason: message.clone(),
                    started_at: rfc3339(now),
                    duration_ms: wait.as_millis() as u64,
                    resets_at,
                });
                waited += wait;
                lock.set_phase(&format!("{}: waiting for usage limit reset", stage.name()))?;
                if countdown(ctx, &message, wait).await {
                    return Err(interrupted(ctx));
                }
                lock.set_phase(stage.name())?;
            }
            Some(FailureClass::Transient(reason)) => {
                let outcome = if timed_out {
                    Outcome::TimedOut
                } else {
                    Outcome::Failed
                };
                if let Some(delay) = delays.get(retries as usize).copied() {
                    write_record(state_dir, &output, envelope, outcome, Some(reason.clone()))?;
                    retries += 1;
                    waits.push(Wait {
                        kind: WaitKind::Retry,
                        reason: reason.clone(),
                        started_at: rfc3339(SystemTime::now()),
                        duration_ms: delay.as_millis() as u64,
                        resets_at: None,
                    });
                    ctx.reporter.warn(&format!(
                        "{} failed ({reason}); retry {retries} of {} in {}",
                        stage.name(),
                        delays.len(),
                        human_duration(delay)
                    ));
                    if countdown(ctx, &format!("retrying {}", stage.name()), delay).await {
                        return Err(interrupted(ctx));
                    }
                } else {
                    let note = if delays.is_empty() {
                        reason
                    } else {
                        format!("{reason} (after {} retries)", delays.len())
                    };
                    return failed(state_dir, &output, envelope, outcome, note, cost);
                }
            }
        }
    }
}

/// Sets how the stage ended, writes `stageN.json`, and returns the record.
fn write_record(
    state_dir: &StateDir,
    output: &crate::agent::stream::AgentOutput,
    mut envelope: KernEnvelope,
    outcome: Outcome,
    failure: Option<String>,
) -> Result<StageRecord> {
    envelope.outcome = outcome;
    envelope.failure = failure;
    let stage = envelope.stage;
    let record = StageRecord::from_output(output, envelope);
    record.write(&state_dir.stage_record(stage))?;
    Ok(record)
}

/// The stage failed for good: its record, and kern's note for the Attempt.
fn failed(
    state_dir: &StateDir,
    output: &crate::agent::stream::AgentOutput,
    envelope: KernEnvelope,
    outcome: Outcome,
    note: String,
    cost: f64,
) -> Result<StageRun> {
    let record = write_record(state_dir, output, envelope, outcome, Some(note.clone()))?;
    Ok(StageRun {
        record,
        report: None,
        failure: Some(note),
        cost_usd: cost,
    })
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

fn describe(class: &FailureClass) -> String {
    match class {
        FailureClass::Transient(r) | FailureClass::NeedsUser(r) | FailureClass::StageLimit(r) => {
            r.clone()
        }
        FailureClass::UsageLimit { message, .. } => message.clone(),
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

/// `90s`, `15m`, `1h`, `1h 30m`: for messages.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 && s % 60 == 0 => format!("{}m", s / 60),
        s if s < 3600 => format!("{}m {}s", s / 60, s % 60),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

/// RFC 3339 in UTC, seconds precision.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        for (secs, text) in [
            (45, "45s"),
            (60, "1m"),
            (90, "1m 30s"),
            (3600, "1h"),
            (5400, "1h 30m"),
        ] {
            assert_eq!(human_duration(Duration::from_secs(secs)), text);
        }
    }
}
