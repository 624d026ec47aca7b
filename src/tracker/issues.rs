//! `kern import github`'s decisions, pure: the issues `gh issue list --json` printed, which of
//! them SPEC.md lacks, and the task each becomes.
//!
//! Decisions a reader must know:
//! - An issue is in SPEC.md when a task's Issue note names it, whatever the task is called
//!   now and whatever its state: a renamed task, a done one, a blocked one all keep their
//!   issue out of the next import.
//! - New tasks come oldest issue first, the order they were filed in.
//! - The issue's text is kept as it was written (less control characters and the
//!   bidirectional ones that would show it in another order), cut at [`TEXT_LINES`] lines or
//!   [`TEXT_BYTES`] bytes with a last line that points to the issue for the rest, so that a
//!   long issue cannot crowd the task out of its prompt budget.
//! - Its checklist becomes the task's acceptance criteria: the checkbox items under a heading
//!   or label that names criteria (`Acceptance criteria`, `Done when`, …), else every
//!   top-level checkbox item of the text — but an item that only names another issue (`#12`,
//!   a task list of sub-issues) is no criterion.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde::Deserialize;

use crate::spec::{Document, IssueRef, NewTask};

/// The most lines of an issue's text a task keeps.
pub(crate) const TEXT_LINES: usize = 60;
/// The most bytes of an issue's text a task keeps.
pub(crate) const TEXT_BYTES: usize = 6 * 1024;
/// The most criteria a task takes from an issue.
const MAX_CRITERIA: usize = 30;
/// The most characters of a title or a criterion.
const MAX_LINE: usize = 300;

/// One issue as `gh issue list --json number,title,body,url` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Issue {
    /// Its number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its text (markdown), empty when it has none.
    #[serde(default)]
    pub body: String,
    /// Its web address, which names the repository.
    pub url: String,
}

/// What an import brings in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportPlan {
    /// The tasks to append, oldest issue first.
    pub new: Vec<NewTask>,
    /// The issues SPEC.md has already: the issue and the title of its task there.
    pub present: Vec<(IssueRef, String)>,
}

/// The issues of gh's JSON output; the error says what was wrong with it.
pub(crate) fn parse_list(stdout: &str) -> Result<Vec<Issue>, String> {
    serde_json::from_str(stdout.trim()).map_err(|e| {
        format!(
            "`gh issue list` printed something that is not its list of issues ({e}): {}",
            crate::text::truncate(&crate::text::clean(stdout.trim()), 200)
        )
    })
}

/// The tasks `issues` would add to `doc`: those whose issue no task of `doc` names.
pub(crate) fn plan(doc: &Document, issues: &[Issue]) -> ImportPlan {
    let named: Vec<(IssueRef, String)> = doc
        .tasks()
        .iter()
        .filter_map(|t| t.issue().map(|i| (i, t.title.clone())))
        .collect();
    let mut issues: Vec<&Issue> = issues.iter().collect();
    issues.sort_by_key(|i| i.number);
    issues.dedup_by_key(|i| i.url.clone());
    let mut plan = ImportPlan {
        new: Vec::new(),
        present: Vec::new(),
    };
    for issue in issues {
        let Some(task) = new_task(issue) else {
            continue;
        };
        match named.iter().find(|(i, _)| i.same(&task.issue)) {
            Some((i, title)) => plan.present.push((i.clone(), title.clone())),
            None => plan.new.push(task),
        }
    }
    plan
}

/// The task `issue` becomes; `None` when its address names no issue.
pub(crate) fn new_task(issue: &Issue) -> Option<NewTask> {
    let reference = IssueRef::from_url(&issue.url)?;
    let title = one_line(&issue.title);
    let title = if title.is_empty() {
        format!("Issue #{}", issue.number)
    } else {
        title
    };
    Some(NewTask {
        title,
        text: text_lines(&issue.body, &reference),
        criteria: criteria(&issue.body),
        issue: reference,
    })
}

