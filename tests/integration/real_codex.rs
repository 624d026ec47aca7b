//! The real-Codex tier: the real `kern` runs with `--agent codex` and the real `codex` CLI
//! (pinned by `.ci/install-codex`), which talks to the scripted mock of the Responses API of
//! `support/mock_responses_api.rs` on 127.0.0.1 through a custom provider in a throw-away
//! `CODEX_HOME` (no key, nothing but loopback).
//!
//! The mock rejects a schema that is not strict with HTTP 400 `invalid_json_schema`, as the
//! real API does, so every test that gets past a stage proves kern's schemas would pass the
//! real service. Each mock rule is keyed on a distinctive phrase of a stage's template plus
//! the task line as kern renders it, as in `real_agent.rs`.
//!
//! The one decision a reader must know: a CLI that cannot be installed FAILS these tests with
//! the installer's message unless `KERN_SKIP_REAL_CODEX=1` says to skip them; a silently
//! skipped tier would prove nothing. The runs are serialised, and each kern run is bounded: a
//! kern that outlives its bound is stopped (SIGTERM, then SIGKILL) and the test fails with what
//! it printed — the bound is what fails when kern waits out Codex's own reconnects.

use crate::support::mock_responses_api;
use crate::support::project;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use mock_responses_api::{
    Answer, CODEX_ENV_REMOVE, MockResponsesApi, RecordedRequest, Rule, Script, Turn,
    codex_executable, write_codex_config,
};
use project::Project;
use serde_json::{Value, json};

/// The longest a whole kern run may take before it is stopped and the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// A run that must stop at the first sign of a 401 or of no connection: Codex alone would
/// retry for seconds (a 401) or forever (no connection).
const FIRST_SIGN_TIMEOUT: Duration = Duration::from_secs(60);

/// Distinctive phrases of the three stage templates (prompts/*.md).
const RESEARCH: &str = "You are the research stage of kern";
const IMPLEMENT: &str = "You are the implement stage of kern";
const REVIEW: &str = "You are the review stage of kern";

/// What kern says when Codex's key is refused.
const NOT_LOGGED_IN: &str = "codex is not logged in: run `codex login` once, or set CODEX_API_KEY";

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The CLI to run, or `None` when `KERN_SKIP_REAL_CODEX=1` asks to skip; panics with the fix
/// when it is missing.
fn codex_or_skip(test: &str) -> Option<PathBuf> {
    if std::env::var("KERN_SKIP_REAL_CODEX").is_ok_and(|v| v == "1") {
        eprintln!("skipping {test}: KERN_SKIP_REAL_CODEX=1");
        return None;
    }
    match codex_executable() {
        Ok(bin) => Some(bin),
        Err(message) => panic!("{message}"),
    }
}

/// The task block of a prompt as kern renders it: the data fence and the task's first line.
fn task(marker: char, title: &str) -> String {
    format!("<data source=\"SPEC.md task\">\n- [{marker}] {title}")
}

/// A research report with nothing to skip (every field, as a strict schema makes a model
/// answer).
fn notes(notes: &[&str]) -> Turn {
    Turn::report(json!({"notes": notes, "skip_reason": null, "skip_kind": null}))
}

/// An implement report.
fn implemented(status: &str, summary: &str) -> Turn {
    Turn::report(
        json!({"status": status, "summary": summary, "attempt_note": null,
        "subtasks": null, "learnings": null, "no_change_reason": null}),
    )
}

/// A research that reads README.md and returns `lines` as notes.
fn research(title: &str, lines: &[&str]) -> Rule {
    Rule::all(
        &[RESEARCH, &task(' ', title)],
        vec![Turn::Exec("cat README.md".into()), notes(lines)],
    )
}

/// A review that looks at `git status` and answers COMMIT with `subject`.
fn review(title: &str, subject: &str) -> Rule {
    Rule::all(
        &[REVIEW, &task('~', title)],
        vec![
            Turn::Exec("git status --short".into()),
            Turn::report(
                json!({"verdict": "COMMIT", "subject": subject, "body": null,
                "reason": null, "learnings": null}),
            ),
        ],
    )
}

/// A scratch project, a throw-away `CODEX_HOME`, and a folder holding `codex` (a link to the
/// installed CLI) to put first on kern's PATH.
struct RealCodex {
    project: Project,
    codex_home: tempfile::TempDir,
    bin: tempfile::TempDir,
}

impl RealCodex {
    fn new(codex: &Path, spec: &str) -> RealCodex {
        let project = Project::new(spec);
        let codex_home = crate::support::codex_home();
        let bin = tempfile::tempdir().expect("temp bin");
        std::os::unix::fs::symlink(codex, bin.path().join("codex")).expect("link codex");
        RealCodex {
            project,
            codex_home,
            bin,
        }
    }

