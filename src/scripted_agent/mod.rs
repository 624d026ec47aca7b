//! The built-in scripted agent: `kern scripted-agent <scenario.json>`, a fake coding agent that
//! follows a scenario file and prints what the real Claude Code CLI prints. It is the test
//! language of the whole project and the agent of `kern demo`; kern runs it as any
//! `program:<path>` agent. Its scenario language is documented in `docs/scripted-agent.md`.
//!
//! The one decision a reader must know: it speaks Claude-style stream-json shaped after the
//! recorded real output, so the stream parser, failure classification and stage records all
//! run on the real path. The files: `scenario` (the file format), `emit` (the stream), `act`
//! (what a run does).

mod act;
mod emit;
mod scenario;

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};
use crate::stage::Stage;

pub(crate) use crate::text::slug;
use act::{Context, perform};
pub(crate) use scenario::Scenario;

/// Runs the scripted agent on `scenario_path` (the `kern scripted-agent` subcommand). Exits
/// the process itself when the scenario asks for a non-zero exit code, or hangs forever when
/// it asks for a hang.
pub(crate) fn run(scenario_path: &Path) -> Result<()> {
    let text = fs::read_to_string(scenario_path).map_err(|e| Error::io(scenario_path, e))?;
    let scenario = Scenario::parse(&text).map_err(|e| {
        Error::Usage(format!(
            "`{}`: not a valid scenario: {e} — see the scenario format in docs/scripted-agent.md",
            scenario_path.display()
        ))
    })?;
    let stage = std::env::var("KERN_STAGE")
        .ok()
        .and_then(|s| Stage::from_name(&s))
        .ok_or_else(|| {
            Error::Usage(
                "KERN_STAGE is not research, implement or commit — the scripted agent runs under kern (--agent program:<path>)".into(),
            )
        })?;
    let task = std::env::var("KERN_TASK").unwrap_or_default();
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let mut prompt = Vec::new();
    std::io::stdin()
        .read_to_end(&mut prompt)
        .map_err(|e| Error::io("<stdin>", e))?;

    let (key, runs) = scenario.plan(&task, stage);
    let books = books_for(
        &cwd.join(scenario_path),
        std::env::var_os("KERN_STATE_DIR").as_deref().map(Path::new),
    )?;
    let n = next_count(&books, &key)?;
    let run = runs.and_then(|r| r.nth(n)).cloned().unwrap_or_default();
    log_call(&books, &key, n, stage, &task, &cwd, &prompt)?;

    let context = Context {
        stage,
        slug: slug(&task),
        task,
        cwd,
    };
    let code = perform(&run, &context, &prompt)?;
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

/// The folder under a stage's state folder where the books of a scenario inside a work tree
/// are kept (the one folder of its state folder kern's fence lets a `program:` agent write).
pub(crate) const BOOKS_FOLDER: &str = "scripted-agent";

/// Where the books (the counts and the call log) of the scenario at `scenario` (absolute) are
/// kept, as a path whose extension is replaced (`scenario.counts.json`,
/// `scenario.calls.jsonl`): beside the scenario, unless a git work tree holds it — a scenario
/// committed with the project — and then in `state_dir/scripted-agent/` (`KERN_STATE_DIR`),
/// so that the agent never changes a tree by counting (a read-only stage would be a
/// violation). Without a state folder such a scenario cannot be run.
fn books_for(scenario: &Path, state_dir: Option<&Path>) -> Result<PathBuf> {
    let in_tree = scenario
        .ancestors()
        .skip(1)
        .any(|dir| fs::symlink_metadata(dir.join(".git")).is_ok());
    if !in_tree {
        return Ok(scenario.to_path_buf());
    }
    let name = scenario.file_name().unwrap_or(scenario.as_os_str());
    match state_dir {
        Some(dir) => {
            let books = dir.join(BOOKS_FOLDER);
            std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700)
                .create(&books)
                .map_err(|e| Error::io(&books, e))?;
            Ok(books.join(name))
        }
        None => Err(Error::Usage(format!(
            "`{}` is inside a git work tree and KERN_STATE_DIR is not set, so the scripted agent has nowhere to count its runs but the tree — run it under kern (--agent program:<path>), which sets KERN_STATE_DIR",
            scenario.display()
        ))),
    }
}

