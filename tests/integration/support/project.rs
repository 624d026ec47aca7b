//! A temporary git repository with a SPEC.md, a scripted agent and its own state folder, and a
//! builder for running the real `kern` binary in it. Shared by the integration tests through
//! `#[path = "support/project.rs"] mod project;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// A scratch project: repository, state folder, scenario.
pub(crate) struct Project {
    pub repo: tempfile::TempDir,
    pub outside: tempfile::TempDir,
    /// The repository's folder when it is not `repo` itself (a named one inside it).
    named: Option<PathBuf>,
}

impl Project {
    /// A repository with one commit (README.md) and the given SPEC.md (committed).
    pub(crate) fn new(spec: &str) -> Project {
        Project::create(None, "master", spec)
    }

    /// [`Project::new`] in a folder called `name` (inside a temp folder), on `branch`.
    pub(crate) fn named(name: &str, branch: &str, spec: &str) -> Project {
        Project::create(Some(name), branch, spec)
    }

    /// [`Project::new`] in a repository git itself made: `git init ARGS` (Git 3.0's
    /// `--object-format=sha256`, `--ref-format=reftable`, …), its commit by `git commit`. For
    /// such a repository, read it with `git` ([`Project::git`]): the tests' libgit2 may not.
    pub(crate) fn made_by_git(init: &[&str], spec: &str) -> Project {
        let repo = tempfile::Builder::new()
            .prefix("kern-test-")
            .tempdir()
            .unwrap();
        let outside = tempfile::tempdir().unwrap();
        let mut args = vec!["init", "-q", "-b", "master"];
        args.extend(init);
        args.push(repo.path().to_str().unwrap());
        crate::support::during::git_in(outside.path(), &args);
        let p = Project {
            repo,
            outside,
            named: None,
        };
        p.git(&["config", "user.name", "Test Person"]);
        p.git(&["config", "user.email", "test@example.com"]);
        p.write("README.md", "# scratch\n");
        p.write("SPEC.md", spec);
        p.git(&["add", "-A"]);
        p.git(&["commit", "-q", "-m", "initial"]);
        p.scenario(&serde_json::json!({"default": {
            "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}
        }}));
        p
    }

    fn create(name: Option<&str>, branch: &str, spec: &str) -> Project {
        let repo = tempfile::Builder::new()
            .prefix("kern-test-")
            .tempdir()
            .unwrap();
        let outside = tempfile::tempdir().unwrap();
        let named = name.map(|n| repo.path().join(n));
        let top = named.clone().unwrap_or_else(|| repo.path().to_path_buf());
        let mut opts = git2::RepositoryInitOptions::new();
        opts.initial_head(branch);
        let r = git2::Repository::init_opts(&top, &opts).unwrap();
        let mut cfg = r.config().unwrap();
        cfg.set_str("user.name", "Test Person").unwrap();
        cfg.set_str("user.email", "test@example.com").unwrap();
        let p = Project {
            repo,
            outside,
            named,
        };
        p.write("README.md", "# scratch\n");
        p.write("SPEC.md", spec);
        p.commit_all("initial");
        // Work to commit: kern decides done, and a SUCCESS that changed nothing is no success.
        p.scenario(&serde_json::json!({"default": {
            "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}
        }}));
        p
    }

    /// The repository's top folder.
    pub(crate) fn path(&self) -> &Path {
        self.named.as_deref().unwrap_or(self.repo.path())
    }

    /// The state root (KERN_STATE_DIR).
    pub(crate) fn state_root(&self) -> PathBuf {
        self.outside.path().join("state")
    }

    /// The state folder of this project on the branch HEAD names (`HEAD` when detached).
    pub(crate) fn state_dir(&self) -> PathBuf {
        // Asked of git: a repository of Git 3.0's formats may be one the tests' libgit2 cannot
        // open (reftable refs).
        let target = std::process::Command::new("git")
            .args(["symbolic-ref", "-q", "HEAD"])
            .current_dir(self.path())
            .output()
            .unwrap();
        let target = String::from_utf8_lossy(&target.stdout).trim().to_string();
        let branch = if target.is_empty() {
            "HEAD".to_string()
        } else {
            target
                .trim_start_matches("refs/heads/")
                .replace('%', "%25")
                .replace('/', "%2F")
        };
        let name = self
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        self.state_root().join(name).join(branch)
    }

    /// Writes a file in the repository.
    pub(crate) fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    /// Reads a file of the repository.
    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Commits every change (test setup only).
    pub(crate) fn commit_all(&self, message: &str) {
        let r = git2::Repository::open(self.path()).unwrap();
        let mut index = r.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = r.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = r.signature().unwrap();
        let parent = r.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        r.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap();
    }

    /// The scenario file of the scripted agent.
    pub(crate) fn scenario_path(&self) -> PathBuf {
        self.outside.path().join("scenario.json")
    }

