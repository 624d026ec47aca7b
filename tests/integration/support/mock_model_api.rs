//! A scripted mock of the model API on 127.0.0.1, for driving the real `claude` CLI offline.
//!
//! The real CLI, in its Vertex mode with auth skipped (see AGENT-CLIS.md, "Running the real CLI
//! offline against a mock model API"), posts Messages API requests to
//! `/v1/projects/p/locations/us-east5/publishers/anthropic/models/<model>:streamRawPredict`.
//! This server answers them from a [`Script`]: the first [`Rule`] whose `when` texts all occur
//! in the conversation's first user message (the prompt) picks the conversation, and the number of
//! assistant messages already in the request (how many tool round trips happened) picks the
//! [`Turn`]. A `tool_use` answer makes the real CLI run the real tool in its working folder and
//! call again with the `tool_result`, so a script drives the CLI through a whole stage.
//!
//! The one decision a reader must know: only requests that offer tools and match a rule consume
//! the script. Anything else the CLI sends (side requests without tools, token counts, HEAD or
//! GET probes, prompts no rule matches) is logged and answered with a harmless text, so that
//! incidental traffic can never shift a scenario's turns.
//!
//! The HTTP side is `support/http_server.rs`; dropping the [`MockModelApi`] stops and joins all
//! of its threads.
//!
//! This file also locates the installed CLI ([`claude_executable`]), because every test of
//! this tier needs both. It is shared by several test crates, each using a part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::http_server::{HttpRequest, HttpServer, http_response, lock};

/// The text of every answer that is not part of the script.
pub(crate) const SIDE_ANSWER: &str = "ok";

/// The Vertex project id [`MockModelApi::claude_env`] configures; it appears in every path.
pub(crate) const PROJECT_ID: &str = "p";
/// The Vertex region [`MockModelApi::claude_env`] configures; it appears in every path.
pub(crate) const REGION: &str = "us-east5";

/// What the mock answers: the first rule whose `when` matches a conversation wins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Script {
    /// The rules, in priority order.
    pub rules: Vec<Rule>,
}

/// One scripted conversation.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// A substring of the conversation's first user message (the prompt on stdin).
    pub when: String,
    /// Further substrings that must all occur in it too (e.g. a template's phrase and a task).
    pub also: Vec<String>,
    /// The answers in order: the request that carries N assistant messages gets the Nth answer
    /// turn; the last one repeats. [`Turn::HttpError`] entries stand in front of the answer turn
    /// that follows them (see there) and do not count as answer turns.
    pub turns: Vec<Turn>,
}

/// One answer of the scripted model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Turn {
    /// A `tool_use` block calling `name` with `input`; stop reason `tool_use`.
    ToolUse {
        /// The tool's name as the CLI offers it (`Write`, `Bash`, `Read`, …).
        name: String,
        /// The tool's input object.
        input: Value,
    },
    /// A text block; stop reason `end_turn`.
    Text(String),
    /// A call of the `StructuredOutput` tool that `--json-schema` adds, with this object.
    StructuredOutput(Value),
    /// An HTTP error answer with body
    /// `{"type":"error","error":{"type":<error_type>,"message":<message>}}`, given `times`
    /// times (counted over the mock's whole life, across CLI invocations and the CLI's own
    /// retries); after that the request falls through to the next answer turn.
    HttpError {
        /// The HTTP status (401, 429, 500, 529, …).
        status: u16,
        /// The error type (`overloaded_error`, `authentication_error`, `rate_limit_error`, …).
        error_type: String,
        /// The error message.
        message: String,
        /// How many times to answer with this error; `u32::MAX` for always.
        times: u32,
    },
    /// A subscription usage limit, as the API refuses a request past it: HTTP 429
    /// `rate_limit_error` with the `anthropic-ratelimit-unified-*` headers saying `rejected`
    /// and the reset `resets_in_secs` from the answer. The real CLI, logged in with a
    /// subscription ([`MockModelApi::claude_subscription_env`]), turns it into a rejected
    /// `rate_limit_event` and "You've hit your 5-hour limit · resets …". Given `times` times,
    /// like [`Turn::HttpError`], and stands in front of the answer turn that follows it.
    UsageLimit {
        /// Seconds from the answer to the reset.
        resets_in_secs: i64,
        /// How many times; `u32::MAX` for always.
        times: u32,
    },
}

