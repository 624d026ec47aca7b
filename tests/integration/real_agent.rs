//! The real-agent tier through the `kern` binary: the real `kern` runs with `--agent claude`
//! (the default) and the real `claude` CLI (pinned by `.ci/install-claude`), which talks to the
//! scripted mock model API of `support/mock_model_api.rs` on 127.0.0.1 (issue 8, item 1).
//!
//! kern finds `claude` on PATH (a link to the installed CLI, first on PATH) and passes its own
//! environment through, so the mock's environment (`MockModelApi::claude_env`) is given to
//! kern. Each mock rule is keyed on a distinctive phrase of a stage's template ("You are the
//! research stage of kern", …) plus the task block as kern renders it (`<data source="SPEC.md
//! task">` and the task's first line, marker included), so a task title that appears elsewhere
//! in a prompt (a commit subject, a SPEC.md diff) cannot pick the wrong conversation.
//!
//! The one decision a reader must know: as in `real_claude.rs`, a CLI that cannot be installed
//! FAILS these tests unless `KERN_SKIP_REAL_CLAUDE=1`; a silently skipped tier proves nothing.
//! The runs are serialised (one kern with one 245 MB CLI at a time), and each is bounded: a
//! kern that outlives its timeout is stopped (SIGTERM, which stops its agent, then SIGKILL)
//! and the test fails with what it printed.

use crate::support::mock_model_api;
use crate::support::project;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kern::testing::stage::Stage;
use mock_model_api::{
    Answer, CLAUDE_ENV_REMOVE, MockModelApi, RecordedRequest, Rule, Script, Turn,
    claude_executable, strict_report,
};
use project::Project;
use serde_json::{Value, json};

/// The longest a whole kern run may take before it is stopped and the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The 401 run must end well before the CLI's own ten retries would (minutes).
const UNAUTHORIZED_TIMEOUT: Duration = Duration::from_secs(60);

/// Distinctive phrases of the three stage templates (prompts/*.md).
const RESEARCH: &str = "You are the research stage of kern";
const IMPLEMENT: &str = "You are the implement stage of kern";
const REVIEW: &str = "You are the review stage of kern";

/// What kern says when Claude Code is not logged in (retry::not_logged_in + claude::LOGIN_HINT).
const NOT_LOGGED_IN: &str =
    "claude is not logged in: run `claude` once to log in, or set ANTHROPIC_API_KEY";

/// One kern run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The CLI to run, or `None` when `KERN_SKIP_REAL_CLAUDE=1` asks to skip; panics with the fix
/// when it is missing.
fn claude_or_skip(test: &str) -> Option<PathBuf> {
    if std::env::var("KERN_SKIP_REAL_CLAUDE").is_ok_and(|v| v == "1") {
        eprintln!("skipping {test}: KERN_SKIP_REAL_CLAUDE=1");
        return None;
    }
    match claude_executable() {
        Ok(bin) => Some(bin),
        Err(message) => panic!("{message}"),
    }
}

/// The task block of a prompt as kern renders it: the data fence and the task's first line.
fn task(marker: char, title: &str) -> String {
    format!("<data source=\"SPEC.md task\">\n- [{marker}] {title}")
}

/// A scratch project, a throw-away HOME for the CLI, and a folder holding `claude` (a link to
/// the installed CLI) to put first on kern's PATH.
struct RealAgent {
    project: Project,
    home: tempfile::TempDir,
    bin: tempfile::TempDir,
}

impl RealAgent {
    fn new(claude: &Path, spec: &str) -> RealAgent {
        let project = Project::new(spec);
        let home = tempfile::tempdir().expect("temp home");
        let bin = tempfile::tempdir().expect("temp bin");
        std::os::unix::fs::symlink(claude, bin.path().join("claude")).expect("link claude");
        RealAgent { project, home, bin }
    }

    /// The repository's path, canonical: the CLI's file tools want absolute paths.
    fn root(&self) -> PathBuf {
        self.project.path().canonicalize().expect("canonical path")
    }

    /// A file of the repository as an absolute path string, for Write and Edit inputs.
    fn file(&self, name: &str) -> String {
        self.root().join(name).display().to_string()
    }

