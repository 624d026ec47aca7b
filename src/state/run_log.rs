//! `run.jsonl`: one JSON line per event of every run on this project and branch, kept across
//! iterations and runs (the stage files are not). It is the source of truth for what a run
//! did; [`RunEvent`] is its vocabulary, one variant per kind of line.
//!
//! Each line is `{"ts", "run", "event", …fields}`, written with a single `write` on a file
//! opened for appending, so lines from a crashed run are whole or absent. The file rotates at
//! 8 MiB into `run.jsonl.1` (see `rotating.rs`); [`read_all`] reads both. Writing the log never
//! stops a run: an overnight run that cannot append a log line still commits its work; the
//! failure is traced at warn level. Readers skip lines they cannot parse (a newer kern's).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::stage::Stage;
use crate::stage::record::{Outcome, Wait};
use crate::timestamp::Timestamp;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How one iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IterationEnd {
    /// Nothing was left to select.
    NothingLeft,
    /// The task was committed.
    Committed,
    /// Something changed (notes, subtasks, a block) but nothing was committed.
    Progressed,
    /// The task was skipped: no progress.
    Skipped,
    /// A parallel task passed its review in its worktree: the run integrates it next.
    Ready,
}

/// A changed file kern left out of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeftOutFile {
    /// The path, relative to the work tree.
    pub path: String,
    /// Why it was left out.
    pub reason: String,
}

