//! What happens after a stage's agent failed (DESIGN.md section 6): retry after a delay, wait
//! for a usage limit to reset, run the stage on the other agent, give up with a note, or stop
//! the run for the person — and which of a stage's two agents a try runs on.
//!
//! The one decision a reader must know: [`next_step`] and [`choose_side`] are pure — failure
//! class × retries so far × time waited × the other agent's state → [`Step`] — and
//! table-tested here; the stage runner only sleeps, counts, switches and records. A usage limit
//! whose reset is further away than `--fallback-after` moves the stage to the other agent (the
//! fallback, or back to the main agent once its reset has passed); when both are limited, kern
//! waits for the earlier reset, bounded by `--max-wait`. [`AgentLimits`] remembers, for the
//! whole run, until when each agent is limited, so later stages go straight to the one that
//! can work. The retry delays are computed up front, exactly `--retries` of them, growing
//! exponentially with jitter (the `backoff` crate) and never above the maximum; which failures
//! are which class is the agent layer's call (`agent::failure::classify`).

use std::time::Duration;

use backoff::backoff::Backoff;

use crate::agent::failure::FailureClass;

/// How much a retry delay varies around its exponential value: ±25 %.
pub(crate) const JITTER: f64 = 0.25;

/// Each retry delay is this many times the previous one (before jitter).
pub(crate) const MULTIPLIER: f64 = 2.0;

/// The delays before each retry of a transient failure: exactly `policy.retries` of them,
/// growing from `first_delay` by [`MULTIPLIER`] up to `max_delay`, each varied by [`JITTER`]
/// and never above `max_delay`.
pub(crate) fn retry_delays(policy: &RetryPolicy) -> Vec<Duration> {
    let mut backoff = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(policy.first_delay)
        .with_randomization_factor(JITTER)
        .with_multiplier(MULTIPLIER)
        .with_max_interval(policy.max_delay)
        .with_max_elapsed_time(None)
        .build();
    (0..policy.retries)
        .map(|_| {
            backoff
                .next_backoff()
                .unwrap_or(policy.max_delay)
                .min(policy.max_delay)
        })
        .collect()
}

/// How failed stages are retried and how long a usage limit may be waited out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after a transient failure.
    pub retries: u32,
    /// The first delay.
    pub first_delay: Duration,
    /// The largest delay.
    pub max_delay: Duration,
    /// The longest wait for a usage-limit reset (all waits of a stage together).
    pub max_wait: Duration,
    /// Extra time after a usage-limit reset before the stage is tried again.
    pub reset_margin: Duration,
    /// A usage limit that resets later than this moves the stage to the other agent, when
    /// the stage has one (`--fallback-after`).
    pub fallback_after: Duration,
}

/// What to do after a stage's agent failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Run the stage again after this delay (a transient failure).
    Retry(Duration),
    /// Wait this long for a usage limit to reset, then run the stage again.
    Wait(Duration),
    /// Run the stage on the other agent after this wait (zero: at once): this one hit a usage
    /// limit that resets later than `--fallback-after`, or later than the other's own limit.
    Switch(Duration),
    /// The stage failed for good: a failed attempt with this note.
    Fail(String),
    /// The run must stop for the person, with this message.
    Stop(String),
}

/// Which of a stage's agents a try runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The stage's own agent: `--agent`, or `--review-agent` for the review.
    Primary,
    /// `--fallback-agent`.
    Fallback,
}

impl Side {
    /// The other side.
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Primary => Side::Fallback,
            Side::Fallback => Side::Primary,
        }
    }
}

/// What the decision knows about the stage's other agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Other {
    /// The stage has no other agent.
    None,
    /// It may be tried now.
    Free,
    /// It hit its own usage limit and may be tried again from this time (epoch seconds).
    LimitedUntil(i64),
}

impl Other {
    /// `self` as it stands at `now`: a limit that has passed is no limit.
    fn at(self, now: i64) -> Other {
        match self {
            Other::LimitedUntil(until) if until <= now => Other::Free,
            other => other,
        }
    }
}

/// Until when each agent of the run is at its usage limit (epoch seconds from which it may be
/// tried again), by the agent's name (`claude`, `codex`, `program:<path>`). Kept for the whole
/// run, so that a stage after the one that hit a limit goes straight to the other agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AgentLimits {
    until: Vec<(String, i64)>,
}

impl AgentLimits {
    /// When `agent` may be tried again, if that is after `now`.
    pub(crate) fn limited_until(&self, agent: &str, now: i64) -> Option<i64> {
        self.until
            .iter()
            .find(|(name, _)| name == agent)
            .map(|(_, until)| *until)
            .filter(|until| *until > now)
    }

