//! Integration of a parallel task that passed its review: its work committed on its branch,
//! applied onto the tip in memory, written (only when clean, never over the person's changed
//! paths) and committed by the ordinary commit — or, on a conflict, kept and the task retried.
//!
//! The one decision a reader must know: nothing half-merged is ever written. A conflict leaves
//! the work tree untouched; the work is kept under `refs/kern/attempts/<task>/<n>` (first
//! conflict) or on its branch `kern/<task>` (the second, which blocks the task).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::{IterationEnd, LeftOutFile, RunEvent, Told};
use crate::pipeline::commit::Integrated;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::ledger::Ledger;
use crate::pipeline::remote::Landing;
use crate::pipeline::teller::Teller;
use crate::pipeline::{Cx, Target, TaskRun};
use crate::repository::Applied;
use crate::spec::Quoted;
use crate::stage::{ImplementReport, ReviewReport, Stage};
use crate::state::journal::{self, Integrating, LeftOut, TaskStart};
use crate::state::lock::{Phase, RunLock};
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::workspace::Workspace;

use super::Job;

/// Integrates a task whose work passed its review (see the module docs): a function of the
/// SPEC.md `guard` (the run's context, SPEC.md, the teller), what a task's end may change (the
/// run's lock, the files left out of commits, where the work goes), the run's `ledger` (a
/// landing counts), the task's `job` and its workspace, and the SPEC.md mark the run reads
/// hand edits from.
pub(super) fn integrate(
    guard: &SpecGuard<'_, '_>,
    (lock, left_out, target): (&mut RunLock, &mut LeftOut, &mut Target),
    ledger: &Ledger,
    (job, job_ws): (&Job, &Workspace),
    spec_mark: &mut usize,
) -> Result<IterationEnd> {
    lock.set_phase(Phase::Committing)?;
    // `--remote`: the work lands on the remote's tip as it is now.
    crate::pipeline::remote::remote_sync(guard, target)?;
    let (implement, review, tip, tree) = match applied(guard, job, job_ws)? {
        Work::Applied {
            implement,
            review,
            tip,
            tree,
        } => (implement, review, tip, tree),
        Work::Ended(end) => return Ok(end),
    };
    let paths = guard.cx.ws.repo.paths_between(
        crate::pipeline::audit::tree_of(&guard.cx.ws.repo, tip)?,
        tree,
    )?;
    // Every changed path counts here, also one an earlier commit left out (a person's file
    // left out once is still the person's): only kern's own files are not the person's.
    let (dirty, touched) = dirty_among(guard.cx.ws, &paths)?;
    if !touched.is_empty() {
        return super::conflict::conflicted(
            guard,
            job,
            job_ws,
            &touched,
            Some("changed by hand in the work tree"),
        );
    }
    journal::save(
        &guard.cx.ws.state_dir.integrating(),
        &Integrating {
            identity: job.identity.clone(),
            slug: job.slug.clone(),
            onto: tip.to_string(),
            paths: paths.clone(),
        },
    )?;
    let checked_out = guard.after(|| guard.cx.ws.repo.checkout_paths(tree, &paths));
    if !checked_out? {
        journal::remove(&guard.cx.ws.state_dir.integrating());
        return super::conflict::conflicted(
            guard,
            job,
            job_ws,
            &paths,
            Some("changed by hand in the work tree"),
        );
    }
    let doc = guard.spec.reload()?;
    let Some(task) = doc.find(&job.identity) else {
        journal::remove(&guard.cx.ws.state_dir.integrating());
        return super::conflict::take_back(guard, lock, job, &paths);
    };
    let task_start = TaskStart::bare(
        job.identity.clone(),
        Some(tip.to_string()),
        dirty.iter().map(PathBuf::from).collect(),
    );
    journal::save(&guard.cx.ws.state_dir.task_start(), &task_start)?;
    let mut it = TaskRun::new(
        job.title.clone(),
        job.identity.clone(),
        (doc.tasks()[task].line, doc.tasks()[task].state),
        task_start,
    );
    it.hand_edits = guard.spec.changes_since(*spec_mark);
    let refused_at = job_ws.state_dir.refused_message();
    let end = match crate::pipeline::commit::commit_for_integration(
        guard,
        lock,
        left_out,
        target,
        &mut it,
        (&implement, &review),
        &refused_at,
    )? {
        Integrated::Ended(end) => end,
        Integrated::ReviewAsked => {
            journal::remove(&guard.cx.ws.state_dir.integrating());
            *spec_mark = guard.spec.mark();
            // What was written here goes back; the task's worktree keeps its work, and
            // its next iteration starts at the review, asked for a new message.
            super::conflict::take_back(guard, lock, job, &paths)?;
            journal::remove(&job_ws.state_dir.stage_record(Stage::Review));
            return Ok(IterationEnd::Progressed);
        }
    };
    journal::remove(&guard.cx.ws.state_dir.integrating());
    *spec_mark = guard.spec.mark();
    if end == IterationEnd::Committed {
        match crate::pipeline::remote::remote_land(
            guard,
            target,
            ledger,
            &job.identity,
            &job.title,
            &job.slug,
            tip,
        )? {
            Landing::Landed => {}
            Landing::Again => {
                return integrate(
                    guard,
                    (lock, left_out, target),
                    ledger,
                    (job, job_ws),
                    spec_mark,
                );
            }
            Landing::Kept(end) => {
                // Its work stays on its branch; the task is another machine's now.
                guard.cx.ws.repo.remove_task_worktree(&job.slug)?;
                let _ = job_ws
                    .state_dir
                    .clear_iteration_files(guard.teller.run_id());
                let _ = std::fs::remove_dir_all(job_ws.state_dir.dir());
                return Ok(end);
            }
        }
    }
    if end == IterationEnd::Committed {
        guard.cx.ws.repo.remove_task_worktree(&job.slug)?;
        guard.cx.ws.repo.delete_task_branch(&job.slug)?;
        // Its records stay readable in the branch folder's last/ and runs/.
        let _ = job_ws
            .state_dir
            .clear_iteration_files(guard.teller.run_id());
        let _ = std::fs::remove_dir_all(job_ws.state_dir.dir());
    } else {
        // Not committed (a hook refused it, the person took the task): what was written
        // here goes back, kept under refs/kern/; the task's worktree keeps its work.
        super::conflict::take_back(guard, lock, job, &paths)?;
        let _ = job_ws
            .state_dir
            .clear_iteration_files(guard.teller.run_id());
    }
    Ok(end)
}

