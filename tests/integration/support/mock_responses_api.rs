//! A scripted mock of OpenAI's Responses API on 127.0.0.1, for driving the real `codex` CLI
//! offline, and the helpers that locate the pinned CLI and point it at the mock.
//!
//! Codex reaches the mock through a custom provider in a throw-away `CODEX_HOME/config.toml`
//! ([`MockResponsesApi::write_codex_home`]: `model_provider`, `base_url =
//! "http://127.0.0.1:PORT/v1"`, `wire_api = "responses"`, no key) and posts `POST
//! /v1/responses` with `stream: true`, its tools (`exec_command`, …), the conversation in
//! `input`, and with `--output-schema` the schema as `text.format` (`type: json_schema,
//! strict: true`). The answer is a server-sent-event stream: `response.created`, one
//! `response.output_item.done` per item (a `function_call` of `exec_command`, which the real
//! CLI runs in its sandbox and answers with a `function_call_output`, or the final assistant
//! `message`), and `response.completed` with usage — the shapes codex-cli 0.169.0 was seen to
//! read.
//!
//! The one decision a reader must know: like the real API, the mock rejects a schema that is
//! not strict (an object without `additionalProperties: false`, or a property missing from
//! `required`) with HTTP 400 `invalid_json_schema` before anything else, so a test passes only
//! when kern's schemas would pass the real service. A rule (all of its phrases in the user
//! messages) picks the conversation and the number of `function_call_output` items so far picks
//! the turn, as in `mock_model_api.rs`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::http_server::{HttpRequest, HttpServer, http_response, lock};
use super::mock_model_api::run_installer_with;

/// The text of every answer that is not part of the script.
pub(crate) const SIDE_ANSWER: &str = "ok";

/// The provider id the mock's `config.toml` defines.
pub(crate) const PROVIDER: &str = "kern-mock";

/// What the mock answers: the first rule whose phrases all occur wins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Script {
    /// The rules, in priority order.
    pub rules: Vec<Rule>,
}

/// One scripted conversation.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// Substrings that must all occur in the request's user messages (the prompt).
    pub phrases: Vec<String>,
    /// The answers in order: the request after N tool outputs gets the Nth answer turn; the
    /// last one repeats. [`Turn::HttpError`] entries stand in front of the answer turn that
    /// follows them and do not count as answer turns.
    pub turns: Vec<Turn>,
}

impl Rule {
    /// A rule for prompts holding every one of `phrases` (none: every prompt).
    pub(crate) fn all(phrases: &[&str], turns: Vec<Turn>) -> Rule {
        Rule {
            phrases: phrases
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            turns,
        }
    }
}

/// One answer of the scripted model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    /// A call of Codex's `exec_command` tool with this shell command.
    Exec(String),
    /// The final assistant message: this text (a report is its JSON).
    Message(String),
    /// An HTTP error with this JSON body, given `times` times over the mock's life; after that
    /// the request falls through to the next answer turn.
    HttpError {
        /// The status.
        status: u16,
        /// The body.
        body: Value,
        /// How many times; `u32::MAX` for always.
        times: u32,
    },
}

impl Turn {
    /// The final message holding `report` as JSON.
    pub(crate) fn report(report: Value) -> Turn {
        Turn::Message(report.to_string())
    }

    /// An OpenAI-style error: `{"error": {"message", "type", "param": null, "code"}}`.
    pub(crate) fn http_error(
        status: u16,
        kind: &str,
        code: Option<&str>,
        message: &str,
        times: u32,
    ) -> Turn {
        Turn::HttpError {
            status,
            body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            times,
        }
    }
}

/// How the mock answered one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Turn `turn` of rule `rule`.
    Scripted { rule: usize, turn: usize },
    /// The HTTP error of turn `turn` of rule `rule`.
    Error {
        rule: usize,
        turn: usize,
        status: u16,
    },
    /// HTTP 400 `invalid_json_schema`: the schema was not strict.
    SchemaRejected,
    /// Not part of the script.
    Side,
}

