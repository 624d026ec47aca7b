//! The `pre-commit` hook of kern's commit (commit.rs): run it on the staged index, take what
//! it staged, and give a fixer hook the retry a person would.
//!
//! The one decision a reader must know: a hook that fails after changing only files the commit
//! holds (a fixer: whitespace, end of file, a formatter) has its fixes staged and runs once
//! more; a hook that fails having changed nothing, or any file the commit does not hold, is
//! [`Error::HookFailed`]. Which files it changed is told by their stamps (snapshot.rs) before
//! and after it ran: the files the commit holds and every file status lists.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Index, Oid, Signature, Tree};

use super::Repository;
use super::commit::CommitRequest;
use super::hooks::{HookRun, hook_present};
use super::snapshot::Stamp;
use super::staging::Staging;
use crate::error::{Error, Result};

impl Repository {
    /// Runs `pre-commit` and returns the tree to commit, given HEAD's tree and the staged
    /// tree as written before it. A hook may stage more (formatters re-adding files): the index is
    /// taken as it left it and judged again. A hook that fails after changing only files kern
    /// staged has its fixes staged and runs once more.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pre_commit(
        &self,
        hooks: &Path,
        staging: &mut Staging<'_>,
        index: &mut Index,
        (head_tree, staged): (Option<&Tree<'_>>, Oid),
        author: &Signature<'_>,
        req: &CommitRequest<'_>,
        notes: &mut Vec<String>,
    ) -> Result<Oid> {
        let head = head_tree.map(Tree::id);
        let rejudge = |staging: &mut Staging<'_>, index: &mut Index| -> Result<Oid> {
            index
                .read(true)
                .map_err(|e| self.index_error("reading the index", e))?;
            let judged = staging.judge_index(index, head_tree)?;
            self.write_tree(index, judged, head, req.notify)
        };
        if !hook_present(hooks, "pre-commit") {
            return Ok(staged);
        }
        let committed = self.committed_paths(head, staged)?;
        let before = self.work_tree_stamps(&committed)?;
        let output = match self.run_hook(hooks, "pre-commit", &[], author, self.hook_timeout) {
            HookRun::Failed(output) => output,
            HookRun::Passed | HookRun::Absent => return rejudge(staging, index),
        };
        let changed = self.changed_since_stamps(&before)?;
        if changed.is_empty() || !changed.iter().all(|p| committed.contains(p)) {
            return Err(Error::HookFailed {
                hook: "pre-commit".into(),
                output,
            });
        }
        index
            .read(true)
            .map_err(|e| self.index_error("reading the index", e))?;
        staging.stage_paths(index, &changed)?;
        self.write_tree(index, None, head, req.notify)?;
        if let HookRun::Failed(output) =
            self.run_hook(hooks, "pre-commit", &[], author, self.hook_timeout)
        {
            return Err(Error::HookFailed {
                hook: "pre-commit".into(),
                output,
            });
        }
        notes.push(format!(
            "the pre-commit hook fixed {}; kern staged its fixes and ran it again",
            changed
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        rejudge(staging, index)
    }

    /// The paths the commit changes against HEAD: those that differ between HEAD's tree
    /// `head` and the staged tree, read only along the changed paths (tree_diff.rs).
    fn committed_paths(&self, head: Option<Oid>, staged: Oid) -> Result<BTreeSet<PathBuf>> {
        let paths = super::tree_diff::changed_paths(&self.repo, head, Some(staged))
            .map_err(|e| Error::git("comparing the index with HEAD", e))?;
        Ok(paths
            .into_iter()
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(&p)))
            .collect())
    }

    /// The stamps of `paths` and of every path status lists now (`None`: missing).
    fn work_tree_stamps(
        &self,
        paths: &BTreeSet<PathBuf>,
    ) -> Result<BTreeMap<PathBuf, Option<Stamp>>> {
        let listed = self.status_paths()?;
        Ok(paths
            .iter()
            .cloned()
            .chain(listed)
            .map(|p| {
                let stamp = std::fs::symlink_metadata(self.top.join(&p))
                    .ok()
                    .map(|m| Stamp::of(&m));
                (p, stamp)
            })
            .collect())
    }

    /// The paths whose stamp differs from `before`, new ones status lists included.
    fn changed_since_stamps(
        &self,
        before: &BTreeMap<PathBuf, Option<Stamp>>,
    ) -> Result<Vec<PathBuf>> {
        let now = self.work_tree_stamps(&before.keys().cloned().collect())?;
        Ok(now
            .into_iter()
            .filter(|(path, stamp)| before.get(path) != Some(stamp))
            .map(|(path, _)| path)
            .collect())
    }
}
