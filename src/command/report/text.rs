//! The report as a terminal page and as Markdown: the same facts in the same order — the
//! headline, what needs you, each task with its stages, the totals — in two dresses. Text from
//! outside kern (titles, notes, the agent's words) is cleaned of control characters, and in
//! Markdown its characters that would change the markup are escaped.

use std::fmt::Write as _;
use std::time::Duration;

use crate::reporter::{BOLD, GREEN, RED, YELLOW, paint};
use crate::stage::record::WaitKind;
use crate::state::run_report::{
    Attention, AttentionKind, EndState, Report, ReviewOutcome, RunReport, StageInfo, TaskEnd,
    TaskReport, Totals,
};
use crate::text::{clean, cost, duration, first_line, short_oid, truncate};

/// Longest note shown on a line, in characters.
const NOTE_WIDTH: usize = 140;

/// The terminal page; `color` adds SGR colours.
pub(super) fn terminal(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let p = |text: &str, sgr: &str| paint(color, text, sgr);
    if let Some(line) = super::night::first_line(report) {
        let _ = writeln!(out, "{line}");
        out.push('\n');
    } else if report.runs.len() > 1
        && let Some(last) = report.runs.last()
    {
        let _ = writeln!(
            out,
            "{} runs; the last: {}",
            report.runs.len(),
            clean(&last.headline)
        );
        out.push('\n');
    }
    for (i, run) in report.runs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let sgr = match run.end {
            EndState::Finished | EndState::AtDeadline if run.exit_code == Some(0) => GREEN,
            EndState::Finished | EndState::AtDeadline | EndState::Running | EndState::Restarted => {
                YELLOW
            }
            _ => RED,
        };
        let _ = writeln!(out, "{}", p(&clean(&run.headline), sgr));
        let _ = writeln!(out, "{}", run_line(run));
        out.push('\n');
        if !run.needs_you.is_empty() {
            let _ = writeln!(out, "{}", p("Needs you", BOLD));
            for a in &run.needs_you {
                let (symbol, sgr) = attention_symbol(a);
                let _ = writeln!(out, "  {} {}", p(symbol, sgr), clean(&a.text));
            }
            out.push('\n');
        }
        let _ = writeln!(out, "{}", p("Tasks", BOLD));
        if let Some(check) = &run.baseline_check {
            let _ = writeln!(
                out,
                "  baseline check `{}` {}",
                clean(&check.command),
                if check.passed { "passed" } else { "failed" }
            );
        }
        if run.tasks.is_empty() {
            let _ = writeln!(out, "  (no task was taken up)");
        }
        for t in &run.tasks {
            let (symbol, sgr) = task_symbol(t.end);
            let _ = writeln!(
                out,
                "  {} {}  {}",
                p(symbol, sgr),
                p(&clean(&t.title), BOLD),
                task_summary(t)
            );
            if let Some(issue) = &t.issue {
                let _ = writeln!(out, "      issue {}: {}", issue.name, issue.url);
            }
            for line in task_details(t) {
                let _ = writeln!(out, "      {line}");
            }
        }
        out.push('\n');
        let _ = writeln!(out, "{}", p("Totals", BOLD));
        for (label, value) in super::windows::run_rows(run) {
            let _ = writeln!(out, "  {label:<16} {value}");
        }
        for notice in &run.notices {
            let _ = writeln!(out, "  note: {}", clean(notice));
        }
    }
    if !report.watches.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "{}", p("Watched", BOLD));
        for w in &report.watches {
            for (symbol, line) in super::night::watch_lines(w) {
                let sgr = if symbol == "✗" { RED } else { YELLOW };
                let _ = writeln!(out, "  {} {line}", p(symbol, sgr));
            }
        }
    }
    if report.runs.len() > 1 {
        out.push('\n');
        let _ = writeln!(
            out,
            "{}",
            p(&format!("All {} runs", report.runs.len()), BOLD)
        );
        for (label, value) in totals_rows(&report.totals, None) {
            let _ = writeln!(out, "  {label:<16} {value}");
        }
    }
    out
}

