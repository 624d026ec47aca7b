//! The property every fuzz input is held to, and a generator of SPEC.md-shaped inputs.
//!
//! The one decision a reader must know: the fuzz target does not only look for panics. For
//! every input that is text it parses, validates and selects, then applies every kind of
//! [`Edit`] to every task (up to [`MAX_TASKS`]) and checks each accepted edit from the outside:
//! the result re-parses to the same tasks, the task is still found, and the bytes changed are
//! only the boxes the edit may touch (state edits) or one insertion inside the task's item
//! (notes and subtasks) — or, when kern rewrote the task's notes block from an older shape into
//! its layout, changes inside the item after the box that keep every note's text. A refused
//! edit is fine; a violated property panics, which the fuzzer reports as a crash.

use kern::testing::spec::{Applied, Document, Edit, TaskState, apply_edit, select, validate};

/// Tasks per input that get every edit (bounds the time per input).
pub const MAX_TASKS: usize = 24;

/// Every edit kind, with texts that try to break out of their place.
fn every_edit() -> Vec<Edit> {
    vec![
        Edit::SetState(TaskState::Pending),
        Edit::SetState(TaskState::InProgress),
        Edit::SetState(TaskState::Done),
        Edit::SetState(TaskState::Blocked),
        Edit::AddResearch(vec![
            "a finding".into(),
            "- [ ] not a task\n> **Blocked:** no".into(),
            String::new(),
        ]),
        Edit::AddAttempt("failed:\n```\n- [x] fenced".into()),
        Edit::AddSkipped("> **Research:** not a note".into()),
        Edit::AddBlocked("  1. [ ] still text\r\n<div>".into()),
        Edit::InsertSubtasks(vec!["first sub".into(), "second [ ] sub".into()]),
        Edit::CompleteParents,
        Edit::BlockParents,
    ]
}

/// Runs one input through the whole SPEC.md engine; panics when a property fails.
pub fn check(data: &[u8]) {
    let Ok(doc) = Document::from_bytes(data) else {
        return;
    };
    let _ = validate(&doc);
    let _ = select(&doc);
    for index in 0..doc.tasks().len().min(MAX_TASKS) {
        let id = doc.identity(index);
        assert_eq!(doc.find(&id), Some(index), "identity finds the task");
        let _ = doc.task_block(index);
        for edit in every_edit() {
            if let Ok(applied) = apply_edit(&doc, &id, &edit) {
                check_applied(&doc, index, &edit, &applied);
            }
        }
    }
}

