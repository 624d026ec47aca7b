//! Done means verified (issue 30): the person's must-haves (`> **Must:**`) and read-only tests
//! (`> **Tests:** read-only`, `--tests-read-only`) are checked by kern itself after implement
//! and before the review: an agent that reports SUCCESS without the work fails its attempt at
//! no model cost, and the review reads kern's findings, not only the implementer's word.

use serde_json::{Value, json};

use crate::support::project::Project;

const TASK: &str = "- [ ] Add the parser\n  > **Must:**\n  >\n  > - file src/parser.rs\n  > - grep src/parser.rs pub fn parse\n  > - file README.md\n  > - run test -f src/parser.rs\n";

fn scenario(implement: Value) -> Value {
    json!({"default": {
        "implement": implement,
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }})
}

#[test]
fn an_agent_that_says_success_without_the_work_fails_its_attempt_before_any_review() {
    let p = Project::new(TASK);
    p.scenario(&scenario(json!([
        {"write": {"out/claim.txt": "I did it\n"}},
        {"write": {"src/parser.rs": "pub fn parse() {}\n"}}
    ])));
    let err = p.run(&["1", "0"]).expect(4).stderr;
    assert!(
        err.contains("must: ✗ file src/parser.rs: no such file"),
        "{err}"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("> **Attempt 1:** kern's check of the must-haves failed: `file src/parser.rs` — no such file"),
        "{spec}"
    );
    assert!(p.prompts("commit").is_empty(), "no review was paid for");
    assert_eq!(p.log().len(), 1, "nothing committed");
    let logged = p.run_events("must");
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["passed"], false);
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(p.state_dir().join("last/stage2.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        record["kern"]["must"][0], "✗ file src/parser.rs: no such file",
        "jq .kern.must stage2.json"
    );
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains("must ✗ file src/parser.rs: no such file"),
        "the morning report shows kern's findings: {report}"
    );
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("must:      file src/parser.rs; grep src/parser.rs pub fn parse"),
        "{status}"
    );

    // The honest attempt passes, and the review reads what kern found.
    let err = p.run(&["1", "0"]).expect(0).stderr;
    assert!(
        err.contains("must: ✓ grep src/parser.rs pub fn parse"),
        "{err}"
    );
    assert_eq!(p.log()[0], "Add the parser");
    let review = p.prompts("commit").pop().unwrap();
    assert!(
        review.contains("kern itself checked the task's must-haves"),
        "{review}"
    );
    assert!(
        review.contains(
            "✓ file README.md: the file exists (no evidence: it already held when the task started)"
        ),
        "{review}"
    );
    assert!(
        review.contains("✓ run test -f src/parser.rs: exit 0"),
        "{review}"
    );
}

#[test]
fn the_must_haves_are_held_as_of_the_tasks_start() {
    let p = Project::new(TASK);
    p.scenario(&scenario(json!({
        "write": {"out/claim.txt": "x\n"},
        "shell": ["sed -i 's|file src/parser.rs|file README.md|; s|grep src/parser.rs pub fn parse|grep README.md scratch|; s|run test -f src/parser.rs|run true|' SPEC.md"]
    })));
    let err = p.run(&["1", "0", "--max-attempts", "1"]).expect(4).stderr;
    assert!(err.contains("must: ✗ file src/parser.rs"), "{err}");
    assert!(p.prompts("commit").is_empty());
}

