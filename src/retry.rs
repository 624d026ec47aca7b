//! What happens after a stage's agent failed (DESIGN.md section 6): retry after a delay, wait
//! for a usage limit to reset, give up with a note, or stop the run for the person.
//!
//! The one decision a reader must know: [`next_step`] is pure — failure class × retries so far
//! × time waited → [`Step`] — and table-tested here; the stage runner only sleeps, counts and
//! records. The retry delays are computed up front, exactly `--retries` of them, growing
//! exponentially with jitter (the `backoff` crate) and never above the maximum; which failures
//! are which class is the agent layer's call (`agent::failure::classify`).

use std::time::Duration;

use backoff::backoff::Backoff;

use crate::agent::failure::FailureClass;

/// How much a retry delay varies around its exponential value: ±25 %.
pub const JITTER: f64 = 0.25;

/// Each retry delay is this many times the previous one (before jitter).
pub const MULTIPLIER: f64 = 2.0;

/// The delays before each retry of a transient failure: exactly `policy.retries` of them,
/// growing from `first_delay` by [`MULTIPLIER`] up to `max_delay`, each varied by [`JITTER`]
/// and never above `max_delay`.
pub fn retry_delays(policy: &RetryPolicy) -> Vec<Duration> {
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
}

/// What to do after a stage's agent failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run the stage again after this delay (a transient failure).
    Retry(Duration),
    /// Wait this long for a usage limit to reset, then run the stage again.
    Wait(Duration),
    /// The stage failed for good: a failed attempt with this note.
    Fail(String),
    /// The run must stop for the person, with this message.
    Stop(String),
}

/// The decision after a failed try of a stage: `class` is how it failed, `retries` the
/// transient failures already retried, `waited` the usage-limit waits already spent, `delays`
/// the retry delays of the policy ([`retry_delays`]), `now` the time in seconds since the
/// epoch. Pure: the stage runner sleeps, counts and records.
pub fn next_step(
    class: &FailureClass,
    retries: u32,
    waited: Duration,
    policy: &RetryPolicy,
    delays: &[Duration],
    now: i64,
) -> Step {
    match class {
        FailureClass::Transient(reason) => match delays.get(retries as usize) {
            Some(delay) => Step::Retry(*delay),
            None if delays.is_empty() => Step::Fail(reason.clone()),
            None => Step::Fail(format!("{reason} (after {} retries)", delays.len())),
        },
        FailureClass::StageLimit(reason) => Step::Fail(reason.clone()),
        FailureClass::NeedsUser(message) => Step::Stop(message.clone()),
        FailureClass::UsageLimit { resets_at, message } => {
            let until_reset = match resets_at {
                Some(at) => Duration::from_secs(at.saturating_sub(now).max(0).unsigned_abs()),
                None => policy.first_delay,
            };
            let wait = until_reset.saturating_add(policy.reset_margin);
            if waited.saturating_add(wait) > policy.max_wait {
                Step::Stop(format!(
                    "{message} — the reset is {} away, longer than --max-wait ({}); run kern again after the reset, or raise --max-wait",
                    crate::reporter::text::duration(wait),
                    crate::reporter::text::duration(policy.max_wait)
                ))
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
                    &policy,
                    &delays,
                    now
                ),
                want,
                "{class:?} after {retries} retries, {waited}s waited"
            );
        }
        assert_eq!(
            next_step(&transient, 0, Duration::ZERO, &policy, &[], now),
            Step::Fail("API Error: 529 Overloaded.".into())
        );
    }
}