fn check_applied(doc: &Document, index: usize, edit: &Edit, applied: &Applied) {
    let (new_text, new_doc) = (applied.text.as_str(), &applied.document);
    let text = doc.text();
    let task = &doc.tasks()[index];
    let again = Document::parse(new_text);
    assert_eq!(
        again.tasks(),
        new_doc.tasks(),
        "the result re-parses the same"
    );
    assert!(
        again.find(&doc.identity(index)).is_some(),
        "the task is still found after {edit:?}"
    );
    let _ = validate(&again);
    let _ = select(&again);
    match edit {
        Edit::SetState(_) | Edit::CompleteParents | Edit::BlockParents => {
            assert_eq!(new_text.len(), text.len(), "{edit:?} keeps the length");
            let allowed: Vec<usize> = match edit {
                Edit::SetState(_) => vec![task.marker.start],
                _ => doc
                    .ancestors(index)
                    .iter()
                    .map(|&a| doc.tasks()[a].marker.start)
                    .collect(),
            };
            for (at, (a, b)) in text.bytes().zip(new_text.bytes()).enumerate() {
                if a != b {
                    assert!(allowed.contains(&at), "{edit:?} changed byte {at}");
                    assert!(TaskState::from_marker(b as char).is_some());
                }
            }
            assert_eq!(new_doc.tasks().len(), doc.tasks().len());
        }
        _ => {
            let prefix = text
                .bytes()
                .zip(new_text.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let suffix = text
                .bytes()
                .rev()
                .zip(new_text.bytes().rev())
                .take_while(|(a, b)| a == b)
                .count();
            assert!(new_text.len() > text.len(), "{edit:?} inserts");
            let item_end = line_end_after(text, task.item.end.saturating_sub(1)).max(task.item.end);
            if applied.rewrote_notes {
                let notes = |t: &kern::testing::spec::Task| -> Vec<(kern::testing::spec::NoteKind, String)> {
                    t.notes.iter().map(|n| (n.kind, n.text.clone())).collect()
                };
                let new_task = &new_doc.tasks()[new_doc.find(&doc.identity(index)).expect("found")];
                assert_eq!(
                    notes(new_task)[..task.notes.len()],
                    notes(task)[..],
                    "{edit:?} kept the notes"
                );
                assert_eq!(new_task.free_text, task.free_text, "{edit:?} kept the text");
                assert!(prefix >= task.marker.end, "{edit:?} changed before the box");
                assert!(
                    text.len() - suffix <= item_end,
                    "{edit:?} changed after the item"
                );
                return;
            }
            assert!(prefix + suffix >= text.len(), "{edit:?} only inserts");
            let lowest = text.len() - suffix;
            assert!(
                lowest.max(task.marker.end) <= prefix.min(item_end),
                "{edit:?} inserted outside the item: {lowest}..={prefix} vs {}..={item_end}",
                task.marker.end
            );
            let added = match edit {
                Edit::InsertSubtasks(t) => t.len(),
                _ => 0,
            };
            assert_eq!(new_doc.tasks().len(), doc.tasks().len() + added);
        }
    }
}

/// Just past the line ending of the line holding `offset` (the text's end when none).
fn line_end_after(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .get(offset..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        .map(|p| offset + p + 1)
        .unwrap_or(text.len())
}

/// xorshift64*: a tiny seeded generator for [`generate`].
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// A SPEC.md-shaped input: lines of tasks (every box, near misses included), notes, fences,
/// HTML, tables and text at assorted indentations, LF or CRLF, sometimes a stray byte.
pub fn generate(rng: &mut Rng) -> Vec<u8> {
    const INDENT: &[&str] = &["", "", "", " ", "  ", "   ", "    ", "\t", "      ", "  \t"];
    const BULLET: &[&str] = &["-", "-", "*", "+", "1.", "2)", "10.", ""];
    const BOX: &[&str] = &[
        "[ ]", "[ ]", "[ ]", "[x]", "[X]", "[~]", "[!]", "[-]", "[o]", "[]", "[ x]", "[~ ]",
        "[[ ]", "[docs]",
    ];
    const TITLE: &[&str] = &[
        "Alpha",
        "Beta task",
        "",
        "`code`",
        "**bold**",
        "a [link](x)",
        "é ü",
        "<b>",
        "x | y",
        "#",
    ];
    const NOTE: &[&str] = &[
        "> **Research:**",
        ">   - a finding",
        "> **Attempt 1:** failed",
        "> **Attempt 9:** again",
        "> **Skipped:** not now",
        "> **Blocked:** stuck",
        "> **Check:** cargo test",
        "> plain",
        ">",
        "> > nested",
    ];
    const BLOCK: &[&str] = &[
        "```",
        "~~~",
        "```rust",
        "<div>",
        "</div>",
        "<!--",
        "-->",
        "| a | b |",
        "|---|---|",
        "# Heading",
        "===",
        "---",
        "text",
        "",
        "",
        "    - [ ] code",
        "* item",
        "\u{0}",
    ];
    let le = if rng.next().is_multiple_of(3) {
        "\r\n"
    } else {
        "\n"
    };
    let lines = 1 + rng.next() % 40;
    let mut out = String::new();
    for _ in 0..lines {
        out.push_str(rng.pick(INDENT));
        match rng.next() % 9 {
            0..=3 => {
                out.push_str(rng.pick(BULLET));
                out.push(' ');
                out.push_str(rng.pick(BOX));
                out.push(' ');
                out.push_str(rng.pick(TITLE));
            }
            4 | 5 => out.push_str(rng.pick(NOTE)),
            _ => out.push_str(rng.pick(BLOCK)),
        }
        out.push_str(le);
    }
    if rng.next().is_multiple_of(4) {
        out.pop();
    }
    let mut bytes = out.into_bytes();
    if rng.next().is_multiple_of(50) && !bytes.is_empty() {
        let at = (rng.next() % bytes.len() as u64) as usize;
        bytes[at] = (rng.next() & 0xff) as u8;
    }
    bytes
}
