//! Other tools' task markers: what a box at the start of a list item is, in kern's terms.
//!
//! The one decision a reader must know: a marker kern does not own is never fatal unless it is
//! a typo of one kern does own. People point kern at the task lists other tools keep — Kiro
//! (`[-]` in progress, `[ ]*` optional), Obsidian Tasks (`[/]` in progress, `[-]` cancelled,
//! `[>]`, `[?]`, …), spec-kit (`[P]` legend lines) — so:
//!
//! | box | kern reads it as |
//! |---|---|
//! | `[ ]` `[~]` `[x]` `[X]` `[!]` | a task in that state |
//! | the same followed by `*` (`[ ]*`, `[x]*`; `[ ]\*` as mdformat writes it) | an optional task: taken after every other |
//! | `[-]` `[/]` | held elsewhere: never taken, counted and listed |
//! | any other single character (`[P]`, `[?]`, `[>]`, `[o]`) | not a task; a warning |
//! | `[]` `[ x]` `[x ]` `[~ ]` `[[ ]`, `[x]title` | malformed: an error with the fix |
//!
//! Longer bracketed text (`[docs]`, `[Story]`) and links are ordinary text.

use super::marker::TaskState;

/// What kind of task a box makes, beyond its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// One of kern's own boxes.
    Kern,
    /// Kiro's optional task (`[ ]*`, `[x]*`): taken after every other pending task, left alone
    /// with `--skip-optional`. Its state is the one inside the box.
    Optional,
    /// Another tool holds it (`[-]`, `[/]`: in progress in Kiro and Obsidian Tasks, cancelled
    /// in Obsidian): never taken, with its subtasks. Its `state` reads as pending and means
    /// nothing; the character is the one inside the box.
    HeldElsewhere(char),
}

impl TaskKind {
    /// True for a task kern may take (its own and optional ones).
    pub fn is_kerns(self) -> bool {
        !matches!(self, TaskKind::HeldElsewhere(_))
    }
}

/// What the box at the start of an item turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BoxKind {
    /// A task in this state, of this kind; `title_at` is where its title starts in the line
    /// (just past the box, and past the `*` of an optional box).
    Task {
        state: TaskState,
        kind: TaskKind,
        title_at: usize,
    },
    /// Another tool's one-character box: not a task, worth a warning.
    Foreign(char),
    /// A near miss of one of kern's boxes: (message, fix).
    Malformed(String, String),
    /// Ordinary text such as `[docs]` or a link.
    NotATask,
}

/// The characters that make a box held elsewhere.
const HELD: [char; 2] = ['-', '/'];

/// Reads the box at the start of `rest` (an item's first line from its `[`, or any line).
pub(crate) fn classify_box(rest: &str) -> BoxKind {
    let Some(body) = rest.strip_prefix('[') else {
        return BoxKind::NotATask;
    };
    let Some(close) = body.find(']') else {
        return BoxKind::NotATask;
    };
    let inside = &body[..close];
    let after = &body[close + 1..];
    let blank_or_end = |s: &str| s.is_empty() || s.starts_with([' ', '\t']);
    let spaced = blank_or_end(after);
    // `[ ]*`, or `[ ]\*` as mdformat escapes it.
    let star = ["*", "\\*"]
        .into_iter()
        .find(|s| after.strip_prefix(s).is_some_and(blank_or_end));
    let starred = star.is_some();
    let link_like = after.starts_with(['(', '[', ':']);
    let shown = &rest[..close + 2];
    let title_at = close + 2 + star.map_or(0, str::len);
    let mut chars = inside.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if !link_like => {
            let kind = if starred {
                TaskKind::Optional
            } else {
                TaskKind::Kern
            };
            match TaskState::from_marker(c) {
                Some(state) if spaced || starred => BoxKind::Task {
                    state,
                    kind,
                    title_at,
                },
                Some(_) => BoxKind::Malformed(
                    format!("no space after the task marker `{shown}`"),
                    format!("write `{shown} ` followed by the title"),
                ),
                None if !(spaced || starred) => BoxKind::NotATask,
                None if HELD.contains(&c) => BoxKind::Task {
                    state: TaskState::Pending,
                    kind: TaskKind::HeldElsewhere(c),
                    title_at,
                },
                None => BoxKind::Foreign(c),
            }
        }
        (None, _) if !link_like => BoxKind::Malformed(
            "malformed task marker `[]`".to_string(),
            "write `[ ]` (a space inside) for a pending task".to_string(),
        ),
        _ if !link_like && inside.chars().count() <= 3 && inside.trim().chars().count() <= 1 => {
            BoxKind::Malformed(
                format!("malformed task marker `{shown}`"),
                "use [ ], [~], [x] or [!]: exactly one character inside the brackets".to_string(),
            )
        }
        _ => BoxKind::NotATask,
    }
}