#[test]
fn read_only_tests_may_grow_but_an_existing_one_may_not_change() {
    let p = Project::new("- [ ] Fix the bug\n  > **Tests:** read-only\n");
    p.write(
        "tests/parse_test.rs",
        "#[test] fn keeps() { assert!(true) }\n",
    );
    p.commit_all("a test");
    p.scenario(&json!({"default": {
        "implement": [
            {"write": {"tests/parse_test.rs": "// weakened\n", "tests/new_test.rs": "// new\n"}},
            {"write": {
                "src/fix.rs": "// fixed\n",
                "tests/parse_test.rs": "#[test] fn keeps() { assert!(true) }\n"
            }}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Fix the bug"}}
    }}));
    let err = p.run(&["2", "0"]).expect(0).stderr;
    assert!(
        err.contains(
            "must: ✗ tests read-only: existing test files changed or deleted: tests/parse_test.rs"
        ),
        "{err}"
    );
    assert!(
        p.read("SPEC.md")
            .contains("> **Attempt 1:** kern's check of the must-haves failed: `tests read-only`"),
        "{}",
        p.read("SPEC.md")
    );
    assert_eq!(p.log()[0], "Fix the bug");
    assert_eq!(
        p.git(&["show", "HEAD:tests/parse_test.rs"]),
        "#[test] fn keeps() { assert!(true) }\n"
    );
    assert_eq!(p.git(&["show", "HEAD:tests/new_test.rs"]), "// new\n");
}

#[test]
fn tests_read_only_as_a_flag_and_must_haves_in_the_dry_run() {
    let p = Project::new(TASK);
    let out = p.run(&["-n", "--tests-read-only"]).expect(0).stdout;
    assert!(
        out.contains("must:      file src/parser.rs; grep src/parser.rs pub fn parse; file README.md; run test -f src/parser.rs\n"),
        "{out}"
    );
    assert!(out.contains("tests:      read-only"), "{out}");
}

#[test]
fn a_must_have_kern_cannot_read_stops_before_any_agent_with_the_line() {
    let p = Project::new("- [ ] Add the parser\n  > **Must:** exists src/parser.rs\n");
    let err = p.run(&["1", "0"]).expect(2).stderr;
    assert!(err.contains("SPEC.md:2:1"), "{err}");
    assert!(
        err.contains("`exists src/parser.rs` is not a must-have — write `file <path>`"),
        "{err}"
    );
    assert!(p.prompts("research").is_empty());
    // grep's habit, an option before the pattern: `-q` would be read as the file, and the
    // must-have fail on honest work all night.
    let p = Project::new("- [ ] Set x\n  > **Must:** grep -q \"x=1\" config.txt\n");
    let err = p.run(&["1", "0"]).expect(2).stderr;
    assert!(
        err.contains("SPEC.md:2:1")
            && err.contains("`-q` is grep's option, where kern reads the file"),
        "{err}"
    );
    assert!(err.contains("`run grep -q \"x=1\" config.txt`"), "{err}");
    assert!(p.prompts("research").is_empty());
}

const SCOPED: &str = "- [ ] Add the parser\n  > **Scope:** src/parser.rs\n";

fn wanders() -> Value {
    json!({"default": {
        "implement": {"write": {
            "src/parser.rs": "pub fn parse() {}\n",
            "tests/parser_test.rs": "// the parser's test\n",
            "src/unrelated.rs": "// while I was here\n",
            "README.md": "# rewritten\n"
        }},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }})
}

#[test]
fn changes_outside_the_scope_are_set_aside_named_and_never_committed() {
    let p = Project::new(SCOPED);
    p.scenario(&wanders());
    let err = p.run(&["1", "0"]).expect(0).stderr;
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.contains("src/parser.rs"), "{files}");
    assert!(
        files.contains("tests/parser_test.rs"),
        "its test is a companion: {files}"
    );
    assert!(!files.contains("unrelated"), "{files}\n{err}");
    assert!(!files.contains("README.md"), "{files}");
    assert_eq!(p.read("README.md"), "# scratch\n", "put back in the tree");
    assert!(!p.path().join("src/unrelated.rs").exists());
    let saved = p.refs("refs/kern/saved/add-the-parser/");
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        p.git(&["show", &format!("{}:src/unrelated.rs", saved[0])]),
        "// while I was here\n"
    );
    assert_eq!(
        p.git(&["show", &format!("{}:README.md", saved[0])]),
        "# rewritten\n"
    );
    let spec = p.git(&["show", "HEAD:SPEC.md"]);
    assert!(
        spec.contains("> **Out of scope:** `README.md`, `src/unrelated.rs` set aside at `refs/kern/saved/add-the-parser/out-of-scope-1`"),
        "in the task's own commit: {spec}"
    );
    assert_eq!(p.prompts("implement").len(), 1, "no paid retry");
}

