//! A watched night in the report's pages (DESIGN.md section 20): the first line that says the
//! night was watched, and the lines of each watchdog — every restart with the gap it left, how
//! the watchdog ended — which the terminal page and Markdown print under "Watched".

use std::time::Duration;

use crate::state::run_report::{Report, WatchReport};
use crate::text::{clean, count, duration};

/// The report's first line when a watchdog kept the night going: `A watched night of 2 runs,
/// 1 restart (stalled 15m); the last: …`. `None` for a night nobody watched.
pub(super) fn first_line(report: &Report) -> Option<String> {
    let last = report.runs.last()?;
    if report.watches.is_empty() {
        return None;
    }
    let restarts: Vec<String> = report
        .watches
        .iter()
        .flat_map(|w| &w.restarts)
        .map(|r| format!("{} {}", r.why, duration(Duration::from_millis(r.gap_ms))))
        .collect();
    let restarts = match restarts.len() {
        0 => "no restart".to_string(),
        n => format!(
            "{} ({})",
            count(n, "restart", "restarts"),
            restarts.join(", ")
        ),
    };
    Some(format!(
        "A watched night of {}, {restarts}; the last: {}",
        count(report.runs.len(), "run", "runs"),
        clean(&last.headline)
    ))
}

/// The lines of one watchdog, each with its symbol (`↻` a restart, `✓` or `✗` its end).
pub(super) fn watch_lines(w: &WatchReport) -> Vec<(&'static str, String)> {
    let mut lines = vec![(
        "•",
        format!(
            "kern watch{}: {}, {}{}",
            w.pid.map(|p| format!(" pid {p}")).unwrap_or_default(),
            count(w.runs.len(), "run", "runs"),
            count(w.restarts.len(), "restart", "restarts"),
            if w.adopted.is_empty() {
                String::new()
            } else {
                format!(
                    " (adopted {})",
                    w.adopted
                        .iter()
                        .map(|p| format!("pid {p}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    )];
    for r in &w.restarts {
        lines.push((
            "↻",
            format!(
                "{} {} → {} (a gap of {}): run pid {} — {}",
                r.why,
                r.from,
                r.to,
                duration(Duration::from_millis(r.gap_ms)),
                r.run_pid,
                clean(&r.detail)
            ),
        ));
    }
    match (&w.ended, w.gave_up) {
        (Some(ended), true) => lines.push(("✗", format!("gave up: {}", clean(ended)))),
        (Some(ended), false) => lines.push((
            // A run that ended with another code (blocked, a usage error) is no success.
            if w.exit_code.unwrap_or(0) == 0 {
                "✓"
            } else {
                "•"
            },
            format!(
                "ended (exit {}): {}",
                w.exit_code.unwrap_or(0),
                clean(ended)
            ),
        )),
        (None, _) => lines.push(("•", "still watching, or killed".into())),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Lost;
    use crate::state::run_report::RestartInfo;
    use crate::timestamp::Timestamp;

    #[test]
    fn a_watchdog_says_its_restarts_and_gaps() {
        let t = |s: i64| Timestamp::from_epoch_seconds(1_795_000_000 + s);
        let w = WatchReport {
            watch: "watch-7-x".into(),
            pid: Some(7),
            stall_after_s: Some(900),
            runs: vec![40, 41],
            adopted: vec![40],
            restarts: vec![RestartInfo {
                why: Lost::Stalled,
                run_pid: 40,
                detail: "nothing moved for 15m".into(),
                from: t(0),
                to: t(900),
                gap_ms: 900_000,
            }],
            exit_code: Some(0),
            ended: Some("nothing left to do".into()),
            gave_up: false,
        };
        assert_eq!(
            watch_lines(&w),
            vec![
                ("•", "kern watch pid 7: 2 runs, 1 restart (adopted pid 40)".to_string()),
                (
                    "↻",
                    "stalled 2026-11-18T11:06:40Z → 2026-11-18T11:21:40Z (a gap of 15m): run pid 40 — nothing moved for 15m".to_string()
                ),
                ("✓", "ended (exit 0): nothing left to do".to_string()),
            ]
        );
    }

    #[test]
    fn a_watchdog_ended_with_another_code_is_no_tick() {
        let w = WatchReport {
            watch: "watch-8-x".into(),
            pid: Some(8),
            stall_after_s: Some(900),
            runs: vec![50],
            adopted: vec![],
            restarts: vec![],
            exit_code: Some(2),
            ended: Some("it stopped before its night began".into()),
            gave_up: false,
        };
        assert_eq!(
            watch_lines(&w)[1],
            (
                "•",
                "ended (exit 2): it stopped before its night began".to_string()
            )
        );
    }
}
