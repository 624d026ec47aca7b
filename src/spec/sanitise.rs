//! Agent text is data, never structure: how a note's or a subtask's text from an agent is
//! made safe to splice into SPEC.md.
//!
//! The one decision a reader must know: Note text is split into lines; each line is trimmed,
//! control characters and tabs become spaces, and empty lines are dropped. A line that could
//! open a block where it stands — a quote, heading, list item, fence, table, HTML block, setext
//! underline or a note header — gets a backslash before its first character (before the `.` or
//! `)` of a leading `1.`), and only then, so that formatters, which drop needless escapes, leave
//! it as written. Subtask titles are flattened to one line (whitespace runs become one space)
//! and otherwise kept as given, because the title is the task's identity.

use super::notes;

/// Agent text -> clean lines: control characters and tabs become spaces, each line is
/// trimmed, empty lines are dropped. Escaping is the caller's (see [`escape_start`]).
pub(super) fn clean_lines(text: &str) -> Vec<String> {
    text.split(['\n', '\r'])
        .map(|line| {
            let flat: String = line
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            flat.trim().to_string()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// Agent text -> safe lines, every one escaped (bullets: each starts a paragraph or continues
/// one where a block could open).
pub(super) fn sanitise(text: &str) -> Vec<String> {
    clean_lines(text).iter().map(|l| escape_start(l)).collect()
}

/// Agent text for a note whose first line follows its header: that line stands mid-line and
/// is kept as it is; the others are escaped.
pub(super) fn note_text(text: &str) -> String {
    let lines = clean_lines(text);
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for (k, line) in lines.iter().enumerate() {
        out.push(if k == 0 {
            line.clone()
        } else {
            escape_start(line)
        });
    }
    out.join("\n")
}

/// A line that could open a block, or be read as a note header, where it stands gets escaped
/// the way mdformat writes that escape itself (so that formatters keep it); any other line is
/// left as written, because formatters drop needless escapes.
pub(super) fn escape_start(line: &str) -> String {
    let Some(first) = line.chars().next() else {
        return String::new();
    };
    let rest = &line[first.len_utf8()..];
    let blank_or_end = |s: &str| s.is_empty() || s.starts_with([' ', '\t']);
    let run = line.chars().take_while(|&x| x == first).count();
    let only = line.chars().all(|x| x == first || x == ' ' || x == '\t');
    if notes::header(line).is_some() {
        return format!("\\{line}");
    }
    match first {
        // Fences and thematic breaks: every character of the run, as mdformat writes them.
        '`' if run >= 3 => return format!("{}{}", "\\`".repeat(run), &line[run..]),
        '*' | '_' if only && run >= 1 && line.matches(first).count() >= 3 => {
            return line.replace(first, &format!("\\{first}"));
        }
        _ => {}
    }
    let block = match first {
        '>' => true,
        '#' => run <= 6 && blank_or_end(&line[run..]),
        '-' | '+' | '*' => blank_or_end(rest) || (only && run >= 3),
        '=' => only,
        '~' => run >= 3,
        '<' => rest.starts_with(|c: char| c.is_ascii_alphabetic() || "/!?".contains(c)),
        _ => false,
    };
    if block {
        return format!("\\{line}");
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && digits <= 9
        && line[digits..].starts_with(['.', ')'])
        && blank_or_end(&line[digits + 1..])
    {
        return format!("{}\\{}", &line[..digits], &line[digits..]);
    }
    line.to_string()
}