/// One line of `run.jsonl`, without its `ts` and `run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum RunEvent {
    /// A run took the lock and starts its iterations.
    RunStart {
        /// Iterations asked for.
        iterations: u32,
        /// The pause between iterations, in seconds.
        delay_s: u64,
        /// The agent, as `--agent` names it.
        agent: String,
        /// The `--max-cost` budget, when one was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
        /// `--sandbox`: `kern`, `agent` or `off` (absent in logs of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<crate::sandbox::Mode>,
    },
    /// The run took over the lock of a run that is gone.
    LockRecovered {
        /// The dead run's pid.
        pid: i32,
        /// Why it counts as gone.
        why: String,
        /// What it was doing.
        phase: String,
    },
    /// An iteration selected its task.
    IterationStart {
        /// 1-based iteration number.
        index: u32,
        /// The task's title.
        task: String,
        /// Its line in SPEC.md.
        line: usize,
        /// The stage it resumes at (`research`, `implement`, `commit`).
        resume: String,
    },
    /// A stage's agent is about to start.
    StageStart {
        /// The stage.
        stage: Stage,
        /// The task's title.
        task: String,
        /// The prompt's size.
        prompt_bytes: u64,
        /// The agent, as `--agent` names it.
        #[serde(default)]
        agent: String,
        /// The model asked for (template front matter or `--model`), when one was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Which attempt at the task this is (1-based).
        #[serde(default)]
        attempt: u32,
    },
    /// A stage ended: with an outcome, or with an error that stops the run.
    StageEnd {
        /// The task, with parallel tasks (`-j`) interleaving their events; older logs lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage.
        stage: Stage,
        /// How it ended (absent when `error` is set).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome>,
        /// What it cost, retries included.
        #[serde(default)]
        cost_usd: f64,
        /// How long it took, retries and waits included.
        #[serde(default)]
        duration_ms: u64,
        /// Transient failures retried.
        #[serde(default)]
        retries: u32,
        /// kern's note when the stage failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        /// The error that stopped the run during the stage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The agent, as `--agent` names it.
        #[serde(default)]
        agent: String,
        /// The model: the one asked for, else the one the agent reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The agent's turns, when it reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turns: Option<u64>,
        /// The pauses in the stage: retry delays and usage-limit waits.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        waits: Vec<Wait>,
    },
    /// kern's fence denied attempts of a fenced process (a stage's agent, the check, a `run`
    /// must-have, a hook): what was tried, by path or host, with counts.
    Denied {
        /// The task (none for the check before any task).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// Which process: the stage's name, `check`, `must-have`, `hook`, `baseline check`.
        by: String,
        /// The denied attempts.
        denied: Vec<crate::sandbox::Denial>,
        /// Denied attempts beyond the ones named.
        #[serde(default, skip_serializing_if = "is_zero")]
        more: u32,
    },
    /// A stage moved to the other agent: its agent hit a usage limit that resets later than
    /// `--fallback-after` (or was already at one).
    AgentSwitch {
        /// The task, with parallel tasks (`-j`) interleaving their events; older logs lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage.
        stage: Stage,
        /// The agent at its limit.
        from: String,
        /// The agent that took the stage over.
        to: String,
        /// What `from` said.
        reason: String,
        /// When `from` may be tried again (epoch seconds), if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limited_until: Option<i64>,
    },
    /// The audit after a stage found what the stage forbids.
    Violation {
        /// The task, with parallel tasks (`-j`) interleaving their events; older logs lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage.
        stage: Stage,
        /// What was found, one sentence each.
        violations: Vec<String>,
        /// What kern put back.
        reverted: Vec<String>,
        /// Where what was taken out is kept (`refs/kern/…`).
        #[serde(default)]
        saved: Vec<String>,
    },
    /// A ref that is not the run's (another worktree's branch, a remote-tracking ref, the
    /// stash, a tag) was moved back or deleted during a stage: not undone and not held against
    /// the task, its old tip kept (DESIGN.md section 4).
    SharedRef {
        /// The task whose stage saw it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage.
        stage: Stage,
        /// One sentence per ref.
        moved: Vec<String>,
        /// Where the old tips are kept (`refs/kern/saved/…`).
        saved: Vec<String>,
    },
    /// The task's discovery level, rated before its stages (DESIGN.md section 17).
    Level {
        /// The task.
        task: String,
        /// 0 to 3.
        level: u8,
        /// Why.
        why: String,
    },
    /// kern checked the task's must-haves and read-only tests itself (DESIGN.md section 16).
    Must {
        /// The task.
        task: String,
        /// One line per must-have: ✓ or ✗, what, what kern saw.
        findings: Vec<String>,
        /// Every one held.
        passed: bool,
        /// Which of `findings` held, for the person's lines.
        #[serde(skip)]
        held: Vec<bool>,
    },
    /// SPEC.md changed during a stage in ways kern did not make: markers, Check notes, tasks.
    HandEdit {
        /// The task, with parallel tasks (`-j`) interleaving their events; older logs lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage it happened during.
        stage: Stage,
        /// One sentence per change.
        changes: Vec<String>,
        /// The task file as the person names it, for their line.
        #[serde(skip)]
        spec: String,
    },
    /// A task ended without a commit and its work was set aside, so the next task starts on
    /// a clean tree.
    SetAside {
        /// The task's title.
        task: String,
        /// Where the work is kept.
        git_ref: String,
        /// The paths set aside.
        paths: Vec<String>,
        /// Why the task ended.
        why: String,
    },
    /// A task was skipped: back to `[ ]` with a Skipped note; it comes back later.
    Skipped {
        /// The task's title.
        task: String,
        /// Why, as the note says it.
        reason: String,
    },
    /// A failed attempt at a task was recorded as an `Attempt N` note.
    AttemptFailed {
        /// The task's title.
        task: String,
        /// The attempt's number.
        attempt: u32,
        /// The note (kern's reason, the agent's note, the check's or reviewer's words).
        note: String,
        /// This attempt ends the task (blocked): its end is what the person is told.
        #[serde(skip)]
        ends_task: bool,
    },
    /// The terminal went away (SIGHUP): the run goes on, its lines continue in `run.log`.
    Hangup {},
    /// A task was finished with nothing to commit.
    NoCommit {
        /// The task's title.
        task: String,
        /// Why there was nothing.
        why: String,
    },
    /// The check gate ran.
    Check {
        /// The task, with parallel tasks (`-j`) interleaving their events; older logs lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The command.
        command: String,
        /// Whether it passed.
        passed: bool,
        /// What it printed when it failed, for the person's line (`check.log` keeps it).
        #[serde(skip)]
        output: Option<String>,
    },
    /// Implement split the task into subtasks.
    Decomposed {
        /// The task's title.
        task: String,
        /// The new subtasks.
        subtasks: Vec<String>,
    },
    /// kern gave up on a task and marked it `[!]`.
    Blocked {
        /// The task's title.
        task: String,
        /// Why (`needs a person: …` when it waits on the person's answer).
        why: String,
        /// Its line in SPEC.md, for `--notify`.
        #[serde(skip)]
        line: usize,
    },
    /// A parallel task's work conflicted with the branch when kern applied it: nothing was
    /// written; the task is retried (first time) or blocked.
    Conflict {
        /// The task's title.
        task: String,
        /// The conflicting paths.
        paths: Vec<String>,
        /// The task's branch.
        branch: String,
        /// How often it conflicted so far.
        attempt: u32,
        /// How the branch changed meanwhile, for the person's line.
        #[serde(skip)]
        how: String,
        /// Where its work is kept when it starts again (a first conflict), for their line.
        #[serde(skip)]
        kept: Option<String>,
    },
    /// kern committed a task.
    Commit {
        /// The task's title.
        task: String,
        /// The new commit.
        sha: String,
        /// Its subject line.
        #[serde(default)]
        subject: String,
        /// Changed files left out of it.
        left_out: Vec<LeftOutFile>,
        /// `--review`: the task branch the commit waits on (not the run's branch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        review_branch: Option<String>,
    },
    /// An iteration ended.
    IterationEnd {
        /// 1-based iteration number.
        index: u32,
        /// The task's title.
        task: String,
        /// How it ended.
        end: IterationEnd,
    },
    /// A happening the person is told of and `run.jsonl` does not record.
    #[serde(skip)]
    Told(Told),
    /// The run ended.
    RunEnd {
        /// How it ended, in words.
        ended: String,
        /// What the run cost.
        cost_usd: f64,
        /// The exit code.
        exit_code: u8,
        /// Iterations run.
        #[serde(default)]
        iterations: u32,
    },
}

