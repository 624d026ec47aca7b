//! How a run ends: the cause named (a repository gone, the budget spent in all, the deadline as
//! a planned end), the summary's last notes, the exit decided, and the run's end told once.
//!
//! The one decision a reader must know: a run that used its iterations still ends unfinished
//! (exit 4) when a task is blocked, or when the last task failed and work is left.

use crate::error::{Error, Result};
use crate::event::RunEvent;
use crate::pipeline::Cx;
use crate::pipeline::guard::SharedSpec;
use crate::pipeline::ledger::Ledger;
use crate::pipeline::teller::Teller;
use crate::reporter::voice;
use crate::spec;

/// Prints the summary, logs the end, and decides the exit of the run that ended with `result`:
/// its `ledger` holds the summary, `spec` the tasks left, `teller` tells the end; `detached`
/// when the run committed on no branch.
pub(super) fn finish(
    cx: Cx,
    ledger: &Ledger,
    spec: &SharedSpec,
    teller: &Teller,
    detached: bool,
    result: Result<()>,
) -> Result<()> {
    // Whatever failed first (a read of HEAD, a status), the cause is the lost repository.
    let result = match result {
        Err(e) if !matches!(e, Error::Interrupted { .. }) && cx.ws.repo.is_gone() => {
            Err(Error::RepositoryGone {
                git_dir: cx.ws.repo.git_dir(),
                state_dir: cx.ws.state_dir.dir(),
            })
        }
        // Tasks still in their stage when the budget was found spent finished it: the end
        // names what the run spent in all, as the summary does.
        Err(Error::BudgetSpent { limit, .. }) => Err(Error::BudgetSpent {
            spent: ledger.spent(),
            limit,
        }),
        other => other,
    };
    // The deadline is a planned end: said as how the run ended, exit 0 (or 4, as any end
    // with a blocked task).
    let (result, deadline) = match result {
        Err(Error::DeadlineReached { at, shown, why }) => {
            ledger.end_with(format!("the deadline {shown} ends the night: {why}"));
            (Ok(()), Some(at))
        }
        other => (other, None),
    };
    ledger.settle();
    if detached && ledger.committed_any() {
        let head = cx
            .ws
            .repo
            .head_oid()
            .map(|o| o.to_string())
            .unwrap_or_default();
        ledger.note(voice::commits_on_no_branch(&head));
    }
    let last_failed = ledger.last_failed();
    let result = result.and_then(|()| {
        let doc = spec.reload()?;
        let work_left = last_failed
            && spec::select_with(&doc, &cx.ws.select_options(cx.settings, &doc)).is_some();
        unfinished(doc.counts().blocked, work_left, &cx.ws.spec_display)
    });
    let summary = ledger.take_summary(result.as_ref().err().map(ToString::to_string));
    if let Err(e) = &result {
        teller.stopped(e);
    }
    teller.ended(
        RunEvent::RunEnd {
            ended: summary.ended.clone(),
            cost_usd: summary.cost_usd,
            exit_code: result.as_ref().map_or_else(Error::exit_code, |()| 0),
            iterations: summary.iterations,
            deadline,
        },
        &summary,
    );
    result
}

/// Whether a run that used its iterations still ends unfinished (exit 4): `blocked` tasks in
/// `spec_display`, or the last task failed with `work_left`.
fn unfinished(blocked: usize, work_left: bool, spec_display: &str) -> Result<()> {
    if blocked > 0 {
        Err(Error::Unfinished(format!(
            "{blocked} task{} blocked [!] — read the Blocked note{} in {spec_display}, fix, and set the task back to [ ]",
            if blocked == 1 { " is" } else { "s are" },
            if blocked == 1 { "" } else { "s" },
        )))
    } else if work_left {
        Err(Error::Unfinished(
            "the last task failed; its Attempt note says why — run kern again to retry".into(),
        ))
    } else {
        Ok(())
    }
}

/// How a run that used every iteration ended: `all 10 iterations ran`, `1 iteration ran`.
pub(in crate::pipeline) fn all_ran(total: u32) -> String {
    if total == 1 {
        "1 iteration ran".to_string()
    } else {
        format!("all {total} iterations ran")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_used_every_iteration_says_how_many() {
        assert_eq!(all_ran(1), "1 iteration ran");
        assert_eq!(all_ran(10), "all 10 iterations ran");
    }

    #[test]
    fn a_run_ends_unfinished_on_a_blocked_task_or_a_last_failure_with_work_left() {
        let said = |blocked, work_left| {
            unfinished(blocked, work_left, "SPEC.md").map_err(|e| e.to_string())
        };
        assert!(said(0, false).is_ok());
        assert!(
            said(1, false)
                .unwrap_err()
                .contains("1 task is blocked [!] — read the Blocked note in SPEC.md")
        );
        assert!(
            said(2, true)
                .unwrap_err()
                .contains("2 tasks are blocked [!] — read the Blocked notes in SPEC.md")
        );
        assert!(
            said(0, true)
                .unwrap_err()
                .contains("the last task failed; its Attempt note says why")
        );
    }
}
