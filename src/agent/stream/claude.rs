//! The Claude Code dialect: `claude -p --output-format stream-json --verbose`, one JSON event
//! per line, exactly one final `result` event (AGENT-CLIS.md, "The stream").
//!
//! The one decision a reader must know: only `system`, `assistant`, `result` and
//! `rate_limit_event` lines are decoded; the rest (the `user` tool results, the biggest part
//! of a stream) are only checked for being JSON, never stored. An `api_retry` saying
//! `authentication_failed` (or HTTP 401/403) stops the run at once: the CLI would otherwise
//! retry for minutes and the person must act anyway.

use serde_json::Value;

use super::{
    AgentOutput, Common, Head, LineSignal, Progress, RateLimit, RateLimitWindow, TEXT_CAP,
    TailText, short_detail,
};
use crate::agent::failure_class::{self as failure, FailureClass};

/// What kern keeps of a Claude stream while it arrives.
#[derive(Debug)]
pub(super) struct ClaudeStream {
    result_event: Option<Value>,
    session_id: Option<String>,
    model: Option<String>,
    /// The last assistant text: the result when no `result` event arrives.
    last_text: TailText,
    assistant_error: Option<String>,
    rate_limit_reset: Option<i64>,
    rate_limit: Option<RateLimit>,
}

impl ClaudeStream {
    pub(super) fn new() -> ClaudeStream {
        ClaudeStream {
            result_event: None,
            session_id: None,
            model: None,
            last_text: TailText::new(TEXT_CAP),
            assistant_error: None,
            rate_limit_reset: None,
            rate_limit: None,
        }
    }

    #[cfg(test)]
    pub(super) fn rate_limit(&self) -> Option<&RateLimit> {
        self.rate_limit.as_ref()
    }

    pub(super) fn push_line(&mut self, line: &str, common: &mut Common) -> LineSignal {
        if line.trim().is_empty() {
            return LineSignal::Continue;
        }
        let kind = match serde_json::from_str::<Head>(line) {
            Ok(head) => head.kind,
            Err(_) => {
                common.malformed += 1;
                return LineSignal::Continue;
            }
        };
        let kind = match kind.as_deref() {
            Some(k @ ("system" | "assistant" | "result" | "rate_limit_event")) => k.to_string(),
            _ => return LineSignal::Continue,
        };
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            common.malformed += 1;
            return LineSignal::Continue;
        };
        match kind.as_str() {
            "system" => self.system(&event, common),
            "assistant" => self.assistant(&event, common),
            "rate_limit_event" => {
                let info = &event["rate_limit_info"];
                if info["status"].as_str() == Some("rejected") {
                    self.rate_limit_reset = as_epoch(&info["resetsAt"]).or(self.rate_limit_reset);
                }
                if let Some(limit) = rate_limit(info) {
                    self.rate_limit = Some(limit);
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

    fn system(&mut self, event: &Value, common: &mut Common) -> LineSignal {
        match event["subtype"].as_str() {
            Some("init") => {
                self.session_id = event["session_id"].as_str().map(str::to_string);
                self.model = event["model"].as_str().map(str::to_string);
                LineSignal::Continue
            }
            Some("api_retry") => {
                let status = event["error_status"].as_u64();
                let error = event["error"].as_str().unwrap_or("");
                let (name, hint) = common.agent_words();
                if status == Some(403) && error != "authentication_failed" {
                    return common.stop(FailureClass::NeedsUser(format!(
                        "{name} was refused access (HTTP 403, `{error}`) — check the account's permissions, or {hint}"
                    )));
                }
                if error == "authentication_failed" || status == Some(401) {
                    return common.stop(failure::not_logged_in(name, hint));
                }
                LineSignal::Continue
            }
            _ => LineSignal::Continue,
        }
    }

    fn assistant(&mut self, event: &Value, common: &mut Common) -> LineSignal {
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
                    let progress = tool_progress(name, &block["input"]);
                    if let LineSignal::Progress(p) = common.set_progress(progress) {
                        signal = LineSignal::Progress(p);
                    }
                }
                _ => {}
            }
        }
        signal
    }

