//! Which task kern works on next.
//!
//! The one decision a reader must know: only *workable* tasks are ever selected, and a task
//! with unfinished subtasks is never workable itself. A task is workable when it is pending
//! (or the deepest in-progress task), kern may take it (not held elsewhere by another tool, not
//! in a section a heading closed), no ancestor is done, blocked or held, and it has no subtasks
//! or all of them are done — a pending parent whose subtasks were all finished by hand is
//! selected so the agent can finish what the parent still asks. A parent whose remaining
//! subtasks are all blocked (none pending or in progress) is stuck, not workable: it needs a
//! person, like a blocked task.
//!
//! Order (DESIGN.md section 2): the in-progress chain first, resumed at its deepest `[~]` task
//! and descending to the first workable task below it; if that subtree holds nothing workable
//! (everything left there is blocked), selection falls through to the rest of the document.
//! Then the first workable task in document order without a Skipped note; then the first with
//! one; then optional tasks (`[ ]*`, and everything under one) the same way, unless
//! `--skip-optional` leaves them alone. As in Kiro, optional subtasks do not hold their parent
//! open (see `Edit::CompleteParents`), so the optional pass also looks under done parents; an
//! optional task kern already started (`[~]*`) is resumed like any other, so that no second
//! in-progress chain is ever begun. Blocked and held tasks and their subtrees are skipped, done
//! ones too outside the optional pass, and so are sections closed by a heading.

use std::fmt;

use super::document::{Document, TaskState};

/// How selection treats optional tasks, and which done tasks are not landed yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectOptions {
    /// `--skip-optional`: never start an optional task (`[ ]*`).
    pub skip_optional: bool,
    /// The titles of the tasks parked for review (`--review`: done with a Review note, their
    /// branch `kern/<task>` still there): their work is not on the branch yet, so a task whose
    /// After note names one waits until it is accepted.
    pub parked: Vec<String>,
}

/// Why a task was selected, in words for `kern -n` and `kern status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectReason {
    /// The task itself is the deepest in-progress task.
    InProgress,
    /// The first unfinished subtask below the in-progress task `parent`.
    UnderInProgress {
        /// The title of the deepest in-progress task.
        parent: String,
    },
    /// A parent whose subtasks are all done but which is not marked done itself.
    SubtasksDone,
    /// The first pending task in document order.
    FirstPending,
    /// Every workable task was skipped before; this is the first of them.
    FirstSkipped,
    /// Every other task is done, blocked or held: the first optional task (`[ ]*`).
    FirstOptional,
}

impl fmt::Display for SelectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectReason::InProgress => f.write_str("it is in progress: resuming it"),
            SelectReason::UnderInProgress { parent } => write!(
                f,
                "it is the next unfinished subtask of the in-progress task {}",
                super::document::quote_title(parent)
            ),
            SelectReason::SubtasksDone => {
                f.write_str("all its subtasks are done but it is not marked done")
            }
            SelectReason::FirstPending => f.write_str("it is the first pending task"),
            SelectReason::FirstSkipped => {
                f.write_str("every pending task was skipped before; this is the first skipped one")
            }
            SelectReason::FirstOptional => f.write_str(
                "every other task is done, blocked or held: this is the first optional task",
            ),
        }
    }
}

/// The selected task and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Index into [`Document::tasks`].
    pub task: usize,
    /// Why this one.
    pub reason: SelectReason,
}

/// The next task to work on, or `None` when nothing workable is left (optional tasks taken
/// last).
pub fn select(doc: &Document) -> Option<Selection> {
    select_with(doc, &SelectOptions::default())
}

/// [`select`] with options (`--skip-optional`).
pub(crate) fn select_with(doc: &Document, options: &SelectOptions) -> Option<Selection> {
    select_avoiding(doc, options, &|_| false)
}

