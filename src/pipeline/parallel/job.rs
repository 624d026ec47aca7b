//! A parallel task's start: its folder and worktree (made fresh on `kern/<task>` from the tip,
//! or reused when an earlier run left them for the same task), and the future that runs its
//! iteration there as a [`Run`] of its own.
//!
//! The one decision a reader must know: the task's run sees the refs the rest of the run moves
//! (`refs/kern/`, the other tasks' branches) as foreign, so its audit never reports or puts
//! back what kern itself did elsewhere meanwhile; the run's branch it audits for moves other
//! than forwards only (the run's own commits move it forwards while the task's stages run).
//! The run itself checks the branch again whenever a task ends (`keep_branch_forwards`).

use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{IterationEnd, RunEvent, Told};
use crate::pipeline::guard::SharedSpec;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::ledger::Ledger;
use crate::pipeline::teller::Teller;
use crate::pipeline::{Cx, Run, Target};
use crate::reporter::Reporter;
use crate::repository::{RefFilter, TASK_BRANCH_PREFIX};
use crate::settings::Settings;
use crate::spec::{Document, TaskIdentity};
use crate::state::StateDir;
use crate::state::journal::{self, JobRecord};
use crate::state::lock::{Phase, RunLock};
use crate::supervisor::interrupt::Interrupt;
use crate::text;

use super::{Job, JobDone, JobFuture};

/// The task's folder and worktree: reused when an earlier run left them for this task,
/// else made fresh on `kern/<task>` from the tip.
pub(super) fn prepare_job(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    doc: &Document,
    task: usize,
) -> Result<Job> {
    let identity = doc.identity(task);
    let title = doc.tasks()[task].title.clone();
    let slug = job_slug(&guard.cx.ws.state_dir, &identity, &title);
    let dir = guard.cx.ws.state_dir.job(&slug);
    let tree = dir.job_tree();
    let reuse = journal::load::<JobRecord>(&dir.job_record())
        .is_some_and(|r| r.identity == identity)
        && tree.join(".git").exists();
    if !reuse {
        lock.set_phase(Phase::Writing)?;
        guard.cx.ws.repo.remove_task_worktree(&slug)?;
        if dir.dir().exists() {
            std::fs::remove_dir_all(dir.dir()).map_err(|e| Error::io(dir.dir(), e))?;
        }
        let keep = crate::pipeline::audit::next_ref(
            &guard.cx.ws.repo,
            &format!("refs/kern/attempts/{slug}/"),
        )?;
        if let Some(kept) = guard.cx.ws.repo.fresh_task_branch(&slug, &keep)? {
            guard.teller.emit(RunEvent::Told(Told::BranchKept {
                branch: format!("{TASK_BRANCH_PREFIX}{slug}"),
                task: title.clone(),
                kept,
            }));
        }
        dir.create()?;
        guard.cx.ws.repo.add_task_worktree(&slug, &tree)?;
        journal::save(
            &dir.job_record(),
            &JobRecord {
                identity: identity.clone(),
                title: title.clone(),
                slug: slug.clone(),
            },
        )?;
        // The worktree's SPEC.md is the tip's: the agent reads the person's file as it is.
        if Path::new(&guard.cx.ws.spec_display).is_relative() {
            let path = tree.join(&guard.cx.ws.spec_display);
            if path.parent().is_some_and(Path::exists) {
                crate::atomic_file::write(&path, guard.spec.last_text().as_bytes())?;
            }
        }
    }
    Ok(Job {
        slug,
        identity,
        title,
    })
}

