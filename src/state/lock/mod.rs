//! The run lock: one kern per project and branch (DESIGN.md section 7).
//!
//! The one decision a reader must know: the flock is the truth, the JSON record is the
//! explanation. A live kern always holds an exclusive `flock` on the lock file for its whole
//! run; the kernel drops it when the process dies, however it dies. So a file whose flock is
//! free was left by a dead run and is stale, whatever its record says — except that, as belt
//! and braces for file systems where flock is unreliable (NFS), a record naming a process on
//! this host that is still running with the same start time is still refused. A kern never
//! deletes a lock file it does not hold: on contention it only reads the record to name the
//! holder. On release the file is removed only while it is still the same inode kern locked,
//! and a lock taken on a file that was unlinked meanwhile is retried on the new file.
//!
//! The original bash script's `<project>-<branch>.lock.d` folder is honoured: a `pid` file in
//! it naming a live process refuses the run (exit 3); one naming a dead process is stale and
//! the folder is removed. A folder without a readable `pid` file is refused too, with the fix:
//! kern cannot tell whether its owner still runs, and deleting a live run's lock is worse than
//! asking the person to remove a dead one.
//!
//! Process identity is (pid, start time) on Linux; elsewhere liveness alone, so there a reused
//! pid reads as a live holder and kern refuses rather than deletes.
//!
//! The record also carries the run's heartbeat of progress (`beat.rs`): every write of the
//! record says what moved last, and a [`Beat`] lets the tasks of a run (`-j`) tell the run's
//! own lock that they moved.

mod beat;

pub(crate) use beat::{BEAT_EVERY, Beat, QuietLimits};
pub(crate) use beat::{Heartbeat, Moved};

use std::cell::RefCell;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use nix::unistd::{Pid, getpgrp};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::supervisor::identity::{ProcessIdentity, pid_alive};
use crate::timestamp::Timestamp;

/// How long an orphaned agent group gets between SIGTERM and SIGKILL.
const ORPHAN_GRACE: Duration = Duration::from_secs(3);

/// The JSON inside the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// The holder's process id.
    pub pid: i32,
    /// The holder's start time in clock ticks since boot (Linux), to tell a reused pid.
    pub start_time: Option<u64>,
    /// The host the holder runs on.
    pub host: String,
    /// When the run started (written in UTC; any offset is read).
    pub started_at: Timestamp,
    /// The holder's command line.
    pub argv: Vec<String>,
    /// What the run is doing.
    pub phase: Phase,
    /// The agent's process group running at the moment, if any.
    pub agent_group: Option<AgentGroup>,
    /// While this run cleans up after a run that died committing or writing: when that run
    /// started. A run killed in the middle of that cleanup hands it on: the next one still
    /// knows whose git lock files are left (DESIGN.md section 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovering: Option<Timestamp>,
    /// The run's last sign of progress (`beat.rs`); records of older kerns have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat: Option<Box<Heartbeat>>,
}

/// An agent's process group, as recorded so a later run can stop it if kern died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentGroup {
    /// The group id (the leader's pid).
    pub pgid: i32,
    /// The leader's start time (Linux), to tell it from a later process with the same pid.
    pub leader_start_time: Option<u64>,
}

impl LockRecord {
    /// `pid 123 on host h, started 2025-…, phase implement`: the holder, for messages.
    pub fn holder(&self) -> String {
        format!(
            "pid {} on host {}, started {}, phase {}",
            self.pid, self.host, self.started_at, self.phase
        )
    }
}

