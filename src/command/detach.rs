//! `kern … --detach`: starts the same night in the background, watched — a `kern watch` with
//! the same arguments, which starts the run (DESIGN.md section 20) — and returns once the run
//! holds the lock, printing the watchdog's pid (stdout, for scripts; `kill PID` stops the
//! night) and how to follow it (stderr).
//!
//! The decision a reader must know: the background process is kern itself, started again as
//! `kern watch` with the same arguments (`--detach` replaced by the hidden `--detached`) in a
//! new session (`setsid`: no controlling terminal, so closing this one cannot reach it), stdin
//! from `/dev/null` and stdout and stderr appended to `run.log` — where the reporters of the
//! watchdog and the run write their lines anyway, so `kern log -f` follows them. If it ends
//! before the run takes the lock (another watchdog watches, SPEC.md is invalid), this command
//! says so and exits with its code. A run already going without its watchdog is adopted.

use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::repository::Repository;
use crate::settings::Settings;
use crate::state::lock::RunLock;

/// How long the background run gets to take the lock before this command returns anyway.
const START_LIMIT: Duration = Duration::from_secs(10);

/// Starts the run in the background.
pub(crate) fn run(settings: &Settings) -> Result<()> {
    let repo = Repository::discover(&settings.cwd)?;
    let state_dir = crate::workspace::state_dir_of(settings, &repo)?;
    state_dir.create()?;
    let log_path = state_dir.output_log();
    crate::state::rotating::mark_start(&log_path);
    let log = crate::private_file::append(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let stderr = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("the kern executable", e))?;
    let args: Vec<&String> = settings
        .argv
        .iter()
        .skip(1)
        .filter(|a| a.as_str() != "--detach")
        .collect();
    let mut command = Command::new(&exe);
    command
        .arg("watch")
        .args(args)
        .arg("--detached")
        .current_dir(&settings.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(stderr));
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = command.spawn().map_err(|e| Error::io(&exe, e))?;
    let pid = child.id();
    let lock_path = repo.run_lock_path();
    let deadline = Instant::now() + START_LIMIT;
    let mut running = None;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let code = status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1));
            if code == 0 {
                break;
            }
            return Err(Error::DetachedRunEnded {
                code,
                log: log_path,
                tail: tail(
                    &crate::private_file::read_to_string(&state_dir.output_log())
                        .unwrap_or_default(),
                ),
            });
        }
        if let Some(run) = watched_run(&state_dir.watch_record(), pid)
            && RunLock::inspect(&lock_path).is_some_and(|(record, live)| live && record.pid == run)
        {
            running = Some(run);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = writeln!(std::io::stdout(), "{pid}");
    if !settings.quiet {
        let watching = running.map_or_else(String::new, |run| {
            format!(", watching the run (pid {run}): it starts it again if it dies or stalls")
        });
        let _ = writeln!(
            std::io::stderr(),
            "kern: running in the background as pid {pid} — follow it with `kern log -f`, see where it is with `kern status`, stop it with `kill {pid}`{watching}; its lines go to {}",
            log_path.display()
        );
    }
    Ok(())
}

/// The run the watchdog `pid` watches now, as its `watch.json` says.
fn watched_run(record: &std::path::Path, pid: u32) -> Option<i32> {
    let record = crate::state::watch::WatchRecord::load(record)?;
    (u32::try_from(record.pid).ok() == Some(pid))
        .then_some(record.run)
        .flatten()
        .map(|run| run.pid)
}

/// The last lines of the log, for a run that ended at once.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}
