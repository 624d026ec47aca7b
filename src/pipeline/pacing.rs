//! `--pace` in the run: the gate ([`pace::gate`]) asked before each stage
//! ([`pace_before`], which pauses) and after each task ([`judge_pace`], which ends
//! the run or hands the next tasks to the fallback agent), with the line, the `paced` and
//! `resumed` events and the ledger's record of the pauses.
//!
//! The one decision a reader must know: a pause happens only before a stage, and a line that
//! cannot be waited for (past `--max-wait`, or no known reset) never stops a task under way:
//! the run takes no new task after it.

use super::ledger::{Books, Ledger};
use super::teller::Teller;
use super::{Cx, pace};
use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::settings::Settings;
use crate::state::lock::{Phase, RunLock};
use crate::timestamp::Timestamp;

/// `--pace` after a task: `Some(why)` when no new task may be taken (said to the person);
/// a hand-over to the fallback agent is recorded and the run goes on. A window that a
/// pause can wait for is left to the gate before the next stage ([`pace_before`]).
pub(super) fn judge_pace(cx: Cx, teller: &Teller, ledger: &Ledger) -> Option<String> {
    let agent = cx.settings.agent.to_string();
    let gate = pace_gate(cx.settings, ledger, &agent, crate::stage::Stage::Research)?;
    let (kind, until, line, paused) = match gate {
        pace::Gate::Go => return None,
        pace::Gate::Pause { until, kind, line } => (kind, Some(until), line, true),
        pace::Gate::Stop {
            kind,
            resets_at,
            line,
        } => (kind, resets_at, line, false),
    };
    let fallback = cx
        .settings
        .fallback_agent
        .as_ref()
        .map(std::string::ToString::to_string)
        .filter(|f| *f != agent);
    if let (Some(fallback), Some(until)) = (fallback, until) {
        let (said, _) = line.split_once(" — ").unwrap_or((&line, ""));
        teller.emit(RunEvent::Told(Told::Paced {
            line: format!("{said} — the next stages run on {fallback} until then"),
            handed_over: true,
        }));
        let mut books = ledger.books();
        books.limits.set(&agent, until);
        // Read again only when that agent reports anew.
        books.readings.retain(|(a, _)| *a != agent);
        return None;
    }
    if paused {
        // The gate before the next stage pauses.
        return None;
    }
    teller.emit(RunEvent::Paced {
        task: None,
        stage: crate::stage::Stage::Research,
        agent,
        kind,
        action: "stop".into(),
        until: None,
        line: line.clone(),
    });
    Some(line)
}

/// What `--pace` says of `agent`'s windows before a stage of kind `stage`; `None` without
/// `--pace`, or when the agent is at its usage limit (its stages run on the fallback).
fn pace_gate(
    settings: &Settings,
    ledger: &Ledger,
    agent: &str,
    stage: crate::stage::Stage,
) -> Option<pace::Gate> {
    let rules = pace::Rules {
        short: settings.pace,
        week: settings.pace_week,
    };
    let books = ledger.books();
    gate_of(
        &rules,
        settings.retry.max_wait,
        &books,
        (agent, stage),
        Timestamp::now().epoch_seconds(),
    )
}

