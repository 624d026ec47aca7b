//! One stage plan (issue 40): `kern -n` describes exactly the stage a run sends — the model,
//! the tools, the command line and the prompt, byte for byte — at every discovery level, for
//! each agent kind, for the review agent and for the fallback agent. The dry run is taken twice:
//! before the run (the task's first stage) and while the run's review waits for a file the test
//! creates (the review, whose prompt holds the task's diff).

use crate::support::during::{finish, spawn, waiting};
use crate::support::fakes::{logging_fake, scripted_claude};
use crate::support::project::Project;
use crate::support::wait_for_file;

use std::path::Path;

use serde_json::{Value, json};

/// The `stage N name:` block of a dry run's report.
fn block<'a>(report: &'a str, stage: &str) -> &'a str {
    let number = match stage {
        "research" => 1,
        "implement" => 2,
        _ => 3,
    };
    let head = format!("\nstage {number} {stage}:\n");
    let start = report
        .find(&head)
        .unwrap_or_else(|| panic!("no {stage} stage in the dry run:\n{report}"));
    let rest = &report[start + head.len()..];
    &rest[..rest.find("\nstage ").unwrap_or(rest.len())]
}

/// The value of the first `key:` line of `block` (`model:`, `prompt:`).
fn field<'a>(block: &'a str, key: &str) -> &'a str {
    block
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {block}"))
        .trim()
}

/// The model a dry-run block names, as `run.jsonl` records it (`null` for the agent's own).
fn model_of(block: &str) -> Value {
    match field(block, "model:") {
        m if m.starts_with('(') => Value::Null,
        m => json!(m),
    }
}

/// The `stage_start` events of `run.jsonl` for `stage`, in order.
fn starts(p: &Project, stage: &str) -> Vec<Value> {
    p.run_events("stage_start")
        .into_iter()
        .filter(|e| e["stage"] == stage)
        .collect()
}

