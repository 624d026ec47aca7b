//! Agents through the real binary (DESIGN.md sections 3, 4, 6; issue "Agents"): the exact argv
//! and stdin a fake `claude` and a fake `codex` on PATH receive, no orphan after a timeout, the
//! result grace, retries, the failures that need the person, and stage records that `jq` reads.
//!
//! Fakes are small shell scripts in a temporary `bin` folder placed first on PATH. The ones
//! that only need to answer print a canned stream; the ones that must misbehave hand over to
//! the built-in scripted agent (`kern scripted-agent`), setting `KERN_STAGE` from the `--tools=`
//! flag, because a `claude` or `codex` agent gets no `KERN_*` variables.

use crate::support;
use crate::support::fakes::{CLAUDE_TOOLS, logging_fake, scripted_claude};
use crate::support::project;
use crate::support::tools;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kern::testing::prompt::Templates;
use kern::testing::stage::Stage;
use project::Project;
use serde_json::{Value, json};

/// PATH with `bin` first.
fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The structured output each stage of the logging fakes returns.
fn stage_result(stage: &str) -> Value {
    match stage {
        "research" => json!({"notes": ["out.txt is new"]}),
        "implement" => json!({"status": "SUCCESS", "summary": "wrote out.txt"}),
        _ => json!({"verdict": "COMMIT", "subject": "Add out.txt"}),
    }
}

/// The heading line of a built-in template: text only the template has.
fn template_heading(stage: Stage) -> &'static str {
    Templates::builtin(stage)
        .lines()
        .find(|l| l.starts_with("# "))
        .unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

