//! A task's end on the remote: its commit landed with the release of its claim in one push, or
//! — when it did not land — its `--review` branch parked there and its SPEC.md lines published
//! in a commit of SPEC.md alone.
//!
//! The decision a reader must know: landing pushes the branch (expected at the tip kern
//! committed onto) and deletes the claim (expected at the claim this run holds) all or nothing,
//! so work of a machine whose claim lapsed never lands; a target that moved is fetched and the
//! task integrated again on the new tip.

use super::claim::{self, AfterRefusal};
use super::{Landing, pull_request, spec_merge, task_key};
use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::pipeline::Target;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::ledger::Ledger;
use crate::repository::remote::{Expected, PRE_PUSH_DECLINED, Pushed, RefUpdate};
use crate::spec::{Quoted, TaskIdentity};
use git2::Oid;
use std::path::{Path, PathBuf};

/// The task `identity` ended here without landing: its branch goes to the remote when
/// `--review` parked work on it, its SPEC.md lines to the remote's branch (a commit of
/// SPEC.md alone, when they changed), and its claim is freed.
pub(in crate::pipeline) fn remote_task_ended(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    identity: &TaskIdentity,
    slug: &str,
) -> Result<()> {
    let Some(remote) = target.remote() else {
        return Ok(());
    };
    if guard.cx.settings.review
        && let Some(oid) = guard.cx.ws.repo.task_branch(slug)
    {
        let name = remote.name.clone();
        let branch = format!("{}{slug}", crate::repository::TASK_BRANCH_PREFIX);
        let pushed = guard.cx.ws.repo.push_expecting(
            &name,
            &[RefUpdate {
                name: format!("refs/heads/{branch}"),
                new: Some(oid),
                expected: Expected::Any,
            }],
        )?;
        if pushed == Pushed::Done {
            guard.teller.emit(RunEvent::Told(Told::PushedForReview {
                branch: branch.clone(),
                remote: name.clone(),
            }));
            if guard.cx.settings.pr {
                let base = remote.branch.clone();
                let title = identity.path.last().map_or("", String::as_str);
                let closes = match guard.cx.settings.tracker {
                    Some(_) => {
                        let doc = guard.spec.reload()?;
                        let issue = doc.find(identity).and_then(|t| doc.tasks()[t].issue());
                        crate::tracker::closes(&issue.into_iter().collect::<Vec<_>>())
                    }
                    None => Vec::new(),
                };
                let opened = pull_request::open(
                    guard.cx.ws.repo.top(),
                    guard.cx.settings.path_var.as_deref(),
                    &base,
                    &branch,
                    title,
                    &closes,
                );
                guard.teller.emit(RunEvent::Told(Told::PullRequest {
                    opened: opened.is_ok(),
                    line: opened.unwrap_or_else(|line| line),
                }));
            }
        } else {
            guard.teller.emit(RunEvent::Told(Told::RemoteRefused {
                remote: name.clone(),
                refused: format!("`{branch}`"),
                why: None,
                stays: "it is here only".into(),
            }));
        }
    }
    // What the task's notes name under refs/kern/attempts/ goes first, so that every
    // machine reading the note on the remote can read the ref too.
    guard.spec.reload()?;
    let named = attempt_refs_named(&guard.spec.last_text(), slug);
    let kept: Vec<RefUpdate> = named
        .iter()
        .filter_map(|name| {
            let oid = guard.cx.ws.repo.ref_target(name)?;
            Some(RefUpdate {
                name: name.clone(),
                new: Some(oid),
                expected: Expected::Any,
            })
        })
        .collect();
    if !kept.is_empty()
        && let Some(remote) = target.remote()
    {
        let name = remote.name.clone();
        if guard.cx.ws.repo.push_expecting(&name, &kept)? != Pushed::Done {
            guard.teller.emit(RunEvent::Told(Told::RemoteRefused {
                remote: name,
                refused: named
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                why: None,
                stays: "it is here only".into(),
            }));
        }
    }
    super::remote_publish(guard, target, identity)?;
    let freed = match target.remote_mut() {
        Some(remote) => remote.release(&guard.cx.ws.repo, identity)?,
        None => None,
    };
    if let Some(freed) = freed {
        guard.teller.emit(RunEvent::Told(Told::Released {
            task: freed.task,
            issue: freed.issue,
        }));
    }
    super::prune_task_refs(guard, target, slug, &task_key(identity));
    Ok(())
}

