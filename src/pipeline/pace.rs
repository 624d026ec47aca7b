//! Usage windows in the run: what each stage used of each window the agents report
//! ([`window_uses`]), the night's expected use of a stage kind ([`expected_use`]), and
//! `--pace` ([`gate`]): go, pause until a time, or stop, before a stage.
//!
//! The one decision a reader must know: a stage's use of a window is the difference between
//! what its agent reported after it and the run's previous reading of the same window (same
//! agent, same kind, same reset); with no previous reading, or across a reset, it is unknown
//! and the report says so rather than guessing.

use crate::agent::stream::window::Window;
use crate::settings::PaceLine;
use crate::stage::Stage;
use crate::stage::record::WindowUse;

/// Two readings of one window whose reset times differ by no more than this are the same
/// window (agents round their reset times).
const SAME_RESET_SECS: i64 = 120;

/// The run's latest reading of each window: `(agent, window)`.
pub(crate) type Readings = Vec<(String, Window)>;

/// Percent, rounded to a tenth.
fn percent(fraction: f64) -> f64 {
    (fraction * 1000.0).round() / 10.0
}

/// What a stage that `agent` ran used of each window it `reported`, given the run's readings
/// `before` it.
pub(crate) fn window_uses(before: &Readings, agent: &str, reported: &[Window]) -> Vec<WindowUse> {
    reported
        .iter()
        .map(|now| {
            let previous = before.iter().find(|(a, w)| {
                a == agent
                    && w.kind == now.kind
                    && match (w.resets_at, now.resets_at) {
                        (Some(x), Some(y)) => (x - y).abs() <= SAME_RESET_SECS,
                        (None, None) => true,
                        _ => false,
                    }
            });
            WindowUse {
                agent: agent.to_string(),
                kind: now.kind.clone(),
                used_before: previous.map(|(_, w)| percent(w.used)),
                used_after: percent(now.used),
                resets_at: now.resets_at,
            }
        })
        .collect()
}

/// The readings after a stage of `agent` reported `reported`: each replaces the reading of
/// the same agent and kind.
pub(crate) fn read(readings: &mut Readings, agent: &str, reported: &[Window]) {
    for window in reported {
        readings.retain(|(a, w)| !(a == agent && w.kind == window.kind));
        readings.push((agent.to_string(), window.clone()));
    }
}

/// What a stage of kind `stage` is expected to use of a window of `kind`, in points: the
/// median of what this night's stages of that kind used of it (`spent`: stage, window kind,
/// points), 0 before any is known.
pub(crate) fn expected_use(spent: &[(Stage, String, f64)], stage: Stage, kind: &str) -> f64 {
    let mut uses: Vec<f64> = spent
        .iter()
        .filter(|(s, k, _)| *s == stage && k == kind)
        .map(|(_, _, points)| *points)
        .collect();
    if uses.is_empty() {
        return 0.0;
    }
    uses.sort_by(f64::total_cmp);
    let mid = uses.len() / 2;
    if uses.len() % 2 == 1 {
        uses[mid]
    } else {
        f64::midpoint(uses[mid - 1], uses[mid])
    }
}

/// The points above the elapsed share that `--pace=even` (and the first-hour share after a
/// reset) allows.
pub(crate) const EVEN_MARGIN: f64 = 0.05;

/// The first hour after a reset kern waited for: the new window's share kern may spend in it.
const FIRST_HOUR_SECS: i64 = 3600;

/// What `--pace` asks of each window: the short ones (`--pace`) and the week-long ones
/// (`--pace-week`, else as `--pace`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rules {
    pub short: Option<PaceLine>,
    pub week: Option<PaceLine>,
}

impl Rules {
    fn for_kind(&self, kind: &str) -> Option<PaceLine> {
        if crate::agent::stream::window::is_week(kind) {
            self.week.or(self.short)
        } else {
            self.short
        }
    }
}

/// What the gate is asked before a stage (or before taking a task).
#[derive(Debug, Clone)]
pub(crate) struct Ask<'a> {
    /// The latest readings of the windows of the agent the stage runs on.
    pub readings: &'a [Window],
    /// The agent's name, for the words.
    pub agent: &'a str,
    /// The stage about to start, and what it is expected to use of each window kind, in points.
    pub stage: Stage,
    pub expected: &'a [(String, f64)],
    /// Now, in seconds since the epoch.
    pub now: i64,
    /// The latest a pause may end (now plus what is left of `--max-wait`).
    pub wait_until: i64,
    /// The night's end (`--until`, `--deadline`, the watchdog's) on the same clock, and as the
    /// person reads it: no pause waits past it.
    pub night_ends: Option<(i64, &'a str)>,
    /// The windows kern waited for the reset of in this run: kind and the reset time.
    pub resumed: &'a [(String, i64)],
}

