//! The night goes on (issue 14): no task, leftover or stale state stops an unattended run,
//! and no two runs on one work tree ever collide.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::project::{Project, texts};

/// Waits (up to a minute, a bound against a broken build only) for `path` to exist.
pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

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
    p.kern_std()
        .env("KERN_STATE_DIR", state_root)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
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
        .kern()
        .env("KERN_STATE_DIR", &second_root)
        .args(["1", "0"])
        .output()
        .unwrap();
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
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
    let out = p.kern().args(["2", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", texts(&out).1);
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
    let out = web_app
        .kern()
        .env("KERN_STATE_DIR", &root)
        .args(["1", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
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
        let out = p.kern().args(["status", "--dir"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        dirs.push(texts(&out).0.trim().to_string());
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
        let out = p.kern().args(args).output().unwrap();
        let (_, err) = texts(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
    assert!(p.log().len() == 1 && p.run_log().is_empty(), "nothing ran");
}

#[test]
fn a_check_that_fails_at_baseline_stops_with_exit_2_before_any_agent() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({}));
    let out = p
        .kern()
        .args(["5", "0", "--check", "echo broken before kern; exit 3"])
        .output()
        .unwrap();
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
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
    let out = p
        .kern()
        .args(["1", "0", "--check", "exit 3", "--check-baseline", "skip"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", texts(&out).1);
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
    let out = p
        .kern()
        .args(["5", "0", "--check", &check])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    // Once before any agent, once as Alpha's gate.
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
}
