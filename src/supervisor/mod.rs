//! Runs one agent process to its end: spawn in its own process group, feed stdin, stream
//! stdout, keep a stderr tail, enforce the time limits, stop, kill and reap.
//!
//! The decision a reader must know: **the process group is the unit**. The agent is started as
//! the leader of a new group, every signal goes to the whole group (`killpg`), and no member
//! outlives the run, so a grandchild the agent left in the background (a dev server, a
//! `sleep &`) never outlives the stage. When the leader exits by itself, the rest of its group
//! is SIGKILLed at once. Stopping is always SIGTERM to the group, [`STOP_GRACE`] (for the
//! whole group, also after the leader is gone), SIGKILL to the group, reap. On Linux the
//! leader also gets `PR_SET_PDEATHSIG(SIGKILL)`, so it dies with kern in the common case; a
//! kern killed with SIGKILL leaves the rest of the group to [`ProcessGroup::stop_if_same`],
//! called by the next kern that takes over the stale lock.
//!
//! This module knows nothing about stages or agents: it runs an [`Invocation`] and hands each
//! stdout line to the caller's callback, which answers with a [`LineAction`]. Nor about
//! namespaces: an invocation that names a fence is started as the sandbox's session says
//! (`sandbox::session`), whose process is then the group's leader like any other, and what the
//! fence denied comes back in [`Finished::fence`].
//!
//! Streams, with bounded memory whatever the agent prints (the line splitter and the stderr
//! tail live in `streams.rs`):
//! - stdout is read in chunks and written to [`StreamFiles::stdout`] byte for byte as it
//!   arrives (every line whole, however long; a last line without a newline stays without
//!   one). Each line goes to the callback without its `\n` (and without a `\r` before it),
//!   decoded lossily as UTF-8; a line longer than [`LINE_CAP`] reaches the callback cut to its
//!   first [`LINE_CAP`] bytes (it then will not parse as JSON), while the file keeps it whole.
//!   Every line reaches the callback, also lines that arrive while the agent is being stopped.
//! - stdin: the prompt is written while the output is read, then stdin is closed; a child
//!   that never reads it cannot block the run (a broken pipe is not an error).
//! - stderr: only the last `stderr_cap` bytes are kept; they are written to
//!   [`StreamFiles::stderr`] when the run ends, however it ends.
//! - both files hold what the agent saw and did: they are created `0600` (`private_file`).
//! - the idle timeout counts from the last stdout bytes (a long line still arriving is output).
//!
//! After the leader exits, the pipes are drained until every writer is gone; a descendant that
//! escaped the group (`setsid`) could hold them open forever, so draining gives up after
//! [`DRAIN_LIMIT`].

pub(crate) mod awake;
pub(crate) mod capped;
pub(crate) mod identity;
pub(crate) mod interrupt;
pub(crate) mod invocation;
pub(crate) mod probe;
pub(crate) mod reaper;
mod streams;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::supervisor::identity::{ProcessIdentity, pid_alive};
use crate::supervisor::interrupt::Interrupt;
pub(crate) use crate::supervisor::invocation::Invocation;
pub use crate::supervisor::invocation::Limits;
use crate::supervisor::streams::{LineSplitter, Tail};

/// How long a group gets between SIGTERM and SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);

/// The longest stdout line handed to the callback; longer lines are cut (the file keeps them).
pub const LINE_CAP: usize = 1 << 20;

/// The most of an agent's stdout a stage file keeps (DESIGN.md section 3): 64 MiB.
pub const STDOUT_CAP: u64 = 64 << 20;

/// How long the pipes are drained after the leader has exited and its group was killed.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How often a stopping group whose leader has exited is checked for being empty.
const GROUP_POLL: Duration = Duration::from_millis(20);

const READ_CHUNK: usize = 64 * 1024;

/// Where one run's output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFiles {
    /// Every stdout byte exactly as received (`stageN.jsonl`); created or truncated. Past
    /// `stdout_cap` only its head and tail are kept (see `capped`).
    pub stdout: PathBuf,
    /// How many bytes of stdout the file keeps at most.
    pub stdout_cap: u64,
    /// The tail of stderr (`stageN.stderr`), written when the run ends.
    pub stderr: PathBuf,
    /// How many bytes of stderr to keep (the last ones).
    pub stderr_cap: usize,
}

