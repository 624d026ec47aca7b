//! What the person sees: the live status line, one line per finished stage, warnings, waits
//! and the end-of-run summary. All of it goes to stderr; stdout is for machine output only.
//!
//! The decision a reader must know: there are three modes, chosen once.
//! - [`Mode::Live`] on a terminal: one status line kept at the bottom by `indicatif` (a
//!   spinner with a steady tick), updated in place; every other line is printed above it.
//! - [`Mode::Plain`] for pipes, CI and `--color=never`: one line per event,
//!   `2026-11-22T05:12:03Z kern: …` (UTC, RFC 3339 seconds), never a `\r` or a cursor move.
//!   Without colour there is no control character at all; `--color=always` adds SGR colour
//!   codes only (CI logs render them).
//! - [`Mode::Quiet`] (`-q`): only the summary (DESIGN.md section 10: errors and the summary;
//!   errors are printed by `main.rs`; retries, violations and commits stay in `run.jsonl`).
//!
//! `NO_COLOR` turns colour off but keeps the live status line: it asks for no colour, not for
//! no cursor movement. `TERM=dumb` counts as no terminal. Text that comes from outside kern
//! (task titles, agent tool calls, notes) is cleaned before it is shown (`text::clean`: line
//! breaks become spaces, other control characters are shown escaped, `\e[31m`), so an agent
//! cannot move the cursor, set the window title or forge a timestamped line.
//!
//! Locking: the reporter is shared by reference (`Send + Sync`). The status text lives behind
//! one mutex, the stage clock the spinner reads on every tick behind another; kern's own code
//! never calls into `indicatif` while holding either, so the ticker thread cannot deadlock
//! with it.
//!
//! This file owns the [`Reporter`]: its modes, its public methods and how a line is emitted
//! (terminal and `run.log`); `status_line` keeps and draws the live line (and answers
//! [`Reporter::status_line`]), `lines` and `text` shape the words, `notify` runs the
//! `--notify` command.

pub(crate) mod diagnostics;
pub(crate) mod lines;
pub(crate) mod notify;
mod status_line;
pub(crate) mod voice;

pub(crate) use lines::{BOLD, GREEN, RED, StageLine, Summary, YELLOW, paint};
use lines::{stage_line_text, summary_lines};
use status_line::{Clock, LiveLine, Status};

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use indicatif::{ProgressBar, ProgressDrawTarget};

use crate::stage::Stage;
use crate::text;

/// When to use colour and the live status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// What the environment says about output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputEnv {
    /// `NO_COLOR` is set and not empty.
    pub no_color: bool,
    /// `TERM=dumb`: no cursor movement even on a terminal.
    pub dumb_terminal: bool,
    /// `KERN_LOG`, the diagnostics level.
    pub kern_log: Option<String>,
}

/// Longest tool-call detail shown in the status line, in characters.
const TOOL_WIDTH: usize = 60;
/// How often a Plain wait line is repeated while the wait goes on.
const WAIT_REPEAT: Duration = Duration::from_secs(60);

/// How output is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A terminal: one status line updated in place, finished stages printed above it.
    Live,
    /// Pipes and CI: timestamped lines, no control characters.
    Plain,
    /// `-q`: only warnings, errors and the final summary.
    Quiet,
}

#[cfg(test)]
/// A writer that keeps what is written, for tests of output (here and in other modules).
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

#[cfg(test)]
impl Capture {
    /// Everything written so far, as text.
    pub(crate) fn contents(&self) -> String {
        String::from_utf8_lossy(&lock(&self.0)).into_owned()
    }
}

#[cfg(test)]
impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Prints what the person sees. Shared by reference; all methods take `&self`.
pub(crate) struct Reporter {
    mode: Mode,
    color: bool,
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    now: fn() -> DateTime<Utc>,
    status: Mutex<Status>,
    line: Arc<Mutex<LiveLine>>,
    /// A parallel task's reporter (see [`Reporter::for_job`]): its label, which starts each
    /// of its lines, and its place in `jobs`.
    label: Option<String>,
    /// The status of every parallel task running, by label: the status line shows them all.
    jobs: Arc<Mutex<Vec<(String, LiveLine)>>>,
    /// Live only; created at the first status update, dropped by `finish`.
    bar: Arc<Mutex<Option<ProgressBar>>>,
    /// Where the status line draws: stderr for a real Live reporter, nothing (`None`) for one
    /// writing to a test buffer.
    draw: Option<fn() -> ProgressDrawTarget>,
    /// `run.log`: every line as the Plain mode prints it, whatever the mode (see `attach_log`).
    log: Arc<Mutex<Option<Box<dyn Write + Send>>>>,
    /// The terminal went away (SIGHUP): nothing more is written to it.
    gone: Arc<AtomicBool>,
    /// The `--notify` command, when there is one.
    notifier: Arc<Mutex<Option<notify::Notifier>>>,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("mode", &self.mode)
            .field("color", &self.color)
            .finish_non_exhaustive()
    }
}

