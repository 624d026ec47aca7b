//! One way to write a moment: UTC, RFC 3339, whole seconds (`2026-11-23T19:25:15Z`), in the
//! lock record, stage records, `run.jsonl`, the run log and the plain output.
//!
//! The one decision a reader must know: kern writes only UTC but reads any RFC 3339 offset,
//! because records written by older kerns (or by hand) may carry `+01:00`; a reader that only
//! accepts `Z` once left a stale `index.lock` behind for everyone outside UTC.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A moment to the whole second, shown as UTC RFC 3339: what is written reads back equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    /// Now, to the second.
    pub fn now() -> Timestamp {
        Timestamp::from(SystemTime::now())
    }

    /// The moment as a system time.
    pub fn system_time(self) -> SystemTime {
        self.0
    }

    /// Seconds since the Unix epoch (negative before it).
    pub fn epoch_seconds(self) -> i64 {
        match self.0.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        }
    }

    /// The moment `seconds` after the Unix epoch (clamped at the epoch).
    pub fn from_epoch_seconds(seconds: i64) -> Timestamp {
        Timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.max(0).unsigned_abs()))
    }

    /// How long ago this was (zero when it lies in the future).
    pub fn elapsed(self) -> Duration {
        SystemTime::now()
            .duration_since(self.0)
            .unwrap_or(Duration::ZERO)
    }
}

/// The test clock's variable: a file holding how many seconds the usage windows' clock is
/// ahead of the real one. For tests and benches only (`benches/windows` plays a night of
/// hours in a minute); only `--pace` and the scripted agent's reset times read it.
pub(crate) const TEST_CLOCK: &str = "KERN_TEST_CLOCK";

fn test_clock() -> Option<(std::path::PathBuf, i64)> {
    let path = std::path::PathBuf::from(std::env::var_os(TEST_CLOCK)?);
    let ahead = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Some((path, ahead))
}

/// Epoch seconds on the usage windows' clock (`--pace`'s gate, the scripted agent's reset
/// times): the real clock, ahead by the test clock's offset when [`TEST_CLOCK`] is set.
pub(crate) fn window_now() -> i64 {
    Timestamp::now().epoch_seconds() + test_clock().map_or(0, |(_, ahead)| ahead)
}

/// With the test clock set, moves it on by `secs` instead of waiting and returns true; else
/// false (the caller waits).
pub(crate) fn pass_on_test_clock(secs: i64) -> bool {
    let Some((path, ahead)) = test_clock() else {
        return false;
    };
    // The clock's file belongs to the test that set it; a failed write only makes it wait.
    std::fs::write(path, format!("{}\n", ahead + secs.max(0))).is_ok()
}

