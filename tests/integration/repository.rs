//! Integration tests of kern's git layer on real temporary repositories (made with git2).

use crate::support::git as git_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use git_support::{CHILD_MARKER, TestRepo, is_child, rerun_test};
use kern::error::Error;
use kern::testing::repository::{CommitRequest, Head, LeftOut, Repository};
use kern::testing::state::head_folder;

fn request(message: &str) -> CommitRequest<'_> {
    CommitRequest {
        message,
        exclude: &[],
        no_verify: false,
        notify: None,
    }
}

fn left(path: &str, reason: &str) -> LeftOut {
    LeftOut {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// A repository with one commit holding `README.md`.
fn repo_with_readme() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("README.md", "hello\n");
    repo.commit_all("initial");
    repo
}

// ---- sensitive files -------------------------------------------------------------------

#[test]
fn sensitive_file_names_are_left_out_and_reported() {
    let repo = repo_with_readme();
    let names = [
        (".env", ".env"),
        (".env.local", ".env.*"),
        ("certs/server.pem", "*.pem"),
        ("tls.key", "*.key"),
        ("id_rsa", "id_rsa*"),
        ("id_rsa.pub", "id_rsa*"),
        ("id_ed25519", "id_ed25519*"),
        ("bundle.p12", "*.p12"),
        ("bundle.pfx", "*.pfx"),
        (".npmrc", ".npmrc"),
        (".pypirc", ".pypirc"),
        (".netrc", ".netrc"),
        ("credentials.json", "credentials*.json"),
        ("config/credentials-prod.json", "credentials*.json"),
    ];
    for (name, _) in names {
        repo.write(name, "harmless text\n");
    }
    for ok in [
        ".env.example",
        ".env.sample",
        ".env.template",
        "src/main.rs",
    ] {
        repo.write(ok, "X=1\n");
    }
    let outcome = repo.kern().commit(&request("add files")).unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(
        repo.head_files(),
        vec![
            ".env.example",
            ".env.sample",
            ".env.template",
            "README.md",
            "src/main.rs"
        ]
    );
    let mut want: Vec<LeftOut> = names
        .iter()
        .map(|(n, p)| left(n, &format!("sensitive file name ({p})")))
        .collect();
    want.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(outcome.left_out, want);
}

#[test]
fn files_holding_secrets_are_left_out_and_reported() {
    let repo = repo_with_readme();
    let cases = [
        (
            "key.txt",
            format!("-----BEGIN {}-----\nabc\n", "OPENSSH PRIVATE KEY"),
            "holds a private key block",
        ),
        (
            "aws.cfg",
            format!("key = AKIA{}\n", "ABCDEFGHIJKLMNOP"),
            "looks like an AWS access key",
        ),
        (
            "gh.txt",
            format!("ghp_{}\n", "a".repeat(36)),
            "looks like a GitHub token",
        ),
        (
            "gho.txt",
            format!("gho_{}\n", "b".repeat(36)),
            "looks like a GitHub token",
        ),
        (
            "ghs.txt",
            format!("ghs_{}\n", "c".repeat(36)),
            "looks like a GitHub token",
        ),
        (
            "ghu.txt",
            format!("ghu_{}\n", "d".repeat(36)),
            "looks like a GitHub token",
        ),
        (
            "ghr.txt",
            format!("ghr_{}\n", "e".repeat(36)),
            "looks like a GitHub token",
        ),
        (
            "pat.txt",
            format!("github_pat_{}\n", "Ab1_".repeat(20)),
            "looks like a GitHub token",
        ),
        (
            "anthropic.sh",
            format!("export KEY=sk-ant-api03-{}\n", "Zz9".repeat(20)),
            "looks like an Anthropic API key",
        ),
        (
            "openai.py",
            format!("key = 'sk-{}'\n", "Ab3".repeat(16)),
            "looks like an OpenAI API key",
        ),
        (
            "openai_proj.py",
            format!("key = 'sk-proj-{}'\n", "a_B-".repeat(20)),
            "looks like an OpenAI API key",
        ),
        (
            "slack.json",
            format!("{{\"t\": \"xoxb-{}\"}}\n", "1234-".repeat(5)),
            "looks like a Slack token",
        ),
    ];
    for (name, content, _) in &cases {
        repo.write(name, content);
    }
    repo.write("clean.txt", "no secrets here\n");
    let outcome = repo.kern().commit(&request("add")).unwrap();
    assert_eq!(repo.head_files(), vec!["README.md", "clean.txt"]);
    let mut want: Vec<LeftOut> = cases.iter().map(|(n, _, r)| left(n, r)).collect();
    want.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(outcome.left_out, want);
}

#[test]
fn a_tracked_sensitive_file_stays_and_a_change_to_it_is_left_out() {
    let repo = repo_with_readme();
    repo.write(".env", "OLD=1\n");
    repo.commit_all("track .env by hand");
    repo.write(".env", "NEW=2\n");
    repo.write("README.md", "changed\n");
    let outcome = repo.kern().commit(&request("edit")).unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(repo.head_entry(".env").unwrap().0, b"OLD=1\n");
    assert_eq!(repo.head_entry("README.md").unwrap().0, b"changed\n");
    assert_eq!(
        outcome.left_out,
        vec![left(".env", "sensitive file name (.env)")]
    );
    // The work tree keeps the person's new value.
    assert_eq!(repo.read(".env"), "NEW=2\n");
}

#[test]
fn a_secret_an_agent_staged_itself_is_still_left_out() {
    let repo = repo_with_readme();
    repo.write("notes.txt", format!("token ghp_{}\n", "Q".repeat(36)));
    repo.write(".env", "A=1\n");
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("notes.txt")).unwrap();
    index.add_path(Path::new(".env")).unwrap();
    index.write().unwrap();
    repo.write("ok.txt", "fine\n");
    let outcome = repo.kern().commit(&request("agent work")).unwrap();
    assert_eq!(repo.head_files(), vec!["README.md", "ok.txt"]);
    assert_eq!(
        outcome.left_out,
        vec![
            left(".env", "sensitive file name (.env)"),
            left("notes.txt", "looks like a GitHub token"),
        ]
    );
    let index = repo.fresh_index();
    assert!(index.get_path(Path::new(".env"), 0).is_none());
    assert!(index.get_path(Path::new("notes.txt"), 0).is_none());
}

// ---- what a commit stages --------------------------------------------------------------

