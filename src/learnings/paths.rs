//! The paths a LEARNINGS.md entry names: what makes it stale once they are gone.
//!
//! The one decision a reader must know: a path is read from three places — kern's own
//! ` — paths: ` part (every code span in it, written from the paths the task's change touched
//! that the entry mentions), any code span holding a `/`, and a plain word that can only be a
//! relative file path (a `/`, a last part with a file extension, no URL, no absolute or `..`
//! path: `src/legacy_parser.rs:12`). Prose such as `and/or`, `1/2` or `docs.rs/serde` is no
//! path: reading one would hide an entry that is still true.

/// The separator of an entry's parts, as kern writes them.
const PART: &str = " — ";
/// The name of kern's paths part.
const PATHS: &str = "paths:";

/// The paths entry line `text` names (see the module docs), in order, each once.
pub(crate) fn named(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: String| {
        if !p.is_empty() && !out.contains(&p) {
            out.push(p);
        }
    };
    for part in text.split(PART) {
        if let Some(listed) = part.trim().strip_prefix(PATHS) {
            for span in code_spans(listed) {
                add(without_line(span.trim()));
            }
        }
    }
    for span in code_spans(text) {
        if span.contains('/') && !span.contains("://") && !span.contains(char::is_whitespace) {
            add(without_line(span));
        }
    }
    for word in plain_words(text) {
        if is_plain_path(word) {
            add(without_line(word));
        }
    }
    out
}

/// The paths of `touched` (the paths a task's change touched) that entry `text` mentions: by
/// the whole path, or by its file name when no other touched path has that name.
pub(crate) fn concerns(text: &str, touched: &[String]) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| !is_path_char(c))
        .map(|w| w.trim_end_matches(['.', ':']).trim_start_matches("./"))
        .filter(|w| !w.is_empty())
        .collect();
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    touched
        .iter()
        .filter(|p| {
            let own = name(p);
            let unique = touched.iter().filter(|q| name(q) == own).count() == 1;
            words
                .iter()
                .any(|w| *w == p.as_str() || (unique && own.contains('.') && *w == own))
        })
        .cloned()
        .collect()
}

/// kern's paths part for `paths` (empty for none): ` — paths: `a`, `b``, at most five shown.
pub(crate) fn part(paths: &[String]) -> String {
    if paths.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = paths.iter().take(5).map(|p| format!("`{p}`")).collect();
    format!("{PART}{PATHS} {}", shown.join(", "))
}

/// The code spans of `text` (between backticks).
fn code_spans(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// The words of `text` outside its code spans, split where no path character stands.
fn plain_words(text: &str) -> impl Iterator<Item = &str> {
    text.split('`')
        .step_by(2)
        .flat_map(|t| t.split(|c: char| !is_path_char(c) && c != ':'))
        .map(|w| w.trim_end_matches(['.', ':', ',']))
        .filter(|w| !w.is_empty())
}

/// A character a relative path in prose is made of.
fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')
}

/// True when a plain word can only be a relative file path (see the module docs).
fn is_plain_path(word: &str) -> bool {
    let path = without_line(word);
    let Some((folders, file)) = path.rsplit_once('/') else {
        return false;
    };
    let first = folders.split('/').next().unwrap_or_default();
    // `docs.rs/…`, `github.com/…`: a host, not a folder (`.github/` is one).
    let host = first.contains('.') && !first.starts_with('.');
    let file_like = file.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && ext.len() <= 10
            && ext.chars().all(char::is_alphanumeric)
            && ext.chars().any(char::is_alphabetic)
    });
    let outside = path.starts_with('/') || path.starts_with("..") || path.contains("//");
    file_like && !host && !outside
}

/// `path` without a `:line` or `:line:col` suffix.
fn without_line(path: &str) -> String {
    path.split(':')
        .next()
        .unwrap_or(path)
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_names_its_code_spans_its_paths_part_and_plain_file_paths() {
        let cases: &[(&str, &[&str])] = &[
            ("- `src/old.rs` holds the lexer", &["src/old.rs"]),
            (
                "- see `src/parser/` and `src/a.rs:12:3`",
                &["src/parser", "src/a.rs"],
            ),
            (
                "- src/legacy_parser.rs: tokens carry spans",
                &["src/legacy_parser.rs"],
            ),
            (
                "- fixed in src/legacy_parser.rs:42, then tests/parse.rs.",
                &["src/legacy_parser.rs", "tests/parse.rs"],
            ),
            (
                "- a fact — source: s — paths: `build.rs`, `src/a.rs`",
                &["build.rs", "src/a.rs"],
            ),
            (
                "- .github/workflows/ci.yml runs clippy",
                &[".github/workflows/ci.yml"],
            ),
            // Prose, hosts, URLs, absolute and outside paths, folders and globs: no path.
            ("- pick and/or drop 1/2 of v1.2/v1.3", &[]),
            ("- docs at docs.rs/serde/latest/serde.html", &[]),
            ("- see https://example.com/a/b.html", &[]),
            ("- /etc/hosts.conf and ../other/x.rs and ~/notes/a.md", &[]),
            ("- tests/fixtures/ and src/**/*.rs", &[]),
            ("- `and or` and `https://x.org/a.rs`", &[]),
            ("- Cargo.toml pins serde", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(named(text), *want, "{text}");
        }
    }

    #[test]
    fn an_entry_concerns_the_touched_paths_it_mentions() {
        let touched: Vec<String> = [
            "src/legacy_parser.rs",
            "src/lexer.rs",
            "src/a/mod.rs",
            "src/b/mod.rs",
            "build.rs",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let cases: &[(&str, &[&str])] = &[
            (
                "src/legacy_parser.rs: tokens carry spans",
                &["src/legacy_parser.rs"],
            ),
            ("the lexer (lexer.rs) runs first", &["src/lexer.rs"]),
            (
                "`./src/lexer.rs` and build.rs.",
                &["src/lexer.rs", "build.rs"],
            ),
            ("mod.rs re-exports it", &[]),
            ("src/a/mod.rs re-exports it", &["src/a/mod.rs"]),
            ("the lexer runs first", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(concerns(text, &touched), *want, "{text}");
        }
        assert_eq!(part(&[]), "");
        assert_eq!(
            part(&["a.rs".into(), "src/b.rs".into()]),
            " — paths: `a.rs`, `src/b.rs`"
        );
    }
}
