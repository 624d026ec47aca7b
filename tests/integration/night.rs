//! The night goes on (issue 14): no task, leftover or stale state stops an unattended run,
//! and no two runs on one work tree ever collide.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::project::{Project, texts};
use crate::support::wait_for_file;

/// A scenario whose research (or `stage`) of the task matching `task` waits for `go`.
fn waiting_in(stage: &str, task: &str, go: &Path) -> serde_json::Value {
    let mut entry = json!({"match": task});
    entry[stage] = json!({
        "shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())],
        "write": if stage == "implement" { json!({"out/{slug}.txt": "done\n"}) } else { json!({}) },
    });
    json!({"tasks": [entry], "default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }})
}

fn spawn(p: &Project, state_root: &Path, args: &[&str]) -> Child {
    p.run(&[])
        .env("KERN_STATE_DIR", state_root)
        .args(args)
        .spawn()
}

fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), texts(&out).1)
}

#[test]
fn two_runs_with_different_state_roots_on_one_work_tree_the_second_exits_3() {
    let p = Project::new("- [ ] Alpha\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting_in("research", "Alpha", &go));
    let first_root = p.outside.path().join("tmux-state");
    let second_root = p.outside.path().join("ssh-state");
    let first = spawn(&p, &first_root, &["1", "0"]);
    wait_for_file(&p.path().join(".git/kern.lock"));
    let out = p
        .run(&[])
        .env("KERN_STATE_DIR", &second_root)
        .args(["1", "0"])
        .expect(3);
    let err = &out.stderr;
    assert!(err.contains("another kern is running"), "{err}");
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(first);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
}

#[test]
fn a_detached_head_keeps_one_lock_across_its_commits_and_says_where_the_commits_are() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let r = git2::Repository::open(p.path()).unwrap();
    r.set_head_detached(r.head().unwrap().target().unwrap())
        .unwrap();
    let go = p.outside.path().join("go");
    p.scenario(&waiting_in("implement", "Beta", &go));
    let first = spawn(&p, &p.state_root(), &["2", "0"]);
    // Alpha is committed (HEAD moved), Beta's implement waits: a second kern now must still
    // find the lock held.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.read("SPEC.md").contains("- [~] Beta") {
        assert!(Instant::now() < deadline, "Beta never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    p.run(&["2", "0"]).expect(3);
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(first);
    assert_eq!(code, 0, "{err}");
    let log: Vec<String> = {
        let mut walk = r.revwalk().unwrap();
        walk.push_head().unwrap();
        walk.map(|o| {
            r.find_commit(o.unwrap())
                .unwrap()
                .summary()
                .unwrap()
                .unwrap()
                .to_string()
        })
        .collect()
    };
    assert_eq!(
        log,
        vec!["Add beta", "Add alpha", "initial"],
        "each task once"
    );
    assert!(err.contains("HEAD is detached"), "{err}");
    assert!(
        err.contains("kern's commits are on no branch") && err.contains("git branch <name>"),
        "{err}"
    );
    assert!(
        p.state_dir().ends_with("HEAD"),
        "{}",
        p.state_dir().display()
    );
}

#[test]
fn web_on_app_main_and_web_app_on_main_each_have_their_own_lock() {
    let web = Project::named("web", "app-main", "- [ ] Alpha\n");
    let web_app = Project::named("web-app", "main", "- [ ] Alpha\n");
    let root = web.outside.path().join("shared-state");
    let go = web.outside.path().join("go");
    web.scenario(&waiting_in("research", "Alpha", &go));
    web_app.scenario(&waiting_in("research", "Nothing", &go));
    let first = spawn(&web, &root, &["1", "0"]);
    wait_for_file(&web.path().join(".git/kern.lock"));
    web_app
        .run(&[])
        .env("KERN_STATE_DIR", &root)
        .args(["1", "0"])
        .expect(0);
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(first);
    assert_eq!(code, 0, "{err}");
    assert_eq!(web.log(), vec!["Add alpha", "initial"]);
    assert_eq!(web_app.log(), vec!["Add alpha", "initial"]);
}

#[test]
fn branches_feature_slash_x_and_feature_dash_x_have_their_own_state_folders() {
    let p = Project::new("- [ ] Alpha\n");
    let r = git2::Repository::open(p.path()).unwrap();
    let head = r.head().unwrap().peel_to_commit().unwrap();
    r.branch("feature/x", &head, false).unwrap();
    r.branch("feature-x", &head, false).unwrap();
    let mut dirs = Vec::new();
    for branch in ["feature/x", "feature-x"] {
        r.set_head(&format!("refs/heads/{branch}")).unwrap();
        let out = p.run(&["status", "--dir"]).expect(0);
        dirs.push(out.stdout.trim().to_string());
    }
    assert_ne!(dirs[0], dirs[1]);
    assert!(dirs[0].ends_with("/feature%2Fx"), "{dirs:?}");
    assert!(dirs[1].ends_with("/feature-x"), "{dirs:?}");
}

#[test]
fn numbers_out_of_range_are_refused_with_exit_2_naming_the_option_and_the_range() {
    let p = Project::new("- [ ] Alpha\n");
    let cases: [(&[&str], &str); 5] = [
        (
            &["2", "18446744073709551615"],
            "'[DELAY]': `18446744073709551615` is out of range — give 0s to 24h",
        ),
        (
            &["--stage-timeout", "0"],
            "'--stage-timeout <DURATION>': `0` is out of range — give 1s to 24h",
        ),
        (
            &["--idle-timeout", "0"],
            "'--idle-timeout <DURATION>': `0` is out of range — give 1s to 24h",
        ),
        (
            &["--max-wait", "30d"],
            "'--max-wait <DURATION>': `30d` is out of range — give 0s to 168h",
        ),
        (&["10001"], "'[ITERATIONS]': 10001 is not in 1..=10000"),
    ];
    for (args, message) in cases {
        let out = p.run(&[]).args(args).expect(2);
        let err = &out.stderr;
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert!(p.log().len() == 1 && p.run_log().is_empty(), "nothing ran");
}

#[test]
fn a_check_that_fails_at_baseline_stops_with_exit_2_before_any_agent() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({}));
    let err = p
        .run(&["5", "0", "--check", "echo broken before kern; exit 3"])
        .expect(2)
        .stderr;
    assert!(
        err.contains("the check `echo broken before kern; exit 3` fails before any change")
            && err.contains("--check-baseline=skip")
            && err.contains("broken before kern"),
        "{err}"
    );
    assert!(p.prompts("research").is_empty(), "no agent ran");
    assert_eq!(p.log(), vec!["initial"]);
    assert_eq!(p.read("SPEC.md"), "- [ ] Alpha\n- [ ] Beta\n");
    // Opting out runs the tasks (each then fails its gate, as the person asked).
    p.run(&["1", "0", "--check", "exit 3", "--check-baseline", "skip"])
        .expect(4);
    assert_eq!(p.prompts("research").len(), 1);
}

