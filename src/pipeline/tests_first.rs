//! Red, then green (DESIGN.md section 16): a task tested first (`> **Tests:** first
//! <command>`, or `--tests-first` with the task's check as the command) gets a tests step
//! before implement. Its tests must fail on the base commit (red), are then held read-only, and
//! the same command must pass after implement (green). The review reads both outputs.
//!
//! Decisions a reader must know:
//! - The tests step writes only tests: what it changed that is not a test file
//!   (`spec::is_test_path`), and a test it deleted, is set aside under `refs/kern/saved/<task>/tests-<n>` before the
//!   red check, which so runs on the base commit plus only the test files (and the person's
//!   own `--allow-dirty` files, as every check does), in the work tree itself.
//! - Tests that pass there prove nothing: a failed attempt that says so; the next attempt
//!   writes its tests again. Once red, the tests are saved under `refs/kern/tests/<task>/<n>`
//!   and recorded in the task's start record (`task.json`) before implement starts: no later
//!   attempt and no run resumed after a crash writes them again or runs the red check again,
//!   so the red check never sees a tree that holds implement's work. A run killed before that
//!   record runs the red check again on the tests step's files (its stage record says the step
//!   is done), never the tests step itself.
//! - Held: after implement, a held test file changed or gone fails the attempt, and kern puts
//!   it back from the saved commit; every test file the base commit holds is read-only too
//!   (`verify`, as under `Tests: read-only`), the held ones aside.
//! - Green: after the check gate, the same command must pass; when it is the check itself, the
//!   check's pass is the green (no second run).
//! - When the attempt due is the decomposition request and no red was seen, there is no tests
//!   step: implement gets the request; a task not split then has no red, fails green, and is
//!   blocked (`decide::failed_attempt`).
//!
//! How a task is tested first is the task's (`spec::Task::tests_first_command`); what the tests
//! step, implement and the review read of it is `stage::inputs`'.

use std::path::PathBuf;

use super::check;
use super::decide::{self, CheckResult, Next};
use super::end;
use super::guard::SpecGuard;
use super::{Cx, TaskRun};
use crate::error::Result;
use crate::event::{IterationEnd, RunEvent};
use crate::settings::Settings;
use crate::spec::{Task, TestsFirst};
use crate::stage::{TestsReport, TestsStatus};
use crate::state::journal::{self, Red};
use crate::state::lock::Phase;
use crate::state::lock::RunLock;

/// Lines of the command's output kept for the record, the review and the next prompt.
const OUTPUT_LINES: usize = 20;

/// The tests step finished (`Tests: first`): SUCCESS goes on with the report (kern then sorts
/// and runs the tests); FAILED (or no usable report) is a failed attempt.
fn after_tests(
    outcome: Result<TestsReport, String>,
    attempts: &decide::Attempts,
    max_attempts: u32,
) -> Next<TestsReport> {
    match outcome {
        Ok(report) if report.status == TestsStatus::Success => Next::Go(report),
        Ok(report) => {
            let note = report
                .attempt_note
                .filter(|n| !n.trim().is_empty())
                .unwrap_or(report.summary);
            Next::End(decide::failed_attempt(
                attempts,
                &format!("the tests step wrote no test: {note}"),
                max_attempts,
            ))
        }
        Err(note) => Next::End(decide::failed_attempt(attempts, &note, max_attempts)),
    }
}

/// What the tests step left, sorted: the test files kern holds (the changed ones, and those
/// the report names, that are test files and exist) and the changed paths that are not tests,
/// or tests it deleted (set aside). `changed` is what differs from the base commit.
pub(crate) fn sort_changes(
    changed: &[String],
    reported: &[String],
    exists: &dyn Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let mut held: Vec<String> = Vec::new();
    let mut outside: Vec<String> = Vec::new();
    for path in changed {
        if crate::spec::is_test_path(path) && exists(path) {
            if !held.contains(path) {
                held.push(path.clone());
            }
        } else {
            // Not a test, or a test the step deleted: neither is the step's to change.
            outside.push(path.clone());
        }
    }
    for path in reported {
        let path = path.trim().trim_start_matches("./").to_string();
        if crate::spec::is_test_path(&path) && exists(&path) && !held.contains(&path) {
            held.push(path);
        }
    }
    held.sort();
    (held, outside)
}

/// The Attempt note of tests that passed on the base commit.
pub(crate) fn already_passes(command: &str, tests: &[String]) -> String {
    format!(
        "the task's tests already pass on the base commit: `{command}` exited 0 with {} — a test that passes before the change proves nothing; write one that fails until the task is done",
        tests.join(", ")
    )
}

