//! The outcome policy of the loop, as pure functions: what a stage's result means for the
//! task — go on, or end the iteration with these SPEC.md edits — and when a failing task is
//! blocked. Nothing here reads a file or runs a process; the iteration applies what it decides.
//!
//! Decisions a reader must know:
//! - Failed attempts, in tiers: after `--max-attempts` failures the implement prompt demands
//!   decomposition (see `pipeline::stage::inputs::attempts_text`), once; the attempt made under
//!   that request failing too — implement's FAILED ("cannot be split") or any other failure —
//!   blocks the task `[!]` (with its parents that are left stuck with it). So a task spends at
//!   most `--max-attempts` attempts plus one decomposition request, and the Blocked note lists
//!   the approaches tried and the error they hit (`error_research::tried_and_hit`).
//! - Error research (`error_research`) moves the request forward: once a failure's error is
//!   saturated (all its standard approaches failed), the next attempt is the decomposition
//!   request.
//! - A failure's note becomes an `Attempt N` note; blocking adds a `Blocked` note in the same
//!   write, so SPEC.md never shows a blocked task without its reason.
//! - A skip puts the task back to `[ ]` with a `Skipped` note; selection takes skipped tasks
//!   last. A research skip that waits on a person (`skip_kind: needs_person`) blocks the task
//!   `[!]` instead, with a Blocked note that asks the question, so that it is not researched
//!   again every night.
//! - kern, not the agent, decides "done": an implement SUCCESS that changed no file is a failed
//!   attempt unless the report says in `no_change_reason` why nothing had to change; then the
//!   review, told that the diff is empty, must answer COMMIT for the task to be done.
//! - `--pace`: once an agent reports a subscription usage window at or above the threshold
//!   (one that has not reset yet), the run takes no new task — or, with a fallback agent, the
//!   next stages go to the fallback until the window resets.
//! - A commit message a hook refuses is the review's to fix, not implement's: the review is
//!   asked for a new message [`MESSAGE_REQUESTS`] times, the work kept as it is; only a
//!   message still refused after that is a failed attempt.

use crate::event::IterationEnd;
use crate::pipeline::error_research;
use crate::spec::{Document, Edit, NoteKind, Task, TaskIdentity, TaskState};
use crate::stage::report::SkipKind;
use crate::stage::{ImplementReport, ImplementStatus, ResearchReport, ReviewReport, Verdict};

/// How a check ended (the check gate's, a `run` must-have's): what the policy judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckResult {
    /// Exit 0.
    Passed,
    /// Anything else; the note says what and shows the last lines.
    Failed(String),
}

/// How many times kern asks the review for a new message after a hook refused one.
pub(super) const MESSAGE_REQUESTS: u32 = 2;

/// What a stage's result means: go on with `T` (what the next steps need), or end here.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Next<T> {
    /// Go on to the next stage.
    Go(T),
    /// The iteration ends here.
    End(Decision),
}

/// How an iteration ends for its task, and the SPEC.md edits that say so.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Decision {
    /// The edits, applied in one verified write.
    pub edits: Vec<Edit>,
    /// How the iteration ends.
    pub end: IterationEnd,
    /// What happened to the task, for the output and `run.jsonl`.
    pub outcome: TaskOutcome,
}

/// What happened to a task in an iteration that did not commit it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TaskOutcome {
    /// Back to `[ ]` with a Skipped note.
    Skipped {
        /// The reason, as the note says it.
        reason: String,
    },
    /// Split into subtasks.
    Decomposed {
        /// The subtasks' titles.
        subtasks: Vec<String>,
    },
    /// A failed attempt, recorded.
    Failed {
        /// Its number.
        attempt: u32,
        /// The note.
        note: String,
    },
    /// Research found that the task waits on a person (a decision, credentials, an account, a
    /// manual step): blocked `[!]` with the question, without counting as a failed attempt.
    NeedsPerson {
        /// What the person must answer or do.
        question: String,
    },
    /// A failed attempt that blocked the task.
    Blocked {
        /// Its number.
        attempt: u32,
        /// The note.
        note: String,
        /// Why kern gave up.
        why: String,
    },
}

/// A task's failed attempts so far, as its notes record them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Attempts {
    /// The highest `N` of its `Attempt N` notes.
    pub count: u32,
    /// Each Attempt note's text, in order (what error research reads).
    pub notes: Vec<String>,
    /// What implement said it did in this attempt, when it reported SUCCESS: recorded in the
    /// Attempt note of a failure after it, as the approach that failed (`error_research`).
    pub approach: Option<String>,
}

impl Attempts {
    /// The attempts recorded in `task`'s notes.
    pub(super) fn of(task: &Task) -> Attempts {
        let notes: Vec<String> = task
            .notes
            .iter()
            .filter(|n| matches!(n.kind, NoteKind::Attempt(_)))
            .map(|n| n.text.clone())
            .collect();
        Attempts {
            count: task.attempts(),
            notes,
            approach: None,
        }
    }
}

/// The note of an implement SUCCESS that changed nothing and gave no reason.
pub(super) const CHANGED_NOTHING: &str = "implement reported SUCCESS but changed nothing: no file differs from the commit the task started from, and the report gave no `no_change_reason` — make the change, or say in `no_change_reason` why none is needed";

