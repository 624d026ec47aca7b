//! Naming what the fence refuses: the fenced command runs under a seccomp filter that sends the
//! system calls which may be refused — an open for writing, a create, remove, rename or change
//! of a file, a connection, a signal — to the fence's PID 1 first, which looks at what is asked,
//! lets the call go on unchanged, and writes to the denials log the ones the fence refuses.
//!
//! The one decision a reader must know: the filter decides nothing. Every notified call
//! continues (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) and the kernel refuses it or not, by the
//! mounts and Landlock; PID 1 only asks the same question the kernel will: can this path be
//! written (`access(W_OK)` answers `EROFS` on the fence's read-only mounts), does anything
//! listen inside at this address, does this pid exist in the fence. The answer can race the
//! call (a file made meanwhile), so the log may rarely miss or add one — it never changes what
//! is allowed. A call through another ABI (`int 0x80`) or through `sendmsg`/`io_uring` is not
//! seen; docs/safety.md lists what is named and what is only refused. What a call points at
//! (its path, its socket address) is read from the caller's memory in `notify/arguments.rs`.

mod arguments;

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use arguments::{path_arg, read_memory, socket_address};

/// What a notified system call asks for (argument positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// An open for writing (`flags` at this position; `None`: in a struct, `openat2`).
    Open {
        dirfd: Option<usize>,
        path: usize,
        flags: Option<usize>,
    },
    /// Makes a name (mkdir, mknod, symlink, creat): refused when the name is new and its folder
    /// read-only.
    Make { dirfd: Option<usize>, path: usize },
    /// Takes a name away (unlink, rmdir): refused when it exists in a read-only folder.
    Remove { dirfd: Option<usize>, path: usize },
    /// Changes a file (chmod, chown, times, truncate, attributes): refused when it exists on
    /// a read-only mount.
    Change { dirfd: Option<usize>, path: usize },
    /// Renames: the old name taken away, the new one made.
    Rename {
        dirfd: Option<usize>,
        path: usize,
        dirfd2: Option<usize>,
        path2: usize,
    },
    /// Links: the new name made.
    Link { dirfd2: Option<usize>, path2: usize },
    /// `connect(fd, addr, len)`.
    Connect,
    /// `sendto(fd, buf, len, flags, addr, addrlen)`.
    SendTo,
    /// A signal to the pid in argument 0.
    Signal,
}

/// The calls the filter sends to PID 1, by number, with what each asks.
fn calls() -> Vec<(i64, Call)> {
    let open =
        |dirfd: Option<usize>, path: usize, flags: Option<usize>| Call::Open { dirfd, path, flags };
    let make = |dirfd: Option<usize>, path: usize| Call::Make { dirfd, path };
    let remove = |dirfd: Option<usize>, path: usize| Call::Remove { dirfd, path };
    let change = |dirfd: Option<usize>, path: usize| Call::Change { dirfd, path };
    let rename =
        |dirfd: Option<usize>, path: usize, dirfd2: Option<usize>, path2: usize| Call::Rename {
            dirfd,
            path,
            dirfd2,
            path2,
        };
    let mut calls = vec![
        (libc::SYS_openat, open(Some(0), 1, Some(2))),
        (libc::SYS_openat2, open(Some(0), 1, None)),
        (libc::SYS_mkdirat, make(Some(0), 1)),
        (libc::SYS_mknodat, make(Some(0), 1)),
        (libc::SYS_symlinkat, make(Some(1), 2)),
        (libc::SYS_unlinkat, remove(Some(0), 1)),
        (libc::SYS_fchmodat, change(Some(0), 1)),
        (libc::SYS_fchownat, change(Some(0), 1)),
        (libc::SYS_utimensat, change(Some(0), 1)),
        (libc::SYS_truncate, change(None, 0)),
        (libc::SYS_setxattr, change(None, 0)),
        (libc::SYS_lsetxattr, change(None, 0)),
        (libc::SYS_removexattr, change(None, 0)),
        (libc::SYS_lremovexattr, change(None, 0)),
        (libc::SYS_renameat2, rename(Some(0), 1, Some(2), 3)),
        (
            libc::SYS_linkat,
            Call::Link {
                dirfd2: Some(2),
                path2: 3,
            },
        ),
        (libc::SYS_connect, Call::Connect),
        (libc::SYS_sendto, Call::SendTo),
        (libc::SYS_kill, Call::Signal),
        (libc::SYS_tkill, Call::Signal),
        (libc::SYS_tgkill, Call::Signal),
        (libc::SYS_rt_sigqueueinfo, Call::Signal),
        (libc::SYS_pidfd_open, Call::Signal),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_open, open(None, 0, Some(1))),
        (libc::SYS_creat, make(None, 0)),
        (libc::SYS_mkdir, make(None, 0)),
        (libc::SYS_mknod, make(None, 0)),
        (libc::SYS_symlink, make(None, 1)),
        (libc::SYS_unlink, remove(None, 0)),
        (libc::SYS_rmdir, remove(None, 0)),
        (libc::SYS_chmod, change(None, 0)),
        (libc::SYS_chown, change(None, 0)),
        (libc::SYS_lchown, change(None, 0)),
        (libc::SYS_utimes, change(None, 0)),
        (libc::SYS_utime, change(None, 0)),
        (libc::SYS_rename, rename(None, 0, None, 1)),
        (libc::SYS_renameat, rename(Some(0), 1, Some(2), 3)),
        (
            libc::SYS_link,
            Call::Link {
                dirfd2: None,
                path2: 1,
            },
        ),
    ]);
    calls
}

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: u32 = 0;

