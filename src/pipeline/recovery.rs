//! What a run cleans up before its first iteration, when it took over the lock of a run that
//! died: the agent that run left running, kern's half-written temp files, and git's
//! `index.lock` and ref locks when the dead run was writing them.
//!
//! The one decision a reader must know: git's lock files are removed only when the dead run's
//! phase was `committing` or `writing` and the lock file is younger than that run — only then
//! can it be kern's. Any other `index.lock` is someone else's: the run stops with the fix. A
//! run killed while it cleans up hands the cleanup on (`recovering` in its lock record), so
//! two kills in a row never leave a lock file no run will remove.
//!
//! No unit test here: it removes files and kills processes of a dead run; the rule is held by
//! tests/integration/crash.rs and lock.rs with real killed runs.

use crate::error::{Error, Result};
use crate::event::{Leftover, RunEvent, Told};
use crate::pipeline::teller::Teller;
use crate::state::lock::{self, Phase, RunLock, Takeover};
use crate::workspace::Workspace;

/// Cleans up after a stale lock (see the module docs), the run's `lock` saying while it does,
/// told through `teller`.
pub(super) fn recover(
    ws: &Workspace,
    lock: &mut RunLock,
    teller: &Teller,
    takeover: Option<Takeover>,
) -> Result<()> {
    let mut stale_started = None;
    match takeover {
        Some(Takeover::Stale { record, why }) => {
            let orphan = lock::stop_orphaned_agent(&record);
            // A run that died committing or writing left git's locks of its own; one that died
            // while cleaning up after such a run hands that cleanup on.
            let since = if matches!(record.phase, Phase::Committing | Phase::Writing) {
                Some(record.started_at)
            } else {
                record.recovering
            };
            if let Some(since) = since {
                lock.set_recovering(Some(since))?;
                stale_started = Some(since.system_time());
            }
            teller.emit(RunEvent::LockRecovered {
                pid: record.pid,
                why,
                phase: record.phase.to_string(),
            });
            if orphan {
                teller.emit(RunEvent::Told(Told::OrphanStopped));
            }
        }
        Some(Takeover::Unreadable { path }) => {
            teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                path: path.display().to_string(),
                what: Leftover::UnreadableLock,
            }));
        }
        Some(Takeover::LegacyDir { path }) => {
            teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                path: path.display().to_string(),
                what: Leftover::ScriptLock,
            }));
        }
        None => {}
    }
    // A kern killed while writing SPEC.md or LEARNINGS.md leaves its temp file beside
    // them: in the work tree, where it would block a new task or land in a commit.
    if let Some(dir) = ws.spec_path.parent() {
        for path in crate::atomic_file::remove_leftovers(dir) {
            teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                path: path.display().to_string(),
                what: Leftover::TempFile,
            }));
        }
    }
    if let Some(started) = stale_started {
        for path in ws.repo.recover_ref_locks(started)? {
            teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                path: path.display().to_string(),
                what: Leftover::GitLock,
            }));
        }
    }
    if ws.repo.index_lock_present() {
        let Some(started) = stale_started else {
            return Err(Error::IndexLocked {
                path: ws.repo.git().path().join("index.lock"),
            });
        };
        if let Some(path) = ws.repo.recover_index_lock(started)? {
            teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                path: path.display().to_string(),
                what: Leftover::GitLock,
            }));
        }
    }
    if stale_started.is_some() {
        lock.set_recovering(None)?;
    }
    Ok(())
}