/// [`select_with`], never taking a task `avoid` names (its subtasks may still be taken) — the
/// tasks parallel jobs already run and their chains (see `pipeline::schedule`). A task whose
/// `After` note names a task that is not done waits for it, with its subtasks, here and in
/// [`select_with`].
pub(crate) fn select_avoiding(
    doc: &Document,
    options: &SelectOptions,
    avoid: &dyn Fn(usize) -> bool,
) -> Option<Selection> {
    let tasks = doc.tasks();
    let waiting = waiting_for_after(doc, options);
    let avoid = |i: usize| {
        avoid(i) || waiting.contains(&i) || doc.ancestors(i).iter().any(|a| waiting.contains(a))
    };
    if let Some(deepest) = deepest_in_progress(doc, &avoid) {
        let end = subtree_end(doc, deepest);
        let found = first_workable(doc, deepest..end, Some(deepest), Pass::Required, &avoid)
            .or_else(|| first_workable(doc, deepest..end, Some(deepest), Pass::Optional, &avoid))
            .filter(|&(task, _)| {
                // Within a started optional chain, its own subtasks go on; a fresh optional
                // task elsewhere in the subtree waits for the optional pass like any other.
                !(options.skip_optional && is_optional(doc, task) && !is_optional(doc, deepest))
            });
        if let Some((task, _)) = found {
            let reason = if task == deepest {
                if tasks[task].children.is_empty() {
                    SelectReason::InProgress
                } else {
                    SelectReason::SubtasksDone
                }
            } else {
                SelectReason::UnderInProgress {
                    parent: tasks[deepest].title.clone(),
                }
            };
            return Some(Selection { task, reason });
        }
    }
    let all = 0..tasks.len();
    let (task, skipped, optional) =
        match first_workable(doc, all.clone(), None, Pass::Required, &avoid) {
            Some((task, skipped)) => (task, skipped, false),
            None if options.skip_optional => return None,
            None => {
                let (task, skipped) = first_workable(doc, all, None, Pass::Optional, &avoid)?;
                (task, skipped, true)
            }
        };
    let reason = if !tasks[task].children.is_empty() {
        SelectReason::SubtasksDone
    } else if optional {
        SelectReason::FirstOptional
    } else if skipped {
        SelectReason::FirstSkipped
    } else {
        SelectReason::FirstPending
    };
    Some(Selection { task, reason })
}

/// Why the unfinished tasks kern does not take are left (for `kern status` and `kern -n` when
/// nothing is selected): one sentence per pending or in-progress task, with its line, naming
/// what holds it — a title that says it waits, a done, blocked or held parent, a heading that
/// closed its section, an After note, or `--skip-optional`. Tasks that are simply waiting for
/// their own subtasks are left out.
pub(crate) fn why_not_taken(doc: &Document, options: &SelectOptions) -> Vec<String> {
    let tasks = doc.tasks();
    let waiting = waiting_for_after(doc, options);
    let mut out = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        if !t.state.is_unfinished() || t.state == TaskState::Blocked || !t.kind.is_kerns() {
            continue;
        }
        let q = super::document::quote_title(&t.title);
        let line = t.line;
        let why = if let Some(h) = t.closed_by {
            format!("the heading at line {h} marks its section done")
        } else if t.deferred && super::dialect::title_is_example(&t.title) {
            "it is an example (its title says so): replace it with a task of your own".into()
        } else if t.deferred {
            "its title says it waits (deferred, skipped, blocked, later, future, someday or out of scope)".into()
        } else if let Some(&a) = doc.ancestors(i).iter().rev().find(|&&a| {
            let p = &tasks[a];
            p.deferred || !p.kind.is_kerns() || p.state == TaskState::Blocked || {
                p.state == TaskState::Done && !is_optional(doc, i)
            }
        }) {
            let p = &tasks[a];
            let how = if p.deferred {
                "whose title says it waits".to_string()
            } else if !p.kind.is_kerns() {
                format!("held by another tool ([{}])", p.state_marker_shown())
            } else if p.state == TaskState::Blocked {
                "blocked [!]".to_string()
            } else {
                "marked [x]".to_string()
            };
            format!(
                "it is under {} (line {}), {how}",
                super::document::quote_title(&p.title),
                p.line
            )
        } else if waiting.contains(&i) {
            let parked: Vec<&str> = t
                .after()
                .into_iter()
                .filter(|a| options.parked.iter().any(|p| p == a))
                .collect();
            if parked.is_empty() {
                // A blocked task it waits for is named so: it will not end by itself.
                let named: Vec<String> = t
                    .after()
                    .into_iter()
                    .map(|a| {
                        match tasks
                            .iter()
                            .find(|o| o.title == a && o.state == TaskState::Blocked)
                        {
                            Some(b) => format!("{a} (line {}, blocked [!])", b.line),
                            None => a.to_string(),
                        }
                    })
                    .collect();
                format!("its After note waits for {}", named.join(", "))
            } else {
                format!(
                    "its After note waits for {}, parked for review: its work lands with `kern accept`",
                    parked.join(", ")
                )
            }
        } else if options.skip_optional && is_optional(doc, i) {
            "it is optional and --skip-optional leaves it alone".into()
        } else {
            continue;
        };
        out.push(format!("line {line} {q}: {why}"));
    }
    out
}

