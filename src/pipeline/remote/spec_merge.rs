//! SPEC.md when the target branch moves under a machine of `--remote`: the remote's text, with
//! this machine's own lines of the tasks it works on laid over it — a merge by task, pure.
//!
//! The one decision a reader must know: the unit is a task's own lines (its line, notes and
//! free text, up to its first subtask), never a line of text. Other machines change other
//! tasks' lines, often the very next line, which a line merge calls a conflict; a task is
//! claimed by one machine at a time, so its lines have one writer. A task keeps this
//! machine's lines when kern changed them here since `base` or when this machine holds it.

use std::ops::Range;

use crate::spec::{Document, TaskIdentity};

/// `theirs` with the own lines of every task that changed from `base` to `ours`, and of every
/// task in `held`, taken from `ours`. A task `theirs` lacks (removed by the person) stays out.
pub(crate) fn merge(base: &str, ours: &str, theirs: &str, held: &[TaskIdentity]) -> String {
    let (base, ours, theirs_doc) = (
        Document::parse(base),
        Document::parse(ours),
        Document::parse(theirs),
    );
    let mut laid: Vec<(Range<usize>, &str)> = Vec::new();
    for i in 0..ours.tasks().len() {
        let id = ours.identity(i);
        let mine = own_lines(&ours, i);
        let changed = base.find(&id).is_none_or(|b| own_lines(&base, b) != mine);
        if !changed && !held.contains(&id) {
            continue;
        }
        let Some(t) = theirs_doc.find(&id) else {
            continue;
        };
        let range = own_range(&theirs_doc, t);
        if theirs[range.clone()] != *mine {
            laid.push((range, mine));
        }
    }
    laid.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = theirs.to_string();
    for (range, text) in laid {
        out.replace_range(range, text);
    }
    out
}

/// A task's own lines: from its bullet to its first subtask (or the item's end).
fn own_range(doc: &Document, task: usize) -> Range<usize> {
    let t = &doc.tasks()[task];
    let end = t
        .children
        .first()
        .map_or(t.item.end, |&c| doc.tasks()[c].item.start);
    t.item.start..end
}

fn own_lines(doc: &Document, task: usize) -> &str {
    &doc.text()[own_range(doc, task)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(title: &str) -> TaskIdentity {
        let doc = Document::parse(&format!("- [ ] {title}\n"));
        doc.identity(0)
    }

    #[test]
    fn each_machine_keeps_its_own_tasks_lines_and_takes_the_rest() {
        let base = "- [ ] A\n- [ ] B\n- [ ] C\n";
        // Here: B is worked on; there: A was done by another machine.
        let ours = "- [ ] A\n- [~] B\n- [ ] C\n";
        let theirs = "- [x] A\n- [ ] B\n- [ ] C\n";
        let table: &[(&str, &str, &str, &[&str], &str)] = &[
            (base, ours, theirs, &[], "- [x] A\n- [~] B\n- [ ] C\n"),
            (base, base, theirs, &[], theirs),
            // A task held here keeps its lines even when base already had them.
            (ours, ours, theirs, &["B"], "- [x] A\n- [~] B\n- [ ] C\n"),
            (ours, ours, theirs, &[], theirs),
            // Notes travel with the task; a subtask's lines are its own.
            (
                "- [ ] P\n  - [ ] Q\n- [ ] R\n",
                "- [!] P\n  > **Blocked:** why\n  - [ ] Q\n- [ ] R\n",
                "- [ ] P\n  - [x] Q\n- [x] R\n",
                &[],
                "- [!] P\n  > **Blocked:** why\n  - [x] Q\n- [x] R\n",
            ),
            // A task the remote no longer has stays out.
            (base, ours, "- [x] A\n- [ ] C\n", &[], "- [x] A\n- [ ] C\n"),
        ];
        for (base, ours, theirs, held, want) in table {
            let held: Vec<TaskIdentity> = held.iter().map(|t| id(t)).collect();
            assert_eq!(
                merge(base, ours, theirs, &held),
                *want,
                "{ours:?} onto {theirs:?}"
            );
        }
    }
}
