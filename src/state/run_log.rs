//! `run.jsonl`: one JSON line per event of every run on this project and branch, kept across
//! iterations and runs (the stage files are not). It is the source of truth for what a run
//! did; [`RunEvent`] is its vocabulary, one variant per kind of line.
//!
//! Each line is `{"ts", "run", "event", …fields}`, written with a single `write` on a file
//! opened for appending, so lines from a crashed run are whole or absent. Writing the log never
//! stops a run: an overnight run that cannot append a log line still commits its work; the
//! failure is traced at warn level. Readers skip lines they cannot parse (a newer kern's).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::stage::Stage;
use crate::stage::record::Outcome;
use crate::timestamp::Timestamp;

/// How one iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IterationEnd {
    /// Nothing was left to select.
    NothingLeft,
    /// The task was committed.
    Committed,
    /// Something changed (notes, subtasks, a block) but nothing was committed.
    Progressed,
    /// The task was skipped: no progress.
    Skipped,
}

/// A changed file kern left out of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOutFile {
    /// The path, relative to the work tree.
    pub path: String,
    /// Why it was left out.
    pub reason: String,
}

/// One line of `run.jsonl`, without its `ts` and `run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// A run took the lock and starts its iterations.
    RunStart {
        /// Iterations asked for.
        iterations: u32,
        /// The pause between iterations, in seconds.
        delay_s: u64,
        /// The agent, as `--agent` names it.
        agent: String,
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
    },
    /// A stage ended: with an outcome, or with an error that stops the run.
    StageEnd {
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
        /// The agent, as `--agent` names it: the one that ran the stage's last try (a stage
        /// may move to the fallback agent, `agent_switch`).
        #[serde(default)]
        agent: String,
        /// The model: the one asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A stage moved to the other agent: its agent hit a usage limit that resets later than
    /// `--fallback-after` (or was already at one).
    AgentSwitch {
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
    /// SPEC.md changed during a stage in ways kern did not make: markers, Check notes, tasks.
    HandEdit {
        /// The stage it happened during.
        stage: Stage,
        /// One sentence per change.
        changes: Vec<String>,
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
    /// A task was finished with nothing to commit.
    NoCommit {
        /// The task's title.
        task: String,
        /// Why there was nothing.
        why: String,
    },
    /// The check gate ran.
    Check {
        /// The command.
        command: String,
        /// Whether it passed.
        passed: bool,
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
        /// Why.
        why: String,
    },
    /// kern committed a task.
    Commit {
        /// The task's title.
        task: String,
        /// The new commit.
        sha: String,
        /// Changed files left out of it.
        left_out: Vec<LeftOutFile>,
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
    /// The run ended.
    RunEnd {
        /// How it ended, in words.
        ended: String,
        /// What the run cost.
        cost_usd: f64,
        /// The exit code.
        exit_code: u8,
    },
}

/// One line of `run.jsonl` as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedEvent {
    /// When it happened.
    pub ts: Timestamp,
    /// The run it belongs to.
    pub run: String,
    /// What happened.
    #[serde(flatten)]
    pub event: RunEvent,
}

/// The event log of one run.
pub struct RunLog {
    path: PathBuf,
    run_id: String,
}

impl RunLog {
    /// A log appending to `path`; `run_id` tells this run's lines from others'.
    pub fn new(path: PathBuf, run_id: String) -> RunLog {
        RunLog { path, run_id }
    }

    /// This run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one event, stamped now.
    pub fn event(&self, event: RunEvent) {
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
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&bytes));
        if let Err(error) = written {
            tracing::warn!(path = %self.path.display(), %error, "cannot append to run.jsonl");
        }
    }
}

/// Parses `run.jsonl` text; lines that are not events of this kern are skipped.
pub fn parse(text: &str) -> Vec<LoggedEvent> {
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of every kind, as `run.jsonl` holds them.
    fn every_event() -> Vec<RunEvent> {
        vec![
            RunEvent::RunStart {
                iterations: 10,
                delay_s: 30,
                agent: "claude".into(),
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
            },
            RunEvent::StageEnd {
                stage: Stage::Implement,
                outcome: Some(Outcome::Succeeded),
                cost_usd: 0.25,
                duration_ms: 61_000,
                retries: 1,
                failure: None,
                error: None,
                agent: "codex".into(),
                model: Some("o3".into()),
            },
            RunEvent::StageEnd {
                stage: Stage::Review,
                outcome: None,
                cost_usd: 0.0,
                duration_ms: 0,
                retries: 0,
                failure: None,
                error: Some("interrupted by SIGINT".into()),
                agent: "claude".into(),
                model: None,
            },
            RunEvent::AgentSwitch {
                stage: Stage::Implement,
                from: "claude".into(),
                to: "codex".into(),
                reason: "You've hit your 5-hour limit · resets 2:08am (UTC)".into(),
                limited_until: Some(1_795_018_000),
            },
            RunEvent::Violation {
                stage: Stage::Research,
                violations: vec!["research stage is read-only but changed a.txt".into()],
                reverted: vec!["a.txt".into()],
                saved: vec!["refs/kern/saved/add-the-parser/research-1".into()],
            },
            RunEvent::HandEdit {
                stage: Stage::Implement,
                changes: vec!["`Other` [ ] → [x]".into()],
            },
            RunEvent::SetAside {
                task: "Hard".into(),
                git_ref: "refs/kern/attempts/hard/1".into(),
                paths: vec!["half.txt".into()],
                why: "skipped".into(),
            },
            RunEvent::NoCommit {
                task: "Tidy".into(),
                why: "nothing changed that kern commits".into(),
            },
            RunEvent::Check {
                command: "cargo test".into(),
                passed: false,
            },
            RunEvent::Decomposed {
                task: "Big".into(),
                subtasks: vec!["One".into(), "Two".into()],
            },
            RunEvent::Blocked {
                task: "Hard".into(),
                why: "6 failed attempts".into(),
            },
            RunEvent::Commit {
                task: "Add the parser".into(),
                sha: "0123456789abcdef0123456789abcdef01234567".into(),
                left_out: vec![LeftOutFile {
                    path: ".env".into(),
                    reason: "sensitive file name (.env)".into(),
                }],
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
            command: "true".into(),
            passed: true,
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
        });
        let lines = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].run, "r1");
        assert!(matches!(lines[1].event, RunEvent::Blocked { .. }));
    }
}