/// The caller's answer to one stdout line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineAction {
    /// Nothing to do.
    Continue,
    /// This was the final result event: the agent now has `result_grace` to exit.
    ResultSeen,
    /// Stop the agent now (for instance: an authentication failure is already certain).
    StopNow(String),
}

/// Why the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// The agent exited by itself.
    Exited,
    /// It ran longer than `stage_timeout` and was stopped.
    StageTimeout,
    /// It printed no stdout for `idle_timeout` and was stopped.
    IdleTimeout,
    /// It printed its result but did not exit within `result_grace`, and was stopped; the
    /// caller treats the stage as done.
    AfterResultGrace,
    /// The callback asked for a stop, with this reason.
    Stopped(String),
    /// SIGINT or SIGTERM (the number) reached kern and the agent was stopped. A signal that
    /// comes while another stop is already under way leaves that reason in place: callers
    /// check [`Interrupt::requested`] too.
    Interrupted(i32),
}

/// What a finished run looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The leader's exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the leader, when a signal did.
    pub signal: Option<i32>,
    /// Why the run ended.
    pub end: EndReason,
    /// From spawn to the end of draining.
    pub duration: Duration,
    /// The kept tail of stderr, decoded lossily.
    pub stderr_tail: String,
    /// How many bytes stdout carried.
    pub stdout_bytes: u64,
    /// Processes that escaped the group (`setsid`) and were stopped after it (see `reaper`).
    pub escaped: Vec<i32>,
    /// What the fence denied, when the invocation ran in one.
    pub fence: Option<crate::sandbox::FenceReport>,
}

/// A running agent's process group, as recorded in the run lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessGroup {
    /// The group id (the leader's pid).
    pub pgid: i32,
    /// The leader, with its start time, to tell it from a later process reusing the pid.
    pub leader: ProcessIdentity,
}

