//! Issue 43's rough edges, second round, each as a newcomer or a careful user met it with the
//! real binary: a dirty tree that passed every check, the scripted agent's counts in the tree,
//! subcommand typos read as a count, what the docs said that the program did not, a report in a
//! fenced block thrown away at the idle timeout, a commit during implement told twice, the
//! set-aside that did not wait for git's lock, an agent's `git stash`, the rest of `--remote`,
//! criteria headings and deferred titles, the commit message as git cleans it, and tasks that
//! wait for each other.

use crate::support::{kern_in, project};

use project::Project;

// 1. A dirty tree is named, with the fix, before a night stops on it.

#[test]
fn a_dirty_tree_is_named_with_its_fix_by_doctor_and_the_dry_run() {
    let p = Project::new("- [ ] One\n");
    p.write("README.md", "# changed by hand\n");
    p.write("notes.txt", "mine\n");
    let stop = "the work tree has uncommitted changes: README.md, notes.txt";
    let fix = "commit or stash them, or pass --allow-dirty to leave them out of kern's commits";
    let doctor = p.run(&["doctor"]).expect(2);
    doctor.stderr_has(&format!("✗ clean tree: {stop}\n    fix: {fix}\n"));
    let dry = p.run(&["-n"]).expect(0);
    assert!(
        dry.stdout.contains(&format!(
            "would stop: {stop} — {fix} (exit 2, before any agent)\n"
        )),
        "{}",
        dry.stdout
    );
    // What they said is what the run does.
    p.run(&["1", "0"]).expect(2).stderr_has(stop);
    assert!(p.prompts("research").is_empty(), "no agent ran");

    // With --allow-dirty the paths are named as left out, and nothing fails.
    let allowed =
        "uncommitted changes: README.md, notes.txt, left out of kern's commits (--allow-dirty)";
    p.run(&["doctor"])
        .env("KERN_ALLOW_DIRTY", "true")
        .expect(0)
        .stderr_has(&format!("✓ clean tree: {allowed}\n"));
    let dry = p.run(&["-n", "--allow-dirty"]).expect(0);
    assert!(
        dry.stdout.contains(
            "left out:   README.md, notes.txt — uncommitted before the task, so never in kern's commits (--allow-dirty)\n"
        ),
        "{}",
        dry.stdout
    );

    // Committed, the tree is clean for both.
    p.commit_all("my changes");
    p.run(&["doctor"])
        .expect(0)
        .stderr_has("✓ clean tree: no uncommitted changes\n");
    let dry = p.run(&["-n"]).expect(0);
    assert!(!dry.stdout.contains("would stop:"), "{}", dry.stdout);
}

#[test]
fn a_task_that_resumes_on_a_dirty_tree_passes_the_doctor() {
    let p = Project::new("- [~] One\n");
    p.write("half.txt", "the agent's half-done work\n");
    p.run(&["doctor"]).expect(0).stderr_has(
        "✓ clean tree: `One` resumes, on the tree as it is (a new task needs a clean one)\n",
    );
    let dry = p.run(&["-n"]).expect(0);
    assert!(!dry.stdout.contains("would stop:"), "{}", dry.stdout);
}

#[test]
fn init_config_and_prompts_say_to_commit_what_they_wrote() {
    let p = Project::new("- [ ] One\n");
    p.run(&["init", "--config"]).expect(0).stderr_has(
        "kern: commit it before a run (`git add .kern/config.toml && git commit`): a new task starts only on a clean tree\n",
    );
    p.run(&["doctor"])
        .expect(2)
        .stderr_has("✗ clean tree: the work tree has uncommitted changes: .kern/config.toml\n");
    p.commit_all("kern settings");
    p.run(&["init", "--prompts"]).expect(0).stderr_has(
        "kern: commit them before a run (`git add .kern/prompts && git commit`): a new task starts only on a clean tree\n",
    );
    p.run(&["doctor"]).expect(2).stderr_has(
        "✗ clean tree: the work tree has uncommitted changes: .kern/prompts/1_research.md, .kern/prompts/2_implement.md, .kern/prompts/2_tests.md, .kern/prompts/3_commit.md\n",
    );
}

// 3. A word where the count goes: the nearest subcommand, or help.

#[test]
fn a_subcommand_typo_names_the_nearest_command_and_help_is_help() {
    let dir = tempfile::tempdir().unwrap();
    for (typed, meant) in [
        ("stauts", "status"),
        ("dcotor", "doctor"),
        ("reprot", "report"),
    ] {
        let ran = kern_in(dir.path()).args([typed]).expect(2);
        assert_eq!(
            ran.stderr,
            format!(
                "kern: error: `{typed}` is not a command, nor a number of tasks — did you mean `kern {meant}`?\n"
            )
        );
    }
    let help = kern_in(dir.path()).args(["--help"]).expect(0).stdout;
    assert_eq!(kern_in(dir.path()).args(["help"]).expect(0).stdout, help);
    let status_help = kern_in(dir.path())
        .args(["status", "--help"])
        .expect(0)
        .stdout;
    assert_eq!(
        kern_in(dir.path())
            .args(["help", "status"])
            .expect(0)
            .stdout,
        status_help
    );
    // A number out of range keeps clap's own words.
    kern_in(dir.path())
        .args(["0"])
        .expect(2)
        .stderr_has("invalid value '0' for '[ITERATIONS]'");
}

