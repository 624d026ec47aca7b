//! The loop end to end: the real `kern` binary in temporary repositories with the built-in
//! scripted agent (DESIGN.md sections 1, 5, 6, 8, 11; issue "The loop").

use crate::support::{project, wait_for_file};

use std::time::Duration;

use project::Project;
use serde_json::json;

const FIVE_TASKS: &str =
    "# Roadmap\n\n- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n- [ ] Delta\n- [ ] Epsilon\n";

fn working_agent() -> serde_json::Value {
    json!({
        "default": {
            "research": {"result": {"notes": ["look at out/", "keep it small"]}},
            "implement": {"write": {"out/{slug}.txt": "done: {task}\n"},
                          "result": {"status": "SUCCESS", "summary": "wrote out/{slug}.txt", "learnings": ["{task} lives in out/"]}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}", "learnings": ["reviewed {task}"]}}
        }
    })
}

#[test]
fn five_tasks_become_five_commits_and_a_second_run_finds_nothing() {
    let p = Project::new(FIVE_TASKS);
    p.scenario(&working_agent());
    let out = p.run(&["10", "0"]).expect(0);
    let err = &out.stderr;
    let log = p.log();
    assert_eq!(
        log[..5],
        [
            "Add epsilon",
            "Add delta",
            "Add gamma",
            "Add beta",
            "Add alpha"
        ],
        "{log:?}"
    );
    assert_eq!(log.len(), 6);
    let spec = p.read("SPEC.md");
    assert_eq!(spec.matches("- [x] ").count(), 5, "{spec}");
    assert_eq!(spec.matches("> **Research:**").count(), 5, "{spec}");
    assert!(spec.contains("look at out/"), "{spec}");
    let learnings = p.read("LEARNINGS.md");
    assert!(learnings.contains("— Gamma"), "{learnings}");
    assert!(learnings.contains("Gamma lives in out/"), "{learnings}");
    assert!(learnings.contains("reviewed Gamma"), "{learnings}");
    for file in [
        "out/alpha.txt",
        "out/epsilon.txt",
        "SPEC.md",
        "LEARNINGS.md",
    ] {
        assert!(
            p.head_files().contains(&file.to_string()),
            "{file} not committed"
        );
    }
    assert!(p.dirty().is_empty(), "tree left dirty: {:?}", p.dirty());
    let state = p.state_dir();
    for f in [
        "stage1.json",
        "stage2.json",
        "stage3.json",
        "stage2.jsonl",
        "stage1.prompt.md",
    ] {
        assert!(!state.join(f).exists(), "{f} left behind");
    }
    assert!(state.join("run.jsonl").exists());
    assert!(
        err.contains("Add alpha"),
        "summary names the commits: {err}"
    );

    let again = p.run(&["3", "0"]).expect(0);
    let err = &again.stderr;
    assert!(err.contains("nothing left"), "{err}");
    assert_eq!(p.log().len(), 6);
}

