//! Which tasks run together with `-j N` (DESIGN.md section 15), as a pure function.
//!
//! The one decision a reader must know: tasks are taken in selection order — the order one job
//! would take them in — skipping every task in a chain with one already running or chosen (a
//! task and its ancestor or descendant never run together), every task whose `After` note
//! names a task that is not done, and every later sibling of a running or chosen task: the
//! subtasks of one parent are a sequence (a decomposition returns them in order), unless each
//! of the two carries spec-kit's `[P]` tag. Different top-level chains run side by side. So
//! `-j 1` picks exactly what the serial loop picks, and a larger `-j` only adds the next
//! independent tasks.

use crate::spec::{self, Document, SelectOptions, Selection};

/// Up to `slots` tasks to start now, in order, beside the `running` ones (task indices).
pub(crate) fn pick(
    doc: &Document,
    running: &[usize],
    slots: usize,
    options: &SelectOptions,
) -> Vec<Selection> {
    let mut taken: Vec<usize> = running.to_vec();
    let mut picks = Vec::new();
    while picks.len() < slots {
        let in_a_taken_chain = |i: usize| {
            taken.iter().any(|&t| {
                t == i
                    || doc.ancestors(t).contains(&i)
                    || doc.ancestors(i).contains(&t)
                    || in_sequence(doc, t, i)
            })
        };
        let Some(selection) = spec::select_avoiding(doc, options, &in_a_taken_chain) else {
            break;
        };
        taken.push(selection.task);
        picks.push(selection);
    }
    picks
}

/// True when `a` and `b` (or an ancestor of each) are different subtasks of one parent and not
/// both tagged `[P]`: one runs after the other.
fn in_sequence(doc: &Document, a: usize, b: usize) -> bool {
    let tasks = doc.tasks();
    let chain = |i: usize| {
        let mut c = doc.ancestors(i);
        c.push(i);
        c
    };
    let (chain_a, chain_b) = (chain(a), chain(b));
    chain_a.iter().any(|&x| {
        chain_b.iter().any(|&y| {
            x != y
                && tasks[x].parent.is_some()
                && tasks[x].parent == tasks[y].parent
                && !(tasks[x].is_parallel() && tasks[y].is_parallel())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(text: &str, running: &[&str], slots: usize) -> Vec<String> {
        let doc = Document::parse(text);
        let running: Vec<usize> = running
            .iter()
            .map(|r| doc.tasks().iter().position(|t| t.title == *r).unwrap())
            .collect();
        pick(&doc, &running, slots, &SelectOptions::default())
            .into_iter()
            .map(|s| doc.tasks()[s.task].title.clone())
            .collect()
    }

    #[test]
    fn independent_tasks_run_together_and_chains_never() {
        let spec = "- [ ] a\n- [ ] b\n  - [ ] b1\n  - [ ] b2\n- [ ] c\n";
        assert_eq!(titles(spec, &[], 1), vec!["a"], "-j 1 is the serial pick");
        assert_eq!(titles(spec, &[], 3), vec!["a", "b1", "c"]);
        assert_eq!(titles(spec, &[], 9), vec!["a", "b1", "c"]);
        assert_eq!(titles(spec, &["a", "b1"], 1), vec!["c"]);
        // A parent never runs beside its own subtask.
        let parent = "- [ ] p\n  - [x] done\n- [~] q\n  - [~] q1\n";
        assert_eq!(titles(parent, &["q1"], 3), vec!["p"]);
    }

    #[test]
    fn sibling_subtasks_run_one_after_the_other_unless_tagged_p() {
        let spec = "- [ ] p\n  - [ ] p1\n  - [ ] p2\n    - [ ] p2a\n- [ ] q\n  - [ ] q1\n";
        assert_eq!(titles(spec, &[], 4), vec!["p1", "q1"]);
        assert_eq!(
            titles(spec, &["p1"], 4),
            vec!["q1"],
            "p2's subtree waits too"
        );
        let tagged = "- [ ] p\n  - [ ] [P] p1\n  - [ ] [P] p2\n  - [ ] p3\n";
        assert_eq!(titles(tagged, &[], 4), vec!["[P] p1", "[P] p2"]);
        let done = "- [ ] p\n  - [x] p1\n  - [ ] p2\n  - [ ] p3\n";
        assert_eq!(titles(done, &[], 4), vec!["p2"]);
    }

    #[test]
    fn after_notes_order_the_jobs() {
        let spec = "- [ ] schema\n- [ ] api\n  > **After:** schema\n- [ ] docs\n";
        assert_eq!(titles(spec, &[], 3), vec!["schema", "docs"]);
        let done = "- [x] schema\n- [ ] api\n  > **After:** schema\n- [ ] docs\n";
        assert_eq!(titles(done, &[], 3), vec!["api", "docs"]);
    }

    #[test]
    fn tasks_in_progress_are_resumed_first() {
        let spec = "- [ ] a\n- [~] b\n- [~] c\n- [ ] d\n";
        assert_eq!(titles(spec, &[], 3), vec!["b", "c", "a"]);
        assert_eq!(titles(spec, &["b"], 2), vec!["c", "a"]);
    }
}
