//! Done means verified (DESIGN.md section 16): after implement reports SUCCESS and the check
//! passes, kern itself checks the task's must-haves (`> **Must:**`) and, with `> **Tests:**
//! read-only` (or `--tests-read-only`, or a task tested first), that no existing test was
//! changed — before any review is paid for.
//!
//! Decisions a reader must know:
//! - The must-haves and the Tests note are held as of the task's start (`task.json`), like its
//!   Check: an agent that rewrites them in SPEC.md changes nothing here.
//! - A must-have that fails is a failed attempt whose note says which one and what kern saw, at
//!   no model cost. A `file`/`grep` must-have that already held when the task started proves
//!   nothing about this task: it passes, but is reported as no evidence, to the review too.
//! - `run` must-haves use the check gate's runner (own process group, `--check-timeout`,
//!   output in `must.log`).
//! - An existing test file is one the task's base commit holds; a new test file is fine.

use std::path::{Path, PathBuf};

use super::TaskRun;
use super::check;
use super::decide::CheckResult;
use super::decide::{self, Next};
use super::guard::SpecGuard;
use crate::error::Result;
use crate::event::{IterationEnd, RunEvent};
use crate::spec::MustHave;
use crate::state::StateDir;
use crate::state::lock::{Phase, RunLock};
use crate::workspace::Workspace;

/// What kern found for one must-have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The must-have as written.
    pub what: String,
    /// It holds now.
    pub passed: bool,
    /// What kern saw, in a few words.
    pub seen: String,
    /// It already held when the task started (a `file`/`grep` must-have): no evidence.
    pub no_evidence: bool,
}

impl Finding {
    /// One line for the terminal, the run log and the review.
    pub(crate) fn line(&self) -> String {
        let mark = if self.passed { "✓" } else { "✗" };
        let evidence = if self.passed && self.no_evidence {
            " (no evidence: it already held when the task started)"
        } else {
            ""
        };
        format!("{mark} {}: {}{evidence}", self.what, self.seen)
    }
}

/// The must-haves of a Must note's `text` with, for each `file`/`grep` one, whether it holds in
/// the work tree at `top` now (the task's start); `run` ones are not run here (`None`).
pub(crate) fn held_at_start(top: &Path, text: &str) -> Vec<(String, Option<bool>)> {
    crate::spec::parse_must(text)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .map(|must| {
            let held = match &must {
                MustHave::Run { .. } => None,
                other => Some(judge_file(top, other).0),
            };
            (must.to_string(), held)
        })
        .collect()
}

/// Whether a `file` or `grep` must-have holds in the work tree at `top`, and what was seen.
fn judge_file(top: &Path, must: &MustHave) -> (bool, String) {
    match must {
        MustHave::File { path, absent } => {
            let exists = std::fs::symlink_metadata(top.join(path)).is_ok();
            let seen = if exists {
                "the file exists"
            } else {
                "no such file"
            };
            (exists != *absent, seen.to_string())
        }
        MustHave::Grep {
            path,
            pattern,
            absent,
            ..
        } => {
            // grep's own order (`grep "^x=1$" config.env`) when the first word names no file
            // and the last one does: the only reading under which the line can ever hold.
            if crate::spec::path_looks_like_a_pattern(must)
                && std::fs::symlink_metadata(top.join(path)).is_err()
                && top.join(pattern).is_file()
            {
                let (held, seen) = grep(top, pattern, path, *absent);
                return (held, format!("read in grep's order, {seen}"));
            }
            grep(top, path, pattern, *absent)
        }
        MustHave::Run { .. } => (false, "not a file must-have".into()),
    }
}

/// Whether `path` holds a line matching `pattern` (`absent`: holds none), and what was seen.
fn grep(top: &Path, path: &str, pattern: &str, absent: bool) -> (bool, String) {
    match crate::spec::compile_grep(pattern) {
        Ok(re) => {
            let seen = crate::spec::grep_file(&top.join(path), &re);
            (seen.holds(absent), seen.seen(path))
        }
        Err(why) => (false, format!("the pattern does not compile: {why}")),
    }
}

/// The existing test files among `changed` (paths relative to the top) that `exists_at_base`
/// says the task's base commit holds.
pub(crate) fn weakened_tests(
    changed: &[String],
    exists_at_base: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    changed
        .iter()
        .filter(|p| crate::spec::is_test_path(p) && exists_at_base(p))
        .cloned()
        .collect()
}

/// Adds what kern found after implement (the must-haves, the tests of a task tested
/// first) to the implement stage's record in `state_dir`, through the stage runner's writer.
pub(super) fn annotate_implement_record(
    state_dir: &StateDir,
    add: impl FnOnce(&mut crate::stage::record::KernEnvelope),
) -> Result<()> {
    super::stage::runner::annotate_record(state_dir, crate::stage::Stage::Implement, add)
}

/// The paths the task changed since its base commit: its commits' and the work tree's (less
/// what no audit may touch: see [`super::audit::untouchable`]).
pub(super) fn changed_since_start(
    ws: &Workspace,
    left_out: &[PathBuf],
    it: &TaskRun,
) -> Result<Vec<String>> {
    let mut changed: Vec<String> = crate::pipeline::audit::changed_paths(
        &ws.repo,
        &crate::pipeline::audit::untouchable(ws, &it.start.excluded, left_out),
    )?
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect();
    if let (Some(base), Some(head)) = (it.start.base_oid(), ws.repo.head_oid())
        && base != head
    {
        changed.extend(ws.repo.paths_between(
            super::audit::tree_of(&ws.repo, base)?,
            super::audit::tree_of(&ws.repo, head)?,
        )?);
    }
    changed.sort();
    changed.dedup();
    Ok(changed)
}