// 2. The scripted agent with its scenario committed in the repository.

#[test]
fn the_scripted_agent_with_its_scenario_in_the_repository_counts_in_the_state_folder() {
    let p = Project::new("- [ ] Add the greeting\n- [ ] Add the farewell\n");
    p.write(
        ".kern/scenario.json",
        r##"{"default": {"implement": {"write": {"notes/{slug}.md": "# {task}\n"}}}}"##,
    );
    p.write(
        ".kern/agent.sh",
        &format!(
            "#!/bin/sh\nexec '{}' scripted-agent .kern/scenario.json\n",
            crate::support::kern_bin().display()
        ),
    );
    std::fs::set_permissions(
        p.path().join(".kern/agent.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    p.commit_all("a scripted agent");
    let run = p
        .run(&["2", "0", "--agent", "program:.kern/agent.sh"])
        .expect(0);
    assert_eq!(
        p.log()[..2],
        ["Add the farewell", "Add the greeting"],
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("violation"), "{}", run.stderr);
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    let books = p.state_dir().join("scripted-agent");
    let counts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(books.join("scenario.counts.json")).unwrap())
            .unwrap();
    assert_eq!(
        counts,
        serde_json::json!({"default/research": 2, "default/implement": 2, "default/commit": 2})
    );
    let calls = std::fs::read_to_string(books.join("scenario.calls.jsonl")).unwrap();
    assert_eq!(calls.lines().count(), 6);
}

// 5. The docs behind the program.

#[test]
fn a_short_runs_html_time_axis_never_repeats_a_label() {
    let p = Project::new("- [ ] One\n");
    p.run(&["1", "0"]).expect(0);
    // The run as a fast machine records it: every event in one second, each stage 10 ms.
    let log = p.state_dir().join("run.jsonl");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = events[0]["ts"].clone();
    let text: String = events
        .into_iter()
        .map(|mut e| {
            e["ts"] = first.clone();
            if e.get("duration_ms").is_some() {
                e["duration_ms"] = 10.into();
            }
            format!("{e}\n")
        })
        .collect();
    std::fs::write(&log, text).unwrap();
    let page = p.outside.path().join("night.html");
    let ran = p
        .run(&["report", "--html", page.to_str().unwrap()])
        .expect(0);
    assert_eq!(
        ran.stdout, "",
        "--html writes the page, and prints no report"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let doc = scraper::Html::parse_document(&html);
    let selector = scraper::Selector::parse("svg.timeline text.axis").unwrap();
    let labels: Vec<String> = doc
        .select(&selector)
        .map(|t| t.text().collect::<String>())
        .filter(|t| t != "cost")
        .collect();
    let mut unique = labels.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(labels.len(), unique.len(), "{labels:?}");
    assert_eq!(labels, ["0", "0.01s", "0.02s", "0.03s"]);
}

#[test]
fn report_help_says_what_html_does() {
    let dir = tempfile::tempdir().unwrap();
    let help = kern_in(dir.path())
        .args(["report", "--help"])
        .expect(0)
        .stdout;
    assert!(!help.contains("Also write"), "{help}");
    assert!(
        help.contains(
            "Write the report to FILE as one self-contained HTML page with a timeline, instead of"
        ),
        "{help}"
    );
}

#[test]
fn the_starter_spec_points_at_the_page_that_has_the_table() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::during::git_in(dir.path(), &["init", "-q"]);
    kern_in(dir.path()).args(["init"]).expect(0);
    let spec = std::fs::read_to_string(dir.path().join("SPEC.md")).unwrap();
    assert!(!spec.contains("README's table"), "{spec}");
    assert!(spec.contains("docs/spec-format.md"), "{spec}");
    let page = include_str!("../../docs/spec-format.md");
    assert!(page.contains("| Kiro, Obsidian Tasks | `[-]`, `[/]`"));
}

#[test]
fn spec_format_says_max_task_files_splits_a_large_task_first() {
    let page = include_str!("../../docs/spec-format.md");
    assert!(
        !page.contains("Still to come: a task\n  split before it is implemented"),
        "docs/spec-format.md still calls it to come"
    );
    assert!(page.contains("--max-task-files"), "its option is named");
}

#[test]
fn a_program_agents_partial_reports_are_read_as_docs_agents_md_says() {
    let page = include_str!("../../docs/agents.md");
    assert!(
        page.contains(
            "A report needs only `notes` (research), `status` (implement) or `verdict`\n(commit)"
        ),
        "docs/agents.md says what kern reads"
    );
    assert!(
        !page.contains("**every** property"),
        "not what kern requires"
    );
    let p = Project::new("- [ ] Add out\n");
    let agent = p.outside.path().join("partial.sh");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
cat > /dev/null
case "$KERN_STAGE" in
  research) echo '{"notes": []}' ;;
  implement) echo done > out.txt; echo '{"status": "SUCCESS", "mood": "ignored"}' ;;
  commit) echo '{"verdict": "COMMIT"}' ;;
