//! LEARNINGS.md: what the agents learned, appended by kern under a dated heading per task, and
//! kern's constraints ([`constraint`]) in a section of their own.
//!
//! A run writes the file only in a task's commit, re-reading it first so a person's edits
//! survive, in the file's own line endings, through an atomic write. Every entry kern writes
//! names its source — the task and the commit (`the commit after <sha>`: the entry is written
//! before the commit that carries it, so it names the commit that one is made on) — and, in a
//! ` — paths: ` part, the paths the task's change touched that it concerns ([`paths`]): a
//! learning those it mentions, a constraint all of them.
//!
//! What the prompts get is chosen ([`select`], pure), never edited in the file: an entry (a
//! bullet) that names a path that no longer exists — in that part, a code span
//! (`` `src/old.rs` ``) or plain words (`src/old.rs:12`) — is stale and left out (and `kern
//! status` names it); when the rest is over the budget, kern's hard constraints go in first,
//! then the entries that share most words and paths with the task, the newer first among
//! equals, shown in the file's order under their headings with a note of what was left out.

use std::path::Path;

use crate::error::{Error, Result};

pub(crate) mod constraint;
mod paths;

/// What a task's commit writes into LEARNINGS.md.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record<'a> {
    /// The day, `YYYY-MM-DD`.
    pub date: &'a str,
    /// The task's title.
    pub task: &'a str,
    /// What the stages learned, one entry each.
    pub learnings: &'a [String],
    /// Where they come from: `task "…", the commit after <sha>`.
    pub source: &'a str,
    /// The paths the task's change touched that exist after it: each learning names those it
    /// mentions in its ` — paths: ` part, which makes it stale once they are gone.
    pub paths: &'a [String],
    /// The errors of the task's failed attempts (its Attempt notes without kern's approach
    /// line): what moves the constraints (`constraint::update`).
    pub failures: &'a [String],
    /// A constraint derived from this task (`constraint::derive`).
    pub constraint: Option<String>,
}

/// The source an entry names: the task and the commit (see the module docs).
pub(crate) fn source(task: &str, base: Option<&str>) -> String {
    let title = task.split_whitespace().collect::<Vec<_>>().join(" ");
    match base {
        Some(sha) => format!(
            "task \"{title}\", the commit after {}",
            &sha[..sha.len().min(7)]
        ),
        None => format!("task \"{title}\", the repository's first commit"),
    }
}

/// Writes `record` into the file at `path`: the learnings under `## <date> — <task>`, each
/// naming its source, and the constraints moved and added. Returns the file's text before
/// (to put back if the commit fails); `None` when nothing changed.
pub(crate) fn record(path: &Path, record: &Record<'_>) -> Result<Option<String>> {
    let items: Vec<String> = record
        .learnings
        .iter()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    let before = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(path, e)),
    };
    let eol = if before.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut text = before.clone();
    if !items.is_empty() {
        if text.is_empty() {
            text.push_str(&format!("# Learnings{eol}"));
        } else if !text.ends_with('\n') {
            text.push_str(eol);
        }
        let title = record.task.split_whitespace().collect::<Vec<_>>().join(" ");
        text.push_str(&format!("{eol}## {} — {title}{eol}{eol}", record.date));
        for item in items {
            let concerns = paths::concerns(&item, record.paths);
            text.push_str(&format!(
                "- {item} — source: {}{}{eol}",
                record.source,
                paths::part(&concerns)
            ));
        }
    }
    text = constraint::update(&text, record.failures, record.constraint.as_deref(), eol);
    if text == before {
        return Ok(None);
    }
    crate::atomic_file::write(path, text.as_bytes())?;
    Ok(Some(before))
}

/// Appends `learnings` under `## <date> — <task>`, each naming `source`; nothing when there
/// are none. Returns the file's text before the append.
#[cfg(test)]
fn append(
    path: &Path,
    date: &str,
    task: &str,
    learnings: &[String],
    source: &str,
) -> Result<Option<String>> {
    record(
        path,
        &Record {
            date,
            task,
            learnings,
            source,
            ..Record::default()
        },
    )
}

