//! SPEC.md through the formatters people run on every commit (issue 20): the real prettier 3
//! (npm) and mdformat (PyPI), pinned by `.ci/install-test-tools`.
//!
//! - Every kind of edit kern makes (Research, Attempt, Skipped, Blocked, subtasks, markers,
//!   after a person's Check), in tight and loose lists, is a fixed point of both: the file is
//!   byte-identical after `prettier --write` and after `mdformat`.
//! - kern reads the old note layout (kern.sh, earlier kern) and whatever the formatters make of
//!   it the same way; its next note rewrites the block in its layout, which is again a fixed
//!   point.
//! - A SPEC.md in the old layout, formatted by prettier: a task that fails every time is blocked
//!   after `--max-attempts` attempts and the one under the decomposition request, numbered 1
//!   to 4, and the Check the formatter nested under
//!   a research bullet is enforced (end to end, prettier run again between the runs).
//! - Edits apply to a file a formatter rewrote since kern read it (the task found again by
//!   identity, also when the formatter re-spelled its title's emphasis).
//!
//! The tests install the pinned formatters themselves on first use (`.ci/install-test-tools`,
//! into a cache outside the repository); a failed install fails them with the installer's
//! message, and `KERN_SKIP_FORMATTERS=1` skips them instead.

use crate::support::{project, tools};

use std::path::{Path, PathBuf};
use std::process::Command;

use kern::testing::spec::{Document, Edit, NoteKind, SpecFile, TaskIdentity, TaskState};
use project::Project;
use serde_json::json;

/// A formatter: the program and the arguments before the files.
struct Formatter {
    name: &'static str,
    program: &'static str,
    args: &'static [&'static str],
}

const PRETTIER: Formatter = Formatter {
    name: "prettier",
    program: "prettier",
    args: &[
        "--write",
        "--no-config",
        "--no-editorconfig",
        "--log-level",
        "warn",
    ],
};

const MDFORMAT: Formatter = Formatter {
    name: "mdformat",
    program: "mdformat",
    args: &[],
};

/// True when the formatters are there (installed, pinned, on first use: `support::tools`);
/// false when `KERN_SKIP_FORMATTERS=1` says to skip. Panics with the installer's message when
/// they cannot be installed.
fn formatters_present() -> bool {
    if std::env::var("KERN_SKIP_FORMATTERS").is_ok_and(|v| v == "1") {
        eprintln!("skipped: KERN_SKIP_FORMATTERS=1");
        return false;
    }
    tools::registry_tools();
    true
}

/// Runs the formatter over the files, in place.
fn format(formatter: &Formatter, files: &[PathBuf]) {
    let mut cmd = Command::new(formatter.program);
    tools::registry_tools().apply(&mut cmd);
    let out = cmd.args(formatter.args).args(files).output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}{}",
        formatter.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each text formatted by the formatter (all in one run: the formatters start slowly).
fn formatted(formatter: &Formatter, texts: &[String]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = texts
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let path = dir.path().join(format!("spec{k}.md"));
            std::fs::write(&path, t).unwrap();
            path
        })
        .collect();
    format(formatter, &files);
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

/// kern's reading of a file, free of byte offsets: per task its title, state, kind, depth,
/// notes and free text.
fn reading(text: &str) -> Vec<String> {
    let doc = Document::parse(text);
    doc.tasks()
        .iter()
        .map(|t| {
            let notes: Vec<String> = t
                .notes
                .iter()
                .map(|n| format!("{:?}={:?}", n.kind, n.text))
                .collect();
            format!(
                "{} {:?} {:?} depth {} notes [{}] attempts {} check {:?} text {:?}",
                t.title,
                t.state,
                t.kind,
                t.depth,
                notes.join(", "),
                t.attempts(),
                t.check_command(),
                t.free_text
            )
        })
        .collect()
}

/// Applies the edits to the task titled `title`, one by one, and returns every text on the
/// way.
fn steps(mut text: String, title: &str, edits: &[Edit]) -> Vec<String> {
    let mut out = Vec::new();
    for edit in edits {
        let doc = Document::parse(&text);
        let index = doc
            .tasks()
            .iter()
            .position(|t| t.title == title)
            .unwrap_or_else(|| panic!("no task `{title}` in\n{text}"));
        let id = doc.identity(index);
        text = kern::testing::spec::apply(&doc, &id, edit)
            .unwrap_or_else(|e| panic!("{edit:?} on `{title}`: {e}\n{text}"));
        out.push(text.clone());
    }
    out
}

