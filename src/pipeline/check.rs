//! The check gate: the project's own command (`--check`, or a task's `> **Check:**` note,
//! which wins) that must pass after implement reports SUCCESS before the review runs.
//!
//! It runs through the same supervisor as an agent (own process group, timeout, no orphans),
//! as `sh -c` with stderr joined to stdout, all of it in `check.log`. A failure becomes an
//! Attempt note carrying the last lines of the output.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::Invocation;
use crate::error::{Error, Result};
use crate::event::{IterationEnd, RunEvent, Told};
use crate::pipeline::TaskRun;
use crate::pipeline::decide::{self, CheckResult, Next};
use crate::pipeline::guard::SpecGuard;
use crate::state::lock::{Phase, RunLock};
use crate::supervisor::Limits;
use crate::supervisor::interrupt::Interrupt;
use crate::supervisor::{self, EndReason, LineAction, StreamFiles};

/// Lines of output kept for the Attempt note.
const TAIL_LINES: usize = 20;

/// Runs `command` in `cwd` with `timeout`, output to `log`, inside `fence` when given; with
/// what the fence denied. Private: every check runs through [`run_for_task`] or
/// [`run_baseline`], which end SPEC.md's step when it returns (the check may write it).
async fn run(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    log: &Path,
    interrupt: &Interrupt,
    fence: Option<crate::sandbox::Fence>,
) -> Result<(CheckResult, Option<crate::sandbox::FenceReport>)> {
    let invocation = Invocation {
        program: "sh".into(),
        args: vec!["-c".into(), format!("exec 2>&1\n{command}")],
        env: Vec::new(),
        cwd: cwd.to_path_buf(),
        stdin: Vec::new(),
        fence,
    };
    let limits = Limits {
        stage_timeout: timeout,
        idle_timeout: timeout,
        result_grace: timeout,
    };
    let stderr = log.with_extension("stderr");
    let files = StreamFiles {
        stdout_cap: crate::supervisor::STDOUT_CAP,
        stdout: log.to_path_buf(),
        stderr: stderr.clone(),
        stderr_cap: 4096,
    };
    let mut tail: VecDeque<String> = VecDeque::with_capacity(TAIL_LINES);
    let mut on_line = |line: &str| {
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(300).collect());
        LineAction::Continue
    };
    let finished = supervisor::run(
        &invocation,
        &limits,
        &files,
        interrupt,
        &mut |_| {},
        &mut on_line,
    )
    .await
    .map_err(|e| match e {
        supervisor::SpawnError::Fence(missing, fix) => Error::SandboxUnavailable { missing, fix },
        e => Error::Internal(format!("cannot run the check command: {e}")),
    })?;
    let _ = std::fs::remove_file(&stderr);
    let lines: Vec<String> = tail.into_iter().collect();
    let shown = if lines.is_empty() {
        String::from("(no output)")
    } else {
        lines.join("\n")
    };
    let result = match finished.end {
        EndReason::Interrupted(signal) => return Err(Error::Interrupted { signal }),
        EndReason::StageTimeout | EndReason::IdleTimeout => Failed(format!(
            "check `{command}` timed out after {}; last output:\n{shown}",
            crate::text::duration(timeout)
        )),
        _ if finished.exit_code == Some(0) => CheckResult::Passed,
        _ => Failed(format!(
            "check `{command}` failed ({}); last output:\n{shown}",
            match finished.exit_code {
                Some(code) => format!("exit {code}"),
                None => "killed by a signal".to_string(),
            }
        )),
    };
    Ok((result, finished.fence))
}

use CheckResult::Failed;

/// Runs `command` in `cwd` for task `it` as checks run — fenced as checks are, bounded by
/// `--check-timeout`, its output in `log` — and tells what the fence denied it as `who`'s (the
/// check, the tests, a must-have), noted on the task for its review. The check gate, the red
/// and green checks of tests first and the `run` must-haves all run so.
pub(super) async fn run_for_task(
    guard: &SpecGuard<'_, '_>,
    it: &mut TaskRun,
    (command, cwd): (&str, &Path),
    log: &Path,
    who: &str,
) -> Result<CheckResult> {
    let fence = crate::pipeline::fence::checks_fence(guard.cx);
    let timeout = guard.cx.settings.check_timeout;
    // Bound first: a temporary in the awaiting statement would be held twice.
    let check = run(command, cwd, timeout, log, guard.cx.interrupt, fence);
    let (result, denied) = guard.after_await(check).await?;
    let said = crate::pipeline::fence::fence_denied(
        guard.cx,
        guard.teller,
        Some(&it.title),
        who,
        denied.as_ref(),
    );
    it.heard_denied(said);
    Ok(result)
}

/// Runs the baseline check `command` in the run's work tree before any task, as checks run
/// (fenced, bounded by `--check-timeout`, its output in the baseline log), and tells what the
/// fence denied it.
pub(super) async fn run_baseline(guard: &SpecGuard<'_, '_>, command: &str) -> Result<CheckResult> {
    let cx = guard.cx;
    let fence = crate::pipeline::fence::checks_fence(cx);
    let (top, log) = (cx.ws.repo.top(), cx.ws.state_dir.baseline_log());
    let check = run(
        command,
        top,
        cx.settings.check_timeout,
        &log,
        cx.interrupt,
        fence,
    );
    let (result, denied) = guard.after_await(check).await?;
    crate::pipeline::fence::fence_denied(cx, guard.teller, None, "baseline check", denied.as_ref());
    Ok(result)
}

/// Runs the check gate — the task's own Check command as it was when the task started,
/// else `--check`; `Some(end)` when it failed.
pub(super) async fn check_gate(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    let Some(command) = it
        .start
        .check
        .clone()
        .or_else(|| guard.cx.settings.check.clone())
    else {
        return Ok(None);
    };
    lock.set_phase(Phase::Check)?;
    guard.teller.emit(RunEvent::Told(Told::CheckStarted {
        command: command.clone(),
    }));
    let result = run_for_task(
        guard,
        it,
        (&command, guard.cx.ws.repo.top()),
        &guard.cx.ws.state_dir.check_log(),
        "check",
    )
    .await?;
    crate::pipeline::stage::runner::remake_state_dir(
        &guard.cx.ws.state_dir,
        guard.teller,
        "during the check",
    )?;
    guard.teller.emit(RunEvent::Check {
        task: Some(it.title.clone()),
        command,
        passed: result == CheckResult::Passed,
        output: match &result {
            CheckResult::Failed(note) => Some(note.clone()),
            CheckResult::Passed => None,
        },
    });
    let attempts = guard.attempts(it)?;
    match decide::after_check(result, &attempts, guard.cx.settings.max_attempts) {
        Next::End(decision) => super::end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(()) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passing_and_failing_checks() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("check.log");
        let none = Interrupt::none();
        let t = Duration::from_secs(30);
        assert_eq!(
            run("true", dir.path(), t, &log, &none, None)
                .await
                .unwrap()
                .0,
            CheckResult::Passed
        );
        let (failed, _) = run(
            "echo out; echo err >&2; exit 3",
            dir.path(),
            t,
            &log,
            &none,
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            failed,
            Failed(
                "check `echo out; echo err >&2; exit 3` failed (exit 3); last output:\nout\nerr"
                    .into()
            )
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "out\nerr\n");
    }
}