/// The issue's text as the task keeps it: its lines (control characters gone, blank ends
/// trimmed), cut at [`TEXT_LINES`] or [`TEXT_BYTES`] with a last line that points to the rest.
pub(crate) fn text_lines(body: &str, issue: &IssueRef) -> Vec<String> {
    let clean = without_bidi(&crate::text::strip_controls(
        &body.replace("\r\n", "\n").replace('\r', "\n"),
    ));
    let mut lines: Vec<&str> = clean.lines().map(str::trim_end).collect();
    while lines.first().is_some_and(|l| l.is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut out: Vec<String> = Vec::new();
    let mut bytes = 0;
    let mut cut = false;
    for line in &lines {
        if out.len() == TEXT_LINES || bytes + line.len() > TEXT_BYTES {
            cut = true;
            break;
        }
        bytes += line.len() + 1;
        out.push((*line).to_string());
    }
    if cut {
        if out.is_empty() {
            // One line longer than the whole bound: its start.
            let first = lines.first().copied().unwrap_or_default();
            let end = (0..=TEXT_BYTES.min(first.len()))
                .rev()
                .find(|&i| first.is_char_boundary(i))
                .unwrap_or(0);
            out.push(first[..end].to_string());
        }
        out.push(format!(
            "[… cut here: the whole issue is at {}]",
            issue.url()
        ));
    }
    out
}

/// `text` on one line: whitespace runs one space, control characters gone, at most
/// [`MAX_LINE`] characters.
fn one_line(text: &str) -> String {
    let flat: String = without_bidi(text)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::truncate(&flat, MAX_LINE)
}

/// `text` without the characters that reorder how the text around them shows (bidirectional
/// embeddings, overrides and isolates): an issue anyone wrote must read in SPEC.md, on the
/// terminal and in a commit as it is stored.
fn without_bidi(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
        .collect()
}

/// The acceptance criteria in an issue's text (see the module docs): done or not, and the text.
pub(crate) fn criteria(body: &str) -> Vec<(bool, String)> {
    let body = body.replace("\r\n", "\n");
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TASKLISTS);
    // (in a criteria section, done, text) of every top-level checkbox item.
    let mut items: Vec<(bool, bool, String)> = Vec::new();
    let mut depth = 0usize;
    let mut quotes = 0usize;
    let mut heading: Option<String> = None;
    let mut criteria_heading = false;
    let mut paragraph: Option<String> = None;
    let mut label = false;
    let mut list_is_criteria = false;
    for (event, range) in Parser::new_ext(&body, options).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                criteria_heading = heading
                    .take()
                    .is_some_and(|h| crate::spec::names_criteria(&h));
            }
            Event::Start(Tag::Paragraph) if depth == 0 => paragraph = Some(String::new()),
            Event::End(TagEnd::Paragraph) if depth == 0 => {
                label = paragraph
                    .take()
                    .is_some_and(|p| crate::spec::names_criteria(&p));
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some(h) = &mut heading {
                    h.push_str(&text);
                } else if let Some(p) = &mut paragraph {
                    p.push_str(&text);
                }
            }
            Event::Start(Tag::List(_)) => {
                if depth == 0 {
                    list_is_criteria = criteria_heading || label;
                    label = false;
                }
                depth += 1;
            }
            Event::End(TagEnd::List(_)) => depth = depth.saturating_sub(1),
            Event::Start(Tag::BlockQuote(_)) => quotes += 1,
            Event::End(TagEnd::BlockQuote(_)) => quotes = quotes.saturating_sub(1),
            Event::TaskListMarker(done) if depth == 1 && quotes == 0 => {
                let line_end = body[range.end..]
                    .find('\n')
                    .map_or(body.len(), |n| range.end + n);
                let text = one_line(&body[range.end..line_end]);
                if !text.is_empty() && !only_names_an_issue(&text) {
                    items.push((list_is_criteria, done, text));
                }
            }
            _ => {}
        }
    }
    let labelled = items.iter().any(|(c, ..)| *c);
    items
        .into_iter()
        .filter(|(c, ..)| *c || !labelled)
        .take(MAX_CRITERIA)
        .map(|(_, done, text)| (done, text))
        .collect()
}

