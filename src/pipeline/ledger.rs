//! What a run counts — money spent, the end-of-run summary, usage limits and the shared
//! pause, stages by agent, whether the last task failed — in one ledger every task of the run
//! holds (`-j` too), with the [`Beat`] through which every task tells the run's lock that it
//! moved (its heartbeat of progress, DESIGN.md section 20).
//!
//! The decision a reader must know: a parallel task's run writes into the same ledger as the
//! run that started it, as things happen (the summary folds the events the run's `Teller` hears), so
//! nothing is summed back by hand when a task ends, `--max-cost` and each stage's budget see
//! every task's spending at once, and `--pace` judges the latest usage any task's agent
//! reported. One thread runs every task, and no borrow of the ledger lives across an await.

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::event::RunEvent;
use crate::reporter::Summary;
use crate::retry::AgentLimits;
use crate::stage::Stage;
use crate::stage::record::WaitKind;
use crate::state::lock::Beat;

/// Until when no stage of the run starts: a usage limit one task's agent hit holds for every
/// task (they share the account), so the others wait for the same reset instead of each
/// hitting it in turn. Shared by the tasks of one run (one thread).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pause(std::rc::Rc<std::cell::Cell<Option<Instant>>>);

impl Pause {
    /// No stage starts before `until` (a later pause wins).
    pub(crate) fn until(&self, until: Instant) {
        if self.0.get().is_none_or(|t| t < until) {
            self.0.set(Some(until));
        }
    }

    /// How long from now the pause lasts, if it does.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.0
            .get()
            .map(|t| t.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
    }
}

/// The run's ledger; clones share it.
#[derive(Clone)]
pub(crate) struct Ledger {
    /// No stage of any task starts before it ends (a usage limit with a known reset).
    pub(crate) pause: Pause,
    /// Tells the run's own lock that a task moved (with `-j`, each task has a lock of its own
    /// in its worktree; a watchdog reads the run's).
    pub(crate) beat: Beat,
    books: Rc<RefCell<Books>>,
}

/// The counts themselves.
pub(crate) struct Books {
    /// The end-of-run summary, folded from the run's events.
    pub(crate) summary: Summary,
    /// The last task to end failed its attempt (the exit says so when work is left).
    pub(crate) last_failed: bool,
    /// How many stages each agent ran, in the order the agents first ran one.
    pub(crate) stages_by_agent: Vec<(String, u32)>,
    /// Stages that moved to another agent at a usage limit.
    pub(crate) switches: u32,
    /// The latest reading of each usage window, by agent.
    pub(crate) readings: super::pace::Readings,
    /// What each stage used of each window, where known: stage, window kind, points.
    pub(crate) window_spent: Vec<(crate::stage::Stage, String, f64)>,
    /// The windows `--pace` waited for the reset of (or the line of): kind, until when.
    pub(crate) resumed: Vec<(String, i64)>,
    /// How long `--pace` has paused the run (counted against `--max-wait`).
    pub(crate) paced_for: Duration,
    /// With `--remote`: the run was told the account's usage ledger could not be used.
    pub(crate) pace_ledger_warned: bool,
    /// With `--remote`: this run's readings as last published to the account's ledger, each
    /// with the time it was read (an unchanged reading keeps it).
    pub(crate) pace_published: Vec<(crate::agent::stream::window::Window, i64)>,
    /// Until when each agent is at its usage limit.
    pub(crate) limits: AgentLimits,
    /// When the run started.
    pub(crate) started: Instant,
    /// How long each stage that succeeded took (its last try), by kind: a deadline judges by
    /// their median whether the next one of a kind fits.
    pub(crate) durations: Vec<(Stage, u64)>,
}

/// One stage's share of the ledger, as the stage runner reported it.
pub(crate) struct StageCount<'a> {
    pub(crate) agent: &'a str,
    pub(crate) cost_usd: f64,
    pub(crate) retries: u32,
    /// Whether the stage moved to another agent at a usage limit.
    pub(crate) switched: bool,
    /// The usage-limit waits, how long each.
    pub(crate) waits: &'a [(WaitKind, u64)],
    /// The stage and how long its last try took, when it succeeded.
    pub(crate) succeeded: Option<(Stage, u64)>,
}

impl Ledger {
    /// A new run's ledger, its summary starting as `summary`; `beat` tells the run's lock.
    pub(crate) fn new(summary: Summary, beat: Beat) -> Ledger {
        Ledger {
            pause: Pause::default(),
            beat,
            books: Rc::new(RefCell::new(Books {
                summary,
                last_failed: false,
                stages_by_agent: Vec::new(),
                switches: 0,
                readings: Vec::new(),
                window_spent: Vec::new(),
                resumed: Vec::new(),
                paced_for: Duration::ZERO,
                pace_ledger_warned: false,
                pace_published: Vec::new(),
                limits: AgentLimits::default(),
                started: Instant::now(),
                durations: Vec::new(),
            })),
        }
    }

