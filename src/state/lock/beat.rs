//! The run's heartbeat of progress, kept in its lock record so that `kern watch` (and `kern
//! status`) can tell a run that moves from one that is alive but stuck (DESIGN.md section 20).
//!
//! The one decision a reader must know: the heartbeat is refreshed by **progress**, never by a
//! clock. What moves it: a phase the run enters, an event it emits, bytes its agent prints,
//! and the ticks of a wait that states its end (a usage-limit reset, a retry delay, the pause
//! between iterations). A timer that rewrote the lock every few seconds would prove only that
//! the process is scheduled; a SIGSTOPped or deadlocked run must look stalled, and a stage whose
//! agent prints must look alive. The record is written at most every [`BEAT_EVERY`] while
//! things move (a phase change is written at once), so streaming output costs a comparison of
//! two instants per line. Where the run itself bounds a silence — an agent quiet for less than
//! `--idle-timeout`, the check within `--check-timeout`, a commit's hooks within
//! `--hook-timeout` — the heartbeat says until when (`quiet_until`), and a watchdog leaves that
//! silence to the run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use std::cell::RefCell;
use std::rc::Weak;

use super::{Held, Phase};
use crate::stage::Stage;
use crate::timestamp::Timestamp;

/// The longest a moving run waits before its lock says so again.
pub(crate) const BEAT_EVERY: Duration = Duration::from_secs(1);

/// The run's last sign of progress, as its lock record holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// When the run last moved.
    pub at: Timestamp,
    /// What moved.
    #[serde(flatten)]
    pub moved: Moved,
    /// Until when a silence is the run's own to end (its idle, check or hook timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_until: Option<Timestamp>,
}

/// What moved last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "moved", rename_all = "snake_case")]
pub enum Moved {
    /// The run took its lock.
    Started,
    /// The run entered the phase its record names.
    Phase,
    /// The run emitted an event (its `run.jsonl` name, or the kind of one it only tells:
    /// `stage_try`).
    Event {
        /// The event's name.
        event: String,
    },
    /// A stage's agent printed: `bytes` so far in this try.
    Output {
        /// The stage.
        stage: Stage,
        /// Bytes of output in this try so far.
        bytes: u64,
    },
    /// A wait counts down to `until` (a usage-limit reset, a retry delay, the next iteration).
    Waiting {
        /// When the wait ends.
        until: Timestamp,
    },
    /// A move this kern does not know (written by another version).
    #[serde(other)]
    Other,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Moved::Started => f.write_str("the run started"),
            Moved::Phase => f.write_str("a new phase"),
            Moved::Event { event } => write!(f, "event `{event}`"),
            Moved::Output { stage, bytes } => write!(
                f,
                "the {stage} agent's output ({} so far)",
                crate::text::bytes(*bytes)
            ),
            Moved::Waiting { until } => write!(f, "a wait until {until}"),
            Moved::Other => f.write_str("something"),
        }
    }
}

/// How long the run itself lets each kind of silence last (its own limits): a watchdog waits
/// for these before it calls the silence a stall.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QuietLimits {
    /// An agent that prints nothing (`--idle-timeout`).
    pub agent: Duration,
    /// The check gate (`--check-timeout`).
    pub check: Duration,
    /// Making a commit: its hooks, filters and signing (bounded by `--hook-timeout` each).
    pub commit: Duration,
}

impl QuietLimits {
    /// How long the run may be silent in `phase` before its own limits move it.
    pub(crate) fn for_phase(&self, phase: &Phase) -> Option<Duration> {
        match phase {
            Phase::Stage(_) => Some(self.agent),
            Phase::Check => Some(self.check),
            Phase::Committing => Some(self.commit),
            _ => None,
        }
        .filter(|d| !d.is_zero())
    }
}

impl Heartbeat {
    /// The heartbeat after `moved` at `now`, with a silence of up to `quiet` that the run's own
    /// limits end. A promise made before (another task's silent agent, with `-j`) is kept
    /// until it runs out.
    pub(crate) fn after(
        previous: Option<&Heartbeat>,
        moved: Moved,
        quiet: Option<Duration>,
        now: Timestamp,
    ) -> Heartbeat {
        let promised = quiet.map(|d| {
            Timestamp::from_epoch_seconds(
                now.epoch_seconds()
                    .saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)),
            )
        });
        let kept = previous
            .and_then(|b| b.quiet_until)
            .filter(|until| *until > now);
        Heartbeat {
            at: now,
            moved,
            quiet_until: promised.max(kept),
        }
    }
}

/// Tells a run's lock that the run moved (`beat.rs`): cheap to clone, handed to every task of
/// the run. It does not keep the lock alive; once the lock is released it does nothing.
#[derive(Debug, Clone, Default)]
pub struct Beat(pub(super) Weak<RefCell<Held>>);

