//! What the scripted agent prints: Claude-style stream-json shaped after the recorded real
//! output (`fixtures/claude-2.1.197/`), so everything downstream of an agent runs on the real
//! path.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Prints Claude-style stream-json, one flushed line per event.
pub(super) struct Stream {
    pub(super) out: BufWriter<std::io::Stdout>,
    pub(super) session: String,
    pub(super) sequence: u64,
    pub(super) turns: u64,
    pub(super) started: Instant,
    pub(super) written: u64,
    /// The input and output tokens the result reports.
    pub(super) tokens: (u64, u64),
}

impl Stream {
    pub(super) fn new() -> Stream {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
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
            tokens: (150, 60),
        }
    }

    pub(super) fn uuid(&mut self) -> String {
        self.sequence += 1;
        format!("{}-{:06x}", &self.session[..23], self.sequence)
    }

    pub(super) fn raw(&mut self, line: &str) -> Result<()> {
        self.written += line.len() as u64 + 1;
        writeln!(self.out, "{line}")
            .and_then(|()| self.out.flush())
            .map_err(|e| Error::io("<stdout>", e))
    }

    /// Prints an event object with `session_id` and `uuid` added, `type` and `subtype` first
    /// as the real CLI prints them (a reader may look at the start of a line).
    pub(super) fn event(&mut self, value: Value) -> Result<()> {
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

    pub(super) fn init(&mut self, cwd: &Path) -> Result<()> {
        self.event(json!({
            "type": "system", "subtype": "init", "cwd": cwd,
            "tools": ["Bash", "Edit", "Glob", "Grep", "Read", "StructuredOutput", "Write"],
            "mcp_servers": [], "model": "scripted", "permissionMode": "dontAsk",
            "slash_commands": [], "apiKeySource": "none", "claude_code_version": "scripted",
            "output_style": "default", "agents": [], "skills": [], "plugins": [],
        }))
    }

    /// One tool call and its result, as two events.
    pub(super) fn tool(
        &mut self,
        name: &str,
        input: Value,
        output: &str,
        is_error: bool,
    ) -> Result<()> {
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
    pub(super) fn text(&mut self, text: &str, error: Option<&str>) -> Result<()> {
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

    pub(super) fn api_retry(&mut self, status: Option<u16>, error: &str) -> Result<()> {
        self.event(json!({
            "type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
            "retry_delay_ms": 549.4836959381431, "error_status": status, "error": error,
        }))
    }

    pub(super) fn duration_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The final result event of a stage that worked.
    pub(super) fn success(&mut self, text: &str, structured: &Value, cost: f64) -> Result<()> {
        let event = json!({
            "type": "result", "subtype": "success", "is_error": false, "api_error_status": null,
            "duration_ms": self.duration_ms(), "duration_api_ms": 0, "num_turns": self.turns,
            "result": text, "stop_reason": "end_turn", "total_cost_usd": cost_json(cost),
            "usage": usage(self.tokens), "modelUsage": model_usage(cost, self.tokens),
            "permission_denials": [], "structured_output": structured,
            "terminal_reason": "completed", "fast_mode_state": "off",
        });
        self.event(event)
    }

    /// The final result event of an API failure (`subtype: success`, `is_error: true`).
    pub(super) fn api_failure(&mut self, status: Option<u16>, text: &str, cost: f64) -> Result<()> {
        let event = json!({
            "type": "result", "subtype": "success", "is_error": true, "api_error_status": status,
            "duration_ms": self.duration_ms(), "duration_api_ms": 0, "num_turns": 1,
            "result": text, "stop_reason": "stop_sequence", "total_cost_usd": cost_json(cost),
            "usage": zero_usage(), "modelUsage": {}, "permission_denials": [],
            "terminal_reason": "completed", "fast_mode_state": "off",
        });
        self.event(event)
    }

    pub(super) fn max_turns(&mut self, cost: f64) -> Result<()> {
        let turns = self.turns;
        let event = json!({
            "type": "result", "subtype": "error_max_turns", "duration_ms": self.duration_ms(),
            "duration_api_ms": 0, "is_error": true, "num_turns": turns + 1,
            "stop_reason": "tool_use", "total_cost_usd": cost_json(cost), "usage": usage(self.tokens),
            "modelUsage": model_usage(cost, self.tokens), "permission_denials": [],
            "terminal_reason": "max_turns", "fast_mode_state": "off",
            "errors": [format!("Reached maximum number of turns ({turns})")],
        });
        self.event(event)
    }
}

impl Stream {
    /// An `error_max_budget_usd` result as Claude Code 2.1.330 prints it when its
    /// `--max-budget-usd` is reached (`implement-max-budget.jsonl`).
    pub(super) fn max_budget(&mut self, cost: f64, message: &str) -> Result<()> {
        let event = json!({
            "type": "result", "subtype": "error_max_budget_usd", "duration_ms": self.duration_ms(),
            "duration_api_ms": 0, "is_error": true, "num_turns": self.turns + 1,
            "stop_reason": "tool_use", "total_cost_usd": cost_json(cost), "usage": usage(self.tokens),
            "modelUsage": model_usage(cost, self.tokens), "permission_denials": [],
            "terminal_reason": "budget_exhausted", "fast_mode_state": "off",
            "errors": [message],
        });
        self.event(event)
    }
}

pub(super) fn usage((input, output): (u64, u64)) -> Value {
    json!({
        "input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": output, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    })
}

/// A cost as the CLI (JavaScript) prints it: a whole number without `.0`.
pub(super) fn cost_json(cost: f64) -> Value {
    if cost.fract() == 0.0 && cost.abs() < 1e15 {
        json!(cost as i64)
    } else {
        json!(cost)
    }
}

pub(super) fn zero_usage() -> Value {
    json!({
        "input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": 0, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": null,
    })
}

pub(super) fn model_usage(cost: f64, (input, output): (u64, u64)) -> Value {
    json!({"scripted": {
        "inputTokens": input, "outputTokens": output, "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0, "webSearchRequests": 0, "costUSD": cost_json(cost),
        "contextWindow": 200000, "maxOutputTokens": 32000,
    }})
}

pub(super) const NOT_LOGGED_IN: &str = "Not logged in · Please run /login";
pub(super) const OVERLOADED: &str = "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status.";
pub(super) const RATE_LIMITED: &str = "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit";