    /// `kern args` with the real claude first on PATH, pointed at `mock`, the developer's own
    /// Claude settings removed: a builder, to be given a `.timeout(…)` and run with `.expect(…)`.
    fn kern<'a>(&'a self, mock: &MockModelApi, args: &[&str]) -> project::KernRun<'a> {
        self.project
            .run(args)
            // kern's fence as a person gets it: the mock is an allowed loopback host.
            .default_fence()
            .env("KERN_AGENT", "claude")
            .path_first(self.bin.path())
            .env_remove(CLAUDE_ENV_REMOVE)
            .envs(mock.claude_env(self.home.path()))
    }

    /// The files named `stage*` left in the state folder.
    fn stage_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.project.state_dir())
            .expect("state folder")
            .filter_map(std::result::Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // Schemas are kept across iterations; every other stage file must go.
            .filter(|name| name.starts_with("stage") && !name.ends_with(".schema.json"))
            .collect();
        names.sort();
        names
    }

    /// A stage record (`stageN.json`), parsed.
    fn stage_record(&self, n: u8) -> Value {
        let path = self.project.state_dir().join(format!("stage{n}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("`{}`: {e}", path.display()));
        serde_json::from_str(&text).expect("stage record is JSON")
    }
}

/// The scripted requests the mock answered under rule `rule`.
fn under_rule(mock: &MockModelApi, rule: usize) -> Vec<RecordedRequest> {
    mock.scripted_requests()
        .into_iter()
        .filter(|r| match r.answer {
            Answer::Scripted { rule: n, .. } | Answer::Error { rule: n, .. } => n == rule,
            Answer::Side => false,
        })
        .collect()
}

/// The session a request belongs to: one per start of the CLI (Claude Code sends it in
/// `metadata.user_id`, a JSON text).
fn session_of(request: &RecordedRequest) -> String {
    let user_id = request.body["metadata"]["user_id"]
        .as_str()
        .unwrap_or_default();
    serde_json::from_str::<Value>(user_id).map_or_else(
        |_| user_id.to_string(),
        |v| v["session_id"].as_str().unwrap_or_default().to_string(),
    )
}

/// `permission_denials` of a stage record as (tool_name, tool_input) pairs.
fn denials(record: &Value) -> Vec<(String, Value)> {
    record["permission_denials"]
        .as_array()
        .expect("permission_denials is an array")
        .iter()
        .map(|d| {
            (
                d["tool_name"].as_str().unwrap_or_default().to_string(),
                d["tool_input"].clone(),
            )
        })
        .collect()
}

/// A research that reads README.md and returns `notes`.
fn research(title: &str, notes: &[&str]) -> Rule {
    Rule::all(
        &[RESEARCH, &task(' ', title)],
        vec![
            Turn::tool(
                "Bash",
                json!({"command": "cat README.md", "description": "read"}),
            ),
            Turn::report(Stage::Research, json!({ "notes": notes })),
        ],
    )
}

/// A review that looks at `git status` and answers COMMIT with `subject`.
fn review(title: &str, subject: &str) -> Rule {
    Rule::all(
        &[REVIEW, &task('~', title)],
        vec![
            Turn::tool(
                "Bash",
                json!({"command": "git status --short", "description": "status"}),
            ),
            Turn::report(
                Stage::Review,
                json!({"verdict": "COMMIT", "subject": subject}),
            ),
        ],
    )
}

#[test]
fn two_tasks_go_through_the_real_claude_to_two_commits() {
    let Some(claude) = claude_or_skip("two_tasks_go_through_the_real_claude_to_two_commits") else {
        return;
    };
    let _serial = serial();
    let (a, b) = ("Add a greeting file", "Add a farewell file");
    let env = RealAgent::new(&claude, &format!("# Plan\n\n- [ ] {a}\n- [ ] {b}\n"));
    let mock = MockModelApi::start(Script {
        rules: vec![
            research(
                a,
                &[
                    "README.md holds only a title",
                    "greeting.txt goes beside it",
                ],
            ),
            Rule::all(
                &[IMPLEMENT, &task('~', a)],
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": env.file("greeting.txt"), "content": "hello\n"}),
                    ),
                    Turn::tool(
                        "Bash",
                        json!({"command": "cat greeting.txt", "description": "check"}),
                    ),
                    Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote greeting.txt"}),
                    ),
                ],
            ),
            review(a, "Add greeting.txt"),
            research(b, &["farewell.txt goes beside greeting.txt"]),
            Rule::all(
                &[IMPLEMENT, &task('~', b)],
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": env.file("farewell.txt"), "content": "bye\n"}),
                    ),
                    Turn::tool(
                        "Edit",
                        json!({"file_path": env.file("farewell.txt"), "old_string": "bye",
                               "new_string": "goodbye", "replace_all": false}),
                    ),
                    Turn::tool(
                        "Bash",
                        json!({"command": "cat farewell.txt", "description": "check"}),
                    ),
                    Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote farewell.txt"}),
                    ),
                ],
            ),
            review(b, "Add farewell.txt"),
        ],
    });

    let run = env.kern(&mock, &["5", "0"]).timeout(RUN_TIMEOUT).expect(0);

    let p = &env.project;
    assert_eq!(
        p.log(),
        ["Add farewell.txt", "Add greeting.txt", "initial"],
        "{}",
        run.stderr
    );
    let files = p.head_files();
    for name in ["greeting.txt", "farewell.txt"] {
        assert!(
            files.iter().any(|f| f == name),
            "{name} not in HEAD: {files:?}"
        );
    }
    assert_eq!(p.read("greeting.txt"), "hello\n");
    assert_eq!(p.read("farewell.txt"), "goodbye\n");
    assert_eq!(
        p.dirty(),
        Vec::<String>::new(),
        "the commits hold everything"
    );
    assert_eq!(
        p.read("SPEC.md"),
        format!(
            "# Plan\n\n- [x] {a}\n  > **Research:**\n  >\n  > - README.md holds only a title\n  \
             > - greeting.txt goes beside it\n- [x] {b}\n  > **Research:**\n  >\n  > - \
             farewell.txt goes beside greeting.txt\n"
        )
    );
    assert_eq!(env.stage_files(), Vec::<String>::new());
    let commits = p.run_events("commit");
    let committed: Vec<&str> = commits.iter().filter_map(|e| e["task"].as_str()).collect();
    assert_eq!(committed, [a, b]);
    assert_eq!(p.run_events("violation"), Vec::<Value>::new());

    // Every scripted turn was asked for, in order, and the tools really ran: the Bash `cat`
    // results went back to the model.
    let turns = |rule| -> Vec<usize> {
        under_rule(&mock, rule)
            .iter()
            .map(|r| r.assistant_turns)
            .collect()
    };
    let expected: [(usize, Vec<usize>); 6] = [
        (0, vec![0, 1]),
        (1, vec![0, 1, 2]),
        (2, vec![0, 1]),
        (3, vec![0, 1]),
        (4, vec![0, 1, 2, 3]),
        (5, vec![0, 1]),
    ];
    for (rule, expected) in expected {
        assert_eq!(turns(rule), expected, "rule {rule}");
    }
    // The tool results came back (newer CLIs append a `<system-reminder>` block after them).
    let output = |rule: usize, turn: usize| under_rule(&mock, rule)[turn].last_user_text.clone();
    assert!(output(0, 1).starts_with("# scratch"), "{}", output(0, 1));
    assert!(output(1, 2).starts_with("hello"), "{}", output(1, 2));
    assert!(output(4, 3).starts_with("goodbye"), "{}", output(4, 3));
    // kern's tool policy reached the CLI: research offers no file-writing tool.
    let research_tools = &under_rule(&mock, 0)[0].tool_names;
    let implement_tools = &under_rule(&mock, 1)[0].tool_names;
    for tool in ["Write", "Edit"] {
        assert!(
            !research_tools.iter().any(|t| t == tool),
            "{research_tools:?}"
        );
        assert!(
            implement_tools.iter().any(|t| t == tool),
            "{implement_tools:?}"
        );
    }
}

