//! Nothing is ever lost (issue 12): the person's SPEC.md, the person's work, the branch's
//! history. In every test, every byte the person or the agent wrote is still somewhere
//! afterwards: in the tree, on the branch, or under `refs/kern/`.

use serde_json::{Value, json};

use crate::support::during::{during_stage, waiting};
use crate::support::project::Project;
use std::path::Path;

#[test]
fn a_renamed_task_and_a_new_task_written_during_implement_survive_and_kern_follows() {
    let p = Project::new("# Plan\n\n- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting("implement", &go, json!({})));
    let (code, err) = during_stage(&p, &["1", "0"], 2, &go, || {
        let spec = p.read("SPEC.md");
        let spec = spec.replace("- [~] Alpha", "- [~] Alpha, reworded by hand");
        let spec = format!(
            "{spec}- [ ] Gamma, added by hand\n  A long description the person wrote\n  over two lines.\n"
        );
        p.write("SPEC.md", &spec);
    });
    assert_eq!(code, 0, "{err}");
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [~] Alpha, reworded by hand"), "{spec}");
    assert!(
        spec.contains(
            "- [ ] Gamma, added by hand\n  A long description the person wrote\n  over two lines.\n"
        ),
        "{spec}"
    );
    assert!(
        !spec.contains("- [x]"),
        "nothing marked in its place:\n{spec}"
    );
    assert!(
        !err.contains("violation"),
        "a person's edit is no violation: {err}"
    );
    assert!(err.contains("kern follows the person"), "{err}");
    // The stage's work is kept: set aside, named.
    let saved = p.refs("refs/kern/attempts/");
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        p.git(&["show", &format!("{}:out/alpha.txt", saved[0])]),
        "done Alpha\n"
    );
    assert!(err.contains(&saved[0]), "{err}");
    assert_eq!(p.log(), vec!["initial"]);
}

#[test]
fn a_task_deleted_during_implement_is_not_resurrected_and_its_work_is_kept() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting("implement", &go, json!({})));
    let (code, err) = during_stage(&p, &["1", "0"], 2, &go, || {
        p.write("SPEC.md", "- [ ] Beta\n");
    });
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.read("SPEC.md"), "- [ ] Beta\n");
    let saved = p.refs("refs/kern/attempts/alpha/");
    assert_eq!(saved.len(), 1, "{err}");
    assert_eq!(
        p.dirty(),
        vec!["SPEC.md"],
        "only the person's own edit is left"
    );
}

#[test]
fn a_marker_typo_written_during_implement_keeps_the_file_and_exits_2_then_resumes_once_fixed() {
    let p = Project::new("- [ ] Alpha\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting(
        "implement",
        &go,
        json!({"result": {"status": "FAILED", "summary": "s", "attempt_note": "the build broke"}}),
    ));
    let (code, err) = during_stage(&p, &["3", "0"], 2, &go, || {
        let spec = p.read("SPEC.md");
        p.write(
            "SPEC.md",
            &format!("{spec}- [ ] Good new task\n- [] typo\n"),
        );
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("SPEC.md:6:3"), "{err}");
    assert!(err.contains("kern kept it exactly as it is"), "{err}");
    let kept = p.read("SPEC.md");
    assert!(kept.contains("- [ ] Good new task\n- [] typo\n"), "{kept}");
    assert!(!kept.contains("Attempt 1"), "kern's edit waits: {kept}");
    // Fixed by the person: kern's waiting Attempt note goes in first.
    p.write("SPEC.md", &kept.replace("- [] typo", "- [ ] typo"));
    let out = p.run(&["1", "0"]).expect(0);
    let err = &out.stderr;
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** the build broke"),
        "{spec}\n{err}"
    );
    assert!(spec.contains("- [ ] Good new task"), "{spec}");
    assert_eq!(spec.matches("Attempt 1").count(), 1, "{spec}");
}

#[test]
fn the_persons_work_during_a_read_only_stage_is_saved_before_it_is_reverted() {
    let p = Project::new("- [ ] Alpha\n");
    p.write("notes.txt", "mine\n");
    p.commit_all("notes");
    let go = p.outside.path().join("go");
    p.scenario(&waiting("research", &go, json!({})));
    let (code, err) = during_stage(&p, &["2", "0"], 1, &go, || {
        p.write("notes.txt", "mine, edited during research\n");
        p.write("new.txt", "a file created during research\n");
    });
    assert_eq!(code, 0, "{err}");
    let saved = p.refs("refs/kern/saved/");
    assert_eq!(saved.len(), 1, "{err}");
    assert_eq!(
        p.git(&["show", &format!("{}:notes.txt", saved[0])]),
        "mine, edited during research\n"
    );
    assert_eq!(
        p.git(&["show", &format!("{}:new.txt", saved[0])]),
        "a file created during research\n"
    );
    assert!(err.contains(&saved[0]), "the output names the ref: {err}");
    let event = p.run_events("violation");
    assert_eq!(event[0]["saved"][0], saved[0].as_str(), "{event:?}");
}