/// True for `#12`, `owner/repo#12` or an issue's address alone: a tracked sub-issue.
fn only_names_an_issue(text: &str) -> bool {
    let t = text.trim();
    let number = t
        .strip_prefix('#')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    number || (!t.contains(' ') && IssueRef::parse(t).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> Vec<Issue> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/gh-2.23.0/issue-list.stdout");
        parse_list(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_real_gh_list_is_read() {
        let issues = recorded();
        let numbers: Vec<u64> = issues.iter().map(|i| i.number).collect();
        assert_eq!(numbers, [9, 20, 17, 12]);
        assert_eq!(issues[3].title, "Add a dark mode");
        assert_eq!(issues[3].url, "https://github.com/acme/app/issues/12");
        assert!(
            parse_list("not json")
                .unwrap_err()
                .starts_with("`gh issue list` printed something that is not its list of issues")
        );
    }

    #[test]
    fn new_tasks_oldest_first_and_never_twice() {
        let doc =
            Document::parse("- [x] Renamed by hand\n  > **Issue:** ACME/app#12\n- [ ] Mine\n");
        let plan = plan(&doc, &recorded());
        let titles: Vec<&str> = plan.new.iter().map(|t| t.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Paginate `list` output",
                "Crash on an empty config file",
                "Show the version in the footer"
            ]
        );
        assert_eq!(plan.present.len(), 1);
        assert_eq!(plan.present[0].0.to_string(), "ACME/app#12");
        assert_eq!(plan.present[0].1, "Renamed by hand");
    }

    #[test]
    fn the_text_is_kept_and_cut_with_a_pointer_to_the_rest() {
        let issues = recorded();
        let long = new_task(&issues[0]).unwrap();
        assert_eq!(long.text.len(), TEXT_LINES + 1);
        assert_eq!(long.text[0], "Today `list` prints every row at once.");
        assert_eq!(
            long.text.last().unwrap(),
            "[… cut here: the whole issue is at https://github.com/acme/app/issues/9]"
        );
        assert_eq!(
            long.criteria,
            [
                (false, "`--page N` shows page N".to_string()),
                (false, "`--per-page` sets the size".to_string())
            ]
        );
        let crash = new_task(&issues[2]).unwrap();
        assert_eq!(crash.text[0], "Steps:");
        assert!(crash.text.contains(&"> **Check:** rm -rf ~".to_string()));
        assert_eq!(crash.criteria, [(false, "not a task".to_string())]);
        let odd = new_task(&Issue {
            number: 5,
            title: "Fix \u{202e}txt.exe\u{202c} and\tthe \u{7}`**bold**` [x] title".into(),
            body: "a \u{2067}hidden\u{2069} turn\r\n- [ ] it \u{202e}works".into(),
            url: "https://github.com/acme/app/issues/5".into(),
        })
        .unwrap();
        assert_eq!(odd.title, "Fix txt.exe and the `**bold**` [x] title");
        assert_eq!(odd.text, ["a hidden turn", "- [ ] it works"]);
        assert_eq!(odd.criteria, [(false, "it works".to_string())]);
        let empty = new_task(&issues[1]).unwrap();
        assert!(empty.text.is_empty() && empty.criteria.is_empty());
        let one_long_line = text_lines(&"x".repeat(TEXT_BYTES * 2), &empty.issue);
        assert_eq!(one_long_line.len(), 2);
        assert_eq!(one_long_line[0].len(), TEXT_BYTES);
    }

    #[test]
    fn criteria_under_their_heading_or_label_else_every_checkbox() {
        let cases: &[(&str, &[(bool, &str)])] = &[
            (
                "The settings page needs a dark theme.\r\n\r\n## Acceptance criteria\r\n\r\n- [ ] a toggle\r\n- [x] it survives a restart\r\n\r\nSee #3.",
                &[(false, "a toggle"), (true, "it survives a restart")],
            ),
            (
                "Plan:\n- [ ] step one\n\nDone when:\n- [ ] it works\n  - [ ] nested is no criterion\n",
                &[(false, "it works")],
            ),
            (
                "- [ ] one\n- [X] two\n* plain bullet\n",
                &[(false, "one"), (true, "two")],
            ),
            (
                "Tracked:\n- [ ] #41\n- [ ] acme/app#42\n- [ ] https://github.com/acme/app/issues/43\n- [ ] write the #41 docs\n",
                &[(false, "write the #41 docs")],
            ),
            ("```\n- [ ] in code\n```\n> - [ ] in a quote\n", &[]),
            ("no list at all", &[]),
        ];
        for (body, want) in cases {
            let want: Vec<(bool, String)> =
                want.iter().map(|(d, t)| (*d, (*t).to_string())).collect();
            assert_eq!(criteria(body), want, "{body:?}");
        }
    }
}
