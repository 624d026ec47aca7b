//! `grep` and `grep!` must-haves read a file as grep reads it (DESIGN.md section 16): line by
//! line, so `^` and `$` are a line's start and end, never the file's.
//!
//! The one decision a reader must know: the dialect is the regex crate's (ripgrep's syntax,
//! Unicode-aware), matched against each line on its own, and it answers what `grep -E -q`
//! answers (`LC_ALL=C.UTF-8`) except where docs/spec-format.md says it differs on purpose:
//! a `\r\n` ends a line as `\n` does (grep on Linux keeps the `\r` in the line, so `x$` misses
//! a Windows line), `\d` is a digit (grep -E reads it as `d`), and what grep -E has that the
//! regex crate has not (back-references) is refused when SPEC.md is read, never judged. A file
//! holding a NUL byte is binary, and a NUL ends a line there, as GNU grep reads binary files.

use std::path::Path;

use regex::bytes::Regex;

/// What kern saw grepping one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grepped {
    /// The first line holding a match.
    Match {
        /// Its number, from 1.
        line: usize,
        /// The matched text (lossy UTF-8).
        text: String,
        /// The file holds a NUL byte.
        binary: bool,
    },
    /// No line holds a match.
    NoMatch {
        /// The file holds a NUL byte.
        binary: bool,
    },
    /// There is no such file.
    Missing,
    /// The path is a folder.
    Folder,
    /// The file exists and cannot be read (the OS's reason).
    Unreadable(String),
}

impl Grepped {
    /// The verdict of `grep` (a match) or `grep!` (`absent`: no match) — as `grep -E -q`'s exit
    /// 0 or 1: a file grep cannot read (exit 2) fails both.
    pub(crate) fn holds(&self, absent: bool) -> bool {
        match self {
            Grepped::Match { .. } => !absent,
            Grepped::NoMatch { .. } => absent,
            Grepped::Missing | Grepped::Folder | Grepped::Unreadable(_) => false,
        }
    }

    /// What kern saw, in a few words, for `path`.
    pub(crate) fn seen(&self, path: &str) -> String {
        let kind = |binary: &bool| if *binary { " (a binary file)" } else { "" };
        match self {
            Grepped::Match { line, text, binary } => {
                format!("`{path}:{line}`{} holds `{}`", kind(binary), text.trim())
            }
            Grepped::NoMatch { binary } => format!("`{path}`{} holds no match", kind(binary)),
            Grepped::Missing => format!("no such file `{path}`"),
            Grepped::Folder => format!("`{path}` is a folder — grep reads a file"),
            Grepped::Unreadable(why) => format!("`{path}` cannot be read: {why}"),
        }
    }
}

/// The pattern compiled in kern's grep dialect, or why it does not compile.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|e| {
        let why = e.to_string();
        let why = why.lines().last().unwrap_or("");
        why.trim_start_matches("error: ").to_string()
    })
}

/// Greps the file at `path` for `re` (see the module docs).
pub(crate) fn grep_file(path: &Path, re: &Regex) -> Grepped {
    match std::fs::read(path) {
        Ok(bytes) => search(&bytes, re),
        Err(e) => match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => Grepped::Folder,
            Err(_) if e.kind() == std::io::ErrorKind::NotFound => Grepped::Missing,
            _ => Grepped::Unreadable(e.kind().to_string()),
        },
    }
}

/// The first line of `bytes` holding a match of `re`, each line matched on its own.
pub(crate) fn search(bytes: &[u8], re: &Regex) -> Grepped {
    let binary = bytes.contains(&0);
    for (i, line) in lines(bytes).enumerate() {
        if let Some(m) = re.find(line) {
            return Grepped::Match {
                line: i + 1,
                text: String::from_utf8_lossy(m.as_bytes()).into_owned(),
                binary,
            };
        }
    }
    Grepped::NoMatch { binary }
}

