//! A watched night in the report (DESIGN.md section 20): a `kern watch`'s own lines in
//! `run.jsonl` (its id as their `run`) folded into a [`WatchReport`] — the runs it started or
//! adopted, every restart with the gap it left in the night, how it ended — and which runs of
//! the log belong to it.
//!
//! The one decision a reader must know: a run belongs to a watchdog when its `run_start` names
//! it (`watch`), or when the watchdog adopted it (`watch_run` with `adopted`: the run whose id
//! begins with that pid and that started before); nothing else ties them.

use serde::Serialize;

use super::{AttentionKind, EndState, RunReport};
use crate::event::{Lost, RunEvent};
use crate::state::run_log::LoggedEvent;
use crate::timestamp::Timestamp;

/// One watchdog's night.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct WatchReport {
    /// Its id (`watch-<pid>-<start>`).
    pub watch: String,
    /// Its pid.
    pub pid: Option<i32>,
    /// `--stall-after`, in seconds.
    pub stall_after_s: Option<u64>,
    /// The pids of the runs it watched, in order.
    pub runs: Vec<i32>,
    /// Those of them it adopted (already running when it came).
    pub adopted: Vec<i32>,
    /// Every restart, in order.
    pub restarts: Vec<RestartInfo>,
    /// Its exit code, once it ended.
    pub exit_code: Option<u8>,
    /// How it ended, in words.
    pub ended: Option<String>,
    /// It gave up on a run that kept dying or stalling.
    pub gave_up: bool,
}

/// A run lost and started again: the gap it left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RestartInfo {
    /// Why it was lost.
    pub why: Lost,
    /// The lost run's pid.
    pub run_pid: i32,
    /// What the watchdog saw.
    pub detail: String,
    /// The lost run's last sign of progress.
    pub from: Timestamp,
    /// The new start.
    pub to: Timestamp,
    /// The gap, in milliseconds.
    pub gap_ms: u64,
}

/// True when `events` are a watchdog's lines.
pub(crate) fn is_watch(events: &[&LoggedEvent]) -> bool {
    events.iter().any(|e| {
        matches!(
            e.event,
            RunEvent::WatchStart { .. }
                | RunEvent::WatchRun { .. }
                | RunEvent::WatchRestart { .. }
                | RunEvent::WatchEnd { .. }
        )
    })
}

/// The watchdog `id`'s night from its lines.
pub(crate) fn build_watch(id: &str, events: &[&LoggedEvent]) -> WatchReport {
    let mut w = WatchReport {
        watch: id.to_string(),
        pid: None,
        stall_after_s: None,
        runs: Vec::new(),
        adopted: Vec::new(),
        restarts: Vec::new(),
        exit_code: None,
        ended: None,
        gave_up: false,
    };
    for e in events {
        match &e.event {
            RunEvent::WatchStart {
                pid, stall_after_s, ..
            } => {
                w.pid = Some(*pid);
                w.stall_after_s = Some(*stall_after_s);
            }
            RunEvent::WatchRun { pid, adopted } => {
                w.runs.push(*pid);
                if *adopted {
                    w.adopted.push(*pid);
                }
            }
            RunEvent::WatchRestart {
                why,
                run_pid,
                detail,
                from,
                to,
                ..
            } => w.restarts.push(RestartInfo {
                why: *why,
                run_pid: *run_pid,
                detail: detail.clone(),
                from: *from,
                to: *to,
                gap_ms: u64::try_from(to.epoch_seconds() - from.epoch_seconds()).unwrap_or(0)
                    * 1000,
            }),
            RunEvent::WatchEnd {
                exit_code,
                ended,
                gave_up,
            } => {
                w.exit_code = Some(*exit_code);
                w.ended = Some(ended.clone());
                w.gave_up = *gave_up;
            }
            _ => {}
        }
    }
    w
}

/// A run its watchdog lost and started again ends as [`EndState::Restarted`], saying how it
/// was lost — not as a run that vanished or was interrupted, which the person would have to
/// start again.
pub(crate) fn settle_restarts(reports: &mut [RunReport], watches: &[WatchReport]) {
    for restart in watches.iter().flat_map(|w| &w.restarts) {
        let prefix = format!("{}-", restart.run_pid);
        let lost = reports
            .iter_mut()
            .rev()
            .find(|r| r.run.starts_with(&prefix) && r.started_at.is_none_or(|t| t <= restart.to));
        if let Some(r) = lost.filter(|r| {
            matches!(
                r.end,
                EndState::Vanished | EndState::Interrupted | EndState::Stopped
            )
        }) {
            r.end = EndState::Restarted;
            r.ended = Some(format!("it {}: {}", restart.why, restart.detail));
            r.needs_you
                .retain(|a| !matches!(a.kind, AttentionKind::Vanished | AttentionKind::Stopped));
            r.headline = super::headline(r);
        }
    }
}