esac
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.run(&["1", "0"])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .expect(0);
    assert_eq!(
        p.log()[0],
        "Add out",
        "an empty subject commits with the title"
    );
    // Without the one property it needs, a report is none: the attempt fails.
    let p = Project::new("- [ ] Add out\n");
    std::fs::write(
        &agent,
        "#!/bin/sh\ncat > /dev/null\necho '{\"summary\": \"no status\"}'\n",
    )
    .unwrap();
    p.run(&["1", "0", "--max-attempts", "1", "--level", "0"])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .expect(4)
        .stderr_has("implement stage gave no usable result");
}

// 6. A reported result is the stage's result, in every form.

#[test]
fn a_report_in_a_fenced_block_survives_the_idle_timeout_of_an_agent_that_lingers() {
    let p = Project::new("- [ ] Add out\n");
    let agent = p.outside.path().join("talker.sh");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
cat > /dev/null
report() { printf 'Here is what I found.\n\n```json\n%s\n```\n' "$1"; }
case "$KERN_STAGE" in
  research) report '{"notes": ["read it"]}' ;;
  implement) echo done > out.txt; report '{"status": "SUCCESS", "summary": "wrote out.txt"}' ;;
  commit) report '{"verdict": "COMMIT", "subject": "Add out.txt"}' ;;
esac
sleep 60 &
wait
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = p
        .run(&["1", "0", "--idle-timeout", "1", "--retries", "0"])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .expect(0);
    assert_eq!(p.log()[0], "Add out.txt", "{}", run.stderr);
    assert!(p.read("SPEC.md").contains("read it"), "the research notes");
    // A lingering agent whose text holds no report still times out, as before.
    let p = Project::new("- [ ] Add out\n");
    std::fs::write(
        &agent,
        "#!/bin/sh\ncat > /dev/null\necho 'thinking about it'\nsleep 60 &\nwait\n",
    )
    .unwrap();
    p.run(&[
        "1",
        "0",
        "--idle-timeout",
        "1",
        "--retries",
        "0",
        "--max-attempts",
        "1",
    ])
    .env("KERN_AGENT", format!("program:{}", agent.display()))
    .expect(4)
    .stderr_has("agent printed nothing for 1s");
}

// 7. Say it once, say it right.

#[test]
fn a_commit_during_implement_is_told_once_with_its_subject_and_is_no_violation() {
    let p = Project::new("- [ ] One\n");
    p.scenario(&serde_json::json!({"default": {"implement": {
        "shell": ["echo mine > mine.txt", "git add mine.txt", "git commit -qm 'My own commit'"],
        "write": {"out/{slug}.txt": "done\n"}
    }}}));
    // Unfenced (`--sandbox off`): inside kern's fence `.git` is read-only and this git write
    // fails (fence.rs); it is what kern does after such a write that this test holds.
    let run = p.run(&["1", "0", "--sandbox=off"]).expect(0);
    assert_eq!(p.log()[..3], ["One", "My own commit", "initial"]);
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("My own commit"))
        .collect();
    assert_eq!(said.len(), 1, "told once: {}", run.stderr);
    assert!(
        said[0].ends_with(
            "\"My own commit\" was committed on `master` during the implement stage — kept in history, not part of the task's commit"
        ),
        "{}",
        said[0]
    );
    assert!(!run.stderr.contains("violation"), "{}", run.stderr);
    assert!(!run.stderr.contains("HEAD moved"), "{}", run.stderr);
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.state_dir().join("last/stage2.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["kern"]["violations"], serde_json::json!([]));
    assert_eq!(record["kern"]["outcome"], "succeeded");
    let events = p.run_events("branch_moved");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["stage"], "implement");
}

#[test]
fn status_resumes_a_level_0_task_at_implement() {
    let p = Project::new("- [ ] Fix the typo in the README\n  > **Level:** 0\n");
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(status.contains("resume at: implement\n"), "{status}");
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(json["resume"], "implement");
    // What the run then does.
    let run = p.run(&["1", "0"]).expect(0);
    assert!(p.prompts("research").is_empty(), "{}", run.stderr);
    // A task of level 2 starts at research, as before.
    let p = Project::new("- [ ] Fix the typo in the README\n  > **Level:** 2\n");
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(status.contains("resume at: research\n"), "{status}");
}

