//! The loop: take the lock, recover what a dead run left, run the iterations, finish with a
//! summary and an exit that says how the run ended.
//!
//! kern, not the agent, decides: it selects the task, writes every marker and note in SPEC.md,
//! and makes every commit. The agents only report (structured output); the pure policy in
//! [`decide`] turns reports into edits. The files, in the order a task meets them: `task_run`
//! (the iteration's record of its task), `start`
//! (what a task starts from: its base commit, the person's files in the tree), `iteration`
//! (one task as a straight sequence of stages), `discovery` (how much research a task earns),
//! `stage` (one stage: inputs, runner, audit, records), `decide` (the policy), `guard` (is the
//! task still kern's — ours, gone, or set by the person — kern's edits of it, and where a step
//! of SPEC.md's shared view begins), `audit`
//! (what a stage may not change), `check` (the check gate), `verify` (the must-haves and
//! read-only tests kern checks itself), `tests_first` (a task's tests red before implement,
//! green after), `scope` (changes outside a task's Scope set aside),
//! `error_research` (what the next attempt is told after a failure, and when a task's
//! approaches are exhausted), `end` (how a task ends for good, and its work set aside),
//! `commit` (the journaled commit; `commit/asking` the review's part in it), `recovery` (after
//! a dead run). What every task of a run shares: `cx` (what it reads and never changes: the
//! settings, the workspace, the reporter, the interrupt), `guard/shared` (SPEC.md) and `ledger` (what the run
//! counts, with the heartbeat every task tells; its counts private behind named methods), `clock` (the run's pauses, told to the
//! heartbeat), `pace` (the usage windows each stage used and `--pace`'s pure gate) and `pacing`
//! (the gate asked before each stage and after each task: pauses, hand-overs, the end). Where
//! the work goes ([`Target`]): the run's branch, or `parallel` (tasks in
//! worktrees, `-j`), `schedule` (which tasks run together) and `remote` (tasks claimed on a git
//! remote and landed there, `--remote`).
//!
//! Decisions a reader must know:
//! - One [`SpecFile`] is held for the whole run, shared by every task ([`SharedSpec`]): every
//!   read and write of SPEC.md goes through it, so it can tell the person's edits from its own
//!   and fold them in.
//! - "No progress": [`MAX_IDLE_ITERATIONS`] iterations in a row that only skipped tasks end
//!   the run (exit 4) rather than spin through the skipped tasks forever.
//! - The budget stops the run after the stage that crossed it: its result is applied, the next
//!   stage does not start, and the stage files stay for the next run to resume from. Each
//!   stage also gets what is left as Claude's own `--max-budget-usd`.
//! - A repository deleted during the run (an agent removed `.git`) ends it with
//!   [`Error::RepositoryGone`] (exit 2), whatever git read failed first: the message says
//!   what the state folder still holds.
//! - Two agents: the run remembers until when each agent is at its usage limit
//!   (in the [`Ledger`] every task shares), so every stage starts on the one that can work (`--fallback-agent`),
//!   and `--pace` is judged before each stage (a pause) and after each iteration (no new task)
//!   from the latest reading of each usage window the agents reported.
//!
//! No unit test here: the loop takes the lock, spawns agents and ends the run; its rules are
//! the pure functions of `decide`, `finish` and `clock` (tested there); held by
//! tests/integration/pipeline.rs, night.rs and crash.rs.

mod audit;
pub(crate) mod check;
pub(crate) mod clock;
mod commit;
mod cx;
mod decide;
pub(crate) mod discovery;
mod end;
pub(crate) mod error_research;
pub(crate) mod fence;
mod finish;
mod guard;
mod iteration;
mod ledger;
pub(crate) mod pace;
mod pacing;
mod parallel;
mod recovery;
pub(crate) mod remote;
pub(crate) mod schedule;
mod scope;
pub(crate) mod stage;
mod target;
mod task_run;
pub(crate) use target::Target;
pub(crate) use task_run::TaskRun;
pub(crate) mod start;
pub(crate) mod teller;
pub(crate) mod tests_first;
mod verify;

