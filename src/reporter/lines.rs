//! The lines a run leaves behind: one per finished stage, and the end-of-run summary — their
//! words, columns and colours. Everything here is plain formatting of data the reporter hands
//! over; outside text in it has been cleaned already or is cleaned here.

use std::path::PathBuf;
use std::time::Duration;

use crate::stage::Stage;
use crate::text;

/// Longest note on a stage line, in characters.
pub(super) const NOTE_WIDTH: usize = 120;

/// One finished stage, as its summary line shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StageLine {
    /// The stage's outcome word: `SUCCESS`, `COMMIT`, `REJECT`, `FAILED`, `4 notes`, …
    pub outcome: String,
    /// How long the stage took.
    pub duration: Duration,
    /// What it cost, in USD.
    pub cost_usd: f64,
    /// The agent's turns, when it reported them.
    pub turns: Option<u64>,
    /// A short remark (the failure reason, the skip reason); its first line is shown.
    pub note: Option<String>,
    /// What the fence says of the stage: `unfenced (--sandbox off)`, `no kern fence
    /// (--sandbox agent)`, `fence denied 3`; `None` when fenced and nothing was denied.
    pub fence: Option<String>,
}

/// The end-of-run summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Summary {
    /// Tasks committed: title and short sha.
    pub committed: Vec<(String, String)>,
    /// Tasks whose commit waits on its branch for review (`--review`): title and branch.
    pub review: Vec<(String, String)>,
    /// Titles of tasks skipped.
    pub skipped: Vec<String>,
    /// Titles of tasks blocked `[!]`.
    pub blocked: Vec<String>,
    /// Failed attempts in the run.
    pub failed_attempts: u32,
    /// Stage retries after transient failures.
    pub retries: u32,
    /// Usage-limit waits.
    pub waits: u32,
    /// Time spent waiting.
    pub wait_time: Duration,
    /// Total cost in USD.
    pub cost_usd: f64,
    /// The `--max-cost` budget, shown beside the cost.
    pub max_cost: Option<f64>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// The state folder.
    pub state_dir: PathBuf,
    /// Iterations run.
    pub iterations: u32,
    /// Why the run ended, one line.
    pub ended: String,
    /// What the person should know at the end (commits on no branch, work set aside).
    pub notes: Vec<String>,
}

/// SGR code: bold.
pub(crate) const BOLD: &str = "1";
/// SGR code: green.
pub(crate) const GREEN: &str = "32";
/// SGR code: red.
pub(crate) const RED: &str = "31";
/// SGR code: yellow.
pub(crate) const YELLOW: &str = "33";

/// `text` in the SGR colour `sgr` when `color`, else unchanged.
pub(crate) fn paint(color: bool, text: &str, sgr: &str) -> String {
    if color {
        format!("\x1b[{sgr}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// `✓ implement  SUCCESS  2m 03s  $0.41  12 turns  — note`.
pub(super) fn stage_line_text(stage: Stage, line: &StageLine, color: bool) -> String {
    let (symbol, sgr) = match outcome_kind(&line.outcome) {
        OutcomeKind::Good => ("✓", GREEN),
        OutcomeKind::Neutral => ("•", YELLOW),
        OutcomeKind::Bad => ("✗", RED),
    };
    let mut text = format!(
        "{} {:<9}  {:<7}  {}  {}",
        paint(color, symbol, sgr),
        stage.name(),
        text::clean(&line.outcome),
        text::duration(line.duration),
        text::cost(line.cost_usd),
    );
    if let Some(turns) = line.turns {
        let unit = if turns == 1 { "turn" } else { "turns" };
        text.push_str(&format!("  {turns} {unit}"));
    }
    if let Some(fence) = &line.fence {
        text.push_str(&format!("  [{}]", text::clean(fence)));
    }
    if let Some(note) = line
        .note
        .as_deref()
        .and_then(|n| n.lines().find(|l| !l.trim().is_empty()))
    {
        text.push_str("  — ");
        text.push_str(&text::truncate(&text::clean(note.trim()), NOTE_WIDTH));
    }
    text
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OutcomeKind {
    Good,
    Neutral,
    Bad,
}

/// Classifies an outcome by its first word: failures get ✗, a skip or a split gets •, the
/// rest (SUCCESS, COMMIT, `4 notes`) ✓.
pub(super) fn outcome_kind(outcome: &str) -> OutcomeKind {
    let word = outcome
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_ascii_lowercase();
    match word.as_str() {
        "failed" | "failure" | "fail" | "reject" | "rejected" | "error" | "timed_out"
        | "timeout" | "violated" | "violation" | "interrupted" | "blocked" => OutcomeKind::Bad,
        "skipped" | "skip" | "decomposed" => OutcomeKind::Neutral,
        _ => OutcomeKind::Good,
    }
}

/// The summary's lines; the first says why the run ended.
pub(super) fn summary_lines(s: &Summary) -> Vec<String> {
    let mut lines = vec![format!("run ended: {}", text::clean(&s.ended))];
    let row = |label: &str, value: String| format!("  {label:<16} {value}");
    lines.push(row("iterations", s.iterations.to_string()));
    lines.push(row("committed", s.committed.len().to_string()));
    for (title, sha) in &s.committed {
        lines.push(format!("    {}  {}", text::clean(sha), text::clean(title)));
    }
    if !s.review.is_empty() {
        lines.push(row("to review", s.review.len().to_string()));
        for (title, branch) in &s.review {
            lines.push(format!(
                "    {}  {}",
                text::clean(branch),
                text::clean(title)
            ));
        }
        lines.push(
            "    (kern accept [TASK…] lands them; kern reject TASK --reason … reopens one)".into(),
        );
    }
    lines.push(row("skipped", s.skipped.len().to_string()));
    for title in &s.skipped {
        lines.push(format!("    {}", text::clean(title)));
    }
    lines.push(row("blocked", s.blocked.len().to_string()));
    for title in &s.blocked {
        lines.push(format!("    {}", text::clean(title)));
    }
    lines.push(row("failed attempts", s.failed_attempts.to_string()));
    lines.push(row("retries", s.retries.to_string()));
    let waits = if s.waits == 0 {
        "0".to_string()
    } else {
        format!("{} ({})", s.waits, text::duration(s.wait_time))
    };
    lines.push(row("waits", waits));
    lines.push(row(
        "cost",
        match s.max_cost {
            Some(limit) => format!("{} of {}", text::cost(s.cost_usd), text::cost(limit)),
            None => text::cost(s.cost_usd),
        },
    ));
    lines.push(row("time", text::duration(s.elapsed)));
    lines.push(row(
        "state folder",
        text::clean(&s.state_dir.display().to_string()),
    ));
    for note in &s.notes {
        lines.push(format!("  note: {}", text::clean(note)));
    }
    lines
}
