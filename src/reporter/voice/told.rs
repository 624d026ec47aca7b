//! The words of the happenings that are told and not recorded ([`Told`]): the terminal's
//! lines for them, as [`voice`](super) words the recorded events'.
//!
//! The decision a reader must know: a told happening the live status line shows (a stage's
//! try, a wait, the cost so far) or `--notify` hears gets no line here, so it is never said
//! twice.

use super::{Said, out_of_scope};
use crate::event::{Leftover, TaskTaken, Told};
use crate::spec::Quoted;
use crate::text;

/// The lines of a happening that is told and not recorded.
pub(super) fn said(told: &Told) -> Vec<Said> {
    use Said::{Info, Warn};
    match told {
        // The live status shows these (`Reporter::hear`); `--notify` hears the last two.
        Told::StageTry { .. }
        | Told::RunLost { .. }
        | Told::CostSoFar { .. }
        | Told::Waiting { .. }
        | Told::UsageLimitWait { .. }
        | Told::StoppedForPerson { .. } => Vec::new(),
        Told::Paced { line, .. } => vec![Info(line.clone())],
        Told::ResearchSkipped { level_zero: true } => vec![Info(
            "research: skipped, level 0 (implement gets the task and the context)".into(),
        )],
        Told::ResearchSkipped { level_zero: false } => vec![Info(
            "research: skipped, the task already has a Research note".into(),
        )],
        Told::ScopeSetAside { task, note } => vec![Warn(format!("{}: {note}", Quoted(task)))],
        Told::Landed {
            task,
            remote,
            branch,
            ..
        } => vec![Info(format!(
            "landed {} on `{remote}/{branch}`",
            Quoted(task)
        ))],
        Told::StartsOnOther { stage, reason, to } => {
            vec![Info(format!("{stage}: {reason}; running it on {to}"))]
        }
        Told::FromCommit { line, warn: true }
        | Told::PullRequest {
            line,
            opened: false,
        } => {
            vec![Warn(line.clone())]
        }
        Told::FromCommit { line, warn: false } | Told::PullRequest { line, opened: true } => {
            vec![Info(line.clone())]
        }
        Told::CheckStarted { command } => vec![Info(format!("check: `{command}`"))],
        Told::BaselineCheck { command, skipped } => vec![Info(if *skipped {
            format!(
                "baseline check skipped: a task is in progress, its work is in the tree (`{command}` runs as its gate)"
            )
        } else {
            format!("baseline check: `{command}` on the starting commit")
        })],
        Told::LeftOutOfCommit { files } => files
            .iter()
            .map(|l| {
                Warn(format!(
                    "left out of the commit: `{}` ({})",
                    l.path, l.reason
                ))
            })
            .collect(),
        Told::TaskTaken { task, how, saved } => {
            let what = match how {
                TaskTaken::Gone => "is no longer in SPEC.md (removed or renamed by hand)".into(),
                TaskTaken::SetTo(marker) => {
                    format!("was set to [{marker}] by hand during the run")
                }
            };
            vec![Warn(format!(
                "task {} {what}: kern follows the person{}",
                Quoted(task),
                saved
                    .as_ref()
                    .map(|r| format!(" — its work is saved at `{r}`"))
                    .unwrap_or_default()
            ))]
        }
        Told::WaitingEdit {
            task,
            spec,
            applied,
        } => vec![if *applied {
            Info(format!(
                "applied kern's edit of {} that waited for {spec} to be fixed",
                Quoted(task)
            ))
        } else {
            Warn(format!(
                "dropped kern's waiting edit of {}: the task is no longer in {spec}",
                Quoted(task)
            ))
        }],
        Told::OrphanStopped => {
            vec![Warn("stopped the agent that run left behind".into())]
        }
        Told::LeftoverRemoved { path, what } => vec![Warn(match what {
            Leftover::UnreadableLock => format!(
                "took over the lock `{path}`: it held no readable record (a run killed while writing it)"
            ),
            Leftover::ScriptLock => format!("removed the original script's stale lock `{path}`"),
            Leftover::TempFile => format!("removed `{path}` left by a kern killed while writing"),
            Leftover::GitLock => format!("removed `{path}` left by the crashed kern"),
        })],
        Told::StateDirRemade { dir, when } => vec![Warn(format!(
            "the state folder `{dir}` was removed {when} (a tmp cleaner?): kern made it again and goes on; what it held is lost"
        ))],
        Told::Retrying {
            stage,
            reason,
            retry,
            of,
            delay,
        } => vec![Warn(format!(
            "{stage} failed ({reason}); retry {retry} of {of} in {}",
            text::duration(*delay)
        ))],
        Told::Switching {
            stage,
            from,
            to,
            message,
            until,
            wait,
        } => vec![Warn(format!(
            "{stage}: {from} hit its usage limit ({message}), until {until}; running the stage on {to}{}",
            if wait.is_zero() {
                String::new()
            } else {
                format!(" once its own limit resets, in {}", text::duration(*wait))
            }
        ))],
        Told::StrayProcesses { stage, pids } => vec![Warn(format!(
            "stopped {} the {stage} stage left running outside its process group (pids {})",
            text::count(pids.len(), "process", "processes"),
            pids.iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))],
        Told::SpecWarnings { lines } => lines.iter().map(|l| Warn(l.clone())).collect(),
        Told::OutOfScope { scope, paths } => vec![Warn(out_of_scope(scope, paths))],
        Told::Claimed {
            task,
            remote,
            claim,
            ..
        } => vec![Info(format!(
            "claimed {} on `{remote}` (`{claim}`)",
            Quoted(task)
        ))],
        Told::TookOver {
            task,
            remote,
            holder,
            attempt,
            ..
        } => vec![Info(format!(
            "took over {} on `{remote}`: the claim of {holder} lapsed (attempt {attempt})",
            Quoted(task)
        ))],
        Told::Resumed { task, work, paths } => vec![Info(match paths {
            0 => format!(
                "{} starts again on the branch's tip (no work of its last machine to resume)",
                Quoted(task)
            ),
            n => format!(
                "{} resumes from the work its last machine pushed (`{work}`: {})",
                Quoted(task),
                text::count(*n, "path", "paths")
            ),
        })],
        Told::Released { .. } => Vec::new(),
        Told::Tracked { issue, action } => vec![Info(format!("{action} {issue}"))],
        Told::ClaimLost { task, .. } => vec![Warn(format!(
            "lost the claim on {}: it lapsed and another machine took the task over — this run's work on it will not land",
            Quoted(task)
        ))],
        Told::PushedForReview { branch, remote } => {
            vec![Info(format!("pushed `{branch}` to `{remote}` for review"))]
        }
        Told::RemoteRefused {
            remote,
            refused,
            why,
            stays,
        } => vec![Warn(format!(
            "the remote `{remote}` refused {refused}{}: {stays}",
            why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default()
        ))],
        Told::Relanding { moved, task } => vec![Info(format!(
            "`{moved}` moved while {} landed: applying it again on the new tip",
            Quoted(task)
        ))],
        Told::NotLanded { task, branch } => vec![Warn(format!(
            "{} was not landed: its claim lapsed and another machine took the task over — this run's work stays on `{branch}` here",
            Quoted(task)
        ))],
        Told::Unlisted { lines } => vec![Warn(format!(
            "nothing left to do — but these lines look like tasks without being list items:\n{}",
            lines.join("\n")
        ))],
        Told::StaleStageFile { file, task } => vec![Info(format!(
            "ignoring stale `{file}`: it belongs to task {}",
            Quoted(task)
        ))],
        Told::TaskSelected {
            task,
            spec,
            line,
            why,
            next,
            issue,
        } => vec![Info(format!(
            "task {} ({spec}:{line}{}): {why}; next stage: {next}",
            Quoted(task),
            issue
                .as_deref()
                .map_or_else(String::new, |i| format!(", issue {i}"))
        ))],
        Told::PersonsPaths { paths } => vec![Warn(format!(
            "--allow-dirty: these paths stay out of kern's commits: {}",
            paths.join(", ")
        ))],
        Told::LeftInWorktree { task, file } => vec![Warn(format!(
            "left out of {}: `{}` ({}) — it stays in the task's worktree, saved when that goes",
            Quoted(task),
            file.path,
            file.reason
        ))],
        Told::WorktreeSaved { task, git_ref } => vec![Info(format!(
            "the worktree of {} still held changes: saved at `{git_ref}`",
            Quoted(task)
        ))],
        Told::ApplyingAgain { task } => vec![Warn(format!(
            "the last run stopped while it wrote the work of {} into the work tree: put back, it is applied again",
            Quoted(task)
        ))],
        Told::BranchKept { branch, task, kept } => vec![Info(format!(
            "the branch `{branch}` held earlier work of {}: kept at `{kept}`",
            Quoted(task)
        ))],
        Told::MessageRefused {
            hook,
            subject,
            refusals,
            of,
            on_branch,
        } => vec![Warn(if *on_branch {
            format!(
                "the `{hook}` hook refused the message `{subject}` — asking the task's review for a new message ({refusals} of {of}); its work stays as it is on its branch"
            )
        } else {
            format!(
                "the `{hook}` hook refused the message `{subject}` — asking the review for a new message ({refusals} of {of}); the work stays as it is"
            )
        })],
        Told::StaysOpen { task } => vec![Info(format!(
            "{} stays open: it has a pending subtask (added by hand), taken next",
            Quoted(task)
        ))],
        Told::FinishingCommit { task } => vec![Info(format!(
            "finishing the commit of {} that the last run could not make",
            Quoted(task)
        ))],
        Told::PendingCommitRefused { hook, task } => vec![Warn(format!(
            "the `{hook}` hook refused that commit: {} is in progress again and goes on from its review",
            Quoted(task)
        ))],
        Told::Awake { tool } => vec![Info(format!(
            "keeping the machine awake while the run lasts ({tool})"
        ))],
        Told::Detached { oid } => vec![Warn(format!(
            "HEAD is detached at {}: kern's commits will be on no branch — keep them afterwards with `git branch <name> HEAD`",
            text::short_oid(oid)
        ))],
        Told::SpecElsewhere { spec, here } => vec![Warn(format!(
            "`{spec}` is the task list kern works on, the repository's top folder's; `{here}` in the folder you are in is another one — to work on it: `kern --spec {here}`"
        ))],
        Told::SpecUntracked { spec } => vec![Warn(format!(
            "`{spec}` is not committed yet: kern commits it, and LEARNINGS.md, with the first task"
        ))],
        Told::NotesRewritten { task } => vec![Info(format!(
            "rewrote the notes of `{task}` in kern's layout, their words kept: blank `>` lines between notes, so that CommonMark reads them apart (they were written another way — by hand, by a formatter or by an older kern)"
        ))],
    }
}

