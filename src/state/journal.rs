//! The files beside the stage records that outlive an iteration: `task.json`, what kern
//! recorded when a task started, and `commit.json`, the commit kern is about to make.
//!
//! The one decision a reader must know: the commit is journaled *before* SPEC.md is marked
//! done, so a crash anywhere between the two leads the next run to exactly one commit (it
//! finishes the journaled one when HEAD has not moved, and drops the journal when it has).
//! A journal file that cannot be read is treated as absent: it can only have been cut short
//! by a crash of the machine, and the stage records still hold what resume needs.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::TaskIdentity;

/// A parallel task's folder (`job.json`): the task it works on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobRecord {
    /// The task.
    pub identity: TaskIdentity,
    /// Its title when the job started.
    pub title: String,
    /// Its folder, worktree and branch name (`kern/<slug>`).
    pub slug: String,
}

/// A parallel task's work being written into the run's work tree (`integrating.json`): a run
/// killed between writing the paths and committing finds which paths were kern's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Integrating {
    /// The task.
    pub identity: TaskIdentity,
    /// Its folder's slug.
    pub slug: String,
    /// The branch tip the work was applied onto.
    pub onto: String,
    /// The paths written.
    pub paths: Vec<String>,
}

/// How often each parallel task's work conflicted with the branch (`conflicts.json`), by
/// slug: the second conflict blocks the task.
pub(crate) type Conflicts = std::collections::BTreeMap<String, u32>;

/// What kern recorded when a task started (`task.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskStart {
    /// The task that started (a decomposed task's subtasks inherit its start).
    pub identity: TaskIdentity,
    /// HEAD when it started; the review's diff is taken from here.
    pub base_commit: Option<String>,
    /// Paths dirty before the task under `--allow-dirty`: never in kern's commits.
    pub excluded: Vec<PathBuf>,
    /// The task's own Check command when it started: the gate runs this one, whatever the
    /// file says later (an agent cannot rewrite its own gate).
    #[serde(default)]
    pub check: Option<String>,
    /// The task's Must lines when it started, and for each `file`/`grep` one whether it
    /// already held then (it proves nothing about this task): kern checks these, whatever the
    /// file says later.
    #[serde(default)]
    pub must: Vec<(String, Option<bool>)>,
    /// The task's Tests note said `read-only` when it started.
    #[serde(default)]
    pub tests_read_only: bool,
    /// The task's Scope (paths and globs) when it started; empty: no scope.
    #[serde(default)]
    pub scope: Vec<String>,
    /// `> **Tests:** first` (or `--tests-first`): the command the task's tests must fail on
    /// the base commit and then pass, as of the task's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_first: Option<String>,
    /// What the tests step proved, once the task's tests failed on the base commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<Red>,
}

/// A task's tests, seen red on its base commit (`pipeline::tests_first`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Red {
    /// The task they prove: a subtask of a decomposed task never inherits them.
    pub task: TaskIdentity,
    /// The test files kern holds read-only, relative to the top.
    pub tests: Vec<String>,
    /// The ref of the commit holding them as the tests step left them
    /// (`refs/kern/tests/<task>/<n>`): kern puts them back from it.
    pub saved: String,
    /// That commit's id.
    pub commit: String,
    /// The command's output on the base commit plus the tests (its last lines).
    pub output: String,
    /// The command's output after implement, once it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green: Option<String>,
}

impl TaskStart {
    /// A start of `identity` at `base_commit` with none of the task's notes: what a commit
    /// kern finishes or integrates knows of a task (its gate, Must and Scope are behind it).
    pub(crate) fn bare(
        identity: TaskIdentity,
        base_commit: Option<String>,
        excluded: Vec<PathBuf>,
    ) -> TaskStart {
        TaskStart {
            identity,
            base_commit,
            excluded,
            check: None,
            must: Vec::new(),
            tests_read_only: false,
            scope: Vec::new(),
            tests_first: None,
            red: None,
        }
    }