/// True when the text of a heading says its section is done (DESIGN.md section 2): it ends
/// with `[x]`, a check mark (✅ ✔ ☑), or a done word — `DONE`, `COMPLETE(D)`, `FINISHED` —
/// written in capitals, in brackets or parentheses (`[Done]`, `(done)`), or after a separator
/// (`— Completed`, `: done`, `✅ Done`). A check mark or word that only appears in the heading
/// (`✅ Project tasks`, `Login (Partial ✅)`, `How it's done`, `NOT DONE`) does not close it.
pub(crate) fn heading_closes(text: &str) -> bool {
    let text = text.trim_end();
    if text.ends_with("[x]") || text.ends_with("[X]") {
        return true;
    }
    // The last status segment: the text without trailing closing brackets and punctuation.
    let bracketed = text.ends_with([')', ']']);
    let core = text.trim_end_matches([')', ']', '.', '!', ' ', '*', '_']);
    let qualified = |before: &str| {
        let prev = before
            .trim_end_matches(|c: char| !c.is_alphanumeric())
            .rsplit(|c: char| !c.is_alphanumeric() && c != '\'')
            .next()
            .unwrap_or("")
            .to_lowercase();
        matches!(
            prev.as_str(),
            "not" | "partial" | "partially" | "partly" | "mostly" | "almost" | "nearly" | "half"
        )
    };
    for mark in ['\u{2705}', '\u{2714}', '\u{2611}'] {
        let core = core.trim_end_matches('\u{fe0f}');
        if let Some(before) = core.strip_suffix(mark) {
            return !qualified(before) && !before.trim().is_empty();
        }
    }
    let word_start = core.rfind(|c: char| !c.is_alphabetic()).map_or(0, |i| {
        i + core[i..].chars().next().map_or(1, char::len_utf8)
    });
    let word = &core[word_start..];
    if !matches!(
        word.to_lowercase().as_str(),
        "done" | "complete" | "completed" | "finished"
    ) {
        return false;
    }
    let before = &core[..word_start];
    if qualified(before) {
        return false;
    }
    let capitals = word.chars().all(char::is_uppercase);
    let after_separator = before.trim_end().ends_with([
        '\u{2014}', '\u{2013}', '-', ':', '|', '(', '[', '\u{2705}', '\u{2714}',
    ]) || bracketed && before.trim_end().ends_with(['(', '[']);
    (capitals && !before.trim().is_empty()) || after_separator
}

/// True when a task's title marks it as an example (`Example: Add a --json flag`, or
/// `(example)` / `[example]` anywhere in it): such a task shows the format — `kern init`'s
/// starter SPEC.md holds two — and is listed, never taken, like a deferred one. The word alone
/// elsewhere (`Add an example to the README`) is ordinary text.
pub(crate) fn title_is_example(title: &str) -> bool {
    let lower = title.trim_start().to_lowercase();
    lower.starts_with("example:") || lower.contains("(example)") || lower.contains("[example]")
}

/// The words that, as a task title's label, say the task waits (see [`title_defers`]).
const DEFER_WORDS: &[&str] = &[
    "deferred",
    "skipped",
    "blocked",
    "out of scope",
    "waiting",
    "later",
    "future",
    "someday",
    "on hold",
    "postponed",
    "wontfix",
    "won't do",
    "parked",
];

