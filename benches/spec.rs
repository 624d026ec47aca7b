//! Benchmarks of the SPEC.md engine on a generated 10,000-task file: what `kern status` and
//! `kern -n` pay before anything else (budget: 50 ms end to end, DESIGN.md section 13).
//!
//! The file is the worst case for selection: nested tasks with notes and free text, almost all
//! done, the first workable task near the end, so selection walks the whole document.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kern::testing::spec::{Document, Edit, TaskState, apply, select, validate};

/// A SPEC.md with `tasks` tasks: groups of a parent, three subtasks and a sub-subtask, with
/// Research and Attempt notes, free text, a code block per section, varied bullets.
fn generate(tasks: usize) -> String {
    let mut s = String::from("# Project\n\nWhat this is about, in a paragraph.\n\n");
    let mut n = 0;
    let mut group = 0;
    while n < tasks {
        if group % 100 == 0 {
            s.push_str(&format!(
                "## Section {}\n\n```sh\n- [ ] not a task\n```\n\n",
                group / 100
            ));
        }
        let done = n + 200 < tasks;
        let mark = if done { "x" } else { " " };
        let bullet = ["-", "*", "+"][group % 3];
        s.push_str(&format!(
            "{bullet} [{mark}] Task {group}: make the widget {n} faster\n  Free text describing the task, with `code` and a [link](http://example.com).\n  > **Research:**\n  >   - read `src/widget.rs`\n  >   - the hot loop is in `render`\n  > **Attempt 1:** tests failed\n"
        ));
        n += 1;
        for k in 0..3 {
            if n >= tasks {
                break;
            }
            s.push_str(&format!("  - [{mark}] Subtask {group}.{k}\n"));
            n += 1;
            if k == 1 && n < tasks {
                s.push_str(&format!(
                    "    1. [{mark}] Leaf {group}.{k}.0\n       > **Skipped:** later\n"
                ));
                n += 1;
            }
        }
        s.push('\n');
        group += 1;
    }
    s
}

fn spec(c: &mut Criterion) {
    let text = generate(10_000);
    let doc = Document::parse(&text);
    assert_eq!(doc.tasks().len(), 10_000);
    assert!(validate(&doc).is_empty());
    let selected = select(&doc).expect("a task is left");
    assert!(selected.task > 9_000);

    c.bench_function("parse 10k tasks", |b| {
        b.iter(|| Document::parse(black_box(&text)));
    });
    c.bench_function("validate 10k tasks", |b| {
        b.iter(|| validate(black_box(&doc)));
    });
    c.bench_function("select 10k tasks", |b| b.iter(|| select(black_box(&doc))));
    c.bench_function("parse+validate+select 10k tasks", |b| {
        b.iter(|| {
            let doc = Document::parse(black_box(&text));
            let diagnostics = validate(&doc);
            (select(&doc), diagnostics.len())
        });
    });
    let id = doc.identity(selected.task);
    c.bench_function("set state (verified) in 10k tasks", |b| {
        b.iter(|| apply(&doc, black_box(&id), &Edit::SetState(TaskState::InProgress)));
    });
}

criterion_group!(benches, spec);
criterion_main!(benches);
