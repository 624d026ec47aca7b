//! The `After` notes as a graph of waits: a ring of them (tasks that wait for each other, so
//! none can start) is an error of SPEC.md, and a night whose open tasks wait on a blocked one
//! says so.
//!
//! The decision a reader must know: a task waits for every unfinished task its After note (or
//! an ancestor's) names by title, and a parent waits for its unfinished subtasks (it is done
//! only with them). A ring in those waits that holds an After note is reported as one
//! diagnostic — at the first task of the ring, naming each task with `FILE:LINE` and the After
//! notes to remove — so `status`, `-n`, `doctor` and a run all stop on it (exit 2), as on any
//! SPEC.md kern cannot follow.

use super::diagnostic::{Diagnostic, FILE, Severity};
use super::document::{Document, Quoted};
use super::marker::TaskState;
use super::notes::NoteKind;

/// One wait: task `from` waits for task `to`, through the After note at `note` (`None`: `to`
/// is a subtask of `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wait {
    from: usize,
    to: usize,
    note: Option<usize>,
    /// The task whose After note it is: `from`, or an ancestor whose wait `from` shares.
    holder: usize,
}

/// True for a task that is not done (pending, in progress or blocked).
fn open(doc: &Document, task: usize) -> bool {
    doc.tasks()[task].state != TaskState::Done
}

/// Every wait of `doc` between open tasks.
fn waits(doc: &Document) -> Vec<Wait> {
    let tasks = doc.tasks();
    let mut out = Vec::new();
    for from in (0..tasks.len()).filter(|&i| open(doc, i)) {
        let mut holders = doc.ancestors(from);
        holders.insert(0, from);
        for holder in holders {
            for note in tasks[holder]
                .notes
                .iter()
                .filter(|n| n.kind == NoteKind::After)
            {
                let title = note.text.trim();
                for to in (0..tasks.len()).filter(|&j| tasks[j].title == title && open(doc, j)) {
                    out.push(Wait {
                        from,
                        to,
                        note: Some(note.line),
                        holder,
                    });
                }
            }
        }
        for &child in &tasks[from].children {
            if open(doc, child) {
                out.push(Wait {
                    from,
                    to: child,
                    note: None,
                    holder: from,
                });
            }
        }
    }
    out
}