    /// `kern args` with `--agent codex`, the real codex first on PATH, `CODEX_HOME` set and the
    /// developer's own Codex settings removed: a builder, to be given a `.timeout(…)` and run
    /// with `.expect(…)`.
    fn kern<'a>(&'a self, args: &[&str]) -> project::KernRun<'a> {
        self.project
            .run(args)
            // kern's fence as a person gets it: the mock is an allowed loopback host.
            .default_fence()
            .env("KERN_AGENT", "codex")
            .path_first(self.bin.path())
            .env_remove(CODEX_ENV_REMOVE)
            .env("CODEX_HOME", self.codex_home.path())
    }

    fn stage_record(&self, n: u8) -> Value {
        let path = self.project.state_dir().join(format!("stage{n}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("`{}`: {e}", path.display()));
        serde_json::from_str(&text).expect("stage record is JSON")
    }
}

/// The scripted requests the mock answered under rule `rule`.
fn under_rule(mock: &MockResponsesApi, rule: usize) -> Vec<RecordedRequest> {
    mock.scripted_requests()
        .into_iter()
        .filter(|r| match r.answer {
            Answer::Scripted { rule: n, .. } | Answer::Error { rule: n, .. } => n == rule,
            Answer::SchemaRejected | Answer::Side => false,
        })
        .collect()
}

/// Every request that carried a schema carried kern's schema of its stage, and none was
/// rejected for it.
fn assert_schemas_accepted(mock: &MockResponsesApi) {
    let requests = mock.requests();
    assert!(
        requests.iter().all(|r| r.answer != Answer::SchemaRejected),
        "a schema was rejected as not strict"
    );
    let known: Vec<Value> = kern::testing::stage::Stage::ALL
        .iter()
        .map(|s| serde_json::from_str(s.schema()).expect("schema"))
        .collect();
    for request in requests.iter().filter(|r| r.schema.is_some()) {
        let schema = request.schema.as_ref().expect("schema");
        assert!(
            known.contains(schema),
            "not one of kern's schemas: {schema}"
        );
    }
}

#[test]
fn two_tasks_go_through_the_real_codex_to_two_commits() {
    let Some(codex) = codex_or_skip("two_tasks_go_through_the_real_codex_to_two_commits") else {
        return;
    };
    let _serial = serial();
    let (a, b) = ("Add a greeting file", "Add a farewell file");
    let env = RealCodex::new(&codex, &format!("# Plan\n\n- [ ] {a}\n- [ ] {b}\n"));
    let mock = MockResponsesApi::start(Script {
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
                    Turn::Exec("printf 'hello\\n' > greeting.txt && cat greeting.txt".into()),
                    implemented("SUCCESS", "wrote greeting.txt"),
                ],
            ),
            review(a, "Add greeting.txt"),
            research(b, &["farewell.txt goes beside greeting.txt"]),
            Rule::all(
                &[IMPLEMENT, &task('~', b)],
                vec![
                    Turn::Exec("printf 'bye\\n' > farewell.txt".into()),
                    Turn::Exec("sed -i s/bye/goodbye/ farewell.txt && cat farewell.txt".into()),
                    implemented("SUCCESS", "wrote farewell.txt"),
                ],
            ),
            review(b, "Add farewell.txt"),
        ],
    });
    mock.write_codex_home(env.codex_home.path(), None);

    let run = env.kern(&["5", "0"]).timeout(RUN_TIMEOUT).expect(0);

    let p = &env.project;
    assert_eq!(
        p.log(),
        ["Add farewell.txt", "Add greeting.txt", "initial"],
        "{}",
        run.stderr
    );
    assert_eq!(p.read("greeting.txt"), "hello\n");
    assert_eq!(p.read("farewell.txt"), "goodbye\n");
    let files = p.head_files();
    for name in ["greeting.txt", "farewell.txt"] {
        assert!(
            files.iter().any(|f| f == name),
            "{name} not in HEAD: {files:?}"
        );
    }
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
    let committed: Vec<String> = p
        .run_events("commit")
        .iter()
        .filter_map(|e| e["task"].as_str().map(str::to_string))
        .collect();
    assert_eq!(committed, [a, b]);
    assert_eq!(p.run_events("violation"), Vec::<Value>::new());
    assert_schemas_accepted(&mock);

    // Every scripted turn was asked for, in order, and the commands really ran in Codex's
    // sandbox: their output went back to the model.
    let turns = |rule| -> Vec<usize> {
        under_rule(&mock, rule)
            .iter()
            .map(|r| r.tool_outputs)
            .collect()
    };
    for (rule, expected) in [
        (0, vec![0, 1]),
        (1, vec![0, 1]),
        (2, vec![0, 1]),
        (3, vec![0, 1]),
        (4, vec![0, 1, 2]),
        (5, vec![0, 1]),
    ] {
        assert_eq!(turns(rule), expected, "rule {rule}");
    }
    assert!(
        under_rule(&mock, 0)[1]
            .last_tool_output
            .contains("# scratch")
    );
    assert!(under_rule(&mock, 1)[1].last_tool_output.contains("hello"));
    assert!(under_rule(&mock, 4)[2].last_tool_output.contains("goodbye"));
    assert!(
        under_rule(&mock, 0)[0]
            .tool_names
            .iter()
            .any(|t| t == "exec_command"),
        "{:?}",
        under_rule(&mock, 0)[0].tool_names
    );
}

