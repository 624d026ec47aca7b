//! `kern accept` and `kern reject`: the tasks `--review` parked on their branches (DESIGN.md
//! section 15).
//!
//! Decisions a reader must know:
//! - A parked task is one marked done with a Review note whose branch `kern/<task>` still
//!   exists. Accepting it lands its work on the current branch exactly as a parallel task is
//!   integrated: applied onto the tip in memory, only a clean result written (just the paths
//!   it changes, never a path the person changed by hand), then committed as git would (hooks,
//!   signing) with the message the task's commit has on its branch, SPEC.md and LEARNINGS.md
//!   as they are. The branch is deleted once the commit stands.
//! - A conflict, or a hook that refuses the commit, leaves the branch as it is and puts back
//!   what was written (saved under `refs/kern/saved/` first); `kern accept` then exits 1.
//! - Rejecting reopens the task (`[ ]`) with the reason as an Attempt note, for the next run to
//!   read; the branch's work is kept under `refs/kern/attempts/<task>/<n>` and the branch
//!   deleted. The Review note stays as the record.
//! - Both take the run lock: they never run beside a kern run of the same work tree.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::repository::{Applied, CommitRequest, TASK_BRANCH_PREFIX};
use crate::settings::Settings;
use crate::spec::{Document, Edit, Quoted, SpecFile, TaskState};
use crate::state::lock::RunLock;
use crate::workspace::Workspace;

/// A task parked for review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parked {
    /// Its title.
    pub title: String,
    /// Its index in the document.
    pub index: usize,
    /// Its branch, `kern/<task>`.
    pub branch: String,
}

/// The tasks of `doc` parked for review whose branch `exists`.
pub(crate) fn parked(doc: &Document, exists: &dyn Fn(&str) -> bool) -> Vec<Parked> {
    doc.tasks()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.state == TaskState::Done)
        .filter_map(|(index, t)| {
            let branch = t.review_branch()?.to_string();
            exists(&branch).then(|| Parked {
                title: t.title.clone(),
                index,
                branch,
            })
        })
        .collect()
}

/// The parked tasks `query` names: by branch (`kern/<task>` or `<task>`), by whole title, else
/// by the start of the title (case-insensitive). Several may match the start of a title.
pub(crate) fn matching<'p>(parked: &'p [Parked], query: &str) -> Vec<&'p Parked> {
    let q = query.trim();
    let exact: Vec<&Parked> = parked
        .iter()
        .filter(|p| {
            p.branch == q
                || p.branch.strip_prefix(TASK_BRANCH_PREFIX) == Some(q)
                || p.title.eq_ignore_ascii_case(q)
        })
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    let lower = q.to_lowercase();
    parked
        .iter()
        .filter(|p| p.title.to_lowercase().starts_with(&lower))
        .collect()
}

/// `kern accept [TASK…]`.
pub(crate) fn accept(settings: &Settings, queries: &[String]) -> Result<()> {
    let ws = Workspace::open(settings)?;
    let _lock = lock(&ws, settings)?;
    let (_, doc) = SpecFile::load_as(&ws.spec_path, &ws.spec_display)?;
    let all = parked(&doc, &|b| branch_tip(&ws, b).is_some());
    let chosen = choose(&all, queries)?;
    if chosen.is_empty() {
        eprintln!(
            "kern: no task waits for review (a task done with a Review note whose branch exists)"
        );
        return Ok(());
    }
    let mut refused = Vec::new();
    for task in chosen {
        match accept_one(&ws, settings, task) {
            Ok(line) => eprintln!("kern: {line}"),
            Err(
                e @ (Error::Repository(_)
                | Error::HookFailed { .. }
                | Error::CommitMessageRefused { .. }),
            ) => {
                eprintln!("kern: did not accept {}: {e}", Quoted(&task.title));
                refused.push(task.title.clone());
            }
            Err(e) => return Err(e),
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Error::Unfinished(format!(
            "{} task{} not accepted ({}): {} branch{} left as {}",
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
            refused.join(", "),
            if refused.len() == 1 { "its" } else { "their" },
            if refused.len() == 1 { "" } else { "es" },
            if refused.len() == 1 {
                "it was"
            } else {
                "they were"
            },
        )))
    }
}

