//! The supervisor with real processes: process groups and grandchildren, limits, stops,
//! interrupts, byte-exact streams, bounded memory, spawn errors.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use kern::testing::agent::Invocation;
use kern::testing::supervisor::Limits as StageLimits;
use kern::testing::supervisor::interrupt::Interrupt;
use kern::testing::supervisor::{
    self, EndReason, Finished, LINE_CAP, LineAction, ProcessGroup, SpawnError, StreamFiles,
};
use support::*;

fn files(dir: &Path, stderr_cap: usize) -> StreamFiles {
    StreamFiles {
        stdout_cap: kern::testing::supervisor::STDOUT_CAP,
        stdout: dir.join("stage2.jsonl"),
        stderr: dir.join("stage2.stderr"),
        stderr_cap,
    }
}

/// Runs `inv` and collects the lines; `action` answers each line.
async fn run_with(
    inv: &Invocation,
    limits: StageLimits,
    files: &StreamFiles,
    interrupt: &Interrupt,
    mut action: impl FnMut(&str) -> LineAction,
) -> (Result<Finished, SpawnError>, Vec<String>, Vec<ProcessGroup>) {
    let mut lines = Vec::new();
    let mut groups = Vec::new();
    let finished = supervisor::run(
        inv,
        &limits,
        files,
        interrupt,
        &mut |group| groups.push(group),
        &mut |line| {
            lines.push(line.to_string());
            action(line)
        },
    )
    .await;
    (finished, lines, groups)
}

async fn run_ok(
    inv: &Invocation,
    limits: StageLimits,
    files: &StreamFiles,
    action: impl FnMut(&str) -> LineAction,
) -> (Finished, Vec<String>) {
    let (finished, lines, groups) = run_with(inv, limits, files, &Interrupt::none(), action).await;
    let finished = finished.expect("the process starts");
    assert_eq!(groups.len(), 1, "on_spawn is called once");
    (finished, lines)
}

fn continue_always(_: &str) -> LineAction {
    LineAction::Continue
}

/// A grandchild that ignores SIGTERM (so only the group SIGKILL ends it) and writes its pid
/// once it does; the script goes on only after that, so no stop can come before the trap.
const STUBBORN_GRANDCHILD: &str = "sh -c 'trap \"\" TERM; echo $$ > gc.pid; exec sleep 300' & \
     while [ ! -s gc.pid ]; do sleep 0.01; done;";

#[tokio::test]
async fn a_grandchild_is_dead_after_a_stage_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{STUBBORN_GRANDCHILD} echo started; sleep 300");
    let inv = sh(dir.path(), &script, b"");
    let (finished, lines) = run_ok(
        &inv,
        // Long enough that the timeout cannot come before the grandchild is set up.
        limits_ms(3_000, 600_000, 600_000),
        &files(dir.path(), 1024),
        continue_always,
    )
    .await;
    assert_eq!(finished.end, EndReason::StageTimeout);
    assert_eq!(finished.exit_code, None);
    assert_eq!(finished.signal, Some(15), "the leader dies of the SIGTERM");
    assert_eq!(lines, vec!["started"]);
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn a_grandchild_is_dead_after_an_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{STUBBORN_GRANDCHILD} echo one; echo two; sleep 300");
    let inv = sh(dir.path(), &script, b"");
    let (finished, lines) = run_ok(
        &inv,
        limits_ms(600_000, 3_000, 600_000),
        &files(dir.path(), 1024),
        continue_always,
    )
    .await;
    assert_eq!(finished.end, EndReason::IdleTimeout);
    assert_eq!(finished.signal, Some(15));
    assert_eq!(lines, vec!["one", "two"]);
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn a_grandchild_holding_stdout_is_dead_after_the_leader_exits() {
    let dir = tempfile::tempdir().unwrap();
    // The grandchild keeps stdout open: without the group kill, the pipe would never close.
    let inv = sh(
        dir.path(),
        "sleep 300 & echo $! > gc.pid; echo done; exit 3",
        b"",
    );
    let (finished, lines) =
        run_ok(&inv, generous(), &files(dir.path(), 1024), continue_always).await;
    assert_eq!(finished.end, EndReason::Exited);
    assert_eq!(finished.exit_code, Some(3));
    assert_eq!(finished.signal, None);
    assert_eq!(lines, vec!["done"]);
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn a_leader_ignoring_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        "trap '' TERM; echo up; while :; do sleep 1; done",
        b"",
    );
    // Stopped once it says `up`, so its trap is surely set; every stop escalates the same way.
    let (finished, _) = run_ok(&inv, generous(), &files(dir.path(), 1024), |line| {
        if line == "up" {
            LineAction::StopNow("test".into())
        } else {
            LineAction::Continue
        }
    })
    .await;
    assert_eq!(finished.end, EndReason::Stopped("test".into()));
    assert_eq!(
        finished.signal,
        Some(9),
        "SIGTERM was ignored, SIGKILL ended it"
    );
}

