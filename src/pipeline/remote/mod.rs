//! Many machines, one SPEC.md (`kern --remote NAME`, DESIGN.md section 18): the run's side of
//! the claims — keep the branch in step with the remote's, claim a task before it starts,
//! renew the claims held, land a task's commit with a push that expects the tip it read, and
//! publish SPEC.md's outcome of a task that did not land.
//!
//! Decisions a reader must know:
//! - The loop sees only "claim, work as a `-j` task, land": tasks run exactly as `-j` tasks do
//!   (`parallel/`); this module adds the remote around them: this file holds the claims a run
//!   holds ([`Remote`]), [`pick`] claims each task picked, [`sync`] keeps the branch in step,
//!   [`land`] ends a task there. The rules are pure and tested in
//!   [`claim`] (may this run take a task, what a refused push means) and [`spec_merge`] (SPEC.md
//!   when the branch moves under the run); git's effects are `repository/remote.rs`.
//! - Landing is one atomic push: the target branch (expected at the tip kern committed onto)
//!   and the deletion of the task's claim (expected at the claim this run holds). A claim that
//!   lapsed and was taken over makes the push fail, so work of a machine that lost its claim
//!   never lands (the claim's id is the fencing token). A target that moved is fetched, the
//!   local commit dropped, and the task integrated again on the new tip.
//! - The run's branch follows the remote's: before tasks are picked and before each landing,
//!   the remote's tip is fetched and the branch moved to it (only paths that differ are
//!   written, never over a change of the person's), SPEC.md merged by task.
//! - With `--pace`, the machines on one account share one ledger of its usage windows
//!   (`refs/kern/pace/<account-hash>`), pushed with the same compare-and-swap as claims: that
//!   lives with the pace gate, in `pacing/`.
//! - kern's local bookkeeping refs go once they served: a task's `refs/kern/checkpoint/<task>`
//!   and what was fetched for it when it lands or ends, `refs/kern/remote/<name>/` when the
//!   run ends (a cache: every run fetches first).
//! - A run ending any way but kill -9 releases every claim it holds — at its deadline after
//!   pushing each held task's work and publishing its SPEC.md lines, leaving the work for the
//!   machine that claims the task next; a killed run's claims lapse after `--claim-ttl` and
//!   another machine takes the task over, from the work in progress the dead machine last
//!   pushed ([`checkpoint`]).

mod checkpoint;
pub(in crate::pipeline) use checkpoint::{
    adopt_pushed_work, remote_checkpoint, resume_pushed_work,
};
pub(in crate::pipeline) use land::{remote_land, remote_publish, remote_task_ended, spec_at};
pub(in crate::pipeline) use pick::{claim_poll, claimed_picks};
pub(in crate::pipeline) use sync::{remote_open, remote_sync, sync_to};
pub(crate) mod claim;
mod land;
mod pick;
mod pull_request;
pub(crate) mod spec_merge;
mod sync;

use std::collections::BTreeMap;
use std::time::Duration;

use git2::Oid;

use crate::error::Result;
use crate::event::{RunEvent, Told};
use crate::pipeline::Target;
use crate::pipeline::guard::SpecGuard;
use crate::repository::Repository;
use crate::repository::remote::{CLAIMS, Expected, Pushed, RefUpdate};
use crate::spec::{Document, Quoted, TaskIdentity};
use crate::timestamp::Timestamp;
use claim::{ClaimRecord, ClaimStep};

/// The remote of a run and the claims it holds.
pub(crate) struct Remote {
    /// The remote's name (`origin`).
    pub(crate) name: String,
    /// The branch every task lands on (the run's branch, the same name there).
    pub(crate) branch: String,
    /// How long a claim lasts unless renewed.
    pub(crate) ttl: Duration,
    /// This run's id, written into its claims.
    pub(crate) run: String,
    /// The claims held, by task key.
    held: BTreeMap<String, Held>,
    /// Landing pushes refused in a row for the task being landed.
    rounds: u32,
    /// Set when the last pick found tasks left that only other machines hold: the run waits
    /// for them (done, released, or lapsed) instead of ending.
    pub(crate) waiting: bool,
    /// The work in progress pushed for each task held (`refs/kern/work/<key>` there).
    work: BTreeMap<String, Oid>,
    /// Tasks taken over whose job has not started yet: their pushed work is brought in.
    taken_over: Vec<TaskIdentity>,
}