/// Research finished: its notes go in and the task (with its parents) is in progress — `Go`
/// carries those edits; a skip reason skips it, or blocks it when it waits on a person; no
/// usable report is a failed attempt.
pub(super) fn after_research(
    outcome: Result<ResearchReport, String>,
    attempts: &Attempts,
    max_attempts: u32,
    persons: Proposals,
) -> Next<Vec<Edit>> {
    let report = match outcome {
        Ok(report) => report,
        Err(note) => return Next::End(failed_attempt(attempts, &note, max_attempts)),
    };
    if let Some(reason) = report.skip_reason.filter(|r| !r.trim().is_empty()) {
        if report.skip_kind == Some(SkipKind::NeedsPerson) {
            return Next::End(needs_person(reason.trim()));
        }
        return Next::End(skip(format!("research: {reason}")));
    }
    let notes = if report.notes.is_empty() {
        vec!["(the research stage returned no notes)".to_string()]
    } else {
        report.notes
    };
    let mut edits = vec![Edit::AddResearch(notes)];
    // What research proposes becomes the task's Must and Scope notes, the person's to edit —
    // unless the person wrote their own, and only what kern can read.
    let must: Vec<String> = report
        .must
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.trim().to_string())
        .filter(|m| matches!(crate::spec::parse_must(m).first(), Some(Ok(_))))
        .collect();
    if !persons.must && !must.is_empty() {
        edits.push(Edit::AddMust(must));
    }
    let scope: Vec<String> = report
        .scope
        .unwrap_or_default()
        .iter()
        .flat_map(|s| crate::spec::scope_patterns(s))
        .filter(|s| globset::Glob::new(s).is_ok())
        .collect();
    if !persons.scope && !scope.is_empty() {
        edits.push(Edit::AddScope(scope));
    }
    edits.extend([Edit::SetState(TaskState::InProgress), Edit::StartParents]);
    Next::Go(edits)
}

/// Which notes the person already wrote, that research's proposals never replace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Proposals {
    /// The task has a Must note.
    pub must: bool,
    /// The task has a Scope note.
    pub scope: bool,
}

/// Implement finished: SUCCESS goes on with the report — when `tree_changed` (a file differs
/// from the task's start, kern's own files and `--allow-dirty` paths aside), or when the
/// report gives a `no_change_reason`; a SUCCESS that changed nothing without a reason is a
/// failed attempt ([`CHANGED_NOTHING`]). DECOMPOSED inserts the subtasks; SKIPPED skips;
/// FAILED (or no usable report) is a failed attempt.
pub(super) fn after_implement(
    outcome: Result<ImplementReport, String>,
    tree_changed: bool,
    attempts: &Attempts,
    max_attempts: u32,
) -> Next<ImplementReport> {
    let report = match outcome {
        Ok(report) => report,
        Err(note) => return Next::End(failed_attempt(attempts, &note, max_attempts)),
    };
    let note_or_summary = |note: Option<String>, summary: String| {
        note.filter(|s| !s.trim().is_empty()).unwrap_or(summary)
    };
    match report.status {
        ImplementStatus::Success => {
            let has_reason = report
                .no_change_reason
                .as_deref()
                .is_some_and(|r| !r.trim().is_empty());
            if tree_changed || has_reason {
                Next::Go(report)
            } else {
                Next::End(failed_attempt(attempts, CHANGED_NOTHING, max_attempts))
            }
        }
        ImplementStatus::Decomposed => {
            let subtasks: Vec<String> = report
                .subtasks
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if subtasks.is_empty() {
                return Next::End(refused(
                    attempts,
                    "implement said DECOMPOSED but gave no subtasks",
                    max_attempts,
                ));
            }
            Next::End(Decision {
                edits: vec![Edit::InsertSubtasks(subtasks.clone())],
                end: IterationEnd::Progressed,
                outcome: TaskOutcome::Decomposed { subtasks },
            })
        }
        ImplementStatus::Skipped => {
            Next::End(skip(note_or_summary(report.attempt_note, report.summary)))
        }
        ImplementStatus::Failed => {
            let note = note_or_summary(report.attempt_note, report.summary);
            Next::End(refused(attempts, &note, max_attempts))
        }
    }
}

/// The check gate ran: a failure is a failed attempt with its output's tail.
pub(super) fn after_check(result: CheckResult, attempts: &Attempts, max_attempts: u32) -> Next<()> {
    match result {
        CheckResult::Passed => Next::Go(()),
        CheckResult::Failed(note) => Next::End(failed_attempt(attempts, &note, max_attempts)),
    }
}

/// The review finished: COMMIT goes on to the commit with the report; REJECT (or no usable
/// report) is a failed attempt carrying the reviewer's reason.
pub(super) fn after_review(
    outcome: Result<ReviewReport, String>,
    attempts: &Attempts,
    max_attempts: u32,
) -> Next<ReviewReport> {
    match outcome {
        Ok(r) if r.verdict == Verdict::Commit => Next::Go(r),
        Ok(r) => {
            let reason = r
                .reason
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(r.subject);
            let note = format!("review rejected the change: {reason}");
            Next::End(failed_attempt(attempts, &note, max_attempts))
        }
        Err(note) => Next::End(failed_attempt(attempts, &note, max_attempts)),
    }
}

/// A hook refused kern's commit: the task goes back to in progress with an Attempt note.
pub(super) fn after_refused_commit(
    hook: &str,
    output: &str,
    attempts: &Attempts,
    max_attempts: u32,
) -> Decision {
    let note = format!("the `{hook}` hook refused the commit:\n{}", tail(output));
    let mut decision = failed_attempt(attempts, &note, max_attempts);
    decision
        .edits
        .insert(0, Edit::SetState(TaskState::InProgress));
    decision
}

