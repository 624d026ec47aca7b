//! Usage windows as the agents report them: Claude Code's `rate_limit_event` (read in
//! `claude.rs` into a [`RateLimit`]) and Codex's `rate_limits` snapshot (`primary` and
//! `secondary`, each `used_percent`, `window_minutes`, `resets_at`), read here into the same
//! [`RateLimit`], and both flattened into one [`Window`] per window kind.
//!
//! The one decision a reader must know: a window is named by its length, the way Claude names
//! it (`five_hour`, `seven_day`), so `--pace` and the report treat a Codex 300-minute window and
//! Claude's five-hour window alike; a length kern does not know is named `<minutes>_minute`.

use serde_json::Value;

use super::{RateLimit, RateLimitWindow};

/// One usage window's state: what an agent last said of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    /// `five_hour`, `seven_day`, `seven_day_opus`, `<minutes>_minute`, …
    pub kind: String,
    /// The fraction used, usually 0 to 1.
    pub used: f64,
    /// When it resets, in seconds since the epoch.
    pub resets_at: Option<i64>,
}

/// The windows of `limit`, one per kind: every window of `unifiedWindows`, and the limiting
/// window (`rateLimitType`) when it is not among them.
pub(crate) fn windows(limit: &RateLimit) -> Vec<Window> {
    let mut out: Vec<Window> = limit
        .windows
        .iter()
        .map(|w| Window {
            kind: w.name.clone(),
            used: w.utilization,
            resets_at: w.resets_at,
        })
        .collect();
    if let (Some(used), kind) = (limit.utilization, limit.kind.as_deref().unwrap_or("usage"))
        && !out.iter().any(|w| w.kind == kind)
    {
        out.push(Window {
            kind: kind.to_string(),
            used,
            resets_at: limit.resets_at,
        });
    }
    out
}

/// How long a window of `kind` lasts, in seconds, when kern knows.
pub(crate) fn length_secs(kind: &str) -> Option<i64> {
    if kind == "five_hour" {
        Some(5 * 3600)
    } else if kind.starts_with("seven_day") {
        Some(7 * 24 * 3600)
    } else {
        kind.strip_suffix("_minute")
            .and_then(|m| m.parse::<i64>().ok())
            .map(|m| m * 60)
    }
}

/// Whether `kind` is a week-long window (`--pace-week` governs it).
pub(crate) fn is_week(kind: &str) -> bool {
    length_secs(kind).is_some_and(|s| s >= 24 * 3600)
}

/// The window's name for a person: `5-hour`, `7-day`, `7-day opus`, `90-minute`.
pub(crate) fn label(kind: &str) -> String {
    match kind {
        "five_hour" => "5-hour".to_string(),
        "seven_day" => "7-day".to_string(),
        _ => match kind.strip_prefix("seven_day_") {
            Some(rest) => format!("7-day {}", rest.replace('_', " ")),
            None => match kind.strip_suffix("_minute") {
                Some(minutes) => format!("{minutes}-minute"),
                None => kind.replace('_', " "),
            },
        },
    }
}

/// The window kind of a Codex window `window_minutes` long.
fn codex_kind(minutes: i64) -> String {
    match minutes {
        300 => "five_hour".to_string(),
        10080 => "seven_day".to_string(),
        m => format!("{m}_minute"),
    }
}