/// Asserts that the dry run's `stage` block describes what the run sent the agent first for
/// it: the prompt (`sent`), its size and model in `run.jsonl`, and (`argv`, for a CLI) every
/// argument but a schema path, which names the state folder in a run and `--prompts` here.
fn same_stage(
    p: &Project,
    report: &str,
    dir: &Path,
    stage: &str,
    sent: &str,
    argv: Option<&[String]>,
) {
    let b = block(report, stage);
    let number = match stage {
        "research" => 1,
        "implement" => 2,
        _ => 3,
    };
    let planned = std::fs::read_to_string(dir.join(format!("stage{number}.prompt.md"))).unwrap();
    assert!(
        planned == sent,
        "{stage}: the dry run's prompt is not the one the run sent\n--- planned\n{planned}\n--- sent\n{sent}"
    );
    assert_eq!(
        field(b, "prompt:"),
        format!(
            "{} bytes from {}",
            sent.len(),
            field(b, "prompt:").split(" from ").nth(1).unwrap()
        ),
        "{stage}: prompt size"
    );
    let start = &starts(p, stage)[0];
    assert_eq!(
        start["prompt_bytes"],
        json!(sent.len()),
        "{stage}: the run's prompt size"
    );
    assert_eq!(start["model"], model_of(b), "{stage}: model\n{b}");
    if let Some(argv) = argv {
        let line = field(b, "argv:");
        for arg in argv.iter().filter(|a| !a.ends_with(".schema.json")) {
            assert!(
                line.contains(arg.as_str()),
                "{stage}: `{arg}` of the run is not in the dry run's argv: {line}"
            );
        }
        let shown = line
            .split_whitespace()
            .filter(|w| w.trim_start_matches('\'').starts_with("--"))
            .count();
        let sent = argv.iter().filter(|a| a.starts_with("--")).count();
        assert_eq!(
            shown, sent,
            "{stage}: the dry run shows other flags: {line} vs {argv:?}"
        );
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// A task at `level` (0–2 by its Level note; 3 by its words, as the review found the drift).
fn task_at(level: u8) -> String {
    match level {
        3 => "- [ ] Redesign the auth system architecture\n".into(),
        n => format!("- [ ] Add the greeting\n  > **Level:** {n}\n"),
    }
}

/// The dry run with `--prompts DIR` and `args`: its report.
fn dry(p: &Project, args: &[&str], dir: &Path, bin: Option<&Path>) -> String {
    let mut run = p
        .run(&["-n", "--prompts", dir.to_str().unwrap()])
        .args(args);
    if let Some(bin) = bin {
        run = run.path_first(bin);
    }
    run.expect(0).stdout
}

/// The run of one task with the review held until the test has taken the dry run of it:
/// returns the dry run before the run and the one during the review.
fn run_holding_the_review(p: &Project, args: &[&str], bin: Option<&Path>) -> (String, String) {
    let before = dry(p, args, &p.outside.path().join("before"), bin);
    let mut argv = vec!["1", "0"];
    argv.extend_from_slice(args);
    let child = match bin {
        Some(bin) => p.run(&argv).path_first(bin).spawn(),
        None => spawn(p, &argv),
    };
    wait_for_file(&p.state_dir().join("stage3.jsonl"));
    let during = dry(p, args, &p.outside.path().join("during"), bin);
    std::fs::write(p.outside.path().join("go"), "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    (before, during)
}

#[test]
fn the_dry_run_plans_what_the_run_sends_to_claude_at_every_level() {
    for level in 0..=3u8 {
        let p = Project::new(&task_at(level));
        let go = p.outside.path().join("go");
        p.scenario(&waiting("commit", &go, json!({})));
        let bin = scripted_claude(&p);
        let (before, during) = run_holding_the_review(&p, &["--agent", "claude"], Some(&bin));
        assert!(
            field(&before, "level:").starts_with(&format!("{level} ")),
            "level {level}: {before}"
        );
        let first = if level == 0 { "implement" } else { "research" };
        assert_eq!(
            level == 0,
            !before.contains("\nstage 1 research:"),
            "level {level}: {before}"
        );
        let log = p.outside.path().join("log");
        same_stage(
            &p,
            &before,
            &p.outside.path().join("before"),
            first,
            &p.prompts(first)[0],
            Some(&lines(&log.join(format!("{first}.argv")))),
        );
        same_stage(
            &p,
            &during,
            &p.outside.path().join("during"),
            "commit",
            &p.prompts("commit")[0],
            Some(&lines(&log.join("commit.argv"))),
        );
        let research_model = if level == 3 { "opus" } else { "sonnet" };
        if level > 0 {
            assert_eq!(
                starts(&p, "research")[0]["model"],
                research_model,
                "level {level}"
            );
        }
        assert_eq!(
            starts(&p, "commit")[0]["model"],
            research_model,
            "level {level}: the review"
        );
    }
}

#[test]
fn the_dry_run_plans_what_the_run_sends_to_a_program_agent() {
    let p = Project::new(&task_at(1));
    let go = p.outside.path().join("go");
    p.scenario(&waiting("commit", &go, json!({})));
    let (before, during) = run_holding_the_review(&p, &[], None);
    same_stage(
        &p,
        &before,
        &p.outside.path().join("before"),
        "research",
        &p.prompts("research")[0],
        None,
    );
    same_stage(
        &p,
        &during,
        &p.outside.path().join("during"),
        "commit",
        &p.prompts("commit")[0],
        None,
    );
    assert!(
        p.prompts("research")[0].contains("discovery level 1"),
        "the level-1 research is asked to keep it short"
    );
}

#[test]
fn the_dry_run_plans_what_the_run_sends_to_codex_at_level_3() {
    let p = Project::new(&task_at(3));
    let (bin, log) = logging_fake(&p, "codex", false);
    for stage in ["research", "implement", "commit"] {
        let result = match stage {
            "research" => json!({"notes": ["out.txt is new"]}),
            "implement" => json!({"status": "SUCCESS", "summary": "wrote out.txt"}),
            _ => json!({"verdict": "COMMIT", "subject": "Add out.txt"}),
        };
        let events = [
            json!({"type": "thread.started", "thread_id": "t-1"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": result.to_string()}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        ];
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(log.join(format!("{stage}.out")), text).unwrap();
    }
    let dir = p.outside.path().join("before");
    let before = dry(&p, &["--agent", "codex"], &dir, Some(&bin));
    p.run(&["1", "0", "--agent", "codex"])
        .path_first(&bin)
        .expect(0);
    let sent = std::fs::read_to_string(log.join("research.stdin")).unwrap();
    same_stage(
        &p,
        &before,
        &dir,
        "research",
        &sent,
        Some(&lines(&log.join("research.argv"))),
    );
    assert!(
        sent.contains("discovery level 3"),
        "level 3 goes deep on codex too"
    );
    assert_eq!(
        starts(&p, "research")[0]["model"],
        Value::Null,
        "codex chooses its own model"
    );
}

#[test]
fn the_dry_run_plans_what_the_run_sends_to_the_review_agent() {
    let p = Project::new(&task_at(3));
    let go = p.outside.path().join("go");
    p.scenario(&waiting("commit", &go, json!({})));
    let bin = scripted_claude(&p);
    let args = ["--review-agent", "claude", "--review-model", "haiku"];
    let (_, during) = run_holding_the_review(&p, &args, Some(&bin));
    let log = p.outside.path().join("log");
    same_stage(
        &p,
        &during,
        &p.outside.path().join("during"),
        "commit",
        &p.prompts("commit")[0],
        Some(&lines(&log.join("commit.argv"))),
    );
    assert_eq!(
        starts(&p, "commit")[0]["model"],
        "haiku",
        "a chosen review model beats level 3's"
    );
}

#[test]
fn the_dry_run_plans_what_the_run_sends_to_the_fallback_agent() {
    let p = Project::new(&task_at(3));
    // The program agent's research hits a usage limit far away: research moves to claude,
    // whose call is the scenario's second research.
    p.scenario(&json!({"default": {
        "research": [{"error": "usage_limit", "resets_in_secs": 3600}, {"result": {"notes": ["n"]}}],
        "implement": {"write": {"out.txt": "done\n"}, "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add out"}}
    }}));
    let bin = scripted_claude(&p);
    let dir = p.outside.path().join("before");
    let args = ["--fallback-agent", "claude"];
    let before = dry(&p, &args, &dir, Some(&bin));
    p.run(&["1", "0", "--fallback-agent", "claude"])
        .path_first(&bin)
        .expect(0);
    let research = block(&before, "research");
    let fallback = &research[research.find("at a far usage limit").expect(research)..];
    assert_eq!(field(fallback, "model:"), "sonnet", "{fallback}");
    let sent = &p.prompts("research")[1];
    let planned = std::fs::read_to_string(dir.join("stage1.prompt.md")).unwrap();
    assert!(&planned == sent, "the fallback gets the planned prompt");
    let argv = lines(&p.outside.path().join("log/research.argv"));
    let line = field(fallback, "argv:");
    for arg in &argv {
        assert!(line.contains(arg.as_str()), "`{arg}` not in {line}");
    }
}
