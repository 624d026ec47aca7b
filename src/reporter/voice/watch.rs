//! The words of `kern watch` (DESIGN.md section 20): its lines for the person and its
//! `--notify` events, as `voice` words the run's.

use super::{EventKind, Said};
use crate::event::{Lost, RunEvent, Told};
use crate::text;

/// The lines for a watchdog's happening; `None` when `event` is not one.
pub(super) fn said(event: &RunEvent) -> Option<Vec<Said>> {
    use Said::{Info, Warn};
    Some(match event {
        RunEvent::WatchStart {
            pid,
            stall_after_s,
            max_restarts,
        } => vec![Info(format!(
            "watching the night (pid {pid}): a run that dies, or shows no progress for {}, is started again — at most {} in a row",
            text::duration(std::time::Duration::from_secs(*stall_after_s)),
            text::count(*max_restarts as usize, "time", "times")
        ))],
        RunEvent::WatchRun {
            pid,
            adopted: false,
        } => vec![Info(format!("started the run (pid {pid})"))],
        RunEvent::WatchRun { pid, adopted: true } => vec![Info(format!(
            "adopted the run pid {pid}, which was going without a watchdog: watched from now on"
        ))],
        RunEvent::Told(Told::RunLost {
            why,
            run_pid,
            detail,
            delay,
            restart,
            of,
        }) => vec![Warn(format!(
            "{} — {}",
            lost_text(*why, *run_pid, detail),
            if delay.is_zero() {
                format!("starting it again (restart {restart} of at most {of} in a row)")
            } else {
                format!(
                    "starting it again in {} (restart {restart} of at most {of} in a row)",
                    text::duration(*delay)
                )
            }
        ))],
        RunEvent::WatchRestart { .. } => Vec::new(),
        RunEvent::WatchEnd {
            exit_code,
            ended,
            gave_up: false,
        } => vec![Info(format!("the night ends (exit {exit_code}): {ended}"))],
        // The error that ends the watchdog says it.
        RunEvent::WatchEnd { gave_up: true, .. } => Vec::new(),
        _ => return None,
    })
}

/// The `--notify` event for a watchdog's happening, when it is one a notifier hears about.
pub(super) fn notice(event: &RunEvent) -> Option<(EventKind, serde_json::Value)> {
    match event {
        RunEvent::Told(Told::RunLost {
            why,
            run_pid,
            detail,
            delay,
            restart,
            of,
        }) => Some((
            match why {
                Lost::Died => EventKind::RunDied,
                Lost::Stalled => EventKind::RunStalled,
            },
            serde_json::json!({
                "text": format!(
                    "{} — it starts again{} (restart {restart} of at most {of})",
                    lost_text(*why, *run_pid, detail),
                    if delay.is_zero() { String::new() } else { format!(" in {}", text::duration(*delay)) }
                ),
                "why": why,
                "run_pid": run_pid,
                "detail": detail,
                "restart": restart,
                "max_restarts": of,
                "delay_s": delay.as_secs(),
            }),
        )),
        RunEvent::WatchEnd {
            exit_code,
            ended,
            gave_up: true,
        } => Some((
            EventKind::WatchGaveUp,
            serde_json::json!({
                "text": ended.lines().next().unwrap_or(""),
                "exit_code": exit_code,
                "message": ended,
            }),
        )),
        _ => None,
    }
}

/// `the run (pid 4242) stalled: nothing moved for 15m …`.
fn lost_text(why: Lost, pid: i32, detail: &str) -> String {
    format!("the run (pid {pid}) {why}: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lost_run_is_said_and_notified_with_its_restart() {
        let lost = RunEvent::Told(Told::RunLost {
            why: Lost::Stalled,
            run_pid: 4242,
            detail: "nothing moved for 15m".into(),
            delay: Duration::from_secs(30),
            restart: 1,
            of: 5,
        });
        assert_eq!(
            said(&lost),
            Some(vec![Said::Warn(
                "the run (pid 4242) stalled: nothing moved for 15m — starting it again in 30s (restart 1 of at most 5 in a row)".into()
            )])
        );
        let (kind, fields) = notice(&lost).unwrap();
        assert_eq!(kind, EventKind::RunStalled);
        assert_eq!(
            fields["text"],
            "the run (pid 4242) stalled: nothing moved for 15m — it starts again in 30s (restart 1 of at most 5)"
        );
        assert_eq!(fields["why"], "stalled");
        let gave_up = RunEvent::WatchEnd {
            exit_code: 1,
            ended: "the run died 3 times in a row".into(),
            gave_up: true,
        };
        assert_eq!(said(&gave_up), Some(Vec::new()));
        assert_eq!(notice(&gave_up).unwrap().0, EventKind::WatchGaveUp);
        assert_eq!(said(&RunEvent::Hangup {}), None);
        assert_eq!(
            said(&RunEvent::WatchRun {
                pid: 7,
                adopted: true
            }),
            Some(vec![Said::Info(
                "adopted the run pid 7, which was going without a watchdog: watched from now on"
                    .into()
            )])
        );
    }
}
