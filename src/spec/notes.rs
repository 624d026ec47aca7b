//! kern's notes inside a task's item: the one reader of every shape a note can take, and the
//! one writer of the layout kern writes.
//!
//! The one decision a reader must know: notes are read by their headers, not by their layout.
//! kern writes each note so that CommonMark reads it as kern means it (DESIGN.md section 2):
//!
//! ```text
//! > **Research:**
//! >
//! > - read src/lib.rs
//! >   (a bullet's second line)
//! >
//! > **Attempt 1:** the test failed
//! > (a note's second line)
//! ```
//!
//! — a blank `>` line after `**Research:**` and between notes, bullets as `> - `. This is a fixed
//! point of prettier and mdformat. Older files (kern.sh, earlier kern) have no blank lines and
//! `>   - ` bullets, and formatters turn those into other shapes: blank `>` lines, `*`/`+`
//! bullets, loose lists, and the notes after a bullet list nested under its last bullet as
//! continuation text (`>   **Attempt 1:** …`). So a header is found at the start of a quote
//! line's content whatever its indentation (`**Kind:**`, also `__Kind:__` and `**Kind**:`), and
//! a note's text is its lines trimmed, which every shape shares: the Research note drops blank
//! lines and writes every bullet `- `. [`rewrite`] turns a block in any other shape into the
//! layout above, keeping every note's text as read — the one rewrite of existing text kern
//! makes, done when kern next adds a note to the task.

/// The kind of a kern note inside a task's item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoteKind {
    /// `> **Research:**`, a blank `>` line and `> - …` bullets, written after stage 1.
    Research,
    /// `> **Attempt N:** …`, one per failed attempt.
    Attempt(u32),
    /// `> **Skipped:** …`, the agent's reason for skipping.
    Skipped,
    /// `> **Blocked:** …`, why kern gave up.
    Blocked,
    /// `> **Check:** <command>`, written by a person: this task's own check command.
    Check,
    /// `> **After:** <title>`, written by a person: this task waits until the task of that
    /// title is done (`after.rs` reads the waits).
    After,
    /// `> **Review:** kern/<task>`, written by kern with `--review`: the task's commit waits on
    /// that branch for `kern accept` or `kern reject`. It stays as the record afterwards.
    Review,
    /// `> **Must:**` and one must-have a line, written by a person: what kern itself checks
    /// before the task can be done (`spec::must`).
    Must,
    /// `> **Tests:** read-only` (the task may add tests but never change or delete an existing
    /// one) or `> **Tests:** first [<command>]` (red, then green), written by a person.
    Tests,
    /// `> **Scope:** <paths and globs>`, written by a person: what the task may change.
    Scope,
    /// `> **Level:** 0-3`, written by a person: the task's discovery level.
    Level,
    /// `> **Out of scope:** …`, written by kern: what the task changed outside its Scope and
    /// where it was set aside.
    OutOfScope,
    /// `> **Issue:** owner/repo#N`, written by `kern import` and the person's from then on: the
    /// tracker issue the task came from (`spec::issue`).
    Issue,
}

impl NoteKind {
    /// True for the notes whose text is a bullet list, laid out as Research is: the header
    /// alone, a blank `>` line, the bullets.
    pub fn is_list(self) -> bool {
        matches!(self, NoteKind::Research | NoteKind::Must)
    }

    /// The header word(s) as written between `**` and `:**`.
    pub fn header(self) -> String {
        match self {
            NoteKind::Research => "Research".to_string(),
            NoteKind::Attempt(n) => format!("Attempt {n}"),
            NoteKind::Skipped => "Skipped".to_string(),
            NoteKind::Blocked => "Blocked".to_string(),
            NoteKind::Check => "Check".to_string(),
            NoteKind::After => "After".to_string(),
            NoteKind::Review => "Review".to_string(),
            NoteKind::Must => "Must".to_string(),
            NoteKind::Tests => "Tests".to_string(),
            NoteKind::Scope => "Scope".to_string(),
            NoteKind::Level => "Level".to_string(),
            NoteKind::OutOfScope => "Out of scope".to_string(),
            NoteKind::Issue => "Issue".to_string(),
        }
    }
}

/// A quote line's content: without its indentation, its `>` and at most one blank after it; a
/// lazy continuation line (no `>`) without its indentation.
pub(crate) fn content(line: &str) -> &str {
    let line = line.trim_start_matches([' ', '\t']);
    match line.strip_prefix('>') {
        Some(rest) => rest
            .strip_prefix(' ')
            .or_else(|| rest.strip_prefix('\t'))
            .unwrap_or(rest),
        None => line,
    }
}

