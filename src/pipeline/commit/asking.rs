//! The review's part in kern's commit: the approved work committed with the review's message,
//! and a message a hook refused sent back to the review for a new one.
//!
//! The decision a reader must know: a refused *message* is the review's to fix, not a failed
//! attempt — the review is asked for a new message only (`decide::after_refused_message`), the
//! work kept as it is; a parallel task's integration, which cannot wait for an agent, records the
//! request in the task's folder instead. A `pre-commit` refusal is a failed attempt, with the
//! done marks kern set put back to `[~]`.
//!
//! The loop that asks the review again runs a stage, so it is the loop's
//! (`Run::commit_asking_review` in `iteration`); this file holds what each refusal does.
//!
//! No unit test here: the choice is `decide::after_refused_message` (tested in decide.rs); this
//! file commits and ends the task, held by tests/integration/git_fidelity.rs and
//! hook_managers.rs with real hooks.

use super::{Integrated, Tried};
use crate::error::Result;
use crate::event::Told;
use crate::event::{IterationEnd, RunEvent};
use crate::pipeline::decide::{self, MESSAGE_REQUESTS, Next};
use crate::pipeline::end;
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::stage::inputs::RefusedMessage;
use crate::pipeline::{Target, TaskRun};
use crate::spec::{Edit, TaskIdentity, TaskState};
use crate::stage::{ImplementReport, ReviewReport};
use crate::state::journal::{self, LeftOut};
use crate::state::lock::RunLock;
use std::path::PathBuf;

/// COMMIT for a parallel task's integration (see the module docs): a message a hook
/// refuses goes back to the task's own review, which runs again in its worktree beside
/// the other tasks, asked for a new message — `refused_at` keeps the request until it is
/// answered (an iteration file: it goes with the task's folder once committed, or with its
/// other iteration files). After [`MESSAGE_REQUESTS`] refused new messages, a failed
/// attempt. `implement` and `review` are the reports of the work the review approved.
pub(in crate::pipeline) fn commit_for_integration(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &mut LeftOut,
    target: &mut Target,
    it: &mut TaskRun,
    (implement, review): (&ImplementReport, &ReviewReport),
    refused_at: &std::path::Path,
) -> Result<Integrated> {
    let (hook, output, message) =
        match super::try_commit(guard, lock, left_out, target, it, implement, review)? {
            Tried::Ended(end) => return Ok(Integrated::Ended(end)),
            Tried::HookFailed { hook, output } => {
                return refused(guard, lock, &left_out.paths, it, &hook, &output)
                    .map(Integrated::Ended);
            }
            Tried::MessageRefused {
                hook,
                output,
                message,
            } => (hook, output, message),
        };
    let refusals = journal::load::<RefusedMessage>(refused_at).map_or(0, |r| r.request) + 1;
    if let Some(end) =
        refused_too_often(guard, lock, &left_out.paths, it, &hook, &output, refusals)?
    {
        return Ok(Integrated::Ended(end));
    }
    guard.teller.emit(RunEvent::Told(Told::MessageRefused {
        hook: hook.clone(),
        subject: message.lines().next().unwrap_or("").to_string(),
        refusals,
        of: MESSAGE_REQUESTS,
        on_branch: true,
    }));
    journal::save(
        refused_at,
        &RefusedMessage {
            hook,
            output,
            message,
            request: refusals,
            requests: MESSAGE_REQUESTS,
        },
    )?;
    Ok(Integrated::ReviewAsked)
}

/// The `refusals`-th refused message of this work: past [`MESSAGE_REQUESTS`] new messages,
/// the task's failed attempt (how the iteration ends, see [`end::end_task`]); else none, and a
/// new one is asked.
pub(in crate::pipeline) fn refused_too_often(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    hook: &str,
    output: &str,
    refusals: u32,
) -> Result<Option<IterationEnd>> {
    let attempts = guard.attempts(it)?;
    match decide::after_refused_message(
        hook,
        output,
        refusals,
        &attempts,
        guard.cx.settings.max_attempts,
    ) {
        Next::End(decision) => end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(()) => Ok(None),
    }
}

/// A hook refused the commit for good: a failed attempt with its output.
pub(in crate::pipeline) fn refused(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    hook: &str,
    output: &str,
) -> Result<IterationEnd> {
    let attempts = guard.attempts(it)?;
    let decision =
        decide::after_refused_commit(hook, output, &attempts, guard.cx.settings.max_attempts);
    end::end_task(guard, lock, left_out, it, decision)
}

/// Sets back to `[~]` the done marks of a commit that did not happen: the task's, then
/// `parents` (those kern marked, nearest first) — each only while it is still done.
pub(super) fn reopen(
    guard: &SpecGuard<'_, '_>,
    it: &mut TaskRun,
    parents: &[TaskIdentity],
) -> Result<()> {
    let reopen = [Edit::SetState(TaskState::InProgress)];
    let doc = guard.spec.reload()?;
    if doc
        .find(&it.identity)
        .is_some_and(|t| doc.tasks()[t].state == TaskState::Done)
    {
        // The undo of kern's own done mark, asked of the file just now.
        let doc = guard.edit(&it.identity, &reopen)?;
        if let Some(task) = doc.find(&it.identity) {
            it.state = doc.tasks()[task].state;
        }
    }
    for parent in parents {
        let doc = guard.spec.reload()?;
        if doc
            .find(parent)
            .is_some_and(|t| doc.tasks()[t].state == TaskState::Done)
        {
            guard.edit(parent, &reopen)?;
        }
    }
    Ok(())
}
