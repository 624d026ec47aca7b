//! The run's time: its pauses, told to the heartbeat as they go (a wait that states its end is
//! progress, DESIGN.md section 20).

use std::time::{Duration, Instant};

use crate::pipeline::Run;
use crate::state::lock::{BEAT_EVERY, Moved};
use crate::timestamp::Timestamp;

/// `now` plus `d`, to the second.
pub(crate) fn after(now: Timestamp, d: Duration) -> Timestamp {
    Timestamp::from_epoch_seconds(
        now.epoch_seconds()
            .saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)),
    )
}

impl Run<'_> {
    /// Sleeps `total` (the pause between iterations), telling the run's heartbeat each second
    /// that it waits until its end; true when a stop was asked for meanwhile.
    pub(super) async fn pause(&self, total: Duration) -> bool {
        let end = Instant::now() + total;
        let until = after(Timestamp::now(), total);
        loop {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            self.ledger.beat.moved(Moved::Waiting { until }, None);
            if self
                .interrupt
                .sleep_or_interrupt((end - now).min(BEAT_EVERY))
                .await
            {
                return true;
            }
        }
    }
}
