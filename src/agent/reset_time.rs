//! When a usage limit resets, read from the agent's own words: Claude's `resets …` and
//! `usage limit reached|<epoch>`, Codex's `try again at …`.
//!
//! The one decision a reader must know: a clock time is read in the local time zone (a zone
//! name in parentheses is ignored: kern has no time-zone database) and means its next
//! occurrence after `now`, which the caller passes in, so every case is a table test.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveDateTime, TimeZone, Weekday};
use regex::Regex;

/// The patterns below are fixed; a test proves each compiles (`None` would only mean "no
/// match", silently). They are ASCII-only: kern's regex crate has no Unicode tables.
static EPOCH: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?-u)usage limit reached\|([0-9]{9,13})").ok());

static RELATIVE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i-u)resets\s+in\s+((?:[0-9]+\s*[a-z]+\s*)+)").ok());

static RELATIVE_PART: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?-u)([0-9]+)\s*([a-z]+)").ok());

/// `resets [at] [weekday] [month day[,] [year[,]] [at]] H[:MM] [am|pm]`, and the same after
/// Codex's `try again at`.
static CLOCK_TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i-u)(?:resets|try again at)\s+(?:at\s+)?",
        r"(?:(?P<wd>mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?",
        r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+",
        r"(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>[0-9]{4}),?\s+)?(?:at\s+)?)?",
        r"(?P<h>[0-9]{1,2})(?::(?P<min>[0-9]{2}))?\s*(?P<ampm>[ap]\.?m)?\b",
    ))
    .ok()
});

/// When a usage limit resets, from the agent's message, in seconds since the epoch.
///
/// Understood: `Claude AI usage limit reached|<epoch>`; `… resets 5am`, `resets 5:44 AM
/// (Europe/Berlin)`, `resets Mon 12:00am`, `resets Sep 24 at 3pm`, `resets in 1d 5h`; Codex
/// `… try again at 5:44 AM.`, `try again at Jul 9th, 2026 1:47 AM.`. A clock time is read in
/// the local time zone (a zone name in parentheses is ignored: kern has no time-zone
/// database) and means its next occurrence after `now`. `None` when no time is found.
pub(crate) fn parse_reset_time(message: &str, now: DateTime<Local>) -> Option<i64> {
    if let Some(epoch) = epoch_in(message) {
        return Some(epoch);
    }
    if let Some(seconds) = relative_in(message) {
        return Some(now.timestamp() + seconds);
    }
    clock_time_in(message, now)
}

fn epoch_in(message: &str) -> Option<i64> {
    let n: i64 = EPOCH.as_ref()?.captures(message)?[1].parse().ok()?;
    Some(if n > 100_000_000_000 { n / 1000 } else { n })
}

fn relative_in(message: &str) -> Option<i64> {
    let spec = RELATIVE
        .as_ref()?
        .captures(message)?
        .get(1)?
        .as_str()
        .to_ascii_lowercase();
    let mut seconds = 0i64;
    let mut any = false;
    for c in RELATIVE_PART.as_ref()?.captures_iter(&spec) {
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
    let c = CLOCK_TIME.as_ref()?.captures(message)?;
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
    let at =
        |date: NaiveDate| -> Option<DateTime<Local>> { local(date.and_hms_opt(hour, minute, 0)?) };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        Local
            .with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .unwrap()
            .timestamp()
    }

    #[test]
    fn all_patterns_compile() {
        for (name, pattern) in [
            ("EPOCH", &EPOCH),
            ("RELATIVE", &RELATIVE),
            ("RELATIVE_PART", &RELATIVE_PART),
            ("CLOCK_TIME", &CLOCK_TIME),
        ] {
            assert!(pattern.is_some(), "{name}");
        }
    }

    #[test]
    fn reset_times_are_read_in_local_time() {
        // Thursday 15 January 2026, 04:00 local time: far from any daylight-saving change.
        let now = Local
            .with_ymd_and_hms(2026, 1, 15, 4, 0, 0)
            .single()
            .unwrap();
        let table: [(&str, Option<i64>); 22] = [
            (
                "You've hit your session limit · resets 5am",
                Some(at(2026, 1, 15, 5, 0)),
            ),
            (
                "You've hit your session limit · resets 5:44 AM (Europe/Berlin)",
                Some(at(2026, 1, 15, 5, 44)),
            ),
            ("resets 3am", Some(at(2026, 1, 16, 3, 0))),
            ("resets 4am", Some(at(2026, 1, 16, 4, 0))),
            ("resets 12am", Some(at(2026, 1, 16, 0, 0))),
            ("resets 12pm", Some(at(2026, 1, 15, 12, 0))),
            ("resets 3:45pm", Some(at(2026, 1, 15, 15, 45))),
            ("resets 17:30", Some(at(2026, 1, 15, 17, 30))),
            (
                "You've hit your weekly limit · resets Mon 12:00am",
                Some(at(2026, 1, 19, 0, 0)),
            ),
            ("resets Thu 3am", Some(at(2026, 1, 22, 3, 0))),
            ("resets Thursday 5am", Some(at(2026, 1, 15, 5, 0))),
            (
                "You've hit your weekly limit · resets Sep 24 at 3pm (Australia/Brisbane)",
                Some(at(2026, 9, 24, 15, 0)),
            ),
            ("resets Jan 2, 5am", Some(at(2027, 1, 2, 5, 0))),
            (
                "You've hit your session limit · resets in 1d 5h",
                Some(now.timestamp() + 29 * 3600),
            ),
            (
                "Claude AI usage limit reached|1767243600",
                Some(1_767_243_600),
            ),
            (
                "You’ve hit your usage limit. … try again at 5:44 AM.",
                Some(at(2026, 1, 15, 5, 44)),
            ),
            (
                "You've hit your usage limit for GPT-5.3-Codex-Spark. Switch to another model now, or try again at Jul 9th, 2026 1:47 AM.",
                Some(at(2026, 7, 9, 1, 47)),
            ),
            (
                "You've hit your usage limit. Upgrade your plan or add credits to continue, or try again at Aug 10, 2026, 11:12 AM.",
                Some(at(2026, 8, 10, 11, 12)),
            ),
            ("You've hit your usage limit. Upgrade to Pro", None),
            ("resets soon", None),
            ("resets 5 minutes after the hour", None),
            ("resets 13pm", None),
        ];
        for (message, expected) in table {
            assert_eq!(parse_reset_time(message, now), expected, "{message}");
        }
    }
}
