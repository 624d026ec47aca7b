//! `kern __fence PLAN`: the three processes of the Linux fence (see `mod.rs`).
//!
//! The one decision a reader must know: whatever goes wrong before the command starts is
//! written, as one line `<cause>\t<what happened>`, to the plan's failure file, and the init
//! exits [`SETUP_FAILED`]; kern reads the file (never the command's output) to tell a fence
//! that could not be made from a command that failed, and turns the cause into the fix
//! (`preflight.rs`). A command that cannot be started (missing, not executable) ends the
//! init with 127 or 126 and a `kern: fence:` line on stderr, as a shell would.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use super::{lockdown, mounts, net, notify, watch};
use crate::sandbox::plan::{NetPlan, Plan};

/// The init's exit code when the fence could not be made (the reason is in the failure file).
pub(crate) const SETUP_FAILED: i32 = 125;

/// The user and group a kern started as root runs the fenced command as: `nobody`.
const NOBODY: u32 = 65534;

/// Why the fence could not be made: the cause kern turns into a fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// `kernel.unprivileged_userns_clone = 0`.
    UsernsOff,
    /// AppArmor restricts unprivileged user namespaces.
    AppArmor,
    /// `user.max_user_namespaces` is 0 (or used up).
    MaxUserns,
    /// Too many nested user namespaces.
    Nesting,
    /// The kernel has no user namespaces.
    NoUserns,
    /// Something refused the namespaces (a container's seccomp profile, a policy).
    Refused,
    /// The namespaces were made but a mount was refused (a container's masked `/proc`).
    Mount,
    /// Anything else.
    Other,
}

impl Cause {
    /// The tag written to the failure file.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Cause::UsernsOff => "userns-off",
            Cause::AppArmor => "apparmor",
            Cause::MaxUserns => "max-userns",
            Cause::Nesting => "nesting",
            Cause::NoUserns => "no-userns",
            Cause::Refused => "refused",
            Cause::Mount => "mount",
            Cause::Other => "other",
        }
    }
}

/// A failure before the command started.
struct Failed(Cause, String);

/// How the init ends.
enum Exit {
    Code(i32),
    Signal(i32),
}

/// The pid signals are forwarded to (the next process down).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let pid = FORWARD_TO.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

fn forward_signals_to(pid: Pid) {
    FORWARD_TO.store(pid.as_raw(), Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(forward),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in FORWARDED {
        // SAFETY: the handler only loads an atomic and calls kill(2).
        let _ = unsafe { sigaction(signal, &action) };
    }
}

/// Runs the init for the plan at `plan_path`; returns only with an exit code.
pub(crate) fn main(plan_path: &Path) -> i32 {
    let plan: Plan = match std::fs::read(plan_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(plan) => plan,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "kern: fence: cannot read `{}`: {e}",
                plan_path.display()
            );
            return SETUP_FAILED;
        }
    };
    let lent = plan.watch_fd.and_then(lent_descriptor);
    let failure = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(&plan.failure);
    match first(&plan, lent) {
        Ok(Exit::Code(code)) => code,
        Ok(Exit::Signal(signal)) => die_by(signal),
        Err(Failed(cause, message)) => {
            if let Ok(mut file) = failure {
                let _ = writeln!(file, "{}\t{message}", cause.tag());
            }
            let _ = writeln!(std::io::stderr(), "kern: fence: {message}");
            SETUP_FAILED
        }
    }
}

/// The descriptor kern lent under number `fd` (`Plan::watch_fd`), closed on exec from here on
/// (the command never inherits it); `None` when no descriptor has that number.
fn lent_descriptor(fd: i32) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(2) on a descriptor number; a closed one fails with EBADF.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
        return None;
    }
    // SAFETY: the descriptor is open (above), this process was started with it for the watch
    // and nothing else here owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Ends this process by `signal` (default action), as the command ended.
