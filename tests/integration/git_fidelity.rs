//! Commits exactly as `git commit` would make them (issue 13): the real `kern` binary in
//! temporary repositories set up with the real `git` program (and git-lfs, gpg, ssh-keygen),
//! each result compared with what `git add -A && git commit` makes of the same content in a
//! copy of the repository. kern itself never runs git; these tests do, to set up and to check.
//!
//! Every test runs git and kern with their own `HOME`, so the machine's global git config
//! (identity, signing, hooks) cannot leak in. A tool a test needs and cannot find is a failure
//! naming the install command under `.ci/run`, a skipped test named on the terminal elsewhere,
//! and skipped when `KERN_SKIP_<TOOL>=1` says so (`support::tools::system_tool`).
//!
//! The "git 3 defaults" profile (issue 27): every test that compares kern's tree with git's
//! runs again in `git_3_defaults::`, in a repository made with `git init
//! --object-format=sha256 --ref-format=reftable`, with `safe.bareRepository=explicit` and
//! `init.defaultObjectFormat`/`init.defaultRefFormat` in the home's git config (so the
//! submodules and nested clones a test makes are Git 3.0's too).

use crate::support::{project, tools};

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use project::{Project, texts};
use serde_json::json;

/// The kind of repository a test's [`Fixture`] makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Profile {
    /// What `git init` makes today: SHA-1 objects, refs as files.
    Today,
    /// Git 3.0's defaults: SHA-256 objects, reftable refs, `safe.bareRepository=explicit`.
    Git3,
}

thread_local! {
    /// The profile of the test running on this thread (each test has its own).
    static PROFILE: std::cell::Cell<Profile> = const { std::cell::Cell::new(Profile::Today) };
}

/// A test's own home folder (empty git config) and the project in it.
struct Fixture {
    p: Project,
    home: tempfile::TempDir,
}

impl Fixture {
    fn new(spec: &str) -> Fixture {
        let home = tempfile::tempdir().unwrap();
        let (p, config) = match PROFILE.get() {
            Profile::Today => (Project::new(spec), ""),
            Profile::Git3 => (
                Project::made_by_git(&["--object-format=sha256", "--ref-format=reftable"], spec),
                // What `git init` makes under Git 3.0 (its submodules and nested clones too).
                "[safe]\n\tbareRepository = explicit\n[init]\n\tdefaultObjectFormat = sha256\n\tdefaultRefFormat = reftable\n",
            ),
        };
        std::fs::write(home.path().join(".gitconfig"), config).unwrap();
        Fixture { p, home }
    }

