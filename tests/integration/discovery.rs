//! Spend where it earns (issue 31): each task's discovery level, rated before research from
//! its title, notes, named paths and size — 0 skips research, 1 keeps it short, 3 goes deep —
//! with the person's `> **Level:**` and `--level` winning, and shown in `-n`, `status`,
//! `run.jsonl` and the report.

use serde_json::json;

use crate::support::project::Project;

fn committing() -> serde_json::Value {
    json!({"default": {
        "implement": [
            {"write": {"README.md": "# scratch, no typo\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Fix the typo"}}
    }})
}

#[test]
fn a_level_0_task_is_committed_with_two_stages_and_says_why() {
    let p = Project::new("- [ ] Fix a typo in README.md\n");
    p.scenario(&committing());
    let dry = p.run(&["-n"]).expect(0).stdout;
    assert!(
        dry.contains("level:     0 — a small mechanical change (`typo`); no research stage"),
        "{dry}"
    );
    assert!(!dry.contains("stage 1 research"), "{dry}");
    let err = p.run(&["1", "0"]).expect(0).stderr;
    assert!(err.contains("research: skipped, level 0"), "{err}");
    assert!(p.prompts("research").is_empty(), "no research was paid for");
    assert_eq!(p.prompts("implement").len(), 1);
    assert_eq!(p.prompts("commit").len(), 1, "the review is never skipped");
    assert_eq!(p.log()[0], "Fix the typo");
    let level = p.run_events("level");
    assert_eq!(level[0]["level"], 0);
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains("level 0 (a small mechanical change (`typo`))"),
        "{report}"
    );
}

#[test]
fn the_persons_level_note_and_the_flag_win() {
    let p = Project::new("- [ ] Fix a typo in README.md\n  > **Level:** 2\n");
    p.scenario(&committing());
    p.run(&["1", "0"]).expect(0);
    assert_eq!(p.prompts("research").len(), 1, "Level 2 asked for research");
    let q = Project::new("- [ ] Add the parser\n");
    q.scenario(&committing());
    q.run(&["1", "0", "--level", "0"]).expect(0);
    assert!(q.prompts("research").is_empty(), "--level 0");
}

#[test]
fn a_level_0_task_that_failed_gets_research_on_its_next_attempt() {
    let p = Project::new("- [ ] Fix a typo in README.md\n");
    p.scenario(&json!({"default": {
        "implement": [
            {"result": {"status": "FAILED", "summary": "no", "attempt_note": "could not find it"}},
            {"write": {"README.md": "# fixed\n"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Fix the typo"}}
    }}));
    let err = p.run(&["2", "0"]).expect(0).stderr;
    assert!(err.contains("level 2: it failed at level 0"), "{err}");
    assert_eq!(p.prompts("research").len(), 1, "{err}");
    assert_eq!(p.log()[0], "Fix the typo");
}

#[test]
fn small_and_architectural_tasks_are_asked_for_less_and_more() {
    let p =
        Project::new("- [ ] Add a flag to README.md\n- [ ] Redesign the storage architecture\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Do {slug}"}}
    }}));
    p.run(&["2", "0"]).expect(0);
    let research = p.prompts("research");
    assert!(
        research[0].contains("discovery level 1): keep the research short"),
        "{}",
        research[0]
    );
    assert!(
        research[1].contains("discovery level 3): go deep"),
        "{}",
        research[1]
    );
    let reviews = p.prompts("commit");
    assert!(
        reviews[1].contains("discovery level 3"),
        "the review goes deep too"
    );
}

