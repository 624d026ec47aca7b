//! How a task's iteration ends for good: kern's decision applied, or the person followed, and
//! what either does to the work tree.
//!
//! The decision a reader must know: a task that ends without a commit (skipped, blocked, taken
//! away by the person) leaves no work in the tree and loses none: its changed paths are saved
//! under `refs/kern/attempts/<task>/<n>` and exactly those paths put back to HEAD. A task split
//! into subtasks takes its held tests out of the tree (`tests_first`'s red tests stay at the
//! commit they were saved at).

use std::path::PathBuf;

use crate::error::Result;
use crate::event::{IterationEnd, RunEvent, TaskTaken, Told};
use crate::pipeline::TaskRun;
use crate::pipeline::decide::{Decision, TaskOutcome};
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::guard::TaskNow;
use crate::reporter::voice::NEEDS_PERSON;
use crate::spec::{Edit, Quoted};
use crate::state::journal;
use crate::state::lock::{Phase, RunLock};

/// Ends the iteration as `decision` says: the person's file first, then the task's work
/// set aside when it ends for good, then the edits, output, summary and log.
pub(super) fn end_task(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    decision: Decision,
) -> Result<IterationEnd> {
    let ticket = match guard.task_now(it, &decision.edits)? {
        TaskNow::Ours(ticket) => ticket,
        other => return follow_person(guard, lock, left_out, it, &other),
    };
    let why = match &decision.outcome {
        TaskOutcome::Skipped { .. } => Some("skipped"),
        TaskOutcome::Blocked { .. } | TaskOutcome::NeedsPerson { .. } => Some("blocked"),
        _ => None,
    };
    if let TaskOutcome::Decomposed { .. } = &decision.outcome {
        tests_of_split_task(guard, it)?;
    }
    let mut edits = decision.edits;
    if let Some(why) = why
        && let Some(saved) = set_aside(guard, lock, left_out, it, why)?
    {
        name_saved_work(&mut edits, &saved);
    }
    guard.edit_task(it, ticket, &edits)?;
    let note = edits
        .iter()
        .find_map(|e| match e {
            Edit::AddBlocked(text) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let told = Ended {
        task: &it.title,
        line: it.line,
        issue: it.issue.clone(),
        note,
    };
    for event in ended(decision.outcome, &told) {
        if let RunEvent::Blocked { .. } = &event {
            journal::remove(&guard.cx.ws.state_dir.task_start());
        }
        guard.teller.emit(event);
    }
    Ok(decision.end)
}

/// The person took the task away (removed, renamed, or set its marker): kern follows —
/// it resurrects nothing and marks nothing in its place — and sets the task's work aside.
pub(super) fn follow_person(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    now: &TaskNow,
) -> Result<IterationEnd> {
    let how = match now {
        TaskNow::Gone => TaskTaken::Gone,
        TaskNow::SetByPerson(state) => TaskTaken::SetTo(state.marker_char()),
        TaskNow::Ours(_) => return Ok(IterationEnd::Progressed),
    };
    let saved = set_aside(guard, lock, left_out, it, "taken away by the person")?;
    guard.teller.emit(RunEvent::Told(Told::TaskTaken {
        task: it.title.clone(),
        how,
        saved,
    }));
    journal::remove(&guard.cx.ws.state_dir.task_start());
    Ok(IterationEnd::Progressed)
}

/// Saves the task's changes under `refs/kern/attempts/<task>/<n>` and puts exactly those
/// paths back to HEAD; the ref, or `None` when the task left nothing.
pub(super) fn set_aside(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &TaskRun,
    why: &str,
) -> Result<Option<String>> {
    let paths = crate::pipeline::audit::changed_paths(
        &guard.cx.ws.repo,
        &crate::pipeline::audit::untouchable(guard.cx.ws, &it.start.excluded, left_out),
    )?;
    if paths.is_empty() {
        return Ok(None);
    }
    lock.set_phase(Phase::Writing)?;
    let slug = crate::text::slug(&it.title);
    let git_ref = crate::pipeline::audit::put_aside_at_next(
        guard.cx.ws,
        guard.spec,
        &format!("refs/kern/attempts/{slug}/"),
        &paths,
        &format!(
            "kern: the work of {}, set aside ({why})\n",
            Quoted(&it.title)
        ),
    )?;
    guard.teller.emit(RunEvent::SetAside {
        task: it.title.clone(),
        git_ref: git_ref.clone(),
        paths: paths.iter().map(|p| p.display().to_string()).collect(),
        why: why.to_string(),
    });
    Ok(Some(git_ref))
}

/// `Some(end)` when the person took the task away since kern last wrote it (kern then
/// follows), before the next stage starts.
pub(super) fn still_ours(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    match guard.task_now(it, &[])? {
        TaskNow::Ours(_) => Ok(None),
        other => follow_person(guard, lock, left_out, it, &other).map(Some),
    }
}

/// The task was split into subtasks: its held tests (they prove the whole task, which no
/// subtask alone makes pass) leave the work tree — they stay at the commit they were saved
/// at — and each subtask starts without them.
pub(super) fn tests_of_split_task(guard: &SpecGuard<'_, '_>, it: &mut TaskRun) -> Result<()> {
    let Some(red) = it.start.red_of(&it.identity).cloned() else {
        return Ok(());
    };
    let paths: Vec<PathBuf> = red.tests.iter().map(PathBuf::from).collect();
    guard.after(|| guard.cx.ws.repo.restore_paths(&paths))?;
    guard.teller.emit(RunEvent::SetAside {
        task: it.title.clone(),
        git_ref: red.saved.clone(),
        paths: red.tests.clone(),
        why: "the task was split: its tests wait there for the whole of it".into(),
    });
    it.start.red = None;
    journal::save(&guard.cx.ws.state_dir.task_start(), &it.start)
}

/// Adds where the task's work was set aside to its Skipped or Blocked note.
fn name_saved_work(edits: &mut [Edit], saved: &str) {
    for edit in edits {
        if let Edit::AddSkipped(text) | Edit::AddBlocked(text) = edit {
            text.push_str(&format!(" — its work is saved at `{saved}`"));
        }
    }
}

/// The task whose end is told: its title, its line, its issue and its Blocked note.
struct Ended<'a> {
    task: &'a str,
    line: usize,
    issue: Option<String>,
    note: String,
}

/// What happened when the task `told` names ended with `outcome`, in the order it is told.
fn ended(outcome: TaskOutcome, told: &Ended<'_>) -> Vec<RunEvent> {
    let task = told.task.to_string();
    let blocked = |task: &String, why| RunEvent::Blocked {
        task: task.clone(),
        why,
        line: told.line,
        issue: told.issue.clone(),
        note: told.note.clone(),
    };
    match outcome {
        TaskOutcome::Skipped { reason } => vec![RunEvent::Skipped {
            task,
            reason,
            issue: told.issue.clone(),
        }],
        TaskOutcome::Decomposed { subtasks } => vec![RunEvent::Decomposed { task, subtasks }],
        TaskOutcome::Failed { attempt, note } => vec![RunEvent::AttemptFailed {
            task,
            attempt,
            note,
            ends_task: false,
        }],
        TaskOutcome::NeedsPerson { question } => {
            vec![blocked(&task, format!("{NEEDS_PERSON}{question}"))]
        }
        TaskOutcome::Blocked { attempt, note, why } => vec![
            RunEvent::AttemptFailed {
                task: task.clone(),
                attempt,
                note,
                ends_task: true,
            },
            blocked(&task, why),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told() -> Ended<'static> {
        Ended {
            task: "Parse dates",
            line: 7,
            issue: Some("acme/app#12".into()),
            note: "the note".into(),
        }
    }

    #[test]
    fn a_block_after_a_last_failed_attempt_is_told_as_the_attempt_then_the_block() {
        let events = ended(
            TaskOutcome::Blocked {
                attempt: 3,
                note: "the test failed".into(),
                why: "3 failed attempts".into(),
            },
            &told(),
        );
        assert!(matches!(
            &events[..],
            [
                RunEvent::AttemptFailed { attempt: 3, ends_task: true, .. },
                RunEvent::Blocked { line: 7, why, issue: Some(issue), note, .. },
            ] if why == "3 failed attempts" && issue == "acme/app#12" && note == "the note"
        ));
        let asked = ended(
            TaskOutcome::NeedsPerson {
                question: "which zone?".into(),
            },
            &told(),
        );
        assert!(matches!(
            &asked[..],
            [RunEvent::Blocked { why, .. }] if why == &format!("{NEEDS_PERSON}which zone?")
        ));
    }

    #[test]
    fn the_saved_work_is_named_in_the_skipped_or_blocked_note_only() {
        let mut edits = vec![
            Edit::AddSkipped("too big".into()),
            Edit::AddAttempt("failed".into()),
        ];
        name_saved_work(&mut edits, "refs/kern/attempts/t/1");
        assert_eq!(
            edits,
            [
                Edit::AddSkipped("too big — its work is saved at `refs/kern/attempts/t/1`".into()),
                Edit::AddAttempt("failed".into()),
            ]
        );
    }
}
