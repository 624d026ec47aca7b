//! The run's one door for telling: every happening of a run is a [`RunEvent`] given to
//! [`Teller::emit`], and its listeners hear it there — the person's line and live status
//! (`Reporter::hear`, worded by `reporter/voice.rs`), `--notify` (`voice::notice`), the run's
//! ledger and summary (`Ledger::on`), for the recorded events `run.jsonl`, and with
//! `--tracker` the tracker (`tracker::Tracker`), whose own happenings (a comment made, a call
//! of `gh` that failed) come back through the same door.
//!
//! The one decision a reader must know: nothing in the loop calls a listener itself, so which
//! listeners hear a happening is decided by the event, never at a call site, and a parallel
//! task's teller ([`Teller::for_job`]) writes the same log and ledger under its own label. The
//! teller keeps this run's recorded events as they go, so the `--notify` event at the run's end
//! carries the report's headline and totals without reading `run.jsonl` back.

use std::cell::RefCell;
use std::rc::Rc;

use crate::tracker::Tracker;

use crate::error::Error;
use crate::event::{RunEvent, Told};
use crate::reporter::notify::EventKind;
use crate::reporter::{Reporter, Summary, voice};
use crate::state::lock::Moved;
use crate::state::run_log::{LoggedEvent, RunLog};
use crate::state::run_report;

use super::ledger::Ledger;

/// The one door through which the run tells what happens.
#[derive(Clone)]
pub(crate) struct Teller<'a> {
    reporter: &'a Reporter,
    log: RunLog,
    ledger: Ledger,
    /// The events this run recorded, in order (every task's, `-j` too).
    recorded: Rc<RefCell<Vec<LoggedEvent>>>,
    /// `--tracker`: the tracker, told of every event (every task's, `-j` too).
    tracker: Option<Rc<RefCell<Tracker>>>,
}

impl<'a> Teller<'a> {
    /// The door of a run that tells `reporter`, records in `log` and counts in `ledger`.
    pub(crate) fn new(reporter: &'a Reporter, log: RunLog, ledger: Ledger) -> Teller<'a> {
        Teller {
            reporter,
            log,
            ledger,
            recorded: Rc::default(),
            tracker: None,
        }
    }

    /// From now on `tracker` hears every event too (`--tracker`).
    pub(crate) fn hear_tracker(&mut self, tracker: Tracker) {
        self.tracker = Some(Rc::new(RefCell::new(tracker)));
    }

    /// The door of a parallel task: its own labelled `reporter`, the run's log and ledger.
    pub(crate) fn for_job<'b>(&self, reporter: &'b Reporter) -> Teller<'b> {
        Teller {
            reporter,
            log: self.log.clone(),
            ledger: self.ledger.clone(),
            recorded: Rc::clone(&self.recorded),
            tracker: self.tracker.clone(),
        }
    }

    /// This run's id in `run.jsonl`.
    pub(crate) fn run_id(&self) -> &str {
        self.log.run_id()
    }

    /// Says what happened, once, to every listener — the run's heartbeat too: a happening is
    /// progress; then what the tracker made of it.
    pub(crate) fn emit(&self, event: RunEvent) {
        self.ledger.beat.moved(moved_by(&event), None);
        self.reporter.hear(&event);
        if let Some((kind, fields)) = voice::notice(&event) {
            self.reporter.notify(kind, fields);
        }
        self.ledger.on(&event);
        let heard = self.tracker.as_ref().map(|_| event.clone());
        if event.is_recorded() {
            let line = self.log.event(event);
            self.recorded.borrow_mut().push(line);
        }
        // The tracker's own events ask nothing of it: this ends.
        let told = match (&self.tracker, heard) {
            (Some(tracker), Some(event)) => tracker.borrow_mut().on(&event),
            _ => Vec::new(),
        };
        for event in told {
            self.emit(event);
        }
    }

    /// The run stopped for `error`: the `--notify` command hears it when it needs the person
    /// (exit 2: SPEC.md, the tree, the check; exit 5: the agent).
    pub(crate) fn stopped(&self, error: &Error) {
        let code = error.exit_code();
        if code == crate::error::EXIT_USAGE || code == crate::error::EXIT_AGENT_NEEDS_USER {
            self.emit(RunEvent::Told(Told::StoppedForPerson {
                code,
                message: error.to_string(),
            }));
        }
    }

    /// The run ended as `end` (a [`RunEvent::RunEnd`]) with `summary`: recorded, the live
    /// status cleared, the summary printed, and the `--notify` command told with the report's
    /// headline and totals, as `kern report` reads this run.
    pub(crate) fn ended(&self, end: RunEvent, summary: &Summary) {
        self.emit(end);
        self.reporter.summary(summary);
        let recorded = self.recorded.borrow();
        let mine: Vec<&LoggedEvent> = recorded.iter().collect();
        let report = run_report::build(&[(self.run_id().to_string(), mine)], &|_| false);
        let fields = match report.runs.first() {
            Some(r) => serde_json::json!({
                "text": r.headline,
                "exit_code": r.exit_code,
                "ended": r.ended,
                "headline": r.headline,
                "needs_you": r.needs_you.iter().map(|a| a.text.clone()).collect::<Vec<_>>(),
                "totals": r.totals,
            }),
            None => serde_json::json!({}),
        };
        self.reporter.notify(EventKind::RunEnded, fields);
    }

    /// What a lost terminal (SIGHUP) does, from the signal's thread: the reporter stops
    /// writing to the terminal and `run.jsonl` records the loss.
    pub(crate) fn hangup_hook(&self) -> impl Fn() + Send + Sync + 'static {
        let hook = self.reporter.hangup_hook();
        let log = self.log.clone();
        move || {
            hook();
            log.event(RunEvent::Hangup {});
        }
    }
}

/// What `event` tells the run's heartbeat: a countdown states its end, any other happening is
/// named (by its `run.jsonl` name, or its kind when it is only told).
fn moved_by(event: &RunEvent) -> Moved {
    match event {
        RunEvent::Told(Told::Waiting { remaining, .. }) => Moved::Waiting {
            until: super::clock::after(crate::timestamp::Timestamp::now(), *remaining),
        },
        RunEvent::Told(told) => Moved::Event { event: told.kind() },
        e => Moved::Event { event: e.name() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_countdown_tells_the_heartbeat_its_end_and_any_other_happening_its_name() {
        let waiting = RunEvent::Told(Told::Waiting {
            reason: "next iteration".into(),
            remaining: std::time::Duration::from_secs(600),
        });
        let before = crate::timestamp::Timestamp::now().epoch_seconds();
        match moved_by(&waiting) {
            Moved::Waiting { until } => {
                let until = until.epoch_seconds();
                assert!((before + 600..=before + 602).contains(&until), "{until}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            moved_by(&RunEvent::Hangup {}),
            Moved::Event { event } if event == RunEvent::Hangup {}.name()
        ));
    }
}
