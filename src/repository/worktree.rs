//! Task worktrees for parallel tasks (DESIGN.md section 15), and putting a task's commit onto
//! the run's branch in memory.
//!
//! Decisions a reader must know:
//! - A task worktree is a linked git worktree created and removed through libgit2, on its own
//!   branch `kern/<task>` from the branch tip. Removing one prunes the worktree's record and
//!   deletes its folder; its branch is kept (that is where its work lives until integrated).
//!   [`Repository::prune_task_worktrees`] removes the leftovers of a killed run, keeping the
//!   branches.
//! - Integration never writes a half-merged tree: the task's commit is applied onto the tip
//!   with a three-way merge in memory ([`Repository::apply_onto`]); a clean result is a tree,
//!   a conflict is the list of conflicting paths and nothing is written anywhere.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, WorktreeAddOptions, WorktreePruneOptions};

use super::Repository;
use crate::error::{Error, Result};

/// The prefix of kern's task branches and worktree names.
pub const TASK_BRANCH_PREFIX: &str = "kern/";

/// The result of applying a task's commit onto the tip in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The merged tree, ready to be committed.
    Clean(Oid),
    /// The paths that conflict; nothing was written.
    Conflict(Vec<String>),
}

impl Repository {
    /// Creates a linked worktree at `path` on a new branch `kern/<slug>` from HEAD (a branch
    /// left by an earlier run is reset to HEAD first, when it holds nothing HEAD lacks).
    pub fn add_task_worktree(&self, slug: &str, path: &Path) -> Result<PathBuf> {
        let branch_name = format!("{TASK_BRANCH_PREFIX}{slug}");
        let head = self
            .repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(|e| Error::git("reading HEAD for a task worktree", e))?;
        let branch = match self.repo.find_branch(&branch_name, BranchType::Local) {
            Ok(b) => b,
            Err(_) => self
                .repo
                .branch(&branch_name, &head, false)
                .map_err(|e| Error::git(format!("creating branch `{branch_name}`"), e))?,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let mut opts = WorktreeAddOptions::new();
        let reference = branch.into_reference();
        opts.reference(Some(&reference));
        let name = worktree_name(slug);
        let worktree = self
            .repo
            .worktree(&name, path, Some(&opts))
            .map_err(|e| Error::git(format!("adding the task worktree `{}`", path.display()), e))?;
        Ok(worktree.path().to_path_buf())
    }

    /// Removes the task worktree of `slug` (its folder and git's record of it); its branch stays.
    pub fn remove_task_worktree(&self, slug: &str) -> Result<()> {
        let name = worktree_name(slug);
        let Ok(worktree) = self.repo.find_worktree(&name) else {
            return Ok(());
        };
        let path = worktree.path().to_path_buf();
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        }
        let mut opts = WorktreePruneOptions::new();
        opts.valid(true).locked(true).working_tree(true);
        worktree
            .prune(Some(&mut opts))
            .map_err(|e| Error::git(format!("pruning the task worktree `{name}`"), e))
    }

    /// Removes every kern task worktree (the leftovers of a killed run); returns their names.
    /// Their branches stay.
    pub fn prune_task_worktrees(&self) -> Result<Vec<String>> {
        let names = self
            .repo
            .worktrees()
            .map_err(|e| Error::git("listing worktrees", e))?;
        let mut removed = Vec::new();
        for name in names.iter().flatten().flatten() {
            if let Some(slug) = name.strip_prefix("kern-") {
                self.remove_task_worktree(slug)?;
                removed.push(name.to_string());
            }
        }
        Ok(removed)
    }