/// Which tasks a walk may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Tasks that are not optional.
    Required,
    /// Optional tasks and the tasks under them.
    Optional,
}

/// True for an optional task or a task under one.
fn is_optional(doc: &Document, task: usize) -> bool {
    let tasks = doc.tasks();
    tasks[task].is_optional() || doc.ancestors(task).iter().any(|&a| tasks[a].is_optional())
}

/// The tasks whose `After` notes name a task that is not done, or done and parked for review
/// (by title; a title no task has holds nothing back).
fn waiting_for_after(doc: &Document, options: &SelectOptions) -> Vec<usize> {
    let tasks = doc.tasks();
    (0..tasks.len())
        .filter(|&i| {
            tasks[i].after().iter().any(|title| {
                tasks.iter().any(|t| {
                    t.title == *title
                        && (t.state != TaskState::Done || options.parked.contains(&t.title))
                })
            })
        })
        .collect()
}

/// The deepest task of the first in-progress chain kern may take whose ancestors are neither
/// done, blocked nor held (an optional task's ancestors may be done), and that `avoid` does
/// not name; several chains (parallel tasks) are taken in document order.
fn deepest_in_progress(doc: &Document, avoid: &dyn Fn(usize) -> bool) -> Option<usize> {
    let tasks = doc.tasks();
    let mut from = 0;
    loop {
        let top = (from..tasks.len()).find(|&i| {
            let optional = is_optional(doc, i);
            tasks[i].state == TaskState::InProgress
                && tasks[i].is_takeable()
                && doc.ancestors(i).iter().all(|&a| {
                    let open = tasks[a].state.is_unfinished()
                        || (optional && tasks[a].state == TaskState::Done);
                    open && tasks[a].is_takeable()
                })
        })?;
        let mut deepest = top;
        for i in top + 1..subtree_end(doc, top) {
            if tasks[i].state == TaskState::InProgress
                && tasks[i].depth > tasks[deepest].depth
                && doc.ancestors(i).contains(&deepest)
            {
                deepest = i;
            }
        }
        if !avoid(deepest) {
            return Some(deepest);
        }
        from = deepest + 1;
    }
}

/// One past the last descendant of `task` (descendants directly follow a task).
fn subtree_end(doc: &Document, task: usize) -> usize {
    let tasks = doc.tasks();
    let depth = tasks[task].depth;
    (task + 1..tasks.len())
        .find(|&j| tasks[j].depth <= depth)
        .unwrap_or(tasks.len())
}

