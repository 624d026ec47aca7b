//! Every word the person reads about a happening of the run, in one `match` (git-absorb's
//! announcer): the loop emits a [`RunEvent`] once, and the outputs listen — this module's
//! [`said`] is the terminal's line, [`notice`] the `--notify` event, [`Summary::on`] the
//! end-of-run summary's fold, and `run.jsonl` the record. The lines of the happenings that
//! are told and not recorded are worded in `told.rs`, those of `kern watch` in `watch.rs`.
//!
//! The decision a reader must know: the events carry data, never prose. Where two happenings
//! read differently (a task blocked because it waits on a person, or because it ran out of
//! attempts), the event says which in a field, and the words are chosen here.

use super::lines::Summary;
use super::notify::EventKind;
use crate::event::{RunEvent, Told};
use crate::spec::Quoted;
use crate::text;

mod told;
mod watch;

/// The prefix of a [`RunEvent::Blocked`]'s `why` when the task waits on a person's answer.
pub(crate) const NEEDS_PERSON: &str = "needs a person: ";

/// A line for the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Said {
    /// Something the person should know; not shown with `-q`.
    Info(String),
    /// Something that went wrong but does not stop the run; shown in every mode.
    Warn(String),
}

/// The lines the terminal shows for `event`, in order; none when the event is told elsewhere
/// (a stage's own line, the iteration's header) or only recorded.
pub(crate) fn said(event: &RunEvent) -> Vec<Said> {
    use Said::{Info, Warn};
    if let Some(lines) = watch::said(event) {
        return lines;
    }
    match event {
        RunEvent::Level { level, why, .. } => vec![Info(format!("level {level}: {why}"))],
        RunEvent::Paced { line, .. } => vec![Info(line.clone())],
        RunEvent::Resumed {
            stage,
            kind,
            waited_ms,
            ..
        } => vec![Info(format!(
            "--pace: going on with the {} stage after {} (the {} window)",
            stage.name(),
            text::duration(std::time::Duration::from_millis(*waited_ms)),
            kind.replace('_', "-")
        ))],
        RunEvent::Decomposed { subtasks, .. } => vec![Info(format!(
            "decomposed into {}",
            text::count(subtasks.len(), "subtask", "subtasks")
        ))],
        RunEvent::AttemptFailed {
            task,
            attempt,
            note,
            ends_task: false,
        } => vec![Warn(format!(
            "attempt {attempt} of {} failed: {}",
            Quoted(task),
            note.lines().next().unwrap_or("")
        ))],
        RunEvent::Blocked { task, why, .. } => {
            vec![Warn(format!(
                "blocked {}: {}",
                Quoted(task),
                blocked_why(why)
            ))]
        }
        RunEvent::Check {
            task: Some(_),
            passed,
            output,
            ..
        } => vec![if *passed {
            Info("check passed".into())
        } else {
            Warn(
                output
                    .as_deref()
                    .and_then(|o| o.lines().next())
                    .unwrap_or("check failed")
                    .to_string(),
            )
        }],
        RunEvent::NoCommit { task, why } => vec![Info(format!(
            "{} is done with nothing to commit: {why}",
            Quoted(task)
        ))],
        RunEvent::Commit { sha, subject, .. } => vec![Info(format!(
            "committed {} {subject}",
            text::short_oid(sha)
        ))],
        RunEvent::TrackerFailed {
            issue,
            action,
            why,
            fix,
            off,
            warn: true,
        } => vec![Warn(format!(
            "the tracker: {action} on {issue} failed: {why} — {fix}; {}",
            if *off {
                "the tracker is off for the rest of the run, the night goes on"
            } else {
                "the night goes on (the next failures like it are only recorded in run.jsonl)"
            }
        ))],
        RunEvent::LockRecovered { pid, why, .. } => vec![Warn(format!(
            "recovered a stale lock left by kern pid {pid} ({why})"
        ))],
        RunEvent::Told(told) => told::said(told),
        RunEvent::Conflict {
            task,
            paths,
            how,
            kept: Some(kept),
            ..
        } => vec![Warn(format!(
            "{} conflicts with the branch in {} ({how}): its work is kept at `{kept}`, and the task starts again on the new tip",
            Quoted(task),
            paths
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))],
        RunEvent::Must { findings, held, .. } => findings
            .iter()
            .zip(held)
            .map(|(line, held)| {
                let line = format!("must: {line}");
                if *held { Info(line) } else { Warn(line) }
            })
            .collect(),
        RunEvent::TestsRed {
            command,
            tests,
            failed: true,
            ..
        } => vec![Info(format!(
            "tests first: ✓ red — `{command}` fails on the base commit plus {}",
            tests.join(", ")
        ))],
        RunEvent::TestsRed { command, tests, .. } => vec![Warn(format!(
            "tests first: ✗ red — `{command}` already passes on the base commit plus {}: tests that pass before the change prove nothing",
            tests.join(", ")
        ))],
        RunEvent::TestsGreen { changed, .. } if !changed.is_empty() => vec![Warn(format!(
            "tests first: ✗ held — implement changed the task's tests: {} (put back)",
            changed.join(", ")
        ))],
        RunEvent::TestsGreen {
            command, passed, ..
        } => vec![if *passed {
            Info(format!(
                "tests first: ✓ green — `{command}` passes after implement"
            ))
        } else {
            Warn(format!(
                "tests first: ✗ green — `{command}` still fails after implement"
            ))
        }],
        RunEvent::SharedRef { moved, .. } => moved.iter().map(|m| Warn(m.clone())).collect(),
        RunEvent::BranchMoved { commits, .. } => commits.iter().map(|c| Warn(c.clone())).collect(),
        RunEvent::Violation { violations, .. } => violations
            .iter()
            .map(|v| Warn(format!("violation: {v}")))
            .collect(),
        RunEvent::Denied {
            by, denied, more, ..
        } => {
            let mut said: Vec<String> = denied.iter().map(|d| d.sentence(None)).collect();
            if *more > 0 {
                said.push(format!("{more} more"));
            }
            vec![Warn(format!("the fence denied {by}: {}", said.join("; ")))]
        }
        RunEvent::HandEdit {
            stage,
            changes,
            spec,
            ..
        } => vec![Warn(format!(
            "{spec} changed during the {} stage, not by kern: {}",
            stage.name(),
            changes.join("; ")
        ))],
        _ => Vec::new(),
    }
}