    /// Records that `agent` may be tried again from `until`.
    pub(crate) fn set(&mut self, agent: &str, until: i64) {
        match self.until.iter_mut().find(|(name, _)| name == agent) {
            Some(entry) => entry.1 = until,
            None => self.until.push((agent.to_string(), until)),
        }
    }

    /// Takes in `other`'s knowledge: for each agent, the later of the two times.
    pub(crate) fn merge(&mut self, other: &AgentLimits) {
        for (agent, until) in &other.until {
            match self.until.iter_mut().find(|(name, _)| name == agent) {
                Some(entry) => entry.1 = entry.1.max(*until),
                None => self.until.push((agent.clone(), *until)),
            }
        }
    }

    /// `agent` as the other agent of a stage: [`Other::None`] when there is none.
    pub(crate) fn other(&self, agent: Option<&str>, now: i64) -> Other {
        match agent {
            None => Other::None,
            Some(agent) => match self.limited_until(agent, now) {
                Some(until) => Other::LimitedUntil(until),
                None => Other::Free,
            },
        }
    }
}

/// Which agent a stage's first try runs on: its own, unless that one is at its usage limit and
/// the fallback is not, or resets earlier. `primary_until` is when the stage's own agent may be
/// tried again (`None`: it may now), `fallback` the fallback's state. Pure.
pub(crate) fn choose_side(primary_until: Option<i64>, fallback: Other, now: i64) -> Side {
    let Some(primary_until) = primary_until.filter(|until| *until > now) else {
        return Side::Primary;
    };
    match fallback.at(now) {
        Other::None => Side::Primary,
        Other::Free => Side::Fallback,
        Other::LimitedUntil(until) if until < primary_until => Side::Fallback,
        Other::LimitedUntil(_) => Side::Primary,
    }
}

/// How long to wait for a usage limit that resets at `resets_at` (epoch seconds; unknown: the
/// first retry delay), plus the reset margin.
pub(crate) fn usage_wait(resets_at: Option<i64>, policy: &RetryPolicy, now: i64) -> Duration {
    let until_reset = match resets_at {
        Some(at) => Duration::from_secs(at.saturating_sub(now).max(0).unsigned_abs()),
        None => policy.first_delay,
    };
    until_reset.saturating_add(policy.reset_margin)
}