    /// True when this start record belongs to `task`: the task itself, or the task it is a
    /// subtask of (decomposition keeps the start of the task that was decomposed).
    pub(crate) fn covers(&self, task: &TaskIdentity) -> bool {
        task.path.starts_with(&self.identity.path)
            && (task.path.len() > self.identity.path.len()
                || task.occurrence == self.identity.occurrence)
    }

    /// The task's tests seen red, when they are `task`'s own.
    pub(crate) fn red_of(&self, task: &TaskIdentity) -> Option<&Red> {
        self.red.as_ref().filter(|r| r.task == *task)
    }

    /// The base commit as an object id, when it parses.
    pub(crate) fn base_oid(&self) -> Option<git2::Oid> {
        self.base_commit
            .as_deref()
            .and_then(|s| crate::oid::parse(s).ok())
    }
}

/// A commit kern was about to make (`commit.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingCommit {
    /// The task being committed.
    pub identity: TaskIdentity,
    /// Its title, for messages.
    pub title: String,
    /// The full commit message.
    pub message: String,
    /// HEAD before the commit; HEAD elsewhere means the commit landed.
    pub head_before: Option<String>,
}

/// kern's edits of a task that SPEC.md could not take because the person's file did not
/// validate (`edits.json`): applied at the start of the next run, once the file is fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingEdits {
    /// The task the edits are for.
    pub identity: TaskIdentity,
    /// Its title, for messages.
    pub title: String,
    /// The edits, in order.
    pub edits: Vec<crate::spec::Edit>,
}

/// Changed files kern left out of its commits (secrets, files too large, nested
/// repositories): they stay in the tree and never block a start (`left-out.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeftOut {
    /// Paths relative to the top.
    pub paths: Vec<PathBuf>,
    /// The person's paths under `--allow-dirty`, dirty before some task of this run: out of
    /// every commit of the run, not only the first task's. Never written to `left-out.json`
    /// (a later run judges its tree anew; a resumed task brings its own in `task.json`), and
    /// never among `paths`, which would let them pass the clean-tree rule unnoticed later.
    #[serde(skip)]
    pub persons: Vec<PathBuf>,
}

/// Reads a journal file (never through a symlink); `None` when it is missing or unreadable
/// (see the module docs).
pub(crate) fn load<T: DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&crate::private_file::read(path).ok()?).ok()
}

/// Writes a journal file atomically (fsynced: it must survive a crash of the machine), `0600`.
pub(crate) fn save<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| Error::Internal(format!("journal `{}`: {e}", path.display())))?;
    crate::atomic_file::write_private(path, &bytes)
}

/// Removes a journal file; a missing one is fine.
pub(crate) fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(path: &[&str], occurrence: usize) -> TaskIdentity {
        TaskIdentity {
            path: path.iter().map(|s| (*s).to_string()).collect(),
            occurrence,
        }
    }

    #[test]
    fn a_start_covers_its_task_and_the_subtasks_of_a_decomposed_task() {
        let start = TaskStart::bare(id(&["Big"], 0), None, Vec::new());
        assert!(start.covers(&id(&["Big"], 0)));
        assert!(start.covers(&id(&["Big", "Part one"], 0)));
        assert!(start.covers(&id(&["Big", "Part one"], 1)));
        assert!(
            !start.covers(&id(&["Big"], 1)),
            "another task of that title"
        );
        assert!(!start.covers(&id(&["Bigger"], 0)));
        assert!(!start.covers(&id(&["Other", "Big"], 0)));
    }

    #[test]
    fn journal_files_round_trip_and_bad_ones_read_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("commit.json");
        let pending = PendingCommit {
            identity: id(&["Task"], 0),
            title: "Task".into(),
            message: "Add task\n".into(),
            head_before: Some("abc".into()),
        };
        save(&path, &pending).unwrap();
        assert_eq!(load::<PendingCommit>(&path), Some(pending));
        std::fs::write(&path, "{\"identity\":").unwrap();
        assert_eq!(load::<PendingCommit>(&path), None);
        remove(&path);
        remove(&path);
        assert_eq!(load::<PendingCommit>(&path), None);
    }
}