#[test]
fn decomposed_task_gets_subtasks_and_the_parent_completes_with_the_last() {
    let p = Project::new("- [ ] Big thing\n- [ ] Small thing\n");
    let mut s = working_agent();
    s["tasks"] = json!([{"match": "Big thing", "implement": [
        {"result": {"status": "DECOMPOSED", "summary": "too big", "subtasks": ["Part one", "Part two"]}}
    ]}]);
    p.scenario(&s);
    p.run(&["10", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [x] Big thing\n"), "{spec}");
    assert!(spec.contains("  - [x] Part one\n"), "{spec}");
    assert!(spec.contains("  - [x] Part two\n"), "{spec}");
    assert!(spec.contains("- [x] Small thing"), "{spec}");
    let log = p.log();
    assert_eq!(
        log[..3],
        ["Add small-thing", "Add part-two", "Add part-one"],
        "{log:?}"
    );
}

#[test]
fn skipped_task_goes_back_to_pending_with_a_note_and_the_next_is_taken() {
    let p = Project::new("- [ ] Later\n- [ ] Now\n");
    let mut s = working_agent();
    s["tasks"] = json!([{"match": "Later", "implement": {"result": {"status": "SKIPPED", "summary": "needs a decision from a person"}}}]);
    p.scenario(&s);
    p.run(&["2", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [ ] Later\n"), "{spec}");
    assert!(
        spec.contains("> **Skipped:** needs a decision from a person"),
        "{spec}"
    );
    assert!(spec.contains("- [x] Now"), "{spec}");
}

#[test]
fn three_failures_ask_for_decomposition_and_exhaustion_blocks_with_exit_4() {
    let p = Project::new("- [ ] Hard\n");
    let failures: Vec<serde_json::Value> = (1..=6)
        .map(|n| json!({"result": {"status": "FAILED", "summary": "no", "attempt_note": format!("approach number {} broke {}", n, "abcdef".chars().nth(n - 1).unwrap())}}))
        .collect();
    let s = json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": failures,
        "commit": {"result": {"verdict": "COMMIT", "subject": "x"}}
    }});
    p.scenario(&s);
    p.run(&["3", "0", "--max-attempts", "3"]).expect(4);
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 3:** approach number 3"),
        "{spec}"
    );
    assert!(spec.starts_with("- [~] Hard\n"), "{spec}");
    // The fourth implement prompt demands decomposition.
    p.run(&["1", "0", "--max-attempts", "3"]).expect(4);
    let prompts = p.prompts("implement");
    assert_eq!(prompts.len(), 4);
    assert!(
        prompts[3].contains("Decomposition is required"),
        "4th implement prompt: {}",
        prompts[3]
    );
    assert!(
        !prompts[2].contains("Decomposition is required"),
        "3rd implement prompt: {}",
        prompts[2]
    );
    // Its FAILED answers the request ("cannot be split"): blocked at once, exit 4 (issue 39:
    // it used to be asked twice more).
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Hard\n"), "{spec}");
    assert!(
        spec.contains("> **Attempt 4:** approach number 4"),
        "{spec}"
    );
    assert!(!spec.contains("> **Attempt 5:**"), "{spec}");
    assert!(
        spec.contains("> **Blocked:** the decomposition request was answered: approach number 4 broke d — after 3 failed attempts; a person must look. Tried: 1) approach number 1 broke a; 2) approach number 2 broke b; 3) approach number 3 broke c"),
        "{spec}"
    );
    let out = p.run(&["5", "0", "--max-attempts", "3"]).expect(4);
    assert!(out.stderr.contains("blocked"), "{}", out.stderr);
    assert_eq!(p.prompts("implement").len(), 4, "nothing more is paid for");
}

#[test]
fn the_same_failure_blocks_early_once_decomposition_was_asked_for() {
    let p = Project::new("- [ ] Stuck\n- [ ] Fine\n");
    let mut s = working_agent();
    s["tasks"] = json!([{"match": "Stuck", "implement": {"result": {"status": "FAILED", "summary": "no", "attempt_note": "npm is not installed"}}}]);
    p.scenario(&s);
    p.run(&["10", "0"]).expect(4);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Stuck\n"), "{spec}");
    // Three alike failures ask for decomposition; the fourth, under that request, blocks.
    assert!(
        spec.contains("> **Attempt 4:** npm is not installed"),
        "{spec}"
    );
    assert!(!spec.contains("> **Attempt 5:**"), "{spec}");
    assert!(
        spec.contains("> **Blocked:** the decomposition request was answered: npm is not installed — after 3 failed attempts; a person must look. Tried: 1) npm is not installed (3 attempts)"),
        "{spec}"
    );
    assert!(
        p.prompts("implement")
            .iter()
            .filter(|prompt| prompt.contains("Decomposition is required"))
            .count()
            == 1,
        "one decomposition request"
    );
    assert!(spec.contains("- [x] Fine"), "the loop moves on: {spec}");
}