fn die_by(signal: i32) -> i32 {
    if let Ok(sig) = Signal::try_from(signal) {
        let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
        // SAFETY: restoring the default action.
        let _ = unsafe { sigaction(sig, &default) };
        let mut set = SigSet::empty();
        set.add(sig);
        let _ = set.thread_unblock();
        let _ = nix::sys::signal::raise(sig);
    }
    128 + signal
}

/// The cause of a failed `unshare`, from its error and the machine's settings.
fn unshare_cause(e: nix::Error) -> Failed {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|t| t.trim().to_string())
            .ok()
    };
    let (cause, what) = match e {
        nix::Error::ENOSPC => (
            Cause::MaxUserns,
            format!(
                "no user namespace may be made here: `user.max_user_namespaces` is {}",
                read("/proc/sys/user/max_user_namespaces").unwrap_or_else(|| "0".into())
            ),
        ),
        nix::Error::EUSERS => (
            Cause::Nesting,
            "user namespaces are nested too deeply here (kern runs inside 32 already)".into(),
        ),
        nix::Error::EINVAL | nix::Error::ENOSYS => (
            Cause::NoUserns,
            "this kernel makes no user namespaces (built without CONFIG_USER_NS)".into(),
        ),
        nix::Error::EPERM if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") => (
            Cause::UsernsOff,
            "user namespaces are off for unprivileged users: `kernel.unprivileged_userns_clone` is 0".into(),
        ),
        nix::Error::EPERM
            if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref()
                == Some("1") =>
        {
            (
                Cause::AppArmor,
                "AppArmor restricts unprivileged user namespaces: `kernel.apparmor_restrict_unprivileged_userns` is 1".into(),
            )
        }
        other => (
            Cause::Refused,
            format!(
                "the system refused to make a user namespace ({other}): a container's seccomp profile or a security policy forbids it"
            ),
        ),
    };
    Failed(cause, what)
}

/// The first process: namespaces, identity maps, mounts; then PID 1, waited for.
fn first(plan: &Plan, lent: Option<OwnedFd>) -> Result<Exit, Failed> {
    let other = |what: String| Failed(Cause::Other, what);
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let denials = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(&plan.denials)
        .map_err(|e| other(format!("cannot open `{}`: {e}", plan.denials.display())))?;
    let (life_r, life_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| other(format!("cannot make a pipe: {e}")))?;
    let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| other(format!("cannot make a pipe: {e}")))?;

    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC;
    if plan.network != NetPlan::Open {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(unshare_cause)?;
    let map = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| {
            Failed(
                Cause::Refused,
                format!("cannot write /proc/self/{file}: {e}"),
            )
        })
    };
    // The command keeps its own user, but never root: a kern started as root runs it as
    // `nobody` inside (the same files are its own). Root without capabilities is a state no
    // tool expects, and one that a sandbox of the agent's own (Codex's bubblewrap) takes for
    // privileged and fails in.
    let (inside_uid, inside_gid) = if uid.is_root() {
        (NOBODY, NOBODY)
    } else {
        (uid.as_raw(), gid.as_raw())
    };
    map("setgroups", "deny".into())?;
    map("uid_map", format!("{inside_uid} {uid} 1"))?;
    map("gid_map", format!("{inside_gid} {gid} 1"))?;

    let prepared = mounts::prepare(&plan.mounts).map_err(|e| Failed(Cause::Mount, e))?;
    let placeholders = mounts::apply(&prepared).map_err(|e| Failed(Cause::Mount, e))?;
    let watch = watch::watch(&placeholders, lent);
    drop(prepared);

    // SAFETY: this process is single-threaded (a fresh exec of kern that started no thread),
    // so the child may do anything.
    match unsafe { fork() } {
        Err(e) => Err(other(format!("cannot fork: {e}"))),
        Ok(ForkResult::Child) => {
            drop(status_r);
            drop(life_w);
            let code = pid_one(plan, &life_r, status_w, denials, watch);
            std::process::exit(code);
        }
        Ok(ForkResult::Parent { child }) => {
            drop(status_w);
            drop(life_r);
            drop(watch);
            forward_signals_to(child);
            let status = loop {
                match waitpid(child, None) {
                    Err(nix::Error::EINTR) => {}
                    Err(e) => return Err(other(format!("cannot wait for the fence: {e}"))),
                    Ok(status) => break status,
                }
            };
            drop(life_w);
            Ok(ended(plan, status_r, status))
        }
    }
}

