//! Why an agent run failed (DESIGN.md section 6): the classes, and [`classify`], which reads
//! them from what an agent printed ([`AgentOutput`]).
//!
//! Classes are tried in the order AGENT-CLIS.md suggests: usage limit, transient, needs the
//! user, stage limit — so that a 429 that also says "rate limit" is a retry, not a wait, and a
//! login problem is never retried. The one decision a reader must know: only a run that
//! *failed* is classified. A run whose result says it succeeded is fine even when a
//! `rate_limit_event` was rejected on the way (Claude fell back to another model) or a tool
//! call was denied; a missing report is judged later, by `stage::extract_report`.

use std::sync::LazyLock;

use chrono::Local;
use regex::Regex;

use crate::agent::Agent;
use crate::agent::reset_time::parse_reset_time;
use crate::agent::stream::{AgentOutput, first_line};

pub(crate) use crate::agent::failure_class::{FailureClass, not_logged_in};

/// How much of the end of the result and of stderr is searched for failure texts: errors are
/// printed last, and a long output may quote such texts in passing.
const TEXT_WINDOW: usize = 4096;

/// Classifies a finished run; `None` means the agent ran fine.
///
/// A run failed when its result event says `is_error` or, without a result event, when it
/// exited with anything but 0 (a signal included). The failure is then, first match wins:
/// the decisive failure the stream parser already stopped on; a usage limit (a rejected
/// `rate_limit_event`, or a "hit your … limit" / "usage limit reached" text); the cause
/// Claude names in `api_error` when it is a transient one or a stage limit; an invalid
/// request (HTTP 400 other than a prompt too long or a billing problem: a retry gets the same
/// answer, so the person must act); transient (HTTP 429, 529, 5xx, an assistant `error` of
/// `rate_limit`, `overloaded` or `server_error`, or a connection / retry-limit / high-demand
/// text); needs the user (unknown model, billing, invalid key, 403, not logged in, the
/// credential causes of `api_error`, an agent CLI rejecting its arguments); a stage limit
/// (turns, budget, structured-output retries, prompt or context too long); and anything else —
/// a crash, a signal, an exit without a result — transient. Only the last 4 KiB of the result
/// and of stderr are searched, where errors are printed.
pub(crate) fn classify(agent: &Agent, out: &AgentOutput) -> Option<FailureClass> {
    if let Some(stopped) = &out.stopped {
        return Some(stopped.clone());
    }
    let failed = if out.saw_result {
        out.is_error
    } else {
        out.exit_code != Some(0)
    };
    if !failed {
        return None;
    }
    let name = agent.to_string();
    let texts = Texts::of(out);

    // 1. Usage limits: wait, do not retry.
    if let Some(resets_at) = out.rate_limit_reset {
        let message = texts
            .usage_limit_line()
            .unwrap_or_else(|| format!("{name} hit its usage limit"));
        return Some(FailureClass::UsageLimit {
            resets_at: Some(resets_at),
            message,
        });
    }
    if let Some(line) = texts.usage_limit_line() {
        return Some(FailureClass::UsageLimit {
            resets_at: parse_reset_time(&line, Local::now()),
            message: line,
        });
    }

    // 2. The cause Claude names, where it names one.
    match api_error_class(out.api_error.as_deref()) {
        Some(ApiErrorClass::Transient) => {
            return Some(FailureClass::Transient(texts.headline(&name, out)));
        }
        Some(ApiErrorClass::StageLimit) => {
            return Some(FailureClass::StageLimit(texts.headline(&name, out)));
        }
        Some(ApiErrorClass::NeedsUser(_)) | None => {}
    }

    // 3. An invalid request: the API will answer the same to every retry.
    if let Some(message) = invalid_request(out)
        && !is_stage_limit(out, &texts)
        && out.assistant_error.as_deref() != Some("billing_error")
    {
        return Some(FailureClass::NeedsUser(format!(
            "the model API rejected {name}'s request (HTTP 400): `{message}` — a retry gets the same answer: check --model, and that `{} --version` is a version kern supports",
            agent.program().display()
        )));
    }

    // 4. Transient: the service or the network, not the task.
    let status = out.api_error_status;
    let transient_status = matches!(status, Some(429 | 529 | 500..=599));
    let transient_error = matches!(
        out.assistant_error.as_deref(),
        Some("rate_limit" | "overloaded" | "server_error")
    );
    if transient_status || transient_error || texts.any(TRANSIENT_TEXTS) {
        return Some(FailureClass::Transient(texts.headline(&name, out)));
    }

    // 5. Needs the user.
    if let Some(class) = needs_user(agent, &name, out, &texts) {
        return Some(class);
    }

    // 6. Stage limits: a retry would hit them again.
    if is_stage_limit(out, &texts) {
        return Some(FailureClass::StageLimit(texts.headline(&name, out)));
    }

    // 7. Anything else that failed: a crash, a signal, an error we do not know.
    Some(FailureClass::Transient(texts.headline(&name, out)))
}