#[test]
fn allow_dirty_paths_are_outside_every_revert() {
    let p = Project::new("- [ ] Alpha\n");
    p.write("mine.txt", "dirty before the run\n");
    let go = p.outside.path().join("go");
    p.scenario(&waiting("research", &go, json!({})));
    let (code, err) = during_stage(&p, &["1", "0", "--allow-dirty"], 1, &go, || {
        p.write(
            "mine.txt",
            "dirty before the run, and edited during research\n",
        );
    });
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        p.read("mine.txt"),
        "dirty before the run, and edited during research\n"
    );
    assert!(p.refs("refs/kern/saved/").is_empty());
    assert!(!p.head_files().contains(&"mine.txt".to_string()));
}

/// Without kern's fence (`--sandbox off`; inside it `.git` is read-only and these git commands
/// fail, `fence.rs`), the audit after the stage is the guarantee — so for the next three too.
#[test]
fn unfenced_reset_hard_by_the_agent_is_undone_and_its_state_kept() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({
        "tasks": [{"match": "Beta", "implement": [
            {"write": {"out/beta.txt": "first\n"}, "shell": ["git reset -q --hard HEAD~1"]},
            {"write": {"out/beta.txt": "second\n"}}
        ]}],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    }));
    let err = p.run(&["3", "0", "--sandbox=off"]).expect(0).stderr;
    assert_eq!(p.log(), vec!["Add beta", "Add alpha", "initial"], "{err}");
    assert!(err.contains("moved history"), "{err}");
    let kept = p.refs("refs/kern/agent/beta/");
    assert!(
        kept.iter().any(|r| r.ends_with("/heads/master")),
        "{kept:?}"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** implement stage moved history"),
        "{spec}"
    );
    assert_eq!(p.read("out/beta.txt"), "second\n");
}

#[test]
fn unfenced_checkout_b_by_the_agent_puts_head_back_on_the_runs_branch() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({
        "tasks": [{"match": "Alpha", "implement": [
            {"shell": ["git checkout -q -b elsewhere"], "write": {"out/alpha.txt": "x\n"}},
            {"write": {"out/alpha.txt": "y\n"}}
        ]}],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    }));
    p.run(&["4", "0", "--sandbox=off"]).expect(0);
    assert_eq!(p.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/master");
    assert_eq!(p.log(), vec!["Add beta", "Add alpha", "initial"]);
    assert!(
        p.refs("refs/heads/elsewhere").len() == 1,
        "the agent's branch stays"
    );
}