    /// The real `git` in `dir` with this fixture's home; panics with its output on failure.
    fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.command("git", dir).args(args).output().unwrap();
        let (stdout, stderr) = texts(&out);
        assert!(
            out.status.success(),
            "git {args:?} in {}: {stdout}{stderr}",
            dir.display()
        );
        stdout
    }

    fn git(&self, args: &[&str]) -> String {
        self.git_in(self.p.path(), args)
    }

    /// `program` in `dir` with this fixture's home and no system git config.
    fn command(&self, program: &str, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GNUPGHOME");
        cmd
    }

    /// `kern args` in the project with the scripted agent and this fixture's home: a builder.
    fn kern(&self, args: &[&str]) -> project::KernRun<'_> {
        self.p
            .run(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove(["GNUPGHOME"])
    }

    /// Commits the work tree with the real git (set-up).
    fn git_commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--no-verify", "-m", message]);
    }

    /// `git ls-tree -r` of HEAD: one `mode type id\tpath` line per entry.
    fn tree(&self, dir: &Path) -> Vec<String> {
        self.git_in(dir, &["ls-tree", "-r", "HEAD"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// kern's last commit holds what `git add -A && git commit` makes of the same work tree
    /// (in a copy, HEAD reset to the commit before), minus the paths kern left out on purpose.
    fn assert_tree_like_git(&self, left_out: &[&str]) {
        let copy = tempfile::tempdir().unwrap();
        let status = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", self.p.path().display()))
            .arg(copy.path())
            .status()
            .unwrap();
        assert!(status.success());
        self.git_in(copy.path(), &["reset", "-q", "HEAD~1"]);
        self.git_in(copy.path(), &["add", "-A"]);
        self.git_in(
            copy.path(),
            &[
                "-c",
                "commit.gpgsign=false",
                "commit",
                "-q",
                "--no-verify",
                "--allow-empty",
                "-m",
                "git's own",
            ],
        );
        let theirs: Vec<String> = self
            .tree(copy.path())
            .into_iter()
            .filter(|line| {
                let path = line.split('\t').nth(1).unwrap_or_default();
                !left_out
                    .iter()
                    .any(|l| path == *l || path.starts_with(&format!("{l}/")))
            })
            .collect();
        assert_eq!(self.tree(self.p.path()), theirs, "kern's tree vs git's");
    }

    /// Nothing `git status` would show.
    fn assert_clean(&self) {
        assert_eq!(self.git(&["status", "--porcelain"]), "", "git status");
    }

    fn write_hook(&self, name: &str, body: &str) {
        let path = self.p.path().join(".git/hooks").join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// True when the scripted agent ran at least once.
    fn agent_ran(&self) -> bool {
        self.p.outside.path().join("scenario.calls.jsonl").exists()
    }
}

/// An agent whose implement stage runs `shell` and writes `files`.
fn implementing(shell: &[&str], files: serde_json::Value) -> serde_json::Value {
    json!({"default": {"implement": {"shell": shell, "write": files}}})
}

// ---- clean filters ------------------------------------------------------------------------

#[test]
fn lfs_files_are_committed_as_pointers_and_lfs_fsck_is_clean() {
    if !tools::system_tool("git-lfs", "git-lfs", "KERN_SKIP_GIT_LFS") {
        return;
    }
    let f = Fixture::new("- [ ] Add the model\n- [ ] Add the docs\n");
    f.git(&["lfs", "install", "--local"]);
    f.git(&["lfs", "track", "*.bin"]);
    f.git_commit_all("track binaries with LFS");
    f.p.scenario(&json!({"tasks": [
        {"match": "model", "implement": {"shell": ["mkdir -p assets && head -c 300000 /dev/urandom > assets/model.bin"]}},
        {"match": "docs", "implement": {"write": {"docs.md": "# docs\n"}}}
    ]}));
    f.kern(&["1", "0"]).expect(0);
    let stored = f.git(&["cat-file", "-p", "HEAD:assets/model.bin"]);
    assert!(
        stored.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "{stored}"
    );
    assert!(stored.ends_with("size 300000\n"), "{stored}");
    assert!(f.git(&["lfs", "fsck"]).contains("Git LFS fsck OK"));
    f.assert_clean();
    f.assert_tree_like_git(&[]);

    // A tracked LFS file with stale stat data is not a change: the next task starts.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(f.p.path().join("assets/model.bin"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    f.kern(&["1", "0"]).expect(0);
    assert_eq!(f.p.log()[0], "Add the docs");
    f.assert_clean();
    assert!(f.git(&["lfs", "fsck"]).contains("Git LFS fsck OK"));
}

#[test]
fn an_encrypting_filters_output_is_what_is_stored() {
    let f = Fixture::new("- [ ] Add the production config\n");
    let rot13 = "tr 'A-Za-z' 'N-ZA-Mn-za-m'";
    f.git(&["config", "filter.crypt.clean", rot13]);
    f.git(&["config", "filter.crypt.smudge", rot13]);
    f.git(&["config", "filter.crypt.required", "true"]);
    f.p.write(".gitattributes", "secrets/** filter=crypt\n");
    f.git_commit_all("encrypt secrets/");
    f.p.scenario(&implementing(
        &[],
        json!({"secrets/prod.conf": "db_host = prod.internal\n", "app.txt": "plain\n"}),
    ));
    f.kern(&["1", "0"]).expect(0);
    assert_eq!(
        f.git(&["cat-file", "-p", "HEAD:secrets/prod.conf"]),
        "qo_ubfg = cebq.vagreany\n",
        "the clean filter's output is the blob"
    );
    assert_eq!(f.p.read("secrets/prod.conf"), "db_host = prod.internal\n");
    f.assert_clean();
    f.assert_tree_like_git(&[]);
}

#[test]
fn a_required_filter_kern_cannot_run_stops_before_any_agent() {
    let f = Fixture::new("- [ ] Anything\n");
    f.git(&["config", "filter.big.process", "big-filter-process"]);
    f.git(&["config", "filter.big.required", "true"]);
    f.p.write(".gitattributes", "*.dat filter=big\n");
    f.git_commit_all("attributes");
    let err = f.kern(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("the `big` filter is required (`filter.big.required`) but kern cannot run it: it has only `filter.big.process`, which kern does not speak — set `filter.big.clean` too"),
        "{err}"
    );
    assert!(!f.agent_ran(), "no agent may run");
    let err = f.kern(&["doctor"]).expect(2).stderr;
    assert!(
        err.contains("✗ filter drivers: the `big` filter is required"),
        "{err}"
    );
    // The dry run's report is its output: stdout.
    let out = f.kern(&["-n"]).expect(0);
    assert!(
        out.stdout
            .contains("git:         ✗ filter drivers: the `big` filter is required"),
        "{}",
        out.stderr
    );
}

// ---- sparse checkouts and submodules -------------------------------------------------------

#[test]
fn a_sparse_checkout_resumes_and_starts_tasks_with_no_deletion() {
    let f = Fixture::new("- [~] Resume the parser\n- [ ] Then the lexer\n");
    for dir in ["a", "b", "c"] {
        for n in 1..=3 {
            f.p.write(&format!("{dir}/{n}.txt"), &format!("{dir}{n}\n"));
        }
    }
    f.git_commit_all("nine files");
    f.git(&["sparse-checkout", "set", "a"]);
    assert!(
        !f.p.path().join("b/1.txt").exists(),
        "b/ is not checked out"
    );
    f.p.scenario(&implementing(&["echo more >> a/1.txt"], json!({})));
    let err = f.kern(&["2", "0"]).expect(0).stderr;
    assert_eq!(
        f.p.log()[..2],
        ["Then the lexer", "Resume the parser"],
        "{err}"
    );
    let files = f.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    for dir in ["a", "b", "c"] {
        for n in 1..=3 {
            assert!(files.contains(&format!("{dir}/{n}.txt")), "{files}");
        }
    }
    let flags = f.git(&["ls-files", "-t"]);
    assert!(
        flags.contains("S b/1.txt") && flags.contains("S c/3.txt"),
        "{flags}"
    );
    f.assert_clean();
    f.assert_tree_like_git(&[]);
}

#[test]
fn parallel_tasks_in_a_sparse_checkout_delete_nothing_outside_the_cone() {
    let f = Fixture::new("- [ ] Alpha\n- [ ] Beta\n");
    for dir in ["a", "b"] {
        for n in 1..=3 {
            f.p.write(&format!("{dir}/{n}.txt"), &format!("{dir}{n}\n"));
        }
    }
    f.git_commit_all("six files");
    f.git(&["sparse-checkout", "set", "a"]);
    f.p.scenario(&json!({"tasks": [
        {"match": "Alpha", "implement": {"write": {"a/alpha.txt": "alpha\n", "b/new.txt": "outside the cone\n"}}},
        {"match": "Beta", "implement": {"write": {"a/beta.txt": "beta\n"}}}
    ]}));
    f.kern(&["5", "0", "-j", "2"]).expect(0);
    let files = f.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    for file in [
        "a/1.txt",
        "a/2.txt",
        "a/3.txt",
        "b/1.txt",
        "b/2.txt",
        "b/3.txt",
        "a/alpha.txt",
        "a/beta.txt",
        "b/new.txt",
    ] {
        assert!(files.lines().any(|l| l == file), "{file} in HEAD: {files}");
    }
    let flags = f.git(&["ls-files", "-t"]);
    assert!(
        flags.contains("S b/1.txt") && flags.contains("S b/3.txt"),
        "still outside the cone: {flags}"
    );
    assert!(!f.p.path().join("b/1.txt").exists(), "never checked out");
    assert_eq!(f.git(&["status", "--porcelain"]), "", "a clean tree");
}

#[test]
fn a_sparse_index_stops_before_any_agent_with_the_fix() {
    let f = Fixture::new("- [ ] Anything\n");
    f.p.write("a/1.txt", "a\n");
    f.p.write("b/1.txt", "b\n");
    f.git_commit_all("two folders");
    f.git(&["sparse-checkout", "init", "--cone", "--sparse-index"]);
    f.git(&["sparse-checkout", "set", "a"]);
    f.p.scenario(&json!({"default": {"implement": {"write": {"a/2.txt": "a2\n"}}}}));
    let err = f.kern(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("the index is a sparse index (`index.sparse`), which libgit2 (and so kern) cannot read — run `git sparse-checkout init --no-sparse-index`"),
        "{err}"
    );
    assert!(!f.agent_ran());
    f.git(&["sparse-checkout", "init", "--no-sparse-index"]);
    // The fix works.
    f.kern(&["1", "0"]).expect(0);
    f.assert_tree_like_git(&[]);
}

#[test]
fn a_submodule_bump_is_committed_and_an_unregistered_clone_stays_out() {
    let f = Fixture::new("- [ ] Bump the library\n- [ ] Then the app\n");
    let lib = tempfile::tempdir().unwrap();
    f.git_in(lib.path(), &["init", "-q"]);
    f.git_in(
        lib.path(),
        &[
            "-c",
            "user.name=L",
            "-c",
            "user.email=l@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ],
    );
    f.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &lib.path().display().to_string(),
        "lib",
    ]);
    f.git_commit_all("add lib");
    f.p.scenario(
        &json!({"tasks": [{"match": "library", "implement": {"shell": [
            "git -C lib -c user.name=L -c user.email=l@example.com commit -q --allow-empty -m two",
            "git init -q vendor/clone && git -C vendor/clone -c user.name=L -c user.email=l@example.com commit -q --allow-empty -m cloned"
        ]}}], "default": {"implement": {"write": {"app.txt": "app\n"}}}}),
    );
    let err = f.kern(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("left out of the commit: `vendor/clone` (a nested git repository — register it with `git submodule add <url> vendor/clone`, or add `vendor/clone/` to .gitignore)"),
        "{err}"
    );
    let bumped = f.git_in(&f.p.path().join("lib"), &["rev-parse", "HEAD"]);
    assert_eq!(
        f.git(&["ls-tree", "HEAD", "lib"]),
        format!("160000 commit {}\tlib\n", bumped.trim())
    );
    f.assert_tree_like_git(&["vendor/clone"]);
    // Neither the bumped submodule nor the clone blocks the next task.
    f.kern(&["1", "0"]).expect(0);
    assert_eq!(f.p.log()[..2], ["Then the app", "Bump the library"]);
}

// ---- signing --------------------------------------------------------------------------------

#[test]
fn gpg_signing_gives_a_good_signature() {
    if !tools::system_tool("gpg", "gnupg", "KERN_SKIP_GPG") {
        return;
    }
    let f = Fixture::new("- [ ] Signed work\n");
    let gpg = |args: &[&str]| {
        let out = f.command("gpg", f.p.path()).args(args).output().unwrap();
        assert!(out.status.success(), "gpg {args:?}: {:?}", texts(&out));
        texts(&out).0
    };
    gpg(&[
        "--batch",
        "--passphrase",
        "",
        "--quick-gen-key",
        "Test Person <test@example.com>",
        "ed25519",
        "sign",
        "never",
    ]);
    let listing = gpg(&["--list-secret-keys", "--with-colons"]);
    let fingerprint = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:::::::::"))
        .map(|rest| rest.trim_end_matches(':').to_string())
        .unwrap();
    f.git(&["config", "user.signingkey", &fingerprint]);
    f.git(&["config", "commit.gpgsign", "true"]);
    f.p.scenario(&implementing(&[], json!({"signed.txt": "s\n"})));
    let ran = f.kern(&["1", "0"]).any_exit();
    let _ = f
        .command("gpgconf", f.p.path())
        .args(["--kill", "gpg-agent"])
        .status();
    // Checked after gpg's agent is stopped, so a failure leaves no agent behind.
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(f.git(&["log", "-1", "--format=%G? %s"]), "G Signed work\n");
    assert!(
        f.git(&["reflog", "-1"])
            .ends_with("HEAD@{0}: commit: Signed work\n"),
        "a reflog entry like git's"
    );
    f.assert_tree_like_git(&[]);
}

#[test]
fn ssh_signing_gives_a_good_signature_and_x509_stops_before_any_agent() {
    if !tools::system_tool("ssh-keygen", "openssh-client", "KERN_SKIP_SSH_KEYGEN") {
        return;
    }
    let f = Fixture::new("- [ ] Signed work\n- [ ] Never started\n");
    let key = f.home.path().join("signing_key");
    let out = f
        .command("ssh-keygen", f.p.path())
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", texts(&out));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = f.home.path().join("allowed_signers");
    std::fs::write(&allowed, format!("test@example.com {public}")).unwrap();
    f.git(&["config", "gpg.format", "ssh"]);
    f.git(&[
        "config",
        "user.signingkey",
        &key.with_extension("pub").display().to_string(),
    ]);
    f.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        &allowed.display().to_string(),
    ]);
    f.git(&["config", "commit.gpgsign", "true"]);
    f.p.scenario(&implementing(&[], json!({"signed.txt": "s\n"})));
    f.kern(&["1", "0"]).expect(0);
    assert_eq!(f.git(&["log", "-1", "--format=%G? %s"]), "G Signed work\n");
    f.assert_tree_like_git(&[]);

    f.git(&["config", "gpg.format", "x509"]);
    let err = f.kern(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("with `gpg.format` `x509`, which kern cannot sign with — use openpgp or ssh"),
        "{err}"
    );
    let calls = std::fs::read_to_string(f.p.outside.path().join("scenario.calls.jsonl")).unwrap();
    assert!(
        !calls.contains("Never started"),
        "no agent ran for the next task"
    );
}

