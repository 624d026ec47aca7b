//! A repository shared with people and their tools (issue 26; DESIGN.md section 4, "whose
//! ref is it"): the person's commits, stashes and tags in another worktree, an editor's
//! background fetch, a second kern on another worktree and the person's `--allow-dirty` files
//! are theirs. None of it fails kern's task, none of it is put back, and the person finds
//! every ref and file where they left it.

use std::path::{Path, PathBuf};
use std::process::Child;

use serde_json::json;

use crate::support::during::{during_stage, finish, git_in, spawn, waiting};
use crate::support::project::Project;
use crate::support::{kern_bin, wait_for_file};

/// A second worktree of `p` in `folder` (beside the project) on a new branch `branch`, as a
/// person keeps one beside kern's.
fn worktree(p: &Project, folder: &str, branch: &str) -> PathBuf {
    let wt = p.outside.path().join(folder);
    p.git(&["worktree", "add", "-q", &wt.to_string_lossy(), "-b", branch]);
    wt
}

/// Asserts that kern said nothing about a violation and left no Attempt note.
fn no_violation(p: &Project, err: &str) {
    assert!(!err.contains("violation"), "{err}");
    assert!(!err.contains("put back"), "{err}");
    let spec = p.read("SPEC.md");
    assert!(!spec.contains("Attempt"), "{spec}");
}

#[test]
fn a_persons_commit_stash_and_tag_in_another_worktree_during_each_stage_stay_theirs() {
    for (stage, n) in [("research", 1), ("implement", 2), ("commit", 3)] {
        let p = Project::new("- [ ] Alpha\n");
        let wt = worktree(&p, "wt2", "feature");
        let go = p.outside.path().join("go");
        p.scenario(&waiting(stage, &go, json!({})));
        let mut tip = String::new();
        let (code, err) = during_stage(&p, &["1", "0"], n, &go, || {
            std::fs::write(wt.join("person.txt"), "mine\n").unwrap();
            git_in(&wt, &["add", "person.txt"]);
            git_in(&wt, &["commit", "-q", "-m", "the person's work"]);
            std::fs::write(wt.join("README.md"), "# half-done thought\n").unwrap();
            git_in(&wt, &["stash", "-q"]);
            git_in(&wt, &["tag", "-a", "v1", "-m", "release one"]);
            tip = git_in(&wt, &["rev-parse", "feature"]);
        });
        assert_eq!(code, 0, "{stage}: {err}");
        no_violation(&p, &err);
        assert_eq!(p.git(&["rev-parse", "feature"]), tip, "{stage}: {err}");
        assert_eq!(
            p.git(&["stash", "list"]).lines().count(),
            1,
            "{stage}: the person's stash is listed"
        );
        assert_eq!(p.refs("refs/tags/v1").len(), 1, "{stage}");
        assert_eq!(p.log(), vec!["Add alpha", "initial"], "{stage}: {err}");
        assert!(
            git_in(&wt, &["status", "--porcelain"]).is_empty(),
            "{stage}: the person's worktree shows nothing staged against an old tip"
        );
        assert!(p.refs("refs/kern/").is_empty(), "{stage}: nothing kept");
    }
}

/// A bare remote of `p` with `p` fetched from it as `origin`.
fn remote(p: &Project) -> PathBuf {
    let bare = p.outside.path().join("remote.git");
    p.git(&["clone", "-q", "--bare", ".", &bare.to_string_lossy()]);
    p.git(&["remote", "add", "origin", &bare.to_string_lossy()]);
    p.git(&["fetch", "-q", "origin"]);
    bare
}

/// A new commit on the remote's `master` (as a colleague's push makes one); its id.
fn remote_commit(bare: &Path) -> String {
    let tree = git_in(bare, &["rev-parse", "master^{tree}"]);
    let oid = git_in(
        bare,
        &[
            "commit-tree",
            tree.trim(),
            "-p",
            "master",
            "-m",
            "remote work",
        ],
    );
    git_in(bare, &["update-ref", "refs/heads/master", oid.trim()]);
    oid.trim().to_string()
}

#[test]
fn an_editors_background_fetch_during_a_stage_is_no_violation() {
    let p = Project::new("- [ ] Alpha\n");
    let bare = remote(&p);
    let pushed = remote_commit(&bare);
    let go = p.outside.path().join("go");
    p.scenario(&waiting("implement", &go, json!({})));
    let (code, err) = during_stage(&p, &["1", "0"], 2, &go, || {
        p.git(&["fetch", "-q", "origin"]);
    });
    assert_eq!(code, 0, "{err}");
    no_violation(&p, &err);
    assert_eq!(
        p.git(&["rev-parse", "refs/remotes/origin/master"]).trim(),
        pushed
    );
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
}