/// One request as the mock saw it.
#[derive(Debug, Clone)]
pub(crate) struct RecordedRequest {
    /// `POST /v1/responses`, …
    pub method: String,
    /// The path.
    pub path: String,
    /// The model asked for.
    pub model: String,
    /// The user messages' text, joined by newlines.
    pub user_text: String,
    /// The tools offered, by name.
    pub tool_names: Vec<String>,
    /// How many tool outputs the conversation held (tool round trips so far).
    pub tool_outputs: usize,
    /// The last tool output's text.
    pub last_tool_output: String,
    /// `text.format.schema` when the request carried one.
    pub schema: Option<Value>,
    /// The whole body.
    pub body: Value,
    /// What the mock answered.
    pub answer: Answer,
}

/// The mock; it runs until dropped.
pub(crate) struct MockResponsesApi {
    shared: Arc<Shared>,
    server: HttpServer,
}

struct Shared {
    script: Script,
    errors_given: Mutex<HashMap<(usize, usize), u32>>,
    requests: Mutex<Vec<RecordedRequest>>,
    next_id: AtomicU64,
}

impl MockResponsesApi {
    /// Starts the mock on `127.0.0.1` with an ephemeral port.
    pub(crate) fn start(script: Script) -> MockResponsesApi {
        let shared = Arc::new(Shared {
            script,
            errors_given: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        });
        let handler_shared = Arc::clone(&shared);
        let server = HttpServer::start(Box::new(move |request: &HttpRequest| {
            respond(&handler_shared, request)
        }));
        MockResponsesApi { shared, server }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.address())
    }

    /// Writes `<dir>/config.toml` selecting a custom provider that points at this mock with
    /// no key, and `retries` as both of Codex's own retry budgets (`None`: Codex's defaults,
    /// 4 request and 5 stream retries).
    pub(crate) fn write_codex_home(&self, dir: &Path, retries: Option<u32>) {
        write_codex_config(dir, &self.base_url(), retries);
    }

    /// Every request so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests that consumed the script or were rejected for their schema.
    pub(crate) fn scripted_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.answer != Answer::Side)
            .collect()
    }
}

/// Writes a `config.toml` in `dir` whose provider is reached at `base_url` (for a closed port
/// as well as for the mock).
pub(crate) fn write_codex_config(dir: &Path, base_url: &str, retries: Option<u32>) {
    std::fs::create_dir_all(dir).expect("create CODEX_HOME");
    let retries = retries
        .map(|n| format!("request_max_retries = {n}\nstream_max_retries = {n}\n"))
        .unwrap_or_default();
    let config = format!(
        "# Written by kern's tests: a custom provider on loopback, no key, nothing else.\n\
         model_provider = \"{PROVIDER}\"\n\
         model = \"gpt-5-codex\"\n\
         \n\
         [model_providers.{PROVIDER}]\n\
         name = \"kern mock\"\n\
         base_url = \"{base_url}\"\n\
         wire_api = \"responses\"\n\
         {retries}\
         \n\
         [analytics]\n\
         enabled = false\n"
    );
    std::fs::write(dir.join("config.toml"), config).expect("write config.toml");
}

/// Variables that must not reach Codex from the test's own environment: keys and settings
/// that would send it elsewhere than the mock.
pub(crate) const CODEX_ENV_REMOVE: &[&str] = &[
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "CODEX_HOME",
];

