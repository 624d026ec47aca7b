//! Parallel tasks (`-j N`) and review branches (`--review`): DESIGN.md section 15.
//!
//! Decisions a reader must know:
//! - Each task runs in its own git worktree, `jobs/<task>/tree` under the state folder, on a
//!   branch `kern/<task>` from the tip, with its own state folder `jobs/<task>/`: a full
//!   [`Run`] of the ordinary pipeline over that worktree ([`JobTarget`] pins it to its task).
//!   The tasks run in this process, side by side on one thread — they only wait on agents.
//!   SPEC.md is the run's own and shared ([`SharedSpec`]): kern alone writes it, one edit at a
//!   time, for every task.
//! - Which tasks run together is the pure [`schedule::pick`]: never a task beside its own
//!   ancestor or descendant, `After` notes honoured, tasks in progress first.
//! - Integration is one task at a time, here: the task's work is committed on its branch
//!   (kern's record: no hooks, unsigned), applied onto the tip in memory, and only a clean
//!   result touches the work tree — exactly the paths it changes, journaled in
//!   `integrating.json` — and is then committed by the ordinary commit (hooks, signing,
//!   SPEC.md, LEARNINGS.md). A conflict writes nothing: the work is kept under
//!   `refs/kern/attempts/<task>/<n>` and the task retried on the new tip with an Attempt note
//!   naming the files; a second conflict blocks it, its work left on its branch. Paths the
//!   person changed in the work tree are never written over: touching them is a conflict.
//! - `--review`: the task's commit is made in its worktree on its branch (hooks, signing) and
//!   stays there; SPEC.md marks it done with a Review note. `kern accept` lands it later.
//! - A stop (Ctrl-C, the budget, an error) lets every task end its stage. The tasks stay in
//!   progress, with their worktrees and stage files: the next run picks them first and resumes
//!   each where it stopped. A worktree whose task is no longer in progress is removed, what it
//!   held saved first.
//! - Integration runs between the tasks' awaits: while kern commits, the other agents' output
//!   waits in their pipes (the limits are minutes; a commit takes seconds).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::pipeline::shared::{SharedSpec, Spent};
use crate::pipeline::{JobTarget, MAX_IDLE_ITERATIONS, Run, TaskRun, schedule};
use crate::reporter::{Reporter, Summary, text};
use crate::repository::{Applied, RefFilter, TASK_BRANCH_PREFIX};
use crate::settings::Settings;
use crate::spec::{Document, Edit, TaskIdentity, TaskState};
use crate::state::StateDir;
use crate::state::journal::{self, Conflicts, Integrating, JobRecord, TaskStart};
use crate::state::lock::{Phase, RunLock};
use crate::state::resume::{self, ResumePoint, StageFiles};
use crate::state::run_log::{IterationEnd, RunEvent, RunLog};
use crate::supervisor::interrupt::Interrupt;
use crate::workspace::Workspace;

/// A task running in its worktree, as the run sees it.
struct Job {
    slug: String,
    identity: TaskIdentity,
    title: String,
}

/// What a task's run handed back when it ended.
struct JobDone {
    job: Job,
    ws: Workspace,
    end: Result<IterationEnd>,
    summary: Summary,
    last_failed: bool,
    /// How many stages each agent ran, and how many moved to another agent.
    agents: (Vec<(String, u32)>, u32),
}

type JobFuture<'a> = Pin<Box<dyn Future<Output = JobDone> + 'a>>;

/// True when the run takes its tasks through worktrees: `-j` above 1, `--review`, or tasks a
/// parallel run left in progress in their worktrees.
pub(super) fn wanted(settings: &Settings, state_dir: &StateDir) -> bool {
    settings.jobs > 1 || settings.review || has_jobs(state_dir)
}

