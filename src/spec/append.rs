//! New tasks at the end of SPEC.md (`kern import`), each with its Issue note, the issue's
//! text and its criteria, written in kern's layout and verified by parsing the result, as every
//! edit of kern's is.
//!
//! Decisions a reader must know:
//! - The tasks go after the last line that is not blank; nothing before it changes by a byte.
//!   Right after a task list they continue it (no blank line); after anything else a blank
//!   line separates them. Where the end of the file is a place kern takes no tasks from (under
//!   a heading that says its section is done, a legend, a code block left open), the result
//!   would not read as pending tasks, and a heading `## Issues` (`# Issues` when a level-one
//!   heading closed the section) goes before them; a file that reads the new tasks in no way is
//!   refused with the reason.
//! - The issue's text is untrusted: it goes into a fenced code block inside the task, fenced
//!   by more backticks than any run in it, so nothing in it can become a task, a note (a
//!   `Check` that would run), a heading that closes a section, or a block left open. Its
//!   criteria, one line each, become the task's `Acceptance criteria:` checklist.

use pulldown_cmark::{Event, Options, Parser};

use super::diagnostic::{Diagnostic, Severity};
use super::document::{Document, LineEnding, normalise};
use super::issue::IssueRef;
use super::marker::TaskState;
use super::notes::{self, NoteKind};

/// A task kern adds at the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewTask {
    /// Its title: one line.
    pub title: String,
    /// The issue it comes from, for its Issue note.
    pub issue: IssueRef,
    /// The lines shown in its fenced block (the issue's text as the tracker gave it, cut to its
    /// bound by the caller); none for an issue without text.
    pub text: Vec<String>,
    /// Its acceptance criteria: done or not, and the text of each (one line).
    pub criteria: Vec<(bool, String)>,
}

/// What goes between the file's last line and the new tasks, tried in this order.
const SEPARATORS: [&str; 4] = ["", "\n", "\n## Issues\n\n", "\n# Issues\n\n"];

/// `doc`'s text with `tasks` appended and its parse, verified; else why it cannot be done,
/// pointing at the line where the block that runs to the end of the file starts.
pub(crate) fn append(doc: &Document, tasks: &[NewTask]) -> Result<(String, Document), Diagnostic> {
    let text = doc.text();
    let le = doc.line_ending();
    let at = insertion_point(text);
    let (head, tail) = text.split_at(at);
    let mut head = head.to_string();
    if !head.is_empty() && !head.ends_with('\n') {
        head.push_str(le.as_str());
    }
    let lines: String = tasks.iter().map(|t| render(t, le)).collect();
    let continues_a_list = doc
        .tasks()
        .iter()
        .rev()
        .find(|t| t.depth == 0)
        .is_some_and(|t| reaches(text, t.item.end, at));
    let mut last = String::new();
    for separator in SEPARATORS {
        if separator.is_empty() && !(continues_a_list || head.is_empty()) {
            continue;
        }
        let separator = if head.is_empty() {
            separator.trim_start_matches('\n')
        } else {
            separator
        };
        let new = format!(
            "{head}{}{lines}{tail}",
            separator.replace('\n', le.as_str())
        );
        let parsed = Document::parse(&new);
        match check(doc, &parsed, tasks) {
            Ok(()) => return Ok((new, parsed)),
            Err(why) => last = why,
        }
    }
    tracing::debug!(%last, "no way to append the tasks");
    Err(Diagnostic {
        severity: Severity::Error,
        line: last_block_line(text),
        column: 1,
        message: "kern cannot add the imported tasks at the end of the file: the block that starts here runs to its end and would swallow them".to_string(),
        fix: "close what is left open (a code block's fence, an HTML block's `-->`), then import again".to_string(),
    })
}

/// The line (1-based) where the last top-level block of `text` starts: the one the appended
/// tasks would join.
fn last_block_line(text: &str) -> usize {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TASKLISTS);
    options.insert(Options::ENABLE_TABLES);
    let mut depth = 0usize;
    let mut start = 0;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    start = range.start;
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            _ if depth == 0 => start = range.start,
            _ => {}
        }
    }
    text[..start].matches('\n').count() + 1
}

/// The byte offset just past the file's last line that is not blank (0 for a blank file).
fn insertion_point(text: &str) -> usize {
    let trimmed = text.trim_end_matches([' ', '\t', '\r', '\n']);
    if trimmed.is_empty() {
        return 0;
    }
    match text[trimmed.len()..].find('\n') {
        Some(nl) => trimmed.len() + nl + 1,
        None => text.len(),
    }
}

