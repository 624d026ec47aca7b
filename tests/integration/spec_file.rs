//! SpecFile against real concurrent writers: no hand edit may be lost while kern writes.
//!
//! A shell loop appends lines to SPEC.md while the test applies edits through `SpecFile`; at the
//! end every appended line and every edit must be in the file exactly once. The edits keep
//! going for as long as the writer runs, so the two always overlap.

use std::path::Path;
use std::process::{Child, Command};

use kern::testing::spec::{Document, Edit, SpecFile, TaskState};

const APPENDS: usize = 300;
const MIN_EDITS: usize = 50;

fn spawn_writer(dir: &Path, script: &str) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .spawn()
        .expect("sh runs")
}

/// Applies Attempt notes to the first task until the writer is done (and at least
/// `MIN_EDITS` of them), applies one more after it exited, then checks the file.
fn run_race(script: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("SPEC.md");
    std::fs::write(
        &path,
        "# Spec\n\n- [ ] target\n  Some words.\n- [ ] other\n",
    )
    .unwrap();
    let (mut spec, doc) = SpecFile::load(&path).unwrap();
    let id = doc.identity(0);
    let mut writer = spawn_writer(dir.path(), script);
    let mut edits = 0;
    loop {
        edits += 1;
        spec.apply(&id, &[Edit::AddAttempt(format!("edit {edits}"))])
            .unwrap();
        if edits >= MIN_EDITS && writer.try_wait().unwrap().is_some() {
            break;
        }
    }
    assert!(writer.wait().unwrap().success());
    // One more write after the writer is gone: it folds in whatever reached a replaced file
    // that a writer still held open when kern last looked.
    edits += 1;
    spec.apply(&id, &[Edit::AddAttempt(format!("edit {edits}"))])
        .unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    for i in 1..=APPENDS {
        let line = format!("- [ ] appended {i}");
        let n = text.lines().filter(|l| *l == line).count();
        assert_eq!(n, 1, "`{line}` found {n} times in:\n{text}");
    }
    let doc = Document::parse(&text);
    let target = doc.find(&id).unwrap();
    let t = &doc.tasks()[target];
    assert_eq!(t.attempts() as usize, edits);
    let texts: Vec<String> = t.notes.iter().map(|n| n.text.clone()).collect();
    let expected: Vec<String> = (1..=edits).map(|k| format!("edit {k}")).collect();
    assert_eq!(texts, expected);
    assert_eq!(t.free_text, "Some words.");
    assert_eq!(doc.tasks().len(), 2 + APPENDS);
    assert!(doc.tasks().iter().all(|t| t.state == TaskState::Pending));
    assert!(
        text.starts_with("# Spec\n\n- [ ] target\n  Some words.\n  > **Attempt 1:** edit 1\n"),
        "{text}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "no temp file left behind: {leftovers:?}"
    );
}

#[test]
fn appends_racing_fifty_edits_all_survive() {
    run_race(&format!(
        "for i in $(seq {APPENDS}); do echo \"- [ ] appended $i\" >> SPEC.md; done"
    ));
}

#[test]
fn appends_through_a_held_descriptor_survive() {
    // The writer opens SPEC.md once and keeps writing into that file after kern replaced it.
    run_race(&format!(
        "exec 3>>SPEC.md; for i in $(seq {APPENDS}); do echo \"- [ ] appended $i\" >&3; sleep 0.01; done"
    ));
}

#[test]
fn edits_keep_crlf_and_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("SPEC.md");
    std::fs::write(&path, "- [ ] a\r\n- [ ] b\r\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (mut spec, doc) = SpecFile::load(&path).unwrap();
    spec.apply(
        &doc.identity(0),
        &[
            Edit::SetState(TaskState::InProgress),
            Edit::AddResearch(vec!["look".into()]),
            Edit::InsertSubtasks(vec!["one".into()]),
        ],
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "- [~] a\r\n  > **Research:**\r\n  >\r\n  > - look\r\n  - [ ] one\r\n- [ ] b\r\n"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}
