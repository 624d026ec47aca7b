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
use crate::pipeline::Run;
use crate::state::lock::{self, Phase, Takeover};

impl Run<'_> {
    /// Cleans up after a stale lock (see the module docs).
    pub(super) fn recover(&mut self, takeover: Option<Takeover>) -> Result<()> {
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
                    self.lock.set_recovering(Some(since))?;
                    stale_started = Some(since.system_time());
                }
                self.teller.emit(RunEvent::LockRecovered {
                    pid: record.pid,
                    why,
                    phase: record.phase.to_string(),
                });
                if orphan {
                    self.teller.emit(RunEvent::Told(Told::OrphanStopped));
                }
            }
            Some(Takeover::Unreadable { path }) => {
                self.teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                    path: path.display().to_string(),
                    what: Leftover::UnreadableLock,
                }));
            }
            Some(Takeover::LegacyDir { path }) => {
                self.teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                    path: path.display().to_string(),
                    what: Leftover::ScriptLock,
                }));
            }
            None => {}
        }
        // A kern killed while writing SPEC.md or LEARNINGS.md leaves its temp file beside
        // them: in the work tree, where it would block a new task or land in a commit.
        if let Some(dir) = self.cx.ws.spec_path.parent() {
            for path in crate::atomic_file::remove_leftovers(dir) {
                self.teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                    path: path.display().to_string(),
                    what: Leftover::TempFile,
                }));
            }
        }
        if let Some(started) = stale_started {
            for path in self.cx.ws.repo.recover_ref_locks(started)? {
                self.teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                    path: path.display().to_string(),
                    what: Leftover::GitLock,
                }));
            }
        }
        if self.cx.ws.repo.index_lock_present() {
            let Some(started) = stale_started else {
                return Err(Error::IndexLocked {
                    path: self.cx.ws.repo.git().path().join("index.lock"),
                });
            };
            if let Some(path) = self.cx.ws.repo.recover_index_lock(started)? {
                self.teller.emit(RunEvent::Told(Told::LeftoverRemoved {
                    path: path.display().to_string(),
                    what: Leftover::GitLock,
                }));
            }
        }
        if stale_started.is_some() {
            self.lock.set_recovering(None)?;
        }
        Ok(())
    }
}