#[test]
fn deletions_and_renames_are_committed() {
    let repo = TestRepo::new();
    repo.write("a.txt", "alpha\n");
    repo.write("gone.txt", "bye\n");
    repo.commit_all("initial");
    fs::rename(repo.path().join("a.txt"), repo.path().join("b.txt")).unwrap();
    fs::remove_file(repo.path().join("gone.txt")).unwrap();
    let outcome = repo.kern().commit(&request("move and delete")).unwrap();
    assert!(outcome.left_out.is_empty());
    assert_eq!(repo.head_files(), vec!["b.txt"]);
    assert_eq!(repo.head_message(), "move and delete\n");
    assert_eq!(repo.commit_count(), 2);
}

#[test]
fn gitignore_is_honoured() {
    let repo = TestRepo::new();
    repo.write(".gitignore", "target/\n*.log\n");
    repo.write("src/lib.rs", "// lib\n");
    repo.write("target/debug/out", "binary");
    repo.write("run.log", "log");
    repo.kern().commit(&request("first")).unwrap();
    assert_eq!(repo.head_files(), vec![".gitignore", "src/lib.rs"]);
}

#[test]
fn the_executable_bit_and_symlinks_are_committed() {
    let repo = repo_with_readme();
    repo.write_script("run.sh", "#!/bin/sh\necho hi\n");
    std::os::unix::fs::symlink("README.md", repo.path().join("link")).unwrap();
    repo.kern().commit(&request("script and link")).unwrap();
    assert_eq!(repo.head_entry("run.sh").unwrap().1, 0o100755);
    assert_eq!(
        repo.head_entry("link").unwrap(),
        (b"README.md".to_vec(), 0o120000)
    );
    // Dropping the bit is a change too.
    fs::set_permissions(
        repo.path().join("run.sh"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let outcome = repo.kern().commit(&request("not executable")).unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(repo.head_entry("run.sh").unwrap().1, 0o100644);
}

#[test]
fn a_nested_repository_is_left_out_and_the_rest_committed() {
    let repo = repo_with_readme();
    let inner = repo.path().join("vendor/lib");
    fs::create_dir_all(&inner).unwrap();
    drop(git_support::init_at(&inner));
    fs::write(inner.join("x.txt"), "x\n").unwrap();
    repo.write("b.txt", "b\n");
    let outcome = repo.kern().commit(&request("with a clone inside")).unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(repo.head_files(), vec!["README.md", "b.txt"]);
    assert_eq!(
        outcome.left_out,
        vec![left(
            "vendor/lib",
            "a nested git repository — register it with `git submodule add <url> vendor/lib`, or add `vendor/lib/` to .gitignore"
        )]
    );
}

#[test]
fn nothing_to_commit_makes_no_commit() {
    let repo = repo_with_readme();
    let head = repo.git.head().unwrap().target();
    let outcome = repo.kern().commit(&request("nothing")).unwrap();
    assert_eq!(outcome.sha, None);
    assert!(outcome.left_out.is_empty());
    assert_eq!(repo.git.head().unwrap().target(), head);
    // Only a left-out file changed: still nothing to commit, and it is reported.
    repo.write(".env", "S=1\n");
    let outcome = repo.kern().commit(&request("nothing")).unwrap();
    assert_eq!(outcome.sha, None);
    assert_eq!(
        outcome.left_out,
        vec![left(".env", "sensitive file name (.env)")]
    );
}

#[test]
fn allow_dirty_paths_are_left_out_and_their_staging_is_kept() {
    let repo = TestRepo::new();
    repo.write("mine.txt", "v1\n");
    repo.write("docs/a.md", "a\n");
    repo.commit_all("initial");
    // The person's own work before the task: mine.txt staged, docs/ edited.
    repo.write("mine.txt", "v2 staged\n");
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("mine.txt")).unwrap();
    index.write().unwrap();
    repo.write("docs/a.md", "a edited\n");
    // The task's work.
    repo.write("task.rs", "fn task() {}\n");
    let exclude = [PathBuf::from("mine.txt"), repo.path().join("docs")];
    let outcome = repo
        .kern()
        .commit(&CommitRequest {
            message: "task",
            exclude: &exclude,
            no_verify: false,
            notify: None,
        })
        .unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(repo.head_entry("mine.txt").unwrap().0, b"v1\n");
    assert_eq!(repo.head_entry("docs/a.md").unwrap().0, b"a\n");
    assert_eq!(repo.head_entry("task.rs").unwrap().0, b"fn task() {}\n");
    assert_eq!(
        outcome.left_out,
        vec![
            left("docs/a.md", "the person's own change (--allow-dirty)"),
            left("mine.txt", "the person's own change (--allow-dirty)"),
        ]
    );
    // The person's staged version is still staged.
    let index = repo.fresh_index();
    let staged = index.get_path(Path::new("mine.txt"), 0).unwrap();
    assert_eq!(
        repo.git.find_blob(staged.id).unwrap().content(),
        b"v2 staged\n"
    );
    assert_eq!(repo.read("docs/a.md"), "a edited\n");
}

#[test]
fn an_unborn_branch_gets_its_first_commit() {
    let repo = TestRepo::new();
    let kern = repo.kern();
    assert_eq!(kern.head().unwrap(), Head::Unborn("main".into()));
    assert_eq!(kern.head_oid(), None);
    repo.write("first.txt", "1\n");
    let outcome = kern.commit(&request("first")).unwrap();
    let commit = repo.git.find_commit(outcome.sha.unwrap()).unwrap();
    assert_eq!(commit.parent_count(), 0);
    assert_eq!(kern.head().unwrap(), Head::Branch("main".into()));
    assert_eq!(kern.head_oid(), outcome.sha);
    assert_eq!(commit.author().name().unwrap(), "Kern Test");
    assert_eq!(commit.committer().email().unwrap(), "kern@example.com");
}

#[test]
fn a_detached_head_commits_on_head() {
    let repo = repo_with_readme();
    let first = repo.git.head().unwrap().target().unwrap();
    repo.git.set_head_detached(first).unwrap();
    repo.write("x.txt", "x\n");
    let sha = repo
        .kern()
        .commit(&request("detached"))
        .unwrap()
        .sha
        .unwrap();
    assert_eq!(repo.git.head().unwrap().target(), Some(sha));
    assert!(repo.git.head_detached().unwrap());
    // The branch did not move.
    assert_eq!(
        repo.git.refname_to_id("refs/heads/main").unwrap(),
        first,
        "main stays"
    );
}

// ---- hooks -----------------------------------------------------------------------------

#[test]
fn a_failing_pre_commit_hook_blocks_the_commit_and_its_output_comes_back() {
    let repo = repo_with_readme();
    repo.write_script(
        ".git/hooks/pre-commit",
        "#!/bin/sh\necho 'lint failed: src/a.rs'\necho 'to stderr' >&2\nexit 1\n",
    );
    repo.write("src/a.rs", "bad\n");
    let index_before = fs::read(repo.path().join(".git/index")).unwrap();
    let head = repo.git.head().unwrap().target();
    let err = repo.kern().commit(&request("blocked")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the `pre-commit` hook failed, nothing was committed — fix what it reports, or pass --no-verify to skip hooks:\nlint failed: src/a.rs\nto stderr\n(exit status 1)"
    );
    assert!(matches!(err, Error::HookFailed { ref hook, .. } if hook == "pre-commit"));
    assert_eq!(err.exit_code(), 1);
    assert_eq!(repo.git.head().unwrap().target(), head);
    assert_eq!(
        fs::read(repo.path().join(".git/index")).unwrap(),
        index_before,
        "the index is as it was"
    );
}

#[test]
fn hooks_run_in_the_top_folder_with_git_variables_and_see_the_staged_files() {
    let repo = repo_with_readme();
    let log = tempfile::NamedTempFile::new().unwrap();
    repo.write_script(
        ".git/hooks/pre-commit",
        &format!(
            "#!/bin/sh\necho \"$PWD|$GIT_DIR|$GIT_INDEX_FILE\" > {}\n",
            log.path().display()
        ),
    );
    repo.write("sub/new.txt", "n\n");
    Repository::discover(&repo.path().join("sub"))
        .unwrap()
        .commit(&request("with hook"))
        .unwrap();
    let top = repo.path();
    assert_eq!(
        fs::read_to_string(log.path()).unwrap(),
        format!(
            "{}|{}|{}\n",
            top.display(),
            top.join(".git/").display(),
            top.join(".git/index").display()
        )
    );
}

#[test]
fn a_commit_msg_hook_can_edit_the_message_and_a_failing_one_blocks() {
    let repo = repo_with_readme();
    repo.write_script(
        ".git/hooks/commit-msg",
        "#!/bin/sh\nprintf '\\nSigned-off-by: Hook <hook@example.com>\\n' >> \"$1\"\n",
    );
    repo.write("a.txt", "a\n");
    repo.kern().commit(&request("Add a\n\nBody.")).unwrap();
    assert_eq!(
        repo.head_message(),
        "Add a\n\nBody.\n\nSigned-off-by: Hook <hook@example.com>\n"
    );

    repo.write_script(
        ".git/hooks/commit-msg",
        "#!/bin/sh\necho 'subject too long' >&2\nexit 3\n",
    );
    repo.write("b.txt", "b\n");
    let count = repo.commit_count();
    let err = repo.kern().commit(&request("Add b")).unwrap_err();
    assert!(
        matches!(err, Error::CommitMessageRefused { ref hook, ref output } if hook == "commit-msg" && output == "subject too long\n(exit status 3)"),
        "{err:?}"
    );
    assert_eq!(repo.commit_count(), count);
}

#[test]
fn core_hooks_path_is_honoured_and_non_executable_hooks_are_skipped() {
    let repo = repo_with_readme();
    repo.git
        .config()
        .unwrap()
        .set_str("core.hooksPath", "githooks")
        .unwrap();
    // The default folder's hook must not run once core.hooksPath is set.
    repo.write_script(".git/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
    repo.write_script(
        "githooks/pre-commit",
        "#!/bin/sh\necho from-hooks-path\nexit 9\n",
    );
    repo.write("a.txt", "a\n");
    let err = repo.kern().commit(&request("a")).unwrap_err();
    assert!(
        matches!(err, Error::HookFailed { ref output, .. } if output == "from-hooks-path\n(exit status 9)"),
        "{err:?}"
    );
    fs::set_permissions(
        repo.path().join("githooks/pre-commit"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    assert!(repo.kern().commit(&request("a")).unwrap().sha.is_some());
}

#[test]
fn no_verify_skips_the_hooks() {
    let repo = repo_with_readme();
    repo.write_script(".git/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
    repo.write_script(".git/hooks/commit-msg", "#!/bin/sh\nexit 1\n");
    repo.write("a.txt", "a\n");
    let outcome = repo
        .kern()
        .commit(&CommitRequest {
            message: "skip hooks",
            exclude: &[],
            no_verify: true,
            notify: None,
        })
        .unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(repo.head_message(), "skip hooks\n");
}

// ---- identity ---------------------------------------------------------------------------

#[test]
fn missing_identity_gives_the_git_config_fix() {
    if is_child() {
        let dir = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(dir.path()).unwrap();
        drop(git);
        fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let err = Repository::discover(dir.path())
            .unwrap()
            .commit(&request("a"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "git has no author identity — run `git config --global user.name \"Your Name\"` and `git config --global user.email you@example.com`"
        );
        assert_eq!(err.exit_code(), 2);
        println!("{CHILD_MARKER}");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let out = rerun_test("repository::missing_identity_gives_the_git_config_fix")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .env_remove("EMAIL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(CHILD_MARKER), "{stdout}");
}

// ---- index.lock -------------------------------------------------------------------------

#[test]
fn an_index_lock_from_the_dead_run_is_removed_and_an_older_one_is_reported() {
    let repo = repo_with_readme();
    let kern = repo.kern();
    assert_eq!(
        kern.recover_index_lock(SystemTime::now()).unwrap(),
        None,
        "no lock, nothing to do"
    );
    let lock = repo.path().join(".git/index.lock");
    fs::write(&lock, "").unwrap();
    assert!(kern.index_lock_present());

    // Written after the dead run started: it is that run's.
    let started = SystemTime::now() - Duration::from_secs(60);
    assert_eq!(
        kern.recover_index_lock(started).unwrap(),
        Some(lock.clone())
    );
    assert!(!lock.exists());
    assert!(!kern.index_lock_present());

    // Older than the dead run: someone else's.
    fs::write(&lock, "").unwrap();
    let started = SystemTime::now() + Duration::from_secs(60);
    let err = kern.recover_index_lock(started).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` exists: another git process may be running — if none is, remove the file and run kern again",
            lock.display()
        )
    );
    assert_eq!(err.exit_code(), 2);
    assert!(lock.exists(), "never removed");

    // A commit while it is there is refused with the same advice.
    repo.write("a.txt", "a\n");
    let err = kern.commit(&request("a")).unwrap_err();
    assert!(matches!(err, Error::IndexLocked { .. }), "{err:?}");
    assert!(lock.exists());
}

// ---- discovery, HEAD, state ------------------------------------------------------------

#[test]
fn a_bare_repository_and_a_folder_outside_git_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.git");
    git2::Repository::init_bare(&bare).unwrap();
    let err = Repository::discover(&bare).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is a bare repository — kern needs a work tree; run it in a clone with a checkout",
            bare.display()
        )
    );
    assert_eq!(err.exit_code(), 2);

    let outside = dir.path().join("plain");
    fs::create_dir(&outside).unwrap();
    let err = Repository::discover(&outside).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not inside a git repository — run kern inside a git repository, or `git init` first",
            outside.display()
        )
    );
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn discovery_from_a_subfolder_finds_the_canonical_top() {
    let repo = repo_with_readme();
    fs::create_dir_all(repo.path().join("a/b")).unwrap();
    let kern = Repository::discover(&repo.dir.path().join("a/b")).unwrap();
    assert_eq!(kern.top(), repo.path());
}

#[test]
fn branch_folders_follow_the_design() {
    let repo = repo_with_readme();
    let kern = repo.kern();
    assert_eq!(head_folder(kern.head().unwrap().branch()), "main");
    let head = repo.git.head().unwrap().peel_to_commit().unwrap();
    repo.git.branch("feature/deep/x", &head, false).unwrap();
    repo.git.set_head("refs/heads/feature/deep/x").unwrap();
    assert_eq!(kern.head().unwrap(), Head::Branch("feature/deep/x".into()));
    assert_eq!(
        head_folder(kern.head().unwrap().branch()),
        "feature%2Fdeep%2Fx"
    );
    repo.git.set_head_detached(head.id()).unwrap();
    assert_eq!(kern.head().unwrap(), Head::Detached(head.id()));
    assert_eq!(head_folder(kern.head().unwrap().branch()), "HEAD");
    repo.git.set_head("refs/heads/new/unborn").unwrap();
    assert_eq!(kern.head().unwrap(), Head::Unborn("new/unborn".into()));
    assert_eq!(head_folder(kern.head().unwrap().branch()), "new%2Funborn");
}

#[test]
fn an_operation_in_progress_is_refused_with_the_fix() {
    let repo = repo_with_readme();
    let head = repo.git.head().unwrap().target().unwrap().to_string();
    let kern = repo.kern();
    kern.ensure_no_operation_in_progress().unwrap();
    let git_dir = repo.path().join(".git");
    let cases: [(&str, bool, &str); 5] = [
        (
            "MERGE_HEAD",
            false,
            "a merge is in progress — finish it (`git commit`) or abort it (`git merge --abort`), then run kern again",
        ),
        (
            "CHERRY_PICK_HEAD",
            false,
            "a cherry-pick is in progress — finish it (`git cherry-pick --continue`) or abort it (`git cherry-pick --abort`), then run kern again",
        ),
        (
            "REVERT_HEAD",
            false,
            "a revert is in progress — finish it (`git revert --continue`) or abort it (`git revert --abort`), then run kern again",
        ),
        (
            "BISECT_LOG",
            false,
            "a bisect is in progress — end it (`git bisect reset`), then run kern again",
        ),
        (
            "rebase-merge",
            true,
            "a rebase is in progress — finish it (`git rebase --continue`) or abort it (`git rebase --abort`), then run kern again",
        ),
    ];
    for (marker, is_dir, message) in cases {
        let path = git_dir.join(marker);
        if is_dir {
            fs::create_dir(&path).unwrap();
        } else {
            fs::write(&path, format!("{head}\n")).unwrap();
        }
        let err = kern.ensure_no_operation_in_progress().unwrap_err();
        assert_eq!(err.to_string(), message);
        assert_eq!(err.exit_code(), 2);
        repo.write("w.txt", "w\n");
        let err = kern.commit(&request("no")).unwrap_err();
        assert_eq!(err.to_string(), message, "commit refuses too");
        if is_dir {
            fs::remove_dir(&path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
    }
    kern.ensure_no_operation_in_progress().unwrap();
}

#[test]
fn a_linked_worktree_is_discovered_and_commits_on_its_own_branch() {
    let repo = repo_with_readme();
    let hook_log = tempfile::NamedTempFile::new().unwrap();
    repo.write_script(
        ".git/hooks/pre-commit",
        &format!("#!/bin/sh\necho ran > {}\n", hook_log.path().display()),
    );
    let parent = tempfile::tempdir().unwrap();
    let wt_path = parent.path().join("wt-feature");
    repo.git.worktree("wt-feature", &wt_path, None).unwrap();
    fs::create_dir_all(wt_path.join("src")).unwrap();
    let kern = Repository::discover(&wt_path.join("src")).unwrap();
    assert_eq!(kern.top(), wt_path.canonicalize().unwrap());
    assert_eq!(head_folder(kern.head().unwrap().branch()), "wt-feature");
    fs::write(wt_path.join("src/w.rs"), "w\n").unwrap();
    let sha = kern.commit(&request("in worktree")).unwrap().sha.unwrap();
    assert_eq!(
        repo.git.refname_to_id("refs/heads/wt-feature").unwrap(),
        sha
    );
    assert_ne!(repo.git.refname_to_id("refs/heads/main").unwrap(), sha);
    assert_eq!(
        fs::read_to_string(hook_log.path()).unwrap(),
        "ran\n",
        "hooks come from the common folder"
    );
    // The main work tree does not see the worktree's file as dirty.
    assert!(repo.kern().dirty_paths(&[]).unwrap().is_empty());
}

#[test]
fn dirty_paths_lists_changes_and_untracked_files_but_not_ignored_or_kerns_own() {
    let repo = TestRepo::new();
    repo.write(".gitignore", "*.tmp\n");
    repo.write("tracked.txt", "t\n");
    repo.write("staged.txt", "s\n");
    repo.write("deleted.txt", "d\n");
    repo.write("SPEC.md", "- [ ] a\n");
    repo.commit_all("initial");
    let kern = repo.kern();
    assert!(kern.dirty_paths(&[]).unwrap().is_empty());
    repo.write("tracked.txt", "t2\n");
    repo.write("staged.txt", "s2\n");
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    fs::remove_file(repo.path().join("deleted.txt")).unwrap();
    repo.write("new/dir/file.txt", "n\n");
    repo.write("scratch.tmp", "ignored\n");
    repo.write("SPEC.md", "- [~] a\n");
    repo.write("LEARNINGS.md", "x\n");
    let spec = repo.path().join("SPEC.md");
    assert_eq!(
        kern.dirty_paths(&[&spec, Path::new("LEARNINGS.md")])
            .unwrap(),
        vec![
            "deleted.txt",
            "new/dir/file.txt",
            "staged.txt",
            "tracked.txt"
        ]
    );
    assert_eq!(kern.dirty_paths(&[]).unwrap().len(), 6);
}

// ---- prompt context ---------------------------------------------------------------------

#[test]
fn recent_commits_show_subjects_and_stats_within_the_budget() {
    let repo = TestRepo::new();
    assert_eq!(
        repo.kern().recent_commits(5, &[], 4096).unwrap(),
        "(no commits yet)\n"
    );
    repo.write("a.txt", "one\ntwo\n");
    let first = repo.commit_all("Add a\n\nWith a body.");
    repo.write("a.txt", "one\n");
    repo.write("b.txt", "b\n");
    let second = repo.commit_all("Trim a, add b");
    let short = |o: git2::Oid| o.to_string()[..7].to_string();
    let full = repo.kern().recent_commits(5, &[], 4096).unwrap();
    assert_eq!(
        full,
        format!(
            "{} Trim a, add b\n a.txt | 1 -\n b.txt | 1 +\n 2 files changed, 1 insertion(+), 1 deletion(-)\n\n{} Add a\n a.txt | 2 ++\n 1 file changed, 2 insertions(+)\n\n",
            short(second),
            short(first)
        )
    );
    assert_eq!(
        repo.kern().recent_commits(1, &[], 4096).unwrap(),
        full[..full.find("\n\n").unwrap() + 2]
    );
    let cut = repo.kern().recent_commits(5, &[], 90).unwrap();
    assert!(cut.len() <= 90, "{} bytes", cut.len());
    let kept = cut.find("[…").unwrap();
    assert_eq!(&cut[..kept], &full[..kept]);
    assert!(
        cut.ends_with(&format!("[… {} more bytes cut]\n", full.len() - kept)),
        "{cut}"
    );
}

#[test]
fn recent_commits_leave_kerns_own_files_out_of_the_stats() {
    let repo = TestRepo::new();
    repo.write("SPEC.md", "- [ ] a\n");
    repo.write("a.txt", "one\n");
    let first = repo.commit_all("Start");
    repo.write("SPEC.md", "- [x] a\n");
    let second = repo.commit_all("Only SPEC");
    let short = |o: git2::Oid| o.to_string()[..7].to_string();
    let kern = repo.kern();
    let text = kern
        .recent_commits(5, &[std::path::Path::new("SPEC.md")], 4096)
        .unwrap();
    assert_eq!(
        text,
        format!(
            "{} Only SPEC\n\n{} Start\n a.txt | 1 +\n 1 file changed, 1 insertion(+)\n\n",
            short(second),
            short(first)
        )
    );
}

#[test]
fn a_huge_commit_has_its_stat_capped_and_each_commit_is_diffed_once_per_run() {
    let repo = TestRepo::new();
    for i in 0..45 {
        repo.write(&format!("f{i:02}.txt"), "x\n");
    }
    let import = repo.commit_all("Import");
    let short = |o: git2::Oid| o.to_string()[..7].to_string();
    // One repository for the whole test, as a run holds one: the second call sees a new HEAD
    // and must still show the first commit exactly as a fresh look does.
    let kern = repo.kern();
    let text = kern.recent_commits(5, &[], 1 << 20).unwrap();
    let mut want = format!("{} Import\n", short(import));
    for i in 0..40 {
        want.push_str(&format!(" f{i:02}.txt | 1 +\n"));
    }
    want.push_str(" 40 files changed, 40 insertions(+)\n (and 5 more files, not counted)\n\n");
    assert_eq!(text, want);
    repo.write("f00.txt", "y\n");
    let next = repo.commit_all("Change f00");
    let text = kern.recent_commits(5, &[], 1 << 20).unwrap();
    assert_eq!(
        text,
        format!(
            "{} Change f00\n f00.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n{want}",
            short(next)
        )
    );
    assert_eq!(text, repo.kern().recent_commits(5, &[], 1 << 20).unwrap());
}

#[test]
fn diff_since_shows_stat_then_patch_with_untracked_files_within_the_budget() {
    let repo = TestRepo::new();
    repo.write(".gitignore", "*.log\n");
    repo.write("a.txt", "one\ntwo\n");
    repo.write("SPEC.md", "- [ ] t\n");
    let base = repo.commit_all("initial");
    repo.write("a.txt", "one\nTWO\n");
    repo.write("new.txt", "fresh\n");
    repo.write("noise.log", "ignored\n");
    repo.write("SPEC.md", "- [~] t\n");
    let kern = repo.kern();
    let spec = Path::new("SPEC.md");
    let full = kern.diff_since(Some(base), &[spec], 24 * 1024).unwrap();
    let stat =
        " a.txt   | 2 +-\n new.txt | 1 +\n 2 files changed, 2 insertions(+), 1 deletion(-)\n";
    assert!(full.starts_with(stat), "{full}");
    assert!(full.contains("-two\n+TWO\n"), "{full}");
    assert!(
        full.contains("+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"),
        "{full}"
    );
    assert!(!full.contains("noise.log"));
    assert!(!full.contains("SPEC.md"));

    // Without a base: everything is new.
    let all = kern.diff_since(None, &[], 24 * 1024).unwrap();
    assert!(
        all.starts_with(
            " .gitignore | 1 +\n SPEC.md    | 1 +\n a.txt      | 2 ++\n new.txt    | 1 +\n"
        ),
        "{all}"
    );

    // A small budget keeps the stat whole and cuts the patch with a note.
    let budget = stat.len() + 80;
    let cut = kern.diff_since(Some(base), &[spec], budget).unwrap();
    assert!(cut.len() <= budget, "{} > {budget}", cut.len());
    assert!(cut.starts_with(stat));
    assert!(cut.contains(" more bytes cut]\n"), "{cut}");
    // Even a budget smaller than the stat is kept.
    let tiny = kern.diff_since(Some(base), &[spec], 40).unwrap();
    assert!(tiny.len() <= 40, "{tiny:?}");

    assert_eq!(
        kern.diff_since(
            Some(base),
            &[Path::new("a.txt"), Path::new("new.txt"), spec],
            1000
        )
        .unwrap(),
        "(no changes)\n"
    );
}

#[test]
fn diff_since_shows_what_was_committed_after_the_base_and_what_is_uncommitted() {
    let repo = TestRepo::new();
    for d in 0..20 {
        repo.write(&format!("d{d}/untouched.txt"), "same\n");
    }
    repo.write("a.txt", "a\n");
    repo.write("b.txt", "b\n");
    let base = repo.commit_all("initial");
    repo.write("b.txt", "b2\n");
    repo.commit_all("an agent's own commit");
    repo.write("a.txt", "a2\n");
    let kern = repo.kern();
    // The same repository as a run holds it: its status looks go through the watch.
    kern.watch_work_tree();
    assert_eq!(kern.dirty_paths(&[]).unwrap(), vec!["a.txt"]);
    let diff = kern.diff_since(Some(base), &[], 24 * 1024).unwrap();
    assert!(
        diff.starts_with(
            " a.txt | 2 +-\n b.txt | 2 +-\n 2 files changed, 2 insertions(+), 2 deletions(-)\n"
        ),
        "{diff}"
    );
    repo.write("a.txt", "a\n");
    let diff = kern.diff_since(Some(base), &[], 24 * 1024).unwrap();
    assert!(
        diff.starts_with(" b.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n"),
        "{diff}"
    );
    let head = repo.git.head().unwrap().target().unwrap();
    assert_eq!(
        kern.diff_since(Some(head), &[], 1000).unwrap(),
        "(no changes)\n"
    );
}

#[test]
fn changed_since_counts_committed_and_uncommitted_work_and_leaves_out_excluded_paths() {
    let repo = TestRepo::new();
    for d in 0..20 {
        repo.write(&format!("d{d}/untouched.txt"), "same\n");
    }
    repo.write("a.txt", "a\n");
    repo.write("notes/todo.txt", "t\n");
    let base = repo.commit_all("initial");
    let kern = repo.kern();
    kern.watch_work_tree();
    assert!(!kern.changed_since(Some(base), &[]).unwrap());
    // Only an excluded path changed: no change.
    repo.write("notes/todo.txt", "t2\n");
    let notes = repo.path().join("notes");
    assert!(!kern.changed_since(Some(base), &[&notes]).unwrap());
    assert!(kern.changed_since(Some(base), &[]).unwrap());
    repo.write("notes/todo.txt", "t\n");
    assert!(!kern.changed_since(Some(base), &[]).unwrap());
    // An agent's own commit on top of the base, with a clean tree: a change.
    repo.write("d3/untouched.txt", "edited\n");
    repo.commit_all("an agent's own commit");
    assert!(kern.dirty_paths(&[]).unwrap().is_empty());
    assert!(kern.changed_since(Some(base), &[]).unwrap());
    // A new untracked file is a change.
    repo.write("d3/new.txt", "n\n");
    assert!(kern.changed_since(Some(base), &[]).unwrap());
}

// ---- snapshots --------------------------------------------------------------------------

#[test]
fn a_snapshot_sees_no_change_when_nothing_changed_even_after_an_index_refresh() {
    let repo = TestRepo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("initial");
    repo.write("dirty.txt", "mine\n");
    let kern = repo.kern();
    let snap = kern.snapshot().unwrap();
    assert_eq!(snap.dirty_paths().collect::<Vec<_>>(), vec!["dirty.txt"]);
    // What `git status` does: rewrite the index with fresh stat data.
    let mut index = repo.git.index().unwrap();
    index.read(true).unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    assert!(kern.changes_since(&snap).unwrap().is_empty());
    assert!(kern.revert_to(&snap, &[]).unwrap().is_empty());
    assert_eq!(repo.read("dirty.txt"), "mine\n");
    assert!(snap.refs().diff(&kern.refs_snapshot().unwrap()).is_empty());
}

#[test]
fn revert_restores_created_changed_dirty_and_deleted_files_and_the_index() {
    let repo = TestRepo::new();
    repo.write("clean.txt", "clean\n");
    repo.write("dirty.txt", "committed\n");
    repo.write("doomed.txt", "keep me\n");
    repo.write_script("tool.sh", "#!/bin/sh\n");
    repo.write("staged.txt", "base\n");
    repo.commit_all("initial");
    // The person's dirty state before the stage.
    repo.write("dirty.txt", "person's edit\n");
    repo.write("untracked.txt", "person's new file\n");
    repo.write("staged.txt", "person staged\n");
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    let kern = repo.kern();
    let snap = kern.snapshot().unwrap();
    let refs_before = kern.refs_snapshot().unwrap();

    // A "read-only" stage misbehaves.
    repo.write("created/deep/new.txt", "agent\n");
    repo.write("clean.txt", "agent changed\n");
    repo.write("dirty.txt", "agent changed the person's edit\n");
    fs::remove_file(repo.path().join("doomed.txt")).unwrap();
    fs::remove_file(repo.path().join("untracked.txt")).unwrap();
    fs::set_permissions(
        repo.path().join("tool.sh"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("clean.txt")).unwrap();
    index.write().unwrap();

    let changes = kern.changes_since(&snap).unwrap();
    assert_eq!(
        changes,
        vec![
            "(index)",
            "clean.txt",
            "created/deep/new.txt",
            "dirty.txt",
            "doomed.txt",
            "tool.sh",
            "untracked.txt"
        ]
    );
    let reverted = kern.revert_to(&snap, &[]).unwrap();
    assert_eq!(reverted, changes);
    assert_eq!(repo.read("clean.txt"), "clean\n");
    assert_eq!(repo.read("dirty.txt"), "person's edit\n");
    assert_eq!(repo.read("doomed.txt"), "keep me\n");
    assert_eq!(repo.read("untracked.txt"), "person's new file\n");
    assert_eq!(repo.read("staged.txt"), "person staged\n");
    assert!(!repo.exists("created/deep/new.txt"));
    assert!(!repo.exists("created"), "the folders it created are gone");
    let mode = fs::metadata(repo.path().join("tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable again");
    // The index is the person's again: staged.txt staged, clean.txt not.
    let index = repo.fresh_index();
    let staged = index.get_path(Path::new("staged.txt"), 0).unwrap();
    assert_eq!(
        repo.git.find_blob(staged.id).unwrap().content(),
        b"person staged\n"
    );
    let clean = index.get_path(Path::new("clean.txt"), 0).unwrap();
    assert_eq!(repo.git.find_blob(clean.id).unwrap().content(), b"clean\n");
    assert!(kern.changes_since(&snap).unwrap().is_empty());
    assert!(refs_before.diff(&kern.refs_snapshot().unwrap()).is_empty());
}

#[test]
fn a_commit_made_during_a_read_only_stage_shows_in_the_refs() {
    let repo = repo_with_readme();
    let kern = repo.kern();
    let snap = kern.snapshot().unwrap();
    repo.write("sneaky.txt", "s\n");
    let sha = repo.commit_all("sneaky");
    let moved = snap.refs().diff(&kern.refs_snapshot().unwrap());
    let old = snap.refs().head_oid().unwrap().to_string()[..7].to_string();
    let new = sha.to_string()[..7].to_string();
    assert_eq!(
        moved,
        vec![
            format!("HEAD moved from {old} to {new}"),
            format!("refs/heads/main moved from {old} to {new}"),
        ]
    );
    assert_eq!(kern.changes_since(&snap).unwrap(), vec!["(index)"]);
}

// ---- hooks as git runs them, and what the loop needs from them ---------------------------

#[test]
fn a_refused_message_is_its_own_error_naming_the_hook() {
    let repo = repo_with_readme();
    repo.write_script(
        ".git/hooks/prepare-commit-msg",
        "#!/bin/sh\necho 'no ticket in the branch name' >&2\nexit 1\n",
    );
    repo.write("a.txt", "a\n");
    let index_before = fs::read(repo.path().join(".git/index")).unwrap();
    let err = repo.kern().commit(&request("Add a")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the `prepare-commit-msg` hook refused the commit message, nothing was committed — fix the hook (--no-verify does not skip it, as in git):\nno ticket in the branch name\n(exit status 1)"
    );
    assert_eq!(err.exit_code(), 1);
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(
        fs::read(repo.path().join(".git/index")).unwrap(),
        index_before
    );

    repo.write_script(".git/hooks/prepare-commit-msg", "#!/bin/sh\nexit 0\n");
    repo.write_script(
        ".git/hooks/commit-msg",
        "#!/bin/sh\necho 'subject may not be empty' >&2\nexit 1\n",
    );
    let err = repo.kern().commit(&request("Add a")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the `commit-msg` hook refused the commit message, nothing was committed — write a message it accepts, or pass --no-verify to skip it:\nsubject may not be empty\n(exit status 1)"
    );
}

#[test]
fn a_fixer_hook_that_touches_files_outside_the_commit_still_refuses() {
    let repo = repo_with_readme();
    let outside = tempfile::tempdir().unwrap();
    let log = outside.path().join("hook-runs");
    // Fixes the staged file, but also writes a file kern did not stage: no re-staging.
    repo.write_script(
        ".git/hooks/pre-commit",
        &format!(
            "#!/bin/sh\necho run >> {}\nsed -i 's/ *$//' a.txt\necho generated > other.txt\nexit 1\n",
            log.display()
        ),
    );
    repo.write("a.txt", "a   \n");
    let err = repo.kern().commit(&request("Add a")).unwrap_err();
    assert!(
        matches!(err, Error::HookFailed { ref hook, .. } if hook == "pre-commit"),
        "{err:?}"
    );
    assert_eq!(fs::read_to_string(&log).unwrap(), "run\n", "ran once");
    assert_eq!(repo.commit_count(), 1);
}

#[test]
fn a_fixer_hook_that_refuses_twice_gives_its_second_output() {
    let repo = repo_with_readme();
    let outside = tempfile::tempdir().unwrap();
    let count = outside.path().join("hook-count");
    repo.write_script(
        ".git/hooks/pre-commit",
        &format!(
            "#!/bin/sh\necho x >> {c}\nn=$(wc -l < {c})\nsed -i 's/ *$//' a.txt\necho \"refusal $n\"\nexit 1\n",
            c = count.display()
        ),
    );
    repo.write("a.txt", "a   \n");
    let err = repo.kern().commit(&request("Add a")).unwrap_err();
    assert!(
        matches!(err, Error::HookFailed { ref output, .. } if output == "refusal 2\n(exit status 1)"),
        "{err:?}"
    );
    assert_eq!(repo.commit_count(), 1);
}

#[test]
fn a_failing_post_commit_hook_is_a_note_and_the_commit_stands() {
    let repo = repo_with_readme();
    repo.write_script(
        ".git/hooks/post-commit",
        "#!/bin/sh\necho 'notify failed'\nexit 7\n",
    );
    repo.write("a.txt", "a\n");
    let outcome = repo.kern().commit(&request("Add a")).unwrap();
    assert!(outcome.sha.is_some());
    assert_eq!(
        outcome.notes,
        vec![
            "the `post-commit` hook failed (the commit stands, as with git):\nnotify failed\n(exit status 7)"
        ]
    );
    assert_eq!(repo.commit_count(), 2);
}

#[test]
fn the_hooks_that_exist_are_listed_from_core_hooks_path() {
    let repo = repo_with_readme();
    repo.write_script(".git/hooks/pre-commit", "#!/bin/sh\n");
    repo.write(".git/hooks/commit-msg.sample", "#!/bin/sh\n");
    let kern = repo.kern();
    assert_eq!(kern.hooks_dir(), repo.path().join(".git/hooks"));
    assert_eq!(kern.commit_hooks(), vec!["pre-commit"]);
    repo.git
        .config()
        .unwrap()
        .set_str("core.hooksPath", ".husky")
        .unwrap();
    repo.write_script(".husky/commit-msg", "#!/bin/sh\n");
    repo.write_script(".husky/post-commit", "#!/bin/sh\n");
    let kern = repo.kern();
    assert_eq!(kern.hooks_dir(), repo.path().join(".husky"));
    assert_eq!(kern.commit_hooks(), vec!["commit-msg", "post-commit"]);
}

#[test]
fn an_index_lock_held_too_long_is_an_error_after_the_wait_and_nothing_changes() {
    let repo = repo_with_readme();
    repo.write("a.txt", "a\n");
    let lock = repo.path().join(".git/index.lock");
    fs::write(&lock, "").unwrap();
    let heard = std::cell::RefCell::new(Vec::new());
    let notify = |text: &str| heard.borrow_mut().push(text.to_string());
    let started = std::time::Instant::now();
    let err = repo
        .kern()
        .commit(&CommitRequest {
            message: "Add a",
            exclude: &[],
            no_verify: false,
            notify: Some(&notify),
        })
        .unwrap_err();
    assert!(started.elapsed() >= kern::testing::repository::INDEX_LOCK_WAIT);
    assert!(
        matches!(err, Error::IndexLocked { ref path } if *path == lock),
        "{err:?}"
    );
    assert_eq!(
        *heard.borrow(),
        vec![format!(
            "waiting for `{}`: another git process is using the index (up to 10 s)",
            lock.display()
        )]
    );
    assert_eq!(repo.commit_count(), 1);
    assert!(lock.exists(), "not ours to remove");
}

// ---- kern's own files, left-out files and sparse entries in the clean-tree check ----------

#[test]
fn editor_files_and_left_out_files_are_not_dirty_and_an_audit_leaves_them_alone() {
    let repo = repo_with_readme();
    repo.write("docs/PLAN.md", "- [ ] a\n");
    repo.commit_all("plan");
    let mut kern = repo.kern();
    kern.set_options(kern::testing::repository::GitOptions {
        own_files: vec![
            repo.path().join("docs/PLAN.md"),
            PathBuf::from("docs/LEARNINGS.md"),
        ],
        ..Default::default()
    });
    let snap = kern.snapshot().unwrap();
    for name in [
        "docs/.PLAN.md.swp",
        "docs/PLAN.md~",
        "docs/.LEARNINGS.md.swp",
        "docs/4913",
    ] {
        repo.write(name, "editor\n");
    }
    repo.write(".env", "SECRET=1\n");
    repo.write("vendor/clone/x", "x\n");
    drop(git_support::init_at(&repo.path().join("vendor/clone")));
    repo.write("work.txt", "w\n");
    assert_eq!(kern.dirty_paths(&[]).unwrap(), vec!["work.txt"]);
    assert_eq!(
        kern.changes_since(&snap).unwrap(),
        vec![".env", "vendor/clone/", "work.txt"]
    );
    kern.revert_to(&snap, &[]).unwrap();
    assert!(
        repo.exists("docs/.PLAN.md.swp") && repo.exists("docs/4913"),
        "kept"
    );
    assert!(!repo.exists("work.txt"));
}

#[test]
fn skip_worktree_entries_are_never_dirty_deleted_or_staged() {
    let repo = repo_with_readme();
    repo.write("out/a.txt", "a\n");
    repo.write("out/b.txt", "b\n");
    repo.commit_all("two files");
    // What `git sparse-checkout set` leaves: the entries flagged, the files gone.
    let mut index = repo.git.index().unwrap();
    for path in ["out/a.txt", "out/b.txt"] {
        let mut entry = index.get_path(Path::new(path), 0).unwrap();
        entry.flags_extended |= git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits();
        entry.flags |= 0x4000; // the extended-flags bit
        index.add(&entry).unwrap();
        fs::remove_file(repo.path().join(path)).unwrap();
    }
    index.write().unwrap();
    let kern = repo.kern();
    assert!(kern.dirty_paths(&[]).unwrap().is_empty());
    let snap = kern.snapshot().unwrap();
    assert_eq!(snap.dirty_paths().count(), 0);
    repo.write("new.txt", "n\n");
    kern.commit(&request("Add new")).unwrap();
    assert_eq!(
        repo.head_files(),
        vec!["README.md", "new.txt", "out/a.txt", "out/b.txt"]
    );
    let index = repo.fresh_index();
    let entry = index.get_path(Path::new("out/a.txt"), 0).unwrap();
    assert_ne!(
        entry.flags_extended & git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits(),
        0
    );
}

#[test]
fn a_filtered_file_put_back_by_an_audit_gets_its_smudged_content() {
    let repo = repo_with_readme();
    let mut config = repo.git.config().unwrap();
    config
        .set_str("filter.rot.clean", "tr 'a-z' 'n-za-m'")
        .unwrap();
    config
        .set_str("filter.rot.smudge", "tr 'a-z' 'n-za-m'")
        .unwrap();
    drop(config);
    repo.write(".gitattributes", "*.sec filter=rot\n");
    repo.write("a.sec", "hello\n");
    let kern = repo.kern();
    kern.commit(&request("Add a secret file")).unwrap();
    assert_eq!(repo.head_entry("a.sec").unwrap().0, b"uryyb\n");
    assert!(
        kern.dirty_paths(&[]).unwrap().is_empty(),
        "the clean output is the blob"
    );
    let snap = kern.snapshot().unwrap();
    repo.write("a.sec", "changed by a read-only stage\n");
    assert_eq!(kern.changes_since(&snap).unwrap(), vec!["a.sec"]);
    kern.revert_to(&snap, &[]).unwrap();
    assert_eq!(
        repo.read("a.sec"),
        "hello\n",
        "smudged, not the stored blob"
    );
    assert!(kern.changes_since(&snap).unwrap().is_empty());
}

#[test]
fn the_preflight_names_each_check_and_a_run_needs_them_all() {
    let repo = repo_with_readme();
    let kern = repo.kern();
    let checks: Vec<(&str, bool)> = kern
        .preflight()
        .iter()
        .map(|c| (c.name, c.result.is_ok()))
        .collect();
    assert_eq!(
        checks,
        vec![
            ("git identity", true),
            ("commit signing", true),
            ("git operation", true),
            ("git index", true),
            ("filter drivers", true)
        ]
    );
    kern.ensure_ready().unwrap();
    repo.git
        .config()
        .unwrap()
        .set_bool("index.sparse", true)
        .unwrap();
    let e = repo.kern().ensure_ready().unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().ends_with("— run `git sparse-checkout init --no-sparse-index` (your sparse checkout stays as it is)"), "{e}");
}
