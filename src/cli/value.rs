//! How a flag's value is read: durations (`90s`, `15m`, `1h` or plain seconds) within a range,
//! sizes (`100M`), `--pace`, `--max-cost` and `kern import`'s filters.
//!
//! The decision a reader must know: a value out of range or malformed is refused here, by
//! clap, with a message naming the value and how to write it, so nothing later sees it.

use std::time::Duration;

/// Parses `90s`, `15m`, `1h`, `1h30m` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|e| format!("`{text}`: {e}"));
    }
    humantime::parse_duration(text)
        .map_err(|_| format!("`{text}` is not a duration — write it as 30, 90s, 15m or 1h"))
}

/// An hour, in seconds.
pub(super) const HOUR: u64 = 3600;
/// A day, in seconds.
pub(super) const DAY: u64 = 24 * HOUR;
/// A week, in seconds.
pub(super) const WEEK: u64 = 7 * DAY;

/// How `--pace` paces a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// At most this percent of the window.
    Percent(u8),
    /// No more than the share of the window already elapsed, plus a margin.
    Even,
}

/// `--pace`'s value: `even`, or a percent from 1 to 100.
pub(super) fn pace_value(text: &str) -> Result<Pace, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("even") {
        return Ok(Pace::Even);
    }
    match text.trim_end_matches('%').parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(Pace::Percent(p)),
        _ => Err(format!(
            "`{text}` is not a pace — give a percent from 1 to 100 (`--pace=80`) or `--pace=even`"
        )),
    }
}

/// A duration from `MIN` to `MAX` seconds, both included.
pub(super) fn duration_between<const MIN: u64, const MAX: u64>(
    text: &str,
) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_secs(MIN) || d > Duration::from_secs(MAX) {
        let show = |secs| crate::text::duration(Duration::from_secs(secs));
        return Err(format!(
            "`{}` is out of range — give {} to {}",
            text.trim(),
            show(MIN),
            show(MAX)
        ));
    }
    Ok(d)
}

/// Parses `100M`, `1G`, `500K`, `2MiB` or plain bytes (binary multiples, as git's own sizes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => u32::MAX,
    };
    match number.parse::<u64>() {
        Ok(n) if shift != u32::MAX && n > 0 => n
            .checked_mul(1u64 << shift)
            .filter(|bytes| *bytes <= 1 << 40)
            .ok_or_else(|| format!("`{text}` is out of range — give at most 1024G")),
        _ => Err(format!(
            "`{text}` is not a size — write it as 100M, 1G, 500K or a number of bytes"
        )),
    }
}

/// A filter of `kern import` (a label, a milestone, a login, a repository): not empty, since
/// `gh` drops an empty one and lists every issue.
pub(super) fn filter_value(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(
            "it is empty, and gh would list every open issue for it — give a value, or leave the option out".to_string(),
        );
    }
    Ok(text.to_string())
}

/// `--max-cost`'s value: USD (a leading `$` allowed), more than 0, at most 100000.
pub(super) fn parse_cost(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100_000.0 => Ok(v),
        _ => Err(format!(
            "`{text}` is not an amount in USD from 0.01 to 100000 — write it as 5 or 2.50"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (text, secs) in [
            ("30", 30),
            ("90s", 90),
            ("15m", 900),
            ("1h", 3600),
            ("1h30m", 5400),
            ("0", 0),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        for bad in ["", "-5", "abc", "5x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn import_filters_are_not_empty() {
        assert_eq!(
            filter_value("good first issue").as_deref(),
            Ok("good first issue")
        );
        for bad in ["", "  "] {
            assert!(filter_value(bad).unwrap_err().contains("every open issue"));
        }
    }

    #[test]
    fn sizes() {
        for (text, bytes) in [
            ("100M", 100 << 20),
            ("100m", 100 << 20),
            ("1G", 1 << 30),
            ("500K", 500 << 10),
            ("2MiB", 2 << 20),
            ("4096", 4096),
            ("10 MB", 10 << 20),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "0", "-5", "abc", "5X", "1.5G"] {
            assert_eq!(
                parse_size(bad),
                Err(format!(
                    "`{}` is not a size — write it as 100M, 1G, 500K or a number of bytes",
                    bad.trim()
                )),
                "{bad}"
            );
        }
    }
}
