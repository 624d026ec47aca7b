//! The live status line (Live mode only): what it shows ([`Status`]), how it reads for one
//! task or for parallel tasks (`-j`, one part per task, ` │ ` between), and the `indicatif`
//! spinner that draws it at the bottom of the terminal.
//!
//! The decision a reader must know: the spinner's ticker thread reads the head and clock on
//! every tick, so they live behind their own mutex as one unit (a draw never mixes an old head
//! with a new clock), and kern's code never calls into `indicatif` while holding a lock the
//! ticker takes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::{Mode, Reporter, lock};
use crate::stage::Stage;
use crate::text;

/// Longest task title shown in the status line, in characters.
const TITLE_WIDTH: usize = 48;
/// The widest a parallel task's title or tool call shows in the status line.
const JOB_TITLE_WIDTH: usize = 28;
/// How often the spinner redraws (and the elapsed time moves).
const TICK: Duration = Duration::from_millis(120);

/// What the status line shows; kept for Live and for [`Reporter::status_line`].
#[derive(Debug, Default)]
pub(super) struct Status {
    pub(super) iteration: Option<(u32, u32)>,
    pub(super) stage: Option<Stage>,
    pub(super) task: String,
    pub(super) cost_usd: Option<f64>,
    /// The `--max-cost` budget, shown beside the cost.
    pub(super) max_cost: Option<f64>,
    pub(super) tool: Option<String>,
    pub(super) waiting: Option<String>,
    /// The last wait line printed: its reason and the remaining time it showed.
    pub(super) last_wait_line: Option<(String, Duration)>,
}

/// The status line as the spinner draws it: the head and clock (one unit, so a draw never
/// mixes an old head with a new clock) and the message after them.
#[derive(Debug, Default)]
pub(super) struct LiveLine {
    head: String,
    clock: Clock,
    message: String,
}

/// What the time part of the status line counts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) enum Clock {
    #[default]
    Off,
    Since(Instant),
    Until(Instant),
}

impl Clock {
    fn text(self) -> String {
        match self {
            Clock::Off => String::new(),
            Clock::Since(start) => format!(" · {}", text::duration(start.elapsed())),
            Clock::Until(end) => format!(
                " · {} left",
                text::duration(end.saturating_duration_since(Instant::now()))
            ),
        }
    }
}

impl Reporter {
    #[cfg(test)]
    /// The status line's text as it would show now (`None` outside Live mode).
    pub(crate) fn status_line(&self) -> Option<String> {
        if self.mode != Mode::Live {
            return None;
        }
        let jobs = lock(&self.jobs);
        if !jobs.is_empty() {
            return Some(jobs_line(&jobs));
        }
        let line = lock(&self.line);
        Some(format!(
            "{}{}{}",
            line.head,
            line.clock.text(),
            line.message
        ))
    }

    /// Brings the status line up to date (Live only), setting its clock when given, and
    /// redraws it when there is a terminal.
    pub(super) fn show(&self, clock: Option<Clock>) {
        if self.mode != Mode::Live {
            return;
        }
        if let Some(label) = &self.label {
            let (head, message) = job_parts(label, &lock(&self.status));
            {
                let mut jobs = lock(&self.jobs);
                if let Some((_, line)) = jobs.iter_mut().find(|(l, _)| l == label) {
                    line.head = head;
                    if let Some(clock) = clock {
                        line.clock = clock;
                    }
                    line.message = message;
                }
            }
            if let Some(target) = self.draw
                && !self.gone.load(Ordering::SeqCst)
            {
                self.bar(target).set_message(String::new());
            }
            return;
        }
        let (head, message) = status_parts(&lock(&self.status));
        {
            let mut line = lock(&self.line);
            line.head = head;
            if let Some(clock) = clock {
                line.clock = clock;
            }
            line.message.clone_from(&message);
        }
        if let Some(target) = self.draw
            && !self.gone.load(Ordering::SeqCst)
        {
            self.bar(target).set_message(message);
        }
    }

