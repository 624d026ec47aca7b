//! The fence on Linux: `kern __fence PLAN`, a tiny init kern re-executes itself as for each
//! fenced process. It makes the user, mount, PID, IPC and (unless the network is open)
//! network namespaces itself — no external program —, lays out the file system (`mounts.rs`),
//! brings the network up with kern's proxy on it (`net.rs`), watches the hidden files
//! (`watch.rs`) and the calls the fence will refuse (`notify.rs`), and starts the command with
//! no capabilities and Landlock beneath (`lockdown.rs`).
//!
//! The one decision a reader must know: three processes, each with one job. The first (the
//! one kern started: the process group leader the supervisor watches, killed with its group,
//! dying with kern) makes the namespaces and mounts, then forks the second — PID 1 of the new
//! PID namespace — and waits for it, forwarding signals. PID 1 mounts the namespace's `/proc`,
//! serves the network and the watch on threads, forks the command, forwards signals to it,
//! reaps orphans, and hands the command's exit status back; when PID 1 ends the kernel kills
//! everything left in the namespace, so nothing the command started outlives it. The first
//! process then ends as the command ended (its exit code, or the signal that killed it), so
//! the supervisor sees the command's end. A fork only happens while the process forking is
//! single-threaded (`unshare` of a user namespace requires it, and the command's process
//! allocates before `exec`).

pub(crate) mod init;
mod lockdown;
pub(crate) mod mounts;
pub(crate) mod net;
mod notify;
mod watch;