/// True when a task's title says the task is deferred, skipped, blocked, out of scope or
/// waiting (DESIGN.md section 2): such a task is listed, never taken. Said as a label that
/// starts the title (`BLOCKED: needs the API key`, `Later: …`), a bracketed or parenthesised
/// word (`(deferred)`, `[later]`, `(waiting on design)`), or the segment after a dash at the end
/// (`— SKIPPED (requires credentials)`, `- out of scope for v1`). `Someday` says it as the
/// title's first or last word too (`Someday port it to Windows`, `Offline sync, someday`). The
/// same words elsewhere in a title (`Handle blocked users`, `Retry the skipped tasks`, `Add the
/// futures API`) are ordinary text.
pub(crate) fn title_defers(title: &str) -> bool {
    let lower = title.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    if words.first() == Some(&"someday") || words.last() == Some(&"someday") {
        return true;
    }
    let says = |segment: &str| {
        let segment = segment.trim_start();
        DEFER_WORDS.iter().any(|w| {
            segment.strip_prefix(w).is_some_and(|rest| {
                rest.is_empty()
                    || [
                        ":",
                        " -",
                        " \u{2014}",
                        " \u{2013}",
                        " (",
                        " by ",
                        " on ",
                        " for ",
                        " until ",
                        " due",
                        ",",
                        ")",
                        "]",
                    ]
                    .iter()
                    .any(|f| rest.starts_with(f))
                    || (*w == "out of scope" && rest.starts_with(' '))
            })
        })
    };
    // A label that starts the title.
    if DEFER_WORDS
        .iter()
        .any(|w| lower.strip_prefix(w).is_some_and(|r| r.starts_with(':')))
    {
        return true;
    }
    // A bracketed or parenthesised word.
    for (open, close) in [('(', ')'), ('[', ']')] {
        let mut rest = lower.as_str();
        while let Some(i) = rest.find(open) {
            let inner = &rest[i + 1..];
            let end = inner.find(close).unwrap_or(inner.len());
            if says(&inner[..end]) && !inner[..end].contains(open) {
                return true;
            }
            rest = &inner[end.min(inner.len())..];
        }
    }
    // The segment after the last dash.
    [" \u{2014} ", " \u{2013} ", " - ", " -- "]
        .iter()
        .any(|sep| {
            lower
                .rfind(sep)
                .is_some_and(|i| says(&lower[i + sep.len()..]))
        })
}

/// True when a heading's text names a legend (`## Status Legend`, `### Legend`): its section
/// explains the markers and holds no tasks.
pub(crate) fn heading_is_legend(text: &str) -> bool {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == "legend")
}

/// True when a paragraph is a legend's label (`Legend:`, `**Status legend:**`, `Key:`): the
/// list right after it explains the markers and holds no tasks.
pub(crate) fn label_is_legend(text: &str) -> bool {
    let t = text
        .trim()
        .trim_matches(['*', '_'])
        .trim_end_matches(['*', '_'])
        .to_lowercase();
    let Some(label) = t.strip_suffix(':') else {
        return false;
    };
    let label = label.trim().trim_matches(['*', '_']);
    label == "legend" || label == "key" || label.ends_with(" legend") || label == "markers"
}

/// True when a heading or a paragraph label names a task's acceptance criteria
/// (`Acceptance criteria`, `Success criteria`, `Definition of done`, `Done when`, with or
/// without a trailing colon and emphasis): the checkbox list under it is criteria, not tasks.
pub(crate) fn names_criteria(text: &str) -> bool {
    // A number or an emoji before the name (`9. Acceptance Criteria`, `🎯 Success Criteria`)
    // is the heading's decoration, not its name.
    let t = text
        .trim()
        .trim_start_matches(|c: char| !c.is_alphabetic())
        .trim_matches(['*', '_'])
        .trim_end_matches(['*', '_'])
        .trim_end_matches(':')
        .trim_matches(['*', '_'])
        .trim()
        .to_lowercase();
    matches!(
        t.as_str(),
        "acceptance criteria"
            | "success criteria"
            | "definition of done"
            | "done when"
            | "done criteria"
            | "acceptance"
            | "criteria"
    )
}

/// True when a task's title carries spec-kit's `[P]` tag (`[P] T004 Write the model`): it may
/// run beside its siblings under `-j`; untagged siblings run one after the other.
pub(crate) fn title_is_parallel(title: &str) -> bool {
    title.split_whitespace().take(3).any(|w| w == "[P]")
}

