//! The built-in scripted agent: `kern scripted-agent <scenario.json>`, a fake coding agent that
//! follows a scenario file and prints what the real Claude Code CLI prints.
//!
//! The decision a reader must know: it speaks **Claude-style stream-json**, shaped after the
//! recorded real output in `fixtures/claude-2.1.197/`, so everything downstream of the agent
//! (the stream parser, failure classification, stage records) runs on the real path. It is the
//! test language of the whole project and the agent of `kern demo`. kern runs it as any
//! `program:<path>` agent, typically through a two-line wrapper script
//! (`#!/bin/sh` / `exec kern scripted-agent /path/scenario.json`).
//!
//! # Environment and input
//! `KERN_STAGE` (`research|implement|commit`, required), `KERN_TASK` (the task title),
//! `KERN_TOOLS`, `KERN_SCHEMA`, `KERN_STATE_DIR` (only logged). The prompt is read from stdin
//! to its end. The working folder is the current one (kern starts agents in the repository's
//! top folder); relative paths below are relative to it.
//!
//! # Scenario format
//! ```json
//! { "default": { "research": RUN, "implement": RUN, "commit": RUN },
//!   "tasks": [ { "match": "substring of KERN_TASK",
//!                "research": [RUN, ...], "implement": [RUN, ...], "commit": [RUN, ...] } ] }
//! ```
//! The first `tasks` entry whose `match` occurs in `KERN_TASK` is chosen, else `default`. A
//! stage the chosen entry leaves out comes from `default`; a stage neither gives is a plain
//! success. A stage is one RUN or a list of them: the Nth invocation of (chosen entry, stage)
//! uses item N, and the last item repeats. An empty list is a plain success. Unknown fields are
//! errors, so a typo in a scenario fails loudly.
//!
//! Invocations are counted in `<scenario stem>.counts.json` beside the scenario
//! (`scenario.json` → `scenario.counts.json`), keyed `default/<stage>` or `tasks[i]/<stage>`,
//! written atomically. Every invocation also appends one JSON line to
//! `<scenario stem>.calls.jsonl`: `n` (0-based invocation of that key), `key`, `stage`,
//! `task`, `tools`, `schema`, `state_dir`, `cwd`, `args` and the whole `prompt`, so tests can
//! assert exactly what kern sent.
//!
//! # RUN (every field optional)
//! | field | meaning |
//! |---|---|
//! | `write` | `{path: content}`: create or replace files (parent folders created), in key order |
//! | `append` | `{path: text}`: append to files (created if missing) |
//! | `delete` | `[path]`: remove files or folders; a missing one is fine |
//! | `shell` | `[cmd]`: run each with `sh -c` in the working folder; output captured, not printed |
//! | `save_prompt` | path: write the prompt there |
//! | `sleep_before_ms` | sleep before any output or action |
//! | `sleep_ms` | sleep after the actions, before the ending (the result) |
//! | `result` | the `structured_output` object; `null` means none. Default per stage: research `{"notes":["read the code for <task>"]}`, implement `{"status":"SUCCESS","summary":"did <task>"}`, commit `{"verdict":"COMMIT","subject":"<task>"}` |
//! | `text` | the result text; default: the JSON of `result` (`""` when it is null) |
//! | `cost_usd` | `total_cost_usd`; default 0.01 (0 for the API error kinds) |
//! | `exit_code` | the exit code; default 0, or 1 for the error kinds that exit |
//! | `plain` | `true`: print only the result text as plain text, no stream-json events |
//! | `error` | one of the kinds below |
//! | `resets_in_secs` | `usage_limit`: seconds until the reset; default 300 |
//! | `huge_bytes` | `huge_output`: bytes of assistant text lines; default 1 MiB |
//! | `pid_file` | `spawn_grandchild`: where to write the grandchild's pid |
//!
//! Order of events: read stdin, `sleep_before_ms`, the `system`/`init` line, the actions
//! (`write`, `append`, `delete`, `shell`, `save_prompt`), each shown as an `assistant`
//! `tool_use` line (`Write` with `file_path`, `Edit`, `Bash` with `command`) and a `user`
//! `tool_result` line, then `sleep_ms`, then the ending: by default one `result` event like the
//! real one (`type`, `subtype`, `is_error`, `duration_ms`, `num_turns`, `result`,
//! `session_id`, `total_cost_usd`, `usage`, `modelUsage`, `permission_denials`,
//! `structured_output`, `terminal_reason`) and exit 0. The `error` kinds change the ending:
//!
//! | `error` | ending |
//! |---|---|
//! | `auth` | as `not-logged-in.jsonl`: synthetic assistant message `Not logged in · Please run /login` with `error: authentication_failed`, `is_error` result, exit 1 |
//! | `auth_retry` | an `api_retry` event with `error_status: 401`, `error: authentication_failed`, then hangs |
//! | `overloaded` | as `api-529-overloaded.jsonl`: `api_retry` `overloaded`, synthetic `server_error` message, `is_error` result with `api_error_status: 529`, exit 1 |
//! | `rate_limit` | as `api-429-rate-limit.jsonl`, status 429, exit 1 |
//! | `usage_limit` | a `rate_limit_event` with `status: rejected` and `resetsAt` = now + `resets_in_secs`, result text `You've hit your session limit · resets <h:mm>am (UTC)`, exit 1 |
//! | `max_turns` | an `error_max_turns` result with `errors`, no `result` text, exit 1 |
//! | `no_result` | no result line; `Error: …` on stderr, exit 1 |
//! | `garbage` | non-JSON lines mixed into the stream, then the normal result |
//! | `silence` | nothing after the actions; sleeps forever |
//! | `hang_after_result` | the normal result, then sleeps forever |
//! | `huge_output` | `huge_bytes` of assistant text lines, then the normal result |
//! | `spawn_grandchild` | starts a background `sleep 300` (stdout and stderr inherited, pid written to `pid_file`), then the normal result |
//!
//! In paths (`write`, `append`, `delete`, `save_prompt`, `pid_file`), contents, `text`,
//! `shell` and every string inside `result` (such as `subject`), `{task}` becomes `KERN_TASK`
//! and `{slug}` a file-name-safe slug of it (lower-case ASCII letters and digits joined by
//! `-`, at most 60 characters, `task` when empty).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::stage::Stage;