fn has_jobs(state_dir: &StateDir) -> bool {
    std::fs::read_dir(state_dir.jobs_dir())
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

impl<'a> Run<'a> {
    /// The iterations with tasks in worktrees (see the module docs).
    pub(super) async fn parallel(&mut self) -> Result<()> {
        let slots = self.settings.jobs.max(1) as usize;
        let total = self.settings.iterations;
        self.finish_pending_commit()?;
        self.recover_integration()?;
        let mut running: Vec<JobFuture<'a>> = Vec::new();
        let mut jobs: Vec<TaskIdentity> = Vec::new();
        let mut started = 0u32;
        let mut idle = 0u32;
        let mut stop: Option<Error> = None;
        let mut next_start = Instant::now();
        let mut spec_mark = self.spec.mark();
        self.retire_idle_jobs(&[])?;
        loop {
            if stop.is_none()
                && let Some(signal) = self.interrupt.requested()
            {
                stop = Some(Error::Interrupted { signal });
            }
            if stop.is_none()
                && let Err(e) = self.check_budget()
            {
                stop = Some(e);
            }
            let mut nothing_left = false;
            if stop.is_none() && started < total && Instant::now() >= next_start {
                match self.start_jobs(&jobs, slots, started, total).await {
                    Ok(new) if new.is_empty() && running.is_empty() => nothing_left = true,
                    Ok(new) => {
                        for (job, future) in new {
                            started += 1;
                            jobs.push(job.identity.clone());
                            running.push(future);
                        }
                    }
                    Err(e) => stop = Some(e),
                }
            }
            if running.is_empty() {
                if let Some(e) = stop {
                    return Err(e);
                }
                if nothing_left {
                    self.summary.ended = "nothing left to do".into();
                    return Ok(());
                }
                if started >= total {
                    self.summary.ended = format!("all {total} iterations ran");
                    return Ok(());
                }
                if !self.has_parallel_work()? {
                    self.summary.ended = "nothing left to do".into();
                    return Ok(());
                }
                // Only the delay between tasks is left to wait for.
                self.lock.set_phase(Phase::Sleeping)?;
                let wait = next_start.saturating_duration_since(Instant::now());
                self.reporter.waiting("next iteration", wait);
                if self.interrupt.sleep_or_interrupt(wait).await {
                    stop = Some(Error::Interrupted {
                        signal: self.interrupt.requested().unwrap_or(2),
                    });
                }
                continue;
            }
            let done = next_done(&mut running).await;
            jobs.retain(|j| *j != done.job.identity);
            self.summary.iterations = started;
            let end = self.job_ended(done, &mut spec_mark);
            match end {
                Ok(IterationEnd::Skipped) => idle += 1,
                Ok(_) => idle = 0,
                Err(e) => {
                    if stop.is_none() {
                        stop = Some(e);
                    }
                }
            }
            if stop.is_none() && idle >= MAX_IDLE_ITERATIONS {
                stop = Some(Error::Unfinished(format!(
                    "{idle} tasks in a row changed nothing (every task left was skipped) — read the Skipped notes in {} and edit the tasks",
                    self.ws.spec_display
                )));
            }
            if !self.settings.delay.is_zero() {
                next_start = Instant::now() + self.settings.delay;
            }
        }
    }

    /// Starts the tasks that may start now beside the `running` ones, up to `slots` at once
    /// and `left` more in this run.
    async fn start_jobs(
        &mut self,
        running: &[TaskIdentity],
        slots: usize,
        started: u32,
        total: u32,
    ) -> Result<Vec<(Job, JobFuture<'a>)>> {
        let free = slots
            .saturating_sub(running.len())
            .min(total.saturating_sub(started) as usize);
        if free == 0 {
            return Ok(Vec::new());
        }
        self.lock.set_phase(Phase::Selecting)?;
        self.apply_pending_edits()?;
        let doc = self.spec.reload()?;
        for w in self.ws.validate(&doc)? {
            self.reporter.warn(&w);
        }
        let running_now: Vec<usize> = running.iter().filter_map(|id| doc.find(id)).collect();
        let picks = schedule::pick(&doc, &running_now, free, &self.settings.select_options());
        let mut out = Vec::new();
        for (k, selection) in picks.into_iter().enumerate() {
            let index = started + 1 + k as u32;
            let task = &doc.tasks()[selection.task];
            let identity = doc.identity(selection.task);
            tracing::debug!(task = %identity, line = task.line, reason = %selection.reason, "starting in its own worktree");
            let job = self.prepare_job(&doc, selection.task)?;
            let future = self.job_future(job.clone_ids(), index, identity.clone())?;
            out.push((job, future));
        }
        Ok(out)
    }

    /// The task's folder and worktree: reused when an earlier run left them for this task,
    /// else made fresh on `kern/<task>` from the tip.
    fn prepare_job(&mut self, doc: &Document, task: usize) -> Result<Job> {
        let identity = doc.identity(task);
        let title = doc.tasks()[task].title.clone();
        let slug = self.job_slug(&identity, &title);
        let dir = self.ws.state_dir.job(&slug);
        let tree = dir.job_tree();
        let reuse = journal::load::<JobRecord>(&dir.job_record())
            .is_some_and(|r| r.identity == identity)
            && tree.join(".git").exists();
        if !reuse {
            self.lock.set_phase(Phase::Writing)?;
            self.ws.repo.remove_task_worktree(&slug)?;
            if dir.dir().exists() {
                std::fs::remove_dir_all(dir.dir()).map_err(|e| Error::io(dir.dir(), e))?;
            }
            let keep = self.next_ref(&format!("refs/kern/attempts/{slug}/"))?;
            if let Some(kept) = self.ws.repo.fresh_task_branch(&slug, &keep)? {
                self.reporter.info(&format!(
                    "the branch `{TASK_BRANCH_PREFIX}{slug}` held earlier work of `{title}`: kept at `{kept}`"
                ));
            }
            std::fs::create_dir_all(dir.dir()).map_err(|e| Error::io(dir.dir(), e))?;
            self.ws.repo.add_task_worktree(&slug, &tree)?;
            journal::save(
                &dir.job_record(),
                &JobRecord {
                    identity: identity.clone(),
                    title: title.clone(),
                    slug: slug.clone(),
                },
            )?;
            // The worktree's SPEC.md is the tip's: the agent reads the person's file as it is.
            if Path::new(&self.ws.spec_display).is_relative() {
                let path = tree.join(&self.ws.spec_display);
                if path.parent().is_some_and(Path::exists) {
                    crate::atomic_file::write(&path, self.spec.last_text().as_bytes())?;
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
    fn job_slug(&self, identity: &TaskIdentity, title: &str) -> String {
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
                journal::load::<JobRecord>(&self.ws.state_dir.job(slug).job_record())
                    .is_none_or(|r| r.identity == *identity)
            })
            .unwrap_or(base)
    }

    /// True when a task could start now (nothing else runs).
    fn has_parallel_work(&mut self) -> Result<bool> {
        let doc = self.spec.reload()?;
        Ok(!schedule::pick(&doc, &[], 1, &self.settings.select_options()).is_empty())
    }

    /// The future that runs the task's iteration in its worktree.
    fn job_future(
        &mut self,
        job: Job,
        index: u32,
        identity: TaskIdentity,
    ) -> Result<JobFuture<'a>> {
        let dir = self.ws.state_dir.job(&job.slug);
        let branch = format!("refs/heads/{TASK_BRANCH_PREFIX}{}", job.slug);
        let run_branch = self.ws.repo.head().ok().and_then(|h| match h {
            crate::repository::Head::Branch(b) | crate::repository::Head::Unborn(b) => {
                Some(format!("refs/heads/{b}"))
            }
            crate::repository::Head::Detached(_) => None,
        });
        // The rest of the run moves these while the task's stages run: not the task's doing.
        let foreign = RefFilter {
            names: [
                Some(crate::repository::KERN_REFS.to_string()),
                Some(format!("refs/heads/{TASK_BRANCH_PREFIX}")),
                run_branch,
            ]
            .into_iter()
            .flatten()
            .collect(),
            except: vec![branch],
        };
        let ws = self
            .ws
            .for_job(self.settings, &dir.job_tree(), dir.clone(), foreign)?;
        ws.state_dir.create(ws.repo.top())?;
        let (lock, takeover) = RunLock::acquire(
            &ws.repo.run_lock_path(),
            &dir.dir().join("no-legacy-lock"),
            &self.settings.argv,
        )?;
        let settings: &'a Settings = self.settings;
        let reporter: &'a Reporter = self.reporter;
        let interrupt: &'a Interrupt = self.interrupt;
        let spec: SharedSpec = self.spec.clone();
        let spent: Spent = self.spent.clone();
        let pause = self.pause.clone();
        let limits = self.limits.clone();
        let log: RunLog = self.log.clone();
        let total = settings.iterations;
        let review_branch = settings
            .review
            .then(|| format!("{TASK_BRANCH_PREFIX}{}", job.slug));
        Ok(Box::pin(async move {
            let labelled = reporter.for_job(&job.title);
            let (end, summary, last_failed, agents) = {
                let mut run = Run {
                    settings,
                    ws: &ws,
                    reporter: &labelled,
                    interrupt,
                    lock,
                    log,
                    spec,
                    spent,
                    pause,
                    job: Some(JobTarget {
                        identity,
                        review_branch,
                    }),
                    summary: Summary {
                        state_dir: ws.state_dir.dir(),
                        ..Summary::default()
                    },
                    last_failed: false,
                    started: Instant::now(),
                    detached: false,
                    left_out: journal::load(&ws.state_dir.left_out()).unwrap_or_default(),
                    limits,
                    rate_limit: None,
                    stages_by_agent: Vec::new(),
                    switches: 0,
                };
                let end = match run.recover(takeover) {
                    Ok(()) => run.iteration(index, total).await,
                    Err(e) => Err(e),
                };
                if matches!(end, Ok(e) if e != IterationEnd::Ready) {
                    let _ = run.ws.state_dir.clear_iteration_files();
                }
                let agents = (std::mem::take(&mut run.stages_by_agent), run.switches);
                (
                    end,
                    std::mem::take(&mut run.summary),
                    run.last_failed,
                    agents,
                )
            };
            JobDone {
                job,
                ws,
                end,
                summary,
                last_failed,
                agents,
            }
        }))
    }

    /// A task's run ended: count it, integrate its work when it is ready, and tidy its
    /// worktree away when nothing is left in it.
    fn job_ended(&mut self, done: JobDone, spec_mark: &mut usize) -> Result<IterationEnd> {
        self.merge_summary(&done.summary);
        self.last_failed = done.last_failed;
        for (agent, n) in &done.agents.0 {
            match self.stages_by_agent.iter_mut().find(|(a, _)| a == agent) {
                Some(entry) => entry.1 += n,
                None => self.stages_by_agent.push((agent.clone(), *n)),
            }
        }
        self.switches += done.agents.1;
        let end = match done.end {
            Ok(IterationEnd::Ready) => self.integrate(&done.job, &done.ws, spec_mark),
            Ok(end) => Ok(end),
            Err(e) => {
                // Its worktree and stage files stay: the next run resumes it there.
                drop(done.ws);
                return Err(e);
            }
        };
        let ws = done.ws;
        self.retire_if_idle(&done.job, ws)?;
        end
    }

    /// Adds a task's totals to the run's.
    fn merge_summary(&mut self, s: &Summary) {
        self.summary.cost_usd += s.cost_usd;
        self.summary.retries += s.retries;
        self.summary.waits += s.waits;
        self.summary.wait_time += s.wait_time;
        self.summary.failed_attempts += s.failed_attempts;
        self.summary.committed.extend(s.committed.iter().cloned());
        self.summary.review.extend(s.review.iter().cloned());
        self.summary.skipped.extend(s.skipped.iter().cloned());
        self.summary.blocked.extend(s.blocked.iter().cloned());
        self.summary.notes.extend(s.notes.iter().cloned());
    }

    /// Integrates a task whose work passed its review (see the module docs).
    fn integrate(
        &mut self,
        job: &Job,
        job_ws: &Workspace,
        spec_mark: &mut usize,
    ) -> Result<IterationEnd> {
        self.lock.set_phase(Phase::Committing)?;
        let files = StageFiles::read(&job_ws.state_dir, &job.identity);
        let ResumePoint::Commit(implement, review) = resume::infer(&files, true) else {
            return Err(Error::Internal(format!(
                "the task `{}` was ready, but its stage files in `{}` are not",
                job.title,
                job_ws.state_dir.dir().display()
            )));
        };
        let start = journal::load::<TaskStart>(&job_ws.state_dir.task_start());
        let mut exclude: Vec<PathBuf> = start
            .as_ref()
            .map(|s| s.excluded.clone())
            .unwrap_or_default();
        exclude.extend(job_ws.copies.iter().cloned());
        let recorded = job_ws
            .repo
            .commit_work(&format!("kern: the work of `{}`\n", job.title), &exclude)?;
        for left in recorded
            .left_out
            .iter()
            .filter(|l| !job_ws.copies.iter().any(|c| Path::new(&l.path) == c))
        {
            self.reporter.warn(&format!(
                "left out of `{}`: `{}` ({}) — it stays in the task's worktree, saved when that goes",
                job.title, left.path, left.reason
            ));
        }
        let work = job_ws.repo.head_oid();
        let base = start
            .as_ref()
            .and_then(|s| s.base_commit.as_deref())
            .and_then(|b| git2::Oid::from_str(b).ok());
        let tip = self.ws.repo.head_oid();
        let (Some(work), Some(base), Some(tip)) = (work, base, tip) else {
            return Err(Error::Internal(format!(
                "the task `{}` has no commit to start from — parallel tasks need a branch with a commit",
                job.title
            )));
        };
        let applied = if work == base {
            Applied::Clean(self.tree_of(tip)?)
        } else {
            self.ws.repo.apply_onto(base, work, tip)?
        };
        let tree = match applied {
            Applied::Conflict(paths) => return self.conflicted(job, job_ws, &paths, None),
            Applied::Clean(tree) => tree,
        };
        let paths = self.ws.repo.paths_between(self.tree_of(tip)?, tree)?;
        let mut ignore = self.ws.own_files();
        ignore.extend(self.left_out.paths.iter().cloned());
        let ignore: Vec<&Path> = ignore.iter().map(PathBuf::as_path).collect();
        let dirty = self.ws.repo.dirty_paths(&ignore)?;
        let touched: Vec<String> = paths
            .iter()
            .filter(|p| dirty.iter().any(|d| covers(d, p)))
            .cloned()
            .collect();
        if !touched.is_empty() {
            return self.conflicted(
                job,
                job_ws,
                &touched,
                Some("changed by hand in the work tree"),
            );
        }
        journal::save(
            &self.ws.state_dir.integrating(),
            &Integrating {
                identity: job.identity.clone(),
                slug: job.slug.clone(),
                onto: tip.to_string(),
                paths: paths.clone(),
            },
        )?;
        self.ws.repo.checkout_paths(tree, &paths)?;
        let doc = self.spec.reload()?;
        let Some(task) = doc.find(&job.identity) else {
            journal::remove(&self.ws.state_dir.integrating());
            return self.take_back(job, &paths);
        };
        let task_start = TaskStart {
            identity: job.identity.clone(),
            base_commit: Some(tip.to_string()),
            excluded: dirty.iter().map(PathBuf::from).collect(),
            check: None,
        };
        journal::save(&self.ws.state_dir.task_start(), &task_start)?;
        let mut it = TaskRun {
            title: job.title.clone(),
            identity: job.identity.clone(),
            line: doc.tasks()[task].line,
            state: doc.tasks()[task].state,
            start: task_start,
            hand_edits: self.spec.changes_since(*spec_mark),
        };
        let end = self.commit(&mut it, &implement, &review)?;
        journal::remove(&self.ws.state_dir.integrating());
        *spec_mark = self.spec.mark();
        if end == IterationEnd::Committed {
            self.ws.repo.remove_task_worktree(&job.slug)?;
            self.ws.repo.delete_task_branch(&job.slug)?;
            let _ = std::fs::remove_dir_all(job_ws.state_dir.dir());
        } else {
            // Not committed (a hook refused it, the person took the task): what was written
            // here goes back, kept under refs/kern/; the task's worktree keeps its work.
            self.take_back(job, &paths)?;
            let _ = job_ws.state_dir.clear_iteration_files();
        }
        Ok(end)
    }

    /// The tree of commit `oid`.
    fn tree_of(&self, oid: git2::Oid) -> Result<git2::Oid> {
        self.ws
            .repo
            .git()
            .find_commit(oid)
            .map(|c| c.tree_id())
            .map_err(|e| Error::git("reading a commit's tree", e))
    }

    /// Puts `paths` of the work tree back to HEAD, saved first when they differ from it.
    fn take_back(&mut self, job: &Job, paths: &[String]) -> Result<IterationEnd> {
        let mut ignore = self.ws.own_files();
        ignore.extend(self.left_out.paths.iter().cloned());
        let ignore: Vec<&Path> = ignore.iter().map(PathBuf::as_path).collect();
        let dirty = self.ws.repo.dirty_paths(&ignore)?;
        let ours: Vec<PathBuf> = paths
            .iter()
            .filter(|p| dirty.iter().any(|d| covers(d, p)))
            .map(PathBuf::from)
            .collect();
        if !ours.is_empty() {
            self.lock.set_phase(Phase::Writing)?;
            let git_ref = self.next_ref(&format!("refs/kern/saved/{}/integration-", job.slug))?;
            self.ws.repo.save_paths(
                &git_ref,
                &ours,
                &format!(
                    "kern: the work of `{}`, taken back out of the work tree\n",
                    job.title
                ),
            )?;
            self.ws.repo.restore_paths(&ours)?;
        }
        Ok(IterationEnd::Progressed)
    }

    /// The task's work conflicts with the branch in `paths`: nothing is written; the work is
    /// kept and the task retried on the new tip, or blocked at its second conflict.
    fn conflicted(
        &mut self,
        job: &Job,
        job_ws: &Workspace,
        paths: &[String],
        why: Option<&str>,
    ) -> Result<IterationEnd> {
        let mut conflicts: Conflicts =
            journal::load(&self.ws.state_dir.conflicts()).unwrap_or_default();
        let count = conflicts.entry(job.slug.clone()).or_insert(0);
        *count += 1;
        let count = *count;
        journal::save(&self.ws.state_dir.conflicts(), &conflicts)?;
        let files = paths
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let how = why.unwrap_or("changed on the branch meanwhile");
        let branch = format!("{TASK_BRANCH_PREFIX}{}", job.slug);
        self.log.event(RunEvent::Conflict {
            task: job.title.clone(),
            paths: paths.to_vec(),
            branch: branch.clone(),
            attempt: count,
        });
        let edits = if count >= 2 {
            self.reporter.warn(&format!(
                "blocked `{}`: its work conflicts again in {files} ({how}) — it stays on `{branch}`",
                job.title
            ));
            self.summary.blocked.push(job.title.clone());
            self.log.event(RunEvent::Blocked {
                task: job.title.clone(),
                why: format!("its work conflicted twice in {files}"),
            });
            conflicts.remove(&job.slug);
            journal::save(&self.ws.state_dir.conflicts(), &conflicts)?;
            vec![
                Edit::SetState(TaskState::Blocked),
                Edit::AddBlocked(format!(
                    "its work conflicted twice with the branch in {files} ({how}) — it is on the branch `{branch}`: merge it by hand (`git merge {branch}`), or set the task back to [ ] to start over"
                )),
                Edit::BlockParents,
            ]
        } else {
            let keep = self.next_ref(&format!("refs/kern/attempts/{}/", job.slug))?;
            // The work is kept there; the branch starts over from the new tip.
            self.ws.repo.remove_task_worktree(&job.slug)?;
            self.ws.repo.fresh_task_branch(&job.slug, &keep)?;
            self.reporter.warn(&format!(
                "`{}` conflicts with the branch in {files} ({how}): its work is kept at `{keep}`, and the task starts again on the new tip",
                job.title
            ));
            vec![Edit::AddAttempt(format!(
                "its work conflicted with the branch in {files} ({how}) when kern applied it — kept at `{keep}`; start from the branch as it is now"
            ))]
        };
        let doc = self.spec.reload()?;
        if doc.find(&job.identity).is_some() {
            self.edit(&job.identity, &edits)?;
        }
        self.summary.failed_attempts += 1;
        self.ws.repo.remove_task_worktree(&job.slug)?;
        let _ = std::fs::remove_dir_all(job_ws.state_dir.dir());
        Ok(IterationEnd::Progressed)
    }

    /// Removes a task's worktree and folder when nothing is left in them: no stage files, no
    /// change in the worktree, no commit on its branch beyond where it started.
    fn retire_if_idle(&mut self, job: &Job, ws: Workspace) -> Result<()> {
        let dir = ws.state_dir.clone();
        if !dir.dir().exists() {
            return Ok(());
        }
        let has_stage_files = dir.iteration_files().iter().any(|p| p.exists());
        let doc = self.spec.reload()?;
        let in_progress = doc
            .find(&job.identity)
            .is_some_and(|t| doc.tasks()[t].state == TaskState::InProgress);
        if has_stage_files && in_progress {
            return Ok(());
        }
        self.retire(job, ws, in_progress)
    }

    /// Removes a task's worktree and folder — unless `keep_if_busy` and it holds work (changes,
    /// or commits since the task started), which then waits for the task's next turn. Changes
    /// left in it are saved under `refs/kern/saved/<task>/worktree-<n>` first; its branch is
    /// deleted only when the run's branch already contains it.
    fn retire(&mut self, job: &Job, ws: Workspace, keep_if_busy: bool) -> Result<()> {
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
            .and_then(|b| git2::Oid::from_str(&b).ok());
        let moved = ws.repo.head_oid() != start && start.is_some();
        if keep_if_busy && (!left.is_empty() || moved) {
            // Work in progress: it stays for the task's next turn.
            return Ok(());
        }
        self.lock.set_phase(Phase::Writing)?;
        if !left.is_empty() {
            let git_ref = self.next_ref(&format!("refs/kern/saved/{}/worktree-", job.slug))?;
            ws.repo.save_paths(
                &git_ref,
                &left,
                &format!(
                    "kern: what the worktree of `{}` held when it was removed\n",
                    job.title
                ),
            )?;
            self.reporter.info(&format!(
                "the worktree of `{}` still held changes: saved at `{git_ref}`",
                job.title
            ));
        }
        let dir = ws.state_dir.dir();
        drop(ws);
        self.ws.repo.remove_task_worktree(&job.slug)?;
        {
            let tip = self.ws.repo.task_branch(&job.slug);
            let head = self.ws.repo.head_oid();
            let contained = match (tip, head) {
                (Some(t), Some(h)) => {
                    t == h
                        || self
                            .ws
                            .repo
                            .git()
                            .graph_descendant_of(h, t)
                            .unwrap_or(false)
                }
                _ => true,
            };
            if contained {
                self.ws.repo.delete_task_branch(&job.slug)?;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    /// The worktrees whose tasks are not in progress (done, gone, taken by the person): their
    /// changes are saved and they are removed; their branches stay when they hold work.
    fn retire_idle_jobs(&mut self, running: &[TaskIdentity]) -> Result<()> {
        let Ok(entries) = std::fs::read_dir(self.ws.state_dir.jobs_dir()) else {
            return Ok(());
        };
        let doc = self.spec.reload()?;
        for entry in entries.flatten() {
            let slug = entry.file_name().to_string_lossy().into_owned();
            let dir = self.ws.state_dir.job(&slug);
            let Some(record) = journal::load::<JobRecord>(&dir.job_record()) else {
                self.ws.repo.remove_task_worktree(&slug)?;
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
            match self.ws.for_job(
                self.settings,
                &dir.job_tree(),
                dir.clone(),
                RefFilter::default(),
            ) {
                Ok(ws) => self.retire(&job, ws, false)?,
                Err(_) => {
                    self.ws.repo.remove_task_worktree(&slug)?;
                    let _ = std::fs::remove_dir_all(dir.dir());
                }
            }
        }
        // A worktree whose folder of state is gone (a cleaned temp folder) is a leftover.
        for slug in self.ws.repo.task_worktrees()? {
            if !self.ws.state_dir.job(&slug).job_record().exists() {
                self.ws.repo.remove_task_worktree(&slug)?;
            }
        }
        Ok(())
    }

    /// A run killed while writing a task's work into the work tree: the commit landed (the
    /// task is done) or the paths go back to HEAD, saved first; the task integrates again.
    fn recover_integration(&mut self) -> Result<()> {
        let path = self.ws.state_dir.integrating();
        let Some(pending) = journal::load::<Integrating>(&path) else {
            return Ok(());
        };
        let head = self.ws.repo.head_oid().map(|o| o.to_string());
        if head.as_deref() == Some(pending.onto.as_str()) {
            let job = Job {
                slug: pending.slug.clone(),
                identity: pending.identity.clone(),
                title: pending.identity.path.last().cloned().unwrap_or_default(),
            };
            self.take_back(&job, &pending.paths)?;
            self.reporter.warn(&format!(
                "the last run stopped while it wrote the work of `{}` into the work tree: put back, it is applied again",
                job.title
            ));
        }
        journal::remove(&path);
        Ok(())
    }
}

impl Job {
    fn clone_ids(&self) -> Job {
        Job {
            slug: self.slug.clone(),
            identity: self.identity.clone(),
            title: self.title.clone(),
        }
    }
}

/// Waits for the first of `running` to end and takes it out.
async fn next_done<'a>(running: &mut Vec<JobFuture<'a>>) -> JobDone {
    std::future::poll_fn(|cx| {
        for i in 0..running.len() {
            if let Poll::Ready(done) = running[i].as_mut().poll(cx) {
                drop(running.swap_remove(i));
                return Poll::Ready(done);
            }
        }
        Poll::Pending
    })
    .await
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
    fn a_dirty_folder_covers_what_it_holds() {
        assert!(covers("src/", "src/a.rs"));
        assert!(covers("src/a.rs", "src/a.rs"));
        assert!(!covers("src/a", "src/ab.rs"));
    }
}
