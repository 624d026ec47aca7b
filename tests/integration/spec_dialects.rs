//! The task files people already keep, written by other tools (issue 21): Kiro's `tasks.md`,
//! spec-kit's `tasks.md`, Obsidian Tasks and ralph's `fix_plan.md`, from
//! `tests/fixtures/dialects/`. Each is accepted; `kern status --json` reports the counts, the
//! tasks held elsewhere, the optional ones, the sections a heading closed, the warnings and
//! the next task as README.md documents them; runs take tasks in that order and never touch
//! another tool's markers; and the output fits the shell (`kern status | grep next`, JSON on
//! every error, titles with backticks shown as written). Also the person's own markdown right
//! under a task (a table, a quote, a lazy line: issue 14) stays out of kern's notes.

use crate::support::project;

use project::Project;
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dialects")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn status_json(p: &Project, extra: &[&str]) -> Value {
    let out = p.run(&[]).args(extra).args(["status", "--json"]).expect(0);
    let stdout = &out.stdout;
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `(line, marker)` of the tasks held elsewhere, `(line, title)` of the optional ones.
fn held(j: &Value) -> Vec<(u64, String)> {
    j["held_elsewhere"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["marker"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn optional(j: &Value) -> Vec<String> {
    j["optional"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_string())
        .collect()
}

/// A scripted agent that finishes every task (one file per task) and commits it.
fn working_agent() -> Value {
    json!({"default": {
        "research": {"result": {"notes": ["look at out/"]}},
        "implement": {"write": {"out/{slug}.txt": "done: {task}\n"},
                      "result": {"status": "SUCCESS", "summary": "wrote out/{slug}.txt"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Do {task}"}}
    }})
}

#[test]
fn kiro_tasks_are_accepted_with_held_and_optional_tasks_listed() {
    let p = Project::new("- [ ] unused\n");
    p.write(".kiro/specs/storage/tasks.md", &fixture("kiro-tasks.md"));
    p.commit_all("kiro spec");
    let j = status_json(&p, &["--spec", ".kiro/specs/storage/tasks.md"]);
    assert_eq!(
        j["counts"],
        json!({"pending": 7, "in_progress": 0, "done": 2, "blocked": 0})
    );
    assert_eq!(held(&j), vec![(8, "[-]".into()), (13, "[-]".into())]);
    assert_eq!(
        optional(&j),
        [
            "2.3 Write unit tests for the data models",
            "3.2 Write property tests for the repository",
            "4. Write the end-to-end tests"
        ]
    );
    assert_eq!(
        j["next"]["title"],
        "3.1 Implement the database connection utilities"
    );
    assert_eq!(
        j["next"]["parents"],
        json!(["3. Create the storage mechanism"])
    );
    assert_eq!(j["warnings"], json!([]));
    assert_eq!(j["spec"], ".kiro/specs/storage/tasks.md");
}

#[test]
fn a_kiro_night_takes_optional_tasks_last_and_never_touches_held_ones() {
    let p = Project::new(&fixture("kiro-tasks.md"));
    p.scenario(&working_agent());
    let out = p.run(&["10", "0"]).expect(0);
    let err = &out.stderr;
    let subjects: Vec<String> = p.log().into_iter().rev().skip(1).collect();
    assert_eq!(
        subjects,
        [
            "Do 3.1 Implement the database connection utilities",
            "Do 3.3 Implement the repository pattern",
            "Do 5. Checkpoint — ensure all tests pass",
            "Do 3.2 Write property tests for the repository",
            "Do 4. Write the end-to-end tests",
        ],
        "required tasks first, then the optional ones: {err}"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [-] 2. Implement data models and validation\n"),
        "{spec}"
    );
    assert!(
        spec.contains("  - [-] 2.2 Implement User model with validation\n"),
        "{spec}"
    );
    assert!(
        spec.contains("  - [ ]* 2.3 Write unit tests for the data models\n"),
        "an optional task under a held one is never taken: {spec}"
    );
    assert!(
        spec.contains("  - [x]* 3.2 Write property tests for the repository\n"),
        "{spec}"
    );
    assert!(
        spec.contains("- [x] 3. Create the storage mechanism\n"),
        "the parent is done with its last required subtask (3.3), as in Kiro: {spec}"
    );
    assert!(
        spec.contains("- [x]* 4. Write the end-to-end tests\n"),
        "{spec}"
    );
}

#[test]
fn skip_optional_leaves_optional_tasks_alone() {
    let p = Project::new(&fixture("kiro-tasks.md"));
    p.scenario(&working_agent());
    let out = p.run(&["10", "0", "--skip-optional"]).expect(0);
    let err = &out.stderr;
    assert_eq!(p.log().len(), 1 + 3, "3.1, 3.3 and 5 only: {err}");
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [x] 3. Create the storage mechanism\n"),
        "{spec}"
    );
    assert!(spec.contains("  - [ ]* 3.2 Write property tests"), "{spec}");
    assert!(
        spec.contains("- [ ]* 4. Write the end-to-end tests"),
        "{spec}"
    );
    let out = p.run(&["status"]).env("KERN_SKIP_OPTIONAL", "1").expect(0);
    let report = &out.stdout;
    assert!(
        report.contains("optional:  3 optional tasks ([ ]*), 3 open: left alone (--skip-optional)"),
        "{report}"
    );
    assert!(
        report.contains("next:      nothing kern may take; 3 open tasks wait:"),
        "{report}"
    );
    assert!(
        report.contains("it is optional and --skip-optional leaves it alone"),
        "{report}"
    );
}

#[test]
fn speckit_tasks_are_accepted_and_the_legend_line_is_a_warning() {
    let p = Project::new(&fixture("speckit-tasks.md"));
    let j = status_json(&p, &[]);
    assert_eq!(
        j["counts"],
        json!({"pending": 3, "in_progress": 0, "done": 2, "blocked": 0})
    );
    assert_eq!(
        j["next"]["title"],
        "T003 [P] Configure linting and formatting tools"
    );
    assert_eq!(
        j["warnings"],
        json!([{"message": "`[P]` is not one of kern's task markers: kern leaves this item alone",
                "file": "SPEC.md", "line": 30, "column": 3, "fix": "make it `[ ]` for kern to take it"}])
    );
    let out = p.run(&["status"]).expect(0);
    let err = &out.stderr;
    assert_eq!(
        err,
        "kern: SPEC.md:30:3: warning: `[P]` is not one of kern's task markers: kern leaves this item alone — make it `[ ]` for kern to take it\n"
    );
}

#[test]
fn obsidian_tasks_in_progress_and_cancelled_are_held_and_others_are_warnings() {
    let p = Project::new(&fixture("obsidian-tasks.md"));
    let j = status_json(&p, &[]);
    assert_eq!(
        j["counts"],
        json!({"pending": 2, "in_progress": 0, "done": 1, "blocked": 0})
    );
    assert_eq!(held(&j), vec![(4, "[/]".into()), (6, "[-]".into())]);
    let warned: Vec<u64> = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["line"].as_u64().unwrap())
        .collect();
    assert_eq!(warned, [7, 8]);
    assert_eq!(j["next"]["title"], "Fix the garden fence 📅 2024-05-01");
    // Taking the task writes kern's own marker and leaves the others as they are.
    p.scenario(&working_agent());
    p.run(&["10", "0"]).expect(0);
    assert_eq!(p.log().len(), 3);
    let spec = p.read("SPEC.md");
    for kept in [
        "- [/] Paint the kitchen",
        "- [-] Sell the old bike",
        "- [>] Call the plumber",
        "- [?] Ask about the roof",
        "- [x] Fix the garden fence",
        "- [x] Book the dentist",
    ] {
        assert!(spec.contains(kept), "{kept}: {spec}");
    }
}

#[test]
fn ralph_fix_plan_sections_closed_by_a_heading_are_never_picked() {
    let p = Project::new(&fixture("ralph-fix_plan.md"));
    let j = status_json(&p, &[]);
    assert_eq!(
        j["counts"],
        json!({"pending": 2, "in_progress": 0, "done": 4, "blocked": 0})
    );
    let closed: Vec<(u64, u64)> = j["closed_by_heading"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["line"].as_u64().unwrap(),
                t["heading_line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(closed, [(4, 3), (5, 3), (13, 12)]);
    assert_eq!(j["next"]["title"], "Create template for fix_plan.md");
    assert_eq!(j["unlisted_tasks"], json!([16, 17]));

    p.scenario(&working_agent());
    p.run(&["10", "0"]).expect(0);
    assert_eq!(
        p.log().len(),
        3,
        "the two open tasks, nothing under a closed heading"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [ ] Create `src/init.sh` - project scaffolding\n"),
        "{spec}"
    );
    assert!(
        spec.contains("- [ ] Verify the templates render\n"),
        "{spec}"
    );
}

#[test]
fn lines_without_a_list_marker_are_named_with_the_fix() {
    let p = Project::new("# Todo\n\n[ ] Implement boolean search\n[ ] Add paging\n- [x] Done\n");
    let out = p.run(&["status"]).expect(0);
    let (report, err) = (&out.stdout, &out.stderr);
    assert_eq!(
        err,
        "kern: SPEC.md:3:1: warning: `[ ] Implement boolean search` looks like a task but is not a list item, so kern does not see it — write `- ` before the box\n\
         kern: SPEC.md:4:1: warning: `[ ] Add paging` looks like a task but is not a list item, so kern does not see it — write `- ` before the box\n"
    );
    assert!(
        report.contains(
            "next:      nothing left to do — but lines 3, 4 look like tasks without being list items: write `- ` before the box"
        ),
        "{report}"
    );
    let out = p.run(&["-n"]).expect(0);
    let (report, err) = (&out.stdout, &out.stderr);
    assert!(err.contains("SPEC.md:3:1: warning:"), "{err}");
    assert!(report.contains("lines 3, 4 look like tasks"), "{report}");
}

#[test]
fn status_pipes_into_grep() {
    let p = Project::new(&fixture("obsidian-tasks.md"));
    let ran = p.shell("kern status | grep next").expect(0);
    assert_eq!(
        ran.stdout,
        "next:      line 3: `Fix the garden fence 📅 2024-05-01` — it is the first pending task\n"
    );
}

#[test]
fn status_json_on_a_refused_file_is_json_with_the_location() {
    let mut text = fixture("kiro-tasks.md");
    text.push_str("- [ x] 6. A typo of a real task\n");
    let p = Project::new(&text);
    let out = p.run(&["status", "--json"]).expect(2);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let j: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(
        j["error"],
        json!({"message": "malformed task marker `[ x]`", "file": "SPEC.md", "line": 38, "column": 3,
               "fix": "use [ ], [~], [x] or [!]: exactly one character inside the brackets"})
    );
    assert!(
        stderr.contains("SPEC.md:38:3: malformed task marker `[ x]`"),
        "the person still reads it on stderr: {stderr}"
    );
    // Errors outside SPEC.md are JSON too, with the same exit code.
    let out = p.run(&["--agent", "gpt", "status", "--json"]).expect(2);
    let stdout = &out.stdout;
    let j: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(
        j["error"]["message"].as_str().unwrap().contains("gpt"),
        "{j}"
    );
}

#[test]
fn a_run_names_a_title_with_backticks_as_written() {
    // The first task of `kern init`'s starter SPEC.md has backticks in its title.
    let p = Project::new(
        "- [ ] Add a `--json` flag to the `report` command\n- [ ] Run `gh repo create` first\n",
    );
    p.scenario(&json!({"default": {"implement": {"write": {"{slug}.txt": "done\n"}}}}));
    let out = p.run(&["-n", "-j", "2"]).expect(0);
    let report = &out.stdout;
    assert!(
        report.contains(
            "would run together (-j 2): \"Add a `--json` flag to the `report` command\", \"Run `gh repo create` first\""
        ),
        "{report}"
    );
    let out = p.run(&["1", "0"]).expect(0);
    let err = &out.stderr;
    assert!(
        err.contains("task \"Add a `--json` flag to the `report` command\" (SPEC.md:1)"),
        "{err}"
    );
    assert!(
        !err.contains("`Add a `"),
        "no title in backticks of its own: {err}"
    );
}

#[test]
fn titles_with_backticks_print_as_written_and_long_ones_are_cut() {
    let p = Project::new(
        "- [ ] Run `gh repo create` first\n- [ ] a very long title that keeps going well past the width of any narrow terminal window\n",
    );
    let out = p.run(&["status"]).expect(0);
    let report = &out.stdout;
    assert!(
        report.contains(
            "next:      line 1: \"Run `gh repo create` first\" — it is the first pending task\n"
        ),
        "{report}"
    );
    let out = p.run(&["-n"]).expect(0);
    let report = &out.stdout;
    assert!(
        report.contains("would take: \"Run `gh repo create` first\" (SPEC.md:1)"),
        "{report}"
    );
    let j = status_json(&p, &[]);
    assert_eq!(j["next"]["title"], "Run `gh repo create` first");

    let p = Project::new(
        "- [ ] a very long title that keeps going well past the width of any narrow terminal window\n",
    );
    let out = p.run(&["status"]).env("COLUMNS", "72").expect(0);
    let report = &out.stdout;
    let next = report.lines().find(|l| l.starts_with("next:")).unwrap();
    assert_eq!(
        next,
        "next:      line 1: `a very long title t…` — it is the first pending task"
    );
    assert_eq!(next.chars().count(), 72, "fits the width");
    let j = status_json(&p, &[]);
    assert_eq!(
        j["next"]["title"],
        "a very long title that keeps going well past the width of any narrow terminal window",
        "JSON keeps titles whole"
    );
}

#[test]
fn near_misses_of_kerns_markers_stay_errors_with_the_fix() {
    for (typo, fix) in [
        ("[ x]", "exactly one character inside the brackets"),
        ("[x ]", "exactly one character inside the brackets"),
        ("[~ ]", "exactly one character inside the brackets"),
        ("[[ ]", "exactly one character inside the brackets"),
        ("[]", "write `[ ]` (a space inside) for a pending task"),
    ] {
        let p = Project::new(&format!("- [ ] fine\n- {typo} broken\n"));
        let out = p.run(&["1", "0"]).expect(2);
        let err = &out.stderr;
        assert!(err.contains("SPEC.md:2:3: malformed task marker"), "{err}");
        assert!(err.contains(fix), "{err}");
    }
}

#[test]
fn a_table_or_a_quote_under_a_title_stays_out_of_kerns_notes() {
    let spec = "\
# Plan

- [ ] Import the prices
  | file | rows |
  |---|---|
  | a.csv | 10 |
- [ ] Answer the customer
  > Please keep the old URLs working.
lazy line of the quote
1. [ ] Numbered task
   > my own quote
";
    let p = Project::new(spec);
    p.scenario(&working_agent());
    let out = p.run(&["10", "0"]).expect(0);
    let err = &out.stderr;
    assert_eq!(p.log().len(), 4, "{err}");
    let text = p.read("SPEC.md");
    let doc = kern::testing::spec::Document::parse(&text);
    for t in doc.tasks() {
        assert_eq!(t.state, kern::testing::spec::TaskState::Done, "{text}");
        assert_eq!(t.notes.len(), 1, "{text}");
        assert_eq!(t.notes[0].text, "- look at out/", "{text}");
    }
    assert!(
        text.contains("  > - look at out/\n\n  | file | rows |\n"),
        "{text}"
    );
    assert!(
        text.contains("\n\n  > Please keep the old URLs working.\nlazy line of the quote\n"),
        "{text}"
    );
}

#[test]
fn an_edit_kern_cannot_verify_stops_with_exit_2_and_the_location() {
    let p = Project::new("# Plan\n\n- [ ] Split the work\n  ```\n  sketch\n");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["split it"]}},
        "implement": {"result": {"status": "DECOMPOSED", "summary": "too big", "subtasks": ["one", "two"]}}
    }}));
    let before = p.read("SPEC.md");
    let out = p.run(&["1", "0"]).expect(2);
    let err = &out.stderr;
    assert!(
        err.contains("SPEC.md:3:3: kern cannot add its subtasks to task `Split the work`"),
        "{err}"
    );
    assert!(err.contains("close any code block left open"), "{err}");
    assert!(
        p.read("SPEC.md")
            .starts_with("# Plan\n\n- [~] Split the work\n  > **Research:**\n"),
        "kern's earlier edits stand, the refused one is not written: {before}"
    );
}