#[test]
fn a_scope_path_with_blanks_in_backticks_or_quotes_is_one_path() {
    // `packages/web app/**` was cut at its blank into `packages/web` and `app/**`: the task's
    // own work was set aside as out of scope.
    let p = Project::new(
        "- [ ] Tune the web app\n  > **Scope:** `packages/web app/**`, \"docs/web notes.md\"\n",
    );
    p.scenario(&json!({"default": {"implement": {"write": {
        "packages/web app/src/main.js": "tuned\n",
        "docs/web notes.md": "notes\n",
        "packages/api/server.js": "while I was here\n"
    }}}}));
    let err = p.run(&["1", "0"]).expect(0).stderr;
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(
        files.contains("packages/web app/src/main.js"),
        "{files}\n{err}"
    );
    assert!(files.contains("docs/web notes.md"), "{files}\n{err}");
    assert!(!files.contains("packages/api"), "{files}\n{err}");
    assert!(
        p.git(&["show", "HEAD:SPEC.md"])
            .contains("> **Out of scope:** `packages/api/server.js` set aside"),
        "{err}"
    );
}

#[test]
fn scope_strict_fails_the_attempt_and_scope_off_commits_everything() {
    let p = Project::new(SCOPED);
    p.scenario(&wanders());
    let err = p
        .run(&["1", "0", "--scope", "strict", "--max-attempts", "1"])
        .expect(4)
        .stderr;
    assert!(
        p.read("SPEC.md").contains("> **Attempt 1:** changed paths outside the task's Scope (src/parser.rs): `README.md`, `src/unrelated.rs` (--scope strict)"),
        "{}\n{err}",
        p.read("SPEC.md")
    );
    let q = Project::new(SCOPED);
    q.scenario(&wanders());
    q.run(&["1", "0", "--scope", "off"]).expect(0);
    let files = q.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.contains("src/unrelated.rs"), "{files}");
}

#[test]
fn research_proposes_must_haves_and_a_scope_that_kern_writes_as_the_persons_and_holds() {
    let p = Project::new("- [ ] Add the parser\n");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["src/lib.rs is empty"], "skip_reason": null,
            "skip_kind": null, "must": ["file src/parser.rs", "not a check"],
            "scope": ["src/parser.rs"]}},
        "implement": [
            {"write": {"src/other.rs": "// not the parser\n"}},
            {"write": {"src/parser.rs": "pub fn parse() {}\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add the parser"}}
    }}));
    let err = p.run(&["2", "0"]).expect(0).stderr;
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("  > **Must:**\n  >\n  > - file src/parser.rs\n"),
        "{spec}"
    );
    assert!(
        !spec.contains("not a check"),
        "only what kern can read: {spec}"
    );
    assert!(spec.contains("> **Scope:** src/parser.rs"), "{spec}");
    assert!(
        spec.contains("> **Attempt 1:** kern's check of the must-haves failed: `file src/parser.rs` — no such file"),
        "{spec}\n{err}"
    );
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.contains("src/parser.rs"), "{files}");
    assert!(
        !files.contains("src/other.rs"),
        "outside the proposed scope: {files}"
    );
}

#[test]
fn acceptance_criteria_are_the_tasks_never_tasks_and_kern_ticks_them_in_its_commit() {
    let p = Project::new(
        "- [ ] Add login\n  Acceptance criteria:\n  - [ ] a user logs in with a password\n  - [ ] a wrong password is refused\n- [ ] Add logout\n\n### Definition of done\n\n- [ ] the session ends\n\n## Later\n\n- [ ] Add sign-up\n",
    );
    let status: Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(status["counts"]["pending"], 3, "{status}");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["2", "0"]).expect(0);
    let spec = p.git(&["show", "HEAD~1:SPEC.md"]);
    assert!(
        spec.starts_with("- [x] Add login\n  Acceptance criteria:\n"),
        "{spec}"
    );
    assert!(
        spec.contains("  - [x] a user logs in with a password\n  - [x] a wrong password is refused\n- [ ] Add logout"),
        "ticked in the task's own commit: {spec}"
    );
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [x] Add logout"), "{spec}");
    assert!(
        spec.contains("- [x] the session ends"),
        "a heading's criteria belong to the task above: {spec}"
    );
    assert!(spec.contains("- [ ] Add sign-up"), "{spec}");
    assert_eq!(p.log()[..2], ["Add add-logout", "Add add-login"]);
    let review = p.prompts("commit").remove(0);
    assert!(
        review.contains("a wrong password is refused"),
        "the review reads them: {review}"
    );
}

