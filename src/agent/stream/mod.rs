//! Reading an agent's stdout as it arrives: Claude stream-json, Codex JSONL, or plain text —
//! one file per dialect, each keeping its own state inside its [`Mode`] variant.
//! `window.rs` reads the usage windows both dialects report into one shape.
//!
//! The supervisor hands every stdout line to [`StreamParser::push_line`] (it also writes the
//! raw stream to `stageN.jsonl`, so nothing here keeps it) and calls
//! [`StreamParser::finish`] once the process is gone. The decisions a reader must know:
//!
//! - **Bounded memory.** A dialect keeps only what the stage record needs, every text capped
//!   with its *tail* kept, because the end of an output is where a report, a JSON block or a
//!   status word is.
//! - **Nothing is fatal.** Unknown event types are ignored; lines that are not JSON objects are
//!   counted in `malformed_lines` and skipped.
//! - **Decisive failures stop early** ([`LineSignal::StopNow`]): waiting out a CLI's own
//!   retries cannot help when the person must act or the network is gone.
//! - **Detection** (`program:` agents): the first non-empty line decides. A JSON object with a
//!   string `type` is an event stream — Codex's when the type starts with `thread.`, `turn.`
//!   or `item.`, else Claude's; anything else makes the whole stdout plain text.

mod claude;
mod codex;
mod plain;
pub(crate) mod window;

#[cfg(test)]
pub(crate) use claude::rate_limit as claude_rate_limit;

pub(crate) use plain::ReportCheck;

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::agent::failure_class::FailureClass;

/// The most of a plain-text output, or of a Codex final message, that is kept (the tail).
pub(crate) const RESULT_CAP: usize = 1 << 20;

/// The most of the last Claude assistant text that is kept (the tail); it is only the
/// fallback result when no `result` event arrives.
pub(crate) const TEXT_CAP: usize = 64 << 10;

/// The longest progress detail, in characters.
pub(crate) const DETAIL_CAP: usize = 80;

/// How an agent's stdout is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Claude Code `--output-format stream-json --verbose`.
    Claude,
    /// `codex exec --json`.
    Codex,
    /// Decide from the first non-empty line (`program:` agents).
    Detect,
}

/// What the supervisor should do after a line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LineSignal {
    /// Nothing special.
    Continue,
    /// The agent called a tool; show it on the status line.
    Progress(Progress),
    /// The final result arrived: start the result grace period.
    ResultSeen,
    /// Waiting longer cannot help: stop the agent now and classify the output.
    StopNow(FailureClass),
}

/// The agent's latest tool call, for the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// The tool: `Edit`, `Bash`, … (Codex items: `Shell`, `Edit`, `WebSearch`).
    pub tool: String,
    /// What it works on: a path, a command's first line, a pattern (at most 80 characters).
    pub detail: String,
}
/// Everything kern keeps of one agent run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentOutput {
    /// The final text: Claude's `result`, Codex's last `agent_message`, a program's stdout.
    /// Without those, the last assistant text. Always a string, possibly empty.
    pub result_text: String,
    /// The stage report as JSON, when the agent returned one as structured output.
    pub structured_output: Option<Value>,
    /// What the run cost, in USD (0 when the agent does not say).
    pub cost_usd: f64,
    /// Token usage as the agent reported it (`{}` when it did not).
    pub usage: Value,
    /// Claude's per-model usage (`{}` otherwise).
    pub model_usage: Value,
    /// Claude's turn count.
    pub num_turns: Option<u64>,
    /// Claude's session id or Codex's thread id.
    pub session_id: Option<String>,
    /// Tool calls the agent was refused; not a failure.
    pub permission_denials: Vec<Value>,
    /// Claude's `terminal_reason` (`completed`, `max_turns`, `prompt_too_long`, …).
    pub terminal_reason: Option<String>,
    /// Claude's result `subtype` (`success`, `error_max_turns`, …).
    pub subtype: Option<String>,
    /// The agent reported an error, or ended without reporting a result (a plain-text
    /// program: exited with a code other than 0).
    pub is_error: bool,
    /// The HTTP status of the API error that ended the run (Claude).
    pub api_error_status: Option<u16>,
    /// Claude's typed cause of the API error that ended the run (`api_error`:
    /// `connection_failed`, `provider_credentials`, …; Claude Code 2.1.3xx).
    pub api_error: Option<String>,
    /// The `error.type` of the API's answer that ended the run (`api_error_type`:
    /// `invalid_request_error`, `rate_limit_error`, …; Claude Code 2.1.3xx).
    pub api_error_type: Option<String>,
    /// Error messages: Claude's result `errors`, Codex's error events (the latest 20).
    pub errors: Vec<String>,
    /// Claude: the raw `result` event object.
    pub result_event: Option<Value>,
    /// The last assistant message's `error` field (`rate_limit`, `authentication_failed`, …).
    pub assistant_error: Option<String>,
    /// A `rate_limit_event` said `rejected`: when the limit resets (epoch seconds).
    pub rate_limit_reset: Option<i64>,
    /// The latest `rate_limit_event`: how much of the subscription's limits is used.
    pub rate_limit: Option<RateLimit>,
    /// Lines that were not JSON objects in an event stream.
    pub malformed_lines: u64,
    /// The process's exit code (`None`: ended by a signal).
    pub exit_code: Option<i32>,
    /// The end of the process's stderr.
    pub stderr_tail: String,
    /// A final result event arrived (Claude `result`, Codex `turn.completed`), or plain text
    /// became the stage's finished report (`plain.rs`).
    pub saw_result: bool,
    /// The model the agent said it runs (Claude's `init` event).
    pub model: Option<String>,
    /// The decisive failure the parser signalled with [`LineSignal::StopNow`], if any.
    pub stopped: Option<FailureClass>,
    /// Bytes dropped from the front of `result_text` to keep it within its cap.
    pub result_truncated_bytes: u64,
}