    fn bar(&self, target: fn() -> ProgressDrawTarget) -> ProgressBar {
        let mut slot = lock(&self.bar);
        if let Some(bar) = slot.as_ref() {
            return bar.clone();
        }
        let line = Arc::clone(&self.line);
        let jobs = Arc::clone(&self.jobs);
        let style = ProgressStyle::with_template(bar_template(self.color))
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "kern",
                move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let jobs = lock(&jobs);
                    if jobs.is_empty() {
                        let line = lock(&line);
                        let _ = write!(w, "{}{}", line.head, line.clock.text());
                    } else {
                        let _ = write!(w, "{}", jobs_line(&jobs));
                    }
                },
            );
        let bar = ProgressBar::with_draw_target(None, target());
        bar.set_style(style);
        bar.enable_steady_tick(TICK);
        *slot = Some(bar.clone());
        bar
    }
}

/// The status line while parallel tasks run: for each task its stage (or wait), title and
/// clock, then its last tool call, ` │ ` between tasks.
fn jobs_line(jobs: &[(String, LiveLine)]) -> String {
    jobs.iter()
        .map(|(_, line)| format!("{}{}{}", line.head, line.clock.text(), line.message))
        .collect::<Vec<_>>()
        .join(" │ ")
}

/// One parallel task's part of the status line: `implement · title` and ` · Edit x`.
fn job_parts(label: &str, s: &Status) -> (String, String) {
    let title = text::truncate(label, JOB_TITLE_WIDTH);
    let head = match (&s.waiting, s.stage) {
        (Some(_), _) => format!("waiting · {title}"),
        (None, Some(stage)) => format!("{} · {title}", stage.name()),
        (None, None) => title,
    };
    let message = s
        .tool
        .as_ref()
        .map(|t| format!(" · {}", text::truncate(t, JOB_TITLE_WIDTH)))
        .unwrap_or_default();
    (head, message)
}

/// The status line's `indicatif` template: the spinner, kern's head and clock, the message.
fn bar_template(color: bool) -> &'static str {
    if color {
        "{spinner:.cyan} {kern}{wide_msg}"
    } else {
        "{spinner} {kern}{wide_msg}"
    }
}

