//! Where a task picks up after a crash, a Ctrl-C or a spent budget.
//!
//! SPEC.md says how far a task got in kern's own terms (a Research note means research is
//! done); the stage files say whether a later stage finished before the run stopped. A stage
//! file counts only when the task identity recorded in it is the selected task's and its
//! outcome is `succeeded` with the report its stage gives; a file of another task is stale.
//!
//! The one decision a reader must know: [`infer`] is pure and shared — the loop and `kern
//! status` (and so `kern -n`) both call it on what [`StageFiles::read`] found, so they cannot
//! disagree about the next stage. Only the loop removes stale files; status merely names them.

use std::path::PathBuf;

use crate::spec::TaskIdentity;
use crate::stage::record::{Outcome, StageRecord};
use crate::stage::{
    ImplementReport, ImplementStatus, ResearchReport, ReviewReport, Stage, StageReport,
    TestsReport, Verdict,
};
use crate::state::StateDir;

/// The stage a task continues from, with what the finished stages reported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ResumePoint {
    /// Start with research.
    Research,
    /// Research finished but its notes never reached SPEC.md: write them, then implement.
    ApplyResearch(ResearchReport),
    /// Run implement.
    Implement,
    /// Implement reported SUCCESS: run the check gate, then the review.
    Review(ImplementReport),
    /// The review said COMMIT: commit.
    Commit(ImplementReport, ReviewReport),
}

impl ResumePoint {
    /// `research`, `implement` or `commit`: the stage that runs next.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ResumePoint::Research => "research",
            ResumePoint::ApplyResearch(_) | ResumePoint::Implement => "implement",
            ResumePoint::Review(_) | ResumePoint::Commit(..) => "commit",
        }
    }
}

/// The finished stage reports of one task, as found in the state folder.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StageFiles {
    /// Research's report, when its record belongs to the task and succeeded.
    pub research: Option<ResearchReport>,
    /// The tests step's report (a task tested first), likewise: the red check is next.
    pub tests: Option<TestsReport>,
    /// Implement's report, likewise.
    pub implement: Option<ImplementReport>,
    /// The review's report, likewise.
    pub review: Option<ReviewReport>,
    /// Records found that belong to another task: (path, that task's title).
    pub stale: Vec<(PathBuf, String)>,
}

impl StageFiles {
    /// Reads the stage records of the state folder for `task`. Reads only.
    pub(crate) fn read(state_dir: &StateDir, task: &TaskIdentity) -> StageFiles {
        let mut files = StageFiles::default();
        for stage in Stage::ALL {
            let path = state_dir.stage_record(stage);
            let Some(record) = StageRecord::load(&path) else {
                continue;
            };
            if record.kern.task.identity != *task {
                files.stale.push((path, record.kern.task.title));
                continue;
            }
            if record.kern.outcome != Outcome::Succeeded {
                continue;
            }
            match record.kern.report {
                Some(StageReport::Research(r)) if stage == Stage::Research => {
                    files.research = Some(r);
                }
                Some(StageReport::Tests(r)) if stage == Stage::Tests => files.tests = Some(r),
                Some(StageReport::Implement(r)) if stage == Stage::Implement => {
                    files.implement = Some(r);
                }
                Some(StageReport::Review(r)) if stage == Stage::Review => files.review = Some(r),
                _ => {}
            }
        }
        files
    }
}

/// The resume point of a task (`has_research`: SPEC.md shows its Research note) given its
/// finished stages. Pure.
pub(crate) fn infer(files: &StageFiles, has_research: bool) -> ResumePoint {
    let implemented = files
        .implement
        .clone()
        .filter(|i| i.status == ImplementStatus::Success);
    let approved = files
        .review
        .clone()
        .filter(|r| r.verdict == Verdict::Commit);
    // A finished implement is resumed from whatever SPEC.md shows of research: a level-0 task
    // never had a Research note, and implement only ran once research was done or skipped.
    match (has_research, &files.research, implemented, approved) {
        (_, _, Some(i), Some(c)) => ResumePoint::Commit(i, c),
        (_, _, Some(i), None) => ResumePoint::Review(i),
        (false, Some(r), None, _) => ResumePoint::ApplyResearch(r.clone()),
        (false, None, None, _) => ResumePoint::Research,
        (true, _, None, _) => ResumePoint::Implement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn implement(status: ImplementStatus) -> ImplementReport {
        ImplementReport {
            status,
            no_change_reason: None,
            summary: "did it".into(),
            attempt_note: None,
            subtasks: Vec::new(),
            learnings: Vec::new(),
        }
    }

    fn review(verdict: Verdict) -> ReviewReport {
        ReviewReport {
            verdict,
            subject: "Add it".into(),
            body: None,
            reason: None,
            learnings: Vec::new(),
        }
    }

    #[test]
    fn the_table_of_resume_points() {
        let research = ResearchReport {
            notes: vec!["n".into()],
            skip_reason: None,
            skip_kind: None,
            must: None,
            scope: None,
        };
        let ok = implement(ImplementStatus::Success);
        let files =
            |r: Option<ResearchReport>, i: Option<ImplementReport>, c: Option<ReviewReport>| {
                StageFiles {
                    research: r,
                    tests: None,
                    implement: i,
                    review: c,
                    stale: Vec::new(),
                }
            };
        let cases = [
            (files(None, None, None), false, ResumePoint::Research),
            (
                files(Some(research.clone()), None, None),
                false,
                ResumePoint::ApplyResearch(research.clone()),
            ),
            (files(None, None, None), true, ResumePoint::Implement),
            (
                files(None, Some(ok.clone()), None),
                true,
                ResumePoint::Review(ok.clone()),
            ),
            (
                files(None, Some(implement(ImplementStatus::Failed)), None),
                true,
                ResumePoint::Implement,
            ),
            (
                files(None, Some(ok.clone()), Some(review(Verdict::Commit))),
                true,
                ResumePoint::Commit(ok.clone(), review(Verdict::Commit)),
            ),
            (
                files(None, Some(ok.clone()), Some(review(Verdict::Reject))),
                true,
                ResumePoint::Review(ok.clone()),
            ),
            // A level-0 task (no Research note, none needed) whose implement finished goes on
            // to its review: implement is never paid twice.
            (
                files(None, Some(ok.clone()), None),
                false,
                ResumePoint::Review(ok.clone()),
            ),
            (
                files(None, Some(ok.clone()), Some(review(Verdict::Commit))),
                false,
                ResumePoint::Commit(ok.clone(), review(Verdict::Commit)),
            ),
            // A review without a successful implement is not resumed from.
            (
                files(None, None, Some(review(Verdict::Commit))),
                true,
                ResumePoint::Implement,
            ),
        ];
        for (files, has_research, want) in cases {
            assert_eq!(
                infer(&files, has_research),
                want,
                "{files:?} {has_research}"
            );
        }
        assert_eq!(ResumePoint::Research.name(), "research");
        assert_eq!(ResumePoint::Review(ok).name(), "commit");
    }
}