#[test]
fn check_gate_failure_is_an_attempt_and_a_pass_commits() {
    let p = Project::new("- [ ] Checked\n");
    let mut s = working_agent();
    s["default"]["implement"] = json!([
        {"write": {"flag.txt": "bad\n"}, "result": {"status": "SUCCESS", "summary": "first try"}},
        {"write": {"flag.txt": "good\n"}, "result": {"status": "SUCCESS", "summary": "second try"}}
    ]);
    p.scenario(&s);
    // The flag is missing before the task: a baseline check would stop the run.
    p.run(&[
        "3",
        "0",
        "--check",
        "grep -q good flag.txt || { echo flag is bad; exit 1; }",
        "--check-baseline",
        "skip",
    ])
    .expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("> **Attempt 1:** check `"), "{spec}");
    assert!(spec.contains("flag is bad"), "{spec}");
    assert!(spec.contains("- [x] Checked"), "{spec}");
    assert_eq!(p.log()[0], "Add checked");
    assert_eq!(p.read("flag.txt"), "good\n");
}

#[test]
fn task_check_note_wins_over_the_flag() {
    let p = Project::new("- [ ] Own check\n  > **Check:** test -f made.txt\n");
    let mut s = working_agent();
    s["default"]["implement"] =
        json!({"write": {"made.txt": "x"}, "result": {"status": "SUCCESS", "summary": "s"}});
    p.scenario(&s);
    p.run(&["1", "0", "--check", "false", "--check-baseline", "skip"])
        .expect(0);
    assert!(p.read("SPEC.md").contains("- [x] Own check"));
}

#[test]
fn review_reject_then_commit() {
    let p = Project::new("- [ ] Reviewed\n");
    let mut s = working_agent();
    s["default"]["commit"] = json!([
        {"result": {"verdict": "REJECT", "subject": "", "reason": "remove the debug print"}},
        {"result": {"verdict": "COMMIT", "subject": "Add reviewed thing"}}
    ]);
    p.scenario(&s);
    p.run(&["3", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** review rejected the change: remove the debug print"),
        "{spec}"
    );
    assert!(spec.contains("- [x] Reviewed"), "{spec}");
    assert_eq!(p.log()[0], "Add reviewed thing");
}

#[test]
fn unfenced_research_that_writes_is_reverted_and_recorded() {
    // Without kern's fence (`--sandbox off`): inside it research's tree is a private layer and
    // nothing it writes reaches the tree (fence::a_read_only_stage_writes_only_its_private_
    // layer_and_the_tree_never_changes); unfenced, the audit after the stage is the guarantee.
    let p = Project::new("- [ ] Look only\n");
    let mut s = working_agent();
    s["default"]["research"] = json!([
        {"write": {"sneaky.txt": "x", "README.md": "changed\n"}, "result": {"notes": ["n"]}},
        {"result": {"notes": ["n"]}}
    ]);
    p.scenario(&s);
    let out = p.run(&["1", "0", "--sandbox=off"]).expect(4);
    let err = &out.stderr;
    assert!(err.contains("violation"), "{err}");
    assert!(!p.path().join("sneaky.txt").exists());
    assert_eq!(p.read("README.md"), "# scratch\n");
    let spec = p.read("SPEC.md");
    assert!(spec.contains("read-only but changed"), "{spec}");
    let runlog = std::fs::read_to_string(p.state_dir().join("run.jsonl")).unwrap();
    assert!(runlog.contains("\"event\":\"violation\""), "{runlog}");
    assert!(runlog.contains("sneaky.txt"), "{runlog}");
}

/// Without kern's fence (`--sandbox off`; inside it `.git` is read-only and the commit fails,
/// `fence.rs`), the audit after the stage is the guarantee.
#[test]
fn unfenced_implement_that_commits_keeps_its_commit_in_history_and_says_so_once() {
    let p = Project::new("- [ ] Commit-happy\n");
    let mut s = working_agent();
    s["default"]["implement"] = json!({
        "write": {"work.txt": "w\n"},
        "shell": ["git add work.txt && git -c user.name=a -c user.email=a@b commit -qm 'agent commit'"],
        "result": {"status": "SUCCESS", "summary": "s"}
    });
    p.scenario(&s);
    let out = p.run(&["1", "0", "--sandbox=off"]).expect(0);
    let err = &out.stderr;
    // kern cannot tell the agent's commit from the person's in this work tree: it is told
    // once, with its subject, and is no violation (issue 43).
    assert!(!err.contains("violation"), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("\"agent commit\""))
            .count(),
        1,
        "{err}"
    );
    let log = p.log();
    assert_eq!(
        log[..2],
        ["Add commit-happy", "agent commit"],
        "agent commit kept, kern's on top: {log:?}"
    );
    assert_eq!(p.run_events("branch_moved").len(), 1);
}

