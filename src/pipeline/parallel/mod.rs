//! Parallel tasks (`-j N`) and review branches (`--review`): DESIGN.md section 15.
//!
//! Decisions a reader must know:
//! - Each task runs in its own git worktree, `jobs/<task>/tree` under the state folder, on a
//!   branch `kern/<task>` from the tip, with its own state folder `jobs/<task>/`: a full
//!   [`Run`] of the ordinary pipeline over that worktree (its `Target::Job` pins it to its
//!   task).
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
//! - `--pace` is judged as each task ends, from the latest usage any task's agent reported:
//!   once it says stop, no new task starts and the running ones finish. With `--remote` it is
//!   judged before tasks start too: the account's ledger may be at the line already.
//! - The files: this one (the loop over the tasks running), `job` (a task's folder, worktree
//!   and run), `integrate` (landing its work, or the conflict), `tidy` (worktrees going away).
//! - Integration runs between the tasks' awaits: while kern commits, the other agents' output
//!   waits in their pipes (the limits are minutes; a commit takes seconds).
//!
//! No unit test here: the parallel loop runs tasks in worktrees side by side; which tasks run
//! together is `schedule`'s (tested there); held by tests/integration/parallel.rs.

mod conflict;
mod integrate;
mod job;
mod tidy;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::event::{IterationEnd, RunEvent, Told};
use crate::pipeline::guard::SharedSpec;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::{Cx, MAX_IDLE_ITERATIONS, Run, schedule};
use crate::settings::Settings;
use crate::spec::TaskIdentity;
use crate::state::StateDir;
use crate::state::lock::Phase;
use crate::workspace::Workspace;

struct Job {
    slug: String,
    identity: TaskIdentity,
    title: String,
}

/// What a task's run handed back when it ended (its counts are in the run's ledger).
struct JobDone {
    job: Job,
    ws: Workspace,
    end: Result<IterationEnd>,
}

type JobFuture<'a> = Pin<Box<dyn Future<Output = JobDone> + 'a>>;

/// True when the run takes its tasks through worktrees: `-j` above 1, `--review`, or tasks a
/// parallel run left in progress in their worktrees.
pub(super) fn wanted(settings: &Settings, state_dir: &StateDir) -> bool {
    settings.jobs > 1 || settings.review || settings.remote.is_some() || has_jobs(state_dir)
}

fn has_jobs(state_dir: &StateDir) -> bool {
    std::fs::read_dir(state_dir.jobs_dir()).is_ok_and(|mut d| d.next().is_some())
}

impl<'a> Run<'a> {
    /// The iterations with tasks in worktrees (see the module docs); with `--remote`, every
    /// claim the run holds is freed when it ends — at its deadline with each task's work pushed
    /// first, for the machine that claims it next.
    pub(super) async fn parallel(&mut self) -> Result<()> {
        let result = self.parallel_loop().await;
        if matches!(result, Err(Error::DeadlineReached { .. })) {
            // The tasks in progress go on elsewhere, or here next time, from their work.
            crate::pipeline::remote::remote_hand_over(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.target,
            );
        }
        crate::pipeline::remote::remote_close(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.target,
        );
        result
    }

