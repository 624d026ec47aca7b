//! What `kern report` says, as data (here, beside `run_log`, because the loop uses it too: the
//! run-ended notification carries the report's totals): one [`RunReport`] per run, built from that run's
//! `run.jsonl` events alone by the pure [`build`] — never from memory, so the report of a run
//! that crashed reads as honestly as one that finished. `--json` is this model serialised;
//! the terminal page, Markdown and HTML render it.
//!
//! Decisions a reader must know:
//! - The first line (the headline) says how the run ended before anything else: a run that
//!   stopped early says at which iteration and why; a run with no `run_end` line either still
//!   holds its lock (running) or vanished (killed, machine down) — the caller says which.
//! - A task is known by its title; its events are those between its `iteration_start` and the
//!   next one (stage, check, violation and hand-edit lines name no task). Tasks appear in the
//!   order the run first took them up.
//! - Agent time is the stages' time without their pauses; waits are usage-limit waits and
//!   retry delays, counted apart.

use serde::Serialize;

use crate::stage::Stage;
use crate::stage::record::{Outcome, Wait, WaitKind};
use crate::state::run_log::{LeftOutFile, LoggedEvent, RunEvent};
use crate::timestamp::Timestamp;

/// The version of the `--json` shape; raised when a field changes meaning or goes away.
pub const SCHEMA: u32 = 1;

/// How many of the most expensive stages the totals name.
const MOST_EXPENSIVE: usize = 3;

/// Longest headline reason, in characters (the whole text is under "needs you").
const HEADLINE_REASON: usize = 160;

/// The whole report: the runs chosen, oldest first, and their totals together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: u32,
    /// The runs.
    pub runs: Vec<RunReport>,
    /// All runs together.
    pub totals: Totals,
}

/// How a run ended, as far as `run.jsonl` tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    /// It ran to its end: nothing left, all iterations ran, or finished with a blocked task.
    Finished,
    /// It stopped before its end: the person is needed, the budget is spent, an error.
    Stopped,
    /// SIGINT or SIGTERM stopped it; the task resumes on the next run.
    Interrupted,
    /// It still holds its lock.
    Running,
    /// It has no end line and holds no lock: killed, or the machine went down.
    Vanished,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The run id (`<pid>-<start>`).
    pub run: String,
    /// How it ended.
    pub end: EndState,
    /// The first line of the report: how the run ended, honestly.
    pub headline: String,
    /// Its exit code, when it ended.
    pub exit_code: Option<u8>,
    /// Why it ended, in full (kern's words).
    pub ended: Option<String>,
    /// Its first line's time.
    pub started_at: Option<Timestamp>,
    /// Its last line's time.
    pub last_at: Option<Timestamp>,
    /// The agent, as `--agent` named it.
    pub agent: String,
    /// Iterations asked for.
    pub iterations_asked: u32,
    /// Iterations started.
    pub iterations_run: u32,
    /// The `--max-cost` budget.
    pub max_cost_usd: Option<f64>,
    /// What needs the person, most urgent first.
    pub needs_you: Vec<Attention>,
    /// The tasks, in the order the run took them up.
    pub tasks: Vec<TaskReport>,
    /// The check run before any agent, when there was one.
    pub baseline_check: Option<CheckInfo>,
    /// Other things the run noticed (a lock taken over, the terminal lost).
    pub notices: Vec<String>,
    /// This run's totals.
    pub totals: Totals,
}

/// Something for the person to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attention {
    /// What kind of thing.
    pub kind: AttentionKind,
    /// The task it concerns.
    pub task: Option<String>,
    /// What to look at, one sentence.
    pub text: String,
    /// The `refs/kern/…` ref that keeps the work, when there is one.
    pub git_ref: Option<String>,
}

/// The kinds of [`Attention`], most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    /// The run stopped for the person (exit 2, 5) or on an error.
    Stopped,
    /// The run has no end and holds no lock.
    Vanished,
    /// A task is blocked `[!]`.
    Blocked,
    /// A stage did what it may not; the change was taken out.
    Violation,
    /// A task's work was set aside under `refs/kern/attempts/…`.
    SetAside,
    /// Changed files kern left out of a commit (they stay in the tree).
    LeftOut,
    /// SPEC.md changed during a stage, not by kern.
    HandEdit,
    /// A task was marked done with nothing to commit.
    NoCommit,
    /// A task's commit waits on its branch for review (`--review`).
    Review,
}