#[test]
fn a_task_rejected_in_review_ends_rejected_in_the_reports_json() {
    let p = Project::new("- [ ] One\n");
    p.run(&["1", "0", "--review"]).expect(0);
    p.run(&["reject", "One", "--reason", "not like this"])
        .expect(0);
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["report", "--json"]).expect(0).stdout).unwrap();
    let task = &json["runs"][0]["tasks"][0];
    assert_eq!(task["title"], "One");
    assert_eq!(task["end"], "rejected", "{task}");
    assert_eq!(json["runs"][0]["totals"]["committed"], 0);
    let page = p.run(&["report"]).expect(0).stdout;
    assert!(page.contains("rejected in review"), "{page}");
}

#[test]
fn completions_offer_under_each_subcommand_only_the_options_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let fish = kern_in(dir.path())
        .args(["completions", "fish"])
        .expect(0)
        .utf8_stdout()
        .to_string();
    let offered = |sub: &str, long: &str| {
        fish.lines().any(|l| {
            l.contains(&format!("__fish_kern_using_subcommand {sub}\""))
                && l.contains(&format!(" -l {long} "))
        })
    };
    for (sub, takes, ignores) in [
        (
            "log",
            &["follow", "verbose"][..],
            &["agent", "spec", "sandbox", "quiet"][..],
        ),
        (
            "status",
            &["json", "spec"],
            &["agent", "review-agent", "color"],
        ),
        ("completions", &[][..], &["agent", "spec", "color"]),
        ("doctor", &["agent", "fallback-agent", "spec"], &[]),
    ] {
        for long in takes {
            assert!(offered(sub, long), "kern {sub} --{long} is offered");
        }
        for long in ignores {
            assert!(!offered(sub, long), "kern {sub} --{long} is not offered");
        }
    }
    // Still accepted where it is not offered.
    kern_in(dir.path())
        .args(["completions", "bash", "--agent", "codex"])
        .expect(0);
}

// 8. The set-aside waits for git's lock as the commit does.

#[test]
fn the_set_aside_waits_for_an_index_lock_held_for_a_moment() {
    let p = Project::new("- [ ] One\n");
    // Implement leaves work and is skipped; as it ends, an editor's `git status` takes the index.
    p.scenario(&serde_json::json!({"default": {"implement": {
        "write": {"leftover.txt": "half done\n"},
        "shell": ["touch .git/index.lock"],
        "result": {"status": "SKIPPED", "summary": "not now"}
    }}}));
    // The editor lets go a moment after kern began setting the work aside (its ref is saved
    // first, then the index is written).
    let git_dir = p.path().join(".git");
    let editor = std::thread::spawn(move || {
        let saved = git_dir.join("refs/kern/attempts");
        crate::support::wait_for_file(&saved);
        // Long enough that the old code met the lock, short against the wait kern allows.
        std::thread::sleep(std::time::Duration::from_millis(700));
        std::fs::remove_file(git_dir.join("index.lock")).unwrap();
    });
    // Unfenced (`--sandbox off`): inside kern's fence `.git` is read-only and this git write
    // fails (fence.rs); it is what kern does after such a write that this test holds.
    let run = p.run(&["1", "0", "--sandbox=off"]).expect(0);
    editor.join().unwrap();
    assert_eq!(
        p.dirty(),
        ["SPEC.md"],
        "the work set aside, the Skipped note kern's own\n{}",
        run.stderr
    );
    let kept = crate::support::during::git_in(
        p.path(),
        &["show", "refs/kern/attempts/one/1:leftover.txt"],
    );
    assert_eq!(kept, "half done\n");
    assert!(
        p.read("SPEC.md").contains("> **Skipped:**"),
        "{}",
        p.read("SPEC.md")
    );
}

// 9. An agent's `git stash` in kern's own work tree.

#[test]
fn an_agents_stash_during_implement_goes_back_into_the_tree_and_the_persons_stash_stays() {
    use crate::support::during::git_in;
    let p = Project::new("- [ ] One\n");
    // The person's own stash, from before the run.
    p.write("README.md", "# my draft\n");
    git_in(p.path(), &["stash", "push", "-q", "-m", "my draft"]);
    let mine = git_in(p.path(), &["rev-parse", "refs/stash"]);
    p.scenario(&serde_json::json!({"default": {"implement": {
        "write": {"out/{slug}.txt": "done\n", "src/new.rs": "fn main() {}\n"},
        "shell": ["git stash push -q -u -m agent"]
    }}}));
    // Unfenced (`--sandbox off`): inside kern's fence `.git` is read-only and this git write
    // fails (fence.rs); it is what kern does after such a write that this test holds.
    let run = p.run(&["1", "0", "--sandbox=off"]).expect(0);
    // The task went on as if nothing had happened: no restart, committed with its work.
    assert_eq!(p.prompts("research").len(), 1, "{}", run.stderr);
    assert_eq!(p.log()[0], "One", "{}", run.stderr);
    let files = p.head_files();
    assert!(files.contains(&"out/one.txt".to_string()), "{files:?}");
    assert!(files.contains(&"src/new.rs".to_string()), "{files:?}");
    assert!(
        p.read("SPEC.md").starts_with("- [x] One"),
        "{}",
        p.read("SPEC.md")
    );
    // The person's stash is the only one listed, as it was.
    let list = git_in(p.path(), &["stash", "list", "--format=%H %gs"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.starts_with(mine.trim()), "{list}");
    // The agent's is kept under refs/kern/agent/ and named, as a violation.
    let kept = git_in(
        p.path(),
        &["for-each-ref", "--format=%(refname)", "refs/kern/agent/"],
    );
    let kept: Vec<&str> = kept.lines().collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].starts_with("refs/kern/agent/one/") && kept[0].ends_with("/stash"));
    assert_eq!(
        git_in(p.path(), &["show", &format!("{}^3:out/one.txt", kept[0])]),
        "done\n",
        "the untracked files, as `git stash -u` keeps them"
    );
    assert_eq!(
        git_in(p.path(), &["show", &format!("{}:SPEC.md", kept[0])]),
        "- [~] One\n  > **Research:**\n  >\n  > - read the code for One\n",
        "kern's [~] and note went into the stash, and came back out"
    );
    run.stderr_has(&format!(
        "violation: implement stage ran `git stash`: its changes are put back in the tree; the stash is kept at `{}` and taken out of `git stash list`",
        kept[0]
    ));
}

