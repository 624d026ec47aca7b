//! Commits through the hook managers and formatters people run (issue 20, items 3–5), with the
//! real tools, pinned and installed by the tests on first use (`.ci/install-test-tools`): husky 9, lint-staged (prettier over `*.md` and `*.js`)
//! and commitlint with `@commitlint/config-conventional` from npm, and the pre-commit framework
//! with pre-commit-hooks' fixers from PyPI. Every hook is configured in the test repository
//! (`repo: local` and `language: system` for pre-commit; the installed npm tools for husky), so
//! nothing reaches the network while the tests run.
//!
//! - A message commitlint refuses goes back to the review for a new message, up to twice, the
//!   work kept: a three-task night commits all three with subjects commitlint accepts and runs
//!   implement exactly three times; a message still refused after that is one failed attempt,
//!   and the parent the commit had marked done is open again. The review prompt names the
//!   convention of the recent subjects (Conventional Commits, a ticket key and the task's key).
//! - prettier rewriting SPEC.md inside kern's commit (lint-staged over `*.md`) is the person's
//!   tooling: the formatted file is committed and kern's later edits apply to it.
//! - The pre-commit framework's fixers: their fixes are committed on the first attempt.
//! - What worked before keeps working: a pre-commit hook that reformats and `git add`s, a
//!   commit-msg hook that adds a trailer, a relative `core.hooksPath`.
//! - A commit a dead run left behind whose message a hook refuses goes back to the review too.
//!
//! Every test runs git, the tools and kern with its own `HOME`, so the machine's git config
//! cannot leak in, and with the pinned tools first on its `PATH`. A failed install fails the
//! tests with the installer's message; `KERN_SKIP_HOOK_MANAGERS=1` skips them instead.

use crate::support::{project, tools};

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use project::{Project, texts};
use serde_json::{Value, json};

/// True when the tools run (installed, pinned, on first use: `support::tools`); false when
/// `KERN_SKIP_HOOK_MANAGERS=1` says to skip. Panics with the installer's message when they
/// cannot be installed.
fn tools_present() -> bool {
    if std::env::var("KERN_SKIP_HOOK_MANAGERS").is_ok_and(|v| v == "1") {
        eprintln!("skipped: KERN_SKIP_HOOK_MANAGERS=1");
        return false;
    }
    tools::registry_tools();
    true
}

/// A project with its own home folder (empty git config).
struct Hooked {
    p: Project,
    home: tempfile::TempDir,
}

