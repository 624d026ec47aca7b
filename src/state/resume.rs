//! Where a task picks up after a crash, a Ctrl-C or a spent budget: the stage files that still
//! apply to it, and the facts recorded when it started.
//!
//! SPEC.md says how far a task got in kern's own terms (a Research note means research is
//! done); the stage files say whether a later stage finished before the run stopped. A stage
//! file is used only when the task identity recorded in it matches the selected task and its
//! outcome is `succeeded`; anything else is stale: removed, with a message. Two further files
//! live beside the stage files and outlive an iteration: `task.json` (the commit a task started
//! from and the paths it must leave out under `--allow-dirty`) and `commit.json` (a commit kern
//! was about to make, so a crash between writing SPEC.md and the commit cannot lose the work or
//! commit it twice).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::stage::record::{Outcome, StageRecord};
use crate::stage::{ImplementStatus, Stage, StageReport, Verdict};
use crate::state::StateDir;

/// The stage a task continues from.
#[derive(Debug)]
pub enum ResumePoint {
    /// Start with research.
    Research,
    /// Research finished but its notes never reached SPEC.md: write them, then implement.
    ApplyResearch(Box<StageRecord>),
    /// Run implement.
    Implement,
    /// Implement reported SUCCESS: run the check gate, then the review.
    Review(Box<StageRecord>),
    /// The review said COMMIT: commit.
    Commit(Box<StageRecord>, Box<StageRecord>),
}

impl ResumePoint {
    /// `research`, `implement` or `commit` (the stage that runs next).
    pub fn name(&self) -> &'static str {
        match self {
            ResumePoint::Research => "research",
            ResumePoint::ApplyResearch(_) | ResumePoint::Implement => "implement",
            ResumePoint::Review(_) | ResumePoint::Commit(..) => "commit",
        }
    }
}

/// Infers the resume point of the task with `identity` (`has_research`: it has a Research
/// note). Stale stage files are removed; the returned messages say which.
pub fn infer(
    state_dir: &StateDir,
    identity: &Value,
    has_research: bool,
) -> (ResumePoint, Vec<String>) {
    let mut messages = Vec::new();
    let mut current = |stage: Stage| -> Option<StageRecord> {
        let path = state_dir.stage_record(stage);
        let record = StageRecord::load(&path)?;
        if &record.kern.task.identity != identity {
            messages.push(format!(
                "ignoring stale `{}`: it belongs to task `{}`",
                file_name(&path),
                record.kern.task.title
            ));
            let _ = std::fs::remove_file(&path);
            return None;
        }
        (record.kern.outcome == Outcome::Succeeded).then_some(record)
    };
    let research = current(Stage::Research);
    let implement = current(Stage::Implement).filter(|r| {
        matches!(&r.kern.report, Some(StageReport::Implement(i)) if i.status == ImplementStatus::Success)
    });
    let review = current(Stage::Review).filter(
        |r| matches!(&r.kern.report, Some(StageReport::Review(c)) if c.verdict == Verdict::Commit),
    );
    let point = match (has_research, research, implement, review) {
        (false, Some(r), _, _) => ResumePoint::ApplyResearch(Box::new(r)),
        (false, None, _, _) => ResumePoint::Research,
        (true, _, Some(i), Some(c)) => ResumePoint::Commit(Box::new(i), Box::new(c)),
        (true, _, Some(i), None) => ResumePoint::Review(Box::new(i)),
        (true, _, None, _) => ResumePoint::Implement,
    };
    (point, messages)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What kern recorded when a task started (`task.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStart {
    /// The identity of the task that started (a decomposed task's subtasks inherit it).
    pub identity: Value,
    /// HEAD when it started; the review's diff is taken from here.
    pub base_commit: Option<String>,
    /// Paths dirty before the task under `--allow-dirty`: never in kern's commits.
    pub excluded: Vec<PathBuf>,
}

/// A commit kern was about to make (`commit.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCommit {
    /// The task being committed.
    pub identity: Value,
    /// Its title, for messages.
    pub title: String,
    /// The full commit message.
    pub message: String,
    /// HEAD before the commit; HEAD elsewhere means the commit landed.
    pub head_before: Option<String>,
}

/// Reads a JSON state file; None when missing or unreadable.
pub fn load<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes a JSON state file atomically.
pub fn save<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| crate::error::Error::Internal(e.to_string()))?;
    crate::atomic_file::write(path, &bytes)
}

/// Removes a state file; missing is fine.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// True when `ancestor` is `task` or one of its ancestors (identities as stored in records).
pub fn is_same_or_ancestor(ancestor: &Value, task: &Value) -> bool {
    let path = |v: &Value| -> Option<Vec<Value>> { v.get("path")?.as_array().cloned() };
    match (path(ancestor), path(task)) {
        (Some(a), Some(t)) => t.starts_with(&a),
        _ => ancestor == task,
    }
}
