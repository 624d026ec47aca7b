//! What `kern report` says, as data (here, beside `run_log`, because the loop uses it too: the
//! run-ended notification carries the report's totals): one [`RunReport`] per run, built from that run's
//! `run.jsonl` events alone by the pure [`build`] — never from memory, so the report of a run
//! that crashed reads as honestly as one that finished. `--json` is this model serialised;
//! the terminal page, Markdown and HTML (`command::report`) render it.
//!
//! This file owns the model's types; `build` folds events into it, `attention` writes what
//! needs the person and the headline, `watch` folds a watchdog's lines (a watched night). The decision a reader must know: these types are the
//! `--json` shape, so [`SCHEMA`] is raised when a field changes meaning or goes away.

mod attention;
mod build;
mod watch;

use attention::headline;
pub(crate) use build::{build, runs, settle_reviews};
#[cfg(test)]
pub(crate) use watch::RestartInfo;
pub(crate) use watch::{WatchReport, is_watch, watch_of};

use serde::Serialize;

use crate::event::LeftOutFile;
use crate::stage::Stage;
use crate::stage::record::Wait;
use crate::timestamp::Timestamp;

/// The version of the `--json` shape; raised when a field changes meaning or goes away.
pub(crate) const SCHEMA: u32 = 1;

/// The whole report: the runs chosen, oldest first, and their totals together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    /// [`SCHEMA`].
    pub schema: u32,
    /// The runs.
    pub runs: Vec<RunReport>,
    /// All runs together.
    pub totals: Totals,
    /// The watchdogs (`kern watch`) of the nights chosen: their restarts and gaps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<WatchReport>,
}

/// How a run ended, as far as `run.jsonl` tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EndState {
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
    /// It died or stalled, and the `kern watch` above it started it again.
    Restarted,
    /// It ended at the night's deadline (`--until`, `--deadline`), as planned.
    AtDeadline,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunReport {
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
    /// The night's deadline, when the run ended at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
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
    /// `--sandbox`: `kern`, `agent` or `off` (`None` for logs of older versions).
    pub sandbox: Option<crate::sandbox::Mode>,
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

/// The tracker issue a task came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct IssueInfo {
    /// `owner/repo#N`, as its Issue note names it.
    pub name: String,
    /// Its web address.
    pub url: String,
}

/// Something for the person to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Attention {
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
pub(crate) enum AttentionKind {
    /// The run stopped for the person (exit 2, 5) or on an error.
    Stopped,
    /// The run has no end and holds no lock.
    Vanished,
    /// A task is blocked `[!]`.
    Blocked,
    /// A task's last attempt failed when the run ended: the next run retries it.
    Failed,
    /// A stage did what it may not; the change was taken out.
    Violation,
    /// kern's fence denied what a task's process tried (a secret, a host, a file outside).
    Denied,
    /// The agents ran without kern's fence (`--sandbox off` or `agent`).
    Unfenced,
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
pub(crate) enum TaskEnd {
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
    /// Its commit, parked for review (`--review`), was rejected since (`kern reject`): the
    /// task is open again, the commit kept under `refs/kern/attempts/`.
    Rejected,
    /// Still in progress when the run ended or stopped.
    InProgress,
}

/// One task in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TaskReport {
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
    /// What kern's own check of the must-haves and read-only tests found, attempt by attempt
    /// (one line each: ✓ or ✗, what, what kern saw).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub must: Vec<String>,
    /// `Tests: first`: its tests red on the base commit, then green after implement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_first: Option<TestsFirstInfo>,
    /// Its discovery level and why (`2 (no signal for less research)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The tracker issue it came from (its Issue note), with the issue's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueInfo>,
    /// What the audits found.
    pub violations: Vec<ViolationInfo>,
    /// What kern's fence denied the task's processes, one line each (`implement: tried to
    /// read /home/me/.ssh/id_ed25519`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<String>,
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
    /// The usage windows its stages' agents reported, with its share of each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowShare>,
    /// The tokens its stages' agents reported (input, cache and output).
    #[serde(default)]
    pub tokens: u64,
    /// `--pace`'s pauses before its stages and the resumes after them, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paced: Vec<String>,
}

