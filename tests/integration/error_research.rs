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
        spec.contains("> **Blocked:** saturated: all standard approaches exhausted for a must-have that does not hold (3 attempts), decomposition included — a person must look. Tried against must-have `file src/parser.rs` — no such file: 1) Wrote src/parse.rs.; 2) meet-literally — wrote src/parsers.rs.; 3) Moved it to lib/parser.rs."),
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

#[test]
fn a_constraint_goes_hard_then_soft_then_hard_again_across_a_night() {
    let p = Project::new(
        "- [ ] Add alpha\n- [ ] Add beta\n- [ ] Add gamma\n- [ ] Add delta\n- [ ] Add epsilon\n",
    );
    p.write("LEARNINGS.md", "# Learnings\n\nhand written\n");
    p.commit_all("learnings");
    let broken_then_fixed = |slug: &str| {
        json!([
            {"write": {"broken": "x\n"}, "result": {"status": "SUCCESS", "summary": "Wrote it the quick way."}},
            {"write": {format!("out/{slug}.txt"): "done\n"}, "delete": ["broken"],
             "result": {"status": "SUCCESS", "summary": "Removed the stray file before the check."}}
        ])
    };
    p.scenario(&json!({
        "tasks": [
            {"match": "alpha", "implement": broken_then_fixed("alpha")},
            {"match": "epsilon", "implement": broken_then_fixed("epsilon")}
        ],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}", "learnings": ["{slug} lives in out/"]}}
        }
    }));
    let err = p
        .run(&["20", "0", "--check", "test ! -e broken"])
        .expect(0)
        .stderr;
    assert_eq!(p.log().len(), 7, "five tasks committed: {err}");
    let implement = p.prompts("implement");
    let with = |title: &str| -> Vec<&String> {
        implement
            .iter()
            .filter(|t| t.contains(&format!("- [~] {title}")))
            .collect()
    };
    let hard = "- [hard] AVOID Wrote it the quick way. — MUST Removed the stray file before the check. — reason: check `test ! -e broken` failed (exit 1); last output: (no output) — source: task \"Add alpha\", the commit after ";
    // Derived from alpha's success after its failure: hard, with its source and paths.
    assert!(
        with("Add beta")[0].contains(hard),
        "{}",
        with("Add beta")[0]
    );
    assert!(with("Add beta")[0].contains("honoured: 0 of 3"));
    assert!(with("Add delta")[0].contains("honoured: 2 of 3"));
    // Three later tasks committed without its error: soft when epsilon starts.
    let soft = hard.replace("[hard]", "[soft]");
    assert!(
        with("Add epsilon")[0].contains(&soft),
        "{}",
        with("Add epsilon")[0]
    );
    assert!(with("Add epsilon")[0].contains("honoured: 3 of 3"));
    assert!(
        with("Add epsilon")[0].contains("[soft]: three later tasks were committed without breaking it — it may be reconsidered, with a reason in your summary"),
        "the prompt says what soft means"
    );
    // Epsilon broke it and failed: hard again — and no second constraint for the same error.
    let learnings = p.read("LEARNINGS.md");
    assert!(
        learnings.starts_with("# Learnings\n\nhand written\n"),
        "{learnings}"
    );
    let entries: Vec<&str> = learnings
        .lines()
        .filter(|l| l.starts_with("- [hard]") || l.starts_with("- [soft]"))
        .collect();
    assert_eq!(entries.len(), 1, "{learnings}");
    assert!(entries[0].starts_with(hard), "{learnings}");
    assert!(
        entries[0].contains("— source: task \"Add alpha\", the commit after "),
        "{learnings}"
    );
    assert!(
        entries[0].contains("— paths: `out/alpha.txt`"),
        "{learnings}"
    );
    assert!(entries[0].ends_with("— honoured: 0 of 3"), "{learnings}");
    // Every entry kern writes names its source.
    // (the commit that carries it is made on this one: beta's parent)
    let repo = git2::Repository::open(p.path()).unwrap();
    let mut walk = repo.revwalk().unwrap();
    walk.push_head().unwrap();
    let beta = walk
        .map(|oid| repo.find_commit(oid.unwrap()).unwrap())
        .find(|c| matches!(c.summary(), Ok(Some("Add add-beta"))))
        .unwrap();
    let parent = beta.parent_id(0).unwrap().to_string();
    assert!(
        learnings.contains(&format!(
            "\n- add-beta lives in out/ — source: task \"Add beta\", the commit after {}\n",
            &parent[..7]
        )),
        "{learnings}"
    );
    assert!(
        p.head_files().contains(&"LEARNINGS.md".to_string()) && p.dirty().is_empty(),
        "written in kern's commits"
    );
}