    /// The counts, to read or change; the borrow must end before the next await.
    pub(crate) fn books(&self) -> RefMut<'_, Books> {
        self.books.borrow_mut()
    }

    /// Folds `event` into the summary and the last task's outcome.
    pub(crate) fn on(&self, event: &RunEvent) {
        let mut books = self.books();
        books.summary.on(event);
        match event {
            RunEvent::AttemptFailed { .. } => books.last_failed = true,
            RunEvent::Commit { .. } | RunEvent::NoCommit { .. } => books.last_failed = false,
            _ => {}
        }
    }

    /// What every task of the run has spent, in USD.
    pub(crate) fn spent(&self) -> f64 {
        self.books().summary.cost_usd
    }

    /// Adds a stage's cost, retries, waits and agent; returns the run's total cost.
    pub(crate) fn count_stage(&self, stage: &StageCount<'_>) -> f64 {
        let mut books = self.books();
        match books
            .stages_by_agent
            .iter_mut()
            .find(|(a, _)| a == stage.agent)
        {
            Some(entry) => entry.1 += 1,
            None => books.stages_by_agent.push((stage.agent.to_string(), 1)),
        }
        if stage.switched {
            books.switches += 1;
        }
        books.durations.extend(stage.succeeded);
        books.summary.cost_usd += stage.cost_usd;
        books.summary.retries += stage.retries;
        for (kind, ms) in stage.waits {
            if *kind == WaitKind::UsageLimit {
                books.summary.waits += 1;
                books.summary.wait_time += Duration::from_millis(*ms);
            }
        }
        books.summary.cost_usd
    }

    /// The median time a stage of kind `stage` took in this run, and of how many, when one
    /// succeeded.
    pub(crate) fn median_ms(&self, stage: Stage) -> Option<(u64, usize)> {
        let books = self.books();
        let mut times: Vec<u64> = books
            .durations
            .iter()
            .filter(|(s, _)| *s == stage)
            .map(|(_, ms)| *ms)
            .collect();
        times.sort_unstable();
        let n = times.len();
        (n > 0).then(|| (times[n / 2], n))
    }

    /// A copy of the usage limits for one stage to use and update (the stage awaits, and
    /// other tasks' stages run meanwhile).
    pub(crate) fn limits(&self) -> AgentLimits {
        self.books().limits.clone()
    }

    /// Takes in what a stage learnt about the agents' usage limits.
    pub(crate) fn merge_limits(&self, learnt: &AgentLimits) {
        self.books().limits.merge(learnt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_sharing_the_ledger_counts_into_the_runs_totals_as_it_goes() {
        let run = Ledger::new(Summary::default(), Beat::default());
        let task = run.clone();
        let waits = [(WaitKind::UsageLimit, 1500), (WaitKind::Retry, 9)];
        task.count_stage(&StageCount {
            agent: "claude",
            cost_usd: 0.5,
            retries: 1,
            switched: false,
            waits: &waits,
            succeeded: Some((Stage::Implement, 3000)),
        });
        let total = run.count_stage(&StageCount {
            agent: "codex",
            cost_usd: 0.25,
            retries: 0,
            switched: true,
            waits: &[],
            succeeded: None,
        });
        assert!((total - 0.75).abs() < 1e-9);
        assert!((run.spent() - 0.75).abs() < 1e-9);
        let books = run.books();
        assert_eq!(
            books.stages_by_agent,
            [("claude".to_string(), 1), ("codex".to_string(), 1)]
        );
        assert_eq!(books.switches, 1);
        assert_eq!(books.summary.retries, 1);
        assert_eq!(books.summary.waits, 1);
        assert_eq!(books.summary.wait_time, Duration::from_millis(1500));
        drop(books);
        assert_eq!(run.median_ms(Stage::Implement), Some((3000, 1)));
        assert_eq!(run.median_ms(Stage::Research), None);
    }

    #[test]
    fn the_last_task_failed_until_a_commit_says_otherwise() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        ledger.on(&RunEvent::AttemptFailed {
            task: "T".into(),
            attempt: 1,
            note: "no".into(),
            ends_task: false,
        });
        assert!(ledger.books().last_failed);
        assert_eq!(ledger.books().summary.failed_attempts, 1);
        ledger.on(&RunEvent::Commit {
            task: "T".into(),
            sha: "abc1234".into(),
            subject: "T".into(),
            left_out: Vec::new(),
            review_branch: None,
        });
        assert!(!ledger.books().last_failed);
    }
}