    /// Applies the change `commit` made (against its first parent) onto `onto`, in memory.
    pub fn apply_onto(&self, commit: Oid, onto: Oid) -> Result<Applied> {
        let git = |what: &str| {
            let what = what.to_string();
            move |e: git2::Error| Error::git(what.clone(), e)
        };
        let theirs = self
            .repo
            .find_commit(commit)
            .map_err(git("reading the task's commit"))?;
        let ours = self
            .repo
            .find_commit(onto)
            .map_err(git("reading the branch tip"))?;
        let mut index = self
            .repo
            .cherrypick_commit(&theirs, &ours, 0, None)
            .map_err(git("applying the task's commit"))?;
        if index.has_conflicts() {
            let mut paths: Vec<String> = index
                .conflicts()
                .map_err(git("listing conflicts"))?
                .flatten()
                .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect();
            paths.sort();
            paths.dedup();
            return Ok(Applied::Conflict(paths));
        }
        let tree = index
            .write_tree_to(&self.repo)
            .map_err(git("writing the applied tree"))?;
        Ok(Applied::Clean(tree))
    }
}

/// The git worktree name of a task: `kern-<slug>`.
fn worktree_name(slug: &str) -> String {
    format!("kern-{slug}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn commit_file(git: &git2::Repository, path: &str, text: &str, message: &str) -> Oid {
        let top = git.workdir().unwrap();
        fs::write(top.join(path), text).unwrap();
        let mut index = git.index().unwrap();
        index.add_path(Path::new(path)).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git.signature().unwrap();
        let parent = git.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        git.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    fn repo() -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(dir.path().join("main")).unwrap();
        let mut cfg = git.config().unwrap();
        cfg.set_str("user.name", "T").unwrap();
        cfg.set_str("user.email", "t@example.com").unwrap();
        commit_file(&git, "a.txt", "one\ntwo\nthree\n", "initial");
        (dir, git)
    }

    #[test]
    fn a_task_worktree_comes_and_goes_and_its_branch_stays() {
        let (dir, git) = repo();
        let repo = Repository::discover(git.workdir().unwrap()).unwrap();
        let path = dir.path().join("state/worktrees/alpha");
        let made = repo.add_task_worktree("alpha", &path).unwrap();
        assert!(made.join("a.txt").exists());
        let wt = git2::Repository::open(&made).unwrap();
        assert_eq!(wt.head().unwrap().shorthand().unwrap(), "kern/alpha");
        repo.remove_task_worktree("alpha").unwrap();
        assert!(!path.exists());
        assert!(git.find_branch("kern/alpha", BranchType::Local).is_ok());
        // Again, on the branch that stayed; then pruned as a leftover.
        repo.add_task_worktree("alpha", &path).unwrap();
        assert_eq!(repo.prune_task_worktrees().unwrap(), vec!["kern-alpha"]);
        assert!(!path.exists());
    }

    #[test]
    fn a_commit_applies_onto_a_moved_tip_or_names_its_conflicts() {
        let (_dir, git) = repo();
        let repo = Repository::discover(git.workdir().unwrap()).unwrap();
        let base = git.head().unwrap().target().unwrap();
        // The task changed line one; meanwhile the branch changed line three.
        let task = commit_file(&git, "a.txt", "ONE\ntwo\nthree\n", "task");
        git.reference("refs/heads/master", base, true, "").unwrap();
        git.set_head("refs/heads/master").unwrap();
        git.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
            .unwrap();
        let tip = commit_file(&git, "a.txt", "one\ntwo\nTHREE\n", "tip");
        let Applied::Clean(tree) = repo.apply_onto(task, tip).unwrap() else {
            panic!("expected a clean apply");
        };
        let tree = git.find_tree(tree).unwrap();
        let blob = git.find_blob(tree.get_name("a.txt").unwrap().id()).unwrap();
        assert_eq!(blob.content(), b"ONE\ntwo\nTHREE\n");
        // The same line changed both ways: a conflict, nothing written.
        let other = commit_file(&git, "a.txt", "uno\ntwo\nTHREE\n", "other");
        assert_eq!(
            repo.apply_onto(task, other).unwrap(),
            Applied::Conflict(vec!["a.txt".into()])
        );
        assert_eq!(git.head().unwrap().target(), Some(other));
    }
}