struct Held {
    oid: Oid,
    record: ClaimRecord,
    identity: TaskIdentity,
    /// The tracker issue the task's Issue note names, for the events the tracker hears.
    issue: Option<String>,
}

/// A claim this run no longer holds (freed, or lost to another machine): the task and its
/// issue.
pub(crate) struct Freed {
    /// The task's title.
    pub(crate) task: String,
    /// The tracker issue its Issue note names.
    pub(crate) issue: Option<String>,
}

/// What came of a landing push.
pub(crate) enum Landing {
    /// The task's commit is the remote's tip; its claim is gone.
    Landed,
    /// The branch moved on: integrate again on the new tip.
    Again,
    /// It did not land and never will from here: the run goes on with this end.
    Kept(crate::event::IterationEnd),
}

/// What a claim attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// Another machine holds the task (or won the race for it).
    No,
    /// This run holds it now: a new claim, or its own kept.
    Yes,
    /// This run took over a lapsed claim: its holder (and the holder's host, when its claim
    /// said) and this attempt's number.
    TookOver {
        holder: String,
        host: Option<String>,
        attempt: u32,
    },
}

/// The claim's key of a task: its titles' slugs, root first (`-N` for a repeated one).
pub(crate) fn task_key(identity: &TaskIdentity) -> String {
    let mut key = identity
        .path
        .iter()
        .map(|t| crate::text::slug(t))
        .collect::<Vec<_>>()
        .join("--");
    if identity.occurrence > 0 {
        key.push_str(&format!("-{}", identity.occurrence + 1));
    }
    key
}

impl Remote {
    /// The remote `name` for a run on `branch` (checked: a usage error when the clone has no
    /// such remote).
    pub(crate) fn new(repo: &Repository, name: &str, ttl: Duration, run: &str) -> Result<Remote> {
        repo.check_remote(name)?;
        let branch = repo.branch_name()?;
        Ok(Remote {
            name: name.to_string(),
            branch,
            ttl,
            run: run.to_string(),
            held: BTreeMap::new(),
            rounds: 0,
            waiting: false,
            work: BTreeMap::new(),
            taken_over: Vec::new(),
        })
    }

    fn record(&self, task: &str, attempt: u32) -> ClaimRecord {
        ClaimRecord {
            task: task.to_string(),
            host: nix::unistd::gethostname()
                .map_or_else(|_| "unknown".into(), |h| h.to_string_lossy().into_owned()),
            pid: std::process::id(),
            run: self.run.clone(),
            attempt,
            expires: Timestamp::now().epoch_seconds() + self.ttl.as_secs() as i64,
        }
    }

    fn claim_ref(key: &str) -> String {
        format!("{CLAIMS}{key}")
    }

