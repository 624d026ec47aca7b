//! "During a stage" without sleeps: a scenario whose stage waits for a file the test creates,
//! kern spawned in the background, and git run by the test (kern never runs git; tests may).
#![allow(dead_code)]

use std::path::Path;
use std::process::Child;

use serde_json::{Value, json};

use super::project::{Project, texts};
use super::wait_for_file;

/// A scenario where `stage` of every task waits for the file `go` (after its own actions),
/// then behaves as the default; every other stage is a plain success that writes work.
pub(crate) fn waiting(stage: &str, go: &Path, actions: Value) -> Value {
    let mut run = actions;
    let wait = format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display());
    let mut shell = vec![json!(wait)];
    if let Some(more) = run.get("shell").and_then(Value::as_array) {
        shell.extend(more.iter().cloned());
    }
    run["shell"] = json!(shell);
    let mut s = json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}, "result": {"status": "SUCCESS", "summary": "s"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }});
    let default = s["default"][stage].clone();
    for (k, v) in default.as_object().unwrap() {
        if run.get(k).is_none() {
            run[k] = v.clone();
        }
    }
    s["default"][stage] = json!([run, default]);
    s
}

/// `kern ARGS` in `p`, in the background, stderr captured.
pub(crate) fn spawn(p: &Project, args: &[&str]) -> Child {
    p.run(&[]).args(args).spawn()
}

/// Waits for a spawned kern: its exit code and stderr.
pub(crate) fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), texts(&out).1)
}

/// Starts kern, waits until the stage numbered `stage` is running, calls `during`, lets the
/// stage go on, and returns how kern ended.
pub(crate) fn during_stage(
    p: &Project,
    args: &[&str],
    stage: u8,
    go: &Path,
    during: impl FnOnce(),
) -> (i32, String) {
    let child = spawn(p, args);
    wait_for_file(&p.state_dir().join(format!("stage{stage}.jsonl")));
    during();
    std::fs::write(go, "").unwrap();
    finish(child)
}

/// Runs `git ARGS` in `dir` and returns its stdout; panics with its stderr when it fails.
pub(crate) fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Project {
    /// `git ARGS` in the project (see [`git_in`]).
    pub(crate) fn git(&self, args: &[&str]) -> String {
        git_in(self.path(), args)
    }

    /// The refs under `prefix` (a full name or a folder of refs), by name.
    pub(crate) fn refs(&self, prefix: &str) -> Vec<String> {
        self.git(&["for-each-ref", "--format=%(refname)", prefix])
            .lines()
            .map(str::to_string)
            .collect()
    }
}