/// `kern reject TASK --reason …`.
pub(crate) fn reject(settings: &Settings, query: &str, reason: &str) -> Result<()> {
    let ws = Workspace::open(settings)?;
    let _lock = lock(&ws, settings)?;
    let (mut file, doc) = SpecFile::load_as(&ws.spec_path, &ws.spec_display)?;
    let all = parked(&doc, &|b| branch_tip(&ws, b).is_some());
    let chosen = choose(&all, std::slice::from_ref(&query.to_string()))?;
    let [task] = chosen.as_slice() else {
        return Err(Error::Usage(format!(
            "`{query}` names {} tasks waiting for review ({}) — name one, by its title or its branch",
            chosen.len(),
            chosen
                .iter()
                .map(|p| p.branch.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let slug = task.branch.trim_start_matches(TASK_BRANCH_PREFIX);
    let tip = branch_tip(&ws, &task.branch)
        .ok_or_else(|| Error::Repository(format!("the branch `{}` is gone", task.branch)))?;
    let keep = next_ref(&ws, &format!("refs/kern/attempts/{slug}/"))?;
    ws.repo
        .set_ref(&keep, tip, "kern: work rejected in review, kept")?;
    file.apply(
        &doc.identity(task.index),
        &[
            Edit::SetState(TaskState::Pending),
            Edit::AddAttempt(format!(
                "rejected in review: {} — the rejected work is kept at `{keep}`",
                reason.trim()
            )),
        ],
    )?;
    ws.repo.delete_task_branch(slug)?;
    eprintln!(
        "kern: reopened {} [ ]: the next run takes it again; its rejected work is kept at `{keep}`",
        Quoted(&task.title)
    );
    Ok(())
}

/// The parked tasks the queries name (all of them for none); a query naming none is an error.
fn choose<'p>(all: &'p [Parked], queries: &[String]) -> Result<Vec<&'p Parked>> {
    if queries.is_empty() {
        return Ok(all.iter().collect());
    }
    let mut out: Vec<&Parked> = Vec::new();
    for q in queries {
        let found = matching(all, q);
        if found.is_empty() {
            let waiting: Vec<&str> = all.iter().map(|p| p.title.as_str()).collect();
            return Err(Error::Usage(format!(
                "no task waiting for review matches `{q}` — waiting: {}",
                if waiting.is_empty() {
                    "none".to_string()
                } else {
                    waiting.join(", ")
                }
            )));
        }
        for p in found {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// Lands one parked task; the line to print.
fn accept_one(ws: &Workspace, settings: &Settings, task: &Parked) -> Result<String> {
    let repo = &ws.repo;
    let slug = task.branch.trim_start_matches(TASK_BRANCH_PREFIX);
    let tip = branch_tip(ws, &task.branch)
        .ok_or_else(|| Error::Repository(format!("the branch `{}` is gone", task.branch)))?;
    let head = repo
        .head_oid()
        .ok_or_else(|| Error::Repository("the current branch has no commit yet".into()))?;
    let git = |what: &'static str| move |e: git2::Error| Error::git(what, e);
    let base = repo
        .git()
        .merge_base(tip, head)
        .map_err(git("finding where the task branch started"))?;
    let tree = match repo.apply_onto(base, tip, head)? {
        Applied::Clean(tree) => tree,
        Applied::Conflict(paths) => {
            return Err(Error::Repository(format!(
                "its work conflicts with this branch in {} — merge `{}` by hand (`git merge {}`)",
                quoted(&paths),
                task.branch,
                task.branch
            )));
        }
    };
    let head_tree = repo
        .git()
        .find_commit(head)
        .map(|c| c.tree_id())
        .map_err(git("reading HEAD"))?;
    let paths = repo.paths_between(head_tree, tree)?;
    let own = ws.own_files();
    let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
    let dirty = repo.dirty_paths(&own)?;
    let touched: Vec<String> = paths
        .iter()
        .filter(|p| {
            dirty.iter().any(|d| {
                let d = d.trim_end_matches('/');
                p.as_str() == d || p.starts_with(&format!("{d}/"))
            })
        })
        .cloned()
        .collect();
    if !touched.is_empty() {
        return Err(Error::Repository(format!(
            "its work changes {}, which you changed in the work tree — commit or stash them, then accept again",
            quoted(&touched)
        )));
    }
    let message = repo
        .git()
        .find_commit(tip)
        .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
        .map_err(git("reading the task's commit"))?;
    if !repo.checkout_paths(tree, &paths)? {
        return Err(Error::Repository(format!(
            "a file its work changes was changed in the work tree just now ({}) — accept again",
            quoted(&paths)
        )));
    }
    let excluded: Vec<PathBuf> = dirty.iter().map(PathBuf::from).collect();
    let committed = repo.commit(&CommitRequest {
        message: &message,
        exclude: &excluded,
        no_verify: settings.no_verify,
        notify: Some(&|text: &str| eprintln!("kern: {text}")),
    });
    match committed {
        Ok(outcome) => {
            let Some(sha) = outcome.sha else {
                repo.delete_task_branch(slug)?;
                return Ok(format!(
                    "accepted {}: nothing left to commit (this branch has it already)",
                    Quoted(&task.title)
                ));
            };
            repo.delete_task_branch(slug)?;
            let sha = sha.to_string();
            Ok(format!(
                "accepted {}: {} {}",
                Quoted(&task.title),
                crate::text::short_oid(&sha),
                message.lines().next().unwrap_or("")
            ))
        }
        Err(e) => {
            let back: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
            let keep = next_ref(ws, &format!("refs/kern/saved/{slug}/accept-"))?;
            repo.save_paths(&keep, &back, "kern: an accepted task's work, put back\n")?;
            repo.restore_paths(&back)?;
            Err(e)
        }
    }
}

/// The commit a branch (`kern/<task>`) points to.
fn branch_tip(ws: &Workspace, branch: &str) -> Option<git2::Oid> {
    ws.repo
        .task_branch(branch.strip_prefix(TASK_BRANCH_PREFIX).unwrap_or(branch))
}

/// The run lock: accept and reject never run beside a kern run of this work tree.
fn lock(ws: &Workspace, settings: &Settings) -> Result<RunLock> {
    let (lock, _) = ws.take_lock(settings)?;
    Ok(lock)
}

/// The next free ref `<prefix><n>`.
fn next_ref(ws: &Workspace, prefix: &str) -> Result<String> {
    let taken = ws.repo.refs_under(prefix)?;
    let n = (1..)
        .find(|n| !taken.iter().any(|t| *t == format!("{prefix}{n}")))
        .unwrap_or(1);
    Ok(format!("{prefix}{n}"))
}

fn quoted(paths: &[String]) -> String {
    paths
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parked_tasks_are_named_by_branch_title_or_its_start() {
        let doc = Document::parse(
            "- [x] Add the parser\n  > **Review:** `kern/add-the-parser`\n- [x] Add the lexer\n  > **Review:** `kern/add-the-lexer`\n- [x] Gone\n  > **Review:** `kern/gone`\n- [ ] Open\n",
        );
        let all = parked(&doc, &|b| b != "kern/gone");
        assert_eq!(
            all.iter().map(|p| p.branch.as_str()).collect::<Vec<_>>(),
            vec!["kern/add-the-parser", "kern/add-the-lexer"]
        );
        let titles = |q: &str| {
            matching(&all, q)
                .iter()
                .map(|p| p.title.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(titles("kern/add-the-lexer"), vec!["Add the lexer"]);
        assert_eq!(titles("add-the-parser"), vec!["Add the parser"]);
        assert_eq!(titles("add the PARSER"), vec!["Add the parser"]);
        assert_eq!(titles("add the"), vec!["Add the parser", "Add the lexer"]);
        assert!(titles("Gone").is_empty());
    }
}
