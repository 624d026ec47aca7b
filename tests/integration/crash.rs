//! kill -9 and Ctrl-C at any stage, then `kern` again: the task completes exactly once and
//! nothing is lost (DESIGN.md sections 6, 7, 12).

use crate::support::{kern_bin, project};

use std::process::Child;
use std::time::{Duration, Instant};

use project::Project;
use serde_json::json;

/// The time zone the crash tests run kern in: not UTC, so that a time written in local time
/// and read as UTC (the lock recovery once did) shows (issue 11, bug 1).
const ZONE: &str = "UTC-2";

/// Kills the hook that last wrote its pid to `marks` (see [`hanging_hook`]), as a killed
/// terminal leaves it: kern is gone already.
fn kill_hanging_hook(marks: &std::path::Path) {
    let text = std::fs::read_to_string(marks).unwrap();
    let pid: i32 = text.lines().last().unwrap().trim().parse().unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Installs git hook `name`, whose first `hanging` runs write their pid to the returned file
/// and then hang; later runs pass.
fn hanging_hook(p: &Project, name: &str, hanging: usize) -> std::path::PathBuf {
    let marks = p.outside.path().join("hook-runs");
    let hook = p.path().join(".git/hooks").join(name);
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho $$ >> '{m}'\n[ $(wc -l < '{m}') -le {hanging} ] && exec sleep 60\nexit 0\n",
            m = marks.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    marks
}

fn spawn_kern(p: &Project, args: &[&str]) -> Child {
    p.run(&[]).env("TZ", ZONE).args(args).spawn()
}

/// Waits until `file` in the state folder exists and is not empty.
/// Kills `child` with SIGKILL as soon as `reached` holds (polled up to a minute; the bound only
/// keeps a broken build from hanging the suite) and reaps it.
fn kill_9_once(mut child: Child, what: &str, reached: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached() {
        assert!(Instant::now() < deadline, "{what} was never reached");
        std::thread::sleep(Duration::from_millis(5));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
}

fn wait_for(p: &Project, file: &str) {
    let path = p.state_dir().join(file);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// A scenario whose `slow` stage sleeps on its first invocation (after writing its files).
fn slow_in(slow: &str) -> serde_json::Value {
    let mut s = json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}, "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }});
    let normal = s["default"][slow].clone();
    let mut first = normal.clone();
    first["sleep_ms"] = json!(60_000);
    s["default"][slow] = json!([first, normal]);
    s
}

fn kill_during(stage: &str, number: u8, signal: nix::sys::signal::Signal) {
    let p = Project::new("- [ ] Survive\n- [ ] Next\n");
    p.scenario(&slow_in(stage));
    let mut child = spawn_kern(&p, &["5", "0"]);
    wait_for(&p, &format!("stage{number}.jsonl"));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let status = child.wait().unwrap();
    if signal == nix::sys::signal::Signal::SIGINT {
        assert_eq!(status.code(), Some(130), "Ctrl-C exits 130");
        let record: serde_json::Value = serde_json::from_slice(
            &std::fs::read(p.state_dir().join(format!("stage{number}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(record["kern"]["outcome"], "interrupted");
        assert!(record["result"].is_string());
    }
    p.run(&["5", "0"]).env("TZ", ZONE).expect(0);
    let log = p.log();
    assert_eq!(
        log.iter().filter(|s| *s == "Add survive").count(),
        1,
        "committed once: {log:?}"
    );
    assert_eq!(
        log.iter().filter(|s| *s == "Add next").count(),
        1,
        "{log:?}"
    );
    assert_eq!(p.read("out/survive.txt"), "done Survive\n");
    assert!(p.head_files().contains(&"out/survive.txt".to_string()));
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [x] Survive") && spec.contains("- [x] Next"),
        "{spec}"
    );
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    assert!(!p.path().join(".git/kern.lock").exists(), "no stray lock");
}

#[test]
fn kill_9_during_research_then_restart_completes_once() {
    kill_during("research", 1, nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn kill_9_during_implement_then_restart_completes_once() {
    kill_during("implement", 2, nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn kill_9_during_review_then_restart_completes_once() {
    kill_during("commit", 3, nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn ctrl_c_during_implement_records_interrupted_exits_130_and_resumes() {
    kill_during("implement", 2, nix::sys::signal::Signal::SIGINT);
}

/// Regression (found by the stage-plan test of issue 40): a level-0 task has no Research note,
/// so a run that resumed it after its implement read "research" and paid implement again.
#[test]
fn kill_9_during_the_review_of_a_level_0_task_then_restart_pays_implement_once() {
    let p = Project::new("- [ ] Survive\n  > **Level:** 0\n");
    p.scenario(&slow_in("commit"));
    let mut child = spawn_kern(&p, &["1", "0"]);
    wait_for(&p, "stage3.jsonl");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let status = p.run(&["status"]).expect(0);
    assert!(
        status.stdout.contains("resume at: commit"),
        "{}",
        status.stdout
    );
    p.run(&["1", "0"]).env("TZ", ZONE).expect(0);
    assert_eq!(p.prompts("implement").len(), 1, "implement is paid once");
    assert_eq!(p.log()[0], "Add survive");
}

#[test]
fn second_run_on_same_branch_exits_3_naming_the_holder() {
    let p = Project::new("- [ ] Slow\n");
    p.scenario(&slow_in("research"));
    let mut first = spawn_kern(&p, &["1", "0"]);
    wait_for(&p, "stage1.jsonl");
    let out = p
        .run(&["1", "0"])
        .timeout(Duration::from_secs(20))
        .expect(3);
    let err = &out.stderr;
    assert!(
        err.contains(&first.id().to_string()),
        "names the holder's pid: {err}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(143));
}

#[test]
fn two_worktrees_on_different_branches_both_run_at_once() {
    let p = Project::new("- [ ] Slow\n");
    p.scenario(&slow_in("research"));
    // A second worktree of the same repository, on its own branch.
    let r = git2::Repository::open(p.path()).unwrap();
    let head = r.head().unwrap().peel_to_commit().unwrap();
    r.branch("other", &head, false).unwrap();
    let wt_path = p.outside.path().join("other-tree");
    let branch = r.find_reference("refs/heads/other").unwrap();
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(&branch));
    r.worktree("other-tree", &wt_path, Some(&opts)).unwrap();

    let mut first = spawn_kern(&p, &["1", "0"]);
    wait_for(&p, "stage1.jsonl");
    // The first run holds its lock and sleeps in research; the other worktree runs anyway.
    std::fs::write(p.outside.path().join("fast.json"), serde_json::to_vec(&json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": {"write": {"other.txt": "x"}, "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Other branch work"}}
    }})).unwrap()).unwrap();
    std::fs::write(
        p.outside.path().join("fast.sh"),
        format!(
            "#!/bin/sh\nexec '{}' scripted-agent '{}'\n",
            kern_bin().display(),
            p.outside.path().join("fast.json").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        p.outside.path().join("fast.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    p.run(&["1", "0"])
        .current_dir(&wt_path)
        .env(
            "KERN_AGENT",
            format!("program:{}", p.outside.path().join("fast.sh").display()),
        )
        .expect(0);
    let wt_repo = git2::Repository::open(&wt_path).unwrap();
    let subject = wt_repo
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .summary()
        .ok()
        .flatten()
        .unwrap_or("")
        .to_string();
    assert_eq!(subject, "Other branch work");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(143));
}

/// Regression (found by tests/integration/soak.rs): a kern killed while it finished the previous run's
/// pending commit left `.git/index.lock` under the lock phase `selecting`, so every later run
/// refused with exit 2. The kill lands inside the commit (a sleeping pre-commit hook); the
/// index lock libgit2 would leave when the kill lands in its index write is made by hand.
#[test]
fn kill_9_while_finishing_a_pending_commit_then_restart_recovers_the_index_lock() {
    let p = Project::new("- [ ] Hooked\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    // The first two commit attempts hang in the hook (and say so); later ones go through.
    let marks = hanging_hook(&p, "pre-commit", 2);
    let index_lock = p.path().join(".git/index.lock");
    for run in 1..=2 {
        kill_9_once(
            spawn_kern(&p, &["5", "0"]),
            &format!("run {run} in the hook"),
            || std::fs::read_to_string(&marks).map_or(0, |t| t.lines().count()) >= run,
        );
        kill_hanging_hook(&marks);
        assert!(
            p.state_dir().join("commit.json").exists(),
            "run {run}: the commit is pending"
        );
        std::fs::write(&index_lock, "").unwrap();
    }
    let out = p.run(&["5", "0"]).env("TZ", ZONE).expect(0);
    let err = &out.stderr;
    assert!(
        err.contains("index.lock` left by the crashed kern"),
        "{err}"
    );
    assert_eq!(p.log(), vec!["Add hooked", "initial"]);
    assert!(!index_lock.exists());
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    assert!(p.read("SPEC.md").contains("- [x] Hooked"));
}

/// Regression: a kill between the temp file and the rename of an atomic SPEC.md write leaves
/// `.kern-XXXXXX.tmp` in the work tree. The next run removes it (it holds the lock), instead of
/// committing it with the resumed task or refusing a new task on a dirty tree.
#[test]
fn temp_file_left_by_a_killed_write_is_removed_not_committed() {
    for stage in ["implement", "research"] {
        let number = if stage == "implement" { 2 } else { 1 };
        let p = Project::new("- [ ] Survive\n- [ ] Next\n");
        p.scenario(&slow_in(stage));
        let mut child = spawn_kern(&p, &["5", "0"]);
        wait_for(&p, &format!("stage{number}.jsonl"));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        child.wait().unwrap();
        // What a kill inside `atomic_file::write` of SPEC.md leaves behind.
        p.write(".kern-Ab12Cd.tmp", "- [x] Survive\n");
        let out = p.run(&["5", "0"]).env("TZ", ZONE).expect(0);
        let err = &out.stderr;
        assert!(
            err.contains(".kern-Ab12Cd.tmp` left by a kern killed while writing"),
            "{err}"
        );
        assert!(
            !p.head_files().iter().any(|f| f.contains(".kern-")),
            "{stage}: {:?}",
            p.head_files()
        );
        assert_eq!(
            p.log(),
            vec!["Add next", "Add survive", "initial"],
            "{stage}"
        );
        assert!(p.dirty().is_empty(), "{stage}: {:?}", p.dirty());
    }
}

/// Regression (found by the crash soak in CI): a run killed while it cleaned up after a run
/// that died committing left its own lock record in phase `starting`, so the next run did not
/// know the `.git/index.lock` was kern's and refused every run with exit 2. The cleanup is now
/// handed on through the lock record (`recovering`). The kill lands while the cleanup waits for
/// a fresh ref lock to turn out stale.
#[test]
fn a_run_killed_while_it_cleans_up_after_a_crash_hands_the_cleanup_on() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let lock = p.path().join(".git/kern.lock");
    let host = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    std::fs::write(
        &lock,
        json!({"pid": dead_pid, "start_time": null, "host": host,
               "started_at": "2020-01-01T00:00:00Z", "argv": ["kern"],
               "phase": "committing", "agent_group": null})
        .to_string(),
    )
    .unwrap();
    let index_lock = p.path().join(".git/index.lock");
    std::fs::write(&index_lock, "").unwrap();
    std::fs::write(p.path().join(".git/refs/heads/master.lock"), "").unwrap();
    kill_9_once(spawn_kern(&p, &["5", "0"]), "the cleanup", || {
        std::fs::read_to_string(&lock)
            .unwrap_or_default()
            .contains("\"recovering\"")
    });
    assert!(index_lock.exists(), "killed before it got there");
    let out = p.run(&["5", "0"]).env("TZ", ZONE).expect(0);
    let err = &out.stderr;
    assert!(
        err.contains("index.lock` left by the crashed kern"),
        "{err}"
    );
    assert!(!index_lock.exists());
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
}

/// Issue 27: a reftable repository (Git 3.0's default ref format), killed inside its commit —
/// before the branch moved (in `pre-commit`) and after (in `post-commit`) — then run again:
/// the task is committed once, the refs are git's (`git fsck`, `git status`), nothing is lost.
#[test]
fn kill_9_mid_commit_in_a_reftable_repository_then_restart_commits_once() {
    for hook_name in ["pre-commit", "post-commit"] {
        let p = Project::made_by_git(&["--ref-format=reftable"], "- [ ] Hooked\n- [ ] Next\n");
        p.scenario(&json!({"default": {
            "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }}));
        // The first commit hangs in the hook (and says so); later ones go through.
        let marks = hanging_hook(&p, hook_name, 1);
        kill_9_once(spawn_kern(&p, &["5", "0"]), hook_name, || {
            std::fs::read_to_string(&marks).is_ok_and(|t| !t.is_empty())
        });
        kill_hanging_hook(&marks);
        assert!(
            p.state_dir().join("commit.json").exists(),
            "{hook_name}: the commit is pending"
        );
        let err = p.run(&["5", "0"]).env("TZ", ZONE).expect(0).stderr;
        assert_eq!(
            p.git(&["log", "--format=%s"]),
            "Add next\nAdd hooked\ninitial\n",
            "{hook_name}: committed once: {err}"
        );
        assert_eq!(
            p.git(&["fsck", "--strict", "--no-progress"]),
            "",
            "{hook_name}"
        );
        assert_eq!(p.git(&["status", "--porcelain"]), "", "{hook_name}");
        let spec = p.read("SPEC.md");
        assert!(
            spec.contains("- [x] Hooked") && spec.contains("- [x] Next"),
            "{hook_name}: {spec}"
        );
        assert!(!p.path().join(".git/kern.lock").exists(), "no stray lock");
        assert!(
            !p.path().join(".git/reftable/tables.list.lock").exists(),
            "no stray reftable lock"
        );
    }
}
