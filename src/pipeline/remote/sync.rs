//! The run's branch follows the remote's (`--remote`): before tasks are picked and before each
//! landing, the remote's tip is fetched and the branch, index and work tree moved to it.
//!
//! The one decision a reader must know: only the paths that differ between HEAD and the tip are
//! written, never over a change of the person's (such a change stops the run with a usage
//! error and nothing moved), and SPEC.md is merged by task ([`super::spec_merge`]) so lines the
//! run wrote for tasks it holds survive the move. A run refuses to start when the local branch
//! has commits the remote's lacks: kern never drops the person's commits.
//!
//! No unit test here: it fetches the remote and moves the branch; SPEC.md's merge is
//! `spec_merge`'s (tested there); held by tests/integration/remote.rs.

use git2::Oid;

use super::{Remote, spec_merge};
use crate::error::{Error, Result};
use crate::pipeline::Target;
use crate::pipeline::guard::SpecGuard;

/// The run starts on the remote: the branch there must hold everything the local branch
/// has (kern never drops the person's commits); the branch is moved to its tip.
pub(in crate::pipeline) fn remote_open(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
) -> Result<()> {
    let Some(remote) = target.remote() else {
        return Ok(());
    };
    let (name, branch) = (remote.name.clone(), remote.branch.clone());
    let tip = guard.cx.ws.repo.fetch_remote(&name, &branch)?;
    if let Some(head) = guard.cx.ws.repo.head_oid()
        && !guard.cx.ws.repo.contains(tip, head)
    {
        return Err(Error::Usage(format!(
            "--remote `{name}`: the branch `{branch}` here has commits `{name}/{branch}` lacks — push them first (`git push {name} {branch}`), then run kern again"
        )));
    }
    super::sync_to(guard, target, tip)
}

/// Fetches the remote and moves the branch to its tip; returns the tip.
pub(in crate::pipeline) fn remote_sync(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
) -> Result<Option<Oid>> {
    let Some(remote) = target.remote() else {
        return Ok(None);
    };
    let tip = guard
        .cx
        .ws
        .repo
        .fetch_remote(&remote.name, &remote.branch)?;
    super::sync_to(guard, target, tip)?;
    Ok(Some(tip))
}

/// Moves the run's branch, index and work tree from HEAD to `tip`: exactly the paths that
/// differ are written (never over a change of the person's), SPEC.md merged by task.
pub(in crate::pipeline) fn sync_to(
    guard: &SpecGuard<'_, '_>,
    target: &mut Target,
    tip: Oid,
) -> Result<()> {
    let Some(head) = guard.cx.ws.repo.head_oid() else {
        return Ok(());
    };
    if head == tip {
        return Ok(());
    }
    let (base, theirs) = (super::spec_at(guard, head), super::spec_at(guard, tip));
    guard.spec.reload()?;
    let ours = guard.spec.last_text();
    let held = target.remote().map(Remote::held_tasks).unwrap_or_default();
    let merged = spec_merge::merge(&base, &ours, &theirs, &held);
    if ours != base {
        guard.spec.restore(&base)?;
    }
    let paths = guard.cx.ws.repo.paths_between(
        crate::pipeline::audit::tree_of(&guard.cx.ws.repo, head)?,
        crate::pipeline::audit::tree_of(&guard.cx.ws.repo, tip)?,
    )?;
    if !guard.cx.ws.repo.checkout_paths(
        crate::pipeline::audit::tree_of(&guard.cx.ws.repo, tip)?,
        &paths,
    )? {
        guard.spec.restore(&ours)?;
        return Err(Error::Usage(format!(
            "--remote: the branch moved on the remote, and a file it changes was changed here by hand ({}) — commit or undo your change, then run kern again",
            paths.join(", ")
        )));
    }
    let branch = guard.cx.ws.repo.branch_name()?;
    guard.cx.ws.repo.set_ref(
        &format!("refs/heads/{branch}"),
        tip,
        "kern: the remote's tip (--remote)",
    )?;
    guard.spec.restore(&merged)?;
    target.moved_to(tip);
    Ok(())
}