impl Reporter {
    /// The reporter for this process: Live when stderr is a terminal (not `TERM=dumb`) and
    /// colour is not `never`, Quiet with `-q`, else Plain. Colour: `always` forces it, `never`
    /// forbids it, `auto` means a terminal and no (non-empty) `NO_COLOR`.
    pub(crate) fn new(color: ColorChoice, quiet: bool, env: &OutputEnv) -> Reporter {
        let terminal = std::io::stderr().is_terminal() && !env.dumb_terminal;
        let (mode, color) = choose(color, quiet, terminal, env.no_color);
        Reporter::with_mode(mode, color)
    }

    /// A reporter in `mode` writing to stderr (for tests and tools that choose the mode).
    pub(crate) fn with_mode(mode: Mode, color: bool) -> Reporter {
        let mut reporter = Reporter::with_writer(mode, color, Box::new(std::io::stderr()));
        if mode == Mode::Live {
            reporter.draw = Some(ProgressDrawTarget::stderr);
        }
        reporter
    }

    /// A reporter writing its lines to `writer`. In Live mode no status line is drawn (its
    /// text is still kept, see [`Reporter::status_line`]), so tests can capture every line.
    pub(crate) fn with_writer(mode: Mode, color: bool, writer: Box<dyn Write + Send>) -> Reporter {
        Reporter {
            mode,
            color,
            out: Arc::new(Mutex::new(writer)),
            now: Utc::now,
            status: Mutex::new(Status::default()),
            line: Arc::new(Mutex::new(LiveLine::default())),
            label: None,
            jobs: Arc::new(Mutex::new(Vec::new())),
            bar: Arc::new(Mutex::new(None)),
            draw: None,
            log: Arc::new(Mutex::new(None)),
            gone: Arc::new(AtomicBool::new(false)),
            notifier: Arc::new(Mutex::new(None)),
        }
    }

    /// The reporter of a parallel task (`-j`): the same terminal, `run.log` and notifier, its
    /// lines starting with `[label]`, and its status one part of the status line, which shows
    /// every task running. Dropping it takes its part away.
    pub(crate) fn for_job(&self, label: &str) -> Reporter {
        let label = text::clean(label);
        lock(&self.jobs).push((label.clone(), LiveLine::default()));
        Reporter {
            mode: self.mode,
            color: self.color,
            out: Arc::clone(&self.out),
            now: self.now,
            status: Mutex::new(Status {
                max_cost: lock(&self.status).max_cost,
                ..Status::default()
            }),
            line: Arc::clone(&self.line),
            label: Some(label),
            jobs: Arc::clone(&self.jobs),
            bar: Arc::clone(&self.bar),
            draw: self.draw,
            log: Arc::clone(&self.log),
            gone: Arc::clone(&self.gone),
            notifier: Arc::clone(&self.notifier),
        }
    }

    /// From now on every line also goes to `log` (the state folder's `run.log`), stamped, in
    /// the Plain mode's words and without colour — in every mode, also with `-q` and after the
    /// terminal is gone.
    pub(crate) fn attach_log(&self, log: Box<dyn Write + Send>) {
        *lock(&self.log) = Some(log);
    }

    /// From now on [`Reporter::notify`] runs `notifier`.
    pub(crate) fn attach_notifier(&self, notifier: notify::Notifier) {
        *lock(&self.notifier) = Some(notifier);
    }

    /// Tells the `--notify` command about `kind` (when there is one); returns at once.
    pub(crate) fn notify(&self, kind: notify::EventKind, fields: serde_json::Value) {
        if let Some(n) = lock(&self.notifier).as_ref() {
            n.send(kind, fields);
        }
    }

    /// Waits for the notifications under way (each bounded by its time limit).
    pub(crate) fn settle_notifications(&self) {
        if let Some(n) = lock(&self.notifier).as_ref() {
            n.wait();
        }
    }

