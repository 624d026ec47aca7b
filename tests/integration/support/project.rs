//! A temporary git repository with a SPEC.md, a scripted agent and its own state folder, and
//! [`KernRun`], the one builder through which the integration tests run the real `kern` binary:
//! in a project ([`Project::run`]) or in a folder outside any ([`kern_in`]). Where a test needs
//! the binary as a program instead (an agent wrapper script, a shell recipe, a tmux pane), it
//! takes its path from [`crate::support::kern_bin`].
#![allow(dead_code)]

use std::path::{Path, PathBuf};

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

    /// [`Project::new`] in a folder made inside `parent` (`/dev/shm`, a RAM disk).
    pub(crate) fn new_in(parent: &Path, spec: &str) -> Project {
        Project::create_in(Some(parent), None, "master", spec)
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
        Project::create_in(None, name, branch, spec)
    }

    fn create_in(parent: Option<&Path>, name: Option<&str>, branch: &str, spec: &str) -> Project {
        let mut builder = tempfile::Builder::new();
        builder.prefix("kern-test-");
        let repo = match parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
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
                crate::support::kern_bin().display(),
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

/// stdout and stderr of a process's output as strings.
pub(crate) fn texts(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Project {
    /// `kern ARGS` in this repository with the scripted agent, its own state root, no retry
    /// delay and no colour, as a builder: nothing runs until [`KernRun::expect`].
    pub(crate) fn run(&self, args: &[&str]) -> KernRun<'_> {
        KernRun::new(Some(self), self.path(), args)
    }

    /// The shell line `line` (`sh -c`) in the project as a person's shell runs it with kern
    /// installed: the kern under test first on PATH, the environment [`Project::run`] gives
    /// kern. For the commands the README, the docs and kern itself print.
    pub(crate) fn shell(&self, line: &str) -> KernRun<'_> {
        KernRun::new(Some(self), self.path(), &[]).shell(line)
    }
}

/// `kern` in `dir`, a folder outside any [`Project`] (an empty one, a repository `git init`
/// made, a fresh machine's home): no `KERN_*` variable of the caller's, no colour, and no state
/// root — `KERN_STATE_DIR` names a path under `/dev/null`, so a run that writes state fails
/// instead of writing into the home folder. Arguments come with [`KernRun::args`].
pub(crate) fn kern_in(dir: &Path) -> KernRun<'static> {
    KernRun::new(None, dir, &[])
}

/// Where a run outside any project would keep state: nowhere (see [`kern_in`]).
const NO_STATE_ROOT: &str = "/dev/null/kern-in-has-no-state-root";

/// A `kern` command about to run in a [`Project`] ([`Project::run`]) or a folder ([`kern_in`]).
#[must_use = "a KernRun does nothing until .expect(code)"]
pub(crate) struct KernRun<'p> {
    /// The project it runs in, whose environment it takes; `None` for [`kern_in`].
    project: Option<&'p Project>,
    /// The folder it runs in unless [`KernRun::current_dir`] names another.
    dir: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
    path_first: Vec<PathBuf>,
    timeout: Option<std::time::Duration>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    wrapper: Vec<String>,
    /// A shell line run with `sh -c` instead of kern itself ([`KernRun::shell`]).
    shell: Option<String>,
}

