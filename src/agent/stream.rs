//! Reading an agent's stdout as it arrives: Claude stream-json, Codex JSONL, or plain text.
//!
//! The supervisor hands every stdout line to [`StreamParser::push_line`] (it also writes the
//! raw stream to `stageN.jsonl`, so nothing here keeps it) and calls
//! [`StreamParser::finish`] once the process is gone. The decisions a reader must know:
//!
//! - **Bounded memory.** The parser keeps only what the stage record needs: the final
//!   `result` event, the last assistant text (64 KiB, tail kept), the last Codex
//!   `agent_message` and, for plain text, the output itself — all capped at 1 MiB with the
//!   *tail* kept, because the end of an output is where a report, a JSON block or a status word
//!   is. Lines kept by nobody (Claude's `user` tool results, the biggest part of a stream) are
//!   only checked for being JSON, never stored.
//! - **Nothing is fatal.** Unknown event types are ignored; lines that are not JSON objects are
//!   counted in `malformed_lines` and skipped.
//! - **Decisive failures stop early.** An `api_retry` saying `authentication_failed` (or HTTP
//!   401/403) means the person must act: the CLI would otherwise retry for minutes. Codex
//!   never gives up on a dead network; [`RECONNECT_LIMIT`] `Reconnecting...` errors in a row
//!   (no other event between them) stop it as transient. The limit counts lines, not seconds,
//!   so the parser needs no clock and the decision is reproducible from the recorded stream;
//!   it is above Codex's own per-request budget of 5 reconnects, so a network blip Codex
//!   recovers from by itself never trips it.
//! - **Detection** (`program:` agents): the first non-empty line decides. A JSON object with a
//!   string `type` is an event stream — Codex's when the type starts with `thread.`, `turn.`
//!   or `item.`, else Claude's; anything else makes the whole stdout plain text.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::retry::{self, FailureClass};

/// The most of a plain-text output, or of a Codex final message, that is kept (the tail).
pub const RESULT_CAP: usize = 1 << 20;

/// The most of the last Claude assistant text that is kept (the tail); it is only the
/// fallback result when no `result` event arrives.
pub const TEXT_CAP: usize = 64 << 10;

/// The longest progress detail, in characters.
pub const DETAIL_CAP: usize = 80;

/// Codex `Reconnecting...` errors in a row after which the stream is given up as transient.
pub const RECONNECT_LIMIT: u32 = 8;

/// The most error messages kept (the latest).
const ERRORS_CAP: usize = 20;

/// How an agent's stdout is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Claude Code `--output-format stream-json --verbose`.
    Claude,
    /// `codex exec --json`.
    Codex,
    /// Decide from the first non-empty line (`program:` agents).
    Detect,
}

/// What the supervisor should do after a line.
#[derive(Debug, Clone, PartialEq)]
pub enum LineSignal {
    /// Nothing special.
    Continue,
    /// The agent called a tool; show it on the status line.
    Progress(Progress),
    /// The final result arrived: start the result grace period.
    ResultSeen,
    /// Waiting longer cannot help: stop the agent now and classify the output.
    StopNow(FailureClass),
}

/// The agent's latest tool call, for the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The tool: `Edit`, `Bash`, … (Codex items: `Shell`, `Edit`, `WebSearch`).
    pub tool: String,
    /// What it works on: a path, a command's first line, a pattern (at most 80 characters).
    pub detail: String,
}

/// Everything kern keeps of one agent run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutput {
    /// The final text: Claude's `result`, Codex's last `agent_message`, a program's stdout.
    /// Without those, the last assistant text. Always a string, possibly empty.
    pub result_text: String,
    /// The stage report as JSON, when the agent returned one as structured output.
    pub structured_output: Option<Value>,
    /// What the run cost, in USD (0 when the agent does not say).
    pub cost_usd: f64,
    /// Token usage as the agent reported it (`{}` when it did not).
    pub usage: Value,
    /// Claude's per-model usage (`{}` otherwise).
    pub model_usage: Value,
    /// Claude's turn count.
    pub num_turns: Option<u64>,
    /// Claude's session id or Codex's thread id.
    pub session_id: Option<String>,
    /// Tool calls the agent was refused; not a failure.
    pub permission_denials: Vec<Value>,
    /// Claude's `terminal_reason` (`completed`, `max_turns`, `prompt_too_long`, …).
    pub terminal_reason: Option<String>,
    /// Claude's result `subtype` (`success`, `error_max_turns`, …).
    pub subtype: Option<String>,
    /// The agent reported an error, or ended without reporting a result (a plain-text
    /// program: exited with a code other than 0).
    pub is_error: bool,
    /// The HTTP status of the API error that ended the run (Claude).
    pub api_error_status: Option<u16>,
    /// Error messages: Claude's result `errors`, Codex's error events (the latest 20).
    pub errors: Vec<String>,
    /// Claude: the raw `result` event object.
    pub result_event: Option<Value>,
    /// The last assistant message's `error` field (`rate_limit`, `authentication_failed`, …).
    pub assistant_error: Option<String>,
    /// A `rate_limit_event` said `rejected`: when the limit resets (epoch seconds).
    pub rate_limit_reset: Option<i64>,
    /// Lines that were not JSON objects in an event stream.
    pub malformed_lines: u64,
    /// The process's exit code (`None`: ended by a signal).
    pub exit_code: Option<i32>,
    /// The end of the process's stderr.
    pub stderr_tail: String,
    /// A final result event arrived (Claude `result`, Codex `turn.completed`); never for plain
    /// text, which has no such event.
    pub saw_result: bool,
    /// The model the agent said it runs (Claude's `init` event).
    pub model: Option<String>,
    /// The decisive failure the parser signalled with [`LineSignal::StopNow`], if any.
    pub stopped: Option<FailureClass>,
    /// Bytes dropped from the front of `result_text` to keep it within its cap.
    pub result_truncated_bytes: u64,
}