/// The open flags that mean writing: `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`.
const OPEN_WRITES: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The filter: calls of another architecture and every call not listed are allowed; an open
/// is sent only when its flags write; `sendto` only with an address; the rest listed are sent.
fn program() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u32 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u32 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET: u32 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET: u32 = 0x06; // BPF_RET | BPF_K
    let nr_offset = 0;
    let arch_offset = 4;
    let arg_low = |i: u32| 16 + 8 * i;
    let allow = libc::SECCOMP_RET_ALLOW;
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let calls = calls();
    let mut prog = vec![
        stmt(LD_W_ABS, arch_offset),
        jump(JEQ, ARCH, 1, 0),
        stmt(RET, allow),
        stmt(LD_W_ABS, nr_offset),
    ];
    for (nr, call) in &calls {
        let nr = *nr as u32;
        let flags_arg = if i64::from(nr) == libc::SYS_openat {
            Some(2)
        } else {
            #[cfg(target_arch = "x86_64")]
            {
                (i64::from(nr) == libc::SYS_open).then_some(1)
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                None
            }
        };
        match (flags_arg, call) {
            (Some(arg), _) => {
                // nr matches: look at the flags, then reload the number for the next test.
                prog.push(jump(JEQ, nr, 0, 4));
                prog.push(stmt(LD_W_ABS, arg_low(arg)));
                prog.push(jump(JSET, OPEN_WRITES, 0, 1));
                prog.push(stmt(RET, notify));
                prog.push(stmt(RET, allow));
            }
            (None, Call::SendTo) => {
                // An address in argument 4 (its low and high words) means a datagram sent
                // somewhere: DNS through `sendto`.
                prog.push(jump(JEQ, nr, 0, 6));
                prog.push(stmt(LD_W_ABS, arg_low(4)));
                prog.push(jump(JEQ, 0, 0, 3));
                prog.push(stmt(LD_W_ABS, arg_low(4) + 4));
                prog.push(jump(JEQ, 0, 0, 1));
                prog.push(stmt(RET, allow));
                prog.push(stmt(RET, notify));
            }
            (None, _) => {
                prog.push(jump(JEQ, nr, 0, 1));
                prog.push(stmt(RET, notify));
            }
        }
    }
    prog.push(stmt(RET, allow));
    prog
}

