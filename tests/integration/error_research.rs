//! Error research and saturation (issue 31): after a failure that carries an error, the next
//! implement prompt gets kern's own analysis of the Attempt notes — the error classified, the
//! approaches tried (kern records each in its note), those not yet tried, continue or saturated —
//! and a saturated task goes to decomposition early, then is blocked with the list of what was
//! tried, so no paid attempt repeats an approach.

use serde_json::json;

use crate::support::project::Project;

const TASK: &str = "- [ ] Add the parser\n  > **Must:**\n  >\n  > - file src/parser.rs\n";

#[test]
fn a_saturated_task_is_blocked_early_with_the_list_of_what_was_tried() {
    let p = Project::new(TASK);
    // The agent never writes the file the must-have names, each time another way.
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"src/parse.rs": "x\n"}, "result": {"status": "SUCCESS", "summary": "Wrote src/parse.rs. Ran the tests."}},
            {"write": {"src/parsers.rs": "x\n"}, "result": {"status": "SUCCESS", "summary": "Approach: meet-literally — wrote src/parsers.rs."}},
            {"write": {"lib/parser.rs": "x\n"}, "result": {"status": "SUCCESS", "summary": "Moved it to lib/parser.rs."}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }}));
    let err = p.run(&["10", "0"]).expect(4).stderr;
    let prompts = p.prompts("implement");
    assert_eq!(
        prompts.len(),
        3,
        "blocked after 3 attempts, not 4 or 6: {err}"
    );
    assert!(p.prompts("commit").is_empty(), "no review was paid for");
    // The second attempt is told what was tried and what was not.
    assert!(
        prompts[1].contains("Error research (kern's own analysis of the Attempt notes): the last failure is a must-have that does not hold — 1 attempt with it so far.\nApproaches already tried against it (do not repeat them):\n1. Wrote src/parse.rs.\nStandard approaches not yet tried:\n- `meet-literally`"),
        "{}",
        prompts[1]
    );
    assert!(prompts[1].contains("Recommendation: continue"));
    assert!(!prompts[0].contains("Error research"), "{}", prompts[0]);
    // After the second, every standard approach failed: the third is the decomposition
    // request, though --max-attempts is 3.
    assert!(
        prompts[2].contains("Recommendation: saturated — all standard approaches exhausted"),
        "{}",
        prompts[2]
    );
    assert!(
        prompts[2].contains("Decomposition is required"),
        "{}",
        prompts[2]
    );
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Add the parser"), "{spec}");
    assert!(
        spec.contains("> **Attempt 1:** kern's check of the must-haves failed: `file src/parser.rs` — no such file\n  > Approach: Wrote src/parse.rs.\n"),
        "{spec}"
    );
    assert!(
        spec.contains("> **Blocked:** saturated: all standard approaches exhausted for a must-have that does not hold (3 attempts), decomposition included — a person must look. Tried: 1) Wrote src/parse.rs.; 2) Approach: meet-literally — wrote src/parsers.rs.; 3) Moved it to lib/parser.rs."),
        "{spec}"
    );
    assert!(err.contains("blocked"), "{err}");
}

#[test]
fn a_failure_without_an_error_gets_no_error_research() {
    let p = Project::new("- [ ] Add the parser\n");
    p.scenario(&json!({"default": {
        "implement": [
            {"result": {"status": "FAILED", "summary": "no", "attempt_note": "could not find the lexer"}},
            {"write": {"src/parser.rs": "x\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }}));
    p.run(&["2", "0"]).expect(0);
    let prompts = p.prompts("implement");
    assert_eq!(prompts.len(), 2);
    assert!(!prompts[1].contains("Error research"), "{}", prompts[1]);
    assert!(prompts[1].contains("This task has failed 1 time."));
}

#[test]
fn the_dry_run_shows_the_error_research_the_next_attempt_gets() {
    let p = Project::new(
        "- [~] Add the parser\n  > **Check:** false\n  >\n  > **Attempt 1:** check `false` failed (exit 1); last output:\n  > (no output)\n  > Approach: Wrote the parser.\n",
    );
    let dir = p.outside.path().join("prompts");
    p.run(&["-n", "--prompts", dir.to_str().unwrap()]).expect(0);
    let out = std::fs::read_to_string(dir.join("stage2.prompt.md")).unwrap();
    assert!(
        out.contains("the last failure is a failing check — 1 attempt with it so far"),
        "{out}"
    );
    assert!(out.contains("1. Wrote the parser."), "{out}");
}
