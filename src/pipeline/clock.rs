//! The run's time: its pauses, told to the heartbeat as they go (a wait that states its end is
//! progress), and its deadline (DESIGN.md section 20).
//!
//! The one decision a reader must know about the deadline: a stage starts only when what it
//! may take still fits before it — this run's median for that kind of stage once one
//! succeeded, else its `--stage-timeout` — and each try of a stage gets no more time than is
//! left, so a stage still running at the deadline is stopped there and resumes on the next
//! run. Nothing else waits past it either (the pause between iterations, a usage-limit wait).
//! The run then ends as planned: exit 0, saying so.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::settings::{Deadline, Settings};
use crate::stage::Stage;
use crate::state::lock::{BEAT_EVERY, Beat, Moved};
use crate::supervisor::interrupt::Interrupt;
use crate::supervisor::invocation::Limits;
use crate::text;
use crate::timestamp::Timestamp;

/// `now` plus `d`, to the second.
pub(crate) fn after(now: Timestamp, d: Duration) -> Timestamp {
    Timestamp::from_epoch_seconds(
        now.epoch_seconds()
            .saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)),
    )
}

/// How long is left before `deadline` at `now` (zero once it has come).
pub(crate) fn left(now: Timestamp, deadline: Timestamp) -> Duration {
    Duration::from_secs(u64::try_from(deadline.epoch_seconds() - now.epoch_seconds()).unwrap_or(0))
}

/// What a stage may take, for the deadline: this run's median of its kind (`median`: the
/// milliseconds and of how many stages) once one succeeded, else its timeout.
pub(crate) fn need(timeout: Duration, median: Option<(u64, usize)>) -> (Duration, String) {
    match median {
        Some((ms, n)) => (
            Duration::from_millis(ms).max(Duration::from_secs(1)),
            format!(
                "its median in this run, of {}",
                text::count(n, "stage", "stages")
            ),
        ),
        None => (timeout, "its --stage-timeout".into()),
    }
}

/// Why `stage` may not start at `now`: it `needs` (with `basis`) more than is left before
/// the deadline; `None` when it fits.
pub(crate) fn refused(
    stage: Stage,
    now: Timestamp,
    deadline: &Deadline,
    (needs, basis): &(Duration, String),
) -> Option<Error> {
    let left = left(now, deadline.at);
    (*needs > left).then(|| Error::DeadlineReached {
        at: deadline.at,
        shown: deadline.shown.clone(),
        why: format!(
            "the {stage} stage may take up to {} ({basis}) and only {} {} left: it starts on the next run",
            text::duration(*needs),
            text::duration(left),
            if left.as_secs() == 1 { "was" } else { "were" },
        ),
    })
}

/// The error of a run whose deadline came while it did `what` (`the implement stage`, `the
/// pause before the next iteration`).
pub(crate) fn came(deadline: &Deadline, what: &str) -> Error {
    Error::DeadlineReached {
        at: deadline.at,
        shown: deadline.shown.clone(),
        why: format!("it came during {what}, which resumes on the next run"),
    }
}

/// The error of a wait for `reason` of `total` that would end after `deadline`.
pub(crate) fn wait_past(deadline: &Deadline, reason: &str, total: Duration) -> Option<Error> {
    (after(Timestamp::now(), total) > deadline.at).then(|| Error::DeadlineReached {
        at: deadline.at,
        shown: deadline.shown.clone(),
        why: format!(
            "the wait ({reason}, {}) would end after it: the stage resumes on the next run",
            text::duration(total)
        ),
    })
}

/// How long is left before `deadline` now, to the millisecond.
pub(crate) fn time_left(deadline: &Deadline) -> Duration {
    deadline
        .at
        .system_time()
        .duration_since(std::time::SystemTime::now())
        .unwrap_or(Duration::ZERO)
}

/// `limits` for one try of a stage: its stage timeout no longer than the time left before the
/// deadline.
pub(crate) fn clip(limits: &Limits, deadline: Option<&Deadline>) -> Limits {
    let mut limits = *limits;
    if let Some(deadline) = deadline {
        limits.stage_timeout = limits.stage_timeout.min(time_left(deadline));
    }
    limits
}

