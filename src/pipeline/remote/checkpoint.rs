//! A task's work in progress on the remote (`refs/kern/work/<task>`), so that a machine that
//! takes a lapsed claim over resumes from the work the dead machine had, not from nothing.
//!
//! The one decision a reader must know: while a task runs, the machine holding it saves what
//! its worktree holds (a commit on the task's base, as `refs/kern/saved/` commits are made)
//! and pushes it there at every renewal of its claim, so a machine killed loses at most a
//! renewal period of work. The ref is the claim holder's alone; the landing push (or the
//! release) deletes it with the claim. A machine taking the task over applies that commit onto
//! the tip it starts from, as uncommitted work in the task's fresh worktree, and records the
//! tip as the task's start: the work is the task's own, its stages start again over it. A run
//! that stops at its deadline pushes the work of each task it holds and frees the claims
//! (`remote_hand_over`), and the machine that claims such a task, still in progress, resumes
//! from that work the same way.
//!
//! No unit test here: it pushes and fetches refs of a git remote; held by
//! tests/integration/remote.rs.

use std::path::{Path, PathBuf};

use git2::Oid;

use crate::error::Result;
use crate::pipeline::Target;
use crate::pipeline::guard::SpecGuard;
use crate::repository::Repository;
use crate::repository::remote::{Expected, Pushed, RefUpdate};
use crate::spec::{Document, TaskIdentity};
use crate::state::journal::{self, JobRecord, TaskStart};

use super::task_key;

/// Where a task's work in progress lives on the remote.
pub(crate) const WORK: &str = "refs/kern/work/";

/// Pushes the work of each task this run holds, when it changed since the last push.
pub(in crate::pipeline) fn remote_checkpoint(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
) -> Result<()> {
    let Some(remote) = target.remote() else {
        return Ok(());
    };
    let name = remote.name.clone();
    for identity in remote.held_tasks() {
        let key = task_key(&identity);
        let Some(slug) = job_slug_of(guard, &identity) else {
            continue;
        };
        let Ok(job_repo) = Repository::discover(&guard.cx.ws.state_dir.job(&slug).job_tree())
        else {
            continue;
        };
        let own: Vec<PathBuf> = guard
            .cx
            .ws
            .own_files()
            .into_iter()
            .chain([PathBuf::from(&guard.cx.ws.spec_display)])
            .collect();
        let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
        let dirty: Vec<PathBuf> = job_repo
            .dirty_paths(&own)?
            .into_iter()
            .map(|p| PathBuf::from(p.trim_end_matches('/')))
            .collect();
        if dirty.is_empty() {
            continue;
        }
        let oid = job_repo.save_paths(
            &format!("refs/kern/checkpoint/{slug}"),
            &dirty,
            &format!("kern: the work in progress of {key}\n"),
        )?;
        let last = target.remote().and_then(|r| r.work.get(&key).copied());
        if last.is_some_and(|l| same_tree(guard, l, oid)) {
            continue;
        }
        let pushed = guard.cx.ws.repo.push_expecting(
            &name,
            &[RefUpdate {
                name: format!("{WORK}{key}"),
                new: Some(oid),
                expected: last.map_or(Expected::Any, Expected::At),
            }],
        )?;
        if pushed == Pushed::Done
            && let Some(r) = target.remote_mut()
        {
            r.work.insert(key, oid);
        }
    }
    Ok(())
}

/// A task taken over: the work its last holder pushed, applied onto the tip in the task's
/// fresh worktree (uncommitted), the tip recorded as the task's start. Returns how many
/// paths it brought.
pub(in crate::pipeline) fn resume_pushed_work(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    doc: &Document,
    task: usize,
    slug: &str,
) -> Result<usize> {
    let Some(remote) = target.remote() else {
        return Ok(0);
    };
    let identity = doc.identity(task);
    let key = task_key(&identity);
    let Some(work) = guard.cx.ws.repo.fetch_work(&remote.name, &key)? else {
        return Ok(0);
    };
    let Some(tip) = guard.cx.ws.repo.head_oid() else {
        return Ok(0);
    };
    let Ok(base) = guard
        .cx
        .ws
        .repo
        .git()
        .find_commit(work)
        .and_then(|c| c.parent_id(0))
    else {
        return Ok(0);
    };
    let crate::repository::Applied::Clean(tree) = guard.cx.ws.repo.apply_onto(base, work, tip)?
    else {
        return Ok(0);
    };
    let paths = guard.cx.ws.repo.paths_between(
        crate::pipeline::audit::tree_of(&guard.cx.ws.repo, tip)?,
        tree,
    )?;
    let dir = guard.cx.ws.state_dir.job(slug);
    let job_repo = Repository::discover(&dir.job_tree())?;
    if paths.is_empty() || !job_repo.checkout_paths(tree, &paths)? {
        return Ok(0);
    }
    // The task starts at the tip, with this work already in its tree.
    let t = &doc.tasks()[task];
    journal::save(
        &dir.task_start(),
        &TaskStart {
            identity,
            base_commit: Some(tip.to_string()),
            excluded: Vec::new(),
            check: t.check_command().map(str::to_string),
            must: crate::pipeline::verify::held_at_start(guard.cx.ws.repo.top(), &t.must_text()),
            tests_read_only: t.tests_read_only(),
            scope: t.scope(),
            tests_first: t
                .tests_first_command(
                    guard.cx.settings.tests_first,
                    guard.cx.settings.check.as_deref(),
                )
                .command(),
            red: None,
        },
    )?;
    if let Some(r) = target.remote_mut() {
        r.work.insert(key, work);
    }
    Ok(paths.len())
}

/// A task claimed while it is in progress (its last machine handed it over at its
/// deadline): the work that machine pushed is this run's to land or free, and — unless
/// this clone still has the task's worktree — it is brought in, as for a task taken over.
pub(in crate::pipeline) fn adopt_pushed_work(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    identity: &TaskIdentity,
    key: &str,
) -> Result<()> {
    let Some(name) = target.remote().map(|r| r.name.clone()) else {
        return Ok(());
    };
    let Some(work) = guard.cx.ws.repo.fetch_work(&name, key)? else {
        return Ok(());
    };
    let here = job_slug_of(guard, identity).is_some();
    if let Some(remote) = target.remote_mut() {
        remote.work.insert(key.to_string(), work);
        if !here {
            remote.taken_over.push(identity.clone());
        }
    }
    Ok(())
}

/// The folder name of the job running `identity`, from the job records.
fn job_slug_of(guard: &SpecGuard<'_, '_>, identity: &TaskIdentity) -> Option<String> {
    std::fs::read_dir(guard.cx.ws.state_dir.jobs_dir())
        .ok()?
        .flatten()
        .find_map(|e| {
            let slug = e.file_name().to_string_lossy().into_owned();
            journal::load::<JobRecord>(&guard.cx.ws.state_dir.job(&slug).job_record())
                .filter(|r| r.identity == *identity)
                .map(|r| r.slug)
        })
}

fn same_tree(guard: &SpecGuard<'_, '_>, a: Oid, b: Oid) -> bool {
    matches!((crate::pipeline::audit::tree_of(&guard.cx.ws.repo, a), crate::pipeline::audit::tree_of(&guard.cx.ws.repo, b)), (Ok(x), Ok(y)) if x == y)
}