/// True when the run hit a limit of the stage itself: turns, budget, structured-output
/// retries, a prompt or context too long.
fn is_stage_limit(out: &AgentOutput, texts: &Texts) -> bool {
    let limit_subtype = matches!(
        out.subtype.as_deref(),
        Some("error_max_turns" | "error_max_budget_usd" | "error_max_structured_output_retries")
    );
    let limit_reason = matches!(
        out.terminal_reason.as_deref(),
        Some("prompt_too_long" | "max_turns")
    );
    limit_subtype || limit_reason || texts.any(STAGE_LIMIT_TEXTS)
}

/// What Claude's `api_error` (its typed cause of an API error, Claude Code 2.1.3xx) means for
/// kern. Causes not listed are judged by the other signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ApiErrorClass {
    Transient,
    StageLimit,
    /// The person must act; the text is the fix.
    NeedsUser(&'static str),
}

fn api_error_class(api_error: Option<&str>) -> Option<ApiErrorClass> {
    use ApiErrorClass::{NeedsUser, StageLimit, Transient};
    const LOGIN: &str = "log in again, or check the credentials the CLI is given";
    Some(match api_error? {
        "connection_failed"
        | "stream_idle_timeout"
        | "computer_slept"
        | "no_response"
        | "empty_completion" => Transient,
        "max_output_tokens"
        | "message_over_context_limit"
        | "autocompact_thrashing"
        | "malformed_tool_use_exhausted"
        | "pdf_too_large" => StageLimit,
        "provider_credentials"
        | "gateway_signin_required"
        | "gateway_session_expired"
        | "api_key_auth_disabled"
        | "org_disabled_credential"
        | "invalid_credential_header"
        | "stored_login_refused"
        | "oauth_refresh_store_refused"
        | "named_profile_unusable" => NeedsUser(LOGIN),
        "claude_code_version_too_old" => {
            NeedsUser("update Claude Code (`npm install -g @anthropic-ai/claude-code`)")
        }
        "model_requires_usage_credits" | "long_context_credits_required" => {
            NeedsUser("check the plan and billing, or choose another model with --model")
        }
        "tls_untrusted_ca" | "tls_cert_signature_failure" => NeedsUser(
            "the connection's certificate is not trusted: set NODE_EXTRA_CA_CERTS to the proxy's certificate",
        ),
        _ => return None,
    })
}

/// The API's own message when the run ended on an invalid request (HTTP 400): Claude's
/// `api_error_status` 400 or `api_error_type` `invalid_request_error`; a Codex error that is
/// the API's JSON body with `error.type` `invalid_request_error`, or says `400 Bad Request`.
fn invalid_request(out: &AgentOutput) -> Option<String> {
    let claude = out.api_error_status == Some(400)
        || (out.api_error_type.as_deref() == Some("invalid_request_error")
            && out.api_error_status.is_none_or(|s| s == 400));
    if claude {
        let text = out.result_text.trim();
        let text = text.strip_prefix("API Error: 400").unwrap_or(text).trim();
        return Some(first_line(text, 300));
    }
    out.errors.iter().rev().find_map(|error| {
        if let Ok(body) = serde_json::from_str::<serde_json::Value>(error)
            && body["error"]["type"] == "invalid_request_error"
            && body["error"]["code"] != "invalid_api_key"
        {
            let message = body["error"]["message"].as_str().unwrap_or(error);
            return Some(first_line(message, 300));
        }
        error
            .contains("400 Bad Request")
            .then(|| first_line(error, 300))
    })
}

/// Texts that mean the service or the network failed, not the task.
const TRANSIENT_TEXTS: &[&str] = &[
    "Unable to connect",
    "Connection refused",
    "exceeded retry limit",
    "high demand",
    "Overloaded",
];

/// Texts that mean the person must log in again.
const LOGIN_TEXTS: &[&str] = &[
    "Not logged in",
    "Please run /login",
    "401 Unauthorized",
    "sign in again",
];

/// Texts that mean the stage is too big for the model.
const STAGE_LIMIT_TEXTS: &[&str] = &["Prompt is too long", "context window"];

