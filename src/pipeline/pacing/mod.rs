//! `--pace` in the run: the gate ([`pace::gate`]) asked before each stage ([`pace_before`],
//! which pauses) and after each task ([`judge_pace`], which ends the run or hands the next
//! tasks to the fallback agent), with the line, the `paced` and `resumed` events and the
//! ledger's record of the pauses. Functions of what they use: the run's context, its teller,
//! its ledger (and the lock, to say a pause is a wait). With `--remote`, the gate judges by the
//! account's usage ledger on the remote (`refs/kern/pace/<account-hash>`): `pace_ledger`
//! merges the machines' readings (pure), `pace_sync` fetches and publishes it with the claims'
//! compare-and-swap push ([`account_windows`]), and the run judges before it takes its first
//! task too.
//!
//! The one decision a reader must know: a pause happens only before a stage, and a line that
//! cannot be waited for (past `--max-wait`, or no known reset) never stops a task under way:
//! the run takes no new task after it.
//!
//! No unit test here: the gate itself is `pace::gate` (tested in pace.rs); this file pauses,
//! hands over and tells; held by tests/integration/two_agents.rs and remote.rs.

mod pace_ledger;
mod pace_sync;

use super::cx::Cx;
use super::ledger::Ledger;
use super::pace;
use super::teller::Teller;
use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::state::lock::{Phase, RunLock};
use pace_sync::account_windows;

/// `--pace` after a task: `Some(why)` when no new task may be taken (said to the person);
/// a hand-over to the fallback agent is recorded and the run goes on. A window that a
/// pause can wait for is left to the gate before the next stage ([`pace_before`]).
pub(super) fn judge_pace(cx: Cx<'_>, teller: &Teller<'_>, ledger: &Ledger) -> Option<String> {
    let agent = cx.settings.agent.to_string();
    let gate = pace_gate(cx, teller, ledger, &agent, crate::stage::Stage::Research)?;
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
        ledger.hand_over(&agent, until);
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
    cx: Cx<'_>,
    teller: &Teller<'_>,
    ledger: &Ledger,
    agent: &str,
    stage: crate::stage::Stage,
) -> Option<pace::Gate> {
    let rules = pace::Rules {
        short: cx.settings.pace,
        week: cx.settings.pace_week,
    };
    if rules.short.is_none() && rules.week.is_none() {
        return None;
    }
    let now = crate::timestamp::window_now();
    let mine = ledger.pace_readings(agent, now)?;
    // With --remote: the account's view, this run's readings published to its ledger.
    let (readings, account) = account_windows(cx, teller, ledger, agent, mine, now);
    let so_far = ledger.paced_so_far(stage, readings.iter().map(|w| w.kind.as_str()));
    let words = if account {
        format!("the {agent} account")
    } else {
        agent.to_string()
    };
    let left = cx.settings.retry.max_wait.saturating_sub(so_far.waited);
    // The night's end on the windows' clock (the test clock may run ahead of the real one).
    let night_ends = cx.settings.deadline.as_ref().map(|d| {
        (
            now + d.at.epoch_seconds() - crate::timestamp::Timestamp::now().epoch_seconds(),
            d.shown.as_str(),
        )
    });
    Some(pace::gate(
        &rules,
        &pace::Ask {
            readings: &readings,
            agent: &words,
            stage,
            expected: &so_far.expected,
            now,
            wait_until: now.saturating_add(i64::try_from(left.as_secs()).unwrap_or(i64::MAX)),
            night_ends,
            resumed: &so_far.resumed,
        },
    ))
}

/// `--pace` before a stage that `agent` runs: pauses until the line allows it (a line, an
/// event before and after). A line that cannot be waited for lets a task under way finish;
/// the run takes no new task after it ([`judge_pace`]).
pub(super) async fn pace_before(
    (cx, teller, ledger): (Cx<'_>, &Teller<'_>, &Ledger),
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
    let Some(pace::Gate::Pause { until, kind, line }) = pace_gate(cx, teller, ledger, agent, stage)
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
    let now = crate::timestamp::window_now();
    let wait = std::time::Duration::from_secs((until - now).max(0).unsigned_abs())
        + cx.settings.retry.reset_margin;
    lock.set_phase(Phase::Waiting(stage))?;
    teller.emit(RunEvent::Told(Told::Waiting {
        reason: format!("--pace ({} window)", kind.replace('_', "-")),
        remaining: wait,
    }));
    let started = std::time::Instant::now();
    let waited = if crate::timestamp::pass_on_test_clock(
        i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
    ) {
        wait
    } else {
        if cx.interrupt.sleep_or_interrupt(wait).await {
            return Err(Error::Interrupted {
                signal: cx.interrupt.requested().unwrap_or(2),
            });
        }
        started.elapsed()
    };
    ledger.paced(&kind, until, waited);
    teller.emit(RunEvent::Resumed {
        task: Some(task.to_string()),
        stage,
        kind,
        waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
    });
    Ok(())
}
