//! Two agents in one run (issue 15 items 4 and 7), with the built-in scripted agent as both:
//! a stage moves to `--fallback-agent` when its agent hits a usage limit that resets later
//! than `--fallback-after`, later stages go straight there while the limit lasts, kern goes
//! back once the reset has passed, and a limit on both waits for the earlier reset;
//! `--review-agent` runs the review elsewhere. Stage records, `run.jsonl` and the summary name
//! the agents. Also what the CLIs are given (`--max-budget-usd`, `--sandbox=agent`), `--pace`, and
//! how the dry run and the doctor show the second agents.
//!
//! The second agent is the scripted agent again, with its own scenario file and wrapper
//! (`<name>.json`, `<name>.sh`, its calls in `<name>.calls.jsonl`) beside the project's.
//! "During a stage" is a scripted agent waiting for a file the test creates; the one wait on
//! the clock (the switch back) waits for a reset time kern recorded, never for kern.

use crate::support::during::{finish, spawn};
use crate::support::{kern_bin, project};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use project::Project;
use serde_json::{Value, json};

/// A second scripted agent with its own `scenario`; returns its `--agent` value.
fn second_agent(p: &Project, name: &str, scenario: &Value) -> String {
    let dir = p.outside.path();
    let scenario_path = dir.join(format!("{name}.json"));
    std::fs::write(&scenario_path, serde_json::to_vec_pretty(scenario).unwrap()).unwrap();
    let wrapper = dir.join(format!("{name}.sh"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' scripted-agent '{}'\n",
            kern_bin().display(),
            scenario_path.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("program:{}", wrapper.display())
}

/// The project's own scripted agent, as `--agent` names it.
fn main_agent(p: &Project) -> String {
    format!("program:{}", p.outside.path().join("agent.sh").display())
}

/// The stages an agent was called for, in order (`scenario` for the project's own agent).
fn stages_called(p: &Project, name: &str) -> Vec<String> {
    std::fs::read_to_string(p.outside.path().join(format!("{name}.calls.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|c| c["stage"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The prompts an agent received for `stage`.
fn prompts(p: &Project, name: &str, stage: &str) -> Vec<String> {
    std::fs::read_to_string(p.outside.path().join(format!("{name}.calls.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|c| c["stage"] == stage)
        .map(|c| c["prompt"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `(stage, agent, model)` of every `stage_end` in `run.jsonl`.
fn stage_ends(p: &Project) -> Vec<(String, String, Value)> {
    p.run_events("stage_end")
        .into_iter()
        .map(|e| {
            (
                e["stage"].as_str().unwrap().to_string(),
                e["agent"].as_str().unwrap_or("").to_string(),
                e["model"].clone(),
            )
        })
        .collect()
}

/// Polls up to a minute for `ready` to give a value; the bound only keeps a broken build from
/// hanging the suite.
fn wait_for<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn waiting_for(go: &Path) -> Value {
    json!([format!(
        "while [ ! -f '{}' ]; do sleep 0.01; done",
        go.display()
    )])
}

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn stage_record(p: &Project, n: u8) -> Value {
    let path = p.state_dir().join(format!("stage{n}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn a_far_usage_limit_moves_the_stage_to_the_fallback_and_later_stages_follow() {
    let p = Project::new("- [ ] Add the greeting\n");
    let go = p.outside.path().join("go");
    p.scenario(&json!({"default": {
        "research": {"error": "usage_limit", "resets_in_secs": 3600}
    }}));
    let fallback = second_agent(
        &p,
        "fallback",
        &json!({"default": {
            "implement": {"write": {"greeting.txt": "hello\n"}},
            "commit": {"shell": waiting_for(&go),
                       "result": {"verdict": "COMMIT", "subject": "Add the greeting"}}
        }}),
    );
    let main = main_agent(&p);
    let child = spawn(&p, &["1", "0", "--fallback-agent", &fallback]);
    wait_for("the fallback's review", || {
        stages_called(&p, "fallback")
            .contains(&"commit".to_string())
            .then_some(())
    });

    // The records of the stages so far: each ran on the fallback, and says why.
    let research = stage_record(&p, 1);
    assert_eq!(research["kern"]["agent"], fallback.as_str(), "{research}");
    let switch = &research["kern"]["switches"][0];
    assert_eq!(switch["from"], main.as_str());
    assert_eq!(switch["to"], fallback.as_str());
    assert!(
        switch["reason"]
            .as_str()
            .unwrap()
            .starts_with("You've hit your session limit · resets "),
        "{switch}"
    );
    let until = switch["limited_until"].as_i64().unwrap();
    // The reset plus the default 60 s margin.
    assert!(
        (now_epoch() + 3600..=now_epoch() + 3661).contains(&until),
        "{until}"
    );
    let implement = stage_record(&p, 2);
    assert_eq!(implement["kern"]["agent"], fallback.as_str());
    assert_eq!(implement["kern"]["switches"][0]["from"], main.as_str());
    assert!(
        implement["kern"]["switches"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("is at its usage limit until"),
        "{implement}"
    );
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.log()[0], "Add the greeting");
    assert_eq!(
        stages_called(&p, "scenario"),
        ["research"],
        "one try on the main agent"
    );
    assert_eq!(
        stages_called(&p, "fallback"),
        ["research", "implement", "commit"]
    );
    let agents: Vec<String> = stage_ends(&p).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(
        agents,
        [fallback.clone(), fallback.clone(), fallback.clone()]
    );
    let switches = p.run_events("agent_switch");
    assert_eq!(switches.len(), 3, "{switches:?}");
    assert_eq!(
        switches
            .iter()
            .map(|s| s["stage"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["research", "implement", "commit"]
    );
    assert!(
        err.contains(&format!(
            "research: {main} hit its usage limit (You've hit your session limit"
        )) && err.contains(&format!("running the stage on {fallback}")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "note: stages by agent: {fallback} 3 (3 stages moved to the other agent at a usage limit)"
        )),
        "{err}"
    );
}

#[test]
fn kern_goes_back_to_the_main_agent_once_its_reset_has_passed() {
    let p = Project::new("- [ ] Add the greeting\n");
    let go = p.outside.path().join("go");
    p.scenario(&json!({"default": {
        "research": {"error": "usage_limit", "resets_in_secs": 2},
        "implement": {"write": {"greeting.txt": "hello\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the greeting"}}
    }}));
    let fallback = second_agent(
        &p,
        "fallback",
        &json!({"default": {"research": {"shell": waiting_for(&go)}}}),
    );
    let main = main_agent(&p);
    let child = spawn(
        &p,
        &[
            "1",
            "0",
            "--fallback-agent",
            &fallback,
            "--fallback-after",
            "0",
            "--reset-margin",
            "0",
        ],
    );
    // The fallback researches while the main agent's limit lasts; once the reset kern
    // recorded has passed, the research ends and the next stage may start.
    let until = wait_for("the switch", || {
        p.run_events("agent_switch")
            .first()
            .and_then(|s| s["limited_until"].as_i64())
            .or_else(|| {
                std::fs::read_to_string(p.state_dir().join("stage1.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|r| r["kern"]["switches"][0]["limited_until"].as_i64())
            })
    });
    wait_for("the main agent's reset", || {
        (now_epoch() >= until).then_some(())
    });
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.log()[0], "Add the greeting");
    assert_eq!(
        stages_called(&p, "scenario"),
        ["research", "implement", "commit"]
    );
    assert_eq!(stages_called(&p, "fallback"), ["research"]);
    let agents: Vec<String> = stage_ends(&p).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(agents, [fallback.clone(), main.clone(), main.clone()]);
    assert_eq!(p.run_events("agent_switch").len(), 1);
    assert!(
        err.contains(&format!(
            "note: stages by agent: {fallback} 1, {main} 2 (1 stage moved to the other agent at a usage limit)"
        )),
        "{err}"
    );
}

#[test]
fn a_near_usage_limit_is_waited_out_on_the_same_agent() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.scenario(&json!({"default": {
        "research": [{"error": "usage_limit", "resets_in_secs": 1}, {}],
        "implement": {"write": {"greeting.txt": "hello\n"}}
    }}));
    let fallback = second_agent(&p, "fallback", &json!({}));
    let out = p
        .run(&[])
        .args([
            "1",
            "0",
            "--fallback-agent",
            &fallback,
            "--reset-margin",
            "0",
        ])
        .expect(0);
    let err = &out.stderr;
    assert!(stages_called(&p, "fallback").is_empty(), "{err}");
    assert_eq!(
        stages_called(&p, "scenario"),
        ["research", "research", "implement", "commit"]
    );
    assert!(p.run_events("agent_switch").is_empty());
    assert!(!err.contains("stages by agent"), "{err}");
}

#[test]
fn a_usage_limit_on_both_agents_waits_for_the_earlier_reset() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.scenario(&json!({"default": {"research": {"error": "usage_limit", "resets_in_secs": 3600}}}));
    let fallback = second_agent(
        &p,
        "fallback",
        &json!({"default": {
            "research": [{"error": "usage_limit", "resets_in_secs": 1}, {}],
            "implement": {"write": {"greeting.txt": "hello\n"}}
        }}),
    );
    let out = p
        .run(&[])
        .args([
            "1",
            "0",
            "--fallback-agent",
            &fallback,
            "--fallback-after",
            "0",
            "--reset-margin",
            "0",
        ])
        .expect(0);
    let err = &out.stderr;
    assert_eq!(stages_called(&p, "scenario"), ["research"]);
    assert_eq!(
        stages_called(&p, "fallback"),
        ["research", "research", "implement", "commit"],
        "the fallback's reset is the earlier one: kern waits for it, and the main agent stays limited"
    );
    assert!(err.contains("  waits            1 ("), "{err}");
}

#[test]
fn a_usage_limit_on_both_agents_past_max_wait_stops_the_run_with_exit_5() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.scenario(&json!({"default": {"research": {"error": "usage_limit", "resets_in_secs": 7200}}}));
    let fallback = second_agent(
        &p,
        "fallback",
        &json!({"default": {"research": {"error": "usage_limit", "resets_in_secs": 9000}}}),
    );
    let out = p
        .run(&[])
        .args(["1", "0", "--fallback-agent", &fallback, "--max-wait", "1h"])
        .expect(5);
    let err = &out.stderr;
    assert!(
        err.contains("both agents are at their usage limits and the earlier reset is 2h")
            && err.contains(
                "longer than --max-wait (1h); run kern again after the reset, or raise --max-wait"
            ),
        "{err}"
    );
    assert_eq!(stages_called(&p, "scenario"), ["research"]);
    assert_eq!(stages_called(&p, "fallback"), ["research"]);
    assert!(p.read("SPEC.md").contains("- [ ] Add the greeting"));
}

#[test]
fn the_review_runs_on_the_review_agent_and_the_records_name_both() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.scenario(&json!({"default": {"implement": {"write": {"greeting.txt": "hello\n"}}}}));
    let reviewer = second_agent(
        &p,
        "reviewer",
        &json!({"default": {"commit": {"result": {"verdict": "COMMIT", "subject": "Add the greeting, reviewed"}}}}),
    );
    let main = main_agent(&p);
    let out = p
        .run(&[])
        .args([
            "1",
            "0",
            "--review-agent",
            &reviewer,
            "--review-model",
            "o3",
        ])
        .expect(0);
    let err = &out.stderr;
    assert_eq!(p.log()[0], "Add the greeting, reviewed");
    assert_eq!(stages_called(&p, "scenario"), ["research", "implement"]);
    assert_eq!(stages_called(&p, "reviewer"), ["commit"]);
    let review = &prompts(&p, "reviewer", "commit")[0];
    assert!(
        review.contains("You are the review stage of kern"),
        "{review}"
    );
    assert!(review.contains("greeting.txt"), "the diff: {review}");
    // A program agent is given no model (not the templates' Claude aliases, not --review-model):
    // the records name the one it reported itself.
    assert_eq!(
        stage_ends(&p),
        [
            ("research".to_string(), main.clone(), json!("scripted")),
            ("implement".to_string(), main.clone(), json!("scripted")),
            ("commit".to_string(), reviewer.clone(), json!("scripted")),
        ]
    );
    assert!(
        err.contains(&format!("note: stages by agent: {main} 2, {reviewer} 1")),
        "{err}"
    );
}

#[test]
fn pace_takes_no_new_task_once_a_usage_window_is_used_past_it() {
    let spec = "- [ ] First\n- [ ] Second\n";
    let scenario = json!({
        "tasks": [{"match": "First", "research": {"usage": {"utilization": 0.95, "resets_in_secs": 7200}}}],
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
    });
    let p = Project::new(spec);
    p.scenario(&scenario);
    let out = p.run(&["5", "0", "--pace", "--max-wait=1h"]).expect(0);
    let err = &out.stderr;
    // The agent said "in 7200 s"; kern reads it a moment later.
    let err = err.replace("resets in 1h 59m", "resets in 2h");
    assert_eq!(out.code, Some(0), "{err}");
    assert_eq!(p.log(), ["First", "initial"]);
    assert!(p.read("SPEC.md").contains("- [ ] Second"));
    let main = main_agent(&p);
    assert!(
        err.contains(&format!(
            "run ended: --pace: {main}'s five-hour window is 95% used, resets in 2h (the pace is 90%) — no new task taken; run kern again later, or raise --pace"
        )),
        "{err}"
    );
    let end = p.run_events("run_end");
    assert_eq!(end[0]["exit_code"], 0);

    // A higher pace, or none, takes both.
    for args in [vec!["5", "0", "--pace=96"], vec!["5", "0"]] {
        let p = Project::new(spec);
        p.scenario(&scenario);
        p.run(&[]).args(&args).expect(0);
        assert_eq!(p.log(), ["Second", "First", "initial"], "{args:?}");
    }
}

/// A fake `claude` on PATH that logs its argv per stage into `log/` and answers every stage
/// with a report costing $0.25 (implement also writes `out.txt`).
fn fake_claude(p: &Project) -> (PathBuf, PathBuf) {
    let bin = p.outside.path().join("bin");
    let log = p.outside.path().join("log");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&log).unwrap();
    let report = |stage: &str| match stage {
        "research" => json!({"notes": ["out.txt is new"]}),
        "implement" => json!({"status": "SUCCESS", "summary": "wrote out.txt"}),
        _ => json!({"verdict": "COMMIT", "subject": "Add out.txt"}),
    };
    for stage in ["research", "implement", "commit"] {
        let result = json!({"type": "result", "subtype": "success", "is_error": false,
            "result": "done", "session_id": "s", "total_cost_usd": 0.25, "num_turns": 1,
            "structured_output": report(stage)});
        std::fs::write(log.join(format!("{stage}.out")), format!("{result}\n")).unwrap();
    }
    let script = format!(
        "#!/bin/sh\nstage=unknown\nfor a in \"$@\"; do\n  case \"$a\" in\n    --tools=Read,Grep,Glob,Bash,WebSearch,WebFetch) stage=research ;;\n    --tools=default) stage=implement ;;\n    --tools=Read,Grep,Glob,Bash) stage=commit ;;\n  esac\ndone\nlog='{}'\nprintf '%s\\n' \"$@\" > \"$log/$stage.argv\"\nprintf '%s\\n' \"$@\" >> \"$log/all.argv\"\ncat > /dev/null\nif [ \"$stage\" = implement ]; then echo made > out.txt; fi\ncat \"$log/$stage.out\"\n",
        log.display()
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, log)
}

fn argv(log: &Path, stage: &str) -> Vec<String> {
    std::fs::read_to_string(log.join(format!("{stage}.argv")))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn each_claude_stage_gets_what_is_left_of_max_cost_and_implement_the_sandbox() {
    let p = Project::new("- [ ] Write the out file\n");
    let (bin, log) = fake_claude(&p);
    p.run(&[
        "1",
        "0",
        "--agent",
        "claude",
        "--max-cost",
        "2",
        "--sandbox=agent",
    ])
    .env("PATH", path_with(&bin))
    .expect(0);
    let budget = |stage: &str| {
        let args = argv(&log, stage);
        let at = args.iter().position(|a| a == "--max-budget-usd").unwrap();
        args[at + 1].clone()
    };
    assert_eq!(
        [budget("research"), budget("implement"), budget("commit")],
        ["2", "1.75", "1.5"]
    );
    let settings = kern::testing::agent::claude::SANDBOX_SETTINGS;
    let sandboxed = |stage: &str| argv(&log, stage).contains(&format!("--settings={settings}"));
    assert!(sandboxed("implement"));
    assert!(!sandboxed("research") && !sandboxed("commit"));
    // Without --max-cost there is no cap.
    let p = Project::new("- [ ] Write the out file\n");
    let (bin, log) = fake_claude(&p);
    p.run(&["1", "0", "--agent", "claude"])
        .env("PATH", path_with(&bin))
        .expect(0);
    assert!(!argv(&log, "implement").contains(&"--max-budget-usd".to_string()));
}

/// Parallel tasks spend one budget: each stage gets what is left of `--max-cost` after every
/// task's stages so far, not only its own task's.
#[test]
fn parallel_tasks_give_each_stage_what_the_whole_run_left_of_max_cost() {
    let p = Project::new("- [ ] Write the out file\n- [ ] Write the out file again\n");
    let (bin, log) = fake_claude(&p);
    p.run(&["2", "0", "-j", "2", "--agent", "claude", "--max-cost", "10"])
        .env("PATH", path_with(&bin))
        .expect(0);
    let all = std::fs::read_to_string(log.join("all.argv")).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    let budgets: Vec<f64> = lines
        .windows(2)
        .filter(|w| w[0] == "--max-budget-usd")
        .map(|w| w[1].parse().unwrap())
        .collect();
    assert_eq!(budgets.len(), 6, "{all}");
    // The stage that starts last comes after both tasks' first two stages ended ($0.25
    // each): it is given at most $10 - $1.00. Counting only its own task's stages, every
    // stage would be given $9.50 or more.
    let least = budgets.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(least <= 9.0 + 1e-9, "{budgets:?}");
}

#[test]
fn the_dry_run_shows_the_fallback_and_review_agents_with_their_argv() {
    let p = Project::new("- [ ] Write the out file\n");
    let out = p
        .run(&[
            "-n",
            "--agent",
            "claude",
            "--fallback-agent",
            "codex",
            "--fallback-model",
            "o3",
            "--review-agent",
            "codex",
        ])
        .expect(0);
    let (stdout, err) = (&out.stdout, &out.stderr);
    let text = format!("{stdout}{err}");
    assert_eq!(out.code, Some(0), "{text}");
    assert!(text.contains("review by:   codex\n"), "{text}");
    assert!(
        text.contains(
            "fallback:    codex, for a stage whose agent hits a usage limit that resets later than 15m\n"
        ),
        "{text}"
    );
    let implement = text.split("stage 2 implement:").nth(1).unwrap();
    let implement = implement.split("stage 3").next().unwrap();
    assert!(
        implement.contains("  agent:   claude\n  model:   opus\n"),
        "{implement}"
    );
    assert!(
        implement.contains("  at a far usage limit of claude, on codex:\n    agent:   codex\n    model:   o3\n    argv:    codex exec --json --ephemeral -m o3 "),
        "{implement}"
    );
    assert!(implement.contains("Edit(//"), "the deny rules: {implement}");
    // The review runs on codex; its fallback would be codex itself, so it has none.
    let review = text.split("stage 3 commit:").nth(1).unwrap();
    assert!(
        review.contains("  agent:   codex\n  model:   (the agent's default)\n"),
        "{review}"
    );
    assert!(!review.contains("at a far usage limit"), "{review}");
}

#[test]
fn bad_second_agents_are_usage_errors() {
    let p = Project::new("- [ ] Write the out file\n");
    for (args, message) in [
        (
            vec!["1", "0", "--fallback-agent", "gemini"],
            "--fallback-agent: unknown agent `gemini` — use claude, codex or program:<path>",
        ),
        (
            vec!["1", "0", "--agent", "codex", "--fallback-agent", "codex"],
            "--fallback-agent `codex` is the --agent itself",
        ),
    ] {
        let out = p.run(&[]).args(&args).expect(2);
        let err = &out.stderr;
        assert!(err.contains(message), "{err}");
    }
    assert!(!p.state_root().exists(), "nothing ran");
}

#[test]
fn the_doctor_checks_the_second_agents_and_the_sandbox() {
    let p = Project::new("- [ ] Write the out file\n");
    // A PATH with neither codex nor bubblewrap: only a folder of our own and the basics.
    let bin = p.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let out = p
        .run(&[
            "doctor",
            "--agent",
            "program:/bin/true",
            "--fallback-agent",
            "codex",
            "--review-agent",
            "claude",
            "--sandbox=agent",
        ])
        .env("PATH", bin.display().to_string())
        .expect(5);
    let err = &out.stderr;
    assert!(
        err.contains("✗ review agent: `claude` not found on PATH"),
        "{err}"
    );
    assert!(
        err.contains("✗ fallback agent: `codex` not found on PATH"),
        "{err}"
    );
    assert!(
        err.contains("- fallback agent login: skipped: no `codex`"),
        "{err}"
    );
    assert!(
        err.contains("✗ sandbox: --sandbox agent needs `bwrap` and `socat` on PATH: Claude Code refuses to start the implement stage without them\n    fix: install them (`apt-get install bubblewrap socat`), or leave --sandbox out for kern's own fence"),
        "{err}"
    );
}

#[test]
fn a_stage_that_spent_what_was_left_of_max_cost_is_not_retried() {
    let p = Project::new("- [ ] Write the out file\n");
    p.scenario(&json!({"default": {
        "research": [{"error": "overloaded", "cost_usd": 0.06}, {}],
    }}));
    let out = p
        .run(&["1", "0", "--max-cost", "0.05", "--retries", "3"])
        .expect(6);
    let err = &out.stderr;
    assert_eq!(
        stages_called(&p, "scenario"),
        ["research"],
        "no retry: {err}"
    );
    assert_eq!(
        p.read("SPEC.md"),
        "- [ ] Write the out file\n",
        "no Attempt note: the task is not to blame"
    );
    let record = stage_record(&p, 1);
    assert!(
        record["kern"]["failure"]
            .as_str()
            .unwrap()
            .starts_with("research stage stopped: the --max-cost budget is spent ($0.05 left when the stage started, $0.06 spent by its tries) — API Error: 529"),
        "{record}"
    );
}

#[test]
fn pace_with_a_fallback_agent_hands_the_next_tasks_over_until_the_window_resets() {
    let p = Project::new("- [ ] First\n- [ ] Second\n");
    p.scenario(&json!({
        "tasks": [{"match": "First", "research": {"usage": {"utilization": 0.95, "resets_in_secs": 7200}}}],
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
    }));
    let fallback = second_agent(
        &p,
        "fallback",
        &json!({"default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}}),
    );
    let main = main_agent(&p);
    let out = p
        .run(&[])
        .args(["5", "0", "--pace", "--fallback-agent", &fallback])
        .expect(0);
    let err = &out.stderr;
    let err = err.replace("resets in 1h 59m", "resets in 2h");
    assert_eq!(out.code, Some(0), "{err}");
    assert_eq!(p.log(), ["Second", "First", "initial"]);
    assert_eq!(
        stages_called(&p, "scenario"),
        ["research", "implement", "commit"],
        "the main agent did the first task only"
    );
    assert_eq!(
        stages_called(&p, "fallback"),
        ["research", "implement", "commit"]
    );
    assert!(
        err.contains(&format!(
            "--pace: {main}'s five-hour window is 95% used, resets in 2h (the pace is 90%) — the next stages run on {fallback} until then"
        )),
        "{err}"
    );
    assert!(err.contains("run ended: nothing left to do"), "{err}");
}

#[test]
fn an_agent_stopped_at_the_cap_kern_gave_ends_the_run_with_exit_6_and_no_attempt() {
    let spec = "- [ ] Write the out file\n";
    let scenario = json!({"default": {
        "research": [{"error": "max_budget", "cost_usd": 0.5, "text": "Reached maximum budget ($0.5)"}, {}],
        "implement": {"write": {"out.txt": "done\n"}}
    }});
    let p = Project::new(spec);
    p.scenario(&scenario);
    let out = p.run(&["5", "0", "--max-cost", "0.5"]).expect(6);
    let err = &out.stderr;
    assert!(err.contains("--max-cost"), "{err}");
    assert_eq!(
        p.read("SPEC.md"),
        spec,
        "no Attempt note: the task is not to blame"
    );
    let record = stage_record(&p, 1);
    assert_eq!(record["subtype"], "error_max_budget_usd", "{record}");
    assert_eq!(record["kern"]["outcome"], "failed", "{record}");
    // The next run, with budget left, starts the stage again and finishes the task.
    p.run(&["5", "0", "--max-cost", "5"]).expect(0);
    assert_eq!(p.log()[0], "Write the out file");

    // Without --max-cost the cap is not kern's: the agent's own limit is a failed attempt.
    let p = Project::new(spec);
    p.scenario(&scenario);
    p.run(&["1", "0"]).expect(4);
    assert!(
        p.read("SPEC.md")
            .contains("> **Attempt 1:** research stage stopped: Reached maximum budget ($0.5)"),
        "{}",
        p.read("SPEC.md")
    );
}
