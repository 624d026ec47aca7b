//! `kern import github`: the open issues `gh issue list` names become tasks at the end of
//! SPEC.md, each once, with the Issue note that ties it to its issue (`tracker::issues` decides
//! which and how; `spec::append` writes them, verified). `-n` shows what would come in and
//! writes nothing; `--commit` commits SPEC.md with them and nothing else.
//!
//! The one decision a reader must know: the import writes SPEC.md as a person would — under a
//! running kern too (the run re-reads the file before each write and follows hand edits) —
//! and commits only when asked. Without a SPEC.md it starts one (`# Tasks`, then the tasks; its
//! folder made when missing). `--commit` takes the run lock (a run's commit and this one
//! never cross) and is refused while SPEC.md holds changes of the person's, which kern would
//! otherwise commit as its own.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::repository::CommitRequest;
use crate::settings::Settings;
use crate::spec::{NewTask, Quoted};
use crate::tracker::gh::{Gh, ListFilter, list_args};
use crate::tracker::issues::{self, ImportPlan, TEXT_LINES};
use crate::workspace::Workspace;

/// What `kern import` was asked.
#[derive(Debug, Clone)]
pub(crate) struct ImportRequest {
    /// Which issues.
    pub filter: ListFilter,
    /// Show, write nothing.
    pub dry_run: bool,
    /// Commit SPEC.md afterwards.
    pub commit: bool,
}

/// Runs `kern import github` in the repository of `settings`.
pub(crate) fn run(settings: &Settings, request: &ImportRequest) -> Result<()> {
    let ws = Workspace::open(settings)?;
    // No task list yet: the import starts one (after the list is read, so that a failing
    // `gh` leaves nothing behind).
    let missing = !ws.spec_path.exists();
    if !missing {
        // A task list kern cannot read stops the import before `gh` is asked; its warnings
        // are said (an Issue note that names no issue lets that issue in again).
        let (_, _, warnings) = ws.load_spec()?;
        if !settings.quiet {
            for warning in warnings {
                eprintln!("kern: {warning}");
            }
        }
    }
    let lock = if request.commit {
        if !missing && ws.repo.has_changes(&ws.spec_path) {
            return Err(Error::Usage(format!(
                "--commit: `{}` has changes that are not committed — commit them first, or import without --commit and commit it yourself",
                ws.spec_display
            )));
        }
        Some(ws.take_lock(settings)?.0)
    } else {
        None
    };
    let gh = Gh::new(
        settings.path_var.as_deref(),
        ws.repo.top(),
        settings.tracker_timeout,
    );
    let from = request
        .filter
        .repo
        .clone()
        .map_or_else(|| "this repository".to_string(), |r| format!("`{r}`"));
    let what = format!("listing the open issues of {from} (`gh issue list`)");
    let listed = gh
        .call(&list_args(&request.filter), None)
        .map_err(|f| Error::Tracker {
            what: what.clone(),
            why: f.why(),
            fix: f.fix().to_string(),
        })?;
    let found = issues::parse_list(&listed).map_err(|why| Error::Tracker {
        what,
        why,
        fix: "run the same `gh issue list` by hand to see what it prints".to_string(),
    })?;
    let say = |text: &str| {
        if !settings.quiet {
            eprintln!("kern: {text}");
        }
    };
    if missing && request.dry_run {
        let plan = issues::plan(&crate::spec::Document::parse(NEW_SPEC), &found);
        say(&format!(
            "{} does not exist: it would be made, with a `# Tasks` heading",
            ws.spec_display
        ));
        say(&dry_run_text(
            &plan,
            found.len(),
            &request.filter,
            &ws.spec_display,
        ));
        return Ok(());
    }
    if missing {
        if found.is_empty() {
            say(&format!(
                "nothing to import: {} — {} is not made",
                listed_text(0, &request.filter),
                ws.spec_display
            ));
            return Ok(());
        }
        // In a folder that is not there yet too, as `kern init` makes it.
        if let Some(folder) = ws.spec_path.parent() {
            std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
        }
        crate::atomic_file::write(&ws.spec_path, NEW_SPEC.as_bytes())?;
        say(&format!("made {} for the imported tasks", ws.spec_display));
    }
    let (mut file, doc, _) = ws.load_spec()?;
    let plan = issues::plan(&doc, &found);
    if request.dry_run {
        say(&dry_run_text(
            &plan,
            found.len(),
            &request.filter,
            &ws.spec_display,
        ));
        return Ok(());
    }
    let (written, added) = file.append(&plan.new)?;
    say(&imported_text(
        &written,
        &added,
        &plan,
        found.len(),
        &request.filter,
        &ws.spec_display,
    ));
    if request.commit && !added.is_empty() {
        let message = commit_message(&added, &ws.spec_display);
        let mut exclude: Vec<PathBuf> = ws
            .repo
            .dirty_paths(&[])?
            .into_iter()
            .map(PathBuf::from)
            .collect();
        exclude.push(ws.learnings_path.clone());
        let outcome = ws.repo.commit(&CommitRequest {
            message: &message,
            exclude: &exclude,
            no_verify: settings.no_verify,
            notify: Some(&|text: &str| eprintln!("kern: {text}")),
        })?;
        for note in &outcome.notes {
            say(note);
        }
        if let Some(sha) = outcome.sha {
            say(&format!(
                "committed {}: {}",
                crate::text::short_oid(&sha.to_string()),
                message.lines().next().unwrap_or("")
            ));
        }
    }
    drop(lock);
    Ok(())
}