/// A hook refused kern's commit message for the `refusals`-th time in a row for this work:
/// `Go` asks the review for a new message (the work stays as it is); after
/// [`MESSAGE_REQUESTS`] new messages were refused too, a failed attempt with the hook's
/// last output.
pub(super) fn after_refused_message(
    hook: &str,
    output: &str,
    refusals: u32,
    attempts: &Attempts,
    max_attempts: u32,
) -> Next<()> {
    if refusals <= MESSAGE_REQUESTS {
        return Next::Go(());
    }
    let note = format!(
        "the `{hook}` hook refused the commit message {refusals} times (kern asked the review for a new one {MESSAGE_REQUESTS} times); its last output:\n{}",
        tail(output)
    );
    let mut decision = failed_attempt(attempts, &note, max_attempts);
    decision
        .edits
        .insert(0, Edit::SetState(TaskState::InProgress));
    Next::End(decision)
}

/// The review answered a request for a new message: COMMIT goes on with its message (the
/// first review's learnings kept when it gives none); anything else ends as a review does.
pub(super) fn after_message_review(
    outcome: Result<ReviewReport, String>,
    first: &ReviewReport,
    attempts: &Attempts,
    max_attempts: u32,
) -> Next<ReviewReport> {
    match after_review(outcome, attempts, max_attempts) {
        Next::Go(mut report) => {
            if report.learnings.is_empty() {
                report.learnings.clone_from(&first.learnings);
            }
            Next::Go(report)
        }
        Next::End(decision) => Next::End(decision),
    }
}

/// The ancestors of `task` that kern's commit edits marked done: the done ones in `after` (the
/// file with the edits) nearest first, up to the first that is not, less those done in
/// `before` already. A refused commit sets them back.
pub(super) fn completed_parents(
    before: &Document,
    after: &Document,
    task: &TaskIdentity,
) -> Vec<TaskIdentity> {
    let Some(index) = after.find(task) else {
        return Vec::new();
    };
    let done_before = |id: &TaskIdentity| {
        before
            .find(id)
            .is_some_and(|t| before.tasks()[t].state == TaskState::Done)
    };
    after
        .ancestors(index)
        .into_iter()
        .take_while(|&a| after.tasks()[a].state == TaskState::Done)
        .map(|a| after.identity(a))
        .filter(|id| !done_before(id))
        .collect()
}

/// The last 20 lines of a hook's output.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().rev().take(20).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// True when the next attempt of a task with `attempts` is the decomposition request
/// (`stage::inputs` asks for it by the same rule): the attempts are used up, or the last
/// failure's error is saturated.
pub(super) fn decomposition_due(attempts: &Attempts, max_attempts: u32) -> bool {
    attempts.count >= max_attempts
        || error_research::analyse(&attempts.notes).is_some_and(|r| r.saturated)
}

/// A failed attempt: an Attempt note (with the approach that failed, when implement said what
/// it did), and the block when the attempts are exhausted.
///
/// The tiers come in order (DESIGN.md sections 1 and 16): a different approach after each
/// failure, decomposition demanded once `max_attempts` have failed, and a block when the
/// attempt made under that request failed too — so a task spends at most `max_attempts`
/// attempts plus one decomposition request, and no task is blocked before it was asked to
/// decompose. Error research (section 17) moves the request forward: once a failure's error
/// has had all its standard approaches fail (saturated), the next attempt is the request.
pub(super) fn failed_attempt(attempts: &Attempts, note: &str, max_attempts: u32) -> Decision {
    fail(attempts, note, max_attempts, false)
}

/// [`failed_attempt`] of implement's own answer FAILED (or DECOMPOSED without subtasks):
/// under the decomposition request that answer is "cannot be split", and the Blocked note
/// quotes it.
fn refused(attempts: &Attempts, note: &str, max_attempts: u32) -> Decision {
    fail(attempts, note, max_attempts, true)
}

fn fail(attempts: &Attempts, note: &str, max_attempts: u32, answered: bool) -> Decision {
    let note = error_research::with_approach(note, attempts.approach.as_deref());
    let attempt = attempts.count.saturating_add(1);
    let mut notes = attempts.notes.clone();
    notes.push(note.clone());
    // The attempt that just failed had the decomposition request in its prompt.
    let decomposition_asked = decomposition_due(attempts, max_attempts);
    let why = decomposition_asked.then(|| {
        let prior = &attempts.notes;
        match (
            answered,
            error_research::analyse(&notes).filter(|r| r.saturated),
        ) {
            (true, _) => error_research::blocked_answered(&note, prior),
            (false, Some(research)) => error_research::blocked_saturated(&research, &notes),
            (false, None) => error_research::blocked_after(attempt, &notes),
        }
    });
    let mut edits = vec![Edit::AddAttempt(note.clone())];
    let outcome = match why {
        Some(why) => {
            edits.extend([
                Edit::SetState(TaskState::Blocked),
                Edit::AddBlocked(why.clone()),
                Edit::BlockParents,
            ]);
            TaskOutcome::Blocked { attempt, note, why }
        }
        None => TaskOutcome::Failed { attempt, note },
    };
    Decision {
        edits,
        end: IterationEnd::Progressed,
        outcome,
    }
}