#[test]
fn a_hand_edit_during_a_stage_survives_and_the_new_task_is_done_later() {
    let p = Project::new("- [ ] First\n");
    let mut s = working_agent();
    // While implementing First, a person appends a task and a note (the agent's shell does it
    // for them at a well-defined moment).
    s["tasks"] = json!([{"match": "First", "implement": {
        "write": {"out/first.txt": "1"},
        "shell": ["printf '  personal note\\n- [ ] Added by hand\\n' >> SPEC.md"],
        "result": {"status": "SUCCESS", "summary": "s"}
    }}]);
    p.scenario(&s);
    p.run(&["5", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [x] Added by hand"), "{spec}");
    assert!(spec.contains("personal note"), "{spec}");
    assert!(spec.contains("- [x] First"), "{spec}");
}

#[test]
fn max_cost_stops_after_the_stage_that_crosses_it_with_exit_6() {
    let p = Project::new("- [ ] One\n- [ ] Two\n");
    let mut s = working_agent();
    s["default"]["implement"]["cost_usd"] = json!(5.0);
    p.scenario(&s);
    let out = p.run(&["5", "0", "--max-cost", "1"]).expect(6);
    let err = &out.stderr;
    assert!(err.contains("--max-cost"), "{err}");
    assert!(
        p.prompts("commit").is_empty(),
        "the review after the crossing stage never started"
    );
    assert_eq!(p.log().len(), 1, "nothing committed yet");
    assert!(
        p.state_dir().join("stage2.json").exists(),
        "resume state kept"
    );
    // A later run with budget left resumes at the review, without implementing again.
    p.run(&["1", "0"]).expect(0);
    assert_eq!(
        p.prompts("implement").len(),
        1,
        "implement did not run again"
    );
    assert_eq!(p.log()[0], "Add one");
}

/// Regression: the budget was checked only between iterations, so a run whose research had
/// spent it still ran implement and review (found by the real-agent tier, tests/integration/real_agent.rs).
#[test]
fn max_cost_spent_in_research_stops_before_implement_and_the_next_run_resumes() {
    let p = Project::new("- [ ] One\n");
    let mut s = working_agent();
    s["default"]["research"]["cost_usd"] = json!(5.0);
    p.scenario(&s);
    let out = p.run(&["5", "0", "--max-cost", "1"]).expect(6);
    let err = &out.stderr;
    assert_eq!(p.prompts("research").len(), 1);
    assert_eq!(p.prompts("implement").len(), 0, "{err}");
    assert_eq!(p.log(), ["initial"]);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [~] One\n"), "{spec}");
    assert!(spec.contains("look at out/"), "{spec}");
    assert!(p.state_dir().join("stage1.json").is_file());

    p.run(&["5", "0"]).expect(0);
    assert_eq!(p.prompts("research").len(), 1, "research ran again");
    assert_eq!(p.prompts("implement").len(), 1);
    assert_eq!(p.log(), ["Add one", "initial"]);
}

#[test]
fn only_skips_in_a_row_end_the_run_instead_of_spinning() {
    let p = Project::new("- [ ] A\n- [ ] B\n");
    let mut s = working_agent();
    s["default"]["implement"] = json!({"result": {"status": "SKIPPED", "summary": "not now"}});
    p.scenario(&s);
    let out = p.run(&["20", "0"]).expect(4);
    let err = &out.stderr;
    assert!(err.contains("changed nothing"), "{err}");
}

#[test]
fn a_dirty_tree_refuses_a_new_task_with_exit_2_unless_allowed() {
    let p = Project::new("- [ ] Task\n");
    p.scenario(&working_agent());
    p.write("notes.txt", "mine\n");
    let out = p.run(&["1", "0"]).expect(2);
    let err = &out.stderr;
    assert!(
        err.contains("notes.txt") && err.contains("--allow-dirty"),
        "{err}"
    );
    p.run(&["1", "0", "--allow-dirty"]).expect(0);
    assert!(
        !p.head_files().contains(&"notes.txt".to_string()),
        "dirty path must stay out"
    );
    assert_eq!(p.dirty(), ["notes.txt"]);
}

#[test]
fn malformed_spec_exits_2_with_the_line() {
    let p = Project::new("- [ ] fine\n- [ x] broken\n");
    let out = p.run(&["1", "0"]).expect(2);
    let err = &out.stderr;
    assert!(err.contains("SPEC.md:2:3"), "{err}");
}

#[test]
fn auth_failure_stops_at_once_with_exit_5_and_the_fix() {
    let p = Project::new("- [ ] T\n");
    p.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let out = p
        .run(&["3", "0"])
        .timeout(Duration::from_secs(60))
        .expect(5);
    let err = &out.stderr;
    assert!(err.contains("log"), "{err}");
}

/// Regression (issue 11, bug 2): the loop made a fresh `SpecFile` for every write, so bytes a
/// person's editor appended to the SPEC.md that kern had just replaced (the editor still held
/// the old file open) were forgotten by the next write. One `SpecFile` for the run folds them
/// in at the next write.
#[test]
fn a_hand_append_to_a_replaced_spec_md_is_folded_in_at_the_next_write() {
    let p = Project::new("# Roadmap\n\n- [ ] Alpha\n");
    let signals = p.outside.path();
    let go = signals.join("go");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": {
            "shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())],
            "write": {"out/{slug}.txt": "done\n"},
            "result": {"status": "SUCCESS", "summary": "s"}
        },
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    // An editor that opened SPEC.md for appending before kern's first write, and appends
    // through that old handle only when told to.
    let opened = signals.join("opened");
    let append_now = signals.join("append-now");
    let appended = signals.join("appended");
    let mut editor = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec 3>>SPEC.md; touch '{o}'; while [ ! -f '{a}' ]; do sleep 0.01; done; \
             printf -- '- [ ] Appended through the old file\\n' >&3; exec 3>&-; touch '{d}'",
            o = opened.display(),
            a = append_now.display(),
            d = appended.display()
        ))
        .current_dir(p.path())
        .spawn()
        .unwrap();
    wait_for_file(&opened);
    let mut kern = p.run(&["1", "0"]).spawn_with(
        std::process::Stdio::inherit(),
        std::process::Stdio::inherit(),
    );
    // Implement runs: research's note was written (SPEC.md replaced while the editor held the
    // old file) and kern stopped waiting for the editor to close it. Only now does it append.
    wait_for_file(&p.state_dir().join("stage2.jsonl"));
    assert!(p.read("SPEC.md").contains("**Research:**"));
    std::fs::write(&append_now, "").unwrap();
    wait_for_file(&appended);
    std::fs::write(&go, "").unwrap();
    assert_eq!(kern.wait().unwrap().code(), Some(0));
    editor.wait().unwrap();
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [x] Alpha"), "{spec}");
    assert!(
        spec.contains("- [ ] Appended through the old file"),
        "the append through the replaced file was lost:\n{spec}"
    );
}

