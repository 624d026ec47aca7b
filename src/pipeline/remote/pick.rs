//! Which tasks a `--remote` run starts: the picks of [`schedule::pick`], each claimed on the
//! remote before it starts.
//!
//! The one decision a reader must know: tasks other machines hold count as running (their
//! chains wait too), and a claim another machine won meanwhile sends the pick on to the next
//! task; when tasks are left that only others hold, the run waits for them
//! ([`super::Remote::waiting`], polled every [`claim_poll`]) instead of ending.
//!
//! No unit test here: it claims tasks on a git remote; what a claim may take is `claim`'s
//! (tested there); held by tests/integration/remote.rs.

use std::time::Duration;

use super::{Claimed, task_key};
use crate::error::Result;
use crate::event::{RunEvent, Told};
use crate::pipeline::guard::SpecGuard;
use crate::pipeline::{Target, schedule};
use crate::repository::remote::CLAIMS;
use crate::spec::{Document, Quoted, SelectOptions, Selection};

/// Up to `free` tasks to start beside the `running` ones ([`schedule::pick`]) — with
/// `--remote`, each claimed first: tasks other machines hold count as running (their
/// chains wait too), and a claim another machine won meanwhile sends the pick on to the
/// next task. Sets [`Remote::waiting`] when tasks are left that only others hold.
pub(in crate::pipeline) fn claimed_picks(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    doc: &Document,
    running: &[usize],
    free: usize,
    options: &SelectOptions,
) -> Result<Vec<Selection>> {
    let Some(remote) = target.remote_mut() else {
        return Ok(schedule::pick(doc, running, free, options));
    };
    let elsewhere = remote.held_elsewhere(&guard.cx.ws.repo, doc)?;
    remote.waiting = !elsewhere.is_empty() && !schedule::pick(doc, running, 1, options).is_empty();
    let mut taken: Vec<usize> = running.iter().chain(&elsewhere).copied().collect();
    let mut chosen: Vec<Selection> = Vec::new();
    while chosen.len() < free {
        let picks = schedule::pick(doc, &taken, free - chosen.len(), options);
        if picks.is_empty() {
            break;
        }
        for selection in picks {
            taken.push(selection.task);
            if remote_claim(guard, target, doc, selection.task)? {
                chosen.push(selection);
            } else if let Some(remote) = target.remote_mut() {
                // Another machine was faster: the next pick goes on past it.
                remote.waiting = true;
            }
        }
    }
    Ok(chosen)
}

/// How long a run waits before it looks again for tasks that other machines hold: a second
/// at most, so that a machine ends soon after the last task lands (one fetch a second from
/// each waiting machine, at the end of a night only).
pub(in crate::pipeline) fn claim_poll(target: &Target) -> Duration {
    target.remote().map_or(Duration::ZERO, |r| {
        (r.ttl / 20).clamp(Duration::from_millis(250), Duration::from_secs(1))
    })
}

/// Claims the task `task` of `doc` on the remote: `Ok(true)` when this run holds it.
fn remote_claim(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    doc: &Document,
    task: usize,
) -> Result<bool> {
    let Some(remote) = target.remote_mut() else {
        return Ok(true);
    };
    let identity = doc.identity(task);
    let key = task_key(&identity);
    let title = Quoted(&doc.tasks()[task].title);
    let issue = doc.tasks()[task].issue().map(|i| i.to_string());
    match remote.claim(&guard.cx.ws.repo, &key, &identity, issue.clone())? {
        Claimed::No => Ok(false),
        Claimed::Yes => {
            guard.teller.emit(RunEvent::Told(Told::Claimed {
                task: title.0.to_string(),
                remote: remote.name.clone(),
                claim: format!("{CLAIMS}{key}"),
                issue,
            }));
            // A task in progress that its last machine handed over at its deadline.
            if doc.tasks()[task].state == crate::spec::TaskState::InProgress {
                super::adopt_pushed_work(guard, target, &identity, &key)?;
            }
            Ok(true)
        }
        Claimed::TookOver {
            holder,
            host,
            attempt,
        } => {
            remote.taken_over.push(identity.clone());
            guard.teller.emit(RunEvent::Told(Told::TookOver {
                task: title.0.to_string(),
                remote: remote.name.clone(),
                holder,
                attempt,
                issue,
                from_host: host,
            }));
            Ok(true)
        }
    }
}