/// How a task ended in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskEnd {
    /// Committed.
    Committed,
    /// Done with nothing to commit.
    DoneWithoutCommit,
    /// Split into subtasks.
    Decomposed,
    /// Skipped: it comes back later.
    Skipped,
    /// Blocked `[!]`.
    Blocked,
    /// Its last attempt failed; it is retried on the next run.
    Failed,
    /// The person took it away (removed, renamed or re-marked it) during the run.
    TakenAway,
    /// Still in progress when the run ended or stopped.
    InProgress,
}

/// One task in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskReport {
    /// Its title.
    pub title: String,
    /// Its line in SPEC.md when the run first took it up.
    pub line: usize,
    /// How it ended.
    pub end: TaskEnd,
    /// The iterations that worked on it.
    pub iterations: Vec<u32>,
    /// kern's commit.
    pub commit: Option<CommitInfo>,
    /// The subtasks it was split into.
    pub subtasks: Vec<String>,
    /// Skip reasons, in order.
    pub skipped: Vec<String>,
    /// Why it is blocked.
    pub blocked: Option<String>,
    /// Failed attempts, in order.
    pub attempts: Vec<AttemptInfo>,
    /// Its stages, in order.
    pub stages: Vec<StageInfo>,
    /// The check gate's runs.
    pub checks: Vec<CheckInfo>,
    /// What the audits found.
    pub violations: Vec<ViolationInfo>,
    /// SPEC.md changes the person made during its stages.
    pub hand_edits: Vec<String>,
    /// Work set aside.
    pub set_aside: Vec<SetAsideInfo>,
    /// Why it was done without a commit.
    pub no_commit: Option<String>,
    /// What its stages cost.
    pub cost_usd: f64,
    /// Its stages' time without pauses.
    pub agent_ms: u64,
    /// Its stages' pauses (retry delays and usage-limit waits).
    pub wait_ms: u64,
}

/// kern's commit of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitInfo {
    /// The full sha.
    pub sha: String,
    /// The subject line.
    pub subject: String,
    /// Changed files left out of it.
    pub left_out: Vec<LeftOutFile>,
    /// `--review`: the task branch it waits on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_branch: Option<String>,
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptInfo {
    /// Its number (the Attempt note's N).
    pub attempt: u32,
    /// The first line of its note.
    pub reason: String,
}

/// One stage run (with its retries and waits).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageInfo {
    /// The iteration it ran in.
    pub iteration: u32,
    /// Which stage.
    pub stage: Stage,
    /// The agent.
    pub agent: String,
    /// The model asked for or reported.
    pub model: Option<String>,
    /// When it started.
    pub started_at: Option<Timestamp>,
    /// How long it took, retries and waits included.
    pub duration_ms: u64,
    /// What it cost.
    pub cost_usd: f64,
    /// How it ended: `succeeded`, `failed`, `timed_out`, `interrupted`, `violated`, `error`
    /// (the run stopped during it) or `unfinished` (no end line).
    pub outcome: String,
    /// kern's note when it failed, or the error that stopped the run.
    pub note: Option<String>,
    /// Transient failures retried.
    pub retries: u32,
    /// The agent's turns.
    pub turns: Option<u64>,
    /// Its pauses.
    pub waits: Vec<Wait>,
}

/// One run of the check command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckInfo {
    /// The command.
    pub command: String,
    /// Whether it passed.
    pub passed: bool,
}

/// What an audit found after a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViolationInfo {
    /// The stage.
    pub stage: Stage,
    /// What it did, one sentence each.
    pub what: Vec<String>,
    /// What kern put back.
    pub reverted: Vec<String>,
    /// Where what was taken out is kept.
    pub saved: Vec<String>,
}

/// Work set aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetAsideInfo {
    /// The ref that keeps it.
    pub git_ref: String,
    /// The paths.
    pub paths: Vec<String>,
    /// Why.
    pub why: String,
}