use crate::error::{Error, Result};
use crate::event::{IterationEnd, RunEvent, Told};
use crate::reporter::notify::Notifier;
use crate::reporter::{Reporter, Summary};
use crate::settings::Settings;
use crate::spec::{self, Document, SpecFile};
use crate::state::journal::{self, LeftOut};
use crate::state::lock::{Phase, RunLock};
use crate::state::rotating::RotatingFile;
use crate::state::run_log::RunLog;
use crate::supervisor::awake::Awake;
use crate::supervisor::interrupt::Interrupt;
use crate::timestamp::Timestamp;
use crate::workspace::Workspace;
pub(crate) use cx::Cx;
use guard::SharedSpec;
use guard::SpecGuard;
use ledger::Ledger;
use teller::Teller;

/// Iterations in a row that change nothing (no commit, no SPEC.md change) before a run stops
/// instead of spinning.
pub(crate) const MAX_IDLE_ITERATIONS: u32 = 3;

/// A run in progress: what it was given, what it holds, and where its work goes.
pub(crate) struct Run<'a> {
    /// What the run reads and never changes.
    cx: Cx<'a>,
    lock: RunLock,
    /// The one door for telling what happens.
    teller: Teller<'a>,
    spec: SharedSpec,
    /// What the run counts, shared by every task of the run.
    ledger: Ledger,
    /// Where this run's work goes.
    target: Target,
    /// Changed files kern left out of its commits: they stay, and never block a start.
    left_out: LeftOut,
}

/// Runs the loop in the workspace `ws`. `Ok` is exit 0; the other ends are errors (see
/// `error.rs`).
pub(crate) async fn run(
    settings: &Settings,
    ws: &Workspace,
    reporter: &Reporter,
    interrupt: &Interrupt,
) -> Result<()> {
    // Identity, signing key, operation in progress, filter drivers: before any agent runs.
    ws.repo.ensure_ready()?;
    ws.state_dir.create()?;
    fence::fence_hooks(settings, ws);
    // Orphans of agents are re-parented to kern, so none can outlive its stage unseen.
    if !crate::supervisor::reaper::become_subreaper() {
        tracing::debug!(
            "cannot become a child subreaper: escaped agent processes may outlive their stage"
        );
    }
    if !settings.detached && settings.watched_by.is_none() {
        // A detached run's start was marked by `kern --detach` before it began, a watched
        // run's by its watchdog: `kern log -f` follows the whole night from there.
        crate::state::rotating::mark_start(&ws.state_dir.output_log());
    }
    reporter.attach_log(Box::new(RotatingFile::new(ws.state_dir.output_log())));
    reporter.set_budget(settings.max_cost);
    let (mut lock, takeover) = ws.take_lock(settings)?;
    lock.set_quiet_limits(settings.quiet_limits());
    let run_id = format!("{}-{}", std::process::id(), Timestamp::now());
    let ledger = Ledger::new(
        Summary {
            state_dir: ws.state_dir.dir(),
            max_cost: settings.max_cost,
            ..Summary::default()
        },
        lock.beat(),
    );
    let mut teller = Teller::new(
        reporter,
        RunLog::new(ws.state_dir.run_log(), run_id.clone()),
        ledger.clone(),
    );
    if settings.tracker.is_some() {
        teller.hear_tracker(crate::tracker::Tracker::on_this_machine(
            settings.path_var.as_deref(),
            ws.repo.top(),
            settings.tracker_timeout,
            ws.state_dir.tracker(),
        ));
    }
    if let Some(command) = &settings.notify {
        reporter.attach_notifier(Notifier::new(
            command,
            ws.repo.top(),
            &ws.state_dir.dir(),
            notify_context(ws, &run_id),
        ));
    }
    let awake = Awake::keep(
        settings.path_var.as_deref(),
        &format!("kern is running tasks in {}", ws.repo.top().display()),
    );
    if let Some(awake) = &awake {
        teller.emit(RunEvent::Told(Told::Awake {
            tool: awake.tool.to_string(),
        }));
    }
    let held = Held {
        lock,
        takeover,
        teller,
        ledger,
    };
    let result = run_locked(settings, ws, reporter, interrupt, held, &run_id).await;
    drop(awake);
    reporter.settle_notifications();
    result
}