// ---- hooks ----------------------------------------------------------------------------------

#[test]
fn all_four_hooks_run_with_gits_arguments_and_no_verify_skips_what_git_skips() {
    let f = Fixture::new("- [ ] Add the greeting\n- [ ] Add the farewell\n");
    let log = f.p.outside.path().join("hooks.log");
    let logger = |extra: &str| {
        format!(
            "#!/bin/sh\necho \"$(basename \"$0\") $#${{1:+ $1}}${{2:+ $2}}|$GIT_EDITOR|$GIT_INDEX_FILE{extra}\" >> '{}'\n",
            log.display()
        )
    };
    f.write_hook("pre-commit", &logger(""));
    f.write_hook(
        "prepare-commit-msg",
        &format!("{}sed -i '1s/^/[T-1] /' \"$1\"\n", logger("")),
    );
    f.write_hook(
        "commit-msg",
        &format!("{}printf '\\nReviewed-by: hook\\n' >> \"$1\"\n", logger("")),
    );
    f.write_hook("post-commit", &logger("|$(git rev-parse HEAD)"));
    f.p.scenario(&implementing(&[], json!({"out/{slug}.txt": "{task}\n"})));
    f.kern(&["1", "0"]).expect(0);
    let git_dir = f.p.path().canonicalize().unwrap().join(".git");
    let msg = git_dir.join("COMMIT_EDITMSG");
    let index = git_dir.join("index");
    let head = f.git(&["rev-parse", "HEAD"]);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "pre-commit 0|:|{index}\nprepare-commit-msg 2 {msg} message|:|{index}\ncommit-msg 1 {msg}|:|{index}\npost-commit 0|:|{index}|{head}",
            index = index.display(),
            msg = msg.display()
        )
    );
    assert_eq!(
        f.git(&["log", "-1", "--format=%B"]),
        "[T-1] Add the greeting\n\nReviewed-by: hook\n\n"
    );
    f.assert_tree_like_git(&[]);

    std::fs::remove_file(&log).unwrap();
    f.kern(&["1", "0", "--no-verify"]).expect(0);
    let ran: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        ran,
        ["prepare-commit-msg", "post-commit"],
        "as git commit --no-verify"
    );
    assert_eq!(
        f.git(&["log", "-1", "--format=%s"]),
        "[T-1] Add the farewell\n"
    );
}

