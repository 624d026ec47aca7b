//! The command line: what parses, what is refused (exit 2 with clap's message, or for a word
//! where the count goes, the commands), the help
//! text's defaults and examples, and the exit codes that no other test file owns.

use crate::support::{kern_in, project};

use project::Project;

#[test]
fn invalid_iterations_delay_or_flag_exit_2_with_clap_message() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["abc"],
            "`abc` is not a command, nor a number of tasks — the commands are status,",
        ),
        (vec!["10", "-5"], "unexpected argument '-5'"),
        (vec!["--frobnicate"], "unexpected argument '--frobnicate'"),
        (vec!["10", "soon"], "`soon` is not a duration"),
        (vec!["0"], "invalid value '0'"),
    ] {
        kern_in(dir.path()).args(&args).expect(2).stderr_has(needle);
    }
}

#[test]
fn help_shows_the_defaults_and_the_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = kern_in(dir.path()).args(["--help"]).expect(0);
    let help = out.utf8_stdout();
    for needle in [
        "[default: 5]",
        "[default: 10]",
        "kern 10 30",
        "kern -n",
        "--dry-run",
        "[env: KERN_MAX_ATTEMPTS=]",
        "[default: 60m]",
        "status",
        "init",
        "demo",
        "doctor",
    ] {
        assert!(help.contains(needle), "help lacks {needle:?}:\n{help}");
    }
}

#[test]
fn version_prints_the_crate_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = kern_in(dir.path()).args(["-V"]).expect(0);
    assert_eq!(out.stdout, format!("kern {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn an_unknown_agent_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = kern_in(dir.path())
        .args(["--agent", "gpt", "status"])
        .expect(2);
    assert_eq!(
        out.stderr,
        "kern: error: --agent: unknown agent `gpt` — use claude, codex or program:<path>\n"
    );
}

#[test]
fn outside_a_repository_exits_2_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    kern_in(dir.path())
        .args(["1", "0"])
        .expect(2)
        .stderr_has("is not inside a git repository")
        .stderr_has("git init");
}

#[test]
fn a_bare_repository_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::init_bare(dir.path()).unwrap();
    kern_in(dir.path())
        .args(["status"])
        .expect(2)
        .stderr_has("bare repository");
}

#[test]
fn an_unwritable_state_folder_is_exit_2_naming_the_path_and_the_fix() {
    let p = Project::new("- [ ] T\n");
    p.run(&[])
        .env("KERN_STATE_DIR", "/dev/null/kern")
        .args(["1", "0"])
        .expect(2)
        .stderr_has("`/dev/null/kern`")
        .stderr_has("point KERN_STATE_DIR");
}

#[test]
fn a_merge_in_progress_is_refused_with_the_fix() {
    let p = Project::new("- [ ] T\n");
    let git_dir = p.path().join(".git");
    let head = git2::Repository::open(p.path())
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    std::fs::write(git_dir.join("MERGE_HEAD"), format!("{head}\n")).unwrap();
    let out = p.run(&["1", "0"]).expect(2);
    let err = &out.stderr;
    assert!(err.contains("merge is in progress"), "{err}");
}

#[test]
fn an_index_lock_not_left_by_kern_is_reported_with_advice() {
    let p = Project::new("- [ ] T\n");
    std::fs::write(p.path().join(".git/index.lock"), "").unwrap();
    let out = p.run(&["1", "0"]).expect(2);
    let err = &out.stderr;
    assert!(
        err.contains("index.lock") && err.contains("remove the file"),
        "{err}"
    );
    assert!(
        p.path().join(".git/index.lock").exists(),
        "kern never deletes a lock it does not own"
    );
}

#[test]
fn a_detached_head_runs_with_its_own_state_folder() {
    let p = Project::new("- [ ] T\n");
    let r = git2::Repository::open(p.path()).unwrap();
    let head = r.head().unwrap().target().unwrap();
    r.set_head_detached(head).unwrap();
    let out = p.run(&["status", "--dir"]).expect(0);
    let dir = &out.stdout;
    assert!(dir.trim_end().ends_with("/HEAD"), "{dir}");
}
