//! One try of a stage: spawn the agent with its argv, follow its stream through the supervisor
//! (timeouts, the lock's agent group, interrupts), and hand back what it said, not yet judged.
//!
//! The one decision a reader must know: a try never decides anything; [`super::runner::run_stage`]
//! classifies how it ended and chooses to retry, wait, switch agents or give up.

use std::time::{Duration, Instant};

use crate::agent::stream::{AgentOutput, LineSignal, ReportCheck, StreamParser};
use crate::agent::{Agent, StageAgent};
use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::stage::Stage;
use crate::stage::record::{KernEnvelope, Outcome, SCHEMA_VERSION, StageRecord};
use crate::stage::report::is_report;
use crate::state::StateDir;
use crate::supervisor::{self, EndReason, Invocation, LineAction, SpawnError, StreamFiles};
use crate::timestamp::Timestamp;
use serde_json::{Map, Value};

use super::plan::{PlanFiles, StagePlan};
use super::runner::{STDERR_CAP, StageContext, StageRun, StageWatch, Tries};

/// One run of the agent, not yet judged.
pub(super) struct Attempt {
    pub(super) output: AgentOutput,
    pub(super) end: EndReason,
    pub(super) envelope: KernEnvelope,
}

impl Attempt {
    /// Sets how the try ended and returns its record.
    pub(super) fn close(&mut self, outcome: Outcome, failure: Option<String>) -> StageRecord {
        self.envelope.outcome = outcome;
        self.envelope.failure = failure;
        record(&self.output, self.envelope.clone())
    }

    /// A try the stage goes on from (a retry, a wait, the other agent) or that stops the run:
    /// its record is written now, so `stageN.json` says at once how the stage stands.
    pub(super) fn finish(
        &mut self,
        state_dir: &StateDir,
        outcome: Outcome,
        failure: Option<String>,
    ) -> Result<()> {
        let record = self.close(outcome, failure);
        record.write_record(&state_dir.stage_record(self.envelope.stage))
    }

    /// The stage failed for good: its record (written by [`StageRun::write`], after the
    /// audit), and kern's note for the Attempt.
    pub(super) fn fail<R>(mut self, outcome: Outcome, note: String, tries: Tries) -> StageRun<R> {
        let record = self.close(outcome, Some(note.clone()));
        StageRun {
            record,
            outcome: Err(note),
            cost_usd: tries.cost,
            rate_limit: tries.rate_limit,
            budget_spent: false,
        }
    }
}