/// The watchdog of the run `id` with `events`, among `groups` (every run and watchdog of the
/// log): the one its `run_start` names, or the one that adopted it.
pub(crate) fn watch_of<'a>(
    id: &str,
    events: &[&LoggedEvent],
    groups: &'a [(String, Vec<&LoggedEvent>)],
) -> Option<&'a str> {
    let named = events.iter().find_map(|e| match &e.event {
        RunEvent::RunStart { watch, .. } => watch.clone(),
        _ => None,
    });
    let started = events.first().map(|e| e.ts);
    groups
        .iter()
        .filter(|(_, g)| is_watch(g))
        .find(|(w, g)| {
            named.as_deref() == Some(w.as_str())
                || g.iter().any(|e| {
                    matches!(e.event, RunEvent::WatchRun { pid, adopted: true }
                        if id.starts_with(&format!("{pid}-")) && started <= Some(e.ts))
                })
        })
        .map(|(w, _)| w.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::run_log;

    const NIGHT: &str = r#"{"ts":"2026-11-18T22:00:00Z","run":"watch-7-2026-11-18T22:00:00Z","event":"watch_start","pid":7,"stall_after_s":900,"max_restarts":5}
{"ts":"2026-11-18T22:00:00Z","run":"watch-7-2026-11-18T22:00:00Z","event":"watch_run","pid":40,"adopted":false}
{"ts":"2026-11-18T22:00:01Z","run":"40-2026-11-18T22:00:01Z","event":"run_start","iterations":5,"delay_s":0,"agent":"claude","watch":"watch-7-2026-11-18T22:00:00Z"}
{"ts":"2026-11-18T23:29:00Z","run":"watch-7-2026-11-18T22:00:00Z","event":"watch_restart","why":"stalled","run_pid":40,"detail":"nothing moved for 15m","from":"2026-11-18T23:14:00Z","to":"2026-11-18T23:29:00Z","restart":1}
{"ts":"2026-11-18T23:29:00Z","run":"watch-7-2026-11-18T22:00:00Z","event":"watch_run","pid":41,"adopted":false}
{"ts":"2026-11-18T23:29:01Z","run":"41-2026-11-18T23:29:01Z","event":"run_start","iterations":5,"delay_s":0,"agent":"claude","watch":"watch-7-2026-11-18T22:00:00Z"}
{"ts":"2026-11-19T00:10:00Z","run":"50-2026-11-19T00:10:00Z","event":"run_start","iterations":1,"delay_s":0,"agent":"claude"}
{"ts":"2026-11-19T01:00:00Z","run":"watch-7-2026-11-18T22:00:00Z","event":"watch_end","exit_code":0,"ended":"nothing left to do"}
"#;

    #[test]
    fn a_watchdogs_night_has_its_runs_restarts_and_gaps() {
        let events = run_log::parse(NIGHT);
        let groups = super::super::runs(&events);
        let (id, watch) = &groups[0];
        assert!(is_watch(watch));
        assert!(!is_watch(&groups[1].1));
        let w = build_watch(id, watch);
        assert_eq!(w.pid, Some(7));
        assert_eq!(w.runs, vec![40, 41]);
        assert!(w.adopted.is_empty());
        assert_eq!(w.restarts.len(), 1);
        assert_eq!(w.restarts[0].why, Lost::Stalled);
        assert_eq!(w.restarts[0].gap_ms, 15 * 60 * 1000);
        assert_eq!(w.exit_code, Some(0));
        let of = |i: usize| watch_of(&groups[i].0, &groups[i].1, &groups);
        assert_eq!(of(1), Some(id.as_str()));
        assert_eq!(of(2), Some(id.as_str()));
        assert_eq!(of(3), None, "a run of its own");
    }

    #[test]
    fn a_run_its_watchdog_started_again_ends_restarted_not_vanished() {
        let events = run_log::parse(NIGHT);
        let report = super::super::build(&super::super::runs(&events), &|_| false);
        assert_eq!(report.watches.len(), 1);
        let lost = &report.runs[0];
        assert_eq!(lost.end, EndState::Restarted, "{lost:?}");
        assert_eq!(
            lost.headline,
            "Restarted by kern watch at iteration 0 of 5 — it stalled: nothing moved for 15m (0 committed)."
        );
        assert!(lost.needs_you.is_empty(), "{:?}", lost.needs_you);
        assert_eq!(report.runs[1].end, EndState::Vanished, "not restarted");
    }

    #[test]
    fn an_adopted_run_belongs_to_the_watchdog_that_adopted_it() {
        let text = r#"{"ts":"2026-11-18T22:00:00Z","run":"40-2026-11-18T22:00:00Z","event":"run_start","iterations":5,"delay_s":0,"agent":"claude"}
{"ts":"2026-11-18T22:05:00Z","run":"watch-8-2026-11-18T22:05:00Z","event":"watch_run","pid":40,"adopted":true}
{"ts":"2026-11-18T22:06:00Z","run":"40-2026-11-18T22:00:00Z","event":"run_end","ended":"nothing left to do","cost_usd":0.0,"exit_code":0}
"#;
        let events = run_log::parse(text);
        let groups = super::super::runs(&events);
        assert_eq!(
            watch_of(&groups[0].0, &groups[0].1, &groups),
            Some("watch-8-2026-11-18T22:05:00Z")
        );
        assert_eq!(build_watch(&groups[1].0, &groups[1].1).adopted, vec![40]);
    }
}
