//! The Codex dialect: `codex exec --json`, one JSON event per line (`thread.started`,
//! `turn.*`, `item.*`, `error`), with the final message as the last `agent_message` item.
//!
//! The one decision a reader must know: Codex retries by itself, for seconds (a 401) or forever
//! (no connection), so its error messages are read as they arrive: a rejected key, a refused
//! access or an unreachable API stops it at the first sign ([`decisive`]); any other
//! reconnecting is given up after [`RECONNECT_LIMIT`] `Reconnecting...` errors in a row (no
//! other event between them). The limit counts lines, not seconds, so the parser needs no clock and the
//! decision is reproducible from the recorded stream; it is above Codex's own per-request
//! budget of 5 reconnects, so a network blip Codex recovers from by itself never trips it.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    AgentOutput, Common, LineSignal, Progress, RESULT_CAP, TailText, first_line, short_detail,
};
use crate::agent::failure_class::{self as failure, FailureClass};

/// Codex `Reconnecting...` errors in a row after which the stream is given up as transient.
pub(crate) const RECONNECT_LIMIT: u32 = 8;

/// The most error messages kept (the latest).
const ERRORS_CAP: usize = 20;

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

/// What kern keeps of a Codex stream while it arrives.
#[derive(Debug)]
pub(super) struct CodexStream {
    thread_id: Option<String>,
    /// The last completed `agent_message`: the result.
    last_text: TailText,
    usage: Map<String, Value>,
    turn_completed: bool,
    turn_failed: bool,
    errors: VecDeque<String>,
    reconnects_in_a_row: u32,
    /// The latest `rate_limits` snapshot (its usage windows).
    rate_limit: Option<super::RateLimit>,
}

impl CodexStream {
    pub(super) fn new() -> CodexStream {
        CodexStream {
            thread_id: None,
            last_text: TailText::new(RESULT_CAP),
            usage: Map::new(),
            turn_completed: false,
            turn_failed: false,
            errors: VecDeque::new(),
            reconnects_in_a_row: 0,
            rate_limit: None,
        }
    }

    /// The latest usage windows Codex reported.
    #[cfg(test)]
    pub(super) fn rate_limit(&self) -> Option<&super::RateLimit> {
        self.rate_limit.as_ref()
    }

    fn push_error(&mut self, message: String) {
        if self.errors.len() == ERRORS_CAP {
            self.errors.pop_front();
        }
        self.errors.push_back(message);
    }

    pub(super) fn push_line(&mut self, line: &str, common: &mut Common) -> LineSignal {
        if line.trim().is_empty() {
            return LineSignal::Continue;
        }
        let Ok(event) = serde_json::from_str::<CodexEvent>(line) else {
            common.malformed += 1;
            return LineSignal::Continue;
        };
        let kind = event.kind.as_deref().unwrap_or("");
        let message = event.message.as_deref().unwrap_or("");
        if kind == "error"
            && let Some(class) = decisive(message)
        {
            self.push_error(message.to_string());
            return common.stop(class);
        }
        if kind == "error" && message.starts_with("Reconnecting") {
            self.reconnects_in_a_row += 1;
            self.push_error(message.to_string());
            if self.reconnects_in_a_row >= RECONNECT_LIMIT {
                return common.stop(FailureClass::Transient(format!(
                    "codex kept reconnecting ({} times in a row): {}",
                    self.reconnects_in_a_row,
                    first_line(message, 300)
                )));
            }
            return LineSignal::Continue;
        }
        self.reconnects_in_a_row = 0;
        if line.contains("\"rate_limits\"")
            && let Some(limit) = serde_json::from_str::<Value>(line)
                .ok()
                .as_ref()
                .and_then(super::window::codex_rate_limits)
        {
            self.rate_limit = Some(limit);
        }
        match kind {
            "thread.started" => {
                self.thread_id = event.thread_id;
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
                Some(item) => self.item(kind == "item.completed", item, common),
                None => LineSignal::Continue,
            },
            _ => LineSignal::Continue,
        }
    }

