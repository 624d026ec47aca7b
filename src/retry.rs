//! Failure classes of an agent run, the retry delays, and reading usage-limit reset times.
//!
//! [`classify`] turns what an agent printed ([`AgentOutput`]) into one of four classes
//! (DESIGN.md section 6) in the order AGENT-CLIS.md suggests: usage limit, transient, needs the
//! user, stage limit — so that a 429 that also says "rate limit" is a retry, not a wait, and a
//! login problem is never retried. The one decision a reader must know: only a run that
//! *failed* is classified. A run whose result says it succeeded is fine even when a
//! `rate_limit_event` was rejected on the way (Claude fell back to another model) or a tool
//! call was denied; a missing report is judged later, by `stage::extract_report`.

use std::time::Duration;

use backoff::backoff::Backoff;
use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveDateTime, TimeZone, Weekday};
use regex::Regex;

use crate::agent::Agent;
use crate::agent::stream::AgentOutput;
use crate::config::RetryPolicy;

/// How much a retry delay varies around its exponential value: ±25 %.
pub const JITTER: f64 = 0.25;

/// Each retry delay is this many times the previous one (before jitter).
pub const MULTIPLIER: f64 = 2.0;

/// How much of the end of the result and of stderr is searched for failure texts: errors are
/// printed last, and a long output may quote such texts in passing.
const TEXT_WINDOW: usize = 4096;

/// Why an agent run failed, and so what kern does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureClass {
    /// Worth retrying after a backoff delay: overload, rate limit, lost connection, a crash.
    Transient(String),
    /// A subscription limit: wait until it resets (`resets_at`, epoch seconds, when known).
    UsageLimit {
        /// When the limit resets, in seconds since the epoch.
        resets_at: Option<i64>,
        /// What the agent said.
        message: String,
    },
    /// The person must act (log in, fix the model name…); the run stops. The message says
    /// what to do.
    NeedsUser(String),
    /// The stage hit a limit a retry would hit again (turns, budget, prompt size): a failed
    /// attempt.
    StageLimit(String),
}

