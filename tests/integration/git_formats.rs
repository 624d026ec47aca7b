//! Commits as git makes them, part 2 (issue 27): the identity git would pick, also where only
//! git can pick it (`includeIf "hasconfig:remote.*.url:…"`); Git 3.0's repository formats
//! (SHA-256 objects, reftable refs, both) worked in as git works in them — commits, the refs
//! audit, `refs/kern/`, a resume after kill -9 — checked with git itself; and what kern still
//! cannot read (a split index, reftable refs without a git to read them) named before any
//! agent with the fix, in a run, `kern -n` and `kern doctor`.

use serde_json::json;

use crate::support::during::git_in;
use crate::support::project::Project;

#[test]
fn an_identity_chosen_by_the_remote_is_the_one_git_uses_in_commits_and_in_the_dry_run() {
    let p = Project::new("- [ ] Alpha\n");
    p.git(&["config", "--unset", "user.name"]);
    p.git(&["config", "--unset", "user.email"]);
    p.git(&[
        "remote",
        "add",
        "origin",
        "https://git.acme.example/team/app.git",
    ]);
    let home = p.outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Pat Personal\n\temail = pat@home.example\n[includeIf \"hasconfig:remote.*.url:https://git.acme.example/**\"]\n\tpath = acme.inc\n",
    )
    .unwrap();
    std::fs::write(
        home.join("acme.inc"),
        "[user]\n\tname = Pat Acme\n\temail = pat@acme.example\n",
    )
    .unwrap();
    let dry = p.run(&["-n"]).env("HOME", &home).expect(0).stdout;
    assert!(
        dry.contains("✓ git identity: Pat Acme <pat@acme.example>"),
        "{dry}"
    );
    let by_env = p
        .run(&["-n"])
        .env("HOME", &home)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "user.name")
        .env("GIT_CONFIG_VALUE_0", "Pat From The Environment")
        .expect(0)
        .stdout;
    assert!(
        by_env.contains("✓ git identity: Pat From The Environment <pat@acme.example>"),
        "GIT_CONFIG_* as git reads it: {by_env}"
    );
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["1", "0"]).env("HOME", &home).expect(0);
    assert_eq!(
        p.git(&["log", "-1", "--format=%an <%ae> / %cn <%ce>"])
            .trim(),
        "Pat Acme <pat@acme.example> / Pat Acme <pat@acme.example>"
    );
}

/// A scratch repository made by `git init ARGS` with one commit and a SPEC.md.
fn made_with(p: &Project, args: &[&str]) -> std::path::PathBuf {
    let dir = p.outside.path().join(format!("repo{}", args.join("")));
    let mut init = vec!["init", "-q"];
    init.extend(args);
    init.push(dir.to_str().unwrap());
    git_in(p.outside.path(), &init);
    std::fs::write(dir.join("SPEC.md"), "- [ ] Alpha\n").unwrap();
    git_in(&dir, &["add", "SPEC.md"]);
    git_in(
        &dir,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "initial",
        ],
    );
    dir
}

#[test]
fn a_split_index_kern_cannot_read_stops_before_any_agent_with_gits_fix() {
    let p = Project::new("- [ ] unused\n");
    let dir = made_with(&p, &[]);
    git_in(&dir, &["config", "core.splitIndex", "true"]);
    git_in(&dir, &["update-index", "--split-index"]);
    for command in [&["1", "0"][..], &["-n"], &["doctor"]] {
        let err = p.run(command).current_dir(&dir).expect(2).stderr;
        assert!(
            err.contains("git update-index --no-split-index"),
            "{command:?}: {err}"
        );
        assert!(err.contains("which kern cannot read yet"), "{err}");
    }
    assert!(
        !p.outside.path().join("scenario.calls.jsonl").exists(),
        "no agent ran"
    );
}

/// Git 3.0's formats, alone and together.
const GIT_3_FORMATS: [&[&str]; 3] = [
    &["--object-format=sha256"],
    &["--ref-format=reftable"],
    &["--object-format=sha256", "--ref-format=reftable"],
];

