//! The built-in scripted agent (`kern scripted-agent`), run as the real binary: every `error`
//! kind prints what the real CLI prints, counts persist, placeholders are substituted.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use support::project::{KernRun, Ran};
use support::*;

const FIXTURES: &str = "/work/shared/fixtures/claude-2.1.197";

/// The fields every result event of the real CLI carries (the `error_*` subtypes have `errors`
/// instead of `result`; failures have no `structured_output`).
const RESULT_FIELDS: [&str; 12] = [
    "type",
    "subtype",
    "is_error",
    "duration_ms",
    "num_turns",
    "session_id",
    "total_cost_usd",
    "usage",
    "modelUsage",
    "permission_denials",
    "terminal_reason",
    "uuid",
];

struct Agent {
    dir: tempfile::TempDir,
}

impl Agent {
    fn new(scenario: Value) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("scenario.json"), scenario.to_string()).unwrap();
        Agent { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `kern scripted-agent` with this scenario, as kern starts an agent for `stage` of `task`.
    fn command(&self, stage: &str, task: &str) -> KernRun<'static> {
        let scenario = self.path().join("scenario.json");
        kern_in(self.path())
            .args(["scripted-agent", scenario.to_str().unwrap()])
            .env("KERN_STAGE", stage)
            .env("KERN_TASK", task)
            .env("KERN_TOOLS", "full")
            .env("KERN_SCHEMA", "/schemas/implement.json")
            .env("KERN_STATE_DIR", "/state")
    }

    /// Runs the agent with `prompt` on stdin, whatever its exit code (the tests check it).
    fn run(&self, stage: &str, task: &str, prompt: &str) -> Ran {
        self.command(stage, task).stdin(prompt).any_exit()
    }

    /// Starts an agent that will not exit, reads `count` lines, kills it, and returns the
    /// lines with what else it printed before dying.
    fn run_hanging(&self, stage: &str, count: usize) -> (Vec<Value>, String) {
        let mut child = self
            .command(stage, "Hang")
            .spawn_with(Stdio::piped(), Stdio::null());
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut events = Vec::new();
        for _ in 0..count {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            events.push(serde_json::from_str(&line).expect("a JSON line"));
        }
        assert!(child.try_wait().unwrap().is_none(), "it must still run");
        child.kill().unwrap();
        child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
        (events, rest)
    }
}

/// The events of a stream-json stdout; every line must be a JSON object that starts with its
/// `type` (and `subtype`, when it has one), as the real CLI prints them.
fn events(output: &Ran) -> Vec<Value> {
    output
        .utf8_stdout()
        .lines()
        .map(|line| {
            let event: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            let mut start = format!("{{\"type\":{}", event["type"]);
            if let Some(subtype) = event.get("subtype") {
                start.push_str(&format!(",\"subtype\":{subtype}"));
            }
            assert!(line.starts_with(&start), "{line}");
            event
        })
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["subtype"].as_str() {
            Some(sub) if e["type"] == "system" => format!("system/{sub}"),
            _ => e["type"].as_str().unwrap_or("?").to_string(),
        })
        .collect()
}

