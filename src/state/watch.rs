//! `watch.json`: what the `kern watch` of a state folder does — its pid, the run it watches,
//! every restart with the gap it left in the night, how it ended — for `kern status`
//! (`watched by pid 4100, 1 restart (stalled 23:14–23:29)`), `kern log -f` and the watchdog
//! that comes after it (DESIGN.md section 20).
//!
//! The one decision a reader must know: as with the run lock, a flock is the truth and the
//! record the explanation. The live watchdog holds `watch.lock`; the record is its alone,
//! rewritten whole (atomically) at each change, and a record whose watchdog is gone is only
//! history — the next watchdog starts its own.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::event::Lost;
use crate::supervisor::identity::ProcessIdentity;
use crate::timestamp::Timestamp;

/// The record of one watchdog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WatchRecord {
    /// Its id (`watch-<pid>-<start>`), the `run` of its lines in `run.jsonl`.
    pub id: String,
    /// Its pid.
    pub pid: i32,
    /// Its start time (Linux clock ticks since boot), to tell a reused pid.
    pub start_time: Option<u64>,
    /// The host it runs on.
    pub host: String,
    /// When it started.
    pub started_at: Timestamp,
    /// The run's arguments it starts the run with.
    pub args: Vec<String>,
    /// The run it watches now.
    pub run: Option<WatchedRun>,
    /// Every restart, in order.
    pub restarts: Vec<Restart>,
    /// How it ended, once it has.
    pub ended: Option<WatchEnded>,
}

/// The run a watchdog watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WatchedRun {
    /// Its pid.
    pub pid: i32,
    /// It was running already when the watchdog came.
    pub adopted: bool,
    /// Since when it is watched.
    pub since: Timestamp,
}

/// A run lost and started again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Restart {
    /// Why it was lost.
    pub why: Lost,
    /// The lost run's pid.
    pub run_pid: i32,
    /// What the watchdog saw.
    pub detail: String,
    /// The lost run's last sign of progress: the gap begins.
    pub from: Timestamp,
    /// The run started again: the gap ends.
    pub to: Timestamp,
}

/// How a watchdog ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WatchEnded {
    /// When.
    pub at: Timestamp,
    /// Its exit code (the run's, or 1 when it gave up).
    pub exit_code: u8,
    /// Why, in words.
    pub why: String,
    /// It gave up on a run that kept dying or stalling.
    pub gave_up: bool,
}

impl WatchRecord {
    /// The record at `path`, when there is a readable one.
    pub(crate) fn load(path: &Path) -> Option<WatchRecord> {
        let bytes = crate::private_file::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the record to `path` (atomically, private).
    pub(crate) fn save(&self, path: &Path) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(self)
            .map_err(|e| crate::error::Error::Internal(format!("watch record: {e}")))?;
        text.push(b'\n');
        crate::atomic_file::write_private(path, &text)
    }

    /// True while its watchdog runs: not ended, and its process (pid and start time) alive on
    /// this host.
    pub(crate) fn is_live(&self, host: &str) -> bool {
        self.ended.is_none()
            && self.host == host
            && ProcessIdentity {
                pid: self.pid,
                start_time: self.start_time,
            }
            .is_running()
            && !crate::supervisor::identity::has_exited(self.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_and_a_dead_watchdog_is_not_live() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watch.json");
        let t = Timestamp::from_epoch_seconds(1_795_000_000);
        let me = ProcessIdentity::current();
        let mut record = WatchRecord {
            id: "watch-1-x".into(),
            pid: me.pid,
            start_time: me.start_time,
            host: "box".into(),
            started_at: t,
            args: vec!["10".into(), "30".into()],
            run: Some(WatchedRun {
                pid: 77,
                adopted: false,
                since: t,
            }),
            restarts: vec![Restart {
                why: Lost::Stalled,
                run_pid: 76,
                detail: "nothing moved for 15m".into(),
                from: t,
                to: t,
            }],
            ended: None,
        };
        record.save(&path).unwrap();
        assert_eq!(WatchRecord::load(&path), Some(record.clone()));
        assert!(record.is_live("box"));
        assert!(!record.is_live("another host"));
        record.ended = Some(WatchEnded {
            at: t,
            exit_code: 0,
            why: "the run ended".into(),
            gave_up: false,
        });
        assert!(!record.is_live("box"), "ended");
        record.ended = None;
        record.start_time = record.start_time.map(|s| s + 1);
        if record.start_time.is_some() {
            assert!(!record.is_live("box"), "another process with the pid");
        }
        assert_eq!(WatchRecord::load(&dir.path().join("none.json")), None);
    }
}
