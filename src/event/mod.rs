//! What happens in a run, as one vocabulary: [`RunEvent`] (one variant per kind of line
//! `run.jsonl` records, or [`Told`] for what the person is only told) and the small types its
//! variants carry. Every listener names a happening with it — the reporter's voice, the
//! summary, the ledger, `--notify`, the run log and the morning report — so it is a leaf of
//! its own beside `stage/`, not part of any listener.
//!
//! The one decision a reader must know: an event is data, never words. `reporter/voice.rs`
//! words every variant for the person; `state/run_log.rs` writes the recorded ones as JSON
//! lines, whose names and fields are a format kept across versions (`kern report` reads old
//! logs), so a variant or field is added, never renamed.

mod told;

use serde::{Deserialize, Serialize};

use crate::stage::Stage;
use crate::stage::record::{Outcome, Wait, WindowUse};
use crate::timestamp::Timestamp;

pub(crate) use told::Told;

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
        /// The `kern watch` that started the run (its id, the `run` of its own lines).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        watch: Option<String>,
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
        /// Of how many the run was asked for (absent in older logs).
        #[serde(default, skip_serializing_if = "is_zero")]
        of: u32,
        /// The task's title.
        task: String,
        /// Its line in SPEC.md.
        line: usize,
        /// The stage it resumes at (`research`, `implement`, `commit`).
        resume: String,
        /// The tracker issue its Issue note names (`owner/repo#N`), when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issue: Option<String>,
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
        /// What the stage's line shows of its report: `SUCCESS`, `COMMIT`, `4 notes`, or the
        /// outcome (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        said: Option<String>,
        /// What the stage's line says of its fence: `unfenced: --sandbox off`, `fence denied
        /// 3` (absent when kern fenced it and denied nothing, and in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence: Option<String>,
        /// The usage windows the agent reported, with this stage's use of each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        window: Vec<WindowUse>,
        /// The tokens the agent reported (input, cache and output), when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u64>,
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
    /// `--pace`: a usage window is at its line before a stage: the run pauses until `until`
    /// (`action: pause`), or takes no new task (`stop`).
    Paced {
        /// The task, when one is under way.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage about to start.
        stage: Stage,
        /// The agent whose window it is.
        agent: String,
        /// The window: `five_hour`, `seven_day`, …
        kind: String,
        /// `pause` or `stop`.
        action: String,
        /// Until when the pause lasts (epoch seconds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<i64>,
        /// What the person read.
        line: String,
    },
    /// `--pace`: the run goes on after a pause.
    Resumed {
        /// The task, when one is under way.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage that starts now.
        stage: Stage,
        /// The window it waited for.
        kind: String,
        /// How long it waited.
        waited_ms: u64,
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
    /// Commits were made on the run's branch during a stage that may make them (implement),
    /// the agent's or the person's in the same work tree: kept in history, not part of the
    /// task's commit, and no violation (DESIGN.md section 4).
    BranchMoved {
        /// The task whose stage saw it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The stage.
        stage: Stage,
        /// One sentence: the commits (short id and subject) and the branch.
        commits: Vec<String>,
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
        /// The tracker issue its Issue note names, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issue: Option<String>,
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
    /// `Tests: first`: the task's tests run on the base commit plus only them, where they must
    /// fail (red).
    TestsRed {
        /// The task.
        task: String,
        /// The command.
        command: String,
        /// The test files.
        tests: Vec<String>,
        /// They failed, as they must: the proof holds.
        failed: bool,
        /// What the command printed (its last lines).
        output: String,
    },
    /// `Tests: first`, after implement: the task's tests held as the tests step wrote them and
    /// the command passed (green).
    TestsGreen {
        /// The task.
        task: String,
        /// The command.
        command: String,
        /// The test files.
        tests: Vec<String>,
        /// The test files implement changed or deleted (put back); empty when they held.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed: Vec<String>,
        /// The tests held and the command passed.
        passed: bool,
        /// What the command printed (its last lines), when it ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
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
        /// The tracker issue its Issue note names, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issue: Option<String>,
        /// The Blocked note as kern wrote it, for the tracker's comment.
        #[serde(skip)]
        note: String,
    },
    /// A call of the tracker's CLI (`--tracker github`: `gh`) failed; the run goes on.
    TrackerFailed {
        /// The issue it concerned (`owner/repo#N`).
        issue: String,
        /// What kern asked of it: `comment (taken)`, `label kern:<host>`, `unlabel kern:<host>`.
        action: String,
        /// Why it failed, in kern's words with gh's own.
        why: String,
        /// What the person can do.
        fix: String,
        /// The tracker is off for the rest of the run (`gh` missing or not logged in).
        #[serde(default)]
        off: bool,
        /// The first failure of its kind in the run: the person is warned (the rest are only
        /// recorded).
        #[serde(skip)]
        warn: bool,
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
        /// The night's deadline, when the run ended at it (`--until`, `--deadline`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<Timestamp>,
    },
    /// `kern watch` began to watch the night (a watchdog's lines carry its own id as `run`).
    WatchStart {
        /// The watchdog's pid.
        pid: i32,
        /// `--stall-after`, in seconds.
        stall_after_s: u64,
        /// `--max-restarts`.
        max_restarts: u32,
    },
    /// The watchdog started a run, or adopted one already going.
    WatchRun {
        /// The run's pid.
        pid: i32,
        /// Already running when the watchdog came (its own watchdog was gone).
        adopted: bool,
    },
    /// The watchdog started the run again: the night's gap ran from the lost run's last sign
    /// of progress (`from`) to the new start (`to`).
    WatchRestart {
        /// Why the run was lost.
        why: Lost,
        /// The lost run's pid.
        run_pid: i32,
        /// What the watchdog saw (`killed by SIGKILL in implement`).
        detail: String,
        /// The lost run's last sign of progress.
        from: Timestamp,
        /// When it was started again.
        to: Timestamp,
        /// This restart's number in a row (without a task finished between them).
        restart: u32,
    },
    /// The watchdog ended: with the run's exit code, or giving up on a run that keeps dying.
    WatchEnd {
        /// The watchdog's exit code.
        exit_code: u8,
        /// How it ended, in words.
        ended: String,
        /// It gave up: the run keeps dying or stalling, and is left stopped.
        #[serde(default)]
        gave_up: bool,
    },
}

/// Why a watchdog lost its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Lost {
    /// It died: killed, crashed, or its machine went down.
    Died,
    /// It showed no progress for `--stall-after` and was stopped.
    Stalled,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lost::Died => "died",
            Lost::Stalled => "stalled",
        })
    }
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

/// Whether a count is 0 (a field older logs lack is not written as 0).
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunEvent {
    /// Whether `run.jsonl` records the event; the rest are only told.
    pub(crate) fn is_recorded(&self) -> bool {
        !matches!(self, RunEvent::Told(_))
    }

    /// The event's name in `run.jsonl` (`stage_end`); `told` for one only told.
    pub(crate) fn name(&self) -> String {
        if !self.is_recorded() {
            return "told".into();
        }
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("event")?.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}
