//! The tracker (`kern import github`, `--tracker github`, DESIGN.md section 22): GitHub issues
//! into SPEC.md as tasks, and what became of each task back onto its issue — through the
//! GitHub CLI `gh`, every call bounded.
//!
//! The one decision a reader must know: SPEC.md is the truth. An issue becomes a task once,
//! with the person's `> **Issue:**` note naming it (`issues.rs`: which issues and what task);
//! from then on the task is the person's like any other, and kern only tells the issue what
//! happened to it: the task's commit carries a `Closes owner/repo#N` trailer ([`closes`]), so
//! GitHub closes the issue when the commit reaches its default branch — whatever route it
//! takes there (a push, `kern accept`, a pull request) — and `listener.rs` hears the run's
//! events to comment on the issue (taken, skipped, blocked) and label it with the machine that
//! holds its claim (`--remote`). `gh.rs` is the one caller of `gh`: its command lines, one
//! bounded call, and what a failure means — a warning and an event, never the end of a night.

pub(crate) mod gh;
pub(crate) mod issues;
mod listener;

pub(crate) use listener::Tracker;

use crate::spec::IssueRef;

/// The trailer lines of a commit that finishes the tasks of `issues`: `Closes owner/repo#N`
/// each, which GitHub reads to close the issue when the commit reaches the default branch.
pub(crate) fn closes(issues: &[IssueRef]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for issue in issues {
        let line = format!("Closes {}", issue.short());
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_closes_line_per_issue() {
        let a = IssueRef::parse("acme/app#12").unwrap();
        let b = IssueRef::parse("ghe.example.com/team/tool#3").unwrap();
        assert_eq!(
            closes(&[a.clone(), b, a]),
            ["Closes acme/app#12", "Closes team/tool#3"]
        );
        assert!(closes(&[]).is_empty());
    }
}
