//! Validation of a parsed SPEC.md: what stops a run (errors) and what only deserves a word
//! (warnings), each with `FILE:LINE:COL` of the box's `[` and the fix.
//!
//! The one decision a reader must know: validation never changes the document and never
//! guesses. Errors are the near misses of kern's own boxes found by the parser (`[]`, `[ x]`),
//! an empty task title, a must-have kern cannot read, and tasks that wait for each other through
//! After notes (`after.rs`). Warnings: other tools' one-character boxes (`[P]`, `[?]`: the item is left
//! alone), and a done task with unfinished subtasks (the person may have meant it, and
//! selection skips the subtree anyway). Tasks held elsewhere (`[-]`, `[/]`) and sections a
//! heading closed are never errors. Lines that look like tasks but are not list items are
//! [`crate::spec::Document::unlisted_tasks`], reported by `status` and `-n`, not here.

use super::diagnostic::{Diagnostic, Severity};
use super::document::{Document, Quoted};
use super::marker::TaskState;

/// Every problem of the document, sorted by position (errors before warnings on one spot).
pub fn validate(doc: &Document) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = doc.problems().to_vec();
    out.extend_from_slice(doc.foreign_boxes());
    let tasks = doc.tasks();
    for t in tasks {
        if t.title.is_empty() {
            out.push(Diagnostic {
                severity: Severity::Error,
                line: t.line,
                column: t.column,
                message: "task has no title".to_string(),
                fix: "write what is to be done after the marker".to_string(),
            });
        }
    }
    // A must-have kern cannot read would be skipped silently or fail every attempt: the
    // person hears of it before any agent runs. A done task's are never checked again: not a
    // word of them, at every start of every run after.
    for t in tasks.iter().filter(|t| t.state != TaskState::Done) {
        for note in t.notes.iter().filter(|n| n.kind == super::NoteKind::Must) {
            for parsed in super::must::parse(&note.text) {
                match parsed {
                    Err(problem) => out.push(Diagnostic {
                        severity: Severity::Error,
                        line: note.line,
                        column: 1,
                        message: format!("a Must note of task {}: {problem}", Quoted(&t.title)),
                        fix: "one must-have a line: file <path>, file !<path>, grep <path> <regex>, grep! <path> <regex>, run <command>".to_string(),
                    }),
                    // grep's own order, pattern first: kern reads it so only while no file
                    // has the pattern's name (pipeline/verify.rs); the person should know.
                    Ok(must @ super::must::MustHave::Grep { .. })
                        if super::must::path_looks_like_a_pattern(&must) =>
                    {
                        out.push(Diagnostic {
                            severity: Severity::Warning,
                            line: note.line,
                            column: 1,
                            message: format!(
                                "a Must note of task {}: `{must}` names its file second, as grep is written; kern reads the word after `grep` as the file, and the line in grep's order only while no file has that name",
                                Quoted(&t.title)
                            ),
                            fix: "write the file first: `grep <path> <regex>`".to_string(),
                        });
                    }
                    Ok(_) => {}
                }
            }
        }
    }
    // A Tests note kern does not read enforces nothing: say so, the words still reach the
    // agent with the task.
    for t in tasks {
        for note in t.notes.iter().filter(|n| n.kind == super::NoteKind::Tests) {
            if super::must::tests_note(&note.text) == super::must::TestsNote::Other {
                out.push(Diagnostic {
                    severity: Severity::Warning,
                    line: note.line,
                    column: 1,
                    message: format!(
                        "the Tests note of task {} is neither `read-only` nor `first`: kern enforces nothing of it",
                        Quoted(&t.title)
                    ),
                    fix: "write `> **Tests:** read-only` or `> **Tests:** first <command>`".to_string(),
                });
            }
        }
    }
    // An Issue note kern cannot read would leave the issue open and silent under --tracker.
    for t in tasks {
        if let Some(note) = t.issue_note()
            && t.issue().is_none()
        {
            out.push(Diagnostic {
                severity: Severity::Warning,
                line: note.line,
                column: 1,
                message: format!(
                    "the Issue note of task {} names no issue: `{}`",
                    Quoted(&t.title),
                    note.text.lines().next().unwrap_or("")
                ),
                fix: "write it as `owner/repo#N` or the issue's address".to_string(),
            });
        }
    }
    // Tasks that wait for each other through After notes: none of them can ever start.
    out.extend(super::after::ring_diagnostics(doc));
    // Several tasks in progress are fine: parallel tasks (`-j`) leave one chain each, and a
    // run killed in the middle must not find its own file refused. kern resumes them in
    // document order.
    for t in tasks {
        if t.state == TaskState::Done
            && t.closed_by.is_none()
            && t.children.iter().any(|&c| {
                let c = &tasks[c];
                c.state != TaskState::Done && c.kind == super::dialect::TaskKind::Kern
            })
        {
            out.push(Diagnostic {
                severity: Severity::Warning,
                line: t.line,
                column: t.column,
                message: format!(
                    "task {} is marked done but has unfinished subtasks",
                    Quoted(&t.title)
                ),
                fix: "mark the subtasks [x], or the task [ ]".to_string(),
            });
        }
    }
    out.sort_by_key(|d| (d.line, d.column, d.severity == Severity::Warning));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> Vec<String> {
        validate(&Document::parse(text))
            .iter()
            .map(|d| d.render("SPEC.md"))
            .collect()
    }

    #[test]
    fn table_of_documents_and_their_diagnostics() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("valid", "- [ ] a\n- [~] b\n  - [~] c\n    - [ ] d\n", &[]),
            (
                "held elsewhere is fine",
                "# T\n\n- [ ] a\n  - [-] b\n- [/] c\n",
                &[],
            ),
            (
                "another tool's marker",
                "# T\n\n- [ ] a\n  - [P] b\n",
                &[
                    "SPEC.md:4:5: warning: `[P]` is not one of kern's task markers: kern leaves this item alone — make it `[ ]` for kern to take it",
                ],
            ),
            (
                "near miss",
                "- [ ] a\n- [x ] b\n",
                &[
                    "SPEC.md:2:3: malformed task marker `[x ]` — use [ ], [~], [x] or [!]: exactly one character inside the brackets",
                ],
            ),
            (
                "in progress under a closed heading is not a second chain",
                "- [~] a\n## Done [x]\n- [~] b\n",
                &[],
            ),
            (
                "an optional task in progress beside another",
                "- [~] a\n- [~]* b\n",
                &[],
            ),
            (
                "done parent, optional or held child",
                "- [x] a\n  - [ ]* b\n  - [-] c\n",
                &[],
            ),
            (
                "empty title",
                "- [ ] a\n-  [ ]   \n",
                &["SPEC.md:2:4: task has no title — write what is to be done after the marker"],
            ),
            (
                "two chains, as parallel tasks leave them",
                "- [~] a\n- [ ] b\n  - [~] c\n",
                &[],
            ),
            (
                "siblings in progress, as parallel tasks leave them",
                "- [ ] p\n  - [~] a\n  - [~] b\n",
                &[],
            ),
            ("chain with a gap", "- [~] a\n  - [ ] b\n    - [~] c\n", &[]),
            (
                "done parent, open child",
                "- [x] a\n  - [ ] b\n  - [x] c\n",
                &[
                    "SPEC.md:1:3: warning: task `a` is marked done but has unfinished subtasks — mark the subtasks [x], or the task [ ]",
                ],
            ),
            (
                "several, sorted",
                "- [o] x\n- [~] a\n- [~] b\n- [ ]\n",
                &[
                    "SPEC.md:1:3: warning: `[o]` is not one of kern's task markers: kern leaves this item alone — make it `[ ]` for kern to take it",
                    "SPEC.md:4:3: task has no title — write what is to be done after the marker",
                ],
            ),
            ("code block is not checked", "```\n- [-] x\n```\n", &[]),
            (
                "a grep pattern in quotes is read as a shell reads it: no warning",
                "- [ ] a\n  > **Must:**\n  >\n  > - grep! x.txt \"hello world\"\n  > - grep x.json \"name\": 1\n",
                &[],
            ),
            (
                "grep's own order, the pattern first",
                "- [ ] a\n  > **Must:**\n  >\n  > - grep \"^x=1$\" config.txt\n",
                &[
                    "SPEC.md:2:1: warning: a Must note of task `a`: `grep \"^x=1$\" config.txt` names its file second, as grep is written; kern reads the word after `grep` as the file, and the line in grep's order only while no file has that name — write the file first: `grep <path> <regex>`",
                ],
            ),
            (
                "a done task's must-haves are never checked again: nothing said of them",
                "- [x] a\n  > **Must:**\n  >\n  > - grep \"^x=1$\" config.txt\n  > - exists config.txt\n",
                &[],
            ),
            (
                "Tests notes kern reads, and one it does not",
                "- [ ] a\n  > **Tests:** read-only\n- [ ] b\n  > **Tests:** first cargo test\n- [ ] c\n  > **Tests:** cover the empty input\n",
                &[
                    "SPEC.md:6:1: warning: the Tests note of task `c` is neither `read-only` nor `first`: kern enforces nothing of it — write `> **Tests:** read-only` or `> **Tests:** first <command>`",
                ],
            ),
            (
                "an Issue note that names an issue",
                "- [ ] a\n  > **Issue:** acme/app#12\n",
                &[],
            ),
            (
                "an Issue note that names none",
                "- [ ] a\n  > **Issue:** #12 of the app\n",
                &[
                    "SPEC.md:2:1: warning: the Issue note of task `a` names no issue: `#12 of the app` — write it as `owner/repo#N` or the issue's address",
                ],
            ),
        ];
        for (name, text, expected) in cases {
            assert_eq!(rendered(text), *expected, "{name}");
        }
    }

    #[test]
    fn severity_is_reported() {
        let d = validate(&Document::parse("- [x] a\n  - [ ] b\n"));
        assert_eq!(d.len(), 1);
        assert!(!d[0].is_error());
        let d = validate(&Document::parse("- [] a\n"));
        assert!(d[0].is_error());
        assert_eq!(
            d[0].to_string(),
            "SPEC.md:1:3: malformed task marker `[]` — write `[ ]` (a space inside) for a pending task"
        );
    }

    #[test]
    fn the_warning_label_is_left_to_a_caller_that_prints_its_own() {
        let d = validate(&Document::parse(
            "- [P] a
",
        ));
        let message = "`[P]` is not one of kern's task markers: kern leaves this item alone — make it `[ ]` for kern to take it";
        assert_eq!(
            d[0].render("SPEC.md"),
            format!("SPEC.md:1:3: warning: {message}")
        );
        assert_eq!(
            d[0].render_unlabelled("SPEC.md"),
            format!("SPEC.md:1:3: {message}")
        );
        let e = validate(&Document::parse(
            "- [] a
",
        ));
        assert_eq!(e[0].render_unlabelled("SPEC.md"), e[0].render("SPEC.md"));
    }
}
