//! Constraints with a lifecycle (DESIGN.md section 17): what kern learns when an attempt
//! succeeds after a failure, kept in LEARNINGS.md under its own heading ([`HEADING`]).
//!
//! Decisions a reader must know:
//! - An entry is one bullet: `- [hard] AVOID … — MUST … — reason: … — source: … — paths: … —
//!   honoured: N of 3`. kern derives it from the task's last failure — the approach that failed
//!   (AVOID, when its note recorded one) and the error (the reason, on one line) — and the
//!   approach that then worked (MUST). A later failure hits it when its error has the same
//!   error signature as the reason, not merely the same check command.
//! - The lifecycle is [`next`], pure: a constraint starts hard; each later task committed
//!   without hitting its error counts as honouring it, and after three it is soft (the prompt
//!   says it may be reconsidered, with a reason); a later task that hit its error (violated it
//!   and failed) makes it hard again. A later task's failures are known when it is committed,
//!   so states change only in kern's commits, in the same write as the task's learnings.
//! - The section is the person's to edit too: kern rewrites only the `[state]` and the
//!   `honoured:` count of an entry it can read, keeps every other byte, never adds back an entry
//!   the person deleted, and never changes a pinned one (`[hard, pinned]`, `[soft, pinned]`).

/// The heading of kern's section.
pub(crate) const HEADING: &str = "## Constraints (kept by kern)";
/// What the section says under its heading.
pub(crate) const LEGEND: &str = "kern derives these from tasks that succeeded after a failure. [hard]: follow it. [soft]: three later tasks were committed without breaking it — it may be reconsidered, with a reason in your summary. Edit, delete or pin (`[hard, pinned]`) any entry: kern keeps your changes and never changes a pinned one.";
/// Later tasks honouring a hard constraint before it is soft.
pub(crate) const HONOURS_TO_SOFT: u32 = 3;

/// A constraint's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// To be followed.
    Hard,
    /// May be reconsidered, with a reason.
    Soft,
}

/// The part of an entry the lifecycle reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Constraint {
    /// Hard or soft.
    pub state: State,
    /// The person pinned it: it never changes state.
    pub pinned: bool,
    /// Later tasks committed without hitting its error since it was last made hard.
    pub honoured: u32,
    /// The first line of the error it avoids (its `reason:`).
    pub reason: String,
}

/// What happened that may move a constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A later task was committed; `violated`: one of its failed attempts hit the error the
    /// constraint avoids.
    Committed {
        /// Whether it hit the constraint's error on the way.
        violated: bool,
    },
}

/// The lifecycle: the constraint after `event` (see the module docs).
pub(crate) fn next(c: &Constraint, event: Event) -> Constraint {
    if c.pinned {
        return c.clone();
    }
    match event {
        Event::Committed { violated: true } => Constraint {
            state: State::Hard,
            honoured: 0,
            ..c.clone()
        },
        Event::Committed { violated: false } => {
            let honoured = c.honoured.saturating_add(1).min(HONOURS_TO_SOFT);
            Constraint {
                state: if honoured >= HONOURS_TO_SOFT {
                    State::Soft
                } else {
                    c.state
                },
                honoured,
                ..c.clone()
            }
        }
    }
}

/// What a constraint's `reason:` holds of an error (`error`: a failure's note without kern's
/// approach line): the error on one line, at most 160 characters.
pub(crate) fn reason_of(error: &str) -> String {
    one_line(error, 160)
}

/// True when a failure whose error is `error` hit the one `reason` names: the same error
/// signature (`spec::error_signature`) as the reason.
pub(crate) fn hits(reason: &str, error: &str) -> bool {
    let sig = crate::spec::error_signature(&reason_of(error));
    !sig.is_empty() && sig == crate::spec::error_signature(reason)
}