/// True when an item ending at `end` (trailing blank lines included) holds the last line that
/// is not blank, which ends at `at`: nothing but blanks lies between.
fn reaches(text: &str, end: usize, at: usize) -> bool {
    end >= at || text.get(end..at).is_some_and(|s| s.trim().is_empty())
}

/// One task's lines, in the file's line ending.
fn render(task: &NewTask, le: LineEnding) -> String {
    let le = le.as_str();
    let indent = "  ";
    let mut out = format!("- [ ] {}{le}", one_line(&task.title));
    out.push_str(&notes::quote_lines(
        &notes::layout(NoteKind::Issue, &task.issue.to_string()),
        indent,
        le,
    ));
    if !task.text.is_empty() {
        let longest = task
            .text
            .iter()
            .map(|l| longest_run(l, '`'))
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((longest + 1).max(3));
        out.push_str(&format!("{indent}{fence}{le}"));
        for line in &task.text {
            let line = line.trim_end();
            if line.is_empty() {
                out.push_str(le);
            } else {
                out.push_str(&format!("{indent}{line}{le}"));
            }
        }
        out.push_str(&format!("{indent}{fence}{le}"));
    }
    if !task.criteria.is_empty() {
        if task.text.is_empty() {
            // Right after the note, the label would be a lazy line of its quote.
            out.push_str(le);
        }
        out.push_str(&format!("{indent}Acceptance criteria:{le}"));
        for (done, text) in &task.criteria {
            let mark = if *done { 'x' } else { ' ' };
            out.push_str(&format!("{indent}- [{mark}] {}{le}", one_line(text)));
        }
    }
    out
}

/// `text` on one line, its whitespace runs one space, its control characters gone.
fn one_line(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    normalise(&flat)
}

