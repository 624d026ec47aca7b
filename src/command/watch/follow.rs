//! Following the watched run: how it ended, or that it stalled — and stopping it then (its
//! process group: SIGTERM with SIGCONT, a grace, SIGKILL; then the agent it left).

use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::decide::{self, Ending, Health};
use super::{POLL, Watchdog};
use crate::error::{Error, Result};
use crate::state::lock::{LockRecord, RunLock, stop_orphaned_agent};
use crate::supervisor::identity::{ProcessIdentity, has_exited};
use crate::timestamp::Timestamp;

/// How long a run being stopped gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The run being watched.
pub(super) enum Watched {
    /// Started by this watchdog, in its own process group.
    Child(Child),
    /// Found running (its watchdog gone): known by pid and start time.
    Adopted {
        run: ProcessIdentity,
        since: Timestamp,
    },
}

/// What following a run came to.
pub(super) struct Seen {
    pub(super) ending: Ending,
    /// The run's lock record as last seen (its phase, its heartbeat).
    pub(super) record: Option<LockRecord>,
    /// Why it was stopped as stalled.
    pub(super) stall: Option<String>,
}

impl Watched {
    pub(super) fn pid(&self) -> i32 {
        match self {
            Watched::Child(child) => child.id() as i32,
            Watched::Adopted { run, .. } => run.pid,
        }
    }

    /// Sends `signal` to the run: to its whole process group when it is this watchdog's
    /// child, to the run alone when adopted (its group may be a person's shell job).
    pub(super) fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.pid());
        let _ = match self {
            Watched::Child(_) => killpg(pid, signal),
            Watched::Adopted { .. } => kill(pid, signal),
        };
    }
}

impl Watchdog {
    /// Follows the run until it ends, or stops it when it stalls. A stop asked of the
    /// watchdog (Ctrl-C, SIGTERM) is passed on to the run, which then ends as it does.
    pub(super) fn follow(&mut self, watched: &mut Watched) -> Result<Seen> {
        let pid = watched.pid();
        let mut seen_key: Option<String> = None;
        let mut unchanged = Instant::now();
        let mut record: Option<LockRecord> = None;
        let mut passed_on = false;
        loop {
            if let Some(ending) = self.ended(watched)? {
                return Ok(Seen {
                    ending,
                    record,
                    stall: None,
                });
            }
            if !passed_on && let Some(signal) = self.interrupt.requested() {
                if let Ok(signal) = Signal::try_from(signal) {
                    watched.signal(signal);
                }
                passed_on = true;
            }
            if let Some((now, _)) = RunLock::inspect(&self.lock_path).filter(|(r, _)| r.pid == pid)
            {
                let key = serde_json::to_string(&(&now.beat, now.phase.to_string())).ok();
                if key != seen_key {
                    seen_key = key;
                    unchanged = Instant::now();
                }
                record = Some(now);
            }
            if !passed_on
                && let Health::Stalled(why) = decide::health(
                    record.as_ref().and_then(|r| r.beat.as_deref()),
                    unchanged.elapsed(),
                    Timestamp::now(),
                    self.night.watch.stall_after,
                )
            {
                self.stop(watched)?;
                return Ok(Seen {
                    ending: Ending::Stopped,
                    record,
                    stall: Some(why),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// How the run ended, once it has.
    pub(super) fn ended(&self, watched: &mut Watched) -> Result<Option<Ending>> {
        match watched {
            Watched::Child(child) => {
                let status = child
                    .try_wait()
                    .map_err(|e| Error::io("the run kern watch started", e))?;
                Ok(status.map(|s| match (s.code(), s.signal()) {
                    (Some(code), _) => Ending::Exited(u8::try_from(code).unwrap_or(1)),
                    (None, Some(signal)) => Ending::Killed(signal),
                    (None, None) => Ending::Vanished,
                }))
            }
            Watched::Adopted { run, since } => {
                if run.is_running() && !has_exited(run.pid) {
                    return Ok(None);
                }
                // Its lock still names it: it died holding it. Else it ended and said how.
                let left = RunLock::inspect(&self.lock_path).is_some_and(|(r, _)| r.pid == run.pid);
                Ok(Some(match self.exit_code(run.pid, *since) {
                    Some(code) if !left => Ending::Exited(code),
                    _ => Ending::Vanished,
                }))
            }
        }
    }

    /// Stops a stalled run: SIGTERM and SIGCONT (a stopped run may then still end cleanly), a
    /// grace, SIGKILL; then the agent it left, if any, so nothing writes during the backoff.
    fn stop(&self, watched: &mut Watched) -> Result<()> {
        watched.signal(Signal::SIGTERM);
        watched.signal(Signal::SIGCONT);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if self.ended(watched)?.is_some() {
                return self.stop_orphan(watched.pid());
            }
            std::thread::sleep(POLL);
        }
        watched.signal(Signal::SIGKILL);
        match watched {
            Watched::Child(child) => {
                child
                    .wait()
                    .map_err(|e| Error::io("the run kern watch started", e))?;
            }
            Watched::Adopted { run, .. } => {
                while !has_exited(run.pid) && run.is_running() {
                    std::thread::sleep(POLL);
                }
            }
        }
        self.stop_orphan(watched.pid())
    }

    /// Stops the agent process group the dead run `pid` left running, if its lock names one.
    fn stop_orphan(&self, pid: i32) -> Result<()> {
        if let Some((record, false)) = RunLock::inspect(&self.lock_path)
            && record.pid == pid
        {
            stop_orphaned_agent(&record);
        }
        Ok(())
    }
}