/// [`came`], for a deadline the caller knows is there.
pub(crate) fn came_at(deadline: Option<&Deadline>, what: &str) -> Error {
    match deadline {
        Some(deadline) => came(deadline, what),
        None => Error::Internal(format!("a deadline came during {what} without one")),
    }
}

/// Sleeps `total` (the pause between iterations), telling the run's heartbeat (`beat`) each
/// second that it waits until its end; true when a stop was asked for meanwhile.
pub(super) async fn pause(interrupt: &Interrupt, beat: &Beat, total: Duration) -> bool {
    let end = Instant::now() + total;
    let until = after(Timestamp::now(), total);
    loop {
        let now = Instant::now();
        if now >= end {
            return false;
        }
        beat.moved(Moved::Waiting { until }, None);
        if interrupt
            .sleep_or_interrupt((end - now).min(BEAT_EVERY))
            .await
        {
            return true;
        }
    }
}

/// `Err(DeadlineReached)` when `stage` could not finish before the night's deadline, judged
/// by this run's `median` of its kind (`Ledger::median_ms`) or its stage timeout.
pub(super) fn check_deadline(
    settings: &Settings,
    median: Option<(u64, usize)>,
    stage: Stage,
) -> Result<()> {
    let Some(deadline) = &settings.deadline else {
        return Ok(());
    };
    let need = need(settings.limits.stage_timeout, median);
    match refused(stage, Timestamp::now(), deadline, &need) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `Err(DeadlineReached)` when a pause of `delay` from `now` would end after the deadline:
/// the run ends now instead.
pub(super) fn check_pause(
    deadline: Option<&Deadline>,
    now: Timestamp,
    delay: Duration,
) -> Result<()> {
    match deadline {
        Some(deadline) if after(now, delay) >= deadline.at => Err(Error::DeadlineReached {
            at: deadline.at,
            shown: deadline.shown.clone(),
            why: format!(
                "the next iteration would start after it ({} from now)",
                text::duration(delay)
            ),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_epoch_seconds(1_795_000_000 + s)
    }

    #[test]
    fn a_stage_starts_only_when_what_it_may_take_fits_before_the_deadline() {
        let deadline = Deadline {
            at: t(3600),
            shown: "07:00".into(),
        };
        let hour = Duration::from_secs(3600);
        let cases = [
            // No median yet: the timeout.
            (0, None, true),
            (1, None, false),
            // A median of 10 minutes, of 3 implement stages.
            (3000, Some((600_000, 3)), true),
            (3001, Some((600_000, 3)), false),
            // A median under a second counts as a second.
            (3599, Some((20, 1)), true),
            (3600, Some((20, 1)), false),
        ];
        for (now, median, starts) in cases {
            let need = need(hour, median);
            assert_eq!(
                refused(Stage::Implement, t(now), &deadline, &need).is_none(),
                starts,
                "{now} {median:?}"
            );
        }
        let need = need(hour, None);
        assert_eq!(
            refused(Stage::Implement, t(1320), &deadline, &need)
                .unwrap()
                .to_string(),
            "the deadline 07:00 ends the night: the implement stage may take up to 1h (its --stage-timeout) and only 38m were left: it starts on the next run"
        );
        let need = self::need(hour, Some((125_000, 2)));
        assert_eq!(
            refused(Stage::Review, t(3540), &deadline, &need)
                .unwrap()
                .to_string(),
            "the deadline 07:00 ends the night: the commit stage may take up to 2m 05s (its median in this run, of 2 stages) and only 1m were left: it starts on the next run"
        );
        assert_eq!(left(t(3700), t(3600)), Duration::ZERO);
    }

    #[test]
    fn the_pause_between_iterations_is_refused_when_it_would_end_at_or_after_the_deadline() {
        let deadline = Deadline {
            at: t(600),
            shown: "07:00".into(),
        };
        let minute = Duration::from_secs(60);
        assert!(check_pause(None, t(0), minute * 60).is_ok());
        assert!(check_pause(Some(&deadline), t(0), minute * 9).is_ok());
        assert!(check_pause(Some(&deadline), t(0), minute * 10).is_err());
        assert_eq!(
            check_pause(Some(&deadline), t(599), minute)
                .unwrap_err()
                .to_string(),
            "the deadline 07:00 ends the night: the next iteration would start after it (1m from now)"
        );
    }
}