/// The task's work as it stands in its worktree, or how its integration already ended.
enum Work {
    /// Its work committed in the worktree and applied onto the run's tip in memory as `tree`,
    /// with the reports the review approved, onto the run's tip `tip`.
    Applied {
        implement: Box<ImplementReport>,
        review: Box<ReviewReport>,
        tip: git2::Oid,
        tree: git2::Oid,
    },
    /// It conflicted with the run's branch (nothing written).
    Ended(IterationEnd),
}

/// Commits the task's work in its worktree `job_ws` (what a commit leaves out there is told)
/// and applies it onto the run's tip in memory; a conflict is the task's
/// ([`super::conflict::conflicted`]).
fn applied(guard: &SpecGuard<'_, '_>, job: &Job, job_ws: &Workspace) -> Result<Work> {
    let files = StageFiles::read(&job_ws.state_dir, &job.identity);
    let ResumePoint::Commit(implement, review) = resume::infer(&files, true) else {
        return Err(Error::Internal(format!(
            "the task {} was ready, but its stage files in `{}` are not",
            Quoted(&job.title),
            job_ws.state_dir.dir().display()
        )));
    };
    let start = journal::load::<TaskStart>(&job_ws.state_dir.task_start());
    let mut exclude: Vec<PathBuf> = start
        .as_ref()
        .map(|s| s.excluded.clone())
        .unwrap_or_default();
    exclude.extend(job_ws.copies.iter().cloned());
    let recorded = job_ws.repo.commit_work(
        &format!("kern: the work of {}\n", Quoted(&job.title)),
        &exclude,
    )?;
    for left in recorded
        .left_out
        .iter()
        .filter(|l| !job_ws.copies.iter().any(|c| Path::new(&l.path) == c))
    {
        guard.teller.emit(RunEvent::Told(Told::LeftInWorktree {
            task: job.title.clone(),
            file: LeftOutFile {
                path: left.path.clone(),
                reason: left.reason.clone(),
            },
        }));
    }
    let work = job_ws.repo.head_oid();
    let base = start
        .as_ref()
        .and_then(|s| s.base_commit.as_deref())
        .and_then(|b| crate::repository::parse_oid(b).ok());
    let tip = guard.cx.ws.repo.head_oid();
    let (Some(work), Some(base), Some(tip)) = (work, base, tip) else {
        return Err(Error::Internal(format!(
            "the task {} has no commit to start from — parallel tasks need a branch with a commit",
            Quoted(&job.title)
        )));
    };
    let applied = if work == base {
        Applied::Clean(crate::pipeline::audit::tree_of(&guard.cx.ws.repo, tip)?)
    } else {
        guard.cx.ws.repo.apply_onto(base, work, tip)?
    };
    let tree = match applied {
        Applied::Conflict(paths) => {
            return super::conflict::conflicted(guard, job, job_ws, &paths, None).map(Work::Ended);
        }
        Applied::Clean(tree) => tree,
    };
    Ok(Work::Applied {
        implement: Box::new(implement),
        review: Box::new(review),
        tip,
        tree,
    })
}

