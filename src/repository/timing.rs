//! What kern's own git work costs, for `-v`: a guard that logs a phase's wall time when it
//! ends, so `benches/run` (and a person chasing a slow iteration) can break an iteration down
//! by phase without a profiler.
//!
//! The one decision a reader must know: timings are `debug` events with target `kern::timing`
//! and the fields `phase` and `ms` (plus what the phase counted), never anything else; the
//! benchmark sums them by `phase`, so a phase's name is its interface.

use std::time::Instant;

/// Logs `phase` and its duration when dropped (or when [`Timed::done`] adds a count).
pub(crate) struct Timed {
    phase: &'static str,
    start: Instant,
    count: Option<usize>,
}

impl Timed {
    /// Starts timing `phase`.
    pub(crate) fn start(phase: &'static str) -> Timed {
        Timed {
            phase,
            start: Instant::now(),
            count: None,
        }
    }

    /// Records how many things (paths, entries) the phase handled.
    pub(crate) fn count(&mut self, count: usize) {
        self.count = Some(count);
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        let ms = self.start.elapsed().as_secs_f64() * 1000.0;
        match self.count {
            Some(count) => tracing::debug!(
                target: "kern::timing",
                phase = self.phase,
                ms = format_args!("{ms:.2}"),
                count,
                "timing"
            ),
            None => tracing::debug!(
                target: "kern::timing",
                phase = self.phase,
                ms = format_args!("{ms:.2}"),
                "timing"
            ),
        }
    }
}