impl ProcessGroup {
    /// For a kern taking over a stale lock: stops the group the dead kern left behind, unless
    /// its pid now belongs to a different process. SIGTERM to the group, up to `grace` for it
    /// to go, SIGKILL to the group. Blocking. True when a group was found and stopped.
    ///
    /// A leader that is gone while its group lives on (orphaned grandchildren) still gets its
    /// group stopped: Linux never hands out a pid that is still some group's id, so that group
    /// can only be the agent's.
    pub fn stop_if_same(&self, grace: Duration) -> bool {
        if self.pgid <= 0 {
            return false;
        }
        if pid_alive(self.leader.pid) && !self.leader.is_running() {
            return false;
        }
        let group = Pid::from_raw(self.pgid);
        if killpg(group, Signal::SIGTERM).is_err() {
            return false;
        }
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if group_gone(self.pgid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        true
    }
}

/// Why a process could not be started (or its output file not created).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program does not exist (not on PATH, or a wrong path).
    #[error("`{}` not found — install it or put its folder on PATH", .0.display())]
    NotFound(PathBuf),
    /// The program exists but may not be executed.
    #[error("`{}`: permission denied — make it executable with `chmod +x`", .0.display())]
    PermissionDenied(PathBuf),
    /// Any other failure to start it (the path is the program, or the missing working folder).
    #[error("cannot start `{path}`: {error}", path = .0.display(), error = .1)]
    Other(PathBuf, #[source] std::io::Error),
    /// The stdout file could not be created; nothing was started.
    #[error("`{path}`: {error}", path = .0.display(), error = .1)]
    Output(PathBuf, #[source] std::io::Error),
    /// The fence could not be made around it (what happened, and the ways out); nothing ran
    /// unfenced.
    #[error("kern's fence cannot be made here: {0} — {1}")]
    Fence(String, String),
}

/// The session and command that run `inv` inside `fence` (see `sandbox::session`).
fn fenced_command(
    inv: &Invocation,
    fence: &crate::sandbox::Fence,
) -> Result<
    (
        crate::sandbox::session::Session,
        crate::sandbox::session::Command,
    ),
    SpawnError,
> {
    use crate::sandbox::session::{Process, Session, StartError};
    let process = Process {
        program: &inv.program,
        args: &inv.args,
        env: &inv.env,
        remove: &[],
        cwd: &inv.cwd,
    };
    Session::start(fence, &process).map_err(|e| match e {
        StartError::NotFound(path) => SpawnError::NotFound(path),
        StartError::NotExecutable(path) => SpawnError::PermissionDenied(path),
        StartError::Prepare(what) => {
            SpawnError::Fence(what, crate::sandbox::preflight::fix_for("other"))
        }
    })
}

/// Runs `inv` to its end under `limits`; see the module docs for streams and stopping.
/// `on_spawn` gets the new process group before any output is read (for the run lock);
/// `on_line` gets every stdout line. Returns once the leader is reaped, its group killed and
/// the pipes drained; an `Err` means nothing ran.
pub async fn run(
    inv: &Invocation,
    limits: &Limits,
    files: &StreamFiles,
    interrupt: &Interrupt,
    on_spawn: &mut dyn FnMut(ProcessGroup),
    on_line: &mut dyn FnMut(&str) -> LineAction,
) -> Result<Finished, SpawnError> {
    if !inv.cwd.is_dir() {
        return Err(SpawnError::Other(
            inv.cwd.clone(),
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the working folder does not exist",
            ),
        ));
    }
    let mut out = capped::CappedFile::create(&files.stdout, files.stdout_cap)
        .map_err(|e| SpawnError::Output(files.stdout.clone(), e))?;

    let fenced = match &inv.fence {
        Some(fence) => Some(fenced_command(inv, fence)?),
        None => None,
    };
    let mut command = match &fenced {
        Some((_, fenced)) => {
            let mut command = tokio::process::Command::new(&fenced.program);
            command
                .args(&fenced.args)
                .env_clear()
                .envs(fenced.env.iter().map(|(k, v)| (k, v)));
            command
        }
        None => {
            let mut command = tokio::process::Command::new(&inv.program);
            command
                .args(&inv.args)
                .envs(inv.env.iter().map(|(k, v)| (k, v)));
            command
        }
    };
    command
        .current_dir(&inv.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the closure only makes async-signal-safe system calls (prctl, getppid).
        unsafe {
            command.pre_exec(move || die_with_parent(parent));
        }
    }
    if let Some(fd) = fenced.as_ref().and_then(|(_, c)| c.inherit) {
        // SAFETY: the closure only calls fcntl(2), which is async-signal-safe.
        unsafe {
            command.pre_exec(move || crate::sandbox::session::inherit(fd));
        }
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| spawn_error(&inv.program, e))?;
    let Some(pid) = child.id().map(|p| p as i32) else {
        return Err(SpawnError::Other(
            inv.program.clone(),
            std::io::Error::other("the process was gone before its id could be read"),
        ));
    };
    let mut guard = GroupGuard { pgid: pid };
    let active = reaper::Active::register(pid);
    interrupt.add_child_group(pid);
    on_spawn(ProcessGroup {
        pgid: pid,
        leader: ProcessIdentity::of(pid),
    });

    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(SpawnError::Other(
            inv.program.clone(),
            std::io::Error::other("stdout or stderr was not captured"),
        ));
    };
    let child_stdin = child.stdin.take();
    let prompt: &[u8] = &inv.stdin;
    let stdin_writer = async move {
        if let Some(mut stdin) = child_stdin {
            // A child that exits without reading its stdin gives EPIPE: not our failure.
            if let Err(e) = stdin.write_all(prompt).await {
                tracing::debug!(error = %e, "stdin not fully delivered");
            }
            let _ = stdin.shutdown().await;
        }
    };
    tokio::pin!(stdin_writer);

    let stage_sleep = tokio::time::sleep_until(after(started, limits.stage_timeout));
    tokio::pin!(stage_sleep);
    let idle_sleep = tokio::time::sleep_until(after(started, limits.idle_timeout));
    tokio::pin!(idle_sleep);

    let mut out_buf = vec![0u8; READ_CHUNK];
    let mut err_buf = vec![0u8; READ_CHUNK];
    let mut lines = LineSplitter::new(LINE_CAP);
    let mut tail = Tail::new(files.stderr_cap);
    let mut stdout_bytes: u64 = 0;
    let mut out_failed = false;
    let (mut stdout_done, mut stderr_done, mut stdin_done) = (false, false, false);