#[test]
fn a_stale_learning_is_left_out_of_the_prompt_and_named_by_status() {
    let p = Project::new("- [ ] Add the parser\n");
    p.write("src/cache.rs", "// cache\n");
    p.write(
        "LEARNINGS.md",
        "# Learnings\n\n## 2026-11-01 — Lexer\n\n- `src/lexer.rs` holds the tokens\n- the cache lives in `src/cache.rs`\n",
    );
    p.commit_all("learnings");
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("stale:     LEARNINGS.md:5 names a path that no longer exists; left out of prompts: - `src/lexer.rs` holds the tokens"),
        "{status}"
    );
    p.scenario(&committing());
    p.run(&["1", "0"]).expect(0);
    let research = p.prompts("research").remove(0);
    assert!(!research.contains("src/lexer.rs"), "{research}");
    assert!(
        research.contains("the cache lives in `src/cache.rs`"),
        "{research}"
    );
    assert!(research.contains("1 entry left out: it names a path that no longer exists"));
    assert!(
        p.read("LEARNINGS.md")
            .contains("`src/lexer.rs` holds the tokens"),
        "never deleted from the file"
    );
}

#[test]
fn a_learning_kern_writes_names_its_paths_and_goes_stale_when_they_are_deleted() {
    // Issue 39: a learning about `src/legacy_parser.rs` written without backticks stayed in
    // every prompt after the file was deleted, and `kern status` did not flag it.
    let p = Project::new(
        "- [ ] Rework the legacy parser\n- [ ] Remove the legacy parser\n- [ ] Add the new parser\n",
    );
    p.write("src/legacy_parser.rs", "// old\n");
    p.write("src/lexer.rs", "// lexer\n");
    p.write(
        "LEARNINGS.md",
        "# Learnings\n\n- src/old_lexer.rs: keeps a cache, see notes/lexer.md.\n- pick and/or drop 1/2 of the cases; docs at docs.rs/serde/latest/serde.html\n",
    );
    p.commit_all("sources");
    p.scenario(&json!({
        "tasks": [
            {"match": "Rework", "implement": {"write": {"src/legacy_parser.rs": "// reworked\n", "src/lexer.rs": "// lexer, reworked\n"}},
             "commit": {"result": {"verdict": "COMMIT", "subject": "Rework the legacy parser",
                "learnings": ["src/legacy_parser.rs: tokens carry their spans", "the lexer (lexer.rs) runs first", "keep commits small"]}}},
            {"match": "Remove", "implement": {"delete": ["src/legacy_parser.rs"]},
             "commit": {"result": {"verdict": "COMMIT", "subject": "Remove the legacy parser"}}}
        ],
        "default": {
            "implement": {"write": {"src/parser.rs": "// new\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add the new parser"}}
        }
    }));
    p.run(&["1", "0"]).expect(0);
    let learnings = p.read("LEARNINGS.md");
    assert!(
        learnings.contains("- src/legacy_parser.rs: tokens carry their spans — source: task \"Rework the legacy parser\", the commit after "),
        "{learnings}"
    );
    assert!(
        learnings.contains("tokens carry their spans — source: task \"Rework the legacy parser\", the commit after ")
            && learnings.lines().any(|l| l.contains("tokens carry their spans") && l.ends_with(" — paths: `src/legacy_parser.rs`")),
        "the paths it concerns, in a part kern reads back: {learnings}"
    );
    assert!(
        learnings
            .lines()
            .any(|l| l.starts_with("- the lexer (lexer.rs) runs first")
                && l.ends_with(" — paths: `src/lexer.rs`")),
        "a file's name names it: {learnings}"
    );
    assert!(
        learnings
            .lines()
            .any(|l| l.starts_with("- keep commits small") && !l.contains("paths:")),
        "{learnings}"
    );
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("names a path that no longer exists; left out of prompts: - src/old_lexer.rs: keeps a cache"),
        "a plain path token counts: {status}"
    );
    assert!(!status.contains("and/or"), "prose is no path: {status}");
    p.run(&["1", "0"]).expect(0);
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("left out of prompts: - src/legacy_parser.rs: tokens carry their spans"),
        "{status}"
    );
    assert!(
        !status.contains("the lexer (lexer.rs) runs first"),
        "{status}"
    );
    p.run(&["1", "0"]).expect(0);
    let research = p.prompts("research").pop().unwrap();
    assert!(!research.contains("tokens carry their spans"), "{research}");
    assert!(!research.contains("keeps a cache"), "{research}");
    assert!(
        research.contains("the lexer (lexer.rs) runs first"),
        "{research}"
    );
    assert!(research.contains("pick and/or drop"), "{research}");
}