    async fn parallel_loop(&mut self) -> Result<()> {
        let slots = self.cx.settings.jobs.max(1) as usize;
        let total = self.cx.settings.iterations;
        crate::pipeline::commit::finish_pending_commit(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.lock,
            &mut self.left_out,
            &mut self.target,
        )?;
        tidy::recover_integration(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.lock,
        )?;
        crate::pipeline::remote::remote_open(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.target,
        )?;
        let mut running: Vec<JobFuture<'a>> = Vec::new();
        let mut jobs: Vec<TaskIdentity> = Vec::new();
        let mut started = 0u32;
        let mut idle = 0u32;
        let mut stop: Option<Error> = None;
        // Set once `--pace` says to take no new task: the running ones finish.
        let mut paced: Option<String> = None;
        let mut next_start = Instant::now();
        let mut spec_mark = self.spec.mark();
        // A commit the run's branch must keep: where it started, then kern's last commit on it
        // (taken from the commit itself: the branch may move between kern's commit and a look).
        let mut tip_seen = self.cx.ws.repo.head_oid();
        tidy::retire_idle_jobs(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.lock,
            &[],
        )?;
        loop {
            if stop.is_none()
                && let Some(signal) = self.cx.interrupt.requested()
            {
                stop = Some(Error::Interrupted { signal });
            }
            if stop.is_none()
                && let Err(e) = crate::pipeline::check_budget(self.cx.settings, &self.ledger)
            {
                stop = Some(e);
            }
            // No task starts whose first stage could not finish before the deadline.
            if stop.is_none()
                && let Err(e) = super::clock::check_deadline(
                    self.cx.settings,
                    self.ledger.median_ms(crate::stage::Stage::Research),
                    crate::stage::Stage::Research,
                )
                && super::clock::check_deadline(
                    self.cx.settings,
                    self.ledger.median_ms(crate::stage::Stage::Implement),
                    crate::stage::Stage::Implement,
                )
                .is_err()
            {
                stop = Some(e);
            }
            let mut nothing_left = false;
            let may_start = stop.is_none() && started < total && Instant::now() >= next_start;
            if may_start && paced.is_none() && self.target.remote().is_some() {
                // The account's ledger may be at the line before this machine ran a stage.
                paced = super::pacing::judge_pace(self.cx, &self.teller, &self.ledger);
            }
            if may_start && paced.is_none() {
                match self.start_jobs(&jobs, slots, started, total) {
                    Ok(new)
                        if new.is_empty()
                            && running.is_empty()
                            && self.target.remote().is_some_and(|r| r.waiting) =>
                    {
                        // Tasks are left that other machines hold: wait for them to land, be
                        // freed, or lapse.
                        self.lock.set_phase(Phase::Sleeping)?;
                        if self
                            .cx
                            .interrupt
                            .sleep_or_interrupt(crate::pipeline::remote::claim_poll(&self.target))
                            .await
                        {
                            stop = Some(Error::Interrupted {
                                signal: self.cx.interrupt.requested().unwrap_or(2),
                            });
                        }
                        continue;
                    }
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
                if let Some(why) = paced {
                    self.ledger.end_with(why);
                    return Ok(());
                }
                if nothing_left {
                    let ended = crate::pipeline::nothing_left(self.cx, &self.spec)?;
                    self.ledger.end_with(ended);
                    return Ok(());
                }
                if started >= total {
                    self.ledger.end_with(super::finish::all_ran(total));
                    return Ok(());
                }
                if !has_parallel_work(self.cx, &self.spec)? {
                    let ended = crate::pipeline::nothing_left(self.cx, &self.spec)?;
                    self.ledger.end_with(ended);
                    return Ok(());
                }
                // Only the delay between tasks is left to wait for.
                let wait = next_start.saturating_duration_since(Instant::now());
                if let Err(e) = super::clock::check_pause(
                    self.cx.settings.deadline.as_ref(),
                    crate::timestamp::Timestamp::now(),
                    wait,
                ) {
                    stop = Some(e);
                    continue;
                }
                self.lock.set_phase(Phase::Sleeping)?;
                self.teller.emit(RunEvent::Told(Told::Waiting {
                    reason: "next iteration".into(),
                    remaining: wait,
                }));
                if super::clock::pause(self.cx.interrupt, &self.ledger.beat, wait).await {
                    stop = Some(Error::Interrupted {
                        signal: self.cx.interrupt.requested().unwrap_or(2),
                    });
                }
                continue;
            }
            // The run writes nothing while its tasks run: a kill now is no death mid-write
            // (the next run must not take git's locks taken meanwhile for its own).
            self.lock.set_phase(Phase::Tasks)?;
            let done = match self.target.remote().map(|r| r.ttl / 3) {
                None => next_done(&mut running).await,
                Some(every) => {
                    tokio::select! {
                        done = next_done(&mut running) => done,
                        () = tokio::time::sleep(every) => {
                            if let Err(e) = crate::pipeline::remote::remote_renew(&SpecGuard::new(self.cx, &self.spec, &self.teller), &mut self.target, )
                                && stop.is_none()
                            {
                                stop = Some(e);
                            }
                            continue;
                        }
                    }
                }
            };
            jobs.retain(|j| *j != done.job.identity);
            self.ledger.set_iterations(started);
            let end = self.job_ended(done, &mut spec_mark, &mut tip_seen);
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
                    self.cx.ws.spec_display
                )));
            }
            if stop.is_none() && paced.is_none() {
                paced = super::pacing::judge_pace(self.cx, &self.teller, &self.ledger);
            }
            if !self.cx.settings.delay.is_zero() {
                next_start = Instant::now() + self.cx.settings.delay;
            }
        }
    }
    /// Starts the tasks that may start now beside the `running` ones, up to `slots` at once
    /// and `left` more in this run.
    fn start_jobs(
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
        self.guard().apply_pending_edits()?;
        crate::pipeline::remote::remote_sync(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.target,
        )?;
        let doc = self.spec.reload()?;
        let lines = self.cx.ws.validate(&doc)?;
        if !lines.is_empty() {
            self.teller
                .emit(RunEvent::Told(Told::SpecWarnings { lines }));
        }
        let running_now: Vec<usize> = running.iter().filter_map(|id| doc.find(id)).collect();
        let options = self.cx.ws.select_options(self.cx.settings, &doc);
        // With `--remote`, only the tasks this run could claim.
        let picks = crate::pipeline::remote::claimed_picks(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.target,
            &doc,
            &running_now,
            free,
            &options,
        )?;
        let mut out = Vec::new();
        for (k, selection) in picks.into_iter().enumerate() {
            let index = started + 1 + k as u32;
            let task = &doc.tasks()[selection.task];
            let identity = doc.identity(selection.task);
            tracing::debug!(task = %identity, line = task.line, reason = %selection.reason, "starting in its own worktree");
            let job = job::prepare_job(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.lock,
                &doc,
                selection.task,
            )?;
            crate::pipeline::remote::remote_job_prepared(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.target,
                &doc,
                selection.task,
                &job.slug,
            )?;
            let future = job::job_future(
                self.cx,
                (self.spec.clone(), self.ledger.clone(), self.teller.clone()),
                job.clone_ids(),
                index,
                identity.clone(),
            )?;
            out.push((job, future));
        }
        Ok(out)
    }
    /// A task's run ended: count it, integrate its work when it is ready, and tidy its
    /// worktree away when nothing is left in it.
    fn job_ended(
        &mut self,
        done: JobDone,
        spec_mark: &mut usize,
        tip_seen: &mut Option<git2::Oid>,
    ) -> Result<IterationEnd> {
        integrate::keep_branch_forwards(
            self.cx,
            &self.teller,
            &self.ledger,
            &mut self.lock,
            &done.job,
            *tip_seen,
        )?;
        let end = match done.end {
            Ok(IterationEnd::Ready) => integrate::integrate(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                (&mut self.lock, &mut self.left_out, &mut self.target),
                &self.ledger,
                (&done.job, &done.ws),
                spec_mark,
            ),
            Ok(end) => Ok(end),
            Err(e) => {
                // Its worktree and stage files stay: the next run resumes it there.
                drop(done.ws);
                return Err(e);
            }
        };
        if let Some(commit) = self.target.take_last_commit() {
            *tip_seen = Some(commit);
        }
        let ws = done.ws;
        tidy::retire_if_idle(
            &SpecGuard::new(self.cx, &self.spec, &self.teller),
            &mut self.lock,
            &done.job,
            ws,
        )?;
        // A task that landed freed its claim in the same push; any other end publishes.
        let landed = matches!(end, Ok(IterationEnd::Committed)) && !self.cx.settings.review;
        if end.is_ok() && !landed {
            crate::pipeline::remote::remote_task_ended(
                &SpecGuard::new(self.cx, &self.spec, &self.teller),
                &mut self.target,
                &done.job.identity,
                &done.job.slug,
            )?;
        }
        end
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

/// True when a task could start now in SPEC.md (nothing else runs).
fn has_parallel_work(cx: Cx, spec: &SharedSpec) -> Result<bool> {
    let doc = spec.reload()?;
    Ok(!schedule::pick(&doc, &[], 1, &cx.ws.select_options(cx.settings, &doc)).is_empty())
}

/// Waits for the first of `running` to end and takes it out.
async fn next_done(running: &mut Vec<JobFuture<'_>>) -> JobDone {
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