/// True when a line that is not a list item starts (after its indentation) with one of
/// kern's boxes and a title: it looks like a task, but the `- ` before the box is missing.
pub(crate) fn looks_like_task(line: &str) -> bool {
    let content = line.trim_start_matches([' ', '\t']);
    matches!(
        classify_box(content),
        BoxKind::Task { kind, title_at, .. }
            if kind.is_kerns() && !content[title_at.min(content.len())..].trim().is_empty()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(rest: &str) -> String {
        match classify_box(rest) {
            BoxKind::Task {
                state,
                kind,
                title_at,
            } => format!("{} {kind:?} {:?}", state.as_str(), &rest[title_at..]),
            BoxKind::Foreign(c) => format!("foreign {c}"),
            BoxKind::Malformed(m, _) => format!("malformed: {m}"),
            BoxKind::NotATask => "text".to_string(),
        }
    }

    #[test]
    fn every_box_of_every_dialect() {
        let cases: &[(&str, &str)] = &[
            ("[ ] a", "pending Kern \" a\""),
            ("[x] a", "done Kern \" a\""),
            ("[X] a", "done Kern \" a\""),
            ("[~] a", "in_progress Kern \" a\""),
            ("[!] a", "blocked Kern \" a\""),
            ("[ ]", "pending Kern \"\""),
            (
                "[ ]* 3.4 Write tests",
                "pending Optional \" 3.4 Write tests\"",
            ),
            ("[x]* done", "done Optional \" done\""),
            (
                "[ ]\\* mdformat escaped",
                "pending Optional \" mdformat escaped\"",
            ),
            ("[~]* doing", "in_progress Optional \" doing\""),
            (
                "[-] 2.2 Kiro in progress",
                "pending HeldElsewhere('-') \" 2.2 Kiro in progress\"",
            ),
            (
                "[/] Obsidian in progress",
                "pending HeldElsewhere('/') \" Obsidian in progress\"",
            ),
            (
                "[-]* held optional",
                "pending HeldElsewhere('-') \" held optional\"",
            ),
            ("[P] tasks = different files", "foreign P"),
            ("[?] question", "foreign ?"),
            ("[>] forwarded", "foreign >"),
            ("[o] x", "foreign o"),
            ("[ü] x", "foreign ü"),
            ("[]", "malformed: malformed task marker `[]`"),
            ("[ x] a", "malformed: malformed task marker `[ x]`"),
            ("[x ] a", "malformed: malformed task marker `[x ]`"),
            ("[~ ] a", "malformed: malformed task marker `[~ ]`"),
            ("[[ ] a", "malformed: malformed task marker `[[ ]`"),
            ("[x]a", "malformed: no space after the task marker `[x]`"),
            ("[ ]*a", "malformed: no space after the task marker `[ ]`"),
            ("[-]a", "text"),
            ("[P]a", "text"),
            ("[docs] a", "text"),
            ("[Story] label", "text"),
            ("[x](http://e) a", "text"),
            ("[x][r] a", "text"),
            ("[x]: http://e", "text"),
            ("[-](x)", "text"),
            ("no box", "text"),
        ];
        for (rest, expected) in cases {
            assert_eq!(kind(rest), *expected, "{rest:?}");
        }
    }

    #[test]
    fn headings_that_close_their_section() {
        let cases: &[(&str, bool)] = &[
            ("Phase 13: Payments [x]", true),
            ("Phase 13: Payments [X]  ", true),
            ("4.23 Verification \u{2705} COMPLETED", true),
            ("\u{2705} Done", true),
            ("Setup \u{2705}", true),
            ("Setup \u{2714}\u{fe0f}", true),
            ("Phase 15 [DONE]", true),
            ("Phase 15 (DONE)", true),
            ("Phase 15 (done)", true),
            ("Phase 1 [Complete]", true),
            ("Phase 15 \u{2014} COMPLETED", true),
            ("Phase 15 \u{2014} Completed", true),
            ("Phase 2: Done", true),
            ("Phase 2 - finished", true),
            ("Phase 3 DONE", true),
            ("Phase 14: Search [ ]", false),
            ("Phase [x] in the middle", false),
            ("Completed", false),
            ("DONE", false),
            ("\u{2705} Project tasks", false),
            ("Login (Partial \u{2705})", false),
            ("Login \u{2014} partially done", false),
            ("How it's done", false),
            ("Phase 3 \u{2014} NOT DONE", false),
            ("Phase 4 (in progress)", false),
            ("Definition of done", false),
        ];
        for (text, closes) in cases {
            assert_eq!(heading_closes(text), *closes, "{text:?}");
        }
    }

    #[test]
    fn titles_that_say_the_task_waits() {
        let cases: &[(&str, bool)] = &[
            (
                "Set up payments \u{2014} SKIPPED (requires credentials)",
                true,
            ),
            ("Migrate the database (deferred)", true),
            ("[later] Rewrite the parser", true),
            ("BLOCKED: needs the API key", true),
            ("Later: dark mode", true),
            ("Wait for the lock (waiting on #12)", true),
            ("Add pagination \u{2014} out of scope for v1", true),
            ("Write docs (on hold)", true),
            ("Search (blocked by the index task)", true),
            ("Add caching - postponed", true),
            ("Dark mode (future)", true),
            ("Future: plugins", true),
            ("Someday: plugins", true),
            ("Someday port it to Windows", true),
            ("Offline sync, someday", true),
            ("Rewrite in Rust (someday)", true),
            ("Add the futures API", false),
            ("Plan for the future of the API", false),
            ("Add a someday/maybe list", false),
            ("Handle blocked users", false),
            ("Show SKIPPED tests in the report", false),
            ("Retry the skipped tasks", false),
            ("Add retry (later versions only)", false),
            ("Add a `--json` flag (waits for nothing)", false),
            ("Parse dates - the later format too", false),
            ("Add login", false),
        ];
        for (title, defers) in cases {
            assert_eq!(title_defers(title), *defers, "{title:?}");
        }
    }

    #[test]
    fn headings_and_labels_that_name_criteria() {
        let cases: &[(&str, bool)] = &[
            ("Acceptance criteria", true),
            ("**Acceptance criteria:**", true),
            ("Definition of done", true),
            ("9. Acceptance Criteria", true),
            ("2) Definition of Done", true),
            ("1.2 Success criteria", true),
            ("\u{1f3af} Success Criteria", true),
            ("\u{2705} Done when:", true),
            ("Acceptance tests for the parser", false),
            ("9. Add login", false),
        ];
        for (text, names) in cases {
            assert_eq!(names_criteria(text), *names, "{text:?}");
        }
    }

    #[test]
    fn titles_that_mark_an_example() {
        let cases: &[(&str, bool)] = &[
            ("Example: Add a `--json` flag to the `report` command", true),
            ("example: lower case too", true),
            ("EXAMPLE: and capitals", true),
            ("Add a `--json` flag (example)", true),
            ("[Example] Read the settings", true),
            ("Add an example to the README", false),
            ("Examples: show three in the docs", false),
            ("Fix the example: it crashes", false),
            ("Add login", false),
        ];
        for (title, example) in cases {
            assert_eq!(title_is_example(title), *example, "{title:?}");
        }
    }

    #[test]
    fn legends_and_parallel_tags() {
        assert!(heading_is_legend("Status Legend"));
        assert!(heading_is_legend("Legend"));
        assert!(!heading_is_legend("Legendary features"));
        assert!(label_is_legend("Legend:"));
        assert!(label_is_legend("**Status legend:**"));
        assert!(label_is_legend("Key:"));
        assert!(!label_is_legend("Legend of the tasks below"));
        assert!(!label_is_legend("Tasks:"));
        assert!(title_is_parallel("[P] T004 Write the model"));
        assert!(title_is_parallel("T004 [P] Write the model"));
        assert!(!title_is_parallel("Write the model [P]riority"));
    }

    #[test]
    fn lines_that_look_like_tasks() {
        let cases: &[(&str, bool)] = &[
            ("[ ] Implement boolean search", true),
            ("  [x] Done thing", true),
            ("\t[~] Doing", true),
            ("[ ]* optional", true),
            ("[ ]", false),
            ("[-] held", false),
            ("[P] legend", false),
            ("[docs] x", false),
            ("- [ ] a list item", false),
            ("text [ ] later", false),
        ];
        for (line, looks) in cases {
            assert_eq!(looks_like_task(line), *looks, "{line:?}");
        }
    }
}