/// How the command ended, from PID 1's report (else PID 1's own end).
fn ended(plan: &Plan, status_r: OwnedFd, pid_one: WaitStatus) -> Exit {
    let mut report = Vec::new();
    let _ = File::from(status_r).read_to_end(&mut report);
    match report.split_first() {
        Some((b'S', rest)) if rest.len() >= 4 => {
            let raw = i32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]);
            if libc::WIFSIGNALED(raw) {
                Exit::Signal(libc::WTERMSIG(raw))
            } else {
                Exit::Code(libc::WEXITSTATUS(raw))
            }
        }
        Some((b'E', rest)) if rest.len() >= 4 => {
            let errno = i32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let error = std::io::Error::from_raw_os_error(errno);
            let _ = writeln!(
                std::io::stderr(),
                "kern: fence: cannot start `{}`: {error}",
                plan.program.display()
            );
            Exit::Code(if errno == libc::ENOENT { 127 } else { 126 })
        }
        _ => match pid_one {
            WaitStatus::Exited(_, code) => Exit::Code(code),
            WaitStatus::Signaled(_, signal, _) => Exit::Signal(signal as i32),
            _ => Exit::Code(SETUP_FAILED),
        },
    }
}

/// PID 1 of the fence: `/proc`, the network, the watch, the command; returns PID 1's exit code.
fn pid_one(
    plan: &Plan,
    life_r: &OwnedFd,
    status_w: OwnedFd,
    denials: File,
    watch: Option<watch::Watch>,
) -> i32 {
    let fail = |cause: Cause, message: String| {
        if let Ok(mut file) = OpenOptions::new().write(true).open(&plan.failure) {
            let _ = writeln!(file, "{}\t{message}", cause.tag());
        }
        let _ = writeln!(std::io::stderr(), "kern: fence: {message}");
        SETUP_FAILED
    };
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || parent_gone(life_r) {
        return SETUP_FAILED;
    }
    let none: Option<&str> = None;
    if let Err(e) = nix::mount::mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        none,
    ) {
        return fail(
            Cause::Mount,
            format!("cannot mount /proc for the fence: {e}"),
        );
    }
    let listeners = match &plan.network {
        NetPlan::Open => Vec::new(),
        NetPlan::None => match net::loopback_up() {
            Ok(()) => Vec::new(),
            Err(e) => return fail(Cause::Other, e),
        },
        NetPlan::List {
            proxy_port,
            forwards,
            ..
        } => match net::loopback_up().and_then(|()| net::listen(*proxy_port, forwards)) {
            Ok(listeners) => listeners,
            Err(e) => return fail(Cause::Other, e),
        },
    };

    let Ok((listener_r, listener_w)) = std::os::unix::net::UnixStream::pair() else {
        return fail(Cause::Other, "cannot make a socket pair".into());
    };
    // SAFETY: PID 1 is still single-threaded here (its threads start below, after the fork).
    let command = match unsafe { fork() } {
        Err(e) => return fail(Cause::Other, format!("cannot fork: {e}")),
        Ok(ForkResult::Child) => {
            drop(listeners);
            drop(listener_r);
            let errno = command(plan, &status_w, &listener_w);
            let mut frame = vec![b'E'];
            frame.extend_from_slice(&errno.to_ne_bytes());
            let _ = nix::unistd::write(status_w.as_fd(), &frame);
            // SAFETY: _exit skips the atexit handlers of a process that only forked to exec.
            unsafe { libc::_exit(if errno == libc::ENOENT { 127 } else { 126 }) }
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    forward_signals_to(command);
    drop(listener_w);
    if let Some(listener) = notify::receive(&listener_r)
        && let Ok(log) = denials.try_clone()
    {
        let (ports, forwards, socket) = match &plan.network {
            NetPlan::List {
                proxy_port,
                forwards,
                socket,
            } => (
                std::iter::once(*proxy_port)
                    .chain(forwards.iter().copied())
                    .collect(),
                forwards.clone(),
                Some(socket.clone()),
            ),
            NetPlan::None | NetPlan::Open => (Vec::new(), Vec::new(), None),
        };
        notify::serve(
            listener,
            log,
            notify::Judge {
                ports,
                forwards,
                socket,
                network: plan.network != NetPlan::Open,
            },
        );
    }
    let watching = watch.map(|watch| watch::serve(watch, denials));
    if let NetPlan::List { socket, .. } = &plan.network {
        net::serve(listeners, socket);
    }
    let status = loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => break code << 8,
            Ok(WaitStatus::Signaled(pid, signal, core)) if pid == command => {
                break (signal as i32) | if core { 0x80 } else { 0 };
            }
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(_) => break SETUP_FAILED << 8,
        }
    };
    if let Some(watching) = watching {
        watching.finish();
    }
    let mut frame = vec![b'S'];
    frame.extend_from_slice(&status.to_ne_bytes());
    let _ = nix::unistd::write(status_w.as_fd(), &frame);
    0
}