#[test]
fn unfenced_stash_by_the_agent_goes_back_into_the_tree_and_the_task_is_done_on_its_first_attempt() {
    // A stash made in the run's own work tree during the stage is the agent's git write
    // (DESIGN.md section 4; issue 43): its changes, kern's own `[~]` among them, go back into
    // the tree, so the task is not read as set back by hand; the stash is kept under
    // `refs/kern/agent/…` and taken out of `git stash list`, and it is a violation.
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"out/alpha.txt": "stashed\n"}, "shell": ["git stash -q -u"]},
            {"write": {"out/alpha.txt": "second attempt\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let err = p.run(&["3", "0", "--sandbox=off"]).expect(0).stderr;
    assert_eq!(p.git(&["stash", "list"]), "", "{err}");
    assert_eq!(
        p.git(&["show", "refs/kern/agent/alpha/1/stash^3:out/alpha.txt"]),
        "stashed\n",
        "the stashed work is whole"
    );
    assert!(
        err.contains("violation: implement stage ran `git stash`"),
        "{err}"
    );
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
    assert_eq!(
        p.read("out/alpha.txt"),
        "stashed\n",
        "the first attempt's work"
    );
    assert_eq!(p.prompts("implement").len(), 1, "no second attempt: {err}");
    let head_commit = p.git(&["show", "--stat", "HEAD"]);
    assert!(
        head_commit.contains("out/alpha.txt"),
        "not only SPEC.md: {head_commit}"
    );
}

#[test]
fn unfenced_a_hook_and_an_exclude_planted_by_research_are_put_back_and_never_run() {
    let p = Project::new("- [ ] Alpha\n");
    let ran = p.outside.path().join("hook-ran");
    p.scenario(&json!({"default": {
        "research": {"shell": [
            format!("mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit", ran.display()),
            "echo 'out/' >> .git/info/exclude"
        ]},
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let exclude_before =
        std::fs::read_to_string(p.path().join(".git/info/exclude")).unwrap_or_default();
    let out = p.run(&["2", "0", "--sandbox=off"]).expect(4);
    let err = &out.stderr;
    assert!(err.contains("violation"), "{err}");
    assert!(!p.path().join(".git/hooks/pre-commit").exists());
    assert!(!ran.exists(), "the planted hook ran inside kern's commit");
    assert_eq!(
        std::fs::read_to_string(p.path().join(".git/info/exclude")).unwrap_or_default(),
        exclude_before
    );
    let saved = p.refs("refs/kern/saved/");
    assert!(
        saved.iter().any(|r| p
            .git(&["ls-tree", "-r", "--name-only", r])
            .contains("hooks/pre-commit")),
        "{saved:?}"
    );
}

#[test]
fn an_agent_that_rewrites_its_check_and_ticks_another_task_is_held_to_the_original_check() {
    let p = Project::new("- [ ] Alpha\n  > **Check:** false\n- [ ] Beta\n");
    p.scenario(&json!({"default": {
        "implement": {
            "write": {"out/{slug}.txt": "done\n"},
            "shell": ["sed -i 's/Check:\\*\\* false/Check:** true/; s/- \\[ \\] Beta/- [x] Beta/' SPEC.md"]
        },
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let err = p.run(&["1", "0"]).expect(4).stderr;
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** check `false` failed"),
        "{spec}"
    );
    assert!(err.contains("`Alpha` Check `false` → `true`"), "{err}");
    assert!(err.contains("`Beta` [ ] → [x]"), "{err}");
    let edits = p.run_events("hand_edit");
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert_eq!(p.log(), vec!["initial"]);
}

/// Without kern's fence (`--sandbox off`) the daemon escapes the agent's process group and
/// kern, its subreaper, finds it and stops it.
#[test]
fn unfenced_a_setsid_daemon_an_agent_leaves_behind_is_stopped_when_its_stage_ends() {
    let p = Project::new("- [ ] Alpha\n");
    let pid_file = p.outside.path().join("daemon.pid");
    let later = p.outside.path().join("later");
    p.scenario(&json!({"default": {
        "implement": {
            "write": {"out/{slug}.txt": "done\n"},
            "shell": [format!(
                "setsid sh -c 'echo $$ > {pid}; while [ ! -f {later} ]; do sleep 0.05; done; echo late > out/late.txt' </dev/null >/dev/null 2>&1 &",
                pid = pid_file.display(),
                later = later.display()
            ), format!("while [ ! -s {} ]; do sleep 0.01; done", pid_file.display())]
        },
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let err = p.run(&["1", "0", "--sandbox=off"]).expect(0).stderr;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        crate::support::is_dead(pid),
        "the daemon {pid} outlived its stage"
    );
    assert!(
        err.contains("left running outside its process group"),
        "{err}"
    );
    std::fs::write(&later, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!p.path().join("out/late.txt").exists());
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
}

/// Inside kern's fence (the default) a `setsid` daemon is still in the fence's PID namespace,
/// which ends with the stage: nothing it would write later reaches the tree.
#[test]
fn a_setsid_daemon_an_agent_leaves_behind_ends_with_its_fenced_stage() {
    let p = Project::new("- [ ] Alpha\n");
    let started = p.outside.path().join("daemon.started");
    let later = p.outside.path().join("later");
    let marker = crate::support::marker();
    p.scenario(&json!({"default": {
        "implement": {
            "write": {"out/{slug}.txt": "done\n"},
            "shell": [format!(
                "setsid sh -c 'touch {started}; while [ ! -f {later} ]; do sleep 0.05; done; echo late > out/late.txt' {marker} </dev/null >/dev/null 2>&1 &",
                started = started.display(),
                later = later.display()
            ), format!("while [ ! -f {} ]; do sleep 0.01; done", started.display())]
        },
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    assert!(started.exists(), "the daemon never started");
    let gone = crate::support::wait_gone(&marker);
    for pid in crate::support::holding(&marker) {
        crate::support::kill(pid);
    }
    assert!(gone, "the daemon {marker} outlived its stage");
    std::fs::write(&later, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!p.path().join("out/late.txt").exists());
    assert_eq!(p.log(), vec!["Add alpha", "initial"]);
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
}

#[test]
fn a_symlinked_spec_md_is_edited_through_its_target_and_stays_a_link() {
    let p = Project::new("");
    std::fs::create_dir_all(p.path().join("docs")).unwrap();
    p.write("docs/tasks.md", "- [ ] Alpha\n");
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    std::os::unix::fs::symlink("docs/tasks.md", p.path().join("SPEC.md")).unwrap();
    p.commit_all("tasks behind a link");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    let meta = std::fs::symlink_metadata(p.path().join("SPEC.md")).unwrap();
    assert!(
        meta.file_type().is_symlink(),
        "SPEC.md was replaced by a file"
    );
    assert!(p.read("docs/tasks.md").contains("- [x] Alpha"));
    let r = git2::Repository::open(p.path()).unwrap();
    let entry = r
        .head()
        .unwrap()
        .peel_to_tree()
        .unwrap()
        .get_path(Path::new("SPEC.md"))
        .unwrap();
    assert_eq!(
        entry.filemode(),
        0o120000,
        "the link is committed as a link"
    );
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
}

#[test]
fn status_counts_the_saved_refs_and_says_how_to_list_them() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"half.txt": "half\n"}, "result": {"status": "SKIPPED", "summary": "later"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    let out = p.run(&["status"]).expect(0);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains(
            "saved:     1 ref of work kern set aside — list them with `git for-each-ref refs/kern`"
        ),
        "{all}"
    );
    let out = p.run(&["status", "--json"]).expect(0);
    let json: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["saved_refs"], 1);
}

/// `caf\xe9.txt`: a Latin-1 name, not UTF-8.
const LATIN1_NAME: &[u8] = b"caf\xe9.txt";

/// A shell command that writes `text` to the file named [`LATIN1_NAME`].
fn write_latin1_file(text: &str) -> String {
    format!("printf '{text}' > \"$(printf 'caf\\351.txt')\"")
}

/// The blob of `name` in the tree of `rev`, read with libgit2 (names as bytes).
fn blob_in(p: &Project, rev: &str, name: &[u8]) -> Option<Vec<u8>> {
    let repo = git2::Repository::open(p.path()).unwrap();
    let tree = repo.revparse_single(rev).unwrap().peel_to_tree().unwrap();
    let entry = tree.iter().find(|e| e.name_bytes() == name)?;
    let blob = entry.to_object(&repo).unwrap().peel_to_blob().unwrap();
    Some(blob.content().to_vec())
}

fn latin1_path(p: &Project) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    p.path().join(std::ffi::OsStr::from_bytes(LATIN1_NAME))
}

#[test]
fn unfenced_a_file_with_a_name_that_is_not_utf8_made_by_research_is_saved_and_reverted() {
    // Without kern's fence (`--sandbox off`): inside it research's tree is a private layer and
    // its writes never reach the tree (fence::a_read_only_stage_writes_only_its_private_layer_
    // and_the_tree_never_changes); the audit that saves and reverts them is what holds here.
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "research": [
            {"shell": [write_latin1_file("made by research\\n")], "result": {"notes": ["n"]}},
            {"result": {"notes": ["n"]}}
        ],
        "implement": {"write": {"out/alpha.txt": "a\n"}, "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add alpha"}}
    }}));
    let out = p.run(&["2", "0", "--sandbox=off"]).expect(0);
    let err = &out.stderr;
    assert!(err.contains("violation"), "{err}");
    assert!(!latin1_path(&p).exists(), "reverted: {err}");
    let saved = p.refs("refs/kern/saved/");
    assert_eq!(saved.len(), 1, "{err}");
    assert_eq!(
        blob_in(&p, &saved[0], LATIN1_NAME).as_deref(),
        Some(&b"made by research\n"[..]),
        "saved under its own bytes"
    );
    assert_eq!(blob_in(&p, "HEAD", LATIN1_NAME), None, "never committed");
    assert_eq!(p.log()[0], "Add alpha");
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
}

#[test]
fn a_file_with_a_name_that_is_not_utf8_made_by_implement_is_committed_under_its_bytes() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": {"shell": [write_latin1_file("made by implement\\n")], "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add alpha"}}
    }}));
    let out = p.run(&["1", "0"]).expect(0);
    let err = &out.stderr;
    assert!(!err.contains("violation"), "{err}");
    assert_eq!(p.log()[0], "Add alpha", "{err}");
    assert_eq!(
        blob_in(&p, "HEAD", LATIN1_NAME).as_deref(),
        Some(&b"made by implement\n"[..]),
        "committed as git would: {err}"
    );
    assert!(latin1_path(&p).exists());
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    assert!(p.refs("refs/kern/").is_empty(), "nothing set aside");
}