/// What a dead run can leave behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// A run lock without a readable record (a run killed while writing it).
    UnreadableLock,
    /// The original script's lock folder.
    ScriptLock,
    /// kern's temp file beside SPEC.md or LEARNINGS.md.
    TempFile,
    /// git's `index.lock` or a ref lock of a kern killed committing.
    GitLock,
}

/// What the person did to a task kern was working on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskTaken {
    /// Removed it, or renamed it beyond recognition.
    Gone,
    /// Set its marker by hand (the marker's character).
    SetTo(char),
}

/// What the person is told and `run.jsonl` does not record: the morning report has no use
/// for it, or another event records the same happening.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Told {
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
}

impl RunEvent {
    /// Whether `run.jsonl` records the event; the rest are only told.
    pub(crate) fn is_recorded(&self) -> bool {
        !matches!(self, RunEvent::Told(_))
    }
}

/// One line of `run.jsonl` as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LoggedEvent {
    /// When it happened.
    pub ts: Timestamp,
    /// The run it belongs to.
    pub run: String,
    /// What happened.
    #[serde(flatten)]
    pub event: RunEvent,
}

/// The event log of one run (cheap to clone: a path and an id).
#[derive(Debug, Clone)]
pub(crate) struct RunLog {
    path: PathBuf,
    run_id: String,
}

impl RunLog {
    /// A log appending to `path`; `run_id` tells this run's lines from others'.
    pub(crate) fn new(path: PathBuf, run_id: String) -> RunLog {
        RunLog { path, run_id }
    }

    /// This run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one event, stamped now.
    pub(crate) fn event(&self, event: RunEvent) {
        self.append(&LoggedEvent {
            ts: Timestamp::now(),
            run: self.run_id.clone(),
            event,
        });
    }

