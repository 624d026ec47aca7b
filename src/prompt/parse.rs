//! Reading a template: its UTF-8 text, the optional front matter, and the body split into
//! literal text and placeholders (an unknown UPPER_SNAKE placeholder is an error naming the
//! file and line).

use std::path::Path;

use super::{Placeholder, Segment};
use crate::error::{Error, Result};

pub(super) fn decode_utf8<'b>(bytes: &'b [u8], path: &Path) -> Result<&'b str> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        template_error(
            path,
            line,
            "not UTF-8 text — save the template as UTF-8".into(),
        )
    })
}

pub(super) fn template_error(path: &Path, line: usize, message: String) -> Error {
    Error::Template {
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// The front matter's content and where the body starts.
pub(super) struct FrontMatter<'t> {
    pub(super) model: Option<String>,
    pub(super) body: &'t str,
    /// 1-based line number of the body's first line.
    pub(super) body_line: usize,
}

pub(super) fn split_front_matter<'t>(text: &'t str, path: &Path) -> Result<FrontMatter<'t>> {
    let mut lines = text.split_inclusive('\n');
    let is_fence = |line: &str| line.trim_end() == "---";
    match lines.next() {
        Some(first) if is_fence(first) => {}
        _ => {
            return Ok(FrontMatter {
                model: None,
                body: text,
                body_line: 1,
            });
        }
    }
    let mut offset = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut model = None;
    for (index, line) in lines.enumerate() {
        let number = index + 2;
        offset += line.len();
        if is_fence(line) {
            return Ok(FrontMatter {
                model,
                body: &text[offset..],
                body_line: number + 1,
            });
        }
        let content = line.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let Some((key, value)) = content.split_once(':') else {
            return Err(template_error(
                path,
                number,
                format!(
                    "`{content}` in the front matter is not `key: value` — write `model: <name>`, and close the front matter with a line `---`"
                ),
            ));
        };
        let key = key.trim();
        if key != "model" {
            return Err(template_error(
                path,
                number,
                format!("unknown front-matter key `{key}` — the only key is `model`"),
            ));
        }
        let value = unquote(value.trim());
        if value.is_empty() {
            return Err(template_error(
                path,
                number,
                "`model:` is empty — name a model such as `sonnet`, or remove the line".into(),
            ));
        }
        if model.is_some() {
            return Err(template_error(
                path,
                number,
                "`model:` is given twice — keep one".into(),
            ));
        }
        model = Some(value.to_string());
    }
    Err(template_error(
        path,
        1,
        "the front matter opened with `---` is never closed — end it with a line `---`".into(),
    ))
}

pub(super) fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner.trim();
        }
    }
    value
}

/// Length of the UPPER_SNAKE name at the start of `bytes` (`[A-Z][A-Z0-9_]*`), if any.
pub(super) fn upper_snake_len(bytes: &[u8]) -> Option<usize> {
    match bytes.first() {
        Some(b) if b.is_ascii_uppercase() => Some(
            1 + bytes[1..]
                .iter()
                .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || **b == b'_')
                .count(),
        ),
        _ => None,
    }
}

pub(super) fn parse_body(body: &str, first_line: usize, path: &Path) -> Result<Vec<Segment>> {
    let bytes = body.as_bytes();
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut literal_start = 0;
    let mut line = first_line;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' if bytes.get(i + 1) == Some(&b'{') => {
                // `{{NAME}}` is the literal text `{NAME}`.
                if let Some(n) = upper_snake_len(&bytes[i + 2..])
                    && bytes[i + 2 + n..].starts_with(b"}}")
                {
                    literal.push_str(&body[literal_start..i]);
                    literal.push_str(&body[i + 1..i + 3 + n]);
                    i += n + 4;
                    literal_start = i;
                    continue;
                }
            }
            b'{' => {
                if let Some(n) = upper_snake_len(&bytes[i + 1..])
                    && bytes.get(i + 1 + n) == Some(&b'}')
                {
                    let name = &body[i + 1..i + 1 + n];
                    let Some(placeholder) = Placeholder::from_name(name) else {
                        return Err(template_error(path, line, unknown_placeholder(name)));
                    };
                    literal.push_str(&body[literal_start..i]);
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Slot(placeholder));
                    i += n + 2;
                    literal_start = i;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    literal.push_str(&body[literal_start..]);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

pub(super) fn unknown_placeholder(name: &str) -> String {
    let known: Vec<String> = Placeholder::ALL
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    format!(
        "unknown placeholder `{{{name}}}` — use one of {}, or write `{{{{{name}}}}}` for the literal text",
        known.join(", ")
    )
}
