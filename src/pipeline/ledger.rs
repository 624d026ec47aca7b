//! What a run counts — money spent, the end-of-run summary, usage limits and the shared
//! pause, stages by agent, whether the last task failed — in one ledger every task of the run
//! holds (`-j` too), with the [`Beat`] through which every task tells the run's lock that it
//! moved (its heartbeat of progress, DESIGN.md section 20).
//!
//! The decision a reader must know: a parallel task's run writes into the same ledger as the
//! run that started it, as things happen (the summary folds the events the run's `Teller` hears), so
//! nothing is summed back by hand when a task ends, `--max-cost` and each stage's budget see
//! every task's spending at once, and `--pace` judges the latest usage any task's agent
//! reported. One thread runs every task, and no borrow of the ledger lives across an await: by
//! construction, as its counts are private and each method that reads or changes them (named
//! for what it does: `end_with`, `note`, `paced`, …) ends its borrow before it returns; a read
//! of several counts returns a copy ([`PacedSoFar`]). What `--pace` keeps (readings, what each
//! stage spent of a window, the pauses, what was published) is a `PaceBook` of its own.

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::pace::{self, Readings};
use crate::agent::stream::window::Window;
use crate::event::RunEvent;
use crate::reporter::{Summary, voice};
use crate::retry::AgentLimits;
use crate::stage::Stage;
use crate::stage::record::{WaitKind, WindowUse};
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

/// The run's ledger; clones share it. Its counts are changed and read only through its
/// methods, each of which ends its borrow before it returns (none can live across an await).
#[derive(Clone)]
pub(crate) struct Ledger {
    /// No stage of any task starts before it ends (a usage limit with a known reset).
    pub(crate) pause: Pause,
    /// Tells the run's lock that a task moved (with `-j`, each task has a lock of its own
    /// in its worktree; a watchdog reads the run's).
    pub(crate) beat: Beat,
    books: Rc<RefCell<Books>>,
}

/// The counts themselves.
struct Books {
    /// The end-of-run summary, folded from the run's events.
    summary: Summary,
    /// The last task to end failed its attempt (the exit says so when work is left).
    last_failed: bool,
    /// How many stages each agent ran, in the order the agents first ran one.
    stages_by_agent: Vec<(String, u32)>,
    /// Stages that moved to another agent at a usage limit.
    switches: u32,
    /// What `--pace` keeps of the usage windows.
    pace: PaceBook,
    /// Until when each agent is at its usage limit.
    limits: AgentLimits,
    /// When the run started.
    started: Instant,
    /// How long each stage that succeeded took (its last try), by kind: a deadline judges by
    /// their median whether the next one of a kind fits.
    durations: Vec<(Stage, u64)>,
}

/// What the run knows of the agents' usage windows, for `--pace`: the latest readings, what
/// each stage used of them, the pauses it made, and (with `--remote`) what it published to
/// the account's usage ledger.
#[derive(Default)]
struct PaceBook {
    /// The latest reading of each usage window, by agent.
    readings: Readings,
    /// What each stage used of each window, where known: stage, window kind, points.
    window_spent: Vec<(Stage, String, f64)>,
    /// The windows `--pace` waited for the reset of (or the line of): kind, until when.
    resumed: Vec<(String, i64)>,
    /// How long `--pace` has paused the run (counted against `--max-wait`).
    paced_for: Duration,
    /// With `--remote`: the run was told the account's usage ledger could not be used.
    ledger_warned: bool,
    /// With `--remote`: this run's readings as last published to the account's ledger, each
    /// with the time it was read (an unchanged reading keeps it).
    published: Vec<(Window, i64)>,
}

/// What `--pace` has done so far, as its gate reads it before a stage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PacedSoFar {
    /// Per window kind asked about: what a stage of the kind asked about is expected to use
    /// of it, in points (see [`pace::expected_use`]).
    pub(crate) expected: Vec<(String, f64)>,
    /// How long `--pace` has paused the run.
    pub(crate) waited: Duration,
    /// The windows `--pace` waited for: kind, until when.
    pub(crate) resumed: Vec<(String, i64)>,
}

