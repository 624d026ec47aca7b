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

use super::document::TaskState;

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

/// True when the text of a heading closes its section: it ends with `[x]` (or `[X]`) or
/// carries ✅ anywhere (`## Phase 13: Payments [x]`, `### 4.23 Verification ✅ COMPLETED`).
pub(crate) fn heading_closes(text: &str) -> bool {
    let text = text.trim_end();
    text.ends_with("[x]") || text.ends_with("[X]") || text.contains('\u{2705}')
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
            ("Phase 14: Search [ ]", false),
            ("Phase [x] in the middle", false),
            ("Completed", false),
        ];
        for (text, closes) in cases {
            assert_eq!(heading_closes(text), *closes, "{text:?}");
        }
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
