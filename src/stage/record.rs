//! The stage record: `stageN.json`, what one stage said plus kern's envelope (DESIGN.md §3).
//!
//! The one decision a reader must know: the record's top level is the agent's own final
//! result object — for Claude the `result` event itself, byte for byte in content; for other
//! agents the same shape built from what they gave — and kern's own facts live only under the
//! key `kern`. So `jq .result stage2.json` works for every agent, and `.result` is always a
//! string (empty when the agent said nothing), never missing or null.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::spec::TaskIdentity;
use crate::stage::{Stage, StageReport};
use crate::timestamp::Timestamp;

/// The version of the envelope's layout; bumped when a field changes meaning.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// One stage record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StageRecord {
    /// The agent's final result object (without any `kern` key).
    pub agent_result: Map<String, Value>,
    /// kern's envelope, written under `kern`.
    pub kern: KernEnvelope,
}

/// kern's own facts about a stage run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KernEnvelope {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The stage.
    pub stage: Stage,
    /// The task the stage worked on.
    pub task: TaskRef,
    /// The agent that ran the stage (its last try), as `--agent` names it (`claude`, `codex`,
    /// `program:<path>`).
    pub agent: String,
    /// The full command line: the program, then its arguments.
    pub argv: Vec<String>,
    /// The model asked for, if any.
    pub model: Option<String>,
    /// When the stage started.
    pub started_at: Timestamp,
    /// When the stage ended.
    pub finished_at: Timestamp,
    /// How long it took, retries and waits included.
    pub duration_ms: u64,
    /// The agent's exit code (`null`: ended by a signal).
    pub exit_code: Option<i32>,
    /// Which attempt at the task this was (1-based).
    pub attempt: u32,
    /// Transient failures retried in this stage.
    pub retries: u32,
    /// Every pause: retry delays and usage-limit waits.
    #[serde(default)]
    pub waits: Vec<Wait>,
    /// Each move of the stage to another agent (a usage limit that resets too late), in order;
    /// empty when the stage ran on one agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<Switch>,
    /// How the stage ended.
    pub outcome: Outcome,
    /// The parsed report (`status` / `verdict` / notes), when there is one.
    #[serde(default)]
    pub report: Option<StageReport>,
    /// Why the stage failed, in words.
    #[serde(default)]
    pub failure: Option<String>,
    /// What the audit found the agent did that its stage forbids.
    #[serde(default)]
    pub violations: Vec<String>,
    /// What kern reverted after a violation.
    #[serde(default)]
    pub reverted: Vec<String>,
    /// What kern's own check of the task's must-haves and read-only tests found after this
    /// implement stage (`jq .kern.must stage2.json`), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub must: Vec<String>,
    /// `Tests: first`: the task's tests red on the base commit, then after this implement
    /// stage (`jq .kern.tests_first stage2.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_first: Option<TestsFirstRecord>,
    /// The usage windows the agent reported during the stage, each with its use before and
    /// after (`jq .kern.window stage2.json`); empty when it reported none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<WindowUse>,
    /// The size of the prompt sent on stdin.
    pub prompt_bytes: u64,
    /// How the stage was fenced and what the fence denied (`jq .kern.sandbox stage2.json`):
    /// `mode` (`kern`, `agent`, `off`), the network and hosts, the denied attempts with their
    /// path or host and counts, the variables kept back. Absent in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::FenceReport>,
}

/// One usage window as a stage saw it: how much of it was used before the stage (the run's
/// last reading of the same window, `None` when the run had none) and after it, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WindowUse {
    /// The agent that reported it.
    pub agent: String,
    /// `five_hour`, `seven_day`, …
    pub kind: String,
    /// Percent used before the stage, when known.
    #[serde(default)]
    pub used_before: Option<f64>,
    /// Percent used after it.
    pub used_after: f64,
    /// When the window resets, in seconds since the epoch.
    #[serde(default)]
    pub resets_at: Option<i64>,
}

