//! The watchdog's decisions, pure: is the run moving or stalled, and what comes after a run
//! that ended — the night's end with its code, a restart after a backoff, or giving up.
//!
//! The decision a reader must know: a stall is measured on the watchdog's own monotonic
//! clock, as the time the run's heartbeat has not changed — never by comparing the heartbeat's
//! wall-clock time with now, which a suspended laptop or a clock step would turn into a false
//! stall the moment the machine wakes. Silence the run's own limits bound (`quiet_until`) is
//! left to the run, and [`QUIET_GRACE`] more for it to stop what it waited for and move on.

use std::time::Duration;

use crate::event::Lost;
use crate::settings::WatchPolicy;
use crate::state::lock::Heartbeat;
use crate::text;
use crate::timestamp::Timestamp;

/// How long past the end of a silence its own limits bound the run gets to move.
pub(crate) const QUIET_GRACE: Duration = Duration::from_secs(10);

/// The longest wait before a restart, however many came before it.
pub(crate) const MAX_RESTART_DELAY: Duration = Duration::from_secs(10 * 60);

/// The exit code of a Rust panic: a crash, not an end the run chose.
const PANIC_EXIT: u8 = 101;

/// What one look at the run's heartbeat says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// It moves, or is silent within its own limits.
    Moving,
    /// Nothing moved for `--stall-after`: what the watchdog saw, in words.
    Stalled(String),
}

/// Whether the run is stalled: its heartbeat `beat` (none yet: not even its lock taken) has
/// not changed for `unchanged_for` on the watchdog's clock, at wall-clock `now`.
pub(crate) fn health(
    beat: Option<&Heartbeat>,
    unchanged_for: Duration,
    now: Timestamp,
    stall_after: Duration,
) -> Health {
    if unchanged_for < stall_after {
        return Health::Moving;
    }
    if let Some(until) = beat.and_then(|b| b.quiet_until)
        && now.epoch_seconds()
            < until
                .epoch_seconds()
                .saturating_add(QUIET_GRACE.as_secs() as i64)
    {
        return Health::Moving;
    }
    Health::Stalled(match beat {
        Some(b) => format!(
            "nothing moved for {} (its last sign of progress: {})",
            text::duration(unchanged_for),
            b.moved
        ),
        None => format!(
            "it did not take its lock within {}",
            text::duration(unchanged_for)
        ),
    })
}

/// How a run ended, as the watchdog saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited with this code by itself.
    Exited(u8),
    /// This signal killed it.
    Killed(i32),
    /// It was adopted, and is gone with its lock left behind: it died, how is unknown.
    Vanished,
    /// The watchdog stopped it: it had stalled.
    Stopped,
}

/// What the watchdog does after a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The night is over: end with this exit code.
    End(u8),
    /// Start the run again after `delay`.
    Restart {
        /// Why it was lost.
        why: Lost,
        /// The wait first.
        delay: Duration,
    },
    /// Leave the run stopped: it was lost `--max-restarts` times in a row already.
    GiveUp(Lost),
}

/// What comes after `ending`, with `in_a_row` restarts already made since the last task the
/// run finished. A run that ended by itself ends the night with its code (nothing left, a
/// limit, the deadline, a stop for the person, Ctrl-C); one that died or stalled is started
/// again unless the restarts in a row are used up — or the night's deadline has passed
/// (`past_deadline`): then the night is over, as the run would have ended it.
pub(crate) fn after(
    ending: Ending,
    in_a_row: u32,
    policy: &WatchPolicy,
    past_deadline: bool,
) -> Next {
    let why = match ending {
        Ending::Exited(PANIC_EXIT) | Ending::Killed(_) | Ending::Vanished => Lost::Died,
        Ending::Exited(code) => return Next::End(code),
        Ending::Stopped => Lost::Stalled,
    };
    if past_deadline {
        return Next::End(0);
    }
    if in_a_row >= policy.max_restarts {
        return Next::GiveUp(why);
    }
    Next::Restart {
        why,
        delay: restart_delay(in_a_row, policy.restart_delay),
    }
}

/// The wait before the restart that follows `in_a_row` others: `first`, doubled for each,
/// at most [`MAX_RESTART_DELAY`] (or `first`, when that is longer).
pub(crate) fn restart_delay(in_a_row: u32, first: Duration) -> Duration {
    let doubled = first.saturating_mul(1u32 << in_a_row.min(16));
    doubled.min(MAX_RESTART_DELAY.max(first))
}

/// Why the watchdog gives up, for the person: `lost` holds why each run in a row was lost,
/// `last` what it saw the last time.
pub(crate) fn gave_up(lost: &[Lost], last: &str) -> String {
    let died = lost.iter().filter(|l| **l == Lost::Died).count();
    let how = if died == lost.len() {
        "died"
    } else if died == 0 {
        "stalled"
    } else {
        "died or stalled"
    };
    format!(
        "the run {how} {} in a row without finishing a task, the last time {last} — kern watch leaves it stopped: `kern log` shows its lines, `kern report` the night",
        text::count(lost.len(), "time", "times")
    )
}

/// `killed by SIGKILL in implement`: how a run ended, and in which phase of its lock.
pub(crate) fn ending_text(ending: Ending, phase: Option<&str>) -> String {
    let how = match ending {
        Ending::Exited(code) => format!("crashed (exit {code})"),
        Ending::Killed(signal) => format!("killed by {}", signal_name(signal)),
        Ending::Vanished => "vanished, its lock left behind".to_string(),
        Ending::Stopped => "stopped".to_string(),
    };
    match phase {
        Some(phase) => format!("{how} in {phase}"),
        None => format!("{how} before it took its lock"),
    }
}