#[test]
fn a_shared_ref_rewound_during_a_stage_is_kept_and_named_but_not_undone_nor_held_against_the_task()
{
    let p = Project::new("- [ ] Alpha\n");
    let bare = remote(&p);
    let old = p.git(&["rev-parse", "refs/remotes/origin/master"]);
    let pushed = remote_commit(&bare);
    p.git(&["fetch", "-q", "origin"]);
    p.git(&["branch", "topic"]);
    let topic = p.git(&["rev-parse", "topic"]);
    let go = p.outside.path().join("go");
    p.scenario(&waiting("research", &go, json!({})));
    let (code, err) = during_stage(&p, &["1", "0"], 1, &go, || {
        // The colleague force-pushed the remote back; the editor fetches. The person deletes
        // a branch of their own in another terminal.
        git_in(&bare, &["update-ref", "refs/heads/master", old.trim()]);
        p.git(&["fetch", "-q", "origin"]);
        p.git(&["branch", "-q", "-D", "topic"]);
    });
    assert_eq!(code, 0, "{err}");
    no_violation(&p, &err);
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
    // Not undone: the refs are where the person's tools left them.
    assert_eq!(p.git(&["rev-parse", "refs/remotes/origin/master"]), old);
    assert!(p.refs("refs/heads/topic").is_empty());
    // Named, and the old tips kept reachable under refs/kern/saved/.
    assert!(err.contains("refs/remotes/origin/master"), "{err}");
    assert!(err.contains("refs/heads/topic"), "{err}");
    let saved = p.refs("refs/kern/saved/");
    let tips: Vec<String> = saved
        .iter()
        .map(|r| p.git(&["rev-parse", r]).trim().to_string())
        .collect();
    assert!(tips.contains(&pushed), "{saved:?} {tips:?}");
    assert!(tips.contains(&topic.trim().to_string()), "{saved:?}");
    let logged = p.run_events("shared_ref");
    assert_eq!(logged.len(), 1, "{:?}", p.run_log());
}

#[test]
fn the_agents_own_rewind_of_the_runs_branch_is_still_put_back() {
    // The rule cuts one way only: what is the run's is still guarded (see nothing_lost.rs for
    // the full set); a shared ref beside it is left alone in the same stage. Unfenced: inside
    // kern's fence the agent's git cannot write `.git` at all (fence.rs).
    let p = Project::new("- [ ] Alpha\n");
    p.write("second.txt", "2\n");
    p.commit_all("second");
    p.git(&["branch", "topic"]);
    let start = p.git(&["rev-parse", "HEAD~1"]);
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"out/alpha.txt": "x\n"},
             "shell": ["git reset -q --hard HEAD~1 && git branch -q -f topic HEAD"]},
            {"write": {"out/alpha.txt": "y\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let err = p.run(&["3", "0", "--sandbox=off"]).expect(0).stderr;
    assert_eq!(p.log(), vec!["Add alpha", "second", "initial"], "{err}");
    assert!(err.contains("moved history"), "{err}");
    assert_eq!(p.read("out/alpha.txt"), "y\n");
    // The shared branch the agent moved back stays where it was moved, its old tip kept.
    assert_eq!(p.git(&["rev-parse", "topic"]), start);
    assert!(err.contains("refs/heads/topic"), "{err}");
}

/// `kern ARGS` in the worktree `dir` with its own scenario (a second person's kern).
fn spawn_in(p: &Project, dir: &Path, scenario: &Path, args: &[&str]) -> Child {
    let agent = scenario.with_extension("sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nexec '{}' scripted-agent '{}'\n",
            kern_bin().display(),
            scenario.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.run(&[])
        .current_dir(dir)
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .args(args)
        .spawn()
}

/// A project on `master` with tasks A1–A3 and a worktree `other` on its own branch with tasks
/// B1–B3, plus the scenario of the second run.
fn two_worktrees() -> (Project, PathBuf, PathBuf) {
    let p = Project::new("- [ ] A1\n- [ ] A2\n- [ ] A3\n");
    let wt = worktree(&p, "other", "other");
    std::fs::write(wt.join("SPEC.md"), "- [ ] B1\n- [ ] B2\n- [ ] B3\n").unwrap();
    git_in(&wt, &["commit", "-q", "-am", "other tasks"]);
    let plain = json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }});
    p.scenario(&plain);
    let scenario = p.outside.path().join("other-scenario.json");
    std::fs::write(&scenario, plain.to_string()).unwrap();
    (p, wt, scenario)
}