/// Spawns `on`'s agent once and follows it to its end.
pub(super) async fn run_once(
    ctx: &StageContext<'_>,
    watch: &mut dyn StageWatch,
    request: &StagePlan,
    stage: Stage,
    on: &StageAgent,
    tries: &Tries,
) -> Result<Attempt> {
    let settings = ctx.settings;
    let state_dir = ctx.state_dir;
    let agent = &on.agent;
    ctx.teller.emit(RunEvent::Told(Told::StageTry {
        stage,
        task: request.task.title.clone(),
    }));
    let invocation = request.invocation(
        on,
        &PlanFiles {
            cwd: ctx.cwd,
            schema: &state_dir.stage_schema(stage),
            state_dir: &state_dir.dir(),
        },
        tries.cost,
    );
    let files = StreamFiles {
        stdout_cap: crate::supervisor::STDOUT_CAP,
        stdout: state_dir.stage_stream(stage),
        stderr: state_dir.stage_stderr(stage),
        stderr_cap: STDERR_CAP,
    };
    // A fenced `program:` agent may write the scripted agent's books in its state folder
    // (`pipeline::fence`): the folder must exist to be bound writable.
    if invocation.fence.as_ref().is_some_and(|f| {
        f.who
            == (crate::sandbox::Who::Agent {
                kind: crate::sandbox::AgentKind::Program,
            })
    }) {
        let books = state_dir.dir().join(crate::scripted_agent::BOOKS_FOLDER);
        // Private, as every folder of the state folder is (state_privacy.rs).
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&books)
            .map_err(|e| Error::io(&books, e))?;
    }
    let started_at = Timestamp::now();
    let clock = Instant::now();
    // A plain-text program has reported once its output is the stage's report.
    let mut parser = StreamParser::new(agent.stream_format())
        .with_report_check(ReportCheck::new(move |text| is_report(stage, text)));
    tracing::debug!(
        stage = stage.name(),
        program = %invocation.program.display(),
        args = ?invocation.args,
        prompt_bytes = invocation.stdin.len(),
        retries = tries.retries,
        "starting the agent"
    );
    let mut spawned = false;
    let watch = std::cell::RefCell::new(watch);
    let mut on_spawn = |g: supervisor::ProcessGroup| {
        // Recorded so that a kern taking over after a crash can stop an orphaned agent before
        // it resumes the task.
        if let Err(e) = watch.borrow_mut().agent_group(Some(&g)) {
            tracing::warn!(error = %e, "cannot record the agent group in the lock");
        }
        spawned = true;
    };
    let reporter = ctx.reporter;
    let mut printed = 0u64;
    let mut on_line = |line: &str| {
        // What the agent prints is the run's progress (its heartbeat).
        printed += line.len() as u64 + 1;
        watch.borrow_mut().output(stage, printed);
        match parser.push_line(line) {
            LineSignal::Continue => LineAction::Continue,
            LineSignal::Progress(p) => {
                reporter.progress(&p.tool, &p.detail);
                LineAction::Continue
            }
            LineSignal::ResultSeen => LineAction::ResultSeen,
            LineSignal::StopNow(class) => LineAction::StopNow(class.message().to_string()),
        }
    };
    // No try runs past the night's deadline.
    let limits = crate::pipeline::clock::clip(&settings.limits, settings.deadline.as_ref());
    // A tmp cleaner that took the state folder as the fence was being built (the fence binds
    // it): kern makes the folder again and builds the fence once more, as it goes on after a
    // stage.
    let mut remade = false;
    let finished = loop {
        let finished = supervisor::run(
            &invocation,
            &limits,
            &files,
            ctx.interrupt,
            &mut on_spawn,
            &mut on_line,
        )
        .await;
        if !remade
            && matches!(finished, Err(SpawnError::Fence(..)))
            && super::runner::remake_state_dir(
                state_dir,
                ctx.teller,
                &format!("during the {stage} stage"),
            )?
        {
            remade = true;
            continue;
        }
        break finished;
    };
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
        watch.borrow_mut().agent_group(None)?;
    }
    super::runner::remake_state_dir(state_dir, ctx.teller, &format!("during the {stage} stage"))?;
    let finished = finished.map_err(|e| spawn_error(agent, e))?;
    if !finished.escaped.is_empty() {
        // Stopped, not held against the stage: a CLI's own helpers (Codex's sandbox) may still
        // be winding down when it exits, and nothing they do counts after this point.
        ctx.teller.emit(RunEvent::Told(Told::StrayProcesses {
            stage,
            pids: finished.escaped.clone(),
        }));
    }
    let output = parser.finish(finished.exit_code, &finished.stderr_tail);
    let envelope = KernEnvelope {
        schema: SCHEMA_VERSION,
        stage,
        task: request.task.clone(),
        agent: agent.to_string(),
        argv: argv(&invocation),
        model: on.model.clone(),
        started_at,
        finished_at: Timestamp::now(),
        duration_ms: millis(clock.elapsed()),
        exit_code: finished.exit_code,
        attempt: request.attempt,
        retries: tries.retries,
        waits: tries.waits.clone(),
        switches: tries.switches.clone(),
        outcome: Outcome::Succeeded,
        report: None,
        failure: None,
        violations: Vec::new(),
        reverted: Vec::new(),
        must: Vec::new(),
        tests_first: None,
        window: Vec::new(),
        prompt_bytes: request.prompt.len() as u64,
        sandbox: Some(fence_report(settings, finished.fence.as_ref(), tries)),
    };
    Ok(Attempt {
        output,
        end: finished.end,
        envelope,
    })
}