#[test]
fn a_task_whose_scope_is_too_big_is_asked_to_decompose_before_its_first_attempt() {
    let p = Project::new("- [ ] Rework the parser\n  > **Scope:** src\n");
    for f in ["src/a.rs", "src/b.rs", "src/c.rs"] {
        p.write(f, "// x\n");
    }
    p.commit_all("sources");
    p.scenario(&json!({"default": {
        "implement": {"result": {"status": "DECOMPOSED", "summary": "split",
            "subtasks": ["Rework a.rs", "Rework b.rs and c.rs"]}}
    }}));
    p.run(&["1", "0", "--max-task-files", "2"]).expect(0);
    let prompt = p.prompts("implement").remove(0);
    assert!(
        prompt.contains("This task's Scope covers 3 files, more than --max-task-files 2"),
        "{prompt}"
    );
    let spec = p.read("SPEC.md");
    assert!(spec.contains("  - [ ] Rework a.rs\n"), "{spec}");
    assert!(!spec.contains("Attempt"), "no attempt was spent: {spec}");
}

#[test]
fn a_parallel_tasks_out_of_scope_note_lands_in_its_commit() {
    // Found using the release binary: with -j the note was lost (the run commits a parallel
    // task from SPEC.md as it is, and the note was only added at a serial commit).
    let p = Project::new(SCOPED);
    p.scenario(&wanders());
    p.run(&["1", "0", "-j", "2"]).expect(0);
    let spec = p.git(&["show", "HEAD:SPEC.md"]);
    assert!(
        spec.contains("> **Out of scope:** `README.md`, `src/unrelated.rs` set aside at `refs/kern/saved/add-the-parser/out-of-scope-1`"),
        "{spec}"
    );
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(!files.contains("unrelated"), "{files}");
}

#[test]
fn a_grep_must_have_anchors_its_pattern_at_each_line_as_grep_does() {
    // Issue 39: the pattern was matched against the whole file, so `^`/`$` were the file's
    // start and end and the most natural must-have failed on a file that holds the line.
    let p = Project::new(
        "- [ ] Greet\n  > **Must:**\n  >\n  > - grep greeting.txt ^greeting=hello$\n  > - grep notes.txt ^second line$\n  > - grep! greeting.txt ^hello\n",
    );
    p.scenario(&json!({"default": {
        "implement": {"write": {
            "greeting.txt": "# the greeting\ngreeting=hello\n",
            "notes.txt": "first line\r\nsecond line\r\n"
        }},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Greet"}}
    }}));
    let err = p.run(&["1", "0", "--max-attempts", "1"]).expect(0).stderr;
    assert!(
        err.contains(
            "must: ✓ grep greeting.txt ^greeting=hello$: `greeting.txt:2` holds `greeting=hello`"
        ),
        "{err}"
    );
    assert!(
        err.contains("must: ✓ grep notes.txt ^second line$: `notes.txt:2` holds `second line`"),
        "a CRLF line ends before its `\\r\\n`: {err}"
    );
    assert_eq!(p.log()[0], "Greet");
}