#[test]
fn research_cannot_write_and_the_stage_record_lists_the_denied_sed() {
    let Some(claude) =
        claude_or_skip("research_cannot_write_and_the_stage_record_lists_the_denied_sed")
    else {
        return;
    };
    let _serial = serial();
    let title = "Look around";
    let env = RealAgent::new(&claude, &format!("- [ ] {title}\n"));
    let sed = json!({"command": "sed -i s/a/b/ README.md", "description": "edit"});
    let mock = MockModelApi::start(Script {
        rules: vec![
            Rule::all(
                &[RESEARCH, &task(' ', title)],
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": env.file("x.txt"), "content": "x\n"}),
                    ),
                    Turn::tool("Bash", sed.clone()),
                    Turn::report(
                        Stage::Research,
                        json!({"notes": ["README.md holds a title"]}),
                    ),
                ],
            ),
            // Implement is refused its key: kern stops there (exit 5) after the research stage
            // is applied, and keeps the stage files as resume state. (A tiny --max-cost no
            // longer stops the run between the stages: each Claude stage gets what is left of
            // it as its own --max-budget-usd, and the CLI stops inside research; see
            // max_cost_caps_the_real_claude_inside_its_stage.)
            Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![Turn::http_error(
                    401,
                    "authentication_error",
                    "invalid x-api-key",
                    u32::MAX,
                )],
            ),
        ],
    });

    let run = env.kern(&mock, &["5", "0"]).timeout(RUN_TIMEOUT).expect(5);

    let p = &env.project;
    assert!(run.stderr.contains(NOT_LOGGED_IN), "{}", run.stderr);
    assert_eq!(p.read("README.md"), "# scratch\n");
    assert!(!p.path().join("x.txt").exists());
    assert_eq!(p.dirty(), ["SPEC.md"], "only kern's own edit");
    assert_eq!(
        p.read("SPEC.md"),
        format!("- [~] {title}\n  > **Research:**\n  >\n  > - README.md holds a title\n")
    );
    assert_eq!(p.log(), ["initial"]);
    assert_eq!(p.run_events("violation"), Vec::<Value>::new());

    let record = env.stage_record(1);
    assert!(
        record["total_cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{record}"
    );
    assert_eq!(record["kern"]["outcome"], "succeeded", "{record}");
    assert_eq!(record["kern"]["violations"], json!([]), "{record}");
    assert_eq!(
        record["structured_output"],
        strict_report(
            Stage::Research,
            json!({"notes": ["README.md holds a title"]})
        )
    );
    // The sed is a Bash call that dontAsk mode refuses: a permission denial. Write is not in
    // research's --tools, so its call failed inside the session and is no denial.
    assert_eq!(
        denials(&record),
        vec![("Bash".to_string(), sed)],
        "{record}"
    );
    let stream = std::fs::read_to_string(p.state_dir().join("stage1.jsonl")).expect("stage1");
    // The wording changes between releases; the meaning does not: no such tool here.
    assert!(
        stream.contains("No such tool available: Write."),
        "{stream}"
    );
    // The run stopped in implement, before the review.
    assert_eq!(
        env.stage_files()
            .iter()
            .filter(|f| f.starts_with("stage3"))
            .count(),
        0,
        "{:?}",
        env.stage_files()
    );
    assert_eq!(env.stage_record(2)["kern"]["outcome"], "failed");
    assert_eq!(under_rule(&mock, 0).len(), 3, "research: three turns");
}