impl WindowUse {
    /// The points of the window this stage used, when its use before is known.
    pub(crate) fn spent(&self) -> Option<f64> {
        self.used_before
            .map(|before| (self.used_after - before).max(0.0))
    }
}

/// What kern saw of a task's tests (`Tests: first`), in the implement stage's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestsFirstRecord {
    /// The command.
    pub command: String,
    /// The test files kern held.
    pub tests: Vec<String>,
    /// The ref of the commit holding them as the tests step wrote them.
    pub saved: String,
    /// What the command printed on the base commit plus the tests, where it failed.
    pub red: String,
    /// What it printed after implement, when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green: Option<String>,
    /// The tests held and the command passed after implement.
    pub passed: bool,
}

/// Which task a record belongs to; resume compares `identity` to tell a stale file from a
/// current one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskRef {
    /// The task's title, whitespace-normalised.
    pub title: String,
    /// The task's identity (its title and its ancestors' titles).
    pub identity: TaskIdentity,
    /// The task's 1-based line in SPEC.md when the stage started.
    pub line: usize,
}

/// Why kern paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WaitKind {
    /// The backoff delay before retrying a transient failure.
    Retry,
    /// Waiting for a usage limit to reset.
    UsageLimit,
}

/// One pause in a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Wait {
    /// Retry delay or usage-limit wait.
    pub kind: WaitKind,
    /// What the agent said that caused it.
    pub reason: String,
    /// When the pause began.
    pub started_at: Timestamp,
    /// How long it lasted.
    pub duration_ms: u64,
    /// For a usage limit: when it was to reset (epoch seconds), if known.
    #[serde(default)]
    pub resets_at: Option<i64>,
}

/// A stage moved from one agent to the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Switch {
    /// The agent that could not go on.
    pub from: String,
    /// The agent that took the stage over.
    pub to: String,
    /// What `from` said (its usage-limit message).
    pub reason: String,
    /// When the switch happened.
    pub at: Timestamp,
    /// When `from` may be tried again (epoch seconds), if known.
    #[serde(default)]
    pub limited_until: Option<i64>,
}

/// How a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// The agent ran and its report was read.
    Succeeded,
    /// The agent failed, or gave no usable report.
    Failed,
    /// A time limit stopped it (after its retries).
    TimedOut,
    /// Ctrl-C or SIGTERM stopped it; the resume state is kept.
    Interrupted,
    /// The audit found a forbidden change.
    Violated,
}

impl StageRecord {
    /// The record of a run from the agent's result object (Claude's `result` event, or the same
    /// shape built from another agent's output: `pipeline/stage/attempt.rs`); `.result` is
    /// always a string and the key `kern` is the envelope's.
    pub(crate) fn new(
        mut agent_result: Map<String, Value>,
        kern: KernEnvelope,
        result_text: &str,
    ) -> StageRecord {
        if !agent_result.get("result").is_some_and(Value::is_string) {
            agent_result.insert("result".into(), Value::String(result_text.to_string()));
        }
        // The envelope owns this key; an agent field of that name would be overwritten.
        agent_result.remove("kern");
        StageRecord { agent_result, kern }
    }