impl Beat {
    /// The run moved: `moved`, with a silence of up to `quiet` that its own limits end. The
    /// record is written when the last write is [`BEAT_EVERY`] old.
    pub fn moved(&self, moved: Moved, quiet: Option<Duration>) {
        let Some(held) = self.0.upgrade() else {
            return;
        };
        // A borrow in progress is the lock writing the record itself: it says as much.
        let Ok(mut held) = held.try_borrow_mut() else {
            return;
        };
        held.beat(moved, quiet);
        if held.written.elapsed() >= BEAT_EVERY
            && let Err(e) = held.write()
        {
            tracing::warn!(error = %e, "cannot write the heartbeat into the lock");
        }
    }
}

impl Held {
    /// The run moved: the heartbeat says so (written with the record's next write).
    pub(super) fn beat(&mut self, moved: Moved, quiet: Option<Duration>) {
        self.record.beat = Some(Box::new(Heartbeat::after(
            self.record.beat.as_deref(),
            moved,
            quiet,
            Timestamp::now(),
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_epoch_seconds(1_795_000_000 + s)
    }

    #[test]
    fn a_heartbeat_reads_back_and_names_what_moved() {
        let cases = [
            (
                Heartbeat {
                    at: t(0),
                    moved: Moved::Output {
                        stage: Stage::Implement,
                        bytes: 12_345,
                    },
                    quiet_until: Some(t(900)),
                },
                r#"{"at":"2026-11-18T11:06:40Z","moved":"output","stage":"implement","bytes":12345,"quiet_until":"2026-11-18T11:21:40Z"}"#,
                "the implement agent's output (12.1 KiB so far)",
            ),
            (
                Heartbeat {
                    at: t(0),
                    moved: Moved::Waiting { until: t(3600) },
                    quiet_until: None,
                },
                r#"{"at":"2026-11-18T11:06:40Z","moved":"waiting","until":"2026-11-18T12:06:40Z"}"#,
                "a wait until 2026-11-18T12:06:40Z",
            ),
            (
                Heartbeat {
                    at: t(0),
                    moved: Moved::Event {
                        event: "commit".into(),
                    },
                    quiet_until: None,
                },
                r#"{"at":"2026-11-18T11:06:40Z","moved":"event","event":"commit"}"#,
                "event `commit`",
            ),
            (
                Heartbeat {
                    at: t(0),
                    moved: Moved::Phase,
                    quiet_until: None,
                },
                r#"{"at":"2026-11-18T11:06:40Z","moved":"phase"}"#,
                "a new phase",
            ),
        ];
        for (beat, json, words) in cases {
            assert_eq!(serde_json::to_string(&beat).unwrap(), json);
            assert_eq!(serde_json::from_str::<Heartbeat>(json).unwrap(), beat);
            assert_eq!(beat.moved.to_string(), words);
        }
        let newer: Heartbeat =
            serde_json::from_str(r#"{"at":"2026-11-18T11:06:40Z","moved":"dreaming"}"#).unwrap();
        assert_eq!(newer.moved, Moved::Other);
    }

    #[test]
    fn the_run_promises_to_end_its_own_silences() {
        let limits = QuietLimits {
            agent: Duration::from_secs(900),
            check: Duration::from_secs(600),
            commit: Duration::from_secs(2400),
        };
        let cases = [
            (Phase::Stage(Stage::Research), Some(900)),
            (Phase::Check, Some(600)),
            (Phase::Committing, Some(2400)),
            (Phase::Waiting(Stage::Implement), None),
            (Phase::Sleeping, None),
            (Phase::Selecting, None),
            (Phase::Tasks, None),
        ];
        for (phase, secs) in cases {
            assert_eq!(
                limits.for_phase(&phase),
                secs.map(Duration::from_secs),
                "{phase}"
            );
        }
        assert_eq!(QuietLimits::default().for_phase(&Phase::Check), None);
    }

    #[test]
    fn a_promise_holds_until_it_runs_out_and_a_later_one_wins() {
        let quiet = |s: u64| Some(Duration::from_secs(s));
        let first = Heartbeat::after(None, Moved::Phase, quiet(900), t(0));
        assert_eq!(first.quiet_until, Some(t(900)));
        // Another task moves without a silence of its own: the promise stays.
        let second = Heartbeat::after(Some(&first), Moved::Phase, None, t(10));
        assert_eq!((second.at, second.quiet_until), (t(10), Some(t(900))));
        // A later promise wins.
        let third = Heartbeat::after(Some(&second), Moved::Phase, quiet(900), t(20));
        assert_eq!(third.quiet_until, Some(t(920)));
        // Once run out, it is gone.
        let fourth = Heartbeat::after(Some(&third), Moved::Phase, None, t(921));
        assert_eq!(fourth.quiet_until, None);
    }
}