/// The commit message from the review: its subject (else the task's title), a blank line and
/// its body when it has one; changes of SPEC.md kern did not make are named at the end, so
/// they are never committed silently as kern's; `trailers` (`Closes acme/app#12`) close the
/// message as git trailers, a paragraph of their own. Control characters and escape sequences
/// (agent text, a title's `ESC]0;…BEL`) are stripped, so `git log` shows only text.
pub(super) fn commit_message(
    review: &ReviewReport,
    title: &str,
    hand_edits: &[String],
    trailers: &[String],
) -> String {
    use crate::text::strip_controls;
    let mut message = strip_controls(&review.subject).trim().to_string();
    if message.is_empty() {
        message = strip_controls(title).trim().to_string();
    }
    let mut body = strip_controls(review.body.as_deref().unwrap_or_default())
        .trim()
        .to_string();
    if !hand_edits.is_empty() {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str("SPEC.md changes not made by kern:\n");
        for change in hand_edits {
            body.push_str(&format!("- {}\n", strip_controls(change)));
        }
    }
    let trailers: Vec<String> = trailers
        .iter()
        .filter(|t| !body.lines().any(|l| l.trim() == t.as_str()))
        .cloned()
        .collect();
    if !trailers.is_empty() {
        let body_now = body.trim_end().to_string();
        body = if body_now.is_empty() {
            trailers.join("\n")
        } else {
            format!("{body_now}\n\n{}", trailers.join("\n"))
        };
    }
    let body = body.trim_end();
    if !body.is_empty() {
        message = format!("{message}\n\n{body}\n");
    }
    message
}

/// The tracker's issues a commit finishes: those of the tasks `after` shows done that
/// `before` did not (the task itself, and the parents its last subtask completes), each once.
pub(super) fn closed_issues(before: &Document, after: &Document) -> Vec<crate::spec::IssueRef> {
    let mut out: Vec<crate::spec::IssueRef> = Vec::new();
    for (index, task) in after.tasks().iter().enumerate() {
        if task.state != TaskState::Done {
            continue;
        }
        let was_done = before
            .find(&after.identity(index))
            .is_some_and(|t| before.tasks()[t].state == TaskState::Done);
        if let Some(issue) = task.issue()
            && !was_done
            && !out.iter().any(|i| i.same(&issue))
        {
            out.push(issue);
        }
    }
    out
}

/// The edits of committing task `task` of `doc` as the file is now: done, with its parents
/// whose subtasks are now all done — unless the person added a pending subtask under it,
/// which keeps it open (the subtask is taken next).
pub(super) fn commit_edits(doc: &Document, task: usize) -> Vec<Edit> {
    let open_child = doc.tasks()[task]
        .children
        .iter()
        .any(|&c| doc.tasks()[c].state.is_unfinished());
    if open_child {
        Vec::new()
    } else if doc.tasks()[task].criteria.iter().any(|c| !c.done) {
        vec![
            Edit::SetState(TaskState::Done),
            Edit::TickCriteria,
            Edit::CompleteParents,
        ]
    } else {
        vec![Edit::SetState(TaskState::Done), Edit::CompleteParents]
    }
}

/// A task that waits on a person: blocked, its parents too when it leaves them stuck, with a
/// Blocked note that asks the question.
fn needs_person(question: &str) -> Decision {
    Decision {
        edits: vec![
            Edit::SetState(TaskState::Blocked),
            Edit::AddBlocked(format!(
                "needs you: {question} — answer in the task's text (or do it), then set it back to [ ]"
            )),
            Edit::BlockParents,
        ],
        end: IterationEnd::Progressed,
        outcome: TaskOutcome::NeedsPerson {
            question: question.to_string(),
        },
    }
}