/// The rings of waits in `doc`, each as the waits around it from its first task (in document
/// order) back to it, the shortest such ring; each ring once.
fn rings(doc: &Document) -> Vec<Vec<Wait>> {
    let all = waits(doc);
    let mut found: Vec<Vec<Wait>> = Vec::new();
    for start in 0..doc.tasks().len() {
        if found
            .iter()
            .any(|ring| ring.iter().any(|w| w.from == start))
        {
            continue;
        }
        // Breadth first from `start` over tasks after it, back to `start`: the shortest ring
        // whose first task is `start`.
        let mut came: Vec<Option<Wait>> = vec![None; doc.tasks().len()];
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing = None;
        while let Some(at) = queue.pop_front() {
            for w in all.iter().filter(|w| w.from == at) {
                if w.to == start {
                    closing = Some(*w);
                    break;
                }
                if w.to > start && came[w.to].is_none() {
                    came[w.to] = Some(*w);
                    queue.push_back(w.to);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(last) = closing else {
            continue;
        };
        let mut ring = vec![last];
        let mut at = last.from;
        while at != start {
            let Some(w) = came[at] else {
                break;
            };
            ring.push(w);
            at = w.from;
        }
        ring.reverse();
        if ring.iter().any(|w| w.note.is_some()) {
            found.push(ring);
        }
    }
    found
}

/// `a`, `a or b`, `a, b or c`.
fn either(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// One error per ring of waits (see the module docs).
pub(crate) fn ring_diagnostics(doc: &Document) -> Vec<Diagnostic> {
    let tasks = doc.tasks();
    let at = |line: usize| format!("{FILE}:{line}");
    rings(doc)
        .into_iter()
        .map(|ring| {
            let mut first = ring[0].from;
            let mut message = format!(
                "{} ({}) waits for ",
                Quoted(&tasks[first].title),
                at(tasks[first].line)
            );
            if ring.len() == 1 && ring[0].holder != first {
                // A parent's After note names its own subtask, which shares the wait.
                let (parent, sub) = (ring[0].holder, first);
                first = parent;
                message = format!(
                    "{} ({}) waits for its own subtask {} ({})",
                    Quoted(&tasks[parent].title),
                    at(tasks[parent].line),
                    Quoted(&tasks[sub].title),
                    at(tasks[sub].line)
                );
            } else if ring.len() == 1 {
                message.push_str("itself");
            }
            for (i, w) in ring.iter().enumerate() {
                if ring.len() == 1 {
                    break;
                }
                if i > 0 {
                    message.push_str(", which waits for ");
                }
                if w.to == first {
                    message.push_str(&Quoted(&tasks[first].title).to_string());
                } else {
                    message.push_str(&format!(
                        "{} ({})",
                        Quoted(&tasks[w.to].title),
                        at(tasks[w.to].line)
                    ));
                }
            }
            message.push_str(": none of them can start");
            let mut notes: Vec<usize> = ring.iter().filter_map(|w| w.note).collect();
            notes.sort_unstable();
            notes.dedup();
            let lines: Vec<String> = notes.iter().map(|&l| at(l)).collect();
            let fix = if lines.len() == 1 {
                format!("remove its After note ({})", lines[0])
            } else {
                format!("remove one of their After notes ({})", either(&lines))
            };
            Diagnostic {
                severity: Severity::Error,
                line: tasks[first].line,
                column: tasks[first].column,
                message,
                fix,
            }
        })
        .collect()
}

/// The open tasks that wait, through After notes, on a blocked task (or one under a blocked
/// task) — directly or through tasks that wait themselves: one sentence each, with `file`'s
/// lines, naming what holds it. Empty when nothing waits on a blocked task.
pub(crate) fn waiting_on_blocked(doc: &Document, file: &str) -> Vec<String> {
    let tasks = doc.tasks();
    let blocked = |j: usize| {
        tasks[j].state == TaskState::Blocked
            || doc
                .ancestors(j)
                .iter()
                .any(|&a| tasks[a].state == TaskState::Blocked)
    };
    let after: Vec<Wait> = waits(doc)
        .into_iter()
        .filter(|w| w.note.is_some())
        .collect();
    // Fixed point: a task is held when it waits on a blocked task or on a held one.
    let mut held: Vec<Option<usize>> = vec![None; tasks.len()];
    loop {
        let mut changed = false;
        for w in &after {
            if held[w.from].is_none() && !blocked(w.from) && (blocked(w.to) || held[w.to].is_some())
            {
                held[w.from] = Some(w.to);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (0..tasks.len())
        .filter_map(|i| {
            let on = held[i]?;
            let how = if blocked(on) {
                if tasks[on].state == TaskState::Blocked {
                    "which is blocked [!]".to_string()
                } else {
                    "which is under a blocked task [!]".to_string()
                }
            } else {
                "which waits itself".to_string()
            };
            Some(format!(
                "{} ({file}:{}) waits for {} ({file}:{}), {how}",
                Quoted(&tasks[i].title),
                tasks[i].line,
                Quoted(&tasks[on].title),
                tasks[on].line
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> Vec<String> {
        ring_diagnostics(&Document::parse(text))
            .iter()
            .map(|d| d.render("SPEC.md"))
            .collect()
    }

    #[test]
    fn rings_of_waits_are_one_error_each() {
        let cases: &[(&str, &[&str])] = &[
            ("- [ ] A\n  > **After:** B\n- [ ] B\n", &[]),
            (
                "- [ ] A\n  > **After:** B\n- [ ] B\n  > **After:** A\n",
                &[
                    "SPEC.md:1:3: `A` (SPEC.md:1) waits for `B` (SPEC.md:3), which waits for `A`: none of them can start — remove one of their After notes (SPEC.md:2 or SPEC.md:4)",
                ],
            ),
            (
                "- [ ] A\n  > **After:** A\n",
                &[
                    "SPEC.md:1:3: `A` (SPEC.md:1) waits for itself: none of them can start — remove its After note (SPEC.md:2)",
                ],
            ),
            (
                // Through a subtask: B is done only with b, which waits for A.
                "- [ ] A\n  > **After:** B\n- [ ] B\n  - [ ] b\n    > **After:** A\n",
                &[
                    "SPEC.md:1:3: `A` (SPEC.md:1) waits for `B` (SPEC.md:3), which waits for `b` (SPEC.md:4), which waits for `A`: none of them can start — remove one of their After notes (SPEC.md:2 or SPEC.md:5)",
                ],
            ),
            // A done task breaks the ring.
            (
                "- [ ] A\n  > **After:** B\n- [x] B\n  > **After:** A\n",
                &[],
            ),
            // A parent's After holds its subtasks, but a parent waiting for its own subtask
            // through an After note is a ring.
            (
                "- [ ] P\n  > **After:** c\n  - [ ] c\n",
                &[
                    "SPEC.md:1:3: `P` (SPEC.md:1) waits for its own subtask `c` (SPEC.md:3): none of them can start — remove its After note (SPEC.md:2)",
                ],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(rendered(text), *want, "{text}");
        }
    }

    #[test]
    fn tasks_waiting_on_a_blocked_task_are_named() {
        let doc = Document::parse(
            "- [!] B\n- [ ] A\n  > **After:** B\n- [ ] C\n  > **After:** A\n- [ ] D\n  > **After:** E\n- [ ] E (later)\n",
        );
        assert_eq!(
            waiting_on_blocked(&doc, "SPEC.md"),
            [
                "`A` (SPEC.md:2) waits for `B` (SPEC.md:1), which is blocked [!]",
                "`C` (SPEC.md:4) waits for `A` (SPEC.md:2), which waits itself",
            ]
        );
        assert!(
            waiting_on_blocked(
                &Document::parse("- [ ] A\n  > **After:** B\n- [ ] B\n"),
                "S"
            )
            .is_empty()
        );
    }
}