/// The fields every `--notify` event carries.
fn notify_context(ws: &Workspace, run_id: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut context = serde_json::Map::new();
    context.insert("run".into(), run_id.into());
    context.insert("project".into(), ws.state_dir.project_id().into());
    context.insert(
        "branch".into(),
        ws.repo.branch_name().unwrap_or_default().into(),
    );
    context.insert(
        "repository".into(),
        ws.repo.top().display().to_string().into(),
    );
    context.insert(
        "state_dir".into(),
        ws.state_dir.dir().display().to_string().into(),
    );
    context
}

/// What a run holds once it has the lock: the lock (and what it took over), its door for
/// telling and its ledger.
struct Held<'a> {
    lock: RunLock,
    takeover: Option<crate::state::lock::Takeover>,
    teller: Teller<'a>,
    ledger: Ledger,
}

/// Refuses (exit 2, before any agent) a task list whose only tasks kern could take are
/// examples — `kern init`'s starter as it was written: the person is to replace them first.
fn only_examples(settings: &Settings, ws: &Workspace, doc: &Document) -> Result<()> {
    if doc.has_pending_examples()
        && spec::select_with(doc, &ws.select_options(settings, doc)).is_none()
    {
        return Err(Error::Usage(format!(
            "`{0}` holds only example tasks (their titles start with `Example:`), which kern never takes — replace the example tasks in {0} with your own",
            ws.spec_display
        )));
    }
    Ok(())
}

/// The run once the lock is held: everything after it, to the summary.
async fn run_locked<'a>(
    settings: &'a Settings,
    ws: &'a Workspace,
    reporter: &'a Reporter,
    interrupt: &'a Interrupt,
    held: Held<'a>,
    run_id: &str,
) -> Result<()> {
    let Held {
        lock,
        takeover,
        teller,
        ledger,
    } = held;
    // A run looks at the work tree many times: from here on each look costs what changed.
    ws.repo.watch_work_tree();
    let spec = match SpecFile::load_as(&ws.spec_path, &ws.spec_display)
        .and_then(|(spec, doc)| only_examples(settings, ws, &doc).map(|()| spec))
    {
        Ok(spec) => spec,
        Err(e) => {
            teller.stopped(&e);
            return Err(e);
        }
    };
    let remote = match &settings.remote {
        Some(name) => Some(remote::Remote::new(
            &ws.repo,
            name,
            settings.claim_ttl,
            run_id,
        )?),
        None => None,
    };
    let mut run = Run {
        cx: Cx {
            settings,
            ws,
            reporter,
            interrupt,
        },
        lock,
        teller,
        spec: SharedSpec::new(spec),
        ledger,
        target: Target::own_branch(remote),
        left_out: journal::load(&ws.state_dir.left_out()).unwrap_or_default(),
    };
    interrupt.on_hangup(Box::new(run.teller.hangup_hook()));
    if let Err(e) = recovery::recover(run.cx.ws, &mut run.lock, &run.teller, takeover) {
        run.teller.stopped(&e);
        return Err(e);
    }
    if let crate::repository::Head::Detached(oid) = ws.repo.head()? {
        run.teller.emit(RunEvent::Told(Told::Detached {
            oid: oid.to_string(),
        }));
        run.target.set_detached();
    }
    if let Some(here) = ws.task_list_here(settings) {
        run.teller.emit(RunEvent::Told(Told::SpecElsewhere {
            spec: ws.spec_display.clone(),
            here,
        }));
    }
    if ws.repo.is_untracked(&ws.spec_path) {
        run.teller.emit(RunEvent::Told(Told::SpecUntracked {
            spec: ws.spec_display.clone(),
        }));
    }
    run.teller.emit(RunEvent::RunStart {
        iterations: settings.iterations,
        delay_s: settings.delay.as_secs(),
        agent: settings.agent.to_string(),
        max_cost_usd: settings.max_cost,
        sandbox: Some(settings.sandbox.mode),
        watch: settings.watched_by.clone(),
    });
    let result = match baseline_check(run.cx, &run.teller, &run.spec, &mut run.lock).await {
        Ok(()) if parallel::wanted(settings, &ws.state_dir) => run.parallel().await,
        Ok(()) => run.iterations().await,
        Err(e) => Err(e),
    };
    let detached = run.target.detached();
    finish::finish(
        run.cx,
        &run.ledger,
        &run.spec,
        &run.teller,
        detached,
        result,
    )
}

