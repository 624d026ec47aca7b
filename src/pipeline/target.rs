//! Where a run's work goes (DESIGN.md section 15): the run's own branch, a parallel task's
//! worktree, or a task branch under `--review` — and what the run holds on its branch (a
//! detached HEAD, the last commit it made, the `--remote` it claims on).
//!
//! The one decision a reader must know: only a run on its own branch commits there and claims
//! on a remote; a parallel task's run hands its work back, a review run parks it.

use crate::pipeline::remote;
use crate::spec::TaskIdentity;

/// Where a run's work goes (DESIGN.md section 15).
pub(crate) enum Target {
    /// The run's own branch (or a detached HEAD): kern commits there.
    Branch(BranchTarget),
    /// A parallel task's run (`-j`): it works on exactly this task in the task's own worktree
    /// and hands the work back ([`IterationEnd::Ready`]) for the run to integrate.
    Job(TaskIdentity),
    /// `--review`: the reviewed work of this task is committed on its task branch
    /// (`kern/<task>`) and parked there.
    Review { task: TaskIdentity, branch: String },
}

/// The run's own branch.
#[derive(Default)]
pub(crate) struct BranchTarget {
    /// HEAD names no branch: kern's commits are on none (the summary says how to keep them).
    pub(super) detached: bool,
    /// The last commit kern made on the branch: with parallel tasks, the branch must keep it
    /// (see `parallel::integrate::keep_branch_forwards`).
    pub(super) last_commit: Option<git2::Oid>,
    /// `--remote`: the remote the run claims its tasks on.
    pub(super) remote: Option<remote::Remote>,
}

impl Target {
    /// The one task a parallel task's run works on.
    pub(super) fn task(&self) -> Option<&TaskIdentity> {
        match self {
            Target::Branch(_) => None,
            Target::Job(task) | Target::Review { task, .. } => Some(task),
        }
    }

    /// `--review`: the task branch the commit goes to.
    pub(super) fn review_branch(&self) -> Option<&str> {
        match self {
            Target::Review { branch, .. } => Some(branch),
            _ => None,
        }
    }

    /// `--remote`: the remote the run claims its tasks on.
    pub(super) fn remote(&self) -> Option<&remote::Remote> {
        match self {
            Target::Branch(branch) => branch.remote.as_ref(),
            _ => None,
        }
    }

    /// `--remote`, to change what the run holds there.
    pub(super) fn remote_mut(&mut self) -> Option<&mut remote::Remote> {
        match self {
            Target::Branch(branch) => branch.remote.as_mut(),
            _ => None,
        }
    }

    /// The run's own branch, when this run commits there.
    pub(super) fn branch(&mut self) -> Option<&mut BranchTarget> {
        match self {
            Target::Branch(branch) => Some(branch),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(title: &str) -> TaskIdentity {
        TaskIdentity {
            path: vec![title.to_string()],
            occurrence: 0,
        }
    }

    #[test]
    fn only_the_runs_own_branch_is_a_branch_and_only_a_task_target_names_a_task() {
        let mut own = Target::Branch(BranchTarget::default());
        assert_eq!(own.task(), None);
        assert_eq!(own.review_branch(), None);
        assert!(own.remote().is_none() && own.remote_mut().is_none());
        assert!(
            own.branch()
                .is_some_and(|b| !b.detached && b.last_commit.is_none())
        );

        let mut job = Target::Job(task("Alpha"));
        assert_eq!(job.task(), Some(&task("Alpha")));
        assert_eq!(job.review_branch(), None);
        assert!(job.branch().is_none() && job.remote().is_none());

        let mut review = Target::Review {
            task: task("Beta"),
            branch: "kern/beta".to_string(),
        };
        assert_eq!(review.task(), Some(&task("Beta")));
        assert_eq!(review.review_branch(), Some("kern/beta"));
        assert!(review.branch().is_none() && review.remote_mut().is_none());
    }
}