/// `fields` completed to a whole report of `stage`: every property of the stage's (strict)
/// schema that `fields` leaves out is `null`, as a model answering that schema sends it.
pub(crate) fn strict_report(stage: kern::testing::stage::Stage, fields: Value) -> Value {
    let schema: Value = serde_json::from_str(stage.schema()).expect("the stage schema is JSON");
    let mut report = fields;
    if let (Some(object), Some(properties)) =
        (report.as_object_mut(), schema["properties"].as_object())
    {
        for name in properties.keys() {
            object.entry(name.clone()).or_insert(Value::Null);
        }
    }
    report
}

impl Turn {
    /// The `StructuredOutput` call of a whole `stage` report (see [`strict_report`]).
    pub(crate) fn report(stage: kern::testing::stage::Stage, fields: Value) -> Turn {
        Turn::StructuredOutput(strict_report(stage, fields))
    }

    /// A tool call; shorthand for [`Turn::ToolUse`].
    pub(crate) fn tool(name: &str, input: Value) -> Turn {
        Turn::ToolUse {
            name: name.to_string(),
            input,
        }
    }

    /// An HTTP error given `times` times; shorthand for [`Turn::HttpError`].
    pub(crate) fn http_error(status: u16, error_type: &str, message: &str, times: u32) -> Turn {
        Turn::HttpError {
            status,
            error_type: error_type.to_string(),
            message: message.to_string(),
            times,
        }
    }
}

impl Rule {
    /// A rule for prompts containing `when`.
    pub(crate) fn new(when: &str, turns: Vec<Turn>) -> Rule {
        Rule::all(&[when], turns)
    }

    /// A rule for prompts containing every one of `phrases` (none: every prompt).
    pub(crate) fn all(phrases: &[&str], turns: Vec<Turn>) -> Rule {
        Rule {
            when: phrases.first().copied().unwrap_or_default().to_string(),
            also: phrases
                .iter()
                .skip(1)
                .map(std::string::ToString::to_string)
                .collect(),
            turns,
        }
    }

    /// True when the prompt `text` holds every phrase of this rule.
    pub(crate) fn matches(&self, text: &str) -> bool {
        text.contains(&self.when) && self.also.iter().all(|p| text.contains(p.as_str()))
    }
}

/// How the mock answered one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Turn `turn` of rule `rule` (indices into the script).
    Scripted {
        /// Index of the rule in [`Script::rules`].
        rule: usize,
        /// Index of the turn in [`Rule::turns`].
        turn: usize,
    },
    /// The HTTP error of turn `turn` of rule `rule`.
    Error {
        /// Index of the rule in [`Script::rules`].
        rule: usize,
        /// Index of the turn in [`Rule::turns`].
        turn: usize,
        /// The HTTP status sent.
        status: u16,
    },
    /// Not part of the script: answered with [`SIDE_ANSWER`] (or a token count, or an empty
    /// object for GET and HEAD).
    Side,
}

/// One request as the mock saw it, for assertions.
#[derive(Debug, Clone)]
pub(crate) struct RecordedRequest {
    /// `POST`, `GET`, `HEAD`, …
    pub method: String,
    /// The request path, query included.
    pub path: String,
    /// The model: from the path (`…/models/<model>:streamRawPredict`), else the body's `model`.
    pub model: String,
    /// Whether the body asked for a server-sent-event stream.
    pub stream: bool,
    /// The text of the first user message (all its text blocks, concatenated).
    pub first_user_text: String,
    /// The text of the last user message: its text blocks and tool results, concatenated.
    pub last_user_text: String,
    /// The names of the tools the request offered, in order.
    pub tool_names: Vec<String>,
    /// How many assistant messages the conversation held (tool round trips so far).
    pub assistant_turns: usize,
    /// The whole body (`Value::Null` when it was empty or not JSON).
    pub body: Value,
    /// What the mock answered.
    pub answer: Answer,
}