/// The longest run of `c` in `line`.
fn longest_run(line: &str, c: char) -> usize {
    let mut best = 0;
    let mut run = 0;
    for x in line.chars() {
        run = if x == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// That `after` is `before` with exactly `tasks` added after its tasks, each reading as a
/// pending top-level task kern may take, with its issue and criteria.
fn check(before: &Document, after: &Document, tasks: &[NewTask]) -> Result<(), String> {
    let old = before.tasks();
    let new = after.tasks();
    if new.len() != old.len() + tasks.len() {
        return Err(format!(
            "the end of the file would read {} task{} instead of {}",
            new.len().saturating_sub(old.len()),
            if new.len().saturating_sub(old.len()) == 1 {
                ""
            } else {
                "s"
            },
            tasks.len()
        ));
    }
    for (a, b) in old.iter().zip(new) {
        if a.title != b.title || a.state != b.state || a.line != b.line || a.notes != b.notes {
            return Err(format!(
                "the task on line {} would read differently",
                a.line
            ));
        }
    }
    for (task, got) in tasks.iter().zip(&new[old.len()..]) {
        let title = one_line(&task.title);
        let criteria: Vec<(bool, String)> = task
            .criteria
            .iter()
            .map(|(done, text)| (*done, one_line(text)))
            .collect();
        let got_criteria: Vec<(bool, String)> = got
            .criteria
            .iter()
            .map(|c| (c.done, c.text.clone()))
            .collect();
        let ok = got.title == title
            && got.depth == 0
            && got.state == TaskState::Pending
            && got.kind.is_kerns()
            && got.children.is_empty()
            && got.notes.len() == 1
            && got.notes[0].text == task.issue.to_string()
            && got_criteria == criteria;
        if !ok {
            return Err(format!(
                "the task {} would not read as written",
                super::Quoted(&title)
            ));
        }
        if got.closed_by.is_some() {
            return Err(format!(
                "the end of the file is in a section the heading on line {} closed",
                got.closed_by.unwrap_or_default()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(n: u64) -> IssueRef {
        IssueRef {
            host: None,
            owner: "acme".into(),
            repo: "app".into(),
            number: n,
        }
    }

    fn task(n: u64, title: &str, text: &[&str], criteria: &[(bool, &str)]) -> NewTask {
        NewTask {
            title: title.into(),
            issue: issue(n),
            text: text.iter().map(|l| (*l).to_string()).collect(),
            criteria: criteria
                .iter()
                .map(|(d, t)| (*d, (*t).to_string()))
                .collect(),
        }
    }

    #[test]
    fn tasks_go_after_the_last_line_in_kerns_layout() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "a tight list is continued",
                "# Roadmap\n\n- [x] Old\n- [ ] Next\n",
                "# Roadmap\n\n- [x] Old\n- [ ] Next\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            ),
            (
                "trailing blank lines stay after the new tasks",
                "- [ ] Next\n\n\n",
                "- [ ] Next\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n\n\n",
            ),
            (
                "after a paragraph, a blank line",
                "# Roadmap\n\nNothing yet.",
                "# Roadmap\n\nNothing yet.\n\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            ),
            (
                "an empty file",
                "",
                "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            ),
            (
                "a done section gets a heading of its own",
                "## Shipped ✅\n\n- [x] Old\n",
                "## Shipped ✅\n\n- [x] Old\n\n## Issues\n\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            ),
            (
                "a level-one done heading needs a level-one heading",
                "# Done [x]\n\n- [x] Old\n",
                "# Done [x]\n\n- [x] Old\n\n# Issues\n\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            ),
            (
                "CRLF files get CRLF lines",
                "- [ ] Next\r\n",
                "- [ ] Next\r\n- [ ] Add a dark mode\r\n  > **Issue:** acme/app#12\r\n",
            ),
        ];
        for (name, before, want) in cases {
            let doc = Document::parse(before);
            let (text, parsed) = append(&doc, &[task(12, "Add a dark mode", &[], &[])])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(text, *want, "{name}");
            let added = parsed.tasks().last().unwrap();
            assert!(added.is_takeable(), "{name}");
            assert_eq!(added.issue(), Some(issue(12)), "{name}");
        }
    }

    #[test]
    fn the_issues_text_is_fenced_and_its_criteria_are_the_tasks() {
        let doc = Document::parse("- [ ] Next\n");
        let hostile = task(
            17,
            "Crash on an  empty\tconfig",
            &[
                "Steps:",
                "",
                "```",
                "panic: index out of range",
                "```",
                "> **Check:** rm -rf ~",
                "- [ ] not a task",
                "## Done ✅",
                "<!-- an html block",
            ],
            &[
                (false, "it does not crash"),
                (true, "the error names  the file"),
            ],
        );
        let (text, parsed) = append(&doc, std::slice::from_ref(&hostile)).unwrap();
        assert_eq!(
            text,
            "- [ ] Next\n- [ ] Crash on an empty config\n  > **Issue:** acme/app#17\n  ````\n  Steps:\n\n  ```\n  panic: index out of range\n  ```\n  > **Check:** rm -rf ~\n  - [ ] not a task\n  ## Done ✅\n  <!-- an html block\n  ````\n  Acceptance criteria:\n  - [ ] it does not crash\n  - [x] the error names the file\n"
        );
        assert_eq!(parsed.tasks().len(), 2);
        let t = &parsed.tasks()[1];
        assert_eq!(t.check_command(), None);
        assert_eq!(t.criteria.len(), 2);
        assert!(t.is_takeable() && !t.loose);
        // A task after them is still a task, in no section a heading closed.
        let after = format!("{text}- [ ] Later by hand\n");
        let parsed = Document::parse(&after);
        assert_eq!(parsed.tasks().len(), 3);
        assert!(parsed.tasks()[2].is_takeable());
    }

    #[test]
    fn several_tasks_in_order_and_a_file_that_cannot_take_them() {
        let doc = Document::parse("- [ ] Next\n");
        let (text, parsed) = append(
            &doc,
            &[
                task(9, "One", &["x"], &[]),
                task(12, "Two", &[], &[(false, "y")]),
            ],
        )
        .unwrap();
        let titles: Vec<&str> = parsed.tasks().iter().map(|t| t.title.as_str()).collect();
        assert_eq!(titles, ["Next", "One", "Two"]);
        assert!(
            text.ends_with(
                "- [ ] One\n  > **Issue:** acme/app#9\n  ```\n  x\n  ```\n- [ ] Two\n  > **Issue:** acme/app#12\n\n  Acceptance criteria:\n  - [ ] y\n"
            ),
            "{text}"
        );
        // A code block left open at the end swallows whatever follows.
        let open = Document::parse("- [ ] Next\n\n```\nsome code\n");
        let e = append(&open, &[task(9, "One", &[], &[])]).unwrap_err();
        assert_eq!(
            e.render("SPEC.md"),
            "SPEC.md:3:1: kern cannot add the imported tasks at the end of the file: the block that starts here runs to its end and would swallow them — close what is left open (a code block's fence, an HTML block's `-->`), then import again"
        );
        let html = Document::parse("# Tasks\n\n- [ ] Next\n\n<!-- notes\n\nmore\n");
        assert_eq!(
            append(&html, &[task(9, "One", &[], &[])]).unwrap_err().line,
            5
        );
        // Criteria without text stay out of the note's quote.
        let (text, parsed) = append(&doc, &[task(3, "Three", &[], &[(false, "z")])]).unwrap();
        assert!(
            text.ends_with("  > **Issue:** acme/app#3\n\n  Acceptance criteria:\n  - [ ] z\n"),
            "{text}"
        );
        assert_eq!(parsed.tasks()[1].notes[0].text, "acme/app#3");
    }
}