/// `kern.sandbox` of a try: what this try's fence denied, added to the stage's earlier tries;
/// the mode alone when kern did not fence it (`agent`, `off`).
fn fence_report(
    settings: &crate::settings::Settings,
    this_try: Option<&crate::sandbox::FenceReport>,
    tries: &Tries,
) -> crate::sandbox::FenceReport {
    let mut report = match this_try {
        Some(report) => report.clone(),
        None => crate::sandbox::FenceReport::new(settings.sandbox.mode),
    };
    if let Some(earlier) = &tries.fence {
        report.absorb(earlier);
    }
    report
}

/// The full command line: the program, then its arguments.
fn argv(invocation: &Invocation) -> Vec<String> {
    std::iter::once(invocation.program.to_string_lossy().into_owned())
        .chain(invocation.args.iter().cloned())
        .collect()
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn spawn_error(agent: &Agent, error: SpawnError) -> Error {
    match error {
        SpawnError::NotFound(program) => match agent {
            // A path was never looked up on PATH; a bare name was.
            Agent::Program(path) => crate::agent::program::not_found(path),
            Agent::Claude | Agent::Codex => Error::AgentNeedsUser {
                message: format!(
                    "`{}` not found on PATH — {}",
                    program.display(),
                    if matches!(agent, Agent::Claude) {
                        "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent"
                    } else {
                        "install Codex (`npm install -g @openai/codex`) or choose another agent with --agent"
                    }
                ),
            },
        },
        SpawnError::PermissionDenied(program) => crate::agent::program::not_executable(&program),
        SpawnError::Fence(missing, fix) => Error::SandboxUnavailable { missing, fix },
        SpawnError::Other(path, source) | SpawnError::Output(path, source) => {
            Error::io(path, source)
        }
    }
}

/// The record of a run: Claude's `result` event as the top level when there is one, else the
/// same shape built from `out` — the one place agent output meets the record's envelope.
pub(crate) fn record(out: &AgentOutput, kern: KernEnvelope) -> StageRecord {
    let agent_result = match &out.result_event {
        Some(Value::Object(event)) => event.clone(),
        _ => built_result(out),
    };
    StageRecord::new(agent_result, kern, &out.result_text)
}

/// Claude's result shape, from what a non-Claude agent gave.
fn built_result(out: &AgentOutput) -> Map<String, Value> {
    let mut map = Map::new();
    let mut put = |key: &str, value: Value| {
        map.insert(key.to_string(), value);
    };
    put("type", Value::from("result"));
    put("subtype", opt(out.subtype.clone()));
    put("is_error", Value::from(out.is_error));
    put("api_error_status", opt(out.api_error_status));
    put("num_turns", opt(out.num_turns));
    put("result", Value::from(out.result_text.clone()));
    put("session_id", opt(out.session_id.clone()));
    put("total_cost_usd", Value::from(out.cost_usd));
    put("usage", out.usage.clone());
    put("modelUsage", out.model_usage.clone());
    put(
        "permission_denials",
        Value::Array(out.permission_denials.clone()),
    );
    put(
        "structured_output",
        out.structured_output.clone().unwrap_or(Value::Null),
    );
    put("terminal_reason", opt(out.terminal_reason.clone()));
    if !out.errors.is_empty() {
        put(
            "errors",
            Value::Array(out.errors.iter().cloned().map(Value::from).collect()),
        );
    }
    map
}

fn opt<T: Into<Value>>(value: Option<T>) -> Value {
    value.map_or(Value::Null, Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_recorded_in_whole_milliseconds_saturating() {
        assert_eq!(millis(Duration::from_micros(2_999)), 2);
        assert_eq!(millis(Duration::from_secs(90)), 90_000);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
