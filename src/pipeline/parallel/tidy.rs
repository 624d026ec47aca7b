//! Tidying parallel tasks' worktrees: after a task's turn, at the start of a run, and after a
//! run killed while it wrote a task's work into the work tree.
//!
//! The one decision a reader must know: a worktree goes only when nothing is left in it that
//! is not kept elsewhere — changes are saved under `refs/kern/saved/<task>/worktree-<n>`
//! first, and its branch is deleted only when the run's branch already contains it.
//!
//! No unit test here: it removes worktrees and saves refs; held by tests/integration/parallel.rs
//! and crash.rs (a run killed while it wrote a task's work).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::event::{RunEvent, Told};
use crate::pipeline::Cx;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::teller::Teller;
use crate::repository::RefFilter;
use crate::spec::{Quoted, TaskIdentity, TaskState};
use crate::state::journal::{self, Integrating, JobRecord, TaskStart};
use crate::state::lock::{Phase, RunLock};
use crate::workspace::Workspace;

use super::Job;

/// Removes a task's worktree and folder when nothing is left in them: no stage files, no
/// change in the worktree, no commit on its branch beyond where it started.
pub(super) fn retire_if_idle(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    job: &Job,
    ws: Workspace,
) -> Result<()> {
    let dir = ws.state_dir.clone();
    if !dir.dir().exists() {
        return Ok(());
    }
    let has_stage_files = dir.iteration_files().iter().any(|p| p.exists());
    let doc = guard.spec.reload()?;
    let in_progress = doc
        .find(&job.identity)
        .is_some_and(|t| doc.tasks()[t].state == TaskState::InProgress);
    if has_stage_files && in_progress {
        return Ok(());
    }
    retire(guard.cx, guard.teller, lock, job, ws, in_progress)
}

/// Removes a task's worktree and folder — unless `keep_if_busy` and it holds work (changes,
/// or commits since the task started), which then waits for the task's next turn. Changes
/// left in it are saved under `refs/kern/saved/<task>/worktree-<n>` first; its branch is
/// deleted only when the run's branch already contains it.
pub(super) fn retire(
    cx: Cx,
    teller: &Teller,
    lock: &mut RunLock,
    job: &Job,
    ws: Workspace,
    keep_if_busy: bool,
) -> Result<()> {
    let own = ws.own_files();
    let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
    let left: Vec<PathBuf> = ws
        .repo
        .dirty_paths(&own)?
        .into_iter()
        .map(|p| PathBuf::from(p.trim_end_matches('/')))
        .collect();
    let start = journal::load::<TaskStart>(&ws.state_dir.task_start())
        .and_then(|s| s.base_commit)
        .and_then(|b| crate::repository::parse_oid(&b).ok());
    let moved = ws.repo.head_oid() != start && start.is_some();
    if keep_if_busy && (!left.is_empty() || moved) {
        // Work in progress: it stays for the task's next turn.
        return Ok(());
    }
    lock.set_phase(Phase::Writing)?;
    if !left.is_empty() {
        let git_ref = crate::pipeline::audit::next_ref(
            &cx.ws.repo,
            &format!("refs/kern/saved/{}/worktree-", job.slug),
        )?;
        ws.repo.save_paths(
            &git_ref,
            &left,
            &format!(
                "kern: what the worktree of {} held when it was removed\n",
                Quoted(&job.title)
            ),
        )?;
        teller.emit(RunEvent::Told(Told::WorktreeSaved {
            task: job.title.clone(),
            git_ref,
        }));
    }
    let dir = ws.state_dir.dir();
    drop(ws);
    cx.ws.repo.remove_task_worktree(&job.slug)?;
    {
        let tip = cx.ws.repo.task_branch(&job.slug);
        let head = cx.ws.repo.head_oid();
        let contained = match (tip, head) {
            (Some(t), Some(h)) => cx.ws.repo.contains(h, t),
            _ => true,
        };
        if contained {
            cx.ws.repo.delete_task_branch(&job.slug)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The worktrees whose tasks are not in progress (done, gone, taken by the person): their
/// changes are saved and they are removed; their branches stay when they hold work.
pub(super) fn retire_idle_jobs(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    running: &[TaskIdentity],
) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(guard.cx.ws.state_dir.jobs_dir()) else {
        return Ok(());
    };
    let doc = guard.spec.reload()?;
    for entry in entries.flatten() {
        let slug = entry.file_name().to_string_lossy().into_owned();
        let dir = guard.cx.ws.state_dir.job(&slug);
        let Some(record) = journal::load::<JobRecord>(&dir.job_record()) else {
            guard.cx.ws.repo.remove_task_worktree(&slug)?;
            let _ = std::fs::remove_dir_all(dir.dir());
            continue;
        };
        if running.contains(&record.identity) {
            continue;
        }
        let in_progress = doc
            .find(&record.identity)
            .is_some_and(|t| doc.tasks()[t].state == TaskState::InProgress);
        if in_progress && dir.job_tree().join(".git").exists() {
            continue;
        }
        let job = Job {
            slug: record.slug.clone(),
            identity: record.identity.clone(),
            title: record.title.clone(),
        };
        match guard.cx.ws.for_job(
            guard.cx.settings,
            &dir.job_tree(),
            dir.clone(),
            RefFilter::default(),
        ) {
            Ok(ws) => retire(guard.cx, guard.teller, lock, &job, ws, false)?,
            Err(_) => {
                guard.cx.ws.repo.remove_task_worktree(&slug)?;
                let _ = std::fs::remove_dir_all(dir.dir());
            }
        }
    }
    // A worktree whose folder of state is gone (a cleaned temp folder) is a leftover.
    for slug in guard.cx.ws.repo.task_worktrees()? {
        if !guard.cx.ws.state_dir.job(&slug).job_record().exists() {
            guard.cx.ws.repo.remove_task_worktree(&slug)?;
        }
    }
    Ok(())
}

/// A run killed while writing a task's work into the work tree: the commit landed (the
/// task is done) or the paths go back to HEAD, saved first; the task integrates again.
pub(super) fn recover_integration(guard: &SpecGuard<'_, '_>, lock: &mut RunLock) -> Result<()> {
    let path = guard.cx.ws.state_dir.integrating();
    let Some(pending) = journal::load::<Integrating>(&path) else {
        return Ok(());
    };
    let head = guard.cx.ws.repo.head_oid().map(|o| o.to_string());
    if head.as_deref() == Some(pending.onto.as_str()) {
        let job = Job {
            slug: pending.slug.clone(),
            identity: pending.identity.clone(),
            title: pending.identity.path.last().cloned().unwrap_or_default(),
        };
        super::conflict::take_back(guard, lock, &job, &pending.paths)?;
        guard.teller.emit(RunEvent::Told(Told::ApplyingAgain {
            task: job.title.clone(),
        }));
    }
    journal::remove(&path);
    Ok(())
}
