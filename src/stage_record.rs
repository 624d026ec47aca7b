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

use crate::agent::stream::AgentOutput;
use crate::error::Result;
use crate::stage::{Stage, StageReport};

/// The version of the envelope's layout; bumped when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// One stage record.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRecord {
    /// The agent's final result object (without any `kern` key).
    pub agent_result: Map<String, Value>,
    /// kern's envelope, written under `kern`.
    pub kern: KernEnvelope,
}

/// kern's own facts about a stage run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernEnvelope {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The stage.
    pub stage: Stage,
    /// The task the stage worked on.
    pub task: TaskRef,
    /// The agent, as `--agent` names it (`claude`, `codex`, `program:<path>`).
    pub agent: String,
    /// The full command line: the program, then its arguments.
    pub argv: Vec<String>,
    /// The model asked for, if any.
    pub model: Option<String>,
    /// When the stage started (RFC 3339).
    pub started_at: String,
    /// When the stage ended (RFC 3339).
    pub finished_at: String,
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
    /// The size of the prompt sent on stdin.
    pub prompt_bytes: u64,
}

/// Which task a record belongs to; resume compares `identity` to tell a stale file from a
/// current one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRef {
    /// The task's title, whitespace-normalised.
    pub title: String,
    /// The task's identity as the spec module serialises it (title plus ancestor titles).
    pub identity: Value,
    /// The task's 1-based line in SPEC.md when the stage started.
    pub line: usize,
}

/// Why kern paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// The backoff delay before retrying a transient failure.
    Retry,
    /// Waiting for a usage limit to reset.
    UsageLimit,
}

/// One pause in a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// Retry delay or usage-limit wait.
    pub kind: WaitKind,
    /// What the agent said that caused it.
    pub reason: String,
    /// When the pause began (RFC 3339).
    pub started_at: String,
    /// How long it lasted.
    pub duration_ms: u64,
    /// For a usage limit: when it was to reset (epoch seconds), if known.
    #[serde(default)]
    pub resets_at: Option<i64>,
}

/// How a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
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
    /// The record of a run: Claude's `result` event as the top level when there is one, else
    /// the same shape built from `out`; `.result` is always a string.
    pub fn from_output(out: &AgentOutput, kern: KernEnvelope) -> StageRecord {
        let mut agent_result = match &out.result_event {
            Some(Value::Object(event)) => event.clone(),
            _ => built_result(out),
        };
        if !agent_result.get("result").is_some_and(Value::is_string) {
            agent_result.insert("result".into(), Value::String(out.result_text.clone()));
        }
        // The envelope owns this key; an agent field of that name would be overwritten.
        agent_result.remove("kern");
        StageRecord { agent_result, kern }
    }

    /// The record as pretty JSON: the agent's fields, then `"kern": {…}`, then a newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut object = self.agent_result.clone();
        object.remove("kern");
        let kern = serde_json::to_value(&self.kern).unwrap_or(Value::Null);
        object.insert("kern".into(), kern);
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(object)).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Writes the record atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        crate::atomic_file::write(path, &self.to_json())
    }

    /// Reads a record; `None` when the file is missing, unreadable or not a record (resume
    /// then treats the stage as not run).
    pub fn load(path: &Path) -> Option<StageRecord> {
        let bytes = std::fs::read(path).ok()?;
        let mut agent_result: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
        let kern: KernEnvelope = serde_json::from_value(agent_result.remove("kern")?).ok()?;
        if !agent_result.get("result").is_some_and(Value::is_string) {
            return None;
        }
        Some(StageRecord { agent_result, kern })
    }

    /// What the stage said (`.result`).
    pub fn result(&self) -> &str {
        self.agent_result
            .get("result")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Claude's result shape, from what a non-Claude agent gave.
fn built_result(out: &AgentOutput) -> Map<String, Value> {
    let mut map = Map::new();
    let mut put = |key: &str, value: Value| {
        map.insert(key.to_string(), value);
    };
    put("type", Value::from("result"));
    put("subtype", opt(out.subtype.clone()));
    put("is_error", Value::from(out.is_error));
    put("api_error_status", opt(out.api_error_status));
    put("num_turns", opt(out.num_turns));
    put("result", Value::from(out.result_text.clone()));
    put("session_id", opt(out.session_id.clone()));
    put("total_cost_usd", Value::from(out.cost_usd));
    put("usage", out.usage.clone());
    put("modelUsage", out.model_usage.clone());
    put(
        "permission_denials",
        Value::Array(out.permission_denials.clone()),
    );
    put(
        "structured_output",
        out.structured_output.clone().unwrap_or(Value::Null),
    );
    put("terminal_reason", opt(out.terminal_reason.clone()));
    if !out.errors.is_empty() {
        put(
            "errors",
            Value::Array(out.errors.iter().cloned().map(Value::from).collect()),
        );
    }
    map
}

fn opt<T: Into<Value>>(value: Option<T>) -> Value {
    value.map(Into::into).unwrap_or(Value::Null)
}
