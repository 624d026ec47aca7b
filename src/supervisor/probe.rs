//! Bounded short commands: git hooks, clean filters, signing programs — run to their end or
//! stopped at a time limit, never left behind.
//!
//! The decision a reader must know: like an agent, a probe is the leader of its own process
//! group, and on timeout the whole group gets SIGTERM, [`PROBE_GRACE`], then SIGKILL, and the
//! leader is reaped — so a hook that hangs in a grandchild (`npx` → `node` → a watcher) cannot
//! hang kern. A probe that exits by itself keeps its group: git leaves a hook's background
//! work alone, and so does kern. Output goes to files, never pipes, so a background process
//! holding the output open cannot block the wait. This is synchronous (a waiter thread per
//! probe): callers are the commit path, which has nothing else to do meanwhile.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::identity::group_alive;

/// How long a timed-out probe's group gets between SIGTERM and SIGKILL.
pub(crate) const PROBE_GRACE: Duration = Duration::from_secs(2);

/// How much of a probe's captured output is kept.
pub(crate) const OUTPUT_TAIL: u64 = 4096;

/// One bounded command.
#[derive(Debug)]
pub(crate) struct Probe {
    /// The program (looked up on PATH when it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working folder.
    pub cwd: PathBuf,
    /// Variables set on top of kern's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the environment it inherits.
    pub env_remove: Vec<OsString>,
    /// Its stdin; `None` is `/dev/null`.
    pub stdin: Option<File>,
    /// Where its stdout goes; `None` captures it with stderr, in order, into the output tail.
    pub stdout: Option<File>,
    /// The time limit.
    pub timeout: Duration,
    /// The fence it runs in (a git hook runs the code of the work tree); `None`: unfenced.
    pub fence: Option<crate::sandbox::Fence>,
}

impl Probe {
    /// `program args…` in `cwd` with no stdin, output captured, bounded by `timeout`.
    pub(crate) fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
        cwd: impl Into<PathBuf>,
        timeout: Duration,
    ) -> Probe {
        Probe {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: None,
            stdout: None,
            timeout,
            fence: None,
        }
    }

    /// `sh -c script` in `cwd`, as git runs filter drivers and `core.editor`-like commands.
    pub(crate) fn shell(script: &str, cwd: impl Into<PathBuf>, timeout: Duration) -> Probe {
        Probe::new("sh", ["-c", script], cwd, timeout)
    }
}

/// How a probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeEnd {
    /// It exited (or a signal it did not get from kern ended it).
    Exited(ExitStatus),
    /// It ran past its time limit and its group was stopped.
    TimedOut(Duration),
}

impl ProbeEnd {
    /// True for exit status 0.
    pub(crate) fn success(&self) -> bool {
        matches!(self, ProbeEnd::Exited(status) if status.success())
    }

    #[cfg(test)]
    /// The exit code, when it exited normally.
    pub(crate) fn code(&self) -> Option<i32> {
        match self {
            ProbeEnd::Exited(status) => status.code(),
            ProbeEnd::TimedOut(_) => None,
        }
    }