/// `--pace` before a stage that `agent` runs: pauses until the line allows it (a line, an
/// event before and after). A line that cannot be waited for lets a task under way finish;
/// the run takes no new task after it ([`judge_pace`]).
pub(super) async fn pace_before(
    cx: Cx<'_>,
    teller: &Teller<'_>,
    ledger: &Ledger,
    lock: &mut RunLock,
    agent: &str,
    stage: crate::stage::Stage,
    task: &str,
) -> Result<()> {
    // With a fallback agent, the run hands the next task to it instead ([`judge_pace`]).
    if cx
        .settings
        .fallback_agent
        .as_ref()
        .is_some_and(|f| f.to_string() != agent)
    {
        return Ok(());
    }
    let Some(pace::Gate::Pause { until, kind, line }) =
        pace_gate(cx.settings, ledger, agent, stage)
    else {
        return Ok(());
    };
    teller.emit(RunEvent::Paced {
        task: Some(task.to_string()),
        stage,
        agent: agent.to_string(),
        kind: kind.clone(),
        action: "pause".into(),
        until: Some(until),
        line,
    });
    let now = Timestamp::now().epoch_seconds();
    let wait = std::time::Duration::from_secs((until - now).max(0).unsigned_abs())
        + cx.settings.retry.reset_margin;
    lock.set_phase(Phase::Waiting(stage))?;
    teller.emit(RunEvent::Told(Told::Waiting {
        reason: format!("--pace ({} window)", kind.replace('_', "-")),
        remaining: wait,
    }));
    let started = std::time::Instant::now();
    if cx.interrupt.sleep_or_interrupt(wait).await {
        return Err(Error::Interrupted {
            signal: cx.interrupt.requested().unwrap_or(2),
        });
    }
    let waited = started.elapsed();
    {
        let mut books = ledger.books();
        books.paced_for += waited;
        books.resumed.push((kind.clone(), until));
    }
    teller.emit(RunEvent::Resumed {
        task: Some(task.to_string()),
        stage,
        kind,
        waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
    });
    Ok(())
}

/// The gate of `rules` for `agent` before a stage of kind `stage` at `now` (epoch seconds),
/// from the `books`' latest readings, what each stage used of each window, and what is left of
/// `max_wait`; `None` without rules, or while the agent is at its usage limit.
fn gate_of(
    rules: &pace::Rules,
    max_wait: std::time::Duration,
    books: &Books,
    (agent, stage): (&str, crate::stage::Stage),
    now: i64,
) -> Option<pace::Gate> {
    if rules.short.is_none() && rules.week.is_none() {
        return None;
    }
    if books.limits.limited_until(agent, now).is_some() {
        return None;
    }
    let readings: Vec<_> = books
        .readings
        .iter()
        .filter(|(a, _)| a == agent)
        .map(|(_, w)| w.clone())
        .collect();
    let expected: Vec<(String, f64)> = readings
        .iter()
        .map(|w| {
            (
                w.kind.clone(),
                pace::expected_use(&books.window_spent, stage, &w.kind),
            )
        })
        .collect();
    let left = max_wait.saturating_sub(books.paced_for);
    Some(pace::gate(
        rules,
        &pace::Ask {
            readings: &readings,
            agent,
            stage,
            expected: &expected,
            now,
            wait_until: now.saturating_add(i64::try_from(left.as_secs()).unwrap_or(i64::MAX)),
            resumed: &books.resumed,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::Summary;
    use crate::settings::PaceLine;
    use crate::stage::Stage;
    use crate::state::lock::Beat;

    #[test]
    fn the_pace_is_asked_only_with_a_line_and_never_of_an_agent_at_its_usage_limit() {
        let ledger = Ledger::new(Summary::default(), Beat::default());
        let hour = std::time::Duration::from_secs(3600);
        let now = 1_795_000_000;
        let none = pace::Rules {
            short: None,
            week: None,
        };
        let half = pace::Rules {
            short: Some(PaceLine::AtMost(0.5)),
            week: None,
        };
        assert!(
            gate_of(
                &none,
                hour,
                &ledger.books(),
                ("claude", Stage::Implement),
                now
            )
            .is_none()
        );
        assert!(matches!(
            gate_of(
                &half,
                hour,
                &ledger.books(),
                ("claude", Stage::Implement),
                now
            ),
            Some(pace::Gate::Go)
        ));
        ledger.books().limits.set("claude", now + 600);
        assert!(
            gate_of(
                &half,
                hour,
                &ledger.books(),
                ("claude", Stage::Implement),
                now
            )
            .is_none()
        );
        assert!(matches!(
            gate_of(
                &half,
                hour,
                &ledger.books(),
                ("codex", Stage::Implement),
                now
            ),
            Some(pace::Gate::Go)
        ));
    }
}