/// Reads the constraint of entry line `line`; `None` when it is not one kern can read.
pub(crate) fn parse(line: &str) -> Option<Constraint> {
    let rest = line.strip_prefix("- [")?;
    let (tag, rest) = rest.split_once(']')?;
    let mut words = tag.split(',').map(str::trim);
    let state = match words.next()? {
        "hard" => State::Hard,
        "soft" => State::Soft,
        _ => return None,
    };
    let pinned = words.any(|w| w == "pinned");
    let field = |name: &str| {
        rest.split(" — ")
            .find_map(|part| part.trim().strip_prefix(name).map(str::trim))
    };
    let honoured = field("honoured:")
        .and_then(|h| h.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some(Constraint {
        state,
        pinned,
        honoured,
        reason: field("reason:").unwrap_or_default().to_string(),
    })
}

/// Entry line `line` with `c`'s state and honoured count, every other byte kept.
pub(crate) fn rewrite(line: &str, c: &Constraint) -> String {
    let Some((_, rest)) = line.strip_prefix("- [").and_then(|r| r.split_once(']')) else {
        return line.to_string();
    };
    let state = match c.state {
        State::Hard => "hard",
        State::Soft => "soft",
    };
    let tag = if c.pinned {
        format!("{state}, pinned")
    } else {
        state.to_string()
    };
    let parts: Vec<String> = rest
        .split(" — ")
        .map(|part| {
            if part.trim().starts_with("honoured:") {
                format!("honoured: {} of {HONOURS_TO_SOFT}", c.honoured)
            } else {
                part.to_string()
            }
        })
        .collect();
    format!("- [{tag}]{}", parts.join(" — "))
}

/// A new hard constraint's line: what to avoid (`failed`: the approach that failed, when its
/// note recorded one), what worked (`worked`: implement's summary), the reason (`error`: the
/// failure's note without the approach), its source and paths.
pub(crate) fn derive(
    failed: Option<&str>,
    worked: &str,
    error: &str,
    source: &str,
    paths: &[String],
) -> String {
    let mut line = String::from("- [hard] ");
    if let Some(failed) = failed.map(|f| one_line(f, 200)).filter(|f| !f.is_empty()) {
        line.push_str(&format!("AVOID {failed} — "));
    }
    line.push_str(&format!(
        "MUST {} — reason: {} — source: {source}",
        one_line(worked, 200),
        reason_of(error)
    ));
    line.push_str(&super::paths::part(paths));
    line.push_str(&format!(" — honoured: 0 of {HONOURS_TO_SOFT}"));
    line
}

/// `text` on one line, at most `max` characters, without the ` — ` that separates fields.
fn one_line(text: &str, max: usize) -> String {
    let text = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" — ", " - ");
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    } else {
        text
    }
}

/// The constraints kern can read in its section of `lines`.
fn section_entries(lines: &[String]) -> impl Iterator<Item = Constraint> + '_ {
    let mut in_section = false;
    lines.iter().filter_map(move |line| {
        if line.starts_with('#') {
            in_section = line.trim_end() == HEADING;
            return None;
        }
        if in_section { parse(line) } else { None }
    })
}