#[test]
fn a_stash_is_unstashed_where_the_tree_is_as_it_left_it_and_the_list_is_left_empty() {
    use crate::support::during::git_in;
    let p = Project::new("- [ ] One\n");
    p.scenario(&serde_json::json!({"default": {"implement": {
        "shell": [
            "printf 'stashed\\n' > README.md",
            "printf 'stashed\\n' > notes.txt && git add notes.txt",
            "git stash -q",
            "printf 'written after\\n' > README.md"
        ]
    }}}));
    // Unfenced (`--sandbox off`): inside kern's fence `.git` is read-only and this git write
    // fails (fence.rs); it is what kern does after such a write that this test holds.
    let run = p.run(&["1", "0", "--sandbox=off"]).expect(0);
    assert_eq!(p.log()[0], "One", "{}", run.stderr);
    // README.md was written again after the stash: that version stays, the stash has the other.
    assert_eq!(
        git_in(p.path(), &["show", "HEAD:README.md"]),
        "written after\n"
    );
    assert_eq!(git_in(p.path(), &["show", "HEAD:notes.txt"]), "stashed\n");
    run.stderr_has("(README.md changed after the stash, so left as they are; the stash has the earlier version)");
    assert_eq!(
        git_in(p.path(), &["stash", "list"]),
        "",
        "no stash was there before"
    );
    assert_eq!(
        git_in(p.path(), &["show", "refs/kern/agent/one/1/stash:README.md"]),
        "stashed\n"
    );
}

// 10. `--remote`, the rest.

/// A bare remote made from a project holding `spec`, and one clone of it to run kern in.
struct Machine {
    seed: Project,
    remote: std::path::PathBuf,
    clone: std::path::PathBuf,
}

impl Machine {
    fn new(spec: &str) -> Machine {
        use crate::support::during::git_in;
        let seed = Project::new(spec);
        let outside = seed.outside.path();
        let remote = outside.join("remote.git");
        git_in(
            outside,
            &[
                "clone",
                "-q",
                "--bare",
                seed.path().to_str().unwrap(),
                "remote.git",
            ],
        );
        git_in(
            outside,
            &["clone", "-q", remote.to_str().unwrap(), "machine"],
        );
        let clone = outside.join("machine");
        git_in(&clone, &["config", "user.name", "Test Person"]);
        git_in(&clone, &["config", "user.email", "test@example.com"]);
        Machine {
            seed,
            remote,
            clone,
        }
    }

    /// `kern ARGS` in the clone, with the seed's scripted agent and its own state root.
    fn kern(&self, args: &[&str]) -> project::KernRun<'_> {
        self.seed.run(args).current_dir(&self.clone).env(
            "KERN_STATE_DIR",
            self.seed.outside.path().join("state-machine"),
        )
    }

    /// `git ARGS` in the clone.
    fn git(&self, args: &[&str]) -> String {
        crate::support::during::git_in(&self.clone, args)
    }

    /// A `pre-push` hook in the clone: it logs its arguments and stdin to `log`, then exits
    /// with `code`.
    fn pre_push(&self, log: &std::path::Path, code: i32) {
        let hook = self.clone.join(".git/hooks/pre-push");
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\necho \"args: $*\" >> '{0}'\ncat >> '{0}'\necho 'tests failed on this machine' >&2\nexit {code}\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
}