/// The `anthropic-ratelimit-unified-*` headers of a subscription's five-hour window at
/// `utilization` (0 to 1) resetting at `resets_at` (epoch seconds): `rejected` from 1,
/// `allowed_warning` from 0.9, else `allowed`.
fn usage_headers(utilization: f64, resets_at: i64) -> Vec<(String, String)> {
    let status = if utilization >= 1.0 {
        "rejected"
    } else if utilization >= 0.9 {
        "allowed_warning"
    } else {
        "allowed"
    };
    [
        ("anthropic-ratelimit-unified-status", status.to_string()),
        ("anthropic-ratelimit-unified-reset", resets_at.to_string()),
        (
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour".to_string(),
        ),
        ("anthropic-ratelimit-unified-5h-status", status.to_string()),
        (
            "anthropic-ratelimit-unified-5h-reset",
            resets_at.to_string(),
        ),
        (
            "anthropic-ratelimit-unified-5h-utilization",
            utilization.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The mock server; it runs until dropped.
pub(crate) struct MockModelApi {
    shared: Arc<Shared>,
    server: HttpServer,
}

/// State shared by the connection threads and the owner.
struct Shared {
    script: Script,
    /// How many times each (rule, turn) HTTP error has been given.
    errors_given: Mutex<HashMap<(usize, usize), u32>>,
    requests: Mutex<Vec<RecordedRequest>>,
    next_id: AtomicU64,
    /// The subscription usage every model answer reports (see [`MockModelApi::report_usage`]).
    usage: Mutex<Option<f64>>,
}

impl MockModelApi {
    /// Starts the server on `127.0.0.1` with an ephemeral port, in a background thread.
    ///
    /// Panics when the loopback address cannot be bound: a test helper has no better answer.
    pub(crate) fn start(script: Script) -> MockModelApi {
        let shared = Arc::new(Shared {
            script,
            errors_given: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            usage: Mutex::new(None),
        });
        let handler_shared = Arc::clone(&shared);
        let server = HttpServer::start(Box::new(move |request: &HttpRequest| {
            respond(&handler_shared, request)
        }));
        MockModelApi { shared, server }
    }

    /// The base URL the CLI must use: `http://127.0.0.1:PORT/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.address())
    }

    /// The environment that points the real CLI at this mock with no credential: Vertex mode
    /// with auth skipped, no non-essential traffic, no auto-update, and `home` as `HOME` with
    /// `CLAUDE_CONFIG_DIR` = `<home>/.claude`, so that neither the person's settings nor their
    /// sessions are read or touched. Credential variables that would otherwise be inherited
    /// are set empty (the CLI treats empty as unset); [`CLAUDE_ENV_REMOVE`] names them for
    /// callers that can remove variables instead. Retries are left at the CLI's default; add
    /// `CLAUDE_CODE_MAX_RETRIES` for error scenarios.
    pub(crate) fn claude_env(&self, home: &Path) -> Vec<(String, String)> {
        let home = home.display().to_string();
        let mut env: Vec<(String, String)> = [
            ("CLAUDE_CODE_USE_VERTEX", "1"),
            ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
            ("ANTHROPIC_VERTEX_BASE_URL", self.base_url().as_str()),
            ("ANTHROPIC_VERTEX_PROJECT_ID", PROJECT_ID),
            ("CLOUD_ML_REGION", REGION),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("HOME", home.as_str()),
            // Set, never emptied: an empty CLAUDE_CONFIG_DIR makes the CLI write `backups/`,
            // `projects/` and `sessions/` into its working folder (seen on 2.1.197).
            ("CLAUDE_CONFIG_DIR", &format!("{home}/.claude")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        env.extend(
            CLAUDE_ENV_REMOVE
                .iter()
                .map(|name| (name.to_string(), String::new())),
        );
        env
    }

    /// From now on every model answer carries the `anthropic-ratelimit-unified-*` headers of
    /// a five-hour window at `utilization` (0 to 1), resetting in three hours; `None` stops
    /// them. The real CLI logged in with a subscription reports them as a `rate_limit_event`
    /// with that `utilization`.
    pub(crate) fn report_usage(&self, utilization: Option<f64>) {
        *lock(&self.shared.usage) = utilization;
    }

    /// The environment that points the real CLI at this mock as a subscription login: the
    /// first-party API at this address (`ANTHROPIC_BASE_URL`, requests to `/v1/messages`)
    /// with a made-up OAuth token (`CLAUDE_CODE_OAUTH_TOKEN`), which the CLI sends and the
    /// mock ignores. Only a subscription login makes the CLI read the usage-limit headers
    /// ([`Turn::UsageLimit`], [`MockModelApi::report_usage`]) and print `rate_limit_event`s
    /// (seen on 2.1.330: Vertex mode ignores them). Otherwise as [`MockModelApi::claude_env`].
    pub(crate) fn claude_subscription_env(&self, home: &Path) -> Vec<(String, String)> {
        let home = home.display().to_string();
        let mut env: Vec<(String, String)> = CLAUDE_ENV_REMOVE
            .iter()
            .map(|name| (name.to_string(), String::new()))
            .collect();
        env.extend(
            [
                ("CLAUDE_CODE_USE_VERTEX", ""),
                (
                    "ANTHROPIC_BASE_URL",
                    &format!("http://{}", self.server.address()),
                ),
                (
                    "CLAUDE_CODE_OAUTH_TOKEN",
                    "sk-ant-oat01-kern-test-not-a-token",
                ),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("HOME", home.as_str()),
                ("CLAUDE_CONFIG_DIR", &format!("{home}/.claude")),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        env
    }

    /// Every request so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests that consumed the script (answer turns and scripted errors).
    pub(crate) fn scripted_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.answer != Answer::Side)
            .collect()
    }
}

/// Variables that must not reach the CLI from the test's own environment: credentials and
/// settings that would send it elsewhere than the mock or change its model.
pub(crate) const CLAUDE_ENV_REMOVE: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_MAX_RETRIES",
];

/// Where the pinned CLI is, or why it cannot be had: `KERN_CLAUDE_BIN` when set, else what
/// `.ci/install-claude` prints on its last stdout line. The script owns the pinned version and
/// the cache folder: it reuses a cached CLI of the right version without touching the network
/// and installs it with npm otherwise, serialised by a file lock across processes. The answer
/// is computed once per process, so parallel tests in one binary run the script once.
pub(crate) fn claude_executable() -> Result<PathBuf, String> {
    static ANSWER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ANSWER.get_or_init(locate_or_install).clone()
}

fn locate_or_install() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("KERN_CLAUDE_BIN").filter(|v| !v.is_empty()) {
        // An explicit setting is never second-guessed by an install: a wrong path is reported.
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!(
                "KERN_CLAUDE_BIN=`{}` does not exist — unset it to let the tests install the \
                 CLI, or export KERN_CLAUDE_BIN=$(.ci/install-claude | tail -1)",
                bin.display()
            ))
        };
    }
    run_installer(&installer_script(), &[])
}