    let mut exit_status: Option<ExitStatus> = None;
    let mut end: Option<EndReason> = None;
    let mut result_grace_at: Option<Instant> = None;
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;

    loop {
        if exit_status.is_some() && stdout_done && stderr_done && kill_at.is_none() {
            break;
        }
        let running = end.is_none() && exit_status.is_none();
        // What the stdout branch asks for, acted on after the select (it cannot stop the
        // group from inside the callback loop).
        let mut wanted: Option<EndReason> = None;
        tokio::select! {
            status = child.wait(), if exit_status.is_none() => {
                match status {
                    Ok(status) => exit_status = Some(status),
                    Err(e) => {
                        // Cannot happen for a child we spawned; never loop on it. The raw
                        // value reads as neither an exit code nor a signal: unknown.
                        tracing::warn!(error = %e, "waiting for the agent failed");
                        exit_status = Some(ExitStatus::from_raw(0x7f00));
                    }
                }
                let now = Instant::now();
                match kill_at {
                    // Not stopping: leftover members of the group (backgrounded
                    // grandchildren) die with the leader, at once.
                    None => kill_group(pid, Signal::SIGKILL),
                    // Stopping: the rest of the group keeps its grace to clean up.
                    Some(at) => drain_until = Some(at.max(now)),
                }
                drain_until = Some(drain_until.unwrap_or(now) + DRAIN_LIMIT);
            }
            () = sleep_opt(drain_until) => break,
            () = sleep_opt(kill_at) => {
                kill_group(pid, Signal::SIGKILL);
                kill_at = None;
            }
            () = tokio::time::sleep(GROUP_POLL), if exit_status.is_some() && kill_at.is_some() => {
                if group_gone(pid) {
                    kill_at = None;
                }
            }
            () = interrupt.wait(), if running => {
                wanted = Some(EndReason::Interrupted(interrupt.requested().unwrap_or(2)));
            }
            () = &mut stage_sleep, if running => wanted = Some(EndReason::StageTimeout),
            () = &mut idle_sleep, if running && result_grace_at.is_none() => {
                wanted = Some(EndReason::IdleTimeout);
            }
            () = sleep_opt(result_grace_at), if running => wanted = Some(EndReason::AfterResultGrace),
            read = stdout.read(&mut out_buf), if !stdout_done => {
                let n = match read {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the agent's stdout failed");
                        0
                    }
                };
                let mut deliver = |line: &[u8]| {
                    let action = on_line(&String::from_utf8_lossy(line));
                    if end.is_some() || exit_status.is_some() || wanted.is_some() {
                        return;
                    }
                    match action {
                        LineAction::Continue => {}
                        LineAction::ResultSeen => {
                            if result_grace_at.is_none() {
                                result_grace_at = Some(Instant::now() + limits.result_grace);
                            }
                        }
                        LineAction::StopNow(reason) => wanted = Some(EndReason::Stopped(reason)),
                    }
                };
                if n == 0 {
                    stdout_done = true;
                    lines.finish(&mut deliver);
                } else {
                    let chunk = &out_buf[..n];
                    stdout_bytes += n as u64;
                    // A short read means the pipe is drained: the agent is between outputs, so
                    // flush — `stageN.jsonl` then shows what arrived (for a person running
                    // `tail -f`, and for a kern killed with SIGKILL) at the cost of one write
                    // per pause, while a fast stream still fills the buffer before writing.
                    if !out_failed
                        && let Err(e) = out.write_all(chunk).and_then(|()| {
                            if n < out_buf.len() { out.flush() } else { Ok(()) }
                        })
                    {
                        tracing::warn!(path = %files.stdout.display(), error = %e, "cannot record the agent's stdout");
                        out_failed = true;
                    }
                    lines.feed(chunk, &mut deliver);
                    idle_sleep.as_mut().reset(after(Instant::now(), limits.idle_timeout));
                }
            }
            read = stderr.read(&mut err_buf), if !stderr_done => match read {
                Ok(0) | Err(_) => stderr_done = true,
                Ok(n) => tail.push(&err_buf[..n]),
            },
            () = &mut stdin_writer, if !stdin_done => stdin_done = true,
        }
        if let Some(reason) = wanted
            && end.is_none()
            && exit_status.is_none()
        {
            tracing::debug!(?reason, pgid = pid, "stopping the agent");
            end = Some(reason);
            kill_group(pid, Signal::SIGTERM);
            kill_at = Some(Instant::now() + STOP_GRACE);
        }
    }
    if kill_at.is_some() {
        // Draining gave up while the group was still in its grace.
        kill_group(pid, Signal::SIGKILL);
    }
    guard.disarm();
    interrupt.remove_child_group(pid);

    if let Err(e) = out.finish() {
        tracing::warn!(path = %files.stdout.display(), error = %e, "cannot record the agent's stdout");
    }
    let tail_bytes = tail.into_bytes();
    let written = crate::private_file::create(&files.stderr)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &tail_bytes));
    if let Err(e) = written {
        tracing::warn!(path = %files.stderr.display(), error = %e, "cannot record the agent's stderr");
    }
    let status = exit_status.unwrap_or_else(|| ExitStatus::from_raw(0x7f00));
    drop(active);
    let escaped = reaper::stop_escaped(STOP_GRACE);
    if !escaped.is_empty() {
        tracing::debug!(?escaped, "stopped processes that escaped the group");
    }
    let fence = match fenced {
        Some((session, _)) => Some(session.finish().map_err(|failure| {
            SpawnError::Fence(
                failure.message,
                crate::sandbox::preflight::fix_for(&failure.cause),
            )
        })?),
        None => None,
    };
    Ok(Finished {
        fence,
        exit_code: status.code(),
        signal: status.signal(),
        end: end.unwrap_or(EndReason::Exited),
        duration: started.elapsed(),
        stderr_tail: String::from_utf8_lossy(&tail_bytes).into_owned(),
        stdout_bytes,
        escaped,
    })
}