/// The status line without its clock: `[i/N] implement · title` and ` · $0.84 · Edit x`.
fn status_parts(s: &Status) -> (String, String) {
    let mut prefix = String::new();
    if let Some((index, total)) = s.iteration {
        prefix.push_str(&format!("[{index}/{total}] "));
    }
    let mut message = String::new();
    if let Some(reason) = &s.waiting {
        prefix.push_str("waiting · ");
        prefix.push_str(&text::truncate(reason, TITLE_WIDTH + 12));
    } else {
        if let Some(stage) = s.stage {
            prefix.push_str(stage.name());
            prefix.push_str(" · ");
        }
        prefix.push_str(&text::truncate(&s.task, TITLE_WIDTH));
        match (s.cost_usd, s.max_cost) {
            (Some(cost), Some(limit)) => {
                message.push_str(&format!(" · {} of {}", text::cost(cost), text::cost(limit)));
            }
            (Some(cost), None) => message.push_str(&format!(" · {}", text::cost(cost))),
            (None, _) => {}
        }
        if let Some(tool) = &s.tool {
            message.push_str(" · ");
            message.push_str(tool);
        }
    }
    (prefix, message)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{STAMP, reporter, stage_line, summary};
    use super::*;

    #[test]
    fn live_status_line_shows_stage_task_time_cost_and_tool() {
        let (r, _capture) = reporter(Mode::Live, false);
        assert_eq!(r.status_line().as_deref(), Some(""));
        r.iteration(3, 10, "Add the parser");
        assert_eq!(r.status_line().as_deref(), Some("[3/10] Add the parser"));
        r.stage_started(Stage::Implement, "Add the parser");
        r.cost_so_far(0.84);
        r.progress("Edit", "src/lib.rs\n");
        let line = r.status_line().unwrap();
        // The elapsed time sits between the title and the cost; it moves, so check around it.
        let (head, tail) = line.split_once(" · $").unwrap();
        assert_eq!(tail, "0.84 · Edit src/lib.rs ");
        let elapsed = head
            .strip_prefix("[3/10] implement · Add the parser · ")
            .unwrap();
        assert!(elapsed.ends_with('s') && elapsed.len() <= 7, "{line}");

        let long = "a very long task title that goes on and on past the width";
        r.stage_started(Stage::Review, long);
        r.progress("Bash", "");
        let line = r.status_line().unwrap();
        assert!(
            line.starts_with(&format!("[3/10] commit · {}… · ", &long[..TITLE_WIDTH - 1])),
            "{line}"
        );
        assert!(line.ends_with(" · $0.84 · Bash"), "{line}");

        // Between stages: no stage, no clock, no tool.
        r.stage_finished(Stage::Review, &stage_line("COMMIT", 1, 0.1, None, None));
        assert_eq!(
            r.status_line(),
            Some(format!("[3/10] {}… · $0.84", &long[..TITLE_WIDTH - 1]))
        );

        r.waiting("usage limit", Duration::from_secs(3600));
        let line = r.status_line().unwrap();
        assert!(
            line.starts_with("[3/10] waiting · usage limit · "),
            "{line}"
        );
        assert!(line.ends_with(" left"), "{line}");

        let (plain, _) = reporter(Mode::Plain, false);
        assert_eq!(plain.status_line(), None);
    }

    #[test]
    fn the_live_bar_template_is_valid() {
        for color in [false, true] {
            assert!(ProgressStyle::with_template(bar_template(color)).is_ok());
        }
        // A drawing Live reporter (hidden by indicatif when stderr is no terminal) runs the
        // whole sequence without deadlocking on its locks.
        let (mut r, capture) = Reporter::capture(Mode::Live, true);
        r.draw = Some(ProgressDrawTarget::hidden);
        for _ in 0..10 {
            r.iteration(1, 2, "t");
            r.stage_started(Stage::Research, "t");
            r.progress("Read", "a");
            r.cost_so_far(0.1);
            r.waiting("w", Duration::from_secs(5));
            r.stage_finished(Stage::Research, &stage_line("4 notes", 1, 0.1, None, None));
        }
        assert!(lock(&r.bar).is_some());
        r.finish();
        assert!(lock(&r.bar).is_none());
        assert_eq!(capture.contents().lines().count(), 30);
        // The summary ends the status line before it prints.
        r.stage_started(Stage::Review, "t");
        assert!(lock(&r.bar).is_some());
        r.summary(&summary());
        assert!(lock(&r.bar).is_none());
    }

    #[test]
    fn parallel_tasks_label_their_lines_and_share_the_status_line() {
        let (main, capture) = reporter(Mode::Plain, false);
        let a = main.for_job("Add the parser");
        a.info("task `Add the parser`: next stage: research");
        assert_eq!(
            capture.contents(),
            format!("{STAMP} kern: [Add the parser] task `Add the parser`: next stage: research\n")
        );
        let (live, _) = reporter(Mode::Live, false);
        let a = live.for_job("Add the parser");
        let b = live.for_job("Fix the lexer");
        a.stage_started(Stage::Implement, "Add the parser");
        a.progress("Edit", "src/parser.rs");
        b.stage_started(Stage::Research, "Fix the lexer");
        let line = live.status_line().unwrap();
        assert!(
            line.starts_with("implement · Add the parser · 0s · Edit src/parser.rs │ research · Fix the lexer · 0s"),
            "{line}"
        );
        drop(a);
        let line = live.status_line().unwrap();
        assert!(line.starts_with("research · Fix the lexer"), "{line}");
        drop(b);
        assert!(!live.status_line().unwrap().contains("Fix the lexer"));
    }
}
