//! Red, then green (issue 39): with `> **Tests:** first <command>` (or `--tests-first`, the
//! task's check as the command) a tests step writes or names the task's tests before
//! implement; kern runs the command on the base commit plus only those test files and it must
//! fail, then holds them read-only, and after implement the same command must pass. The review
//! reads both outputs; `stage2.json`, `run.jsonl`, `kern report` and `kern -n` show it.

use serde_json::{Value, json};

use crate::support::project::Project;

/// The task's test: a shell script that fails until `src/parser.rs` has `pub fn parse`.
const TEST: &str = "grep -q '^pub fn parse' src/parser.rs || { echo 'FAIL: no pub fn parse in src/parser.rs'; exit 1; }\necho 'ok: parse'\n";

const TASK: &str = "- [ ] Add the parser\n  > **Tests:** first sh tests/parser_test.sh\n";

/// A tests step that writes the task's test, an implement that makes it pass, a review.
fn honest() -> Value {
    json!({"default": {
        "tests": {"write": {"tests/parser_test.sh": TEST},
                  "result": {"status": "SUCCESS", "summary": "wrote the parser's test", "tests": ["tests/parser_test.sh"], "attempt_note": null}},
        "implement": {"write": {"src/parser.rs": "pub fn parse() {}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }})
}

fn record(p: &Project, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p.state_dir().join(name)).unwrap()).unwrap()
}

#[test]
fn a_tests_first_task_is_proved_red_on_the_base_commit_then_green_after_implement() {
    let p = Project::new(TASK);
    p.scenario(&honest());
    let err = p.run(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("tests first: ✓ red — `sh tests/parser_test.sh` fails on the base commit plus tests/parser_test.sh"),
        "{err}"
    );
    assert!(
        err.contains("tests first: ✓ green — `sh tests/parser_test.sh` passes after implement"),
        "{err}"
    );
    // The tests step ran before implement, in a folder the repository did not have.
    let tests = p.prompts("tests");
    assert_eq!(tests.len(), 1);
    assert!(tests[0].contains("sh tests/parser_test.sh"), "{}", tests[0]);
    assert_eq!(p.prompts("implement").len(), 1);
    let implement = p.prompts("implement").remove(0);
    assert!(
        implement.contains("tests/parser_test.sh"),
        "implement is told which tests it must make pass: {implement}"
    );
    // Committed: the tests as written and the work.
    assert_eq!(p.log()[0], "Add the parser");
    assert_eq!(p.git(&["show", "HEAD:tests/parser_test.sh"]), TEST);
    assert_eq!(
        p.git(&["show", "HEAD:src/parser.rs"]),
        "pub fn parse() {}\n"
    );
    // The review read the red and the green output.
    let review = p.prompts("commit").remove(0);
    assert!(
        review.contains("FAIL: no pub fn parse in src/parser.rs"),
        "the red output: {review}"
    );
    assert!(review.contains("ok: parse"), "the green output: {review}");
    // run.jsonl: red then green.
    let red = p.run_events("tests_red");
    assert_eq!(red.len(), 1, "{red:?}");
    assert_eq!(red[0]["failed"], true);
    assert_eq!(red[0]["tests"], json!(["tests/parser_test.sh"]));
    let green = p.run_events("tests_green");
    assert_eq!(green.len(), 1, "{green:?}");
    assert_eq!(green[0]["passed"], true);
    // stage2.json: jq .kern.tests_first
    let stage2 = record(&p, "last/stage2.json");
    let tf = &stage2["kern"]["tests_first"];
    assert_eq!(tf["command"], "sh tests/parser_test.sh", "{stage2}");
    assert_eq!(tf["tests"], json!(["tests/parser_test.sh"]));
    assert!(
        tf["red"]
            .as_str()
            .unwrap()
            .contains("FAIL: no pub fn parse"),
        "{tf}"
    );
    assert!(tf["green"].as_str().unwrap().contains("ok: parse"), "{tf}");
    // The morning report: red → green.
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains(
            "tests first: red ✓ → green ✓ (`sh tests/parser_test.sh`: tests/parser_test.sh)"
        ),
        "{report}"
    );
}

#[test]
fn tests_that_already_pass_on_the_base_commit_prove_nothing_and_fail_the_attempt() {
    let p = Project::new(TASK);
    let mut s = honest();
    s["default"]["tests"] = json!([
        {"write": {"tests/parser_test.sh": "echo 'ok: nothing to check'\n"},
         "result": {"status": "SUCCESS", "summary": "wrote a test", "tests": ["tests/parser_test.sh"], "attempt_note": null}},
        s["default"]["tests"].clone()
    ]);
    p.scenario(&s);
    let err = p.run(&["1", "0"]).expect(4).stderr;
    assert!(
        err.contains("tests first: ✗ red — `sh tests/parser_test.sh` already passes on the base commit plus tests/parser_test.sh"),
        "{err}"
    );
    assert!(
        p.prompts("implement").is_empty(),
        "no implement was paid for"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** the task's tests already pass on the base commit: `sh tests/parser_test.sh` exited 0 with tests/parser_test.sh — a test that passes before the change proves nothing; write one that fails until the task is done"),
        "{spec}"
    );
    assert_eq!(p.run_events("tests_red")[0]["failed"], false);
    // The next attempt writes a test that fails first, and the task is done.
    p.run(&["1", "0"]).expect(0);
    assert_eq!(p.log()[0], "Add the parser");
    assert_eq!(p.git(&["show", "HEAD:tests/parser_test.sh"]), TEST);
}

#[test]
fn implement_that_edits_the_red_test_until_it_is_green_fails_and_the_test_is_put_back() {
    let p = Project::new(TASK);
    let mut s = honest();
    s["default"]["implement"] = json!([
        {"write": {"tests/parser_test.sh": "echo 'ok: parse'\n"}},
        {"delete": ["tests/parser_test.sh"], "write": {"src/parser.rs": "fn other() {}\n"}},
        {"write": {"src/parser.rs": "pub fn parse() {}\n"}}
    ]);
    p.scenario(&s);
    let err = p.run(&["3", "0"]).expect(0).stderr;
    let spec = p.git(&["show", "HEAD:SPEC.md"]);
    assert!(
        spec.contains("> **Attempt 1:** the task's tests were changed by implement: tests/parser_test.sh (kern held them read-only after they failed on the base commit; put back as the tests step wrote them)"),
        "{spec}\n{err}"
    );
    assert!(
        spec.contains("> **Attempt 2:** the task's tests were deleted by implement: tests/parser_test.sh (kern held them"),
        "{spec}"
    );
    assert_eq!(p.prompts("tests").len(), 1, "the tests are written once");
    assert_eq!(p.prompts("implement").len(), 3);
    assert_eq!(p.log()[0], "Add the parser");
    assert_eq!(
        p.git(&["show", "HEAD:tests/parser_test.sh"]),
        TEST,
        "the test as the tests step wrote it"
    );
}

#[test]
fn implement_that_weakens_an_existing_test_fails_under_tests_first() {
    let p = Project::new(TASK);
    p.write("tests/lexer_test.sh", "grep -q lexer README.md || exit 1\n");
    p.commit_all("an existing test");
    let mut s = honest();
    s["default"]["implement"] = json!([
        {"write": {"src/parser.rs": "pub fn parse() {}\n", "tests/lexer_test.sh": "exit 0\n"}},
        {"write": {"src/parser.rs": "pub fn parse() {}\n", "tests/lexer_test.sh": "grep -q lexer README.md || exit 1\n"}}
    ]);
    p.scenario(&s);
    p.run(&["2", "0"]).expect(0);
    let spec = p.git(&["show", "HEAD:SPEC.md"]);
    assert!(
        spec.contains("> **Attempt 1:** kern's check of the must-haves failed: `tests read-only` — existing test files changed or deleted: tests/lexer_test.sh"),
        "{spec}"
    );
}

#[test]
fn the_tests_step_writes_only_tests_the_rest_is_set_aside_before_the_red_check() {
    let p = Project::new(TASK);
    let mut s = honest();
    // The tests step writes the implementation too, so its test would pass at once.
    s["default"]["tests"]["write"]["src/parser.rs"] = json!("pub fn parse() {}\n");
    p.scenario(&s);
    let err = p.run(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("tests first: ✓ red"),
        "the red check ran without the implementation: {err}"
    );
    let saved = p.refs("refs/kern/saved/add-the-parser/");
    assert_eq!(saved.len(), 1, "{saved:?}\n{err}");
    assert_eq!(
        p.git(&["show", &format!("{}:src/parser.rs", saved[0])]),
        "pub fn parse() {}\n"
    );
    assert!(
        err.contains("violation: the tests step changed files that are not tests (or deleted tests): src/parser.rs (set aside at `refs/kern/saved/add-the-parser/tests-1` before the red check)"),
        "{err}"
    );
    assert_eq!(p.log()[0], "Add the parser");
}

#[test]
fn a_tests_step_that_writes_no_test_fails_the_attempt() {
    let p = Project::new(TASK);
    let mut s = honest();
    s["default"]["tests"] = json!({"result": {"status": "SUCCESS", "summary": "nothing", "tests": [], "attempt_note": null}});
    p.scenario(&s);
    p.run(&["1", "0", "--max-attempts", "1"]).expect(4);
    assert!(
        p.read("SPEC.md")
            .contains("> **Attempt 1:** the tests step wrote or named no test file"),
        "{}",
        p.read("SPEC.md")
    );
    assert!(p.prompts("implement").is_empty());
}

#[test]
fn tests_first_as_a_flag_uses_the_tasks_check_and_the_dry_run_shows_the_plan() {
    let p = Project::new("- [ ] Add the parser\n  > **Check:** sh tests/parser_test.sh\n");
    let dry = p.run(&["-n", "--tests-first"]).expect(0).stdout;
    assert!(
        dry.contains("tests:     first `sh tests/parser_test.sh` — a tests step writes the task's tests; they must fail on the base commit, are then held read-only, and must pass after implement"),
        "{dry}"
    );
    let stages: Vec<&str> = dry.lines().filter(|l| l.starts_with("stage ")).collect();
    assert_eq!(
        stages,
        [
            "stage 1 research:",
            "stage 2 tests:",
            "stage 2 implement:",
            "stage 3 commit:"
        ],
        "{dry}"
    );
    p.scenario(&honest());
    p.run(&["1", "0", "--tests-first"]).expect(0);
    assert_eq!(p.run_events("tests_red").len(), 1);
    assert_eq!(p.log()[0], "Add the parser");
}

#[test]
fn tests_first_without_a_command_stops_before_any_agent_with_the_fix() {
    let p = Project::new("- [ ] Add the parser\n  > **Tests:** first\n");
    let err = p.run(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("task `Add the parser` (SPEC.md:1) is to be tested first but has no command — write `> **Tests:** first <command>`, add a `> **Check:** <command>` note, or pass --check"),
        "{err}"
    );
    assert!(p.prompts("research").is_empty());
    let err = p.run(&["1", "0", "--tests-first"]).expect(2).stderr;
    assert!(
        err.contains("is to be tested first but has no command"),
        "{err}"
    );
}

/// A test that counts its runs in `runs` and, while `hold` exists, writes its pid to `pid` and
/// waits: the red check can be caught running.
fn holding_test(outside: &std::path::Path) -> String {
    let o = outside.display();
    format!(
        "echo run >> '{o}/runs'\nif [ -f '{o}/hold' ]; then echo $$ > '{o}/pid'; while [ -f '{o}/hold' ]; do sleep 0.02; done; fi\n{TEST}"
    )
}

#[test]
fn kill_9_during_the_red_check_keeps_the_tests_and_checks_them_again_before_implement() {
    let p = Project::new(TASK);
    let test = holding_test(p.outside.path());
    let mut s = honest();
    s["default"]["tests"]["write"]["tests/parser_test.sh"] = json!(test);
    p.scenario(&s);
    let o = p.outside.path();
    std::fs::write(o.join("hold"), "").unwrap();
    // Unfenced: the test reads the red check's pid as the machine numbers it (inside the
    // fence's own pid namespace, `$$` is another number).
    let mut child = p.run(&["1", "0", "--sandbox=off"]).spawn();
    let pid = crate::support::read_pid(&o.join("pid"));
    crate::support::kill(child.id() as i32);
    child.wait().unwrap();
    std::fs::remove_file(o.join("hold")).unwrap();
    assert!(
        crate::support::wait_dead(pid),
        "the orphaned red check ends"
    );
    assert_eq!(
        p.read("tests/parser_test.sh"),
        test,
        "the tests are not lost"
    );
    assert!(!p.path().join("src/parser.rs").exists());

    p.run(&["1", "0"]).expect(0);
    assert_eq!(
        p.prompts("tests").len(),
        1,
        "the tests step is not paid twice"
    );
    assert_eq!(p.prompts("implement").len(), 1);
    // Red ran again before implement (killed, then again), then green: three runs.
    assert_eq!(
        std::fs::read_to_string(o.join("runs"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    let red = p.run_events("tests_red");
    assert_eq!(red.last().unwrap()["failed"], true, "{red:?}");
    assert_eq!(p.log()[0], "Add the parser");
    assert_eq!(p.git(&["show", "HEAD:tests/parser_test.sh"]), test);
}

#[test]
fn kill_9_during_implement_resumes_implement_without_running_red_again() {
    let p = Project::new(TASK);
    let test = holding_test(p.outside.path());
    let go = p.outside.path().join("go");
    let mut s = honest();
    s["default"]["tests"]["write"]["tests/parser_test.sh"] = json!(test);
    let implementing = p.outside.path().join("implementing");
    s["default"]["implement"] = json!([
        {"write": {"src/parser.rs": "pub fn parse() {}\n"},
         "shell": [format!(
             "touch '{}'; while [ ! -f '{}' ]; do sleep 0.01; done",
             implementing.display(),
             go.display()
         )]},
        {"write": {"src/parser.rs": "pub fn parse() {}\n"}}
    ]);
    p.scenario(&s);
    let mut child = p.run(&["1", "0"]).spawn();
    crate::support::wait_for_file(&implementing);
    crate::support::kill(child.id() as i32);
    child.wait().unwrap();
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("tests:     first `sh tests/parser_test.sh` — red seen on the base commit with tests/parser_test.sh, held read-only"),
        "{status}"
    );
    let json: Value = serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(
        json["next"]["tests_first"]["red"]["tests"],
        json!(["tests/parser_test.sh"])
    );
    // The killed run's agent may outlive it: it ends when `go` is there, whoever stops it.
    std::fs::write(&go, "").unwrap();
    p.run(&["1", "0"]).expect(0);
    assert_eq!(p.prompts("tests").len(), 1);
    assert_eq!(
        p.run_events("tests_red").len(),
        1,
        "red once, before the crash"
    );
    // Red once, green once.
    assert_eq!(
        std::fs::read_to_string(p.outside.path().join("runs"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    assert_eq!(p.log()[0], "Add the parser");
}

#[test]
fn parallel_tasks_tested_first_each_prove_red_then_green_in_their_worktrees() {
    let p = Project::new(
        "- [ ] Add the parser\n  > **Tests:** first sh tests/parser_test.sh\n- [ ] Add the lexer\n  > **Tests:** first sh tests/lexer_test.sh\n",
    );
    p.scenario(&json!({
        "tasks": [
            {"match": "lexer",
             "tests": {"write": {"tests/lexer_test.sh": "grep -q '^pub fn lex' src/lexer.rs || { echo 'FAIL: no lex'; exit 1; }\n"}},
             "implement": {"write": {"src/lexer.rs": "pub fn lex() {}\n"}}}
        ],
        "default": {
            "tests": {"write": {"tests/parser_test.sh": TEST}},
            "implement": {"write": {"src/parser.rs": "pub fn parse() {}\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "{task}"}}
        }
    }));
    p.run(&["2", "0", "-j", "2"]).expect(0);
    let mut log = p.log();
    log.truncate(2);
    log.sort();
    assert_eq!(log, ["Add the lexer", "Add the parser"]);
    let red = p.run_events("tests_red");
    assert_eq!(red.len(), 2, "{red:?}");
    assert!(red.iter().all(|e| e["failed"] == true), "{red:?}");
    let green = p.run_events("tests_green");
    assert_eq!(green.len(), 2, "{green:?}");
    assert!(green.iter().all(|e| e["passed"] == true), "{green:?}");
    for f in [
        "tests/lexer_test.sh",
        "tests/parser_test.sh",
        "src/lexer.rs",
        "src/parser.rs",
    ] {
        assert!(p.head_files().contains(&f.to_string()), "{f}");
    }
}

#[test]
fn the_red_tests_are_in_the_tasks_scope_wherever_they_are() {
    let p = Project::new(
        "- [ ] Add the parser\n  > **Tests:** first sh tests/grammar_test.sh\n  > **Scope:** src/parser.rs\n",
    );
    let mut s = honest();
    s["default"]["tests"] = json!({"write": {"tests/grammar_test.sh": TEST}});
    p.scenario(&s);
    p.run(&["1", "0"]).expect(0);
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.contains("tests/grammar_test.sh"), "{files}");
    assert!(p.refs("refs/kern/saved/").is_empty());
}

#[test]
fn a_task_split_after_its_tests_were_red_leaves_them_at_their_ref() {
    let p = Project::new(TASK);
    let mut s = honest();
    s["default"]["implement"] = json!({"result": {"status": "DECOMPOSED", "summary": "too big",
        "subtasks": ["Add the parser's types", "Add parse()"]}});
    p.scenario(&s);
    p.run(&["1", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("  - [ ] Add the parser's types\n"), "{spec}");
    assert!(
        !p.path().join("tests/parser_test.sh").exists(),
        "the first subtask starts without the whole task's tests"
    );
    let saved = p.refs("refs/kern/tests/add-the-parser/");
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        p.git(&["show", &format!("{}:tests/parser_test.sh", saved[0])]),
        TEST
    );
    let set_aside = p.run_events("set_aside");
    assert_eq!(set_aside.len(), 1, "{set_aside:?}");
    assert_eq!(set_aside[0]["git_ref"], saved[0]);
}

#[test]
fn the_decomposition_request_comes_without_a_tests_step_and_an_unsplit_task_is_blocked() {
    let p = Project::new(TASK);
    let mut s = honest();
    s["default"]["tests"] = json!({"write": {"tests/parser_test.sh": "echo 'ok: nothing'\n"}});
    s["default"]["implement"] = json!({"result": {"status": "FAILED", "summary": "no",
        "attempt_note": "cannot be split: the parser is one function"}});
    p.scenario(&s);
    p.run(&["2", "0", "--max-attempts", "1"]).expect(4);
    assert_eq!(
        p.prompts("tests").len(),
        1,
        "no tests step under the request"
    );
    let implement = p.prompts("implement");
    assert_eq!(implement.len(), 1);
    assert!(
        implement[0].contains("Decomposition is required"),
        "{}",
        implement[0]
    );
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Add the parser"), "{spec}");
    assert!(
        spec.contains("> **Blocked:** the decomposition request was answered: cannot be split: the parser is one function — after 1 failed attempt;"),
        "{spec}"
    );
}
