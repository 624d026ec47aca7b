//! The person's mechanical must-haves (`> **Must:**`, DESIGN.md section 16): what kern itself
//! checks before a task can be done, one per line.
//!
//! The one decision a reader must know: every must-have is mechanical — a file that exists or
//! not, a pattern a file holds or not, a command that exits 0 — so kern checks it itself, for
//! free, every attempt, and a model's word never stands in for it. A line that is none of these
//! is an error in SPEC.md (found by `validate`, before any agent), never silently skipped.

use std::fmt;

/// One must-have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MustHave {
    /// `file <path>`: the file exists; `file !<path>`: it does not.
    File {
        /// The path, relative to the work tree's top.
        path: String,
        /// True for `file !<path>`.
        absent: bool,
    },
    /// `grep <path> <regex>`: the file holds a match; `grep! <path> <regex>`: it holds none.
    /// A path with blanks is written in quotes, as a shell takes it (`grep "web app/.env" ^x=1$`).
    Grep {
        /// The path, relative to the work tree's top.
        path: String,
        /// The pattern: the rest of the line, taken whole (the regex crate's syntax, matched
        /// line by line as grep does: `spec/grep.rs`).
        pattern: String,
        /// True for `grep!`.
        absent: bool,
        /// The path was written in quotes: shown so again, and a quoted word without blanks
        /// reads like grep's own first argument, the pattern.
        quoted: bool,
    },
    /// `run <command>`: the command exits 0 (the check gate's runner).
    Run {
        /// The shell command.
        command: String,
    },
}

impl fmt::Display for MustHave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MustHave::File { path, absent } => {
                let shown = as_written(path, path.contains(char::is_whitespace));
                write!(f, "file {}{shown}", if *absent { "!" } else { "" })
            }
            MustHave::Grep {
                path,
                pattern,
                absent,
                quoted,
            } => {
                let shown = as_written(path, *quoted || path.contains(char::is_whitespace));
                write!(
                    f,
                    "grep{} {shown} {pattern}",
                    if *absent { "!" } else { "" }
                )
            }
            MustHave::Run { command } => write!(f, "run {command}"),
        }
    }
}

/// The must-haves of a Must note's text, one per non-empty line (a leading `- ` bullet and
/// backticks around the whole line are allowed, as formatters leave them), each parsed or the
/// reason it cannot be.
pub(crate) fn parse(text: &str) -> Vec<Result<MustHave, String>> {
    text.lines()
        .map(str::trim)
        .map(|l| {
            l.strip_prefix("- ")
                .or_else(|| l.strip_prefix("* "))
                .unwrap_or(l)
        })
        .map(|l| {
            l.strip_prefix('`')
                .and_then(|x| x.strip_suffix('`'))
                .unwrap_or(l)
                .trim()
        })
        .filter(|l| !l.is_empty())
        .map(parse_line)
        .collect()
}

/// One must-have line.
fn parse_line(line: &str) -> Result<MustHave, String> {
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let need = |what: &str| format!("`{line}`: `{word}` needs {what}");
    match word {
        "file" => {
            let (absent, path) = match rest.strip_prefix('!') {
                Some(p) => (true, p.trim()),
                None => (false, rest),
            };
            let path = unquoted(path);
            if path.is_empty() {
                return Err(need("a path"));
            }
            Ok(MustHave::File {
                path: path.to_string(),
                absent,
            })
        }
        "grep" | "grep!" => {
            let Some((path, quoted, pattern)) = first_word(rest) else {
                return Err(need("a path and a pattern"));
            };
            if !quoted && path.starts_with('-') {
                return Err(format!(
                    "`{line}`: `{path}` is grep's option, where kern reads the file — kern's `grep` takes none: write `{word} <path> <regex>` (`(?i)` in the regex ignores case), or `run grep {rest}` to run grep itself"
                ));
            }
            let pattern = unquoted(pattern.trim());
            super::grep::compile(pattern)
                .map_err(|e| format!("`{line}`: the pattern does not compile: {e}"))?;
            Ok(MustHave::Grep {
                path: path.to_string(),
                pattern: pattern.to_string(),
                absent: word == "grep!",
                quoted,
            })
        }
        "run" if !rest.is_empty() => Ok(MustHave::Run {
            command: rest.to_string(),
        }),
        "run" => Err(need("a command")),
        _ => Err(format!(
            "`{line}` is not a must-have — write `file <path>`, `file !<path>`, `grep <path> <regex>`, `grep! <path> <regex>` or `run <command>`, one a line"
        )),
    }
}