/// A Codex event's `rate_limits` snapshot (at the top, or inside `msg` or `payload` as the
/// `token_count` event carries it) as a [`RateLimit`]; `None` when the event has none or it
/// holds no window with a `used_percent`. The primary window is the limiting one.
pub(crate) fn codex_rate_limits(event: &Value) -> Option<RateLimit> {
    let limits = [
        &event["rate_limits"],
        &event["msg"]["rate_limits"],
        &event["payload"]["rate_limits"],
    ]
    .into_iter()
    .find(|v| v.is_object())?;
    let window = |key: &str| -> Option<RateLimitWindow> {
        let w = &limits[key];
        let used = w["used_percent"].as_f64()?;
        let minutes = w["window_minutes"].as_i64()?;
        Some(RateLimitWindow {
            name: codex_kind(minutes),
            utilization: used / 100.0,
            resets_at: w["resets_at"].as_i64(),
        })
    };
    let windows: Vec<RateLimitWindow> = ["primary", "secondary"]
        .into_iter()
        .filter_map(window)
        .collect();
    let primary = windows.first()?;
    Some(RateLimit {
        status: if primary.utilization >= 1.0 {
            "rejected".to_string()
        } else {
            "allowed".to_string()
        },
        kind: Some(primary.name.clone()),
        utilization: Some(primary.utilization),
        resets_at: primary.resets_at,
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(kind: &str, used: f64, resets_at: Option<i64>) -> Window {
        Window {
            kind: kind.to_string(),
            used,
            resets_at,
        }
    }

    /// Recorded shapes: Claude Code 2.1's `rate_limit_info` (as the scripted agent prints it
    /// and `claude.rs` reads it), Codex's `token_count` `rate_limits` snapshot.
    #[test]
    fn windows_of_each_agent() {
        let claude = |line: &str| {
            let v: Value = serde_json::from_str(line).unwrap();
            crate::agent::stream::claude_rate_limit(&v["rate_limit_info"]).map(|l| windows(&l))
        };
        let codex = |line: &str| {
            let v: Value = serde_json::from_str(line).unwrap();
            codex_rate_limits(&v).map(|l| windows(&l))
        };
        type Case<'a> = (&'a str, Option<Vec<Window>>, Option<Vec<Window>>);
        let cases: Vec<Case> = vec![
            (
                r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1767243600,"rateLimitType":"five_hour","utilization":0.42,"isUsingOverage":false}}"#,
                Some(vec![w("five_hour", 0.42, Some(1767243600))]),
                None,
            ),
            (
                r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1767243600,"rateLimitType":"five_hour","utilization":0.91,"unifiedWindows":{"five_hour":{"utilization":0.91,"resetsAt":1767243600,"status":"allowed_warning"},"seven_day":{"utilization":0.3,"resetsAt":1767700000}}}}"#,
                Some(vec![
                    w("five_hour", 0.91, Some(1767243600)),
                    w("seven_day", 0.3, Some(1767700000)),
                ]),
                None,
            ),
            // No status: not a usage report.
            (
                r#"{"type":"rate_limit_event","rate_limit_info":{"resetsAt":1}}"#,
                None,
                None,
            ),
            (
                r#"{"type":"token_count","info":null,"rate_limits":{"limit_id":"codex","primary":{"used_percent":12.0,"window_minutes":300,"resets_at":1767243600},"secondary":{"used_percent":3.5,"window_minutes":10080,"resets_at":1767700000},"credits":null,"plan_type":"plus"}}"#,
                None,
                Some(vec![
                    w("five_hour", 0.12, Some(1767243600)),
                    w("seven_day", 0.035, Some(1767700000)),
                ]),
            ),
            (
                r#"{"id":"0","msg":{"type":"token_count","rate_limits":{"primary":{"used_percent":50.0,"window_minutes":90}}}}"#,
                None,
                Some(vec![w("90_minute", 0.5, None)]),
            ),
            (
                r#"{"type":"event_msg","payload":{"type":"token_count","rate_limits":{"primary":{"used_percent":7.0,"window_minutes":300,"resets_at":5},"secondary":null}}}"#,
                None,
                Some(vec![w("five_hour", 0.07, Some(5))]),
            ),
            // A snapshot without a usable window, or none at all.
            (
                r#"{"type":"token_count","rate_limits":{"primary":null}}"#,
                None,
                None,
            ),
            (
                r#"{"type":"turn.completed","usage":{"input_tokens":1}}"#,
                None,
                None,
            ),
        ];
        for (line, want_claude, want_codex) in cases {
            assert_eq!(claude(line), want_claude, "claude: {line}");
            assert_eq!(codex(line), want_codex, "codex: {line}");
        }
    }

    /// The real codex-cli 0.171.0, answered with the subscription's rate-limit headers, prints
    /// no window in `exec --json` (tests/fixtures/codex-0.171.0/README.md): nothing to read.
    #[test]
    fn codex_exec_json_prints_no_window() {
        let recorded = include_str!(
            "../../../tests/fixtures/codex-0.171.0/exec-json-rate-limit-headers.jsonl"
        );
        let (_, out) = crate::agent::stream::fixture::parse_lines(
            recorded.lines(),
            crate::agent::stream::StreamFormat::Codex,
            Some(0),
            "",
        );
        assert!(out.saw_result);
        assert_eq!(out.rate_limit, None);
    }

    #[test]
    fn window_names_and_lengths() {
        for (kind, len, week, shown) in [
            ("five_hour", Some(18000), false, "5-hour"),
            ("seven_day", Some(604_800), true, "7-day"),
            ("seven_day_opus", Some(604_800), true, "7-day opus"),
            ("90_minute", Some(5400), false, "90-minute"),
            ("usage", None, false, "usage"),
        ] {
            assert_eq!(length_secs(kind), len, "{kind}");
            assert_eq!(is_week(kind), week, "{kind}");
            assert_eq!(label(kind), shown, "{kind}");
        }
    }
}