/// A string that keeps only its last `cap` bytes (on a character boundary).
#[derive(Debug)]
struct TailText {
    text: String,
    cap: usize,
    dropped: u64,
    /// A line was appended (so the next one needs a `\n` before it, even after empty lines).
    has_lines: bool,
}

impl TailText {
    fn new(cap: usize) -> TailText {
        TailText {
            text: String::new(),
            cap,
            dropped: 0,
            has_lines: false,
        }
    }

    /// Replaces the text.
    fn set(&mut self, text: &str) {
        let tail = tail_of(text, self.cap);
        self.dropped = (text.len() - tail.len()) as u64;
        self.text.clear();
        self.text.push_str(tail);
    }

    /// Appends a line (with a `\n` before it unless it is the first).
    fn push_line(&mut self, line: &str) {
        if self.has_lines {
            self.text.push('\n');
        }
        self.has_lines = true;
        let tail = tail_of(line, self.cap);
        self.dropped += (line.len() - tail.len()) as u64;
        self.text.push_str(tail);
        // Trimming only past twice the cap keeps appends amortised O(1).
        if self.text.len() > 2 * self.cap {
            self.trim();
        }
    }

    fn trim(&mut self) {
        let keep = tail_of(&self.text, self.cap).len();
        let cut = self.text.len() - keep;
        self.dropped += cut as u64;
        self.text.drain(..cut);
    }

    fn finish(mut self) -> (String, u64) {
        self.trim();
        (self.text, self.dropped)
    }
}