/// What a run is doing, as its lock record says. `Committing` and `Writing` drive behaviour: a
/// kern that takes over the lock of a run that died in them may remove the `index.lock` and
/// ref locks that run left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Taking the lock, recovering, checking the repository.
    Starting,
    /// Reading SPEC.md and choosing the task.
    Selecting,
    /// Running a stage's agent.
    Stage(Stage),
    /// Waiting for a usage limit to reset before running the stage again.
    Waiting(Stage),
    /// Running the check gate.
    Check,
    /// Making kern's commit (or finishing one a dead run journaled).
    Committing,
    /// Writing git's index or refs outside a commit: putting back what a stage changed,
    /// setting a task's work aside.
    Writing,
    /// The pause between iterations.
    Sleeping,
    /// Parallel tasks run in their worktrees (each task's own lock says its stage); the run
    /// itself writes nothing meanwhile.
    Tasks,
    /// A phase this kern does not know (written by another version); shown as it is.
    Other(String),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Starting => f.write_str("starting"),
            Phase::Selecting => f.write_str("selecting"),
            Phase::Stage(stage) => f.write_str(stage.name()),
            Phase::Waiting(stage) => write!(f, "{}: waiting for usage limit reset", stage.name()),
            Phase::Check => f.write_str("check"),
            Phase::Committing => f.write_str("committing"),
            Phase::Writing => f.write_str("writing"),
            Phase::Sleeping => f.write_str("sleeping"),
            Phase::Tasks => f.write_str("tasks in their worktrees"),
            Phase::Other(text) => f.write_str(text),
        }
    }
}

impl From<&str> for Phase {
    fn from(text: &str) -> Phase {
        let known = [
            Phase::Starting,
            Phase::Selecting,
            Phase::Check,
            Phase::Committing,
            Phase::Writing,
            Phase::Sleeping,
            Phase::Tasks,
        ]
        .into_iter()
        .chain(Stage::ALL.into_iter().map(Phase::Stage))
        .chain(Stage::ALL.into_iter().map(Phase::Waiting));
        known
            .into_iter()
            .find(|p| p.to_string() == text)
            .unwrap_or_else(|| Phase::Other(text.to_string()))
    }
}

impl Serialize for Phase {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Phase, D::Error> {
        Ok(Phase::from(String::deserialize(d)?.as_str()))
    }
}

/// A lock kern took over from a run that is gone; the caller says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Takeover {
    /// The lock file held the record of a dead run.
    Stale {
        /// The dead run's record (its start time and agent group matter to the caller).
        record: LockRecord,
        /// Why it counts as dead.
        why: String,
    },
    /// The lock file held text that is not a record (a run killed while writing it).
    Unreadable {
        /// The lock file.
        path: PathBuf,
    },
    /// The original script's lock folder named a dead process and was removed.
    LegacyDir {
        /// The removed folder.
        path: PathBuf,
    },
}

/// The run lock, held until dropped.
#[derive(Debug)]
pub struct RunLock {
    held: Rc<RefCell<Held>>,
}

/// The lock file kern holds, and what it last wrote there.
#[derive(Debug)]
struct Held {
    file: File,
    path: PathBuf,
    record: LockRecord,
    /// When the record was last written.
    written: Instant,
    /// How long the run's own limits let each kind of silence last.
    quiet: QuietLimits,
}

impl RunLock {
    /// Takes the lock at `path` for a run with `argv`, or fails with [`Error::LockHeld`]
    /// naming the holder. A stale lock (file or legacy folder) is taken over and returned as
    /// a [`Takeover`]; the caller reports it and calls [`stop_orphaned_agent`] on the record.
    /// `legacy_dir` is the original script's lock folder for this work tree, when it has one
    /// (a parallel task's worktree never had the script).
    pub fn acquire(
        path: &Path,
        legacy_dir: Option<&Path>,
        argv: &[String],
    ) -> Result<(RunLock, Option<Takeover>)> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let me = ProcessIdentity::current();
        // The legacy folder first: a refusal then leaves the lock file untouched.
        let stale_legacy = match legacy_dir {
            Some(dir) => check_legacy(dir, me.pid)?,
            None => None,
        };
        let file = lock_file(path)?;
        let host = host_name();

        let mut takeover = match read_record(&file) {
            Previous::None => None,
            Previous::Unreadable => Some(Takeover::Unreadable {
                path: path.to_path_buf(),
            }),
            Previous::Record(record) => {
                let why = if record.host != host {
                    format!("it was left by host `{}` and nothing holds it", record.host)
                } else if record.pid == me.pid && record.start_time == me.start_time {
                    "this process left it behind".to_string()
                } else if !pid_alive(record.pid) {
                    format!("process {} is no longer running", record.pid)
                } else if (ProcessIdentity {
                    pid: record.pid,
                    start_time: record.start_time,
                })
                .is_running()
                {
                    // A free flock with a live owner: flock is not to be trusted here (NFS).
                    return Err(Error::LockHeld {
                        path: path.to_path_buf(),
                        holder: record.holder(),
                    });
                } else {
                    format!(
                        "process {} is now another program (its start time differs: the pid was reused)",
                        record.pid
                    )
                };
                Some(Takeover::Stale { record, why })
            }
        };

