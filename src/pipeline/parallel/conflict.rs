//! A parallel task whose work could not be written: a conflict with the branch, or paths the
//! person changed by hand meanwhile.
//!
//! The one decision a reader must know: nothing half-merged is ever written. A conflict leaves
//! the work tree untouched; the work is kept under `refs/kern/attempts/<task>/<n>` (first
//! conflict, the task retried on the new tip) or on its branch `kern/<task>` (the second, which
//! blocks the task). What integration already wrote and must go back is saved first under
//! `refs/kern/saved/`.
//!
//! No unit test here: it writes refs and the tree; held by tests/integration/parallel.rs (first and
//! second conflict, a hand edit meanwhile).

use super::Job;
use crate::error::Result;
use crate::event::{IterationEnd, RunEvent};
use crate::pipeline::guard::SpecGuard;
use crate::repository::TASK_BRANCH_PREFIX;
use crate::spec::{Edit, Quoted, TaskState};
use crate::state::journal::{self, Conflicts};
use crate::state::lock::{Phase, RunLock};
use crate::workspace::Workspace;
use std::path::PathBuf;

/// Puts `paths` of the work tree back to HEAD, saved first when they differ from it.
pub(super) fn take_back(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    job: &Job,
    paths: &[String],
) -> Result<IterationEnd> {
    let ours: Vec<PathBuf> = super::integrate::dirty_among(guard.cx.ws, paths)?
        .1
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if !ours.is_empty() {
        lock.set_phase(Phase::Writing)?;
        crate::pipeline::audit::put_aside_at_next(
            guard.cx.ws,
            guard.spec,
            &format!("refs/kern/saved/{}/integration-", job.slug),
            &ours,
            &format!(
                "kern: the work of {}, taken back out of the work tree\n",
                Quoted(&job.title)
            ),
        )?;
    }
    Ok(IterationEnd::Progressed)
}

/// The task's work conflicts with the branch in `paths`: nothing is written; the work is
/// kept and the task retried on the new tip, or blocked at its second conflict.
pub(super) fn conflicted(
    guard: &SpecGuard<'_, '_>,
    job: &Job,
    job_ws: &Workspace,
    paths: &[String],
    why: Option<&str>,
) -> Result<IterationEnd> {
    let mut conflicts: Conflicts =
        journal::load(&guard.cx.ws.state_dir.conflicts()).unwrap_or_default();
    let count = conflicts.entry(job.slug.clone()).or_insert(0);
    *count += 1;
    let count = *count;
    journal::save(&guard.cx.ws.state_dir.conflicts(), &conflicts)?;
    let files = paths
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let how = why.unwrap_or("changed on the branch meanwhile");
    let branch = format!("{TASK_BRANCH_PREFIX}{}", job.slug);
    let conflict = |kept| RunEvent::Conflict {
        task: job.title.clone(),
        paths: paths.to_vec(),
        branch: branch.clone(),
        attempt: count,
        how: how.to_string(),
        kept,
    };
    let edits = if count >= 2 {
        guard.teller.emit(conflict(None));
        let doc = guard.spec.reload()?;
        let task = doc.find(&job.identity).map(|t| &doc.tasks()[t]);
        let note = format!(
            "its work conflicted twice with the branch in {files} ({how}) — it is on the branch `{branch}`: merge it by hand (`git merge {branch}`), or set the task back to [ ] to start over"
        );
        guard.teller.emit(RunEvent::Blocked {
            task: job.title.clone(),
            why: format!("its work conflicted twice in {files} ({how}) — it stays on `{branch}`"),
            line: task.map_or(0, |t| t.line),
            issue: task
                .and_then(crate::spec::Task::issue)
                .map(|i| i.to_string()),
            note: note.clone(),
        });
        conflicts.remove(&job.slug);
        journal::save(&guard.cx.ws.state_dir.conflicts(), &conflicts)?;
        vec![
            Edit::SetState(TaskState::Blocked),
            Edit::AddBlocked(note),
            Edit::BlockParents,
        ]
    } else {
        let keep = crate::pipeline::audit::next_ref(
            &guard.cx.ws.repo,
            &format!("refs/kern/attempts/{}/", job.slug),
        )?;
        // The work is kept there; the branch starts over from the new tip.
        guard.cx.ws.repo.remove_task_worktree(&job.slug)?;
        guard.cx.ws.repo.fresh_task_branch(&job.slug, &keep)?;
        guard.teller.emit(conflict(Some(keep.clone())));
        vec![Edit::AddAttempt(format!(
            "its work conflicted with the branch in {files} ({how}) when kern applied it — kept at `{keep}`; start from the branch as it is now"
        ))]
    };
    let doc = guard.spec.reload()?;
    if doc.find(&job.identity).is_some() {
        guard.edit(&job.identity, &edits)?;
    }
    guard.cx.ws.repo.remove_task_worktree(&job.slug)?;
    let _ = std::fs::remove_dir_all(job_ws.state_dir.dir());
    Ok(IterationEnd::Progressed)
}