/// The decision after a failed try of a stage: `class` is how it failed, `retries` the
/// transient failures already retried, `waited` the usage-limit waits already spent, `other`
/// the stage's other agent, `delays` the retry delays of the policy ([`retry_delays`]), `now`
/// the time in seconds since the epoch. Pure: the stage runner sleeps, counts and records.
pub(crate) fn next_step(
    class: &FailureClass,
    retries: u32,
    waited: Duration,
    other: Other,
    policy: &RetryPolicy,
    delays: &[Duration],
    now: i64,
) -> Step {
    match class {
        FailureClass::Transient(reason) => match delays.get(retries as usize) {
            Some(delay) => Step::Retry(*delay),
            None if delays.is_empty() => Step::Fail(reason.clone()),
            None => Step::Fail(format!(
                "{reason} (after {})",
                crate::text::count(delays.len(), "retry", "retries")
            )),
        },
        FailureClass::StageLimit(reason) => Step::Fail(reason.clone()),
        FailureClass::NeedsUser(message) => Step::Stop(message.clone()),
        FailureClass::UsageLimit { resets_at, message } => {
            let own = usage_wait(*resets_at, policy, now);
            let (wait, switch, both) = match other.at(now) {
                Other::Free if own > policy.fallback_after => return Step::Switch(Duration::ZERO),
                Other::Free | Other::None => (own, false, false),
                Other::LimitedUntil(until) => {
                    let theirs = Duration::from_secs(until.saturating_sub(now).unsigned_abs());
                    (own.min(theirs), theirs < own, true)
                }
            };
            if waited.saturating_add(wait) > policy.max_wait {
                Step::Stop(format!(
                    "{message} — {} {} away, longer than --max-wait ({}); run kern again after the reset, or raise --max-wait",
                    if both {
                        "both agents are at their usage limits and the earlier reset is"
                    } else {
                        "the reset is"
                    },
                    crate::text::duration(wait),
                    crate::text::duration(policy.max_wait)
                ))
            } else if switch {
                Step::Switch(wait)
            } else {
                Step::Wait(wait)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_grow_with_jitter_up_to_the_maximum() {
        let policy = RetryPolicy {
            retries: 8,
            first_delay: Duration::from_secs(30),
            max_delay: Duration::from_secs(600),
            max_wait: Duration::from_secs(3600),
            reset_margin: Duration::from_secs(60),
            fallback_after: Duration::from_secs(900),
        };
        // Jitter makes each run differ; the bounds hold every time.
        for _ in 0..20 {
            let delays = retry_delays(&policy);
            assert_eq!(delays.len(), 8);
            for (i, delay) in delays.iter().enumerate() {
                let base = (30.0 * MULTIPLIER.powi(i as i32)).min(600.0);
                let low = Duration::from_secs_f64(base * (1.0 - JITTER) - 0.001);
                let high = Duration::from_secs_f64(base * (1.0 + JITTER)).min(policy.max_delay);
                assert!(*delay >= low && *delay <= high, "delay {i}: {delay:?}");
            }
        }
        let none = RetryPolicy {
            retries: 0,
            ..policy
        };
        assert_eq!(retry_delays(&none), Vec::<Duration>::new());
        let zero = RetryPolicy {
            retries: 3,
            first_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            ..policy
        };
        assert_eq!(retry_delays(&zero), vec![Duration::ZERO; 3]);
    }

    #[test]
    fn next_step_follows_the_failure_class() {
        let policy = RetryPolicy {
            retries: 2,
            first_delay: Duration::from_secs(30),
            max_delay: Duration::from_secs(600),
            max_wait: Duration::from_secs(3600),
            reset_margin: Duration::from_secs(60),
            fallback_after: Duration::from_secs(900),
        };
        let delays = [Duration::from_secs(30), Duration::from_secs(60)];
        let now = 1_000_000;
        let transient = FailureClass::Transient("API Error: 529 Overloaded.".into());
        let limit = |in_secs: i64| FailureClass::UsageLimit {
            resets_at: Some(now + in_secs),
            message: "You've hit your session limit".into(),
        };
        let cases: Vec<(FailureClass, u32, u64, Step)> = vec![
            (transient.clone(), 0, 0, Step::Retry(Duration::from_secs(30))),
            (transient.clone(), 1, 0, Step::Retry(Duration::from_secs(60))),
            (
                transient.clone(),
                2,
                0,
                Step::Fail("API Error: 529 Overloaded. (after 2 retries)".into()),
            ),
            (
                FailureClass::StageLimit("Reached maximum number of turns (5)".into()),
                0,
                0,
                Step::Fail("Reached maximum number of turns (5)".into()),
            ),
            (
                FailureClass::NeedsUser("claude is not logged in".into()),
                0,
                0,
                Step::Stop("claude is not logged in".into()),
            ),
            (limit(300), 0, 0, Step::Wait(Duration::from_secs(360))),
            (limit(-5), 0, 0, Step::Wait(Duration::from_secs(60))),
            (
                FailureClass::UsageLimit {
                    resets_at: None,
                    message: "usage limit".into(),
                },
                0,
                0,
                Step::Wait(Duration::from_secs(90)),
            ),
            (limit(3000), 0, 600, Step::Stop(
                "You've hit your session limit — the reset is 51m away, longer than --max-wait (1h); run kern again after the reset, or raise --max-wait".into(),
            )),
            (limit(3540), 0, 0, Step::Wait(Duration::from_secs(3600))),
        ];
        for (class, retries, waited, want) in cases {
            assert_eq!(
                next_step(
                    &class,
                    retries,
                    Duration::from_secs(waited),
                    Other::None,
                    &policy,
                    &delays,
                    now
                ),
                want,
                "{class:?} after {retries} retries, {waited}s waited"
            );
        }
        assert_eq!(
            next_step(
                &transient,
                0,
                Duration::ZERO,
                Other::None,
                &policy,
                &[],
                now
            ),
            Step::Fail("API Error: 529 Overloaded.".into())
        );
    }

    #[test]
    fn a_far_usage_limit_moves_the_stage_to_the_other_agent() {
        let policy = RetryPolicy {
            retries: 2,
            first_delay: Duration::from_secs(30),
            max_delay: Duration::from_secs(600),
            max_wait: Duration::from_secs(6 * 3600),
            reset_margin: Duration::from_secs(60),
            fallback_after: Duration::from_secs(900),
        };
        let delays = [Duration::from_secs(30), Duration::from_secs(60)];
        let now = 1_000_000;
        let limit = |in_secs: i64| FailureClass::UsageLimit {
            resets_at: Some(now + in_secs),
            message: "You've hit your 5-hour limit".into(),
        };
        let five_hours = 5 * 3600;
        // (class, waited, other, step)
        let cases: Vec<(FailureClass, u64, Other, Step)> = vec![
            // A far reset and a free other agent: switch at once.
            (limit(five_hours), 0, Other::Free, Step::Switch(Duration::ZERO)),
            // 14 min + 1 min margin is not further than 15 min: wait on this agent.
            (limit(840), 0, Other::Free, Step::Wait(Duration::from_secs(900))),
            (limit(841), 0, Other::Free, Step::Switch(Duration::ZERO)),
            // No other agent: wait as before.
            (
                limit(five_hours),
                0,
                Other::None,
                Step::Wait(Duration::from_secs(18_060)),
            ),
            // The other's limit has passed: it is free.
            (
                limit(five_hours),
                0,
                Other::LimitedUntil(now),
                Step::Switch(Duration::ZERO),
            ),
            // Both limited: wait for the earlier one, then run on that agent.
            (
                limit(five_hours),
                0,
                Other::LimitedUntil(now + 3600),
                Step::Switch(Duration::from_secs(3600)),
            ),
            (
                limit(1800),
                0,
                Other::LimitedUntil(now + 3600),
                Step::Wait(Duration::from_secs(1860)),
            ),
            // Both limited past --max-wait: stop, saying both are.
            (
                limit(7 * 3600),
                0,
                Other::LimitedUntil(now + 7 * 3600),
                Step::Stop("You've hit your 5-hour limit — both agents are at their usage limits and the earlier reset is 7h away, longer than --max-wait (6h); run kern again after the reset, or raise --max-wait".into()),
            ),
            // The waits already spent count.
            (
                limit(five_hours),
                3 * 3600,
                Other::LimitedUntil(now + 4 * 3600),
                Step::Stop("You've hit your 5-hour limit — both agents are at their usage limits and the earlier reset is 4h away, longer than --max-wait (6h); run kern again after the reset, or raise --max-wait".into()),
            ),
            // Other classes never switch.
            (
                FailureClass::Transient("overloaded".into()),
                0,
                Other::Free,
                Step::Retry(Duration::from_secs(30)),
            ),
            (
                FailureClass::NeedsUser("not logged in".into()),
                0,
                Other::Free,
                Step::Stop("not logged in".into()),
            ),
        ];
        for (class, waited, other, want) in cases {
            assert_eq!(
                next_step(
                    &class,
                    0,
                    Duration::from_secs(waited),
                    other,
                    &policy,
                    &delays,
                    now
                ),
                want,
                "{class:?} with {other:?}, {waited}s waited"
            );
        }
        let at_once = RetryPolicy {
            fallback_after: Duration::ZERO,
            reset_margin: Duration::ZERO,
            ..policy
        };
        assert_eq!(
            next_step(
                &limit(1),
                0,
                Duration::ZERO,
                Other::Free,
                &at_once,
                &delays,
                now
            ),
            Step::Switch(Duration::ZERO),
            "--fallback-after 0 switches on any limit still ahead"
        );
        assert_eq!(
            next_step(
                &limit(0),
                0,
                Duration::ZERO,
                Other::Free,
                &at_once,
                &delays,
                now
            ),
            Step::Wait(Duration::ZERO),
            "a limit already reset is tried again on the same agent"
        );
    }

    #[test]
    fn a_stage_starts_on_the_agent_that_can_work() {
        let now = 1_000;
        let table = [
            (None, Other::None, Side::Primary),
            (None, Other::Free, Side::Primary),
            (None, Other::LimitedUntil(2_000), Side::Primary),
            // The main agent's reset has passed: back to it.
            (Some(now), Other::Free, Side::Primary),
            (Some(999), Other::LimitedUntil(5_000), Side::Primary),
            (Some(2_000), Other::None, Side::Primary),
            (Some(2_000), Other::Free, Side::Fallback),
            (Some(2_000), Other::LimitedUntil(now), Side::Fallback),
            (Some(2_000), Other::LimitedUntil(1_500), Side::Fallback),
            (Some(2_000), Other::LimitedUntil(2_000), Side::Primary),
            (Some(2_000), Other::LimitedUntil(3_000), Side::Primary),
        ];
        for (primary, fallback, want) in table {
            assert_eq!(
                choose_side(primary, fallback, now),
                want,
                "{primary:?} {fallback:?}"
            );
        }
        assert_eq!(Side::Primary.other(), Side::Fallback);
        assert_eq!(Side::Fallback.other(), Side::Primary);
    }

    #[test]
    fn agent_limits_are_remembered_per_agent_until_they_pass() {
        let mut limits = AgentLimits::default();
        assert_eq!(limits.limited_until("claude", 100), None);
        limits.set("claude", 500);
        limits.set("codex", 300);
        limits.set("claude", 600);
        assert_eq!(limits.limited_until("claude", 100), Some(600));
        assert_eq!(
            limits.limited_until("claude", 600),
            None,
            "from then on it may run"
        );
        assert_eq!(limits.other(Some("codex"), 100), Other::LimitedUntil(300));
        assert_eq!(limits.other(Some("codex"), 300), Other::Free);
        assert_eq!(limits.other(Some("program:/a"), 100), Other::Free);
        assert_eq!(limits.other(None, 100), Other::None);
    }
}