        if let Some(legacy) = stale_legacy {
            takeover = Some(match takeover {
                Some(Takeover::Stale { record, why }) => Takeover::Stale {
                    record,
                    why: format!(
                        "{why}; the original script's lock folder `{}` was stale too and is removed",
                        legacy.display()
                    ),
                },
                _ => Takeover::LegacyDir { path: legacy },
            });
        }

        let started_at = Timestamp::now();
        let record = LockRecord {
            pid: me.pid,
            start_time: me.start_time,
            host,
            started_at,
            argv: argv.to_vec(),
            phase: Phase::Starting,
            agent_group: None,
            recovering: None,
            beat: Some(Box::new(Heartbeat::after(
                None,
                Moved::Started,
                None,
                started_at,
            ))),
        };
        let mut held = Held {
            file,
            path: path.to_path_buf(),
            record,
            written: Instant::now(),
            quiet: QuietLimits::default(),
        };
        held.write()?;
        Ok((
            RunLock {
                held: Rc::new(RefCell::new(held)),
            },
            takeover,
        ))
    }

    /// The record as last written.
    pub fn record(&self) -> LockRecord {
        self.held.borrow().record.clone()
    }

    /// The lock file.
    pub fn path(&self) -> PathBuf {
        self.held.borrow().path.clone()
    }

    /// The handle through which the run's tasks say that they moved.
    pub fn beat(&self) -> Beat {
        Beat(Rc::downgrade(&self.held))
    }

    /// How long the run's own limits let each kind of silence last: the heartbeat of a phase
    /// that one of them bounds says until when (`beat.rs`).
    pub(crate) fn set_quiet_limits(&mut self, quiet: QuietLimits) {
        self.held.borrow_mut().quiet = quiet;
    }

    /// Records what the run is doing now (rewrites the file in place; the lock is kept). Each
    /// call is progress, also into the phase the run is already in (another try of a stage).
    pub fn set_phase(&mut self, phase: Phase) -> Result<()> {
        let mut held = self.held.borrow_mut();
        let quiet = held.quiet.for_phase(&phase);
        held.beat(Moved::Phase, quiet);
        if held.record.phase == phase {
            // Nothing new to say but the heartbeat: written as any other move is.
            return if held.written.elapsed() >= BEAT_EVERY {
                held.write()
            } else {
                Ok(())
            };
        }
        held.record.phase = phase;
        held.write()
    }

    /// Records that this run is cleaning up after a run that started at `since` and died
    /// committing or writing (`None`: done), so a run that finds this lock stale goes on with it.
    pub fn set_recovering(&mut self, since: Option<Timestamp>) -> Result<()> {
        let mut held = self.held.borrow_mut();
        held.record.recovering = since;
        held.write()
    }

    /// Records the agent's process group (or that none runs), so a run that finds this lock
    /// stale can stop an orphaned agent.
    pub fn set_agent_group(&mut self, group: Option<AgentGroup>) -> Result<()> {
        let mut held = self.held.borrow_mut();
        held.record.agent_group = group;
        held.write()
    }

    /// Reads the lock at `path` without touching it (no flock either, so a starting kern is
    /// never disturbed): the record, and whether its holder is a live process — on this host
    /// judged by pid and start time; a record from another host counts as live, as kern cannot
    /// tell. `None`: no lock file, or no readable record in it.
    pub fn inspect(path: &Path) -> Option<(LockRecord, bool)> {
        // A record being rewritten may be read half-written: try again shortly.
        for attempt in 0..3 {
            let text = fs::read_to_string(path).ok()?;
            if text.trim().is_empty() && attempt == 2 {
                return None;
            }
            if let Some(record) = parse_record(&text) {
                let live = record.host != host_name()
                    || ProcessIdentity {
                        pid: record.pid,
                        start_time: record.start_time,
                    }
                    .is_running();
                return Some((record, live));
            }
            if attempt < 2 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        None
    }
}