/// The report as Markdown, for a pull request or a chat.
pub(super) fn markdown(report: &Report) -> String {
    let mut out = String::new();
    if let Some(line) = super::night::first_line(report) {
        let _ = writeln!(out, "**{}**\n", md_code(&line));
    }
    for w in &report.watches {
        let _ = writeln!(out, "### Watched\n");
        for (symbol, line) in super::night::watch_lines(w) {
            let _ = writeln!(out, "- {symbol} {}", md_code(&line));
        }
        out.push('\n');
    }
    for (i, run) in report.runs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "**{}**\n", md_code(&run.headline));
        let _ = writeln!(out, "{}\n", md(&run_line(run)));
        if !run.needs_you.is_empty() {
            let _ = writeln!(out, "### Needs you\n");
            for a in &run.needs_you {
                let _ = writeln!(out, "- {}", md_code(&a.text));
            }
            out.push('\n');
        }
        let _ = writeln!(out, "### Tasks\n");
        if let Some(check) = &run.baseline_check {
            let _ = writeln!(
                out,
                "Baseline check `{}` {}.\n",
                check.command.replace('`', "'"),
                if check.passed { "passed" } else { "failed" }
            );
        }
        if !run.tasks.is_empty() {
            out.push_str("| task | outcome | stages | cost | time |\n|---|---|---|---|---|\n");
            for t in &run.tasks {
                let stages: Vec<String> = t.stages.iter().map(stage_cell).collect();
                let _ = writeln!(
                    out,
                    "| {}{} | {} | {} | {} | {} |",
                    md_cell(&t.title),
                    t.issue
                        .as_ref()
                        .map_or_else(String::new, |i| format!(" ([{}]({}))", i.name, i.url)),
                    md_cell(&task_summary_plain(t)),
                    md_cell(&stages.join("; ")),
                    cost(t.cost_usd),
                    duration(Duration::from_millis(t.agent_ms + t.wait_ms))
                );
            }
            out.push('\n');
            for t in &run.tasks {
                let details = task_details(t);
                if details.is_empty() {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "<details><summary>{}</summary>\n",
                    html_escape(&t.title)
                );
                for line in details {
                    let _ = writeln!(out, "- {}", md_code(&line));
                }
                out.push_str("\n</details>\n\n");
            }
        }
        let _ = writeln!(out, "### Totals\n");
        for (label, value) in super::windows::run_rows(run) {
            if label.is_empty() {
                let _ = writeln!(out, "  - {}", md_code(&value));
            } else {
                let _ = writeln!(out, "- **{label}:** {}", md_code(&value));
            }
        }
        for notice in &run.notices {
            let _ = writeln!(out, "- note: {}", md_code(notice));
        }
    }
    out
}

/// `run <id> · claude · 2026-11-18T01:00:00Z → 2026-11-18T02:01:32Z · 6 of 10 iterations`.
fn run_line(run: &RunReport) -> String {
    let mut parts = vec![format!("run {}", run.run)];
    if !run.agent.is_empty() {
        parts.push(run.agent.clone());
    }
    match (run.started_at, run.last_at) {
        (Some(a), Some(b)) => parts.push(format!("{a} → {b}")),
        (Some(a), None) => parts.push(a.to_string()),
        _ => {}
    }
    parts.push(format!(
        "{} of {} iterations",
        run.iterations_run, run.iterations_asked
    ));
    clean(&parts.join(" · "))
}

fn attention_symbol(a: &Attention) -> (&'static str, &'static str) {
    match a.kind {
        AttentionKind::Stopped
        | AttentionKind::Vanished
        | AttentionKind::Blocked
        | AttentionKind::Failed => ("✗", RED),
        AttentionKind::Violation => ("!", RED),
        _ => ("•", YELLOW),
    }
}

fn task_symbol(end: TaskEnd) -> (&'static str, &'static str) {
    match end {
        TaskEnd::Committed | TaskEnd::DoneWithoutCommit => ("✓", GREEN),
        TaskEnd::Decomposed
        | TaskEnd::Skipped
        | TaskEnd::InProgress
        | TaskEnd::TakenAway
        | TaskEnd::Rejected => ("•", YELLOW),
        TaskEnd::Blocked | TaskEnd::Failed => ("✗", RED),
    }
}

/// What happened to the task, its cost and time, on its title line.
fn task_summary(t: &TaskReport) -> String {
    format!(
        "{}  {}  {}",
        clean(&task_summary_plain(t)),
        cost(t.cost_usd),
        duration(Duration::from_millis(t.agent_ms + t.wait_ms))
    )
}

