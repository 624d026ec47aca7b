//! kern, not the agent, decides "done" (issue 15 item 5, issue 12 item 3): an implement
//! SUCCESS that changed no file is a failed attempt unless the report says why nothing had to
//! change; with a reason, the review is told the diff is empty and must answer COMMIT. And a
//! research that finds the task waits on a person blocks it with the question (issue 21
//! item 3), so it is not researched again every night, and the night goes on.

use crate::support::project;

use project::Project;
use serde_json::{Value, json};

/// The files the newest commit changed.
fn changed_in_head(p: &Project) -> Vec<String> {
    let r = git2::Repository::open(p.path()).unwrap();
    let head = r.head().unwrap().peel_to_commit().unwrap();
    let parent = head.parent(0).unwrap();
    let diff = r
        .diff_tree_to_tree(
            Some(&parent.tree().unwrap()),
            Some(&head.tree().unwrap()),
            None,
        )
        .unwrap();
    diff.deltas()
        .map(|d| d.new_file().path().unwrap().display().to_string())
        .collect()
}

fn calls(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.outside.path().join("scenario.calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_success_that_changed_nothing_and_gives_no_reason_is_a_failed_attempt() {
    let p = Project::new("- [ ] Add the greeting\n");
    // The scripted agent's implement says SUCCESS and writes nothing.
    p.scenario(&json!({}));
    let out = p.run(&["1", "0"]).expect(4);
    let err = &out.stderr;
    assert_eq!(p.log(), ["initial"]);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [~] Add the greeting\n"), "{spec}");
    assert!(
        spec.contains("> **Attempt 1:** implement reported SUCCESS but changed nothing: no file differs from the commit the task started from, and the report gave no `no_change_reason` — make the change, or say in `no_change_reason` why none is needed"),
        "{spec}"
    );
    assert!(p.prompts("commit").is_empty(), "no review of nothing");
    assert!(
        err.contains(
            "attempt 1 of `Add the greeting` failed: implement reported SUCCESS but changed nothing"
        ),
        "{err}"
    );
    // The next attempt reads the note.
    p.run(&["1", "0"]).expect(4);
    let implement = p.prompts("implement");
    assert!(
        implement[1].contains("implement reported SUCCESS but changed nothing"),
        "{}",
        implement[1]
    );
}

#[test]
fn a_change_of_only_kerns_own_files_or_an_allow_dirty_path_is_no_change() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.write("mine.txt", "the person's own work\n");
    p.scenario(&json!({"default": {"implement": {
        "append": {"LEARNINGS.md": "a note\n", "mine.txt": "more of the person's\n"}
    }}}));
    p.run(&["1", "0", "--allow-dirty"]).expect(4);
    assert!(
        p.read("SPEC.md")
            .contains("> **Attempt 1:** implement reported SUCCESS but changed nothing"),
        "{}",
        p.read("SPEC.md")
    );
}

#[test]
fn a_success_with_a_reason_is_done_when_the_review_commits_it() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.write("greeting.txt", "hello\n");
    p.commit_all("the greeting is already there");
    p.scenario(&json!({"default": {
        "implement": {"result": {"status": "SUCCESS", "summary": "Checked greeting.txt.",
            "no_change_reason": "greeting.txt already says hello (committed earlier)"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Confirm the greeting"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    assert_eq!(p.log()[0], "Confirm the greeting");
    assert_eq!(changed_in_head(&p), ["SPEC.md"], "only the box");
    assert!(p.read("SPEC.md").starts_with("- [x] Add the greeting\n"));
    let review = &p.prompts("commit")[0];
    for expected in [
        "(no changes: no file differs from the commit the task started from)",
        "Checked greeting.txt.\n\nNo file changed. The implementer's reason why none had to: greeting.txt already says hello (committed earlier)",
        "If the diff says `no changes`, the implementer changed no file",
    ] {
        assert!(review.contains(expected), "`{expected}` in:\n{review}");
    }
}

#[test]
fn a_success_with_a_reason_the_review_rejects_is_a_failed_attempt() {
    let p = Project::new("- [ ] Add the greeting\n");
    p.scenario(&json!({"default": {
        "implement": {"result": {"status": "SUCCESS", "summary": "Nothing to do.",
            "no_change_reason": "the greeting exists"}},
        "commit": {"result": {"verdict": "REJECT", "subject": "Add the greeting",
            "reason": "there is no greeting.txt: write it"}}
    }}));
    p.run(&["1", "0"]).expect(4);
    assert_eq!(p.log(), ["initial"]);
    assert!(
        p.read("SPEC.md").contains(
            "> **Attempt 1:** review rejected the change: there is no greeting.txt: write it"
        ),
        "{}",
        p.read("SPEC.md")
    );
}

#[test]
fn a_task_that_needs_a_person_is_blocked_with_the_question_and_the_night_goes_on() {
    let p = Project::new("- [ ] Pick the database\n- [ ] Write the docs\n");
    let question = "Which database should the cache use: Redis or SQLite?";
    p.scenario(&json!({
        "tasks": [{"match": "Pick the database", "research": {"result": {
            "notes": ["the cache is in src/cache.rs"],
            "skip_reason": question, "skip_kind": "needs_person"}}}],
        "default": {"implement": {"write": {"docs.md": "docs\n"}}}
    }));
    let out = p.run(&["5", "0"]).expect(4);
    let err = &out.stderr;
    let spec = p.read("SPEC.md");
    assert!(
        spec.starts_with(&format!(
            "- [!] Pick the database\n  > **Blocked:** needs you: {question} — answer in the task's text (or do it), then set it back to [ ]\n"
        )),
        "{spec}"
    );
    assert!(spec.contains("- [x] Write the docs"), "{spec}");
    assert_eq!(p.log(), ["Write the docs", "initial"]);
    assert!(
        err.contains(&format!(
            "blocked `Pick the database`: it waits on you — {question}"
        )),
        "{err}"
    );
    let blocked = p.run_events("blocked");
    assert_eq!(
        blocked[0]["why"],
        format!("needs a person: {question}").as_str()
    );
    // Not a failed attempt, and never researched again.
    assert!(err.contains("  failed attempts  0"), "{err}");
    let researched = || {
        calls(&p)
            .iter()
            .filter(|c| c["stage"] == "research" && c["task"] == "Pick the database")
            .count()
    };
    assert_eq!(researched(), 1);
    p.run(&["5", "0"]).expect(4);
    assert_eq!(researched(), 1, "a blocked task is not taken again");
}

#[test]
fn a_needs_person_subtask_blocks_its_parent_when_nothing_else_is_left() {
    let p = Project::new("- [ ] Ship it\n  - [x] Build\n  - [ ] Get the signing key\n");
    p.scenario(&json!({"default": {"research": {"result": {
        "notes": [], "skip_reason": "Where is the release signing key?", "skip_kind": "needs_person"}}}}));
    p.run(&["1", "0"]).expect(4);
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Ship it\n"), "{spec}");
    assert!(spec.contains("  - [!] Get the signing key\n"), "{spec}");
}