    /// The `--max-cost` budget, shown beside the cost so far in the status line.
    pub(crate) fn set_budget(&self, max_cost: Option<f64>) {
        self.update(|s| s.max_cost = max_cost);
    }

    /// What to do when the terminal goes away (SIGHUP), for the signal listener: write nothing
    /// more to it (the status line stops drawing), say so in `run.log`, and go on.
    pub(crate) fn hangup_hook(&self) -> impl Fn() + Send + Sync + 'static {
        let gone = Arc::clone(&self.gone);
        let bar = Arc::clone(&self.bar);
        let log = Arc::clone(&self.log);
        let now = self.now;
        move || {
            if gone.swap(true, Ordering::SeqCst) {
                return;
            }
            if let Some(bar) = lock(&bar).take() {
                bar.set_draw_target(ProgressDrawTarget::hidden());
            }
            let stamp = now().to_rfc3339_opts(SecondsFormat::Secs, true);
            write_log(
                &log,
                &format!(
                    "{stamp} kern: the terminal went away (SIGHUP): the run goes on, its lines continue here"
                ),
            );
        }
    }

    #[cfg(test)]
    /// A reporter writing to a [`Capture`], which is returned with it.
    pub(crate) fn capture(mode: Mode, color: bool) -> (Reporter, Capture) {
        let capture = Capture::default();
        let reporter = Reporter::with_writer(mode, color, Box::new(capture.clone()));
        (reporter, capture)
    }

    #[cfg(test)]
    /// Replaces the clock that stamps Plain lines (tests use a fixed one).
    pub(crate) fn with_clock(mut self, now: fn() -> DateTime<Utc>) -> Reporter {
        self.now = now;
        self
    }

    /// An iteration starts on `task`.
    fn iteration(&self, index: u32, total: u32, task: &str) {
        let task = text::clean(task);
        self.update(|s| {
            s.iteration = Some((index, total));
            s.stage = None;
            s.task.clone_from(&task);
            s.tool = None;
            s.waiting = None;
            s.last_wait_line = None;
        });
        let plain = format!("[{index}/{total}] {task}");
        match self.mode {
            Mode::Live => self.emit(Some(&self.paint(&plain, BOLD)), &plain),
            Mode::Plain => self.emit(Some(&plain), &plain),
            Mode::Quiet => self.emit(None, &plain),
        }
        self.show(Some(Clock::Off));
    }

    /// A stage starts on `task`.
    fn stage_started(&self, stage: Stage, task: &str) {
        let task = text::clean(task);
        self.update(|s| {
            s.stage = Some(stage);
            s.task.clone_from(&task);
            s.tool = None;
            s.waiting = None;
            s.last_wait_line = None;
        });
        let plain = format!("{stage} started");
        let shown = (self.mode == Mode::Plain).then_some(plain.as_str());
        self.emit(shown, &plain);
        self.show(Some(Clock::Since(Instant::now())));
    }

    /// The agent's latest tool call (`Edit`, `src/lib.rs`): shown in the Live status line only.
    pub(crate) fn progress(&self, tool: &str, detail: &str) {
        let detail = text::truncate(&text::clean(detail), TOOL_WIDTH);
        let text = if detail.is_empty() {
            text::clean(tool)
        } else {
            format!("{} {detail}", text::clean(tool))
        };
        self.update(|s| s.tool = Some(text.clone()));
        self.show(None);
    }

    /// What the run has cost so far: shown in the Live status line only.
    fn cost_so_far(&self, usd: f64) {
        self.update(|s| s.cost_usd = Some(usd));
        self.show(None);
    }

    /// A stage finished: one line, e.g. `  ✓ implement  SUCCESS  2m 03s  $0.41  12 turns`.
    fn stage_finished(&self, stage: Stage, line: &StageLine) {
        self.update(|s| {
            s.stage = None;
            s.tool = None;
        });
        let text = stage_line_text(stage, line, self.color);
        let plain = stage_line_text(stage, line, false);
        match self.mode {
            Mode::Live => self.emit(Some(&format!("  {text}")), &plain),
            Mode::Plain => self.emit(Some(&text), &plain),
            Mode::Quiet => self.emit(None, &plain),
        }
        self.show(Some(Clock::Off));
    }

    /// Hears a happening of the run: the live status follows it (the iteration's header, a
    /// stage's start and its line, the cost so far, a countdown), and the person is told what
    /// [`voice::said`] says of it. The run's one door (`pipeline/teller.rs`) calls it.
    pub(crate) fn hear(&self, event: &crate::event::RunEvent) {
        use crate::event::{RunEvent, Told};
        match event {
            RunEvent::IterationStart {
                index, of, task, ..
            } => self.iteration(*index, *of, task),
            RunEvent::StageEnd {
                stage,
                error: None,
                said,
                duration_ms,
                cost_usd,
                turns,
                failure,
                fence,
                ..
            } => self.stage_finished(
                *stage,
                &StageLine {
                    outcome: said.clone().unwrap_or_default(),
                    duration: Duration::from_millis(*duration_ms),
                    cost_usd: *cost_usd,
                    turns: *turns,
                    note: failure.clone(),
                    fence: fence.clone(),
                },
            ),
            RunEvent::Told(Told::StageTry { stage, task }) => self.stage_started(*stage, task),
            RunEvent::Told(Told::CostSoFar { usd }) => self.cost_so_far(*usd),
            RunEvent::Told(Told::Waiting { reason, remaining }) => {
                self.waiting(reason, *remaining);
            }
            _ => {}
        }
        for said in voice::said(event) {
            self.tell(&said);
        }
    }

    /// Tells the person a line of [`voice`].
    pub(crate) fn tell(&self, said: &voice::Said) {
        match said {
            voice::Said::Info(text) => self.info(text),
            voice::Said::Warn(text) => self.warn(text),
        }
    }

    /// Something the person should know; not shown with `-q`.
    pub(crate) fn info(&self, msg: &str) {
        for line in msg.lines() {
            let line = text::clean(line);
            let shown = (self.mode != Mode::Quiet).then_some(line.as_str());
            self.emit(shown, &line);
        }
    }

    /// Something that went wrong but does not stop the run; shown in every mode.
    /// The first line reads `kern: warning: …` (Plain: after the timestamp); later lines of
    /// a multi-line message are indented under it.
    pub(crate) fn warn(&self, msg: &str) {
        let label = self.paint("warning:", YELLOW);
        for (i, line) in msg.lines().enumerate() {
            let line = text::clean(line);
            let (shown, plain) = match (i, self.mode) {
                (0, Mode::Plain) => (format!("{label} {line}"), format!("warning: {line}")),
                (0, _) => (format!("kern: {label} {line}"), format!("warning: {line}")),
                _ => (format!("  {line}"), format!("  {line}")),
            };
            let shown = (self.mode != Mode::Quiet).then_some(shown.as_str());
            self.emit(shown, &plain);
        }
    }

    /// A countdown: a usage-limit wait or a retry delay, `remaining` from now. Call it again
    /// as the wait goes on. Live shows it in the status line (and prints the start once);
    /// Plain prints a line at the start and then at most once a minute; Quiet prints nothing.
    fn waiting(&self, reason: &str, remaining: Duration) {
        let reason = text::clean(reason);
        let print = {
            let mut s = lock(&self.status);
            s.waiting = Some(reason.clone());
            s.tool = None;
            let starts = match &s.last_wait_line {
                None => true,
                Some((last, shown)) => *last != reason || remaining > *shown,
            };
            let repeat = match &s.last_wait_line {
                Some((_, shown)) => shown.saturating_sub(remaining) >= WAIT_REPEAT,
                None => false,
            };
            // run.log follows the Plain rule in every mode; the terminal its mode's.
            let logged = starts || repeat;
            let shown = match self.mode {
                Mode::Live => starts,
                Mode::Plain => logged,
                Mode::Quiet => false,
            };
            if logged {
                s.last_wait_line = Some((reason.clone(), remaining));
            }
            (logged, shown)
        };
        let (logged, shown) = print;
        if logged {
            let text = format!("waiting {} — {reason}", text::duration(remaining));
            let live = format!("  {text}");
            let terminal = match (shown, self.mode) {
                (false, _) => None,
                (true, Mode::Live) => Some(live.as_str()),
                (true, _) => Some(text.as_str()),
            };
            self.emit(terminal, &text);
        }
        self.show(Some(Clock::Until(Instant::now() + remaining)));
    }

    /// The end-of-run summary, in every mode. Clears the status line first: the run is over.
    pub(crate) fn summary(&self, s: &Summary) {
        self.finish();
        let lines = summary_lines(s);
        for (i, line) in lines.iter().enumerate() {
            if i == 0 && self.mode != Mode::Plain {
                self.line_raw(&format!("kern: {line}"));
                self.log_line(line);
            } else {
                self.emit(Some(line), line);
            }
        }
    }

    /// Clears the status line; later lines print normally.
    pub(crate) fn finish(&self) {
        let bar = lock(&self.bar).take();
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        change(&mut lock(&self.status));
    }

    /// Prints `shown` on the terminal in the mode's shape (Plain gets the timestamp, Live and
    /// Quiet not; `None`: nothing on the terminal) and `plain` to `run.log`.
    fn emit(&self, shown: Option<&str>, plain: &str) {
        let labelled;
        let (shown, plain) = match &self.label {
            Some(label) => {
                labelled = (
                    shown.map(|t| format!("[{label}] {}", t.trim_start())),
                    format!("[{label}] {}", plain.trim_start()),
                );
                (labelled.0.as_deref(), labelled.1.as_str())
            }
            None => (shown, plain),
        };
        if let Some(text) = shown {
            match self.mode {
                Mode::Plain => {
                    let stamp = (self.now)().to_rfc3339_opts(SecondsFormat::Secs, true);
                    self.line_raw(&format!("{stamp} kern: {text}"));
                }
                Mode::Live | Mode::Quiet => self.line_raw(text),
            }
        }
        self.log_line(plain);
    }

    /// Writes `text` to `run.log` as the Plain mode would print it.
    fn log_line(&self, text: &str) {
        let stamp = (self.now)().to_rfc3339_opts(SecondsFormat::Secs, true);
        write_log(&self.log, &format!("{stamp} kern: {text}"));
    }

    /// Writes one line, above the status line when there is one. Output errors are ignored:
    /// a closed stderr must not stop a run that is committing work, and once the terminal is
    /// gone (SIGHUP) nothing is written to it.
    fn line_raw(&self, text: &str) {
        if self.gone.load(Ordering::SeqCst) {
            return;
        }
        let write = || {
            let mut out = lock(&self.out);
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        };
        let bar = lock(&self.bar).clone();
        match bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    fn paint(&self, text: &str, sgr: &str) -> String {
        paint(self.color, text, sgr)
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        match &self.label {
            Some(label) => lock(&self.jobs).retain(|(l, _)| l != label),
            None => self.finish(),
        }
    }
}

