//! What needs the person and the headline: the parts of a [`RunReport`] written from its
//! facts once they are folded.
//!
//! The decision a reader must know: the headline says how the run ended before anything else —
//! a run that stopped early says at which iteration and why; a run with no `run_end` line
//! either still holds its lock (running) or vanished (killed, machine down), as the caller
//! said. What needs the person is sorted by [`AttentionKind`], most urgent first.

use super::{Attention, AttentionKind, EndState, RunReport};
use crate::spec::Quoted;

/// Longest headline reason, in characters (the whole text is under "needs you").
const HEADLINE_REASON: usize = 160;

/// What needs the person, most urgent first.
pub(super) fn needs_you(r: &RunReport) -> Vec<Attention> {
    let mut out = Vec::new();
    let mut add = |kind, task: Option<&str>, text: String, git_ref: Option<&str>| {
        out.push(Attention {
            kind,
            task: task.map(str::to_string),
            text,
            git_ref: git_ref.map(str::to_string),
        });
    };
    match (r.end, r.exit_code) {
        (EndState::Stopped, Some(code)) => add(
            AttentionKind::Stopped,
            None,
            format!(
                "kern stopped (exit {code}): {}",
                r.ended.as_deref().unwrap_or("")
            ),
            None,
        ),
        (EndState::Vanished, _) => add(
            AttentionKind::Vanished,
            None,
            "the run ended without a word (killed, or the machine went down): run kern again and it resumes the task in progress".into(),
            None,
        ),
        _ => {}
    }
    for t in &r.tasks {
        if let Some(branch) = t
            .commit
            .as_ref()
            .filter(|c| c.waits_for_review())
            .and_then(|c| c.review_branch.as_deref())
        {
            add(
                AttentionKind::Review,
                Some(&t.title),
                format!(
                    "{} waits for your review on `{branch}`: `git log -p HEAD..{branch}`, then `kern accept` or `kern reject`",
                    Quoted(&t.title)
                ),
                Some(branch),
            );
        }
    }
    for t in &r.tasks {
        if let Some(why) = &t.blocked {
            add(
                AttentionKind::Blocked,
                Some(&t.title),
                format!(
                    "{} is blocked [!]: {why} — read its Blocked note, fix, and set it back to [ ]",
                    Quoted(&t.title)
                ),
                None,
            );
        }
    }
    for t in &r.tasks {
        if t.end == super::TaskEnd::Failed
            && let Some(last) = t.attempts.last()
        {
            add(
                AttentionKind::Failed,
                Some(&t.title),
                format!(
                    "{} failed its attempt {}: {} — the next run takes it up again; its Attempt notes in SPEC.md say what each attempt hit",
                    Quoted(&t.title),
                    last.attempt,
                    last.reason
                ),
                None,
            );
        }
    }
    for t in &r.tasks {
        for v in &t.violations {
            let what = v.what.join("; ");
            // kern's violation sentences usually name what was put back and saved already.
            let saved: Vec<&String> = v
                .saved
                .iter()
                .filter(|s| !what.contains(s.as_str()))
                .collect();
            let saved = if saved.is_empty() {
                String::new()
            } else {
                format!(
                    "; what it changed is kept at `{}`",
                    saved
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("`, `")
                )
            };
            add(
                AttentionKind::Violation,
                Some(&t.title),
                format!(
                    "the {} stage of {} did what it may not: {what}{saved}",
                    v.stage.name(),
                    Quoted(&t.title),
                ),
                v.saved.first().map(String::as_str),
            );
        }
    }
    for t in &r.tasks {
        if !t.denied.is_empty() {
            add(
                AttentionKind::Denied,
                Some(&t.title),
                format!(
                    "kern's fence denied what {}'s processes tried: {} — read the work with that in mind",
                    Quoted(&t.title),
                    t.denied.join("; ")
                ),
                None,
            );
        }
    }
    if let Some(mode @ (crate::sandbox::Mode::Off | crate::sandbox::Mode::Agent)) = r.sandbox {
        add(
            AttentionKind::Unfenced,
            None,
            match mode {
                crate::sandbox::Mode::Off => "the agents ran unfenced (--sandbox off): with your whole account, files, network and credentials".to_string(),
                _ => "the agents ran without kern's fence (--sandbox agent): only Claude Code's own sandbox, for the implement stage's shell".to_string(),
            },
            None,
        );
    }
    for t in &r.tasks {
        for s in &t.set_aside {
            add(
                AttentionKind::SetAside,
                Some(&t.title),
                format!(
                    "the work of {} ({}) is set aside at `{}`: {} — see it with `git show --stat {}`",
                    Quoted(&t.title),
                    s.why,
                    s.git_ref,
                    s.paths.join(", "),
                    s.git_ref
                ),
                Some(&s.git_ref),
            );
        }
    }
    for t in &r.tasks {
        if let Some(c) = &t.commit
            && !c.left_out.is_empty()
        {
            let files: Vec<String> = c
                .left_out
                .iter()
                .map(|l| format!("{} ({})", l.path, l.reason))
                .collect();
            add(
                AttentionKind::LeftOut,
                Some(&t.title),
                format!(
                    "left out of the commit of {}, still in the work tree: {}",
                    Quoted(&t.title),
                    files.join(", ")
                ),
                None,
            );
        }
    }
    for t in &r.tasks {
        if !t.hand_edits.is_empty() {
            add(
                AttentionKind::HandEdit,
                Some(&t.title),
                format!(
                    "SPEC.md changed during {}, not by kern: {}",
                    Quoted(&t.title),
                    t.hand_edits.join("; ")
                ),
                None,
            );
        }
        if let Some(why) = &t.no_commit {
            add(
                AttentionKind::NoCommit,
                Some(&t.title),
                format!(
                    "{} was marked done without a commit: {why}",
                    Quoted(&t.title)
                ),
                None,
            );
        }
    }
    // A run that finished with a code that is not "done" (every open task waits on a blocked
    // one; a task blocked before the run) says why, when nothing of its own tasks does.
    if out.is_empty()
        && r.end == EndState::Finished
        && r.exit_code.is_some_and(|c| c != 0)
        && let Some(ended) = r.ended.as_deref().filter(|e| !e.is_empty())
    {
        out.push(Attention {
            kind: AttentionKind::Blocked,
            task: None,
            text: ended.to_string(),
            git_ref: None,
        });
    }
    out.sort_by_key(|a| a.kind);
    out
}

