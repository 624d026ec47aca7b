//! Small text forms used wherever kern writes for a person: durations, money, shell words,
//! and the cleaning of untrusted text. One function per form, so the same fact never reads
//! two ways in two places.

use std::time::Duration;

/// `45s`, `2m`, `2m 03s`, `1h`, `1h 02m` (whole seconds, rounded down): short, and for a whole
/// number of minutes or hours also a valid value of kern's duration options.
pub(crate) fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

/// `$0.41`; amounts under a cent keep the digits they need (`$0.000001`).
pub(crate) fn cost(usd: f64) -> String {
    if usd >= 0.01 || usd == 0.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd}")
    }
}

/// `1 attempt`, `3 attempts`: a count with its noun, plural only for many.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `text` as one shell word: unchanged when it is plain, else in single quotes.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Control characters (newlines, escapes, carriage returns, tabs) become spaces: text from
/// outside kern can then neither move the cursor nor forge a line of kern's own.
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// At most `width` characters, the last of them `…` when cut.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Seven hex digits of an object id, as `git log --oneline` shows them.
pub(crate) fn short_oid(oid: &str) -> &str {
    oid.get(..7).unwrap_or(oid)
}

/// A slug of a task title, safe in a file name and a ref name: lower-case ASCII letters and
/// digits joined by `-`, at most 60 characters, `task` when nothing is left.
pub(crate) fn slug(task: &str) -> String {
    let mut slug = String::new();
    let mut gap = false;
    for c in task.chars() {
        if c.is_ascii_alphanumeric() {
            let dash = gap && !slug.is_empty();
            if slug.len() + usize::from(dash) + 1 > 60 {
                break;
            }
            if dash {
                slug.push('-');
            }
            slug.push(c.to_ascii_lowercase());
            gap = false;
        } else {
            gap = true;
        }
    }
    if slug.is_empty() {
        "task".to_string()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let table = [
            (0, "0s"),
            (45, "45s"),
            (59, "59s"),
            (60, "1m"),
            (90, "1m 30s"),
            (123, "2m 03s"),
            (900, "15m"),
            (3599, "59m 59s"),
            (3600, "1h"),
            (3720, "1h 02m"),
            (5400, "1h 30m"),
            (90_000, "25h"),
        ];
        for (secs, text) in table {
            assert_eq!(duration(Duration::from_secs(secs)), text, "{secs}");
        }
        assert_eq!(duration(Duration::from_millis(45_999)), "45s");
    }

    #[test]
    fn costs() {
        for (usd, text) in [
            (0.41, "$0.41"),
            (0.0, "$0.00"),
            (2.5, "$2.50"),
            (12.0, "$12.00"),
            (0.000001, "$0.000001"),
        ] {
            assert_eq!(cost(usd), text, "{usd}");
        }
    }

    #[test]
    fn counts_are_plural_only_for_many() {
        for (n, text) in [(0, "0 attempts"), (1, "1 attempt"), (2, "2 attempts")] {
            assert_eq!(count(n, "attempt", "attempts"), text);
        }
    }

    #[test]
    fn shell_words_and_cleaning() {
        assert_eq!(shell_quote("--tools=Read,Grep"), "--tools=Read,Grep");
        assert_eq!(shell_quote("Bash(git commit *)"), "'Bash(git commit *)'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(clean("a\x1b[2Jb\nc\td"), "a [2Jb c d");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(short_oid("0123456789abcdef"), "0123456");
        assert_eq!(short_oid("abc"), "abc");
    }
}