/// Reads, increments and atomically rewrites the invocation count of `key` in the books at
/// `books` ([`books_for`]); returns the count before this invocation. Agents running side by
/// side (`-j`) take turns through a lock file beside the counts.
fn next_count(books: &Path, key: &str) -> Result<u64> {
    use fs2::FileExt;
    let path = books.with_extension("counts.json");
    let lock_path = books.with_extension("counts.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    lock.lock_exclusive()
        .map_err(|e| Error::io(&lock_path, e))?;
    let mut counts: BTreeMap<String, u64> = match fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "`{}`: {e} — delete it to restart the counts",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let count = counts.entry(key.to_string()).or_insert(0);
    let n = *count;
    *count += 1;
    let bytes = serde_json::to_vec_pretty(&counts)
        .map_err(|e| Error::Internal(format!("cannot encode the counts: {e}")))?;
    crate::atomic_file::write(&path, &bytes)?;
    Ok(n)
}

fn log_call(
    books: &Path,
    key: &str,
    n: u64,
    stage: Stage,
    task: &str,
    cwd: &Path,
    prompt: &[u8],
) -> Result<()> {
    let path = books.with_extension("calls.jsonl");
    let env = |name: &str| std::env::var(name).ok();
    let line = json!({
        "n": n,
        "key": key,
        "stage": stage.name(),
        "task": task,
        "tools": env("KERN_TOOLS"),
        "schema": env("KERN_SCHEMA"),
        "state_dir": env("KERN_STATE_DIR"),
        "cwd": cwd,
        "args": std::env::args().collect::<Vec<_>>(),
        "prompt": String::from_utf8_lossy(prompt),
    });
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    writeln!(file, "{line}").map_err(|e| Error::io(&path, e))
}

#[cfg(test)]
mod tests {
    use super::scenario::{Run, Runs};
    use super::*;
    use serde_json::Value;
    use std::path::PathBuf;

    #[test]
    fn the_books_go_beside_a_scenario_outside_any_work_tree_else_into_the_state_folder() {
        let outside = tempfile::tempdir().unwrap();
        let scenario = outside.path().join("scenario.json");
        assert_eq!(books_for(&scenario, None).unwrap(), scenario);
        let state = outside.path().join("state");
        let repo = outside.path().join("repo");
        fs::create_dir_all(repo.join(".git")).unwrap();
        for inside in [repo.join("scenario.json"), repo.join("agents/s.json")] {
            let books = books_for(&inside, Some(&state)).unwrap();
            assert_eq!(
                books,
                state.join(BOOKS_FOLDER).join(inside.file_name().unwrap())
            );
            assert!(state.join(BOOKS_FOLDER).is_dir());
            let error = books_for(&inside, None).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert!(
                error.to_string().contains("KERN_STATE_DIR is not set"),
                "{error}"
            );
        }
        // A linked worktree's `.git` is a file.
        let linked = outside.path().join("linked");
        fs::create_dir_all(&linked).unwrap();
        fs::write(linked.join(".git"), "gitdir: elsewhere\n").unwrap();
        assert_ne!(
            books_for(&linked.join("s.json"), Some(&state)).unwrap(),
            linked.join("s.json")
        );
    }

    #[test]
    fn slugs_are_file_name_safe() {
        let cases = [
            ("Add a README", "add-a-readme"),
            ("  fix: `kern -n` (dry run)!  ", "fix-kern-n-dry-run"),
            ("Ünïcode only", "n-code-only"),
            ("", "task"),
            ("***", "task"),
        ];
        for (task, expected) in cases {
            assert_eq!(slug(task), expected, "{task:?}");
        }
        assert_eq!(slug(&"a".repeat(100)), "a".repeat(60));
        assert_eq!(slug(&"ab ".repeat(100)), ["ab"; 20].join("-"));
    }

    #[test]
    fn the_first_matching_task_entry_wins_and_falls_back_to_default() {
        let scenario = Scenario::parse(
            r#"{"default": {"implement": {"text": "d"}},
                "tasks": [{"match": "README", "research": [{"text": "r0"}, {"text": "r1"}]},
                          {"match": "READ", "implement": {"text": "x"}}]}"#,
        )
        .unwrap();
        let text =
            |runs: Option<&Runs>, n| runs.and_then(|r| r.nth(n)).and_then(|r| r.text.clone());
        let cases = [
            (
                "Add a README",
                Stage::Research,
                0,
                "tasks[0]/research",
                Some("r0"),
            ),
            (
                "Add a README",
                Stage::Research,
                5,
                "tasks[0]/research",
                Some("r1"),
            ),
            (
                "Add a README",
                Stage::Implement,
                0,
                "tasks[0]/implement",
                Some("d"),
            ),
            (
                "READ me",
                Stage::Implement,
                0,
                "tasks[1]/implement",
                Some("x"),
            ),
            ("other", Stage::Implement, 3, "default/implement", Some("d")),
            ("other", Stage::Review, 0, "default/commit", None),
        ];
        for (task, stage, n, key, expected) in cases {
            let (got_key, runs) = scenario.plan(task, stage);
            assert_eq!(got_key, key, "{task} {stage:?}");
            assert_eq!(text(runs, n).as_deref(), expected, "{task} {stage:?} {n}");
        }
    }

    #[test]
    fn result_null_differs_from_absent_and_unknown_fields_fail() {
        let run: Run = serde_json::from_str(r#"{"result": null}"#).unwrap();
        assert_eq!(run.result, Some(Value::Null));
        let run: Run = serde_json::from_str("{}").unwrap();
        assert_eq!(run.result, None);
        assert!(serde_json::from_str::<Run>(r#"{"wrtie": {}}"#).is_err());
        assert!(serde_json::from_str::<Run>(r#"{"error": "nope"}"#).is_err());
        assert_eq!(Runs::Many(vec![]).nth(0), None);
    }

    #[test]
    fn placeholders_are_replaced_in_nested_results() {
        let context = Context {
            stage: Stage::Review,
            task: "Add a README".into(),
            slug: "add-a-readme".into(),
            cwd: PathBuf::from("/repo"),
        };
        assert_eq!(
            context.subst_value(&json!({"subject": "{task}", "notes": ["{slug}.md", 3]})),
            json!({"subject": "Add a README", "notes": ["add-a-readme.md", 3]})
        );
        assert_eq!(
            context.path("docs/{slug}.md"),
            PathBuf::from("/repo/docs/add-a-readme.md")
        );
        assert_eq!(
            context.default_result(&[]),
            json!({"verdict": "COMMIT", "subject": "Add a README"})
        );
    }
}