impl Hooked {
    fn new(spec: &str) -> Hooked {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".gitconfig"), "").unwrap();
        Hooked {
            p: Project::new(spec),
            home,
        }
    }

    /// `program` in the repository with this home and no system git config.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.p.path());
        self.isolate(&mut cmd);
        cmd
    }

    fn isolate(&self, cmd: &mut Command) {
        tools::registry_tools().apply(cmd);
        cmd.env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .env("PRE_COMMIT_HOME", self.home.path().join("pre-commit"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // Only the test repository: never one a surrounding hook or shell points at.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .env_remove("HUSKY")
            .env_remove("GNUPGHOME");
    }

    /// Runs `program args` (set-up and checks); panics with its output when it fails.
    fn run_ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.command(program).args(args).output().unwrap();
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{program} {args:?}: {stdout}{stderr}");
        stdout
    }

    fn git(&self, args: &[&str]) -> String {
        self.run_ok("git", args)
    }

    /// kern `args` with this home, the pinned tools and no system git config: a builder.
    fn kern(&self, args: &[&str]) -> project::KernRun<'_> {
        let tools = tools::registry_tools();
        self.p
            .run(args)
            .env("PATH", tools.path())
            .env("NPM_CONFIG_PREFIX", tools.npm_prefix())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .env("PRE_COMMIT_HOME", self.home.path().join("pre-commit"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // Only the test repository: never one a surrounding hook or shell points at.
            .env_remove([
                "GIT_DIR",
                "GIT_WORK_TREE",
                "GIT_INDEX_FILE",
                "GIT_COMMON_DIR",
                "HUSKY",
                "GNUPGHOME",
            ])
    }

    /// The scripted agent's calls of `stage`.
    fn calls(&self, stage: &str) -> Vec<Value> {
        std::fs::read_to_string(self.p.outside.path().join("scenario.calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|c| c["stage"] == stage)
            .collect()
    }

    fn assert_clean(&self) {
        assert_eq!(self.git(&["status", "--porcelain"]), "", "git status");
    }

    /// Writes an executable file.
    fn write_script(&self, rel: &str, body: &str) {
        self.p.write(rel, body);
        let path = self.p.path().join(rel);
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// commitlint's verdict on `message`, in this repository: `Ok` or its output.
    fn commitlint(&self, message: &str) -> Result<(), String> {
        let mut child = self
            .command("commitlint")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), message.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = texts(&out);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{stdout}{stderr}"))
        }
    }
}

/// The standard JavaScript set-up, committed as two conventional commits: husky 9 (hooks in
/// `.husky/`, a relative `core.hooksPath` of `.husky/_`), lint-staged running prettier over
/// `*.md` and `*.js` in `pre-commit`, commitlint with the conventional config in `commit-msg`.
fn husky_project(spec: &str) -> Hooked {
    let h = Hooked::new(spec);
    h.p.write(
        "package.json",
        r#"{
  "name": "scratch",
  "private": true,
  "type": "module",
  "scripts": { "prepare": "husky" },
  "lint-staged": { "*.{js,md}": "prettier --write" }
}
"#,
    );
    h.p.write(
        "commitlint.config.js",
        "export default { extends: ['@commitlint/config-conventional'] };\n",
    );
    h.p.write(".gitignore", "node_modules\n");
    h.p.commit_all("chore: add commitlint");
    // What `npm install` runs through `prepare`.
    h.run_ok("husky", &[]);
    assert_eq!(h.git(&["config", "core.hooksPath"]), ".husky/_\n");
    h.p.write(".husky/pre-commit", "lint-staged\n");
    h.p.write(".husky/commit-msg", "commitlint --edit \"$1\"\n");
    h.p.commit_all("chore: run lint-staged and commitlint through husky");
    assert!(
        h.commitlint("feat: check the set-up\n").is_ok(),
        "commitlint cannot load @commitlint/config-conventional — remove the cache `.ci/install-test-tools` names and run it again"
    );
    h
}

/// An implement stage that writes `files`.
fn writes(files: Value) -> Value {
    json!({"write": files})
}

/// A review that answers COMMIT with `subject`.
fn commit(subject: &str) -> Value {
    json!({"result": {"verdict": "COMMIT", "subject": subject}})
}

#[test]
fn a_husky_lint_staged_commitlint_night_commits_three_tasks_with_subjects_commitlint_accepts() {
    if !tools_present() {
        return;
    }
    // `*` bullets and no blank line under the heading: prettier rewrites both.
    let h = husky_project(
        "# Tasks\n* [ ] Add the greeting module\n* [ ] Add the farewell module\n* [ ] Add the shout helper\n",
    );
    h.p.scenario(&json!({"tasks": [
        {"match": "greeting",
         "implement": writes(json!({"src/greet.js": "export const greet=(n)=>\"hello \"+n\n"})),
         "commit": [commit("Add the greeting module"), commit("feat: add the greeting module")]},
        {"match": "farewell",
         "implement": writes(json!({"src/bye.js": "export const bye=(n)=>\"bye \"+n\n"})),
         "commit": [commit("Add farewell"), commit("Still no type"), commit("feat: add the farewell module")]},
        {"match": "shout",
         "implement": writes(json!({"src/shout.js": "export const shout=(s)=>s.toUpperCase()\n"})),
         "commit": {"result": {"verdict": "COMMIT", "subject": "feat: add the shout helper",
                               "learnings": ["shout upper-cases"]}}}
    ]}));
    let err = h.kern(&["5", "0"]).expect(0).stderr;

    let log = h.p.log();
    assert_eq!(
        log[..3],
        [
            "feat: add the shout helper",
            "feat: add the farewell module",
            "feat: add the greeting module"
        ],
        "{err}"
    );
    for rev in ["HEAD", "HEAD~1", "HEAD~2"] {
        let message = h.git(&["log", "-1", "--format=%B", rev]);
        assert_eq!(h.commitlint(&message), Ok(()), "{rev}: {message}");
    }
    assert_eq!(h.calls("implement").len(), 3, "implement ran once per task");
    assert_eq!(h.calls("commit").len(), 6, "2 + 3 + 1 reviews");
    assert!(
        err.contains("the `commit-msg` hook refused the message `Add the greeting module` — asking the review for a new message (1 of 2); the work stays as it is"),
        "{err}"
    );
    assert!(!err.contains("attempt 1"), "{err}");
    assert!(
        !err.contains("not by kern"),
        "prettier's rewrite inside kern's commit is not a hand edit: {err}"
    );

    // The reviews kern asked for a message: the refusal as data, the convention as kern's word.
    let prompts: Vec<String> = h
        .calls("commit")
        .iter()
        .map(|c| c["prompt"].as_str().unwrap().to_string())
        .collect();
    let conventional = "The recent subjects follow Conventional Commits: `<type>: <description>`";
    assert!(prompts[0].contains(conventional), "{}", prompts[0]);
    assert!(!prompts[0].contains("request for a commit message only"));
    assert!(
        prompts[1].contains("This is a request for a commit message only (request 1 of 2).")
            && prompts[1].contains(
                "<data source=\"refused commit message\">\nAdd the greeting module\n</data>"
            )
            && prompts[1].contains("<data source=\"commit-msg hook output\">\n⧗   input: Add the greeting module\n✖   subject may not be empty [subject-empty]\n✖   type may not be empty [type-empty]\n")
            && prompts[1].contains(conventional),
        "{}",
        prompts[1]
    );
    assert!(
        prompts[4].contains("(request 2 of 2)")
            && prompts[4].contains("<data source=\"refused commit message\">\nStill no type\n"),
        "{}",
        prompts[4]
    );

    // prettier formatted SPEC.md inside kern's first commit; kern committed that, and its
    // later edits applied to the formatted text.
    let first = h.git(&["show", "HEAD~2:SPEC.md"]);
    assert!(
        first.starts_with("# Tasks\n\n- [x] Add the greeting module\n")
            && first.contains("\n- [ ] Add the farewell module\n- [ ] Add the shout helper\n"),
        "{first}"
    );
    let spec = h.p.read("SPEC.md");
    assert_eq!(h.git(&["show", "HEAD:SPEC.md"]), spec);
    assert!(!spec.contains("Attempt"), "{spec}");
    assert_eq!(
        spec.lines().filter(|l| l.starts_with("- [x] ")).count(),
        3,
        "{spec}"
    );
    let copy = h.home.path().join("SPEC-copy.md");
    std::fs::write(&copy, &spec).unwrap();
    h.run_ok(
        "prettier",
        &["--write", "--log-level", "warn", copy.to_str().unwrap()],
    );
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        spec,
        "a fixed point"
    );
    // prettier over `*.js` in the same commits; the tree is clean.
    assert_eq!(
        h.git(&["show", "HEAD~2:src/greet.js"]),
        "export const greet = (n) => \"hello \" + n;\n"
    );
    assert_eq!(
        h.git(&["show", "HEAD:src/shout.js"]),
        "export const shout = (s) => s.toUpperCase();\n"
    );
    assert!(h.git(&["show", "HEAD:LEARNINGS.md"]).contains(
        "- shout upper-cases — source: task \"Add the shout helper\", the commit after "
    ));
    h.assert_clean();
}