/// Installs the filter in this process (the command's, before `exec`: `no_new_privs` is set)
/// and returns its listener; `None` where the kernel has no user notification or a listener is
/// already installed above (a fence inside a fence): the calls are then only refused, not named.
pub(super) fn install() -> Option<OwnedFd> {
    if ARCH == 0 {
        return None;
    }
    let filter = program();
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).ok()?,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp(2) reads the program for the duration of the call; `filter` outlives it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            std::ptr::from_ref(&prog),
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel returned a new descriptor owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends the listener to PID 1 over `socket` (one descriptor, one byte).
pub(super) fn send(socket: &std::os::unix::net::UnixStream, listener: &OwnedFd) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [listener.as_raw_fd()];
    let iov = [std::io::IoSlice::new(b"L")];
    let _ = sendmsg::<()>(
        socket.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    );
}

/// Receives the listener the command sent (`None` when it sent none and closed its end).
pub(super) fn receive(socket: &std::os::unix::net::UnixStream) -> Option<OwnedFd> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    for cmsg in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg
            && let Some(fd) = fds.first()
        {
            // SAFETY: SCM_RIGHTS gave this process a new descriptor it alone owns.
            return Some(unsafe { OwnedFd::from_raw_fd(*fd) });
        }
    }
    None
}

/// What PID 1 knows to judge a call: the ports something inside listens on is read live.
pub(super) struct Judge {
    /// The proxy's and the forwarded ports inside (always listening).
    pub ports: Vec<u16>,
    /// The forwarded ports (allowed local services outside), a subset of `ports`.
    pub forwards: Vec<u16>,
    /// kern's proxy socket, asked whether a forwarded service takes connections.
    pub socket: Option<PathBuf>,
    /// Whether the fence has a network of its own (else connections are not judged).
    pub network: bool,
}

/// What PID 1 answers a call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// It goes on; nothing to say.
    Go,
    /// It goes on and will be refused: named in the log.
    Named(&'static str, String),
    /// It fails at once with this error, as it would outside the fence (a forwarded local
    /// service that is not listening: the connection inside would otherwise be taken by the
    /// fence's own listener and then dropped).
    Fail(i32),
}

/// Serves the listener on a thread: every call continues; the refused ones go to `log`.
pub(super) fn serve(listener: OwnedFd, log: File, judge: Judge) {
    std::thread::spawn(move || {
        let calls = calls();
        let mut lines = 0usize;
        loop {
            if !pending(&listener) {
                return;
            }
            // SAFETY: an all-zero seccomp_notif is valid; RECV fills it.
            let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: the listener is a seccomp notification fd and `req` its request type.
            let r = unsafe {
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    std::ptr::from_mut(&mut req),
                )
            };
            if r != 0 {
                match nix::Error::last() {
                    nix::Error::EINTR | nix::Error::ENOENT => continue,
                    _ => return,
                }
            }
            let call = calls
                .iter()
                .find(|(nr, _)| *nr == i64::from(req.data.nr))
                .map(|(_, call)| *call);
            let verdict = match call {
                Some(Call::Connect) => refused_forward(&judge, &req).map_or_else(
                    || named(judge_call(&judge, Call::Connect, &req)),
                    Verdict::Fail,
                ),
                Some(call) => named(judge_call(&judge, call, &req)),
                None => Verdict::Go,
            };
            // Written before the call goes on: a command that exits right after it cannot end
            // the fence before its attempt is on record.
            if let Verdict::Named(kind, target) = &verdict
                && lines < 10_000
            {
                lines += 1;
                let line = serde_json::json!({"kind": kind, "target": target});
                super::log_denial(&log, &line);
            }
            let resp = match verdict {
                Verdict::Fail(errno) => libc::seccomp_notif_resp {
                    id: req.id,
                    val: 0,
                    error: -errno,
                    flags: 0,
                },
                Verdict::Go | Verdict::Named(..) => libc::seccomp_notif_resp {
                    id: req.id,
                    val: 0,
                    error: 0,
                    flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
                },
            };
            // SAFETY: as above, with the response type.
            unsafe {
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_SEND,
                    std::ptr::from_ref(&resp),
                );
            }
        }
    });
}

