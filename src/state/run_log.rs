//! `run.jsonl`: one JSON line per event of every run on this project and branch, kept across
//! iterations and runs (the stage files are not). It is the source of truth for what a run
//! did; [`RunEvent`] (the `event` leaf) is its vocabulary, one variant per kind of line.
//!
//! Each line is `{"ts", "run", "event", …fields}`, written with a single `write` on a file
//! opened for appending, so lines from a crashed run are whole or absent. The file rotates at
//! 8 MiB into `run.jsonl.1` (see `rotating.rs`); [`read_all`] reads both. Writing the log never
//! stops a run: an overnight run that cannot append a log line still commits its work; the
//! failure is traced at warn level. Readers skip lines they cannot parse (a newer kern's).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::event::RunEvent;
use crate::timestamp::Timestamp;

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

    /// Appends one event, stamped now; returns the line as written.
    pub(crate) fn event(&self, event: RunEvent) -> LoggedEvent {
        let line = LoggedEvent {
            ts: Timestamp::now(),
            run: self.run_id.clone(),
            event,
        };
        self.append(&line);
        line
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
    use crate::event::{IterationEnd, LeftOutFile};
    use crate::stage::Stage;
    use crate::stage::record::{Outcome, Wait, WaitKind};
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
                watch: Some("watch-4100-2026-11-18T08:20:00Z".into()),
            },
            RunEvent::LockRecovered {
                pid: 4242,
                why: "process 4242 is no longer running".into(),
                phase: "committing".into(),
            },
            RunEvent::IterationStart {
                index: 1,
                of: 0,
                task: "Add the parser".into(),
                line: 3,
                resume: "research".into(),
                issue: Some("acme/app#12".into()),
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
                said: None,
                fence: Some("fence denied 2".into()),
                window: vec![crate::stage::record::WindowUse {
                    agent: "claude".into(),
                    kind: "five_hour".into(),
                    used_before: Some(40.0),
                    used_after: 47.5,
                    resets_at: Some(1_795_010_000),
                }],
                tokens: Some(12_345),
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
                said: None,
                fence: None,
                window: Vec::new(),
                tokens: None,
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
                issue: Some("acme/app#17".into()),
            },
            RunEvent::AttemptFailed {
                task: "Hard".into(),
                attempt: 2,
                note: "the test `parse_empty` failed: expected Ok, got Err".into(),
                ends_task: false,
            },
            RunEvent::Paced {
                task: Some("Add the parser".into()),
                stage: Stage::Implement,
                agent: "claude".into(),
                kind: "five_hour".into(),
                action: "pause".into(),
                until: Some(1_795_010_000),
                line: "--pace: claude's five-hour window is 85% used, resets in 2h (the pace is 80%) — pausing 2h until then".into(),
            },
            RunEvent::Resumed {
                task: Some("Add the parser".into()),
                stage: Stage::Implement,
                kind: "five_hour".into(),
                waited_ms: 7_200_000,
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
                issue: Some("acme/app#17".into()),
                note: String::new(),
            },
            RunEvent::TrackerFailed {
                issue: "acme/app#17".into(),
                action: "comment (blocked)".into(),
                why: "`gh` cannot reach GitHub (gh: error connecting to api.github.com)".into(),
                fix: "check the network".into(),
                off: false,
                warn: false,
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
                deadline: None,
            },
            RunEvent::RunEnd {
                ended: "the deadline 07:00 ends the night: it came during the implement stage, which resumes on the next run".into(),
                cost_usd: 0.5,
                exit_code: 0,
                iterations: 1,
                deadline: Some(Timestamp::from_epoch_seconds(1_795_010_000)),
            },
            RunEvent::WatchStart {
                pid: 4100,
                stall_after_s: 900,
                max_restarts: 5,
            },
            RunEvent::WatchRun {
                pid: 4242,
                adopted: false,
            },
            RunEvent::WatchRestart {
                why: crate::event::Lost::Stalled,
                run_pid: 4242,
                detail: "nothing moved for 15m (last: the implement agent's output)".into(),
                from: Timestamp::from_epoch_seconds(1_794_999_000),
                to: Timestamp::from_epoch_seconds(1_795_000_000),
                restart: 1,
            },
            RunEvent::WatchEnd {
                exit_code: 0,
                ended: "the run ended: nothing left to do".into(),
                gave_up: false,
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
    fn every_event_has_its_name() {
        let names: Vec<String> = every_event().iter().map(RunEvent::name).collect();
        assert_eq!(names[0], "run_start");
        assert_eq!(names[4], "stage_end");
        assert!(names.contains(&"run_end".to_string()), "{names:?}");
        assert_eq!(names.last().map(String::as_str), Some("watch_end"));
        assert!(names.iter().all(|n| !n.is_empty()), "{names:?}");
        assert_eq!(
            RunEvent::Told(crate::event::Told::OrphanStopped).name(),
            "told"
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
            issue: None,
            note: String::new(),
            line: 0,
        });
        let lines = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].run, "r1");
        assert!(matches!(lines[1].event, RunEvent::Blocked { .. }));
    }
}