    /// Fills `out` from the `result` event, or from the last assistant text without one.
    pub(super) fn finish(self, out: &mut AgentOutput) {
        out.session_id = self.session_id;
        out.model = self.model;
        out.assistant_error = self.assistant_error;
        out.rate_limit_reset = self.rate_limit_reset;
        out.rate_limit = self.rate_limit;
        let (text, dropped) = self.last_text.finish();
        match self.result_event {
            Some(event) => {
                fill_from_result(out, &event, text, dropped);
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

/// A `rate_limit_info` object as a [`RateLimit`]; `None` without a `status`.
pub(crate) fn rate_limit(info: &Value) -> Option<RateLimit> {
    let status = info["status"].as_str()?.to_string();
    let windows = info["unifiedWindows"]
        .as_object()
        .map(|windows| {
            windows
                .iter()
                .filter_map(|(name, window)| {
                    Some(RateLimitWindow {
                        name: name.clone(),
                        utilization: window["utilization"].as_f64()?,
                        resets_at: as_epoch(&window["resetsAt"]),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(RateLimit {
        status,
        kind: info["rateLimitType"].as_str().map(str::to_string),
        utilization: info["utilization"].as_f64(),
        resets_at: as_epoch(&info["resetsAt"]),
        windows,
    })
}

/// The progress line of a Claude `tool_use` block.
fn tool_progress(name: &str, input: &Value) -> Progress {
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
    out.api_error = event["api_error"].as_str().map(str::to_string);
    out.api_error_type = event["api_error_type"].as_str().map(str::to_string);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::stream::fixture::{self, notable, parse, parse_in, parse_lines, progress};
    use crate::agent::stream::{DETAIL_CAP, StreamFormat, StreamParser};
    use serde_json::json;

    #[test]
    fn success_fixtures_parse_to_their_reports() {
        /// Version, fixture, structured output, cost, turns, session, model, signals.
        type Row = (
            &'static str,
            &'static str,
            Value,
            f64,
            u64,
            &'static str,
            &'static str,
            Vec<(usize, LineSignal)>,
        );
        let table: Vec<Row> = vec![
            (
                "2.1.330",
                "research-success",
                json!({"notes": ["Files: out-1.txt does not exist yet", "Pattern: one file per task holding its number"], "skip_reason": null, "skip_kind": null}),
                0.085956,
                3,
                "ced20763-c5aa-4f6d-9b40-409fcbb4fe3c",
                "claude-sonnet-4-5@20250929",
                vec![
                    (1, progress("Glob", "*")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
            (
                "2.1.330",
                "implement-success",
                json!({"status": "SUCCESS", "summary": "wrote out-1.txt", "attempt_note": null, "subtasks": null, "learnings": ["the real CLI wrote out-1.txt"], "no_change_reason": null}),
                0.212913,
                4,
                "01146bd5-5716-42b6-8835-3c24827792fe",
                "claude-sonnet-4-5@20250929",
                vec![
                    (1, progress("Write", "/home/user/project/out-1.txt")),
                    (3, progress("Bash", "cat out-1.txt")),
                    (5, progress("StructuredOutput", "")),
                    (7, LineSignal::ResultSeen),
                ],
            ),
            (
                "2.1.330",
                "commit-success",
                json!({"verdict": "COMMIT", "subject": "Add out-1.txt through the real CLI", "body": "Reviewed by the scripted model.", "reason": null, "learnings": null}),
                0.079425,
                3,
                "709dc1e1-fe63-4aa9-a61c-d299a32b8f30",
                "claude-sonnet-4-5@20250929",
                vec![
                    (1, progress("Bash", "git status --short")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
            (
                "2.1.197",
                "research-success",
                json!({"notes": ["Files: out-1.txt does not exist yet", "Pattern: one file per task holding its number"]}),
                0.0009000000000000001,
                3,
                "5304a055-c44e-4136-b0f4-c707a79076e1",
                "claude-sonnet-4-5",
                vec![
                    (1, progress("Glob", "*")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
            (
                "2.1.197",
                "implement-success",
                json!({"status": "SUCCESS", "summary": "wrote out-1.txt", "learnings": ["the real CLI wrote out-1.txt"]}),
                0.00135,
                4,
                "10127aae-4731-4eb4-b174-c9b2330f7991",
                "claude-sonnet-4-5",
                vec![
                    (1, progress("Write", "/home/user/project/out-1.txt")),
                    (3, progress("Bash", "cat out-1.txt")),
                    (5, progress("StructuredOutput", "")),
                    (7, LineSignal::ResultSeen),
                ],
            ),
            (
                "2.1.197",
                "commit-success",
                json!({"verdict": "COMMIT", "subject": "Add out-1.txt through the real CLI", "body": "Reviewed by the scripted model."}),
                0.0009000000000000001,
                3,
                "a3d3993f-6421-4c7a-aca5-b311f030b9f5",
                "claude-sonnet-4-5",
                vec![
                    (1, progress("Bash", "git status --short")),
                    (3, progress("StructuredOutput", "")),
                    (5, LineSignal::ResultSeen),
                ],
            ),
        ];
        for (version, name, structured, cost, turns, session, model, signals) in table {
            for format in [StreamFormat::Claude, StreamFormat::Detect] {
                let (got, out) = parse_in(version, name, format);
                let what = format!("{version} {name} {format:?}");
                assert_eq!(notable(&got), signals, "{what}");
                assert_eq!(out.structured_output, Some(structured.clone()), "{what}");
                assert_eq!(
                    serde_json::from_str::<Value>(&out.result_text).unwrap(),
                    structured,
                    "{what}: result holds the same JSON as text"
                );
                assert_eq!(out.cost_usd, cost, "{what}");
                assert_eq!(out.num_turns, Some(turns), "{what}");
                assert_eq!(out.session_id.as_deref(), Some(session), "{what}");
                assert_eq!(out.subtype.as_deref(), Some("success"), "{what}");
                assert_eq!(out.terminal_reason.as_deref(), Some("completed"), "{what}");
                assert_eq!(out.model.as_deref(), Some(model), "{what}");
                assert!(out.saw_result && !out.is_error, "{what}");
                assert_eq!(out.exit_code, Some(0), "{what}");
                assert_eq!(out.malformed_lines, 0, "{what}");
                assert_eq!(out.permission_denials, Vec::<Value>::new(), "{what}");
                assert_eq!(out.stopped, None, "{what}");
                assert_eq!(
                    (out.api_error.as_deref(), out.api_error_type.as_deref()),
                    (None, None),
                    "{what}"
                );
                assert_eq!(out.model_usage[model]["costUSD"].as_f64(), Some(cost));
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
        // 2.1.197 retried a 401 ten times over minutes, 2.1.330 twice; either way the first
        // `api_retry` is where kern stops it.
        for (version, name) in [
            ("2.1.330", "api-401-first-retry"),
            ("2.1.197", "api-401-first-120s"),
        ] {
            let (signals, out) = parse_in(version, name, StreamFormat::Claude);
            let expected = FailureClass::NeedsUser(
                "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY"
                    .into(),
            );
            assert_eq!(
                signals[1],
                LineSignal::StopNow(expected.clone()),
                "{version}"
            );
            assert_eq!(out.stopped, Some(expected), "{version}");
            assert!(!out.saw_result && out.is_error, "{version}");
            assert_eq!(out.exit_code, None, "{version}");
        }
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
            "api-500-server-error",
            "api-529-overloaded",
            "api-400-invalid-request",
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
        /// Fixture, api_error_status, assistant error, result text, errors, api_error,
        /// api_error_type, terminal_reason.
        type Row = (
            &'static str,
            Option<u16>,
            Option<&'static str>,
            &'static str,
            Vec<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
            &'static str,
        );
        let table: [Row; 10] = [
            (
                "api-400-invalid-request",
                Some(400),
                Some("unknown"),
                "API Error: 400 tools.0.custom.input_schema: JSON schema is invalid",
                vec![],
                None,
                Some("invalid_request_error"),
                "api_error",
            ),
            (
                "api-400-prompt-too-long",
                Some(400),
                Some("invalid_request"),
                "Prompt is too long · the request is ~250000 tokens (limit 200000) but this conversation is only ~577 tokens — the rest is system prompt, tool definitions, and attachment content. A single-exchange conversation cannot be compacted; reduce attached files/tools or start with less context.",
                vec![],
                None,
                Some("invalid_request_error"),
                "prompt_too_long",
            ),
            (
                "api-401-max-retries-2",
                Some(401),
                Some("authentication_failed"),
                "Not logged in · Please run /login",
                vec![],
                None,
                Some("authentication_error"),
                "api_error",
            ),
            (
                "api-429-rate-limit",
                Some(429),
                Some("rate_limit"),
                "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit",
                vec![],
                None,
                Some("rate_limit_error"),
                "api_error",
            ),
            (
                "api-500-server-error",
                Some(500),
                Some("server_error"),
                "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status.",
                vec![],
                None,
                Some("api_error"),
                "api_error",
            ),
            (
                "api-529-overloaded",
                Some(529),
                Some("server_error"),
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status.",
                vec![],
                None,
                Some("overloaded_error"),
                "api_error",
            ),
            (
                "connection-refused",
                None,
                Some("server_error"),
                "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
                vec![],
                Some("connection_failed"),
                None,
                "api_error",
            ),
            (
                "not-logged-in",
                None,
                Some("authentication_failed"),
                "Not logged in · Please run /login",
                vec![],
                None,
                None,
                "api_error",
            ),
            (
                "implement-max-turns",
                None,
                None,
                "",
                vec!["Reached maximum number of turns (1)"],
                None,
                None,
                "max_turns",
            ),
            (
                "implement-max-budget",
                None,
                None,
                "",
                vec!["Reached maximum budget ($0.0001)"],
                None,
                None,
                "budget_exhausted",
            ),
        ];
        for (name, status, error, result, errors, api_error, api_error_type, reason) in table {
            let (_, out) = parse(name, StreamFormat::Claude);
            assert_eq!(out.api_error_status, status, "{name}");
            assert_eq!(out.assistant_error.as_deref(), error, "{name}");
            assert_eq!(out.result_text, result, "{name}");
            assert_eq!(out.errors, errors, "{name}");
            assert_eq!(out.api_error.as_deref(), api_error, "{name}");
            assert_eq!(out.api_error_type.as_deref(), api_error_type, "{name}");
            assert_eq!(out.terminal_reason.as_deref(), Some(reason), "{name}");
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
    fn rate_limit_events_give_the_latest_utilisation() {
        let lines = [
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1767243600,"rateLimitType":"five_hour","utilization":0.42,"isUsingOverage":false}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1767243600,"rateLimitType":"five_hour","utilization":0.91,"unifiedWindows":{"five_hour":{"utilization":0.91,"resetsAt":1767243600,"status":"allowed_warning","surpassedThreshold":0.9},"seven_day":{"utilization":0.3,"resetsAt":1767700000}}}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"resetsAt":1}}"#,
        ];
        let mut parser = StreamParser::new(StreamFormat::Claude);
        assert_eq!(parser.rate_limit(), None);
        parser.push_line(lines[0]);
        assert_eq!(
            parser.rate_limit(),
            Some(&RateLimit {
                status: "allowed".into(),
                kind: Some("five_hour".into()),
                utilization: Some(0.42),
                resets_at: Some(1767243600),
                windows: Vec::new(),
            })
        );
        parser.push_line(lines[1]);
        parser.push_line(lines[2]); // no status: not a state, ignored
        let expected = RateLimit {
            status: "allowed_warning".into(),
            kind: Some("five_hour".into()),
            utilization: Some(0.91),
            resets_at: Some(1767243600),
            windows: vec![
                RateLimitWindow {
                    name: "five_hour".into(),
                    utilization: 0.91,
                    resets_at: Some(1767243600),
                },
                RateLimitWindow {
                    name: "seven_day".into(),
                    utilization: 0.3,
                    resets_at: Some(1767700000),
                },
            ],
        };
        assert_eq!(parser.rate_limit(), Some(&expected));
        let out = parser.finish(Some(0), "");
        assert_eq!(out.rate_limit, Some(expected));
        // Not rejected: no reset to wait for.
        assert_eq!(out.rate_limit_reset, None);
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
                tool_progress(tool, &input),
                Progress {
                    tool: tool.into(),
                    detail: detail.into()
                }
            );
        }
        let capped = tool_progress("Bash", &json!({ "command": long }));
        assert_eq!(capped.detail.chars().count(), DETAIL_CAP);
        assert_eq!(capped.detail, format!("{}…", "x".repeat(DETAIL_CAP - 1)));
        assert_eq!(short_detail("  \n  ls -la  \nmore"), "ls -la");
        assert_eq!(short_detail(&"é".repeat(80)), "é".repeat(80));
    }
}