#[tokio::test]
async fn a_stopped_group_keeps_its_grace_after_the_leader_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    // The leader dies of the SIGTERM at once; its grandchild needs a moment to clean up. The
    // grandchild says `ready` once its trap is set, and only then is the stop asked for.
    let script = "sh -c 'trap \"sleep 0.2; echo cleaned > cleaned.txt; exit 0\" TERM; \
                  echo $$ > gc.pid; echo ready; while :; do sleep 0.05; done' & sleep 300";
    let inv = sh(dir.path(), script, b"");
    let (finished, _) = run_ok(&inv, generous(), &files(dir.path(), 1024), |line| {
        if line == "ready" {
            LineAction::StopNow("test".into())
        } else {
            LineAction::Continue
        }
    })
    .await;
    assert_eq!(finished.end, EndReason::Stopped("test".into()));
    assert_eq!(finished.signal, Some(15));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cleaned.txt")).unwrap(),
        "cleaned\n",
        "the grandchild was killed before its SIGTERM handler finished"
    );
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn an_agent_hanging_after_its_result_is_stopped_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        r#"echo '{"type":"system"}'; echo '{"type":"result","result":"ok"}'; sleep 300"#,
        b"",
    );
    let (finished, lines) = run_ok(
        &inv,
        limits_ms(600_000, 600_000, 300),
        &files(dir.path(), 1024),
        |line| {
            if line.contains(r#""type":"result""#) {
                LineAction::ResultSeen
            } else {
                LineAction::Continue
            }
        },
    )
    .await;
    assert_eq!(finished.end, EndReason::AfterResultGrace);
    assert_eq!(finished.exit_code, None);
    assert_eq!(finished.signal, Some(15));
    assert_eq!(lines.len(), 2);
}

#[tokio::test]
async fn an_agent_exiting_within_the_result_grace_has_simply_exited() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(dir.path(), r#"echo '{"type":"result"}'; exit 0"#, b"");
    let (finished, _) = run_ok(
        &inv,
        limits_ms(600_000, 600_000, 600_000),
        &files(dir.path(), 1024),
        |_| LineAction::ResultSeen,
    )
    .await;
    assert_eq!(finished.end, EndReason::Exited);
    assert_eq!(finished.exit_code, Some(0));
}

#[tokio::test]
async fn stop_now_from_the_callback_stops_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        "echo before; echo auth-failed; sleep 300; echo never",
        b"",
    );
    let (finished, lines) = run_ok(&inv, generous(), &files(dir.path(), 1024), |line| {
        if line == "auth-failed" {
            LineAction::StopNow("authentication failed".into())
        } else {
            LineAction::Continue
        }
    })
    .await;
    assert_eq!(
        finished.end,
        EndReason::Stopped("authentication failed".into())
    );
    assert_eq!(finished.signal, Some(15));
    assert_eq!(lines, vec!["before", "auth-failed"]);
}