/// Waits until a call is queued on `listener` (`true`) or no process is left under the filter
/// to make one (`false`: the kernel reports the listener hung up). Without this wait, `RECV`
/// answers `ENOENT` at once, again and again, once the command has ended — a core spun until
/// the fence ended, on a machine that may have two.
fn pending(listener: &OwnedFd) -> bool {
    use std::os::fd::AsFd;
    loop {
        let mut fds = [nix::poll::PollFd::new(
            listener.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) => {
                let revents = fds[0].revents().unwrap_or(nix::poll::PollFlags::empty());
                if revents.contains(nix::poll::PollFlags::POLLIN) {
                    return true;
                }
                if revents.intersects(
                    nix::poll::PollFlags::POLLHUP
                        | nix::poll::PollFlags::POLLERR
                        | nix::poll::PollFlags::POLLNVAL,
                ) {
                    return false;
                }
            }
            Err(nix::Error::EINTR) => {}
            Err(_) => return false,
        }
    }
}

fn named(denial: Option<(&'static str, String)>) -> Verdict {
    denial.map_or(Verdict::Go, |(kind, target)| Verdict::Named(kind, target))
}

/// `ECONNREFUSED` for a connection to a forwarded local service that does not take connections
/// outside now (kern's proxy is asked); `None` for every other connection.
fn refused_forward(judge: &Judge, req: &libc::seccomp_notif) -> Option<i32> {
    let socket = judge.socket.as_ref()?;
    let args = req.data.args;
    let bytes = read_memory(
        req.pid as i32,
        args[1],
        usize::try_from(args[2]).ok()?.min(128),
    )?;
    let (ip, port) = socket_address(&bytes)?;
    if !ip.is_loopback() || !judge.forwards.contains(&port) {
        return None;
    }
    let mut conn = std::os::unix::net::UnixStream::connect(socket).ok()?;
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    conn.write_all(format!("probe {port}\n").as_bytes()).ok()?;
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut conn, &mut answer).ok()?;
    (answer.trim() == "refused").then_some(libc::ECONNREFUSED)
}

/// The denial a call will meet, if any.
fn judge_call(
    judge: &Judge,
    call: Call,
    req: &libc::seccomp_notif,
) -> Option<(&'static str, String)> {
    let pid = req.pid as i32;
    let args = req.data.args;
    let path = |dirfd: Option<usize>, at: usize| path_arg(pid, dirfd.map(|i| args[i]), args[at]);
    let write = |p: PathBuf| ("write", p.display().to_string());
    match call {
        Call::Open {
            dirfd,
            path: at,
            flags,
        } => {
            let flags = match flags {
                Some(i) => args[i],
                // openat2: the flags are the first field of its `struct open_how`.
                None => {
                    let bytes = read_memory(pid, args[2], 8)?;
                    u64::from_ne_bytes(bytes.get(..8)?.try_into().ok()?)
                }
            };
            if flags & u64::from(OPEN_WRITES) == 0 {
                return None;
            }
            let p = path(dirfd, at)?;
            let creates = flags & (libc::O_CREAT as u64) != 0;
            let refused = if exists(&p) {
                read_only(&p)
            } else {
                creates && read_only_parent(&p)
            };
            refused.then(|| write(p))
        }
        Call::Make { dirfd, path: at } => {
            let p = path(dirfd, at)?;
            (!exists(&p) && read_only_parent(&p)).then(|| write(p))
        }
        Call::Remove { dirfd, path: at } => {
            let p = path(dirfd, at)?;
            (exists(&p) && read_only_parent(&p)).then(|| write(p))
        }
        Call::Change { dirfd, path: at } => {
            let p = path(dirfd, at)?;
            (exists(&p) && read_only(&p)).then(|| write(p))
        }
        Call::Rename {
            dirfd,
            path: at,
            dirfd2,
            path2,
        } => {
            let from = path(dirfd, at)?;
            if !exists(&from) {
                return None;
            }
            let to = path(dirfd2, path2);
            if read_only_parent(&from) {
                return Some(write(from));
            }
            to.filter(|t| read_only_parent(t)).map(write)
        }
        Call::Link { dirfd2, path2 } => {
            let to = path(dirfd2, path2)?;
            (!exists(&to) && read_only_parent(&to)).then(|| write(to))
        }
        Call::Connect | Call::SendTo if judge.network => {
            let (addr, len) = if call == Call::Connect {
                (args[1], args[2])
            } else {
                (args[4], args[5])
            };
            let bytes = read_memory(pid, addr, usize::try_from(len).ok()?.min(128))?;
            let (ip, port) = socket_address(&bytes)?;
            judge_connect(judge, ip, port, listening(port))
        }
        Call::Connect | Call::SendTo => None,
        Call::Signal => {
            let target = args[0] as i64 as i32;
            (target > 0 && !Path::new(&format!("/proc/{target}")).exists())
                .then(|| ("signal", format!("pid {target}")))
        }
    }
}

