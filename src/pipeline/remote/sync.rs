//! The run's branch follows the remote's (`--remote`): before tasks are picked and before each
//! landing, the remote's tip is fetched and the branch, index and work tree moved to it.
//!
//! The one decision a reader must know: only the paths that differ between HEAD and the tip are
//! written, never over a change of the person's (such a change stops the run with a usage
//! error and nothing moved), and SPEC.md is merged by task ([`super::spec_merge`]) so lines the
//! run wrote for tasks it holds survive the move. A run refuses to start when the local branch
//! has commits the remote's lacks: kern never drops the person's commits.

use git2::Oid;

use super::{Remote, spec_merge};
use crate::error::{Error, Result};
use crate::pipeline::Run;

impl Run<'_> {
    /// The run starts on the remote: the branch there must hold everything the local branch
    /// has (kern never drops the person's commits); the branch is moved to its tip.
    pub(in crate::pipeline) fn remote_open(&mut self) -> Result<()> {
        let Some(remote) = self.target.remote() else {
            return Ok(());
        };
        let (name, branch) = (remote.name.clone(), remote.branch.clone());
        let tip = self.cx.ws.repo.fetch_remote(&name, &branch)?;
        if let Some(head) = self.cx.ws.repo.head_oid()
            && !self.cx.ws.repo.contains(tip, head)
        {
            return Err(Error::Usage(format!(
                "--remote `{name}`: the branch `{branch}` here has commits `{name}/{branch}` lacks — push them first (`git push {name} {branch}`), then run kern again"
            )));
        }
        self.sync_to(tip)
    }

    /// Fetches the remote and moves the branch to its tip; returns the tip.
    pub(in crate::pipeline) fn remote_sync(&mut self) -> Result<Option<Oid>> {
        let Some(remote) = self.target.remote() else {
            return Ok(None);
        };
        let tip = self.cx.ws.repo.fetch_remote(&remote.name, &remote.branch)?;
        self.sync_to(tip)?;
        Ok(Some(tip))
    }

    /// Moves the run's branch, index and work tree from HEAD to `tip`: exactly the paths that
    /// differ are written (never over a change of the person's), SPEC.md merged by task.
    pub(super) fn sync_to(&mut self, tip: Oid) -> Result<()> {
        let Some(head) = self.cx.ws.repo.head_oid() else {
            return Ok(());
        };
        if head == tip {
            return Ok(());
        }
        let (base, theirs) = (self.spec_at(head), self.spec_at(tip));
        self.spec.reload()?;
        let ours = self.spec.last_text();
        let held = self
            .target
            .remote()
            .map(Remote::held_tasks)
            .unwrap_or_default();
        let merged = spec_merge::merge(&base, &ours, &theirs, &held);
        if ours != base {
            self.spec.restore(&base)?;
        }
        let paths = self
            .cx
            .ws
            .repo
            .paths_between(self.tree_of(head)?, self.tree_of(tip)?)?;
        if !self.cx.ws.repo.checkout_paths(self.tree_of(tip)?, &paths)? {
            self.spec.restore(&ours)?;
            return Err(Error::Usage(format!(
                "--remote: the branch moved on the remote, and a file it changes was changed here by hand ({}) — commit or undo your change, then run kern again",
                paths.join(", ")
            )));
        }
        let branch = self.cx.ws.repo.branch_name()?;
        self.cx.ws.repo.set_ref(
            &format!("refs/heads/{branch}"),
            tip,
            "kern: the remote's tip (--remote)",
        )?;
        self.spec.restore(&merged)?;
        if let Some(branch) = self.target.branch() {
            branch.last_commit = Some(tip);
        }
        Ok(())
    }
}