/// Reads a note header at the start of a quote line's content (any indentation): the kind and
/// the rest of the line. Accepts `**Kind:**`, `__Kind:__`, `**Kind**:` and blanks inside the
/// emphasis; the words are case-sensitive (`Attempt N` with N of at most nine digits).
pub(crate) fn header(content: &str) -> Option<(NoteKind, &str)> {
    let s = content.trim_start_matches([' ', '\t']);
    let delimiter = if s.starts_with("**") {
        "**"
    } else if s.starts_with("__") {
        "__"
    } else {
        return None;
    };
    let s = s[2..].trim_start_matches(' ');
    let (kind, s) = kind_word(s)?;
    let s = s.trim_start_matches(' ');
    let rest = if let Some(r) = s.strip_prefix(':') {
        r.trim_start_matches(' ').strip_prefix(delimiter)?
    } else {
        s.strip_prefix(delimiter)?.strip_prefix(':')?
    };
    Some((kind, rest))
}

fn kind_word(s: &str) -> Option<(NoteKind, &str)> {
    for (word, kind) in [
        ("Research", NoteKind::Research),
        ("Skipped", NoteKind::Skipped),
        ("Blocked", NoteKind::Blocked),
        ("Check", NoteKind::Check),
        ("After", NoteKind::After),
        ("Review", NoteKind::Review),
        ("Must", NoteKind::Must),
        ("Tests", NoteKind::Tests),
        ("Scope", NoteKind::Scope),
        ("Level", NoteKind::Level),
        ("Out of scope", NoteKind::OutOfScope),
        ("Issue", NoteKind::Issue),
    ] {
        if let Some(rest) = s.strip_prefix(word) {
            return Some((kind, rest));
        }
    }
    let rest = s.strip_prefix("Attempt ")?.trim_start_matches(' ');
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let n = rest[..digits].parse().ok()?;
    Some((NoteKind::Attempt(n), &rest[digits..]))
}

/// A note's text from the rest of its header line and its following lines' contents: each
/// line trimmed; blank lines at either end dropped; for a list note (Research, Must) every blank
/// line dropped and every bullet written `- `.
pub(crate) fn text(kind: NoteKind, lines: &[&str]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for line in lines {
        let line = line.trim();
        if kind.is_list() {
            if line.is_empty() {
                continue;
            }
            match bullet(line) {
                Some("") => out.push("-".to_string()),
                Some(rest) => out.push(format!("- {rest}")),
                None => out.push(line.to_string()),
            }
        } else {
            out.push(line.to_string());
        }
    }
    while out.first().is_some_and(String::is_empty) {
        out.remove(0);
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out.join("\n")
}

/// The text of a bullet line (`-`, `*` or `+`, then a blank or the end), trimmed.
fn bullet(line: &str) -> Option<&str> {
    let rest = line.strip_prefix(['-', '*', '+'])?;
    if rest.is_empty() || rest.starts_with([' ', '\t']) {
        Some(rest.trim())
    } else {
        None
    }
}

/// A note in kern's layout: the contents of its quote lines (empty for a blank `>` line), from
/// its text as [`text`] reads it, so that reading the result gives `text` back.
pub(crate) fn layout(kind: NoteKind, text: &str) -> Vec<String> {
    let head = format!("**{}:**", kind.header());
    let lines: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        text.split('\n').collect()
    };
    let mut out = Vec::with_capacity(lines.len() + 2);
    if !kind.is_list() {
        match lines.first() {
            Some(first) if !first.is_empty() => out.push(format!("{head} {first}")),
            _ => out.push(head),
        }
        out.extend(lines.iter().skip(1).map(std::string::ToString::to_string));
        return out;
    }
    let first_bullet = lines
        .iter()
        .position(|l| bullet(l).is_some())
        .unwrap_or(lines.len());
    let (lead, bullets) = lines.split_at(first_bullet);
    match lead.first() {
        Some(first) => out.push(format!("{head} {first}")),
        None => out.push(head),
    }
    out.extend(lead.iter().skip(1).map(std::string::ToString::to_string));
    if !bullets.is_empty() {
        out.push(String::new());
    }
    for line in bullets {
        match bullet(line) {
            Some("") => out.push("-".to_string()),
            Some(rest) => out.push(format!("- {rest}")),
            None => out.push(format!("  {line}")),
        }
    }
    out
}

/// Quote lines (`indent> content`, `indent>` when blank) joined with `le`, each ended by it.
pub(crate) fn quote_lines(contents: &[String], indent: &str, le: &str) -> String {
    let mut out = String::new();
    for c in contents {
        out.push_str(indent);
        out.push('>');
        if !c.is_empty() {
            out.push(' ');
            out.push_str(c);
        }
        out.push_str(le);
    }
    out
}