/// A connection's denial: a loopback address where nothing listens inside, or any other address
/// (a name lookup when it is port 53).
fn judge_connect(
    judge: &Judge,
    ip: IpAddr,
    port: u16,
    listening: bool,
) -> Option<(&'static str, String)> {
    let target = match ip {
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
        IpAddr::V4(v4) => format!("{v4}:{port}"),
    };
    if ip.is_unspecified() || (ip.is_loopback() && (judge.ports.contains(&port) || listening)) {
        return None;
    }
    if port == 53 {
        return Some(("resolve", format!("a host name (asked {target})")));
    }
    Some(("connect", target))
}

/// True when a socket inside listens on `port` (TCP) or is bound to it (UDP).
fn listening(port: u16) -> bool {
    let hex = format!(":{port:04X}");
    for (table, state) in [
        ("/proc/net/tcp", Some("0A")),
        ("/proc/net/tcp6", Some("0A")),
        ("/proc/net/udp", None),
        ("/proc/net/udp6", None),
    ] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(st)) = (fields.get(1), fields.get(3)) else {
                continue;
            };
            if local.ends_with(&hex) && state.is_none_or(|s| s == *st) {
                return true;
            }
        }
    }
    false
}

/// True when something is at `path` (a dangling link counts).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// True when the folder of `path` is on a read-only mount (so no name can be made or taken
/// away in it). Devices and `/proc` are never reported.
fn read_only_parent(path: &Path) -> bool {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => read_only(dir),
        _ => false,
    }
}

/// True when `path` is on a read-only mount: `access(W_OK)` answers `EROFS`, as the call will.
/// Devices and `/proc` are never reported.
fn read_only(path: &Path) -> bool {
    if path.starts_with("/proc") || path.starts_with("/dev") {
        return false;
    }
    let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access(2) with a valid C string.
    let r = unsafe { libc::access(c.as_ptr(), libc::W_OK) };
    r != 0 && nix::Error::last() == nix::Error::EROFS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_judged_by_address_and_what_listens() {
        let judge = Judge {
            ports: vec![3128, 4000],
            forwards: vec![4000],
            socket: None,
            network: true,
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases = [
            ("127.0.0.1", 3128, false, None),
            ("127.0.0.1", 4000, false, None),
            ("127.0.0.1", 8080, true, None),
            (
                "127.0.0.1",
                9999,
                false,
                Some(("connect", "127.0.0.1:9999")),
            ),
            ("::1", 9999, false, Some(("connect", "[::1]:9999"))),
            (
                "203.0.113.5",
                443,
                false,
                Some(("connect", "203.0.113.5:443")),
            ),
            (
                "10.0.0.2",
                53,
                false,
                Some(("resolve", "a host name (asked 10.0.0.2:53)")),
            ),
            ("0.0.0.0", 80, false, None),
            (
                "127.0.0.53",
                53,
                false,
                Some(("resolve", "a host name (asked 127.0.0.53:53)")),
            ),
        ];
        for (addr, port, listens, want) in cases {
            let got = judge_connect(&judge, ip(addr), port, listens);
            let want = want.map(|(k, t): (&str, &str)| (k, t.to_string()));
            assert_eq!(got, want, "{addr}:{port}");
        }
    }

    #[test]
    fn the_filter_sends_every_listed_call_and_ends_allowing() {
        let prog = program();
        assert_eq!(prog.last().map(|s| s.k), Some(libc::SECCOMP_RET_ALLOW));
        assert!(prog.len() < 255, "jumps stay within a byte: {}", prog.len());
    }
}
