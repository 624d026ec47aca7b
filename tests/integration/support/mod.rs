//! Small helpers shared by the integration tests: process liveness polling, waiting for a file,
//! `/proc` memory figures, and shorthands for invocations and limits.
#![allow(dead_code)]

pub(crate) mod during;
pub(crate) mod fakes;
pub(crate) mod gate;
pub(crate) mod git;
pub(crate) mod http_server;
pub(crate) mod mock_model_api;
pub(crate) mod mock_responses_api;
pub(crate) mod project;
pub(crate) mod tools;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kern::testing::agent::Invocation;
use kern::testing::supervisor::Limits as StageLimits;

pub(crate) use project::kern_in;

/// The built `kern` binary, for a test that uses it as a program rather than as the command
/// under test: an agent wrapper script (`exec kern scripted-agent …`), a shell recipe, a tmux
/// pane, an `Invocation` for the supervisor. The one place that names `CARGO_BIN_EXE_kern`;
/// a run of kern under test goes through [`project::KernRun`] (`architecture.rs` checks both).
pub(crate) fn kern_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kern"))
}

/// `sh -c script` in `cwd`, with `stdin`.
pub(crate) fn sh(cwd: &Path, script: &str, stdin: &[u8]) -> Invocation {
    Invocation {
        program: PathBuf::from("sh"),
        args: vec!["-c".into(), script.into()],
        env: vec![],
        cwd: cwd.to_path_buf(),
        stdin: stdin.to_vec(),
        fence: None,
    }
}

/// Limits in milliseconds: stage timeout, idle timeout, result grace.
pub(crate) fn limits_ms(stage: u64, idle: u64, grace: u64) -> StageLimits {
    StageLimits {
        stage_timeout: Duration::from_millis(stage),
        idle_timeout: Duration::from_millis(idle),
        result_grace: Duration::from_millis(grace),
    }
}

/// Limits that never fire within a test.
pub(crate) fn generous() -> StageLimits {
    limits_ms(600_000, 600_000, 600_000)
}

/// True when `pid` is gone or a zombie (a zombie runs no code; whoever adopted it reaps it).
pub(crate) fn is_dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => !kern::testing::supervisor::identity::pid_alive(pid),
    }
}

/// Polls up to ten seconds for `pid` to be dead; the bound only keeps a broken build from
/// hanging the suite, it is not a timing assertion.
pub(crate) fn wait_dead(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if is_dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    is_dead(pid)
}

/// A word no other process on the machine has in its command line: a test gives it to a
/// process it starts inside kern's fence (whose pids are its own PID namespace's, so a pid
/// written from inside names another process outside) and finds that process by it.
pub(crate) fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("kern-test-marker-{}-{n}", std::process::id())
}

/// The live processes (not zombies) whose command line holds `word` as one argument.
pub(crate) fn holding(word: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|argv| argv.split(|&b| b == 0).any(|a| a == word.as_bytes()))
        })
        .filter(|pid| !is_dead(*pid))
        .collect()
}

/// Polls up to ten seconds for every process holding `word` to be gone; true when none is
/// left (the bound only keeps a broken build from hanging the suite).
pub(crate) fn wait_gone(word: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if holding(word).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    holding(word).is_empty()
}

/// Polls up to ten seconds for `path` to hold a pid, and returns it.
pub(crate) fn read_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS; false where not supported.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Sends SIGKILL to `pid`, ignoring errors (cleanup of processes a test left on purpose).
pub(crate) fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// A temporary `CODEX_HOME` that is not under a temporary folder: codex-cli 0.169.0 refuses to
/// create its helper binaries (among them `codex-linux-sandbox`, which its bubblewrap sandbox
/// executes) under one, and with bubblewrap installed every sandboxed command then fails with
/// `bwrap: execvp codex-linux-sandbox: No such file or directory` — so the codex changes
/// nothing. Cargo's target folder serves, unless the checkout itself is under `/tmp` (a CI
/// clone there); then a folder under `~/.cache/kern`.
pub(crate) fn codex_home() -> tempfile::TempDir {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let temporary = target.starts_with("/tmp") || target.starts_with(std::env::temp_dir());
    let base = if temporary {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
        home.join(".cache/kern/test-codex-homes")
    } else {
        target.to_path_buf()
    };
    std::fs::create_dir_all(&base).expect("a folder for CODEX_HOME");
    tempfile::Builder::new()
        .prefix("codex-home-")
        .tempdir_in(&base)
        .expect("temp CODEX_HOME")
}

/// Waits (up to a minute, a bound against a broken build only) for `path` to exist.
/// Removes a folder as a tmp cleaner does, while a running kern may still write into it:
/// a file made between the walk and the last `rmdir` is `DirectoryNotEmpty` (one renamed away,
/// `NotFound`), and the cleaner walks again. Any other error, or a folder that will not go within a minute, fails the test.
pub(crate) fn remove_tree_under_a_writer(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return,
            Err(_) if !path.exists() => return,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::NotFound
                ) =>
            {
                assert!(
                    Instant::now() < deadline,
                    "{} could not be removed: {e}",
                    path.display()
                );
            }
            Err(e) => panic!("removing {}: {e}", path.display()),
        }
    }
}

pub(crate) fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