impl Held {
    /// Rewrites the locked file through the locked handle. Never a rename: the
    /// flock belongs to this inode. Never an fsync either: readers see the page cache, and
    /// after a crash of the machine every holder is dead and the record only says whose lock
    /// it was — so a sync would buy nothing, and this is written about ten times per iteration
    /// and once a second while the run moves.
    fn write(&mut self) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.record)
            .map_err(|e| Error::Internal(format!("lock record: {e}")))?;
        text.push('\n');
        let mut file = &self.file;
        // Overwrite in place, then cut the tail: a reader at any moment sees a whole record
        // first (the old one, or the new one followed by the old one's leftover tail, which
        // `parse_record` ignores) — never an empty file that reads as "free".
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|()| file.set_len(text.len() as u64))
            .map_err(|e| Error::io(&self.path, e))?;
        self.written = Instant::now();
        Ok(())
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Remove the file only while it is still the inode we hold; closing the handle (after
        // this) releases the flock. Unlinking first means no one can lock this inode after us
        // and believe it is the lock: `lock_file` checks the path still names its inode. A
        // [`Beat`] holds no strong reference, so the handle closes here.
        let held = self.held.borrow();
        if let (Ok(ours), Ok(there)) = (held.file.metadata(), fs::metadata(&held.path))
            && ours.ino() == there.ino()
            && ours.dev() == there.dev()
        {
            let _ = fs::remove_file(&held.path);
        }
    }
}

/// Stops the agent process group a dead run left behind, if the record names one whose
/// leader is still the same process (same start time; where start times are unknown, nothing
/// is stopped: a pid alone could be anyone's). SIGTERM to the group, a grace, then SIGKILL.
/// True when a group was signalled.
pub fn stop_orphaned_agent(record: &LockRecord) -> bool {
    let Some(group) = record.agent_group else {
        return false;
    };
    let Some(recorded) = group.leader_start_time else {
        return false;
    };
    if record.host != host_name() || group.pgid <= 1 || Pid::from_raw(group.pgid) == getpgrp() {
        return false;
    }
    if crate::supervisor::identity::start_time(group.pgid) != Some(recorded) {
        return false;
    }
    let group = crate::supervisor::ProcessGroup {
        pgid: group.pgid,
        leader: crate::supervisor::identity::ProcessIdentity {
            pid: group.pgid,
            start_time: Some(recorded),
        },
    };
    group.stop_if_same(ORPHAN_GRACE)
}

/// Opens and flocks the lock file, retrying while the path names another inode than the one
/// locked (its previous holder unlinked it between our open and our lock).
fn lock_file(path: &Path) -> Result<File> {
    for _ in 0..20 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        if let Err(e) = fs2::FileExt::try_lock_exclusive(&file) {
            if e.raw_os_error() == fs2::lock_contended_error().raw_os_error() {
                let holder = match read_record(&file) {
                    Previous::Record(record) => record.holder(),
                    _ => "its record is being written".to_string(),
                };
                return Err(Error::LockHeld {
                    path: path.to_path_buf(),
                    holder,
                });
            }
            return Err(Error::io(path, e));
        }
        let ours = file.metadata().map_err(|e| Error::io(path, e))?;
        match fs::metadata(path) {
            Ok(there) if there.ino() == ours.ino() && there.dev() == ours.dev() => {
                return Ok(file);
            }
            _ => {}
        }
    }
    Err(Error::Internal(format!(
        "the lock file `{}` kept being replaced while kern tried to lock it",
        path.display()
    )))
}

enum Previous {
    None,
    Unreadable,
    Record(LockRecord),
}

fn read_record(mut file: &File) -> Previous {
    let mut text = String::new();
    if file.seek(SeekFrom::Start(0)).is_err() || file.read_to_string(&mut text).is_err() {
        return Previous::Unreadable;
    }
    if text.trim().is_empty() {
        return Previous::None;
    }
    match parse_record(&text) {
        Some(record) => Previous::Record(record),
        None => Previous::Unreadable,
    }
}