/// Every kind of edit kern makes, on a tight list or a loose one (blocks separated by blank
/// lines, as both formatters write a loose list).
fn every_edit_on(loose: bool) -> Vec<String> {
    let base = if loose {
        "# Plan\n\nIntro paragraph.\n\n- [x] Done first\n\n- [ ] Add the parser\n\n  Keep the API small.\n\n- [ ] Write the docs\n\n  > **Check:** test -f docs/index.md\n\n- [ ] Parent task\n\n  - [ ] Child one\n  - [ ] Child two\n\n- [ ] Last one\n"
    } else {
        "# Plan\n\nIntro paragraph.\n\n- [x] Done first\n- [ ] Add the parser\n  - Keep the API small.\n- [ ] Write the docs\n  > **Check:** test -f docs/index.md\n- [ ] Parent task\n  - [ ] Child one\n  - [ ] Child two\n- [ ] Last one\n"
    }
    .to_string();
    let mut all = vec![base.clone()];
    let parser = steps(
        base,
        "Add the parser",
        &[
            Edit::SetState(TaskState::InProgress),
            Edit::AddResearch(vec![
                "`src/parse.rs:10-40` holds the parser".into(),
                "Pattern: follow the builder in src/build.rs\nand keep its error type".into(),
                "Verify with `cargo test parse`".into(),
                "# not a heading, - not a bullet".into(),
            ]),
            Edit::AddAttempt(
                "the test `parse_empty` failed: expected Ok, got Err\n- see check.log\n1. first thing"
                    .into(),
            ),
            Edit::AddAttempt("again: `cargo test` exit 101".into()),
            Edit::SetState(TaskState::Pending),
            Edit::AddSkipped("needs a decision about the grammar".into()),
            Edit::SetState(TaskState::InProgress),
            Edit::InsertSubtasks(vec!["Split the lexer".into(), "Write the parser".into()]),
            Edit::AddBlocked("3 failed attempts — a person must look".into()),
            Edit::SetState(TaskState::Blocked),
        ],
    );
    let last = parser.last().unwrap().clone();
    all.extend(parser);
    let docs = steps(
        last,
        "Write the docs",
        &[
            Edit::SetState(TaskState::InProgress),
            Edit::AddResearch(vec!["docs live in docs/".into()]),
            Edit::AddAttempt("the check failed".into()),
        ],
    );
    let last = docs.last().unwrap().clone();
    all.extend(docs);
    let children = steps(
        last,
        "Child one",
        &[
            Edit::SetState(TaskState::Done),
            Edit::AddAttempt("late".into()),
        ],
    );
    let last = children.last().unwrap().clone();
    all.extend(children);
    let two = steps(
        last,
        "Child two",
        &[Edit::SetState(TaskState::Done), Edit::CompleteParents],
    );
    let last = two.last().unwrap().clone();
    all.extend(two);
    all.extend(steps(
        last,
        "Last one",
        &[Edit::AddResearch(vec!["only this".into()])],
    ));
    all
}

#[test]
fn every_edit_kern_makes_is_a_fixed_point_of_prettier_and_mdformat() {
    if !formatters_present() {
        return;
    }
    let mut texts = every_edit_on(false);
    texts.extend(every_edit_on(true));
    for formatter in [&PRETTIER, &MDFORMAT] {
        let bases = [
            every_edit_on(false).remove(0),
            every_edit_on(true).remove(0),
        ];
        assert_eq!(
            formatted(formatter, &bases),
            bases,
            "the test's starting files must be fixed points of {}",
            formatter.name
        );
        let after = formatted(formatter, &texts);
        for (before, after) in texts.iter().zip(&after) {
            assert_eq!(
                after, before,
                "{} changed kern's file:\n--- before\n{before}--- after\n{after}",
                formatter.name
            );
            assert_eq!(reading(after), reading(before));
        }
    }
    // The documents did get every note kind, in both list shapes.
    let last = Document::parse(texts.last().unwrap());
    let kinds: Vec<NoteKind> = last
        .tasks()
        .iter()
        .flat_map(|t| t.notes.iter().map(|n| n.kind))
        .collect();
    for kind in [
        NoteKind::Research,
        NoteKind::Attempt(1),
        NoteKind::Attempt(2),
        NoteKind::Skipped,
        NoteKind::Blocked,
        NoteKind::Check,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} in {kinds:?}");
    }
}