/// The folder name of a task's job: its title's slug, with a number when another task of
/// the same slug has its folder already.
pub(super) fn job_slug(state_dir: &StateDir, identity: &TaskIdentity, title: &str) -> String {
    let base = text::slug(title);
    (1..)
        .map(|n| {
            if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|slug| {
            journal::load::<JobRecord>(&state_dir.job(slug).job_record())
                .is_none_or(|r| r.identity == *identity)
        })
        .unwrap_or(base)
}

/// The future that runs the task's iteration in its worktree, as a run of its own that shares
/// the run's context `cx`, SPEC.md, ledger and teller (clones of the same handles).
pub(super) fn job_future<'a>(
    cx: Cx<'a>,
    (spec, ledger, teller): (SharedSpec, Ledger, Teller<'a>),
    job: Job,
    index: u32,
    identity: TaskIdentity,
) -> Result<JobFuture<'a>> {
    let dir = cx.ws.state_dir.job(&job.slug);
    let branch = format!("refs/heads/{TASK_BRANCH_PREFIX}{}", job.slug);
    let run_branch = cx.ws.repo.head().ok().and_then(|h| match h {
        crate::repository::Head::Branch(b) | crate::repository::Head::Unborn(b) => {
            Some(format!("refs/heads/{b}"))
        }
        crate::repository::Head::Detached(_) => None,
    });
    // The rest of the run moves these while the task's stages run: not the task's doing.
    // The run's branch only moves forwards by the run's commits: an agent that moves it
    // any other way (`git update-ref` from its worktree) is put back like any history move.
    let foreign = RefFilter {
        names: vec![
            crate::repository::KERN_REFS.to_string(),
            format!("refs/heads/{TASK_BRANCH_PREFIX}"),
        ],
        except: vec![branch],
        forwards: run_branch.into_iter().collect(),
    };
    let ws = cx
        .ws
        .for_job(cx.settings, &dir.job_tree(), dir.clone(), foreign)?;
    ws.state_dir.create()?;
    crate::pipeline::fence::fence_hooks(cx.settings, &ws);
    // A task's worktree never had the original script's lock folder.
    let (mut lock, takeover) = RunLock::acquire(&ws.repo.run_lock_path(), None, &cx.settings.argv)?;
    lock.set_quiet_limits(cx.settings.quiet_limits());
    let settings: &'a Settings = cx.settings;
    let reporter: &'a Reporter = cx.reporter;
    let interrupt: &'a Interrupt = cx.interrupt;
    let total = settings.iterations;
    let target = if settings.review {
        Target::Review {
            task: identity,
            branch: format!("{TASK_BRANCH_PREFIX}{}", job.slug),
        }
    } else {
        Target::Job(identity)
    };
    Ok(Box::pin(async move {
        let labelled = reporter.for_job(&job.title);
        let teller = teller.for_job(&labelled);
        let end = {
            let mut run = Run {
                cx: Cx {
                    settings,
                    ws: &ws,
                    reporter: &labelled,
                    interrupt,
                },
                lock,
                teller,
                spec,
                ledger,
                target,
                left_out: journal::load(&ws.state_dir.left_out()).unwrap_or_default(),
            };
            let end = match crate::pipeline::recovery::recover(
                run.cx.ws,
                &mut run.lock,
                &run.teller,
                takeover,
            ) {
                Ok(()) => run.iteration(index, total).await,
                Err(e) => Err(e),
            };
            if matches!(end, Ok(e) if e != IterationEnd::Ready) {
                let _ = run
                    .cx
                    .ws
                    .state_dir
                    .clear_iteration_files(run.teller.run_id());
            }
            end
        };
        JobDone { job, ws, end }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_folder_is_its_titles_slug_numbered_when_another_task_has_that_folder() {
        let root = tempfile::tempdir().unwrap();
        let sd = StateDir::locate(root.path(), Path::new("/a/app"), "main").unwrap();
        let doc = Document::parse("- [ ] Parse dates\n- [ ] Parse  dates\n");
        let (first, second) = (doc.identity(0), doc.identity(1));
        assert_eq!(job_slug(&sd, &first, "Parse dates"), "parse-dates");
        // The first task's folder is there: the second task of the same slug numbers its own.
        let dir = sd.job("parse-dates");
        std::fs::create_dir_all(dir.dir()).unwrap();
        journal::save(
            &dir.job_record(),
            &JobRecord {
                identity: first.clone(),
                title: "Parse dates".into(),
                slug: "parse-dates".into(),
            },
        )
        .unwrap();
        assert_eq!(job_slug(&sd, &first, "Parse dates"), "parse-dates");
        assert_eq!(job_slug(&sd, &second, "Parse  dates"), "parse-dates-2");
    }
}