#[test]
fn a_message_still_refused_after_two_requests_is_one_failed_attempt_with_the_parent_open() {
    if !tools_present() {
        return;
    }
    let h = husky_project("- [ ] Greetings\n  - [ ] Add the greeting module\n");
    h.p.scenario(&json!({"default": {
        "implement": writes(json!({"src/greet.js": "export const greet=(n)=>\"hello \"+n\n"})),
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the greeting module",
                              "learnings": ["never kept"]}}
    }}));
    let head = h.git(&["rev-parse", "HEAD"]);
    // the last task failed
    h.kern(&["1", "0"]).expect(4);
    assert_eq!(h.git(&["rev-parse", "HEAD"]), head, "nothing committed");
    assert_eq!(h.calls("implement").len(), 1);
    assert_eq!(h.calls("commit").len(), 3, "the review and two requests");
    let spec = h.p.read("SPEC.md");
    assert!(
        spec.starts_with("- [~] Greetings\n  - [~] Add the greeting module\n"),
        "the parent the commit had marked done is open again: {spec}"
    );
    assert_eq!(spec.matches("**Attempt").count(), 1, "{spec}");
    assert!(
        spec.contains("**Attempt 1:** the `commit-msg` hook refused the commit message 3 times (kern asked the review for a new one 2 times); its last output:")
            && spec.contains("subject may not be empty [subject-empty]"),
        "{spec}"
    );
    assert!(
        !h.p.path().join("LEARNINGS.md").exists(),
        "the learnings of a commit that did not happen are taken back"
    );
    // The work stays for the next attempt (formatted by the hook that ran before the refusal).
    assert_eq!(
        h.p.read("src/greet.js"),
        "export const greet = (n) => \"hello \" + n;\n"
    );
}