/// The first word of `text` as a shell reads it — up to the first blank, or wholly inside one
/// pair of `"` or `'` (`"web app/.env" ^x=1$`) — whether it was quoted, and the rest; `None`
/// when nothing follows it.
fn first_word(text: &str) -> Option<(&str, bool, &str)> {
    let closed = ['"', '\''].into_iter().find_map(|q| {
        let inner = text.strip_prefix(q)?;
        let end = inner.find(q)?;
        let rest = &inner[end + 1..];
        (end > 0 && (rest.is_empty() || rest.starts_with(char::is_whitespace)))
            .then(|| (&inner[..end], rest))
    });
    let (word, quoted, rest) = match closed {
        Some((word, rest)) => (word, true, rest),
        None => {
            let (word, rest) = text.split_once(char::is_whitespace)?;
            (word, false, rest)
        }
    };
    let rest = rest.trim();
    (!rest.is_empty()).then_some((word, quoted, rest))
}

/// `path` as it is written in a Must note: in quotes when `quoted`.
fn as_written(path: &str, quoted: bool) -> String {
    if quoted {
        format!("\"{path}\"")
    } else {
        path.to_string()
    }
}

/// A pattern wholly in one pair of `"` or `'` without them, as a shell reads a grep
/// pattern (`grep hello.txt "^hello$"` means `^hello$`); any other pattern as written
/// (`grep x.json "name": 1` keeps its quotes).
fn unquoted(pattern: &str) -> &str {
    ['"', '\'']
        .into_iter()
        .find_map(|q| {
            let inner = pattern.strip_prefix(q)?.strip_suffix(q)?;
            (!inner.is_empty() && !inner.contains(q)).then_some(inner)
        })
        .unwrap_or(pattern)
}

/// True when a grep must-have's path reads like grep's own first argument, the pattern
/// (`grep "^x=1$" config.txt`, `grep 'fn main' src/main.rs`): kern's order is
/// `grep <path> <regex>`. A quoted first word is the pattern when it does not read like a path
/// and the word after it does; one that does (`grep "web app/.env" ^x=1$`) is the path.
pub(crate) fn path_looks_like_a_pattern(must: &MustHave) -> bool {
    let MustHave::Grep {
        path,
        pattern,
        quoted,
        ..
    } = must
    else {
        return false;
    };
    let reads_like_a_path = |word: &str| {
        word.contains('/')
            || word.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty() && ext.chars().all(char::is_alphanumeric) && !ext.is_empty()
            })
    };
    path.starts_with('^')
        || path.ends_with('$')
        || path.contains(['*', '[', '\\', '|', '('])
        || (*quoted
            && !reads_like_a_path(path)
            && !pattern.contains(char::is_whitespace)
            && reads_like_a_path(pattern))
}

/// What a `> **Tests:**` note says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TestsNote {
    /// `read-only`: existing test files may not change.
    ReadOnly,
    /// `first [<command>]`: red, then green; the command, empty when none is named.
    First(String),
    /// Anything else: words for the agent, nothing kern enforces.
    Other,
}

/// Reads a Tests note's text (`read-only`, `first cargo test -q`, `` first `npm test` ``).
pub(crate) fn tests_note(text: &str) -> TestsNote {
    let text = text.trim();
    if text.eq_ignore_ascii_case("read-only") {
        return TestsNote::ReadOnly;
    }
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    if !word.eq_ignore_ascii_case("first") {
        return TestsNote::Other;
    }
    let rest = rest.trim();
    let command = rest
        .strip_prefix('`')
        .and_then(|r| r.strip_suffix('`'))
        .unwrap_or(rest)
        .trim();
    TestsNote::First(command.to_string())
}

/// Whether, and with which command, a task is tested first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TestsFirst {
    /// It is not: no `Tests: first` note and no `--tests-first`.
    No,
    /// It is, with this command.
    With(String),
    /// It is, and no command was found.
    NoCommand,
}

impl TestsFirst {
    /// The command, when the task is tested first with one.
    pub(crate) fn command(self) -> Option<String> {
        match self {
            TestsFirst::With(command) => Some(command),
            TestsFirst::No | TestsFirst::NoCommand => None,
        }
    }
}

/// How a task is tested first: with its Tests note's own command, else its Check (`check`),
/// else `--check` (`fallback`) — when it has a `Tests: first` note (`note`: its command, empty
/// when it names none) or the run has `--tests-first` (`flag`).
pub(crate) fn tests_first(
    note: Option<&str>,
    flag: bool,
    check: Option<&str>,
    fallback: Option<&str>,
) -> TestsFirst {
    if note.is_none() && !flag {
        return TestsFirst::No;
    }
    match note.filter(|c| !c.trim().is_empty()).or(check).or(fallback) {
        Some(command) => TestsFirst::With(command.to_string()),
        None => TestsFirst::NoCommand,
    }
}