/// True when the first process is gone (its end of the life pipe closed).
fn parent_gone(life_r: &OwnedFd) -> bool {
    let mut fds = [nix::poll::PollFd::new(
        life_r.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    matches!(nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO), Ok(n) if n > 0)
}

/// The command's own process: dies with PID 1, loses every capability, gets Landlock, runs.
/// Returns only the errno of a failed start (an `exec` that failed, or a setup step).
fn command(plan: &Plan, status_w: &OwnedFd, listener_w: &std::os::unix::net::UnixStream) -> i32 {
    let _ = status_w.as_raw_fd();
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for signal in FORWARDED {
        // SAFETY: restoring the default action in the command's own process.
        let _ = unsafe { sigaction(signal, &default) };
    }
    let _ = SigSet::all().thread_unblock();
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() {
        return libc::EPERM;
    }
    if let Err(e) = lockdown::drop_privileges() {
        let _ = writeln!(std::io::stderr(), "kern: fence: {e}");
        return libc::EPERM;
    }
    if plan.landlock
        && let Err(e) = lockdown::landlock(&plan.writable)
    {
        let _ = writeln!(std::io::stderr(), "kern: fence: {e}");
        return libc::EPERM;
    }
    // Last: from here on the calls the fence refuses are named (see notify.rs).
    if let Some(listener) = notify::install() {
        notify::send(listener_w, &listener);
    }
    let error = std::process::Command::new(&plan.program)
        .args(&plan.args)
        .current_dir(&plan.cwd)
        .exec();
    error.raw_os_error().unwrap_or(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::lent_descriptor;
    use std::os::fd::{AsRawFd, IntoRawFd};

    fn close_on_exec(fd: i32) -> bool {
        // SAFETY: fcntl(2) on a descriptor number.
        unsafe { libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0 }
    }

    #[test]
    fn a_lent_descriptor_is_taken_only_when_open_and_is_closed_on_exec_from_then_on() {
        // The standard streams are never the lent one.
        for fd in [-1, 0, 1, 2] {
            assert!(lent_descriptor(fd).is_none(), "{fd}");
        }
        // A number nothing has.
        let (r, w) = nix::unistd::pipe().unwrap();
        let closed = r.into_raw_fd();
        nix::unistd::close(closed).unwrap();
        assert!(lent_descriptor(closed).is_none());
        // An open one, inherited (no close-on-exec), as kern lends it.
        let open = w.into_raw_fd();
        // SAFETY: clearing the flag of a descriptor this test owns.
        assert_ne!(unsafe { libc::fcntl(open, libc::F_SETFD, 0) }, -1);
        assert!(!close_on_exec(open));
        let taken = lent_descriptor(open).unwrap();
        assert_eq!(taken.as_raw_fd(), open);
        assert!(close_on_exec(open), "the command must not inherit it");
    }
}