/// The first workable task of the pass in `range` without a Skipped note, else the first with
/// one; the flag says whether it is skipped. `allow_in_progress` is the one in-progress task
/// that may be selected itself (the deepest of the chain).
fn first_workable(
    doc: &Document,
    range: std::ops::Range<usize>,
    allow_in_progress: Option<usize>,
    pass: Pass,
    avoid: &dyn Fn(usize) -> bool,
) -> Option<(usize, bool)> {
    let tasks = doc.tasks();
    let mut first_skipped = None;
    let mut i = range.start;
    while i < range.end {
        let t = &tasks[i];
        let waits = pass == Pass::Required && t.is_optional();
        if pass == Pass::Optional && t.state == TaskState::Done && t.is_takeable() {
            // Optional subtasks may stay open under a done parent.
            i += 1;
            continue;
        }
        if !t.state.is_unfinished() || !t.is_takeable() || waits {
            // Done, blocked, held and heading-closed tasks take their subtree out of selection;
            // an optional subtree waits for the optional pass.
            i = subtree_end(doc, i);
            continue;
        }
        let in_pass = pass == Pass::Required || is_optional(doc, i);
        let children_done = t
            .children
            .iter()
            .all(|&c| tasks[c].state == TaskState::Done);
        // A task in progress is resumed through its chain; one of another chain (a parallel
        // job's, or left by a killed one) is taken as it stands.
        let self_allowed = (t.state == TaskState::Pending
            || allow_in_progress == Some(i)
            || (t.state == TaskState::InProgress && t.children.is_empty()))
            && !avoid(i);
        if in_pass && children_done && self_allowed {
            if !t.is_skipped() {
                return Some((i, false));
            }
            first_skipped.get_or_insert(i);
        }
        i += 1;
    }
    first_skipped.map(|i| (i, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selected(text: &str) -> Option<(String, String)> {
        let doc = Document::parse(text);
        select(&doc).map(|s| (doc.tasks()[s.task].title.clone(), s.reason.to_string()))
    }

    #[test]
    fn what_holds_the_tasks_kern_does_not_take() {
        let cases: &[(&str, &[&str])] = &[
            ("- [ ] a\n", &[]),
            (
                "- [x] p\n  - [ ] c\n",
                &["line 2 `c`: it is under `p` (line 1), marked [x]"],
            ),
            (
                "- [-] p\n  - [ ] c\n",
                &["line 2 `c`: it is under `p` (line 1), held by another tool ([-])"],
            ),
            (
                "- [ ] Pay (deferred)\n",
                &[
                    "line 1 `Pay (deferred)`: its title says it waits (deferred, skipped, blocked, later, future, someday or out of scope)",
                ],
            ),
            (
                "- [ ] Example: Pay\n",
                &[
                    "line 1 `Example: Pay`: it is an example (its title says so): replace it with a task of your own",
                ],
            ),
            (
                "## Done \u{2705}\n\n- [ ] a\n",
                &["line 3 `a`: the heading at line 1 marks its section done"],
            ),
            (
                "- [ ] api\n  > **After:** schema\n- [!] schema\n",
                &["line 1 `api`: its After note waits for schema (line 3, blocked [!])"],
            ),
            (
                "- [ ] api\n  > **After:** schema\n- [ ] schema\n  > **After:** api\n",
                &[
                    "line 1 `api`: its After note waits for schema",
                    "line 3 `schema`: its After note waits for api",
                ],
            ),
        ];
        for (text, expected) in cases {
            let doc = Document::parse(text);
            assert_eq!(
                why_not_taken(&doc, &SelectOptions::default()),
                *expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn legends_front_matter_and_deferred_titles_are_never_taken() {
        let legend = "## Status Legend\n\n- [ ] Pending\n- [x] Done\n- [~] Future\n\n## Tasks\n\n- [ ] real\n";
        assert_eq!(selected(legend).unwrap().0, "real");
        assert_eq!(Document::parse(legend).tasks().len(), 1);
        let label = "Legend:\n\n- [ ] Pending\n- [~] Future\n\nTasks:\n\n- [ ] real\n";
        assert_eq!(selected(label).unwrap().0, "real");
        let deferred =
            "- [ ] Pay \u{2014} SKIPPED (requires credentials)\n- [ ] BLOCKED: keys\n- [ ] real\n";
        assert_eq!(selected(deferred).unwrap().0, "real");
        let heading = "## \u{2705} Project tasks\n\n- [ ] a\n";
        assert_eq!(selected(heading).unwrap().0, "a");
    }

    #[test]
    fn an_after_note_naming_a_task_parked_for_review_waits_until_it_is_accepted() {
        let text = "- [x] schema\n  > **Review:** `kern/schema`\n- [ ] api\n  > **After:** schema\n- [ ] docs\n";
        let doc = Document::parse(text);
        let parked = SelectOptions {
            parked: vec!["schema".into()],
            ..SelectOptions::default()
        };
        let title = |s: Option<Selection>| s.map(|s| doc.tasks()[s.task].title.clone());
        assert_eq!(title(select_with(&doc, &parked)).as_deref(), Some("docs"));
        assert_eq!(
            why_not_taken(&doc, &parked),
            [
                "line 3 `api`: its After note waits for schema, parked for review: its work lands with `kern accept`"
            ]
        );
        // Accepted (its branch gone): the work is on the branch.
        let landed = SelectOptions::default();
        assert_eq!(title(select_with(&doc, &landed)).as_deref(), Some("api"));
        assert!(why_not_taken(&doc, &landed).is_empty());
    }

    #[test]
    fn selection_table() {
        let first = "it is the first pending task";
        let resume = "it is in progress: resuming it";
        let skipped = "every pending task was skipped before; this is the first skipped one";
        let done = "all its subtasks are done but it is not marked done";
        let optional = "every other task is done, blocked or held: this is the first optional task";
        type Case<'a> = (&'a str, &'a str, Option<(&'a str, &'a str)>);
        let cases: &[Case] = &[
            ("empty", "# nothing\n", None),
            ("all done", "- [x] a\n- [!] b\n", None),
            (
                "first pending",
                "- [x] a\n- [ ] b\n- [ ] c\n",
                Some(("b", first)),
            ),
            (
                "in progress wins",
                "- [ ] a\n- [~] b\n",
                Some(("b", resume)),
            ),
            (
                "descends into first unfinished subtask",
                "- [ ] a\n  - [x] a1\n  - [ ] a2\n    - [ ] a2i\n  - [ ] a3\n",
                Some(("a2i", first)),
            ),
            (
                "descends from the in-progress chain",
                "- [ ] z\n- [~] a\n  - [x] a1\n  - [ ] a2\n",
                Some((
                    "a2",
                    "it is the next unfinished subtask of the in-progress task `a`",
                )),
            ),
            (
                "deepest of the chain",
                "- [~] a\n  - [ ] a1\n  - [~] a2\n",
                Some(("a2", resume)),
            ),
            (
                "skipped comes last",
                "- [ ] a\n  > **Skipped:** too big\n- [ ] b\n",
                Some(("b", first)),
            ),
            (
                "only skipped left",
                "- [x] z\n- [ ] a\n  > **Skipped:** too big\n- [ ] b\n  > **Skipped:** no\n",
                Some(("a", skipped)),
            ),
            (
                "blocked and done subtrees are never entered",
                "- [!] a\n  - [ ] a1\n- [x] b\n  - [ ] b1\n- [ ] c\n",
                Some(("c", first)),
            ),
            (
                "parent with all subtasks done is selected itself",
                "- [ ] a\n  - [x] a1\n  - [X] a2\n- [ ] b\n",
                Some(("a", done)),
            ),
            (
                "parent whose rest is blocked is stuck",
                "- [ ] a\n  - [x] a1\n  - [!] a2\n- [ ] b\n",
                Some(("b", first)),
            ),
            (
                "stuck in-progress chain falls through",
                "- [~] a\n  - [!] a1\n- [ ] b\n",
                Some(("b", first)),
            ),
            (
                "in-progress under a done parent is ignored",
                "- [x] a\n  - [~] a1\n- [ ] b\n",
                Some(("b", first)),
            ),
            (
                "in-progress parent, all subtasks done",
                "- [~] a\n  - [x] a1\n",
                Some(("a", done)),
            ),
            (
                "subtask under non-task item",
                "- notes\n  - [ ] deep\n",
                Some(("deep", first)),
            ),
            (
                "held elsewhere is never taken, nor its subtasks",
                "- [-] a\n  - [ ] a1\n- [/] b\n- [ ] c\n",
                Some(("c", first)),
            ),
            ("only held left", "- [-] a\n- [/] b\n", None),
            (
                "a section a heading closed is never taken",
                "## Phase 1 [x]\n- [ ] a\n### Sub\n- [~] b\n## Phase 2\n- [ ] c\n",
                Some(("c", first)),
            ),
            (
                "optional tasks come after every other, skipped ones included",
                "- [ ]* a\n- [ ] b\n  > **Skipped:** no\n- [ ] c\n  - [ ]* c1\n  - [ ] c2\n",
                Some(("c2", first)),
            ),
            (
                "a parent with only optional subtasks open is not taken itself",
                "- [ ] p\n  - [x] p1\n  - [ ]* p2\n- [ ] q\n",
                Some(("q", first)),
            ),
            (
                "optional subtasks under a done parent are taken in the optional pass",
                "- [x] p\n  - [x] p1\n  - [ ]* p2\n  - [ ] p3\n- [!] q\n  - [ ]* q1\n",
                Some(("p2", optional)),
            ),
            (
                "an optional task kern started under a done parent is resumed",
                "- [x] p\n  - [~]* p1\n- [ ] q\n",
                Some(("p1", resume)),
            ),
            (
                "then the first optional task",
                "- [x] z\n- [ ]* a\n- [ ] c\n  - [ ]* c1\n  - [x] c2\n",
                Some(("a", optional)),
            ),
            (
                "a task under an optional one is optional",
                "- [ ]* a\n  - [ ] a1\n- [x] b\n",
                Some(("a1", optional)),
            ),
            (
                "an optional task kern started is resumed",
                "- [ ] a\n- [~]* b\n",
                Some(("b", resume)),
            ),
        ];
        for (name, text, expected) in cases {
            let expected = expected.map(|(t, r)| (t.to_string(), r.to_string()));
            assert_eq!(selected(text), expected, "{name}");
        }
    }

    #[test]
    fn skip_optional_leaves_optional_tasks_alone() {
        let skip = SelectOptions {
            skip_optional: true,
            ..SelectOptions::default()
        };
        let cases: &[(&str, Option<&str>)] = &[
            ("- [ ]* a\n- [x] b\n", None),
            ("- [ ]* a\n  - [ ] a1\n- [ ] b\n", Some("b")),
            ("- [~] p\n  - [ ]* p1\n- [ ] b\n", Some("b")),
            ("- [ ] a\n- [~]* b\n", Some("b")),
        ];
        for (text, expected) in cases {
            let doc = Document::parse(text);
            let got = select_with(&doc, &skip).map(|s| doc.tasks()[s.task].title.clone());
            assert_eq!(got.as_deref(), *expected, "{text:?}");
        }
    }

    #[test]
    fn after_notes_hold_a_task_back_until_their_task_is_done() {
        let text = "- [ ] Deploy\n  > **After:** Build\n- [ ] Build\n";
        assert_eq!(selected(text).unwrap().0, "Build");
        let done = "- [ ] Deploy\n  > **After:** Build\n- [x] Build\n";
        assert_eq!(selected(done).unwrap().0, "Deploy");
        let unknown = "- [ ] Deploy\n  > **After:** Nothing of that name\n";
        assert_eq!(selected(unknown).unwrap().0, "Deploy");
    }

    #[test]
    fn avoided_tasks_and_their_chains_are_passed_over() {
        let doc = Document::parse("- [~] a\n- [ ] b\n  - [ ] c\n- [~] d\n- [ ] e\n");
        let options = SelectOptions::default();
        let title = |s: Option<Selection>| s.map(|s| doc.tasks()[s.task].title.clone());
        assert_eq!(
            title(select_avoiding(&doc, &options, &|_| false)).as_deref(),
            Some("a")
        );
        // `a` runs elsewhere: the second chain, `d`, is resumed before new work.
        assert_eq!(
            title(select_avoiding(&doc, &options, &|i| i == 0)).as_deref(),
            Some("d")
        );
        assert_eq!(
            title(select_avoiding(&doc, &options, &|i| i == 0 || i == 3)).as_deref(),
            Some("c")
        );
        // Avoiding a parent leaves its subtasks free; the caller avoids whole chains.
        assert_eq!(
            title(select_avoiding(&doc, &options, &|i| [0, 1, 3].contains(&i))).as_deref(),
            Some("c")
        );
        assert_eq!(
            title(select_avoiding(&doc, &options, &|i| [0, 1, 2, 3].contains(&i))).as_deref(),
            Some("e")
        );
    }
}
