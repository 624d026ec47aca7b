//! Commits as git makes them, part 2 (issue 27): the identity git would pick, also where only
//! git can pick it (`includeIf "hasconfig:remote.*.url:…"`), and repository formats kern cannot
//! read yet (Git 3.0's SHA-256 objects and reftable refs, a split index) named before any
//! agent with git's own fix, in a run, `kern -n` and `kern doctor`.

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
fn git_3_formats_kern_cannot_read_stop_before_any_agent_with_gits_fix() {
    let p = Project::new("- [ ] unused\n");
    for (args, said) in [
        (
            vec!["--ref-format=reftable"],
            "git refs migrate --ref-format=files",
        ),
        (vec!["--object-format=sha256"], "is a SHA-256 repository"),
        (
            vec!["-c", "core.splitIndex=true"],
            "git update-index --no-split-index",
        ),
    ] {
        let args: Vec<&str> = args.clone();
        let dir = if args[0] == "-c" {
            let dir = made_with(&p, &[]);
            git_in(&dir, &["config", "core.splitIndex", "true"]);
            git_in(&dir, &["update-index", "--split-index"]);
            dir
        } else {
            made_with(&p, &args)
        };
        for command in [&["1", "0"][..], &["-n"], &["doctor"]] {
            let out = p
                .kern_std()
                .current_dir(&dir)
                .args(command)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {command:?}: {err}");
            assert!(err.contains(said), "{args:?} {command:?}: {err}");
            assert!(err.contains("which kern cannot read yet"), "{err}");
        }
        assert!(
            !p.outside.path().join("scenario.calls.jsonl").exists(),
            "no agent ran"
        );
    }
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