#[test]
fn a_read_only_stage_that_tries_to_write_is_held_by_codexs_sandbox() {
    let Some(codex) =
        codex_or_skip("a_read_only_stage_that_tries_to_write_is_held_by_codexs_sandbox")
    else {
        return;
    };
    let _serial = serial();
    let title = "Add a notes file";
    let env = RealCodex::new(&codex, &format!("- [ ] {title}\n"));
    let mock = MockResponsesApi::start(Script {
        rules: vec![
            Rule::all(
                &[RESEARCH, &task(' ', title)],
                vec![
                    Turn::Exec(
                        "echo x > x.txt; sed -i s/scratch/changed/ README.md; cat README.md".into(),
                    ),
                    notes(&["README.md holds a title"]),
                ],
            ),
            Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    Turn::Exec("printf 'notes\\n' > notes.txt".into()),
                    implemented("SUCCESS", "wrote notes.txt"),
                ],
            ),
            review(title, "Add notes.txt"),
        ],
    });
    mock.write_codex_home(env.codex_home.path(), None);

    env.kern(&["1", "0"]).timeout(RUN_TIMEOUT).expect(0);

    let p = &env.project;
    assert_eq!(p.log(), ["Add notes.txt", "initial"]);
    assert_eq!(p.read("README.md"), "# scratch\n");
    assert!(!p.path().join("x.txt").exists());
    assert!(!p.head_files().iter().any(|f| f == "x.txt"));
    assert_eq!(
        p.run_events("violation"),
        Vec::<Value>::new(),
        "the sandbox held"
    );
    let research = under_rule(&mock, 0);
    assert!(
        research[1]
            .last_tool_output
            .contains("Read-only file system"),
        "{}",
        research[1].last_tool_output
    );
    assert!(research[1].last_tool_output.contains("# scratch"));
    assert_schemas_accepted(&mock);
}

/// A stage whose first Codex run fails with `status` (Codex's own retries lowered to one, so
/// that the first run gives up) and whose second succeeds: kern retries it and the task ends
/// in a commit.
fn transient_then_success(test: &str, status: u16, kind: &str, times: u32) {
    let Some(codex) = codex_or_skip(test) else {
        return;
    };
    let _serial = serial();
    let title = "Add a notes file";
    let env = RealCodex::new(&codex, &format!("- [ ] {title}\n"));
    let mock = MockResponsesApi::start(Script {
        rules: vec![
            Rule::all(
                &[RESEARCH, &task(' ', title)],
                vec![
                    Turn::http_error(status, kind, None, "try later", times),
                    notes(&["notes.txt is new"]),
                ],
            ),
            Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    Turn::Exec("printf 'notes\\n' > notes.txt".into()),
                    implemented("SUCCESS", "wrote notes.txt"),
                ],
            ),
            review(title, "Add notes.txt"),
        ],
    });
    mock.write_codex_home(env.codex_home.path(), Some(1));

    let run = env
        .kern(&["1", "0", "--retry-delay", "1s"])
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
    let errors = under_rule(&mock, 0)
        .iter()
        .filter(|r| matches!(r.answer, Answer::Error { .. }))
        .count();
    assert_eq!(errors, times as usize, "every scripted error was given");
}

#[test]
fn rate_limited_429_is_retried_by_kern_and_the_task_completes() {
    transient_then_success(
        "rate_limited_429_is_retried_by_kern_and_the_task_completes",
        429,
        "rate_limit_error",
        1,
    );
}

#[test]
fn server_error_500_is_retried_by_kern_and_the_task_completes() {
    // Codex with one retry of each kind sends 4 requests before it gives up.
    transient_then_success(
        "server_error_500_is_retried_by_kern_and_the_task_completes",
        500,
        "server_error",
        4,
    );
}

