//! An agent's `git stash` in the run's own work tree (DESIGN.md section 4, "Whose ref is it"):
//! found, its changes put back into the tree, the entry kept under `refs/kern/agent/…` and
//! taken out of `git stash list`.
//!
//! The decision a reader must know: a stash counts as the stage's only when it is new on top
//! of `git stash list` with every entry that was there before still below it, and its base
//! (first parent) is HEAD — the tree went back to HEAD when it was made. Its changes go back
//! with a safe checkout limited to the paths it changed: a path the tree still has as HEAD has
//! it gets the stash's version, a path changed since (the agent, or the person, wrote it after
//! the stash) is left as it is and named, and the stash keeps the other version. Untracked
//! files stashed with `-u` (the third parent) come back where nothing is in their way. Only
//! the new entries leave the list (the reflog of `refs/stash`, as `git stash drop` edits it);
//! the person's older stashes stay exactly as they were.

use std::path::PathBuf;

use git2::{Oid, build::CheckoutBuilder};

use super::Repository;
use crate::error::{Error, Result};

/// The stash ref.
const STASH: &str = "refs/stash";

/// What putting a stash back into the tree did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Unstashed {
    /// Paths the tree now has as the stash had them.
    pub restored: Vec<PathBuf>,
    /// Paths changed since the stash was made, left as they are (the stash keeps its version).
    pub left: Vec<PathBuf>,
}

impl Repository {
    /// The stashes made since `git stash list` had `before` on top (`None`: there was no
    /// stash), newest first: the new entries above `before` whose base is HEAD (see the module
    /// docs). Empty when there are none, or when the list was rewritten otherwise (an entry
    /// dropped, the ref moved elsewhere): that is a shared ref's business.
    pub fn stashes_since(&self, before: Option<Oid>) -> Result<Vec<Oid>> {
        // Reading a reflog makes its file (libgit2): look only when there is a stash, and it
        // moved — never write into a `.git` that is not there.
        let now = self.repo.refname_to_id(STASH).ok();
        if now.is_none() || now == before {
            return Ok(Vec::new());
        }
        let Ok(reflog) = self.repo.reflog(STASH) else {
            return Ok(Vec::new());
        };
        let mut new = Vec::new();
        let mut found_before = before.is_none();
        for entry in reflog.iter() {
            if Some(entry.id_new()) == before {
                found_before = true;
                break;
            }
            new.push(entry.id_new());
        }
        let head = self.head_oid();
        let on_head = |oid: &Oid| {
            self.repo
                .find_commit(*oid)
                .ok()
                .and_then(|c| c.parent_id(0).ok())
                .is_some_and(|base| Some(base) == head)
        };
        if !found_before || new.is_empty() || !new.iter().all(on_head) {
            return Ok(Vec::new());
        }
        Ok(new)
    }

    /// Puts the changes of `stash` back into the work tree (see the module docs). The index
    /// is left as it is: kern stages what it commits itself.
    pub fn unstash(&self, stash: Oid) -> Result<Unstashed> {
        let git = |what: &'static str| move |e: git2::Error| Error::git(what, e);
        let commit = self
            .repo
            .find_commit(stash)
            .map_err(git("reading a stash"))?;
        let base = commit
            .parent(0)
            .and_then(|p| p.tree())
            .map_err(git("reading a stash's base"))?;
        let tree = commit.tree().map_err(git("reading a stash's tree"))?;
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&base), Some(&tree), None)
            .map_err(git("comparing a stash with its base"))?;
        let changed: Vec<PathBuf> = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or(d.old_file().path()))
            .map(PathBuf::from)
            .collect();
        let mut done = self.unstash_paths(&tree, &changed)?;
        // `git stash -u`: the untracked files are the third parent's tree.
        if let Ok(untracked) = commit.parent(2).and_then(|p| p.tree()) {
            let mut files = Vec::new();
            untracked
                .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
                    if entry.kind() == Some(git2::ObjectType::Blob) {
                        files.push(PathBuf::from(format!(
                            "{dir}{}",
                            String::from_utf8_lossy(entry.name_bytes())
                        )));
                    }
                    git2::TreeWalkResult::Ok
                })
                .map_err(git("reading a stash's untracked files"))?;
            let more = self.unstash_paths(&untracked, &files)?;
            done.restored.extend(more.restored);
            done.left.extend(more.left);
        }
        Ok(done)
    }

    /// Checks `paths` of `tree` out into the work tree where the tree has them as HEAD does;
    /// the others are left and listed.
    fn unstash_paths(&self, tree: &git2::Tree<'_>, paths: &[PathBuf]) -> Result<Unstashed> {
        if paths.is_empty() {
            return Ok(Unstashed::default());
        }
        let left = std::cell::RefCell::new(Vec::new());
        let mut options = CheckoutBuilder::new();
        options
            .safe()
            .allow_conflicts(true)
            .update_index(false)
            .recreate_missing(true)
            .disable_pathspec_match(true)
            .notify_on(git2::CheckoutNotificationType::CONFLICT)
            .notify(|_, path, _, _, _| {
                if let Some(path) = path {
                    left.borrow_mut().push(path.to_path_buf());
                }
                true
            });
        for path in paths {
            options.path(path);
        }
        self.repo
            .checkout_tree(tree.as_object(), Some(&mut options))
            .map_err(|e| Error::git("putting a stash's changes back into the tree", e))?;
        drop(options);
        let left = left.into_inner();
        Ok(Unstashed {
            restored: paths
                .iter()
                .filter(|p| !left.contains(p))
                .cloned()
                .collect(),
            left,
        })
    }

    /// Takes the newest `n` entries out of `git stash list`, as `git stash drop` does, leaving
    /// the older ones and `refs/stash` on the newest of them (none left: the ref is deleted).
    pub fn drop_newest_stashes(&self, n: usize) -> Result<()> {
        let git = |what: &'static str| move |e: git2::Error| Error::git(what, e);
        let mut reflog = self
            .repo
            .reflog(STASH)
            .map_err(git("reading `git stash list`"))?;
        for _ in 0..n.min(reflog.len()) {
            reflog
                .remove(0, true)
                .map_err(git("taking a stash out of `git stash list`"))?;
        }
        reflog.write().map_err(git("writing `git stash list`"))?;
        match reflog.get(0).map(|e| e.id_new()) {
            Some(top) => {
                self.repo
                    .reference(STASH, top, true, "kern: the stash list without the agent's")
                    .map_err(git("moving `refs/stash`"))?;
                // Moving the ref logged one more entry: take it out again (as libgit2's own
                // stash drop does).
                let mut reflog = self
                    .repo
                    .reflog(STASH)
                    .map_err(git("reading `git stash list`"))?;
                reflog
                    .remove(0, true)
                    .map_err(git("taking a stash out of `git stash list`"))?;
                reflog.write().map_err(git("writing `git stash list`"))?;
            }
            None => {
                if let Ok(mut stash) = self.repo.find_reference(STASH) {
                    stash.delete().map_err(git("deleting `refs/stash`"))?;
                }
            }
        }
        Ok(())
    }
}
