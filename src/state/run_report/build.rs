//! Events → model: the pure fold of one run's `run.jsonl` lines into a [`RunReport`], and of
//! several runs into a [`Report`] with their totals.
//!
//! Decisions a reader must know:
//! - A task is known by its title. Events name their task (with parallel tasks, `-j`, they
//!   interleave); a stage, check, violation or hand-edit line of an older log that names none
//!   belongs to the task of the latest `iteration_start`. Tasks appear in the order the run
//!   first took them up; a check outside any task is the baseline check.
//! - A stage that started and has no end line ends as `unfinished`.
//! - Agent time is the stages' time without their pauses; waits are usage-limit waits and
//!   retry delays, counted apart.

use super::attention::{headline, needs_you};
use super::{
    AttemptInfo, CheckInfo, CommitInfo, EndState, Expensive, Report, RunReport, SCHEMA,
    SetAsideInfo, StageInfo, TaskEnd, TaskReport, TestsFirstInfo, Totals, ViolationInfo,
};
use crate::event::RunEvent;
use crate::stage::Stage;
use crate::stage::record::{Outcome, WaitKind};
use crate::state::run_log::LoggedEvent;
use crate::text;
use crate::timestamp::Timestamp;

/// How many of the most expensive stages the totals name.
const MOST_EXPENSIVE: usize = 3;