    /// Tries to claim the task `key` as the claims were last fetched.
    pub(crate) fn claim(
        &mut self,
        repo: &Repository,
        key: &str,
        identity: &TaskIdentity,
        issue: Option<String>,
    ) -> Result<Claimed> {
        let claims = repo.fetched_claims(&self.name)?;
        let read = claims
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, oid, m)| (*oid, ClaimRecord::parse(m)));
        let now = Timestamp::now().epoch_seconds();
        let step = claim::claim_step(read.as_ref().map(|(o, r)| (*o, r.as_ref())), &self.run, now);
        let holder = read
            .as_ref()
            .and_then(|(_, r)| r.as_ref())
            .map(|r| format!("pid {} on {}", r.pid, r.host));
        let host = read
            .as_ref()
            .and_then(|(_, r)| r.as_ref())
            .map(|r| r.host.clone());
        let (expected, attempt) = match step {
            ClaimStep::HeldElsewhere { .. } => return Ok(Claimed::No),
            ClaimStep::Mine(oid) => {
                if let Some((_, Some(record))) = read {
                    self.held.insert(
                        key.to_string(),
                        Held {
                            oid,
                            record,
                            identity: identity.clone(),
                            issue,
                        },
                    );
                }
                return Ok(Claimed::Yes);
            }
            ClaimStep::Create => (Expected::Absent, 1),
            ClaimStep::TakeOver { stale, attempt } => (Expected::At(stale), attempt),
        };
        let record = self.record(key, attempt);
        let oid = repo.claim_commit(&record.message())?;
        let pushed = repo.push_expecting(
            &self.name,
            &[RefUpdate {
                name: Self::claim_ref(key),
                new: Some(oid),
                expected,
            }],
        )?;
        if pushed != Pushed::Done {
            return Ok(Claimed::No);
        }
        self.held.insert(
            key.to_string(),
            Held {
                oid,
                record,
                identity: identity.clone(),
                issue,
            },
        );
        Ok(match expected {
            Expected::At(_) => Claimed::TookOver {
                holder: holder.unwrap_or_else(|| "a claim kern did not write".into()),
                host,
                attempt,
            },
            _ => Claimed::Yes,
        })
    }

    /// Renews each claim held that is due; returns the tasks whose claim was lost (taken over
    /// after it lapsed).
    pub(crate) fn renew(&mut self, repo: &Repository) -> Result<Vec<Freed>> {
        let now = Timestamp::now().epoch_seconds();
        let ttl = self.ttl.as_secs() as i64;
        let due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| claim::renew_due(h.record.expires, ttl, now))
            .map(|(k, _)| k.clone())
            .collect();
        let mut lost = Vec::new();
        for key in due {
            let Some(held) = self.held.get(&key) else {
                continue;
            };
            let record = self.record(&key, held.record.attempt);
            let oid = repo.claim_commit(&record.message())?;
            match repo.push_expecting(
                &self.name,
                &[RefUpdate {
                    name: Self::claim_ref(&key),
                    new: Some(oid),
                    expected: Expected::At(held.oid),
                }],
            )? {
                Pushed::Done => {
                    if let Some(h) = self.held.get_mut(&key) {
                        h.oid = oid;
                        h.record = record;
                    }
                }
                _ => {
                    self.work.remove(&key);
                    if let Some(h) = self.held.remove(&key) {
                        lost.push(Freed {
                            task: h.identity.path.last().cloned().unwrap_or_default(),
                            issue: h.issue,
                        });
                    }
                }
            }
        }
        Ok(lost)
    }

    /// Frees the claim on `identity` when this run holds it (a claim taken over meanwhile is
    /// left alone: the push expects the id this run holds): the claim freed, if one was.
    pub(crate) fn release(
        &mut self,
        repo: &Repository,
        identity: &TaskIdentity,
    ) -> Result<Option<Freed>> {
        let key = task_key(identity);
        if let Some(held) = self.held.remove(&key) {
            // Its work in progress goes with it: the task ended here.
            let work = self.work.remove(&key).map(|w| RefUpdate {
                name: format!("{}{key}", checkpoint::WORK),
                new: None,
                expected: Expected::At(w),
            });
            let claim = RefUpdate {
                name: Self::claim_ref(&key),
                new: None,
                expected: Expected::At(held.oid),
            };
            let updates: Vec<RefUpdate> = [Some(claim), work].into_iter().flatten().collect();
            repo.push_expecting(&self.name, &updates)?;
            return Ok(Some(Freed {
                task: held.identity.path.last().cloned().unwrap_or_default(),
                issue: held.issue,
            }));
        }
        Ok(None)
    }

    /// Frees the claim on `identity` and leaves its pushed work on the remote: the run stops
    /// at its deadline with the task unfinished, and the machine that claims it next resumes
    /// from that work. The claim freed, if this run held one.
    pub(crate) fn hand_over(
        &mut self,
        repo: &Repository,
        identity: &TaskIdentity,
    ) -> Result<Option<Freed>> {
        let key = task_key(identity);
        let Some(held) = self.held.remove(&key) else {
            return Ok(None);
        };
        self.work.remove(&key);
        repo.push_expecting(
            &self.name,
            &[RefUpdate {
                name: Self::claim_ref(&key),
                new: None,
                expected: Expected::At(held.oid),
            }],
        )?;
        Ok(Some(Freed {
            task: held.identity.path.last().cloned().unwrap_or_default(),
            issue: held.issue,
        }))
    }

    /// Frees every claim this run holds (the run ends): the claims freed.
    pub(crate) fn release_all(&mut self, repo: &Repository) -> Vec<Freed> {
        let ids: Vec<TaskIdentity> = self.held.values().map(|h| h.identity.clone()).collect();
        let mut freed = Vec::new();
        for id in ids {
            match self.release(repo, &id) {
                Ok(released) => freed.extend(released),
                Err(e) => tracing::warn!(error = %e, "releasing a claim"),
            }
        }
        freed
    }

    /// The tasks this run holds.
    pub(crate) fn held_tasks(&self) -> Vec<TaskIdentity> {
        self.held.values().map(|h| h.identity.clone()).collect()
    }

    /// The tasks of `doc` another run holds a live claim on (task indices).
    pub(crate) fn held_elsewhere(&self, repo: &Repository, doc: &Document) -> Result<Vec<usize>> {
        let now = Timestamp::now().epoch_seconds();
        let claims = repo.fetched_claims(&self.name)?;
        Ok((0..doc.tasks().len())
            .filter(|&i| {
                let key = task_key(&doc.identity(i));
                claims.iter().any(|(k, oid, m)| {
                    *k == key
                        && matches!(
                            claim::claim_step(
                                Some((*oid, ClaimRecord::parse(m).as_ref())),
                                &self.run,
                                now
                            ),
                            ClaimStep::HeldElsewhere { .. }
                        )
                })
            })
            .collect())
    }

    /// The push that lands `commit` (made on `onto`) and frees the task's claim, all or
    /// nothing; `Stale` also when this run holds no claim on it any more.
    fn land(&self, repo: &Repository, key: &str, commit: Oid, onto: Oid) -> Result<Pushed> {
        let Some(held) = self.held.get(key) else {
            return Ok(Pushed::Stale);
        };
        repo.push_expecting(
            &self.name,
            &[
                RefUpdate {
                    name: format!("refs/heads/{}", self.branch),
                    new: Some(commit),
                    expected: Expected::At(onto),
                },
                RefUpdate {
                    name: Self::claim_ref(key),
                    new: None,
                    expected: Expected::At(held.oid),
                },
            ]
            .into_iter()
            .chain(self.work.get(key).map(|&w| RefUpdate {
                name: format!("{}{key}", checkpoint::WORK),
                new: None,
                expected: Expected::At(w),
            }))
            .collect::<Vec<_>>(),
        )
    }

    /// True when the claim on `key`, as fetched now, is still the one this run holds.
    fn still_mine(&self, repo: &Repository, key: &str) -> Result<bool> {
        let Some(held) = self.held.get(key) else {
            return Ok(false);
        };
        Ok(repo
            .fetched_claims(&self.name)?
            .iter()
            .any(|(k, oid, _)| k == key && *oid == held.oid))
    }
}