/// Claude's subscription rate-limit state as its latest `rate_limit_event` gave it
/// (subscription logins only; API keys and cloud providers send none). A later `--pace` reads
/// it to stop taking tasks before a limit is hit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimit {
    /// `allowed`, `allowed_warning` or `rejected`.
    pub status: String,
    /// The limiting window: `five_hour`, `seven_day`, `seven_day_opus`, … (`rateLimitType`).
    pub kind: Option<String>,
    /// The fraction of the limiting window used, usually 0 to 1 (`utilization`).
    pub utilization: Option<f64>,
    /// When the limiting window resets, in seconds since the epoch (`resetsAt`).
    pub resets_at: Option<i64>,
    /// Every window the event reported (`unifiedWindows`), by name.
    pub windows: Vec<RateLimitWindow>,
}

/// One subscription window of a [`RateLimit`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimitWindow {
    /// `five_hour`, `seven_day`, `seven_day_overage_included`.
    pub name: String,
    /// The fraction of the window used.
    pub utilization: f64,
    /// When the window resets, in seconds since the epoch.
    pub resets_at: Option<i64>,
}

/// A string that keeps only its last `cap` bytes (on a character boundary).
#[derive(Debug)]
struct TailText {
    text: String,
    cap: usize,
    dropped: u64,
    /// A line was appended (so the next one needs a `\n` before it, even after empty lines).
    has_lines: bool,
}

impl TailText {
    fn new(cap: usize) -> TailText {
        TailText {
            text: String::new(),
            cap,
            dropped: 0,
            has_lines: false,
        }
    }

    /// Replaces the text.
    fn set(&mut self, text: &str) {
        let tail = tail_of(text, self.cap);
        self.dropped = (text.len() - tail.len()) as u64;
        self.text.clear();
        self.text.push_str(tail);
    }

    /// Appends a line (with a `\n` before it unless it is the first).
    fn push_line(&mut self, line: &str) {
        if self.has_lines {
            self.text.push('\n');
        }
        self.has_lines = true;
        let tail = tail_of(line, self.cap);
        self.dropped += (line.len() - tail.len()) as u64;
        self.text.push_str(tail);
        // Trimming only past twice the cap keeps appends amortised O(1).
        if self.text.len() > 2 * self.cap {
            self.trim();
        }
    }

    fn trim(&mut self) {
        let keep = tail_of(&self.text, self.cap).len();
        let cut = self.text.len() - keep;
        self.dropped += cut as u64;
        self.text.drain(..cut);
    }

    fn finish(mut self) -> (String, u64) {
        self.trim();
        (self.text, self.dropped)
    }
}