#[test]
fn invalid_request_400_stops_kern_with_exit_5_and_the_apis_message_without_a_retry() {
    let Some(codex) = codex_or_skip(
        "invalid_request_400_stops_kern_with_exit_5_and_the_apis_message_without_a_retry",
    ) else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let spec = format!("- [ ] {title}\n");
    let env = RealCodex::new(&codex, &spec);
    let mock = MockResponsesApi::start(Script {
        rules: vec![Rule::all(
            &[RESEARCH, &task(' ', title)],
            vec![Turn::http_error(
                400,
                "invalid_request_error",
                Some("unsupported_parameter"),
                "Unsupported parameter: 'reasoning.summary' is not supported with this model.",
                u32::MAX,
            )],
        )],
    });
    mock.write_codex_home(env.codex_home.path(), None);

    let run = env.kern(&["5", "0"]).timeout(RUN_TIMEOUT).expect(5);

    let p = &env.project;
    let expected = "the model API rejected codex's request (HTTP 400): `Unsupported parameter: 'reasoning.summary' is not supported with this model.` — a retry gets the same answer: check --model, and that `codex --version` is a version kern supports";
    assert!(run.stderr.contains(expected), "{}", run.stderr);
    assert_eq!(p.read("SPEC.md"), spec);
    assert_eq!(p.log(), ["initial"]);
    let record = env.stage_record(1);
    assert_eq!(record["kern"]["outcome"], "failed", "{record}");
    assert_eq!(record["kern"]["retries"], 0, "{record}");
    assert_eq!(record["kern"]["failure"], expected, "{record}");
    assert_eq!(
        under_rule(&mock, 0).len(),
        1,
        "Codex does not retry a 400, nor kern"
    );
}

#[test]
fn unauthorized_401_stops_kern_at_the_first_sign_with_exit_5() {
    let Some(codex) = codex_or_skip("unauthorized_401_stops_kern_at_the_first_sign_with_exit_5")
    else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let spec = format!("- [ ] {title}\n");
    let env = RealCodex::new(&codex, &spec);
    let mock = MockResponsesApi::start(Script {
        rules: vec![Rule::all(
            &[RESEARCH, &task(' ', title)],
            vec![Turn::http_error(
                401,
                "invalid_request_error",
                Some("invalid_api_key"),
                "Incorrect API key provided: sk-xxx.",
                u32::MAX,
            )],
        )],
    });
    // Codex's default retries: alone it would try 6 times over about 7 s.
    mock.write_codex_home(env.codex_home.path(), None);

    let run = env.kern(&["5", "0"]).timeout(FIRST_SIGN_TIMEOUT).expect(5);

    let p = &env.project;
    assert!(run.stderr.contains(NOT_LOGGED_IN), "{}", run.stderr);
    assert_eq!(p.read("SPEC.md"), spec);
    let record = env.stage_record(1);
    assert_eq!(record["kern"]["failure"], NOT_LOGGED_IN, "{record}");
    assert_eq!(record["kern"]["retries"], 0, "{record}");
    let tries = under_rule(&mock, 0).len();
    assert!(
        (1..=2).contains(&tries),
        "{tries} tries: stopped at the first sign"
    );
}

#[test]
fn a_refused_connection_stops_codex_at_the_first_sign() {
    let Some(codex) = codex_or_skip("a_refused_connection_stops_codex_at_the_first_sign") else {
        return;
    };
    let _serial = serial();
    let title = "Anything at all";
    let env = RealCodex::new(&codex, &format!("- [ ] {title}\n"));
    // A loopback port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    write_codex_config(
        env.codex_home.path(),
        &format!("http://127.0.0.1:{port}/v1"),
        None,
    );

    // No retry: the one failed research is a failed attempt, and the run ends.
    let run = env
        .kern(&["1", "0", "--retries", "0"])
        .timeout(FIRST_SIGN_TIMEOUT)
        .expect(4);

    let p = &env.project;
    assert!(
        run.stderr
            .contains("codex cannot reach the model API: Reconnecting..."),
        "{}",
        run.stderr
    );
    assert!(
        p.read("SPEC.md")
            .contains("codex cannot reach the model API"),
        "the Attempt note says why:\n{}",
        p.read("SPEC.md")
    );
    assert_eq!(p.log(), ["initial"]);
}

#[test]
fn doctor_passes_a_custom_provider_that_needs_no_login() {
    let Some(codex) = codex_or_skip("doctor_passes_a_custom_provider_that_needs_no_login") else {
        return;
    };
    let _serial = serial();
    let env = RealCodex::new(&codex, "- [ ] One\n");
    write_codex_config(env.codex_home.path(), "http://127.0.0.1:9/v1", None);
    let ran = env.kern(&["doctor"]).expect(0);
    let err = ran.stderr;
    let config = env.codex_home.path().join("config.toml");
    let line = err
        .lines()
        .find(|l| l.contains("agent login"))
        .unwrap_or_else(|| panic!("no login line:\n{err}"));
    assert_eq!(
        line,
        format!(
            "✓ agent login: provider `kern-mock` at http://127.0.0.1:9/v1 needs no login (`{}`)",
            config.display()
        ),
        "{err}"
    );
    assert!(!err.contains("WARNING"), "{err}");
}