/// The first line: how the run ended, honestly.
pub(super) fn headline(r: &RunReport) -> String {
    let t = &r.totals;
    let mut counts = vec![format!("{} committed", t.committed)];
    for (n, word) in [
        (t.to_review, "waiting for review"),
        (t.decomposed, "decomposed"),
        (t.skipped, "skipped"),
        (t.blocked, "blocked"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {word}"));
        }
    }
    let counts = counts.join(", ");
    let at = format!(
        "at iteration {} of {}",
        r.iterations_run, r.iterations_asked
    );
    let why = crate::text::truncate(
        &crate::text::first_line(r.ended.as_deref().unwrap_or("")),
        HEADLINE_REASON,
    );
    match (r.end, r.exit_code) {
        (EndState::Finished, Some(0)) => format!("Finished — {why}: {counts}."),
        (EndState::Finished, _) => {
            let n = r.needs_you.len();
            format!(
                "Finished, but {n} thing{} need{} you — {why}: {counts}.",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" }
            )
        }
        (EndState::Interrupted, _) => format!("Interrupted {at} — {why}: {counts}."),
        (EndState::Stopped, Some(5)) => {
            format!("Stopped early {at}: the agent needs you — {why} ({counts}).")
        }
        (EndState::Stopped, Some(6)) => format!("Stopped {at}: {why} ({counts})."),
        (EndState::Stopped, code) => format!(
            "Stopped early {at} (exit {}): {why} ({counts}).",
            code.unwrap_or(1)
        ),
        (EndState::Running, _) => format!("Still running, {at} ({counts} so far)."),
        (EndState::Restarted, _) => format!("Restarted by kern watch {at} — {why} ({counts})."),
        (EndState::AtDeadline, _) => {
            let whole = r.ended.as_deref().unwrap_or("");
            let (deadline, why) = whole
                .split_once(" ends the night: ")
                .unwrap_or(("its deadline", whole));
            let why = crate::text::truncate(&crate::text::first_line(why), HEADLINE_REASON);
            match r.needs_you.len() {
                0 => format!("Ended at {deadline} — {why} ({counts})."),
                n => format!(
                    "Ended at {deadline}, but {n} thing{} need{} you — {why} ({counts}).",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "s" } else { "" }
                ),
            }
        }
        (EndState::Vanished, _) => format!(
            "Did not finish: the run vanished {at} without an end (killed, or the machine went down) ({counts})."
        ),
    }
}