/// The paths of `ws`'s work tree that differ from HEAD (kern's own files aside), and those
/// of `paths` that they are or hold.
pub(super) fn dirty_among(ws: &Workspace, paths: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let own = ws.own_files();
    let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
    let dirty = ws.repo.dirty_paths(&own)?;
    let among = paths
        .iter()
        .filter(|p| dirty.iter().any(|d| covers(d, p)))
        .cloned()
        .collect();
    Ok((dirty, among))
}

/// History only moves forwards on the run's branch while parallel tasks run (DESIGN.md
/// section 8): a branch moved any other way since kern last saw it at `seen` (an agent's
/// `git update-ref` from its worktree; each task's own audit sees only its stages) is put
/// back before anything lands on it, where it was moved kept under `refs/kern/agent/`; told
/// through `teller` and noted in the `ledger`'s summary.
pub(super) fn keep_branch_forwards(
    cx: Cx,
    teller: &Teller,
    ledger: &Ledger,
    lock: &mut RunLock,
    job: &Job,
    seen: Option<git2::Oid>,
) -> Result<()> {
    let (Some(seen), Some(now)) = (seen, cx.ws.repo.head_oid()) else {
        return Ok(());
    };
    if cx.ws.repo.contains(now, seen) {
        return Ok(());
    }
    let Ok(crate::repository::Head::Branch(branch)) = cx.ws.repo.head() else {
        return Ok(());
    };
    lock.set_phase(Phase::Writing)?;
    let keep = crate::pipeline::audit::next_ref(
        &cx.ws.repo,
        &format!("refs/kern/agent/{}/branch-", job.slug),
    )?;
    cx.ws
        .repo
        .set_ref(&keep, now, "kern: kept where the run's branch was moved")?;
    cx.ws.repo.set_ref(
        &format!("refs/heads/{branch}"),
        seen,
        "kern: put back the run's branch",
    )?;
    let what = format!(
        "the run's branch `{branch}` was moved from {} to {} while parallel tasks ran, not by kern: refs/heads/{branch} put back, where it was moved kept at `{keep}`",
        crate::text::short_oid(&seen.to_string()),
        crate::text::short_oid(&now.to_string()),
    );
    // In the morning report under the task that just ended: the one stage that may write
    // is implement, though any task's agent could have done it.
    teller.emit(RunEvent::Violation {
        task: Some(job.title.clone()),
        stage: Stage::Implement,
        violations: vec![what.clone()],
        reverted: vec![format!("refs/heads/{branch}")],
        saved: vec![keep],
    });
    ledger.note(what);
    Ok(())
}

/// True when the dirty path `dirty` (a folder ends in `/`) is `path` or holds it.
fn covers(dirty: &str, path: &str) -> bool {
    let d = dirty.trim_end_matches('/');
    path == d || path.starts_with(&format!("{d}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_dirty_folder_covers_what_it_holds() {
        assert!(covers("src/", "src/a.rs"));
        assert!(covers("src/a.rs", "src/a.rs"));
        assert!(!covers("src/a", "src/ab.rs"));
    }
}
