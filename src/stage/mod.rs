//! The stages, their tool policies, their JSON schemas and the reports they return.
//!
//! A stage is what kern asks of one fresh agent process: research (read-only), implement
//! (edit and shell, no git writes), commit review (read-only plus git read) — and, for a task
//! tested first (`> **Tests:** first`), the tests step before implement (edit and shell: it
//! writes the task's tests, which kern then runs and holds). The agent answers
//! through structured output checked against the stage's schema (DESIGN.md section 5); kern,
//! not the agent, turns the report into SPEC.md edits and commits.
//!
//! This folder is vocabulary only — the stage kinds, reports, schemas and the record — so the
//! agents, the state folder and the reporter can name a stage without importing the loop.
//! Running a stage lives in `pipeline/stage/` (the runner, one try, the inputs).

pub(crate) mod record;
pub(crate) mod report;
mod schema;

pub(crate) use report::{
    ImplementReport, ImplementStatus, ResearchReport, ReviewReport, StageReport, TestsReport,
    TestsStatus, Verdict, extract_report,
};

use serde::{Deserialize, Serialize};

/// One of the stages of an iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Stage 1: read-only research; its notes become the task's Research note.
    Research,
    /// Stage 2's first half for a task tested first: the task's tests, written or named
    /// before implement; edits and shell, no git writes (`pipeline::tests_first`).
    Tests,
    /// Stage 2: the work itself; edits and shell, no git writes.
    Implement,
    /// Stage 3: review of the diff; read-only plus git read; COMMIT or REJECT. Its name in
    /// files, `KERN_STAGE` and JSON stays `commit`, as in the original script.
    #[serde(rename = "commit")]
    Review,
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
    /// All stages in the order they run (the tests step only for a task tested first).
    pub const ALL: [Stage; 4] = [
        Stage::Research,
        Stage::Tests,
        Stage::Implement,
        Stage::Review,
    ];

    /// 1, 2 or 3: the stage's number (the tests step is the first half of stage 2).
    pub fn number(self) -> u8 {
        match self {
            Stage::Research => 1,
            Stage::Tests | Stage::Implement => 2,
            Stage::Review => 3,
        }
    }

    /// The stem of the stage's files in the state folder: `stage1`, `stage2-tests`, `stage2`,
    /// `stage3` (`stage1.json`, `stage2-tests.jsonl`, …).
    pub fn file_stem(self) -> &'static str {
        match self {
            Stage::Research => "stage1",
            Stage::Tests => "stage2-tests",
            Stage::Implement => "stage2",
            Stage::Review => "stage3",
        }
    }

    /// `research`, `tests`, `implement` or `commit` (`KERN_STAGE`, the resume point, the
    /// output).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Research => "research",
            Stage::Tests => "tests",
            Stage::Implement => "implement",
            Stage::Review => "commit",
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
            Stage::Tests | Stage::Implement => ToolPolicy::Full,
            Stage::Review => ToolPolicy::GitRead,
        }
    }

    /// The file name of the stage's prompt template (`prompts/` and `.kern/prompts/`).
    pub fn template_name(self) -> &'static str {
        match self {
            Stage::Research => "1_research.md",
            Stage::Tests => "2_tests.md",
            Stage::Implement => "2_implement.md",
            Stage::Review => "3_commit.md",
        }
    }

    /// The JSON schema the stage's structured output must follow (DESIGN.md section 5).
    pub fn schema(self) -> &'static str {
        match self {
            Stage::Research => schema::RESEARCH,
            Stage::Tests => schema::TESTS,
            Stage::Implement => schema::IMPLEMENT,
            Stage::Review => schema::REVIEW,
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A stage's report type, tied to its stage: the stage runner is generic over it, so the loop
/// receives the report of the stage it ran, typed, with no arm for an impossible variant.
pub(crate) trait Report: Clone + Into<StageReport> {
    /// The stage that returns this report.
    const STAGE: Stage;

    /// The report inside `report`, when it is this stage's.
    fn from_report(report: StageReport) -> Option<Self>;
}

impl From<ResearchReport> for StageReport {
    fn from(r: ResearchReport) -> StageReport {
        StageReport::Research(r)
    }
}

impl From<TestsReport> for StageReport {
    fn from(r: TestsReport) -> StageReport {
        StageReport::Tests(r)
    }
}

impl From<ImplementReport> for StageReport {
    fn from(r: ImplementReport) -> StageReport {
        StageReport::Implement(r)
    }
}

impl From<ReviewReport> for StageReport {
    fn from(r: ReviewReport) -> StageReport {
        StageReport::Review(r)
    }
}

impl Report for ResearchReport {
    const STAGE: Stage = Stage::Research;
    fn from_report(report: StageReport) -> Option<Self> {
        match report {
            StageReport::Research(r) => Some(r),
            _ => None,
        }
    }
}

impl Report for TestsReport {
    const STAGE: Stage = Stage::Tests;
    fn from_report(report: StageReport) -> Option<Self> {
        match report {
            StageReport::Tests(r) => Some(r),
            _ => None,
        }
    }
}

impl Report for ImplementReport {
    const STAGE: Stage = Stage::Implement;
    fn from_report(report: StageReport) -> Option<Self> {
        match report {
            StageReport::Implement(r) => Some(r),
            _ => None,
        }
    }
}

impl Report for ReviewReport {
    const STAGE: Stage = Stage::Review;
    fn from_report(report: StageReport) -> Option<Self> {
        match report {
            StageReport::Review(r) => Some(r),
            _ => None,
        }
    }
}