/// What git itself says of the repository kern worked in: `git fsck --strict` finds nothing
/// (dangling objects aside: a parallel task's own commits are, once applied),
/// the work tree is committed, and HEAD's tree is the one `git add -A && git commit` would
/// make of it (the index git builds from the work tree writes the same tree).
fn git_agrees(p: &Project, formats: &[&str]) {
    let fsck = std::process::Command::new("git")
        .args(["fsck", "--strict", "--no-dangling", "--no-progress"])
        .current_dir(p.path())
        .output()
        .unwrap();
    assert!(
        fsck.status.success() && fsck.stdout.is_empty() && fsck.stderr.is_empty(),
        "{formats:?}: git fsck: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert_eq!(p.git(&["status", "--porcelain"]), "", "{formats:?}");
    p.git(&["add", "-A"]);
    assert_eq!(
        p.git(&["write-tree"]),
        p.git(&["rev-parse", "HEAD^{tree}"]),
        "{formats:?}: git's tree of the work tree"
    );
    let length = if formats.contains(&"--object-format=sha256") {
        64
    } else {
        40
    };
    assert_eq!(p.git(&["rev-parse", "HEAD"]).trim().len(), length);
}

/// Unfenced (`--sandbox off`): inside kern's fence the agent's `git reset` cannot write `.git`,
/// and it is the audit of what an agent moved that this test holds in Git 3.0's formats.
#[test]
fn two_tasks_are_committed_in_git_3_formats_and_the_refs_audit_puts_back_what_an_agent_moved() {
    for formats in GIT_3_FORMATS {
        let p = Project::made_by_git(formats, "- [ ] Alpha\n- [ ] Beta\n");
        p.write(".gitattributes", "*.txt text eol=lf\n");
        p.git(&["add", ".gitattributes"]);
        p.git(&["commit", "-q", "-m", "attributes"]);
        p.git(&["branch", "topic"]);
        // Beta's first implement rewinds the branch: the audit puts it back and keeps the
        // agent's refs under refs/kern/agent/; the second attempt is committed.
        p.scenario(&json!({
            "tasks": [{"match": "Beta", "implement": [
                {"write": {"out/beta.txt": "first\r\n"}, "shell": ["git reset -q --hard HEAD~1"]},
                {"write": {"out/beta.txt": "second\r\n", "run.sh": "#!/bin/sh\n"},
                 "shell": ["chmod +x run.sh"]}
            ]}],
            "default": {
                "implement": {"write": {"out/{slug}.txt": "done\n"}},
                "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
            }
        }));
        let err = p.run(&["3", "0", "--sandbox=off"]).expect(0).stderr;
        assert_eq!(
            p.git(&["log", "--format=%s"]),
            "Add beta\nAdd alpha\nattributes\ninitial\n",
            "{formats:?}: {err}"
        );
        assert!(err.contains("moved history"), "{formats:?}: {err}");
        let kept = p.refs("refs/kern/agent/beta/");
        assert!(
            kept.iter().any(|r| r.ends_with("/heads/master")),
            "{formats:?}: {kept:?}"
        );
        assert_eq!(
            p.refs("refs/heads/"),
            ["refs/heads/master", "refs/heads/topic"]
        );
        assert_eq!(p.git(&["symbolic-ref", "HEAD"]), "refs/heads/master\n");
        assert_eq!(
            p.git(&["ls-tree", "HEAD", "run.sh"])
                .split_whitespace()
                .next(),
            Some("100755")
        );
        assert_eq!(p.git(&["show", "HEAD:out/beta.txt"]), "second\n");
        assert!(p.read("SPEC.md").contains("- [x] Beta"));
        git_agrees(&p, formats);
        // git's reflog of the branch has kern's commits, as `git commit` writes them.
        let reflog = p.git(&["reflog", "--format=%gs", "master"]);
        assert!(
            reflog.starts_with("commit: Add beta\n"),
            "{formats:?}: {reflog}"
        );
        let report = p.run(&["report"]).expect(0).stdout;
        assert!(report.contains("Beta"), "{formats:?}: {report}");
    }
}

#[test]
fn parallel_tasks_run_in_worktrees_git_can_read_in_a_git_3_repository() {
    let formats: &[&str] = &["--object-format=sha256", "--ref-format=reftable"];
    let p = Project::made_by_git(formats, "- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"},
                      "shell": ["git rev-parse --is-inside-work-tree > /dev/null"]},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let err = p.run(&["-j", "2", "3", "0"]).expect(0).stderr;
    let mut subjects: Vec<String> = p
        .git(&["log", "--format=%s", "HEAD~3.."])
        .lines()
        .map(str::to_string)
        .collect();
    subjects.sort();
    assert_eq!(subjects, ["Add alpha", "Add beta", "Add gamma"], "{err}");
    git_agrees(&p, formats);
    assert_eq!(
        p.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1,
        "the task worktrees are gone"
    );
    assert!(p.refs("refs/heads/kern/").is_empty(), "{err}");
}