/// `committed a1b2c3d "subject"`, `skipped: reason`, …
pub(super) fn task_summary_plain(t: &TaskReport) -> String {
    let text = match t.end {
        TaskEnd::Committed | TaskEnd::Rejected => match &t.commit {
            Some(c) => {
                let review = match (&c.review_branch, c.review) {
                    (None, _) => String::new(),
                    (Some(_), Some(ReviewOutcome::Accepted)) => ", accepted".into(),
                    (Some(b), Some(ReviewOutcome::Rejected)) => {
                        format!(" on `{b}`, rejected in review (reopened)")
                    }
                    (Some(b), _) => format!(" on `{b}`, waiting for review"),
                };
                format!("committed {} \"{}\"{review}", short_oid(&c.sha), c.subject)
            }
            None => "committed".into(),
        },
        TaskEnd::DoneWithoutCommit => "done, nothing to commit".into(),
        TaskEnd::Decomposed => format!(
            "decomposed into {} subtask{}",
            t.subtasks.len(),
            if t.subtasks.len() == 1 { "" } else { "s" }
        ),
        TaskEnd::Skipped => format!(
            "skipped: {}",
            t.skipped.last().map(|s| first_line(s)).unwrap_or_default()
        ),
        TaskEnd::Blocked => format!("blocked: {}", t.blocked.clone().unwrap_or_default()),
        TaskEnd::Failed => format!(
            "failed (attempt {}), retried on the next run",
            t.attempts.last().map_or(0, |a| a.attempt)
        ),
        TaskEnd::TakenAway => "taken away by the person during the run".into(),
        TaskEnd::InProgress => "in progress".into(),
    };
    truncate(&text, NOTE_WIDTH)
}

/// The lines under a task: stages, checks, attempts, violations, set-aside work, hand edits.
pub(super) fn task_details(t: &TaskReport) -> Vec<String> {
    let mut lines = Vec::new();
    for s in &t.stages {
        lines.push(stage_text(s));
    }
    lines.extend(super::windows::window_lines(t));
    lines.extend(
        t.paced
            .iter()
            .map(|line| truncate(&clean(line), NOTE_WIDTH)),
    );
    for c in &t.checks {
        lines.push(format!(
            "check `{}` {}",
            clean(&c.command),
            if c.passed { "passed" } else { "failed" }
        ));
    }
    if let Some(level) = &t.level {
        lines.push(format!("level {}", clean(level)));
    }
    for m in &t.must {
        lines.push(format!("must {}", truncate(&clean(m), NOTE_WIDTH)));
    }
    if let Some(tf) = &t.tests_first {
        let mark = |v: Option<bool>| match v {
            Some(true) => "✓",
            Some(false) => "✗",
            None => "–",
        };
        lines.push(truncate(
            &clean(&format!(
                "tests first: red {} → green {} (`{}`: {})",
                mark(tf.red),
                mark(tf.green),
                tf.command,
                tf.tests.join(", ")
            )),
            NOTE_WIDTH,
        ));
    }
    if !t.subtasks.is_empty() {
        lines.push(format!("subtasks: {}", clean(&t.subtasks.join("; "))));
    }
    for a in &t.attempts {
        lines.push(format!(
            "attempt {} failed: {}",
            a.attempt,
            truncate(&clean(&a.reason), NOTE_WIDTH)
        ));
    }
    for s in &t.skipped {
        lines.push(format!(
            "skipped: {}",
            truncate(&clean(&first_line(s)), NOTE_WIDTH)
        ));
    }
    for v in &t.violations {
        lines.push(format!(
            "violation in {}: {}; put back: {}{}",
            v.stage.name(),
            clean(&v.what.join("; ")),
            clean(&v.reverted.join(", ")),
            if v.saved.is_empty() {
                String::new()
            } else {
                format!("; saved at `{}`", clean(&v.saved.join("`, `")))
            }
        ));
    }
    for d in &t.denied {
        lines.push(format!("fence denied {}", truncate(&clean(d), NOTE_WIDTH)));
    }
    for s in &t.set_aside {
        lines.push(format!(
            "work set aside ({}) at `{}`: {}",
            clean(&s.why),
            clean(&s.git_ref),
            clean(&s.paths.join(", "))
        ));
    }
    for h in &t.hand_edits {
        lines.push(format!("hand edit: {}", clean(h)));
    }
    if let Some(c) = &t.commit {
        for l in &c.left_out {
            lines.push(format!(
                "left out of the commit: `{}` ({})",
                clean(&l.path),
                clean(&l.reason)
            ));
        }
    }
    lines
}

/// `implement  claude opus  30m  $0.82  succeeded  41 turns  1 retry  waited 21m (usage limit)`.
fn stage_text(s: &StageInfo) -> String {
    let agent = short_agent(&s.agent);
    let who = match &s.model {
        Some(m) => format!("{agent} {m}"),
        None => agent,
    };
    let mut text = format!(
        "{:<9}  {}  {}  {}  {}",
        s.stage.name(),
        clean(&who),
        duration(Duration::from_millis(s.duration_ms)),
        cost(s.cost_usd),
        s.outcome
    );
    if let Some(turns) = s.turns {
        let _ = write!(text, "  {turns} turn{}", if turns == 1 { "" } else { "s" });
    }
    if s.retries > 0 {
        let _ = write!(
            text,
            "  {} retr{}",
            s.retries,
            if s.retries == 1 { "y" } else { "ies" }
        );
    }
    for w in s.waits.iter().filter(|w| w.kind == WaitKind::UsageLimit) {
        let _ = write!(
            text,
            "  waited {} for a usage limit",
            duration(Duration::from_millis(w.duration_ms))
        );
    }
    if let Some(note) = &s.note {
        let _ = write!(
            text,
            "  — {}",
            truncate(&clean(&first_line(note)), NOTE_WIDTH)
        );
    }
    text
}