impl<'a> Run<'a> {
    async fn iterations(&mut self) -> Result<()> {
        let total = self.cx.settings.iterations;
        let mut idle = 0u32;
        for index in 1..=total {
            if let Some(signal) = self.cx.interrupt.requested() {
                return Err(Error::Interrupted { signal });
            }
            self.ledger.set_iterations(index);
            let end = self.iteration(index, total).await?;
            self.cx
                .ws
                .state_dir
                .clear_iteration_files(self.teller.run_id())?;
            match end {
                IterationEnd::NothingLeft => {
                    let ended = nothing_left(self.cx, &self.spec)?;
                    self.ledger.set_iterations(index - 1);
                    self.ledger.end_with(ended);
                    return Ok(());
                }
                IterationEnd::Skipped => idle += 1,
                IterationEnd::Committed | IterationEnd::Progressed | IterationEnd::Ready => {
                    idle = 0;
                }
            }
            if idle >= MAX_IDLE_ITERATIONS {
                return Err(Error::Unfinished(format!(
                    "{idle} iterations in a row changed nothing (every task left was skipped) — read the Skipped notes in {} and edit the tasks",
                    self.cx.ws.spec_display
                )));
            }
            check_budget(self.cx.settings, &self.ledger)?;
            if let Some(why) = pacing::judge_pace(self.cx, &self.teller, &self.ledger) {
                self.ledger.end_with(why);
                return Ok(());
            }
            if index < total && !self.cx.settings.delay.is_zero() && has_work(self.cx, &self.spec)?
            {
                clock::check_pause(
                    self.cx.settings.deadline.as_ref(),
                    Timestamp::now(),
                    self.cx.settings.delay,
                )?;
                self.lock.set_phase(Phase::Sleeping)?;
                self.teller.emit(RunEvent::Told(Told::Waiting {
                    reason: "next iteration".into(),
                    remaining: self.cx.settings.delay,
                }));
                if clock::pause(self.cx.interrupt, &self.ledger.beat, self.cx.settings.delay).await
                {
                    return Err(Error::Interrupted {
                        signal: self.cx.interrupt.requested().unwrap_or(2),
                    });
                }
            }
        }
        self.ledger.end_with(finish::all_ran(total));
        Ok(())
    }

    /// SPEC.md as this step sees it (see [`SpecGuard`]).
    fn guard(&self) -> SpecGuard<'_, 'a> {
        SpecGuard::new(self.cx, &self.spec, &self.teller)
    }

    /// Ends the iteration as `decision` says ([`end::end_task`]).
    fn end_task(&mut self, it: &mut TaskRun, decision: decide::Decision) -> Result<IterationEnd> {
        let guard = SpecGuard::new(self.cx, &self.spec, &self.teller);
        end::end_task(&guard, &mut self.lock, &self.left_out.paths, it, decision)
    }

    /// Follows the person who took the task away ([`end::follow_person`]).
    fn follow_person(&mut self, it: &mut TaskRun, now: &guard::TaskNow) -> Result<IterationEnd> {
        let guard = SpecGuard::new(self.cx, &self.spec, &self.teller);
        end::follow_person(&guard, &mut self.lock, &self.left_out.paths, it, now)
    }