fn subjects(dir: &Path, branch: &str) -> Vec<String> {
    git_in(dir, &["log", "--format=%s", branch])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_second_kern_committing_on_another_worktree_during_a_stage_is_not_put_back() {
    let (p, wt, scenario) = two_worktrees();
    let go = p.outside.path().join("go");
    p.scenario(&waiting("commit", &go, json!({})));
    let first = spawn(&p, &["3", "0"]);
    wait_for_file(&p.state_dir().join("stage3.jsonl"));
    let (code, err) = finish(spawn_in(&p, &wt, &scenario, &["3", "0"]));
    assert_eq!(code, 0, "{err}");
    std::fs::write(&go, "").unwrap();
    let (code, err) = finish(first);
    assert_eq!(code, 0, "{err}");
    no_violation(&p, &err);
    assert_eq!(
        subjects(p.path(), "master"),
        vec!["Add a3", "Add a2", "Add a1", "initial"]
    );
    assert_eq!(
        subjects(p.path(), "other"),
        vec!["Add b3", "Add b2", "Add b1", "other tasks", "initial"]
    );
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    assert!(git_in(&wt, &["status", "--porcelain"]).is_empty());
}

#[test]
fn two_kern_runs_on_two_worktrees_twenty_times_lose_and_rewind_no_commit() {
    for round in 0..20 {
        let (p, wt, scenario) = two_worktrees();
        // Every fifth round, the first run works with parallel tasks beside the serial one.
        let args: &[&str] = if round % 5 == 4 {
            &["3", "0", "-j", "2"]
        } else {
            &["3", "0"]
        };
        let first = spawn(&p, args);
        let second = spawn_in(&p, &wt, &scenario, &["3", "0"]);
        let (code_a, err_a) = finish(first);
        let (code_b, err_b) = finish(second);
        assert_eq!(
            (code_a, code_b),
            (0, 0),
            "round {round}: {err_a}\n---\n{err_b}"
        );
        for err in [&err_a, &err_b] {
            assert!(!err.contains("put back"), "round {round}: {err}");
            assert!(!err.contains("violation"), "round {round}: {err}");
        }
        let mut a = subjects(p.path(), "master");
        a[..3].sort();
        assert_eq!(
            a,
            vec!["Add a1", "Add a2", "Add a3", "initial"],
            "round {round}"
        );
        assert_eq!(
            subjects(p.path(), "other"),
            vec!["Add b3", "Add b2", "Add b1", "other tasks", "initial"],
            "round {round}"
        );
        assert!(p.dirty().is_empty(), "round {round}: {:?}", p.dirty());
        assert!(git_in(&wt, &["status", "--porcelain"]).is_empty());
    }
}

#[test]
fn allow_dirty_paths_stay_out_of_every_commit_of_a_night_with_a_skip() {
    let p = Project::new("- [ ] T1\n- [ ] T2\n- [ ] T3\n- [ ] T4\n- [ ] T5\n");
    p.write("person.md", "committed\n");
    p.commit_all("person's file");
    p.write("person.md", "mine, half done\n");
    p.write("draft.txt", "a draft\n");
    p.scenario(&json!({
        "tasks": [{"match": "T2", "implement": [
            {"result": {"status": "SKIPPED", "summary": "later"}},
            {"write": {"out/{slug}.txt": "done {task}\n"}}
        ]}],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    }));
    let err = p.run(&["6", "0", "--allow-dirty"]).expect(0).stderr;
    let log = p.log();
    assert_eq!(log.len(), 7, "{log:?}\n{err}");
    for (i, _) in log.iter().enumerate().take(5) {
        let rev = format!("HEAD~{i}");
        let files = p.git(&["ls-tree", "-r", "--name-only", &rev]);
        assert!(!files.contains("draft.txt"), "{rev}: {files}");
        assert_eq!(
            p.git(&["show", &format!("{rev}:person.md")]),
            "committed\n",
            "{rev}"
        );
    }
    assert_eq!(p.read("person.md"), "mine, half done\n");
    assert_eq!(p.read("draft.txt"), "a draft\n");
}