/// `died` or `stalled`, for a run that was lost; `ended` for one that ended by itself.
pub(crate) fn lost_word(ending: Ending) -> &'static str {
    match ending {
        Ending::Exited(code) if code != PANIC_EXIT => "ended",
        Ending::Stopped => "stalled",
        _ => "died",
    }
}

/// `SIGKILL`, `SIGSEGV`, or `signal 40`.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;
    use crate::state::lock::Moved;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_epoch_seconds(1_795_000_000 + s)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_run_is_stalled_only_past_stall_after_and_past_its_own_limits() {
        let printing = Heartbeat {
            at: t(0),
            moved: Moved::Output {
                stage: Stage::Implement,
                bytes: 2048,
            },
            quiet_until: Some(t(900)),
        };
        let waiting = Heartbeat {
            at: t(0),
            moved: Moved::Waiting { until: t(7200) },
            quiet_until: None,
        };
        let stall = secs(900);
        let cases: &[(Option<&Heartbeat>, u64, i64, bool)] = &[
            // Changed within --stall-after: moving, whatever the wall clock says.
            (Some(&waiting), 899, 5000, false),
            (Some(&waiting), 900, 900, true),
            // A silent agent within its idle timeout (and the grace after it) is the run's.
            (Some(&printing), 900, 905, false),
            (Some(&printing), 1000, 909, false),
            (Some(&printing), 1000, 910, true),
            // A clock stepped back: the watchdog's own clock decides.
            (Some(&printing), 100, -5000, false),
            // No lock taken yet.
            (None, 899, 0, false),
            (None, 900, 0, true),
        ];
        for (beat, unchanged, now, stalled) in cases {
            let h = health(*beat, secs(*unchanged), t(*now), stall);
            assert_eq!(
                matches!(h, Health::Stalled(_)),
                *stalled,
                "{beat:?} unchanged {unchanged}s at {now}: {h:?}"
            );
        }
        assert_eq!(
            health(Some(&waiting), secs(960), t(960), stall),
            Health::Stalled(
                "nothing moved for 16m (its last sign of progress: a wait until 2026-11-18T13:06:40Z)"
                    .into()
            )
        );
        assert_eq!(
            health(None, secs(900), t(0), stall),
            Health::Stalled("it did not take its lock within 15m".into())
        );
    }

    #[test]
    fn a_run_that_ended_by_itself_ends_the_night_and_a_lost_one_restarts_until_the_bound() {
        let policy = WatchPolicy {
            stall_after: secs(900),
            max_restarts: 2,
            restart_delay: secs(30),
        };
        let restart = |why, delay| Next::Restart {
            why,
            delay: secs(delay),
        };
        let cases = [
            (Ending::Exited(0), 0, Next::End(0)),
            (Ending::Exited(4), 2, Next::End(4)),
            (Ending::Exited(143), 0, Next::End(143)),
            (Ending::Exited(101), 0, restart(Lost::Died, 30)),
            (Ending::Killed(9), 0, restart(Lost::Died, 30)),
            (Ending::Killed(9), 1, restart(Lost::Died, 60)),
            (Ending::Vanished, 0, restart(Lost::Died, 30)),
            (Ending::Stopped, 1, restart(Lost::Stalled, 60)),
            (Ending::Killed(9), 2, Next::GiveUp(Lost::Died)),
            (Ending::Stopped, 2, Next::GiveUp(Lost::Stalled)),
        ];
        for (ending, in_a_row, next) in cases {
            assert_eq!(
                after(ending, in_a_row, &policy, false),
                next,
                "{ending:?} {in_a_row}"
            );
        }
        // Past the deadline a lost run is not started again; one that ended says how.
        assert_eq!(after(Ending::Killed(9), 0, &policy, true), Next::End(0));
        assert_eq!(after(Ending::Stopped, 9, &policy, true), Next::End(0));
        assert_eq!(after(Ending::Exited(4), 0, &policy, true), Next::End(4));
        let never = WatchPolicy {
            max_restarts: 0,
            ..policy
        };
        assert_eq!(
            after(Ending::Killed(9), 0, &never, false),
            Next::GiveUp(Lost::Died)
        );
    }

    #[test]
    fn restarts_back_off_to_a_bound() {
        let cases = [
            (0, 30, 30),
            (1, 30, 60),
            (4, 30, 480),
            (5, 30, 600),
            (40, 30, 600),
            (3, 0, 0),
            (2, 3600, 3600),
        ];
        for (n, first, delay) in cases {
            assert_eq!(restart_delay(n, secs(first)), secs(delay), "{n} {first}");
        }
    }

    #[test]
    fn giving_up_names_how_the_runs_were_lost_and_where_to_look() {
        assert_eq!(
            gave_up(
                &[Lost::Died, Lost::Died, Lost::Died],
                "killed by SIGKILL in research"
            ),
            "the run died 3 times in a row without finishing a task, the last time killed by SIGKILL in research — kern watch leaves it stopped: `kern log` shows its lines, `kern report` the night"
        );
        assert!(gave_up(&[Lost::Stalled], "x").starts_with("the run stalled 1 time in a row"));
        assert!(
            gave_up(&[Lost::Died, Lost::Stalled], "x")
                .starts_with("the run died or stalled 2 times")
        );
        assert_eq!(
            ending_text(Ending::Killed(9), Some("implement")),
            "killed by SIGKILL in implement"
        );
        assert_eq!(
            ending_text(Ending::Exited(101), None),
            "crashed (exit 101) before it took its lock"
        );
        assert_eq!(
            ending_text(Ending::Killed(64), Some("research")),
            "killed by signal 64 in research"
        );
    }
}