/// Appends one line to `run.log`, when one is attached; a failure is traced, never fatal.
fn write_log(log: &Mutex<Option<Box<dyn Write + Send>>>, line: &str) {
    if let Some(out) = lock(log).as_mut() {
        let mut bytes = String::with_capacity(line.len() + 1);
        bytes.push_str(line);
        bytes.push('\n');
        if let Err(error) = out.write_all(bytes.as_bytes()) {
            tracing::warn!(%error, "cannot write run.log");
        }
    }
}

/// A poisoned lock only means another thread panicked while printing; the data is still fine.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The mode and colour for a terminal or not, `NO_COLOR` or not.
fn choose(color: ColorChoice, quiet: bool, terminal: bool, no_color: bool) -> (Mode, bool) {
    let mode = if quiet {
        Mode::Quiet
    } else if terminal && color != ColorChoice::Never {
        Mode::Live
    } else {
        Mode::Plain
    };
    let color = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    };
    (mode, color)
}
#[cfg(test)]
mod tests {
    use super::lines::NOTE_WIDTH;
    use super::*;
    use std::path::PathBuf;

    pub(super) const STAMP: &str = "2026-11-22T05:12:03Z";

    fn fixed_now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_795_324_323, 0).unwrap()
    }

    pub(super) fn reporter(mode: Mode, color: bool) -> (Reporter, Capture) {
        let (reporter, capture) = Reporter::capture(mode, color);
        (reporter.with_clock(fixed_now), capture)
    }

    pub(super) fn stage_line(
        outcome: &str,
        secs: u64,
        cost: f64,
        turns: Option<u64>,
        note: Option<&str>,
    ) -> StageLine {
        StageLine {
            outcome: outcome.into(),
            duration: Duration::from_secs(secs),
            cost_usd: cost,
            turns,
            note: note.map(str::to_string),
            fence: None,
        }
    }

    pub(super) fn summary() -> Summary {
        Summary {
            committed: vec![
                ("Add the parser".into(), "a1b2c3d".into()),
                ("Fix the lexer".into(), "d4e5f6a".into()),
            ],
            review: vec![],
            skipped: vec!["Rewrite the docs".into()],
            blocked: vec![],
            failed_attempts: 1,
            retries: 2,
            waits: 1,
            wait_time: Duration::from_secs(720),
            cost_usd: 2.31,
            max_cost: None,
            elapsed: Duration::from_secs(2530),
            state_dir: PathBuf::from("/tmp/claude/kern/proj/main"),
            iterations: 3,
            ended: "nothing left to do".into(),
            notes: Vec::new(),
        }
    }

    const SUMMARY_BODY: &str = "  iterations       3
  committed        2
    a1b2c3d  Add the parser
    d4e5f6a  Fix the lexer
  skipped          1
    Rewrite the docs
  blocked          0
  failed attempts  1
  retries          2
  waits            1 (12m)
  cost             $2.31
  time             42m 10s
  state folder     /tmp/claude/kern/proj/main