/// The last at most `cap` bytes of `text`, starting on a character boundary.
fn tail_of(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let mut start = text.len() - cap;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first line of `text`, trimmed, at most [`DETAIL_CAP`] characters (a longer one ends
/// in `…`).
pub(crate) fn short_detail(text: &str) -> String {
    first_line(text, DETAIL_CAP)
}

/// The first non-empty line of `text`, trimmed, at most `cap` characters (a longer one ends
/// in `…`).
pub(crate) fn first_line(text: &str, cap: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() <= cap {
        return line.to_string();
    }
    let mut out: String = line.chars().take(cap.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Just enough of an event to route it; every other field is skipped without being stored.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

/// What every dialect shares: the latest tool call, the decisive failure, the lines that were
/// not JSON, and whose CLI this is (for messages).
#[derive(Debug)]
struct Common {
    format: StreamFormat,
    progress: Option<Progress>,
    stopped: Option<FailureClass>,
    malformed: u64,
}

impl Common {
    fn set_progress(&mut self, progress: Progress) -> LineSignal {
        if self.progress.as_ref() == Some(&progress) {
            return LineSignal::Continue;
        }
        self.progress = Some(progress.clone());
        LineSignal::Progress(progress)
    }

    fn stop(&mut self, class: FailureClass) -> LineSignal {
        if self.stopped.is_none() {
            self.stopped = Some(class.clone());
        }
        LineSignal::StopNow(class)
    }

    /// Which CLI's words to use in a message: its name and its login hint.
    fn agent_words(&self) -> (&'static str, &'static str) {
        match self.format {
            StreamFormat::Claude => ("claude", crate::agent::claude::LOGIN_HINT),
            StreamFormat::Codex => ("codex", crate::agent::codex::LOGIN_HINT),
            StreamFormat::Detect => ("the agent program", crate::agent::program::LOGIN_HINT),
        }
    }
}

/// The dialect being read, with its state.
#[derive(Debug)]
enum Mode {
    /// `program:` agents before their first non-empty line: the blank lines seen so far.
    Undecided {
        blank_lines: u64,
    },
    Claude(claude::ClaudeStream),
    Codex(codex::CodexStream),
    Plain(plain::PlainText),
}

/// Reads one agent run's stdout line by line; see the module docs.
#[derive(Debug)]
pub(crate) struct StreamParser {
    common: Common,
    mode: Mode,
    /// What a finished report looks like, for plain text (which has no result event).
    report_check: Option<ReportCheck>,
}

impl StreamParser {
    /// A parser for one run.
    pub(crate) fn new(format: StreamFormat) -> StreamParser {
        let mode = match format {
            StreamFormat::Claude => Mode::Claude(claude::ClaudeStream::new()),
            StreamFormat::Codex => Mode::Codex(codex::CodexStream::new()),
            StreamFormat::Detect => Mode::Undecided { blank_lines: 0 },
        };
        StreamParser {
            common: Common {
                format,
                progress: None,
                stopped: None,
                malformed: 0,
            },
            mode,
            report_check: None,
        }
    }

    /// Lets plain text report its result before the program exits: `check` says whether the
    /// whole output is the stage's finished report (see `plain.rs`).
    pub(crate) fn with_report_check(mut self, check: ReportCheck) -> StreamParser {
        self.report_check = Some(check);
        self
    }

    /// Reads one stdout line (with or without its line ending).
    pub(crate) fn push_line(&mut self, line: &str) -> LineSignal {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Mode::Undecided { blank_lines } = self.mode {
            if line.trim().is_empty() {
                self.mode = Mode::Undecided {
                    blank_lines: blank_lines + 1,
                };
                return LineSignal::Continue;
            }
            self.mode = detect(line, blank_lines);
        }
        match &mut self.mode {
            Mode::Plain(plain) => plain.push_line(line, self.report_check.as_ref()),
            Mode::Claude(claude) => claude.push_line(line, &mut self.common),
            Mode::Codex(codex) => codex.push_line(line, &mut self.common),
            Mode::Undecided { .. } => LineSignal::Continue,
        }
    }

    #[cfg(test)]
    /// The agent's latest tool call.
    pub(crate) fn progress(&self) -> Option<&Progress> {
        self.common.progress.as_ref()
    }

    #[cfg(test)]
    /// The latest subscription rate-limit state (Claude's `rate_limit_event`).
    pub(crate) fn rate_limit(&self) -> Option<&RateLimit> {
        match &self.mode {
            Mode::Claude(claude) => claude.rate_limit(),
            Mode::Codex(codex) => codex.rate_limit(),
            _ => None,
        }
    }

    /// Everything kept of the run, once the process has ended.
    pub(crate) fn finish(self, exit_code: Option<i32>, stderr_tail: &str) -> AgentOutput {
        let mut out = AgentOutput {
            result_text: String::new(),
            structured_output: None,
            cost_usd: 0.0,
            usage: Value::Object(Map::new()),
            model_usage: Value::Object(Map::new()),
            num_turns: None,
            session_id: None,
            permission_denials: Vec::new(),
            terminal_reason: None,
            subtype: None,
            is_error: true,
            api_error_status: None,
            api_error: None,
            api_error_type: None,
            errors: Vec::new(),
            result_event: None,
            assistant_error: None,
            rate_limit_reset: None,
            rate_limit: None,
            malformed_lines: self.common.malformed,
            exit_code,
            stderr_tail: stderr_tail.to_string(),
            saw_result: false,
            model: None,
            stopped: self.common.stopped,
            result_truncated_bytes: 0,
        };
        match self.mode {
            Mode::Undecided { .. } => out.is_error = exit_code != Some(0),
            Mode::Plain(plain) => plain.finish(&mut out),
            Mode::Codex(codex) => codex.finish(&mut out),
            Mode::Claude(claude) => claude.finish(&mut out),
        }
        out
    }
}

/// The mode a `program:` agent's first non-empty line implies; `blank_lines` empty lines came
/// before it (plain text keeps them).
fn detect(line: &str, blank_lines: u64) -> Mode {
    match serde_json::from_str::<Head>(line) {
        Ok(Head { kind: Some(kind) }) => {
            if ["thread.", "turn.", "item."]
                .iter()
                .any(|p| kind.starts_with(p))
            {
                Mode::Codex(codex::CodexStream::new())
            } else {
                Mode::Claude(claude::ClaudeStream::new())
            }
        }
        _ => {
            let mut plain = plain::PlainText::new();
            for _ in 0..blank_lines {
                plain.push_line("", None);
            }
            Mode::Plain(plain)
        }
    }
}

/// Test support: recorded streams from `tests/fixtures/`, run through the parser.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    /// The Claude Code release whose recorded streams the tests read by default: the one
    /// `.ci/install-claude` pins.
    pub(crate) const CLAUDE_VERSION: &str = "2.1.330";

    /// The folder of the recorded streams of Claude Code `version`.
    pub(crate) fn dir_of(version: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(format!("claude-{version}"))
    }

    /// The folder of the recorded streams of the pinned release.
    pub(crate) fn dir() -> std::path::PathBuf {
        dir_of(CLAUDE_VERSION)
    }

    /// Parses the pinned release's `NAME.jsonl` (see [`parse_in`]).
    pub(crate) fn parse(name: &str, format: StreamFormat) -> (Vec<LineSignal>, AgentOutput) {
        parse_in(CLAUDE_VERSION, name, format)
    }

    /// Parses `NAME.jsonl` of Claude Code `version` line by line; the exit code comes from
    /// `NAME.exit` (none when the recording was stopped) and stderr from `NAME.stderr`.
    pub(crate) fn parse_in(
        version: &str,
        name: &str,
        format: StreamFormat,
    ) -> (Vec<LineSignal>, AgentOutput) {
        let dir = dir_of(version);
        let stream = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap();
        let exit = std::fs::read_to_string(dir.join(format!("{name}.exit")))
            .ok()
            .map(|s| s.trim().parse::<i32>().unwrap());
        let stderr =
            std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default();
        parse_lines(stream.lines(), format, exit, &stderr)
    }

    /// Parses the given lines.
    pub(crate) fn parse_lines<'a>(
        lines: impl IntoIterator<Item = &'a str>,
        format: StreamFormat,
        exit: Option<i32>,
        stderr: &str,
    ) -> (Vec<LineSignal>, AgentOutput) {
        let mut parser = StreamParser::new(format);
        let signals = lines.into_iter().map(|l| parser.push_line(l)).collect();
        (signals, parser.finish(exit, stderr))
    }

    /// A progress signal.
    pub(crate) fn progress(tool: &str, detail: &str) -> LineSignal {
        LineSignal::Progress(Progress {
            tool: tool.to_string(),
            detail: detail.to_string(),
        })
    }

    /// The signals that are not `Continue`, with their line index.
    pub(crate) fn notable(signals: &[LineSignal]) -> Vec<(usize, LineSignal)> {
        signals
            .iter()
            .cloned()
            .enumerate()
            .filter(|(_, s)| *s != LineSignal::Continue)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::parse_lines;
    use super::*;

    #[test]
    fn details_are_one_short_line() {
        assert_eq!(short_detail("  \n  ls -la  \nmore"), "ls -la");
        assert_eq!(short_detail(&"é".repeat(80)), "é".repeat(80));
        assert_eq!(
            short_detail(&"x".repeat(200)),
            format!("{}…", "x".repeat(DETAIL_CAP - 1))
        );
        assert_eq!(first_line("", 10), "");
    }

    #[test]
    fn detection_picks_the_dialect_from_the_first_non_empty_line() {
        let table: [(&[&str], &str); 4] = [
            (&["", r#"{"type":"turn.started"}"#], "codex"),
            (&[r#"{"type":"system","subtype":"init"}"#], "claude"),
            (&["", "hello"], "plain"),
            (&[""], "undecided"),
        ];
        for (lines, expected) in table {
            let mut parser = StreamParser::new(StreamFormat::Detect);
            for line in lines {
                parser.push_line(line);
            }
            let got = match parser.mode {
                Mode::Undecided { .. } => "undecided",
                Mode::Claude(_) => "claude",
                Mode::Codex(_) => "codex",
                Mode::Plain(_) => "plain",
            };
            assert_eq!(got, expected, "{lines:?}");
        }
        let (_, out) = parse_lines([""], StreamFormat::Detect, Some(0), "");
        assert_eq!(out.result_text, "");
        assert!(!out.is_error);
    }
}
