//! [`Told`]: what the person is told of a run and `run.jsonl` does not record — the morning
//! report has no use for it, or another event records the same happening.

use super::{LeftOutFile, Leftover, TaskTaken};
use crate::stage::Stage;

/// What the person is told and `run.jsonl` does not record: the morning report has no use
/// for it, or another event records the same happening.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Told {
    /// A try of a stage's agent starts (again, after a retry or a wait).
    StageTry {
        /// The stage.
        stage: Stage,
        /// The task's title.
        task: String,
    },
    /// What the run has cost so far, after a stage (the live status line shows it).
    CostSoFar {
        /// USD.
        usd: f64,
    },
    /// The watchdog lost its run (it died, or stalled and was stopped); it starts it again
    /// after `delay` (the `--notify` command hears it).
    RunLost {
        /// Why.
        why: super::Lost,
        /// The run's pid.
        run_pid: i32,
        /// What the watchdog saw.
        detail: String,
        /// The wait before the run starts again.
        delay: std::time::Duration,
        /// The restart this will be, in a row.
        restart: u32,
        /// Restarts in a row at most (`--max-restarts`).
        of: u32,
    },
    /// A countdown goes on: a usage-limit wait, a retry delay, the pause between iterations
    /// (told again as it goes on).
    Waiting {
        /// What is waited for.
        reason: String,
        /// How long from now.
        remaining: std::time::Duration,
    },
    /// The run stopped for the person (exit 2 or 5): the `--notify` command hears it; the
    /// error itself is the run's last line.
    StoppedForPerson {
        /// The exit code.
        code: u8,
        /// The error, whole.
        message: String,
    },
    /// A usage-limit wait begins (the `--notify` command hears it; the countdown is
    /// [`Told::Waiting`]).
    UsageLimitWait {
        /// The stage.
        stage: Stage,
        /// The task's title.
        task: String,
        /// The agent's words.
        reason: String,
        /// When the limit resets, if the agent said (epoch seconds).
        resets_at: Option<i64>,
        /// How long kern waits.
        wait: std::time::Duration,
    },
    /// Research is not run: `level_zero` — the task earns none; else its Research note is
    /// already in SPEC.md.
    ResearchSkipped {
        /// Level 0 rather than a note already written.
        level_zero: bool,
    },
    /// Changes outside the task's Scope were set aside: `note` is the task's SPEC.md note.
    ScopeSetAside {
        /// The task's title.
        task: String,
        /// The note written under the task.
        note: String,
    },
    /// `--remote`: the task's commit landed on the remote's branch.
    Landed {
        /// The task's title.
        task: String,
        /// The remote's name.
        remote: String,
        /// The branch there.
        branch: String,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
    },
    /// A stage starts on the other agent: its own is at a usage limit seen earlier in the run.
    StartsOnOther {
        /// The stage.
        stage: crate::stage::Stage,
        /// Why, as the stage's record keeps it.
        reason: String,
        /// The agent that runs it.
        to: String,
    },
    /// A line from making a commit (a hook's or formatter's doing, a file git treats apart).
    FromCommit {
        /// What the person reads.
        line: String,
        /// Said as a warning.
        warn: bool,
    },
    /// `--pr`: what opening the pull request said.
    PullRequest {
        /// What the person reads.
        line: String,
        /// It was opened.
        opened: bool,
    },
    /// `--pace`: an agent's usage window is past the pace. `handed_over`: the next stages
    /// run on the fallback agent (the summary keeps the line); else no new task is taken.
    Paced {
        /// What the person reads.
        line: String,
        /// The run goes on, on the fallback agent.
        handed_over: bool,
    },
    /// The check gate is about to run `command` (its `check` event says how it ended).
    CheckStarted {
        /// The command.
        command: String,
    },
    /// `--check` on the starting commit is about to run, or was skipped because a task in
    /// progress has its work in the tree.
    BaselineCheck {
        /// The command.
        command: String,
        /// Skipped rather than run.
        skipped: bool,
    },
    /// Changed files a commit is about to leave out (the `commit` event lists them).
    LeftOutOfCommit {
        /// The files and why.
        files: Vec<LeftOutFile>,
    },
    /// A parallel task's commit left a changed file out: it stays in the task's worktree.
    LeftInWorktree {
        /// The task.
        task: String,
        /// The file and why.
        file: LeftOutFile,
    },
    /// The person took kern's task away during the run; kern follows (`set_aside` records
    /// the work kept).
    TaskTaken {
        /// The task's title.
        task: String,
        /// What the person did.
        how: TaskTaken,
        /// Where its work is kept, when it left any.
        saved: Option<String>,
    },
    /// An edit of kern's that waited for an invalid SPEC.md to be fixed was applied, or
    /// dropped because its task is gone.
    WaitingEdit {
        /// The task's title.
        task: String,
        /// The task file as the person names it.
        spec: String,
        /// Applied rather than dropped.
        applied: bool,
    },
    /// The agent a dead run left running was stopped.
    OrphanStopped,
    /// Something a dead run left behind was removed.
    LeftoverRemoved {
        /// Its path.
        path: String,
        /// What it was.
        what: Leftover,
    },
    /// Nothing is left to do, but some lines look like tasks without being list items.
    Unlisted {
        /// The lines, as diagnostics.
        lines: Vec<String>,
    },
    /// A stage file of another task was found and ignored.
    StaleStageFile {
        /// The file's name.
        file: String,
        /// The task it belongs to.
        task: String,
    },
    /// The iteration's task, where it is and why it was taken (`iteration_start` records it).
    TaskSelected {
        /// The task's title.
        task: String,
        /// The task file as the person names it.
        spec: String,
        /// Its line.
        line: usize,
        /// Why it was taken.
        why: String,
        /// The stage it goes on with.
        next: String,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
    },
    /// `--allow-dirty`: the person's changed paths that stay out of kern's commits.
    PersonsPaths {
        /// The paths.
        paths: Vec<String>,
    },
    /// A parallel task's worktree still held changes when it was removed: kept.
    WorktreeSaved {
        /// The task.
        task: String,
        /// Where.
        git_ref: String,
    },
    /// The last run stopped while writing a parallel task's work into the tree: put back, it
    /// is applied again.
    ApplyingAgain {
        /// The task.
        task: String,
    },
    /// A task branch held earlier work of the task: kept before the branch starts over.
    BranchKept {
        /// The branch.
        branch: String,
        /// The task.
        task: String,
        /// Where the work is kept.
        kept: String,
    },
    /// A hook refused the commit message: the review is asked for a new one.
    MessageRefused {
        /// The hook.
        hook: String,
        /// The refused message's subject.
        subject: String,
        /// This refusal's number.
        refusals: u32,
        /// How many new messages kern asks for at most.
        of: u32,
        /// A parallel task's: its work waits on its branch.
        on_branch: bool,
    },
    /// A task stays open: a pending subtask was added by hand, taken next.
    StaysOpen {
        /// The task.
        task: String,
    },
    /// The commit the last run could not make is being finished.
    FinishingCommit {
        /// The task.
        task: String,
    },
    /// A hook refused the finishing commit: the task goes on from its review.
    PendingCommitRefused {
        /// The hook.
        hook: String,
        /// The task.
        task: String,
    },
    /// The machine is kept awake while the run lasts.
    Awake {
        /// The tool that does it.
        tool: String,
    },
    /// HEAD is detached: kern's commits will be on no branch.
    Detached {
        /// HEAD's commit.
        oid: String,
    },
    /// kern reads the top folder's task list while the folder the person runs it in holds
    /// another of the same name (a monorepo's package).
    SpecElsewhere {
        /// The task list kern reads, as the person names it.
        spec: String,
        /// The other one, relative to the repository's top folder.
        here: String,
    },
    /// SPEC.md is not committed yet: kern commits it with the first task.
    SpecUntracked {
        /// The task file as the person names it.
        spec: String,
    },
    /// The state folder was removed during the run (a tmp cleaner?) and made again.
    StateDirRemade {
        /// The folder.
        dir: String,
        /// When (`during the implement stage`).
        when: String,
    },
    /// A stage failed in a way worth a retry: the next try starts after `delay`.
    Retrying {
        /// The stage.
        stage: Stage,
        /// Why it failed.
        reason: String,
        /// This retry's number.
        retry: u32,
        /// Retries at most.
        of: usize,
        /// The wait before it.
        delay: std::time::Duration,
    },
    /// A stage's agent hit its usage limit; the stage runs on the other agent.
    Switching {
        /// The stage.
        stage: Stage,
        /// The agent at its limit.
        from: String,
        /// The one taking the stage over.
        to: String,
        /// What `from` said.
        message: String,
        /// Until when `from` is limited, as the person reads it.
        until: String,
        /// How long the other agent must itself wait first.
        wait: std::time::Duration,
    },
    /// Processes a stage left running outside its process group were stopped.
    StrayProcesses {
        /// The stage.
        stage: Stage,
        /// Their pids.
        pids: Vec<i32>,
    },
    /// SPEC.md validates, with warnings (the validator's diagnostics, rendered).
    SpecWarnings {
        /// One diagnostic each.
        lines: Vec<String>,
    },
    /// A task changed paths outside its Scope and `--scope strict` holds that against it.
    OutOfScope {
        /// The task's Scope patterns.
        scope: Vec<String>,
        /// The paths outside it.
        paths: Vec<String>,
    },
    /// `--remote`: this machine claimed a task.
    Claimed {
        /// The task.
        task: String,
        /// The remote.
        remote: String,
        /// The claim's ref.
        claim: String,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
    },
    /// `--remote`: this machine took over a task whose claim lapsed.
    TookOver {
        /// The task.
        task: String,
        /// The remote.
        remote: String,
        /// Who held it.
        holder: String,
        /// The attempt this is.
        attempt: u32,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
        /// The host of the machine that held it, when its claim said.
        from_host: Option<String>,
    },
    /// `--remote`: this machine freed its claim on a task (the task ended here without
    /// landing, or the run ends).
    Released {
        /// The task.
        task: String,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
    },
    /// `--remote`: a task taken over resumes from the work its last machine pushed (`paths` of
    /// it), or starts again when there is none.
    Resumed {
        /// The task.
        task: String,
        /// The ref the work was pushed to.
        work: String,
        /// How many paths it brought back.
        paths: usize,
    },
    /// `--remote`: a claim lapsed and another machine took the task over.
    ClaimLost {
        /// The task.
        task: String,
        /// The tracker issue its Issue note names, when it has one.
        issue: Option<String>,
    },
    /// `--remote --review`: a task's branch was pushed for review.
    PushedForReview {
        /// The branch.
        branch: String,
        /// The remote.
        remote: String,
    },
    /// `--remote`: the remote refused a push.
    RemoteRefused {
        /// The remote.
        remote: String,
        /// What it refused, as the person reads it.
        refused: String,
        /// Why, when the remote said.
        why: Option<String>,
        /// What stays where.
        stays: String,
    },
    /// `--remote`: the target branch moved while a task landed; it is applied again.
    Relanding {
        /// `remote/branch`.
        moved: String,
        /// The task.
        task: String,
    },
    /// `--remote`: a task was not landed, its claim lapsed.
    NotLanded {
        /// The task.
        task: String,
        /// Its branch here.
        branch: String,
    },
    /// A task's notes were rewritten in kern's current layout, their words kept.
    NotesRewritten {
        /// The task.
        task: String,
    },
    /// The tracker was told what became of a task (`--tracker github`).
    Tracked {
        /// The issue (`owner/repo#N`).
        issue: String,
        /// What kern did there: `commented (taken)`, `labelled kern:<host>`, `unlabelled …`.
        action: String,
    },
}

impl Told {
    /// Its kind in snake case (`stage_try`): what a run's heartbeat names when the last thing
    /// that moved was only told.
    pub(crate) fn kind(&self) -> String {
        let debug = format!("{self:?}");
        let variant = debug.split([' ', '{', '(']).next().unwrap_or_default();
        let mut kind = String::with_capacity(variant.len() + 4);
        for (i, c) in variant.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                kind.push('_');
            }
            kind.push(c.to_ascii_lowercase());
        }
        kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_told_happening_is_named_by_its_kind() {
        assert_eq!(Told::OrphanStopped.kind(), "orphan_stopped");
        assert_eq!(
            Told::StageTry {
                stage: Stage::Implement,
                task: "Alpha { beta }".into()
            }
            .kind(),
            "stage_try"
        );
    }
}