/// The agent as a stage line names it: `program:<path>` by the program's file name.
fn short_agent(agent: &str) -> String {
    match agent.strip_prefix("program:") {
        Some(path) => format!(
            "program:{}",
            std::path::Path::new(path)
                .file_name()
                .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
        ),
        None => agent.to_string(),
    }
}

/// A stage in a Markdown table cell: `implement $0.82 succeeded`.
fn stage_cell(s: &StageInfo) -> String {
    format!("{} {} {}", s.stage.name(), cost(s.cost_usd), s.outcome)
}

/// The totals' rows: label and value.
pub(super) fn totals_rows(t: &Totals, max_cost: Option<f64>) -> Vec<(&'static str, String)> {
    let mut rows = vec![(
        "tasks",
        format!(
            "{}: {} committed, {} decomposed, {} skipped, {} blocked",
            t.tasks, t.committed, t.decomposed, t.skipped, t.blocked
        ),
    )];
    rows.push(("failed attempts", t.failed_attempts.to_string()));
    rows.push((
        "cost",
        match max_cost {
            Some(limit) => format!("{} of {}", cost(t.cost_usd), cost(limit)),
            None => cost(t.cost_usd),
        },
    ));
    rows.push((
        "time",
        format!(
            "{} agent, {} waiting, {} wall",
            duration(Duration::from_millis(t.agent_ms)),
            duration(Duration::from_millis(t.wait_ms)),
            duration(Duration::from_millis(t.wall_ms))
        ),
    ));
    rows.push((
        "waits",
        format!(
            "{} usage-limit wait{}, {} retr{}",
            t.usage_limit_waits,
            if t.usage_limit_waits == 1 { "" } else { "s" },
            t.retries,
            if t.retries == 1 { "y" } else { "ies" }
        ),
    ));
    for (i, e) in t.most_expensive.iter().enumerate() {
        rows.push((
            if i == 0 { "most expensive" } else { "" },
            format!(
                "{} {} of `{}` (iteration {})",
                cost(e.cost_usd),
                e.stage.name(),
                clean(&e.task),
                e.iteration
            ),
        ));
    }
    rows
}

/// Markdown text with the characters that would change the markup escaped.
fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in clean(text).chars() {
        if "\\`*_[]<>|#".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Markdown text that keeps kern's own `code` spans (backticks stay), escaping the rest.
fn md_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in clean(text).split('`').enumerate() {
        if i % 2 == 1 {
            out.push('`');
            out.push_str(part);
            out.push('`');
        } else {
            out.push_str(&md(part));
        }
    }
    out
}

/// A Markdown table cell: escaped, and no line breaks.
fn md_cell(text: &str) -> String {
    md(text)
}

/// `<`, `>`, `&` and `"` as HTML entities.
pub(super) fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in clean(text).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::run_report::tests::night;

    fn golden(name: &str, text: &str) {
        let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("KERN_BLESS").is_some() {
            std::fs::write(&path, text).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            text, expected,
            "run KERN_BLESS=1 cargo test --lib report to accept"
        );
    }

    #[test]
    fn the_terminal_page_of_the_night() {
        let page = terminal(&night(), false);
        assert!(
            page.starts_with(
                "2 runs; the last: Finished, but 7 things need you — 1 task is blocked"
            ),
            "{page}"
        );
        assert!(!page.contains('\x1b'));
        golden("report-night.txt", &page);
        let coloured = terminal(&night(), true);
        assert!(
            coloured.contains("\x1b[31m✗\x1b[0m \x1b[1mFix the flaky test\x1b[0m"),
            "{coloured}"
        );
    }

    #[test]
    fn the_markdown_of_the_night() {
        golden("report-night.md", &markdown(&night()));
    }

    #[test]
    fn markdown_escapes_outside_text() {
        assert_eq!(md("a *b* <c> | d_e"), "a \\*b\\* \\<c\\> \\| d\\_e");
        assert_eq!(
            md_code("see `refs/kern/x_y` *now*"),
            "see `refs/kern/x_y` \\*now\\*"
        );
        assert_eq!(
            html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