/// The installer script of this repository, `.ci/install-claude`.
pub(crate) fn installer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-claude")
}

/// Runs the installer `script` with `env` added to the environment and takes the executable's
/// path from its last stdout line; on failure the error holds the script's stderr.
pub(crate) fn run_installer(
    script: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<PathBuf, String> {
    run_installer_with(
        script,
        env,
        "set KERN_SKIP_REAL_CLAUDE=1 to skip the real-agent tests",
    )
}

/// [`run_installer`] for any installer: `skip` says how to skip the tests that need it.
pub(crate) fn run_installer_with(
    script: &Path,
    env: &[(&str, &std::ffi::OsStr)],
    skip: &str,
) -> Result<PathBuf, String> {
    let output = std::process::Command::new(script)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "`{}` failed ({}) — {skip}:\n{}",
            script.display(),
            output.status,
            stderr.trim_end()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(last) = stdout.lines().rev().find(|line| !line.trim().is_empty()) else {
        return Err(format!(
            "`{}` printed no path — {skip}:\n{}",
            script.display(),
            stderr.trim_end()
        ));
    };
    let bin = PathBuf::from(last.trim());
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "`{}` printed `{}`, which is not a file — {skip}",
            script.display(),
            bin.display()
        ))
    }
}

/// Decides, records and renders the answer to one request.
fn respond(shared: &Shared, request: &HttpRequest) -> Vec<u8> {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let model = model_of(&request.path, &body);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let messages: &[Value] = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let user_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "user").collect();
    let first_user_text = user_messages
        .first()
        .map(|m| message_text(m))
        .unwrap_or_default();
    let last_user_text = user_messages
        .last()
        .map(|m| message_text(m))
        .unwrap_or_default();
    let assistant_turns = messages.iter().filter(|m| m["role"] == "assistant").count();
    let tool_names: Vec<String> = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();

    let is_count = request.path.contains("count-tokens") || request.path.contains("count_tokens");
    let is_model_call = request.method == "POST" && !is_count && body.is_object();
    let rule = if is_model_call && !tool_names.is_empty() {
        shared
            .script
            .rules
            .iter()
            .position(|rule| rule.matches(&first_user_text))
    } else {
        None
    };
    let choice = rule.and_then(|rule| choose_turn(shared, rule, assistant_turns));
    let answer = match &choice {
        Some(Choice::Turn(rule, turn)) => Answer::Scripted {
            rule: *rule,
            turn: *turn,
        },
        Some(Choice::Error {
            rule, turn, status, ..
        }) => Answer::Error {
            rule: *rule,
            turn: *turn,
            status: *status,
        },
        None => Answer::Side,
    };

    let input_tokens = (request.body.len() / 4).max(1) as u64;
    let usage = *lock(&shared.usage);
    let response = match &choice {
        Some(Choice::Error {
            status,
            body,
            headers,
            ..
        }) => {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            http_response(*status, "application/json", &headers, body.as_bytes())
        }
        Some(Choice::Turn(rule, turn)) => {
            let turn = &shared.script.rules[*rule].turns[*turn];
            model_answer(shared, turn, &model, stream, input_tokens, usage)
        }
        None if is_count => http_response(
            200,
            "application/json",
            &[],
            json!({"input_tokens": input_tokens}).to_string().as_bytes(),
        ),
        None if is_model_call => model_answer(
            shared,
            &Turn::Text(SIDE_ANSWER.to_string()),
            &model,
            stream,
            input_tokens,
            usage,
        ),
        None if request.method == "HEAD" => http_response(200, "application/json", &[], b""),
        None => http_response(200, "application/json", &[], b"{}"),
    };

    lock(&shared.requests).push(RecordedRequest {
        method: request.method.clone(),
        path: request.path.clone(),
        model,
        stream,
        first_user_text,
        last_user_text,
        tool_names,
        assistant_turns,
        body,
        answer,
    });
    response
}