#[test]
fn a_must_have_path_with_blanks_is_written_in_quotes_as_a_shell_takes_it() {
    // A monorepo's folder with a blank and a file name beyond ASCII: the path was cut at its
    // first blank, the must-have read as grep's own order and failed on honest work.
    let p = Project::new(
        "- [ ] Set x\n  > **Must:** grep \"web app/config ü.env\" ^x=1$\n  > **Check:** grep -qx x=1 \"web app/config ü.env\"\n- [ ] Note\n  > **Must:** file \"my notes.md\"\n",
    );
    p.scenario(&json!({"tasks": [
        {"match": "Set x", "implement": {"write": {"web app/config ü.env": "x=1\n"}}},
        {"match": "Note", "implement": {"write": {"my notes.md": "notes\n"}}}
    ]}));
    let dry = p.run(&["-n"]).expect(0).stderr;
    assert!(!dry.contains("warning"), "{dry}");
    let err = p.run(&["2", "0", "--max-attempts", "1"]).expect(0).stderr;
    assert!(
        err.contains(
            "must: ✓ grep \"web app/config ü.env\" ^x=1$: `web app/config ü.env:1` holds `x=1`"
        ),
        "{err}"
    );
    assert!(err.contains("must: ✓ file \"my notes.md\""), "{err}");
    assert_eq!(p.log(), ["Note", "Set x", "initial"]);
}

#[test]
fn a_grep_must_have_written_as_a_shell_writes_grep_holds_on_honest_work() {
    // The way people type grep: the pattern in quotes. Matched with its quotes, the must-have
    // failed on a file that holds the line, attempt after attempt.
    let p = Project::new(
        "- [ ] Greet\n  > **Must:**\n  >\n  > - grep greeting.txt \"^greeting=hello$\"\n  > - grep! greeting.txt '^bye'\n",
    );
    p.scenario(&json!({"default": {
        "implement": {"write": {"greeting.txt": "greeting=hello\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Greet"}}
    }}));
    let err = p.run(&["1", "0", "--max-attempts", "1"]).expect(0).stderr;
    assert!(
        err.contains(
            "must: ✓ grep greeting.txt ^greeting=hello$: `greeting.txt:1` holds `greeting=hello`"
        ),
        "{err}"
    );
    assert!(!err.contains("in quotes"), "{err}");
    assert_eq!(p.log()[0], "Greet");
    // grep's own order, pattern first, is named before any agent runs.
    let p = Project::new("- [ ] Greet\n  > **Must:**\n  >\n  > - grep \"^x=1$\" config.txt\n");
    let err = p.run(&["-n"]).expect(0).stderr;
    assert!(
        err.contains("SPEC.md:2:1: warning: a Must note of task `Greet`: `grep \"^x=1$\" config.txt` names its file second"),
        "{err}"
    );
}

#[test]
fn a_grep_must_have_in_greps_own_order_is_read_so_when_only_the_last_word_names_a_file() {
    // `grep "^y=2$" config.env`, as grep is typed: kern read `^y=2$` as the file, and the
    // must-have failed on honest work every attempt, each one paid for. With no file of the
    // first word's name and a file of the last's, grep's order is the only reading.
    let p = Project::new(
        "- [ ] Set y\n  > **Must:**\n  >\n  > - grep \"^y=2$\" config.env\n  > - grep! '^z=' config.env\n",
    );
    p.scenario(&json!({"default": {
        "implement": {"write": {"config.env": "x=1\ny=2\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Set y"}}
    }}));
    let err = p.run(&["1", "0", "--max-attempts", "1"]).expect(0).stderr;
    assert!(
        err.contains(
            "must: ✓ grep \"^y=2$\" config.env: read in grep's order, `config.env:2` holds `y=2`"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "must: ✓ grep! \"^z=\" config.env: read in grep's order, `config.env` holds no match"
        ),
        "{err}"
    );
    assert_eq!(p.log()[0], "Set y");
    // Work that does not hold the line still fails, named in the same order.
    let p = Project::new("- [ ] Set y\n  > **Must:** grep \"^y=2$\" config.env\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"config.env": "y=3\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Set y"}}
    }}));
    let err = p.run(&["1", "0", "--max-attempts", "1"]).expect(4).stderr;
    assert!(
        err.contains(
            "must: ✗ grep \"^y=2$\" config.env: read in grep's order, `config.env` holds no match"
        ),
        "{err}"
    );
}