#[test]
fn a_passing_baseline_check_runs_once_and_the_night_goes_on() {
    let p = Project::new("- [ ] Alpha\n");
    let count = p.outside.path().join("checks");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let check = format!("echo run >> '{}'", count.display());
    p.run(&[]).args(["5", "0", "--check", &check]).expect(0);
    // Once before any agent, once as Alpha's gate.
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
}

fn git(p: &Project, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(p.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn skipped_and_blocked_tasks_leave_their_work_aside_and_the_night_goes_on() {
    let p = Project::new("- [ ] Skipper\n- [ ] Blocker\n- [ ] Worker\n");
    p.write("mine.txt", "the person's own dirty file\n");
    p.scenario(&json!({
        "tasks": [
            {"match": "Skipper", "implement": {"write": {"half.txt": "half done\n"},
                "result": {"status": "SKIPPED", "summary": "s", "attempt_note": "needs a design decision"}}},
            {"match": "Blocker", "implement": {"write": {"broken.txt": "broken\n"},
                "result": {"status": "FAILED", "summary": "s", "attempt_note": "the same error"}}}
        ],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    }));
    // Blocker fails twice: its first failure asks for decomposition, the second blocks.
    let out = p
        .run(&["4", "0", "--max-attempts", "1", "--allow-dirty"])
        .expect(4);
    let err = &out.stderr;
    assert!(p.log().contains(&"Add worker".to_string()), "{err}");
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("— its work is saved at `refs/kern/attempts/skipper/1`"),
        "{spec}"
    );
    assert!(
        spec.contains("— its work is saved at `refs/kern/attempts/blocker/1`"),
        "{spec}"
    );
    assert_eq!(
        git(&p, &["show", "refs/kern/attempts/skipper/1:half.txt"]),
        "half done\n"
    );
    assert_eq!(
        git(&p, &["show", "refs/kern/attempts/blocker/1:broken.txt"]),
        "broken\n"
    );
    assert!(!p.path().join("half.txt").exists() && !p.path().join("broken.txt").exists());
    assert_eq!(p.read("mine.txt"), "the person's own dirty file\n");
    // Worker's commit carried the notes of the tasks before it; the person's path stays.
    assert_eq!(p.dirty(), vec!["mine.txt"]);
    assert!(!p.head_files().contains(&"mine.txt".to_string()));
    assert_eq!(p.run_events("set_aside").len(), 2);
}

#[test]
fn the_next_attempt_is_told_where_the_earlier_work_was_set_aside() {
    let p = Project::new("- [ ] Skipper\n");
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"half.txt": "half\n"}, "result": {"status": "SKIPPED", "summary": "later"}},
            {"write": {"out/skipper.txt": "done\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add skipper"}}
    }}));
    p.run(&["3", "0"]).expect(0);
    let prompts = p.prompts("implement");
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[1].contains("refs/kern/attempts/skipper/1"),
        "{}",
        prompts[1]
    );
}