fn skip(reason: String) -> Decision {
    Decision {
        edits: vec![
            Edit::SetState(TaskState::Pending),
            Edit::AddSkipped(reason.clone()),
        ],
        end: IterationEnd::Skipped,
        outcome: TaskOutcome::Skipped { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempts(notes: &[&str]) -> Attempts {
        Attempts {
            count: u32::try_from(notes.len()).unwrap(),
            notes: notes.iter().map(ToString::to_string).collect(),
            approach: None,
        }
    }

    fn implement(
        status: ImplementStatus,
        note: Option<&str>,
        subtasks: &[&str],
    ) -> ImplementReport {
        ImplementReport {
            status,
            no_change_reason: None,
            summary: "the summary".into(),
            attempt_note: note.map(str::to_string),
            subtasks: subtasks.iter().map(|s| (*s).to_string()).collect(),
            learnings: Vec::new(),
        }
    }

    fn review(verdict: Verdict, reason: Option<&str>) -> ReviewReport {
        ReviewReport {
            verdict,
            subject: "Add the parser".into(),
            body: None,
            reason: reason.map(str::to_string),
            learnings: Vec::new(),
        }
    }

    #[test]
    fn research_writes_notes_and_starts_the_chain_or_skips() {
        let none = Attempts::default();
        let ok = ResearchReport {
            notes: vec!["read src/lib.rs".into()],
            skip_reason: None,
            skip_kind: None,
            must: None,
            scope: None,
        };
        assert_eq!(
            after_research(Ok(ok.clone()), &none, 3, Proposals::default()),
            Next::Go(vec![
                Edit::AddResearch(vec!["read src/lib.rs".into()]),
                Edit::SetState(TaskState::InProgress),
                Edit::StartParents,
            ])
        );
        let empty = ResearchReport {
            notes: Vec::new(),
            skip_reason: Some("  ".into()),
            skip_kind: None,
            must: None,
            scope: None,
        };
        assert!(matches!(
            after_research(Ok(empty), &none, 3, Proposals::default()),
            Next::Go(edits) if edits[0] == Edit::AddResearch(vec!["(the research stage returned no notes)".into()])
        ));
        let skip = ResearchReport {
            notes: Vec::new(),
            skip_reason: Some("already done upstream".into()),
            skip_kind: None,
            must: None,
            scope: None,
        };
        assert_eq!(
            after_research(Ok(skip), &none, 3, Proposals::default()),
            Next::End(Decision {
                edits: vec![
                    Edit::SetState(TaskState::Pending),
                    Edit::AddSkipped("research: already done upstream".into()),
                ],
                end: IterationEnd::Skipped,
                outcome: TaskOutcome::Skipped {
                    reason: "research: already done upstream".into()
                },
            })
        );
        assert!(matches!(
            after_research(
                Err("research stage gave no usable result".into()),
                &none,
                3,
                Proposals::default()
            ),
            Next::End(Decision {
                outcome: TaskOutcome::Failed { attempt: 1, .. },
                ..
            })
        ));
    }

    #[test]
    fn research_proposes_must_and_scope_unless_the_person_wrote_them() {
        let none = Attempts::default();
        let report = ResearchReport {
            notes: vec!["n".into()],
            skip_reason: None,
            skip_kind: None,
            must: Some(vec![
                "file src/parser.rs".into(),
                "it should work".into(),
                " run cargo test -q ".into(),
            ]),
            scope: Some(vec![
                "src/parser.rs, tests/parser.rs".into(),
                "src/[".into(),
            ]),
        };
        let proposed = |persons| match after_research(Ok(report.clone()), &none, 3, persons) {
            Next::Go(edits) => edits,
            Next::End(_) => panic!("ends"),
        };
        assert_eq!(
            proposed(Proposals::default())[1..3],
            [
                Edit::AddMust(vec![
                    "file src/parser.rs".into(),
                    "run cargo test -q".into()
                ]),
                Edit::AddScope(vec!["src/parser.rs".into(), "tests/parser.rs".into()]),
            ],
            "only what kern can read"
        );
        let mine = proposed(Proposals {
            must: true,
            scope: true,
        });
        assert!(
            !mine
                .iter()
                .any(|e| matches!(e, Edit::AddMust(_) | Edit::AddScope(_))),
            "the person's notes win: {mine:?}"
        );
    }

    #[test]
    fn implement_statuses() {
        let none = Attempts::default();
        let success = implement(ImplementStatus::Success, None, &[]);
        let table: Vec<(ImplementReport, Next<ImplementReport>)> = vec![
            (success.clone(), Next::Go(success)),
            (
                implement(ImplementStatus::Decomposed, None, &[" One ", "", "Two"]),
                Next::End(Decision {
                    edits: vec![Edit::InsertSubtasks(vec!["One".into(), "Two".into()])],
                    end: IterationEnd::Progressed,
                    outcome: TaskOutcome::Decomposed {
                        subtasks: vec!["One".into(), "Two".into()],
                    },
                }),
            ),
            (
                implement(ImplementStatus::Decomposed, None, &[" "]),
                Next::End(failed_attempt(
                    &none,
                    "implement said DECOMPOSED but gave no subtasks",
                    3,
                )),
            ),
            (
                implement(ImplementStatus::Skipped, Some("needs a database"), &[]),
                Next::End(skip("needs a database".into())),
            ),
            (
                implement(ImplementStatus::Skipped, Some(" "), &[]),
                Next::End(skip("the summary".into())),
            ),
            (
                implement(ImplementStatus::Failed, Some("tests fail"), &[]),
                Next::End(failed_attempt(&none, "tests fail", 3)),
            ),
            (
                implement(ImplementStatus::Failed, None, &[]),
                Next::End(failed_attempt(&none, "the summary", 3)),
            ),
        ];
        for (report, want) in table {
            assert_eq!(
                after_implement(Ok(report.clone()), true, &none, 3),
                want,
                "{report:?}"
            );
        }
    }

    #[test]
    fn kern_decides_done_from_the_work_tree() {
        let none = Attempts::default();
        let success = implement(ImplementStatus::Success, None, &[]);
        let reason = |r: &str| ImplementReport {
            no_change_reason: Some(r.into()),
            ..success.clone()
        };
        // (report, tree changed, decision)
        let table: Vec<(ImplementReport, bool, Next<ImplementReport>)> = vec![
            (success.clone(), true, Next::Go(success.clone())),
            (
                success.clone(),
                false,
                Next::End(Decision {
                    edits: vec![Edit::AddAttempt(CHANGED_NOTHING.into())],
                    end: IterationEnd::Progressed,
                    outcome: TaskOutcome::Failed {
                        attempt: 1,
                        note: CHANGED_NOTHING.into(),
                    },
                }),
            ),
            (
                reason("already done in src/a.rs:3"),
                false,
                Next::Go(reason("already done in src/a.rs:3")),
            ),
            (
                reason(" \n"),
                false,
                Next::End(failed_attempt(&none, CHANGED_NOTHING, 3)),
            ),
            (reason("moot"), true, Next::Go(reason("moot"))),
            // Only SUCCESS is judged by the tree.
            (
                implement(ImplementStatus::Failed, Some("tests fail"), &[]),
                false,
                Next::End(failed_attempt(&none, "tests fail", 3)),
            ),
            (
                implement(ImplementStatus::Skipped, Some("obsolete"), &[]),
                false,
                Next::End(skip("obsolete".into())),
            ),
        ];
        for (report, changed, want) in table {
            assert_eq!(
                after_implement(Ok(report.clone()), changed, &none, 3),
                want,
                "{report:?} changed={changed}"
            );
        }
        // It counts toward blocking like any failed attempt (after the decomposition request).
        let three = attempts(&[CHANGED_NOTHING, CHANGED_NOTHING, CHANGED_NOTHING]);
        assert!(matches!(
            after_implement(Ok(success), false, &three, 3),
            Next::End(Decision {
                outcome: TaskOutcome::Blocked { attempt: 4, .. },
                ..
            })
        ));
    }

    #[test]
    fn a_task_that_waits_on_a_person_is_blocked_with_the_question() {
        let none = Attempts::default();
        let report = |kind: Option<SkipKind>, reason: Option<&str>| ResearchReport {
            notes: vec!["read the code".into()],
            skip_reason: reason.map(str::to_string),
            skip_kind: kind,
            must: None,
            scope: None,
        };
        let question = "Which database should it use, Postgres or SQLite?";
        let table = [
            (
                report(Some(SkipKind::NeedsPerson), Some(&format!(" {question} "))),
                Next::End(Decision {
                    edits: vec![
                        Edit::SetState(TaskState::Blocked),
                        Edit::AddBlocked(format!(
                            "needs you: {question} — answer in the task's text (or do it), then set it back to [ ]"
                        )),
                        Edit::BlockParents,
                    ],
                    end: IterationEnd::Progressed,
                    outcome: TaskOutcome::NeedsPerson {
                        question: question.into(),
                    },
                }),
            ),
            (
                report(None, Some("already done")),
                Next::End(skip("research: already done".into())),
            ),
            // A kind without a reason is no skip.
            (
                report(Some(SkipKind::NeedsPerson), Some("  ")),
                Next::Go(vec![
                    Edit::AddResearch(vec!["read the code".into()]),
                    Edit::SetState(TaskState::InProgress),
                    Edit::StartParents,
                ]),
            ),
        ];
        for (report, want) in table {
            assert_eq!(
                after_research(Ok(report.clone()), &none, 3, Proposals::default()),
                want,
                "{report:?}"
            );
        }
    }

    #[test]
    fn reviews_and_checks() {
        let none = Attempts::default();
        assert_eq!(
            after_review(Ok(review(Verdict::Commit, None)), &none, 3),
            Next::Go(review(Verdict::Commit, None))
        );
        assert_eq!(
            after_review(Ok(review(Verdict::Reject, Some("no test"))), &none, 3),
            Next::End(failed_attempt(
                &none,
                "review rejected the change: no test",
                3
            ))
        );
        assert_eq!(
            after_review(Ok(review(Verdict::Reject, None)), &none, 3),
            Next::End(failed_attempt(
                &none,
                "review rejected the change: Add the parser",
                3
            ))
        );
        assert_eq!(after_check(CheckResult::Passed, &none, 3), Next::Go(()));
        assert_eq!(
            after_check(CheckResult::Failed("exit 1".into()), &none, 3),
            Next::End(failed_attempt(&none, "exit 1", 3))
        );
    }

    #[test]
    fn blocking_comes_after_the_one_decomposition_request() {
        let same = "the build broke";
        let split = "cannot be split: the parser is one function";
        // (max attempts, notes before, this note, implement's own FAILED answer, the block)
        type Case<'a> = (u32, Vec<&'a str>, &'a str, bool, Option<&'a str>);
        let cases: Vec<Case> = vec![
            (3, vec![], "a", false, None),
            (3, vec!["a"], "b", false, None),
            // The same failure three times: decomposition is asked for next, no block yet.
            (3, vec![same, same], same, false, None),
            // Before the request, implement's FAILED is one more failed attempt.
            (3, vec![same], "could not", true, None),
            // Issue 39: "cannot be split" answering the request blocks at once, after
            // --max-attempts attempts and one request, with what was tried and what it hit.
            (
                3,
                vec![same, same, same],
                split,
                true,
                Some(
                    "the decomposition request was answered: cannot be split: the parser is one function — after 3 failed attempts; a person must look. Tried: 1) the build broke (3 attempts)",
                ),
            ),
            // So does the attempt under the request failing any other way: never twice.
            (
                3,
                vec![same, same, same],
                same,
                false,
                Some(
                    "4 failed attempts, decomposition included — a person must look. Tried: 1) the build broke (4 attempts)",
                ),
            ),
            (
                3,
                vec!["a", "b", "c"],
                "d",
                false,
                Some(
                    "4 failed attempts, decomposition included — a person must look. Tried: 1) a; 2) b; 3) c; 4) d",
                ),
            ),
            // --max-attempts raised between runs: the request comes at the new limit.
            (5, vec!["a", "b", "c"], "d", false, None),
            // One attempt allowed: the first failure asks for decomposition, never blocks.
            (1, vec![], same, false, None),
            (
                1,
                vec![same],
                same,
                false,
                Some(
                    "2 failed attempts, decomposition included — a person must look. Tried: 1) the build broke (2 attempts)",
                ),
            ),
            (2, vec![same], same, false, None),
            (
                2,
                vec![same, same],
                "no subtasks",
                true,
                Some(
                    "the decomposition request was answered: no subtasks — after 2 failed attempts; a person must look. Tried: 1) the build broke (2 attempts)",
                ),
            ),
        ];
        for (max, before, note, answered, want) in cases {
            let decision = fail(&attempts(&before), note, max, answered);
            let attempt = u32::try_from(before.len()).unwrap() + 1;
            match want {
                None => {
                    assert_eq!(decision.edits, vec![Edit::AddAttempt(note.into())]);
                    assert_eq!(
                        decision.outcome,
                        TaskOutcome::Failed {
                            attempt,
                            note: note.into()
                        }
                    );
                }
                Some(why) => {
                    assert_eq!(
                        decision.edits,
                        vec![
                            Edit::AddAttempt(note.into()),
                            Edit::SetState(TaskState::Blocked),
                            Edit::AddBlocked(why.into()),
                            Edit::BlockParents,
                        ]
                    );
                    assert_eq!(
                        decision.outcome,
                        TaskOutcome::Blocked {
                            attempt,
                            note: note.into(),
                            why: why.into()
                        }
                    );
                }
            }
            assert_eq!(decision.end, IterationEnd::Progressed);
        }
    }

    #[test]
    fn a_saturated_error_asks_for_decomposition_early_then_blocks_with_what_was_tried() {
        let must = "kern's check of the must-haves failed: `file src/a.rs` — missing";
        let tried = |approach: &str| format!("{must}\nApproach: {approach}");
        let with = |notes: &[String], approach: Option<&str>| Attempts {
            count: u32::try_from(notes.len()).unwrap(),
            notes: notes.to_vec(),
            approach: approach.map(str::to_string),
        };
        // The approach that failed is recorded in the note.
        let first = failed_attempt(&with(&[], Some("Wrote src/b.rs. Ran it.")), must, 3);
        assert_eq!(
            first.edits,
            vec![Edit::AddAttempt(tried("Wrote src/b.rs."))]
        );
        // The second distinct approach saturates a must-have (two standard ones): not blocked
        // yet, the next prompt asks for decomposition.
        let second = failed_attempt(&with(&[tried("one")], Some("two")), must, 3);
        assert!(
            matches!(second.outcome, TaskOutcome::Failed { attempt: 2, .. }),
            "{second:?}"
        );
        // The attempt under that request failing the same way blocks at attempt 3 of 3, with
        // the list of what was tried.
        let third = failed_attempt(&with(&[tried("one"), tried("two")], Some("three")), must, 3);
        assert_eq!(
            third.outcome,
            TaskOutcome::Blocked {
                attempt: 3,
                note: tried("three"),
                why: "saturated: all standard approaches exhausted for a must-have that does not hold (3 attempts), decomposition included — a person must look. Tried against must-have `file src/a.rs` — missing: 1) one; 2) two; 3) three".into(),
            }
        );
        // Implement's own FAILED under that request is "cannot be split": blocked at once,
        // the approaches before it listed with the error they hit.
        let agent = refused(&with(&[tried("one"), tried("two")], None), "could not", 3);
        assert_eq!(
            agent.outcome,
            TaskOutcome::Blocked {
                attempt: 3,
                note: "could not".into(),
                why: "the decomposition request was answered: could not — after 2 failed attempts; a person must look. Tried against must-have `file src/a.rs` — missing: 1) one; 2) two".into(),
            }
        );
        // The same approach repeated is one approach: no saturation.
        let same = failed_attempt(&with(&[tried("one")], Some("one")), must, 3);
        assert!(matches!(same.outcome, TaskOutcome::Failed { .. }));
        assert!(
            !error_research::analyse(&[tried("one"), tried("one")])
                .unwrap()
                .saturated
        );
    }

    #[test]
    fn a_refused_commit_reopens_the_task_with_the_hooks_last_lines() {
        let output: String = (1..=25).map(|i| format!("line {i}\n")).collect();
        let d = after_refused_commit("pre-commit", &output, &Attempts::default(), 3);
        assert_eq!(d.edits[0], Edit::SetState(TaskState::InProgress));
        let Edit::AddAttempt(note) = &d.edits[1] else {
            panic!("{:?}", d.edits)
        };
        assert!(
            note.starts_with("the `pre-commit` hook refused the commit:\nline 6\n"),
            "{note}"
        );
        assert!(note.ends_with("line 25"), "{note}");
    }

    #[test]
    fn a_refused_message_goes_back_to_the_review_twice_then_is_an_attempt() {
        let none = Attempts::default();
        let output: String = (1..=25).map(|i| format!("line {i}\n")).collect();
        for refusals in [1, 2] {
            assert_eq!(
                after_refused_message("commit-msg", &output, refusals, &none, 3),
                Next::Go(()),
                "{refusals}"
            );
        }
        let note = "the `commit-msg` hook refused the commit message 3 times (kern asked the review for a new one 2 times); its last output:\n".to_string()
            + &(6..=25).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n");
        let mut want = failed_attempt(&none, &note, 3);
        want.edits.insert(0, Edit::SetState(TaskState::InProgress));
        assert_eq!(
            after_refused_message("commit-msg", &output, 3, &none, 3),
            Next::End(want)
        );
        // The refusal counts like any failure: the sixth blocks.
        let five = attempts(&["a", "b", "c", "d", "e"]);
        assert!(matches!(
            after_refused_message("commit-msg", "x", 3, &five, 3),
            Next::End(Decision {
                outcome: TaskOutcome::Blocked { attempt: 6, .. },
                ..
            })
        ));
    }

    #[test]
    fn a_new_message_keeps_the_first_reviews_learnings_unless_it_has_its_own() {
        let none = Attempts::default();
        let mut first = review(Verdict::Commit, None);
        first.learnings = vec!["the first review's".into()];
        let mut again = review(Verdict::Commit, None);
        again.subject = "feat: add the parser".into();
        let mut want = again.clone();
        want.learnings = vec!["the first review's".into()];
        assert_eq!(
            after_message_review(Ok(again.clone()), &first, &none, 3),
            Next::Go(want)
        );
        again.learnings = vec!["its own".into()];
        assert_eq!(
            after_message_review(Ok(again.clone()), &first, &none, 3),
            Next::Go(again)
        );
        let reject = review(Verdict::Reject, Some("the test is missing"));
        assert_eq!(
            after_message_review(Ok(reject.clone()), &first, &none, 3),
            after_review(Ok(reject), &none, 3)
        );
        assert_eq!(
            after_message_review(Err("no usable result".into()), &first, &none, 3),
            Next::End(failed_attempt(&none, "no usable result", 3))
        );
    }

    #[test]
    fn the_parents_a_commit_marked_done_are_the_ones_it_sets_back() {
        let title = |doc: &Document, ids: Vec<TaskIdentity>| -> Vec<String> {
            ids.iter()
                .map(|id| doc.tasks()[doc.find(id).unwrap()].title.clone())
                .collect()
        };
        let table: Vec<(&str, &str, &str, Vec<&str>)> = vec![
            (
                "the whole chain",
                "- [~] a\n  - [~] b\n    - [~] c\n",
                "- [x] a\n  - [x] b\n    - [x] c\n",
                vec!["b", "a"],
            ),
            (
                "up to the first open one",
                "- [~] a\n  - [~] b\n    - [~] c\n  - [ ] d\n",
                "- [~] a\n  - [x] b\n    - [x] c\n  - [ ] d\n",
                vec!["b"],
            ),
            (
                "not one that was done before",
                "- [x] a\n  - [~] b\n    - [~] c\n",
                "- [x] a\n  - [x] b\n    - [x] c\n",
                vec!["b"],
            ),
            ("a task without parents", "- [~] c\n", "- [x] c\n", vec![]),
        ];
        for (name, before, after, want) in table {
            let (before, after) = (Document::parse(before), Document::parse(after));
            let task = after.tasks().iter().position(|t| t.title == "c").unwrap();
            let got = completed_parents(&before, &after, &after.identity(task));
            assert_eq!(title(&after, got), want, "{name}");
        }
    }

    #[test]
    fn commit_messages() {
        let mut r = review(Verdict::Commit, None);
        assert_eq!(commit_message(&r, "Task", &[], &[]), "Add the parser");
        r.body = Some("  Why it was done.  ".into());
        assert_eq!(
            commit_message(&r, "Task", &[], &[]),
            "Add the parser\n\nWhy it was done.\n"
        );
        assert_eq!(
            commit_message(&r, "Task", &["`Beta` [ ] → [x]".into()], &[]),
            "Add the parser\n\nWhy it was done.\n\nSPEC.md changes not made by kern:\n- `Beta` [ ] → [x]\n"
        );
        r.subject = " ".into();
        r.body = None;
        assert_eq!(
            commit_message(&r, "The task title", &[], &[]),
            "The task title"
        );
        // Escape sequences and control characters never reach the commit.
        r.subject = "\x1b]0;pwned\x07 \x1b[31mRed\x1b[0m fix\r".into();
        r.body = Some("with \x1b[2J a clear\r\nscreen\x00".into());
        assert_eq!(
            commit_message(&r, "T", &["`\x1b[1mB\x1b[0m` [ ] → [x]".into()], &[]),
            "Red fix\n\nwith  a clear\nscreen\n\nSPEC.md changes not made by kern:\n- `B` [ ] → [x]\n"
        );
        r.subject = "\x1b[0m".into();
        assert!(commit_message(&r, "Ti\x07tle", &[], &[]).starts_with("Title\n"));
    }

    #[test]
    fn trailers_close_the_message_in_a_paragraph_of_their_own() {
        let closes = ["Closes acme/app#12".to_string()];
        let mut r = review(Verdict::Commit, None);
        assert_eq!(
            commit_message(&r, "Task", &[], &closes),
            "Add the parser\n\nCloses acme/app#12\n"
        );
        r.body = Some("Why it was done.".into());
        assert_eq!(
            commit_message(&r, "Task", &["`Beta` [ ] → [x]".into()], &closes),
            "Add the parser\n\nWhy it was done.\n\nSPEC.md changes not made by kern:\n- `Beta` [ ] → [x]\n\nCloses acme/app#12\n"
        );
        // A review that wrote the trailer itself gets it once.
        r.body = Some("Why.\n\nCloses acme/app#12".into());
        assert_eq!(
            commit_message(&r, "Task", &[], &closes),
            "Add the parser\n\nWhy.\n\nCloses acme/app#12\n"
        );
    }

    #[test]
    fn a_commit_closes_the_issues_of_the_tasks_it_finishes() {
        let before = Document::parse(
            "- [~] Parent\n  > **Issue:** acme/app#1\n  - [x] One\n  - [~] Two\n    > **Issue:** acme/app#2\n- [x] Old\n  > **Issue:** acme/app#3\n- [ ] Later\n  > **Issue:** acme/app#4\n",
        );
        let after = Document::parse(
            "- [x] Parent\n  > **Issue:** acme/app#1\n  - [x] One\n  - [x] Two\n    > **Issue:** acme/app#2\n- [x] Old\n  > **Issue:** acme/app#3\n- [ ] Later\n  > **Issue:** acme/app#4\n",
        );
        let closed: Vec<String> = closed_issues(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(closed, ["acme/app#1", "acme/app#2"]);
        assert!(closed_issues(&after, &after).is_empty());
    }

    #[test]
    fn a_pending_subtask_keeps_the_task_open_at_commit() {
        let done = vec![Edit::SetState(TaskState::Done), Edit::CompleteParents];
        let doc = Document::parse("- [~] Parent\n  - [x] Done part\n- [~] Leaf\n");
        assert_eq!(commit_edits(&doc, 2), done);
        assert_eq!(commit_edits(&doc, 0), done);
        let doc = Document::parse("- [~] Parent\n  - [ ] Added by hand\n");
        assert!(commit_edits(&doc, 0).is_empty());
    }
}