#[tokio::test]
async fn stdin_is_delivered_exactly_and_then_closed() {
    let dir = tempfile::tempdir().unwrap();
    // Larger than a pipe buffer, every byte value, no trailing newline.
    let prompt: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let inv = sh(dir.path(), "cat", &prompt);
    let files = files(dir.path(), 1024);
    let (finished, _) = run_ok(&inv, generous(), &files, continue_always).await;
    // `cat` only exits on end of input: reaching here with exit 0 proves stdin was closed.
    assert_eq!(finished.end, EndReason::Exited);
    assert_eq!(finished.exit_code, Some(0));
    assert_eq!(finished.stdout_bytes, prompt.len() as u64);
    assert_eq!(std::fs::read(&files.stdout).unwrap(), prompt);
}

#[tokio::test]
async fn a_child_that_never_reads_stdin_does_not_block_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        "echo ignored-input; exit 0",
        &vec![b'x'; 1 << 20],
    );
    let (finished, lines) =
        run_ok(&inv, generous(), &files(dir.path(), 1024), continue_always).await;
    assert_eq!(finished.exit_code, Some(0));
    assert_eq!(lines, vec!["ignored-input"]);
}

#[tokio::test]
async fn the_stdout_file_holds_every_byte_and_lines_arrive_without_terminators() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        r"printf 'one\r\ntwo\n\n\377bad utf8\nlast without newline'",
        b"",
    );
    let files = files(dir.path(), 1024);
    let (finished, lines) = run_ok(&inv, generous(), &files, continue_always).await;
    let expected: &[u8] = b"one\r\ntwo\n\n\xffbad utf8\nlast without newline";
    assert_eq!(std::fs::read(&files.stdout).unwrap(), expected);
    assert_eq!(finished.stdout_bytes, expected.len() as u64);
    assert_eq!(
        lines,
        vec!["one", "two", "", "\u{fffd}bad utf8", "last without newline"]
    );
}

#[tokio::test]
async fn the_stderr_tail_is_capped_and_keeps_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        "i=0; while [ $i -lt 2000 ]; do echo \"noise line $i\" >&2; i=$((i+1)); done; echo THE-END >&2",
        b"",
    );
    let files = files(dir.path(), 1000);
    let (finished, _) = run_ok(&inv, generous(), &files, continue_always).await;
    let kept = std::fs::read_to_string(&files.stderr).unwrap();
    assert_eq!(kept.len(), 1000);
    assert!(kept.ends_with("noise line 1999\nTHE-END\n"), "{kept}");
    assert_eq!(finished.stderr_tail, kept);
}

#[tokio::test]
async fn an_interrupt_stops_the_stage_and_the_group_is_registered_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{STUBBORN_GRANDCHILD} echo started; sleep 300");
    let inv = sh(dir.path(), &script, b"");
    let interrupt = Interrupt::none();
    let trigger = interrupt.clone();
    let mut registered = None;
    let (finished, lines, groups) = run_with(
        &inv,
        generous(),
        &files(dir.path(), 1024),
        &interrupt,
        |_| {
            // What the first Ctrl-C does; a second trigger would exit the test process.
            if registered.is_none() {
                registered = trigger.child_groups().first().copied();
                trigger.trigger(2);
            }
            LineAction::Continue
        },
    )
    .await;
    let finished = finished.unwrap();
    assert_eq!(finished.end, EndReason::Interrupted(2));
    assert_eq!(finished.signal, Some(15));
    assert_eq!(lines, vec!["started"]);
    assert_eq!(registered, Some(groups[0].pgid));
    assert_eq!(groups[0].pgid, groups[0].leader.pid);
    assert!(
        interrupt.child_groups().is_empty(),
        "cleared when the run ends"
    );
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn an_interrupt_that_came_before_the_run_stops_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let interrupt = Interrupt::none();
    interrupt.trigger(15);
    let inv = sh(dir.path(), "sleep 300", b"");
    let (finished, _, _) = run_with(
        &inv,
        generous(),
        &files(dir.path(), 1024),
        &interrupt,
        continue_always,
    )
    .await;
    assert_eq!(finished.unwrap().end, EndReason::Interrupted(15));
}