/// The words for changes outside a task's Scope under `--scope strict`: the person's line and
/// the task's Attempt note alike.
pub(crate) fn out_of_scope(scope: &[String], paths: &[String]) -> String {
    format!(
        "changed paths outside the task's Scope ({}): {} (--scope strict)",
        scope.join(", "),
        paths
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Why a task is blocked, as the person reads it.
fn blocked_why(why: &str) -> String {
    match why.strip_prefix(NEEDS_PERSON) {
        Some(question) => format!("it waits on you — {question}"),
        None => why.to_string(),
    }
}

/// The summary's note on how many stages each agent ran, when more than one agent ran or a
/// stage moved: `stages by agent: claude 3, codex 1 (1 stage moved to the other agent at a
/// usage limit)`.
pub(crate) fn stages_by_agent(counts: &[(String, u32)], switches: u32) -> Option<String> {
    if counts.len() <= 1 && switches == 0 {
        return None;
    }
    let counts: Vec<String> = counts
        .iter()
        .map(|(agent, n)| format!("{agent} {n}"))
        .collect();
    Some(format!(
        "stages by agent: {}{}",
        counts.join(", "),
        match switches {
            0 => String::new(),
            1 => " (1 stage moved to the other agent at a usage limit)".to_string(),
            n => format!(" ({n} stages moved to the other agent at a usage limit)"),
        }
    ))
}

/// The summary's note when kern committed on a detached HEAD, now at `head`.
pub(crate) fn commits_on_no_branch(head: &str) -> String {
    format!(
        "kern's commits are on no branch (HEAD is detached) — keep them with `git branch <name> {}`",
        text::short_oid(head)
    )
}

/// The `--notify` event for `event`, when it is one of the moments a notifier hears about.
pub(crate) fn notice(event: &RunEvent) -> Option<(EventKind, serde_json::Value)> {
    if let Some(notice) = watch::notice(event) {
        return Some(notice);
    }
    match event {
        RunEvent::Told(Told::UsageLimitWait {
            stage,
            task,
            reason,
            resets_at,
            wait,
        }) => {
            let until = crate::timestamp::Timestamp::from_epoch_seconds(
                crate::timestamp::Timestamp::now().epoch_seconds()
                    + i64::try_from(wait.as_secs()).unwrap_or(i64::MAX / 2),
            );
            Some((
                EventKind::UsageLimitWait,
                serde_json::json!({
                    "text": format!(
                        "usage limit hit in the {} stage of {}: waiting {} (until {until})",
                        stage.name(),
                        Quoted(task),
                        text::duration(*wait)
                    ),
                    "stage": stage.name(),
                    "task": task,
                    "reason": reason,
                    "resets_at": resets_at.map(crate::timestamp::Timestamp::from_epoch_seconds),
                    "wait_s": wait.as_secs(),
                    "until": until,
                }),
            ))
        }
        RunEvent::Told(Told::StoppedForPerson { code, message }) => Some((
            EventKind::StoppedForPerson,
            serde_json::json!({
                "text": format!(
                    "kern stopped (exit {code}): {}",
                    message.lines().next().unwrap_or("")
                ),
                "exit_code": code,
                "message": message,
            }),
        )),
        RunEvent::Blocked {
            task, why, line, ..
        } => Some((
            EventKind::TaskBlocked,
            serde_json::json!({
                "text": format!("{} is blocked [!]: {}", Quoted(task), blocked_why(why)),
                "task": task,
                "line": line,
                "why": why,
            }),
        )),
        _ => None,
    }
}

impl Summary {
    /// Folds `event` into the end-of-run summary.
    pub(crate) fn on(&mut self, event: &RunEvent) {
        match event {
            // A task skipped again is one skipped task, as `kern report` counts it.
            RunEvent::Skipped { task, .. } if !self.skipped.contains(task) => {
                self.skipped.push(task.clone());
            }
            // A parallel task's conflict costs it an attempt too.
            RunEvent::AttemptFailed { .. } | RunEvent::Conflict { .. } => {
                self.failed_attempts += 1;
            }
            RunEvent::Blocked { task, .. } => self.blocked.push(task.clone()),
            RunEvent::NoCommit { task, why } => self
                .notes
                .push(format!("{} was done without a commit: {why}", Quoted(task))),
            RunEvent::Commit {
                task,
                sha,
                review_branch,
                ..
            } => match review_branch {
                Some(branch) => self.review.push((task.clone(), branch.clone())),
                None => self
                    .committed
                    .push((task.clone(), text::short_oid(sha).to_string())),
            },
            RunEvent::SetAside {
                task, git_ref, why, ..
            } => self.notes.push(format!(
                "the work of {} ({why}) is saved at `{git_ref}`",
                Quoted(task)
            )),
            RunEvent::Told(Told::Paced {
                line,
                handed_over: true,
            }) => self.notes.push(line.clone()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(why: &str) -> RunEvent {
        RunEvent::Blocked {
            task: "Parse dates".into(),
            why: why.into(),
            line: 3,
            issue: None,
            note: String::new(),
        }
    }

    #[test]
    fn a_task_skipped_twice_is_one_skipped_task_in_the_summary() {
        let mut summary = Summary::default();
        for _ in 0..2 {
            summary.on(&RunEvent::Skipped {
                task: "Skip me".into(),
                reason: "not settled".into(),
                issue: None,
            });
        }
        assert_eq!(summary.skipped, ["Skip me"]);
    }

    #[test]
    fn a_block_reads_as_its_cause_and_notifies_once() {
        for (why, line) in [
            (
                "needs a person: which time zone?",
                "blocked `Parse dates`: it waits on you — which time zone?",
            ),
            (
                "6 failed attempts",
                "blocked `Parse dates`: 6 failed attempts",
            ),
        ] {
            assert_eq!(said(&blocked(why)), [Said::Warn(line.into())]);
            let (kind, fields) = notice(&blocked(why)).unwrap();
            assert_eq!(kind, EventKind::TaskBlocked);
            assert_eq!(fields["why"], why);
            assert_eq!(fields["line"], 3);
        }
    }

    #[test]
    fn the_attempt_that_ends_a_task_is_told_by_its_end_alone() {
        let failed = |ends_task| RunEvent::AttemptFailed {
            task: "T".into(),
            attempt: 2,
            note: "the build failed\nmore".into(),
            ends_task,
        };
        assert_eq!(
            said(&failed(false)),
            [Said::Warn(
                "attempt 2 of `T` failed: the build failed".into()
            )]
        );
        assert_eq!(said(&failed(true)), []);
        // Either way it is a failed attempt in the summary.
        let mut summary = Summary::default();
        summary.on(&failed(false));
        summary.on(&failed(true));
        assert_eq!(summary.failed_attempts, 2);
    }

    #[test]
    fn the_summary_folds_what_the_run_did() {
        let mut s = Summary::default();
        for event in [
            RunEvent::Commit {
                task: "A".into(),
                sha: "0123456789abcdef".into(),
                subject: "Add a".into(),
                left_out: Vec::new(),
                review_branch: None,
            },
            RunEvent::Commit {
                task: "B".into(),
                sha: "fedcba9876543210".into(),
                subject: "Add b".into(),
                left_out: Vec::new(),
                review_branch: Some("kern/b".into()),
            },
            RunEvent::Skipped {
                task: "C".into(),
                reason: "later".into(),
                issue: None,
            },
            blocked("6 failed attempts"),
            RunEvent::NoCommit {
                task: "D".into(),
                why: "nothing changed".into(),
            },
        ] {
            s.on(&event);
        }
        assert_eq!(s.committed, [("A".to_string(), "0123456".to_string())]);
        assert_eq!(s.review, [("B".to_string(), "kern/b".to_string())]);
        assert_eq!(s.skipped, ["C"]);
        assert_eq!(s.blocked, ["Parse dates"]);
        assert_eq!(s.notes, ["`D` was done without a commit: nothing changed"]);
    }
}