/// Issue 11, bug 3: a hook that hangs (here in a grandchild that ignores SIGTERM) used to
/// hang the run forever. Now it is stopped as a group at --hook-timeout and the attempt fails.
#[test]
fn a_hung_hook_is_killed_at_the_hook_timeout() {
    let f = Fixture::new("- [ ] Commit past a hanging hook\n");
    // The grandchild carries a marker: inside kern's fence its pid is its PID namespace's.
    let started = f.p.outside.path().join("grandchild.started");
    let marker = crate::support::marker();
    f.write_hook(
        "pre-commit",
        &format!(
            "#!/bin/sh\nsh -c 'trap \"\" TERM; touch {}; sleep 300' {marker} &\nwait\n",
            started.display()
        ),
    );
    f.p.scenario(&implementing(&[], json!({"work.txt": "w\n"})));
    let mut child = f.kern(&["1", "0"]).env("KERN_HOOK_TIMEOUT", "1s").spawn();
    // A bound for a broken build only; the hook itself would sleep for 300 s.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kern still waits for the hung hook after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(4), "the attempt failed: {err}");
    let spec = f.p.read("SPEC.md");
    assert!(
        spec.contains("the `pre-commit` hook refused the commit:")
            && spec.contains(
                "no output; stopped after 1s (time limit) — raise --hook-timeout if it needs longer)"
            ),
        "{spec}"
    );
    assert!(started.exists(), "the hook's grandchild never started");
    let gone = crate::support::wait_gone(&marker);
    for pid in crate::support::holding(&marker) {
        crate::support::kill(pid);
    }
    assert!(gone, "the hook's grandchild {marker} is dead");
    assert_eq!(f.p.log().len(), 1, "nothing was committed");
}