/// The task list an import starts when there is none.
const NEW_SPEC: &str = "# Tasks\n";

/// What `-n` says: the tasks that would come in, and the issues SPEC.md has already.
fn dry_run_text(plan: &ImportPlan, listed: usize, filter: &ListFilter, spec: &str) -> String {
    let mut out = if plan.new.is_empty() {
        format!(
            "nothing would come in: {} — {spec} is not changed (-n)",
            listed_text(listed, filter)
        )
    } else {
        format!(
            "{} would come in at the end of {spec} (-n: nothing is written):",
            crate::text::count(plan.new.len(), "new task", "new tasks")
        )
    };
    for task in &plan.new {
        out.push_str(&format!(
            "\n  {:<14} {}{}",
            task.issue.to_string(),
            Quoted(&task.title),
            details(task)
        ));
    }
    out.push_str(&present_text(plan));
    out
}

/// What an import that wrote says: each new task with its line, and what was there already.
fn imported_text(
    written: &crate::spec::Document,
    added: &[NewTask],
    plan: &ImportPlan,
    listed: usize,
    filter: &ListFilter,
    spec: &str,
) -> String {
    if added.is_empty() {
        return format!(
            "nothing to import: {} — {spec} is unchanged{}",
            listed_text(listed, filter),
            present_text(plan)
        );
    }
    let mut out = format!(
        "imported {} into {spec} (written, not committed unless --commit: read them, then run kern):",
        crate::text::count(added.len(), "issue", "issues")
    );
    for task in added {
        let line = written
            .tasks()
            .iter()
            .rev()
            .find(|t| t.issue().is_some_and(|i| i.same(&task.issue)))
            .map_or(0, |t| t.line);
        out.push_str(&format!(
            "\n  line {line:<5} {:<14} {}{}",
            task.issue.to_string(),
            Quoted(&task.title),
            details(task)
        ));
    }
    out.push_str(&present_text(plan));
    out
}

