//! kern's commit of a task: the work, SPEC.md with the task `[x]`, and LEARNINGS.md, in one
//! commit — journaled so that a crash at any moment commits it exactly once.
//!
//! The order a reader must know: write `commit.json` (the message and HEAD before), mark the
//! task done in SPEC.md, write the learnings and move kern's constraints in LEARNINGS.md (one
//! write, `learnings::record`), commit, remove `commit.json`. A run that finds
//! `commit.json` at its next iteration finishes the commit when HEAD is still where the
//! journal says, and drops the journal when HEAD moved (the commit landed).
//!
//! A hook that refuses the commit leaves no trace of the try: the journal is dropped, the
//! learnings put back, and the done marks kern set (the task's and its parents') are set back
//! to `[~]`; what follows a refusal (a new message from the review, or a failed attempt) is
//! `asking`'s.
//!
//! The person's SPEC.md wins over the plan: the commit applies the state the file has now — a
//! pending subtask the person added keeps the task open (it is taken next), a task the person
//! set to `[!]`, `[ ]` or `[x]` is not committed (its work is set aside). Changes of SPEC.md
//! kern did not make are named in the commit message, never committed silently as kern's.
//! Nothing to commit (a gitignored SPEC.md, a task that needed no change) ends the task
//! cleanly, without a commit. A formatter the hooks run over SPEC.md (lint-staged running
//! prettier) is the person's tooling: its result is committed, and kern's next edits apply to
//! the formatted text (every write re-reads the file).

mod asking;
pub(in crate::pipeline) use asking::{commit_for_integration, refused, refused_too_often};

use crate::error::{Error, Result};
use crate::event::Told;
use crate::event::{IterationEnd, LeftOutFile, RunEvent};
use crate::pipeline::decide::{self};
use crate::pipeline::guard::{SpecGuard, TaskNow};
use crate::pipeline::{Target, TaskRun, end};
use crate::repository::CommitRequest;
use crate::spec::{Edit, TaskState};
use crate::stage::{ImplementReport, ReviewReport};
use crate::state::journal::{self, LeftOut, PendingCommit, TaskStart};
use crate::state::lock::{Phase, RunLock};
use std::path::PathBuf;

/// How one try of kern's commit ended.
pub(in crate::pipeline) enum Tried {
    /// The iteration ends so (committed, nothing to commit, or the person took the task).
    Ended(IterationEnd),
    /// The `pre-commit` hook refused; the try left no trace.
    HookFailed { hook: String, output: String },
    /// A message hook refused `message`; the try left no trace.
    MessageRefused {
        hook: String,
        output: String,
        message: String,
    },
}

/// How a parallel task's integration commit ended.
pub(in crate::pipeline) enum Integrated {
    /// As the iteration ends (committed, nothing to commit, a failed attempt, …).
    Ended(IterationEnd),
    /// A hook refused the message: the task's review is asked for a new one.
    ReviewAsked,
}

/// One try of the commit with `review`'s message. A hook's refusal is undone here: the
/// journal dropped, the learnings put back, kern's done marks set back to `[~]`.
pub(in crate::pipeline) fn try_commit(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &mut LeftOut,
    target: &mut Target,
    it: &mut TaskRun,
    implement: &ImplementReport,
    review: &ReviewReport,
) -> Result<Tried> {
    lock.set_phase(Phase::Committing)?;
    let doc = guard.spec.reload()?;
    let mut edits = doc
        .find(&it.identity)
        .map(|t| decide::commit_edits(&doc, t))
        .unwrap_or_default();
    if let Some(branch) = target.review_branch().map(str::to_string)
        && !edits.is_empty()
    {
        edits.push(Edit::AddReview(branch));
    }
    let ticket = match guard.task_now(it, &edits)? {
        TaskNow::Ours(ticket) => ticket,
        other => {
            return end::follow_person(guard, lock, &left_out.paths, it, &other).map(Tried::Ended);
        }
    };
    // With a tracker, the issues of the tasks this commit finishes close when it lands.
    let trailers = match guard.cx.settings.tracker {
        Some(_) => crate::spec::apply_edits(&doc, &it.identity, &edits)
            .map(|applied| crate::tracker::closes(&decide::closed_issues(&doc, &applied.document)))
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let message = decide::commit_message(review, &it.title, &it.hand_edits, &trailers);
    let pending = PendingCommit {
        identity: it.identity.clone(),
        title: it.title.clone(),
        message: message.clone(),
        head_before: guard.cx.ws.repo.head_oid().map(|o| o.to_string()),
    };
    journal::save(&guard.cx.ws.state_dir.pending_commit(), &pending)?;
    if edits.is_empty() {
        guard.teller.emit(RunEvent::Told(Told::StaysOpen {
            task: it.title.clone(),
        }));
    }
    let before = guard.spec.reload()?;
    guard.edit_task(it, ticket, &edits)?;
    let marked = decide::completed_parents(&before, &guard.spec.reload()?, &it.identity);
    let learned: Vec<String> = implement
        .learnings
        .iter()
        .chain(review.learnings.iter())
        .cloned()
        .collect();
    let date = chrono::Local::now().format("%Y-%m-%d").to_string();
    let learnings_existed = guard.cx.ws.learnings_path.exists();
    let learnings_before = record_learnings(
        guard,
        &left_out.paths,
        it,
        &date,
        &learned,
        &implement.summary,
    )?;
    match make_commit(guard, left_out, target, it, &message) {
        Ok(end) => {
            journal::remove(&guard.cx.ws.state_dir.pending_commit());
            journal::remove(&guard.cx.ws.state_dir.task_start());
            Ok(Tried::Ended(end))
        }
        Err(e @ (Error::HookFailed { .. } | Error::CommitMessageRefused { .. })) => {
            journal::remove(&guard.cx.ws.state_dir.pending_commit());
            let path = &guard.cx.ws.learnings_path;
            match learnings_before {
                Some(_) if !learnings_existed => match std::fs::remove_file(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Error::io(path, e));
                    }
                    _ => {}
                },
                Some(before) => crate::atomic_file::write(path, before.as_bytes())?,
                None => {}
            }
            asking::reopen(guard, it, &marked)?;
            Ok(match e {
                Error::CommitMessageRefused { hook, output } => Tried::MessageRefused {
                    hook,
                    output,
                    message,
                },
                Error::HookFailed { hook, output } => Tried::HookFailed { hook, output },
                other => return Err(other),
            })
        }
        Err(e) => Err(e),
    }
}