/// The first JSON value of the file: a record rewritten in place may be followed by the tail
/// of a longer previous one until the file is cut to length.
fn parse_record(text: &str) -> Option<LockRecord> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<LockRecord>()
        .next()?
        .ok()
}

/// Honours the original script's lock folder: `Ok(Some(path))` when it was stale and is now
/// removed, `Ok(None)` when there is none, [`Error::LockHeld`] when it is (or may be) held.
fn check_legacy(dir: &Path, my_pid: i32) -> Result<Option<PathBuf>> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Ok(None),
    }
    let pid = fs::read_to_string(dir.join("pid"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    let held = |holder: String| Error::LockHeld {
        path: dir.to_path_buf(),
        holder,
    };
    match pid {
        None => Err(held(
            "the original kern script's lock folder, without a pid file — if no kern script is running, remove the folder".to_string(),
        )),
        Some(pid) if pid != my_pid && pid_alive(pid) => Err(held(format!(
            "pid {pid}, the original kern script — if it is not running, remove the folder"
        ))),
        Some(_) => match fs::remove_dir_all(dir) {
            Ok(()) => Ok(Some(dir.to_path_buf())),
            // Another kern starting at the same moment removed it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(dir, e)),
        },
    }
}

fn host_name() -> String {
    nix::unistd::gethostname().map_or_else(
        |_| "unknown".to_string(),
        |h| h.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pid: i32) -> LockRecord {
        LockRecord {
            pid,
            start_time: Some(42),
            host: "box".into(),
            started_at: "2025-06-01T10:00:00+02:00".parse().unwrap(),
            argv: vec!["kern".into(), "10".into()],
            phase: Phase::Stage(Stage::Implement),
            agent_group: Some(AgentGroup {
                pgid: 77,
                leader_start_time: Some(43),
            }),
            recovering: None,
            beat: None,
        }
    }

    #[test]
    fn a_record_followed_by_an_older_tail_still_reads() {
        let r = LockRecord {
            pid: 42,
            start_time: Some(7),
            host: "h".into(),
            started_at: "2026-11-22T00:00:00Z".parse().unwrap(),
            argv: vec!["kern".into()],
            phase: Phase::Stage(Stage::Research),
            agent_group: None,
            recovering: None,
            beat: None,
        };
        let mut text = serde_json::to_string_pretty(&r).unwrap();
        text.push_str("\n  \"phase\": \"a much longer old phase\"\n}\n");
        assert_eq!(parse_record(&text), Some(r));
        assert_eq!(parse_record(""), None);
    }

    #[test]
    fn the_record_reads_back_and_names_its_holder() {
        let r = record(1234);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<LockRecord>(&text).unwrap(), r);
        assert_eq!(
            r.holder(),
            "pid 1234 on host box, started 2025-06-01T08:00:00Z, phase implement"
        );
        assert_eq!(r.started_at.epoch_seconds(), 1_748_764_800);
    }

    #[test]
    fn phases_read_back_from_their_names() {
        for phase in [
            Phase::Starting,
            Phase::Selecting,
            Phase::Stage(Stage::Review),
            Phase::Waiting(Stage::Implement),
            Phase::Check,
            Phase::Committing,
            Phase::Writing,
            Phase::Sleeping,
            Phase::Tasks,
            Phase::Other("from a newer kern".into()),
        ] {
            let json = serde_json::to_string(&phase).unwrap();
            assert_eq!(
                serde_json::from_str::<Phase>(&json).unwrap(),
                phase,
                "{json}"
            );
        }
        assert_eq!(Phase::Stage(Stage::Review).to_string(), "commit");
        assert_eq!(
            Phase::Waiting(Stage::Research).to_string(),
            "research: waiting for usage limit reset"
        );
    }

    #[test]
    fn an_orphan_is_stopped_only_when_its_leader_is_provably_the_same() {
        let mut r = record(1);
        r.host = host_name();
        r.agent_group = None;
        assert!(!stop_orphaned_agent(&r), "no group");
        r.agent_group = Some(AgentGroup {
            pgid: std::process::id() as i32,
            leader_start_time: None,
        });
        assert!(!stop_orphaned_agent(&r), "no start time: no kill");
    }
}
