//! Filling one placeholder: the piece fenced as data, `</data` escaped, cut to its budget with
//! a visible note — the only place prompt text is cut.

use std::borrow::Cow;

use super::{Keep, NONE_TEXT, Placeholder};
use crate::stage::Stage;

/// Renders one placeholder's input: escaped, cut, fenced (or not), with cut notes.
pub(super) fn render_piece(
    placeholder: Placeholder,
    stage: Stage,
    value: Option<&str>,
    cuts: &mut Vec<String>,
) -> String {
    let source = placeholder.fence_source(stage);
    let value = value.filter(|v| !v.trim().is_empty());
    let Some(value) = value else {
        return match source {
            Some(source) => format!("<data source=\"{source}\">\n{NONE_TEXT}\n</data>"),
            None => NONE_TEXT.to_string(),
        };
    };
    let escaped = if source.is_some() {
        escape_fence(value)
    } else {
        Cow::Borrowed(value)
    };
    let budget = placeholder.budget();
    let keep = placeholder.keep();
    let label = placeholder.label(stage);
    let (kept, removed) = cut(&escaped, budget, keep);
    let note = (removed > 0).then(|| {
        let (which, kept_end) = match keep {
            Keep::Head => ("later", "first"),
            Keep::Tail => ("earlier", "last"),
        };
        cuts.push(format!(
            "{label}: {} {which} bytes cut, the {kept_end} {} kept",
            thousands(removed),
            kib(budget)
        ));
        format!(
            "[kern: {} {which} bytes of {label} cut to stay within {}]",
            thousands(removed),
            kib(budget)
        )
    });
    let mut out = String::with_capacity(kept.len() + 160);
    if let Some(source) = source {
        out.push_str("<data source=\"");
        out.push_str(source);
        out.push_str("\">\n");
    }
    if let (Some(note), Keep::Tail) = (&note, keep) {
        out.push_str(note);
        out.push('\n');
    }
    out.push_str(kept);
    if let (Some(note), Keep::Head) = (&note, keep) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(note);
    }
    if source.is_some() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("</data>");
    }
    out
}

/// Escapes every `</data` (any case, whitespace around the slash) as `<\/data`, so that data
/// cannot close its fence.
pub(crate) fn escape_fence(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(pos) = bytes[i..].iter().position(|&b| b == b'<') {
        let lt = i + pos;
        let mut j = lt + 1;
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        if bytes.get(j) == Some(&b'/') {
            let mut k = j + 1;
            while k < bytes.len() && bytes[k].is_ascii_whitespace() {
                k += 1;
            }
            if bytes.len() >= k + 4 && bytes[k..k + 4].eq_ignore_ascii_case(b"data") {
                let buffer = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                buffer.push_str(&text[copied..j]);
                buffer.push('\\');
                copied = j;
            }
        }
        i = lt + 1;
    }
    match out {
        Some(mut buffer) => {
            buffer.push_str(&text[copied..]);
            Cow::Owned(buffer)
        }
        None => Cow::Borrowed(text),
    }
}

/// Cuts `text` to at most `budget` bytes, keeping `keep`; returns the kept part and how many
/// bytes were removed. Cuts on a char boundary, and on a line boundary when that still keeps
/// at least half the budget.
pub(crate) fn cut(text: &str, budget: usize, keep: Keep) -> (&str, usize) {
    if text.len() <= budget {
        return (text, 0);
    }
    match keep {
        Keep::Head => {
            let mut end = text.floor_char_boundary(budget);
            if let Some(newline) = text[..end].rfind('\n')
                && newline + 1 >= budget / 2
            {
                end = newline + 1;
            }
            (&text[..end], text.len() - end)
        }
        Keep::Tail => {
            let mut start = text.ceil_char_boundary(text.len() - budget);
            if let Some(newline) = text[start..].find('\n')
                && text.len() - (start + newline + 1) >= budget / 2
            {
                start += newline + 1;
            }
            (&text[start..], start)
        }
    }
}

/// `12345` -> `12,345`.
pub(super) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn kib(bytes: usize) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{} bytes", thousands(bytes))
    }
}