#[cfg(test)]
mod tests {
    use crate::event::{RunEvent, Told};
    use crate::reporter::voice::{self, Said};

    #[test]
    fn told_happenings_read_as_before_they_were_events() {
        let stray = |pids: Vec<i32>| {
            voice::said(&RunEvent::Told(Told::StrayProcesses {
                stage: crate::stage::Stage::Implement,
                pids,
            }))
        };
        assert_eq!(
            stray(vec![7]),
            [Said::Warn(
                "stopped 1 process the implement stage left running outside its process group (pids 7)".into()
            )]
        );
        assert_eq!(
            stray(vec![7, 8]),
            [Said::Warn(
                "stopped 2 processes the implement stage left running outside its process group (pids 7, 8)".into()
            )]
        );
        assert_eq!(
            voice::said(&RunEvent::Told(Told::Retrying {
                stage: crate::stage::Stage::Research,
                reason: "HTTP 500".into(),
                retry: 1,
                of: 3,
                delay: std::time::Duration::from_secs(30),
            })),
            [Said::Warn(
                "research failed (HTTP 500); retry 1 of 3 in 30s".into()
            )]
        );
        // Recorded events stay recorded; told ones never reach run.jsonl.
        assert!(!RunEvent::Told(Told::OrphanStopped).is_recorded());
        assert!(
            RunEvent::Blocked {
                task: "x".into(),
                why: "x".into(),
                line: 3,
                issue: None,
                note: String::new(),
            }
            .is_recorded()
        );
    }
}