/// Which scripted answer a request gets.
enum Choice {
    /// Answer turn (rule, turn).
    Turn(usize, usize),
    /// The HTTP error of turn `turn` of rule `rule`: its status, headers and body.
    Error {
        rule: usize,
        turn: usize,
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

/// The answer for the request carrying `assistant_turns` assistant messages under `rule`:
/// HTTP errors in front of the answer turn take their `times` first; past the end, the last
/// answer turn repeats.
fn choose_turn(shared: &Shared, rule: usize, assistant_turns: usize) -> Option<Choice> {
    let turns = &shared.script.rules[rule].turns;
    let mut answer_index = 0usize;
    let mut last_answer = None;
    let mut errors_given = lock(&shared.errors_given);
    for (index, turn) in turns.iter().enumerate() {
        match turn {
            Turn::HttpError {
                status,
                error_type,
                message,
                times,
            } => {
                if answer_index == assistant_turns {
                    let given = errors_given.entry((rule, index)).or_insert(0);
                    if *given < *times {
                        *given += 1;
                        let body = json!({"type": "error", "error": {"type": error_type, "message": message}});
                        return Some(Choice::Error {
                            rule,
                            turn: index,
                            status: *status,
                            headers: Vec::new(),
                            body: body.to_string(),
                        });
                    }
                }
            }
            Turn::UsageLimit {
                resets_in_secs,
                times,
            } => {
                if answer_index == assistant_turns {
                    let given = errors_given.entry((rule, index)).or_insert(0);
                    if *given < *times {
                        *given += 1;
                        let body = json!({"type": "error", "error": {"type": "rate_limit_error",
                            "message": "This request would exceed your account's rate limit. Please try again later."}});
                        return Some(Choice::Error {
                            rule,
                            turn: index,
                            status: 429,
                            headers: usage_headers(1.0, epoch_now() + resets_in_secs),
                            body: body.to_string(),
                        });
                    }
                }
            }
            _ => {
                if answer_index == assistant_turns {
                    return Some(Choice::Turn(rule, index));
                }
                answer_index += 1;
                last_answer = Some(index);
            }
        }
    }
    last_answer.map(|index| Choice::Turn(rule, index))
}

/// The model: `…/models/<model>:<method>` in the path (Vertex), else the body's `model`.
fn model_of(path: &str, body: &Value) -> String {
    if let Some((_, rest)) = path.split_once("/models/") {
        let model = rest.split([':', '?', '/']).next().unwrap_or_default();
        if !model.is_empty() {
            return model.to_string();
        }
    }
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-sonnet-4-5")
        .to_string()
}

/// The text of a message: its string content, or its text blocks and tool results joined by
/// newlines.
fn message_text(message: &Value) -> String {
    fn block_text(block: &Value, out: &mut Vec<String>) {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    out.push(text.to_string());
                }
            }
            Some("tool_result") => match block.get("content") {
                Some(Value::String(text)) => out.push(text.clone()),
                Some(Value::Array(blocks)) => blocks.iter().for_each(|b| block_text(b, out)),
                _ => {}
            },
            _ => {}
        }
    }
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            let mut out = Vec::new();
            for b in blocks {
                block_text(b, &mut out);
            }
            out.join("\n")
        }
        _ => String::new(),
    }
}