/// The last at most `cap` bytes of `text`, starting on a character boundary.
fn tail_of(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let mut start = text.len() - cap;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first line of `text`, trimmed, at most [`DETAIL_CAP`] characters (a longer one ends
/// in `…`).
pub fn short_detail(text: &str) -> String {
    first_line(text, DETAIL_CAP)
}

/// The first non-empty line of `text`, trimmed, at most `cap` characters (a longer one ends
/// in `…`).
pub fn first_line(text: &str, cap: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() <= cap {
        return line.to_string();
    }
    let mut out: String = line.chars().take(cap.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The progress line of a Claude `tool_use` block.
fn claude_progress(name: &str, input: &Value) -> Progress {
    let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or("");
    let detail = match name {
        "Bash" => field("command"),
        "Read" | "Write" | "Edit" | "MultiEdit" => field("file_path"),
        "NotebookEdit" => field("notebook_path"),
        "Grep" | "Glob" => field("pattern"),
        "WebFetch" => field("url"),
        "WebSearch" => field("query"),
        "Task" | "Agent" => field("description"),
        _ => "",
    };
    Progress {
        tool: short_detail(name),
        detail: short_detail(detail),
    }
}

/// Just enough of an event to route it; every other field is skipped without being stored.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

/// A Codex event, with the fields kern reads; the rest (command output, reasoning) is skipped.
#[derive(Deserialize)]
struct CodexEvent {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    item: Option<CodexItem>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct CodexItem {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    changes: Option<Vec<CodexChange>>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct CodexChange {
    #[serde(default)]
    path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Undecided,
    Claude,
    Codex,
    Plain,
}

/// Reads one agent run's stdout line by line; see the module docs.
#[derive(Debug)]
pub struct StreamParser {
    /// The format asked for, which also says whose CLI this is (for messages).
    format: StreamFormat,
    mode: Mode,
    blank_lines_before_first: u64,
    progress: Option<Progress>,
    malformed: u64,
    // Claude
    result_event: Option<Value>,
    session_id: Option<String>,
    model: Option<String>,
    last_text: TailText,
    assistant_error: Option<String>,
    rate_limit_reset: Option<i64>,
    stopped: Option<FailureClass>,
    // Codex
    usage: Map<String, Value>,
    turn_completed: bool,
    turn_failed: bool,
    errors: VecDeque<String>,
    reconnects_in_a_row: u32,
    // Plain text
    plain: TailText,
}

impl StreamParser {
    /// A parser for one run.
    pub fn new(format: StreamFormat) -> StreamParser {
        let mode = match format {
            StreamFormat::Claude => Mode::Claude,
            StreamFormat::Codex => Mode::Codex,
            StreamFormat::Detect => Mode::Undecided,
        };
        StreamParser {
            format,
            mode,
            blank_lines_before_first: 0,
            progress: None,
            malformed: 0,
            result_event: None,
            session_id: None,
            model: None,
            last_text: TailText::new(match format {
                StreamFormat::Codex => RESULT_CAP,
                _ => TEXT_CAP,
            }),
            assistant_error: None,
            rate_limit_reset: None,
            stopped: None,
            usage: Map::new(),
            turn_completed: false,
            turn_failed: false,
            errors: VecDeque::new(),
            reconnects_in_a_row: 0,
            plain: TailText::new(RESULT_CAP),
        }
    }

    /// Reads one stdout line (with or without its line ending).
    pub fn push_line(&mut self, line: &str) -> LineSignal {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if self.mode == Mode::Undecided {
            if line.trim().is_empty() {
                self.blank_lines_before_first += 1;
                return LineSignal::Continue;
            }
            self.mode = detect(line);
            if self.mode == Mode::Codex {
                self.last_text = TailText::new(RESULT_CAP);
            }
            if self.mode == Mode::Plain {
                for _ in 0..self.blank_lines_before_first {
                    self.plain.push_line("");
                }
            }
        }
        match self.mode {
            Mode::Plain => {
                self.plain.push_line(line);
                LineSignal::Continue
            }
            Mode::Claude => self.claude_line(line),
            Mode::Codex => self.codex_line(line),
            Mode::Undecided => LineSignal::Continue,
        }
    }

    /// The agent's latest tool call.
    pub fn progress(&self) -> Option<&Progress> {
        self.progress.as_ref()
    }

    fn set_progress(&mut self, progress: Progress) -> LineSignal {
        if self.progress.as_ref() == Some(&progress) {
            return LineSignal::Continue;
        }
        self.progress = Some(progress.clone());
        LineSignal::Progress(progress)
    }

    fn stop(&mut self, class: FailureClass) -> LineSignal {
        if self.stopped.is_none() {
            self.stopped = Some(class.clone());
        }
        LineSignal::StopNow(class)
    }

    fn push_error(&mut self, message: String) {
        if self.errors.len() == ERRORS_CAP {
            self.errors.pop_front();
        }
        self.errors.push_back(message);
    }

    /// Which CLI's words to use in a message.
    fn agent_words(&self) -> (&'static str, &'static str) {
        match self.format {
            StreamFormat::Claude => ("claude", crate::agent::claude::LOGIN_HINT),
            StreamFormat::Codex => ("codex", crate::agent::codex::LOGIN_HINT),
            StreamFormat::Detect => ("the agent program", crate::agent::program::LOGIN_HINT),
        }
    }

    fn claude_line(&mut self, line: &str) -> LineSignal {
        if line.trim().is_empty() {
            return LineSignal::Continue;
        }
        let kind = match serde_json::from_str::<Head>(line) {
            Ok(head) => head.kind,
            Err(_) => {
                self.malformed += 1;
                return LineSignal::Continue;
            }
        };
        let kind = match kind.as_deref() {
            Some(k @ ("system" | "assistant" | "result" | "rate_limit_event")) => k.to_string(),
            _ => return LineSignal::Continue,
        };
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            self.malformed += 1;
            return LineSignal::Continue;
        };
        match kind.as_str() {
            "system" => self.claude_system(&event),
            "assistant" => self.claude_assistant(&event),
            "rate_limit_event" => {
                let info = &event["rate_limit_info"];
                if info["status"].as_str() == Some("rejected") {
                    self.rate_limit_reset = as_epoch(&info["resetsAt"]).or(self.rate_limit_reset);
                }
                LineSignal::Continue
            }
            _ => {
                if self.session_id.is_none() {
                    self.session_id = event["session_id"].as_str().map(str::to_string);
                }
                self.result_event = Some(event);
                LineSignal::ResultSeen
            }
        }
    }

    fn claude_system(&mut self, event: &Value) -> LineSignal {
        match event["subtype"].as_str() {
            Some("init") => {
                self.session_id = event["session_id"].as_str().map(str::to_string);
                self.model = event["model"].as_str().map(str::to_string);
                LineSignal::Continue
            }
            Some("api_retry") => {
                let status = event["error_status"].as_u64();
                let error = event["error"].as_str().unwrap_or("");
                let (name, hint) = self.agent_words();
                if status == Some(403) && error != "authentication_failed" {
                    return self.stop(FailureClass::NeedsUser(format!(
                        "{name} was refused access (HTTP 403, `{error}`) — check the account's permissions, or {hint}"
                    )));
                }
                if error == "authentication_failed" || status == Some(401) {
                    return self.stop(retry::not_logged_in(name, hint));
                }
                LineSignal::Continue
            }
            _ => LineSignal::Continue,
        }
    }

    fn claude_assistant(&mut self, event: &Value) -> LineSignal {
        if let Some(error) = event["error"].as_str() {
            self.assistant_error = Some(error.to_string());
        }
        let mut signal = LineSignal::Continue;
        let Some(blocks) = event["message"]["content"].as_array() else {
            return signal;
        };
        for block in blocks {
            match block["type"].as_str() {
                Some("text") => {
                    if let Some(text) = block["text"].as_str() {
                        self.last_text.set(text);
                    }
                }
                Some("tool_use") => {
                    let name = block["name"].as_str().unwrap_or("");
                    let progress = claude_progress(name, &block["input"]);
                    if let LineSignal::Progress(p) = self.set_progress(progress) {
                        signal = LineSignal::Progress(p);
                    }
                }
                _ => {}
            }
        }
        signal
    }

    fn codex_line(&mut self, line: &str) -> LineSignal {
        if line.trim().is_empty() {
            return LineSignal::Continue;
        }
        let Ok(event) = serde_json::from_str::<CodexEvent>(line) else {
            self.malformed += 1;
            return LineSignal::Continue;
        };
        let kind = event.kind.as_deref().unwrap_or("");
        let message = event.message.as_deref().unwrap_or("");
        if kind == "error" && message.starts_with("Reconnecting") {
            self.reconnects_in_a_row += 1;
            self.push_error(message.to_string());
            if self.reconnects_in_a_row >= RECONNECT_LIMIT {
                return self.stop(FailureClass::Transient(format!(
                    "codex kept reconnecting ({} times in a row): {}",
                    self.reconnects_in_a_row,
                    first_line(message, 300)
                )));
            }
            return LineSignal::Continue;
        }
        self.reconnects_in_a_row = 0;
        match kind {
            "thread.started" => {
                self.session_id = event.thread_id;
                LineSignal::Continue
            }
            "turn.completed" => {
                if let Some(Value::Object(usage)) = event.usage {
                    add_usage(&mut self.usage, &usage);
                }
                self.turn_completed = true;
                LineSignal::ResultSeen
            }
            "turn.failed" => {
                self.turn_failed = true;
                let text = error_message(event.error.as_ref())
                    .unwrap_or_else(|| "the turn failed".to_string());
                self.push_error(text);
                LineSignal::Continue
            }
            "error" => {
                let text = if message.is_empty() {
                    error_message(event.error.as_ref()).unwrap_or_default()
                } else {
                    message.to_string()
                };
                if !text.is_empty() {
                    self.push_error(text);
                }
                LineSignal::Continue
            }
            "item.started" | "item.updated" | "item.completed" => match event.item {
                Some(item) => self.codex_item(kind == "item.completed", item),
                None => LineSignal::Continue,
            },
            _ => LineSignal::Continue,
        }
    }

    fn codex_item(&mut self, completed: bool, item: CodexItem) -> LineSignal {
        let progress = match item.kind.as_deref() {
            Some("agent_message") => {
                if completed && let Some(text) = &item.text {
                    self.last_text.set(text);
                }
                return LineSignal::Continue;
            }
            Some("error") => {
                if completed && let Some(message) = item.message {
                    self.push_error(message);
                }
                return LineSignal::Continue;
            }
            Some("command_execution") => Progress {
                tool: "Shell".to_string(),
                detail: short_detail(item.command.as_deref().unwrap_or("")),
            },
            Some("file_change") => {
                let paths: Vec<String> = item
                    .changes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| c.path)
                    .collect();
                Progress {
                    tool: "Edit".to_string(),
                    detail: short_detail(&paths.join(", ")),
                }
            }
            Some("web_search") => Progress {
                tool: "WebSearch".to_string(),
                detail: short_detail(item.query.as_deref().unwrap_or("")),
            },
            _ => return LineSignal::Continue,
        };
        self.set_progress(progress)
    }

    /// Everything kept of the run, once the process has ended.
    pub fn finish(self, exit_code: Option<i32>, stderr_tail: &str) -> AgentOutput {
        let mut out = AgentOutput {
            result_text: String::new(),
            structured_output: None,
            cost_usd: 0.0,
            usage: Value::Object(Map::new()),
            model_usage: Value::Object(Map::new()),
            num_turns: None,
            session_id: self.session_id,
            permission_denials: Vec::new(),
            terminal_reason: None,
            subtype: None,
            is_error: true,
            api_error_status: None,
            errors: Vec::new(),
            result_event: None,
            assistant_error: self.assistant_error,
            rate_limit_reset: self.rate_limit_reset,
            malformed_lines: self.malformed,
            exit_code,
            stderr_tail: stderr_tail.to_string(),
            saw_result: false,
            model: self.model,
            stopped: self.stopped,
            result_truncated_bytes: 0,
        };
        match self.mode {
            Mode::Undecided | Mode::Plain => {
                let (text, dropped) = self.plain.finish();
                out.result_text = text;
                out.result_truncated_bytes = dropped;
                out.is_error = exit_code != Some(0);
            }
            Mode::Codex => {
                let (text, dropped) = self.last_text.finish();
                out.structured_output = match serde_json::from_str::<Value>(text.trim()) {
                    Ok(v @ Value::Object(_)) => Some(v),
                    _ => None,
                };
                out.result_text = text;
                out.result_truncated_bytes = dropped;
                out.usage = Value::Object(self.usage);
                out.errors = self.errors.into_iter().collect();
                out.saw_result = self.turn_completed;
                out.is_error = self.turn_failed || !self.turn_completed;
            }
            Mode::Claude => {
                let (text, dropped) = self.last_text.finish();
                match self.result_event {
                    Some(event) => {
                        fill_from_result(&mut out, &event, text, dropped);
                        out.result_event = Some(event);
                        out.saw_result = true;
                    }
                    None => {
                        out.result_text = text;
                        out.result_truncated_bytes = dropped;
                    }
                }
            }
        }
        out
    }
}

/// Copies a Claude `result` event's fields into `out`.
fn fill_from_result(out: &mut AgentOutput, event: &Value, last_text: String, dropped: u64) {
    match event["result"].as_str() {
        Some(text) => out.result_text = text.to_string(),
        None => {
            out.result_text = last_text;
            out.result_truncated_bytes = dropped;
        }
    }
    out.structured_output = match &event["structured_output"] {
        Value::Null => None,
        v => Some(v.clone()),
    };
    out.cost_usd = event["total_cost_usd"].as_f64().unwrap_or(0.0);
    if let Some(usage) = event.get("usage").filter(|v| !v.is_null()) {
        out.usage = usage.clone();
    }
    if let Some(usage) = event.get("modelUsage").filter(|v| !v.is_null()) {
        out.model_usage = usage.clone();
    }
    out.num_turns = event["num_turns"].as_u64();
    if let Some(id) = event["session_id"].as_str() {
        out.session_id = Some(id.to_string());
    }
    out.permission_denials = event["permission_denials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    out.terminal_reason = event["terminal_reason"].as_str().map(str::to_string);
    out.subtype = event["subtype"].as_str().map(str::to_string);
    out.is_error = event["is_error"].as_bool().unwrap_or(false);
    out.api_error_status = event["api_error_status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    out.errors = event["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| match e.as_str() {
                    Some(s) => s.to_string(),
                    None => e.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
}

/// The mode a `program:` agent's first non-empty line implies.
fn detect(line: &str) -> Mode {
    match serde_json::from_str::<Head>(line) {
        Ok(Head { kind: Some(kind) }) => {
            if ["thread.", "turn.", "item."]
                .iter()
                .any(|p| kind.starts_with(p))
            {
                Mode::Codex
            } else {
                Mode::Claude
            }
        }
        _ => Mode::Plain,
    }
}

/// Seconds since the epoch from a JSON number (milliseconds are recognised by their size).
fn as_epoch(value: &Value) -> Option<i64> {
    let seconds = match value.as_i64() {
        Some(n) => n,
        None => value.as_f64()? as i64,
    };
    Some(if seconds > 100_000_000_000 {
        seconds / 1000
    } else {
        seconds
    })
}

/// The message of a Codex `error` value: `{"message": …}` or a plain string.
fn error_message(error: Option<&Value>) -> Option<String> {
    match error? {
        Value::String(s) => Some(s.clone()),
        v => v["message"].as_str().map(str::to_string),
    }
}

/// Adds the numeric fields of one turn's usage to the running total.
fn add_usage(total: &mut Map<String, Value>, turn: &Map<String, Value>) {
    for (key, value) in turn {
        let sum = match (total.get(key).and_then(Value::as_u64), value.as_u64()) {
            (Some(a), Some(b)) => Value::from(a.saturating_add(b)),
            _ => value.clone(),
        };
        total.insert(key.clone(), sum);
    }
}

/// Test support: recorded streams from `tests/fixtures/`, run through the parser.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    /// The folder of the recorded Claude Code 2.1.197 streams.
    pub(crate) fn dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-2.1.197")
    }

    /// Parses `NAME.jsonl` line by line; the exit code comes from `NAME.exit` (none when the
    /// recording was stopped) and stderr from `NAME.stderr`.
    pub(crate) fn parse(name: &str, format: StreamFormat) -> (Vec<LineSignal>, AgentOutput) {
        let dir = dir();
        let stream = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap();
        let exit = std::fs::read_to_string(dir.join(format!("{name}.exit")))
            .ok()
            .map(|s| s.trim().parse::<i32>().unwrap());
        let stderr =
            std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default();
        parse_lines(stream.lines(), format, exit, &stderr)
    }

    /// Parses the given lines.
    pub(crate) fn parse_lines<'a>(
        lines: impl IntoIterator<Item = &'a str>,
        format: StreamFormat,
        exit: Option<i32>,
        stderr: &str,
    ) -> (Vec<LineSignal>, AgentOutput) {
        let mut parser = StreamParser::new(format);
        let signals = lines.into_iter().map(|l| parser.push_line(l)).collect();
        (signals, parser.finish(exit, stderr))
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{parse, parse_lines};
    use super::*;
    use serde_json::json;

    fn progress(tool: &str, detail: &str) -> LineSignal {
        LineSignal::Progress(Progress {
            tool: tool.to_string(),
            detail: detail.to_string(),
        })
    }

    /// The signals that are not `Continue`, with their line index.
    fn notable(signals: &[LineSignal]) -> Vec<(usize, LineSignal)> {
        signals
            .iter()
            .cloned()
            .enumerate()
            .filter(|(_, s)| *s != LineSignal::Continue)
            .collect()
    }

    #[test]
    fn success_fixtures_parse_to_their_reports() {
        let table = [
            (
                "research-success",
                json!({"notes": ["Files: out-1.txt does not exist yet", "Pattern: one file per task holding its number"]}),
                0.0009000000000000001,
                3,
                "5304a055-c44e-4136-b0f4-c707a79076e1",
                vec![
                    (1, progress("Glob", "*")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
            (
                "implement-success",
                json!({"status": "SUCCESS", "summary": "wrote out-1.txt", "learnings": ["the real CLI wrote out-1.txt"]}),
                0.00135,
                4,
                "10127aae-4731-4eb4-b174-c9b2330f7991",
                vec![
                    (1, progress("Write", "/home/user/project/out-1.txt")),
                    (3, progress("Bash", "cat out-1.txt")),
                    (5, progress("StructuredOutput", "")),
                    (7, LineSignal::ResultSeen),
                ],
            ),
            (
                "commit-success",
                json!({"verdict": "COMMIT", "subject": "Add out-1.txt through the real CLI", "body": "Reviewed by the scripted model."}),
                0.0009000000000000001,
                3,
                "a3d3993f-6421-4c7a-aca5-b311f030b9f5",
                vec![
                    (1, progress("Bash", "git status --short")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
        ];
        for (name, structured, cost, turns, session, signals) in table {
            for format in [StreamFormat::Claude, StreamFormat::Detect] {
                let (got, out) = parse(name, format);
                assert_eq!(notable(&got), signals, "{name} {format:?}");
                assert_eq!(out.structured_output, Some(structured.clone()), "{name}");
                assert_eq!(
                    serde_json::from_str::<Value>(&out.result_text).unwrap(),
                    structured,
                    "{name}: result holds the same JSON as text"
                );
                assert_eq!(out.cost_usd, cost, "{name}");
                assert_eq!(out.num_turns, Some(turns), "{name}");
                assert_eq!(out.session_id.as_deref(), Some(session), "{name}");
                assert_eq!(out.subtype.as_deref(), Some("success"), "{name}");
                assert_eq!(out.terminal_reason.as_deref(), Some("completed"), "{name}");
                assert_eq!(out.model.as_deref(), Some("claude-sonnet-4-5"), "{name}");
                assert!(out.saw_result && !out.is_error, "{name}");
                assert_eq!(out.exit_code, Some(0), "{name}");
                assert_eq!(out.malformed_lines, 0, "{name}");
                assert_eq!(out.permission_denials, Vec::<Value>::new(), "{name}");
                assert_eq!(out.stopped, None, "{name}");
                assert_eq!(
                    out.model_usage["claude-sonnet-4-5"]["costUSD"].as_f64(),
                    Some(cost)
                );
                assert_eq!(out.result_event.as_ref().unwrap()["type"], "result");
            }
        }
    }

    #[test]
    fn the_progress_is_the_latest_tool_call() {
        let mut parser = StreamParser::new(StreamFormat::Claude);
        assert_eq!(parser.progress(), None);
        let stream =
            std::fs::read_to_string(fixture::dir().join("implement-success.jsonl")).unwrap();
        for line in stream.lines().take(4) {
            parser.push_line(line);
        }
        assert_eq!(
            parser.progress(),
            Some(&Progress {
                tool: "Bash".into(),
                detail: "cat out-1.txt".into()
            })
        );
    }

    #[test]
    fn a_first_authentication_retry_stops_the_stream() {
        let (signals, out) = parse("api-401-first-120s", StreamFormat::Claude);
        let expected = FailureClass::NeedsUser(
            "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY".into(),
        );
        assert_eq!(signals[1], LineSignal::StopNow(expected.clone()));
        assert_eq!(out.stopped, Some(expected));
        assert!(!out.saw_result && out.is_error);
        assert_eq!(out.exit_code, None);
    }

    #[test]
    fn a_forbidden_retry_stops_the_stream_too() {
        let line = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":403,"error":"unknown"}"#;
        let (signals, out) = parse_lines([line], StreamFormat::Claude, None, "");
        let expected = FailureClass::NeedsUser(
            "claude was refused access (HTTP 403, `unknown`) — check the account's permissions, or run `claude` once to log in, or set ANTHROPIC_API_KEY".into(),
        );
        assert_eq!(signals, vec![LineSignal::StopNow(expected.clone())]);
        assert_eq!(out.stopped, Some(expected));
    }

    #[test]
    fn rate_limit_and_overload_retries_do_not_stop_the_stream() {
        for name in [
            "api-429-rate-limit",
            "api-529-overloaded",
            "connection-refused",
        ] {
            let (signals, out) = parse(name, StreamFormat::Claude);
            assert!(
                !signals.iter().any(|s| matches!(s, LineSignal::StopNow(_))),
                "{name}"
            );
            assert_eq!(out.stopped, None, "{name}");
            assert_eq!(signals.last(), Some(&LineSignal::ResultSeen), "{name}");
        }
    }

    #[test]
    fn failure_fixtures_keep_their_error_fields() {
        /// Fixture, api_error_status, assistant error, result text, errors.
        type Row = (
            &'static str,
            Option<u16>,
            Option<&'static str>,
            &'static str,
            Vec<&'static str>,
        );
        let table: [Row; 6] = [
            (
                "api-401-max-retries-2",
                Some(401),
                Some("authentication_failed"),
                "Not logged in · Please run /login",
                vec![],
            ),
            (
                "api-429-rate-limit",
                Some(429),
                Some("rate_limit"),
                "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit",
                vec![],
            ),
            (
                "api-529-overloaded",
                Some(529),
                Some("server_error"),
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status.",
                vec![],
            ),
            (
                "connection-refused",
                None,
                Some("server_error"),
                "API Error: Unable to connect to API (ConnectionRefused)",
                vec![],
            ),
            (
                "not-logged-in",
                None,
                Some("authentication_failed"),
                "Not logged in · Please run /login",
                vec![],
            ),
            (
                "implement-max-turns",
                None,
                None,
                "",
                vec!["Reached maximum number of turns (1)"],
            ),
        ];
        for (name, status, error, result, errors) in table {
            let (_, out) = parse(name, StreamFormat::Claude);
            assert_eq!(out.api_error_status, status, "{name}");
            assert_eq!(out.assistant_error.as_deref(), error, "{name}");
            assert_eq!(out.result_text, result, "{name}");
            assert_eq!(out.errors, errors, "{name}");
            assert!(out.is_error && out.saw_result, "{name}");
            assert_eq!(out.exit_code, Some(1), "{name}");
            assert_eq!(out.structured_output, None, "{name}");
        }
    }

    #[test]
    fn an_empty_stream_with_an_error_line_keeps_stderr() {
        let (signals, out) = parse("usage-error-no-verbose", StreamFormat::Claude);
        assert!(signals.is_empty());
        assert_eq!(out.result_text, "");
        assert!(!out.saw_result && out.is_error);
        assert_eq!(
            out.stderr_tail,
            "Error: When using --print, --output-format=stream-json requires --verbose\n"
        );
    }

    #[test]
    fn malformed_and_unknown_lines_are_counted_or_ignored() {
        let lines = [
            r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#,
            "not json at all",
            "[1,2,3]",
            r#"{"type":"something_new","x":1}"#,
            r#"{"no_type":true}"#,
            "",
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"half"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"done here"}]}}"#,
        ];
        let (signals, out) = parse_lines(lines, StreamFormat::Claude, Some(0), "");
        assert!(signals.iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(out.malformed_lines, 3);
        assert_eq!(out.session_id.as_deref(), Some("s1"));
        assert_eq!(out.result_text, "done here", "the last assistant text");
        assert!(!out.saw_result && out.is_error);
    }

    #[test]
    fn a_rejected_rate_limit_event_records_its_reset_time() {
        let lines = [
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1700000000}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767243600,"rateLimitType":"five_hour"}}"#,
        ];
        let (_, out) = parse_lines(lines, StreamFormat::Claude, Some(1), "");
        assert_eq!(out.rate_limit_reset, Some(1767243600));
    }

    #[test]
    fn tool_details_are_short() {
        let long = "x".repeat(200);
        let table = [
            (
                json!({"command": "cargo test\n--all"}),
                "Bash",
                "cargo test",
            ),
            (json!({"file_path": "src/lib.rs"}), "Edit", "src/lib.rs"),
            (json!({"file_path": "a.md"}), "Read", "a.md"),
            (json!({"pattern": "fn main"}), "Grep", "fn main"),
            (
                json!({"notebook_path": "n.ipynb"}),
                "NotebookEdit",
                "n.ipynb",
            ),
            (json!({"url": "https://x"}), "WebFetch", "https://x"),
            (json!({"whatever": 1}), "TodoWrite", ""),
        ];
        for (input, tool, detail) in table {
            assert_eq!(
                claude_progress(tool, &input),
                Progress {
                    tool: tool.into(),
                    detail: detail.into()
                }
            );
        }
        let capped = claude_progress("Bash", &json!({ "command": long }));
        assert_eq!(capped.detail.chars().count(), DETAIL_CAP);
        assert_eq!(capped.detail, format!("{}…", "x".repeat(DETAIL_CAP - 1)));
        assert_eq!(short_detail("  \n  ls -la  \nmore"), "ls -la");
        assert_eq!(short_detail(&"é".repeat(80)), "é".repeat(80));
    }

    #[test]
    fn plain_text_is_the_whole_output() {
        let (signals, out) = parse_lines(
            [
                "",
                "working…",
                "```json",
                r#"{"notes":["a"]}"#,
                "```",
                "SUCCESS\r",
            ],
            StreamFormat::Detect,
            Some(0),
            "",
        );
        assert!(signals.iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(
            out.result_text,
            "\nworking…\n```json\n{\"notes\":[\"a\"]}\n```\nSUCCESS"
        );
        assert!(!out.saw_result && !out.is_error);
        assert_eq!(out.malformed_lines, 0);
        assert_eq!(out.structured_output, None);

        let (_, failed) = parse_lines(["oops"], StreamFormat::Detect, Some(3), "");
        assert!(failed.is_error);
        let (_, empty) = parse_lines([], StreamFormat::Detect, Some(0), "");
        assert_eq!(empty.result_text, "");
        assert!(!empty.is_error);
    }

    #[test]
    fn a_json_first_line_without_type_is_plain_text() {
        let (_, out) = parse_lines(
            [r#"{"status":"SUCCESS","summary":"s"}"#],
            StreamFormat::Detect,
            Some(0),
            "",
        );
        assert_eq!(out.result_text, r#"{"status":"SUCCESS","summary":"s"}"#);
        assert_eq!(out.malformed_lines, 0);
    }

    #[test]
    fn huge_plain_output_keeps_a_bounded_tail() {
        let mut parser = StreamParser::new(StreamFormat::Detect);
        let line = "0123456789".repeat(10); // 100 bytes
        let lines = 50_000; // 5 MB with the newlines
        for i in 0..lines {
            parser.push_line(&line);
            // The buffer never grows past twice its cap plus one line.
            if i % 1000 == 0 {
                assert!(parser.plain.text.len() <= 2 * RESULT_CAP + 101);
            }
        }
        parser.push_line("the end");
        let out = parser.finish(Some(0), "");
        assert!(out.result_text.len() <= RESULT_CAP);
        assert!(out.result_text.len() > RESULT_CAP - 101);
        assert!(out.result_text.ends_with("\nthe end"));
        let total = (lines * 101 + "the end".len()) as u64;
        assert_eq!(
            out.result_truncated_bytes + out.result_text.len() as u64,
            total
        );
    }

    #[test]
    fn one_huge_line_keeps_its_tail() {
        let mut parser = StreamParser::new(StreamFormat::Detect);
        let mut line = "é".repeat(RESULT_CAP); // 2 MiB, two bytes per char
        line.push_str("END");
        parser.push_line(&line);
        let out = parser.finish(Some(0), "");
        assert!(out.result_text.len() <= RESULT_CAP);
        assert!(out.result_text.ends_with("éEND"));
        assert_eq!(
            out.result_truncated_bytes + out.result_text.len() as u64,
            line.len() as u64
        );
    }

    const CODEX_SUCCESS: [&str; 9] = [
        r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Looking**"}}"#,
        r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"README.md\n","exit_code":0,"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/repo/out-1.txt","kind":"add"},{"path":"/repo/b.txt","kind":"update"}],"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"{\"status\":\"SUCCESS\",\"summary\":\"wrote out-1.txt\"}"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}"#,
        "",
    ];

    #[test]
    fn codex_success_gives_the_last_message_as_structured_output() {
        let (signals, out) = parse_lines(CODEX_SUCCESS, StreamFormat::Codex, Some(0), "");
        assert_eq!(
            notable(&signals),
            vec![
                (3, progress("Shell", "bash -lc ls")),
                (5, progress("Edit", "/repo/out-1.txt, /repo/b.txt")),
                (7, LineSignal::ResultSeen),
            ]
        );
        assert_eq!(
            out.structured_output,
            Some(json!({"status": "SUCCESS", "summary": "wrote out-1.txt"}))
        );
        assert_eq!(
            out.result_text,
            r#"{"status":"SUCCESS","summary":"wrote out-1.txt"}"#
        );
        assert_eq!(
            out.session_id.as_deref(),
            Some("0199a213-81c0-7800-8aa1-bbab2a035a53")
        );
        assert_eq!(
            out.usage,
            json!({"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122})
        );
        assert!(out.saw_result && !out.is_error);
        assert_eq!(out.cost_usd, 0.0);
        // Detection recognises a Codex stream too.
        let (_, detected) = parse_lines(CODEX_SUCCESS, StreamFormat::Detect, Some(0), "");
        assert_eq!(detected, out);
    }

    #[test]
    fn codex_text_that_is_not_json_is_no_structured_output() {
        let lines = [
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"All done.\nSUCCESS"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":2,"output_tokens":5}}"#,
        ];
        let (_, out) = parse_lines(lines, StreamFormat::Codex, Some(0), "");
        assert_eq!(out.structured_output, None);
        assert_eq!(out.result_text, "All done.\nSUCCESS");
        assert_eq!(out.usage, json!({"input_tokens": 3, "output_tokens": 5}));
    }

    #[test]
    fn codex_failures_are_collected() {
        let lines = [
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"item.completed","item":{"type":"error","message":"model metadata missing"}}"#,
            r#"{"type":"error","message":"unexpected status 401 Unauthorized: Missing bearer"}"#,
            r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Missing bearer"}}"#,
        ];
        let (signals, out) = parse_lines(lines, StreamFormat::Codex, Some(1), "");
        assert!(signals.iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(
            out.errors,
            vec![
                "model metadata missing",
                "unexpected status 401 Unauthorized: Missing bearer",
                "unexpected status 401 Unauthorized: Missing bearer",
            ]
        );
        assert!(out.is_error && !out.saw_result);
    }

    fn reconnecting(n: u32) -> String {
        format!(
            r#"{{"type":"error","message":"Reconnecting... {n}/5 (stream disconnected before completion: error sending request)"}}"#
        )
    }

    #[test]
    fn codex_reconnecting_in_a_row_is_stopped() {
        let mut lines: Vec<String> = (1..RECONNECT_LIMIT).map(reconnecting).collect();
        // Any other event in between resets the count.
        lines.push(r#"{"type":"turn.started"}"#.to_string());
        lines.extend((1..=RECONNECT_LIMIT).map(reconnecting));
        let (signals, out) = parse_lines(
            lines.iter().map(String::as_str),
            StreamFormat::Codex,
            None,
            "",
        );
        let stops: Vec<usize> = signals
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, LineSignal::StopNow(_)))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(stops, vec![2 * RECONNECT_LIMIT as usize - 1]);
        assert_eq!(
            out.stopped,
            Some(FailureClass::Transient(
                "codex kept reconnecting (8 times in a row): Reconnecting... 8/5 (stream disconnected before completion: error sending request)".into()
            ))
        );
        assert_eq!(out.errors.len(), 2 * RECONNECT_LIMIT as usize - 1);
    }

    #[test]
    fn only_the_latest_errors_are_kept() {
        let lines: Vec<String> = (0..25)
            .map(|i| format!(r#"{{"type":"error","message":"e{i}"}}"#))
            .collect();
        let (_, out) = parse_lines(
            lines.iter().map(String::as_str),
            StreamFormat::Codex,
            Some(1),
            "",
        );
        let expected: Vec<String> = (5..25).map(|i| format!("e{i}")).collect();
        assert_eq!(out.errors, expected);
    }
}