/// The lines of `bytes` without their ends: a line ends at `\n` (a `\r` before it is part of
/// the end) or at a NUL byte; the text after the last end is a line when it is not empty.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.iter().position(|&b| b == b'\n' || b == 0);
        let (line, next) = match end {
            Some(at) => {
                let line = &rest[..at];
                let line = if rest[at] == b'\n' {
                    line.strip_suffix(b"\r").unwrap_or(line)
                } else {
                    line
                };
                (line, &rest[at + 1..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        Some(line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_at_newlines_crlf_and_nul_and_a_last_line_needs_no_newline() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"", &[]),
            (b"\n", &[b""]),
            (b"a", &[b"a"]),
            (b"a\n", &[b"a"]),
            (b"a\nb", &[b"a", b"b"]),
            (b"a\r\nb\r\n", &[b"a", b"b"]),
            (b"a\r", &[b"a\r"]),
            (b"a\rb\n", &[b"a\rb"]),
            (b"\n\n", &[b"", b""]),
            (b"a\0b\n", &[b"a", b"b"]),
            (b"a\0", &[b"a"]),
            (b"a\0\n", &[b"a", b""]),
            (b"a\r\0", &[b"a\r"]),
        ];
        for (bytes, want) in cases {
            let got: Vec<&[u8]> = lines(bytes).collect();
            assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn search_names_the_first_matching_line() {
        let re = compile("^b+$").unwrap();
        assert_eq!(
            search(b"a\nbb\nb\n", &re),
            Grepped::Match {
                line: 2,
                text: "bb".into(),
                binary: false
            }
        );
        assert_eq!(
            search(b"a\0bb", &re),
            Grepped::Match {
                line: 2,
                text: "bb".into(),
                binary: true
            }
        );
        assert_eq!(search(b"abb\n", &re), Grepped::NoMatch { binary: false });
        assert_eq!(
            Grepped::Match {
                line: 3,
                text: " x ".into(),
                binary: true
            }
            .seen("a.bin"),
            "`a.bin:3` (a binary file) holds `x`"
        );
    }

    /// What a file is, for the table.
    enum Is {
        File(&'static [u8]),
        Folder,
        Missing,
    }

    /// `grep -E -q`'s exit for kern's verdict: 0 a match, 1 none, 2 cannot read.
    fn exit(g: &Grepped) -> i32 {
        match g {
            Grepped::Match { .. } => 0,
            Grepped::NoMatch { .. } => 1,
            _ => 2,
        }
    }

    /// GNU grep's exit for the pattern on the file, in a UTF-8 locale; `None` where there is no
    /// GNU grep to ask (the expected column still holds kern to the dialect).
    fn gnu_grep(pattern: &str, path: &Path) -> Option<i32> {
        let version = std::process::Command::new("grep")
            .arg("--version")
            .output()
            .ok()?;
        if !String::from_utf8_lossy(&version.stdout).contains("GNU grep") {
            return None;
        }
        let out = std::process::Command::new("grep")
            .args(["-E", "-q", "--", pattern])
            .arg(path)
            .env("LC_ALL", "C.UTF-8")
            .output()
            .ok()?;
        out.status.code()
    }

    #[test]
    fn kerns_verdict_is_grep_e_qs_on_each_pair_and_the_documented_differences_are_the_only_ones() {
        // (what, the file, the pattern, kern's exit as grep -E -q's, grep's where it differs
        // on purpose — docs/spec-format.md lists each). One row a line: a table reads as one.
        #[rustfmt::skip]
        let cases: &[(&str, Is, &str, i32, Option<i32>)] = &[
            ("anchors at a line", Is::File(b"# head\ngreeting=hello\n"), "^greeting=hello$", 0, None),
            ("anchors, no final newline", Is::File(b"a\ngreeting=hello"), "^greeting=hello$", 0, None),
            ("^ is a line's start, not any", Is::File(b"say hello\n"), "^hello", 1, None),
            ("$ is each line's end", Is::File(b"hello\nworld\n"), "hello$", 0, None),
            ("a blank line among lines", Is::File(b"a\n\nb\n"), "^$", 0, None),
            ("no blank line", Is::File(b"a\nb\n"), "^$", 1, None),
            ("a file of one newline", Is::File(b"\n"), "^$", 0, None),
            ("an empty file has no lines", Is::File(b""), "^$", 1, None),
            ("an empty file, any pattern", Is::File(b""), "x", 1, None),
            ("^ alone on a line", Is::File(b"x"), "^", 0, None),
            ("the last line without newline", Is::File(b"x\ny"), "^y$", 0, None),
            ("a trailing blank line", Is::File(b"x\n\n"), "^x$", 0, None),
            ("CRLF: $ before the \\r\\n", Is::File(b"a\r\nb\r\n"), "^a$", 0, Some(1)),
            ("CRLF: . does not eat the \\r", Is::File(b"a\r\n"), "^a.$", 1, Some(0)),
            ("CRLF: a line's start", Is::File(b"a\r\nb\r\n"), "^b", 0, None),
            ("CRLF: the last line without newline", Is::File(b"a\r\nb"), "^b$", 0, None),
            ("UTF-8: . is a character", Is::File("café\n".as_bytes()), "^caf.$", 0, None),
            ("UTF-8 in the pattern", Is::File("naïve résumé\n".as_bytes()), "résumé$", 0, None),
            ("invalid UTF-8: . is no byte", Is::File(b"caf\xe9\n"), "^caf.$", 1, None),
            ("invalid UTF-8 around a match", Is::File(b"caf\xe9 ok\n"), "ok$", 0, None),
            ("a folder", Is::Folder, "x", 2, None),
            ("a missing file", Is::Missing, "x", 2, None),
            ("binary: a NUL ends a line", Is::File(b"abc\0def\n"), "^def", 0, None),
            ("binary: no match across a NUL", Is::File(b"abc\0def\n"), "c.d", 1, None),
            ("binary: a match at its end", Is::File(b"\x7fELF\0\0\x01hello"), "hello$", 0, None),
            ("binary: no match", Is::File(b"\x7fELF\0\0\x01hello"), "xyz", 1, None),
            ("spaces taken whole", Is::File(b"pub fn parse(input: &str)\n"), "pub fn parse", 0, None),
            ("spaces and escaped parens", Is::File(b"pub fn parse(input: &str)\n"), r"^pub fn parse\(input: &str\)$", 0, None),
            ("an escaped dot matches a dot", Is::File(b"version = \"1.2\"\n"), r#"^version = "1\.2"$"#, 0, None),
            ("an escaped dot is no other", Is::File(b"version = \"1x2\"\n"), r#"^version = "1\.2"$"#, 1, None),
            ("an escaped dollar", Is::File(b"echo $HOME\n"), r"\$HOME$", 0, None),
            ("escaped brackets", Is::File(b"- [x] done\n"), r"^- \[x\] done$", 0, None),
            ("alternation anchored", Is::File(b"foo\nbar=1\n"), "^(foo|bar)=", 0, None),
            ("bounded repetition", Is::File(b"aaa\n"), "^a{2,3}$", 0, None),
            ("bounded repetition, too many", Is::File(b"aaaa\n"), "^a{2,3}$", 1, None),
            ("a POSIX class", Is::File(b"123\n"), "^[[:digit:]]+$", 0, None),
            ("word boundaries", Is::File(b"a word here\n"), r"\bword\b", 0, None),
            ("a word's start", Is::File(b"sword\n"), r"\<word", 1, None),
            ("\\s never crosses a line", Is::File(b"a\nb\n"), r"a\sb", 1, None),
            ("[^x] never crosses a line", Is::File(b"a\nb\n"), "a[^x]b", 1, None),
            ("\\s within a line", Is::File(b"a\tb\n"), r"a\sb", 0, None),
            ("\\d is a digit (grep -E: a d)", Is::File(b"d\n"), r"^\d$", 1, Some(0)),
            ("\\t is a tab (grep -E: a t)", Is::File(b"a\tb\n"), r"a\tb", 0, Some(1)),
        ];
        assert!(cases.len() >= 30);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        for (i, (what, is, pattern, want, grep_differs)) in cases.iter().enumerate() {
            let path = match is {
                Is::File(bytes) => {
                    let path = dir.path().join(format!("case-{i}"));
                    std::fs::write(&path, bytes).unwrap();
                    path
                }
                Is::Folder => dir.path().join("folder"),
                Is::Missing => dir.path().join("missing"),
            };
            let seen = grep_file(&path, &compile(pattern).unwrap());
            assert_eq!(exit(&seen), *want, "{what}: kern saw {seen:?}");
            assert_eq!(seen.holds(false), *want == 0, "{what}: grep");
            assert_eq!(seen.holds(true), *want == 1, "{what}: grep!");
            if let Some(grep) = gnu_grep(pattern, &path) {
                assert_eq!(
                    grep,
                    grep_differs.unwrap_or(*want),
                    "{what}: GNU grep -E -q"
                );
            }
        }
    }

    #[test]
    fn a_pattern_that_does_not_compile_says_why() {
        assert!(compile("(").unwrap_err().contains("unclosed group"));
        assert_eq!(
            compile(r"(a)\1").unwrap_err(),
            "backreferences are not supported"
        );
    }
}