/// A whole scenario file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What every task does unless an entry of `tasks` says otherwise.
    #[serde(default)]
    pub default: StagePlans,
    /// Per-task plans, the first matching entry wins.
    #[serde(default)]
    pub tasks: Vec<TaskPlans>,
}

/// The runs of each stage.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagePlans {
    /// Stage 1.
    pub research: Option<Runs>,
    /// Stage 2.
    pub implement: Option<Runs>,
    /// Stage 3.
    pub commit: Option<Runs>,
}

/// The runs of each stage for the tasks whose title contains `pattern`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskPlans {
    /// A substring of the task title.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Stage 1.
    pub research: Option<Runs>,
    /// Stage 2.
    pub implement: Option<Runs>,
    /// Stage 3.
    pub commit: Option<Runs>,
}

/// One run, or a sequence used invocation by invocation (the last repeats).
#[derive(Debug, Clone, PartialEq)]
pub enum Runs {
    /// The same run every time.
    One(Box<Run>),
    /// Run N on the Nth invocation.
    Many(Vec<Run>),
}

/// What one agent invocation does; see the module docs for every field.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// Files to create or replace.
    #[serde(default)]
    pub write: BTreeMap<String, String>,
    /// Files to append to.
    #[serde(default)]
    pub append: BTreeMap<String, String>,
    /// Files or folders to remove.
    #[serde(default)]
    pub delete: Vec<String>,
    /// Shell commands.
    #[serde(default)]
    pub shell: Vec<String>,
    /// Where to save the prompt.
    pub save_prompt: Option<String>,
    /// Sleep before anything.
    pub sleep_before_ms: Option<u64>,
    /// Sleep before the ending.
    pub sleep_ms: Option<u64>,
    /// The structured output: absent = the stage's default, `Some(Null)` = none.
    #[serde(default, deserialize_with = "present")]
    pub result: Option<Value>,
    /// The result text.
    pub text: Option<String>,
    /// The cost to report.
    pub cost_usd: Option<f64>,
    /// The exit code.
    pub exit_code: Option<i32>,
    /// Plain text output instead of stream-json.
    #[serde(default)]
    pub plain: bool,
    /// A failure to imitate.
    pub error: Option<ErrorKind>,
    /// `usage_limit`: seconds until the reset.
    pub resets_in_secs: Option<u64>,
    /// `huge_output`: how many bytes.
    pub huge_bytes: Option<u64>,
    /// `spawn_grandchild`: where its pid goes.
    pub pid_file: Option<String>,
}