/// A task's job was prepared: when this run took the task over, the work its last holder
/// pushed is brought into the fresh worktree, and said.
pub(in crate::pipeline) fn remote_job_prepared(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    doc: &Document,
    task: usize,
    slug: &str,
) -> Result<()> {
    let Some(remote) = target.remote_mut() else {
        return Ok(());
    };
    let identity = doc.identity(task);
    let before = remote.taken_over.len();
    remote.taken_over.retain(|t| *t != identity);
    if remote.taken_over.len() == before {
        return Ok(());
    }
    let title = Quoted(&doc.tasks()[task].title);
    let key = task_key(&identity);
    let paths = resume_pushed_work(guard, target, doc, task, slug)?;
    guard.teller.emit(RunEvent::Told(Told::Resumed {
        task: title.0.to_string(),
        work: format!("{}{key}", checkpoint::WORK),
        paths,
    }));
    Ok(())
}

/// Renews the claims due (a claim lost is said) and pushes each held task's work in
/// progress.
pub(in crate::pipeline) fn remote_renew(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
) -> Result<()> {
    let Some(remote) = target.remote_mut() else {
        return Ok(());
    };
    for lost in remote.renew(&guard.cx.ws.repo)? {
        guard.teller.emit(RunEvent::Told(Told::ClaimLost {
            task: lost.task,
            issue: lost.issue,
        }));
    }
    remote_checkpoint(guard, target)
}