#[tokio::test]
async fn twenty_megabytes_pass_through_with_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    // 10 MB of short lines, then 10 MB more of one line that never ends (it is capped for the
    // callback, kept whole in the file).
    let inv = sh(
        dir.path(),
        "yes 01234567890123456789012345678901234567890 | head -c 10000000; head -c 10000000 /dev/zero | tr '\\000' x",
        b"",
    );
    let files = files(dir.path(), 1024);
    reset_peak_rss();
    let before = status_kib("VmRSS");
    let mut count = 0u64;
    let mut longest = 0usize;
    // Straight to `run`: the collecting helper would itself hold every line.
    let finished = supervisor::run(
        &inv,
        &generous(),
        &files,
        &Interrupt::none(),
        &mut |_| {},
        &mut |line| {
            count += 1;
            longest = longest.max(line.len());
            LineAction::Continue
        },
    )
    .await
    .unwrap();
    let peak = status_kib("VmHWM");
    assert_eq!(finished.exit_code, Some(0));
    assert_eq!(finished.stdout_bytes, 20_000_000);
    assert_eq!(std::fs::metadata(&files.stdout).unwrap().len(), 20_000_000);
    assert_eq!(count, 10_000_000 / 42 + 1);
    assert_eq!(longest, LINE_CAP);
    let grown = peak.saturating_sub(before);
    assert!(
        grown < 12 * 1024,
        "memory grew by {grown} KiB while streaming 20 MB"
    );
}

#[tokio::test]
async fn spawn_failures_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("agent.sh");
    std::fs::write(&not_executable, "#!/bin/sh\necho hi\n").unwrap();
    let mut missing = sh(dir.path(), "", b"");
    missing.program = dir.path().join("no-such-agent");
    let mut denied = missing.clone();
    denied.program = not_executable.clone();
    let no_cwd = sh(&dir.path().join("gone"), "true", b"");

    let (result, lines, groups) = run_with(
        &missing,
        generous(),
        &files(dir.path(), 1024),
        &Interrupt::none(),
        continue_always,
    )
    .await;
    assert!(
        matches!(result, Err(SpawnError::NotFound(ref p)) if *p == missing.program),
        "{result:?}"
    );
    assert!(lines.is_empty() && groups.is_empty());

    let (result, _, _) = run_with(
        &denied,
        generous(),
        &files(dir.path(), 1024),
        &Interrupt::none(),
        continue_always,
    )
    .await;
    assert!(
        matches!(result, Err(SpawnError::PermissionDenied(ref p)) if *p == not_executable),
        "{result:?}"
    );

    let (result, _, _) = run_with(
        &no_cwd,
        generous(),
        &files(dir.path(), 1024),
        &Interrupt::none(),
        continue_always,
    )
    .await;
    let error = result.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "cannot start `{}`: the working folder does not exist",
            dir.path().join("gone").display()
        )
    );
}