#[test]
fn a_pre_commit_framework_night_commits_the_fixers_fixes_on_the_first_attempt() {
    if !tools_present() {
        return;
    }
    let h = Hooked::new("- [ ] Add the greeting\n- [ ] Add the farewell\n");
    h.p.write(
        ".pre-commit-config.yaml",
        "repos:
  - repo: local
    hooks:
      - id: trailing-whitespace
        name: trim trailing whitespace
        entry: trailing-whitespace-fixer
        language: system
        types: [text]
      - id: end-of-file-fixer
        name: fix end of files
        entry: end-of-file-fixer
        language: system
        types: [text]
",
    );
    h.p.commit_all("Add the pre-commit configuration");
    h.run_ok("pre-commit", &["install"]);
    h.p.scenario(&json!({"tasks": [
        {"match": "greeting", "implement": writes(json!({"src/greet.txt": "hello   \nworld\t\n\n\n"}))},
        {"match": "farewell", "implement": writes(json!({"src/bye.txt": "bye  \nnow"}))}
    ]}));
    let err = h.kern(&["5", "0"]).expect(0).stderr;
    assert_eq!(h.p.log()[..2], ["Add the farewell", "Add the greeting"]);
    assert_eq!(h.calls("implement").len(), 2, "each on its first attempt");
    for (path, fixed) in [
        ("src/greet.txt", "hello\nworld\n"),
        ("src/bye.txt", "bye\nnow\n"),
    ] {
        assert_eq!(h.git(&["show", &format!("HEAD:{path}")]), fixed, "{path}");
        assert_eq!(h.p.read(path), fixed, "{path}");
        assert!(
            err.contains(&format!(
                "the pre-commit hook fixed `{path}`; kern staged its fixes and ran it again"
            )),
            "{err}"
        );
    }
    let spec = h.p.read("SPEC.md");
    assert!(!spec.contains("Attempt"), "{spec}");
    h.assert_clean();
}

#[test]
fn a_reformatting_pre_commit_hook_and_a_trailer_commit_msg_hook_in_a_relative_hooks_path() {
    if !tools_present() {
        return;
    }
    let h = Hooked::new("- [ ] Add the greeting\n");
    h.write_script(
        "githooks/pre-commit",
        "#!/bin/sh\nset -e\nfiles=$(git diff --cached --name-only --diff-filter=AM -- '*.js')\n[ -z \"$files\" ] && exit 0\nprettier --write --log-level warn $files\ngit add $files\n",
    );
    h.write_script(
        "githooks/commit-msg",
        "#!/bin/sh\ngit interpret-trailers --in-place --trailer 'Reviewed-by: the hook <hook@example.com>' \"$1\"\n",
    );
    h.p.commit_all("Add the hooks");
    h.git(&["config", "core.hooksPath", "githooks"]);
    h.p.scenario(&json!({"default": {
        "implement": writes(json!({"src/greet.js": "export const greet=(n)=>\"hello \"+n\n"}))
    }}));
    h.kern(&["1", "0"]).expect(0);
    assert_eq!(
        h.git(&["log", "-1", "--format=%B"]),
        "Add the greeting\n\nReviewed-by: the hook <hook@example.com>\n\n"
    );
    assert_eq!(
        h.git(&["show", "HEAD:src/greet.js"]),
        "export const greet = (n) => \"hello \" + n;\n"
    );
    h.assert_clean();
}

