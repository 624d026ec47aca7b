//! Discovery levels (DESIGN.md section 17): how much research a task earns, 0 to 3, rated
//! before research from measurable signals only, as a pure function.
//!
//! Decisions a reader must know:
//! - The person's `> **Level:** N` wins, then `--level`; a task that already failed at level 0
//!   goes back to level 2 (the small change was not so small).
//! - Level 0 (a typo, a rename, a version bump, formatting): no research stage; implement gets
//!   the task and the injected context. Level 1 (a small task that names files that exist):
//!   research is asked to stay short. Level 2: research as always. Level 3 (a redesign, a
//!   migration, a rewrite, an architecture change): research and review get the strongest
//!   model configured (Claude's `opus` when no model was chosen) and are asked to go deep.
//! - The check, must-haves, scope and review are never skipped at any level.

use crate::spec::{Document, NoteKind};

/// A task's level and why, in words for `-n`, `status`, the records and the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Level {
    /// 0 to 3.
    pub level: u8,
    /// Why, in a few words.
    pub why: String,
}

/// Title words of a change too small to research.
const SKIP_WORDS: &[&str] = &[
    "typo",
    "typos",
    "rename",
    "renames",
    "format",
    "formatting",
    "lint",
    "bump",
    "wording",
    "spelling",
    "comment",
    "comments",
    "whitespace",
    "changelog",
];

/// Title words of an architectural task.
const ARCHITECTURE_WORDS: &[&str] = &[
    "redesign",
    "migrate",
    "migration",
    "rewrite",
    "architecture",
    "architect",
    "re-architect",
    "overhaul",
];

/// Title words of an integration with something outside the project.
const INTEGRATION_WORDS: &[&str] = &[
    "integrate",
    "integration",
    "oauth",
    "sso",
    "webhook",
    "webhooks",
    "sdk",
    "api",
    "provider",
    "payment",
    "payments",
    "stripe",
];

/// The level of task `index` of `doc` (see the module docs). `exists` tells whether a path the
/// task names exists in the work tree; `forced` is `--level`.
pub(crate) fn level(
    doc: &Document,
    index: usize,
    exists: &dyn Fn(&str) -> bool,
    forced: Option<u8>,
) -> Level {
    let task = &doc.tasks()[index];
    let at = |level: u8, why: &str| Level {
        level,
        why: why.to_string(),
    };
    if let Some(n) = task
        .notes
        .iter()
        .rev()
        .find(|n| n.kind == NoteKind::Level)
        .and_then(|n| n.text.trim().parse::<u8>().ok())
        .filter(|n| *n <= 3)
    {
        return at(n, "set by its Level note");
    }
    if let Some(n) = forced {
        return at(n.min(3), "set by --level");
    }
    let words: Vec<String> = task
        .title
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let has = |list: &[&str]| words.iter().find(|w| list.contains(&w.as_str())).cloned();
    let free_words = task.free_text.split_whitespace().count();
    let big = task.children.len() >= 3 || free_words > 150;
    let computed = if let Some(w) = has(ARCHITECTURE_WORDS) {
        at(3, &format!("an architectural change (`{w}`)"))
    } else if let Some(w) = has(INTEGRATION_WORDS) {
        at(2, &format!("an integration (`{w}`)"))
    } else if big {
        at(2, "a large task (many words or subtasks)")
    } else if let Some(w) = has(SKIP_WORDS) {
        at(0, &format!("a small mechanical change (`{w}`)"))
    } else if words.len() <= 10 && free_words < 40 && names_existing_path(&task.title, exists) {
        at(1, "a small task that names files that exist")
    } else {
        at(2, "no signal for less research")
    };
    if computed.level == 0 && task.attempts() > 0 {
        return at(2, "it failed at level 0, so it gets research now");
    }
    computed
}

/// True when `title` names a path (a word with a `/` or a file extension) that exists.
fn names_existing_path(title: &str, exists: &dyn Fn(&str) -> bool) -> bool {
    title
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| matches!(c, '`' | '\'' | '"' | ',' | ':' | '(' | ')')))
        .filter(|w| {
            w.contains('/')
                || w.rsplit_once('.').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && (1..=5).contains(&b.len())
                        && b.chars().all(char::is_alphanumeric)
                })
        })
        .any(exists)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rated(spec: &str, forced: Option<u8>) -> (u8, String) {
        let doc = Document::parse(spec);
        let l = level(&doc, 0, &|p| p == "src/lib.rs" || p == "README.md", forced);
        (l.level, l.why)
    }

    #[test]
    fn levels_from_the_seeds_table_and_beyond() {
        let cases: &[(&str, u8)] = &[
            ("- [ ] fix typo\n", 0),
            ("- [ ] Fix a typo in README.md\n", 0),
            ("- [ ] Bump serde to 1.0.200\n", 0),
            ("- [ ] add oauth login\n", 2),
            ("- [ ] redesign auth system\n", 3),
            ("- [ ] Migrate the database to Postgres\n", 3),
            ("- [ ] Add a --json flag to `src/lib.rs`\n", 1),
            ("- [ ] Add a --json flag to `src/gone.rs`\n", 2),
            ("- [ ] Add the parser\n", 2),
            ("- [ ] Rename the payments API\n", 2),
            ("- [ ] fix typo\n  > **Attempt 1:** nope\n", 2),
        ];
        for (spec, want) in cases {
            assert_eq!(rated(spec, None).0, *want, "{spec}");
        }
    }

    #[test]
    fn the_person_and_the_flag_win() {
        assert_eq!(
            rated("- [ ] redesign auth\n  > **Level:** 1\n", None),
            (1, "set by its Level note".into())
        );
        assert_eq!(
            rated("- [ ] fix typo\n", Some(2)),
            (2, "set by --level".into())
        );
        assert_eq!(
            rated("- [ ] fix typo\n  > **Level:** 0\n", Some(3)).0,
            0,
            "the note wins over the flag"
        );
    }
}