impl<'p> KernRun<'p> {
    fn new(project: Option<&'p Project>, dir: &Path, args: &[&str]) -> KernRun<'p> {
        KernRun {
            project,
            dir: dir.to_path_buf(),
            args: args.iter().map(|a| (*a).to_string()).collect(),
            env: Vec::new(),
            env_remove: Vec::new(),
            path_first: Vec::new(),
            timeout: None,
            cwd: None,
            stdin: None,
            wrapper: Vec::new(),
            shell: None,
        }
    }
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

    /// Sets every variable of `vars` for the run.
    pub(crate) fn envs<K: AsRef<str>, V: AsRef<std::ffi::OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self = self.env(k.as_ref(), v);
        }
        self
    }

    /// Adds arguments after those given to [`Project::run`].
    pub(crate) fn args<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Removes environment variables from the run (a developer's own `ANTHROPIC_*`, say).
    pub(crate) fn env_remove<S: AsRef<str>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.env_remove
            .extend(names.into_iter().map(|n| n.as_ref().to_string()));
        self
    }

    /// Runs under kern's fence exactly as a person gets it: without the allowance every other
    /// run gets to write beside the scenario (`KERN_SANDBOX_WRITE`, for the scripted agent's
    /// counts and the fakes' logs). The fence's own tests (`fence.rs`) run so, and their agents
    /// report through the tree or an allowed loopback server instead.
    pub(crate) fn default_fence(self) -> Self {
        self.env_remove(["KERN_SANDBOX_WRITE"])
    }

    /// Puts `dir` first on kern's PATH (a folder holding the real `claude` or `codex`).
    pub(crate) fn path_first(mut self, dir: &Path) -> Self {
        self.path_first.push(dir.to_path_buf());
        self
    }

    /// Stops kern (SIGTERM, then SIGKILL after 10 s) and fails the test when it runs past
    /// `limit`: for runs of real agent CLIs, whose hang would otherwise hang the suite. Its
    /// output goes to files then, not pipes, so a CLI's grandchild holding a pipe open cannot
    /// keep the run from ending.
    pub(crate) fn timeout(mut self, limit: std::time::Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Feeds `bytes` to kern's stdin (otherwise it reads nothing): a prompt for
    /// `kern scripted-agent`.
    pub(crate) fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Runs kern and checks its exit code; on a mismatch panics with everything a reader needs:
    /// the command, the folder, the listing of the work tree, stdout, stderr and the stage
    /// streams left in the state folder (the last two for a run in a project).
    pub(crate) fn expect(self, code: i32) -> Ran {
        let project = self.project;
        let ran = self.finish();
        if ran.code != Some(code) {
            let dirty = project
                .map(|p| std::panic::catch_unwind(|| p.dirty()).unwrap_or_default())
                .unwrap_or_default();
            panic!(
                "{}\n{}\nwanted exit {code}",
                ran.describe(&dirty),
                project.map(stage_streams).unwrap_or_default()
            );
        }
        ran
    }

    /// The environment this run gives kern — each variable set (`Some`) or removed (`None`)
    /// over the test's own — for a shell recipe that runs `kern` itself (a README's `sh -c`), so
    /// that kern runs as this one would.
    pub(crate) fn command_env(&self) -> Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> {
        self.command()
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(std::ffi::OsStr::to_owned)))
            .collect()
    }

    /// This run as one shell line — `cd DIR && env -u REMOVED… NAME=VALUE… 'kern' ARGS…` — for
    /// a terminal that runs it (tmux), so that kern there runs as this one would.
    pub(crate) fn shell_words(&self) -> String {
        let cmd = self.command();
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"));
        let mut words = vec![
            format!("cd {} &&", quote(self.cwd().as_os_str())),
            "env".to_string(),
        ];
        // env takes its options (-u) before the assignments.
        let envs: Vec<_> = cmd.get_envs().collect();
        for (k, _) in envs.iter().filter(|(_, v)| v.is_none()) {
            words.push(format!("-u {}", k.to_string_lossy()));
        }
        for (k, v) in envs.iter().filter_map(|(k, v)| Some((k, (*v)?))) {
            words.push(format!("{}={}", k.to_string_lossy(), quote(v)));
        }
        words.push(quote(cmd.get_program()));
        words.extend(cmd.get_args().map(quote));
        words.join(" ")
    }

    /// Runs kern whatever its exit code, for a helper whose callers check [`Ran::code`]
    /// themselves (a table of commands, say); everywhere else, [`KernRun::expect`].
    pub(crate) fn any_exit(self) -> Ran {
        self.finish()
    }

    /// Starts kern in the background (stdout to nothing, stderr piped) for a test that acts
    /// while it runs: kills it, waits for a stage, runs another kern beside it.
    pub(crate) fn spawn(self) -> std::process::Child {
        self.spawn_with(std::process::Stdio::null(), std::process::Stdio::piped())
    }

    /// [`KernRun::spawn`] with the given stdout and stderr.
    pub(crate) fn spawn_with(
        self,
        stdout: impl Into<std::process::Stdio>,
        stderr: impl Into<std::process::Stdio>,
    ) -> std::process::Child {
        let mut cmd = self.command();
        cmd.stdout(stdout).stderr(stderr);
        self.start(&mut cmd)
    }

    /// Runs kern as the last argument of `prefix` (`unshare --user … sh -c '…; exec "$@"' sh`):
    /// a machine made to refuse what kern needs, for the one run.
    pub(crate) fn wrapped_in(mut self, prefix: &[&str]) -> Self {
        self.wrapper = prefix.iter().map(|a| (*a).to_string()).collect();
        self
    }

    /// Runs the shell line `line` with `sh -c` instead of kern, the kern under test first on
    /// PATH (after [`KernRun::path_first`]'s folders) and this run's environment, so that a
    /// `kern` the line runs runs as this one would: a README recipe, a printed command, a
    /// script of the docs (`sh script` as `line`). Arguments given to the run are the line's
    /// `$1`…
    pub(crate) fn shell(mut self, line: &str) -> Self {
        self.shell = Some(line.to_string());
        self
    }

    /// Runs kern from `dir` (a folder inside the repository, say) instead of the top folder.
    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The command with everything set but stdout and stderr.
    fn command(&self) -> std::process::Command {
        let kern = crate::support::kern_bin();
        let mut cmd = match (&self.shell, self.wrapper.split_first()) {
            (None, None) => std::process::Command::new(&kern),
            (None, Some((program, rest))) => {
                let mut cmd = std::process::Command::new(program);
                cmd.args(rest).arg(&kern);
                cmd
            }
            (Some(line), _) => {
                let mut sh = std::process::Command::new("sh");
                sh.args(["-c", line, "sh"]);
                sh
            }
        };
        cmd.current_dir(&self.dir);
        match self.project {
            Some(project) => {
                cmd.env("KERN_STATE_DIR", project.state_root())
                    .env(
                        "KERN_AGENT",
                        format!(
                            "program:{}",
                            project.outside.path().join("agent.sh").display()
                        ),
                    )
                    .env("KERN_RETRY_DELAY", "0")
                    // The scripted agent keeps its calls and counts beside its scenario, and
                    // the fake agents their logs: the fence lets them write there.
                    .env("KERN_SANDBOX_WRITE", project.outside.path())
                    .env("NO_COLOR", "1")
                    .env_remove("KERN_MODEL")
                    .env_remove("KERN_CHECK");
            }
            None => {
                for (name, _) in std::env::vars_os() {
                    if name.to_string_lossy().starts_with("KERN_") {
                        cmd.env_remove(name);
                    }
                }
                cmd.env("KERN_STATE_DIR", NO_STATE_ROOT)
                    .env("NO_COLOR", "1");
            }
        }
        cmd.args(&self.args).stdin(std::process::Stdio::null());
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let mut first = self.path_first.clone();
        if self.shell.is_some()
            && let Some(folder) = kern.parent()
        {
            first.push(folder.to_path_buf());
        }
        if !first.is_empty() {
            let path = self
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| std::ffi::OsString::from(v))
                .or_else(|| std::env::var_os("PATH"))
                .unwrap_or_default();
            first.extend(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(&first).unwrap());
        }
        for name in &self.env_remove {
            cmd.env_remove(name);
        }
        for (k, v) in &self.env {
            if k != "PATH" || first.is_empty() {
                cmd.env(k, v);
            }
        }
        cmd
    }

    /// Spawns `cmd` and, when the run has stdin, writes it from a thread (kern may fill its
    /// stdout pipe before it reads) and closes it.
    fn start(&self, cmd: &mut std::process::Command) -> std::process::Child {
        if self.stdin.is_some() {
            cmd.stdin(std::process::Stdio::piped());
        }
        let mut child = cmd.spawn().unwrap();
        if let Some(bytes) = self.stdin.clone() {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                use std::io::Write;
                // kern may exit without reading it all; what it read is what it got.
                let _ = pipe.write_all(&bytes);
            });
        }
        child
    }

    /// The folder kern runs in.
    fn cwd(&self) -> &Path {
        self.cwd.as_deref().unwrap_or(&self.dir)
    }

    fn finish(self) -> Ran {
        let started = std::time::Instant::now();
        let mut cmd = self.command();
        let (code, stdout, stderr) = match self.timeout {
            None => {
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let out = self.start(&mut cmd).wait_with_output().unwrap();
                (out.status.code(), out.stdout, out.stderr)
            }
            Some(limit) => self.run_with_limit(&mut cmd, limit),
        };
        let ran = Ran {
            code,
            stdout_utf8: std::str::from_utf8(&stdout).is_ok(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            elapsed: started.elapsed(),
            command: match &self.shell {
                None => format!("kern {}", self.args.join(" ")),
                Some(line) => format!("sh -c {line:?} {}", self.args.join(" ")),
            },
            cwd: self.cwd().to_path_buf(),
        };
        if self.timeout.is_some() {
            eprintln!(
                "{}: exit {:?} after {} ms",
                ran.command,
                ran.code,
                ran.elapsed.as_millis()
            );
        }
        ran
    }

    fn run_with_limit(
        &self,
        cmd: &mut std::process::Command,
        limit: std::time::Duration,
    ) -> (Option<i32>, Vec<u8>, Vec<u8>) {
        let scratch;
        let out = match self.project {
            Some(project) => project.outside.path(),
            None => {
                scratch = tempfile::tempdir().unwrap();
                scratch.path()
            }
        };
        let (stdout_path, stderr_path) = (out.join("kern.stdout"), out.join("kern.stderr"));
        cmd.stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(std::fs::File::create(&stderr_path).unwrap());
        let started = std::time::Instant::now();
        let mut child = self.start(cmd);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                stop(&mut child);
                panic!(
                    "kern {} ran past {limit:?} and was stopped; stderr:\n{}\n{}",
                    self.args.join(" "),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default(),
                    self.project.map(stage_streams).unwrap_or_default()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        (
            status.code(),
            std::fs::read(&stdout_path).unwrap_or_default(),
            std::fs::read(&stderr_path).unwrap_or_default(),
        )
    }
}

/// SIGTERM, up to 10 s to end, then SIGKILL.
fn stop(child: &mut std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The stage streams (`stageN.jsonl`) still in the project's state folder, each one's last
/// 4 KiB, for failure messages (nothing when the repository is gone).
fn stage_streams(project: &Project) -> String {
    let Ok(state_dir) = std::panic::catch_unwind(|| project.state_dir()) else {
        return String::new();
    };
    (1..=3)
        .filter_map(|n| {
            let text = std::fs::read_to_string(state_dir.join(format!("stage{n}.jsonl"))).ok()?;
            let tail = text
                .char_indices()
                .rev()
                .nth(4096)
                .map_or(text.as_str(), |(i, _)| &text[i..]);
            Some(format!("--- stage{n}.jsonl (tail) ---\n{tail}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a [`KernRun`] printed.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything on stdout (bytes that are not UTF-8 replaced; see [`Ran::utf8_stdout`]).
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
    /// How long kern ran.
    pub elapsed: std::time::Duration,
    command: String,
    cwd: PathBuf,
    /// Whether stdout was valid UTF-8 before [`Ran::stdout`] was made of it.
    stdout_utf8: bool,
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

    /// stdout, panicking (showing the whole run) unless kern printed valid UTF-8: for output
    /// whose bytes matter and not only its text (a stream of JSON lines, a completion script).
    pub(crate) fn utf8_stdout(&self) -> &str {
        assert!(
            self.stdout_utf8,
            "stdout is not UTF-8\n{}",
            self.describe(&[])
        );
        &self.stdout
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