/// The failures the scripted agent can imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not logged in.
    Auth,
    /// A 401 `api_retry`, then a hang.
    AuthRetry,
    /// API 529.
    Overloaded,
    /// API 429.
    RateLimit,
    /// A subscription usage limit with a reset time.
    UsageLimit,
    /// `error_max_turns`.
    MaxTurns,
    /// Exit 1 without a result.
    NoResult,
    /// Non-JSON lines, then a normal result.
    Garbage,
    /// Silence forever.
    Silence,
    /// A result, then a hang.
    HangAfterResult,
    /// A lot of output, then a result.
    HugeOutput,
    /// A background grandchild, then a result.
    SpawnGrandchild,
}

impl<'de> Deserialize<'de> for Runs {
    /// By hand rather than `untagged`, so that a typo inside a RUN is reported by name.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Runs, D::Error> {
        use serde::de::Error as _;
        match Value::deserialize(deserializer)? {
            Value::Array(items) => items
                .into_iter()
                .map(|item| serde_json::from_value(item).map_err(D::Error::custom))
                .collect::<std::result::Result<Vec<Run>, _>>()
                .map(Runs::Many),
            other => serde_json::from_value(other)
                .map(|run| Runs::One(Box::new(run)))
                .map_err(D::Error::custom),
        }
    }
}

/// Keeps `null` apart from an absent field.
fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Scenario {
    /// Parses a scenario.
    pub fn parse(text: &str) -> std::result::Result<Scenario, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The counting key and the runs for `task` in `stage`.
    pub fn plan(&self, task: &str, stage: Stage) -> (String, Option<&Runs>) {
        let from_default = pick(
            &self.default.research,
            &self.default.implement,
            &self.default.commit,
            stage,
        );
        match self
            .tasks
            .iter()
            .enumerate()
            .find(|(_, entry)| task.contains(entry.pattern.as_str()))
        {
            Some((i, entry)) => (
                format!("tasks[{i}]/{}", stage.name()),
                pick(&entry.research, &entry.implement, &entry.commit, stage).or(from_default),
            ),
            None => (format!("default/{}", stage.name()), from_default),
        }
    }
}

fn pick<'a>(
    research: &'a Option<Runs>,
    implement: &'a Option<Runs>,
    commit: &'a Option<Runs>,
    stage: Stage,
) -> Option<&'a Runs> {
    match stage {
        Stage::Research => research.as_ref(),
        Stage::Implement => implement.as_ref(),
        Stage::Review => commit.as_ref(),
    }
}

impl Runs {
    /// The run for the invocation numbered `n` (0-based); the last one repeats.
    pub fn nth(&self, n: u64) -> Option<&Run> {
        match self {
            Runs::One(run) => Some(run),
            Runs::Many(runs) => {
                let i = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(runs.len().checked_sub(1)?);
                runs.get(i)
            }
        }
    }
}

/// A file-name-safe slug of a task title (see the module docs).
pub fn slug(task: &str) -> String {
    let mut slug = String::new();
    let mut gap = false;
    for c in task.chars() {
        if c.is_ascii_alphanumeric() {
            let dash = gap && !slug.is_empty();
            if slug.len() + usize::from(dash) + 1 > 60 {
                break;
            }
            if dash {
                slug.push('-');
            }
            slug.push(c.to_ascii_lowercase());
            gap = false;
        } else {
            gap = true;
        }
    }
    if slug.is_empty() {
        "task".to_string()
    } else {
        slug
    }
}

/// What the substitutions need.
struct Context {
    stage: Stage,
    task: String,
    slug: String,
    cwd: PathBuf,
}

impl Context {
    fn subst(&self, text: &str) -> String {
        text.replace("{task}", &self.task)
            .replace("{slug}", &self.slug)
    }