fn fixture(name: &str) -> Vec<Value> {
    std::fs::read_to_string(Path::new(FIXTURES).join(name))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn assert_result_shape(result: &Value) {
    for field in RESULT_FIELDS {
        assert!(
            result.get(field).is_some(),
            "result lacks `{field}`: {result}"
        );
    }
}

/// The scripted stream must match the recorded real one in event kinds and in the fields a
/// classifier reads.
fn assert_like_fixture(ours: &[Value], name: &str, fields: &[&str]) {
    let real = fixture(name);
    assert_eq!(kinds(ours), kinds(&real), "event kinds vs {name}");
    for (i, (a, b)) in ours.iter().zip(&real).enumerate() {
        for field in fields {
            if b.get(field).is_some() {
                assert_eq!(a[field], b[field], "event {i} field `{field}` vs {name}");
            }
        }
        if b["type"] == "assistant" {
            assert_eq!(a["error"], b["error"], "assistant error vs {name}");
            assert_eq!(
                a["message"]["content"][0]["text"], b["message"]["content"][0]["text"],
                "assistant text vs {name}"
            );
        }
    }
}

#[test]
fn each_stage_succeeds_by_default_with_a_real_shaped_result() {
    let agent = Agent::new(json!({}));
    let cases = [
        (
            "research",
            json!({"notes": ["read the code for Add a README"]}),
        ),
        (
            "implement",
            json!({"status": "SUCCESS", "summary": "did Add a README"}),
        ),
        (
            "commit",
            json!({"verdict": "COMMIT", "subject": "Add a README"}),
        ),
    ];
    for (stage, expected) in cases {
        let output = agent.run(stage, "Add a README", "prompt");
        assert_eq!(output.code, Some(0), "{stage}");
        let events = events(&output);
        assert_eq!(kinds(&events), vec!["system/init", "result"], "{stage}");
        let result = &events[1];
        assert_result_shape(result);
        assert_eq!(result["subtype"], "success");
        assert_eq!(result["is_error"], false);
        assert_eq!(result["structured_output"], expected);
        assert_eq!(result["result"], expected.to_string());
        assert_eq!(result["total_cost_usd"], 0.01);
        assert_eq!(result["session_id"], events[0]["session_id"]);
        let real_keys: Vec<String> = fixture("implement-success.jsonl")
            .last()
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        for key in ["structured_output", "api_error_status", "stop_reason"] {
            assert!(real_keys.contains(&key.to_string()));
            assert!(result.get(key).is_some(), "{key}");
        }
    }
}

#[test]
fn auth_imitates_not_logged_in() {
    let agent = Agent::new(json!({"default": {"research": {"error": "auth"}}}));
    let output = agent.run("research", "T", "");
    assert_eq!(output.code, Some(1));
    let events = events(&output);
    assert_like_fixture(
        &events,
        "not-logged-in.jsonl",
        &[
            "type",
            "subtype",
            "is_error",
            "api_error_status",
            "result",
            "terminal_reason",
            "total_cost_usd",
        ],
    );
    assert_result_shape(events.last().unwrap());
}

#[test]
fn overloaded_and_rate_limit_imitate_the_api_errors() {
    let fields = [
        "type",
        "subtype",
        "is_error",
        "api_error_status",
        "result",
        "error_status",
        "error",
        "terminal_reason",
    ];
    let cases = [
        ("overloaded", "api-529-overloaded.jsonl"),
        ("rate_limit", "api-429-rate-limit.jsonl"),
    ];
    for (kind, fixture_name) in cases {
        let agent = Agent::new(json!({"default": {"implement": {"error": kind}}}));
        let output = agent.run("implement", "T", "");
        assert_eq!(output.code, Some(1), "{kind}");
        let events = events(&output);
        assert_like_fixture(&events, fixture_name, &fields);
        assert_result_shape(events.last().unwrap());
    }
}

#[test]
fn usage_limit_reports_a_rejected_rate_limit_event_with_the_reset() {
    let agent = Agent::new(
        json!({"default": {"implement": {"error": "usage_limit", "resets_in_secs": 120}}}),
    );
    let now = chrono::Utc::now().timestamp();
    let output = agent.run("implement", "T", "");
    let after = chrono::Utc::now().timestamp();
    assert_eq!(output.code, Some(1));
    let events = events(&output);
    assert_eq!(
        kinds(&events),
        vec!["system/init", "rate_limit_event", "assistant", "result"]
    );
    let info = &events[1]["rate_limit_info"];
    assert_eq!(info["status"], "rejected");
    let resets = info["resetsAt"].as_i64().unwrap();
    assert!((now + 120..=after + 120).contains(&resets), "{resets}");
    let result = events.last().unwrap();
    assert_eq!(result["is_error"], true);
    let text = result["result"].as_str().unwrap();
    assert!(
        text.starts_with("You've hit your session limit · resets ") && text.ends_with(" (UTC)"),
        "{text}"
    );
}

#[test]
fn max_turns_ends_with_an_error_subtype_and_no_result_text() {
    let agent = Agent::new(json!({"default": {"implement": {"error": "max_turns"}}}));
    let output = agent.run("implement", "T", "");
    assert_eq!(output.code, Some(1));
    let result = events(&output).pop().unwrap();
    let real = fixture("implement-max-turns.jsonl").pop().unwrap();
    for field in ["type", "subtype", "is_error", "terminal_reason"] {
        assert_eq!(result[field], real[field], "{field}");
    }
    assert!(result.get("result").is_none());
    assert!(
        result["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("Reached maximum number of turns (")
    );
}

#[test]
fn no_result_exits_1_with_a_message_and_no_result_line() {
    let agent = Agent::new(json!({"default": {"implement": {"error": "no_result"}}}));
    let output = agent.run("implement", "T", "");
    assert_eq!(output.code, Some(1));
    assert_eq!(kinds(&events(&output)), vec!["system/init"]);
    assert_eq!(
        output.stderr,
        "Error: the scripted agent stopped without a result\n"
    );
}

#[test]
fn garbage_mixes_non_json_lines_into_a_stream_with_one_result() {
    let agent = Agent::new(json!({"default": {"implement": {"error": "garbage"}}}));
    let output = agent.run("implement", "T", "");
    assert_eq!(output.code, Some(0));
    let stdout = output.utf8_stdout();
    let parsed: Vec<Option<Value>> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).ok())
        .collect();
    let not_json = parsed.iter().filter(|v| v.is_none()).count();
    let results = parsed
        .iter()
        .flatten()
        .filter(|v| v["type"] == "result")
        .count();
    assert!(not_json >= 3, "{stdout}");
    assert_eq!(results, 1);
}

#[test]
fn huge_output_prints_at_least_the_asked_bytes_then_the_result() {
    let agent = Agent::new(
        json!({"default": {"implement": {"error": "huge_output", "huge_bytes": 3_000_000}}}),
    );
    let output = agent.run("implement", "T", "");
    assert_eq!(output.code, Some(0));
    let bytes = output.utf8_stdout().len();
    assert!(bytes >= 3_000_000, "{bytes}");
    let events = events(&output);
    assert_eq!(events.last().unwrap()["type"], "result");
    assert!(events.len() > 100);
}

#[test]
fn the_hanging_kinds_print_their_lines_then_hang() {
    let agent = Agent::new(json!({"default": {
        "research": {"error": "silence"},
        "implement": {"error": "auth_retry"},
        "commit": {"error": "hang_after_result"},
    }}));

    let (events, rest) = agent.run_hanging("research", 1);
    assert_eq!(kinds(&events), vec!["system/init"]);
    assert_eq!(rest, "");

    let (events, rest) = agent.run_hanging("implement", 2);
    assert_eq!(kinds(&events), vec!["system/init", "system/api_retry"]);
    assert_eq!(events[1]["error_status"], 401);
    assert_eq!(events[1]["error"], "authentication_failed");
    assert_eq!(rest, "");

    let (events, rest) = agent.run_hanging("commit", 2);
    assert_eq!(kinds(&events), vec!["system/init", "result"]);
    assert_eq!(events[1]["structured_output"]["verdict"], "COMMIT");
    assert_eq!(rest, "");
}

#[test]
fn spawn_grandchild_leaves_a_sleeping_grandchild_and_writes_its_pid() {
    let agent = Agent::new(
        json!({"default": {"implement": {"error": "spawn_grandchild", "pid_file": "{slug}.pid"}}}),
    );
    let mut child = agent
        .command("implement", "Grand Child")
        .spawn_with(Stdio::piped(), Stdio::null());
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        lines.push(event["type"].as_str().unwrap().to_string());
        if event["type"] == "result" {
            break;
        }
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let grandchild = read_pid(&agent.path().join("grand-child.pid"));
    assert!(!is_dead(grandchild), "the grandchild outlives the agent");
    kill(grandchild);
    assert!(wait_dead(grandchild));
    assert_eq!(lines, vec!["system", "assistant", "user", "result"]);
}

#[test]
fn invocation_counts_persist_and_the_last_run_repeats() {
    let agent = Agent::new(json!({
        "default": {"implement": [
            {"result": {"status": "FAILED", "summary": "first try", "attempt_note": "no"}},
            {"text": "second"},
        ]},
        "tasks": [{"match": "special", "implement": {"exit_code": 7}}],
    }));
    let statuses: Vec<(Option<i32>, Value, Value)> = (0..3)
        .map(|_| {
            let output = agent.run("implement", "Some task", "");
            let result = events(&output).pop().unwrap();
            (
                output.code,
                result["structured_output"]["status"].clone(),
                result["result"].clone(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            (
                Some(0),
                json!("FAILED"),
                json!(r#"{"attempt_note":"no","status":"FAILED","summary":"first try"}"#)
            ),
            (Some(0), json!("SUCCESS"), json!("second")),
            (Some(0), json!("SUCCESS"), json!("second")),
        ]
    );
    assert_eq!(agent.run("implement", "a special one", "").code, Some(7));
    let counts: Value = serde_json::from_str(
        &std::fs::read_to_string(agent.path().join("scenario.counts.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        counts,
        json!({"default/implement": 3, "tasks[0]/implement": 1})
    );
}

#[test]
fn placeholders_actions_and_the_call_log() {
    let agent = Agent::new(json!({"default": {
        "commit": {
            "write": {"out/{slug}.txt": "task={task}\n"},
            "append": {"log.txt": "appended {slug}\n"},
            "delete": ["old.txt"],
            "shell": ["echo shell {slug} > shell.txt", "exit 3"],
            "save_prompt": "prompt-{slug}.md",
            "result": {"verdict": "COMMIT", "subject": "feat: {task}"},
            "text": "committed {task}",
        },
    }}));
    std::fs::write(agent.path().join("old.txt"), "x").unwrap();
    std::fs::write(agent.path().join("log.txt"), "before\n").unwrap();
    let prompt = "the prompt\n<data>ünïcode</data>\n";
    let output = agent.run("commit", "Add a README", prompt);
    assert_eq!(output.code, Some(0));
    let read = |name: &str| std::fs::read_to_string(agent.path().join(name)).unwrap();
    assert_eq!(read("out/add-a-readme.txt"), "task=Add a README\n");
    assert_eq!(read("log.txt"), "before\nappended add-a-readme\n");
    assert_eq!(read("shell.txt"), "shell add-a-readme\n");
    assert_eq!(read("prompt-add-a-readme.md"), prompt);
    assert!(!agent.path().join("old.txt").exists());

    let events = events(&output);
    let tools: Vec<(String, Value)> = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .map(|e| {
            let block = &e["message"]["content"][0];
            (
                block["name"].as_str().unwrap().to_string(),
                block["input"].clone(),
            )
        })
        .collect();
    let names: Vec<&str> = tools.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec!["Write", "Edit", "Bash", "Bash", "Bash", "Write"]
    );
    assert_eq!(
        tools[0].1["file_path"],
        json!(agent.path().join("out/add-a-readme.txt"))
    );
    assert_eq!(tools[3].1["command"], "echo shell add-a-readme > shell.txt");
    let failed_shell = events
        .iter()
        .filter(|e| e["type"] == "user")
        .nth(4)
        .unwrap();
    assert_eq!(failed_shell["message"]["content"][0]["is_error"], true);
    let result = events.last().unwrap();
    assert_eq!(result["result"], "committed Add a README");
    assert_eq!(result["structured_output"]["subject"], "feat: Add a README");
    assert_eq!(result["num_turns"], 7);

    let calls = read("scenario.calls.jsonl");
    let call: Value = serde_json::from_str(calls.lines().next().unwrap()).unwrap();
    assert_eq!(call["prompt"], prompt);
    assert_eq!(call["stage"], "commit");
    assert_eq!(call["task"], "Add a README");
    assert_eq!(call["key"], "default/commit");
    assert_eq!(call["n"], 0);
    assert_eq!(call["tools"], "full");
    assert_eq!(call["schema"], "/schemas/implement.json");
    assert_eq!(call["state_dir"], "/state");
}

#[test]
fn plain_prints_only_the_text_and_a_null_result_has_no_structured_output() {
    let agent = Agent::new(json!({"default": {
        "implement": {"plain": true, "text": "all done\nSUCCESS"},
        "research": {"result": null, "text": "```json\n{\"notes\": []}\n```"},
    }}));
    let output = agent.run("implement", "T", "");
    assert_eq!(output.utf8_stdout(), "all done\nSUCCESS\n");
    let output = agent.run("research", "T", "");
    let result = events(&output).pop().unwrap();
    assert_eq!(result["structured_output"], Value::Null);
    assert_eq!(result["result"], "```json\n{\"notes\": []}\n```");
}

#[test]
fn a_bad_scenario_or_a_missing_stage_is_a_usage_error() {
    let agent = Agent::new(json!({"default": {"implement": {"eror": "auth"}}}));
    let output = agent.run("implement", "T", "");
    assert_eq!(output.code, Some(2));
    let stderr = output.stderr;
    assert!(
        stderr.contains("not a valid scenario") && stderr.contains("eror"),
        "{stderr}"
    );

    let agent = Agent::new(json!({}));
    let output = agent.run("deploy", "T", "");
    assert_eq!(output.code, Some(2));
    assert_eq!(
        output.stderr,
        "kern: error: KERN_STAGE is not research, implement or commit — the scripted agent runs under kern (--agent program:<path>)\n"
    );
}

#[test]
fn tokens_are_reported_with_the_prompts_share_and_priced_unless_a_cost_is_given() {
    let agent = Agent::new(json!({"default": {
        "implement": [
            {"tokens": {"input": 1000, "output": 200}},
            {"tokens": {"input": 1000, "output": 200}, "cost_usd": 0.5}
        ]
    }}));
    let prompt = "p".repeat(4001);
    let result = |output: &Ran| events(output).pop().unwrap();
    let first = result(&agent.run("implement", "Add it", &prompt));
    assert_eq!(
        first["usage"]["input_tokens"], 2001,
        "1000 + 4001 bytes / 4, rounded up"
    );
    assert_eq!(first["usage"]["output_tokens"], 200);
    assert_eq!(first["modelUsage"]["scripted"]["inputTokens"], 2001);
    // 2001 × $3 + 200 × $15 per million.
    assert_eq!(first["total_cost_usd"], 0.009003);
    let second = result(&agent.run("implement", "Add it", &prompt));
    assert_eq!(second["total_cost_usd"], 0.5);
    assert_eq!(second["usage"]["input_tokens"], 2001);
}