/// Commits the work tree as it is, with `message`; logs and reports the commit. The files it
/// left out join `remembered`; the commit is the `target` branch's last.
fn make_commit(
    guard: &SpecGuard<'_, '_>,
    remembered: &mut LeftOut,
    target: &mut Target,
    it: &TaskRun,
    message: &str,
) -> Result<IterationEnd> {
    let teller = guard.teller;
    // A parallel task's worktree holds copies of SPEC.md and LEARNINGS.md: nobody's work.
    let mut exclude = it.start.excluded.clone();
    exclude.extend(guard.cx.ws.copies.iter().cloned());
    // Hooks and formatters may rewrite SPEC.md.
    let outcome = guard.after(|| {
        guard.cx.ws.repo.commit(&CommitRequest {
            message,
            exclude: &exclude,
            no_verify: guard.cx.settings.no_verify,
            notify: Some(&|line: &str| {
                teller.emit(RunEvent::Told(Told::FromCommit {
                    line: line.to_string(),
                    warn: true,
                }));
            }),
        })
    });
    crate::pipeline::fence::hooks_denied(guard.cx, guard.teller, &it.title);
    let outcome = outcome?;
    for line in &outcome.notes {
        guard.teller.emit(RunEvent::Told(Told::FromCommit {
            line: line.clone(),
            warn: false,
        }));
    }
    let mut outcome = outcome;
    outcome.left_out.retain(|l| {
        !guard
            .cx
            .ws
            .copies
            .iter()
            .any(|c| std::path::Path::new(&l.path) == c)
    });
    let left_out: Vec<LeftOutFile> = outcome
        .left_out
        .iter()
        .map(|l| LeftOutFile {
            path: l.path.clone(),
            reason: l.reason.clone(),
        })
        .collect();
    if !left_out.is_empty() {
        guard.teller.emit(RunEvent::Told(Told::LeftOutOfCommit {
            files: left_out.clone(),
        }));
    }
    // The person's `--allow-dirty` paths are theirs, not files kern left out.
    outcome.left_out.retain(|l| {
        !it.start
            .excluded
            .iter()
            .any(|p| p.as_os_str() == l.path.as_str())
    });
    if remember_left_out(remembered, &outcome.left_out) {
        journal::save(&guard.cx.ws.state_dir.left_out(), remembered)?;
    }
    let Some(oid) = outcome.sha else {
        let why = "nothing changed that kern commits (SPEC.md outside the repository or ignored, and no work)".to_string();
        guard.teller.emit(RunEvent::NoCommit {
            task: it.title.clone(),
            why,
        });
        return Ok(IterationEnd::Progressed);
    };
    let review_branch = target.review_branch().map(str::to_string);
    target.moved_to(oid);
    guard.teller.emit(RunEvent::Commit {
        task: it.title.clone(),
        sha: oid.to_string(),
        subject: message.lines().next().unwrap_or("").to_string(),
        left_out,
        review_branch,
    });
    Ok(IterationEnd::Committed)
}

