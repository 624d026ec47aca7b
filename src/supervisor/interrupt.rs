//! Ctrl-C and SIGTERM: the first one asks for a graceful stop, the second one ends kern at once.
//! SIGHUP (the terminal or the ssh session went away) stops nothing: kern goes on like `nohup`,
//! runs the hook the loop registered ([`Interrupt::on_hangup`]: the reporter stops writing to
//! the terminal, `run.jsonl` records the loss) and its lines continue in `run.log`.
//!
//! The decision a reader must know: the first signal only *records* the request. Nothing is
//! killed here; [`crate::supervisor::run`] sees it through [`Interrupt::wait`] and stops the
//! running agent the careful way (SIGTERM to its group, a grace, SIGKILL, reap), and the caller
//! then keeps the resume state, releases the lock and exits 130 (SIGINT) or 143 (SIGTERM)
//! through `Error::Interrupted`. The second signal does not wait for anything: it SIGKILLs the
//! agent's process group (registered with [`Interrupt::set_child_group`]) and exits with
//! `128 + signal` on the spot.
//!
//! The listeners live on a thread of their own with its own small runtime, so the second signal
//! is honoured even while kern's main thread is busy in blocking work (a libgit2 commit, a
//! blocking wait for a stale agent group).

use std::future::Future;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::error::{Error, Result};

/// The shared interrupt state: which signal arrived first, and which agent group runs now.
/// Cheap to clone; every clone sees the same state.
#[derive(Clone)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` until the first signal; then its number. Never changes again.
    first: watch::Sender<Option<i32>>,
    /// The process groups of the running agents (several with parallel tasks).
    child_groups: std::sync::Mutex<Vec<i32>>,
    /// What to do on SIGHUP (the loop registers it once it has a log).
    hangup: std::sync::Mutex<Option<HangupHook>>,
}

/// What runs on the listener thread when SIGHUP arrives.
pub(crate) type HangupHook = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt")
            .field("requested", &self.requested())
            .field("child_groups", &self.child_groups())
            .finish()
    }
}

