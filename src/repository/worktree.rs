//! Task worktrees for parallel tasks (DESIGN.md section 15), and putting a task's commit onto
//! the run's branch in memory.
//!
//! Decisions a reader must know:
//! - A task worktree is a linked git worktree created and removed through libgit2 (created by
//!   `git worktree add` in a reftable repository, whose worktrees keep their HEAD in their own
//!   reftable), on its own branch `kern/<task>` from the branch tip. Removing one prunes the worktree's record and
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
pub(crate) const TASK_BRANCH_PREFIX: &str = "kern/";

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
        if self
            .repo
            .config()
            .is_ok_and(|c| super::reftable::is_reftable(&c))
        {
            // libgit2 would make the worktree's HEAD a file, which git cannot read there.
            return self.git_worktree_add(&worktree_name(slug), path, &branch_name);
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

    /// [`Repository::add_task_worktree`] in a reftable repository, by git itself: `git worktree
    /// add` names a worktree after its folder, so it is made as `<name>` beside `path` and
    /// moved there (the record keeps its name). No hook runs, as through libgit2.
    fn git_worktree_add(&self, name: &str, path: &Path, branch: &str) -> Result<PathBuf> {
        let made = path.with_file_name(name);
        let run = |args: &[&std::ffi::OsStr]| -> Result<()> {
            let out = std::process::Command::new("git")
                .args(["-c", "core.hooksPath=/dev/null"])
                .args(args)
                .current_dir(&self.top)
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| Error::io(Path::new("git"), e))?;
            if out.status.success() {
                return Ok(());
            }
            Err(Error::Repository(format!(
                "git: adding the task worktree `{}`: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        };
        let os = std::ffi::OsStr::new;
        run(&[
            os("worktree"),
            os("add"),
            os("--quiet"),
            made.as_os_str(),
            os(branch),
        ])?;
        if made != path {
            run(&[
                os("worktree"),
                os("move"),
                made.as_os_str(),
                path.as_os_str(),
            ])?;
        }
        path.canonicalize().map_err(|e| Error::io(path, e))
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

    /// The slugs of the task worktrees git knows of.
    pub fn task_worktrees(&self) -> Result<Vec<String>> {
        let names = self
            .repo
            .worktrees()
            .map_err(|e| Error::git("listing worktrees", e))?;
        Ok(names
            .iter()
            .flatten()
            .flatten()
            .filter_map(|n| n.strip_prefix("kern-").map(str::to_string))
            .collect())
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

    /// The commit the task branch `kern/<slug>` points to, when it exists.
    pub fn task_branch(&self, slug: &str) -> Option<Oid> {
        self.repo
            .find_branch(&format!("{TASK_BRANCH_PREFIX}{slug}"), BranchType::Local)
            .ok()
            .and_then(|b| b.get().target())
    }

    /// True when a ref under `prefix` (`refs/kern/attempts/<slug>/`) points at the commit
    /// `sha`: `kern reject` kept that work there.
    pub fn kept_under(&self, prefix: &str, sha: &str) -> bool {
        let Ok(oid) = super::parse_oid(sha) else {
            return false;
        };
        self.repo
            .references_glob(&format!("{prefix}*"))
            .is_ok_and(|mut refs| refs.any(|r| r.is_ok_and(|r| r.target() == Some(oid))))
    }

    /// Points the task branch `kern/<slug>` at HEAD for a fresh start. What it held that HEAD
    /// lacks is kept first under `keep` (returned); a branch HEAD already contains is simply
    /// moved.
    pub fn fresh_task_branch(&self, slug: &str, keep: &str) -> Result<Option<String>> {
        let Some(head) = self.head_oid() else {
            return Ok(None);
        };
        let Some(tip) = self.task_branch(slug) else {
            return Ok(None);
        };
        let contained = self.contains(head, tip);
        let kept = if contained {
            None
        } else {
            self.set_ref(keep, tip, "kern: a task branch's earlier work, kept")?;
            Some(keep.to_string())
        };
        self.set_ref(
            &format!("refs/heads/{TASK_BRANCH_PREFIX}{slug}"),
            head,
            "kern: a fresh start for the task",
        )?;
        Ok(kept)
    }

    /// Deletes the task branch `kern/<slug>` (its work is on the run's branch, or kept under
    /// `refs/kern/`).
    pub fn delete_task_branch(&self, slug: &str) -> Result<()> {
        match self
            .repo
            .find_branch(&format!("{TASK_BRANCH_PREFIX}{slug}"), BranchType::Local)
        {
            Ok(mut b) => b
                .delete()
                .map_err(|e| Error::git(format!("deleting the branch `kern/{slug}`"), e)),
            Err(_) => Ok(()),
        }
    }

    /// The paths whose entries differ between the trees `from` and `to` (`/`-separated).
    pub fn paths_between(&self, from: Oid, to: Oid) -> Result<Vec<String>> {
        let paths = super::tree_diff::changed_paths(&self.repo, Some(from), Some(to))
            .map_err(|e| Error::git("comparing two trees", e))?;
        let mut paths: Vec<String> = paths
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// Writes exactly `paths` as the tree `tree` has them into the work tree and the index,
    /// through the smudge filters (a path the tree lacks is removed). Nothing else is touched.
    /// `false` when a path changed in the work tree since its last commit (the person saving
    /// it this very moment): then nothing was written — a conflict, never an overwrite.
    pub fn checkout_paths(&self, tree: Oid, paths: &[String]) -> Result<bool> {
        if paths.is_empty() {
            return Ok(true);
        }
        let git = |e: git2::Error| Error::git("writing a task's files into the work tree", e);
        let tree = self.repo.find_tree(tree).map_err(git)?;
        let (present, absent): (Vec<&String>, Vec<&String>) = paths
            .iter()
            .partition(|p| tree.get_path(Path::new(p.as_str())).is_ok());
        // Deletions are checked first, so a refusal below leaves everything unwritten.
        let changed = |p: &str| {
            self.repo.status_file(Path::new(p)).is_ok_and(|s| {
                s.intersects(git2::Status::WT_MODIFIED | git2::Status::WT_TYPECHANGE)
            })
        };
        if absent.iter().any(|p| changed(p)) {
            return Ok(false);
        }
        if !present.is_empty() {
            let mut opts = git2::build::CheckoutBuilder::new();
            // Safe, not forced: libgit2 checks every path before it writes any.
            opts.safe().disable_pathspec_match(true);
            for p in &present {
                opts.path(p.as_str());
            }
            match self.repo.checkout_tree(tree.as_object(), Some(&mut opts)) {
                Ok(()) => {}
                Err(e) if e.code() == git2::ErrorCode::Conflict => return Ok(false),
                Err(e) => return Err(git(e)),
            }
        }
        if !absent.is_empty() {
            let mut index = self.repo.index().map_err(git)?;
            index.read(true).map_err(git)?;
            for p in absent {
                let full = self.top.join(p);
                match std::fs::remove_file(&full) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(&full, e)),
                }
                let _ = index.remove_path(Path::new(p.as_str()));
            }
            self.write_index(&mut index, "writing the index", None)?;
        }
        Ok(true)
    }

    /// Applies the change from `base` to `work` (a task's work, however many commits) onto
    /// `onto`, in memory: a three-way merge of the trees with `base` as the ancestor.
    pub fn apply_onto(&self, base: Oid, work: Oid, onto: Oid) -> Result<Applied> {
        let git = |what: &str| {
            let what = what.to_string();
            move |e: git2::Error| Error::git(what.clone(), e)
        };
        let tree_of = |oid: Oid, what: &str| {
            self.repo
                .find_commit(oid)
                .and_then(|c| c.tree())
                .map_err(git(what))
        };
        let ancestor = tree_of(base, "reading the task's starting commit")?;
        let theirs = tree_of(work, "reading the task's work")?;
        let ours = tree_of(onto, "reading the branch tip")?;
        let mut index = self
            .repo
            .merge_trees(&ancestor, &ours, &theirs, None)
            .map_err(git("applying the task's work"))?;
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
        // The task changed line one (in two commits); meanwhile the branch changed line three.
        commit_file(&git, "a.txt", "ONE\ntwo\nthree\n", "task, 1");
        let task = commit_file(&git, "b.txt", "b\n", "task, 2");
        git.reference("refs/heads/master", base, true, "").unwrap();
        git.set_head("refs/heads/master").unwrap();
        git.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
            .unwrap();
        let tip = commit_file(&git, "a.txt", "one\ntwo\nTHREE\n", "tip");
        let Applied::Clean(tree) = repo.apply_onto(base, task, tip).unwrap() else {
            panic!("expected a clean apply");
        };
        let tree = git.find_tree(tree).unwrap();
        let blob = git.find_blob(tree.get_name("a.txt").unwrap().id()).unwrap();
        assert_eq!(blob.content(), b"ONE\ntwo\nTHREE\n");
        assert!(
            tree.get_name("b.txt").is_some(),
            "every commit of the work applies"
        );
        // The same line changed both ways: a conflict, nothing written.
        let other = commit_file(&git, "a.txt", "uno\ntwo\nTHREE\n", "other");
        assert_eq!(
            repo.apply_onto(base, task, other).unwrap(),
            Applied::Conflict(vec!["a.txt".into()])
        );
        assert_eq!(git.head().unwrap().target(), Some(other));
    }

    #[test]
    fn a_tasks_work_is_committed_on_its_branch_applied_and_written_into_the_main_tree() {
        let (dir, git) = repo();
        fs::write(git.workdir().unwrap().join("gone.txt"), "bye\n").unwrap();
        commit_file(&git, "gone.txt", "bye\n", "gone");
        let main = Repository::discover(git.workdir().unwrap()).unwrap();
        let base = git.head().unwrap().target().unwrap();
        let made = main
            .add_task_worktree("alpha", &dir.path().join("state/alpha"))
            .unwrap();
        let mut job = Repository::discover(&made).unwrap();
        job.set_options(super::super::GitOptions {
            own_files: vec![PathBuf::from("SPEC.md")],
            ..Default::default()
        });
        fs::write(made.join("a.txt"), "ONE\ntwo\nthree\n").unwrap();
        fs::write(made.join("new.txt"), "new\n").unwrap();
        fs::write(made.join("SPEC.md"), "- [ ] a copy nobody owns\n").unwrap();
        fs::remove_file(made.join("gone.txt")).unwrap();
        let work = job
            .commit_work("kern: work", &[PathBuf::from("SPEC.md")])
            .unwrap()
            .sha
            .unwrap();
        assert_eq!(main.task_branch("alpha"), Some(work));
        assert!(
            made.join("SPEC.md").exists(),
            "the copy stays out of the commit"
        );
        // Meanwhile the run's branch moved on; the work applies onto it.
        let tip = commit_file(&git, "a.txt", "one\ntwo\nTHREE\n", "tip");
        let Applied::Clean(tree) = main.apply_onto(base, work, tip).unwrap() else {
            panic!("expected a clean apply");
        };
        let tip_tree = git.find_commit(tip).unwrap().tree_id();
        let paths = main.paths_between(tip_tree, tree).unwrap();
        assert_eq!(paths, vec!["a.txt", "gone.txt", "new.txt"]);
        // A file changed in the work tree meanwhile: nothing is written.
        let top = git.workdir().unwrap();
        fs::write(top.join("a.txt"), "mine\n").unwrap();
        assert!(!main.checkout_paths(tree, &paths).unwrap());
        assert_eq!(fs::read_to_string(top.join("a.txt")).unwrap(), "mine\n");
        assert!(!top.join("new.txt").exists());
        assert!(top.join("gone.txt").exists());
        fs::write(top.join("a.txt"), "one\ntwo\nTHREE\n").unwrap();
        assert!(main.checkout_paths(tree, &paths).unwrap());
        assert_eq!(
            fs::read_to_string(top.join("a.txt")).unwrap(),
            "ONE\ntwo\nTHREE\n"
        );
        assert_eq!(fs::read_to_string(top.join("new.txt")).unwrap(), "new\n");
        assert!(!top.join("gone.txt").exists());
        assert!(!top.join("SPEC.md").exists());
        // A fresh start keeps what the branch held that HEAD lacks.
        let kept = main
            .fresh_task_branch("alpha", "refs/kern/attempts/alpha/1")
            .unwrap();
        assert_eq!(kept.as_deref(), Some("refs/kern/attempts/alpha/1"));
        assert_eq!(main.task_branch("alpha"), Some(tip));
        main.remove_task_worktree("alpha").unwrap();
        main.delete_task_branch("alpha").unwrap();
        assert_eq!(main.task_branch("alpha"), None);
    }
}