/// The night's deadline came with tasks in progress (DESIGN.md section 20): each one's
/// work is pushed, its SPEC.md lines published, and its claim freed, its work left on the
/// remote for whichever machine claims it next. What fails is traced: the claims lapse.
pub(in crate::pipeline) fn remote_hand_over(guard: &SpecGuard<'_, '_>, target: &mut Target) {
    let Some(remote) = target.remote() else {
        return;
    };
    let held = remote.held_tasks();
    if let Err(e) = remote_checkpoint(guard, target) {
        tracing::warn!(error = %e, "pushing the work in progress at the deadline");
    }
    for identity in held {
        if let Err(e) = remote_publish(guard, target, &identity) {
            tracing::warn!(error = %e, "publishing a task's SPEC.md lines at the deadline");
        }
        let freed = match target.remote_mut() {
            Some(remote) => remote.hand_over(&guard.cx.ws.repo, &identity),
            None => Ok(None),
        };
        match freed {
            Ok(Some(freed)) => guard.teller.emit(RunEvent::Told(Told::Released {
                task: freed.task,
                issue: freed.issue,
            })),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "freeing a claim at the deadline"),
        }
    }
}

/// Frees every claim the run holds (it ends), and drops what it fetched of the remote
/// (`refs/kern/remote/<name>/`): a cache the next run fetches again.
pub(in crate::pipeline) fn remote_close(guard: &SpecGuard<'_, '_>, target: &mut Target) {
    if let Some(remote) = target.remote_mut() {
        for freed in remote.release_all(&guard.cx.ws.repo) {
            guard.teller.emit(RunEvent::Told(Told::Released {
                task: freed.task,
                issue: freed.issue,
            }));
        }
        let cached = guard
            .cx
            .ws
            .repo
            .refs_under(&format!("refs/kern/remote/{}/", remote.name))
            .and_then(|refs| guard.cx.ws.repo.delete_refs(&refs));
        if let Err(e) = cached {
            tracing::warn!(error = %e, "pruning the fetched remote refs");
        }
    }
}

/// A task ended here (landed, or released without landing): its local bookkeeping refs
/// go — the checkpoint of its worktree, the work and the claim fetched for it.
pub(in crate::pipeline) fn prune_task_refs(
    guard: &SpecGuard<'_, '_>,
    target: &Target,
    slug: &str,
    key: &str,
) {
    let Some(remote) = target.remote() else {
        return;
    };
    let names = [
        format!("refs/kern/checkpoint/{slug}"),
        format!("refs/kern/remote/{}/work/{key}", remote.name),
        format!("refs/kern/remote/{}/claims/{key}", remote.name),
    ];
    if let Err(e) = guard.cx.ws.repo.delete_refs(&names) {
        tracing::warn!(error = %e, "pruning a task's bookkeeping refs");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_key_is_its_titles_slugs_root_first_numbered_when_repeated() {
        let id = |path: &[&str], occurrence| TaskIdentity {
            path: path.iter().map(ToString::to_string).collect(),
            occurrence,
        };
        assert_eq!(task_key(&id(&["Parse dates"], 0)), "parse-dates");
        assert_eq!(
            task_key(&id(&["API v2", "Parse dates"], 0)),
            "api-v2--parse-dates"
        );
        assert_eq!(task_key(&id(&["Parse dates"], 1)), "parse-dates-2");
    }
}