    /// The record as pretty JSON: the agent's fields, then `"kern": {…}`, then a newline.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut object = self.agent_result.clone();
        object.remove("kern");
        let kern = serde_json::to_value(&self.kern).unwrap_or(Value::Null);
        object.insert("kern".into(), kern);
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(object)).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Writes the record atomically, `0600`. Only the stage runner calls it
    /// (`pipeline/stage/runner.rs`, `attempt.rs`; `architecture.rs` holds it).
    pub(crate) fn write_record(&self, path: &Path) -> Result<()> {
        crate::atomic_file::write_private(path, &self.to_json())
    }

    /// Reads a record (never through a symlink); `None` when the file is missing, unreadable
    /// or not a record (resume then treats the stage as not run).
    pub(crate) fn load(path: &Path) -> Option<StageRecord> {
        let bytes = crate::private_file::read(path).ok()?;
        let mut agent_result: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
        let kern: KernEnvelope = serde_json::from_value(agent_result.remove("kern")?).ok()?;
        if !agent_result.get("result").is_some_and(Value::is_string) {
            return None;
        }
        Some(StageRecord { agent_result, kern })
    }

    #[cfg(test)]
    /// What the stage said (`.result`).
    pub(crate) fn result(&self) -> &str {
        self.agent_result
            .get("result")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::stream::AgentOutput;
    use crate::agent::stream::StreamFormat;
    use crate::agent::stream::fixture::{parse, parse_lines};
    use crate::stage::{ImplementReport, ImplementStatus};
    use serde_json::json;

    fn envelope(stage: Stage, outcome: Outcome, report: Option<StageReport>) -> KernEnvelope {
        KernEnvelope {
            schema: SCHEMA_VERSION,
            stage,
            task: TaskRef {
                title: "Write out-1.txt".into(),
                identity: TaskIdentity {
                    path: vec!["Files".into(), "Write out-1.txt".into()],
                    occurrence: 0,
                },
                line: 7,
            },
            agent: "claude".into(),
            argv: vec!["claude".into(), "-p".into()],
            model: Some("sonnet".into()),
            started_at: "2026-01-15T04:00:00+01:00".parse().unwrap(),
            finished_at: "2026-01-15T04:01:00+01:00".parse().unwrap(),
            duration_ms: 60_500,
            exit_code: Some(0),
            attempt: 1,
            retries: 1,
            waits: vec![Wait {
                kind: WaitKind::Retry,
                reason: "API Error: 529 Overloaded.".into(),
                started_at: "2026-01-15T04:00:10+01:00".parse().unwrap(),
                duration_ms: 30_000,
                resets_at: None,
            }],
            switches: Vec::new(),
            outcome,
            report,
            failure: None,
            violations: Vec::new(),
            reverted: Vec::new(),
            must: Vec::new(),
            tests_first: None,
            window: Vec::new(),
            prompt_bytes: 1234,
            sandbox: None,
        }
    }

    fn from_output(out: &AgentOutput, kern: KernEnvelope) -> StageRecord {
        crate::pipeline::stage::attempt::record(out, kern)
    }

    fn jq(args: &[&str], path: &Path) -> String {
        let out = std::process::Command::new("/usr/bin/jq")
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn a_claude_record_is_the_result_event_plus_kern() {
        let (_, out) = parse("implement-success", StreamFormat::Claude);
        let report = crate::stage::extract_report(
            Stage::Implement,
            out.structured_output.as_ref(),
            &out.result_text,
        )
        .unwrap();
        let record = from_output(
            &out,
            envelope(Stage::Implement, Outcome::Succeeded, Some(report.clone())),
        );
        assert_eq!(
            Value::Object(record.agent_result.clone()),
            *out.result_event.as_ref().unwrap()
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stage2.json");
        record.write_record(&path).unwrap();
        assert_eq!(
            jq(&["-r", ".result"], &path),
            "{\"attempt_note\":null,\"learnings\":[\"the real CLI wrote out-1.txt\"],\"no_change_reason\":null,\"status\":\"SUCCESS\",\"subtasks\":null,\"summary\":\"wrote out-1.txt\"}\n"
        );
        assert_eq!(jq(&["-r", ".kern.outcome"], &path), "succeeded\n");
        assert_eq!(jq(&["-r", ".kern.report.status"], &path), "SUCCESS\n");
        assert_eq!(jq(&["-r", ".kern.waits[0].kind"], &path), "retry\n");
        assert_eq!(
            jq(&["-c", ".structured_output.status"], &path),
            "\"SUCCESS\"\n"
        );
        assert_eq!(jq(&["-r", ".total_cost_usd"], &path), "0.212913\n");

        let loaded = StageRecord::load(&path).unwrap();
        assert_eq!(loaded, record);
        assert_eq!(loaded.kern.report, Some(report));
        assert_eq!(loaded.kern.task.identity.path[0], "Files");
        assert_eq!(
            jq(&["-r", ".kern.started_at"], &path),
            "2026-01-15T03:00:00Z\n"
        );
    }

    #[test]
    fn result_is_a_string_even_when_claude_gave_none() {
        let (_, out) = parse("implement-max-turns", StreamFormat::Claude);
        assert!(out.result_event.as_ref().unwrap().get("result").is_none());
        let mut kern = envelope(Stage::Implement, Outcome::Failed, None);
        kern.failure = Some("Reached maximum number of turns (1)".into());
        let record = from_output(&out, kern);
        assert_eq!(record.agent_result["result"], json!(""));
        assert_eq!(
            record.agent_result["errors"],
            json!(["Reached maximum number of turns (1)"])
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stage2.json");
        record.write_record(&path).unwrap();
        assert_eq!(jq(&["-c", ".result"], &path), "\"\"\n");
        assert_eq!(jq(&["-r", ".kern.outcome"], &path), "failed\n");
    }

    #[test]
    fn other_agents_get_the_same_shape() {
        let (_, out) = parse_lines(["I did it.", "SUCCESS"], StreamFormat::Detect, Some(0), "");
        let record = from_output(
            &out,
            envelope(
                Stage::Implement,
                Outcome::Succeeded,
                Some(StageReport::Implement(ImplementReport {
                    status: ImplementStatus::Success,
                    summary: String::new(),
                    attempt_note: None,
                    subtasks: Vec::new(),
                    learnings: Vec::new(),
                    no_change_reason: None,
                })),
            ),
        );
        assert_eq!(
            Value::Object(record.agent_result.clone()),
            json!({
                "type": "result",
                "subtype": null,
                "is_error": false,
                "api_error_status": null,
                "num_turns": null,
                "result": "I did it.\nSUCCESS",
                "session_id": null,
                "total_cost_usd": 0.0,
                "usage": {},
                "modelUsage": {},
                "permission_denials": [],
                "structured_output": null,
                "terminal_reason": null,
            })
        );
        let written: Value = serde_json::from_slice(&record.to_json()).unwrap();
        assert_eq!(written["result"], "I did it.\nSUCCESS");
        assert_eq!(written["kern"]["report"]["status"], "SUCCESS");
        assert_eq!(written["kern"]["stage"], "implement");
        assert_eq!(written["kern"]["schema"], 1);
    }

    #[test]
    fn every_outcome_has_its_documented_name() {
        let table = [
            (Outcome::Succeeded, "succeeded"),
            (Outcome::Failed, "failed"),
            (Outcome::TimedOut, "timed_out"),
            (Outcome::Interrupted, "interrupted"),
            (Outcome::Violated, "violated"),
        ];
        for (outcome, name) in table {
            assert_eq!(serde_json::to_value(outcome).unwrap(), json!(name));
        }
    }

    #[test]
    fn an_agent_kern_field_never_replaces_the_envelope() {
        let (_, out) = parse_lines(
            [
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","kern":"mine"}"#,
            ],
            StreamFormat::Claude,
            Some(0),
            "",
        );
        let record = from_output(&out, envelope(Stage::Research, Outcome::Succeeded, None));
        let written: Value = serde_json::from_slice(&record.to_json()).unwrap();
        assert_eq!(written["kern"]["outcome"], "succeeded");
        assert_eq!(record.result(), "ok");
    }

    #[test]
    fn bad_files_load_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, Option<&[u8]>); 5] = [
            ("missing.json", None),
            ("garbage.json", Some(b"{not json")),
            ("no-kern.json", Some(br#"{"result":"x"}"#)),
            (
                "bad-kern.json",
                Some(br#"{"result":"x","kern":{"schema":1}}"#),
            ),
            ("truncated.json", Some(br#"{"result":"x","kern":{"#)),
        ];
        for (name, bytes) in cases {
            let path = dir.path().join(name);
            if let Some(bytes) = bytes {
                std::fs::write(&path, bytes).unwrap();
            }
            assert_eq!(StageRecord::load(&path), None, "{name}");
        }
    }
}