/// The last `budget` bytes of LEARNINGS.md (the prompt cuts again with a note); empty when
/// the file does not exist.
pub(crate) fn read(path: &Path) -> Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// One bullet of LEARNINGS.md and the heading it stands under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The heading line above it (empty before the first heading).
    pub heading: String,
    /// Its 1-based line.
    pub line: usize,
    /// The bullet line as written.
    pub text: String,
}

impl Entry {
    /// True when the entry names a path `exists` says is gone.
    pub(crate) fn is_stale(&self, exists: &dyn Fn(&str) -> bool) -> bool {
        self.paths().iter().any(|p| !exists(p))
    }

    /// The paths the entry names ([`paths::named`]): kern's paths part, code spans holding a
    /// `/`, and plain words that can only be a relative file path; without a `:line` suffix.
    pub(crate) fn paths(&self) -> Vec<String> {
        paths::named(&self.text)
    }
}

/// The entries (bullet lines) of LEARNINGS.md `text`, in order.
pub(crate) fn entries(text: &str) -> Vec<Entry> {
    let mut heading = String::new();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            heading = line.to_string();
        } else if line.starts_with("- ") || line.starts_with("* ") {
            out.push(Entry {
                heading: heading.clone(),
                line: i + 1,
                text: line.to_string(),
            });
        }
    }
    out
}

/// The entries of `text` that name a path `exists` says is gone.
pub(crate) fn stale(text: &str, exists: &dyn Fn(&str) -> bool) -> Vec<Entry> {
    entries(text)
        .into_iter()
        .filter(|e| e.is_stale(exists))
        .collect()
}