/// Totals of one run or of several.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Totals {
    /// Tasks taken up.
    pub tasks: usize,
    /// Tasks committed.
    pub committed: usize,
    /// Tasks whose commit waits on its branch for review (`--review`).
    #[serde(skip_serializing_if = "is_zero")]
    pub to_review: usize,
    /// Tasks split into subtasks.
    pub decomposed: usize,
    /// Tasks skipped (counted once each).
    pub skipped: usize,
    /// Tasks blocked.
    pub blocked: usize,
    /// Failed attempts.
    pub failed_attempts: usize,
    /// Stage retries after transient failures.
    pub retries: u32,
    /// Usage-limit waits.
    pub usage_limit_waits: usize,
    /// Time in every pause (usage-limit waits and retry delays).
    pub wait_ms: u64,
    /// What the stages cost.
    pub cost_usd: f64,
    /// The stages' time without pauses.
    pub agent_ms: u64,
    /// From the first line to the last.
    pub wall_ms: u64,
    /// The most expensive stages, most expensive first.
    pub most_expensive: Vec<Expensive>,
}

/// One of the most expensive stages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expensive {
    /// The run.
    pub run: String,
    /// The task.
    pub task: String,
    /// The stage.
    pub stage: Stage,
    /// The iteration.
    pub iteration: u32,
    /// What it cost.
    pub cost_usd: f64,
}

/// Groups `events` by run, oldest first (by first line).
pub fn runs(events: &[LoggedEvent]) -> Vec<(String, Vec<&LoggedEvent>)> {
    let mut runs: Vec<(String, Vec<&LoggedEvent>)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for event in events {
        match index.get(event.run.as_str()) {
            Some(&i) => runs[i].1.push(event),
            None => {
                index.insert(&event.run, runs.len());
                runs.push((event.run.clone(), vec![event]));
            }
        }
    }
    runs
}

/// The report of `runs` (each with its events); `running` tells whether a run without an end
/// line still holds its lock.
pub fn build(runs: &[(String, Vec<&LoggedEvent>)], running: &dyn Fn(&str) -> bool) -> Report {
    let reports: Vec<RunReport> = runs
        .iter()
        .map(|(id, events)| build_run(id, events, running(id)))
        .collect();
    let mut totals = Totals::default();
    for r in &reports {
        add_totals(&mut totals, &r.totals);
    }
    totals.most_expensive = most_expensive(&reports);
    Report {
        schema: SCHEMA,
        runs: reports,
        totals,
    }
}

fn add_totals(sum: &mut Totals, t: &Totals) {
    sum.tasks += t.tasks;
    sum.committed += t.committed;
    sum.to_review += t.to_review;
    sum.decomposed += t.decomposed;
    sum.skipped += t.skipped;
    sum.blocked += t.blocked;
    sum.failed_attempts += t.failed_attempts;
    sum.retries += t.retries;
    sum.usage_limit_waits += t.usage_limit_waits;
    sum.wait_ms += t.wait_ms;
    sum.cost_usd += t.cost_usd;
    sum.agent_ms += t.agent_ms;
    sum.wall_ms += t.wall_ms;
}

/// The report of one run from its events.
fn build_run(id: &str, events: &[&LoggedEvent], running: bool) -> RunReport {
    let mut b = Builder::default();
    for event in events {
        b.event(event);
    }
    b.close_open_stages();
    let started_at = events.first().map(|e| e.ts);
    let last_at = events.last().map(|e| e.ts);
    let end = match b.exit_code {
        Some(0 | 4) => EndState::Finished,
        Some(130 | 143) => EndState::Interrupted,
        Some(_) => EndState::Stopped,
        None if running => EndState::Running,
        None => EndState::Vanished,
    };
    for task in &mut b.tasks {
        task.end = task_end(task);
    }
    let mut totals = Totals {
        tasks: b.tasks.len(),
        ..Totals::default()
    };
    for t in &b.tasks {
        let review = t.commit.as_ref().is_some_and(|c| c.review_branch.is_some());
        totals.committed += usize::from(t.commit.is_some() && !review);
        totals.to_review += usize::from(review);
        totals.decomposed += usize::from(!t.subtasks.is_empty());
        totals.skipped += usize::from(!t.skipped.is_empty());
        totals.blocked += usize::from(t.blocked.is_some());
        totals.failed_attempts += t.attempts.len();
        totals.cost_usd += t.cost_usd;
        totals.agent_ms += t.agent_ms;
        totals.wait_ms += t.wait_ms;
        for s in &t.stages {
            totals.retries += s.retries;
            totals.usage_limit_waits += s
                .waits
                .iter()
                .filter(|w| w.kind == WaitKind::UsageLimit)
                .count();
        }
    }
    totals.wall_ms = match (started_at, last_at) {
        (Some(a), Some(b)) => {
            u64::try_from(b.epoch_seconds() - a.epoch_seconds()).unwrap_or(0) * 1000
        }
        _ => 0,
    };
    let mut report = RunReport {
        run: id.to_string(),
        end,
        headline: String::new(),
        exit_code: b.exit_code,
        ended: b.ended.clone(),
        started_at,
        last_at,
        agent: b.agent.clone(),
        iterations_asked: b.iterations_asked,
        iterations_run: b.iterations_run,
        max_cost_usd: b.max_cost,
        needs_you: Vec::new(),
        tasks: b.tasks,
        baseline_check: b.baseline_check,
        notices: b.notices,
        totals,
    };
    report.totals.most_expensive = most_expensive(std::slice::from_ref(&report));
    report.needs_you = needs_you(&report);
    report.headline = headline(&report);
    report
}