impl Interrupt {
    /// Starts listening for SIGINT, SIGTERM and SIGHUP. From now on these signals no longer end
    /// kern by themselves: the first SIGINT or SIGTERM is recorded, the second kills the agent
    /// group and exits; SIGHUP runs the hangup hook and nothing else.
    pub fn install() -> Result<Interrupt> {
        let interrupt = Interrupt::none();
        let listener = interrupt.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
        std::thread::Builder::new()
            .name("kern-signals".into())
            .spawn(move || listen(listener, ready_tx))
            .map_err(|e| Error::Internal(format!("cannot start the signal listener: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(interrupt),
            Ok(Err(e)) => Err(Error::Internal(format!(
                "cannot listen for SIGINT, SIGTERM and SIGHUP: {e}"
            ))),
            Err(_) => Err(Error::Internal(
                "the signal listener ended before it was ready".into(),
            )),
        }
    }

    /// An interrupt that never fires by itself (tests, dry run); [`Interrupt::trigger`] still
    /// works on it.
    pub fn none() -> Interrupt {
        let (first, _) = watch::channel(None);
        Interrupt {
            inner: Arc::new(Inner {
                first,
                child_groups: std::sync::Mutex::new(Vec::new()),
                hangup: std::sync::Mutex::new(None),
            }),
        }
    }

    /// The number of the first signal, once one has arrived.
    pub fn requested(&self) -> Option<i32> {
        *self.inner.first.borrow()
    }

    /// Resolves when the first signal has arrived (at once if it already has). Cancel-safe:
    /// usable as a `tokio::select!` branch in a loop.
    pub async fn wait(&self) {
        let mut receiver = self.inner.first.subscribe();
        if receiver.wait_for(Option::is_some).await.is_err() {
            // The sender lives in `self`, so it cannot be gone; never resolve rather than lie.
            std::future::pending::<()>().await;
        }
    }

    /// Sleeps for `duration` unless a stop is asked for first; true means interrupted (also
    /// when the request came before the call). For the loop's delay and usage-limit waits.
    pub fn sleep_or_interrupt(&self, duration: Duration) -> impl Future<Output = bool> + use<> {
        let interrupt = self.clone();
        async move {
            if interrupt.requested().is_some() {
                return true;
            }
            tokio::select! {
                () = interrupt.wait() => true,
                () = tokio::time::sleep(duration) => false,
            }
        }
    }

    /// Registers the process group of an agent that now runs, so that a second signal can
    /// kill it.
    pub fn add_child_group(&self, pgid: i32) {
        let mut groups = self.groups();
        if pgid > 0 && !groups.contains(&pgid) {
            groups.push(pgid);
        }
    }

    /// The agent of group `pgid` has ended.
    pub fn remove_child_group(&self, pgid: i32) {
        self.groups().retain(|&g| g != pgid);
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, Vec<i32>> {
        self.inner
            .child_groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers what SIGHUP does (replacing an earlier hook).
    pub fn on_hangup(&self, hook: HangupHook) {
        *self
            .inner
            .hangup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
    }

    /// Does what the arrival of SIGHUP does: runs the hangup hook, if one is registered.
    pub fn hang_up(&self) {
        let hook = self
            .inner
            .hangup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hook) = hook.as_ref() {
            hook();
        }
    }

    /// The registered agent process groups.
    pub fn child_groups(&self) -> Vec<i32> {
        self.groups().clone()
    }

    /// Does exactly what the arrival of `signal` does: the first call records it; any later
    /// call SIGKILLs the registered agent group and exits the process with `128 + signal`.
    /// Public so tests can simulate Ctrl-C without signalling the test process — a test must
    /// call it at most once on a given `Interrupt`.
    pub fn trigger(&self, signal: i32) {
        if !self.record(signal) {
            self.kill_child_group_now();
            // Not eprintln!: it panics when stderr is gone (a closed terminal).
            let _ = writeln!(
                std::io::stderr(),
                "kern: a second {} — the agent was killed at once; the task resumes where it stopped on the next run",
                crate::error::signal_name(signal)
            );
            std::process::exit(128 + signal);
        }
    }

    /// Records `signal` if it is the first; true when it was.
    fn record(&self, signal: i32) -> bool {
        self.inner.first.send_if_modified(|first| {
            if first.is_none() {
                *first = Some(signal);
                true
            } else {
                false
            }
        })
    }

    fn kill_child_group_now(&self) {
        for pgid in self.child_groups() {
            // ESRCH (already gone) is the outcome we want anyway.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// The body of the listener thread: a tiny runtime that waits for SIGINT and SIGTERM forever.
fn listen(interrupt: Interrupt, ready: std::sync::mpsc::Sender<std::io::Result<()>>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        let listeners = signal(SignalKind::interrupt()).and_then(|int| {
            let term = signal(SignalKind::terminate())?;
            let hup = signal(SignalKind::hangup())?;
            Ok((int, term, hup))
        });
        let (mut sigint, mut sigterm, mut sighup) = match listeners {
            Ok(pair) => pair,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        loop {
            let number = tokio::select! {
                Some(()) = sigint.recv() => Signal::SIGINT as i32,
                Some(()) = sigterm.recv() => Signal::SIGTERM as i32,
                Some(()) = sighup.recv() => {
                    tracing::info!("the terminal went away (SIGHUP); going on");
                    interrupt.hang_up();
                    continue;
                }
                else => return,
            };
            tracing::info!(signal = number, "stop requested");
            interrupt.trigger(number);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};

    #[tokio::test]
    async fn none_never_fires_and_the_first_trigger_is_recorded() {
        let interrupt = Interrupt::none();
        assert_eq!(interrupt.requested(), None);
        assert!(
            !interrupt
                .sleep_or_interrupt(Duration::from_millis(10))
                .await
        );
        let clone = interrupt.clone();
        clone.trigger(15);
        assert_eq!(interrupt.requested(), Some(15));
        interrupt.wait().await;
        assert!(
            interrupt
                .sleep_or_interrupt(Duration::from_secs(3600))
                .await
        );
    }

    #[tokio::test]
    async fn a_trigger_wakes_a_waiting_sleep() {
        let interrupt = Interrupt::none();
        let sleeping = interrupt.sleep_or_interrupt(Duration::from_secs(3600));
        let trigger = interrupt.clone();
        let (interrupted, ()) = tokio::join!(sleeping, async move {
            tokio::task::yield_now().await;
            trigger.trigger(2);
        });
        assert!(interrupted);
        assert_eq!(interrupt.requested(), Some(2));
    }

    #[test]
    fn only_the_first_signal_is_recorded() {
        let interrupt = Interrupt::none();
        assert!(interrupt.record(2));
        assert!(!interrupt.record(15));
        assert_eq!(interrupt.requested(), Some(2));
    }

    #[test]
    fn a_hangup_runs_the_hook_and_stops_nothing() {
        let interrupt = Interrupt::none();
        interrupt.hang_up();
        let count = Arc::new(AtomicI32::new(0));
        let seen = Arc::clone(&count);
        interrupt.on_hangup(Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        interrupt.hang_up();
        interrupt.hang_up();
        assert_eq!(count.load(Ordering::SeqCst), 2);
        assert_eq!(interrupt.requested(), None);
    }

    #[test]
    fn child_groups_are_registered_and_cleared_one_by_one() {
        let interrupt = Interrupt::none();
        interrupt.add_child_group(1234);
        interrupt.add_child_group(5678);
        interrupt.add_child_group(1234);
        interrupt.add_child_group(0);
        assert_eq!(interrupt.child_groups(), vec![1234, 5678]);
        interrupt.remove_child_group(1234);
        assert_eq!(interrupt.child_groups(), vec![5678]);
        interrupt.remove_child_group(5678);
        assert!(interrupt.child_groups().is_empty());
    }
}