";

    /// A whole iteration, as the pipeline would report it.
    fn run_one_iteration(r: &Reporter) {
        r.iteration(1, 10, "Add the parser");
        r.stage_started(Stage::Research, "Add the parser");
        r.progress("Read", "src/lib.rs");
        r.cost_so_far(0.12);
        r.stage_finished(
            Stage::Research,
            &stage_line("4 notes", 45, 0.12, Some(8), None),
        );
        r.stage_started(Stage::Implement, "Add the parser");
        r.waiting("usage limit, resets 05:00 UTC", Duration::from_secs(300));
        r.waiting("usage limit, resets 05:00 UTC", Duration::from_secs(299));
        r.stage_finished(
            Stage::Implement,
            &stage_line("SUCCESS", 123, 0.41, Some(12), None),
        );
        r.info("committed a1b2c3d");
        r.warn("skipped `.env`: a sensitive file\nit stays out of the commit");
        r.summary(&summary());
        r.finish();
    }

    #[test]
    fn stage_lines() {
        let table = [
            (
                Stage::Implement,
                stage_line("SUCCESS", 123, 0.41, Some(12), None),
                "✓ implement  SUCCESS  2m 03s  $0.41  12 turns",
            ),
            (
                Stage::Research,
                stage_line("4 notes", 45, 0.12, Some(1), None),
                "✓ research   4 notes  45s  $0.12  1 turn",
            ),
            (
                Stage::Review,
                stage_line("COMMIT", 30, 0.08, None, None),
                "✓ commit     COMMIT   30s  $0.08",
            ),
            (
                Stage::Review,
                stage_line(
                    "REJECT",
                    30,
                    0.08,
                    Some(3),
                    Some("\nthe test was deleted\nmore"),
                ),
                "✗ commit     REJECT   30s  $0.08  3 turns  — the test was deleted",
            ),
            (
                Stage::Implement,
                StageLine {
                    fence: Some("unfenced: --sandbox off".into()),
                    ..stage_line("SUCCESS", 123, 0.41, Some(12), None)
                },
                "✓ implement  SUCCESS  2m 03s  $0.41  12 turns  [unfenced: --sandbox off]",
            ),
            (
                Stage::Implement,
                stage_line("FAILED", 3720, 1.5, Some(40), Some("error_max_turns")),
                "✗ implement  FAILED   1h 02m  $1.50  40 turns  — error_max_turns",
            ),
            (
                Stage::Implement,
                stage_line("DECOMPOSED", 60, 0.2, None, Some("3 subtasks")),
                "• implement  DECOMPOSED  1m  $0.20  — 3 subtasks",
            ),
            (
                Stage::Implement,
                stage_line("timed_out", 3600, 0.0, None, None),
                "✗ implement  timed_out  1h  $0.00",
            ),
        ];
        for (stage, line, text) in table {
            assert_eq!(stage_line_text(stage, &line, false), text);
        }
        let long = "x".repeat(500);
        let text = stage_line_text(
            Stage::Review,
            &stage_line("REJECT", 1, 0.0, None, Some(&long)),
            false,
        );
        assert!(
            text.ends_with(&format!("— {}…", "x".repeat(NOTE_WIDTH - 1))),
            "{text}"
        );
    }

    #[test]
    fn plain_output_is_timestamped_without_control_characters() {
        let (r, capture) = reporter(Mode::Plain, false);
        run_one_iteration(&r);
        let out = capture.contents();
        let expected_lines = [
            "[1/10] Add the parser",
            "research started",
            "✓ research   4 notes  45s  $0.12  8 turns",
            "implement started",
            "waiting 5m — usage limit, resets 05:00 UTC",
            "✓ implement  SUCCESS  2m 03s  $0.41  12 turns",
            "committed a1b2c3d",
            "warning: skipped `.env`: a sensitive file",
            "  it stays out of the commit",
            "run ended: nothing left to do",
        ];
        let mut expected: String = expected_lines
            .iter()
            .map(|line| format!("{STAMP} kern: {line}\n"))
            .collect();
        for line in SUMMARY_BODY.lines() {
            expected.push_str(&format!("{STAMP} kern: {line}\n"));
        }
        assert_eq!(out, expected);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    }

    #[test]
    fn outside_text_cannot_inject_control_characters() {
        let (r, capture) = reporter(Mode::Plain, false);
        let evil = "title\x1b[2J\rfake\ttab";
        r.iteration(1, 1, evil);
        r.stage_started(Stage::Research, evil);
        r.stage_finished(
            Stage::Research,
            &stage_line("FAILED\x1b[31m", 1, 0.0, None, Some(evil)),
        );
        r.info("line one\r\nline\x07two");
        r.warn(evil);
        r.summary(&Summary {
            committed: vec![(evil.into(), "abc\r".into())],
            ended: evil.into(),
            ..Summary::default()
        });
        let out = capture.contents();
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(
            out.contains(&format!("{STAMP} kern: [1/1] title\\e[2J fake tab\n")),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "{STAMP} kern: line one\n{STAMP} kern: line\\atwo\n"
            )),
            "{out}"
        );
        assert!(
            out.lines()
                .all(|line| line.starts_with(&format!("{STAMP} kern: "))),
            "{out}"
        );
    }

    #[test]
    fn plain_colour_uses_only_sgr_codes() {
        let (r, capture) = reporter(Mode::Plain, true);
        run_one_iteration(&r);
        let out = capture.contents();
        assert!(out.contains("\x1b[32m✓\x1b[0m research"), "{out:?}");
        assert!(out.contains("\x1b[33mwarning:\x1b[0m skipped"), "{out:?}");
        let sgr = regex::Regex::new(r"\x1b\[[0-9;]*m").unwrap();
        let stripped = sgr.replace_all(&out, "");
        assert!(
            !stripped.chars().any(|c| c.is_control() && c != '\n'),
            "{stripped:?}"
        );
        assert!(!out.contains('\r'));
    }

    #[test]
    fn quiet_prints_only_the_summary() {
        let (r, capture) = reporter(Mode::Quiet, false);
        run_one_iteration(&r);
        let expected = format!("kern: run ended: nothing left to do\n{SUMMARY_BODY}");
        assert_eq!(capture.contents(), expected);
    }

    #[test]
    fn summary_lists_everything() {
        let (r, capture) = reporter(Mode::Quiet, false);
        r.summary(&Summary {
            blocked: vec!["Port to Windows".into()],
            waits: 0,
            wait_time: Duration::ZERO,
            ended: "all 10 iterations ran".into(),
            ..summary()
        });
        assert_eq!(
            capture.contents(),
            "\
kern: run ended: all 10 iterations ran
  iterations       3
  committed        2
    a1b2c3d  Add the parser
    d4e5f6a  Fix the lexer
  skipped          1
    Rewrite the docs
  blocked          1
    Port to Windows
  failed attempts  1
  retries          2
  waits            0
  cost             $2.31
  time             42m 10s
  state folder     /tmp/claude/kern/proj/main
"
        );
    }

    #[test]
    fn live_lines_print_without_timestamps() {
        let (r, capture) = reporter(Mode::Live, false);
        run_one_iteration(&r);
        let expected = format!(
            "\
[1/10] Add the parser
  ✓ research   4 notes  45s  $0.12  8 turns
  waiting 5m — usage limit, resets 05:00 UTC
  ✓ implement  SUCCESS  2m 03s  $0.41  12 turns
committed a1b2c3d
kern: warning: skipped `.env`: a sensitive file
  it stays out of the commit
kern: run ended: nothing left to do
{SUMMARY_BODY}"
        );
        assert_eq!(capture.contents(), expected);
    }

    #[test]
    fn plain_waits_print_at_the_start_and_once_a_minute() {
        let (r, capture) = reporter(Mode::Plain, false);
        let calls: [(&str, u64); 9] = [
            ("usage limit", 300),
            ("usage limit", 299),
            ("usage limit", 241),
            ("usage limit", 240),
            ("usage limit", 200),
            ("usage limit", 180),
            ("retry 1 of 3", 30),
            ("retry 1 of 3", 29),
            ("retry 1 of 3", 60),
        ];
        for (reason, secs) in calls {
            r.waiting(reason, Duration::from_secs(secs));
        }
        let expected: String = [
            "waiting 5m — usage limit",
            "waiting 4m — usage limit",
            "waiting 3m — usage limit",
            "waiting 30s — retry 1 of 3",
            "waiting 1m — retry 1 of 3",
        ]
        .iter()
        .map(|line| format!("{STAMP} kern: {line}\n"))
        .collect();
        assert_eq!(capture.contents(), expected);

        // A new stage ends the wait: the same reason later is a new wait.
        r.stage_started(Stage::Implement, "t");
        r.waiting("retry 1 of 3", Duration::from_secs(10));
        assert!(capture.contents().ends_with("waiting 10s — retry 1 of 3\n"));
    }

    #[test]
    fn mode_and_colour_are_chosen_from_the_terminal_and_settings() {
        use ColorChoice::{Always, Auto, Never};
        let table = [
            // (color, quiet, terminal, NO_COLOR) -> (mode, colour)
            ((Auto, false, true, false), (Mode::Live, true)),
            ((Auto, false, true, true), (Mode::Live, false)),
            ((Auto, false, false, false), (Mode::Plain, false)),
            ((Always, false, false, false), (Mode::Plain, true)),
            ((Always, false, true, true), (Mode::Live, true)),
            ((Never, false, true, false), (Mode::Plain, false)),
            ((Auto, true, true, false), (Mode::Quiet, true)),
            ((Never, true, false, false), (Mode::Quiet, false)),
        ];
        for ((color, quiet, terminal, no_color), expected) in table {
            assert_eq!(
                choose(color, quiet, terminal, no_color),
                expected,
                "{color:?} quiet={quiet} terminal={terminal} NO_COLOR={no_color}"
            );
        }
    }

    #[test]
    fn run_log_gets_the_plain_lines_in_every_mode() {
        let (plain, plain_out) = reporter(Mode::Plain, false);
        run_one_iteration(&plain);
        for (mode, color) in [
            (Mode::Plain, true),
            (Mode::Live, true),
            (Mode::Quiet, false),
        ] {
            let (r, _) = reporter(mode, color);
            let log = Capture::default();
            r.attach_log(Box::new(log.clone()));
            run_one_iteration(&r);
            assert_eq!(log.contents(), plain_out.contents(), "{mode:?}");
        }
    }

    #[test]
    fn after_a_hangup_only_run_log_is_written() {
        let (r, terminal) = reporter(Mode::Plain, false);
        let log = Capture::default();
        r.attach_log(Box::new(log.clone()));
        r.info("before");
        let hook = r.hangup_hook();
        std::thread::spawn(hook).join().unwrap();
        r.info("after");
        r.warn("still going");
        assert_eq!(terminal.contents(), format!("{STAMP} kern: before\n"));
        assert_eq!(
            log.contents(),
            format!(
                "{STAMP} kern: before\n{STAMP} kern: the terminal went away (SIGHUP): the run goes on, its lines continue here\n{STAMP} kern: after\n{STAMP} kern: warning: still going\n"
            )
        );
    }

    #[test]
    fn cost_shows_against_the_budget() {
        let (r, capture) = reporter(Mode::Live, false);
        r.set_budget(Some(5.0));
        r.iteration(1, 2, "t");
        r.cost_so_far(0.84);
        assert_eq!(r.status_line().as_deref(), Some("[1/2] t · $0.84 of $5.00"));
        r.summary(&Summary {
            max_cost: Some(5.0),
            ..summary()
        });
        assert!(
            capture
                .contents()
                .contains("  cost             $2.31 of $5.00\n")
        );
    }

    #[test]
    fn reporter_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Reporter>();
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(text::truncate("héllo", 5), "héllo");
        assert_eq!(text::truncate("héllo wörld", 6), "héllo…");
        assert_eq!(text::clean("a\nb\x1bc\u{7f}d"), "a b\\ec\\x7fd");
    }
}