/// How a task ended, from what happened to it last.
fn task_end(t: &TaskReport) -> TaskEnd {
    if t.commit.is_some() {
        TaskEnd::Committed
    } else if t.no_commit.is_some() {
        TaskEnd::DoneWithoutCommit
    } else if t.blocked.is_some() {
        TaskEnd::Blocked
    } else if t
        .set_aside
        .iter()
        .any(|s| s.why == "taken away by the person")
    {
        TaskEnd::TakenAway
    } else {
        // The last of decomposed / skipped / failed as the events came, else in progress.
        t.end
    }
}

/// Folds events into tasks and run facts.
#[derive(Default)]
struct Builder {
    tasks: Vec<TaskReport>,
    /// The task of the latest iteration: where the events of an older log that name no task
    /// go. With parallel tasks (`-j`) events name their task and interleave.
    current: Option<usize>,
    /// Each task's latest iteration.
    iteration_of: Vec<(usize, u32)>,
    /// The stages started and not yet ended, by task.
    open: Vec<(usize, OpenStage)>,
    agent: String,
    iterations_asked: u32,
    iterations_run: u32,
    max_cost: Option<f64>,
    exit_code: Option<u8>,
    ended: Option<String>,
    baseline_check: Option<CheckInfo>,
    notices: Vec<String>,
}

/// A stage that started: its kind, start, agent and model.
type OpenStage = (Stage, Timestamp, String, Option<String>);

impl Builder {
    /// The task an event is about: the one it names, else the current one (older logs).
    fn index_for(&mut self, named: Option<&str>) -> Option<usize> {
        match named {
            Some(title) => Some(self.index_named(title)),
            None => self.current,
        }
    }

    fn index_named(&mut self, title: &str) -> usize {
        match self.tasks.iter().position(|t| t.title == title) {
            Some(i) => i,
            None => {
                self.tasks.push(new_task(title, 0));
                self.tasks.len() - 1
            }
        }
    }

    fn task_named(&mut self, title: &str) -> &mut TaskReport {
        let index = self.index_named(title);
        &mut self.tasks[index]
    }

    fn iteration(&self, task: usize) -> u32 {
        self.iteration_of
            .iter()
            .find(|(t, _)| *t == task)
            .map_or(0, |(_, i)| *i)
    }

    fn take_open(&mut self, task: usize) -> Option<OpenStage> {
        let at = self.open.iter().position(|(t, _)| *t == task)?;
        Some(self.open.remove(at).1)
    }

    /// Every stage that started and has no end line: each ends as `unfinished`.
    fn close_open_stages(&mut self) {
        let tasks: Vec<usize> = self.open.iter().map(|(t, _)| *t).collect();
        for task in tasks {
            self.close_open_stage(task);
        }
    }

    /// The stage of `task` that started and has no end line: it ends as `unfinished`.
    fn close_open_stage(&mut self, index: usize) {
        if let Some((stage, started, agent, model)) = self.take_open(index) {
            let iteration = self.iteration(index);
            {
                let task = &mut self.tasks[index];
                task.stages.push(StageInfo {
                    iteration,
                    stage,
                    agent,
                    model,
                    started_at: Some(started),
                    duration_ms: 0,
                    cost_usd: 0.0,
                    outcome: "unfinished".into(),
                    note: None,
                    retries: 0,
                    turns: None,
                    waits: Vec::new(),
                });
            }
        }
    }