    /// Whether the task is still kern's before the next stage ([`end::still_ours`]).
    fn still_ours(&mut self, it: &mut TaskRun) -> Result<Option<IterationEnd>> {
        let guard = SpecGuard::new(self.cx, &self.spec, &self.teller);
        end::still_ours(&guard, &mut self.lock, &self.left_out.paths, it)
    }
}

/// How a run that found nothing to take ends: "nothing left to do", or — when open tasks
/// wait through After notes on a blocked task — that every open task waits, naming each
/// and the fix (the blocked task makes the exit code 4).
pub(super) fn nothing_left(cx: Cx, spec: &SharedSpec) -> Result<String> {
    let doc = spec.reload()?;
    let waiting = spec::waiting_on_blocked(&doc, &cx.ws.spec_display);
    Ok(if waiting.is_empty() {
        "nothing left to do".into()
    } else {
        format!(
            "every open task waits: {} — unblock what they wait for (set it back to [ ] once you did what its note asks), or remove the After notes",
            waiting.join("; ")
        )
    })
}

/// Runs `--check` once before any agent when the run starts a new task on the commit it
/// starts from (not when it resumes a task whose work is in the tree): a check that fails
/// there would fail every task's gate, one paid attempt after another. The `lock` says the
/// check runs; `teller` tells it.
async fn baseline_check(
    cx: Cx<'_>,
    teller: &Teller<'_>,
    spec: &SharedSpec,
    lock: &mut RunLock,
) -> Result<()> {
    let Some(command) = cx.settings.check.clone() else {
        return Ok(());
    };
    if cx.settings.check_baseline == crate::cli::CheckBaseline::Skip {
        return Ok(());
    }
    let doc = spec.reload()?;
    let Some(selection) = spec::select_with(&doc, &cx.ws.select_options(cx.settings, &doc)) else {
        return Ok(());
    };
    let resuming = doc.tasks()[selection.task].state != spec::TaskState::Pending
        || doc
            .ancestors(selection.task)
            .iter()
            .any(|&a| doc.tasks()[a].state == spec::TaskState::InProgress);
    if resuming {
        teller.emit(RunEvent::Told(Told::BaselineCheck {
            command,
            skipped: true,
        }));
        return Ok(());
    }
    lock.set_phase(Phase::Check)?;
    teller.emit(RunEvent::Told(Told::BaselineCheck {
        command: command.clone(),
        skipped: false,
    }));
    let result = check::run_baseline(&SpecGuard::new(cx, spec, teller), &command).await?;
    teller.emit(RunEvent::Check {
        task: None,
        command: command.clone(),
        passed: result == decide::CheckResult::Passed,
        output: None,
    });
    match result {
        decide::CheckResult::Passed => Ok(()),
        decide::CheckResult::Failed(output) => Err(Error::CheckFailsAtBaseline { command, output }),
    }
}

/// `Err(BudgetSpent)` once the run has cost `--max-cost` or more.
pub(super) fn check_budget(settings: &Settings, ledger: &Ledger) -> Result<()> {
    match settings.max_cost {
        Some(limit) if ledger.spent() >= limit => Err(Error::BudgetSpent {
            spent: ledger.spent(),
            limit,
        }),
        _ => Ok(()),
    }
}

/// Whether SPEC.md holds a task kern would take now.
fn has_work(cx: Cx, spec: &SharedSpec) -> Result<bool> {
    let doc = spec.reload()?;
    Ok(spec::select_with(&doc, &cx.ws.select_options(cx.settings, &doc)).is_some())
}

/// The files no agent may edit — SPEC.md and LEARNINGS.md — absolute, and once more through
/// their folder's real path when a symlink makes it differ (an agent may name either).
pub(crate) fn protected_files(ws: &Workspace) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for path in [&ws.spec_path, &ws.learnings_path] {
        files.push(path.clone());
        let real = path
            .parent()
            .and_then(|dir| dir.canonicalize().ok())
            .zip(path.file_name())
            .map(|(dir, name)| dir.join(name));
        if let Some(real) = real.filter(|real| real != path) {
            files.push(real);
        }
    }
    files
}