impl FailureClass {
    /// The human message.
    pub fn message(&self) -> &str {
        match self {
            FailureClass::Transient(m)
            | FailureClass::NeedsUser(m)
            | FailureClass::StageLimit(m)
            | FailureClass::UsageLimit { message: m, .. } => m,
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The message for an agent that is not logged in.
pub fn not_logged_in(agent: &str, hint: &str) -> FailureClass {
    FailureClass::NeedsUser(format!("{agent} is not logged in: {hint}"))
}

/// Classifies a finished run; `None` means the agent ran fine.
pub fn classify(agent: &Agent, out: &AgentOutput) -> Option<FailureClass> {
    if let Some(stopped) = &out.stopped {
        return Some(stopped.clone());
    }
    let failed = if out.saw_result {
        out.is_error
    } else {
        out.exit_code != Some(0)
    };
    if !failed {
        return None;
    }
    let name = agent.to_string();
    let texts = Texts::of(out);

    // 1. Usage limits: wait, do not retry.
    if let Some(resets_at) = out.rate_limit_reset {
        let message = texts
            .usage_limit_line()
            .unwrap_or_else(|| format!("{name} hit its usage limit"));
        return Some(FailureClass::UsageLimit {
            resets_at: Some(resets_at),
            message,
        });
    }
    if let Some(line) = texts.usage_limit_line() {
        return Some(FailureClass::UsageLimit {
            resets_at: parse_reset_time(&line, Local::now()),
            message: line,
        });
    }

    // 2. Transient: the service or the network, not the task.
    let status = out.api_error_status;
    let transient_status = matches!(status, Some(429 | 529 | 500..=599));
    let transient_error = matches!(
        out.assistant_error.as_deref(),
        Some("rate_limit" | "overloaded" | "server_error")
    );
    if transient_status || transient_error || texts.any(TRANSIENT_TEXTS) {
        return Some(FailureClass::Transient(texts.headline(&name, out)));
    }

    // 3. Needs the user.
    if let Some(class) = needs_user(agent, &name, out, &texts) {
        return Some(class);
    }

    // 4. Stage limits: a retry would hit them again.
    let limit_subtype = matches!(
        out.subtype.as_deref(),
        Some("error_max_turns" | "error_max_budget_usd" | "error_max_structured_output_retries")
    );
    let limit_reason = matches!(
        out.terminal_reason.as_deref(),
        Some("prompt_too_long" | "max_turns")
    );
    if limit_subtype || limit_reason || texts.any(STAGE_LIMIT_TEXTS) {
        return Some(FailureClass::StageLimit(texts.headline(&name, out)));
    }

    // 5. Anything else that failed: a crash, a signal, an error we do not know.
    Some(FailureClass::Transient(texts.headline(&name, out)))
}

/// Texts that mean the service or the network failed, not the task.
const TRANSIENT_TEXTS: &[&str] = &[
    "Unable to connect",
    "exceeded retry limit",
    "high demand",
    "Reconnecting...",
    "Overloaded",
];

/// Texts that mean the person must log in again.
const LOGIN_TEXTS: &[&str] = &[
    "Not logged in",
    "Please run /login",
    "401 Unauthorized",
    "sign in again",
];

/// Texts that mean the stage is too big for the model.
const STAGE_LIMIT_TEXTS: &[&str] = &["Prompt is too long", "context window"];

fn needs_user(agent: &Agent, name: &str, out: &AgentOutput, texts: &Texts) -> Option<FailureClass> {
    let error = out.assistant_error.as_deref();
    if error == Some("model_not_found") || texts.any(&["is not available", "model_not_found"]) {
        let model = out
            .model
            .clone()
            .filter(|m| !m.starts_with('<'))
            .or_else(|| model_in(&texts.joined))
            .unwrap_or_else(|| "?".to_string());
        return Some(FailureClass::NeedsUser(format!(
            "the model `{model}` is not available — check --model or the `model:` line of the template"
        )));
    }
    if error == Some("billing_error") {
        return Some(FailureClass::NeedsUser(format!(
            "{name} cannot run because of a billing problem with its account: `{}` — check the plan and billing, then run kern again",
            texts.first_line()
        )));
    }
    if texts.any(&["Invalid API key"]) {
        return Some(FailureClass::NeedsUser(format!(
            "{name} rejected its API key: `{}` — {}",
            texts.first_line(),
            agent.login_hint()
        )));
    }
    if out.api_error_status == Some(403) {
        return Some(FailureClass::NeedsUser(format!(
            "{name} was refused access (HTTP 403): `{}` — check the account's permissions, or {}",
            texts.first_line(),
            agent.login_hint()
        )));
    }
    if error == Some("authentication_failed")
        || out.api_error_status == Some(401)
        || texts.any(LOGIN_TEXTS)
    {
        return Some(not_logged_in(name, agent.login_hint()));
    }
    // An agent CLI that rejects its command line prints one `Error: …` line and exits 1 or 2
    // with no result. A program gets no arguments, so it cannot reject any.
    if !matches!(agent, Agent::Program(_))
        && !out.saw_result
        && matches!(out.exit_code, Some(1 | 2))
        && let Some(line) = out.stderr_tail.lines().map(str::trim).find(|l| {
            l.starts_with("Error:") || l.starts_with("error:") || l.starts_with("ERROR:")
        })
    {
        return Some(FailureClass::NeedsUser(format!(
            "{name} rejected its arguments: `{}` — check that `{} --version` is a version kern supports",
            short_line(line, 300),
            agent.program().display()
        )));
    }
    None
}

/// The texts of a failed run that classification reads.
struct Texts {
    /// The error messages, the result (its end) and the end of stderr, one per line.
    joined: String,
    /// The same with `’` made `'`, lower case: for phrases whose spelling varies.
    folded: String,
    /// The first line worth showing: an error's, else the result's, else stderr's.
    first: String,
}

impl Texts {
    fn of(out: &AgentOutput) -> Texts {
        let result = tail_window(&out.result_text);
        let stderr = tail_window(&out.stderr_tail);
        // Error messages first: a result text without a result event is only the last thing
        // the assistant said, which is rarely why the run failed.
        let mut parts: Vec<&str> = out.errors.iter().map(String::as_str).collect();
        parts.push(result);
        parts.push(stderr);
        let joined = parts.join("\n");
        let folded = joined.replace('\u{2019}', "'").to_lowercase();
        let first = parts
            .iter()
            .flat_map(|p| p.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| short_line(l, 300))
            .unwrap_or_default();
        Texts {
            joined,
            folded,
            first,
        }
    }

    fn any(&self, needles: &[&str]) -> bool {
        needles.iter().any(|n| self.joined.contains(n))
    }

    fn first_line(&self) -> &str {
        &self.first
    }

    /// The message for a class: the agent's own first line; without a result, what is known
    /// of the exit first.
    fn headline(&self, name: &str, out: &AgentOutput) -> String {
        if out.saw_result && !self.first.is_empty() {
            return self.first.clone();
        }
        let exit = match out.exit_code {
            Some(code) => format!("{name} exited with code {code}"),
            None => format!("{name} was stopped by a signal"),
        };
        let exit = if out.saw_result {
            exit
        } else {
            format!("{exit} without a result")
        };
        if self.first.is_empty() {
            exit
        } else {
            format!("{exit}: {}", self.first)
        }
    }

    /// The line that announces a usage limit, if any.
    fn usage_limit_line(&self) -> Option<String> {
        let folded_lines = self.folded.lines();
        for (line, folded) in self.joined.lines().zip(folded_lines) {
            let hit = (folded.contains("hit your") && folded.contains("limit"))
                || folded.contains("usage limit reached");
            if hit {
                return Some(short_line(line.trim(), 300));
            }
        }
        None
    }
}

/// `line`, at most `cap` characters (a longer one ends in `…`).
fn short_line(line: &str, cap: usize) -> String {
    if line.chars().count() <= cap {
        return line.to_string();
    }
    let mut out: String = line.chars().take(cap - 1).collect();
    out.push('…');
    out
}

fn tail_window(text: &str) -> &str {
    if text.len() <= TEXT_WINDOW {
        return text;
    }
    let mut start = text.len() - TEXT_WINDOW;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The model named in a "model … is not available" text.
fn model_in(text: &str) -> Option<String> {
    let re = Regex::new(r"(?-u)[Tt]he model \(?`?([A-Za-z0-9._:/@\[\]-]+)").ok()?;
    re.captures(text).map(|c| c[1].to_string())
}

/// The delays before each retry of a transient failure: exactly `policy.retries` of them,
/// growing from `first_delay` by [`MULTIPLIER`] up to `max_delay`, each varied by [`JITTER`]
/// and never above `max_delay`.
pub fn retry_delays(policy: &RetryPolicy) -> Vec<Duration> {
    let mut backoff = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(policy.first_delay)
        .with_randomization_factor(JITTER)
        .with_multiplier(MULTIPLIER)
        .with_max_interval(policy.max_delay)
        .with_max_elapsed_time(None)
        .build();
    (0..policy.retries)
        .map(|_| {
            backoff
                .next_backoff()
                .unwrap_or(policy.max_delay)
                .min(policy.max_delay)
        })
        .collect()
}

/// When a usage limit resets, from the agent's message, in seconds since the epoch.
///
/// Understood: `Claude AI usage limit reached|<epoch>`; `… resets 5am`, `resets 5:44 AM
/// (Europe/Berlin)`, `resets Mon 12:00am`, `resets Sep 24 at 3pm`, `resets in 1d 5h`; Codex
/// `… try again at 5:44 AM.`, `try again at Jul 9th, 2026 1:47 AM.`. A clock time is read in
/// the local time zone (a zone name in parentheses is ignored: kern has no time-zone
/// database) and means its next occurrence after `now`. `None` when no time is found.
pub fn parse_reset_time(message: &str, now: DateTime<Local>) -> Option<i64> {
    if let Some(epoch) = epoch_in(message) {
        return Some(epoch);
    }
    if let Some(seconds) = relative_in(message) {
        return Some(now.timestamp() + seconds);
    }
    clock_time_in(message, now)
}

fn epoch_in(message: &str) -> Option<i64> {
    let re = Regex::new(r"(?-u)usage limit reached\|([0-9]{9,13})").ok()?;
    let n: i64 = re.captures(message)?[1].parse().ok()?;
    Some(if n > 100_000_000_000 { n / 1000 } else { n })
}

fn relative_in(message: &str) -> Option<i64> {
    let re = Regex::new(r"(?i-u)resets\s+in\s+((?:[0-9]+\s*[a-z]+\s*)+)").ok()?;
    let spec = re.captures(message)?.get(1)?.as_str().to_ascii_lowercase();
    let part = Regex::new(r"(?-u)([0-9]+)\s*([a-z]+)").ok()?;
    let mut seconds = 0i64;
    let mut any = false;
    for c in part.captures_iter(&spec) {
        let n: i64 = c[1].parse().ok()?;
        let unit = match &c[2] {
            "d" | "day" | "days" => 86_400,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            _ => break,
        };
        seconds += n * unit;
        any = true;
    }
    any.then_some(seconds)
}

fn clock_time_in(message: &str, now: DateTime<Local>) -> Option<i64> {
    let re = Regex::new(concat!(
        r"(?i-u)(?:resets|try again at)\s+(?:at\s+)?",
        r"(?:(?P<wd>mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?",
        r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+",
        r"(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>[0-9]{4}),?\s+)?(?:at\s+)?)?",
        r"(?P<h>[0-9]{1,2})(?::(?P<min>[0-9]{2}))?\s*(?P<ampm>[ap]\.?m)?(?:[^a-z]|$)",
    ))
    .ok()?;
    let c = re.captures(message)?;
    let hour: u32 = c["h"].parse().ok()?;
    let minute: u32 = match c.name("min") {
        Some(m) => m.as_str().parse().ok()?,
        None => 0,
    };
    let hour = match c.name("ampm").map(|m| m.as_str().to_ascii_lowercase()) {
        Some(ampm) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            (hour % 12) + if ampm.starts_with('p') { 12 } else { 0 }
        }
        // Without am/pm only `H:MM` is a time: a bare number is not.
        None if c.name("min").is_some() && hour < 24 => hour,
        None => return None,
    };
    if minute > 59 {
        return None;
    }
    let today = now.date_naive();
    let at = |date: NaiveDate| -> Option<DateTime<Local>> {
        local(date.and_hms_opt(hour, minute, 0)?)
    };
    if let Some(month) = c.name("mon") {
        let month = month_number(&month.as_str().to_ascii_lowercase())?;
        let day: u32 = c["day"].parse().ok()?;
        if let Some(year) = c.name("year") {
            let year: i32 = year.as_str().parse().ok()?;
            return at(NaiveDate::from_ymd_opt(year, month, day)?).map(|t| t.timestamp());
        }
        let this_year = at(NaiveDate::from_ymd_opt(today.year(), month, day)?)?;
        if this_year > now {
            return Some(this_year.timestamp());
        }
        return at(NaiveDate::from_ymd_opt(today.year() + 1, month, day)?).map(|t| t.timestamp());
    }
    if let Some(weekday) = c.name("wd") {
        let weekday = weekday_of(&weekday.as_str().to_ascii_lowercase())?;
        return (0..=7)
            .filter_map(|d| today.checked_add_days(chrono::Days::new(d)))
            .filter(|date| date.weekday() == weekday)
            .filter_map(at)
            .find(|t| *t > now)
            .map(|t| t.timestamp());
    }
    let time = at(today)?;
    if time > now {
        return Some(time.timestamp());
    }
    at(today.succ_opt()?).map(|t| t.timestamp())
}

/// A local wall-clock time; inside a daylight-saving gap, the first valid time after it.
fn local(naive: NaiveDateTime) -> Option<DateTime<Local>> {
    Local.from_local_datetime(&naive).earliest().or_else(|| {
        Local
            .from_local_datetime(&(naive + chrono::Duration::hours(1)))
            .earliest()
    })
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    MONTHS
        .iter()
        .position(|m| name.starts_with(m))
        .map(|i| i as u32 + 1)
}

fn weekday_of(name: &str) -> Option<Weekday> {
    const DAYS: [(&str, Weekday); 7] = [
        ("mon", Weekday::Mon),
        ("tue", Weekday::Tue),
        ("wed", Weekday::Wed),
        ("thu", Weekday::Thu),
        ("fri", Weekday::Fri),
        ("sat", Weekday::Sat),
        ("sun", Weekday::Sun),
    ];
    DAYS.iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, d)| *d)
}