impl From<SystemTime> for Timestamp {
    /// The moment, cut to the whole second.
    fn from(t: SystemTime) -> Timestamp {
        match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => Timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(d.as_secs())),
            Err(_) => Timestamp(t),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let utc: DateTime<Utc> = self.0.into();
        f.write_str(&utc.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

impl FromStr for Timestamp {
    type Err = String;

    /// Any RFC 3339 moment, whatever its offset.
    fn from_str(text: &str) -> Result<Timestamp, String> {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|t| Timestamp::from(SystemTime::from(t)))
            .map_err(|e| format!("`{text}` is not an RFC 3339 time: {e}"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses `--since`: a duration back from now (`12h`, `90m`, `2d`), a date (`2026-11-18`, from
/// its midnight UTC) or an RFC 3339 time.
pub(crate) fn parse_since(text: &str) -> Result<Timestamp, String> {
    parse_since_at(text, Timestamp::now())
}

fn parse_since_at(text: &str, now: Timestamp) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    if let Ok(date) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(midnight) = date.and_hms_opt(0, 0, 0)
    {
        return Ok(Timestamp::from_epoch_seconds(
            midnight.and_utc().timestamp(),
        ));
    }
    let back: std::time::Duration = humantime::parse_duration(text).map_err(|_| {
        format!("`{text}` is neither a duration (12h, 90m, 2d) nor a date (2026-11-18) nor a time (2026-11-18T06:00:00Z)")
    })?;
    let secs = i64::try_from(back.as_secs()).unwrap_or(i64::MAX);
    Ok(Timestamp::from_epoch_seconds(
        now.epoch_seconds().saturating_sub(secs),
    ))
}

/// `--until`: a time of day, whose next coming is meant, or a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// `07:00`: the next time the local clock shows it.
    Clock {
        /// 0 to 23.
        hour: u32,
        /// 0 to 59.
        minute: u32,
    },
    /// An RFC 3339 time (`2026-11-19T07:00:00+01:00`).
    At(Timestamp),
}

/// Parses `--until`: `07:00`, `7:30`, `23:00` (a time of day) or an RFC 3339 time.
pub(crate) fn parse_until(text: &str) -> Result<Until, String> {
    let text = text.trim();
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(Until::At(t));
    }
    let clock = text.split_once(':').and_then(|(h, m)| {
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(h) || !digits(m) || m.len() != 2 {
            return None;
        }
        let hour: u32 = h.parse().ok().filter(|h| *h < 24)?;
        let minute: u32 = m.parse().ok().filter(|m| *m < 60)?;
        Some(Until::Clock { hour, minute })
    });
    clock.ok_or_else(|| {
        format!("`{text}` is not a time — write it as 07:00 (the next 07:00 by the local clock) or 2026-11-19T07:00:00+01:00")
    })
}

/// Parses a time of day only (`kern schedule --at 23:00`).
pub(crate) fn parse_clock(text: &str) -> Result<Until, String> {
    match parse_until(text) {
        Ok(clock @ Until::Clock { .. }) => Ok(clock),
        _ => Err(format!(
            "`{}` is not a time of day — write it as 23:00",
            text.trim()
        )),
    }
}

impl Until {
    /// The moment meant, seen at `now`: a time of day's next coming strictly after `now` (on a
    /// day the clock skips it, the first moment after the skip).
    pub(crate) fn next_after<Tz: chrono::TimeZone>(self, now: &chrono::DateTime<Tz>) -> Timestamp {
        let (hour, minute) = match self {
            Until::At(t) => return t,
            Until::Clock { hour, minute } => (hour, minute),
        };
        let tz = now.timezone();
        let mut date = now.date_naive();
        for _ in 0..3 {
            if let Some(naive) = date.and_hms_opt(hour, minute, 0) {
                let local = tz.from_local_datetime(&naive).earliest().or_else(|| {
                    tz.from_local_datetime(&(naive + chrono::Duration::hours(1)))
                        .earliest()
                });
                if let Some(at) = local.filter(|at| at > now) {
                    return Timestamp::from_epoch_seconds(at.timestamp());
                }
            }
            date = date.succ_opt().unwrap_or(date);
        }
        Timestamp::from_epoch_seconds(now.timestamp() + 24 * 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_is_the_next_coming_of_a_time_of_day_or_a_moment() {
        let zone = chrono::FixedOffset::east_opt(3600).unwrap();
        let now = chrono::TimeZone::with_ymd_and_hms(&zone, 2026, 11, 18, 23, 0, 0).unwrap();
        for (text, at) in [
            ("07:00", "2026-11-19T06:00:00Z"),
            ("23:30", "2026-11-18T22:30:00Z"),
            ("23:00", "2026-11-19T22:00:00Z"),
            ("0:05", "2026-11-18T23:05:00Z"),
            ("2026-11-19T07:00:00+01:00", "2026-11-19T06:00:00Z"),
        ] {
            let until = parse_until(text).unwrap();
            assert_eq!(until.next_after(&now).to_string(), at, "{text}");
        }
        for bad in ["7", "24:00", "07:60", "07:5", "tomorrow", "07:00:00", ""] {
            assert!(parse_until(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn since_takes_a_duration_a_date_or_a_time() {
        let now = Timestamp::from_epoch_seconds(1_795_000_000); // 2026-11-18T11:06:40Z
        let table = [
            ("12h", "2026-11-17T23:06:40Z"),
            ("90m", "2026-11-18T09:36:40Z"),
            ("2d", "2026-11-16T11:06:40Z"),
            ("2026-11-18", "2026-11-18T00:00:00Z"),
            ("2026-11-18T06:00:00+01:00", "2026-11-18T05:00:00Z"),
        ];
        for (text, expected) in table {
            assert_eq!(
                parse_since_at(text, now).unwrap().to_string(),
                expected,
                "{text}"
            );
        }
        assert!(
            parse_since_at("yesterday", now)
                .unwrap_err()
                .contains("neither a duration")
        );
    }

    #[test]
    fn writes_utc_and_reads_any_offset() {
        let t = Timestamp::from_epoch_seconds(1_795_000_000);
        assert_eq!(t.to_string(), "2026-11-18T11:06:40Z");
        for text in [
            "2026-11-18T11:06:40Z",
            "2026-11-18T12:06:40+01:00",
            "2026-11-18T09:06:40-02:00",
            "2026-11-18T11:06:40.000Z",
        ] {
            assert_eq!(text.parse::<Timestamp>(), Ok(t), "{text}");
        }
        assert!("yesterday".parse::<Timestamp>().is_err());
    }

    #[test]
    fn round_trips_through_json() {
        let t = Timestamp::from_epoch_seconds(1_795_000_000);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-11-18T11:06:40Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        assert_eq!(t.epoch_seconds(), 1_795_000_000);
        let now = Timestamp::now();
        assert_eq!(now.to_string().parse::<Timestamp>(), Ok(now));
    }
}