#[test]
fn the_persons_pre_push_hook_runs_as_git_push_runs_it() {
    let m = Machine::new("- [ ] One\n");
    let log = m.seed.outside.path().join("pre-push.log");
    m.pre_push(&log, 0);
    m.kern(&["1", "0", "--remote", "origin"]).expect(0);
    let landed = crate::support::during::git_in(&m.remote, &["rev-parse", "master"]);
    let logged = std::fs::read_to_string(&log).expect("the hook ran");
    assert!(
        logged.starts_with(&format!("args: origin {}\n", m.remote.display())),
        "{logged}"
    );
    // `<local ref> <local sha> <remote ref> <remote sha>` on stdin, as git gives it.
    assert!(
        logged.lines().any(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            fields.len() == 4 && fields[1] == landed.trim() && fields[2] == "refs/heads/master"
        }),
        "the landing's line: {logged}"
    );
    // Pushes of kern's own refs alone (claims) do not run it: no line names refs/heads/ but
    // the landing's.
    assert_eq!(
        logged.lines().filter(|l| l.starts_with("args: ")).count(),
        1,
        "{logged}"
    );
}

#[test]
fn a_pre_push_hook_that_declines_keeps_the_work_off_the_remote_and_says_so() {
    let m = Machine::new("- [ ] One\n");
    let log = m.seed.outside.path().join("pre-push.log");
    m.pre_push(&log, 1);
    let before = crate::support::during::git_in(&m.remote, &["rev-parse", "master"]);
    let run = m.kern(&["1", "0", "--remote", "origin"]).expect(4);
    run.stderr_has("pre-push hook declined");
    run.stderr_has("tests failed on this machine");
    assert_eq!(
        crate::support::during::git_in(&m.remote, &["rev-parse", "master"]),
        before,
        "nothing landed"
    );
    assert!(
        m.git(&["branch", "--list", "kern/one"])
            .contains("kern/one"),
        "the work is kept here"
    );
    // --no-verify skips it, as `git push --no-verify` does.
    std::fs::remove_file(&log).unwrap();
    let m = Machine::new("- [ ] One\n");
    m.pre_push(&log, 1);
    m.kern(&["1", "0", "--remote", "origin", "--no-verify"])
        .expect(0);
    assert!(!log.exists(), "the hook did not run");
}

#[test]
fn status_remote_json_lists_the_claims_as_one_json_object() {
    let m = Machine::new("- [ ] One\n- [ ] Two\n");
    let empty = m.kern(&["status", "--remote", "--json"]).expect(0);
    let json: serde_json::Value = serde_json::from_str(&empty.stdout).unwrap();
    assert_eq!(json, serde_json::json!({"remote": "origin", "claims": []}));
    m.kern(&["claim", "one", "--remote", "origin"]).expect(0);
    let held = m
        .kern(&["status", "--remote", "origin", "--json"])
        .expect(0);
    let json: serde_json::Value = serde_json::from_str(&held.stdout).unwrap();
    let claim = &json["claims"][0];
    assert_eq!(claim["key"], "one", "{json}");
    assert_eq!(claim["lapsed"], false);
    assert!(claim["pid"].as_u64().is_some(), "{json}");
    assert!(claim["host"].as_str().is_some(), "{json}");
    assert!(claim["expires"].as_str().unwrap().ends_with('Z'), "{json}");
    assert_eq!(claim["id"].as_str().unwrap().len(), 40, "{json}");
    // A remote the clone lacks: still one JSON object, the error's.
    let bad = m
        .kern(&["status", "--remote", "upstream", "--json"])
        .expect(2);
    let json: serde_json::Value = serde_json::from_str(&bad.stdout).unwrap();
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--remote `upstream`"),
        "{json}"
    );
}

#[test]
fn attempt_refs_a_published_note_names_are_on_the_remote() {
    use crate::support::during::git_in;
    let m = Machine::new("- [ ] One\n");
    m.seed
        .scenario(&serde_json::json!({"default": {"implement": {
            "write": {"half.txt": "half done\n"},
            "result": {"status": "SKIPPED", "summary": "not now"}
        }}}));
    m.kern(&["1", "0", "--remote", "origin"]).expect(0);
    let spec = git_in(&m.remote, &["show", "master:SPEC.md"]);
    let named: Vec<&str> = spec
        .split('`')
        .filter(|w| w.starts_with("refs/kern/attempts/"))
        .collect();
    assert!(
        !named.is_empty(),
        "the published note names the set-aside: {spec}"
    );
    for name in named {
        let there = git_in(&m.remote, &["rev-parse", "--verify", "-q", name]);
        assert_eq!(
            git_in(&m.remote, &["show", &format!("{}:half.txt", there.trim())]),
            "half done\n",
            "{name} on the remote"
        );
    }
}

#[test]
fn local_checkpoint_and_remote_refs_are_pruned_once_a_task_landed() {
    let m = Machine::new("- [ ] One\n");
    // A checkpoint is made while the task runs: implement waits until the test saw it.
    let seen = m.seed.outside.path().join("checkpoint-seen");
    m.seed
        .scenario(&serde_json::json!({"default": {"implement": {
            "write": {"out/{slug}.txt": "done\n"},
            "shell": [format!("while [ ! -e '{}' ]; do sleep 0.05; done", seen.display())]
        }}}));
    let child = m
        .kern(&["1", "0", "--remote", "origin", "--claim-ttl", "3s"])
        .spawn();
    let checkpoint = m.clone.join(".git/refs/kern/checkpoint");
    crate::support::wait_for_file(&checkpoint);
    std::fs::write(&seen, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        crate::support::during::git_in(&m.remote, &["log", "-1", "--format=%s", "master"]),
        "One\n"
    );
    let left = m.git(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/kern/checkpoint/",
        "refs/kern/remote/",
    ]);
    assert_eq!(
        left, "",
        "kern's bookkeeping refs for the landed task are gone"
    );
}

