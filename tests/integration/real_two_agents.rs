//! Two real agents in one kern run (issue 15 items 4, 6 and 7, issue 12 item 1): the real
//! `claude` (pinned by `.ci/install-claude`) against the mock of the Messages API
//! (`support/mock_model_api.rs`) and the real `codex` (pinned by `.ci/install-codex`) against
//! the mock of the Responses API (`support/mock_responses_api.rs`), both first on kern's PATH.
//!
//! - A Claude usage limit with a five-hour reset and `--fallback-agent codex`: the task is
//!   finished by Codex in the same run, and `run.jsonl` names both agents.
//! - `--review-agent codex`: Claude implements, Codex reviews.
//! - SPEC.md is the person's: the real Claude refuses the implement stage's Write to the task
//!   list kern uses (`--spec docs/PLAN.md`) and to LEARNINGS.md beside it, and allows one
//!   elsewhere.
//! - `--pace`: the real Claude reports its subscription usage, and kern takes no new task.
//!
//! Claude's usage limits exist only for a subscription login, so the fallback and pace tests
//! run the CLI as one (`MockModelApi::claude_subscription_env`: the first-party API at the
//! mock with a made-up OAuth token); the mock answers with the `anthropic-ratelimit-unified-*`
//! headers the real service sends, and the CLI turns them into its own `rate_limit_event`s and
//! "You've hit your 5-hour limit" text. As in the other real tiers, a CLI that cannot be
//! installed FAILS these tests unless `KERN_SKIP_REAL_CLAUDE=1` or `KERN_SKIP_REAL_CODEX=1`
//! says to skip; every kern run is bounded, and stopped and failed past its bound.

use crate::support::mock_model_api::{self, MockModelApi};
use crate::support::mock_responses_api::{self, MockResponsesApi};
use crate::support::project::{self, Project};

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kern::testing::stage::Stage;
use serde_json::{Value, json};

/// The longest a whole kern run may take before it is stopped and the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

const RESEARCH: &str = "You are the research stage of kern";
const IMPLEMENT: &str = "You are the implement stage of kern";
const REVIEW: &str = "You are the review stage of kern";

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn skip(var: &str, test: &str) -> bool {
    let skip = std::env::var(var).is_ok_and(|v| v == "1");
    if skip {
        eprintln!("skipping {test}: {var}=1");
    }
    skip
}

/// The real claude, or `None` when asked to skip; panics with the installer's fix otherwise.
fn claude_or_skip(test: &str) -> Option<PathBuf> {
    if skip("KERN_SKIP_REAL_CLAUDE", test) {
        return None;
    }
    Some(mock_model_api::claude_executable().unwrap_or_else(|m| panic!("{m}")))
}

/// The real codex, or `None` when asked to skip; panics with the installer's fix otherwise.
fn codex_or_skip(test: &str) -> Option<PathBuf> {
    if skip("KERN_SKIP_REAL_CODEX", test) {
        return None;
    }
    Some(mock_responses_api::codex_executable().unwrap_or_else(|m| panic!("{m}")))
}

/// The task block of a prompt as kern renders it.
fn task(marker: char, title: &str) -> String {
    format!("<data source=\"SPEC.md task\">\n- [{marker}] {title}")
}

/// A scratch project with both CLIs linked into one `bin` folder, a HOME for Claude and a
/// CODEX_HOME for Codex.
struct TwoAgents {
    project: Project,
    home: tempfile::TempDir,
    codex_home: tempfile::TempDir,
    bin: tempfile::TempDir,
}

impl TwoAgents {
    fn new(claude: &Path, codex: Option<&Path>, spec: &str) -> TwoAgents {
        let project = Project::new(spec);
        let home = tempfile::tempdir().expect("temp home");
        let codex_home = crate::support::codex_home();
        let bin = tempfile::tempdir().expect("temp bin");
        std::os::unix::fs::symlink(claude, bin.path().join("claude")).expect("link claude");
        if let Some(codex) = codex {
            std::os::unix::fs::symlink(codex, bin.path().join("codex")).expect("link codex");
        }
        TwoAgents {
            project,
            home,
            codex_home,
            bin,
        }
    }

    /// A file of the repository as an absolute path, for Claude's file tools.
    fn file(&self, name: &str) -> String {
        self.project
            .path()
            .canonicalize()
            .expect("canonical path")
            .join(name)
            .display()
            .to_string()
    }