/// A model answer: SSE when the request streams, else one JSON message.
fn model_answer(
    shared: &Shared,
    turn: &Turn,
    model: &str,
    stream: bool,
    input_tokens: u64,
    utilization: Option<f64>,
) -> Vec<u8> {
    let headers = utilization
        .map(|u| usage_headers(u, epoch_now() + 3 * 3600))
        .unwrap_or_default();
    let mut extra: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let message_id = format!("msg_mock{id:06}");
    let (block, stop_reason, payload_len) = match turn {
        Turn::ToolUse { name, input } => tool_block(id, name, input),
        Turn::StructuredOutput(input) => tool_block(id, "StructuredOutput", input),
        Turn::Text(text) => (
            json!({"type": "text", "text": text}),
            "end_turn",
            text.len(),
        ),
        Turn::HttpError { .. } | Turn::UsageLimit { .. } => {
            (json!({"type": "text", "text": SIDE_ANSWER}), "end_turn", 2)
        }
    };
    let output_tokens = (payload_len / 4).max(1) as u64 + 10;
    if !stream {
        let message = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
            "usage": usage(input_tokens, output_tokens),
        });
        return http_response(
            200,
            "application/json",
            &extra,
            message.to_string().as_bytes(),
        );
    }
    let mut events = String::new();
    let mut event = |name: &str, data: Value| {
        events.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage(input_tokens, 1),
        }}),
    );
    match &block["type"] {
        Value::String(kind) if kind == "tool_use" => {
            let start =
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}});
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": start}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            );
        }
        _ => {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": block["text"]}}),
            );
        }
    }
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    extra.push(("cache-control", "no-cache"));
    http_response(200, "text/event-stream", &extra, events.as_bytes())
}

fn tool_block(id: u64, name: &str, input: &Value) -> (Value, &'static str, usize) {
    let block = json!({"type": "tool_use", "id": format!("toolu_mock{id:06}"), "name": name, "input": input});
    (block, "tool_use", input.to_string().len())
}