/// The Attempt note of a tests step that left no test file.
pub(crate) const NO_TESTS: &str = "the tests step wrote or named no test file (a file in a tests, test, __tests__ or spec folder, or named as test runners find them) — the task's tests come before its code";

/// The Attempt note of a task tested first whose implement ran without red tests (the tests
/// step was skipped for the decomposition request).
pub(crate) const NEVER_RED: &str = "the task is tested first and no test of it was seen failing on the base commit (the decomposition request came before its tests step succeeded) — it cannot be done without them";

/// The Attempt note of held tests that implement changed (`gone`: those it deleted).
pub(crate) fn tests_changed(changed: &[String], gone: &[String]) -> String {
    let how = match (gone.is_empty(), gone.len() == changed.len()) {
        (true, _) => "changed",
        (false, true) => "deleted",
        (false, false) => "changed or deleted",
    };
    format!(
        "the task's tests were {how} by implement: {} (kern held them read-only after they failed on the base commit; put back as the tests step wrote them)",
        changed.join(", ")
    )
}

/// The last [`OUTPUT_LINES`] lines of `text`.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(OUTPUT_LINES)..].join("\n")
}

/// The text of the log at `path` (empty when it cannot be read: it only shows output).
fn read_lossy(path: &std::path::Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// What a red or green run of the command printed: the note's output part, else the note.
fn printed(note: &str) -> String {
    note.split_once("last output:\n")
        .map_or(note, |(_, output)| output)
        .to_string()
}

/// `kern status`'s view of a task tested first (`next.tests_first`): its command as of its
/// start (else as the file and the settings say now; `null` when it has none), and its tests
/// once seen red. `None` when it is not tested first.
pub(crate) fn status(
    task: &Task,
    identity: &crate::spec::TaskIdentity,
    start: Option<&crate::state::journal::TaskStart>,
    settings: &Settings,
) -> Option<serde_json::Value> {
    let command = match start {
        Some(start) => Some(start.tests_first.clone()?),
        None => match task.tests_first_command(settings.tests_first, settings.check.as_deref()) {
            TestsFirst::No => return None,
            how => how.command(),
        },
    };
    let red = start.and_then(|s| s.red_of(identity)).map(
        |r| serde_json::json!({"tests": r.tests, "saved": r.saved, "green": r.green.is_some()}),
    );
    Some(serde_json::json!({"command": command, "red": red}))
}

/// The line `kern status` prints of [`status`].
pub(crate) fn status_line(tested: &serde_json::Value) -> String {
    let Some(command) = tested["command"].as_str() else {
        return "tests:     first, with no command — write `> **Tests:** first <command>`, add a `> **Check:** <command>` note, or pass --check\n".to_string();
    };
    let how = match tested["red"]["tests"].as_array() {
        Some(tests) => format!(
            "red seen on the base commit with {}, held read-only",
            tests
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "a tests step writes the task's tests; they must fail on the base commit, are then held read-only, and must pass after implement".to_string(),
    };
    format!("tests:     first `{command}` — {how}\n")
}

/// True when the task's next attempt starts with the tests step: it is tested first, its tests
/// were not seen red yet, and the attempt is not the decomposition request.
pub(crate) fn step_due(
    task: &Task,
    start: Option<&crate::state::journal::TaskStart>,
    identity: &crate::spec::TaskIdentity,
    settings: &Settings,
) -> bool {
    let tested_first = match start {
        Some(start) => start.tests_first.is_some(),
        None => {
            task.tests_first_command(settings.tests_first, settings.check.as_deref())
                != TestsFirst::No
        }
    };
    tested_first
        && start.and_then(|s| s.red_of(identity)).is_none()
        && !decide::decomposition_due(&decide::Attempts::of(task), settings.max_attempts)
}

/// The red check of `command` after the tests step that ended with `outcome` (see the module
/// docs; the loop runs the step itself, `Run::tests_step`); `Some` when the iteration ended.
pub(super) async fn red_check(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    command: String,
    outcome: std::result::Result<TestsReport, String>,
) -> Result<Option<IterationEnd>> {
    let attempts = guard.attempts(it)?;
    let report = match after_tests(outcome, &attempts, guard.cx.settings.max_attempts) {
        Next::End(decision) => return end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(report) => report,
    };
    let top = guard.cx.ws.repo.top().to_path_buf();
    let changed = super::verify::changed_since_start(guard.cx.ws, left_out, it)?;
    let (held, outside) = sort_changes(&changed, &report.tests, &|p| top.join(p).is_file());
    let slug = crate::text::slug(&it.title);
    if !outside.is_empty() {
        let paths: Vec<PathBuf> = outside.iter().map(PathBuf::from).collect();
        let saved = crate::pipeline::audit::put_aside_at_next(
            guard.cx.ws,
            guard.spec,
            &format!("refs/kern/saved/{slug}/tests-"),
            &paths,
            &format!(
                "kern: what the tests step of {} changed that is not a test\n",
                crate::spec::Quoted(&it.title)
            ),
        )?;
        guard.teller.emit(RunEvent::Violation {
            task: Some(it.title.clone()),
            stage: crate::stage::Stage::Tests,
            violations: vec![format!(
                "the tests step changed files that are not tests (or deleted tests): {} (set aside at `{saved}` before the red check)",
                outside.join(", ")
            )],
            reverted: outside,
            saved: vec![saved],
        });
    }
    if held.is_empty() {
        return failed(guard, lock, left_out, it, NO_TESTS);
    }
    let paths: Vec<PathBuf> = held.iter().map(PathBuf::from).collect();
    let saved =
        crate::pipeline::audit::next_ref(&guard.cx.ws.repo, &format!("refs/kern/tests/{slug}/"))?;
    let commit = guard.cx.ws.repo.save_paths(
        &saved,
        &paths,
        &format!(
            "kern: the tests of {}, as the tests step wrote them\n",
            crate::spec::Quoted(&it.title)
        ),
    )?;
    lock.set_phase(Phase::Check)?;
    let result = check::run_for_task(
        guard,
        it,
        (&command, &top),
        &guard.cx.ws.state_dir.red_log(),
        "tests",
    )
    .await?;
    let red = matches!(result, CheckResult::Failed(_));
    let output = match result {
        CheckResult::Passed => tail(&read_lossy(&guard.cx.ws.state_dir.red_log())),
        CheckResult::Failed(note) => printed(&note),
    };
    guard.teller.emit(RunEvent::TestsRed {
        task: it.title.clone(),
        command: command.clone(),
        tests: held.clone(),
        failed: red,
        output: output.clone(),
    });
    if !red {
        return failed(guard, lock, left_out, it, &already_passes(&command, &held));
    }
    it.start.red = Some(Red {
        task: it.identity.clone(),
        tests: held,
        saved,
        commit: commit.to_string(),
        output,
        green: None,
    });
    journal::save(&guard.cx.ws.state_dir.task_start(), &it.start)?;
    Ok(None)
}

/// Right after implement: the task's held tests as the tests step wrote them, else they
/// are put back and the attempt fails; `Some` when the iteration ended.
pub(super) fn tests_held(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    let (Some(command), Some(red)) = (
        it.start.tests_first.clone(),
        it.start.red_of(&it.identity).cloned(),
    ) else {
        return Ok(None);
    };
    let Ok(commit) = crate::oid::parse(&red.commit) else {
        return Ok(None);
    };
    let paths: Vec<PathBuf> = red.tests.iter().map(PathBuf::from).collect();
    let differ = guard.cx.ws.repo.differ_from(commit, &paths)?;
    if differ.is_empty() {
        return Ok(None);
    }
    let top = guard.cx.ws.repo.top();
    let changed: Vec<String> = differ.iter().map(|p| p.display().to_string()).collect();
    let gone: Vec<String> = changed
        .iter()
        .filter(|p| !top.join(p).exists())
        .cloned()
        .collect();
    guard.cx.ws.repo.put_back_from(commit, &differ)?;
    guard.teller.emit(RunEvent::TestsGreen {
        task: it.title.clone(),
        command: command.clone(),
        tests: red.tests.clone(),
        changed: changed.clone(),
        passed: false,
        output: None,
    });
    record_tests_first(guard.cx, &command, &red, false)?;
    failed(guard, lock, left_out, it, &tests_changed(&changed, &gone))
}

/// After the check gate: the task's tests must pass now; `Some` when the iteration ended.
pub(super) async fn green_gate(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    let Some(command) = it.start.tests_first.clone() else {
        return Ok(None);
    };
    let Some(mut red) = it.start.red_of(&it.identity).cloned() else {
        return failed(guard, lock, left_out, it, NEVER_RED);
    };
    let check = it
        .start
        .check
        .clone()
        .or_else(|| guard.cx.settings.check.clone());
    // The check gate just ran this very command, and it passed.
    let result = if check.as_deref() == Some(command.as_str()) {
        CheckResult::Passed
    } else {
        lock.set_phase(Phase::Check)?;
        check::run_for_task(
            guard,
            it,
            (&command, guard.cx.ws.repo.top()),
            &guard.cx.ws.state_dir.green_log(),
            "tests",
        )
        .await?
    };
    let log = if check.as_deref() == Some(command.as_str()) {
        guard.cx.ws.state_dir.check_log()
    } else {
        guard.cx.ws.state_dir.green_log()
    };
    let output = match &result {
        CheckResult::Passed => tail(&read_lossy(&log)),
        CheckResult::Failed(note) => printed(note),
    };
    let passed = result == CheckResult::Passed;
    guard.teller.emit(RunEvent::TestsGreen {
        task: it.title.clone(),
        command: command.clone(),
        tests: red.tests.clone(),
        changed: Vec::new(),
        passed,
        output: Some(output.clone()),
    });
    red.green = Some(output);
    record_tests_first(guard.cx, &command, &red, passed)?;
    match result {
        CheckResult::Passed => {
            it.start.red = Some(red);
            journal::save(&guard.cx.ws.state_dir.task_start(), &it.start)?;
            Ok(None)
        }
        CheckResult::Failed(note) => failed(guard, lock, left_out, it, &note),
    }
}

/// A failed attempt with `note`; `Some` when the iteration ended.
fn failed(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
    note: &str,
) -> Result<Option<IterationEnd>> {
    let attempts = guard.attempts(it)?;
    match decide::after_check(
        CheckResult::Failed(note.to_string()),
        &attempts,
        guard.cx.settings.max_attempts,
    ) {
        Next::End(decision) => end::end_task(guard, lock, left_out, it, decision).map(Some),
        Next::Go(()) => Ok(None),
    }
}

/// Writes what the task's tests did into the implement stage's record (`stage2.json`,
/// `kern.tests_first`), for jq.
fn record_tests_first(cx: Cx, command: &str, red: &Red, green: bool) -> Result<()> {
    super::verify::annotate_implement_record(&cx.ws.state_dir, |kern| {
        kern.tests_first = Some(crate::stage::record::TestsFirstRecord {
            command: command.to_string(),
            tests: red.tests.clone(),
            saved: red.saved.clone(),
            red: red.output.clone(),
            green: red.green.clone().filter(|_| green),
            passed: green,
        });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_step_leaves_test_files_to_hold_and_the_rest_to_set_aside() {
        let strings = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        let exists = |p: &str| p != "tests/gone_test.rs";
        type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case] = &[
            // changed, reported, held, set aside
            (&["tests/parse_test.rs"], &[], &["tests/parse_test.rs"], &[]),
            (
                &["src/parser.rs", "tests/parse_test.rs", "Cargo.toml"],
                &["tests/parse_test.rs"],
                &["tests/parse_test.rs"],
                &["src/parser.rs", "Cargo.toml"],
            ),
            // An existing test named, not changed; a name that is no test file; a deleted test
            // (put back).
            (
                &["tests/gone_test.rs"],
                &[
                    "./tests/lexer_test.rs",
                    "src/parser.rs",
                    "tests/gone_test.rs",
                ],
                &["tests/lexer_test.rs"],
                &["tests/gone_test.rs"],
            ),
            (
                &["src/parser.rs"],
                &["src/parser.rs"],
                &[],
                &["src/parser.rs"],
            ),
            (&[], &[], &[], &[]),
        ];
        for (changed, reported, held, outside) in cases {
            assert_eq!(
                sort_changes(&strings(changed), &strings(reported), &exists),
                (strings(held), strings(outside)),
                "{changed:?} {reported:?}"
            );
        }
    }

    #[test]
    fn notes_say_what_failed_and_the_fix() {
        let tests = vec!["tests/a.sh".to_string(), "tests/b.sh".to_string()];
        assert_eq!(
            already_passes("sh t.sh", &tests),
            "the task's tests already pass on the base commit: `sh t.sh` exited 0 with tests/a.sh, tests/b.sh — a test that passes before the change proves nothing; write one that fails until the task is done"
        );
        assert!(tests_changed(&tests, &[]).starts_with(
            "the task's tests were changed by implement: tests/a.sh, tests/b.sh (kern held"
        ));
        assert!(tests_changed(&tests, &tests).starts_with("the task's tests were deleted by"));
        assert!(
            tests_changed(&tests, &tests[..1])
                .starts_with("the task's tests were changed or deleted by")
        );
        assert_eq!(
            printed("check `x` failed (exit 1); last output:\nFAIL\nmore"),
            "FAIL\nmore"
        );
        assert_eq!(printed("check `x` timed out"), "check `x` timed out");
        let long: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        assert!(tail(&long).starts_with("line 11\n") && tail(&long).ends_with("line 30"));
    }
}