fn run_log(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.state_dir().join("run.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `prompt_bytes` kern logged at the start of `stage`, in order.
fn logged_prompt_bytes(p: &Project, stage: &str) -> Vec<u64> {
    run_log(p)
        .iter()
        .filter(|e| e["event"] == "stage_start" && e["stage"] == stage)
        .map(|e| e["prompt_bytes"].as_u64().unwrap())
        .collect()
}

/// Checks what a fake received for `stage`: the argv exactly, the prompt on stdin (the
/// template's text and the task title, as many bytes as kern logged) and not in argv.
fn assert_received(p: &Project, log: &Path, stage: Stage, expected: &[String]) {
    let name = stage.name();
    let argv = lines(&log.join(format!("{name}.argv")));
    assert_eq!(argv, expected, "{name} argv");
    let stdin = std::fs::read_to_string(log.join(format!("{name}.stdin"))).unwrap();
    assert!(
        stdin.contains(template_heading(stage)),
        "{name} stdin lacks its template: {stdin}"
    );
    assert!(
        stdin.contains("Write the out file"),
        "{name} stdin lacks the task: {stdin}"
    );
    assert_eq!(
        logged_prompt_bytes(p, name),
        [stdin.len() as u64],
        "{name}: stdin is the whole prompt kern sent"
    );
    for arg in &argv {
        assert!(
            !arg.contains("Write the out file") && !arg.contains(template_heading(stage)),
            "the prompt leaked into argv: {arg}"
        );
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(std::string::ToString::to_string).collect()
}

#[test]
fn fake_claude_on_path_receives_the_exact_argv_and_the_prompt_on_stdin() {
    let p = Project::new("- [ ] Write the out file\n");
    let (bin, log) = logging_fake(&p, "claude", true);
    for (_, stage) in CLAUDE_TOOLS {
        let result = json!({"type": "result", "subtype": "success", "is_error": false,
            "result": "done", "session_id": "s-1", "total_cost_usd": 0.02, "num_turns": 2,
            "structured_output": stage_result(stage)});
        let init = json!({"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5"});
        std::fs::write(
            log.join(format!("{stage}.out")),
            format!("{init}\n{result}\n"),
        )
        .unwrap();
    }
    p.run(&["1", "0", "--agent", "claude"])
        .env("PATH", path_with(&bin))
        .expect(0);
    assert_eq!(p.log()[0], "Add out.txt");
    assert!(p.head_files().contains(&"out.txt".to_string()));

    let common = |model: &str| {
        strings(&[
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            model,
            "--no-session-persistence",
            "--permission-mode",
            "dontAsk",
        ])
    };
    let schema = |stage: Stage| format!("--json-schema={}", stage.schema());
    let mut research = common("sonnet");
    research.extend(strings(&[
        "--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch",
        "--allowedTools=WebSearch,WebFetch",
    ]));
    research.push(schema(Stage::Research));
    let mut implement = common("opus");
    // kern's own files, absolute (and through the real path when a symlink makes it differ).
    let mut own = Vec::new();
    for name in ["SPEC.md", "LEARNINGS.md"] {
        own.push(format!("Edit(/{})", p.path().join(name).display()));
        let real = p.path().canonicalize().unwrap().join(name);
        if real != p.path().join(name) {
            own.push(format!("Edit(/{})", real.display()));
        }
    }
    implement.extend(strings(&[
        "--tools=default",
        "--allowedTools=Bash,Edit,Write,NotebookEdit,Read,Grep,Glob",
    ]));
    implement.push(format!(
        "--disallowedTools=Bash(git commit *),Bash(git * commit *),Bash(git push *),Bash(git push),Bash(git * push *),Bash(git * push),{}",
        own.join(",")
    ));
    implement.push(schema(Stage::Implement));
    let mut commit = common("sonnet");
    commit.push("--tools=Read,Grep,Glob,Bash".to_string());
    commit.push(schema(Stage::Review));
    assert_received(&p, &log, Stage::Research, &research);
    assert_received(&p, &log, Stage::Implement, &implement);
    assert_received(&p, &log, Stage::Review, &commit);
}

#[test]
fn fake_codex_on_path_receives_the_exact_argv_and_the_prompt_on_stdin() {
    let p = Project::new("- [ ] Write the out file\n");
    let (bin, log) = logging_fake(&p, "codex", false);
    for stage in ["research", "implement", "commit"] {
        let events = [
            json!({"type": "thread.started", "thread_id": "t-1"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                "text": stage_result(stage).to_string()}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 20}}),
        ];
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(log.join(format!("{stage}.out")), text).unwrap();
    }
    p.run(&["1", "0", "--agent", "codex"])
        .env("PATH", path_with(&bin))
        .expect(0);
    assert_eq!(p.log()[0], "Add out.txt");

    let repo = git2::Repository::open(p.path()).unwrap();
    let top = repo.workdir().unwrap().to_string_lossy();
    let top = top.trim_end_matches('/').to_string();
    let argv = |stage: Stage, sandbox: &str| {
        vec![
            "exec".to_string(),
            "--json".into(),
            "--ephemeral".into(),
            "-C".into(),
            top.clone(),
            "--sandbox".into(),
            sandbox.into(),
            "--output-schema".into(),
            p.state_dir()
                .join(format!("stage{}.schema.json", stage.number()))
                .display()
                .to_string(),
            "-".into(),
        ]
    };
    assert_received(
        &p,
        &log,
        Stage::Research,
        &argv(Stage::Research, "read-only"),
    );
    assert_received(
        &p,
        &log,
        Stage::Implement,
        &argv(Stage::Implement, "workspace-write"),
    );
    assert_received(&p, &log, Stage::Review, &argv(Stage::Review, "read-only"));
}

/// Runs one task whose implement stage starts a grandchild `sh` carrying a marker in its
/// command line (its pid, written from inside kern's fence, is its PID namespace's) that
/// writes a file outside the repository and waits, and then goes quiet; returns kern's output
/// and the marker.
fn grandchild_then_silence(args: &[&str]) -> (Project, project::Ran, String) {
    let p = Project::new("- [ ] Hang around\n");
    let started = p.outside.path().join("grandchild.started");
    let marker = support::marker();
    p.scenario(&json!({"default": {"implement": {
        "shell": [format!(
            "sh -c 'touch {}; sleep 300' {marker} >/dev/null 2>&1 &",
            started.display()
        ), format!("while [ ! -f '{}' ]; do sleep 0.01; done", started.display())],
        "error": "silence"
    }}}));
    let out = p
        .run(&["1", "0", "--retries", "0"])
        .args(args)
        .timeout(Duration::from_secs(120))
        .expect(4);
    assert!(started.exists(), "the grandchild never started");
    (p, out, marker)
}

fn assert_grandchild_dead_and_attempt_noted(
    p: &Project,
    out: &project::Ran,
    marker: &str,
    note: &str,
) {
    let err = &out.stderr;
    let dead = support::wait_gone(marker);
    for pid in support::holding(marker) {
        support::kill(pid);
    }
    assert!(dead, "the grandchild {marker} outlived the stage: {err}");
    assert_eq!(out.code, Some(4), "the last task failed: {err}");
    let spec = p.read("SPEC.md");
    assert!(spec.contains(&format!("> **Attempt 1:** {note}")), "{spec}");
}

#[test]
fn a_grandchild_of_the_agent_is_dead_after_a_stage_timeout() {
    let (p, out, marker) = grandchild_then_silence(&["--stage-timeout", "2s"]);
    assert_grandchild_dead_and_attempt_noted(&p, &out, &marker, "agent timed out after 2s");
}

#[test]
fn a_grandchild_of_the_agent_is_dead_after_an_idle_timeout() {
    let (p, out, marker) = grandchild_then_silence(&["--idle-timeout", "1s"]);
    assert_grandchild_dead_and_attempt_noted(&p, &out, &marker, "agent printed nothing for 1s");
}

#[test]
fn an_agent_that_hangs_after_its_result_is_stopped_and_the_stage_counts() {
    let p = Project::new("- [ ] Linger\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"linger.txt": "here\n"}, "error": "hang_after_result",
                      "result": {"status": "SUCCESS", "summary": "wrote linger.txt"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add linger.txt"}}
    }}));
    p.run(&["1", "0", "--result-grace", "1s"])
        .timeout(Duration::from_secs(120))
        .expect(0);
    assert_eq!(p.log()[0], "Add linger.txt");
    assert!(p.head_files().contains(&"linger.txt".to_string()));
    let end = run_log(&p)
        .into_iter()
        .find(|e| e["event"] == "stage_end" && e["stage"] == "implement")
        .unwrap();
    assert_eq!(end["outcome"], "succeeded", "{end}");
    assert_eq!(end["retries"], 0, "{end}");
}

