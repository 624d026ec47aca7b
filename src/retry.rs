//! The delays between retries of a transient agent failure (DESIGN.md section 6).
//!
//! The one decision a reader must know: the delays are computed up front, exactly
//! `--retries` of them, growing exponentially with jitter (the `backoff` crate) and never
//! above `--retry-delay`'s maximum; which failures are retried is the agent layer's call
//! (`agent::failure::classify`).

use std::time::Duration;

use backoff::backoff::Backoff;

use crate::settings::RetryPolicy;

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
}
