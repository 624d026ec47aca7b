//! Picks a person would make (issue 29): kern reads task lists people and other tools wrote,
//! and takes only what a person would hand to an agent. A heading closes its section only when
//! it says the section is done; a legend is no task list; a title that says it waits is listed,
//! never taken; `status` says why nothing is taken; with `-j`, sibling subtasks run one after
//! the other unless tagged `[P]`.

use serde_json::{Value, json};

use crate::support::project::Project;

fn status_json(p: &Project) -> Value {
    let out = p.run(&["status", "--json"]).expect(0);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn a_heading_closes_its_section_when_it_says_done_not_when_it_carries_an_emoji() {
    let p = Project::new(
        "## \u{2705} Project tasks\n\n- [ ] Add login\n\n## Phase 15 [DONE]\n\n- [ ] old\n\n## Search (Partial \u{2705})\n\n- [ ] rank\n",
    );
    let j = status_json(&p);
    assert_eq!(j["next"]["title"], "Add login", "{j}");
    let closed: Vec<&str> = j["closed_by_heading"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(closed, vec!["old"]);
    let dry = p.run(&["-n"]).expect(0);
    assert!(
        dry.stdout.contains("would take: `Add login`"),
        "{}",
        dry.stdout
    );
}

#[test]
fn a_legend_is_not_a_task_list_and_its_in_progress_line_is_never_resumed() {
    let p = Project::new(
        "## Status Legend\n\n- [ ] Pending\n- [x] Done\n- [~] Future\n\n## Tasks\n\nLegend:\n\n- [ ] Pending again\n\nTasks:\n\n- [ ] Add login\n",
    );
    let j = status_json(&p);
    assert_eq!(j["next"]["title"], "Add login", "{j}");
    assert_eq!(j["next"]["reason"], "it is the first pending task", "{j}");
    assert_eq!(j["counts"]["in_progress"], 0, "{j}");
    assert_eq!(j["counts"]["pending"], 1, "{j}");
    p.run(&["1", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [~] Future\n"), "the legend stays: {spec}");
    assert!(spec.contains("- [x] Add login"), "{spec}");
}

#[test]
fn a_title_that_says_it_waits_is_listed_named_in_the_dry_run_and_never_taken() {
    let p = Project::new(
        "- [ ] Set up payments \u{2014} SKIPPED (requires credentials)\n- [ ] Migrate (deferred)\n- [ ] BLOCKED: needs the API key\n- [ ] Add login\n",
    );
    let j = status_json(&p);
    assert_eq!(j["next"]["title"], "Add login", "{j}");
    let deferred: Vec<u64> = j["deferred"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["line"].as_u64().unwrap())
        .collect();
    assert_eq!(deferred, vec![1, 2, 3]);
    let dry = p.run(&["-n"]).expect(0);
    assert!(
        dry.stdout
            .contains("deferred:  line 1 `Set up payments — SKIPPED (requires credentials)` (its title says it waits; kern leaves it)\n           line 2 `Migrate (deferred)`"),
        "{}",
        dry.stdout
    );
    p.run(&["5", "0"]).expect(0);
    assert_eq!(p.log(), vec!["Add login", "initial"]);
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("nothing kern may take; 3 open tasks wait:"),
        "{status}"
    );
}

#[test]
fn status_says_why_a_pending_task_under_a_done_or_held_parent_is_not_taken() {
    let p = Project::new("- [x] Parent\n  - [ ] Child\n- [-] Kiro's\n  - [ ] Under it\n");
    let out = p.run(&["status"]).expect(0).stdout;
    assert!(
        out.contains("line 2 `Child`: it is under `Parent` (line 1), marked [x]"),
        "{out}"
    );
    assert!(
        out.contains(
            "line 4 `Under it`: it is under `Kiro's` (line 3), held by another tool ([-])"
        ),
        "{out}"
    );
    assert!(!out.contains("nothing left to do"), "{out}");
}

#[test]
fn sibling_subtasks_run_one_after_the_other_with_j_and_separate_chains_together() {
    let p = Project::new("- [ ] P\n  - [ ] P1\n  - [ ] P2\n- [ ] Q\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    p.run(&["4", "0", "-j", "2"]).expect(0);
    let log = p.run_log();
    let at = |event: &str, task: &str| {
        log.iter()
            .position(|e| e["event"] == event && e["task"] == task)
            .unwrap_or_else(|| panic!("no {event} of {task}: {log:?}"))
    };
    assert!(
        at("commit", "P1") < at("iteration_start", "P2"),
        "P2 started before P1 was committed: {log:?}"
    );
    assert!(
        at("iteration_start", "Q") < at("commit", "P1"),
        "Q ran beside P1: {log:?}"
    );
}