/// Where the pinned Codex CLI is, or why it cannot be had: `KERN_CODEX_BIN` when set, else what
/// `.ci/install-codex` prints on its last line (it installs into a cache outside the repository
/// and reuses it). Computed once per process.
pub(crate) fn codex_executable() -> Result<PathBuf, String> {
    static ANSWER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ANSWER
        .get_or_init(|| {
            if let Some(bin) = std::env::var_os("KERN_CODEX_BIN").filter(|v| !v.is_empty()) {
                let bin = PathBuf::from(bin);
                return if bin.is_file() {
                    Ok(bin)
                } else {
                    Err(format!(
                        "KERN_CODEX_BIN=`{}` does not exist — unset it to let the tests install the \
                         CLI, or export KERN_CODEX_BIN=$(.ci/install-codex | tail -1)",
                        bin.display()
                    ))
                };
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-codex");
            run_installer_with(
                &script,
                &[],
                "set KERN_SKIP_REAL_CODEX=1 to skip the real-Codex tests",
            )
        })
        .clone()
}

/// The first strictness problem of `schema` as the real API words it, or `None` when strict:
/// every object needs `additionalProperties: false` and every property in `required`.
pub(crate) fn strict_schema_problem(schema: &Value, context: &str) -> Option<String> {
    let is_object = match &schema["type"] {
        Value::String(t) => t == "object",
        Value::Array(types) => types.iter().any(|t| t == "object"),
        _ => false,
    };
    if is_object {
        if schema["additionalProperties"] != Value::Bool(false) {
            return Some(format!(
                "In context=({context}), 'additionalProperties' is required to be supplied and to be false."
            ));
        }
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = schema["properties"].as_object() {
            for name in properties.keys() {
                if !required.contains(&name.as_str()) {
                    return Some(format!(
                        "In context=({context}), 'required' is required to be supplied and to be an array including every key in properties. Missing '{name}'."
                    ));
                }
            }
            for (name, property) in properties {
                let inner = if context.is_empty() {
                    format!("'properties', '{name}'")
                } else {
                    format!("{context}, 'properties', '{name}'")
                };
                if let Some(problem) = strict_schema_problem(property, &inner) {
                    return Some(problem);
                }
            }
        }
    }
    if schema.get("items").is_some() {
        let inner = if context.is_empty() {
            "'items'".to_string()
        } else {
            format!("{context}, 'items'")
        };
        return strict_schema_problem(&schema["items"], &inner);
    }
    None
}

fn respond(shared: &Shared, request: &HttpRequest) -> Vec<u8> {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let input: &[Value] = body["input"].as_array().map_or(&[], Vec::as_slice);
    let user_text = input
        .iter()
        .filter(|item| item["role"] == "user")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n");
    let outputs: Vec<&Value> = input
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .collect();
    let tool_outputs = outputs.len();
    let last_tool_output = outputs
        .last()
        .map(|o| match &o["output"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    let tool_names: Vec<String> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let format = &body["text"]["format"];
    let schema = (format["type"] == "json_schema").then(|| format["schema"].clone());
    let is_model_call = request.method == "POST" && request.path.ends_with("/responses");

    let mut answer = Answer::Side;
    let response = if !is_model_call {
        http_response(
            404,
            "application/json",
            &[],
            b"{\"error\":{\"message\":\"not found\"}}",
        )
    } else if let Some(problem) = schema
        .as_ref()
        .filter(|_| format["strict"] == true)
        .and_then(|s| strict_schema_problem(s, ""))
    {
        answer = Answer::SchemaRejected;
        let name = format["name"].as_str().unwrap_or("response_format");
        let error = json!({"error": {
            "message": format!("Invalid schema for response_format '{name}': {problem}"),
            "type": "invalid_request_error", "param": "text.format.schema",
            "code": "invalid_json_schema"}});
        http_response(400, "application/json", &[], error.to_string().as_bytes())
    } else {
        let rule = shared
            .script
            .rules
            .iter()
            .position(|r| r.phrases.iter().all(|p| user_text.contains(p.as_str())));
        match rule.and_then(|rule| choose(shared, rule, tool_outputs)) {
            Some(Choice::Error {
                rule,
                turn,
                status,
                body,
            }) => {
                answer = Answer::Error { rule, turn, status };
                http_response(status, "application/json", &[], body.as_bytes())
            }
            Some(Choice::Turn(rule, turn)) => {
                answer = Answer::Scripted { rule, turn };
                stream(shared, &shared.script.rules[rule].turns[turn])
            }
            None => stream(shared, &Turn::Message(SIDE_ANSWER.to_string())),
        }
    };
    lock(&shared.requests).push(RecordedRequest {
        method: request.method.clone(),
        path: request.path.clone(),
        model: body["model"].as_str().unwrap_or_default().to_string(),
        user_text,
        tool_names,
        tool_outputs,
        last_tool_output,
        schema,
        body,
        answer,
    });
    response
}

enum Choice {
    Turn(usize, usize),
    Error {
        rule: usize,
        turn: usize,
        status: u16,
        body: String,
    },
}

/// The answer after `tool_outputs` round trips under `rule`: errors in front of the answer
/// turn take their `times` first; past the end the last answer turn repeats.
fn choose(shared: &Shared, rule: usize, tool_outputs: usize) -> Option<Choice> {
    let turns = &shared.script.rules[rule].turns;
    let mut answer_index = 0usize;
    let mut last_answer = None;
    let mut errors_given = lock(&shared.errors_given);
    for (index, turn) in turns.iter().enumerate() {
        match turn {
            Turn::HttpError {
                status,
                body,
                times,
            } => {
                if answer_index == tool_outputs {
                    let given = errors_given.entry((rule, index)).or_insert(0);
                    if *given < *times {
                        *given += 1;
                        return Some(Choice::Error {
                            rule,
                            turn: index,
                            status: *status,
                            body: body.to_string(),
                        });
                    }
                }
            }
            _ => {
                if answer_index == tool_outputs {
                    return Some(Choice::Turn(rule, index));
                }
                answer_index += 1;
                last_answer = Some(index);
            }
        }
    }
    last_answer.map(|index| Choice::Turn(rule, index))
}

/// The SSE stream of one answer turn.
fn stream(shared: &Shared, turn: &Turn) -> Vec<u8> {
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let item = match turn {
        Turn::Exec(command) => json!({
            "type": "function_call", "id": format!("fc_mock{id}"), "call_id": format!("call_mock{id}"),
            "name": "exec_command", "arguments": json!({"cmd": command}).to_string(),
        }),
        Turn::Message(text) => json!({
            "type": "message", "role": "assistant", "id": format!("msg_mock{id}"),
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Turn::HttpError { .. } => json!({
            "type": "message", "role": "assistant", "id": format!("msg_mock{id}"),
            "content": [{"type": "output_text", "text": SIDE_ANSWER, "annotations": []}],
        }),
    };
    let response_id = format!("resp_mock{id}");
    let events = [
        json!({"type": "response.created", "response": {"id": response_id}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": response_id, "usage": {
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120}}}),
    ];
    let mut body = String::new();
    for event in events {
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or_default()
        ));
    }
    http_response(
        200,
        "text/event-stream",
        &[("cache-control", "no-cache")],
        body.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_check_words_its_first_problem_as_the_real_api() {
        let table = [
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}),
                None,
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"], "additionalProperties": false}),
                Some(
                    "In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'b'.",
                ),
            ),
            (
                json!({"type": "object", "properties": {}, "required": []}),
                Some(
                    "In context=(), 'additionalProperties' is required to be supplied and to be false.",
                ),
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": ["array", "null"], "items": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": false}}}, "required": ["l"], "additionalProperties": false}),
                Some(
                    "In context=('properties', 'l', 'items'), 'required' is required to be supplied and to be an array including every key in properties. Missing 'x'.",
                ),
            ),
        ];
        for (schema, expected) in table {
            assert_eq!(
                strict_schema_problem(&schema, "").as_deref(),
                expected,
                "{schema}"
            );
        }
    }
}