/// LEARNINGS.md `text` after a task's commit: each constraint kern can read moved by the
/// task's `failures` (the errors of its failed attempts), and `new` (a derived line) added to kern's section,
/// which is made when missing — unless the section has a constraint for the same error. `eol` is the file's line ending.
pub(crate) fn update(text: &str, failures: &[String], new: Option<&str>, eol: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut changed = false;
    let mut in_section = false;
    let mut section_end = None;
    for (i, line) in lines.iter_mut().enumerate() {
        if line.starts_with('#') {
            if in_section {
                section_end.get_or_insert(i);
            }
            in_section = line.trim_end() == HEADING;
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(c) = parse(line) {
            let violated = failures.iter().any(|f| hits(&c.reason, f));
            let moved = next(&c, Event::Committed { violated });
            if moved != c {
                *line = rewrite(line, &moved);
                changed = true;
            }
        }
    }
    if in_section && section_end.is_none() {
        section_end = Some(lines.len());
    }
    let has_section = lines.iter().any(|l| l.trim_end() == HEADING);
    // A constraint for an error kern's section already has is not added twice: that one was
    // just made hard again.
    let known = |new: &str| {
        parse(new).is_some_and(|n| {
            section_entries(&lines).any(|c| {
                crate::spec::error_signature(&c.reason) == crate::spec::error_signature(&n.reason)
            })
        })
    };
    if let Some(new) = new.filter(|n| !known(n)) {
        if has_section {
            // After the section's last non-empty line.
            let end = section_end.unwrap_or(lines.len());
            let at = (0..end)
                .rev()
                .find(|&i| !lines[i].trim().is_empty())
                .map_or(end, |i| i + 1);
            lines.insert(at, new.to_string());
        } else {
            if lines.is_empty() {
                lines.push("# Learnings".to_string());
            }
            if lines.last().is_some_and(|l| !l.trim().is_empty()) {
                lines.push(String::new());
            }
            lines.extend([
                HEADING.to_string(),
                String::new(),
                LEGEND.to_string(),
                String::new(),
                new.to_string(),
            ]);
        }
        changed = true;
    }
    if !changed {
        return text.to_string();
    }
    let mut out = lines.join(eol);
    if !out.is_empty() {
        out.push_str(eol);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(state: State, pinned: bool, honoured: u32) -> Constraint {
        Constraint {
            state,
            pinned,
            honoured,
            reason: "check failed".into(),
        }
    }

    #[test]
    fn the_lifecycle_hard_soft_hard_and_pinned_never_moves() {
        use State::{Hard, Soft};
        let ok = Event::Committed { violated: false };
        let broke = Event::Committed { violated: true };
        // (before, event, after)
        let table = [
            (c(Hard, false, 0), ok, c(Hard, false, 1)),
            (c(Hard, false, 1), ok, c(Hard, false, 2)),
            (c(Hard, false, 2), ok, c(Soft, false, 3)),
            (c(Soft, false, 3), ok, c(Soft, false, 3)),
            (c(Soft, false, 3), broke, c(Hard, false, 0)),
            (c(Hard, false, 2), broke, c(Hard, false, 0)),
            (c(Hard, true, 2), ok, c(Hard, true, 2)),
            (c(Soft, true, 0), broke, c(Soft, true, 0)),
        ];
        for (before, event, after) in table {
            assert_eq!(next(&before, event), after, "{before:?} {event:?}");
        }
    }

    #[test]
    fn entries_are_read_and_rewritten_keeping_the_persons_words() {
        let line = derive(
            Some("Wrote it — the quick way."),
            "Removed the   broken file.",
            "check `test ! -e broken` failed (exit 1); last output:\nbroken is there",
            "task \"Add a\", the commit after 1a2b3c4",
            &["src/a.rs".into()],
        );
        assert_eq!(
            line,
            "- [hard] AVOID Wrote it - the quick way. — MUST Removed the broken file. — reason: check `test ! -e broken` failed (exit 1); last output: broken is there — source: task \"Add a\", the commit after 1a2b3c4 — paths: `src/a.rs` — honoured: 0 of 3"
        );
        assert_eq!(
            derive(None, "w", "e", "s", &[]),
            "- [hard] MUST w — reason: e — source: s — honoured: 0 of 3"
        );
        let read = parse(&line).unwrap();
        assert_eq!(read.state, State::Hard);
        assert_eq!(read.honoured, 0);
        // The same error — not merely the same check command — is a hit.
        assert!(hits(
            &read.reason,
            "check `test ! -e broken` failed (exit 2); last output:\nbroken is there"
        ));
        assert!(!hits(
            &read.reason,
            "check `test ! -e broken` failed (exit 1); last output:\nsomething else"
        ));
        assert!(!hits(
            &read.reason,
            "check `cargo test` failed (exit 1); last output:"
        ));
        let edited = line.replace("MUST Removed", "MUST (the person's words) removed");
        let soft = rewrite(&edited, &c(State::Soft, false, 3));
        assert!(soft.starts_with("- [soft] AVOID"), "{soft}");
        assert!(soft.contains("MUST (the person's words) removed"), "{soft}");
        assert!(soft.ends_with("— honoured: 3 of 3"), "{soft}");
        assert_eq!(
            parse("- [hard, pinned] MUST x — reason: y").unwrap(),
            Constraint {
                state: State::Hard,
                pinned: true,
                honoured: 0,
                reason: "y".into()
            }
        );
        assert_eq!(parse("- an ordinary learning"), None);
        assert_eq!(parse("- [maybe] x"), None);
    }

    #[test]
    fn update_makes_the_section_moves_entries_and_keeps_everything_else() {
        let new = "- [hard] MUST a — reason: check `x` failed (exit 1); last output: (no output) — honoured: 0 of 3";
        let made = update("# Learnings\n\nmine\n", &[], Some(new), "\n");
        assert_eq!(
            made,
            format!("# Learnings\n\nmine\n\n{HEADING}\n\n{LEGEND}\n\n{new}\n")
        );
        // Three later commits without the error: soft.
        let mut text = made.clone();
        for _ in 0..3 {
            text = update(&text, &[], None, "\n");
        }
        assert!(text.contains("- [soft] MUST a — reason"), "{text}");
        assert!(text.contains("honoured: 3 of 3"), "{text}");
        // A later task that hit the error: hard again.
        let hit = ["check `x` failed (exit 1); last output:\n(no output)".to_string()];
        let text = update(&text, &hit, None, "\n");
        assert!(text.contains("- [hard] MUST a"), "{text}");
        assert!(text.contains("honoured: 0 of 3"), "{text}");
        // A second entry goes at the end of kern's section, before the person's next heading.
        let with_after = format!("{text}\n## Mine\n\n- keep\n");
        let two = update(
            &with_after,
            &[],
            Some("- [hard] MUST b — reason: r"),
            "\r\n",
        );
        assert!(
            two.contains(
                "honoured: 1 of 3\r\n- [hard] MUST b — reason: r\r\n\r\n## Mine\r\n\r\n- keep\r\n"
            ),
            "{two:?}"
        );
        // The same error again adds nothing: the one there is hard again.
        let again = update(&text, &hit, Some(new), "\n");
        assert_eq!(again.matches("MUST a").count(), 1, "{again}");
        // Outside kern's section nothing is read as a constraint.
        let outside = "## Mine\n\n- [hard] MUST z — reason: r — honoured: 2 of 3\n";
        assert_eq!(update(outside, &[], None, "\n"), outside);
    }
}