    /// `exit status 1`, `killed by signal 9`, `stopped after 10m (time limit)`.
    pub(crate) fn describe(&self) -> String {
        match self {
            ProbeEnd::Exited(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit status {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "ended abnormally".to_string(),
            },
            ProbeEnd::TimedOut(limit) => format!(
                "stopped after {} (time limit)",
                humantime::format_duration(*limit)
            ),
        }
    }
}

/// What a finished probe left.
#[derive(Debug)]
pub(crate) struct ProbeOutput {
    /// How it ended.
    pub end: ProbeEnd,
    /// The last [`OUTPUT_TAIL`] bytes of its captured output (stderr, and stdout when it was
    /// not redirected), decoded lossily, starting at a line, trailing whitespace removed.
    pub output: String,
    /// What its fence denied, when it ran in one.
    pub fence: Option<crate::sandbox::FenceReport>,
}

/// Runs `probe` to its end or its time limit. `Err` means it could not be started (the
/// program is missing, not executable, or the working folder is gone).
pub(crate) fn run(probe: Probe) -> std::io::Result<ProbeOutput> {
    let mut log = tempfile::tempfile()?;
    let fenced = match &probe.fence {
        Some(fence) => Some(fenced(&probe, fence)?),
        None => None,
    };
    let mut command = match &fenced {
        Some((_, fenced)) => {
            let mut command = Command::new(&fenced.program);
            command
                .args(&fenced.args)
                .env_clear()
                .envs(fenced.env.iter().map(|(k, v)| (k, v)));
            command
        }
        None => {
            let mut command = Command::new(&probe.program);
            command.args(&probe.args);
            for name in &probe.env_remove {
                command.env_remove(name);
            }
            command.envs(probe.env.iter().map(|(k, v)| (k, v)));
            command
        }
    };
    command
        .current_dir(&probe.cwd)
        .stderr(Stdio::from(log.try_clone()?))
        .process_group(0);
    command.stdin(match probe.stdin {
        Some(file) => Stdio::from(file),
        None => Stdio::null(),
    });
    command.stdout(match probe.stdout {
        Some(file) => Stdio::from(file),
        None => Stdio::from(log.try_clone()?),
    });
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the closure only makes async-signal-safe system calls (prctl, getppid).
        unsafe {
            command.pre_exec(move || super::die_with_parent(parent));
        }
    }
    if let Some(fd) = fenced.as_ref().and_then(|(_, c)| c.inherit) {
        // SAFETY: the closure only calls fcntl(2), which is async-signal-safe.
        unsafe {
            command.pre_exec(move || crate::sandbox::session::inherit(fd));
        }
    }
    let mut child = command.spawn()?;
    let pgid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let end = match rx.recv_timeout(probe.timeout) {
        Ok(status) => ProbeEnd::Exited(status?),
        Err(RecvTimeoutError::Timeout) => {
            stop_group(pgid, &rx);
            ProbeEnd::TimedOut(probe.timeout)
        }
        Err(RecvTimeoutError::Disconnected) => {
            return Err(std::io::Error::other(
                "the probe's waiter thread ended early",
            ));
        }
    };
    let _ = waiter.join();
    let fence = match fenced {
        Some((session, _)) => Some(session.finish().map_err(|failure| {
            std::io::Error::other(format!(
                "kern's fence cannot be made here: {} — {}",
                failure.message,
                crate::sandbox::preflight::fix_for(&failure.cause)
            ))
        })?),
        None => None,
    };
    Ok(ProbeOutput {
        end,
        output: read_tail(&mut log, OUTPUT_TAIL),
        fence,
    })
}

/// The session and command that run `probe` inside `fence`: its variables on top of the
/// environment the fence passes, less the ones it removes.
fn fenced(
    probe: &Probe,
    fence: &crate::sandbox::Fence,
) -> std::io::Result<(
    crate::sandbox::session::Session,
    crate::sandbox::session::Command,
)> {
    use crate::sandbox::session::{Process, Session, StartError};
    let lossy = |s: &OsString| s.to_string_lossy().into_owned();
    let args: Vec<String> = probe.args.iter().map(lossy).collect();
    let env: Vec<(String, String)> = probe
        .env
        .iter()
        .map(|(k, v)| (lossy(k), lossy(v)))
        .collect();
    let remove: Vec<String> = probe.env_remove.iter().map(lossy).collect();
    let program = std::path::PathBuf::from(&probe.program);
    let process = Process {
        program: &program,
        args: &args,
        env: &env,
        remove: &remove,
        cwd: &probe.cwd,
    };
    Session::start(fence, &process).map_err(|e| match e {
        StartError::NotFound(p) => std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("`{}` not found", p.display()),
        ),
        StartError::NotExecutable(p) => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("`{}` is not executable", p.display()),
        ),
        StartError::Prepare(what) => std::io::Error::other(what),
    })
}

