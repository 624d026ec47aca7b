//! A newcomer's first hour (issue 34): the starter SPEC.md cannot be mistaken for work, the
//! stage records outlive the iteration and the jq recipes on them work, the kept demo's
//! commands work as printed, `--pace 80` is refused with the fix, and each subcommand's help
//! lists only what it takes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::kern_in;
use crate::support::project::Project;
use crate::support::tools::system_tool;

/// The line a run and `kern -n` print on a starter whose example tasks are still all there is.
const REPLACE: &str = "replace the example tasks in SPEC.md with your own";

/// A project whose SPEC.md is the one `kern init` writes (committed, as the README says).
fn starter() -> Project {
    let p = Project::new("unused\n");
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    p.run(&["init"]).expect(0);
    p.commit_all("the starter");
    p
}

#[test]
fn a_dry_run_on_the_untouched_starter_says_to_replace_the_example_tasks() {
    let p = starter();
    let ran = p.run(&["-n"]).expect(0);
    assert!(ran.stdout.contains(REPLACE), "{}", ran.stdout);
    assert!(!ran.stdout.contains("next stage"), "{}", ran.stdout);
}

#[test]
fn a_run_on_the_untouched_starter_exits_2_before_any_agent() {
    let p = starter();
    let before = p.log();
    let spec = p.read("SPEC.md");
    p.run(&["10", "30"]).expect(2).stderr_has(REPLACE);
    assert!(p.prompts("research").is_empty(), "no agent ran");
    assert_eq!(p.log(), before, "no commit");
    assert_eq!(p.read("SPEC.md"), spec, "SPEC.md untouched");
}