#[test]
fn max_cost_caps_the_real_claude_inside_its_stage() {
    let Some(claude) = claude_or_skip("max_cost_caps_the_real_claude_inside_its_stage") else {
        return;
    };
    let _serial = serial();
    let title = "Look around";
    let env = RealAgent::new(&claude, &format!("- [ ] {title}\n"));
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::all(
            &[RESEARCH, &task(' ', title)],
            vec![
                Turn::tool(
                    "Write",
                    json!({"file_path": env.file("x.txt"), "content": "x\n"}),
                ),
                Turn::report(
                    Stage::Research,
                    json!({"notes": ["README.md holds a title"]}),
                ),
            ],
        )],
    });

    // Any real cost spends this budget: the research stage gets it as --max-budget-usd, the
    // CLI stops at its first answer, and kern ends the run (exit 6) without holding it against
    // the task.
    let run = env
        .kern(&mock, &["5", "0", "--max-cost", "0.000001"])
        .timeout(RUN_TIMEOUT)
        .expect(6);

    let p = &env.project;
    assert!(run.stderr.contains("--max-cost"), "{}", run.stderr);
    assert_eq!(
        p.read("SPEC.md"),
        format!("- [ ] {title}\n"),
        "no Attempt note"
    );
    assert!(
        !p.path().join("x.txt").exists(),
        "the CLI stopped before the tool ran"
    );
    assert_eq!(p.log(), ["initial"]);
    let record = env.stage_record(1);
    assert_eq!(record["subtype"], "error_max_budget_usd", "{record}");
    let argv: Vec<String> = serde_json::from_value(record["kern"]["argv"].clone()).unwrap();
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "--max-budget-usd" && w[1] == "0.000001"),
        "{argv:?}"
    );
    assert_eq!(under_rule(&mock, 0).len(), 1, "one answer, then the cap");
}

