//! Events → model: one run's `run.jsonl` lines into a [`RunReport`] (its end, totals, needs-you
//! list and headline), and several runs into a [`Report`] with their totals. The line-by-line
//! fold into tasks and run facts (which task an event belongs to, unfinished stages, agent time
//! and waits) lives in `fold`.
//!
//! Decisions a reader must know:
//! - How a run ended comes from its `run_end` line's exit code alone; without one, it is running
//!   while it holds its lock, else it vanished.
//! - A commit parked for review counts as waiting until it is accepted (then committed) or
//!   rejected (then neither); [`settle_reviews`] asks the repository and counts again.

mod fold;

use super::attention::{headline, needs_you};
use super::{EndState, Expensive, Report, RunReport, SCHEMA, TaskEnd, TaskReport, Totals};
use crate::stage::record::WaitKind;
use crate::state::run_log::LoggedEvent;
use fold::Builder;

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
    use super::fold::new_task;
    use super::*;
    use crate::state::run_report::CommitInfo;

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