    fn subst_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.subst(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.subst_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.subst_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn path(&self, text: &str) -> PathBuf {
        self.cwd.join(self.subst(text))
    }

    fn default_result(&self) -> Value {
        match self.stage {
            Stage::Research => json!({"notes": [format!("read the code for {}", self.task)]}),
            Stage::Implement => {
                json!({"status": "SUCCESS", "summary": format!("did {}", self.task)})
            }
            Stage::Review => json!({"verdict": "COMMIT", "subject": self.task}),
        }
    }
}

/// Runs the scripted agent on `scenario_path` (the `kern scripted-agent` subcommand). Exits
/// the process itself when the scenario asks for a non-zero exit code, or hangs forever when
/// it asks for a hang.
pub fn run(scenario_path: &Path) -> Result<()> {
    let text = fs::read_to_string(scenario_path).map_err(|e| Error::io(scenario_path, e))?;
    let scenario = Scenario::parse(&text).map_err(|e| {
        Error::Usage(format!(
            "`{}`: not a valid scenario: {e} — see the scenario format in src/scripted_agent.rs",
            scenario_path.display()
        ))
    })?;
    let stage = std::env::var("KERN_STAGE")
        .ok()
        .and_then(|s| Stage::from_name(&s))
        .ok_or_else(|| {
            Error::Usage(
                "KERN_STAGE is not research, implement or commit — the scripted agent runs under kern (--agent program:<path>)".into(),
            )
        })?;
    let task = std::env::var("KERN_TASK").unwrap_or_default();
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let mut prompt = Vec::new();
    std::io::stdin()
        .read_to_end(&mut prompt)
        .map_err(|e| Error::io("<stdin>", e))?;

    let (key, runs) = scenario.plan(&task, stage);
    let n = next_count(scenario_path, &key)?;
    let run = runs.and_then(|r| r.nth(n)).cloned().unwrap_or_default();
    log_call(scenario_path, &key, n, stage, &task, &cwd, &prompt)?;

    let context = Context {
        stage,
        slug: slug(&task),
        task,
        cwd,
    };
    let code = perform(&run, &context, &prompt)?;
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

/// Reads, increments and atomically rewrites the invocation count of `key`; returns the count
/// before this invocation.
fn next_count(scenario_path: &Path, key: &str) -> Result<u64> {
    let path = scenario_path.with_extension("counts.json");
    let mut counts: BTreeMap<String, u64> = match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "`{}`: {e} — delete it to restart the counts",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let count = counts.entry(key.to_string()).or_insert(0);
    let n = *count;
    *count += 1;
    let bytes = serde_json::to_vec_pretty(&counts)
        .map_err(|e| Error::Internal(format!("cannot encode the counts: {e}")))?;
    crate::atomic_file::write(&path, &bytes)?;
    Ok(n)
}

fn log_call(
    scenario_path: &Path,
    key: &str,
    n: u64,
    stage: Stage,
    task: &str,
    cwd: &Path,
    prompt: &[u8],
) -> Result<()> {
    let path = scenario_path.with_extension("calls.jsonl");
    let env = |name: &str| std::env::var(name).ok();
    let line = json!({
        "n": n,
        "key": key,
        "stage": stage.name(),
        "task": task,
        "tools": env("KERN_TOOLS"),
        "schema": env("KERN_SCHEMA"),
        "state_dir": env("KERN_STATE_DIR"),
        "cwd": cwd,
        "args": std::env::args().collect::<Vec<_>>(),
        "prompt": String::from_utf8_lossy(prompt),
    });
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    writeln!(file, "{line}").map_err(|e| Error::io(&path, e))
}

/// Prints Claude-style stream-json, one flushed line per event.
struct Stream {
    out: BufWriter<std::io::Stdout>,
    session: String,
    sequence: u64,
    turns: u64,
    started: Instant,
    written: u64,
}

impl Stream {
    fn new() -> Stream {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Stream {
            out: BufWriter::with_capacity(64 * 1024, std::io::stdout()),
            session: format!(
                "{:08x}-5c71-4e7d-8a9b-{:012x}",
                std::process::id(),
                nanos & 0xffff_ffff_ffff
            ),
            sequence: 0,
            turns: 1,
            started: Instant::now(),
            written: 0,
        }
    }

    fn uuid(&mut self) -> String {
        self.sequence += 1;
        format!("{}-{:06x}", &self.session[..23], self.sequence)
    }

    fn raw(&mut self, line: &str) -> Result<()> {
        self.written += line.len() as u64 + 1;
        writeln!(self.out, "{line}")
            .and_then(|()| self.out.flush())
            .map_err(|e| Error::io("<stdout>", e))
    }

    /// Prints an event object with `session_id` and `uuid` added, `type` and `subtype` first
    /// as the real CLI prints them (a reader may look at the start of a line).
    fn event(&mut self, value: Value) -> Result<()> {
        let uuid = self.uuid();
        let Value::Object(mut map) = value else {
            return self.raw(&value.to_string());
        };
        map.insert("session_id".into(), Value::String(self.session.clone()));
        map.insert("uuid".into(), Value::String(uuid));
        let mut line = String::from("{");
        for key in ["type", "subtype"] {
            if let Some(v) = map.remove(key) {
                line.push_str(&format!("{}:{v},", Value::String(key.into())));
            }
        }
        let rest = Value::Object(map).to_string();
        line.push_str(&rest[1..]);
        self.raw(&line)
    }

    fn init(&mut self, cwd: &Path) -> Result<()> {
        self.event(json!({
            "type": "system", "subtype": "init", "cwd": cwd,
            "tools": ["Bash", "Edit", "Glob", "Grep", "Read", "StructuredOutput", "Write"],
            "mcp_servers": [], "model": "scripted", "permissionMode": "dontAsk",
            "slash_commands": [], "apiKeySource": "none", "claude_code_version": "scripted",
            "output_style": "default", "agents": [], "skills": [], "plugins": [],
        }))
    }

    /// One tool call and its result, as two events.
    fn tool(&mut self, name: &str, input: Value, output: &str, is_error: bool) -> Result<()> {
        self.turns += 1;
        let id = format!("toolu_scripted_{:04}", self.sequence + 1);
        self.event(json!({
            "type": "assistant",
            "message": {
                "id": format!("msg_scripted_{:04}", self.sequence + 1), "type": "message",
                "role": "assistant", "model": "scripted",
                "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 50, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                "context_management": null,
            },
            "parent_tool_use_id": null,
        }))?;
        self.event(json!({
            "type": "user",
            "message": {"role": "user", "content": [
                {"tool_use_id": id, "type": "tool_result", "content": output, "is_error": is_error}
            ]},
            "parent_tool_use_id": null,
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }))
    }

    /// An assistant text message; `error` makes it the CLI's synthetic error message.
    fn text(&mut self, text: &str, error: Option<&str>) -> Result<()> {
        let model = if error.is_some() {
            "<synthetic>"
        } else {
            "scripted"
        };
        let mut event = json!({
            "type": "assistant",
            "message": {
                "id": format!("msg_scripted_{:04}", self.sequence + 1), "type": "message",
                "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "stop_sequence", "stop_sequence": "",
                "usage": zero_usage(),
                "context_management": null,
            },
            "parent_tool_use_id": null,
        });
        if let (Some(error), Value::Object(map)) = (error, &mut event) {
            map.insert("error".into(), Value::String(error.into()));
        }
        self.event(event)
    }

    fn api_retry(&mut self, status: Option<u16>, error: &str) -> Result<()> {
        self.event(json!({
            "type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
            "retry_delay_ms": 549.4836959381431, "error_status": status, "error": error,
        }))
    }

    fn duration_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The final result event of a stage that worked.
    fn success(&mut self, text: &str, structured: &Value, cost: f64) -> Result<()> {
        let event = json!({
            "type": "result", "subtype": "success", "is_error": false, "api_error_status": null,
            "duration_ms": self.duration_ms(), "duration_api_ms": 0, "num_turns": self.turns,
            "result": text, "stop_reason": "end_turn", "total_cost_usd": cost_json(cost),
            "usage": usage(), "modelUsage": model_usage(cost),
            "permission_denials": [], "structured_output": structured,
            "terminal_reason": "completed", "fast_mode_state": "off",
        });
        self.event(event)
    }

    /// The final result event of an API failure (`subtype: success`, `is_error: true`).
    fn api_failure(&mut self, status: Option<u16>, text: &str, cost: f64) -> Result<()> {
        let event = json!({
            "type": "result", "subtype": "success", "is_error": true, "api_error_status": status,
            "duration_ms": self.duration_ms(), "duration_api_ms": 0, "num_turns": 1,
            "result": text, "stop_reason": "stop_sequence", "total_cost_usd": cost_json(cost),
            "usage": zero_usage(), "modelUsage": {}, "permission_denials": [],
            "terminal_reason": "completed", "fast_mode_state": "off",
        });
        self.event(event)
    }

    fn max_turns(&mut self, cost: f64) -> Result<()> {
        let turns = self.turns;
        let event = json!({
            "type": "result", "subtype": "error_max_turns", "duration_ms": self.duration_ms(),
            "duration_api_ms": 0, "is_error": true, "num_turns": turns + 1,
            "stop_reason": "tool_use", "total_cost_usd": cost_json(cost), "usage": usage(),
            "modelUsage": model_usage(cost), "permission_denials": [],
            "terminal_reason": "max_turns", "fast_mode_state": "off",
            "errors": [format!("Reached maximum number of turns ({turns})")],
        });
        self.event(event)
    }
}

fn usage() -> Value {
    json!({
        "input_tokens": 150, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": 60, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    })
}

/// A cost as the CLI (JavaScript) prints it: a whole number without `.0`.
fn cost_json(cost: f64) -> Value {
    if cost.fract() == 0.0 && cost.abs() < 1e15 {
        json!(cost as i64)
    } else {
        json!(cost)
    }
}

fn zero_usage() -> Value {
    json!({
        "input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": 0, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": null,
    })
}

fn model_usage(cost: f64) -> Value {
    json!({"scripted": {
        "inputTokens": 150, "outputTokens": 60, "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0, "webSearchRequests": 0, "costUSD": cost_json(cost),
        "contextWindow": 200000, "maxOutputTokens": 32000,
    }})
}

const NOT_LOGGED_IN: &str = "Not logged in · Please run /login";
const OVERLOADED: &str = "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status.";
const RATE_LIMITED: &str = "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit";

/// Does what `run` says; returns the exit code (hangs never return).
fn perform(run: &Run, context: &Context, prompt: &[u8]) -> Result<i32> {
    if let Some(ms) = run.sleep_before_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let structured = match &run.result {
        None => context.default_result(),
        Some(value) => context.subst_value(value),
    };
    let text = match (&run.text, &structured) {
        (Some(text), _) => context.subst(text),
        (None, Value::Null) => String::new(),
        (None, value) => value.to_string(),
    };

    let mut stream = Stream::new();
    if run.plain {
        act(run, context, prompt, None)?;
        sleep_ms(run.sleep_ms);
        stream.raw(&text)?;
        return Ok(run.exit_code.unwrap_or(0));
    }
    stream.init(&context.cwd)?;
    if run.error == Some(ErrorKind::Garbage) {
        stream.raw("this line is not JSON")?;
    }
    act(run, context, prompt, Some(&mut stream))?;
    sleep_ms(run.sleep_ms);

    let cost = run.cost_usd;
    let exit = |default: i32| -> Result<i32> { Ok(run.exit_code.unwrap_or(default)) };
    match run.error {
        None => {
            stream.success(&text, &structured, cost.unwrap_or(0.01))?;
            exit(0)
        }
        Some(ErrorKind::Auth) => {
            let message = run.text.as_deref().unwrap_or(NOT_LOGGED_IN);
            stream.text(message, Some("authentication_failed"))?;
            stream.api_failure(None, message, cost.unwrap_or(0.0))?;
            exit(1)
        }
        Some(ErrorKind::AuthRetry) => {
            stream.api_retry(Some(401), "authentication_failed")?;
            hang()
        }
        Some(ErrorKind::Overloaded) => {
            stream.api_retry(Some(529), "overloaded")?;
            let message = run.text.as_deref().unwrap_or(OVERLOADED);
            stream.text(message, Some("server_error"))?;
            stream.api_failure(Some(529), message, cost.unwrap_or(0.0))?;
            exit(1)
        }
        Some(ErrorKind::RateLimit) => {
            stream.api_retry(Some(429), "rate_limit")?;
            let message = run.text.as_deref().unwrap_or(RATE_LIMITED);
            stream.text(message, Some("rate_limit"))?;
            stream.api_failure(Some(429), message, cost.unwrap_or(0.0))?;
            exit(1)
        }
        Some(ErrorKind::UsageLimit) => {
            let resets_at = chrono::Utc::now()
                + chrono::Duration::seconds(run.resets_in_secs.unwrap_or(300) as i64);
            stream.event(json!({
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected", "resetsAt": resets_at.timestamp(),
                    "rateLimitType": "five_hour", "overageStatus": "rejected",
                    "isUsingOverage": false,
                },
            }))?;
            let message = match &run.text {
                Some(text) => context.subst(text),
                None => format!(
                    "You've hit your session limit · resets {} (UTC)",
                    resets_at.format("%-I:%M%P")
                ),
            };
            stream.text(&message, Some("rate_limit"))?;
            stream.api_failure(None, &message, cost.unwrap_or(0.0))?;
            exit(1)
        }
        Some(ErrorKind::MaxTurns) => {
            stream.max_turns(cost.unwrap_or(0.01))?;
            exit(1)
        }
        Some(ErrorKind::NoResult) => {
            eprintln!("Error: the scripted agent stopped without a result");
            exit(1)
        }
        Some(ErrorKind::Garbage) => {
            stream.raw("{\"type\":\"assistant\",\"message\":")?;
            stream.raw("")?;
            stream.raw("\u{1b}[31mnot json either\u{1b}[0m")?;
            stream.success(&text, &structured, cost.unwrap_or(0.01))?;
            stream.raw("trailing garbage after the result")?;
            exit(0)
        }
        Some(ErrorKind::Silence) => hang(),
        Some(ErrorKind::HangAfterResult) => {
            stream.success(&text, &structured, cost.unwrap_or(0.01))?;
            hang()
        }
        Some(ErrorKind::HugeOutput) => {
            let total = run.huge_bytes.unwrap_or(1 << 20);
            let chunk = "lorem ipsum dolor sit amet ".repeat(300);
            let start = stream.written;
            while stream.written - start < total {
                stream.text(&chunk, None)?;
            }
            stream.success(&text, &structured, cost.unwrap_or(0.01))?;
            exit(0)
        }
        Some(ErrorKind::SpawnGrandchild) => {
            let mut sleeper = std::process::Command::new("sleep");
            sleeper.arg("300").stdin(std::process::Stdio::null());
            let child = sleeper.spawn().map_err(|e| Error::io("sleep", e))?;
            if let Some(pid_file) = &run.pid_file {
                let path = context.path(pid_file);
                fs::write(&path, child.id().to_string()).map_err(|e| Error::io(&path, e))?;
            }
            stream.tool(
                "Bash",
                json!({"command": "sleep 300", "run_in_background": true}),
                &format!("Command running in background with ID: {}", child.id()),
                false,
            )?;
            stream.success(&text, &structured, cost.unwrap_or(0.01))?;
            exit(0)
        }
    }
}

fn sleep_ms(ms: Option<u64>) {
    if let Some(ms) = ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The file actions, each shown as a tool call when there is a stream.
fn act(run: &Run, context: &Context, prompt: &[u8], mut stream: Option<&mut Stream>) -> Result<()> {
    let mut show = |name: &str, input: Value, output: &str, is_error: bool| -> Result<()> {
        match stream.as_deref_mut() {
            Some(stream) => stream.tool(name, input, output, is_error),
            None => Ok(()),
        }
    };
    for (path, content) in &run.write {
        let path = context.path(path);
        let content = context.subst(content);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        fs::write(&path, &content).map_err(|e| Error::io(&path, e))?;
        show(
            "Write",
            json!({"file_path": path, "content": content}),
            &format!("File created successfully at: {}", path.display()),
            false,
        )?;
    }
    for (path, text) in &run.append {
        let path = context.path(path);
        let text = context.subst(text);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| Error::io(&path, e))?;
        show(
            "Edit",
            json!({"file_path": path, "old_string": "", "new_string": text}),
            &format!("The file {} has been updated.", path.display()),
            false,
        )?;
    }
    for path in &run.delete {
        let path = context.path(path);
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        show(
            "Bash",
            json!({"command": format!("rm -rf -- '{}'", path.display()), "description": "delete"}),
            "",
            false,
        )?;
    }
    for command in &run.shell {
        let command = context.subst(command);
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&context.cwd)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::io("sh", e))?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        show(
            "Bash",
            json!({"command": command}),
            &text,
            !output.status.success(),
        )?;
    }
    if let Some(path) = &run.save_prompt {
        let path = context.path(path);
        fs::write(&path, prompt).map_err(|e| Error::io(&path, e))?;
        show(
            "Write",
            json!({"file_path": path, "content": "<the prompt>"}),
            &format!("File created successfully at: {}", path.display()),
            false,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_file_name_safe() {
        let cases = [
            ("Add a README", "add-a-readme"),
            ("  fix: `kern -n` (dry run)!  ", "fix-kern-n-dry-run"),
            ("Ünïcode only", "n-code-only"),
            ("", "task"),
            ("***", "task"),
        ];
        for (task, expected) in cases {
            assert_eq!(slug(task), expected, "{task:?}");
        }
        assert_eq!(slug(&"a".repeat(100)), "a".repeat(60));
        assert_eq!(slug(&"ab ".repeat(100)), ["ab"; 20].join("-"));
    }

    #[test]
    fn the_first_matching_task_entry_wins_and_falls_back_to_default() {
        let scenario = Scenario::parse(
            r#"{"default": {"implement": {"text": "d"}},
                "tasks": [{"match": "README", "research": [{"text": "r0"}, {"text": "r1"}]},
                          {"match": "READ", "implement": {"text": "x"}}]}"#,
        )
        .unwrap();
        let text =
            |runs: Option<&Runs>, n| runs.and_then(|r| r.nth(n)).and_then(|r| r.text.clone());
        let cases = [
            (
                "Add a README",
                Stage::Research,
                0,
                "tasks[0]/research",
                Some("r0"),
            ),
            (
                "Add a README",
                Stage::Research,
                5,
                "tasks[0]/research",
                Some("r1"),
            ),
            (
                "Add a README",
                Stage::Implement,
                0,
                "tasks[0]/implement",
                Some("d"),
            ),
            (
                "READ me",
                Stage::Implement,
                0,
                "tasks[1]/implement",
                Some("x"),
            ),
            ("other", Stage::Implement, 3, "default/implement", Some("d")),
            ("other", Stage::Review, 0, "default/commit", None),
        ];
        for (task, stage, n, key, expected) in cases {
            let (got_key, runs) = scenario.plan(task, stage);
            assert_eq!(got_key, key, "{task} {stage:?}");
            assert_eq!(text(runs, n).as_deref(), expected, "{task} {stage:?} {n}");
        }
    }

    #[test]
    fn result_null_differs_from_absent_and_unknown_fields_fail() {
        let run: Run = serde_json::from_str(r#"{"result": null}"#).unwrap();
        assert_eq!(run.result, Some(Value::Null));
        let run: Run = serde_json::from_str("{}").unwrap();
        assert_eq!(run.result, None);
        assert!(serde_json::from_str::<Run>(r#"{"wrtie": {}}"#).is_err());
        assert!(serde_json::from_str::<Run>(r#"{"error": "nope"}"#).is_err());
        assert_eq!(Runs::Many(vec![]).nth(0), None);
    }

    #[test]
    fn placeholders_are_replaced_in_nested_results() {
        let context = Context {
            stage: Stage::Review,
            task: "Add a README".into(),
            slug: "add-a-readme".into(),
            cwd: PathBuf::from("/repo"),
        };
        assert_eq!(
            context.subst_value(&json!({"subject": "{task}", "notes": ["{slug}.md", 3]})),
            json!({"subject": "Add a README", "notes": ["add-a-readme.md", 3]})
        );
        assert_eq!(
            context.path("docs/{slug}.md"),
            PathBuf::from("/repo/docs/add-a-readme.md")
        );
        assert_eq!(
            context.default_result(),
            json!({"verdict": "COMMIT", "subject": "Add a README"})
        );
    }
}