/// SIGTERM to the group, up to [`PROBE_GRACE`] for the leader and the rest of the group,
/// SIGKILL to whatever is left; returns once the leader is reaped.
fn stop_group(pgid: i32, leader: &mpsc::Receiver<std::io::Result<ExitStatus>>) {
    signal_group(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + PROBE_GRACE;
    let mut reaped = leader.recv_timeout(PROBE_GRACE).is_ok();
    while reaped && group_alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    signal_group(pgid, Signal::SIGKILL);
    if !reaped {
        reaped = leader.recv().is_ok();
    }
    tracing::debug!(pgid, reaped, "probe stopped at its time limit");
}

/// Signals the whole group; a group that is already gone is what we want.
fn signal_group(pgid: i32, signal: Signal) {
    if let Err(e) = killpg(Pid::from_raw(pgid), signal)
        && e != Errno::ESRCH
    {
        tracing::warn!(pgid, %signal, error = %e, "cannot signal a probe's process group");
    }
}

/// The last `max` bytes of `file` as text, starting at a line when one starts near the cut.
pub(crate) fn read_tail(file: &mut File, max: u64) -> String {
    let len = file.seek(SeekFrom::End(0)).unwrap_or(0);
    let start = len.saturating_sub(max);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = if start > 0 {
        match text.find('\n') {
            Some(nl) => &text[nl + 1..],
            None => &text[..],
        }
    } else {
        &text[..]
    };
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_tail_starts_at_a_line() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"first line\nsecond line\nthird\n").unwrap();
        assert_eq!(read_tail(&mut f, 1000), "first line\nsecond line\nthird");
        assert_eq!(read_tail(&mut f, 15), "third");
    }

    #[test]
    fn output_and_exit_status_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(Probe::shell(
            "echo out; echo err >&2; exit 3",
            dir.path(),
            Duration::from_secs(30),
        ))
        .unwrap();
        assert_eq!(out.end.code(), Some(3));
        assert_eq!(out.end.describe(), "exit status 3");
        assert_eq!(out.output, "out\nerr");
    }

    #[test]
    fn stdin_and_stdout_can_be_files() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, "hello\n").unwrap();
        let mut probe = Probe::shell("tr a-z A-Z", dir.path(), Duration::from_secs(30));
        probe.stdin = Some(File::open(&input).unwrap());
        let mut stdout = tempfile::tempfile().unwrap();
        probe.stdout = Some(stdout.try_clone().unwrap());
        let out = run(probe).unwrap();
        assert!(out.end.success());
        assert_eq!(read_tail(&mut stdout, 100), "HELLO");
    }

    #[test]
    fn a_missing_program_cannot_start() {
        let dir = tempfile::tempdir().unwrap();
        let probe = Probe::new(
            "/nonexistent/kern-probe",
            Vec::<String>::new(),
            dir.path(),
            Duration::from_secs(1),
        );
        let e = run(probe).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_hung_group_is_stopped_at_the_limit_grandchild_included() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        // The grandchild ignores SIGTERM, so only the group SIGKILL can end it.
        let script = format!(
            "sh -c 'trap \"\" TERM; echo $$ > {}; exec sleep 300' & wait",
            pid_file.display()
        );
        let started = Instant::now();
        let out = run(Probe::shell(
            &script,
            dir.path(),
            Duration::from_millis(300),
        ))
        .unwrap();
        assert_eq!(out.end, ProbeEnd::TimedOut(Duration::from_millis(300)));
        assert!(out.end.describe().starts_with("stopped after 300ms"));
        assert!(started.elapsed() < Duration::from_secs(60), "bounded");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::supervisor::identity::pid_alive(pid) && Instant::now() < deadline {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.contains(") Z ") {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z "),
            "grandchild alive: {stat}"
        );
    }
}