    fn event(&mut self, e: &LoggedEvent) {
        match &e.event {
            RunEvent::RunStart {
                iterations,
                agent,
                max_cost_usd,
                ..
            } => {
                self.iterations_asked = *iterations;
                self.agent.clone_from(agent);
                self.max_cost = *max_cost_usd;
            }
            RunEvent::LockRecovered { pid, why, phase } => self.notices.push(format!(
                "took over the lock of run {pid} ({why}; it was {phase})"
            )),
            RunEvent::AgentSwitch {
                stage,
                from,
                to,
                reason,
                ..
            } => self.notices.push(format!(
                "the {} stage moved from {from} to {to}: {reason}",
                stage.name()
            )),
            RunEvent::Hangup {} => self.notices.push(format!(
                "the terminal went away at {} (SIGHUP); the run went on, its output is in run.log",
                e.ts
            )),
            RunEvent::IterationStart {
                index, task, line, ..
            } => {
                self.iterations_run = self.iterations_run.max(*index);
                let i = match self.tasks.iter().position(|t| t.title == *task) {
                    Some(i) => i,
                    None => {
                        self.tasks.push(new_task(task, *line));
                        self.tasks.len() - 1
                    }
                };
                self.close_open_stage(i);
                self.tasks[i].iterations.push(*index);
                self.iteration_of.retain(|(t, _)| *t != i);
                self.iteration_of.push((i, *index));
                self.current = Some(i);
            }
            RunEvent::StageStart {
                stage,
                task,
                agent,
                model,
                ..
            } => {
                let agent = if agent.is_empty() {
                    self.agent.clone()
                } else {
                    agent.clone()
                };
                let i = self.index_named(task);
                self.close_open_stage(i);
                self.open.push((i, (*stage, e.ts, agent, model.clone())));
            }
            RunEvent::StageEnd {
                task,
                stage,
                outcome,
                cost_usd,
                duration_ms,
                retries,
                failure,
                error,
                agent,
                model,
                turns,
                waits,
            } => {
                let Some(index) = self.index_for(task.as_deref()) else {
                    return;
                };
                let (started, agent, model) = match self.take_open(index) {
                    Some((s, ts, a, m)) if s == *stage => (Some(ts), a, model.clone().or(m)),
                    _ => (None, agent.clone(), model.clone()),
                };
                let outcome = match (outcome, error) {
                    (Some(o), _) => outcome_name(*o),
                    (None, _) => "error".to_string(),
                };
                let wait_ms: u64 = waits.iter().map(|w| w.duration_ms).sum();
                let iteration = self.iteration(index);
                let task = &mut self.tasks[index];
                task.cost_usd += cost_usd;
                task.agent_ms += duration_ms.saturating_sub(wait_ms);
                task.wait_ms += wait_ms;
                task.stages.push(StageInfo {
                    iteration,
                    stage: *stage,
                    agent,
                    model,
                    started_at: started,
                    duration_ms: *duration_ms,
                    cost_usd: *cost_usd,
                    outcome,
                    note: failure.clone().or_else(|| error.clone()),
                    retries: *retries,
                    turns: *turns,
                    waits: waits.clone(),
                });
            }
            RunEvent::Violation {
                task,
                stage,
                violations,
                reverted,
                saved,
            } => {
                if let Some(i) = self.index_for(task.as_deref()) {
                    self.tasks[i].violations.push(ViolationInfo {
                        stage: *stage,
                        what: violations.clone(),
                        reverted: reverted.clone(),
                        saved: saved.clone(),
                    });
                }
            }
            RunEvent::HandEdit { task, changes, .. } => {
                if let Some(i) = self.index_for(task.as_deref()) {
                    self.tasks[i].hand_edits.extend(changes.iter().cloned());
                }
            }
            RunEvent::SetAside {
                task,
                git_ref,
                paths,
                why,
            } => self.task_named(task).set_aside.push(SetAsideInfo {
                git_ref: git_ref.clone(),
                paths: paths.clone(),
                why: why.clone(),
            }),
            RunEvent::NoCommit { task, why } => {
                self.task_named(task).no_commit = Some(why.clone());
            }
            RunEvent::Check {
                task,
                command,
                passed,
            } => {
                let check = CheckInfo {
                    command: command.clone(),
                    passed: *passed,
                };
                // A check outside any task is the baseline check, before any agent.
                match self.index_for(task.as_deref()) {
                    Some(i) => self.tasks[i].checks.push(check),
                    None => self.baseline_check = Some(check),
                }
            }
            RunEvent::Decomposed { task, subtasks } => {
                let t = self.task_named(task);
                t.subtasks.extend(subtasks.iter().cloned());
                t.end = TaskEnd::Decomposed;
            }
            RunEvent::Skipped { task, reason } => {
                let t = self.task_named(task);
                t.skipped.push(reason.clone());
                t.end = TaskEnd::Skipped;
            }
            RunEvent::AttemptFailed {
                task,
                attempt,
                note,
            } => {
                let t = self.task_named(task);
                t.attempts.push(AttemptInfo {
                    attempt: *attempt,
                    reason: first_line(note),
                });
                t.end = TaskEnd::Failed;
            }
            RunEvent::Conflict {
                task,
                paths,
                attempt,
                ..
            } => {
                let t = self.task_named(task);
                t.attempts.push(AttemptInfo {
                    attempt: *attempt,
                    reason: format!(
                        "its work conflicted with the branch in {}",
                        paths.join(", ")
                    ),
                });
                t.end = TaskEnd::Failed;
            }
            RunEvent::Blocked { task, why } => {
                self.task_named(task).blocked = Some(why.clone());
            }
            RunEvent::Commit {
                task,
                sha,
                subject,
                left_out,
                review_branch,
            } => {
                self.task_named(task).commit = Some(CommitInfo {
                    sha: sha.clone(),
                    subject: subject.clone(),
                    left_out: left_out.clone(),
                    review_branch: review_branch.clone(),
                });
            }
            RunEvent::IterationEnd { task, .. } => {
                let i = self.index_named(task);
                self.close_open_stage(i);
                if self.current == Some(i) {
                    self.current = None;
                }
            }
            RunEvent::RunEnd {
                ended,
                exit_code,
                iterations,
                ..
            } => {
                self.close_open_stages();
                self.exit_code = Some(*exit_code);
                self.ended = Some(ended.clone());
                self.iterations_run = self.iterations_run.max(*iterations);
            }
        }
    }
}