#[test]
fn a_transient_failure_is_retried_and_then_succeeds() {
    let p = Project::new("- [ ] Flaky\n");
    p.scenario(&json!({"default": {
        "implement": [
            {"error": "overloaded"},
            {"write": {"flaky.txt": "ok\n"}, "result": {"status": "SUCCESS", "summary": "wrote flaky.txt"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add flaky.txt"}}
    }}));
    let out = p
        .run(&["1", "0", "--retry-delay", "1s"])
        .timeout(Duration::from_secs(120))
        .expect(0);
    let err = &out.stderr;
    assert_eq!(p.log()[0], "Add flaky.txt");
    assert_eq!(p.prompts("implement").len(), 2, "one retry");
    let end = run_log(&p)
        .into_iter()
        .find(|e| e["event"] == "stage_end" && e["stage"] == "implement")
        .unwrap();
    assert_eq!(end["outcome"], "succeeded", "{end}");
    assert_eq!(end["retries"], 1, "{end}");
    assert!(err.contains("retry 1 of 3"), "the retry is shown: {err}");
    let spec = p.read("SPEC.md");
    assert!(!spec.contains("Attempt"), "a retry is no attempt: {spec}");
}

#[test]
fn auth_failure_of_claude_stops_at_once_with_exit_5_and_the_login_hint() {
    let p = Project::new("- [ ] T\n- [ ] U\n");
    let bin = scripted_claude(&p);
    p.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let out = p
        .run(&["3", "0", "--agent", "claude"])
        .env("PATH", path_with(&bin))
        .timeout(Duration::from_secs(60))
        .expect(5);
    let err = &out.stderr;
    assert!(
        err.contains(
            "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY"
        ),
        "{err}"
    );
    assert_eq!(
        p.prompts("research").len(),
        1,
        "no retry, no second task: the run stopped at once"
    );
    assert_eq!(
        p.read("SPEC.md"),
        "- [ ] T\n- [ ] U\n",
        "no attempt counted"
    );
}

#[test]
fn auth_failure_of_a_program_names_its_own_documentation() {
    let p = Project::new("- [ ] T\n");
    p.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let out = p
        .run(&["3", "0"])
        .timeout(Duration::from_secs(60))
        .expect(5);
    let err = &out.stderr;
    assert!(
        err.contains(
            "is not logged in: see the agent program's own documentation for how to log in"
        ),
        "{err}"
    );
    assert_eq!(p.prompts("research").len(), 1);
}

#[test]
fn an_auth_retry_event_stops_the_waiting_agent_with_exit_5() {
    let p = Project::new("- [ ] T\n");
    let bin = scripted_claude(&p);
    // The CLI would retry a 401 for minutes; the api_retry event alone must stop it. The
    // stage and idle limits are far away, so only that recognition can end this run.
    p.scenario(&json!({"default": {"research": {"error": "auth_retry"}}}));
    let out = p
        .run(&["3", "0", "--agent", "claude", "--idle-timeout", "10m"])
        .env("PATH", path_with(&bin))
        .timeout(Duration::from_secs(60))
        .expect(5);
    let err = &out.stderr;
    assert!(
        err.contains(
            "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY"
        ),
        "{err}"
    );
}

#[test]
fn a_missing_agent_binary_exits_5_with_the_install_hint() {
    for (agent, hint) in [
        (
            "claude",
            "`claude` not found on PATH — install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent",
        ),
        (
            "codex",
            "`codex` not found on PATH — install Codex (`npm install -g @openai/codex`) or choose another agent with --agent",
        ),
    ] {
        let p = Project::new("- [ ] T\n");
        let empty = p.outside.path().join("empty-bin");
        std::fs::create_dir_all(&empty).unwrap();
        let out = p
            .run(&[])
            .args(["1", "0", "--agent", agent])
            .env("PATH", &empty)
            .timeout(Duration::from_secs(60))
            .expect(5);
        let err = &out.stderr;
        assert!(err.contains(hint), "{agent}: {err}");
        assert_eq!(p.read("SPEC.md"), "- [ ] T\n", "{agent}: nothing counted");
    }
}

/// `jq <filter> <file>` with the system's jq, which must be installed.
fn jq(filter: &str, file: &Path) -> String {
    let out = Command::new("jq")
        .arg(filter)
        .arg(file)
        .output()
        .expect("jq is not installed — install jq (apt-get install jq)");
    assert!(
        out.status.success(),
        "jq {filter} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn every_record_of_an_interrupted_run_reads_with_jq() {
    if !tools::system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    let p = Project::new("- [ ] Pause here\n");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["look"]}, "text": "research said \"so\"\nand more"},
        "implement": {"sleep_ms": 60_000}
    }}));
    let mut child = p.run(&["1", "0"]).spawn_with(Stdio::null(), Stdio::null());
    let stream = p.state_dir().join("stage2.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&stream).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "implement never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));

    let research = p.state_dir().join("stage1.json");
    assert_eq!(
        jq(".result", &research),
        r#""research said \"so\"\nand more""#
    );
    assert_eq!(jq(".kern.outcome", &research), r#""succeeded""#);
    let implement = p.state_dir().join("stage2.json");
    assert_eq!(jq(".result | type", &implement), r#""string""#);
    assert_eq!(jq(".kern.outcome", &implement), r#""interrupted""#);
    assert_eq!(jq(".kern.stage", &implement), r#""implement""#);
    assert_eq!(jq(".kern.task.title", &implement), r#""Pause here""#);
}