#[tokio::test]
async fn the_scripted_agent_grandchild_dies_when_the_agent_exits() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(
        &scenario,
        r#"{"default": {"implement": {"error": "spawn_grandchild", "pid_file": "gc.pid"}}}"#,
    )
    .unwrap();
    let inv = Invocation {
        program: kern_bin(),
        args: vec!["scripted-agent".into(), scenario.display().to_string()],
        env: vec![
            ("KERN_STAGE".into(), "implement".into()),
            ("KERN_TASK".into(), "Add a README".into()),
        ],
        cwd: dir.path().to_path_buf(),
        stdin: b"the prompt".to_vec(),
        fence: None,
    };
    let (finished, lines) = run_ok(&inv, generous(), &files(dir.path(), 1024), |line| {
        if line.starts_with(r#"{"type":"result""#) {
            LineAction::ResultSeen
        } else {
            LineAction::Continue
        }
    })
    .await;
    assert_eq!(finished.end, EndReason::Exited);
    assert_eq!(finished.exit_code, Some(0));
    assert!(
        lines
            .last()
            .unwrap()
            .contains(r#""structured_output":{"status":"SUCCESS""#)
    );
    let grandchild = read_pid(&dir.path().join("gc.pid"));
    assert!(wait_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn a_real_sigint_is_recorded_by_the_installed_listener() {
    // The only test in this binary that installs the listener: from here on SIGINT no longer
    // ends the test process, it is recorded.
    let interrupt = Interrupt::install().unwrap();
    assert_eq!(interrupt.requested(), None);
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(30), interrupt.wait()).await;
    assert!(waited.is_ok(), "the signal never arrived");
    assert_eq!(interrupt.requested(), Some(2));
}

/// Runs in a child process started by `a_second_signal_kills_the_group_and_exits_at_once`.
#[tokio::test]
#[ignore = "run only as the child of a_second_signal_kills_the_group_and_exits_at_once"]
// The sleeper is never waited for on purpose: the second signal ends this process first.
#[allow(clippy::zombie_processes)]
async fn second_signal_child() {
    let Some(pid_file) = std::env::var_os("KERN_TEST_SECOND_SIGNAL") else {
        return;
    };
    use std::os::unix::process::CommandExt;
    let interrupt = Interrupt::install().unwrap();
    let sleeper = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    std::fs::write(&pid_file, sleeper.id().to_string()).unwrap();
    interrupt.add_child_group(sleeper.id() as i32);
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
    interrupt.wait().await;
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    panic!("the second signal did not end the process");
}

#[test]
fn a_second_signal_kills_the_group_and_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "supervisor::second_signal_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KERN_TEST_SECOND_SIGNAL", &pid_file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(143), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "kern: a second SIGTERM — the agent was killed at once; the task resumes where it stopped on the next run"
        ),
        "{output:?}"
    );
    let sleeper = read_pid(&pid_file);
    assert!(
        wait_dead(sleeper),
        "the agent group survived the second signal"
    );
}

#[test]
fn stop_if_same_stops_a_leftover_group_but_never_a_reused_pid() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let spawn = || {
        std::process::Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap()
    };

    let mut other = spawn();
    let pid = other.id() as i32;
    let now = kern::testing::supervisor::identity::ProcessIdentity::of(pid);
    let reused = ProcessGroup {
        pgid: pid,
        leader: kern::testing::supervisor::identity::ProcessIdentity {
            pid,
            start_time: now.start_time.map(|t| t + 1),
        },
    };
    if now.start_time.is_some() {
        assert!(!reused.stop_if_same(Duration::from_millis(100)));
        assert!(
            other.try_wait().unwrap().is_none(),
            "a reused pid is left alone"
        );
    }
    let same = ProcessGroup {
        pgid: pid,
        leader: now,
    };
    assert!(same.stop_if_same(Duration::from_millis(500)));
    let status = other.wait().unwrap();
    assert!(status.signal().is_some(), "{status:?}");

    let gone = ProcessGroup {
        pgid: pid,
        leader: now,
    };
    assert!(
        !gone.stop_if_same(Duration::from_millis(100)),
        "nothing left to stop"
    );
}

/// Measures streaming throughput and peak memory: 100 MB through `run`. Run it alone:
/// `cargo test --release --test supervisor -- --ignored --nocapture throughput`.
#[tokio::test]
#[ignore = "a measurement, run by hand in release mode"]
async fn throughput_of_100_megabytes() {
    let dir = tempfile::tempdir().unwrap();
    let inv = sh(
        dir.path(),
        "yes '{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"lorem ipsum dolor sit amet\"}]}}' | head -c 100000000",
        b"",
    );
    let files = files(dir.path(), 64 * 1024);
    reset_peak_rss();
    let before = status_kib("VmRSS");
    let mut lines = 0u64;
    let started = Instant::now();
    let finished = supervisor::run(
        &inv,
        &generous(),
        &files,
        &Interrupt::none(),
        &mut |_| {},
        &mut |_| {
            lines += 1;
            LineAction::Continue
        },
    )
    .await
    .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(finished.stdout_bytes, 100_000_000);
    println!(
        "100 MB, {lines} lines in {seconds:.2} s = {:.0} MB/s; RSS before {} KiB, peak {} KiB",
        100.0 / seconds,
        before,
        status_kib("VmHWM")
    );
}
