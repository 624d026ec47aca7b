//! kern's commit: stage everything `.gitignore` allows except sensitive and excluded files,
//! run the hooks, commit on HEAD and verify.
//!
//! The one decision a reader must know: the index is built from the person's current index
//! (so git's stat cache saves re-hashing clean files), updated from the work tree, and then
//! checked entry by entry against HEAD's tree — every staged change, also one an agent staged
//! itself with `git add`, is judged, and a left-out path gets HEAD's entry back. A sensitive
//! file already tracked and unchanged stays; a change to it (edit or re-add) is left out. A
//! deletion is committed even for a sensitive name: removing a file cannot leak it. Paths dirty
//! before the task (`--allow-dirty`) are left out of the commit and their staged state is put
//! back afterwards, so the person's own staging survives kern's commit. An untracked folder
//! holding its own repository is left out too (git would store a gitlink nobody can clone).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use git2::{Delta, ErrorCode, Index, IndexAddOption, IndexEntry, IndexTime, Oid, Tree};

use super::hooks::hook_present;
use super::{Repository, covers};
use crate::error::{Error, Result};
use crate::repository::sensitive;

/// What to commit.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The message (cleaned of trailing whitespace as `git commit -m` does).
    pub message: &'a str,
    /// Paths left out of the commit: those dirty before the task under `--allow-dirty`
    /// (relative to the top, or absolute; a folder covers what it holds).
    pub exclude: &'a [PathBuf],
    /// Skip the `pre-commit` and `commit-msg` hooks (`--no-verify`).
    pub no_verify: bool,
}

/// What the commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The new commit; `None` when there was nothing to commit.
    pub sha: Option<Oid>,
    /// Changed files that were not committed, and why.
    pub left_out: Vec<LeftOut>,
}

/// A changed file kern did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Relative, `/`-separated path.
    pub path: String,
    /// Why, e.g. `sensitive file name (.env)` or `looks like a GitHub token`.
    pub reason: String,
}

const DIRTY_BEFORE: &str = "dirty before the task (--allow-dirty)";
const NESTED_REPO: &str = "a nested git repository (add it as a submodule yourself)";
const MODE_LINK: u32 = 0o120000;
const MODE_GITLINK: u32 = 0o160000;