/// A task's share of one usage window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WindowShare {
    /// The agent that reported it.
    pub agent: String,
    /// `five_hour`, `seven_day`, …
    pub kind: String,
    /// Points of the window its stages used, where each stage's use is known.
    pub used: f64,
    /// Its stages whose use of the window is known.
    pub known_stages: u32,
    /// Its stages that reported the window with no earlier reading to tell their use.
    pub unknown_stages: u32,
    /// Percent used after its last stage.
    pub after: f64,
}

impl WindowShare {
    /// Adds one stage's reading of the window to the task's `shares`.
    pub(crate) fn add(shares: &mut Vec<WindowShare>, used: &crate::stage::record::WindowUse) {
        let index = match shares
            .iter()
            .position(|s| s.agent == used.agent && s.kind == used.kind)
        {
            Some(i) => i,
            None => {
                shares.push(WindowShare {
                    agent: used.agent.clone(),
                    kind: used.kind.clone(),
                    used: 0.0,
                    known_stages: 0,
                    unknown_stages: 0,
                    after: 0.0,
                });
                shares.len() - 1
            }
        };
        let share = &mut shares[index];
        match used.spent() {
            Some(points) => {
                share.used = ((share.used + points) * 10.0).round() / 10.0;
                share.known_stages += 1;
            }
            None => share.unknown_stages += 1,
        }
        share.after = used.used_after;
    }
}

/// What a task tested first showed: red, then green (the last run of each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TestsFirstInfo {
    /// The command.
    pub command: String,
    /// The test files.
    pub tests: Vec<String>,
    /// They failed on the base commit, as they must (`None`: not run).
    pub red: Option<bool>,
    /// They held and passed after implement (`None`: not reached).
    pub green: Option<bool>,
}

impl TestsFirstInfo {
    /// The task's `slot`, made for `command` and `tests` when nothing was heard of it yet.
    pub(crate) fn heard<'a>(
        slot: &'a mut Option<TestsFirstInfo>,
        command: &str,
        tests: &[String],
    ) -> &'a mut TestsFirstInfo {
        slot.get_or_insert_with(|| TestsFirstInfo {
            command: command.to_string(),
            tests: tests.to_vec(),
            red: None,
            green: None,
        })
    }
}

/// kern's commit of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CommitInfo {
    /// The full sha.
    pub sha: String,
    /// The subject line.
    pub subject: String,
    /// Changed files left out of it.
    pub left_out: Vec<LeftOutFile>,
    /// `--review`: the task branch it waits on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_branch: Option<String>,
    /// `--review`: what became of it since ([`settle_reviews`]); `None` when not known
    /// (the report at a run's end) or not parked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewOutcome>,
}

/// What became of a commit parked for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReviewOutcome {
    /// Its branch is still there: it waits for `kern accept` or `kern reject`.
    Waiting,
    /// Its branch is gone and its work is not kept as a rejected attempt: `kern accept`
    /// landed it.
    Accepted,
    /// `kern reject` reopened the task; its work is kept under `refs/kern/attempts/`.
    Rejected,
}

impl CommitInfo {
    /// True while the commit waits on its branch for review.
    pub(crate) fn waits_for_review(&self) -> bool {
        self.review_branch.is_some() && matches!(self.review, None | Some(ReviewOutcome::Waiting))
    }
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AttemptInfo {
    /// Its number (the Attempt note's N).
    pub attempt: u32,
    /// The first line of its note.
    pub reason: String,
}

/// One stage run (with its retries and waits).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StageInfo {
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
    /// The usage windows its agent reported after it (the report's chart of each window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<crate::stage::record::WindowUse>,
}

/// One run of the check command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CheckInfo {
    /// The command.
    pub command: String,
    /// Whether it passed.
    pub passed: bool,
}

/// What an audit found after a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ViolationInfo {
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
pub(crate) struct SetAsideInfo {
    /// The ref that keeps it.
    pub git_ref: String,
    /// The paths.
    pub paths: Vec<String>,
    /// Why.
    pub why: String,
}

/// Totals of one run or of several.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub(crate) struct Totals {
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
pub(crate) struct Expensive {
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

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::run_log;

    /// The fixture night: every kind of task end and every fact a report shows.
    pub(crate) const NIGHT: &str = include_str!("../../../tests/golden/report-night.jsonl");

    pub(crate) fn night() -> Report {
        let events = run_log::parse(NIGHT);
        build(&runs(&events), &|_| false)
    }
}