#[test]
fn implement_cannot_commit_and_kern_commits_the_work_itself() {
    let Some(claude) = claude_or_skip("implement_cannot_commit_and_kern_commits_the_work_itself")
    else {
        return;
    };
    let _serial = serial();
    let title = "Append a line to the README";
    let env = RealAgent::new(&claude, &format!("- [ ] {title}\n"));
    let mock = MockModelApi::start(Script {
        rules: vec![
            research(title, &["README.md is one line"]),
            Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    Turn::tool(
                        "Bash",
                        json!({"command": "printf 'more\\n' >> README.md", "description": "append"}),
                    ),
                    Turn::tool(
                        "Bash",
                        json!({"command": "git -C . commit -am x", "description": "commit"}),
                    ),
                    Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "appended a line"}),
                    ),
                ],
            ),
            review(title, "Append a line to README.md"),
        ],
    });

    env.kern(&mock, &["5", "0"]).timeout(RUN_TIMEOUT).expect(0);

    let p = &env.project;
    // One commit, kern's, with the reviewer's subject: the agent's `x` never happened.
    assert_eq!(p.log(), ["Append a line to README.md", "initial"]);
    assert_eq!(p.read("README.md"), "# scratch\nmore\n");
    assert_eq!(p.dirty(), Vec::<String>::new());
    assert_eq!(p.run_events("violation"), Vec::<Value>::new());
    let implement_end: Vec<Value> = p
        .run_events("stage_end")
        .into_iter()
        .filter(|e| e["stage"] == "implement")
        .collect();
    assert_eq!(implement_end.len(), 1);
    assert_eq!(implement_end[0]["outcome"], "succeeded");
    let implement = under_rule(&mock, 1);
    assert_eq!(implement.len(), 3);
    assert_eq!(
        implement[2].last_user_text,
        "Permission to use Bash with command git -C . commit -am x has been denied."
    );
}

#[test]
fn overloaded_529_is_retried_by_kern_and_the_task_completes() {
    let Some(claude) = claude_or_skip("overloaded_529_is_retried_by_kern_and_the_task_completes")
    else {
        return;
    };
    let _serial = serial();
    let title = "Add a notes file";
    let env = RealAgent::new(&claude, &format!("- [ ] {title}\n"));
    let mock = MockModelApi::start(Script {
        rules: vec![
            // Three 529s: the CLI's first try and the two own retries kern allows it
            // (CLAUDE_CODE_MAX_RETRIES=2, which kern sets), so the CLI gives up and kern must
            // retry the stage.
            Rule::all(
                &[RESEARCH, &task(' ', title)],
                vec![
                    Turn::http_error(529, "overloaded_error", "Overloaded", 3),
                    Turn::report(Stage::Research, json!({"notes": ["notes.txt is new"]})),
                ],
            ),
            Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": env.file("notes.txt"), "content": "notes\n"}),
                    ),
                    Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote notes.txt"}),
                    ),
                ],
            ),
            review(title, "Add notes.txt"),
        ],
    });

    let run = env
        .kern(&mock, &["5", "0", "--retry-delay", "1s"])
        .timeout(RUN_TIMEOUT)
        .expect(0);

    let p = &env.project;
    assert_eq!(p.log(), ["Add notes.txt", "initial"]);
    assert!(
        run.stderr.contains("research failed (") && run.stderr.contains("retry 1 of 3"),
        "{}",
        run.stderr
    );
    let research_end: Vec<Value> = p
        .run_events("stage_end")
        .into_iter()
        .filter(|e| e["stage"] == "research")
        .collect();
    assert_eq!(research_end.len(), 1, "{research_end:?}");
    assert_eq!(research_end[0]["outcome"], "succeeded");
    assert_eq!(research_end[0]["retries"], 1, "{research_end:?}");
    let answers: Vec<Answer> = under_rule(&mock, 0).into_iter().map(|r| r.answer).collect();
    let overloaded = Answer::Error {
        rule: 0,
        turn: 0,
        status: 529,
    };
    assert_eq!(
        answers,
        [
            overloaded.clone(),
            overloaded.clone(),
            overloaded,
            Answer::Scripted { rule: 0, turn: 1 }
        ],
        "the CLI tried three times (CLAUDE_CODE_MAX_RETRIES=2 from kern), then kern once more"
    );
}