    fn item(&mut self, completed: bool, item: CodexItem, common: &mut Common) -> LineSignal {
        let progress = match item.kind.as_deref() {
            Some("agent_message") => {
                if completed && let Some(text) = &item.text {
                    self.last_text.set(text);
                }
                return LineSignal::Continue;
            }
            Some("error") => {
                if completed && let Some(message) = item.message {
                    let class = decisive(&message);
                    self.push_error(message);
                    if let Some(class) = class {
                        return common.stop(class);
                    }
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
        common.set_progress(progress)
    }

    /// Fills `out`: the last message as the result (and as structured output when it is a
    /// JSON object), the summed usage, the errors; a run succeeded when a turn completed and
    /// none failed.
    pub(super) fn finish(self, out: &mut AgentOutput) {
        let (text, dropped) = self.last_text.finish();
        out.structured_output = match serde_json::from_str::<Value>(text.trim()) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        };
        out.result_text = text;
        out.result_truncated_bytes = dropped;
        out.session_id = self.thread_id;
        out.usage = Value::Object(self.usage);
        out.errors = self.errors.into_iter().collect();
        out.saw_result = self.turn_completed;
        out.is_error = self.turn_failed || !self.turn_completed;
        out.rate_limit = self.rate_limit;
    }
}

/// What one of Codex's error messages says that its own reconnects cannot fix, so the run
/// stops at the first sign instead of after them: a rejected key (HTTP 401, which Codex
/// retries 5 times over seconds), a refused access (403), or no connection to the model API at
/// all (`Connection failed`, which Codex retries forever, minutes apart). A stream that merely
/// dropped (`stream disconnected before completion`) is not decisive: Codex resumes it.
fn decisive(message: &str) -> Option<FailureClass> {
    let hint = crate::agent::codex::LOGIN_HINT;
    if message.contains("401 Unauthorized") {
        return Some(failure::not_logged_in("codex", hint));
    }
    if message.contains("403 Forbidden") {
        return Some(FailureClass::NeedsUser(format!(
            "codex was refused access (HTTP 403): `{}` — check the account's permissions, or {hint}",
            first_line(message, 300)
        )));
    }
    let unreachable = [
        "Connection failed",
        "waiting for network",
        "Connection refused",
    ];
    if unreachable.iter().any(|text| message.contains(text)) {
        return Some(FailureClass::Transient(format!(
            "codex cannot reach the model API: {}",
            first_line(message, 300)
        )));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::stream::StreamFormat;
    use crate::agent::stream::fixture::{notable, parse_lines, progress};
    use serde_json::json;

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
            r#"{"type":"error","message":"unexpected status 404 Not Found: no such route"}"#,
            r#"{"type":"turn.failed","error":{"message":"unexpected status 404 Not Found: no such route"}}"#,
        ];
        let (signals, out) = parse_lines(lines, StreamFormat::Codex, Some(1), "");
        assert!(signals.iter().all(|s| *s == LineSignal::Continue));
        assert_eq!(
            out.errors,
            vec![
                "model metadata missing",
                "unexpected status 404 Not Found: no such route",
                "unexpected status 404 Not Found: no such route",
            ]
        );
        assert!(out.is_error && !out.saw_result);
    }

    /// Lines codex-cli 0.169.0 printed against a loopback mock of the Responses API (the port
    /// written as PORT), each with whether kern stops it there and why.
    #[test]
    fn the_first_sign_of_a_401_a_403_or_no_connection_stops_codex() {
        let login = failure::not_logged_in("codex", crate::agent::codex::LOGIN_HINT);
        let table: [(&str, Option<FailureClass>); 6] = [
            (
                r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided: sk-xxx., url: http://127.0.0.1:PORT/v1/responses)"}"#,
                Some(login.clone()),
            ),
            (
                r#"{"type":"item.completed","item":{"id":"item_1","type":"error","message":"unexpected status 401 Unauthorized: Missing bearer"}}"#,
                Some(login),
            ),
            (
                r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 403 Forbidden: Project does not have access)"}"#,
                Some(FailureClass::NeedsUser(
                    "codex was refused access (HTTP 403): `Reconnecting... 1/5 (unexpected status 403 Forbidden: Project does not have access)` — check the account's permissions, or run `codex login` once, or set CODEX_API_KEY".into(),
                )),
            ),
            (
                r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
                Some(FailureClass::Transient(
                    "codex cannot reach the model API: Reconnecting... waiting for network (Connection failed: error sending request)".into(),
                )),
            ),
            // Not decisive: a warning, a transport fallback, a stream Codex resumes.
            (
                r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}"#,
                None,
            ),
            (
                r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: error sending request)"}"#,
                None,
            ),
        ];
        for (line, expected) in table {
            let (signals, out) = parse_lines([line], StreamFormat::Codex, None, "");
            let stop = expected.clone().map(LineSignal::StopNow);
            assert_eq!(
                signals,
                vec![stop.unwrap_or(LineSignal::Continue)],
                "{line}"
            );
            assert_eq!(out.stopped, expected, "{line}");
            assert_eq!(out.errors.len(), 1, "the message is kept: {line}");
        }
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
