//! The three stages, their tool policies, their JSON schemas and the reports they return.
//!
//! A stage is what kern asks of one fresh agent process: research (read-only), implement
//! (edit and shell, no git writes), commit review (read-only plus git read). The agent answers
//! through structured output checked against the stage's schema (DESIGN.md section 5); kern,
//! not the agent, turns the report into SPEC.md edits and commits.

use serde::{Deserialize, Serialize};

/// One of the three stages of an iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Stage 1: read-only research; its notes become the task's Research note.
    Research,
    /// Stage 2: the work itself; edits and shell, no git writes.
    Implement,
    /// Stage 3: review of the diff; read-only plus git read; COMMIT or REJECT.
    Commit,
}

/// What a stage's agent may do, as kern names it to every agent kind (`KERN_TOOLS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolPolicy {
    /// Read and search only; no change to the work tree, index, HEAD or refs.
    #[serde(rename = "read-only")]
    ReadOnly,
    /// Edit files and run commands; no git commit or push.
    #[serde(rename = "full")]
    Full,
    /// Read-only plus read-only git commands (log, diff, status, show).
    #[serde(rename = "git-read")]
    GitRead,
}

impl ToolPolicy {
    /// The name used in `KERN_TOOLS` and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolPolicy::ReadOnly => "read-only",
            ToolPolicy::Full => "full",
            ToolPolicy::GitRead => "git-read",
        }
    }

    /// True when the audit must find the work tree exactly as it was before the stage.
    pub fn is_read_only(self) -> bool {
        !matches!(self, ToolPolicy::Full)
    }
}

impl Stage {
    /// All stages in the order they run.
    pub const ALL: [Stage; 3] = [Stage::Research, Stage::Implement, Stage::Commit];

    /// 1, 2 or 3: the number in `stageN.json`.
    pub fn number(self) -> u8 {
        match self {
            Stage::Research => 1,
            Stage::Implement => 2,
            Stage::Commit => 3,
        }
    }

    /// `research`, `implement` or `commit` (`KERN_STAGE`, the resume point, the output).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Research => "research",
            Stage::Implement => "implement",
            Stage::Commit => "commit",
        }
    }

    /// The stage named `name`, if any.
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The tool policy of this stage (DESIGN.md section 4).
    pub fn tools(self) -> ToolPolicy {
        match self {
            Stage::Research => ToolPolicy::ReadOnly,
            Stage::Implement => ToolPolicy::Full,
            Stage::Commit => ToolPolicy::GitRead,
        }
    }

    /// The file name of the stage's prompt template (`prompts/` and `.kern/prompts/`).
    pub fn template_name(self) -> &'static str {
        match self {
            Stage::Research => "1_research.md",
            Stage::Implement => "2_implement.md",
            Stage::Commit => "3_commit.md",
        }
    }

    /// The JSON schema the stage's structured output must follow (DESIGN.md section 5).
    pub fn schema(self) -> &'static str {
        match self {
            Stage::Research => RESEARCH_SCHEMA,
            Stage::Implement => IMPLEMENT_SCHEMA,
            Stage::Commit => COMMIT_SCHEMA,
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

const RESEARCH_SCHEMA: &str = r#"{"type":"object","properties":{"notes":{"type":"array","items":{"type":"string"},"description":"Concise notes a fresh context can implement the task from: files with line ranges, patterns to follow, constraints, references"},"skip_reason":{"type":"string","description":"Set only when the task cannot or should not be done; says why"}},"required":["notes"],"additionalProperties":false}"#;

const IMPLEMENT_SCHEMA: &str = r#"{"type":"object","properties":{"status":{"type":"string","enum":["SUCCESS","DECOMPOSED","SKIPPED","FAILED"]},"summary":{"type":"string","description":"What was done, in a few sentences"},"attempt_note":{"type":"string","description":"With FAILED: what was tried and why it failed, so the next attempt does not repeat it"},"subtasks":{"type":"array","items":{"type":"string"},"description":"With DECOMPOSED: the smaller tasks, in order, each doable in one session"},"learnings":{"type":"array","items":{"type":"string"},"description":"Durable facts about this codebase worth remembering for later tasks"}},"required":["status","summary"],"additionalProperties":false}"#;

const COMMIT_SCHEMA: &str = r#"{"type":"object","properties":{"verdict":{"type":"string","enum":["COMMIT","REJECT"]},"subject":{"type":"string","description":"The commit subject line, in the style of the recent commits"},"body":{"type":"string","description":"The commit body, optional"},"reason":{"type":"string","description":"With REJECT: what must change, precise enough for the implement stage to act on"},"learnings":{"type":"array","items":{"type":"string"}}},"required":["verdict","subject"],"additionalProperties":false}"#;

/// The research stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchReport {
    /// The notes; kern writes them as the task's Research bullets.
    pub notes: Vec<String>,
    /// Set when the researcher thinks the task should be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
}

/// The implement stage's status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ImplementStatus {
    /// The work is done; go on to the check gate and review.
    Success,
    /// The task is too big; `subtasks` replace it.
    Decomposed,
    /// The task should not be done now; back to `[ ]` with a Skipped note.
    Skipped,
    /// The attempt failed; an Attempt note records why.
    Failed,
}

impl ImplementStatus {
    /// The word as written in the schema and in a plain-text result.
    pub fn as_str(self) -> &'static str {
        match self {
            ImplementStatus::Success => "SUCCESS",
            ImplementStatus::Decomposed => "DECOMPOSED",
            ImplementStatus::Skipped => "SKIPPED",
            ImplementStatus::Failed => "FAILED",
        }
    }
}

/// The implement stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImplementReport {
    /// What happened.
    pub status: ImplementStatus,
    /// What was done.
    #[serde(default)]
    pub summary: String,
    /// With FAILED: what was tried and why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_note: Option<String>,
    /// With DECOMPOSED: the new subtasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subtasks: Vec<String>,
    /// Facts worth keeping in LEARNINGS.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learnings: Vec<String>,
}

/// The review verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Commit the work with `subject` and `body`.
    Commit,
    /// Do not commit; `reason` goes into an Attempt note.
    Reject,
}

/// The commit review stage's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewReport {
    /// COMMIT or REJECT.
    pub verdict: Verdict,
    /// The commit subject.
    #[serde(default)]
    pub subject: String,
    /// The commit body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// With REJECT: what must change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Facts worth keeping in LEARNINGS.md.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learnings: Vec<String>,
}

/// A stage's parsed report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StageReport {
    /// From research.
    Research(ResearchReport),
    /// From implement.
    Implement(ImplementReport),
    /// From commit review.
    Commit(ReviewReport),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_valid_json_objects() {
        for stage in Stage::ALL {
            let v: serde_json::Value = serde_json::from_str(stage.schema()).unwrap();
            assert_eq!(v["type"], "object", "{stage}");
        }
    }

    #[test]
    fn names_numbers_and_policies() {
        let table = [
            (Stage::Research, 1, "research", "read-only"),
            (Stage::Implement, 2, "implement", "full"),
            (Stage::Commit, 3, "commit", "git-read"),
        ];
        for (stage, n, name, tools) in table {
            assert_eq!(stage.number(), n);
            assert_eq!(stage.name(), name);
            assert_eq!(Stage::from_name(name), Some(stage));
            assert_eq!(stage.tools().as_str(), tools);
        }
    }
}