/// A crash between marking the task done and committing: finish the commit, exactly once.
pub(in crate::pipeline) fn finish_pending_commit(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &mut LeftOut,
    target: &mut Target,
) -> Result<()> {
    let path = guard.cx.ws.state_dir.pending_commit();
    let Some(pending) = journal::load::<PendingCommit>(&path) else {
        return Ok(());
    };
    let head = guard.cx.ws.repo.head_oid().map(|o| o.to_string());
    if head != pending.head_before {
        journal::remove(&path);
        return Ok(());
    }
    // The lock must say so: a kill inside this commit can leave `.git/index.lock`, which
    // the next run removes only when the dead run's phase was `committing`.
    lock.set_phase(Phase::Committing)?;
    guard.teller.emit(RunEvent::Told(Told::FinishingCommit {
        task: pending.title.clone(),
    }));
    let start = journal::load::<TaskStart>(&guard.cx.ws.state_dir.task_start())
        .filter(|s| s.covers(&pending.identity))
        .unwrap_or_else(|| TaskStart::bare(pending.identity.clone(), None, Vec::new()));
    let doc = guard.spec.reload()?;
    let mut it = TaskRun::new(
        pending.title.clone(),
        pending.identity.clone(),
        (0, TaskState::InProgress),
        start,
    );
    if let Some(task) = doc.find(&it.identity)
        && doc.tasks()[task].state == TaskState::InProgress
    {
        guard.edit(&it.identity, &decide::commit_edits(&doc, task))?;
    }
    // Whether the dead run marked them or this one did, the done parents are kern's.
    let marked = decide::completed_parents(
        &crate::spec::Document::parse(""),
        &guard.spec.reload()?,
        &it.identity,
    );
    match make_commit(guard, left_out, target, &it, &pending.message) {
        Ok(_) => {}
        Err(Error::HookFailed { hook, .. } | Error::CommitMessageRefused { hook, .. }) => {
            // The task goes on from its stage files: a refused message back to the review.
            journal::remove(&path);
            asking::reopen(guard, &mut it, &marked)?;
            guard
                .teller
                .emit(RunEvent::Told(Told::PendingCommitRefused {
                    hook,
                    task: pending.title.clone(),
                }));
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    journal::remove(&path);
    journal::remove(&guard.cx.ws.state_dir.task_start());
    guard
        .cx
        .ws
        .state_dir
        .clear_iteration_files(guard.teller.run_id())?;
    Ok(())
}

/// Writes the task's learnings into LEARNINGS.md, each naming its source, and moves and
/// adds the constraints (`learnings::constraint`): a task that succeeded after a failure
/// that carried an error gives a new hard one, `approach` (implement's summary) being what
/// worked. Returns the file's text before, as `learnings::record` does.
fn record_learnings(
    guard: &SpecGuard<'_, '_>,
    left_out: &[PathBuf],
    it: &TaskRun,
    date: &str,
    learned: &[String],
    approach: &str,
) -> Result<Option<String>> {
    let attempts = guard.attempts(it)?;
    let source = crate::learnings::source(&it.title, it.start.base_commit.as_deref());
    // What the task's change touched that is still there: a learning or constraint naming
    // a path this very commit deletes would be stale at once.
    let top = guard.cx.ws.repo.top();
    let paths: Vec<String> = super::verify::changed_since_start(guard.cx.ws, left_out, it)?
        .into_iter()
        .filter(|p| top.join(p).exists())
        .collect();
    let constraint = match attempts.notes.last() {
        Some(last) if crate::pipeline::error_research::classify(last).is_some() => {
            Some(crate::learnings::constraint::derive(
                crate::pipeline::error_research::approach_of(last),
                approach,
                crate::pipeline::error_research::error_part(last),
                &source,
                &paths,
            ))
        }
        _ => None,
    };
    let errors: Vec<String> = attempts
        .notes
        .iter()
        .map(|n| crate::pipeline::error_research::error_part(n).to_string())
        .collect();
    crate::learnings::record(
        &guard.cx.ws.learnings_path,
        &crate::learnings::Record {
            date,
            task: &it.title,
            learnings: learned,
            source: &source,
            paths: &paths,
            failures: &errors,
            constraint,
        },
    )
}

/// Remembers the changed files a commit left out (secrets, too large) in `left_out`: they
/// stay in the tree and never block a start or get set aside; true when one was new.
fn remember_left_out(left_out: &mut LeftOut, new: &[crate::repository::LeftOut]) -> bool {
    let before = left_out.paths.len();
    for l in new {
        let path = PathBuf::from(&l.path);
        if !left_out.paths.contains(&path) {
            left_out.paths.push(path);
        }
    }
    left_out.paths.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_out_file_is_remembered_once_and_only_a_new_one_asks_for_a_save() {
        let mut left_out = LeftOut::default();
        let out = |path: &str| crate::repository::LeftOut {
            path: path.into(),
            reason: "sensitive file name (.env)".into(),
        };
        assert!(remember_left_out(
            &mut left_out,
            &[out(".env"), out("big.bin")]
        ));
        assert!(!remember_left_out(&mut left_out, &[out(".env")]));
        assert!(remember_left_out(
            &mut left_out,
            &[out("big.bin"), out("key.pem")]
        ));
        assert_eq!(
            left_out.paths,
            [".env", "big.bin", "key.pem"].map(PathBuf::from)
        );
        assert!(left_out.persons.is_empty());
    }
}