#[test]
fn a_pinned_constraint_never_moves_and_the_persons_words_stay() {
    let p = Project::new("- [ ] Add alpha\n- [ ] Add beta\n- [ ] Add gamma\n");
    let section = "## Constraints (kept by kern)\n\n- [hard, pinned] MUST keep my words — reason: check `x` failed (exit 1); last output: — honoured: 0 of 3\n- [hard] AVOID y — reason: check `y` failed (exit 1); last output: — honoured: 1 of 3\n";
    p.write("LEARNINGS.md", &format!("# Learnings\n\n{section}"));
    p.commit_all("learnings");
    p.run(&["3", "0"]).expect(0);
    let learnings = p.read("LEARNINGS.md");
    assert!(
        learnings.contains("- [hard, pinned] MUST keep my words — reason: check `x` failed (exit 1); last output: — honoured: 0 of 3\n"),
        "{learnings}"
    );
    assert!(
        learnings.contains("- [soft] AVOID y — reason: check `y` failed (exit 1); last output: — honoured: 3 of 3\n"),
        "{learnings}"
    );
}

#[test]
fn status_shows_the_next_tasks_error_research() {
    let p = Project::new(
        "- [~] Add the parser\n  > **Attempt 1:** kern's check of the must-haves failed: `file src/parser.rs` — no such file\n  > Approach: Wrote src/parse.rs.\n  >\n  > **Attempt 2:** kern's check of the must-haves failed: `file src/parser.rs` — no such file\n  > Approach: meet-literally — wrote src/parsers.rs.\n",
    );
    let out = p.run(&["status"]).expect(0).stdout;
    assert!(
        out.contains("errors:    a must-have that does not hold, 2 attempts so far, 2 approaches tried — saturated: all standard approaches exhausted, decomposition next\n"),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(
        json["next"]["error_research"],
        json!({"class": "must", "what": "a must-have that does not hold", "seen": 2,
               "tried": ["Wrote src/parse.rs.", "meet-literally — wrote src/parsers.rs."],
               "untried": ["check-names"], "saturated": true})
    );
}

#[test]
fn a_task_that_cannot_be_split_is_blocked_at_once_after_one_decomposition_request() {
    // Issue 39: with --max-attempts 3 a build that fails the same way spent three attempts, a
    // decomposition request answered "cannot be split", and then more requests the same answer
    // met. At most --max-attempts attempts plus one decomposition request.
    let p = Project::new(
        "- [ ] Add the parser\n  > **Check:** echo 'error[E0425]: cannot find value `lexer` in this scope' >&2; exit 101\n",
    );
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"src/parser.rs": "lexer\n"}, "result": {"status": "SUCCESS", "summary": "Wrote the parser over the lexer."}},
            {"write": {"src/parser.rs": "lexer()\n"}, "result": {"status": "SUCCESS", "summary": "Wrote the parser over the lexer."}},
            {"write": {"src/parser.rs": "lexer(1)\n"}, "result": {"status": "SUCCESS", "summary": "Wrote the parser over the lexer."}},
            {"result": {"status": "FAILED", "summary": "It cannot be split.",
                "attempt_note": "cannot be split: the parser is one function over the lexer"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }}));
    let err = p.run(&["10", "0", "--max-attempts", "3"]).expect(4).stderr;
    let prompts = p.prompts("implement");
    assert_eq!(
        prompts.len(),
        4,
        "three attempts and one decomposition request: {err}"
    );
    assert!(
        prompts[3].contains("Decomposition is required"),
        "{}",
        prompts[3]
    );
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Add the parser"), "{spec}");
    assert!(
        spec.contains("> **Blocked:** the decomposition request was answered: cannot be split: the parser is one function over the lexer — after 3 failed attempts; a person must look. Tried against check `echo 'error[E0425]: cannot find value `lexer` in this scope' >&2; exit 101` failed (exit 101): error[E0425]: cannot find value `lexer` in this scope: 1) Wrote the parser over the lexer. (3 attempts)"),
        "{spec}"
    );
    assert!(p.prompts("commit").is_empty(), "no review was paid for");
}