#[test]
fn the_example_tasks_are_never_taken_beside_a_task_of_ones_own() {
    let p = starter();
    let mut spec = p.read("SPEC.md");
    spec.push_str("\n- [ ] Say hello\n");
    p.write("SPEC.md", &spec);
    p.commit_all("my own task");
    p.run(&["3", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [x] Say hello"), "{spec}");
    assert_eq!(p.prompts("research").len(), 1, "only my task was worked on");
    let tasks = &spec[spec.find("# Tasks").unwrap()..];
    assert!(!tasks.contains("[x] Example"), "{spec}");
    assert!(!tasks.contains("[~]"), "{spec}");
}

#[test]
fn a_run_on_an_untracked_spec_says_it_is_committed_with_the_first_task() {
    let p = Project::new("- [ ] Say hello\n");
    p.git(&["rm", "--cached", "-q", "SPEC.md"]);
    p.git(&["commit", "-q", "-m", "untrack SPEC.md"]);
    let ran = p.run(&["1", "0"]).expect(0);
    let warning = "warning: `SPEC.md` is not committed yet: kern commits it, and LEARNINGS.md, \
                   with the first task";
    ran.stderr_has(warning);
    let at = ran.stderr.find(warning).unwrap();
    let task = ran.stderr.find("Say hello").unwrap();
    assert!(at < task, "before the first task:\n{}", ran.stderr);
    assert!(p.head_files().contains(&"SPEC.md".to_string()));
    // Once committed, no more warning.
    let mut spec = p.read("SPEC.md");
    spec.push_str("- [ ] Say bye\n");
    p.write("SPEC.md", &spec);
    p.commit_all("another");
    let ran = p.run(&["1", "0"]).expect(0);
    assert!(!ran.stderr.contains("not committed yet"), "{}", ran.stderr);
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Every entry below `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn the_stage_records_outlive_the_iteration_and_the_jq_recipes_work() {
    if !system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    let p = Project::new("- [ ] Say hello\n- [ ] Say bye\n");
    p.run(&["2", "0"]).expect(0);
    let dir = PathBuf::from(p.run(&["status", "--dir"]).expect(0).stdout.trim());

    let out = p
        .shell(r#"jq .result "$(kern status --dir)/last/stage2.json""#)
        .expect(0)
        .stdout;
    // The agent's final result, as it wrote it: here the scripted agent's JSON text.
    let result: Value = serde_json::from_str(&out).unwrap();
    let text = result.as_str().unwrap_or_else(|| panic!("{out}"));
    let report: Value = serde_json::from_str(text).unwrap();
    assert_eq!(report["status"], "SUCCESS", "{out}");
    let title = p
        .shell(r#"jq -r .kern.task.title "$(kern status --dir)/last/stage1.json""#)
        .expect(0)
        .stdout;
    assert_eq!(title, "Say bye\n");

    let out = p
        .shell(r#"ls "$(kern status --dir)/runs/""#)
        .expect(0)
        .stdout;
    let runs: Vec<&str> = out.lines().collect();
    assert_eq!(runs.len(), 1, "one run: {out}");
    let run = dir.join("runs").join(runs[0]);
    let kept = listing(&run);
    for task in ["01-say-hello", "02-say-bye"] {
        for file in [
            "stage1.json",
            "stage2.json",
            "stage3.json",
            "stage1.prompt.md",
            "stage2.prompt.md",
            "stage3.prompt.md",
        ] {
            let path = format!("{task}/{file}");
            assert!(kept.contains(&path), "{path} in {kept:?}");
            assert_eq!(mode(&run.join(&path)), 0o600, "{path}");
        }
        assert_eq!(mode(&run.join(task)), 0o700, "{task}");
    }
    assert!(!kept.iter().any(|f| f.contains(".jsonl")), "{kept:?}");
    assert_eq!(mode(&dir.join("runs")), 0o700);
    assert_eq!(mode(&run), 0o700);
    assert_eq!(mode(&dir.join("last")), 0o700);
    for entry in listing(&dir.join("last")) {
        assert_eq!(mode(&dir.join("last").join(&entry)), 0o600, "{entry}");
    }
    // Nothing is left where a run resumes from.
    assert!(!dir.join("stage2.json").exists());

    let status: Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(
        status["last_dir"],
        json!(dir.join("last").display().to_string())
    );

    // The next task starts from research: the kept records are not its state.
    let mut spec = p.read("SPEC.md");
    spec.push_str("- [ ] Say again\n");
    p.write("SPEC.md", &spec);
    p.commit_all("one more");
    let ran = p.run(&["1", "0"]).expect(0);
    ran.stderr_has("next stage: research");
    let title = p
        .shell(r#"jq -r .kern.task.title "$(kern status --dir)/last/stage1.json""#)
        .expect(0)
        .stdout;
    assert_eq!(title, "Say again\n");
    let out = p
        .shell(r#"ls "$(kern status --dir)/runs/""#)
        .expect(0)
        .stdout;
    assert_eq!(out.lines().count(), 2, "two runs: {out}");
}

/// `kern demo --keep` from `home`, a fresh machine's (no KERN_* settings, not even a state
/// root, and no colour); its stderr.
fn demo_keep(home: &Path) -> String {
    kern_in(home)
        .args(["demo", "--keep"])
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env_remove(["KERN_STATE_DIR"])
        .expect(0)
        .stderr
}

#[test]
fn the_kept_demo_prints_kern_commands_that_work_as_printed() {
    let home = tempfile::tempdir().unwrap();
    let err = demo_keep(home.path());
    let root = PathBuf::from(
        err.lines()
            .find_map(|l| l.strip_prefix("kept: "))
            .unwrap_or_else(|| panic!("{err}"))
            .trim(),
    );
    let lines: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("from the kept repository"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::trim)
        .collect();
    let result = (|| -> Result<(), String> {
        let wanted = ["kern status", "kern report", "kern log"];
        if lines.len() != wanted.len() {
            return Err(format!("{wanted:?} expected: {lines:?}\n{err}"));
        }
        for (line, command) in lines.iter().zip(wanted) {
            if !line.ends_with(command) {
                return Err(format!("`{line}` is not `{command}`"));
            }
            let ran = kern_in(home.path())
                .shell(line)
                .env("HOME", home.path())
                .env("XDG_STATE_HOME", home.path().join("state"))
                .env_remove(["KERN_STATE_DIR"])
                .any_exit();
            let stdout = ran.stdout;
            if ran.code != Some(0) || stdout.trim().is_empty() {
                return Err(format!("`{line}` failed: {stdout}{}", ran.stderr));
            }
            if command == "kern report" && !stdout.contains("Add German") {
                return Err(format!("`{line}`: not the demo's run: {stdout}"));
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&root);
    result.unwrap();
}

#[test]
fn a_space_separated_value_of_an_option_with_an_optional_value_is_a_usage_error() {
    let p = Project::new("- [ ] Say hello\n");
    for args in [
        &["--pace", "80"][..],
        &["10", "30", "--pace", "80"],
        &["-n", "--pace", "80"],
    ] {
        p.run(args)
            .expect(2)
            .stderr_has("`--pace 80`")
            .stderr_has("write `--pace=80`");
    }
    assert!(p.prompts("research").is_empty());
    p.run(&["-n", "--pace=80"]).expect(0);
    p.run(&["-n", "--pace"]).expect(0);
}

#[test]
fn subcommand_help_lists_only_what_the_subcommand_takes() {
    let p = Project::new("- [ ] Say hello\n");
    let run_only = ["--agent", "--fallback-agent", "--review-agent", "--sandbox"];
    for sub in ["report", "log", "init", "status"] {
        let help = p.run(&[sub, "--help"]).expect(0).stdout;
        for option in run_only {
            assert!(
                !help.contains(option),
                "`kern {sub} --help` lists {option}:\n{help}"
            );
        }
    }
    let help = p.run(&["log", "--help"]).expect(0).stdout;
    assert!(!help.contains("--spec"), "{help}");
    let help = p.run(&["init", "--help"]).expect(0).stdout;
    assert!(help.contains("--spec"), "{help}");
    let help = p.run(&["doctor", "--help"]).expect(0).stdout;
    assert!(help.contains("--agent"), "{help}");
    // What they take still works.
    p.write("TODO.md", "- [ ] Other\n");
    let status = p.run(&["status", "--spec", "TODO.md"]).expect(0).stdout;
    assert!(status.contains("Other"), "{status}");
    // The code depends on whether this machine has codex logged in; the words do not.
    let doctor = p.run(&["doctor", "--agent", "codex"]).any_exit();
    let err = &doctor.stderr;
    assert!(!err.contains("unexpected argument"), "{err}");
    assert!(err.contains("codex"), "{err}");
}

#[test]
fn log_follow_starts_at_the_latest_run_and_plain_log_prints_them_all() {
    let p = Project::new("- [ ] Say hello\n- [ ] Say bye\n");
    p.run(&["1", "0"]).expect(0);
    p.run(&["1", "0"]).expect(0);
    let all = p.run(&["log"]).expect(0).stdout;
    assert!(
        all.contains("Say hello") && all.contains("Say bye"),
        "{all}"
    );
    let follow = p.run(&["log", "-f"]).expect(0).stdout;
    assert!(follow.contains("[1/1] Say bye"), "{follow}");
    assert!(
        !follow.contains("Say hello"),
        "the earlier run is not replayed:\n{follow}"
    );
}

#[test]
fn the_report_shows_accepted_and_rejected_tasks_as_no_longer_waiting_for_review() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"{slug}.txt": "work of {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["10", "0", "--review"]).expect(0);
    let report = |p: &Project| -> Value {
        serde_json::from_str(&p.run(&["report", "--json"]).expect(0).stdout).unwrap()
    };
    let text = p.run(&["report"]).expect(0).stdout;
    assert!(
        text.contains("on `kern/alpha`, waiting for review"),
        "{text}"
    );
    let before = report(&p);
    assert_eq!(before["runs"][0]["totals"]["to_review"], 2, "{before}");
    assert_eq!(before["runs"][0]["totals"]["committed"], 0, "{before}");

    p.run(&["reject", "Beta"]).expect(0);
    p.run(&["accept"]).expect(0).stderr_has("accepted `Alpha`");
    let after = report(&p);
    let run = &after["runs"][0];
    // A zero count is left out of the JSON.
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    assert_eq!(count(&run["totals"]["to_review"]), 0, "{after}");
    assert_eq!(count(&run["totals"]["committed"]), 1, "{after}");
    assert_eq!(count(&after["totals"]["to_review"]), 0, "{after}");
    let needs = run["needs_you"].to_string();
    assert!(!needs.contains("waits for your review"), "{needs}");
    let outcomes: Vec<(String, String)> = run["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["title"].as_str().unwrap().to_string(),
                t["commit"]["review"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        outcomes.contains(&("Alpha".into(), "accepted".into())),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&("Beta".into(), "rejected".into())),
        "{outcomes:?}"
    );
    let text = p.run(&["report"]).expect(0).stdout;
    assert!(!text.contains("waiting for review"), "{text}");
    assert!(text.contains("\"Add alpha\", accepted"), "{text}");
    assert!(
        text.contains("on `kern/beta`, rejected in review"),
        "{text}"
    );
}

#[test]
fn under_review_a_task_after_a_parked_one_waits_until_it_is_accepted() {
    let p = Project::new("- [ ] Schema\n- [ ] API\n  > **After:** Schema\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"{slug}.txt": "work of {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let ran = p.run(&["10", "0", "--review"]).expect(0);
    assert_eq!(
        p.prompts("research").len(),
        1,
        "only Schema ran:\n{}",
        ran.stderr
    );
    let waits =
        "its After note waits for Schema, parked for review: its work lands with `kern accept`";
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(status.contains(waits), "{status}");
    let dry = p.run(&["-n", "--review"]).expect(0).stdout;
    assert!(dry.contains(waits), "{dry}");

    p.run(&["accept"]).expect(0).stderr_has("accepted `Schema`");
    p.run(&["10", "0", "--review"]).expect(0);
    let prompts = p.prompts("research");
    assert_eq!(prompts.len(), 2, "API ran once Schema was accepted");
    assert!(p.path().join("schema.txt").exists());
}