/// A folder holding a fake `git` that says it is `version` and hands everything else to the
/// real git.
fn fake_git(version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let git = dir.path().join("git");
    std::fs::write(
        &git,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'git version {version}'; exit 0; fi\nexec '{}' \"$@\"\n",
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn doctor_checks_git_on_path_and_the_version_remote_needs() {
    let m = Machine::new("- [ ] One\n");
    let path = |dir: &std::path::Path| {
        format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    };
    // A git new enough: named with its version.
    let good = fake_git("2.47.3");
    // `--remote` as a night sets it: in .kern/config.toml or KERN_REMOTE.
    m.kern(&["doctor"])
        .env("KERN_REMOTE", "origin")
        .env("PATH", path(good.path()))
        .expect(0)
        .stderr_has(&format!(
            "✓ git: git version 2.47.3 (`{}/git`), enough for --remote (2.29 or newer)\n",
            good.path().display()
        ));
    // Too old for --remote's fetch and push: a failure, with the fix.
    let old = fake_git("2.20.1");
    let doctor = m
        .kern(&["doctor"])
        .env("KERN_REMOTE", "origin")
        .env("PATH", path(old.path()))
        .expect(2);
    doctor.stderr_has("✗ git: git version 2.20.1 is older than --remote needs (2.29 or newer)\n");
    doctor.stderr_has("    fix: install git 2.29 or newer and put it first on PATH\n");
    // Without --remote, an old git is no problem here.
    m.kern(&["doctor"])
        .env("PATH", path(old.path()))
        .expect(0)
        .stderr_has("✓ git: git version 2.20.1 (`");
    // No git at all: --remote cannot work.
    let empty = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v sh"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
        empty.path().join("sh"),
    )
    .unwrap();
    m.kern(&["doctor"])
        .env("KERN_REMOTE", "origin")
        .env("PATH", empty.path())
        .expect(2)
        .stderr_has("✗ git: `git` not found on PATH — --remote runs git to fetch and push\n");
}

// 11. Picks: criteria headings with a number or an emoji; deferred titles.

#[test]
fn a_criteria_heading_with_a_number_or_an_emoji_holds_criteria_not_tasks() {
    for heading in [
        "## 9. Acceptance Criteria",
        "## 🎯 Success Criteria",
        "### 2) Definition of Done",
    ] {
        let p = Project::new(&format!(
            "# Plan\n\n## 8. Add login\n\n- [ ] Add login\n\n{heading}\n\n- [ ] a user logs in\n- [ ] a wrong password is refused\n"
        ));
        let status: serde_json::Value =
            serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
        assert_eq!(status["counts"]["pending"], 1, "{heading}: {status}");
        assert_eq!(status["next"]["title"], "Add login", "{heading}");
    }
}

#[test]
fn future_later_and_someday_in_a_title_mark_it_deferred() {
    let p = Project::new(
        "- [ ] Dark mode (future)\n- [ ] Rewrite in Rust (later)\n- [ ] Someday: plugins\n- [ ] Someday port it to Windows\n- [ ] Offline sync, someday\n- [ ] Add the futures API\n",
    );
    let status: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(status["next"]["title"], "Add the futures API", "{status}");
    let dry = p.run(&["-n"]).expect(0).stdout;
    for title in [
        "Dark mode (future)",
        "Rewrite in Rust (later)",
        "Someday: plugins",
        "Someday port it to Windows",
        "Offline sync, someday",
    ] {
        assert!(
            dry.contains(&format!(
                "`{title}` (its title says it waits; kern leaves it)"
            )),
            "{title}: {dry}"
        );
    }
}

// 12. The commit message as `git commit` cleans it.

#[test]
fn the_commit_message_is_cleaned_by_the_persons_settings_as_git_commit_cleans_it() {
    use crate::support::during::git_in;
    let body = "The parser reads dates.\n; a line git would strip\n# a hash line\n\n\n  trailing spaces   \nThe end.";
    // (settings, the body git commit -m keeps)
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[],
            "The parser reads dates.\n; a line git would strip\n# a hash line\n\n  trailing spaces\nThe end.",
        ),
        (
            &[("commit.cleanup", "strip")],
            "The parser reads dates.\n; a line git would strip\n\n  trailing spaces\nThe end.",
        ),
        (
            &[("commit.cleanup", "strip"), ("core.commentChar", ";")],
            "The parser reads dates.\n# a hash line\n\n  trailing spaces\nThe end.",
        ),
        (
            &[("commit.cleanup", "strip"), ("core.commentChar", "auto")],
            "The parser reads dates.\n; a line git would strip\n# a hash line\n\n  trailing spaces\nThe end.",
        ),
        (
            &[("commit.cleanup", "verbatim")],
            "The parser reads dates.\n; a line git would strip\n# a hash line\n\n\n  trailing spaces   \nThe end.",
        ),
    ];
    for (settings, kept) in cases {
        let p = Project::new("- [ ] Parse dates\n");
        for (key, value) in *settings {
            git_in(p.path(), &["config", key, value]);
        }
        p.scenario(&serde_json::json!({"default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Parse dates", "body": body}}
        }}));
        p.run(&["1", "0"]).expect(0);
        let message = git_in(p.path(), &["log", "-1", "--format=%B"]);
        // What `git commit -m` makes of the same message, with the same settings.
        let scratch = tempfile::tempdir().unwrap();
        git_in(scratch.path(), &["init", "-q"]);
        for (key, value) in *settings {
            git_in(scratch.path(), &["config", key, value]);
        }
        git_in(scratch.path(), &["config", "user.name", "T"]);
        git_in(scratch.path(), &["config", "user.email", "t@e"]);
        let kern_message = message.trim_end_matches('\n');
        git_in(
            scratch.path(),
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("Parse dates\n\n{body}"),
            ],
        );
        let gits = git_in(scratch.path(), &["log", "-1", "--format=%B"]);
        assert_eq!(
            kern_message
                .strip_prefix("Parse dates\n\n")
                .map(|b| b.split("\n\nSPEC.md changes").next().unwrap_or(b)),
            Some(*kept),
            "{settings:?}"
        );
        assert_eq!(
            gits.trim_end_matches('\n'),
            format!("Parse dates\n\n{kept}"),
            "the expectation is git's own: {settings:?}"
        );
    }
}