#[test]
fn unauthorized_401_stops_kern_at_once_with_exit_5_and_the_login_hint() {
    let Some(claude) =
        claude_or_skip("unauthorized_401_stops_kern_at_once_with_exit_5_and_the_login_hint")
    else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let spec = format!("- [ ] {title}\n");
    let env = RealAgent::new(&claude, &spec);
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::all(
            &[RESEARCH, &task(' ', title)],
            vec![Turn::http_error(
                401,
                "authentication_error",
                "invalid x-api-key",
                u32::MAX,
            )],
        )],
    });

    // kern stops the CLI at its first `api_retry` saying `authentication_failed` (and lowers
    // its retries anyway); the bounded wait fails the test if kern waits out the CLI.
    let run = env
        .kern(&mock, &["5", "0"])
        .timeout(UNAUTHORIZED_TIMEOUT)
        .expect(5);

    let p = &env.project;
    assert!(run.stderr.contains(NOT_LOGGED_IN), "{}", run.stderr);
    assert_eq!(p.read("SPEC.md"), spec);
    assert_eq!(p.log(), ["initial"]);
    let record = env.stage_record(1);
    assert_eq!(record["kern"]["outcome"], "failed", "{record}");
    assert_eq!(record["kern"]["retries"], 0, "{record}");
    assert_eq!(record["kern"]["failure"], NOT_LOGGED_IN, "{record}");
    // The CLI's own retries were cut short: at most its first try and one retry reached the
    // mock (2.1.197 alone tried eleven times, 2.1.330 three).
    let tries = under_rule(&mock, 0).len();
    assert!((1..=3).contains(&tries), "{tries} tries");
}

#[test]
fn invalid_request_400_stops_kern_with_exit_5_and_the_apis_message_without_a_retry() {
    let Some(claude) = claude_or_skip(
        "invalid_request_400_stops_kern_with_exit_5_and_the_apis_message_without_a_retry",
    ) else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let spec = format!("- [ ] {title}\n");
    let env = RealAgent::new(&claude, &spec);
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::all(
            &[RESEARCH, &task(' ', title)],
            vec![Turn::http_error(
                400,
                "invalid_request_error",
                "tools.3.custom.input_schema: JSON schema is invalid",
                u32::MAX,
            )],
        )],
    });

    let run = env.kern(&mock, &["5", "0"]).timeout(RUN_TIMEOUT).expect(5);

    let p = &env.project;
    let expected = "the model API rejected claude's request (HTTP 400): `tools.3.custom.input_schema: JSON schema is invalid` — a retry gets the same answer: check --model, and that `claude --version` is a version kern supports";
    assert!(run.stderr.contains(expected), "{}", run.stderr);
    assert_eq!(p.read("SPEC.md"), spec);
    let record = env.stage_record(1);
    assert_eq!(record["kern"]["retries"], 0, "{record}");
    assert_eq!(record["kern"]["failure"], expected, "{record}");
    // kern started the CLI once: every request is of one session. The CLI's own handling of
    // the 400 changed under kern: 2.1.330 sends one request; 2.1.332 tries it again and walks
    // down its model fallbacks (ten requests, about a second). Either way nothing is counted
    // and nothing is retried by kern.
    let tries = under_rule(&mock, 0);
    let sessions: std::collections::BTreeSet<String> = tries.iter().map(session_of).collect();
    assert_eq!(
        sessions.len(),
        1,
        "kern started the CLI once: {} requests of sessions {sessions:?}",
        tries.len()
    );
    assert!(
        sessions.iter().all(|s| !s.is_empty()),
        "every request names its session: {sessions:?}"
    );
}

#[test]
fn a_refused_connection_ends_the_stage_within_seconds() {
    let Some(claude) = claude_or_skip("a_refused_connection_ends_the_stage_within_seconds") else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let env = RealAgent::new(&claude, &format!("- [ ] {title}\n"));
    let mock = MockModelApi::start(Script::default());
    // A loopback port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let closed = format!("http://127.0.0.1:{port}/v1");

    // No retry by kern: the failed research is a failed attempt and the run ends. The CLI's
    // own ten retries (minutes) are cut to kern's two by CLAUDE_CODE_MAX_RETRIES.
    let run = env
        .kern(&mock, &["1", "0", "--retries", "0"])
        .envs([("ANTHROPIC_VERTEX_BASE_URL", closed.as_str())])
        .timeout(UNAUTHORIZED_TIMEOUT)
        .expect(4);

    let p = &env.project;
    assert!(
        p.read("SPEC.md").contains("Connection refused"),
        "the Attempt note says why:\n{}",
        p.read("SPEC.md")
    );
    eprintln!(
        "refused connection: the stage ended after {:?}",
        run.elapsed
    );
}