#[test]
fn secrets_left_out_of_a_commit_stay_in_the_tree_and_never_block_the_next_task() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n", ".env": "TOKEN=x\n", "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["5", "0"]).expect(0);
    assert_eq!(p.log(), vec!["Add beta", "Add alpha", "initial"]);
    assert!(p.path().join(".env").exists() && p.path().join("id_rsa").exists());
    let head = p.head_files();
    assert!(!head.contains(&".env".to_string()) && !head.contains(&"id_rsa".to_string()));
}

#[test]
fn a_gitignored_spec_with_a_no_change_task_ends_cleanly_and_a_second_run_exits_0() {
    let p = Project::new("");
    p.write(".gitignore", "SPEC.md\nLEARNINGS.md\n");
    git(&p, &["rm", "-q", "--cached", "SPEC.md"]);
    git(&p, &["add", ".gitignore"]);
    git(&p, &["commit", "-q", "-m", "ignore the task list"]);
    p.write("SPEC.md", "- [ ] Only think\n- [ ] Then write\n");
    p.scenario(&json!({
        "tasks": [{"match": "Only think", "implement": {"result": {"status": "SUCCESS", "summary": "nothing to change", "no_change_reason": "the code already does it"}}}],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    }));
    let err = p.run(&["5", "0"]).expect(0).stderr;
    assert!(err.contains("done with nothing to commit"), "{err}");
    assert_eq!(p.log()[0], "Add then-write");
    assert!(!p.state_dir().join("commit.json").exists());
    p.run(&["5", "0"]).expect(0);
    assert!(p.read("SPEC.md").contains("- [x] Only think"));
}

#[test]
fn a_subtask_added_by_hand_keeps_the_parent_open_and_is_done_next() {
    let p = Project::new("- [ ] Parent\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting_in("implement", "Parent", &go));
    let child = spawn(&p, &p.state_root(), &["3", "0"]);
    wait_for_file(&p.state_dir().join("stage2.jsonl"));
    let spec = p.read("SPEC.md");
    p.write("SPEC.md", &format!("{spec}  - [ ] Child added by hand\n"));
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    let spec = p.read("SPEC.md");
    assert!(spec.contains("  - [x] Child added by hand"), "{spec}");
    assert!(spec.contains("- [x] Parent"), "{spec}");
    assert_eq!(
        p.log(),
        vec!["Add child-added-by-hand", "Add parent", "initial"]
    );
}

#[test]
fn a_task_set_to_blocked_by_hand_mid_stage_stays_blocked_and_its_work_is_kept() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting_in("implement", "Alpha", &go));
    let child = spawn(&p, &p.state_root(), &["3", "0"]);
    wait_for_file(&p.state_dir().join("stage2.jsonl"));
    p.write(
        "SPEC.md",
        &p.read("SPEC.md").replace("- [~] Alpha", "- [!] Alpha"),
    );
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 4, "a blocked task is exit 4: {err}");
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [!] Alpha") && spec.contains("- [x] Beta"),
        "{spec}"
    );
    assert_eq!(p.log(), vec!["Add beta", "initial"]);
    assert_eq!(
        git(&p, &["show", "refs/kern/attempts/alpha/1:out/alpha.txt"]),
        "done\n"
    );
}

#[test]
fn a_200_mb_stream_leaves_a_stage_file_of_at_most_64_mb_with_its_head_and_tail() {
    let p = Project::new("- [ ] Chatty\n");
    let go = p.outside.path().join("go");
    p.scenario(&json!({"default": {
        "research": {"error": "huge_output", "huge_bytes": 200u64 << 20,
                     "shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())]},
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    // Watch the file during implement: research's stream is complete by then.
    let waiting = json!({"shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", p.outside.path().join("go2").display())],
                         "write": {"out/{slug}.txt": "done\n"}});
    let mut s = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(p.scenario_path()).unwrap(),
    )
    .unwrap();
    s["default"]["implement"] = waiting;
    p.scenario(&s);
    let child = spawn(&p, &p.state_root(), &["1", "0"]);
    wait_for_file(&p.state_dir().join("stage1.jsonl"));
    std::fs::write(&go, "").unwrap();
    wait_for_file(&p.state_dir().join("stage2.jsonl"));
    let research = std::fs::metadata(p.state_dir().join("stage1.jsonl"))
        .unwrap()
        .len();
    assert!(
        research <= (64 << 20) + 1024,
        "stage1.jsonl is {research} bytes"
    );
    // The head (32 MiB) and at least a full tail segment (16 MiB) are kept.
    assert!(
        research >= 48 << 20,
        "head and tail are kept: {research} bytes"
    );
    let text = std::fs::read(p.state_dir().join("stage1.jsonl")).unwrap();
    assert!(String::from_utf8_lossy(&text).contains("\"subtype\":\"cut\""));
    assert!(
        String::from_utf8_lossy(&text[text.len() - 4096..]).contains("\"type\":\"result\""),
        "the tail holds the result event"
    );
    std::fs::write(p.outside.path().join("go2"), "").unwrap();
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
}
