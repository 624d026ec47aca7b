//! `kern status`: the human summary (on stdout, so `kern status | grep next` works), `--json`
//! (exactly one object on stdout, errors included), `--dir`, and the errors (missing SPEC.md
//! with the `kern init` hint, malformed with diagnostics).

use crate::support::project;

use project::Project;
use serde_json::{Value, json};

fn status_json(p: &Project) -> Value {
    let out = p.run(&["status", "--json"]).expect(0);
    let stdout = &out.stdout;
    assert_eq!(
        stdout.lines().count(),
        1,
        "exactly one line of JSON: {stdout}"
    );
    serde_json::from_str(stdout).unwrap()
}

#[test]
fn json_counts_every_state_and_names_the_next_task_with_its_parents() {
    let spec = "# Plan\n\n\
        - [x] Done one\n\
        * [X] Done two\n\
        + [!] Blocked\n\
        1. [ ] Parent\n   - [x] Child done\n   - [ ] Child next\n     - [ ] Grandchild\n\
        2) [ ] Later\n\n\
        ```\n- [ ] not a task in a fence\n```\n\n\
        | a | b |\n|---|---|\n| - [ ] not in a table | x |\n";
    let p = Project::new(spec);
    let j = status_json(&p);
    assert_eq!(
        j["counts"],
        json!({"pending": 4, "in_progress": 0, "done": 3, "blocked": 1})
    );
    assert_eq!(j["next"]["title"], "Grandchild");
    assert_eq!(j["next"]["line"], 9);
    assert_eq!(j["next"]["state"], "pending");
    assert_eq!(j["next"]["parents"], json!(["Parent", "Child next"]));
    assert_eq!(j["resume"], "research");
    assert_eq!(j["lock"], Value::Null);
    assert_eq!(j["spec"], "SPEC.md");
    assert_eq!(
        j["state_dir"].as_str().unwrap(),
        p.state_dir().display().to_string()
    );
}

#[test]
fn json_on_crlf_and_in_progress_documents() {
    let p = Project::new(
        "- [ ] First\r\n- [~] Working\r\n  > **Research:**\r\n  >   - a note\r\n- [ ] Third\r\n",
    );
    let j = status_json(&p);
    assert_eq!(
        j["counts"],
        json!({"pending": 2, "in_progress": 1, "done": 0, "blocked": 0})
    );
    assert_eq!(j["next"]["title"], "Working");
    assert_eq!(j["next"]["state"], "in_progress");
    assert_eq!(
        j["resume"], "implement",
        "a Research note means research is done"
    );
}

#[test]
fn nothing_left_is_null_next() {
    let p = Project::new("- [x] All\n- [!] Stuck\n");
    let j = status_json(&p);
    assert_eq!(j["next"], Value::Null);
    assert_eq!(j["resume"], Value::Null);
}

#[test]
fn human_summary_goes_to_stdout_and_stderr_stays_empty() {
    let p = Project::new("- [ ] Alpha\n- [x] Beta\n");
    let out = p.run(&["status"]).expect(0);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert_eq!(stderr, "");
    let stderr = stdout;
    assert!(
        stderr.contains("1 pending, 0 in progress, 1 done, 0 blocked"),
        "{stderr}"
    );
    assert!(stderr.contains("line 1: `Alpha`"), "{stderr}");
    assert!(stderr.contains("lock:      free"), "{stderr}");
    assert!(
        stderr.contains(&p.state_dir().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn dir_prints_only_the_state_folder() {
    let p = Project::new("- [ ] A\n");
    let out = p.run(&["status", "--dir"]).expect(0);
    let stdout = &out.stdout;
    assert_eq!(*stdout, format!("{}\n", p.state_dir().display()));
}

#[test]
fn missing_spec_exits_2_with_the_init_hint() {
    let p = Project::new("- [ ] A\n");
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    let out = p.run(&["status", "--json"]).expect(2);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(stderr.contains("`kern init`"), "{stderr}");
    let j: Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(j["error"]["message"], "`SPEC.md` not found", "{stdout}");
    assert_eq!(j["error"]["file"], "SPEC.md", "{stdout}");
    assert!(
        j["error"]["fix"].as_str().unwrap().contains("`kern init`"),
        "{stdout}"
    );
}

#[test]
fn malformed_spec_exits_2_with_each_diagnostic() {
    // Two tasks in progress are no error (parallel tasks leave them so): two diagnostics.
    let p = Project::new("- [ ] ok\n- [] empty\n- [ x] near miss\n- [~] a\n- [~] b\n");
    let out = p.run(&["status", "--json"]).expect(2);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let j: Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(
        j["error"],
        json!({"message": "malformed task marker `[]`", "file": "SPEC.md", "line": 2, "column": 3,
               "fix": "write `[ ]` (a space inside) for a pending task"}),
        "{stdout}"
    );
    assert_eq!(j["diagnostics"].as_array().unwrap().len(), 2, "{stdout}");
    assert!(stderr.contains("SPEC.md:2:3:"), "{stderr}");
    assert!(stderr.contains("SPEC.md:3:3:"), "{stderr}");
    assert!(!stderr.contains("SPEC.md:5:3"), "{stderr}");
    assert!(
        stderr.contains(" — "),
        "each diagnostic carries its fix: {stderr}"
    );
}

#[test]
fn binary_spec_exits_2_not_a_panic() {
    let p = Project::new("- [ ] A\n");
    std::fs::write(p.path().join("SPEC.md"), b"- [ ] A\n\xff\xfe\x00binary").unwrap();
    let out = p.run(&["status"]).expect(2);
    let stderr = &out.stderr;
    assert!(stderr.contains("SPEC.md:2:"), "{stderr}");
    assert!(
        stderr.starts_with("kern: error: SPEC.md:2:1: not valid UTF-8"),
        "named as given, not as an absolute path: {stderr}"
    );
    let out = p.run(&["status", "--json"]).expect(2);
    let stdout = &out.stdout;
    let j: Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(
        (
            &j["error"]["file"],
            &j["error"]["line"],
            &j["error"]["column"]
        ),
        (&json!("SPEC.md"), &json!(2), &json!(1)),
        "{stdout}"
    );
}

#[test]
fn spec_option_points_at_another_file() {
    let p = Project::new("- [ ] A\n");
    p.write("docs/TODO.md", "- [ ] From todo\n");
    let out = p
        .run(&["--spec", "docs/TODO.md", "status", "--json"])
        .expect(0);
    let stdout = &out.stdout;
    let j: Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(j["next"]["title"], "From todo");
}

#[test]
fn kerns_own_spec_is_valid_kern_format() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read(root.join("SPEC.md")).unwrap();
    let doc = kern::testing::spec::Document::from_bytes(&text).unwrap();
    let problems: Vec<String> = kern::testing::spec::validate(&doc)
        .iter()
        .map(|d| d.render("SPEC.md"))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(doc.tasks().len() >= 5);
    assert!(root.join("LEARNINGS.md").exists());
}