fn needs_user(agent: &Agent, name: &str, out: &AgentOutput, texts: &Texts) -> Option<FailureClass> {
    let error = out.assistant_error.as_deref();
    let model_text = texts.any(&["is not available"]) && model_in(&texts.joined).is_some();
    if error == Some("model_not_found") || model_text {
        let model = out
            .model
            .clone()
            .filter(|m| !m.starts_with('<'))
            .or_else(|| model_in(&texts.joined))
            .unwrap_or_else(|| "?".to_string());
        return Some(FailureClass::NeedsUser(format!(
            "the model `{model}` is not available — check --model or the `model:` line of the template"
        )));
    }
    if error == Some("billing_error") {
        return Some(FailureClass::NeedsUser(format!(
            "{name} cannot run because of a billing problem with its account: `{}` — check the plan and billing, then run kern again",
            texts.first_line()
        )));
    }
    if texts.any(&["Invalid API key"]) {
        return Some(FailureClass::NeedsUser(format!(
            "{name} rejected its API key: `{}` — {}",
            texts.first_line(),
            agent.login_hint()
        )));
    }
    if out.api_error_status == Some(403) {
        return Some(FailureClass::NeedsUser(format!(
            "{name} was refused access (HTTP 403): `{}` — check the account's permissions, or {}",
            texts.first_line(),
            agent.login_hint()
        )));
    }
    if error == Some("authentication_failed")
        || out.api_error_status == Some(401)
        || texts.any(LOGIN_TEXTS)
    {
        return Some(not_logged_in(name, agent.login_hint()));
    }
    if let Some(line) = texts.line_with("sandbox required but unavailable") {
        return Some(FailureClass::NeedsUser(format!(
            "{name} cannot start its sandbox: `{line}` — install bubblewrap and socat (`apt install bubblewrap socat`), or run without the sandbox"
        )));
    }
    if let Some(ApiErrorClass::NeedsUser(fix)) = api_error_class(out.api_error.as_deref()) {
        return Some(FailureClass::NeedsUser(format!(
            "{name} cannot use its model API ({}): `{}` — {fix}",
            out.api_error.as_deref().unwrap_or_default(),
            texts.first_line()
        )));
    }
    // An agent CLI that rejects its command line prints one `Error: …` line and exits 1 or 2
    // with no result. A program gets no arguments, so it cannot reject any.
    if !matches!(agent, Agent::Program(_))
        && !out.saw_result
        && matches!(out.exit_code, Some(1 | 2))
        && let Some(line) =
            out.stderr_tail.lines().map(str::trim).find(|l| {
                l.starts_with("Error:") || l.starts_with("error:") || l.starts_with("ERROR:")
            })
    {
        return Some(FailureClass::NeedsUser(format!(
            "{name} rejected its arguments: `{}` — check that `{} --version` is a version kern supports",
            first_line(line, 300),
            agent.program().display()
        )));
    }
    None
}

/// The texts of a failed run that classification reads.
struct Texts {
    /// The error messages, the result (its end) and the end of stderr, one per line.
    joined: String,
    /// The same with `’` made `'`, lower case: for phrases whose spelling varies.
    folded: String,
    /// The line worth showing: the last error's, else the result's, else stderr's.
    first: String,
}

impl Texts {
    fn of(out: &AgentOutput) -> Texts {
        let result = tail_window(&out.result_text);
        let stderr = tail_window(&out.stderr_tail);
        let mut parts: Vec<&str> = out.errors.iter().map(String::as_str).collect();
        parts.push(result);
        parts.push(stderr);
        let joined = parts.join("\n");
        let folded = joined.replace('\u{2019}', "'").to_lowercase();
        // The last error message first: the error that ended the run comes last (Codex's
        // `turn.failed` after any reconnects), and a result text without a result event is
        // only the last thing the assistant said, rarely why the run failed.
        let first = out
            .errors
            .iter()
            .rev()
            .map(String::as_str)
            .chain([result, stderr])
            .flat_map(str::lines)
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| first_line(l, 300))
            .unwrap_or_default();
        Texts {
            joined,
            folded,
            first,
        }
    }

    fn any(&self, needles: &[&str]) -> bool {
        needles.iter().any(|n| self.joined.contains(n))
    }

    fn first_line(&self) -> &str {
        &self.first
    }

    /// The first line holding `needle`, trimmed and capped.
    fn line_with(&self, needle: &str) -> Option<String> {
        self.joined
            .lines()
            .find(|l| l.contains(needle))
            .map(|l| first_line(l.trim(), 300))
    }

    /// The message for a class: the agent's own first line; without a result, what is known
    /// of the exit first.
    fn headline(&self, name: &str, out: &AgentOutput) -> String {
        if out.saw_result && !self.first.is_empty() {
            return self.first.clone();
        }
        let exit = match out.exit_code {
            Some(code) => format!("{name} exited with code {code}"),
            None => format!("{name} was stopped by a signal"),
        };
        let exit = if out.saw_result {
            exit
        } else {
            format!("{exit} without a result")
        };
        if self.first.is_empty() {
            exit
        } else {
            format!("{exit}: {}", self.first)
        }
    }

    /// The line that announces a usage limit, if any.
    fn usage_limit_line(&self) -> Option<String> {
        let folded_lines = self.folded.lines();
        for (line, folded) in self.joined.lines().zip(folded_lines) {
            let hit = (folded.contains("hit your") && folded.contains("limit"))
                || folded.contains("usage limit reached");
            if hit {
                return Some(first_line(line.trim(), 300));
            }
        }
        None
    }
}