fn new_task(title: &str, line: usize) -> TaskReport {
    TaskReport {
        title: title.to_string(),
        line,
        end: TaskEnd::InProgress,
        iterations: Vec::new(),
        commit: None,
        subtasks: Vec::new(),
        skipped: Vec::new(),
        blocked: None,
        attempts: Vec::new(),
        stages: Vec::new(),
        checks: Vec::new(),
        violations: Vec::new(),
        hand_edits: Vec::new(),
        set_aside: Vec::new(),
        no_commit: None,
        cost_usd: 0.0,
        agent_ms: 0,
        wait_ms: 0,
    }
}

fn outcome_name(outcome: Outcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The first non-empty line of `text`, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

/// The most expensive stages of `runs`, most expensive first.
fn most_expensive(runs: &[RunReport]) -> Vec<Expensive> {
    let mut all: Vec<Expensive> = runs
        .iter()
        .flat_map(|r| {
            r.tasks.iter().flat_map(move |t| {
                t.stages.iter().map(move |s| Expensive {
                    run: r.run.clone(),
                    task: t.title.clone(),
                    stage: s.stage,
                    iteration: s.iteration,
                    cost_usd: s.cost_usd,
                })
            })
        })
        .filter(|e| e.cost_usd > 0.0)
        .collect();
    all.sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd));
    all.truncate(MOST_EXPENSIVE);
    all
}