/// The block's notes in kern's layout, one blank `>` line between one note and the next.
pub(crate) fn block_layout(notes: &[(NoteKind, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, (kind, text)) in notes.iter().enumerate() {
        if k > 0 {
            out.push(String::new());
        }
        out.extend(layout(*kind, text));
    }
    out
}

/// The replacement of a notes block that is not in kern's layout, or `None` when it already is
/// or must be left as it is. `lines` are the block's lines without their line endings, `notes`
/// its notes (kind and text as read). A block is rewritten only when it holds nothing but
/// notes (its first content line is a header), no fenced code and no nested bullets, so that
/// the rewrite keeps every word and every line's meaning.
pub(crate) fn rewrite(
    lines: &[&str],
    notes: &[(NoteKind, &str)],
    indent: &str,
    le: &str,
) -> Option<String> {
    let first = lines
        .iter()
        .map(|l| content(l))
        .find(|c| !c.trim().is_empty())?;
    header(first)?;
    let mut bullet_indent: Option<usize> = None;
    for line in lines {
        let c = content(line);
        let t = c.trim_start_matches([' ', '\t']);
        if t.starts_with("```") || t.starts_with("~~~") {
            return None;
        }
        if bullet(t.trim_end()).is_some() {
            let depth = c.len() - t.len();
            match bullet_indent {
                Some(d) if depth > d => return None,
                Some(_) => {}
                None => bullet_indent = Some(depth),
            }
        }
    }
    let wanted = quote_lines(&block_layout(notes), indent, le);
    let mut now = String::new();
    for line in lines {
        now.push_str(line);
        now.push_str(le);
    }
    (wanted != now).then_some(wanted)
}

/// The error signature of an attempt note: lower case, digits and punctuation folded, so that
/// "timed out after 61m" and "timed out after 60m" are the same failure.
pub(crate) fn error_signature(note: &str) -> String {
    note.chars()
        .filter(|c| c.is_alphabetic() || c.is_whitespace())
        .collect::<String>()
        .split_whitespace()
        .take(16)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_in_every_shape() {
        let cases: &[(&str, Option<(NoteKind, &str)>)] = &[
            ("**Research:**", Some((NoteKind::Research, ""))),
            (
                "**Attempt 12:** it broke",
                Some((NoteKind::Attempt(12), " it broke")),
            ),
            (
                "  **Attempt 1:** nested",
                Some((NoteKind::Attempt(1), " nested")),
            ),
            ("__Skipped:__ later", Some((NoteKind::Skipped, " later"))),
            ("**Blocked**: stuck", Some((NoteKind::Blocked, " stuck"))),
            (
                "** Check: ** cargo test",
                Some((NoteKind::Check, " cargo test")),
            ),
            ("**Attempt  2 :** x", Some((NoteKind::Attempt(2), " x"))),
            ("**attempt 2:** lower", None),
            ("**Attempt x:** word", None),
            ("**Attempt 1234567890:** too long", None),
            ("**Research** no colon", None),
            ("**Research:__ mixed", None),
            ("> **Blocked:** nested quote", None),
            ("\\**Attempt 1:** escaped", None),
            ("Research:", None),
        ];
        for (line, expected) in cases {
            assert_eq!(header(line), *expected, "{line:?}");
        }
    }

    #[test]
    fn quote_content_strips_one_marker_and_one_blank() {
        let cases: &[(&str, &str)] = &[
            ("  > **Research:**", "**Research:**"),
            ("  >   - a", "  - a"),
            ("  >", ""),
            (">\tx", "x"),
            ("  > > nested", "> nested"),
            ("  lazy text", "lazy text"),
        ];
        for (line, expected) in cases {
            assert_eq!(content(line), *expected, "{line:?}");
        }
    }

    #[test]
    fn every_shape_reads_the_same_text() {
        let research: &[&[&str]] = &[
            // kern's layout
            &["", "", "- read src/lib.rs", "  carefully", "- then b"],
            // the old layout
            &["", "  - read src/lib.rs", "    carefully", "  - then b"],
            // star bullets, a loose list
            &["", "", "* read src/lib.rs", "  carefully", "", "* then b"],
            &["", "+ read src/lib.rs", "carefully", "+   then b"],
        ];
        for lines in research {
            assert_eq!(
                text(NoteKind::Research, lines),
                "- read src/lib.rs\ncarefully\n- then b",
                "{lines:?}"
            );
        }
        let attempt: &[&[&str]] = &[
            &[" it broke", "twice"],
            &[" it broke", "  twice", ""],
            &["  it broke  ", "twice", "", ""],
        ];
        for lines in attempt {
            assert_eq!(text(NoteKind::Attempt(1), lines), "it broke\ntwice");
        }
        assert_eq!(text(NoteKind::Check, &[" a", "", "b"]), "a\n\nb");
    }

    #[test]
    fn layout_reads_back_as_its_text() {
        let cases: &[(NoteKind, &str, &[&str])] = &[
            (
                NoteKind::Research,
                "- a\nmore\n- b",
                &["**Research:**", "", "- a", "  more", "- b"],
            ),
            (NoteKind::Research, "", &["**Research:**"]),
            (
                NoteKind::Research,
                "intro\n- a",
                &["**Research:** intro", "", "- a"],
            ),
            (
                NoteKind::Attempt(3),
                "it broke\ntwice",
                &["**Attempt 3:** it broke", "twice"],
            ),
            (NoteKind::Blocked, "", &["**Blocked:**"]),
            (NoteKind::Check, "a\n\nb", &["**Check:** a", "", "b"]),
        ];
        for (kind, note, expected) in cases {
            let lines = layout(*kind, note);
            assert_eq!(lines, *expected, "{note:?}");
            let (k, rest) = header(&lines[0]).unwrap();
            assert_eq!(k, *kind);
            let mut body = vec![rest];
            body.extend(lines[1..].iter().map(String::as_str));
            assert_eq!(text(*kind, &body), *note);
        }
    }

    #[test]
    fn rewrites_only_blocks_that_are_notes_in_another_shape() {
        let notes: &[(NoteKind, &str)] = &[
            (NoteKind::Research, "- a\nmore\n- b"),
            (NoteKind::Attempt(1), "x"),
        ];
        let new =
            "  > **Research:**\n  >\n  > - a\n  >   more\n  > - b\n  >\n  > **Attempt 1:** x\n";
        let lines_of = |s: &'static str| -> Vec<&'static str> { s.lines().collect() };
        assert_eq!(rewrite(&lines_of(new), notes, "  ", "\n"), None);
        let old = "  > **Research:**\n  >   - a\n  >     more\n  >   - b\n  > **Attempt 1:** x\n";
        assert_eq!(
            rewrite(&lines_of(old), notes, "  ", "\n").as_deref(),
            Some(new)
        );
        let nested =
            "  > **Research:**\n  >\n  > - a\n  >   more\n  > - b\n  >   **Attempt 1:** x\n";
        assert_eq!(
            rewrite(&lines_of(nested), notes, "  ", "\n").as_deref(),
            Some(new)
        );
        let person = "  > a person's words\n  > **Attempt 1:** x\n";
        assert_eq!(rewrite(&lines_of(person), notes, "  ", "\n"), None);
        let fenced = "  > **Attempt 1:** x\n  > ```\n  >   code\n  > ```\n";
        assert_eq!(rewrite(&lines_of(fenced), notes, "  ", "\n"), None);
        let deeper = "  > **Research:**\n  >   - a\n  >     - sub\n";
        assert_eq!(rewrite(&lines_of(deeper), notes, "  ", "\n"), None);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = NoteKind> {
        prop_oneof![
            Just(NoteKind::Research),
            (1u32..99).prop_map(NoteKind::Attempt),
            Just(NoteKind::Skipped),
            Just(NoteKind::Blocked),
            Just(NoteKind::Check),
            Just(NoteKind::After),
            Just(NoteKind::Review),
            Just(NoteKind::Must),
            Just(NoteKind::Tests),
            Just(NoteKind::Scope),
            Just(NoteKind::Level),
            Just(NoteKind::OutOfScope),
        ]
    }

    proptest! {
        /// Whatever lines a note has, writing its text in kern's layout and reading it back
        /// gives the same text, and the block layout reads back note by note.
        #[test]
        fn layout_reads_back_as_its_text(
            kinds in prop::collection::vec(kind(), 1..4),
            lines in prop::collection::vec(prop::collection::vec("[-*+ ]{0,2}[a-z`(]{0,8}( [a-z]{1,5})?", 0..4), 4),
        ) {
            let mut notes: Vec<(NoteKind, String)> = Vec::new();
            for (k, kind) in kinds.iter().enumerate() {
                let body: Vec<&str> = lines[k].iter().map(String::as_str).collect();
                notes.push((*kind, text(*kind, &body)));
            }
            let view: Vec<(NoteKind, &str)> = notes.iter().map(|(k, t)| (*k, t.as_str())).collect();
            let block = block_layout(&view);
            let mut read: Vec<(NoteKind, Vec<&str>)> = Vec::new();
            for line in &block {
                match header(line) {
                    Some((k, rest)) => read.push((k, vec![rest])),
                    None => read.last_mut().unwrap().1.push(line.as_str()),
                }
            }
            let back: Vec<(NoteKind, String)> =
                read.iter().map(|(k, body)| (*k, text(*k, body))).collect();
            prop_assert_eq!(back, notes);
        }
    }

    #[test]
    fn error_signatures_fold_numbers() {
        assert_eq!(
            error_signature("agent timed out after 60m"),
            error_signature("Agent timed out after 61m")
        );
        assert_ne!(
            error_signature("tests fail: parser"),
            error_signature("tests fail: lexer")
        );
    }
}