#[test]
fn a_fixer_pre_commit_hooks_fix_is_committed() {
    let f = Fixture::new("- [ ] Add the greeting\n");
    // As pre-commit-hooks' trailing-whitespace fixer: fix the staged files, fail if it did.
    f.write_hook(
        "pre-commit",
        "#!/bin/sh\nfixed=0\nfor f in $(git diff --cached --name-only --diff-filter=AM); do\n  if grep -q ' $' \"$f\"; then sed -i 's/ *$//' \"$f\"; echo \"Fixing $f\"; fixed=1; fi\ndone\nexit $fixed\n",
    );
    f.p.scenario(&implementing(
        &[],
        json!({"src/greet.txt": "hello   \nworld \n"}),
    ));
    let err = f.kern(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains(
            "the pre-commit hook fixed `src/greet.txt`; kern staged its fixes and ran it again"
        ),
        "{err}"
    );
    assert_eq!(f.git(&["show", "HEAD:src/greet.txt"]), "hello\nworld\n");
    assert_eq!(f.p.log()[0], "Add the greeting");
    f.assert_clean();
    f.assert_tree_like_git(&[]);
}

// ---- kern's own files, secrets, sizes ------------------------------------------------------

#[test]
fn editor_files_of_spec_and_learnings_neither_block_nor_get_committed() {
    let f = Fixture::new("- [ ] Edit with vim open\n- [ ] And again\n");
    std::fs::write(f.p.path().join("LEARNINGS.md"), "# Learnings\n").unwrap();
    f.git_commit_all("learnings");
    let artefacts = [
        ".SPEC.md.swp",
        "SPEC.md~",
        "#SPEC.md#",
        "4913",
        ".LEARNINGS.md.swo",
    ];
    for name in artefacts {
        f.p.write(name, "b0VIM 9.0 user@host /repo/SPEC.md unsaved text\n");
    }
    std::os::unix::fs::symlink("user@host.1234:1700000000", f.p.path().join(".#SPEC.md")).unwrap();
    f.p.scenario(&json!({"default": {
        "research": {"shell": ["echo swap > .SPEC.md.swx"]},
        "implement": {"write": {"out/{slug}.txt": "{task}\n"}}
    }}));
    // Unfenced (`--sandbox off`): the swap file research writes stands for the person's editor
    // writing in the tree during the stage; inside the fence research's writes stay in its
    // private layer and never reach the tree.
    let err = f.kern(&["2", "0", "--sandbox=off"]).expect(0).stderr;
    assert!(
        !err.contains("violation"),
        "an artefact is not the agent's change: {err}"
    );
    assert_eq!(f.p.log()[..2], ["And again", "Edit with vim open"]);
    let every: String = f.git(&["log", "--all", "--name-only", "--format="]);
    for name in artefacts.iter().chain(&[".#SPEC.md", ".SPEC.md.swx"]) {
        assert!(
            !every.lines().any(|l| l == *name),
            "{name} committed: {every}"
        );
        assert!(
            f.p.path().join(name).symlink_metadata().is_ok(),
            "{name} kept"
        );
    }
    f.assert_tree_like_git(&[
        ".SPEC.md.swp",
        "SPEC.md~",
        "#SPEC.md#",
        "4913",
        ".LEARNINGS.md.swo",
        ".#SPEC.md",
        ".SPEC.md.swx",
    ]);
}