/// SPEC.md files in kern's old note layout (kern.sh, earlier kern).
fn old_layouts() -> Vec<String> {
    vec![
        "# Plan\n\n- [~] Add the parser\n  > **Research:**\n  >   - read src/lib.rs\n  >     carefully\n  >   - Pattern: follow the builder\n  > **Attempt 1:** the test `foo` failed\n  >   second line\n  > **Attempt 2:** again\n  > **Check:** cargo test foo\n- [ ] Next\n  > **Skipped:** later\n  > **Blocked:** stuck\n".to_string(),
        "- [ ] One\n\n  > **Research:**\n  >   - a\n  > **Check:** make check\n\n- [ ] Two\n  - [ ] Sub\n    > **Attempt 1:** x\n    > **Attempt 2:** y\n".to_string(),
    ]
}

#[test]
fn old_and_formatted_note_shapes_read_the_same_and_the_next_note_rewrites_them() {
    if !formatters_present() {
        return;
    }
    let old = old_layouts();
    for formatter in [&PRETTIER, &MDFORMAT] {
        let after = formatted(formatter, &old);
        let mut edited = Vec::new();
        for (before, after) in old.iter().zip(&after) {
            assert_ne!(
                after, before,
                "{} left the old layout alone",
                formatter.name
            );
            assert_eq!(
                reading(after),
                reading(before),
                "{} changed kern's reading:\n{after}",
                formatter.name
            );
            // kern's next note rewrites the block in its layout, which the formatters keep.
            let doc = Document::parse(after);
            let applied = kern::testing::spec::apply_edit(
                &doc,
                &doc.identity(0),
                &Edit::AddAttempt("next".into()),
            )
            .unwrap();
            assert!(applied.rewrote_notes, "{after}");
            let t = &applied.document.tasks()[0];
            assert_eq!(
                t.notes.last().map(|n| n.kind),
                Some(NoteKind::Attempt(t.attempts()))
            );
            edited.push(applied.text);
        }
        // A repository runs one formatter: its own output, edited by kern, stays as it is.
        for (before, after) in edited.iter().zip(&formatted(formatter, &edited)) {
            assert_eq!(
                after, before,
                "{} changed the rewritten block",
                formatter.name
            );
        }
    }
}

#[test]
fn edits_apply_to_a_file_a_formatter_rewrote_since_kern_read_it() {
    if !formatters_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("SPEC.md");
    std::fs::write(
        &path,
        "* [ ] Use the *fast* path\n  > **Research:**\n  >   - read src/fast.rs\n  > **Attempt 1:** slow\n+ [ ] Other __task__\n",
    )
    .unwrap();
    let (mut spec, doc) = SpecFile::load_as(&path, "SPEC.md").unwrap();
    let first: TaskIdentity = doc.identity(0);
    let second: TaskIdentity = doc.identity(1);
    format(&PRETTIER, std::slice::from_ref(&path));
    let formatted = std::fs::read_to_string(&path).unwrap();
    assert!(
        formatted.contains("- [ ] Use the _fast_ path"),
        "{formatted}"
    );
    let written = spec
        .apply_reporting(
            &first,
            &[
                Edit::SetState(TaskState::InProgress),
                Edit::AddAttempt("still slow".into()),
            ],
        )
        .unwrap();
    assert!(written.rewrote_notes);
    spec.apply(&second, &[Edit::SetState(TaskState::Done)])
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        "- [~] Use the _fast_ path\n  > **Research:**\n  >\n  > - read src/fast.rs\n  >\n  > **Attempt 1:** slow\n  >\n  > **Attempt 2:** still slow\n\n* [x] Other **task**\n"
    );
    format(&PRETTIER, std::slice::from_ref(&path));
    format(&MDFORMAT, std::slice::from_ref(&path));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