fn tail_window(text: &str) -> &str {
    if text.len() <= TEXT_WINDOW {
        return text;
    }
    let mut start = text.len() - TEXT_WINDOW;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The model named in a "model … is not available" text.
fn model_in(text: &str) -> Option<String> {
    MODEL_NAME
        .as_ref()?
        .captures(text)
        .map(|c| c[1].to_string())
}

/// The patterns below are fixed; a test proves each compiles (`None` would only mean "no
/// match", silently). They are ASCII-only: kern's regex crate has no Unicode tables.
static MODEL_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?-u)[Tt]he model \(?`?([A-Za-z0-9._:/@\[\]-]+)").ok());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::stream::StreamFormat;
    use crate::agent::stream::fixture::{parse, parse_in, parse_lines};
    use serde_json::{Value, json};
    use std::path::PathBuf;

    /// Stands for "some reset time": the row's time depends on the clock of the test run.
    const ANY_TIME: i64 = -1;

    const CLAUDE_LOGIN: &str =
        "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY";

    /// A Claude stream as the real CLI prints a failed run: init, a (synthetic) assistant
    /// message carrying `error`, then the result event with `extra` merged in.
    fn claude_failure(
        model: &str,
        text: &str,
        error: Option<&str>,
        status: Option<u16>,
        extra: Value,
    ) -> Vec<String> {
        let mut assistant = json!({"type": "assistant", "message": {"model": "<synthetic>",
            "content": [{"type": "text", "text": text}]}});
        if let Some(error) = error {
            assistant["error"] = json!(error);
        }
        let mut result = json!({"type": "result", "subtype": "success", "is_error": true,
            "api_error_status": status, "num_turns": 1, "result": text, "session_id": "s",
            "total_cost_usd": 0, "usage": {}, "modelUsage": {}, "permission_denials": [],
            "terminal_reason": "completed"});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                if v.is_null() {
                    result.as_object_mut().unwrap().remove(&k);
                } else {
                    result[k] = v;
                }
            }
        }
        vec![
            json!({"type": "system", "subtype": "init", "session_id": "s", "model": model})
                .to_string(),
            assistant.to_string(),
            result.to_string(),
        ]
    }

    fn codex_failure(message: &str) -> Vec<String> {
        vec![
            json!({"type": "thread.started", "thread_id": "t"}).to_string(),
            json!({"type": "turn.started"}).to_string(),
            json!({"type": "error", "message": message}).to_string(),
            json!({"type": "turn.failed", "error": {"message": message}}).to_string(),
        ]
    }

    enum Source {
        /// A recorded stream of the pinned Claude Code.
        Fixture(&'static str),
        /// A recorded stream of Claude Code 2.1.197, which people may still run.
        Fixture197(&'static str),
        Lines(Vec<String>, StreamFormat, Option<i32>, &'static str),
    }

    fn output(source: &Source) -> AgentOutput {
        match source {
            Source::Fixture(name) => parse(name, StreamFormat::Claude).1,
            Source::Fixture197(name) => parse_in("2.1.197", name, StreamFormat::Claude).1,
            Source::Lines(lines, format, exit, stderr) => {
                parse_lines(lines.iter().map(String::as_str), *format, *exit, stderr).1
            }
        }
    }

    fn needs(m: &str) -> Option<FailureClass> {
        Some(FailureClass::NeedsUser(m.into()))
    }

    fn transient(m: &str) -> Option<FailureClass> {
        Some(FailureClass::Transient(m.into()))
    }

    fn stage_limit(m: &str) -> Option<FailureClass> {
        Some(FailureClass::StageLimit(m.into()))
    }

    fn usage(resets_at: i64, m: &str) -> Option<FailureClass> {
        Some(FailureClass::UsageLimit {
            resets_at: Some(resets_at),
            message: m.into(),
        })
    }

    #[test]
    fn every_documented_failure_is_classified() {
        use Source::{Fixture, Fixture197, Lines};
        let claude = |lines| Lines(lines, StreamFormat::Claude, Some(1), "");
        let codex = |message: &str| Lines(codex_failure(message), StreamFormat::Codex, Some(1), "");
        let program = PathBuf::from("/bin/agent");
        let rows: Vec<(&str, Agent, Source, Option<FailureClass>)> = vec![
            // Success, and what is not a failure.
            ("research success", Agent::Claude, Fixture("research-success"), None),
            ("implement success", Agent::Claude, Fixture("implement-success"), None),
            ("commit success", Agent::Claude, Fixture("commit-success"), None),
            (
                "a permission denial",
                Agent::Claude,
                Lines(
                    vec![json!({"type": "result", "subtype": "success", "is_error": false,
                        "result": "done", "permission_denials": [{"tool_name": "Bash",
                        "tool_use_id": "t", "tool_input": {"command": "git push"}}]})
                    .to_string()],
                    StreamFormat::Claude,
                    Some(0),
                    "",
                ),
                None,
            ),
            (
                "a rejected rate limit on the way to a success (model fallback)",
                Agent::Claude,
                Lines(
                    vec![
                        json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1767243600}}).to_string(),
                        json!({"type": "result", "subtype": "success", "is_error": false, "result": "ok"}).to_string(),
                    ],
                    StreamFormat::Claude,
                    Some(0),
                    "",
                ),
                None,
            ),
            // Claude API errors table, row by row.
            (
                "529",
                Agent::Claude,
                Fixture("api-529-overloaded"),
                transient("API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status."),
            ),
            (
                "429",
                Agent::Claude,
                Fixture("api-429-rate-limit"),
                transient("API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"),
            ),
            (
                "500",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: 500 Internal server error.", Some("server_error"), Some(500), json!({}))),
                transient("API Error: 500 Internal server error."),
            ),
            ("401", Agent::Claude, Fixture("api-401-max-retries-2"), needs(CLAUDE_LOGIN)),
            (
                "401, stopped at the first api_retry",
                Agent::Claude,
                Fixture("api-401-first-retry"),
                needs(CLAUDE_LOGIN),
            ),
            (
                "401, stopped at the first of 2.1.197's ten retries",
                Agent::Claude,
                Fixture197("api-401-first-120s"),
                needs(CLAUDE_LOGIN),
            ),
            (
                "400 invalid request (recorded)",
                Agent::Claude,
                Fixture("api-400-invalid-request"),
                needs("the model API rejected claude's request (HTTP 400): `tools.0.custom.input_schema: JSON schema is invalid` — a retry gets the same answer: check --model, and that `claude --version` is a version kern supports"),
            ),
            (
                "400 prompt too long (recorded)",
                Agent::Claude,
                Fixture("api-400-prompt-too-long"),
                stage_limit("Prompt is too long · the request is ~250000 tokens (limit 200000) but this conversation is only ~577 tokens — the rest is system prompt, tool definitions, and attachment content. A single-exchange conversation cannot be compacted; reduce attached files/tools or start with less context."),
            ),
            (
                "500 (recorded)",
                Agent::Claude,
                Fixture("api-500-server-error"),
                transient("API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your Google Vertex AI service status."),
            ),
            (
                "error_max_budget_usd (recorded)",
                Agent::Claude,
                Fixture("implement-max-budget"),
                stage_limit("Reached maximum budget ($0.0001)"),
            ),
            (
                "404 model",
                Agent::Claude,
                claude(claude_failure("claude-nope-9", "The model claude-nope-9 is not available", Some("model_not_found"), Some(404), json!({}))),
                needs("the model `claude-nope-9` is not available — check --model or the `model:` line of the template"),
            ),
            (
                "404 model, named only in the text",
                Agent::Claude,
                claude(claude_failure("<synthetic>", "The model opus-9 is not available to you", None, Some(404), json!({}))),
                needs("the model `opus-9` is not available — check --model or the `model:` line of the template"),
            ),
            (
                "400 too long",
                Agent::Claude,
                claude(claude_failure("sonnet", "Prompt is too long · 250000 tokens > 200000 maximum", None, Some(400), json!({"terminal_reason": "prompt_too_long"}))),
                stage_limit("Prompt is too long · 250000 tokens > 200000 maximum"),
            ),
            (
                "no connection",
                Agent::Claude,
                Fixture("connection-refused"),
                transient("API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"),
            ),
            (
                "no connection (2.1.197)",
                Agent::Claude,
                Fixture197("connection-refused"),
                transient("API Error: Unable to connect to API (ConnectionRefused)"),
            ),
            (
                "400 invalid request (Claude Code 2.1.330 fields)",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: 400 tools.0.custom.input_schema: JSON schema is invalid", Some("unknown"), Some(400), json!({"api_error_type": "invalid_request_error", "terminal_reason": "api_error"}))),
                needs("the model API rejected claude's request (HTTP 400): `tools.0.custom.input_schema: JSON schema is invalid` — a retry gets the same answer: check --model, and that `claude --version` is a version kern supports"),
            ),
            (
                "400 prompt too long (2.1.330) stays a stage limit",
                Agent::Claude,
                claude(claude_failure("sonnet", "Prompt is too long · the request is ~250000 tokens (limit 200000)", Some("invalid_request"), Some(400), json!({"api_error_type": "invalid_request_error", "terminal_reason": "prompt_too_long"}))),
                stage_limit("Prompt is too long · the request is ~250000 tokens (limit 200000)"),
            ),
            (
                "no connection (2.1.330: api_error connection_failed)",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)", Some("server_error"), None, json!({"api_error": "connection_failed", "terminal_reason": "api_error"}))),
                transient("API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"),
            ),
            (
                "a typed transient cause without any other sign",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: the stream went quiet", None, None, json!({"api_error": "stream_idle_timeout"}))),
                transient("API Error: the stream went quiet"),
            ),
            (
                "a typed stage limit",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: the reply hit its output limit", None, None, json!({"api_error": "max_output_tokens"}))),
                stage_limit("API Error: the reply hit its output limit"),
            ),
            (
                "a typed credential cause",
                Agent::Claude,
                claude(claude_failure("sonnet", "Your gateway session expired", None, None, json!({"api_error": "gateway_session_expired"}))),
                needs("claude cannot use its model API (gateway_session_expired): `Your gateway session expired` — log in again, or check the credentials the CLI is given"),
            ),
            (
                "403 with a typed cause (2.1.330) is still a refused access",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: 403 Request not allowed", Some("authentication_failed"), Some(403), json!({"api_error": "provider_credentials", "api_error_type": "permission_error"}))),
                needs("claude was refused access (HTTP 403): `API Error: 403 Request not allowed` — check the account's permissions, or run `claude` once to log in, or set ANTHROPIC_API_KEY"),
            ),
            (
                "the sandbox cannot start (2.1.330 with failIfUnavailable, verbatim)",
                Agent::Claude,
                Lines(
                    vec![json!({"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "is_error": true, "num_turns": 0, "stop_reason": null, "session_id": "s", "total_cost_usd": 0, "errors": []}).to_string()],
                    StreamFormat::Claude,
                    Some(1),
                    "Error: sandbox required but unavailable: sandbox is enabled but dependencies are missing: bubblewrap (bwrap) not installed · install missing tools (e.g. apt install bubblewrap socat) or see https://code.claude.com/docs/en/sandboxing\n  Refusing to start without a working sandbox (see sandbox.failIfUnavailable).\n",
                ),
                needs("claude cannot start its sandbox: `Error: sandbox required but unavailable: sandbox is enabled but dependencies are missing: bubblewrap (bwrap) not installed · install missing tools (e.g. apt install bubblewrap socat) or see https://code.claude.com/docs/en/sandboxing` — install bubblewrap and socat (`apt install bubblewrap socat`), or run without the sandbox"),
            ),
            // Not logged in, keys, billing, access.
            ("not logged in", Agent::Claude, Fixture("not-logged-in"), needs(CLAUDE_LOGIN)),
            (
                "invalid API key",
                Agent::Claude,
                claude(claude_failure("sonnet", "Invalid API key · Fix external API key", Some("authentication_failed"), None, json!({}))),
                needs("claude rejected its API key: `Invalid API key · Fix external API key` — run `claude` once to log in, or set ANTHROPIC_API_KEY"),
            ),
            (
                "403",
                Agent::Claude,
                claude(claude_failure("sonnet", "API Error: 403 Request not allowed", None, Some(403), json!({}))),
                needs("claude was refused access (HTTP 403): `API Error: 403 Request not allowed` — check the account's permissions, or run `claude` once to log in, or set ANTHROPIC_API_KEY"),
            ),
            (
                "billing",
                Agent::Claude,
                claude(claude_failure("sonnet", "Credit balance is too low", Some("billing_error"), Some(400), json!({}))),
                needs("claude cannot run because of a billing problem with its account: `Credit balance is too low` — check the plan and billing, then run kern again"),
            ),
            // Limits.
            (
                "error_max_turns",
                Agent::Claude,
                Fixture("implement-max-turns"),
                stage_limit("Reached maximum number of turns (1)"),
            ),
            (
                "error_max_budget_usd",
                Agent::Claude,
                claude(claude_failure("sonnet", "", None, None, json!({"subtype": "error_max_budget_usd", "result": null, "errors": ["Reached maximum budget ($0.5)"]}))),
                stage_limit("Reached maximum budget ($0.5)"),
            ),
            (
                "error_max_structured_output_retries",
                Agent::Claude,
                claude(claude_failure("sonnet", "", None, None, json!({"subtype": "error_max_structured_output_retries", "result": null, "errors": ["Failed to provide valid structured output"]}))),
                stage_limit("Failed to provide valid structured output"),
            ),
            // Usage limits.
            (
                "rate_limit_event rejected",
                Agent::Claude,
                claude({
                    let mut lines = claude_failure("sonnet", "You've hit your session limit · resets 5am", None, None, json!({}));
                    lines.insert(1, json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1767243600, "rateLimitType": "five_hour"}}).to_string());
                    lines
                }),
                usage(1767243600, "You've hit your session limit · resets 5am"),
            ),
            (
                "You've hit your … limit · resets …",
                Agent::Claude,
                claude(claude_failure("sonnet", "You've hit your weekly limit · resets 5:44 AM (Europe/Berlin)", None, None, json!({}))),
                usage(ANY_TIME, "You've hit your weekly limit · resets 5:44 AM (Europe/Berlin)"),
            ),
            (
                "usage limit reached|<epoch>",
                Agent::Claude,
                claude(claude_failure("sonnet", "Claude AI usage limit reached|1767243600", None, None, json!({}))),
                usage(1767243600, "Claude AI usage limit reached|1767243600"),
            ),
            // Codex failure texts.
            (
                "codex usage limit",
                Agent::Codex,
                codex("You’ve hit your usage limit. … try again at 5:44 AM."),
                usage(ANY_TIME, "You’ve hit your usage limit. … try again at 5:44 AM."),
            ),
            (
                "codex exceeded retry limit",
                Agent::Codex,
                codex("exceeded retry limit, last status: 429 Too Many Requests"),
                transient("codex exited with code 1 without a result: exceeded retry limit, last status: 429 Too Many Requests"),
            ),
            (
                "codex high demand",
                Agent::Codex,
                codex("We’re currently experiencing high demand …"),
                transient("codex exited with code 1 without a result: We’re currently experiencing high demand …"),
            ),
            (
                "codex 401",
                Agent::Codex,
                codex("unexpected status 401 Unauthorized: …"),
                needs("codex is not logged in: run `codex login` once, or set CODEX_API_KEY"),
            ),
            (
                "codex context window",
                Agent::Codex,
                codex("Codex ran out of room in the model's context window. …"),
                stage_limit("codex exited with code 1 without a result: Codex ran out of room in the model's context window. …"),
            ),
            (
                "codex reconnecting forever",
                Agent::Codex,
                Lines(
                    (1..=8).map(|n| json!({"type": "error", "message": format!("Reconnecting... {n}/5 (stream disconnected before completion: error sending request)")}).to_string()).collect(),
                    StreamFormat::Codex,
                    None,
                    "Reading additional input from stdin...\n",
                ),
                transient("codex kept reconnecting (8 times in a row): Reconnecting... 8/5 (stream disconnected before completion: error sending request)"),
            ),
            (
                "codex waiting for the network is stopped at the first sign",
                Agent::Codex,
                Lines(
                    vec![json!({"type": "error", "message": "Reconnecting... waiting for network (Connection failed: error sending request)"}).to_string()],
                    StreamFormat::Codex,
                    None,
                    "",
                ),
                transient("codex cannot reach the model API: Reconnecting... waiting for network (Connection failed: error sending request)"),
            ),
            (
                "codex 400: the schema the API rejects (codex-cli 0.169.0, verbatim)",
                Agent::Codex,
                codex(r#"{"error": {"message": "Invalid schema for response_format 'codex_output_schema': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'skip_reason'.", "type": "invalid_request_error", "param": "text.format.schema", "code": "invalid_json_schema"}}"#),
                needs("the model API rejected codex's request (HTTP 400): `Invalid schema for response_format 'codex_output_schema': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'skip_reason'.` — a retry gets the same answer: check --model, and that `codex --version` is a version kern supports"),
            ),
            (
                "codex 400 in the older wording",
                Agent::Codex,
                codex("unexpected status 400 Bad Request: Unsupported parameter: 'reasoning.effort'"),
                needs("the model API rejected codex's request (HTTP 400): `unexpected status 400 Bad Request: Unsupported parameter: 'reasoning.effort'` — a retry gets the same answer: check --model, and that `codex --version` is a version kern supports"),
            ),
            (
                "codex 400 for a context too long is a stage limit",
                Agent::Codex,
                codex(r#"{"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}"#),
                stage_limit(r#"codex exited with code 1 without a result: {"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}"#),
            ),
            (
                "codex reconnects, then a 401 ends the turn",
                Agent::Codex,
                Lines(
                    {
                        let mut lines: Vec<String> = (1..=3).map(|n| json!({"type": "error", "message": format!("Reconnecting... {n}/5")}).to_string()).collect();
                        lines.extend(codex_failure("unexpected status 401 Unauthorized: Missing bearer"));
                        lines
                    },
                    StreamFormat::Codex,
                    Some(1),
                    "",
                ),
                needs("codex is not logged in: run `codex login` once, or set CODEX_API_KEY"),
            ),
            (
                "codex reconnects, then gives up",
                Agent::Codex,
                Lines(
                    (1..=3).map(|n| json!({"type": "error", "message": format!("Reconnecting... {n}/5")}).to_string()).collect(),
                    StreamFormat::Codex,
                    Some(1),
                    "",
                ),
                transient("codex exited with code 1 without a result: Reconnecting... 3/5"),
            ),
            (
                "something else that is not available is not a model problem",
                Agent::Claude,
                claude(claude_failure("sonnet", "The tool WebSearch is not available here", None, None, json!({}))),
                transient("The tool WebSearch is not available here"),
            ),
            // Rejected arguments, crashes, signals.
            (
                "claude rejects its arguments",
                Agent::Claude,
                Fixture("usage-error-no-verbose"),
                needs("claude rejected its arguments: `Error: When using --print, --output-format=stream-json requires --verbose` — check that `claude --version` is a version kern supports"),
            ),
            (
                "codex rejects its arguments",
                Agent::Codex,
                Lines(vec![], StreamFormat::Codex, Some(2), "error: unexpected argument '--full-auto' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n"),
                needs("codex rejected its arguments: `error: unexpected argument '--full-auto' found` — check that `codex --version` is a version kern supports"),
            ),
            (
                "exit 1 with no result",
                Agent::Claude,
                Lines(vec![], StreamFormat::Claude, Some(1), ""),
                transient("claude exited with code 1 without a result"),
            ),
            (
                "killed by a signal",
                Agent::Claude,
                Lines(vec![], StreamFormat::Claude, None, ""),
                transient("claude was stopped by a signal without a result"),
            ),
            (
                "a program's plain output, exit 0",
                Agent::Program(program.clone()),
                Lines(vec!["SUCCESS".into()], StreamFormat::Detect, Some(0), ""),
                None,
            ),
            (
                "a program failing with an error line is retried, not a usage error",
                Agent::Program(program.clone()),
                Lines(vec![], StreamFormat::Detect, Some(1), "error: boom\n"),
                transient("program:/bin/agent exited with code 1 without a result: error: boom"),
            ),
            (
                "a program quoting a login text long before its end",
                Agent::Program(program),
                Lines(
                    vec!["Not logged in".into(), "x".repeat(TEXT_WINDOW + 10), "crashed".into()],
                    StreamFormat::Detect,
                    Some(1),
                    "",
                ),
                transient(&format!("program:/bin/agent exited with code 1 without a result: {}…", "x".repeat(299))),
            ),
        ];
        for (what, agent, source, expected) in rows {
            let out = output(&source);
            let mut got = classify(&agent, &out);
            if let Some(FailureClass::UsageLimit { resets_at, .. }) = &mut got
                && matches!(
                    &expected,
                    Some(FailureClass::UsageLimit {
                        resets_at: Some(ANY_TIME),
                        ..
                    })
                )
            {
                assert!(
                    resets_at.is_some_and(|t| t > Local::now().timestamp() - 60),
                    "{what}: {resets_at:?}"
                );
                *resets_at = Some(ANY_TIME);
            }
            assert_eq!(got, expected, "{what}");
        }
    }

    #[test]
    fn the_model_pattern_compiles() {
        assert!(MODEL_NAME.is_some());
    }
}