#[test]
fn editor_files_follow_the_spec_wherever_spec_puts_it() {
    let f = Fixture::new("- [ ] Unused\n");
    f.p.write("docs/PLAN.md", "- [ ] Planned work\n");
    f.git_commit_all("plan");
    f.p.write("docs/.PLAN.md.swp", "swap\n");
    f.p.write("docs/PLAN.md~", "backup\n");
    f.p.scenario(&implementing(&[], json!({"planned.txt": "p\n"})));
    f.kern(&["1", "0", "--spec", "docs/PLAN.md"]).expect(0);
    let files = f.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(files.contains("planned.txt"), "{files}");
    assert!(
        !files.contains(".PLAN.md.swp") && !files.contains("PLAN.md~"),
        "{files}"
    );
    f.assert_tree_like_git(&["docs/.PLAN.md.swp", "docs/PLAN.md~"]);
}

#[test]
fn every_listed_credential_is_left_out_while_the_tasks_real_file_is_committed() {
    let f = Fixture::new("- [ ] Wire up the deployment\n- [ ] Then the next task starts\n");
    let r = |c: &str, n: usize| c.repeat(n);
    let files = json!({
        ".git-credentials": "https://me:hunter2@github.com\n",
        ".aws/credentials": "[default]\naws_access_key_id = x\n",
        "deploy/aws.ini": format!("aws_secret_access_key = {}\n", r("aB3/", 10)),
        ".pgpass": "db:5432:app:me:hunter2\n",
        ".docker/config.json": "{\"auths\": {}}\n",
        "deploy/registry.json": format!("{{\"auths\": {{\"ghcr.io\": {{\"auth\": \"{}\"}}}}}}\n", r("dXNlcjpw", 3)),
        "keys/deploy.ppk": "PuTTY-User-Key-File-3: ssh-ed25519\n",
        "android/release.jks": "\u{fe}\u{ed}\u{fe}\u{ed}\n",
        "infra/terraform.tfstate": "{\"password\": \"hunter2\"}\n",
        "pay.py": format!("STRIPE = 'sk_live_{}'\n", r("A1", 12)),
        "maps.js": format!("const key = 'AIza{}';\n", r("b", 35)),
        "ci/npm.sh": format!("export NPM_TOKEN=npm_{}\n", r("c", 36)),
        "ci/gitlab.sh": format!("TOKEN=glpat-{}\n", r("d", 20)),
        "ml/hub.py": format!("HF = 'hf_{}'\n", r("e", 34)),
        "deploy/cluster.yaml": format!("apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: {}\n", r("k8s-token", 4)),
        "src/deploy.rs": "pub fn deploy() {}\n",
        ".env.example": "STRIPE=\n",
    });
    let secrets = [
        ".git-credentials",
        ".aws/credentials",
        "deploy/aws.ini",
        ".pgpass",
        ".docker/config.json",
        "deploy/registry.json",
        "keys/deploy.ppk",
        "android/release.jks",
        "infra/terraform.tfstate",
        "pay.py",
        "maps.js",
        "ci/npm.sh",
        "ci/gitlab.sh",
        "ml/hub.py",
        "deploy/cluster.yaml",
    ];
    f.p.scenario(&json!({"tasks": [
        {"match": "deployment", "implement": {"write": files}},
        {"match": "next", "implement": {"write": {"next.txt": "n\n"}}}
    ]}));
    let err = f.kern(&["2", "0"]).expect(0).stderr;
    assert_eq!(
        f.p.log()[..2],
        ["Then the next task starts", "Wire up the deployment"],
        "{err}"
    );
    let committed = f.git(&["log", "--all", "--name-only", "--format="]);
    for secret in secrets {
        assert!(
            !committed.lines().any(|l| l == secret),
            "{secret} committed"
        );
        assert!(
            err.contains(&format!("left out of the commit: `{secret}` (")),
            "{secret} not named: {err}"
        );
    }
    let first = f.git(&["ls-tree", "-r", "--name-only", "HEAD~1"]);
    assert!(
        first.contains("src/deploy.rs") && first.contains(".env.example"),
        "{first}"
    );
    f.assert_tree_like_git(&secrets);
}