/// Runs `prettier --write SPEC.md` in the project.
fn prettier_in(p: &Project) {
    format(&PRETTIER, &[p.path().join("SPEC.md")]);
}

#[test]
fn an_old_layout_formatted_by_prettier_blocks_after_four_numbered_attempts_and_enforces_check() {
    if !formatters_present() {
        return;
    }
    let p = Project::new(
        "# Plan\n\n- [~] Make the gate pass\n  > **Research:**\n  >   - the gate looks for gate.txt\n  > **Check:** test -f gate-never-written.txt\n- [ ] Later\n",
    );
    prettier_in(&p);
    let formatted = p.read("SPEC.md");
    assert!(
        formatted.contains("  >   **Check:** test -f gate-never-written.txt\n"),
        "prettier nested the Check under the research bullet: {formatted}"
    );
    p.commit_all("formatted by prettier");
    // The agent always reports success; only the Check can fail the task.
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["look at the gate"]}},
        "implement": {"write": {"gate.txt": "{task}\n"}, "result": {"status": "SUCCESS", "summary": "wrote gate.txt"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Pass the gate"}}
    }}));
    let mut codes = Vec::new();
    // Three alike failures ask for decomposition; the fourth, under that request, blocks.
    for _ in 0..4 {
        let out = p.run(&["1", "0", "--max-attempts", "3"]).expect(4);
        let err = &out.stderr;
        assert!(
            err.contains("gate-never-written.txt"),
            "the Check ran: {err}"
        );
        codes.push(out.code);
        // The person's formatter runs again over kern's notes.
        prettier_in(&p);
    }
    let spec = p.read("SPEC.md");
    let doc = Document::parse(&spec);
    let t = &doc.tasks()[0];
    let attempts: Vec<NoteKind> = t
        .notes
        .iter()
        .map(|n| n.kind)
        .filter(|k| matches!(k, NoteKind::Attempt(_)))
        .collect();
    assert_eq!(
        attempts,
        [
            NoteKind::Attempt(1),
            NoteKind::Attempt(2),
            NoteKind::Attempt(3),
            NoteKind::Attempt(4)
        ],
        "{spec}"
    );
    assert_eq!(t.state, TaskState::Blocked, "{spec}");
    assert!(
        t.notes.iter().any(|n| n.kind == NoteKind::Blocked),
        "{spec}"
    );
    assert_eq!(t.check_command(), Some("test -f gate-never-written.txt"));
    assert_eq!(
        codes.last(),
        Some(&Some(4)),
        "a blocked task ends the run with 4: {codes:?}"
    );
    assert_eq!(p.log().len(), 2, "nothing was committed");
    // The file is in kern's layout now, and the formatter keeps it so.
    let before = p.read("SPEC.md");
    prettier_in(&p);
    assert_eq!(p.read("SPEC.md"), before);
}

/// The path of the fixture with `name` (the dialect fixtures double as formatter inputs).
fn dialect(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dialects")
        .join(name)
}

#[test]
fn other_tools_task_files_read_the_same_after_the_formatters() {
    if !formatters_present() {
        return;
    }
    let texts: Vec<String> = [
        "kiro-tasks.md",
        "speckit-tasks.md",
        "obsidian-tasks.md",
        "ralph-fix_plan.md",
    ]
    .iter()
    .map(|n| std::fs::read_to_string(dialect(n)).unwrap())
    .collect();
    for formatter in [&PRETTIER, &MDFORMAT] {
        for (before, after) in texts.iter().zip(&formatted(formatter, &texts)) {
            let (b, a) = (Document::parse(before), Document::parse(after));
            let shape = |d: &Document| -> Vec<(String, TaskState, String, bool)> {
                d.tasks()
                    .iter()
                    .map(|t| {
                        (
                            t.title.replace(['*', '_', '\\'], ""),
                            t.state,
                            format!("{:?}", t.kind),
                            t.closed_by.is_some(),
                        )
                    })
                    .collect()
            };
            assert_eq!(shape(&a), shape(&b), "{}:\n{after}", formatter.name);
        }
    }
}