/// True when a test-file path is one kern treats as an existing test under `> **Tests:**
/// read-only`: inside a `tests`/`test`/`__tests__`/`spec` folder, or named as test runners
/// find tests (`*_test.*`, `*.test.*`, `*.spec.*`, `*_spec.*`, `test_*.py`, `*Test.java`,
/// `*Tests.cs`), or a file named `tests` or `test` (Rust's `src/parser/tests.rs`).
pub(crate) fn is_test_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let (dirs, name) = parts.split_at(parts.len().saturating_sub(1));
    let name = name.first().copied().unwrap_or("");
    if dirs
        .iter()
        .any(|d| matches!(*d, "tests" | "test" | "__tests__" | "spec" | "specs"))
    {
        return true;
    }
    let stem = name.split('.').next().unwrap_or(name);
    stem == "tests"
        || stem == "test"
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
        || (stem.starts_with("test_")
            && std::path::Path::new(name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("py")))
        || ((stem.ends_with("Test") || stem.ends_with("Tests")) && stem.len() > 4)
}

/// The paths and globs of a Scope note's `text` (`src/parser/**, tests/parser.rs`): split on
/// commas, blanks and lines, bullets dropped; a path in backticks or quotes is one path, blanks
/// and all (`` `packages/web app/**` ``, `"docs/my notes.md"`).
pub(crate) fn scope_patterns(text: &str) -> Vec<String> {
    let separator = |c: char| c == ',' || c.is_whitespace();
    let mut patterns = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(separator);
        let Some(first) = rest.chars().next() else {
            break;
        };
        let closed = ['`', '"', '\'']
            .contains(&first)
            .then(|| rest[1..].find(first))
            .flatten();
        let (word, after) = match closed {
            Some(end) => (rest[1..=end].trim(), &rest[end + 2..]),
            None => {
                let end = rest.find(separator).unwrap_or(rest.len());
                (rest[..end].trim_matches('`'), &rest[end..])
            }
        };
        if !word.is_empty() && !["-", "*", "+"].contains(&word) {
            patterns.push(word.to_string());
        }
        rest = after;
    }
    patterns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grep_pattern_wholly_in_quotes_is_read_as_a_shell_reads_it() {
        let pattern = |line: &str| match parse(line).remove(0) {
            Ok(MustHave::Grep { pattern, .. }) => pattern,
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(pattern("grep hello.txt \"^hello$\""), "^hello$");
        assert_eq!(pattern("grep! hello.txt '^bye'"), "^bye");
        assert_eq!(pattern("grep x.json '\"name\"'"), "\"name\"");
        assert_eq!(pattern("grep x.json \"name\": 1"), "\"name\": 1");
        assert_eq!(pattern("grep a.txt \"\""), "\"\"");
        assert_eq!(pattern("grep a.txt hello world"), "hello world");
    }

    #[test]
    fn a_path_with_blanks_is_written_in_quotes_as_a_shell_takes_it() {
        let grep = |line: &str| match parse(line).remove(0) {
            Ok(MustHave::Grep { path, pattern, .. }) => (path, pattern),
            other => panic!("{line}: {other:?}"),
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            grep("grep \"web app/config ü.env\" ^x=1$"),
            pair("web app/config ü.env", "^x=1$")
        );
        assert_eq!(
            grep("grep! 'my notes.md' \"unfinished\""),
            pair("my notes.md", "unfinished")
        );
        assert_eq!(grep("grep \"a.txt\" b c"), pair("a.txt", "b c"));
        // A quote that does not close a word is part of the word, as before.
        assert_eq!(grep("grep \"a b"), pair("\"a", "b"));
        assert_eq!(grep("grep \"ab\"c d"), pair("\"ab\"c", "d"));
        assert!(parse("grep \"web app.env\"")[0].is_err());
        let file = |line: &str| parse(line).remove(0).unwrap();
        assert_eq!(
            file("file !\"old notes.md\""),
            MustHave::File {
                path: "old notes.md".into(),
                absent: true
            }
        );
        // Shown as written: the path in quotes when it has blanks or was quoted.
        for line in [
            "grep \"web app/config ü.env\" ^x=1$",
            "file \"my notes.md\"",
            "grep \"^x=1$\" config.txt",
        ] {
            assert_eq!(file(line).to_string(), line);
        }
    }

    #[test]
    fn scope_paths_split_on_commas_and_blanks_and_a_quoted_one_is_whole() {
        for (text, want) in [
            (
                "src/parser/**, tests/parser.rs",
                &["src/parser/**", "tests/parser.rs"][..],
            ),
            (
                "- `src/a.rs`\n- src/b.rs\n* c/\n+ d",
                &["src/a.rs", "src/b.rs", "c/", "d"],
            ),
            (
                "`packages/web app/**`, \"docs/my notes.md\" 'x y'",
                &["packages/web app/**", "docs/my notes.md", "x y"],
            ),
            // A quote that closes nothing, or one inside a word, is part of the word.
            ("`src/a.rs, b", &["src/a.rs", "b"]),
            ("don't/x.rs", &["don't/x.rs"]),
            ("", &[]),
        ] {
            assert_eq!(scope_patterns(text), want, "{text}");
        }
    }

    #[test]
    fn a_path_that_reads_like_a_pattern_is_greps_own_order() {
        let looks = |line: &str| path_looks_like_a_pattern(parse(line)[0].as_ref().unwrap());
        assert!(looks("grep \"^x=1$\" config.txt"));
        assert!(looks("grep ^x=1$ config.txt"));
        assert!(looks("grep 'fn main' src/main.rs"));
        assert!(!looks("grep config.txt ^x=1$"));
        assert!(!looks("grep src/a-b_c.rs x"));
        assert!(looks("grep \"hello\" hello.txt"));
        assert!(!looks("grep \"web app/config ü.env\" ^x=1$"));
    }

    #[test]
    fn must_lines_parse_or_say_what_to_write() {
        let parsed = parse(
            "file src/lib.rs\n- file !src/old.rs\n`grep src/lib.rs pub fn parse`\ngrep! README.md unimplemented\nrun cargo test -q\n\n",
        );
        let shown: Vec<String> = parsed
            .iter()
            .map(|m| m.as_ref().map(ToString::to_string).unwrap())
            .collect();
        assert_eq!(
            shown,
            [
                "file src/lib.rs",
                "file !src/old.rs",
                "grep src/lib.rs pub fn parse",
                "grep! README.md unimplemented",
                "run cargo test -q"
            ]
        );
        for (line, error) in [
            ("file", "`file`: `file` needs a path"),
            (
                "grep src/a.rs",
                "`grep src/a.rs`: `grep` needs a path and a pattern",
            ),
            ("grep a.rs (", "`grep a.rs (`: the pattern does not compile"),
            (
                "grep -q \"x=1\" config.txt",
                "`grep -q \"x=1\" config.txt`: `-q` is grep's option, where kern reads the file — kern's `grep` takes none: write `grep <path> <regex>` (`(?i)` in the regex ignores case), or `run grep -q \"x=1\" config.txt` to run grep itself",
            ),
            ("run", "`run`: `run` needs a command"),
            (
                "exists src/a.rs",
                "`exists src/a.rs` is not a must-have — write",
            ),
        ] {
            let e = parse(line).remove(0).unwrap_err();
            assert!(e.starts_with(error), "{line}: {e}");
        }
    }

    #[test]
    fn the_command_is_the_notes_else_the_tasks_check_else_the_runs() {
        use TestsFirst::{No, NoCommand, With};
        let with = |c: &str| With(c.to_string());
        // (note, --tests-first, the task's check, --check, how it is tested first)
        let cases = [
            (None, false, Some("make test"), Some("cargo test"), No),
            (
                Some("npm test"),
                false,
                Some("make test"),
                None,
                with("npm test"),
            ),
            (Some(""), false, Some("make test"), None, with("make test")),
            (
                Some(" "),
                false,
                None,
                Some("cargo test"),
                with("cargo test"),
            ),
            (
                None,
                true,
                Some("make test"),
                Some("cargo test"),
                with("make test"),
            ),
            (None, true, None, Some("cargo test"), with("cargo test")),
            (None, true, None, None, NoCommand),
            (Some(""), false, None, None, NoCommand),
        ];
        for (note, flag, check, fallback, want) in cases {
            assert_eq!(
                tests_first(note, flag, check, fallback),
                want,
                "{note:?} {flag} {check:?} {fallback:?}"
            );
        }
        assert_eq!(with("x").command().as_deref(), Some("x"));
        assert_eq!(NoCommand.command(), None);
    }

    #[test]
    fn tests_notes() {
        for (text, note) in [
            ("read-only", TestsNote::ReadOnly),
            (" Read-Only ", TestsNote::ReadOnly),
            ("first", TestsNote::First(String::new())),
            (
                "first cargo test -q parser",
                TestsNote::First("cargo test -q parser".into()),
            ),
            ("First `npm test`", TestsNote::First("npm test".into())),
            ("firstly, cover the empty input", TestsNote::Other),
            ("cover the empty input", TestsNote::Other),
        ] {
            assert_eq!(tests_note(text), note, "{text}");
        }
    }

    #[test]
    fn test_paths() {
        for (path, test) in [
            ("tests/parse.rs", true),
            ("src/__tests__/a.js", true),
            ("pkg/spec/a_spec.rb", true),
            ("src/parse_test.go", true),
            ("web/app.test.ts", true),
            ("test_parse.py", true),
            ("src/ParserTest.java", true),
            ("src/parser/tests.rs", true),
            ("test.py", true),
            ("src/parse.rs", false),
            ("src/testing.rs", false),
            ("src/Test.java", false),
            ("docs/testing.md", false),
        ] {
            assert_eq!(is_test_path(path), test, "{path}");
        }
    }
}