#[test]
fn a_file_over_max_file_size_is_left_out_and_the_rest_committed() {
    let f = Fixture::new("- [ ] Export the data\n- [ ] Then the next task starts\n");
    f.p.scenario(&json!({"tasks": [
        {"match": "Export", "implement": {
            "shell": ["mkdir -p data && head -c 115343360 /dev/zero > data/export.bin"],
            "write": {"src/export.rs": "pub fn export() {}\n"}}},
        {"match": "next", "implement": {"write": {"next.txt": "n\n"}}}
    ]}));
    let err = f.kern(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("left out of the commit: `data/export.bin` (larger than --max-file-size (110 MiB > 100 MiB))"),
        "{err}"
    );
    let files = f.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(
        files.contains("src/export.rs") && !files.contains("data/export.bin"),
        "{files}"
    );
    f.assert_tree_like_git(&["data/export.bin"]);
    // The file stays, and does not block the next task.
    assert_eq!(
        std::fs::metadata(f.p.path().join("data/export.bin"))
            .unwrap()
            .len(),
        115343360
    );
    f.kern(&["1", "0"]).expect(0);
    assert_eq!(f.p.log()[0], "Then the next task starts");
}

// ---- preflight ------------------------------------------------------------------------------

#[test]
fn a_missing_identity_stops_before_any_agent_call() {
    let f = Fixture::new("- [ ] Anything\n");
    f.git(&["config", "--unset", "user.name"]);
    f.git(&["config", "--unset", "user.email"]);
    let err = f.kern(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("git has no author identity — run `git config --global user.name"),
        "{err}"
    );
    assert!(!f.agent_ran(), "no agent may run");
}