/// What `--pace` says before a stage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Gate {
    /// Go on.
    Go,
    /// Wait until `until` (epoch seconds), then go on.
    Pause {
        until: i64,
        /// The window that holds it back.
        kind: String,
        /// What the person reads.
        line: String,
    },
    /// Take no new task: the line cannot be waited for (no known reset, or past --max-wait).
    Stop {
        /// The window, when its reset is known.
        kind: String,
        /// Its reset, when known.
        resets_at: Option<i64>,
        line: String,
    },
}

/// The window's line at `now` (a fraction), and the first moment it allows `need`, if one
/// comes before the window resets.
fn line_at(
    rule: PaceLine,
    window: &Window,
    len: Option<i64>,
    now: i64,
    first_hour_from: Option<i64>,
    need: f64,
) -> Option<(f64, Option<i64>, &'static str)> {
    let start = window.resets_at.zip(len).map(|(at, len)| at - len);
    // At most p: crossing it waits for the reset (`None`); even: until the share catches up.
    let (base_line, base_allows, mut why) = match rule {
        PaceLine::AtMost(p) => (p, None, "the pace"),
        PaceLine::Even => {
            let (start, len) = start.zip(len)?;
            #[allow(clippy::cast_precision_loss)]
            let share = ((now - start) as f64 / len as f64).clamp(0.0, 1.0);
            #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
            let at = start + ((need - EVEN_MARGIN).max(0.0) * len as f64).ceil() as i64;
            // A stage that would take the window past 100 % fits in no share of it: only
            // the reset allows it.
            (
                (share + EVEN_MARGIN).min(1.0),
                (need <= 1.0).then_some(at.max(now)),
                "the even pace",
            )
        }
    };
    let (mut line, mut allows_at) = (base_line, base_allows);
    if let (Some(from), Some(len)) = (first_hour_from, len)
        && now < from + FIRST_HOUR_SECS
    {
        #[allow(clippy::cast_precision_loss)]
        let cap = FIRST_HOUR_SECS as f64 / len as f64 + EVEN_MARGIN;
        if cap < line {
            line = cap;
            why = "the first-hour share after the reset";
            let after_the_hour = from + FIRST_HOUR_SECS;
            allows_at = if window.used < base_line && need <= base_line {
                Some(base_allows.unwrap_or(now).max(after_the_hour))
            } else {
                base_allows.map(|t| t.max(after_the_hour))
            };
        }
    }
    Some((line, allows_at, why))
}

