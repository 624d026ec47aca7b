//! Where a run's work goes (DESIGN.md section 15): the run's own branch, a parallel task's
//! worktree, or a task branch under `--review` — and what the run holds on its branch (a
//! detached HEAD, the last commit it made, the `--remote` it claims on).
//!
//! The one decision a reader must know: only a run on its own branch commits there and claims
//! on a remote; a parallel task's run hands its work back, a review run parks it. What the run
//! holds on its branch changes only through `Target`'s methods (`moved_to` when a task's
//! commit or a sync to the remote's tip moves it, `set_detached` at the start); `--remote`'s
//! claims are `remote::Remote`'s.

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
    detached: bool,
    /// The last commit kern made on the branch (or synced it to): with parallel tasks, the
    /// branch must keep it (see `parallel::integrate::keep_branch_forwards`).
    last_commit: Option<git2::Oid>,
    /// `--remote`: the remote the run claims its tasks on.
    remote: Option<remote::Remote>,
}

impl Target {
    /// The run's own branch, claiming its tasks on `remote` when given.
    pub(super) fn own_branch(remote: Option<remote::Remote>) -> Target {
        Target::Branch(BranchTarget {
            remote,
            ..BranchTarget::default()
        })
    }

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

    /// HEAD names no branch: the run's commits are on none.
    pub(super) fn set_detached(&mut self) {
        if let Target::Branch(branch) = self {
            branch.detached = true;
        }
    }

    /// Whether the run commits on its own branch with HEAD on no branch.
    pub(super) fn detached(&self) -> bool {
        matches!(self, Target::Branch(b) if b.detached)
    }

    /// The run's own branch is now at `commit` (a task's commit, or the remote's tip the run
    /// synced to); nothing for a parallel task's or a review run's target.
    pub(super) fn moved_to(&mut self, commit: git2::Oid) {
        if let Target::Branch(branch) = self {
            branch.last_commit = Some(commit);
        }
    }

    /// The commit the run's own branch was last moved to, taken (each is seen once).
    pub(super) fn take_last_commit(&mut self) -> Option<git2::Oid> {
        match self {
            Target::Branch(branch) => branch.last_commit.take(),
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
        assert!(!own.detached());
        assert_eq!(own.take_last_commit(), None);

        let job = Target::Job(task("Alpha"));
        assert_eq!(job.task(), Some(&task("Alpha")));
        assert_eq!(job.review_branch(), None);
        assert!(job.remote().is_none());

        let mut review = Target::Review {
            task: task("Beta"),
            branch: "kern/beta".to_string(),
        };
        assert_eq!(review.task(), Some(&task("Beta")));
        assert_eq!(review.review_branch(), Some("kern/beta"));
        assert!(review.remote_mut().is_none());
    }

    #[test]
    fn only_the_runs_own_branch_keeps_its_last_commit_and_whether_head_is_detached() {
        let a = git2::Oid::from_bytes(&[1; 20]).unwrap();
        let b = git2::Oid::from_bytes(&[2; 20]).unwrap();
        let mut own = Target::own_branch(None);
        own.moved_to(a);
        own.moved_to(b);
        own.set_detached();
        assert!(own.detached());
        // The latest, seen once.
        assert_eq!(own.take_last_commit(), Some(b));
        assert_eq!(own.take_last_commit(), None);
        for mut other in [
            Target::Job(task("Alpha")),
            Target::Review {
                task: task("Beta"),
                branch: "kern/beta".to_string(),
            },
        ] {
            other.moved_to(a);
            other.set_detached();
            assert!(!other.detached());
            assert_eq!(other.take_last_commit(), None);
        }
    }
}