#[test]
fn the_dry_run_names_a_merge_in_progress_and_a_run_stops_before_any_agent() {
    let f = Fixture::new("- [ ] Anything\n");
    let main = f.git(&["rev-parse", "--abbrev-ref", "HEAD"]);
    f.git(&["checkout", "-q", "-b", "other"]);
    f.p.write("other.txt", "o\n");
    f.git_commit_all("other");
    f.git(&["checkout", "-q", main.trim()]);
    f.git(&["merge", "-q", "--no-ff", "--no-commit", "other"]);
    let report = f.kern(&["-n"]).expect(0).stdout;
    assert!(
        report.contains("git:         ✗ git operation: a merge is in progress — finish it (`git commit`) or abort it (`git merge --abort`), then run kern again"),
        "{report}"
    );
    f.kern(&["1", "0"]).expect(2);
    assert!(!f.agent_ran());
}

#[test]
fn a_briefly_held_index_lock_is_waited_out() {
    let f = Fixture::new("- [ ] Commit while an editor runs git status\n");
    // The person's editor takes the lock while implement runs (the agent's own `.git` is
    // read-only inside kern's fence): the agent waits until it is there.
    let lock: PathBuf = f.p.path().join(".git/index.lock");
    let started = f.p.outside.path().join("implement.started");
    let held = f.p.outside.path().join("lock.held");
    let wait = format!(
        "touch {}; while [ ! -f {} ]; do sleep 0.01; done",
        started.display(),
        held.display()
    );
    f.p.scenario(&implementing(&[&wait], json!({"work.txt": "w\n"})));
    let mut child = f.kern(&["1", "0"]).spawn();
    crate::support::wait_for_file(&started);
    std::fs::write(&lock, "").unwrap();
    std::fs::write(&held, "").unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.contains("waiting for `") && line.contains("index.lock`") {
            std::fs::remove_file(&lock).unwrap();
        }
        lines.push(line);
    }
    let status = child.wait().unwrap();
    let err = lines.join("\n");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains("another git process is using the index (up to 10 s)"),
        "{err}"
    );
    assert_eq!(f.p.log()[0], "Commit while an editor runs git status");
    f.assert_tree_like_git(&[]);
}

/// The tests above that compare kern's tree with git's, in a repository made with Git 3.0's
/// defaults (see the module docs).
macro_rules! also_in_git_3_defaults {
    ($($name:ident),* $(,)?) => {
        mod git_3_defaults {
            $(
                #[test]
                fn $name() {
                    super::PROFILE.set(super::Profile::Git3);
                    super::$name();
                }
            )*
        }
    };
}

also_in_git_3_defaults!(
    lfs_files_are_committed_as_pointers_and_lfs_fsck_is_clean,
    an_encrypting_filters_output_is_what_is_stored,
    a_sparse_checkout_resumes_and_starts_tasks_with_no_deletion,
    a_sparse_index_stops_before_any_agent_with_the_fix,
    a_submodule_bump_is_committed_and_an_unregistered_clone_stays_out,
    gpg_signing_gives_a_good_signature,
    ssh_signing_gives_a_good_signature_and_x509_stops_before_any_agent,
    all_four_hooks_run_with_gits_arguments_and_no_verify_skips_what_git_skips,
    a_fixer_pre_commit_hooks_fix_is_committed,
    editor_files_of_spec_and_learnings_neither_block_nor_get_committed,
    editor_files_follow_the_spec_wherever_spec_puts_it,
    every_listed_credential_is_left_out_while_the_tasks_real_file_is_committed,
    a_file_over_max_file_size_is_left_out_and_the_rest_committed,
    a_briefly_held_index_lock_is_waited_out,
);