    /// `kern args` with `claude_env` (the mock's environment for the CLI), Codex's home, both
    /// CLIs first on PATH and the developer's own settings for them removed; run with
    /// `.expect(…)`, stopped and failed past [`RUN_TIMEOUT`].
    fn kern<'a>(&'a self, claude_env: &[(String, String)], args: &[&str]) -> project::KernRun<'a> {
        self.project
            .run(args)
            // kern's fence as a person gets it: the mock is an allowed loopback host.
            .default_fence()
            .env("KERN_AGENT", "claude")
            .path_first(self.bin.path())
            .env_remove(mock_model_api::CLAUDE_ENV_REMOVE)
            .env_remove(mock_responses_api::CODEX_ENV_REMOVE)
            .envs(claude_env.iter().map(|(k, v)| (k, v)))
            .env("CODEX_HOME", self.codex_home.path())
            .timeout(RUN_TIMEOUT)
    }
}

/// A Claude research that reads README.md and returns `notes`.
fn claude_research(title: &str, notes: &[&str]) -> mock_model_api::Rule {
    use mock_model_api::{Rule, Turn};
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

/// A Codex implement that runs `command` and reports SUCCESS.
fn codex_implement(title: &str, command: &str) -> mock_responses_api::Rule {
    use mock_responses_api::{Rule, Turn};
    Rule::all(
        &[IMPLEMENT, &task('~', title)],
        vec![
            Turn::Exec(command.into()),
            Turn::report(
                json!({"status": "SUCCESS", "summary": format!("ran {command}"),
                "attempt_note": null, "subtasks": null, "learnings": null, "no_change_reason": null}),
            ),
        ],
    )
}

/// A Codex review that looks at `git status` and answers COMMIT with `subject`.
fn codex_review(title: &str, subject: &str) -> mock_responses_api::Rule {
    use mock_responses_api::{Rule, Turn};
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

/// `(stage, agent)` of every `stage_end` in `run.jsonl`.
fn stage_agents(p: &Project) -> Vec<(String, String)> {
    p.run_events("stage_end")
        .iter()
        .map(|e| {
            (
                e["stage"].as_str().unwrap_or_default().to_string(),
                e["agent"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn a_claude_usage_limit_with_a_five_hour_reset_lets_codex_finish_the_task() {
    let test = "a_claude_usage_limit_with_a_five_hour_reset_lets_codex_finish_the_task";
    let (Some(claude), Some(codex)) = (claude_or_skip(test), codex_or_skip(test)) else {
        return;
    };
    let _serial = serial();
    let title = "Add a greeting file";
    let env = TwoAgents::new(&claude, Some(&codex), &format!("- [ ] {title}\n"));
    let claude_api = MockModelApi::start(mock_model_api::Script {
        rules: vec![
            claude_research(title, &["README.md holds only a title"]),
            mock_model_api::Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    mock_model_api::Turn::UsageLimit {
                        resets_in_secs: 5 * 3600,
                        times: u32::MAX,
                    },
                    mock_model_api::Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "never reached"}),
                    ),
                ],
            ),
        ],
    });
    let codex_api = MockResponsesApi::start(mock_responses_api::Script {
        rules: vec![
            codex_implement(title, "printf 'hello\\n' > greeting.txt"),
            codex_review(title, "Add greeting.txt"),
        ],
    });
    codex_api.write_codex_home(env.codex_home.path(), None);
    let claude_env = claude_api.claude_subscription_env(env.home.path());

    let run = env
        .kern(&claude_env, &["1", "0", "--fallback-agent", "codex"])
        .expect(0);

    let p = &env.project;
    assert_eq!(p.log(), ["Add greeting.txt", "initial"], "{}", run.stderr);
    assert_eq!(p.read("greeting.txt"), "hello\n");
    assert!(p.head_files().iter().any(|f| f == "greeting.txt"));
    assert!(p.read("SPEC.md").starts_with(&format!("- [x] {title}\n")));
    assert_eq!(
        stage_agents(p),
        pairs(&[
            ("research", "claude"),
            ("implement", "codex"),
            ("commit", "codex")
        ]),
        "{}",
        run.stderr
    );
    let switches = p.run_events("agent_switch");
    assert_eq!(switches.len(), 2, "{switches:?}");
    let hit = &switches[0];
    assert_eq!(
        (&hit["stage"], &hit["from"], &hit["to"]),
        (&json!("implement"), &json!("claude"), &json!("codex"))
    );
    let reason = hit["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("You've hit your") && reason.contains("resets"),
        "the CLI's own words: {reason}"
    );
    let until = hit["limited_until"].as_i64().unwrap();
    let five_hours = 5 * 3600;
    assert!(
        (now_epoch() + five_hours - 600..=now_epoch() + five_hours + 61).contains(&until),
        "{until}"
    );
    assert_eq!(
        switches[1]["stage"], "commit",
        "the review goes straight to codex"
    );
    assert!(
        run.stderr.contains(
            "note: stages by agent: claude 1, codex 2 (2 stages moved to the other agent at a usage limit)"
        ),
        "{}",
        run.stderr
    );
    // Claude was never asked to review; Codex implemented and reviewed.
    assert!(
        claude_api
            .scripted_requests()
            .iter()
            .all(|r| !r.first_user_text.contains(REVIEW)),
        "claude reviewed"
    );
    let codex_rules: Vec<usize> = codex_api
        .scripted_requests()
        .iter()
        .filter_map(|r| match r.answer {
            mock_responses_api::Answer::Scripted { rule, .. } => Some(rule),
            _ => None,
        })
        .collect();
    assert_eq!(codex_rules, [0, 0, 1, 1], "implement twice, review twice");
}

#[test]
fn implement_runs_on_claude_and_the_review_on_codex() {
    let test = "implement_runs_on_claude_and_the_review_on_codex";
    let (Some(claude), Some(codex)) = (claude_or_skip(test), codex_or_skip(test)) else {
        return;
    };
    let _serial = serial();
    let title = "Add a greeting file";
    let env = TwoAgents::new(&claude, Some(&codex), &format!("- [ ] {title}\n"));
    let claude_api = MockModelApi::start(mock_model_api::Script {
        rules: vec![
            claude_research(title, &["greeting.txt goes beside README.md"]),
            mock_model_api::Rule::all(
                &[IMPLEMENT, &task('~', title)],
                vec![
                    mock_model_api::Turn::tool(
                        "Write",
                        json!({"file_path": env.file("greeting.txt"), "content": "hello\n"}),
                    ),
                    mock_model_api::Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote greeting.txt"}),
                    ),
                ],
            ),
        ],
    });
    let codex_api = MockResponsesApi::start(mock_responses_api::Script {
        rules: vec![codex_review(title, "Add greeting.txt, reviewed by codex")],
    });
    codex_api.write_codex_home(env.codex_home.path(), None);
    let claude_env = claude_api.claude_env(env.home.path());

    let run = env
        .kern(&claude_env, &["1", "0", "--review-agent", "codex"])
        .expect(0);

    let p = &env.project;
    assert_eq!(p.log(), ["Add greeting.txt, reviewed by codex", "initial"]);
    assert_eq!(
        stage_agents(p),
        pairs(&[
            ("research", "claude"),
            ("implement", "claude"),
            ("commit", "codex")
        ])
    );
    // Codex read the work Claude did: the diff was in its prompt, and `git status` ran.
    let review = &codex_api.scripted_requests()[0];
    assert!(
        review.user_text.contains("greeting.txt"),
        "{}",
        review.user_text
    );
    assert!(
        codex_api.scripted_requests()[1]
            .last_tool_output
            .contains("greeting.txt"),
        "{:?}",
        codex_api.scripted_requests()[1].last_tool_output
    );
    assert!(
        claude_api
            .scripted_requests()
            .iter()
            .all(|r| !r.first_user_text.contains(REVIEW))
    );
    assert!(
        run.stderr
            .contains("note: stages by agent: claude 2, codex 1"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_real_claude_refuses_to_write_the_task_list_and_learnings_but_writes_elsewhere() {
    let test = "the_real_claude_refuses_to_write_the_task_list_and_learnings_but_writes_elsewhere";
    let Some(claude) = claude_or_skip(test) else {
        return;
    };
    let _serial = serial();
    let title = "Add a greeting file";
    let env = TwoAgents::new(&claude, None, "unused\n");
    let p = &env.project;
    p.write("docs/PLAN.md", &format!("- [ ] {title}\n"));
    p.commit_all("the plan");
    let plan = env.file("docs/PLAN.md");
    let learnings = env.file("docs/LEARNINGS.md");
    let implement = mock_model_api::Rule::all(
        &[IMPLEMENT, &task('~', title)],
        vec![
            mock_model_api::Turn::tool("Read", json!({"file_path": plan})),
            mock_model_api::Turn::tool(
                "Write",
                json!({"file_path": plan, "content": "- [x] done by the agent\n"}),
            ),
            mock_model_api::Turn::tool(
                "Write",
                json!({"file_path": learnings, "content": "written by the agent\n"}),
            ),
            mock_model_api::Turn::tool(
                "Write",
                json!({"file_path": env.file("greeting.txt"), "content": "hello\n"}),
            ),
            mock_model_api::Turn::report(
                Stage::Implement,
                json!({"status": "SUCCESS", "summary": "wrote greeting.txt"}),
            ),
        ],
    );
    let review = mock_model_api::Rule::all(
        &[REVIEW, &task('~', title)],
        vec![mock_model_api::Turn::report(
            Stage::Review,
            json!({"verdict": "COMMIT", "subject": "Add greeting.txt"}),
        )],
    );
    let claude_api = MockModelApi::start(mock_model_api::Script {
        rules: vec![
            claude_research(title, &["greeting.txt is new"]),
            implement,
            review,
        ],
    });
    let claude_env = claude_api.claude_env(env.home.path());

    let run = env
        .kern(&claude_env, &["1", "0", "--spec", "docs/PLAN.md"])
        .expect(0);

    assert_eq!(p.log(), ["Add greeting.txt", "the plan", "initial"]);
    assert_eq!(
        p.read("greeting.txt"),
        "hello\n",
        "a write elsewhere is allowed"
    );
    let plan_now = p.read("docs/PLAN.md");
    assert!(
        plan_now.starts_with(&format!("- [x] {title}\n")),
        "{plan_now}"
    );
    assert!(!plan_now.contains("done by the agent"), "{plan_now}");
    let learnings_now = std::fs::read_to_string(&learnings).unwrap_or_default();
    assert!(
        !learnings_now.contains("written by the agent"),
        "{learnings_now}"
    );
    assert!(
        !run.stderr.contains("not by kern"),
        "no change of the plan during the stage: {}",
        run.stderr
    );
    // What the CLI told the model after each Write: refused, refused, done.
    let implement_requests: Vec<_> = claude_api
        .scripted_requests()
        .into_iter()
        .filter(|r| r.first_user_text.contains(IMPLEMENT))
        .collect();
    let result_of = |turn: usize| {
        implement_requests
            .iter()
            .find(|r| r.assistant_turns == turn)
            .map(|r| r.last_user_text.clone())
            .unwrap_or_default()
    };
    for turn in [2, 3] {
        assert!(
            result_of(turn).contains("denied by your permission settings"),
            "turn {turn}: {}",
            result_of(turn)
        );
    }
    assert!(
        result_of(4).contains("File created successfully"),
        "{}",
        result_of(4)
    );
}

#[test]
fn pace_stops_taking_tasks_when_the_real_claude_reports_its_usage() {
    let test = "pace_stops_taking_tasks_when_the_real_claude_reports_its_usage";
    let Some(claude) = claude_or_skip(test) else {
        return;
    };
    let _serial = serial();
    let (a, b) = ("Add a greeting file", "Add a farewell file");
    let env = TwoAgents::new(&claude, None, &format!("- [ ] {a}\n- [ ] {b}\n"));
    let implement = mock_model_api::Rule::all(
        &[IMPLEMENT, &task('~', a)],
        vec![
            mock_model_api::Turn::tool(
                "Write",
                json!({"file_path": env.file("greeting.txt"), "content": "hello\n"}),
            ),
            mock_model_api::Turn::report(
                Stage::Implement,
                json!({"status": "SUCCESS", "summary": "wrote greeting.txt"}),
            ),
        ],
    );
    let review = mock_model_api::Rule::all(
        &[REVIEW, &task('~', a)],
        vec![mock_model_api::Turn::report(
            Stage::Review,
            json!({"verdict": "COMMIT", "subject": "Add greeting.txt"}),
        )],
    );
    let claude_api = MockModelApi::start(mock_model_api::Script {
        rules: vec![
            claude_research(a, &["greeting.txt is new"]),
            implement,
            review,
        ],
    });
    claude_api.report_usage(Some(0.93));
    let claude_env = claude_api.claude_subscription_env(env.home.path());

    let run = env
        .kern(&claude_env, &["5", "0", "--pace", "--max-wait=1h"])
        .expect(0);

    let p = &env.project;
    assert_eq!(p.log(), ["Add greeting.txt", "initial"]);
    assert!(p.read("SPEC.md").contains(&format!("- [ ] {b}")));
    assert!(
        run.stderr.contains(
            "run ended: --pace: claude's five-hour window is 93% used, resets in 2h 59m (the pace is 90%) — no new task taken"
        ) || run.stderr.contains(
            "run ended: --pace: claude's five-hour window is 93% used, resets in 3h (the pace is 90%) — no new task taken"
        ),
        "{}",
        run.stderr
    );
    assert!(
        claude_api
            .scripted_requests()
            .iter()
            .all(|r| !r.first_user_text.contains(b)),
        "the second task was never started"
    );
    let end: Vec<Value> = p.run_events("run_end");
    assert_eq!(end[0]["exit_code"], 0);
    // The window the real CLI reported is in each stage's record and event, and the report.
    let windows: Vec<Value> = p
        .run_events("stage_end")
        .iter()
        .filter_map(|e| e["window"].get(0).cloned())
        .collect();
    assert!(!windows.is_empty(), "no stage_end carries a window");
    for w in &windows {
        assert_eq!(
            (&w["agent"], &w["kind"]),
            (&json!("claude"), &json!("five_hour"))
        );
        assert_eq!(w["used_after"], 93.0);
    }
    let report = env.kern(&claude_env, &["report"]).expect(0).stdout;
    assert!(report.contains("claude's 5-hour window"), "{report}");
}