impl Repository {
    /// Commits every allowed change on HEAD (see the module docs). Nothing changed: `sha` is
    /// `None` and no commit is made. A failing hook: [`Error::HookFailed`], no commit, and the
    /// index as it was before.
    pub fn commit(&self, req: &CommitRequest<'_>) -> Result<CommitOutcome> {
        let author = self
            .repo
            .author_from_env()
            .map_err(|_| Error::GitIdentity)?;
        let committer = self
            .repo
            .committer_from_env()
            .map_err(|_| Error::GitIdentity)?;
        self.ensure_no_operation_in_progress()?;
        let exclude: Vec<String> = req
            .exclude
            .iter()
            .filter_map(|p| self.relative(p))
            .collect();
        let ctx = |what: &'static str| move |e: git2::Error| self.index_error(what, e);

        let head_commit = match self.head_oid() {
            Some(oid) => Some(self.repo.find_commit(oid).map_err(ctx("reading HEAD"))?),
            None => None,
        };
        let head_tree = match &head_commit {
            Some(c) => Some(c.tree().map_err(ctx("reading HEAD's tree"))?),
            None => None,
        };
        let head_tree_id = head_tree.as_ref().map(Tree::id);

        let index_path = self.repo.path().join("index");
        let saved_index = match std::fs::read(&index_path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&index_path, e)),
        };
        let mut index = self.repo.index().map_err(ctx("opening the index"))?;
        index.read(true).map_err(ctx("reading the index"))?;
        let persons_entries: Vec<(Vec<u8>, Option<IndexEntry>)> =
            excluded_entries(&index, &exclude);

        let mut left_out = BTreeMap::new();
        self.stage(&mut index, &exclude, &mut left_out)?;
        self.sanitize(&mut index, head_tree.as_ref(), &exclude, &mut left_out)?;
        index.write().map_err(ctx("writing the index"))?;
        let mut tree_id = index.write_tree().map_err(ctx("writing the tree"))?;
        let nothing = |left_out: BTreeMap<String, String>| CommitOutcome {
            sha: None,
            left_out: into_left_out(left_out),
        };
        if Some(tree_id) == head_tree_id {
            self.put_back(&mut index, &persons_entries)?;
            return Ok(nothing(left_out));
        }

        // From here on, any failure puts the index back as the person had it.
        let restore = |e: Error| match self.restore_index(&index_path, saved_index.as_deref()) {
            Ok(()) => e,
            Err(restore_error) => Error::Internal(format!(
                "{e}; and the index could not be restored: {restore_error}"
            )),
        };
        let mut message = git2::message_prettify(req.message, None)
            .map_err(|e| restore(Error::git("cleaning the commit message", e)))?;
        if !req.no_verify {
            // Read once: opening the config costs more than the rest of a small commit.
            let hooks = self.hooks_dir();
            let ran = self.run_hook(&hooks, "pre-commit", &[]).map_err(restore)?;
            // A pre-commit hook may stage more (formatters re-adding files): take the index as
            // it left it and judge it again.
            if ran {
                tree_id = self
                    .rejudge(&mut index, head_tree.as_ref(), &exclude, &mut left_out)
                    .map_err(restore)?;
                if Some(tree_id) == head_tree_id {
                    self.put_back(&mut index, &persons_entries)?;
                    return Ok(nothing(left_out));
                }
            }
            message = self.commit_msg_hook(&hooks, &message).map_err(restore)?;
        }
        if message.trim().is_empty() {
            return Err(restore(Error::Repository(
                "the commit message is empty — nothing was committed".into(),
            )));
        }

        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| restore(Error::git("reading the new tree", e)))?;
        let parents: Vec<&git2::Commit<'_>> = head_commit.iter().collect();
        let oid = self
            .repo
            .commit(Some("HEAD"), &author, &committer, &message, &tree, &parents)
            .map_err(|e| restore(self.index_error("creating the commit", e)))?;
        self.verify_commit(oid, tree_id)?;
        self.put_back(&mut index, &persons_entries)?;
        Ok(CommitOutcome {
            sha: Some(oid),
            left_out: into_left_out(left_out),
        })
    }

    /// Adds, updates and removes index entries from the work tree, skipping excluded paths and
    /// files sensitive by name or content (recorded in `left_out`).
    fn stage(
        &self,
        index: &mut Index,
        exclude: &[String],
        left_out: &mut BTreeMap<String, String>,
    ) -> Result<()> {
        let mut judge = |path: &Path, deleting: bool| -> i32 {
            let rel = path.to_string_lossy().into_owned();
            if exclude.iter().any(|e| covers(e, &rel)) {
                left_out.entry(rel).or_insert_with(|| DIRTY_BEFORE.into());
                return 1;
            }
            if deleting {
                return 0;
            }
            // An untracked folder with its own `.git` (an agent's clone): git would add a bare
            // gitlink without `.gitmodules`, which no clone can check out; leave it to the person.
            if rel.ends_with('/') || self.top.join(path).is_dir() {
                let rel = rel.trim_end_matches('/').to_string();
                left_out.entry(rel).or_insert_with(|| NESTED_REPO.into());
                return 1;
            }
            match sensitive::check_file(&self.top.join(path)) {
                Some(finding) => {
                    left_out.entry(rel).or_insert_with(|| finding.to_string());
                    1
                }
                None => 0,
            }
        };
        let top = self.top.clone();
        index
            .add_all(
                ["*"],
                IndexAddOption::DEFAULT,
                Some(&mut |path: &Path, _: &[u8]| judge(path, false)),
            )
            .map_err(|e| self.index_error("staging the work tree", e))?;
        index
            .update_all(
                ["*"],
                Some(&mut |path: &Path, _: &[u8]| {
                    let gone = std::fs::symlink_metadata(top.join(path)).is_err();
                    judge(path, gone)
                }),
            )
            .map_err(|e| self.index_error("staging deletions", e))?;
        Ok(())
    }

    /// Judges every difference between HEAD's tree and the index; an excluded or sensitive
    /// path gets HEAD's entry back (or leaves the index when HEAD lacks it).
    fn sanitize(
        &self,
        index: &mut Index,
        head_tree: Option<&Tree<'_>>,
        exclude: &[String],
        left_out: &mut BTreeMap<String, String>,
    ) -> Result<()> {
        let diff = self
            .repo
            .diff_tree_to_index(head_tree, Some(index), None)
            .map_err(|e| Error::git("comparing the index with HEAD", e))?;
        let mut reverts: Vec<(Vec<u8>, String)> = Vec::new();
        for delta in diff.deltas() {
            let file = delta.new_file();
            let Some(path_bytes) = file.path_bytes().or(delta.old_file().path_bytes()) else {
                continue;
            };
            let rel = String::from_utf8_lossy(path_bytes).into_owned();
            if exclude.iter().any(|e| covers(e, &rel)) {
                reverts.push((path_bytes.to_vec(), DIRTY_BEFORE.into()));
                continue;
            }
            if delta.status() == Delta::Deleted {
                continue;
            }
            let mode = u32::from(file.mode());
            let finding = if mode == MODE_GITLINK {
                None
            } else if mode == MODE_LINK {
                sensitive::sensitive_name(Path::new(&rel))
            } else {
                let blob = self
                    .repo
                    .find_blob(file.id())
                    .map_err(|e| Error::git(format!("reading the staged `{rel}`"), e))?;
                sensitive::check_blob(Path::new(&rel), blob.content())
            };
            if let Some(finding) = finding {
                reverts.push((path_bytes.to_vec(), finding.to_string()));
            }
        }
        for (path_bytes, why) in reverts {
            let rel = String::from_utf8_lossy(&path_bytes).into_owned();
            let from_head = head_tree.and_then(|t| t.get_path(Path::new(&rel)).ok());
            match from_head {
                Some(entry) => index
                    .add(&bare_entry(path_bytes, entry.filemode() as u32, entry.id()))
                    .map_err(|e| Error::git(format!("keeping `{rel}` out of the commit"), e))?,
                None => index
                    .remove_path(Path::new(&rel))
                    .map_err(|e| Error::git(format!("keeping `{rel}` out of the commit"), e))?,
            }
            left_out.entry(rel).or_insert(why);
        }
        Ok(())
    }

    /// Re-reads the index a hook may have changed, judges it again and writes its tree.
    fn rejudge(
        &self,
        index: &mut Index,
        head_tree: Option<&Tree<'_>>,
        exclude: &[String],
        left_out: &mut BTreeMap<String, String>,
    ) -> Result<Oid> {
        index
            .read(true)
            .map_err(|e| self.index_error("reading the index", e))?;
        self.sanitize(index, head_tree, exclude, left_out)?;
        index
            .write()
            .map_err(|e| self.index_error("writing the index", e))?;
        index
            .write_tree()
            .map_err(|e| self.index_error("writing the tree", e))
    }

    /// Runs `commit-msg` on the message in `COMMIT_EDITMSG` (where git puts it, and where
    /// hooks such as commitlint expect it) and returns the message as the hook left it.
    fn commit_msg_hook(&self, hooks: &Path, message: &str) -> Result<String> {
        if !hook_present(hooks, "commit-msg") {
            return Ok(message.to_string());
        }
        let path = self.repo.path().join("COMMIT_EDITMSG");
        std::fs::write(&path, message).map_err(|e| Error::io(&path, e))?;
        self.run_hook(hooks, "commit-msg", &[OsStr::new(&path)])?;
        let edited = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let edited = String::from_utf8_lossy(&edited);
        git2::message_prettify(edited.as_ref(), None)
            .map_err(|e| Error::git("cleaning the commit message", e))
    }

    /// Proves that HEAD now is `oid` and that its tree is `tree_id`.
    fn verify_commit(&self, oid: Oid, tree_id: Oid) -> Result<()> {
        let head = self.head_oid();
        if head != Some(oid) {
            return Err(Error::Internal(format!(
                "after committing {oid}, HEAD is {} — check `git log` before running kern again",
                head.map(|o| o.to_string())
                    .unwrap_or_else(|| "unborn".into())
            )));
        }
        let tree = self
            .repo
            .find_commit(oid)
            .map_err(|e| Error::git("reading the new commit", e))?
            .tree_id();
        if tree != tree_id {
            return Err(Error::Internal(format!(
                "commit {oid} holds tree {tree}, not the staged tree {tree_id}"
            )));
        }
        Ok(())
    }

    /// Puts the person's own index entries back for `--allow-dirty` paths.
    fn put_back(&self, index: &mut Index, entries: &[(Vec<u8>, Option<IndexEntry>)]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        for (path, entry) in entries {
            let result = match entry {
                Some(entry) => index.add(entry),
                None => match index.get_path(Path::new(&*String::from_utf8_lossy(path)), 0) {
                    Some(_) => index.remove_path(Path::new(&*String::from_utf8_lossy(path))),
                    None => Ok(()),
                },
            };
            result.map_err(|e| self.index_error("restoring staged --allow-dirty files", e))?;
        }
        index
            .write()
            .map_err(|e| self.index_error("writing the index", e))
    }

    /// Writes the saved index file back (or removes it when there was none) and reloads it.
    fn restore_index(&self, path: &Path, saved: Option<&[u8]>) -> Result<()> {
        match saved {
            Some(bytes) => crate::atomic_file::write(path, bytes)?,
            None => match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(path, e)),
            },
        }
        let mut index = self
            .repo
            .index()
            .map_err(|e| Error::git("opening the index", e))?;
        index
            .read(true)
            .map_err(|e| Error::git("reading the index", e))
    }

    /// A libgit2 error, with a held `index.lock` (or ref lock) turned into its own error.
    fn index_error(&self, what: &str, e: git2::Error) -> Error {
        if e.code() == ErrorCode::Locked {
            Error::IndexLocked {
                path: self.repo.path().join("index.lock"),
            }
        } else {
            Error::git(what, e)
        }
    }
}

/// The index entries (stage 0) under the excluded paths, with every excluded path that has
/// no entry recorded as `None`.
fn excluded_entries(index: &Index, exclude: &[String]) -> Vec<(Vec<u8>, Option<IndexEntry>)> {
    if exclude.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(Vec<u8>, Option<IndexEntry>)> = index
        .iter()
        .filter(|e| {
            let rel = String::from_utf8_lossy(&e.path);
            exclude.iter().any(|x| covers(x, &rel))
        })
        .map(|e| (e.path.clone(), Some(e)))
        .collect();
    for x in exclude {
        if !out
            .iter()
            .any(|(p, _)| covers(x, &String::from_utf8_lossy(p)))
        {
            out.push((x.as_bytes().to_vec(), None));
        }
    }
    out
}

/// An index entry without stat data: git re-hashes the file on the next status, which is
/// exactly right for an entry whose work-tree file may differ.
fn bare_entry(path: Vec<u8>, mode: u32, id: Oid) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: 0,
        flags_extended: 0,
        path,
    }
}

fn into_left_out(map: BTreeMap<String, String>) -> Vec<LeftOut> {
    map.into_iter()
        .map(|(path, reason)| LeftOut { path, reason })
        .collect()
}