#[test]
fn git_3_defaults_in_the_home_config_are_worked_in_as_git_does() {
    // `safe.bareRepository=explicit` and the init defaults Git 3.0 turns on, in the person's
    // git config: kern runs git only with the repository named (`--git-dir`), so git's own
    // reads of the refs still find it.
    let p = Project::made_by_git(
        &["--object-format=sha256", "--ref-format=reftable"],
        "- [ ] Alpha\n",
    );
    let home = p.outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[safe]\n\tbareRepository = explicit\n[init]\n\tdefaultObjectFormat = sha256\n\tdefaultRefFormat = reftable\n",
    )
    .unwrap();
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let dry = p.run(&["-n"]).env("HOME", &home).expect(0).stdout;
    assert!(dry.contains("✓ git identity: Test Person"), "{dry}");
    let doctor = p.run(&["doctor"]).env("HOME", &home).expect(0).stderr;
    assert!(doctor.contains("✓ git repository"), "{doctor}");
    assert!(doctor.contains("✓ git identity: Test Person"), "{doctor}");
    p.run(&["1", "0"]).env("HOME", &home).expect(0);
    assert_eq!(p.git(&["log", "-1", "--format=%s"]), "Add alpha\n");
    git_agrees(&p, &["--object-format=sha256"]);
}

#[test]
fn reftable_refs_without_a_git_to_read_them_stop_before_any_agent_with_the_fix() {
    let p = Project::made_by_git(&["--ref-format=reftable"], "- [ ] Alpha\n");
    // No git on the PATH: kern reads reftable refs through git, so it cannot start.
    for command in [&["1", "0"][..], &["-n"], &["doctor"]] {
        let err = p
            .run(command)
            .env("PATH", p.outside.path().join("no-bin"))
            .expect(2)
            .stderr;
        assert!(
            err.contains("install git 2.46 or newer")
                && err.contains("git refs migrate --ref-format=files"),
            "{command:?}: {err}"
        );
    }
    assert!(
        !p.outside.path().join("scenario.calls.jsonl").exists(),
        "no agent ran"
    );
}

#[test]
fn a_utf16_working_tree_encoding_file_is_stored_as_git_stores_it_and_cloned_back_byte_for_byte() {
    let p = Project::new("- [ ] Add the setup script\n");
    p.write(
        ".gitattributes",
        "*.ps1 text working-tree-encoding=UTF-16LE-BOM eol=crlf\n",
    );
    p.commit_all("attributes");
    let write = |name: &str, text: &str, cut: bool| {
        format!(
            "python3 -c \"b = '\\ufeff{text}'.encode('utf-16-le'); open('{name}', 'wb').write(b[:-1] if {cut} else b)\"",
            cut = if cut { "True" } else { "False" }
        )
    };
    p.scenario(&json!({"default": {
        "implement": {"shell": [
            write("setup.ps1", "Write-Host hi\\r\\nexit 0\\r\\n", false),
            write("broken.ps1", "half\\r\\n", true),
        ]},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the setup script"}}
    }}));
    let err = p.run(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("left out of the commit: `broken.ps1` (its working-tree-encoding is UTF-16LE-BOM, but it holds 11 bytes, not whole UTF-16LE-BOM characters; git refuses to add it too)"),
        "{err}"
    );
    let ours = p.git(&["rev-parse", "HEAD:setup.ps1"]);
    let gits = p.git(&["hash-object", "--path=setup.ps1", "setup.ps1"]);
    assert_eq!(ours, gits, "the blob git would store");
    assert_eq!(
        p.git(&["show", "HEAD:setup.ps1"]),
        "Write-Host hi\nexit 0\n"
    );
    assert!(p.git(&["ls-tree", "HEAD", "broken.ps1"]).is_empty());
    assert_eq!(
        p.git(&["status", "--porcelain", "setup.ps1"]),
        "",
        "git sees the file as committed"
    );
    let clone = p.outside.path().join("clone");
    git_in(
        p.outside.path(),
        &[
            "clone",
            "-q",
            &p.path().to_string_lossy(),
            &clone.to_string_lossy(),
        ],
    );
    assert_eq!(
        std::fs::read(clone.join("setup.ps1")).unwrap(),
        std::fs::read(p.path().join("setup.ps1")).unwrap(),
        "a fresh clone checks out the same bytes"
    );
}