    /// Sets the scripted agent's scenario (and resets its invocation counts).
    pub(crate) fn scenario(&self, scenario: &Value) {
        std::fs::write(
            self.scenario_path(),
            serde_json::to_vec_pretty(scenario).unwrap(),
        )
        .unwrap();
        let _ = std::fs::remove_file(self.outside.path().join("scenario.counts.json"));
        let wrapper = self.outside.path().join("agent.sh");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec '{}' scripted-agent '{}'\n",
                env!("CARGO_BIN_EXE_kern"),
                self.scenario_path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The prompts the scripted agent received for `stage`, in order.
    pub(crate) fn prompts(&self, stage: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.outside.path().join("scenario.calls.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()) // a line being appended
            .filter(|c| c["stage"] == stage)
            .map(|c| c["prompt"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// `kern` in this repository with the scripted agent, its own state root, no colour.
    pub(crate) fn kern(&self) -> Command {
        Command::from_std(self.kern_std())
    }

    /// The same as [`Project::kern`], as a plain std command (for spawning and signalling).
    pub(crate) fn kern_std(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kern"));
        cmd.current_dir(self.path())
            .env("KERN_STATE_DIR", self.state_root())
            .env(
                "KERN_AGENT",
                format!("program:{}", self.outside.path().join("agent.sh").display()),
            )
            .env("KERN_RETRY_DELAY", "0")
            .env("NO_COLOR", "1")
            .env_remove("KERN_MODEL")
            .env_remove("KERN_CHECK");
        cmd
    }

    /// The events of `run.jsonl`, in order (empty when there is none).
    pub(crate) fn run_log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.state_dir().join("run.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The `run.jsonl` events named `event`.
    pub(crate) fn run_events(&self, event: &str) -> Vec<Value> {
        self.run_log()
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect()
    }

    /// Commit subjects, newest first.
    pub(crate) fn log(&self) -> Vec<String> {
        let Ok(r) = git2::Repository::open(self.path()) else {
            // A format the tests' libgit2 cannot open (reftable refs): as git lists them.
            return crate::support::during::git_in(self.path(), &["log", "--format=%s"])
                .lines()
                .map(str::to_string)
                .collect();
        };
        let mut walk = r.revwalk().unwrap();
        walk.push_head().unwrap();
        walk.map(|oid| {
            r.find_commit(oid.unwrap())
                .unwrap()
                .summary()
                .ok()
                .flatten()
                .unwrap_or("")
                .to_string()
        })
        .collect()
    }

    /// Paths in HEAD's tree.
    pub(crate) fn head_files(&self) -> Vec<String> {
        let Ok(r) = git2::Repository::open(self.path()) else {
            // A format the tests' libgit2 cannot open (reftable refs): as git lists them.
            return crate::support::during::git_in(
                self.path(),
                &["ls-tree", "-r", "--name-only", "HEAD"],
            )
            .lines()
            .map(str::to_string)
            .collect();
        };
        let tree = r.head().unwrap().peel_to_tree().unwrap();
        let mut files = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                files.push(format!("{root}{}", entry.name().unwrap()));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        files
    }

    /// Paths changed or untracked in the work tree (not ignored).
    pub(crate) fn dirty(&self) -> Vec<String> {
        let Ok(r) = git2::Repository::open(self.path()) else {
            // A format the tests' libgit2 cannot open (reftable refs): as git lists them.
            return crate::support::during::git_in(
                self.path(),
                &["status", "--porcelain", "-uall", "--no-renames"],
            )
            .lines()
            .map(|l| l[3..].to_string())
            .collect();
        };
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true);
        r.statuses(Some(&mut opts))
            .unwrap()
            .iter()
            .filter_map(|e| e.path().ok().map(str::to_string))
            .collect()
    }
}

/// stdout and stderr of an assert_cmd output as strings.
pub(crate) fn texts(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Project {
    /// `kern ARGS` in this project, as a builder: nothing runs until [`KernRun::expect`].
    pub(crate) fn run(&self, args: &[&str]) -> KernRun<'_> {
        KernRun {
            project: self,
            args: args.iter().map(|a| (*a).to_string()).collect(),
            env: Vec::new(),
        }
    }
}

/// A `kern` command about to run in a [`Project`]; see [`Project::run`].
#[must_use = "a KernRun does nothing until .expect(code)"]
pub(crate) struct KernRun<'p> {
    project: &'p Project,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl KernRun<'_> {
    /// Sets an environment variable for the run.
    pub(crate) fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.env.push((
            key.to_string(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    /// Runs kern and checks its exit code; on a mismatch panics with everything a reader needs:
    /// the command, the folder, the listing of the work tree, stdout and stderr.
    pub(crate) fn expect(self, code: i32) -> Ran {
        let mut cmd = self.project.kern_std();
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let ran = Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            command: format!("kern {}", self.args.join(" ")),
            cwd: self.project.path().to_path_buf(),
        };
        assert!(
            ran.code == Some(code),
            "{}\nwanted exit {code}",
            ran.describe(&self.project.dirty())
        );
        ran
    }
}

/// What a [`KernRun`] printed.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
    command: String,
    cwd: PathBuf,
}

impl Ran {
    /// Panics unless stderr holds `text`, showing the whole run.
    pub(crate) fn stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}\n{}",
            self.describe(&[])
        );
        self
    }

    fn describe(&self, dirty: &[String]) -> String {
        format!(
            "command: {}\ncwd: {}\nexit: {:?}\ndirty: {dirty:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command,
            self.cwd.display(),
            self.code,
            self.stdout,
            self.stderr
        )
    }
}
