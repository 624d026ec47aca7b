//! Keeps the machine from sleeping while a run is active, where the system offers a way:
//! `systemd-inhibit` on Linux (a logind sleep and idle lock), `caffeinate` on macOS. Where
//! neither exists, or the one there refuses, kern says nothing. `systemd-inhibit` is only
//! tried where systemd runs (`/run/systemd/system` exists): in a container it is often
//! installed but can only fail, which would cost every run a wait.
//!
//! The decision a reader must know: the inhibitor is tied to kern's pid, so it cannot outlive
//! kern however kern ends — `systemd-inhibit … tail --pid=<kern> -f /dev/null` and
//! `caffeinate -i -w <kern>` both end by themselves when kern's process is gone (within a
//! second); a run that ends normally stops it at once (SIGTERM to its own process group).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long an inhibitor gets to refuse (exit) before kern counts it as holding.
const SETTLE: Duration = Duration::from_millis(300);

/// A running inhibitor; dropping it ends it.
#[derive(Debug)]
pub(crate) struct Awake {
    child: Child,
    /// The tool's name, for the message.
    pub tool: &'static str,
}

impl Awake {
    /// Starts the system's inhibitor for this process, looking for it on `path_var` (the
    /// `PATH` value); `None` when there is none or it refused.
    pub(crate) fn keep(path_var: Option<&std::ffi::OsStr>, why: &str) -> Option<Awake> {
        let systemd = Path::new("/run/systemd/system").is_dir();
        let (tool, program, args) = plan(path_var, systemd, std::process::id(), why)?;
        let mut child = Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| tracing::debug!(tool, error = %e, "cannot start the sleep inhibitor"))
            .ok()?;
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => {
                    tracing::debug!(tool, %status, "the sleep inhibitor refused");
                    return None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => return None,
            }
        }
        Some(Awake { child, tool })
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// The inhibitor to run for process `pid`: its name, path and arguments; `None` when the
/// system offers none (`systemd` says whether systemd runs).
fn plan(
    path_var: Option<&std::ffi::OsStr>,
    systemd: bool,
    pid: u32,
    why: &str,
) -> Option<(&'static str, PathBuf, Vec<String>)> {
    if systemd && let Some(p) = find("systemd-inhibit", path_var) {
        return Some((
            "systemd-inhibit",
            p,
            vec![
                "--what=sleep:idle".into(),
                "--who=kern".into(),
                format!("--why={why}"),
                "--mode=block".into(),
                "tail".into(),
                format!("--pid={pid}"),
                "-f".into(),
                "/dev/null".into(),
            ],
        ));
    }
    let p = find("caffeinate", path_var)?;
    Some((
        "caffeinate",
        p,
        vec!["-i".into(), "-w".into(), pid.to_string()],
    ))
}

/// `name` in the folders of `path_var`, when it is an executable file there.
pub(crate) fn find(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fake(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn nothing_there_or_a_refusal_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Awake::keep(Some(dir.path().as_os_str()), "test").is_none());
        fake(dir.path(), "caffeinate", "echo 'no' >&2; exit 1");
        assert!(Awake::keep(Some(dir.path().as_os_str()), "test").is_none());
    }

    #[test]
    fn systemd_inhibit_where_systemd_runs_tied_to_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), "systemd-inhibit", "exit 0");
        fake(dir.path(), "caffeinate", "exit 0");
        let path = Some(dir.path().as_os_str());
        let (tool, program, args) = plan(path, true, 42, "kern runs").unwrap();
        assert_eq!(
            (tool, program),
            ("systemd-inhibit", dir.path().join("systemd-inhibit"))
        );
        assert_eq!(
            args.join(" "),
            "--what=sleep:idle --who=kern --why=kern runs --mode=block tail --pid=42 -f /dev/null"
        );
        // No systemd (a container): systemd-inhibit could only fail.
        let (tool, _, args) = plan(path, false, 42, "kern runs").unwrap();
        assert_eq!((tool, args.join(" ").as_str()), ("caffeinate", "-i -w 42"));
        let empty = tempfile::tempdir().unwrap();
        assert!(plan(Some(empty.path().as_os_str()), true, 42, "x").is_none());
    }

    #[test]
    fn a_holding_inhibitor_is_tied_to_this_process_and_ended_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let args = dir.path().join("args");
        fake(
            dir.path(),
            "caffeinate",
            &format!("echo \"$@\" > '{}'; exec sleep 300", args.display()),
        );
        // The fake was written just now: a fork of another test's thread may still hold it open
        // for writing, and its exec then fails with ETXTBSY — a test machine's race, not the
        // inhibitor's. A few tries; one that never starts fails the test.
        let awake = (0..50)
            .find_map(|_| {
                Awake::keep(Some(dir.path().as_os_str()), "test").or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    None
                })
            })
            .expect("the fake inhibitor never started");
        assert_eq!(awake.tool, "caffeinate");
        let pid = awake.child.id();
        assert_eq!(
            std::fs::read_to_string(&args).unwrap(),
            format!("-i -w {}\n", std::process::id())
        );
        drop(awake);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists() || {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                stat.contains(") Z")
            }
        );
    }
}