// 13. Tasks that wait for each other.

#[test]
fn a_cycle_of_after_notes_is_named_as_one_by_status_dry_run_doctor_and_a_run() {
    let p = Project::new(
        "- [ ] Alpha\n  > **After:** Beta\n- [ ] Beta\n  > **After:** Alpha\n- [ ] Gamma\n",
    );
    let said = "SPEC.md:1:3: `Alpha` (SPEC.md:1) waits for `Beta` (SPEC.md:3), which waits for `Alpha`: none of them can start — remove one of their After notes (SPEC.md:2 or SPEC.md:4)";
    p.run(&["status"]).expect(2).stderr_has(said);
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(2).stdout).unwrap();
    assert_eq!(json["error"]["line"], 1, "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("(SPEC.md:3), which waits for `Alpha`"),
        "{json}"
    );
    p.run(&["-n"]).expect(2).stderr_has(said);
    p.run(&["doctor"]).expect(2).stderr_has(
        "✗ SPEC.md: `SPEC.md:1:3`: `Alpha` (SPEC.md:1) waits for `Beta` (SPEC.md:3), which waits for `Alpha`: none of them can start\n    fix: remove one of their After notes (SPEC.md:2 or SPEC.md:4)\n",
    );
    p.run(&["1", "0"]).expect(2).stderr_has(said);
    assert!(p.prompts("research").is_empty(), "no agent ran");
    // A longer ring, through three tasks.
    let p = Project::new(
        "- [ ] A\n  > **After:** B\n- [ ] B\n  > **After:** C\n- [ ] C\n  > **After:** A\n",
    );
    p.run(&["status"]).expect(2).stderr_has(
        "`A` (SPEC.md:1) waits for `B` (SPEC.md:3), which waits for `C` (SPEC.md:5), which waits for `A`: none of them can start — remove one of their After notes (SPEC.md:2, SPEC.md:4 or SPEC.md:6)",
    );
}

#[test]
fn a_run_whose_open_tasks_all_wait_on_a_blocked_task_says_so_and_is_not_done() {
    let p = Project::new(
        "- [!] Beta\n  > **Blocked:** needs the API key\n- [ ] Alpha\n  > **After:** Beta\n",
    );
    let run = p.run(&["1", "0"]).expect(4);
    let said = "every open task waits: `Alpha` (SPEC.md:3) waits for `Beta` (SPEC.md:1), which is blocked [!] — unblock what they wait for (set it back to [ ] once you did what its note asks), or remove the After notes";
    run.stderr_has(&format!("run ended: {said}"));
    assert!(!run.stderr.contains("nothing left to do"), "{}", run.stderr);
    assert!(p.prompts("research").is_empty());
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(report.contains(said), "{report}");
    // kern status says why the waiting task is not taken: what it waits for is blocked.
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("line 3 `Alpha`: its After note waits for Beta (line 1, blocked [!])"),
        "{status}"
    );
    // Not when nothing is open: a night that finished every task is done.
    let p = Project::new("- [x] Beta\n- [x] Alpha\n  > **After:** Beta\n");
    p.run(&["1", "0"])
        .expect(0)
        .stderr_has("nothing left to do");
}