/// What needs the person, most urgent first.
fn needs_you(r: &RunReport) -> Vec<Attention> {
    let mut out = Vec::new();
    let mut add = |kind, task: Option<&str>, text: String, git_ref: Option<&str>| {
        out.push(Attention {
            kind,
            task: task.map(str::to_string),
            text,
            git_ref: git_ref.map(str::to_string),
        });
    };
    match (r.end, r.exit_code) {
        (EndState::Stopped, Some(code)) => add(
            AttentionKind::Stopped,
            None,
            format!(
                "kern stopped (exit {code}): {}",
                r.ended.as_deref().unwrap_or("")
            ),
            None,
        ),
        (EndState::Vanished, _) => add(
            AttentionKind::Vanished,
            None,
            "the run ended without a word (killed, or the machine went down): run kern again and it resumes the task in progress".into(),
            None,
        ),
        _ => {}
    }
    for t in &r.tasks {
        if let Some(branch) = t.commit.as_ref().and_then(|c| c.review_branch.as_deref()) {
            add(
                AttentionKind::Review,
                Some(&t.title),
                format!(
                    "`{}` waits for your review on `{branch}`: `git log -p HEAD..{branch}`, then `kern accept` or `kern reject`",
                    t.title
                ),
                Some(branch),
            );
        }
    }
    for t in &r.tasks {
        if let Some(why) = &t.blocked {
            add(
                AttentionKind::Blocked,
                Some(&t.title),
                format!(
                    "`{}` is blocked [!]: {why} — read its Blocked note, fix, and set it back to [ ]",
                    t.title
                ),
                None,
            );
        }
    }
    for t in &r.tasks {
        for v in &t.violations {
            let what = v.what.join("; ");
            // kern's violation sentences usually name what was put back and saved already.
            let saved: Vec<&String> = v
                .saved
                .iter()
                .filter(|s| !what.contains(s.as_str()))
                .collect();
            let saved = if saved.is_empty() {
                String::new()
            } else {
                format!(
                    "; what it changed is kept at `{}`",
                    saved
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("`, `")
                )
            };
            add(
                AttentionKind::Violation,
                Some(&t.title),
                format!(
                    "the {} stage of `{}` did what it may not: {what}{saved}",
                    v.stage.name(),
                    t.title,
                ),
                v.saved.first().map(String::as_str),
            );
        }
    }
    for t in &r.tasks {
        for s in &t.set_aside {
            add(
                AttentionKind::SetAside,
                Some(&t.title),
                format!(
                    "the work of `{}` ({}) is set aside at `{}`: {} — see it with `git show --stat {}`",
                    t.title,
                    s.why,
                    s.git_ref,
                    s.paths.join(", "),
                    s.git_ref
                ),
                Some(&s.git_ref),
            );
        }
    }
    for t in &r.tasks {
        if let Some(c) = &t.commit
            && !c.left_out.is_empty()
        {
            let files: Vec<String> = c
                .left_out
                .iter()
                .map(|l| format!("{} ({})", l.path, l.reason))
                .collect();
            add(
                AttentionKind::LeftOut,
                Some(&t.title),
                format!(
                    "left out of the commit of `{}`, still in the work tree: {}",
                    t.title,
                    files.join(", ")
                ),
                None,
            );
        }
    }
    for t in &r.tasks {
        if !t.hand_edits.is_empty() {
            add(
                AttentionKind::HandEdit,
                Some(&t.title),
                format!(
                    "SPEC.md changed during `{}`, not by kern: {}",
                    t.title,
                    t.hand_edits.join("; ")
                ),
                None,
            );
        }
        if let Some(why) = &t.no_commit {
            add(
                AttentionKind::NoCommit,
                Some(&t.title),
                format!("`{}` was marked done without a commit: {why}", t.title),
                None,
            );
        }
    }
    out.sort_by_key(|a| a.kind);
    out
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The first line: how the run ended, honestly.
fn headline(r: &RunReport) -> String {
    let t = &r.totals;
    let mut counts = vec![format!("{} committed", t.committed)];
    for (n, word) in [
        (t.to_review, "waiting for review"),
        (t.decomposed, "decomposed"),
        (t.skipped, "skipped"),
        (t.blocked, "blocked"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {word}"));
        }
    }
    let counts = counts.join(", ");
    let at = format!(
        "at iteration {} of {}",
        r.iterations_run, r.iterations_asked
    );
    let why = crate::reporter::text::truncate(
        &first_line(r.ended.as_deref().unwrap_or("")),
        HEADLINE_REASON,
    );
    match (r.end, r.exit_code) {
        (EndState::Finished, Some(0)) => format!("Finished — {why}: {counts}."),
        (EndState::Finished, _) => {
            let n = r.needs_you.len();
            format!(
                "Finished, but {n} thing{} need{} you — {why}: {counts}.",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" }
            )
        }
        (EndState::Interrupted, _) => format!("Interrupted {at} — {why}: {counts}."),
        (EndState::Stopped, Some(5)) => {
            format!("Stopped early {at}: the agent needs you — {why} ({counts}).")
        }
        (EndState::Stopped, Some(6)) => format!("Stopped {at}: {why} ({counts})."),
        (EndState::Stopped, code) => format!(
            "Stopped early {at} (exit {}): {why} ({counts}).",
            code.unwrap_or(1)
        ),
        (EndState::Running, _) => format!("Still running, {at} ({counts} so far)."),
        (EndState::Vanished, _) => format!(
            "Did not finish: the run vanished {at} without an end (killed, or the machine went down) ({counts})."
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::run_log;

    /// The fixture night: every kind of task end and every fact a report shows.
    pub(crate) const NIGHT: &str = include_str!("../../tests/golden/report-night.jsonl");

    pub(crate) fn night() -> Report {
        let events = run_log::parse(NIGHT);
        build(&runs(&events), &|_| false)
    }

    #[test]
    fn every_fact_of_the_night_is_in_the_model() {
        let r = night();
        assert_eq!(r.runs.len(), 2);
        let night = &r.runs[1];
        assert_eq!(night.end, EndState::Finished);
        assert_eq!(night.exit_code, Some(4));
        let ends: Vec<(&str, TaskEnd)> = night
            .tasks
            .iter()
            .map(|t| (t.title.as_str(), t.end))
            .collect();
        assert_eq!(
            ends,
            [
                ("Add the parser", TaskEnd::Committed),
                ("Port to Windows", TaskEnd::Decomposed),
                ("Rewrite the docs", TaskEnd::Skipped),
                ("Fix the flaky test", TaskEnd::Blocked),
                ("Tidy the imports", TaskEnd::DoneWithoutCommit),
            ]
        );
        let kinds: Vec<AttentionKind> = night.needs_you.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            [
                AttentionKind::Blocked,
                AttentionKind::Violation,
                AttentionKind::SetAside,
                AttentionKind::SetAside,
                AttentionKind::LeftOut,
                AttentionKind::HandEdit,
                AttentionKind::NoCommit,
            ]
        );
        assert_eq!(night.totals.committed, 1);
        assert_eq!(night.totals.failed_attempts, 2);
        assert_eq!(night.totals.usage_limit_waits, 1);
        assert_eq!(night.totals.retries, 1);
        assert!(
            (night.totals.cost_usd - 1.93).abs() < 1e-9,
            "{}",
            night.totals.cost_usd
        );
        assert_eq!(night.totals.most_expensive[0].cost_usd, 0.82);
        assert_eq!(r.runs[0].end, EndState::Stopped);
        assert!(
            r.runs[0]
                .headline
                .starts_with("Stopped early at iteration 2 of 10: the agent needs you — "),
            "{}",
            r.runs[0].headline
        );
    }

    #[test]
    fn a_run_without_an_end_is_running_or_vanished() {
        let text = "{\"ts\":\"2026-11-18T01:00:00Z\",\"run\":\"9-x\",\"event\":\"run_start\",\"iterations\":5,\"delay_s\":0,\"agent\":\"claude\"}\n\
{\"ts\":\"2026-11-18T01:00:01Z\",\"run\":\"9-x\",\"event\":\"iteration_start\",\"index\":1,\"task\":\"A\",\"line\":1,\"resume\":\"research\"}\n\
{\"ts\":\"2026-11-18T01:00:02Z\",\"run\":\"9-x\",\"event\":\"stage_start\",\"stage\":\"research\",\"task\":\"A\",\"prompt_bytes\":10}\n";
        let events = run_log::parse(text);
        let table = [
            (
                true,
                EndState::Running,
                "Still running, at iteration 1 of 5 (0 committed so far).",
            ),
            (
                false,
                EndState::Vanished,
                "Did not finish: the run vanished at iteration 1 of 5 without an end (killed, or the machine went down) (0 committed).",
            ),
        ];
        for (live, end, headline) in table {
            let r = build(&runs(&events), &|_| live);
            assert_eq!(r.runs[0].end, end);
            assert_eq!(r.runs[0].headline, headline);
            assert_eq!(r.runs[0].tasks[0].stages[0].outcome, "unfinished");
        }
    }
}