impl PaceBook {
    /// Takes in the windows a stage of kind `stage` that `agent` ran `reported`: returns what
    /// the stage used of each, and keeps what it spent and the new readings.
    fn read(&mut self, stage: Stage, agent: &str, reported: &[Window]) -> Vec<WindowUse> {
        let uses = pace::window_uses(&self.readings, agent, reported);
        for used in &uses {
            if let Some(points) = used.spent() {
                self.window_spent.push((stage, used.kind.clone(), points));
            }
        }
        pace::read(&mut self.readings, agent, reported);
        uses
    }

    /// `agent`'s latest readings.
    fn of(&self, agent: &str) -> Vec<Window> {
        self.readings
            .iter()
            .filter(|(a, _)| a == agent)
            .map(|(_, w)| w.clone())
            .collect()
    }

    /// What a stage of kind `stage` is expected to use of each of `kinds`, the pauses so far.
    fn so_far<'k>(&self, stage: Stage, kinds: impl Iterator<Item = &'k str>) -> PacedSoFar {
        PacedSoFar {
            expected: kinds
                .map(|kind| {
                    (
                        kind.to_string(),
                        pace::expected_use(&self.window_spent, stage, kind),
                    )
                })
                .collect(),
            waited: self.paced_for,
            resumed: self.resumed.clone(),
        }
    }

    /// `--pace` paused the run `waited` for the window `kind` (until `until`).
    fn paused(&mut self, kind: &str, until: i64, waited: Duration) {
        self.paced_for += waited;
        self.resumed.push((kind.to_string(), until));
    }
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
                pace: PaceBook::default(),
                limits: AgentLimits::default(),
                started: Instant::now(),
                durations: Vec::new(),
            })),
        }
    }

    /// The counts; every borrow ends inside the method that takes it.
    fn books(&self) -> RefMut<'_, Books> {
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

    /// Takes in the usage windows a stage of kind `stage` that `agent` ran `reported`: returns
    /// what the stage used of each (for its record), and keeps what it spent and the new
    /// readings for `--pace`.
    pub(crate) fn read_windows(
        &self,
        stage: Stage,
        agent: &str,
        reported: &[Window],
    ) -> Vec<WindowUse> {
        self.books().pace.read(stage, agent, reported)
    }

    /// `agent`'s latest readings of its windows, or `None` while it is at its usage limit at
    /// `now` (its stages run on the fallback agent then).
    pub(crate) fn pace_readings(&self, agent: &str, now: i64) -> Option<Vec<Window>> {
        let books = self.books();
        if books.limits.limited_until(agent, now).is_some() {
            return None;
        }
        Some(books.pace.of(agent))
    }

    /// `--pace` hands `agent`'s stages to the fallback agent until `until`; its windows are
    /// read again only when it reports anew.
    pub(crate) fn hand_over(&self, agent: &str, until: i64) {
        let mut books = self.books();
        books.limits.set(agent, until);
        books.pace.readings.retain(|(a, _)| a != agent);
    }

    /// What a stage of kind `stage` is expected to use of each window of `kinds`, and how
    /// long and for which windows `--pace` paused the run so far.
    pub(crate) fn paced_so_far<'k>(
        &self,
        stage: Stage,
        kinds: impl Iterator<Item = &'k str>,
    ) -> PacedSoFar {
        self.books().pace.so_far(stage, kinds)
    }

    /// `--pace` paused the run `waited` for the window `kind` (until `until`).
    pub(crate) fn paced(&self, kind: &str, until: i64, waited: Duration) {
        self.books().pace.paused(kind, until, waited);
    }

    /// With `--remote`: this run's readings as it last published them to the account's
    /// usage ledger, each with the time it was read.
    pub(crate) fn published(&self) -> Vec<(Window, i64)> {
        self.books().pace.published.clone()
    }

    /// With `--remote`: this run's readings are now `published` in the account's ledger.
    pub(crate) fn publish(&self, published: Vec<(Window, i64)>) {
        self.books().pace.published = published;
    }

    /// With `--remote`: the account's usage ledger could not be used; `true` the first time
    /// (the run says so once).
    pub(crate) fn pace_ledger_failed(&self) -> bool {
        !std::mem::replace(&mut self.books().pace.ledger_warned, true)
    }

    /// The run has started `n` iterations (or tasks, with `-j`).
    pub(crate) fn set_iterations(&self, n: u32) {
        self.books().summary.iterations = n;
    }

    /// The run ends, and `why` says how.
    pub(crate) fn end_with(&self, why: String) {
        self.books().summary.ended = why;
    }

    /// A note for the end-of-run summary.
    pub(crate) fn note(&self, what: String) {
        self.books().summary.notes.push(what);
    }

    /// The commit of `title` is no longer the run's (it did not land): the summary drops it.
    pub(crate) fn uncommit(&self, title: &str) {
        self.books().summary.committed.retain(|(t, _)| t != title);
    }

    /// Whether the run committed anything.
    pub(crate) fn committed_any(&self) -> bool {
        !self.books().summary.committed.is_empty()
    }

    /// Whether the last task to end failed its attempt.
    pub(crate) fn last_failed(&self) -> bool {
        self.books().last_failed
    }

    /// The run's time and, when it used more than one agent, their stages, into the summary.
    pub(crate) fn settle(&self) {
        let mut books = self.books();
        books.summary.elapsed = books.started.elapsed();
        if let Some(note) = voice::stages_by_agent(&books.stages_by_agent, books.switches) {
            books.summary.notes.push(note);
        }
    }

    /// The end-of-run summary, taken out of the ledger; `why`, when given, says how the run
    /// ended unless something already did.
    pub(crate) fn take_summary(&self, why: Option<String>) -> Summary {
        let mut books = self.books();
        if let Some(why) = why
            && books.summary.ended.is_empty()
        {
            books.summary.ended = why;
        }
        std::mem::take(&mut books.summary)
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

    fn window(kind: &str, used: f64, resets_at: i64) -> Window {
        Window {
            kind: kind.into(),
            used,
            resets_at: Some(resets_at),
        }
    }

    #[test]
    fn the_pace_book_keeps_each_agents_readings_and_what_each_stage_spent() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        // The first report has nothing to compare with: its use is unknown, nothing spent.
        let first =
            ledger.read_windows(Stage::Research, "claude", &[window("five_hour", 0.1, 500)]);
        assert_eq!(first[0].used_before, None);
        ledger.read_windows(Stage::Research, "codex", &[window("five_hour", 0.5, 900)]);
        // The next report of the same window is measured against the last reading.
        let second =
            ledger.read_windows(Stage::Research, "claude", &[window("five_hour", 0.25, 500)]);
        assert_eq!(second[0].used_before, Some(10.0));
        assert_eq!(second[0].used_after, 25.0);
        assert_eq!(
            ledger.pace_readings("claude", 0),
            Some(vec![window("five_hour", 0.25, 500)])
        );
        assert_eq!(
            ledger.pace_readings("codex", 0),
            Some(vec![window("five_hour", 0.5, 900)])
        );
        // A stage kind is expected to use what its kind used so far; none known is 0.
        let so_far = ledger.paced_so_far(Stage::Research, ["five_hour", "seven_day"].into_iter());
        assert_eq!(
            so_far.expected,
            [
                ("five_hour".to_string(), 15.0),
                ("seven_day".to_string(), 0.0)
            ]
        );
        assert_eq!(
            ledger
                .paced_so_far(Stage::Implement, ["five_hour"].into_iter())
                .expected,
            [("five_hour".to_string(), 0.0)]
        );
    }

    #[test]
    fn a_hand_over_holds_the_agent_and_forgets_its_readings_until_it_reports_anew() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        ledger.read_windows(Stage::Research, "claude", &[window("five_hour", 0.9, 500)]);
        ledger.read_windows(Stage::Research, "codex", &[window("five_hour", 0.2, 900)]);
        ledger.hand_over("claude", 1_000);
        // At its limit, the agent is not judged (its stages run on the fallback).
        assert_eq!(ledger.pace_readings("claude", 999), None);
        assert_eq!(ledger.limits().limited_until("claude", 999), Some(1_000));
        // After the limit, it has no readings until it reports anew; the other keeps its own.
        assert_eq!(ledger.pace_readings("claude", 1_001), Some(Vec::new()));
        assert_eq!(
            ledger.pace_readings("codex", 1_001),
            Some(vec![window("five_hour", 0.2, 900)])
        );
    }

    #[test]
    fn the_pauses_add_up_against_max_wait_and_name_their_windows() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        let none = ledger.paced_so_far(Stage::Research, std::iter::empty());
        assert_eq!(none.waited, Duration::ZERO);
        assert!(none.resumed.is_empty());
        ledger.paced("five_hour", 100, Duration::from_secs(60));
        ledger.paced("seven_day", 200, Duration::from_secs(30));
        let so_far = ledger.paced_so_far(Stage::Research, std::iter::empty());
        assert_eq!(so_far.waited, Duration::from_secs(90));
        assert_eq!(
            so_far.resumed,
            [
                ("five_hour".to_string(), 100),
                ("seven_day".to_string(), 200)
            ]
        );
    }

    #[test]
    fn the_account_ledger_is_said_unusable_once_and_keeps_what_was_published() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        assert!(ledger.published().is_empty());
        ledger.publish(vec![(window("five_hour", 0.3, 500), 42)]);
        assert_eq!(ledger.published(), [(window("five_hour", 0.3, 500), 42)]);
        let task = ledger.clone();
        assert!(task.pace_ledger_failed());
        assert!(!ledger.pace_ledger_failed());
        assert!(!task.pace_ledger_failed());
    }

    #[test]
    fn the_summary_is_changed_only_by_what_the_run_says_of_it() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        ledger.set_iterations(3);
        ledger.note("a note".into());
        assert!(!ledger.committed_any());
        for (title, sha) in [("A", "a1"), ("B", "b2")] {
            ledger.on(&RunEvent::Commit {
                task: title.into(),
                sha: sha.into(),
                subject: title.into(),
                left_out: Vec::new(),
                review_branch: None,
            });
        }
        assert!(ledger.committed_any());
        ledger.uncommit("A");
        ledger.end_with("all 3 iterations ran".into());
        let summary = ledger.take_summary(None);
        assert_eq!(summary.iterations, 3);
        assert_eq!(summary.notes, ["a note"]);
        assert_eq!(summary.committed.len(), 1);
        assert_eq!(summary.committed[0].0, "B");
        assert_eq!(summary.ended, "all 3 iterations ran");
        // Taken out: the ledger holds a fresh one.
        assert!(!ledger.committed_any());
    }

    #[test]
    fn how_the_run_ended_is_the_first_thing_that_said_so() {
        // (said before, the error's words) → the summary's end.
        for (before, why, ended) in [
            (None, None, ""),
            (None, Some("it failed"), "it failed"),
            (
                Some("the deadline ends the night"),
                None,
                "the deadline ends the night",
            ),
            (
                Some("the deadline ends the night"),
                Some("it failed"),
                "the deadline ends the night",
            ),
        ] {
            let ledger = Ledger::new(Summary::default(), Beat::default());
            if let Some(before) = before {
                ledger.end_with(before.into());
            }
            let summary = ledger.take_summary(why.map(str::to_string));
            assert_eq!(summary.ended, ended, "{before:?} {why:?}");
        }
    }

    #[test]
    fn settling_names_the_stages_by_agent_only_when_more_than_one_ran() {
        for (agents, switched, note) in [
            (&["claude", "claude"][..], false, None),
            (
                &["claude", "codex", "claude"][..],
                false,
                Some("stages by agent: claude 2, codex 1"),
            ),
            (
                &["claude"][..],
                true,
                Some(
                    "stages by agent: claude 1 (1 stage moved to the other agent at a usage limit)",
                ),
            ),
        ] {
            let ledger = Ledger::new(Summary::default(), Beat::default());
            for agent in agents {
                ledger.count_stage(&StageCount {
                    agent,
                    cost_usd: 0.0,
                    retries: 0,
                    switched,
                    waits: &[],
                    succeeded: None,
                });
            }
            ledger.settle();
            let summary = ledger.take_summary(None);
            assert_eq!(
                summary.notes.first().map(String::as_str),
                note,
                "{agents:?}"
            );
        }
    }
}