/// Groups `events` by run, oldest first (by first line).
pub(crate) fn runs(events: &[LoggedEvent]) -> Vec<(String, Vec<&LoggedEvent>)> {
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

/// The report of `runs` (each with its events; a watchdog's lines become one of the report's
/// `watches`); `running` tells whether a run without an end line still holds its lock.
pub(crate) fn build(
    runs: &[(String, Vec<&LoggedEvent>)],
    running: &dyn Fn(&str) -> bool,
) -> Report {
    let watches: Vec<super::WatchReport> = runs
        .iter()
        .filter(|(_, events)| super::is_watch(events))
        .map(|(id, events)| super::watch::build_watch(id, events))
        .collect();
    let mut reports: Vec<RunReport> = runs
        .iter()
        .filter(|(_, events)| !super::is_watch(events))
        .map(|(id, events)| build_run(id, events, running(id)))
        .collect();
    super::watch::settle_restarts(&mut reports, &watches);
    let mut totals = Totals::default();
    for r in &reports {
        add_totals(&mut totals, &r.totals);
    }
    totals.most_expensive = most_expensive(&reports);
    Report {
        schema: SCHEMA,
        runs: reports,
        totals,
        watches,
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
        Some(0 | 4) if b.deadline.is_some() => EndState::AtDeadline,
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
        let (committed, review) = commit_counts(t);
        totals.committed += committed;
        totals.to_review += review;
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
        deadline: b.deadline,
        started_at,
        last_at,
        agent: b.agent.clone(),
        iterations_asked: b.iterations_asked,
        iterations_run: b.iterations_run,
        max_cost_usd: b.max_cost,
        sandbox: b.sandbox,
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

/// What a task adds to the committed and the waiting-for-review counts: a parked commit
/// waits until it is accepted (then it counts as committed) or rejected (then as neither).
fn commit_counts(t: &TaskReport) -> (usize, usize) {
    match &t.commit {
        None => (0, 0),
        Some(c) if c.waits_for_review() => (0, 1),
        Some(c) if c.review == Some(super::ReviewOutcome::Rejected) => (0, 0),
        Some(_) => (1, 0),
    }
}

/// Says, for every commit `report` shows parked for review, what became of it since
/// (`review(branch, sha)`: the shell asks the repository), and counts, the needs-you list and
/// the headline again: an accepted task is committed, no longer waiting.
pub(crate) fn settle_reviews(
    report: &mut Report,
    review: &dyn Fn(&str, &str) -> super::ReviewOutcome,
) {
    for run in &mut report.runs {
        for task in &mut run.tasks {
            if let Some(c) = task.commit.as_mut()
                && let Some(branch) = &c.review_branch
            {
                c.review = Some(review(branch, &c.sha));
                if c.review == Some(super::ReviewOutcome::Rejected) {
                    task.end = TaskEnd::Rejected;
                }
            }
        }
        let (mut committed, mut to_review) = (0, 0);
        for t in &run.tasks {
            let (c, r) = commit_counts(t);
            committed += c;
            to_review += r;
        }
        run.totals.committed = committed;
        run.totals.to_review = to_review;
        run.needs_you = needs_you(run);
        run.headline = headline(run);
    }
    report.totals.committed = report.runs.iter().map(|r| r.totals.committed).sum();
    report.totals.to_review = report.runs.iter().map(|r| r.totals.to_review).sum();
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
    sandbox: Option<crate::sandbox::Mode>,
    exit_code: Option<u8>,
    ended: Option<String>,
    deadline: Option<Timestamp>,
    baseline_check: Option<CheckInfo>,
    notices: Vec<String>,
    /// The tracker's failures by cause: gh's words, where its notice is among `notices`, what
    /// the notice says of the first call, and how many more calls failed so.
    tracker_failures: Vec<(String, usize, String, usize)>,
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
                sandbox,
                ..
            } => {
                self.iterations_asked = *iterations;
                self.agent.clone_from(agent);
                self.max_cost = *max_cost_usd;
                self.sandbox = *sandbox;
            }
            RunEvent::Denied {
                task,
                by,
                denied,
                more,
            } => {
                let mut lines: Vec<String> = denied
                    .iter()
                    .map(|d| format!("{by}: {}", d.sentence(None)))
                    .collect();
                if *more > 0 {
                    lines.push(format!("{by}: {more} more denied attempts"));
                }
                match self.index_for(task.as_deref()) {
                    Some(i) => self.tasks[i].denied.extend(lines),
                    None => self.notices.extend(lines),
                }
            }
            // Told, never recorded: a log holds none of them.
            RunEvent::Told(_) => {}
            // A watchdog's lines are its own run's (`watch.rs` reads them).
            RunEvent::WatchStart { .. }
            | RunEvent::WatchRun { .. }
            | RunEvent::WatchRestart { .. }
            | RunEvent::WatchEnd { .. } => {}
            RunEvent::Paced { task, line, .. } => match self.index_for(task.as_deref()) {
                Some(index) if task.is_some() => self.tasks[index].paced.push(line.clone()),
                _ => self.notices.push(line.clone()),
            },
            RunEvent::Resumed {
                task,
                stage,
                waited_ms,
                ..
            } => {
                if let Some(index) = self.index_for(task.as_deref()) {
                    // A pause is time the task waited, as a usage-limit wait is.
                    self.tasks[index].wait_ms += waited_ms;
                    self.tasks[index].paced.push(format!(
                        "--pace: went on with the {} stage after {}",
                        stage.name(),
                        crate::text::duration(std::time::Duration::from_millis(*waited_ms))
                    ));
                }
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
            RunEvent::TrackerFailed {
                issue, action, why, ..
            } => {
                // One notice per cause, naming the first call and counting the rest: a rate
                // limit hit by every call is one line.
                match self.tracker_failures.iter_mut().find(|(w, ..)| w == why) {
                    Some((_, at, first, more)) => {
                        *more += 1;
                        let calls = if *more == 1 { "call" } else { "calls" };
                        if let Some(notice) = self.notices.get_mut(*at) {
                            *notice = format!("{first} (and {more} more {calls} like it)");
                        }
                    }
                    None => {
                        let first = format!("the tracker: {action} on {issue} failed: {why}");
                        self.tracker_failures.push((
                            why.clone(),
                            self.notices.len(),
                            first.clone(),
                            0,
                        ));
                        self.notices.push(first);
                    }
                }
            }
            RunEvent::Hangup {} => self.notices.push(format!(
                "the terminal went away at {} (SIGHUP); the run went on, its output is in run.log",
                e.ts
            )),
            RunEvent::IterationStart {
                index,
                task,
                line,
                issue,
                ..
            } => {
                self.iterations_run = self.iterations_run.max(*index);
                let i = match self.tasks.iter().position(|t| t.title == *task) {
                    Some(i) => i,
                    None => {
                        self.tasks.push(new_task(task, *line));
                        self.tasks.len() - 1
                    }
                };
                if let Some(found) = issue.as_deref().and_then(crate::spec::IssueRef::parse) {
                    self.tasks[i].issue = Some(super::IssueInfo {
                        name: found.to_string(),
                        url: found.url(),
                    });
                }
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
                window,
                tokens,
                ..
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
                task.tokens += tokens.unwrap_or(0);
                for used in window {
                    super::WindowShare::add(&mut task.windows, used);
                }
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
            RunEvent::SharedRef { moved, .. } => self.notices.extend(moved.iter().cloned()),
            RunEvent::BranchMoved { commits, .. } => self.notices.extend(commits.iter().cloned()),
            RunEvent::Level { task, level, why } => {
                self.task_named(task).level = Some(format!("{level} ({why})"));
            }
            RunEvent::Must { task, findings, .. } => {
                self.task_named(task).must.extend(findings.iter().cloned());
            }
            RunEvent::TestsRed {
                task,
                command,
                tests,
                failed,
                ..
            } => {
                let info =
                    TestsFirstInfo::heard(&mut self.task_named(task).tests_first, command, tests);
                info.red = Some(*failed);
                info.green = None;
            }
            RunEvent::TestsGreen {
                task,
                command,
                tests,
                passed,
                ..
            } => {
                let info =
                    TestsFirstInfo::heard(&mut self.task_named(task).tests_first, command, tests);
                info.green = Some(*passed);
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
                ..
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
            RunEvent::Skipped { task, reason, .. } => {
                let t = self.task_named(task);
                t.skipped.push(reason.clone());
                t.end = TaskEnd::Skipped;
            }
            RunEvent::AttemptFailed {
                task,
                attempt,
                note,
                ..
            } => {
                let t = self.task_named(task);
                t.attempts.push(AttemptInfo {
                    attempt: *attempt,
                    reason: text::first_line(note),
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
            RunEvent::Blocked { task, why, .. } => {
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
                    review: None,
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
                deadline,
                ..
            } => {
                self.close_open_stages();
                self.exit_code = Some(*exit_code);
                self.ended = Some(ended.clone());
                self.deadline = *deadline;
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
        must: Vec::new(),
        tests_first: None,
        level: None,
        issue: None,
        violations: Vec::new(),
        denied: Vec::new(),
        hand_edits: Vec::new(),
        set_aside: Vec::new(),
        no_commit: None,
        cost_usd: 0.0,
        agent_ms: 0,
        wait_ms: 0,
        windows: Vec::new(),
        tokens: 0,
        paced: Vec::new(),
    }
}

fn outcome_name(outcome: Outcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::super::tests::night;
    use super::*;

    #[test]
    fn a_parked_commit_counts_as_waiting_until_accepted_or_rejected() {
        use super::super::ReviewOutcome::{Accepted, Rejected, Waiting};
        let commit = |branch: Option<&str>, review| CommitInfo {
            sha: "0".repeat(40),
            subject: "s".into(),
            left_out: Vec::new(),
            review_branch: branch.map(str::to_string),
            review,
        };
        let cases = [
            (None, (0, 0)),
            (Some(commit(None, None)), (1, 0)),
            (Some(commit(Some("kern/a"), None)), (0, 1)),
            (Some(commit(Some("kern/a"), Some(Waiting))), (0, 1)),
            (Some(commit(Some("kern/a"), Some(Accepted))), (1, 0)),
            (Some(commit(Some("kern/a"), Some(Rejected))), (0, 0)),
        ];
        for (commit, counts) in cases {
            let mut task = new_task("t", 1);
            task.commit = commit.clone();
            assert_eq!(commit_counts(&task), counts, "{commit:?}");
        }
    }
    use crate::state::run_log;
    use crate::state::run_report::AttentionKind;

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
