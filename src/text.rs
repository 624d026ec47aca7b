//! Small text forms used wherever kern writes for a person: durations, money, shell words,
//! and the cleaning of untrusted text. One function per form, so the same fact never reads
//! two ways in two places. A leaf: it imports nothing of the crate, so the reporter, the
//! errors, the retry policy and the state folder all use it without reaching into each other.

use std::time::Duration;

/// The first `most` of `names`, joined with `, `, then `and N more` for the rest: a list of
/// thousands stays one readable line.
pub(crate) fn some_of(names: &[String], most: usize) -> String {
    let mut shown: Vec<&str> = names.iter().take(most).map(String::as_str).collect();
    let more = names.len().saturating_sub(most);
    let rest = format!("and {more} more");
    if more > 0 {
        shown.push(&rest);
    }
    shown.join(", ")
}

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

/// Money: `$0.41`, `$12.00`; an amount under a cent keeps two significant digits (`$0.006`,
/// `$0.000001`), so a sum of float costs never shows its rounding error
/// (`0.005999999999999999`).
pub(crate) fn cost(usd: f64) -> String {
    if usd >= 0.01 || usd <= 0.0 || !usd.is_finite() {
        return format!("${:.2}", usd.max(0.0));
    }
    // Two significant digits: 0.0059999 has its first at the third decimal, so four decimals.
    let decimals = (-usd.log10()).ceil() as usize + 1;
    let text = format!("{usd:.decimals$}");
    let text = text.trim_end_matches('0');
    format!("${text}")
}

/// A size: `512 B`, `12.1 KiB`, `3.4 MiB`, `1.0 GiB` (binary multiples, one decimal).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
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

/// Text from outside kern, safe on a terminal: line breaks and tabs become spaces, every other
/// control character is shown escaped (`\e` for ESC, `\a` for BEL, `\x7f`, `\u{9b}`), so it
/// can neither move the cursor, set the window title nor forge a line of kern's own — and the
/// person still sees that it was there.
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' | '\u{b}' | '\u{c}' => out.push(' '),
            '\u{1b}' => out.push_str("\\e"),
            '\u{7}' => out.push_str("\\a"),
            c if c.is_control() && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A report of several lines, each [`clean`]ed: its line breaks stay.
pub(crate) fn clean_lines(text: &str) -> String {
    text.split('\n').map(clean).collect::<Vec<_>>().join("\n")
}

/// Text for a commit message: escape sequences (`ESC [ … m`, `ESC ] … BEL`) and every other
/// control character but the line break and the tab are removed, so that `git log` on a
/// terminal shows only text; CRLF becomes LF.
pub(crate) fn strip_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, up to a final byte `@`..`~`.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS and the like: up to BEL or ST (`ESC \`).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                // A two-character escape (`ESC c`, `ESC 7`): both go.
                _ => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
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

/// The first non-empty line of `text`, trimmed.
pub(crate) fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
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
    fn sizes_read_in_binary_multiples() {
        for (n, text) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (12_345, "12.1 KiB"),
            (3_565_158, "3.4 MiB"),
            (1 << 30, "1.0 GiB"),
            (5 << 40, "5120.0 GiB"),
        ] {
            assert_eq!(bytes(n), text, "{n}");
        }
    }

    #[test]
    fn some_of_a_list_names_the_first_and_counts_the_rest() {
        let names = |n: usize| -> Vec<String> { (1..=n).map(|i| format!("f{i}")).collect() };
        let cases = [
            (0, 2, ""),
            (1, 2, "f1"),
            (2, 2, "f1, f2"),
            (3, 2, "f1, f2, and 1 more"),
        ];
        for (n, most, want) in cases {
            assert_eq!(some_of(&names(n), most), want, "{n} {most}");
        }
    }

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
            (0.005999999999999999, "$0.006"),
            (0.009000000000000001, "$0.009"),
            (0.0045000000000000005, "$0.0045"),
            (0.001, "$0.001"),
            (0.00999, "$0.01"),
            (0.0123456, "$0.01"),
            (1.005, "$1.00"),
        ] {
            assert_eq!(cost(usd), text, "{usd}");
        }
    }

    #[test]
    fn control_characters_are_shown_escaped_or_stripped() {
        let cases = [
            // (text, cleaned for a terminal, stripped for a commit message)
            ("plain", "plain", "plain"),
            ("a\nb\r\nc\td", "a b  c d", "a\nb\nc\td"),
            (
                "Fix \x1b]0;pwned\x07 the \x1b[31mred\x1b[0m bug",
                "Fix \\e]0;pwned\\a the \\e[31mred\\e[0m bug",
                "Fix  the red bug",
            ),
            ("t\x1b]2;x\x1b\\itle", "t\\e]2;x\\e\\itle", "title"),
            ("a\x1bcb", "a\\ecb", "ab"),
            ("x\x00y\x7fz\u{9b}2J", "x\\x00y\\x7fz\\u{9b}2J", "xyz2J"),
            ("é ✅", "é ✅", "é ✅"),
        ];
        for (text, cleaned, stripped) in cases {
            assert_eq!(clean(text), cleaned, "{text:?}");
            assert_eq!(strip_controls(text), stripped, "{text:?}");
            assert!(!clean(text).chars().any(char::is_control), "{text:?}");
        }
        assert_eq!(clean_lines("a\x1b\nb\n"), "a\\e\nb\n");
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
        assert_eq!(clean("a\x1b[2Jb\nc\td"), "a\\e[2Jb c d");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(short_oid("0123456789abcdef"), "0123456");
        assert_eq!(short_oid("abc"), "abc");
    }
}