/// What of LEARNINGS.md `text` a prompt gets for the task `task` (its text), within `budget`
/// bytes (see the module docs).
pub(crate) fn select(
    text: &str,
    task: &str,
    exists: &dyn Fn(&str) -> bool,
    budget: usize,
) -> String {
    let all = entries(text);
    let stale_lines: Vec<usize> = all
        .iter()
        .filter(|e| e.is_stale(exists))
        .map(|e| e.line)
        .collect();
    let kept: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| !stale_lines.contains(&(i + 1)))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let dropped = stale_lines.len();
    let stale_note = if dropped == 0 {
        String::new()
    } else {
        format!(
            "[kern: {} left out: {} names a path that no longer exists]\n",
            crate::text::count(dropped, "entry", "entries"),
            if dropped == 1 { "it" } else { "each" }
        )
    };
    if kept.len() + stale_note.len() <= budget {
        return format!("{stale_note}{kept}");
    }
    let words = |t: &str| -> std::collections::BTreeSet<String> {
        t.split(|c: char| !c.is_alphanumeric() && c != '/' && c != '_' && c != '.')
            .filter(|w| w.len() > 3)
            .map(str::to_lowercase)
            .collect()
    };
    let task_words = words(task);
    let total = all.len() - dropped;
    let mut candidates: Vec<(usize, Entry)> = all
        .into_iter()
        .filter(|e| !stale_lines.contains(&e.line))
        .map(|e| (words(&e.text).intersection(&task_words).count(), e))
        .collect();
    // kern's hard constraints first, then the most related; the newer first among equals.
    let is_constraint = |e: &Entry| e.heading.trim_end() == constraint::HEADING;
    let is_hard = |e: &Entry| is_constraint(e) && e.text.starts_with("- [hard");
    candidates.sort_by(|(a, x), (b, y)| {
        is_hard(y)
            .cmp(&is_hard(x))
            .then(b.cmp(a))
            .then(y.line.cmp(&x.line))
    });
    let room = budget.saturating_sub(stale_note.len() + 160 + constraint::LEGEND.len());
    let mut chosen: Vec<Entry> = Vec::new();
    let mut used = 0;
    for (_, e) in candidates {
        let cost = e.text.len()
            + 1
            + if chosen.iter().any(|c| c.heading == e.heading) {
                0
            } else {
                e.heading.len() + 2
            };
        if used + cost > room {
            continue;
        }
        used += cost;
        chosen.push(e);
    }
    chosen.sort_by_key(|e| e.line);
    let mut out = stale_note;
    out.push_str(&format!(
        "[kern: {} of {} left out to stay within {} KiB: the ones most related to this task are kept, the newer first]\n",
        total - chosen.len(),
        crate::text::count(total, "entry", "entries"),
        budget / 1024
    ));
    let mut heading: Option<&str> = None;
    for e in &chosen {
        if heading != Some(e.heading.as_str()) && !e.heading.is_empty() {
            out.push_str(&format!("{}\n", e.heading));
            // What hard and soft mean goes with kern's constraints.
            if is_constraint(e) {
                out.push_str(&format!("{}\n", constraint::LEGEND));
            }
        }
        heading = Some(e.heading.as_str());
        out.push_str(&format!("{}\n", e.text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_are_left_out_and_the_related_ones_kept_within_the_budget() {
        let text = "# Learnings\n\n## 2026-11-01 — Parser\n\n- `src/old.rs` holds the lexer\n- the parser uses serde\n\n## 2026-11-02 — Cache\n\n- the cache lives in `src/cache.rs`\n";
        let exists = |p: &str| p == "src/cache.rs";
        assert_eq!(
            stale(text, &exists)
                .iter()
                .map(|e| e.line)
                .collect::<Vec<_>>(),
            vec![5]
        );
        let small = select(text, "Fix the parser", &exists, 8192);
        assert!(
            small.starts_with("[kern: 1 entry left out: it names a path that no longer exists]\n"),
            "{small}"
        );
        assert!(!small.contains("src/old.rs"), "{small}");
        assert!(small.contains("- the cache lives"), "{small}");
        // Over the budget: the entry that shares words with the task is kept.
        let many: String = (0..400)
            .map(|i| format!("- unrelated learning number {i} about something else\n"))
            .collect();
        let text = format!(
            "# Learnings\n\n## 2026-11-01 — Old\n\n- the parser keeps spans in `src/cache.rs`\n{many}"
        );
        let out = select(&text, "Fix the parser spans", &exists, 2048);
        assert!(out.len() <= 2048, "{}", out.len());
        assert!(out.contains("- the parser keeps spans"), "{out}");
        assert!(
            out.contains("- unrelated learning number 399"),
            "the newer first: {out}"
        );
        assert!(!out.contains("number 0 "), "{out}");
        assert!(out.contains("left out to stay within 2 KiB"), "{out}");
        // kern's hard constraints go in first, with what hard and soft mean.
        // (the oldest entry of all, sharing no word with the task)
        let text = format!(
            "# Learnings\n\n{}\n\n{}\n\n- [hard] AVOID x — reason: y — honoured: 0 of 3\n\n## 2026-11-01 — Old\n\n{many}",
            constraint::HEADING,
            constraint::LEGEND
        );
        let out = select(&text, "Fix the parser spans", &exists, 2048);
        assert!(out.len() <= 2048, "{}", out.len());
        assert!(
            out.contains(&format!(
                "{}\n{}\n- [hard] AVOID x",
                constraint::HEADING,
                constraint::LEGEND
            )),
            "{out}"
        );
    }

    #[test]
    fn appends_a_dated_section_and_keeps_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LEARNINGS.md");
        std::fs::write(&path, "# Learnings\n\nhand written\n").unwrap();
        let before = append(
            &path,
            "2026-11-22",
            "Add  a\nparser",
            &["uses serde".into(), " ".into()],
            "task \"Add a parser\", the commit after 1a2b3c4",
        )
        .unwrap();
        assert_eq!(before.as_deref(), Some("# Learnings\n\nhand written\n"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Learnings\n\nhand written\n\n## 2026-11-22 — Add a parser\n\n- uses serde — source: task \"Add a parser\", the commit after 1a2b3c4\n"
        );
    }

    #[test]
    fn creates_the_file_and_keeps_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LEARNINGS.md");
        append(&path, "2026-11-22", "T", &["a".into()], "s").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Learnings\n\n## 2026-11-22 — T\n\n- a — source: s\n"
        );
        std::fs::write(&path, "# L\r\n").unwrap();
        append(&path, "2026-11-22", "T", &["b".into()], "s").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# L\r\n\r\n## 2026-11-22 — T\r\n\r\n- b — source: s\r\n"
        );
        assert_eq!(append(&path, "d", "T", &[], "s").unwrap(), None);
        assert_eq!(
            source("Add  a", Some("1a2b3c4d5e")),
            "task \"Add a\", the commit after 1a2b3c4"
        );
    }
}