fn usage(input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;

    fn shared(script: Script) -> Shared {
        Shared {
            script,
            errors_given: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            usage: Mutex::new(None),
        }
    }

    fn describe(choice: Option<Choice>) -> String {
        match choice {
            Some(Choice::Turn(rule, turn)) => format!("turn {rule}.{turn}"),
            Some(Choice::Error {
                rule, turn, status, ..
            }) => format!("error {rule}.{turn} {status}"),
            None => "none".to_string(),
        }
    }

    #[test]
    fn turns_follow_the_assistant_count_and_errors_stand_in_front() {
        let text = |t: &str| Turn::Text(t.to_string());
        let cases: Vec<(Vec<Turn>, Vec<usize>, Vec<&str>)> = vec![
            (
                vec![text("a"), text("b")],
                vec![0, 1, 2, 7, 0],
                vec!["turn 0.0", "turn 0.1", "turn 0.1", "turn 0.1", "turn 0.0"],
            ),
            (
                vec![
                    Turn::http_error(529, "overloaded_error", "o", 2),
                    text("a"),
                    text("b"),
                ],
                vec![0, 0, 0, 0, 1],
                vec![
                    "error 0.0 529",
                    "error 0.0 529",
                    "turn 0.1",
                    "turn 0.1",
                    "turn 0.2",
                ],
            ),
            (
                vec![
                    text("a"),
                    Turn::http_error(500, "api_error", "e", 1),
                    text("b"),
                ],
                vec![0, 1, 1, 0],
                vec!["turn 0.0", "error 0.1 500", "turn 0.2", "turn 0.0"],
            ),
            (
                vec![Turn::http_error(
                    401,
                    "authentication_error",
                    "no",
                    u32::MAX,
                )],
                vec![0, 0, 3],
                vec!["error 0.0 401", "error 0.0 401", "none"],
            ),
            (vec![], vec![0], vec!["none"]),
        ];
        for (turns, requests, expected) in cases {
            let state = shared(Script {
                rules: vec![Rule::new("", turns.clone())],
            });
            let got: Vec<String> = requests
                .iter()
                .map(|&n| describe(choose_turn(&state, 0, n)))
                .collect();
            assert_eq!(got, expected, "turns {turns:?}");
        }
    }

    #[test]
    fn a_rule_matches_only_when_every_phrase_occurs() {
        let cases = [
            (vec!["stage A", "task 1"], "stage A ... task 1", true),
            (vec!["stage A", "task 1"], "stage A ... task 2", false),
            (vec!["stage A", "task 1"], "stage B ... task 1", false),
            (vec!["task 1"], "task 1", true),
            (vec![], "anything", true),
        ];
        for (phrases, text, expected) in cases {
            let rule = Rule::all(&phrases, vec![]);
            assert_eq!(rule.matches(text), expected, "{phrases:?} in {text:?}");
        }
    }

    #[test]
    fn message_text_joins_text_blocks_and_tool_results() {
        let cases = [
            (json!({"role": "user", "content": "plain"}), "plain"),
            (
                json!({"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                    {"type": "text", "text": "the prompt"},
                ]}),
                "<system-reminder>x</system-reminder>\nthe prompt",
            ),
            (
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "out"},
                    {"type": "tool_result", "tool_use_id": "u", "content": [{"type": "text", "text": "more"}]},
                    {"type": "image", "source": {}},
                ]}),
                "out\nmore",
            ),
            (json!({"role": "user"}), ""),
        ];
        for (message, expected) in cases {
            assert_eq!(message_text(&message), expected, "{message}");
        }
    }

    #[test]
    fn model_comes_from_the_vertex_path_else_the_body() {
        let cases = [
            (
                "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
                json!({}),
                "claude-sonnet-4-5@20250929",
            ),
            (
                "/v1/messages",
                json!({"model": "claude-haiku-4-5"}),
                "claude-haiku-4-5",
            ),
            ("/v1/messages", json!({}), "claude-sonnet-4-5"),
        ];
        for (path, body, expected) in cases {
            assert_eq!(model_of(path, &body), expected, "{path}");
        }
    }

    /// Sends one request on `stream` and reads one content-length response: (status, body).
    fn exchange(stream: &mut TcpStream, method: &str, path: &str, body: &str) -> (u16, String) {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut status_line = String::new();
        reader.read_line(&mut status_line).expect("status line");
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            if line.trim().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().expect("length");
            }
        }
        let mut body = vec![0; if method == "HEAD" { 0 } else { length }];
        reader.read_exact(&mut body).expect("body");
        (status, String::from_utf8(body).expect("utf-8"))
    }

    fn event_data(sse: &str) -> Vec<Value> {
        sse.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).expect("event data is json"))
            .collect()
    }

    fn event_names(sse: &str) -> Vec<&str> {
        sse.lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect()
    }

    #[test]
    fn one_keep_alive_connection_serves_side_and_scripted_requests() {
        let mock = MockModelApi::start(Script {
            rules: vec![Rule::new(
                "PROMPT-1",
                vec![
                    Turn::tool("Bash", json!({"command": "ls"})),
                    Turn::http_error(529, "overloaded_error", "Overloaded", 1),
                    Turn::Text("done".to_string()),
                ],
            )],
        });
        let address = mock
            .base_url()
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_string();
        let mut stream = TcpStream::connect(address).expect("connect");
        let path =
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/m1:streamRawPredict";
        let user =
            |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}]});
        let assistant = json!({"role": "assistant", "content": [{"type": "text", "text": "x"}]});
        let tools = json!([{"name": "Bash"}, {"name": "StructuredOutput"}]);

        assert_eq!(exchange(&mut stream, "HEAD", "/", ""), (200, String::new()));
        let (status, count) = exchange(
            &mut stream,
            "POST",
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
            &json!({"messages": [user("PROMPT-1")]}).to_string(),
        );
        assert_eq!(status, 200);
        assert!(
            serde_json::from_str::<Value>(&count).expect("json")["input_tokens"]
                .as_u64()
                .is_some()
        );
        // No tools: a side request, even though the prompt matches.
        let (status, side) = exchange(
            &mut stream,
            "POST",
            path,
            &json!({"stream": false, "messages": [user("PROMPT-1")]}).to_string(),
        );
        assert_eq!(status, 200);
        assert_eq!(
            serde_json::from_str::<Value>(&side).expect("json")["content"][0]["text"],
            SIDE_ANSWER
        );
        let (status, first) = exchange(
            &mut stream,
            "POST",
            path,
            &json!({"stream": true, "tools": tools, "messages": [user("PROMPT-1")]}).to_string(),
        );
        assert_eq!(status, 200);
        assert_eq!(
            event_names(&first),
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let first_events = event_data(&first);
        assert_eq!(first_events[1]["content_block"]["name"], "Bash");
        assert_eq!(
            first_events[2]["delta"],
            json!({"type": "input_json_delta", "partial_json": r#"{"command":"ls"}"#})
        );
        assert_eq!(first_events[4]["delta"]["stop_reason"], "tool_use");
        let second_body = json!({"stream": true, "tools": tools, "messages": [user("PROMPT-1"), assistant, user("result")]}).to_string();
        let (status, error) = exchange(&mut stream, "POST", path, &second_body);
        assert_eq!(status, 529);
        assert_eq!(
            serde_json::from_str::<Value>(&error).expect("json"),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
        let (status, second) = exchange(&mut stream, "POST", path, &second_body);
        assert_eq!(status, 200);
        let second_events = event_data(&second);
        assert_eq!(
            second_events[2],
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "done"}})
        );
        assert_eq!(second_events[4]["delta"]["stop_reason"], "end_turn");
        // Another prompt: no rule, a side answer.
        let (_, other) = exchange(
            &mut stream,
            "POST",
            path,
            &json!({"stream": true, "tools": tools, "messages": [user("PROMPT-2")]}).to_string(),
        );
        assert!(other.contains(SIDE_ANSWER), "{other}");

        let answers: Vec<(String, Answer, usize, String)> = mock
            .requests()
            .into_iter()
            .map(|r| (r.method, r.answer, r.assistant_turns, r.last_user_text))
            .collect();
        let expected = vec![
            ("HEAD".to_string(), Answer::Side, 0, String::new()),
            ("POST".to_string(), Answer::Side, 0, "PROMPT-1".to_string()),
            ("POST".to_string(), Answer::Side, 0, "PROMPT-1".to_string()),
            (
                "POST".to_string(),
                Answer::Scripted { rule: 0, turn: 0 },
                0,
                "PROMPT-1".to_string(),
            ),
            (
                "POST".to_string(),
                Answer::Error {
                    rule: 0,
                    turn: 1,
                    status: 529,
                },
                1,
                "result".to_string(),
            ),
            (
                "POST".to_string(),
                Answer::Scripted { rule: 0, turn: 2 },
                1,
                "result".to_string(),
            ),
            ("POST".to_string(), Answer::Side, 0, "PROMPT-2".to_string()),
        ];
        assert_eq!(answers, expected);
        assert_eq!(mock.requests()[3].model, "m1");
        assert_eq!(mock.requests()[3].tool_names, ["Bash", "StructuredOutput"]);
        // Dropping the mock with the connection still open must return: the loops are bounded.
        drop(mock);
    }
}