/// Checks the task's must-haves and read-only tests (see the module docs); `Some` when the
/// attempt failed and the task's iteration ended. The findings go to `it.verified` for the
/// review.
pub(super) async fn verify_gate(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    let musts: Vec<(MustHave, Option<bool>)> = it
        .start
        .must
        .iter()
        .filter_map(|(line, held)| {
            crate::spec::parse_must(line)
                .into_iter()
                .next()
                .and_then(std::result::Result::ok)
                .map(|m| (m, *held))
        })
        .collect();
    let read_only = it.start.tests_read_only
        || guard.cx.settings.tests_read_only
        || it.start.tests_first.is_some();
    if musts.is_empty() && !read_only {
        return Ok(None);
    }
    lock.set_phase(Phase::Check)?;
    let top = guard.cx.ws.repo.top().to_path_buf();
    let mut findings = Vec::new();
    for (must, held) in musts {
        let (passed, seen) = match &must {
            MustHave::Run { command } => {
                let log = guard.cx.ws.state_dir.check_log().with_file_name("must.log");
                let result =
                    check::run_for_task(guard, it, (command, &top), &log, "must-have").await?;
                match result {
                    CheckResult::Passed => (true, "exit 0".to_string()),
                    CheckResult::Failed(note) => (false, note),
                }
            }
            other => judge_file(&top, other),
        };
        findings.push(Finding {
            what: must.to_string(),
            passed,
            seen,
            no_evidence: held == Some(true),
        });
    }
    if read_only {
        let changed = changed_since_start(guard.cx.ws, left_out, it)?;
        let base = it.start.base_oid();
        let repo = &guard.cx.ws.repo;
        // A task tested first: its own tests are held by `tests_first`, not here.
        let held = it
            .start
            .red_of(&it.identity)
            .map(|r| r.tests.clone())
            .unwrap_or_default();
        let weakened: Vec<String> = weakened_tests(&changed, &|p| {
            base.is_some_and(|b| repo.file_at(b, Path::new(p)))
        })
        .into_iter()
        .filter(|p| !held.contains(p))
        .collect();
        findings.push(Finding {
            what: "tests read-only".into(),
            passed: weakened.is_empty(),
            seen: if weakened.is_empty() {
                "no existing test file changed".into()
            } else {
                format!(
                    "existing test files changed or deleted: {}",
                    weakened.join(", ")
                )
            },
            no_evidence: false,
        });
    }
    let failed: Vec<&Finding> = findings.iter().filter(|f| !f.passed).collect();
    guard.teller.emit(RunEvent::Must {
        task: it.title.clone(),
        findings: findings.iter().map(Finding::line).collect(),
        passed: failed.is_empty(),
        held: findings.iter().map(|f| f.passed).collect(),
    });
    it.verified = findings.iter().map(Finding::line).collect();
    // The implement stage's record carries them too, for jq.
    let verified = it.verified.clone();
    annotate_implement_record(&guard.cx.ws.state_dir, |kern| kern.must = verified)?;
    if failed.is_empty() {
        return Ok(None);
    }
    let note = format!(
        "kern's check of the must-haves failed: {}",
        failed
            .iter()
            .map(|f| format!("`{}` — {}", f.what, first_lines(&f.seen, 5)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let attempts = guard.attempts(it)?;
    match decide::after_check(
        CheckResult::Failed(note),
        &attempts,
        guard.cx.settings.max_attempts,
    ) {
        Next::End(decision) => super::end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(()) => Ok(None),
    }
}

/// The first `n` lines of `text`, joined with ` / `.
fn first_lines(text: &str, n: usize) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect::<Vec<_>>()
        .join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_grep_must_haves_are_judged_on_the_tree() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(top.path().join("src")).unwrap();
        std::fs::write(top.path().join("src/lib.rs"), "// x\npub fn parse() {}\n").unwrap();
        let cases: &[(&str, bool, &str)] = &[
            ("file src/lib.rs", true, "the file exists"),
            ("file !src/lib.rs", false, "the file exists"),
            ("file src/gone.rs", false, "no such file"),
            (
                "grep src/lib.rs pub fn parse",
                true,
                "`src/lib.rs:2` holds `pub fn parse`",
            ),
            (
                "grep! src/lib.rs unimplemented",
                true,
                "`src/lib.rs` holds no match",
            ),
            ("grep src/gone.rs x", false, "no such file `src/gone.rs`"),
            (
                "grep \"^pub fn\" src/lib.rs",
                true,
                "read in grep's order, `src/lib.rs:2` holds `pub fn`",
            ),
            (
                "grep ^nothing$ src/gone.rs",
                false,
                "no such file `^nothing$`",
            ),
        ];
        for (line, passed, seen) in cases {
            let must = crate::spec::parse_must(line).remove(0).unwrap();
            assert_eq!(
                judge_file(top.path(), &must),
                (*passed, seen.to_string()),
                "{line}"
            );
        }
        assert_eq!(
            held_at_start(
                top.path(),
                "file src/lib.rs\nrun true\ngrep src/lib.rs nothing"
            ),
            vec![
                ("file src/lib.rs".to_string(), Some(true)),
                ("run true".to_string(), None),
                ("grep src/lib.rs nothing".to_string(), Some(false)),
            ]
        );
    }

    #[test]
    fn only_existing_test_files_count_as_weakened() {
        let changed: Vec<String> = ["tests/old.rs", "tests/new.rs", "src/lib.rs"]
            .iter()
            .map(ToString::to_string)
            .collect();
        let weakened = weakened_tests(&changed, &|p| p != "tests/new.rs");
        assert_eq!(weakened, vec!["tests/old.rs"]);
    }
}
