//! Naming the reads of hidden files: each hidden file is an empty placeholder inside the fence,
//! and the init watches the placeholders (inotify) and writes each one opened to the denials
//! log, which kern reads after the stage.
//!
//! The one decision a reader must know: only the fenced processes see the placeholders (they
//! exist in the fence's mount namespace alone) and the init never opens them, so every open is
//! the fenced command's: `cat ~/.ssh/id_ed25519` is recorded as a read of that file, `ls
//! ~/.ssh` as a read of the folder. A file that does not exist outside has no placeholder and
//! its lookup is not recorded (there was nothing to take). The log is bounded. The inotify
//! instance is kern's, lent for the stage (`Plan::watch_fd`): the last close of an instance
//! that watched files waits for a grace period of the kernel's, about 15 ms a stage, so kern
//! keeps its instances for the run and the init never closes the last one.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::mounts::Placeholder;

/// The most lines the init writes to the denials log.
const LOG_LINES: usize = 10_000;

/// The watches on the placeholders, ready to be read.
pub(super) struct Watch {
    inotify: Inotify,
    paths: HashMap<WatchDescriptor, PathBuf>,
}

/// Watches every placeholder for being opened, with the inotify instance kern lent (`lent`,
/// see `Plan::watch_fd`: what it still holds of earlier sessions is ignored) or a new one;
/// `None` when there is nothing to watch or the kernel refuses (the reads are still denied,
/// only not named).
pub(super) fn watch(placeholders: &[Placeholder], lent: Option<OwnedFd>) -> Option<Watch> {
    if placeholders.is_empty() {
        return None;
    }
    let inotify = match lent {
        // SAFETY: kern lent an inotify descriptor under this number (`Plan::watch_fd`); one
        // that is not fails `add_watch` below and nothing is named.
        Some(fd) => unsafe { Inotify::from_owned_fd(fd) },
        None => Inotify::init(InitFlags::IN_CLOEXEC).ok()?,
    };
    // What a lent instance still holds is of earlier sessions: read and dropped first, as a
    // watch added again on an inode it watched before gets the same descriptor back.
    while nix::poll::poll(
        &mut [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&inotify),
            nix::poll::PollFlags::POLLIN,
        )],
        nix::poll::PollTimeout::ZERO,
    )
    .is_ok_and(|n| n > 0)
    {
        if inotify.read_events().is_err() {
            break;
        }
    }
    let mut paths = HashMap::new();
    for p in placeholders.iter().filter(|p| p.still_there()) {
        let flags = AddWatchFlags::IN_OPEN;
        if let Ok(wd) = inotify.add_watch(&p.path, flags) {
            paths.insert(wd, p.path.clone());
        }
    }
    Some(Watch { inotify, paths })
}

/// The thread reading a watch; [`Serving::finish`] writes what is still queued.
pub(super) struct Serving {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Written by `finish` to wake the thread at once (`None`: no pipe could be made, and the
    /// thread looks at `stop` every [`POLL_MS`]).
    wake: Option<std::os::fd::OwnedFd>,
    thread: std::thread::JoinHandle<()>,
}

/// How long the thread waits for an open before it looks at `stop` when it has no wake pipe.
const POLL_MS: u16 = 50;

impl Serving {
    /// Stops the thread once it has written every open still queued (the command has ended:
    /// its last opens may not have been read yet).
    pub(super) fn finish(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(wake) = &self.wake {
            let _ = nix::unistd::write(wake, b"x");
        }
        let _ = self.thread.join();
    }
}

/// Reads the watch on a thread of its own, writing one JSON line per open to `log`.
pub(super) fn serve(watch: Watch, log: File) -> Serving {
    use std::os::fd::AsFd;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let (woken, wake) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok((r, w)) => (Some(r), Some(w)),
        Err(_) => (None, None),
    };
    let thread = std::thread::spawn(move || {
        let mut lines = 0usize;
        loop {
            let done = stopping.load(std::sync::atomic::Ordering::SeqCst);
            let mut fds = vec![nix::poll::PollFd::new(
                watch.inotify.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            if let Some(woken) = &woken
                && !done
            {
                fds.push(nix::poll::PollFd::new(
                    woken.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                ));
            }
            let timeout = match (done, &woken) {
                (true, _) => nix::poll::PollTimeout::ZERO,
                (false, Some(_)) => nix::poll::PollTimeout::NONE,
                (false, None) => nix::poll::PollTimeout::from(POLL_MS),
            };
            match nix::poll::poll(&mut fds, timeout) {
                // Woken by `finish`: look again, draining what is queued without waiting.
                Ok(n) if n > 0 && !has_input(&fds[0]) => continue,
                Ok(n) if n > 0 => {}
                Ok(_) if done => return,
                Ok(_) | Err(nix::Error::EINTR) => continue,
                Err(_) => return,
            }
            let Ok(events) = watch.inotify.read_events() else {
                return;
            };
            for event in events {
                let Some(base) = watch.paths.get(&event.wd) else {
                    continue;
                };
                let path = match &event.name {
                    // A folder inside a watched one is watched itself: said once, there.
                    Some(name) if !name.is_empty() => {
                        if event.mask.contains(AddWatchFlags::IN_ISDIR) {
                            continue;
                        }
                        base.join(name)
                    }
                    _ => base.clone(),
                };
                if lines >= LOG_LINES {
                    continue;
                }
                lines += 1;
                let line = serde_json::json!({"kind": "read", "target": path});
                super::log_denial(&log, &line);
            }
        }
    });
    Serving { stop, wake, thread }
}

/// True when `fd` polled readable.
fn has_input(fd: &nix::poll::PollFd<'_>) -> bool {
    fd.revents()
        .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN))
}