/// `--pace` before a stage: go, pause until the line allows the stage's expected use, or, when
/// that cannot be waited for (past `--max-wait`, or past the night's end), stop taking tasks.
/// A window is crossed when its use is at the line, or its use plus the stage's expected use
/// is past it. A window whose reset has passed counts as a fresh one, used 0. Of several
/// windows the stop wins, then the longest pause.
pub(crate) fn gate(rules: &Rules, ask: &Ask<'_>) -> Gate {
    use crate::agent::stream::window::length_secs;
    let mut pause: Option<(i64, String, String)> = None;
    for reported in ask.readings {
        let Some(rule) = rules.for_kind(&reported.kind) else {
            continue;
        };
        let len = length_secs(&reported.kind);
        let window = match (reported.resets_at, len) {
            (Some(at), Some(len)) if at <= ask.now => Window {
                kind: reported.kind.clone(),
                used: 0.0,
                resets_at: Some(at + len * ((ask.now - at) / len + 1)),
            },
            _ => reported.clone(),
        };
        let start = window.resets_at.zip(len).map(|(at, len)| at - len);
        let first_hour_from = start.filter(|start| {
            ask.resumed
                .iter()
                .any(|(kind, at)| *kind == window.kind && (at - start).abs() <= SAME_RESET_SECS)
        });
        let expected = ask
            .expected
            .iter()
            .find(|(kind, _)| *kind == window.kind)
            .map_or(0.0, |(_, points)| points / 100.0);
        let need = window.used + expected;
        let Some((line, allows_at, why)) =
            line_at(rule, &window, len, ask.now, first_hour_from, need)
        else {
            continue;
        };
        if window.used < line && need <= line {
            continue;
        }
        let name = window.kind.replace('_', "-");
        let expects = if expected > 0.0 {
            format!(
                " and a {} stage is expected to use {}%",
                ask.stage.name(),
                percent(expected)
            )
        } else {
            String::new()
        };
        let resets = window.resets_at.map_or(String::new(), |at| {
            format!(", resets in {}", secs_text(at - ask.now))
        });
        let said = format!(
            "--pace: {}'s {name} window is {}% used{resets}{expects} ({why} is {}%)",
            ask.agent,
            percent(window.used).round(),
            percent(line).round()
        );
        let until = allows_at
            .or(window.resets_at)
            .map(|t| window.resets_at.map_or(t, |at| t.min(at)));
        let past_the_night = match (until, ask.night_ends) {
            (Some(until), Some((end, shown))) if until > end && until <= ask.wait_until => {
                Some(shown)
            }
            _ => None,
        };
        if let Some(shown) = past_the_night {
            return Gate::Stop {
                kind: window.kind.clone(),
                resets_at: window.resets_at,
                line: format!(
                    "{said} — waiting would pass the night's end ({shown}): no new task taken, the night ends"
                ),
            };
        }
        match until {
            Some(until) if until <= ask.wait_until => {
                if pause.as_ref().is_none_or(|(t, _, _)| until > *t) {
                    pause = Some((
                        until,
                        window.kind.clone(),
                        format!("{said} — pausing {} until then", secs_text(until - ask.now)),
                    ));
                }
            }
            _ => {
                return Gate::Stop {
                    kind: window.kind.clone(),
                    resets_at: window.resets_at,
                    line: format!(
                        "{said} — no new task taken; run kern again later, or raise --pace"
                    ),
                };
            }
        }
    }
    match pause {
        Some((until, kind, line)) => Gate::Pause { until, kind, line },
        None => Gate::Go,
    }
}

/// `2h`, `1h 59m`, `45s`.
fn secs_text(secs: i64) -> String {
    crate::text::duration(std::time::Duration::from_secs(secs.unsigned_abs()))
}

/// The latest reading of each window (by agent and kind) in a run log's `events`, in the
/// order the windows were first reported: what `kern status` shows as the window now.
pub(crate) fn latest_windows(events: &[crate::state::run_log::LoggedEvent]) -> Vec<WindowUse> {
    let mut latest: Vec<WindowUse> = Vec::new();
    for logged in events {
        if let crate::event::RunEvent::StageEnd { window, .. } = &logged.event {
            for used in window {
                match latest
                    .iter_mut()
                    .find(|w| w.agent == used.agent && w.kind == used.kind)
                {
                    Some(slot) => *slot = used.clone(),
                    None => latest.push(used.clone()),
                }
            }
        }
    }
    latest
}