/// In the child between fork and exec: die with kern. If kern is already gone (it died before
/// the prctl took effect), give up instead of running unsupervised.
#[cfg(target_os = "linux")]
fn die_with_parent(parent: Pid) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
    if nix::unistd::getppid() != parent {
        return Err(std::io::Error::other(
            "kern exited before the agent started",
        ));
    }
    Ok(())
}

fn spawn_error(program: &Path, error: std::io::Error) -> SpawnError {
    match error.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(program.to_path_buf()),
        std::io::ErrorKind::PermissionDenied => SpawnError::PermissionDenied(program.to_path_buf()),
        _ => SpawnError::Other(program.to_path_buf(), error),
    }
}

/// Signals the whole group; a group that is already gone (ESRCH) is the outcome we want.
fn kill_group(pgid: i32, signal: Signal) {
    if let Err(e) = killpg(Pid::from_raw(pgid), signal)
        && e != Errno::ESRCH
    {
        tracing::warn!(pgid, %signal, error = %e, "cannot signal the agent's process group");
    }
}

/// True when no live process is left in the group (zombies do not count).
fn group_gone(pgid: i32) -> bool {
    !crate::supervisor::identity::group_alive(pgid)
}

/// `from + duration`, or a far future when that does not fit (a limit of "forever").
fn after(from: Instant, duration: Duration) -> Instant {
    from.checked_add(duration)
        .unwrap_or_else(|| from + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Sleeps until `at`, or forever when there is no deadline.
async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// SIGKILLs the group if `run` is left early (its future dropped): `kill_on_drop` alone would
/// kill only the leader and leave the grandchildren running.
struct GroupGuard {
    pgid: i32,
}

impl GroupGuard {
    fn disarm(&mut self) {
        self.pgid = 0;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.pgid > 0 {
            kill_group(self.pgid, Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_errors_read_in_house_style() {
        let cases = [
            (
                SpawnError::NotFound("claude".into()),
                "`claude` not found — install it or put its folder on PATH",
            ),
            (
                SpawnError::PermissionDenied("/x/agent".into()),
                "`/x/agent`: permission denied — make it executable with `chmod +x`",
            ),
            (
                SpawnError::Other("/x".into(), std::io::Error::other("boom")),
                "cannot start `/x`: boom",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