    fn append(&self, line: &LoggedEvent) {
        let mut bytes = match serde_json::to_vec(line) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, "cannot encode a run.jsonl line");
                return;
            }
        };
        bytes.push(b'\n');
        let written = super::rotating::append(&self.path, &bytes, super::rotating::ROTATE_BYTES);
        if let Err(error) = written {
            tracing::warn!(path = %self.path.display(), %error, "cannot append to run.jsonl");
        }
    }
}

/// Every event kept for the log at `path`: the rotated file's, then the current one's.
pub(crate) fn read_all(path: &std::path::Path) -> std::io::Result<Vec<LoggedEvent>> {
    Ok(parse(&super::rotating::read_with_rotated(path)?))
}

/// Parses `run.jsonl` text; lines that are not events of this kern are skipped.
pub(crate) fn parse(text: &str) -> Vec<LoggedEvent> {
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::record::WaitKind;
    use std::io::Write;

    /// One event of every kind, as `run.jsonl` holds them.
    fn every_event() -> Vec<RunEvent> {
        vec![
            RunEvent::RunStart {
                iterations: 10,
                delay_s: 30,
                agent: "claude".into(),
                max_cost_usd: Some(5.0),
                sandbox: Some(crate::sandbox::Mode::Kern),
            },
            RunEvent::LockRecovered {
                pid: 4242,
                why: "process 4242 is no longer running".into(),
                phase: "committing".into(),
            },
            RunEvent::IterationStart {
                index: 1,
                task: "Add the parser".into(),
                line: 3,
                resume: "research".into(),
            },
            RunEvent::StageStart {
                stage: Stage::Research,
                task: "Add the parser".into(),
                prompt_bytes: 5120,
                agent: "claude".into(),
                model: Some("opus".into()),
                attempt: 1,
            },
            RunEvent::StageEnd {
                task: Some("Add the parser".into()),
                stage: Stage::Implement,
                outcome: Some(Outcome::Succeeded),
                cost_usd: 0.25,
                duration_ms: 61_000,
                retries: 1,
                failure: None,
                error: None,
                agent: "claude".into(),
                model: Some("claude-opus-4-5".into()),
                turns: Some(12),
                waits: vec![
                    Wait {
                        kind: WaitKind::Retry,
                        reason: "API error 529 overloaded".into(),
                        started_at: Timestamp::from_epoch_seconds(1_795_000_000),
                        duration_ms: 30_000,
                        resets_at: None,
                    },
                    Wait {
                        kind: WaitKind::UsageLimit,
                        reason: "You've hit your session limit · resets 5am (UTC)".into(),
                        started_at: Timestamp::from_epoch_seconds(1_795_000_030),
                        duration_ms: 600_000,
                        resets_at: Some(1_795_000_600),
                    },
                ],
            },
            RunEvent::StageEnd {
                task: Some("Add the parser".into()),
                stage: Stage::Review,
                outcome: None,
                cost_usd: 0.0,
                duration_ms: 0,
                retries: 0,
                failure: None,
                error: Some("interrupted by SIGINT".into()),
                agent: "claude".into(),
                model: None,
                turns: None,
                waits: Vec::new(),
            },
            RunEvent::AgentSwitch {
                task: Some("Add the parser".into()),
                stage: Stage::Implement,
                from: "claude".into(),
                to: "codex".into(),
                reason: "You've hit your 5-hour limit · resets 2:08am (UTC)".into(),
                limited_until: Some(1_795_018_000),
            },
            RunEvent::Violation {
                task: Some("Add the parser".into()),
                stage: Stage::Research,
                violations: vec!["research stage is read-only but changed a.txt".into()],
                reverted: vec!["a.txt".into()],
                saved: vec!["refs/kern/saved/add-the-parser/research-1".into()],
            },
            RunEvent::Denied {
                task: Some("Add the parser".into()),
                by: "implement".into(),
                denied: vec![
                    crate::sandbox::Denial {
                        kind: crate::sandbox::report::DenialKind::Read,
                        target: "/home/me/.ssh/id_ed25519".into(),
                        count: 1,
                    },
                    crate::sandbox::Denial {
                        kind: crate::sandbox::report::DenialKind::Connect,
                        target: "203.0.113.5:443".into(),
                        count: 3,
                    },
                ],
                more: 0,
            },
            RunEvent::HandEdit {
                task: Some("Add the parser".into()),
                stage: Stage::Implement,
                changes: vec!["`Other` [ ] → [x]".into()],
                spec: String::new(),
            },
            RunEvent::SetAside {
                task: "Hard".into(),
                git_ref: "refs/kern/attempts/hard/1".into(),
                paths: vec!["half.txt".into()],
                why: "skipped".into(),
            },
            RunEvent::Skipped {
                task: "Hard".into(),
                reason: "research: the API is not designed yet".into(),
            },
            RunEvent::AttemptFailed {
                task: "Hard".into(),
                attempt: 2,
                note: "the test `parse_empty` failed: expected Ok, got Err".into(),
                ends_task: false,
            },
            RunEvent::Hangup {},
            RunEvent::NoCommit {
                task: "Tidy".into(),
                why: "nothing changed that kern commits".into(),
            },
            RunEvent::Check {
                task: Some("Add the parser".into()),
                command: "cargo test".into(),
                passed: false,
                output: None,
            },
            RunEvent::Decomposed {
                task: "Big".into(),
                subtasks: vec!["One".into(), "Two".into()],
            },
            RunEvent::Blocked {
                task: "Hard".into(),
                why: "6 failed attempts".into(),
                line: 0,
            },
            RunEvent::Commit {
                task: "Add the parser".into(),
                sha: "0123456789abcdef0123456789abcdef01234567".into(),
                subject: "Add the parser".into(),
                left_out: vec![LeftOutFile {
                    path: ".env".into(),
                    reason: "sensitive file name (.env)".into(),
                }],
                review_branch: None,
            },
            RunEvent::IterationEnd {
                index: 1,
                task: "Add the parser".into(),
                end: IterationEnd::Committed,
            },
            RunEvent::RunEnd {
                ended: "nothing left to do".into(),
                cost_usd: 0.5,
                exit_code: 0,
                iterations: 1,
            },
        ]
    }

    #[test]
    fn every_event_matches_the_golden_file_and_reads_back() {
        let golden = include_str!("../../tests/golden/run.jsonl");
        let ts = Timestamp::from_epoch_seconds(1_795_000_000);
        let written: Vec<String> = every_event()
            .into_iter()
            .map(|event| {
                serde_json::to_string(&LoggedEvent {
                    ts,
                    run: "4242-2026-11-18T08:26:40Z".into(),
                    event,
                })
                .unwrap()
            })
            .collect();
        let written = written.join("\n") + "\n";
        if std::env::var_os("KERN_BLESS").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run.jsonl");
            std::fs::write(path, &written).unwrap();
        }
        assert_eq!(
            written, golden,
            "run KERN_BLESS=1 cargo test to accept a change"
        );
        let read = parse(golden);
        assert_eq!(
            read.into_iter().map(|l| l.event).collect::<Vec<_>>(),
            every_event()
        );
    }

    #[test]
    fn appends_one_object_per_line_and_skips_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let log = RunLog::new(path.clone(), "r1".into());
        log.event(RunEvent::Check {
            task: None,
            command: "true".into(),
            passed: true,
            output: None,
        });
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"event\":\"from_a_newer_kern\"}\nnot json\n")
            .unwrap();
        log.event(RunEvent::Blocked {
            task: "t".into(),
            why: "w".into(),
            line: 0,
        });
        let lines = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].run, "r1");
        assert!(matches!(lines[1].event, RunEvent::Blocked { .. }));
    }
}