/// `kern status`'s line for a window read as `used` when it is `now` (epoch seconds).
pub(crate) fn window_now_line(used: &WindowUse, now: i64) -> String {
    let name = format!(
        "{}'s {} window",
        used.agent,
        crate::agent::stream::window::label(&used.kind)
    );
    match used.resets_at {
        Some(at) if at <= now => format!(
            "{name} has reset since the last reading ({} % used then)",
            used.used_after
        ),
        Some(at) => format!(
            "{name} {} % used, resets in {}",
            used.used_after,
            crate::text::duration(std::time::Duration::from_secs((at - now).unsigned_abs()))
        ),
        None => format!("{name} {} % used", used.used_after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_now_is_the_latest_reading_of_each() {
        let line = |json: &str| -> crate::state::run_log::LoggedEvent {
            serde_json::from_str(json).unwrap()
        };
        let events = vec![
            line(
                r#"{"ts":"2026-01-15T04:00:00Z","run":"1-a","event":"stage_end","stage":"research","window":[{"agent":"claude","kind":"five_hour","used_before":null,"used_after":40.0,"resets_at":10000},{"agent":"claude","kind":"seven_day","used_before":null,"used_after":10.0,"resets_at":900000}]}"#,
            ),
            line(
                r#"{"ts":"2026-01-15T04:05:00Z","run":"1-a","event":"stage_end","stage":"implement"}"#,
            ),
            line(
                r#"{"ts":"2026-01-15T04:09:00Z","run":"1-a","event":"stage_end","stage":"implement","window":[{"agent":"claude","kind":"five_hour","used_before":40.0,"used_after":47.0,"resets_at":10000}]}"#,
            ),
        ];
        let latest = latest_windows(&events);
        assert_eq!(
            latest
                .iter()
                .map(|w| (w.kind.as_str(), w.used_after))
                .collect::<Vec<_>>(),
            vec![("five_hour", 47.0), ("seven_day", 10.0)]
        );
        assert_eq!(
            window_now_line(&latest[0], 10_000 - 7_800),
            "claude's 5-hour window 47 % used, resets in 2h 10m"
        );
        assert_eq!(
            window_now_line(&latest[0], 10_001),
            "claude's 5-hour window has reset since the last reading (47 % used then)"
        );
        assert_eq!(
            window_now_line(
                &WindowUse {
                    resets_at: None,
                    ..latest[1].clone()
                },
                0
            ),
            "claude's 7-day window 10 % used"
        );
    }

    fn w(kind: &str, used: f64, resets_at: Option<i64>) -> Window {
        Window {
            kind: kind.to_string(),
            used,
            resets_at,
        }
    }

    fn u(kind: &str, before: Option<f64>, after: f64, resets_at: Option<i64>) -> WindowUse {
        WindowUse {
            agent: "claude".into(),
            kind: kind.into(),
            used_before: before,
            used_after: after,
            resets_at,
        }
    }

    const NOW: i64 = 1_000_000;

    fn ask<'a>(
        readings: &'a [Window],
        expected: &'a [(String, f64)],
        wait_secs: i64,
        resumed: &'a [(String, i64)],
    ) -> Ask<'a> {
        Ask {
            readings,
            agent: "claude",
            stage: Stage::Implement,
            expected,
            now: NOW,
            wait_until: NOW + wait_secs,
            night_ends: None,
            resumed,
        }
    }

    #[test]
    fn no_pause_waits_past_the_nights_end() {
        let rules = Rules {
            short: Some(PaceLine::AtMost(0.8)),
            week: None,
        };
        let readings = vec![w("five_hour", 0.85, Some(NOW + 7200))];
        let at = |end: i64| Ask {
            night_ends: Some((NOW + end, "07:00")),
            ..ask(&readings, &[], 6 * 3600, &[])
        };
        assert_eq!(
            gate(&rules, &at(3600)),
            Gate::Stop {
                kind: "five_hour".into(),
                resets_at: Some(NOW + 7200),
                line: "--pace: claude's five-hour window is 85% used, resets in 2h (the pace is 80%) — waiting would pass the night's end (07:00): no new task taken, the night ends".into(),
            }
        );
        // The reset before the night's end: pause for it.
        assert!(matches!(
            gate(&rules, &at(3 * 3600)),
            Gate::Pause { until, .. } if until == NOW + 7200
        ));
        // Past --max-wait anyway: the stop says so, as without a deadline.
        let short_wait = Ask {
            night_ends: Some((NOW + 600, "07:00")),
            ..ask(&readings, &[], 60, &[])
        };
        assert!(matches!(
            gate(&rules, &short_wait),
            Gate::Stop { line, .. } if line.ends_with("no new task taken; run kern again later, or raise --pace")
        ));
    }

    #[test]
    fn the_gate_goes_pauses_or_stops_by_the_windows_shape() {
        let at = |p: f64| Some(PaceLine::AtMost(p));
        let short = |line| Rules {
            short: line,
            week: None,
        };
        let stop = |line: &str| Gate::Stop {
            kind: "five_hour".into(),
            resets_at: Some(NOW + 7200),
            line: format!("{line} — no new task taken; run kern again later, or raise --pace"),
        };
        let pause = |kind: &str, until: i64, line: &str| Gate::Pause {
            until,
            kind: kind.into(),
            line: line.into(),
        };
        let five = |used: f64, resets_in: i64| w("five_hour", used, Some(NOW + resets_in));
        let week = |used: f64, resets_in: i64| w("seven_day", used, Some(NOW + resets_in));
        let implement_uses = |points: f64| vec![("five_hour".to_string(), points)];
        type Case = (
            &'static str,
            Rules,
            Vec<Window>,
            Vec<(String, f64)>,
            i64,
            Gate,
        );
        let cases: Vec<Case> = vec![
            ("no pace", short(None), vec![five(0.99, 7200)], vec![], 0, Gate::Go),
            ("nothing reported", short(at(0.9)), vec![], vec![], 0, Gate::Go),
            ("under the line", short(at(0.9)), vec![five(0.89, 7200)], vec![], 0, Gate::Go),
            (
                "at the line, no time to wait: stop (as --pace always did)",
                short(at(0.9)),
                vec![five(0.9, 7200)],
                vec![],
                3600,
                stop("--pace: claude's five-hour window is 90% used, resets in 2h (the pace is 90%)"),
            ),
            (
                "at the line, the reset within --max-wait: pause until it",
                short(at(0.9)),
                vec![five(0.93, 7200)],
                vec![],
                6 * 3600,
                pause(
                    "five_hour",
                    NOW + 7200,
                    "--pace: claude's five-hour window is 93% used, resets in 2h (the pace is 90%) — pausing 2h until then",
                ),
            ),
            (
                "under the line, but the stage's expected use crosses it",
                short(at(0.8)),
                vec![five(0.75, 600)],
                implement_uses(6.0),
                3600,
                pause(
                    "five_hour",
                    NOW + 600,
                    "--pace: claude's five-hour window is 75% used, resets in 10m and a implement stage is expected to use 6% (the pace is 80%) — pausing 10m until then",
                ),
            ),
            (
                "the week by --pace-week, the short window fine",
                Rules { short: at(0.9), week: at(0.7) },
                vec![five(0.2, 7200), week(0.75, 86_400)],
                vec![],
                3600,
                Gate::Stop {
                    kind: "seven_day".into(),
                    resets_at: Some(NOW + 86_400),
                    line: "--pace: claude's seven-day window is 75% used, resets in 24h (the pace is 70%) — no new task taken; run kern again later, or raise --pace".into(),
                },
            ),
            (
                "the week as --pace without --pace-week",
                short(at(0.8)),
                vec![week(0.85, 86_400)],
                vec![],
                0,
                Gate::Stop {
                    kind: "seven_day".into(),
                    resets_at: Some(NOW + 86_400),
                    line: "--pace: claude's seven-day window is 85% used, resets in 24h (the pace is 80%) — no new task taken; run kern again later, or raise --pace".into(),
                },
            ),
            (
                "--pace-week alone leaves the short window be",
                Rules { short: None, week: at(0.7) },
                vec![five(0.99, 7200)],
                vec![],
                0,
                Gate::Go,
            ),
            (
                "a window that has reset is a fresh one",
                short(at(0.8)),
                vec![five(0.95, -5)],
                vec![],
                0,
                Gate::Go,
            ),
            (
                "no reset known: nothing to wait for",
                short(at(0.8)),
                vec![w("five_hour", 0.85, None)],
                vec![],
                6 * 3600,
                Gate::Stop {
                    kind: "five_hour".into(),
                    resets_at: None,
                    line: "--pace: claude's five-hour window is 85% used (the pace is 80%) — no new task taken; run kern again later, or raise --pace".into(),
                },
            ),
            // Even: 1h of 5h elapsed (reset in 4h) allows 20 % + 5.
            (
                "even: under the elapsed share",
                short(Some(PaceLine::Even)),
                vec![five(0.2, 4 * 3600)],
                implement_uses(4.0),
                0,
                Gate::Go,
            ),
            (
                "even: ahead of the elapsed share, pause until it catches up",
                short(Some(PaceLine::Even)),
                vec![five(0.3, 4 * 3600)],
                implement_uses(5.0),
                6 * 3600,
                // 35 % is allowed 30 % of the way in: 1.5 h after the start, 30 min from now.
                pause(
                    "five_hour",
                    NOW + 1800,
                    "--pace: claude's five-hour window is 30% used, resets in 4h and a implement stage is expected to use 5% (the even pace is 25%) — pausing 30m until then",
                ),
            ),
            (
                "even: near the window's end, a stage that would pass 100 % waits for the reset",
                short(Some(PaceLine::Even)),
                vec![five(0.992, 600)],
                implement_uses(1.6),
                6 * 3600,
                pause(
                    "five_hour",
                    NOW + 600,
                    "--pace: claude's five-hour window is 99% used, resets in 10m and a implement stage is expected to use 1.6% (the even pace is 100%) — pausing 10m until then",
                ),
            ),
            (
                "even: too far ahead to wait within --max-wait",
                short(Some(PaceLine::Even)),
                vec![five(0.5, 4 * 3600)],
                vec![],
                600,
                Gate::Stop {
                    kind: "five_hour".into(),
                    resets_at: Some(NOW + 4 * 3600),
                    line: "--pace: claude's five-hour window is 50% used, resets in 4h (the even pace is 25%) — no new task taken; run kern again later, or raise --pace".into(),
                },
            ),
        ];
        for (name, rules, readings, expected, wait, want) in cases {
            assert_eq!(
                gate(&rules, &ask(&readings, &expected, wait, &[])),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn after_a_reset_kern_waited_for_it_spends_at_most_a_first_hour_share() {
        let rules = Rules {
            short: Some(PaceLine::AtMost(0.9)),
            week: None,
        };
        // The window began 10 minutes ago, at the reset kern waited for.
        let start = NOW - 600;
        let resumed = vec![("five_hour".to_string(), start)];
        let fresh = |used: f64| vec![w("five_hour", used, Some(start + 5 * 3600))];
        // 20 % of 5 h is the first hour's share, plus 5: 25 % allowed until start + 1 h.
        assert_eq!(gate(&rules, &ask(&fresh(0.1), &[], 0, &resumed)), Gate::Go);
        assert_eq!(
            gate(&rules, &ask(&fresh(0.26), &[], 6 * 3600, &resumed)),
            Gate::Pause {
                until: start + 3600,
                kind: "five_hour".into(),
                line: "--pace: claude's five-hour window is 26% used, resets in 4h 50m (the first-hour share after the reset is 25%) — pausing 50m until then".into(),
            }
        );
        // Without a reset kern waited for, the pace alone counts.
        assert_eq!(gate(&rules, &ask(&fresh(0.26), &[], 0, &[])), Gate::Go);
        // After the first hour, the pace alone counts.
        let later = vec![w("five_hour", 0.26, Some(NOW + 3 * 3600))];
        let long_ago = vec![("five_hour".to_string(), NOW - 2 * 3600)];
        assert_eq!(gate(&rules, &ask(&later, &[], 0, &long_ago)), Gate::Go);
    }

    #[test]
    fn a_stage_uses_the_difference_from_the_last_reading_of_the_same_window() {
        let before: Readings = vec![
            ("claude".into(), w("five_hour", 0.40, Some(10_000))),
            ("claude".into(), w("seven_day", 0.10, Some(900_000))),
            ("codex".into(), w("five_hour", 0.05, Some(10_000))),
        ];
        let cases: Vec<(&str, &str, Vec<Window>, Vec<WindowUse>)> = vec![
            (
                "same windows, reset rounded",
                "claude",
                vec![
                    w("five_hour", 0.47, Some(10_060)),
                    w("seven_day", 0.11, Some(900_000)),
                ],
                vec![
                    u("five_hour", Some(40.0), 47.0, Some(10_060)),
                    u("seven_day", Some(10.0), 11.0, Some(900_000)),
                ],
            ),
            (
                "the window reset between: unknown",
                "claude",
                vec![w("five_hour", 0.03, Some(28_000))],
                vec![u("five_hour", None, 3.0, Some(28_000))],
            ),
            (
                "another agent's reading does not count",
                "program:x",
                vec![w("five_hour", 0.5, Some(10_000))],
                vec![WindowUse {
                    agent: "program:x".into(),
                    ..u("five_hour", None, 50.0, Some(10_000))
                }],
            ),
            ("nothing reported", "claude", vec![], vec![]),
        ];
        for (name, agent, reported, want) in cases {
            assert_eq!(window_uses(&before, agent, &reported), want, "{name}");
        }
        assert_eq!(u("five_hour", Some(40.0), 47.0, None).spent(), Some(7.0));
        assert_eq!(u("five_hour", Some(40.0), 39.0, None).spent(), Some(0.0));
        assert_eq!(u("five_hour", None, 47.0, None).spent(), None);

        let mut readings = before.clone();
        read(
            &mut readings,
            "claude",
            &[w("five_hour", 0.5, Some(10_000))],
        );
        assert_eq!(readings.len(), 3);
        assert!(readings.contains(&("claude".into(), w("five_hour", 0.5, Some(10_000)))));
    }

    #[test]
    fn the_expected_use_is_the_nights_median_for_the_stage_kind() {
        let spent = vec![
            (Stage::Implement, "five_hour".to_string(), 6.0),
            (Stage::Implement, "five_hour".to_string(), 2.0),
            (Stage::Implement, "five_hour".to_string(), 9.0),
            (Stage::Research, "five_hour".to_string(), 1.0),
            (Stage::Research, "five_hour".to_string(), 2.0),
            (Stage::Implement, "seven_day".to_string(), 1.0),
        ];
        assert_eq!(expected_use(&spent, Stage::Implement, "five_hour"), 6.0);
        assert_eq!(expected_use(&spent, Stage::Research, "five_hour"), 1.5);
        assert_eq!(expected_use(&spent, Stage::Implement, "seven_day"), 1.0);
        assert_eq!(expected_use(&spent, Stage::Review, "five_hour"), 0.0);
    }
}