/// `(2 criteria; its text cut at 60 lines)`, or nothing.
fn details(task: &NewTask) -> String {
    let mut parts = Vec::new();
    if !task.criteria.is_empty() {
        parts.push(crate::text::count(
            task.criteria.len(),
            "criterion",
            "criteria",
        ));
    }
    if task
        .text
        .last()
        .is_some_and(|l| l.starts_with("[… cut here"))
    {
        parts.push(format!("its text cut at {TEXT_LINES} lines or 6 KiB"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// `3 open issues, all in SPEC.md already`-style count of what gh listed, or which filters
/// matched no open issue.
fn listed_text(listed: usize, filter: &ListFilter) -> String {
    let flags = filter_flags(filter);
    match listed {
        0 if flags.is_empty() => "no issue is open".to_string(),
        0 => format!("no open issue matches {flags}"),
        n => format!(
            "{} open, all in the task list already",
            crate::text::count(n, "issue is", "issues are")
        ),
    }
}

/// The filters of `filter` as the person gave them: `--label kern --assignee @me`.
fn filter_flags(filter: &ListFilter) -> String {
    let mut flags: Vec<String> = Vec::new();
    for label in &filter.labels {
        flags.push(format!("--label {}", crate::text::shell_quote(label)));
    }
    for (flag, value) in [
        ("--milestone", &filter.milestone),
        ("--assignee", &filter.assignee),
        ("--repo", &filter.repo),
    ] {
        if let Some(value) = value {
            flags.push(format!("{flag} {}", crate::text::shell_quote(value)));
        }
    }
    flags.join(" ")
}

/// The issues that are in SPEC.md already, one line each after a heading line.
fn present_text(plan: &ImportPlan) -> String {
    if plan.present.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n  in the task list already ({}):",
        crate::text::count(plan.present.len(), "issue", "issues")
    );
    for (issue, title) in &plan.present {
        out.push_str(&format!(
            "\n  {:<14} as {}",
            issue.to_string(),
            Quoted(title)
        ));
    }
    out
}

/// The commit of an import: which issues came in.
fn commit_message(added: &[NewTask], spec: &str) -> String {
    let mut message = format!(
        "{spec}: {} from the tracker\n\n",
        crate::text::count(added.len(), "task", "tasks")
    );
    for task in added {
        message.push_str(&format!(
            "- {} {}\n",
            task.issue,
            crate::text::strip_controls(&task.title)
        ));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::IssueRef;

    fn task(n: u64, title: &str, criteria: usize) -> NewTask {
        NewTask {
            title: title.into(),
            issue: IssueRef::parse(&format!("acme/app#{n}")).unwrap(),
            text: Vec::new(),
            criteria: (0..criteria).map(|i| (false, format!("c{i}"))).collect(),
        }
    }

    #[test]
    fn what_the_person_reads() {
        let plan = ImportPlan {
            new: vec![task(9, "Paginate", 2), task(20, "Footer", 0)],
            present: vec![(IssueRef::parse("acme/app#12").unwrap(), "Dark mode".into())],
        };
        assert_eq!(
            dry_run_text(&plan, 3, &ListFilter::default(), "SPEC.md"),
            "2 new tasks would come in at the end of SPEC.md (-n: nothing is written):\n  acme/app#9     `Paginate` (2 criteria)\n  acme/app#20    `Footer`\n  in the task list already (1 issue):\n  acme/app#12    as `Dark mode`"
        );
        let none = ImportPlan {
            new: Vec::new(),
            present: plan.present.clone(),
        };
        assert_eq!(
            dry_run_text(&none, 1, &ListFilter::default(), "SPEC.md"),
            "nothing would come in: 1 issue is open, all in the task list already — SPEC.md is not changed (-n)\n  in the task list already (1 issue):\n  acme/app#12    as `Dark mode`"
        );
        let filter = ListFilter {
            labels: vec!["kern".into(), "good first issue".into()],
            assignee: Some("@me".into()),
            ..ListFilter::default()
        };
        assert_eq!(
            listed_text(0, &filter),
            "no open issue matches --label kern --label 'good first issue' --assignee @me"
        );
        assert_eq!(listed_text(0, &ListFilter::default()), "no issue is open");
        assert_eq!(
            commit_message(&plan.new, "SPEC.md"),
            "SPEC.md: 2 tasks from the tracker\n\n- acme/app#9 Paginate\n- acme/app#20 Footer\n"
        );
    }
}