/// Publishes the SPEC.md lines of the task `identity` on the remote's branch (a commit of
/// SPEC.md alone, when they changed), expecting the tip it read; a refusal is said.
pub(in crate::pipeline) fn remote_publish(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    identity: &TaskIdentity,
) -> Result<()> {
    for _ in 0..claim::MAX_LANDING_ROUNDS {
        let Some(tip) = super::remote_sync(guard, target)? else {
            return Ok(());
        };
        guard.spec.reload()?;
        let ours = guard.spec.last_text();
        let theirs = super::spec_at(guard, tip);
        let publish = spec_merge::merge(&ours, &ours, &theirs, std::slice::from_ref(identity));
        if publish == theirs {
            break;
        }
        let commit = spec_commit(guard, tip, &publish, identity)?;
        let (name, branch) = match target.remote() {
            Some(r) => (r.name.clone(), r.branch.clone()),
            None => return Ok(()),
        };
        match guard.cx.ws.repo.push_expecting(
            &name,
            &[RefUpdate {
                name: format!("refs/heads/{branch}"),
                new: Some(commit),
                expected: Expected::At(tip),
            }],
        )? {
            Pushed::Done => {
                super::sync_to(guard, target, commit)?;
                break;
            }
            Pushed::Refused(why) => {
                guard.teller.emit(RunEvent::Told(Told::RemoteRefused {
                    remote: name.clone(),
                    refused: format!(
                        "SPEC.md's note for {}",
                        Quoted(identity.path.last().map_or("", String::as_str))
                    ),
                    why: Some(why),
                    stays: "it stays in this clone's SPEC.md only".into(),
                }));
                break;
            }
            Pushed::Stale => {}
        }
    }
    Ok(())
}

/// SPEC.md's path in the repository.
fn spec_rel(guard: &SpecGuard<'_, '_>) -> PathBuf {
    guard
        .cx
        .ws
        .spec_path
        .strip_prefix(guard.cx.ws.repo.top())
        .map_or_else(|_| guard.cx.ws.spec_path.clone(), Path::to_path_buf)
}

/// SPEC.md's text at `commit` (empty when it has none).
pub(in crate::pipeline) fn spec_at(guard: &SpecGuard<'_, '_>, commit: Oid) -> String {
    guard.cx.ws.repo.text_at(commit, &spec_rel(guard))
}

/// A commit on `parent` that changes SPEC.md alone, to `text`.
fn spec_commit(
    guard: &SpecGuard<'_, '_>,
    parent: Oid,
    text: &str,
    identity: &TaskIdentity,
) -> Result<Oid> {
    guard.cx.ws.repo.commit_file(
        parent,
        &spec_rel(guard),
        text,
        &format!(
            "kern: SPEC.md — {}\n",
            identity.path.last().map_or("", String::as_str)
        ),
    )
}

