//! The tasks that came from the tracker, as `kern status` shows them: each task's issue
//! (its Issue note) with the issue's address, in `--json` (`issues`, `next.issue`) and on the
//! terminal.
//!
//! The one decision a reader must know: a task's issue is what its Issue note names now — the
//! same reading the import and the run make — so a note the person edited shows as edited, and
//! a note that names no issue is a warning of `kern status`, never a task without its issue.

use serde_json::{Value, json};

use crate::spec::{Document, Task};

/// How many of them the terminal lists one by one.
const SHOWN: usize = 8;

/// `{"name": "owner/repo#N", "url": …}` of `task`'s issue, or null.
pub(crate) fn issue_json(task: &Task) -> Value {
    task.issue().map_or(
        Value::Null,
        |i| json!({"name": i.to_string(), "url": i.url()}),
    )
}

/// Adds `issues` to `kern status --json`: every task whose Issue note names an issue, in the
/// file's order, with its line, state and the issue's name and address.
pub(crate) fn add_json(json: &mut Value, doc: &Document) {
    let issues: Vec<Value> = doc
        .tasks()
        .iter()
        .filter_map(|t| {
            let issue = t.issue()?;
            Some(json!({
                "title": t.title,
                "line": t.line,
                "state": t.effective_state().as_str(),
                "issue": issue.to_string(),
                "url": issue.url(),
            }))
        })
        .collect();
    if let Value::Object(map) = json {
        map.insert("issues".into(), json!(issues));
    }
}

/// The terminal's `issues:` lines: each task from the tracker (its line, marker, issue and
/// title), the open ones first, `fit` cutting a title to the width.
pub(crate) fn render(json: &Value, fit: &dyn Fn(&str, &str) -> String) -> String {
    let issues = json["issues"].as_array().cloned().unwrap_or_default();
    let mut open: Vec<&Value> = issues.iter().filter(|t| t["state"] != "done").collect();
    let done = issues.len() - open.len();
    open.extend(issues.iter().filter(|t| t["state"] == "done"));
    let mut out = String::new();
    for (k, t) in open.iter().take(SHOWN).enumerate() {
        let label = if k == 0 { "issues:" } else { "" };
        let marker = match t["state"].as_str() {
            Some("in_progress") => "[~]",
            Some("done") => "[x]",
            Some("blocked") => "[!]",
            _ => "[ ]",
        };
        let line = format!(
            "{label:<11}line {} {marker} {} {{title}}",
            t["line"],
            t["issue"].as_str().unwrap_or("")
        );
        out.push_str(&fit(&line, t["title"].as_str().unwrap_or("")));
        out.push('\n');
    }
    if issues.len() > SHOWN {
        out.push_str(&format!(
            "           … and {} more, {done} of them done in all (`kern status --json` lists them all)\n",
            issues.len() - SHOWN
        ));
    }
    out
}

/// What `kern -n --tracker github` says the tracker will hear of the next task: whether its
/// commit closes an issue, and whether `gh` (found at `gh`, or not) can comment on it.
pub(crate) fn dry_run_line(
    issue: Option<&crate::spec::IssueRef>,
    gh: Option<&std::path::Path>,
) -> String {
    let Some(issue) = issue else {
        return "github — the task names no issue (no Issue note): nothing to tell".to_string();
    };
    match gh {
        Some(gh) => format!(
            "github — its commit closes {issue}; `gh` ({}) comments on it when it is taken, skipped or blocked",
            gh.display()
        ),
        None => format!(
            "github — its commit closes {issue}; `gh` is not installed, so no comment: install the GitHub CLI and log in (`gh auth login`)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_with_its_issue() {
        let doc = Document::parse(
            "- [x] Old\n  > **Issue:** acme/app#3\n- [ ] Dark mode\n  > **Issue:** acme/app#12\n- [ ] Mine\n- [ ] Odd\n  > **Issue:** someday\n",
        );
        let mut json = json!({});
        add_json(&mut json, &doc);
        assert_eq!(
            json["issues"],
            json!([
                {"title": "Old", "line": 1, "state": "done", "issue": "acme/app#3", "url": "https://github.com/acme/app/issues/3"},
                {"title": "Dark mode", "line": 3, "state": "pending", "issue": "acme/app#12", "url": "https://github.com/acme/app/issues/12"},
            ])
        );
        let fit = |line: &str, title: &str| line.replace("{title}", &format!("`{title}`"));
        assert_eq!(
            render(&json, &fit),
            "issues:    line 3 [ ] acme/app#12 `Dark mode`\n           line 1 [x] acme/app#3 `Old`\n"
        );
        assert_eq!(
            issue_json(&doc.tasks()[1]),
            json!({"name": "acme/app#12", "url": "https://github.com/acme/app/issues/12"})
        );
        assert_eq!(issue_json(&doc.tasks()[2]), Value::Null);
        let issue = doc.tasks()[1].issue();
        assert_eq!(
            dry_run_line(issue.as_ref(), Some(std::path::Path::new("/usr/bin/gh"))),
            "github — its commit closes acme/app#12; `gh` (/usr/bin/gh) comments on it when it is taken, skipped or blocked"
        );
        assert!(
            dry_run_line(issue.as_ref(), None).contains("`gh` is not installed, so no comment")
        );
        assert!(dry_run_line(None, None).contains("the task names no issue"));
    }
}
