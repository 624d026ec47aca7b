//! What a scripted run does: its file actions and shell commands (shown as tool calls), its
//! sleeps, and its ending (a result, an error kind, a hang).

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::emit::{NOT_LOGGED_IN, OVERLOADED, RATE_LIMITED, Stream};
use super::scenario::{ErrorKind, Run};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// What the substitutions need.
pub(super) struct Context {
    pub(super) stage: Stage,
    pub(super) task: String,
    pub(super) slug: String,
    pub(super) cwd: PathBuf,
}

impl Context {
    pub(super) fn subst(&self, text: &str) -> String {
        text.replace("{task}", &self.task)
            .replace("{slug}", &self.slug)
    }

    pub(super) fn subst_value(&self, value: &Value) -> Value {
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

    pub(super) fn path(&self, text: &str) -> PathBuf {
        self.cwd.join(self.subst(text))
    }

    /// The result a run without `result` ends with; the tests step's names the files the run
    /// wrote or appended to (`written`) as the task's tests.
    pub(super) fn default_result(&self, written: &[String]) -> Value {
        match self.stage {
            Stage::Research => json!({"notes": [format!("read the code for {}", self.task)]}),
            Stage::Tests => json!({
                "status": "SUCCESS",
                "summary": format!("wrote the tests of {}", self.task),
                "tests": written.iter().map(|p| self.subst(p)).collect::<Vec<_>>(),
                "attempt_note": null
            }),
            Stage::Implement => {
                json!({"status": "SUCCESS", "summary": format!("did {}", self.task)})
            }
            Stage::Review => json!({"verdict": "COMMIT", "subject": self.task}),
        }
    }
}

/// Does what `run` says; returns the exit code (hangs never return).
pub(super) fn perform(run: &Run, context: &Context, prompt: &[u8]) -> Result<i32> {
    if let Some(ms) = run.sleep_before_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let structured = match &run.result {
        None => context.default_result(
            &run.write
                .keys()
                .chain(run.append.keys())
                .cloned()
                .collect::<Vec<_>>(),
        ),
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
    if let Some(usage) = &run.usage {
        let resets_at = crate::timestamp::window_now()
            + i64::try_from(usage.resets_in_secs.unwrap_or(3600)).unwrap_or(i64::MAX);
        let status = if usage.utilization >= 0.9 {
            "allowed_warning"
        } else {
            "allowed"
        };
        stream.event(json!({
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": status, "resetsAt": resets_at, "rateLimitType": usage.window,
                "utilization": usage.utilization, "isUsingOverage": false,
                "unifiedWindows": {usage.window.clone(): {
                    "utilization": usage.utilization, "resetsAt": resets_at, "status": status,
                }},
            },
        }))?;
    }

    let mut cost = run.cost_usd;
    if let Some(tokens) = run.tokens {
        stream.tokens = tokens.reported(prompt.len());
        cost = cost.or(Some(super::scenario::Tokens::cost(stream.tokens)));
    }
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
        Some(ErrorKind::MaxBudget) => {
            let message = run.text.as_deref().unwrap_or("Reached maximum budget");
            stream.max_budget(cost.unwrap_or(0.01), message)?;
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

pub(super) fn sleep_ms(ms: Option<u64>) {
    if let Some(ms) = ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

pub(super) fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The file actions, each shown as a tool call when there is a stream.
pub(super) fn act(
    run: &Run,
    context: &Context,
    prompt: &[u8],
    mut stream: Option<&mut Stream>,
) -> Result<()> {
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