/// Issue 11: SPEC.md is parsed at most twice per iteration on the plain path (once to verify
/// research's notes, once to verify the commit's marks; an unchanged file is never re-parsed).
#[test]
fn spec_md_is_parsed_at_most_twice_per_plain_iteration() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n");
    p.scenario(&working_agent());
    let err = p.run(&["3", "0", "-v"]).expect(0).stderr;
    let counts: Vec<u64> = err
        .lines()
        .filter(|l| l.contains("iteration done"))
        .filter_map(|l| l.split("spec_parses=").nth(1))
        .map(|n| {
            n.split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(counts.len(), 3, "{err}");
    assert!(
        counts.iter().all(|&n| n <= 2),
        "parses per iteration: {counts:?}"
    );
}

/// A run watches the work tree (repository/status.rs): after its one whole walk, a plain
/// iteration — research, implement, review, commit — looks at the tree nine times (the
/// start, the snapshots before the two read-only stages, their audits, implement's "did it
/// change anything", the review's diff, the paths the learnings name, the commit), and asks
/// libgit2 only at the looks that
/// follow a change: one per step (the start after the last commit, after implement, after
/// kern's edit of SPEC.md before the commit; the review's read-only stage changes nothing).
/// Issue 40 item 7: these counts are the ones a 100,000-file repository pays for.
#[cfg(target_os = "linux")]
#[test]
fn a_plain_iteration_looks_at_the_work_tree_once_per_step_and_walks_it_once_per_run() {
    let p = Project::new("- [ ] Add a greeting\n- [ ] Add a farewell\n- [ ] Add a wave\n");
    p.scenario(&working_agent());
    let ran = p.run(&["3", "0", "-v"]).env_remove(["KERN_LOG"]).expect(0);
    let counts = |field: &str| -> Vec<u64> {
        ran.stderr
            .lines()
            .filter(|l| l.contains("iteration done"))
            .map(|l| {
                let at = l.find(field).expect("-v logs the status counts") + field.len();
                l[at..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect()
    };
    let (looks, walks, asks) = (
        counts("status_looks="),
        counts("status_walks="),
        counts("status_asks="),
    );
    assert_eq!(looks.len(), 3, "{}", ran.stderr);
    assert_eq!(walks, [1, 0, 0], "{}", ran.stderr);
    assert!(looks.iter().all(|&n| n <= 9), "looks: {looks:?}");
    assert!(asks.iter().all(|&n| n <= 4), "asks: {asks:?}");
    assert_eq!(p.log().len(), 4);
}

/// The reads of SPEC.md in each iteration, as `-v` logs them.
fn spec_reads(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| l.contains("iteration done"))
        .map(|l| {
            let at = l.find("spec_reads=").expect("-v logs spec_reads") + "spec_reads=".len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// SPEC.md is the person's file, open in their editor: kern reads it once per step it needs
/// it for, not once per question (issue 28; 24 reads per iteration before). A plain task —
/// research, implement, review, commit — reads it at the start, after each stage and at each
/// of kern's two writes; a check gate adds the read after the check.
#[test]
fn a_plain_iteration_reads_spec_md_once_per_step_not_two_dozen_times() {
    for (check, most) in [(None, 6), (Some("true"), 7)] {
        let p = Project::new("- [ ] Add a greeting\n- [ ] Add a farewell\n");
        p.scenario(&working_agent());
        let mut args = vec!["2", "0", "-v"];
        if let Some(command) = check {
            args.extend(["--check", command]);
        }
        let ran = p.run(&args).env_remove(["KERN_LOG"]).expect(0);
        let reads = spec_reads(&ran.stderr);
        assert_eq!(reads.len(), 2, "{}", ran.stderr);
        assert!(reads.iter().all(|&n| n <= most), "{check:?}: {reads:?}");
        assert_eq!(p.log().len(), 3);
    }
}