#[test]
fn the_review_is_told_the_ticket_key_convention_and_the_tasks_key() {
    let h = Hooked::new("- [ ] ABC-42 Add the wave helper\n");
    for (n, subject) in ["ABC-7: add the greeting", "ABC-9: add the farewell"]
        .iter()
        .enumerate()
    {
        h.p.write(&format!("f{n}.txt"), subject);
        h.p.commit_all(subject);
    }
    h.p.scenario(&json!({"default": {
        "implement": writes(json!({"wave.txt": "wave\n"})),
        "commit": commit("ABC-42: add the wave helper")
    }}));
    h.kern(&["1", "0"]).expect(0);
    let prompt = h.calls("commit")[0]["prompt"].as_str().unwrap().to_string();
    assert!(
        prompt.contains("## The commit message\n\nThe recent subjects start with a ticket key of the `ABC` project, written `ABC-123: <description>`. The task names `ABC-42`: start yours with `ABC-42: `.\n"),
        "{prompt}"
    );
    assert_eq!(h.p.log()[0], "ABC-42: add the wave helper");
}

#[test]
fn a_commit_a_dead_run_left_whose_message_is_refused_goes_back_to_the_review() {
    let h = Hooked::new("- [ ] Add the greeting\n");
    let outside = h.p.outside.path();
    let (started, go) = (outside.join("hook.pid"), outside.join("go"));
    // Refuses a subject without `feat: `; the first time, waits for the test to kill kern.
    h.write_script(
        ".git/hooks/commit-msg",
        &format!(
            "#!/bin/sh\nif [ ! -f '{go}' ]; then\n  echo $$ > '{started}.tmp' && mv '{started}.tmp' '{started}'\n  while [ ! -f '{go}' ]; do sleep 0.01; done\nfi\ngrep -q '^feat: ' \"$1\" || {{ echo 'subject must start with feat:'; exit 1; }}\n",
            go = go.display(),
            started = started.display()
        ),
    );
    h.p.scenario(&json!({"default": {
        "implement": writes(json!({"greet.txt": "hello\n"})),
        "commit": [commit("Add the greeting"), commit("feat: add the greeting")]
    }}));
    let mut child = h.kern(&["1", "0"]).spawn_with(Stdio::null(), Stdio::null());
    // The hook's pid, written inside kern's fence, is its PID namespace's: it is found by its
    // path, the one argument of its command line no other process has.
    crate::support::wait_for_file(&started);
    let hook = h.p.path().join(".git/hooks/commit-msg");
    let hook = hook.to_str().unwrap();
    assert!(!crate::support::holding(hook).is_empty(), "the hook waits");
    crate::support::kill(i32::try_from(child.id()).unwrap());
    child.wait().unwrap();
    std::fs::write(&go, "").unwrap();
    assert!(crate::support::wait_gone(hook), "the first hook ended");
    assert!(
        h.p.state_dir().join("commit.json").exists(),
        "the dead run left its commit journal"
    );
    assert!(h.p.read("SPEC.md").starts_with("- [x] Add the greeting\n"));

    let err = h.kern(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("the `commit-msg` hook refused that commit: `Add the greeting` is in progress again and goes on from its review"),
        "{err}"
    );
    assert_eq!(h.p.log()[0], "feat: add the greeting", "{err}");
    assert_eq!(h.calls("implement").len(), 1, "the work was kept");
    assert_eq!(h.calls("commit").len(), 2, "one review, one request");
    let spec = h.p.read("SPEC.md");
    assert!(
        spec.starts_with("- [x] Add the greeting\n") && !spec.contains("Attempt"),
        "{spec}"
    );
    h.assert_clean();
}
