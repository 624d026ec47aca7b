//! External programs for the doctor: found on PATH, and run bounded ([`probe`]).
//!
//! The decision a reader must know: every probe runs with no stdin in its own process group,
//! which is killed when its time is up, so a hanging agent CLI (or a child of it) cannot hang
//! the doctor.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long an agent CLI may take to answer `--version` or its login status.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first non-empty line of stdout, else of stderr, trimmed.
pub(super) fn first_line(stdout: &str, stderr: &str) -> String {
    stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(no output)")
        .to_string()
}

/// `name` looked up on PATH: the first existing executable file.
pub(crate) fn find_on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && is_executable(&m))
        })
}

pub(super) fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// How an external command ended.
#[derive(Debug)]
pub(crate) enum Probe {
    /// It exited (`code` is `None` when a signal ended it).
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// Its stdout, lossily decoded.
        stdout: String,
        /// Its stderr, lossily decoded.
        stderr: String,
    },
    /// It did not finish in time and its process group was killed.
    TimedOut(Duration),
    /// It could not be started.
    Failed(String),
}

impl Probe {
    /// What went wrong, for a message: `exited with 3: <first line>`, `did not answer…`.
    pub(super) fn failure(&self) -> String {
        match self {
            Probe::Exited {
                code,
                stdout,
                stderr,
            } => {
                let how = match code {
                    Some(code) => format!("exited with {code}"),
                    None => "was killed by a signal".to_string(),
                };
                format!("{how}: {}", first_line(stdout, stderr))
            }
            Probe::TimedOut(limit) => format!(
                "did not answer within {} and was stopped",
                crate::text::duration(*limit)
            ),
            Probe::Failed(why) => format!("could not be started: {why}"),
        }
    }
}

/// Runs `program args` in `cwd` with no stdin, in its own process group, for at most `limit`.
pub(crate) async fn probe(program: &Path, args: &[&str], cwd: &Path, limit: Duration) -> Probe {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Probe::Failed(e.to_string()),
    };
    let pgid = child.id().map(|id| id as i32);
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(output)) => Probe::Exited {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Ok(Err(e)) => Probe::Failed(e.to_string()),
        Err(_) => {
            // The whole group: a CLI that hangs may do so in a child of its own. The leader
            // itself is killed and reaped by `kill_on_drop` when the future is dropped.
            if let Some(pgid) = pgid {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Probe::TimedOut(limit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_prefers_stdout() {
        for (stdout, stderr, want) in [
            ("2.1.197 (Claude Code)\n", "", "2.1.197 (Claude Code)"),
            (
                "\n  \n",
                "Logged in using ChatGPT\n",
                "Logged in using ChatGPT",
            ),
            ("", "", "(no output)"),
        ] {
            assert_eq!(first_line(stdout, stderr), want);
        }
    }

    #[tokio::test]
    async fn a_hanging_probe_is_stopped_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let probe = probe(
            Path::new("sh"),
            &["-c", &script],
            dir.path(),
            Duration::from_secs(2),
        )
        .await;
        assert!(matches!(probe, Probe::TimedOut(_)), "{probe:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild got SIGKILL with its group; it is gone or a zombie awaiting its reaper.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten();
            if matches!(state, None | Some('Z')) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild {pid} still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[tokio::test]
    async fn probes_report_exit_codes_and_missing_programs() {
        let dir = tempfile::tempdir().unwrap();
        let p = probe(
            Path::new("sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            dir.path(),
            PROBE_TIMEOUT,
        )
        .await;
        assert_eq!(p.failure(), "exited with 3: out");
        let p = probe(
            Path::new("/nonexistent/agent"),
            &[],
            dir.path(),
            PROBE_TIMEOUT,
        )
        .await;
        assert!(matches!(p, Probe::Failed(_)), "{p:?}");
    }
}