/// The task's commit is on the run's branch: push it, with the release of its claim, all
/// or nothing (see the module docs).
pub(in crate::pipeline) fn remote_land(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    ledger: &Ledger,
    identity: &TaskIdentity,
    title: &str,
    slug: &str,
    onto: Oid,
) -> Result<Landing> {
    let Some(remote) = target.remote() else {
        return Ok(Landing::Landed);
    };
    let key = task_key(identity);
    let task_branch = format!("{}{slug}", crate::repository::TASK_BRANCH_PREFIX);
    let Some(commit) = guard.cx.ws.repo.head_oid() else {
        return Ok(Landing::Landed);
    };
    let (name, branch) = (remote.name.clone(), remote.branch.clone());
    let pushed = remote.land(&guard.cx.ws.repo, &key, commit, onto)?;
    let policy = match pushed {
        Pushed::Done => {
            let issue = match target.remote_mut() {
                Some(r) => {
                    r.work.remove(&key);
                    r.rounds = 0;
                    r.held.remove(&key).and_then(|h| h.issue)
                }
                None => None,
            };
            super::prune_task_refs(guard, target, slug, &key);
            guard.teller.emit(RunEvent::Told(Told::Landed {
                task: title.to_string(),
                remote: name.clone(),
                branch: branch.clone(),
                issue,
            }));
            return Ok(Landing::Landed);
        }
        Pushed::Stale => None,
        Pushed::Refused(why) => Some(why),
    };
    // Not landed: the local commit goes; the remote's tip comes.
    let tip = guard.cx.ws.repo.fetch_remote(&name, &branch)?;
    ledger.uncommit(title);
    super::sync_to(guard, target, tip)?;
    let (mine, round) = match target.remote_mut() {
        Some(r) => {
            r.rounds += 1;
            (r.still_mine(&guard.cx.ws.repo, &key)?, r.rounds)
        }
        None => (false, 0),
    };
    match claim::after_refusal(policy.as_deref(), mine, round) {
        AfterRefusal::Rebase => {
            guard.teller.emit(RunEvent::Told(Told::Relanding {
                moved: format!("{name}/{branch}"),
                task: title.to_string(),
            }));
            Ok(Landing::Again)
        }
        AfterRefusal::LostClaim => {
            if let Some(r) = target.remote_mut() {
                r.held.remove(&key);
                r.work.remove(&key);
                r.rounds = 0;
            }
            guard.teller.emit(RunEvent::Told(Told::NotLanded {
                task: title.to_string(),
                branch: task_branch.clone(),
            }));
            Ok(Landing::Kept(crate::event::IterationEnd::Progressed))
        }
        AfterRefusal::Refused(why) => {
            let pushed = guard.cx.ws.repo.task_branch(slug).map(|oid| {
                guard.cx.ws.repo.push_expecting(
                    &name,
                    &[RefUpdate {
                        name: format!("refs/heads/{task_branch}"),
                        new: Some(oid),
                        expected: Expected::Any,
                    }],
                )
            });
            let there = matches!(pushed, Some(Ok(Pushed::Done)));
            let freed = match target.remote_mut() {
                Some(r) => {
                    r.rounds = 0;
                    r.release(&guard.cx.ws.repo, identity)?
                }
                None => None,
            };
            if let Some(freed) = freed {
                guard.teller.emit(RunEvent::Told(Told::Released {
                    task: freed.task,
                    issue: freed.issue,
                }));
            }
            let refused = if why.starts_with(PRE_PUSH_DECLINED) {
                format!("the push to `{branch}` on `{name}` did not happen")
            } else {
                format!("the remote `{name}` refused the push to `{branch}`")
            };
            Err(Error::Unfinished(format!(
                "{refused} ({why}): the work of {} is on the branch `{task_branch}`{} — land it by hand (`git merge {task_branch}`), or run kern with --review",
                Quoted(title),
                if there {
                    format!(" here and on `{name}`")
                } else {
                    " here".to_string()
                }
            )))
        }
        AfterRefusal::GiveUp => {
            if let Some(r) = target.remote_mut() {
                r.rounds = 0;
            }
            Err(Error::Remote {
                remote: name,
                what: format!("landing {}", Quoted(title)),
                detail: format!(
                    "the branch `{branch}` moved {} times in a row while kern rebased onto it",
                    claim::MAX_LANDING_ROUNDS
                ),
            })
        }
    }
}

/// The refs under `refs/kern/attempts/<slug>/` that `spec` names (in backticks, as kern's notes
/// write them), each once, in order.
fn attempt_refs_named(spec: &str, slug: &str) -> Vec<String> {
    let prefix = format!("refs/kern/attempts/{slug}/");
    let mut named: Vec<String> = Vec::new();
    for word in spec.split('`').skip(1).step_by(2) {
        if word.starts_with(&prefix)
            && !word.contains(char::is_whitespace)
            && !named.iter().any(|n| n == word)
        {
            named.push(word.to_string());
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::attempt_refs_named;

    #[test]
    fn the_attempt_refs_a_task_s_notes_name() {
        let spec = "- [ ] One\n  > **Skipped:** not now — its work is kept at `refs/kern/attempts/one/1`\n  > **Attempt 2:** failed; kept at `refs/kern/attempts/one/2` (and `refs/kern/attempts/one/1`)\n- [ ] Two\n  > **Skipped:** kept at `refs/kern/attempts/two/1`\n  > not a ref: `refs/kern/attempts/one/ x` refs/kern/attempts/one/9\n";
        assert_eq!(
            attempt_refs_named(spec, "one"),
            ["refs/kern/attempts/one/1", "refs/kern/attempts/one/2"]
        );
        assert_eq!(
            attempt_refs_named(spec, "two"),
            ["refs/kern/attempts/two/1"]
        );
        assert!(attempt_refs_named(spec, "three").is_empty());
    }
}
