//! Nothing is destroyed, only set aside: before kern takes anything out of the work tree, it
//! saves it as a commit under `refs/kern/` (DESIGN.md section 8), so `git show <ref>` finds
//! every byte, and `git for-each-ref refs/kern` lists everything kern ever set aside.
//!
//! The one decision a reader must know: a saved commit is built from an in-memory index — HEAD's
//! tree with exactly the given paths replaced by what the work tree holds now (files with their
//! mode, symlinks, untracked files; a path that is gone is a deletion) — and it never touches
//! the person's index, stash or branches. Its parent is HEAD, so `git diff <ref>^ <ref>` shows
//! exactly what was set aside. Paths are bytes end to end: a name that is not UTF-8 is saved
//! and restored like any other. Blobs are written from the files directly (no clean filter):
//! what is saved is the bytes that were in the work tree. Putting the paths back writes the
//! person's index, so it waits out an `index.lock` held for a moment, as the commit does.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::{Index, Oid};

use super::Repository;
use super::index_entries::{MODE_LINK, bare_entry};
use crate::error::{Error, Result};

/// Where kern keeps what it set aside.
pub(crate) const KERN_REFS: &str = "refs/kern/";

const MODE_FILE: u32 = 0o100_644;
const MODE_EXEC: u32 = 0o100_755;

impl Repository {
    /// Saves the work tree's content of `paths` (relative to the top) as a commit on HEAD under
    /// `refname` (created or moved), and returns the commit. Nothing else changes.
    pub fn save_paths(&self, refname: &str, paths: &[PathBuf], message: &str) -> Result<Oid> {
        let _timed = super::Timed::start("save");
        let git = |what: &str| {
            let what = what.to_string();
            move |e: git2::Error| Error::git(format!("saving under `{refname}`: {what}"), e)
        };
        let mut index = Index::new_ext(self.repo.object_format()).map_err(git("a new index"))?;
        let parent = match self.head_oid() {
            Some(oid) => Some(self.repo.find_commit(oid).map_err(git("reading HEAD"))?),
            None => None,
        };
        if let Some(parent) = &parent {
            index
                .read_tree(&parent.tree().map_err(git("reading HEAD's tree"))?)
                .map_err(git("reading HEAD's tree"))?;
        }
        for rel in paths {
            let full = self.top.join(rel);
            match self.blob_of(&full)? {
                Some((mode, id)) => index
                    .add(&bare_entry(rel.as_os_str().as_bytes().to_vec(), mode, id))
                    .map_err(git("adding a file"))?,
                None => {
                    // Gone from the work tree: a deletion (or a folder, which git only knows
                    // by its files).
                    let _ = index.remove_path(rel);
                    let _ = index.remove_dir(rel, 0);
                }
            }
        }
        let tree_id = index
            .write_tree_to(&self.repo)
            .map_err(git("writing the tree"))?;
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(git("reading the tree"))?;
        let sig = self.kern_signature()?;
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let oid = self
            .repo
            .commit(None, &sig, &sig, message, &tree, &parents)
            .map_err(git("writing the commit"))?;
        self.repo
            .reference(refname, oid, true, message.lines().next().unwrap_or("kern"))
            .map_err(git("writing the ref"))?;
        Ok(oid)
    }

    /// Puts exactly `paths` back as HEAD has them, in the work tree and the index: a path HEAD
    /// lacks is removed (and the folders it needed, when now empty). Save them first.
    pub fn restore_paths(&self, paths: &[PathBuf]) -> Result<()> {
        let _timed = super::Timed::start("restore");
        self.restore_paths_in_index(paths).inspect_err(|_| {
            // Half-done changes to the in-memory index are never written: read it again.
            if let Ok(mut index) = self.repo.index() {
                let _ = index.read(true);
            }
        })
    }

    fn restore_paths_in_index(&self, paths: &[PathBuf]) -> Result<()> {
        let head_tree = self.tree_of(self.head_oid(), "reading HEAD's tree")?;
        let mut index = self.index_from_disk(false)?;
        for rel in paths {
            let full = self.top.join(rel);
            let from_head = head_tree.as_ref().and_then(|t| t.get_path(rel).ok());
            remove_any(&full)?;
            match from_head {
                Some(item) if item.kind() == Some(git2::ObjectType::Blob) => {
                    self.write_entry(rel, &item, "HEAD")?;
                    index.add_path(rel).map_err(|e| {
                        Error::git(format!("restoring `{}` in the index", rel.display()), e)
                    })?;
                }
                _ => {
                    let _ = index.remove_path(rel);
                    let _ = index.remove_dir(rel, 0);
                    self.prune_empty_folders(&full);
                }
            }
        }
        self.write_index(&mut index, "writing the index", None)
    }

    /// Writes the work tree's `rel` as `item` (a blob of `whence`) has it: its bytes, its mode,
    /// a symlink as a symlink; the folders it needs are made.
    fn write_entry(&self, rel: &Path, item: &git2::TreeEntry<'_>, whence: &str) -> Result<()> {
        let full = self.top.join(rel);
        let mode = u32::try_from(item.filemode()).unwrap_or(MODE_FILE);
        let blob = self
            .repo
            .find_blob(item.id())
            .map_err(|e| Error::git(format!("reading `{}` from {whence}", rel.display()), e))?;
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        if mode == MODE_LINK {
            std::os::unix::fs::symlink(OsStr::from_bytes(blob.content()), &full)
                .map_err(|e| Error::io(&full, e))?;
        } else {
            fs::write(&full, blob.content()).map_err(|e| Error::io(&full, e))?;
            let perm = if mode == MODE_EXEC { 0o755 } else { 0o644 };
            fs::set_permissions(&full, fs::Permissions::from_mode(perm))
                .map_err(|e| Error::io(&full, e))?;
        }
        Ok(())
    }

    /// The paths among `paths` whose work-tree bytes differ from what commit `saved` holds:
    /// changed, gone, or absent from the commit.
    pub fn differ_from(&self, saved: Oid, paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
        let tree = self.tree_of(Some(saved), "reading a saved commit")?;
        let mut differ = Vec::new();
        for rel in paths {
            let kept = tree
                .as_ref()
                .and_then(|t| t.get_path(rel).ok())
                .map(|e| e.id());
            let now = self.blob_of(&self.top.join(rel))?.map(|(_, id)| id);
            if kept.is_none() || kept != now {
                differ.push(rel.clone());
            }
        }
        Ok(differ)
    }

    /// Puts `paths` back in the work tree as commit `saved` holds them (the index is left
    /// alone: they are the task's uncommitted work); a path the commit lacks is removed.
    pub fn put_back_from(&self, saved: Oid, paths: &[PathBuf]) -> Result<()> {
        let tree = self.tree_of(Some(saved), "reading a saved commit")?;
        for rel in paths {
            let full = self.top.join(rel);
            remove_any(&full)?;
            match tree.as_ref().and_then(|t| t.get_path(rel).ok()) {
                Some(item) if item.kind() == Some(git2::ObjectType::Blob) => {
                    self.write_entry(rel, &item, "a saved commit")?;
                }
                _ => self.prune_empty_folders(&full),
            }
        }
        Ok(())
    }

    /// The refs under `prefix` (e.g. `refs/kern/attempts/add-the-parser/`), sorted.
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .repo
            .references_glob(&format!("{prefix}*"))
            .map_err(|e| Error::git("listing refs", e))?
            .filter_map(|r| r.ok().and_then(|r| r.name().ok().map(str::to_string)))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Points `refname` at `oid` (created or moved), with a reflog message.
    pub fn set_ref(&self, refname: &str, oid: Oid, message: &str) -> Result<()> {
        self.repo
            .reference(refname, oid, true, message)
            .map(|_| ())
            .map_err(|e| Error::git(format!("writing `{refname}`"), e))
    }

    /// Deletes the refs `names` that exist (kern's own bookkeeping refs); a missing one is fine.
    pub fn delete_refs(&self, names: &[String]) -> Result<()> {
        for name in names {
            if let Ok(mut r) = self.repo.find_reference(name) {
                r.delete()
                    .map_err(|e| Error::git(format!("deleting `{name}`"), e))?;
            }
        }
        Ok(())
    }

    /// The commit the ref `name` points to, `None` when there is no such ref.
    pub fn ref_target(&self, name: &str) -> Option<Oid> {
        self.repo.refname_to_id(name).ok()
    }

    /// The blob of a work-tree path (mode and id), `None` when it is gone or a folder.
    fn blob_of(&self, full: &Path) -> Result<Option<(u32, Oid)>> {
        let Ok(meta) = fs::symlink_metadata(full) else {
            return Ok(None);
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(full).map_err(|e| Error::io(full, e))?;
            let id = self
                .repo
                .blob(target.as_os_str().as_bytes())
                .map_err(|e| Error::git(format!("saving `{}`", full.display()), e))?;
            return Ok(Some((MODE_LINK, id)));
        }
        if !meta.is_file() {
            return Ok(None);
        }
        let id = self
            .repo
            .blob_path(full)
            .map_err(|e| Error::git(format!("saving `{}`", full.display()), e))?;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            MODE_EXEC
        } else {
            MODE_FILE
        };
        Ok(Some((mode, id)))
    }

    /// The signature of kern's own saved commits: the person's identity when git has one.
    pub(super) fn kern_signature(&self) -> Result<git2::Signature<'static>> {
        self.repo
            .signature()
            .map(|s| s.to_owned())
            .or_else(|_| git2::Signature::now("kern", "kern@localhost"))
            .map_err(|e| Error::git("making a signature for a saved commit", e))
    }

    /// Removes the folders above `full` that are now empty, up to the top.
    fn prune_empty_folders(&self, full: &Path) {
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.top || !d.starts_with(&self.top) || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

/// Removes a file, symlink or folder; a missing path is fine.
fn remove_any(full: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(full) {
        Err(_) => return Ok(()),
        Ok(m) if m.is_dir() => fs::remove_dir_all(full),
        Ok(_) => fs::remove_file(full),
    };
    result.map_err(|e| Error::io(full, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(dir.path()).unwrap();
        let mut cfg = git.config().unwrap();
        cfg.set_str("user.name", "T").unwrap();
        cfg.set_str("user.email", "t@example.com").unwrap();
        fs::write(dir.path().join("kept.txt"), "kept\n").unwrap();
        fs::write(dir.path().join("changed.txt"), "old\n").unwrap();
        let mut index = git.index().unwrap();
        index.add_path(Path::new("kept.txt")).unwrap();
        index.add_path(Path::new("changed.txt")).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git.signature().unwrap();
        git.commit(Some("HEAD"), &sig, &sig, "initial", &tree, &[])
            .unwrap();
        let repo = Repository::discover(dir.path()).unwrap();
        (dir, repo)
    }

    #[test]
    fn saved_paths_hold_every_byte_and_restoring_puts_head_back() {
        let (dir, repo) = repo();
        let top = dir.path();
        fs::write(top.join("changed.txt"), "new\n").unwrap();
        fs::create_dir_all(top.join("made/deep")).unwrap();
        fs::write(top.join("made/deep/new.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(
            top.join("made/deep/new.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("kept.txt", top.join("link")).unwrap();
        let odd = PathBuf::from(OsStr::from_bytes(b"caf\xe9.txt"));
        fs::write(top.join(&odd), "latin-1 name\n").unwrap();
        fs::remove_file(top.join("kept.txt")).unwrap();
        let paths = vec![
            PathBuf::from("changed.txt"),
            PathBuf::from("made/deep/new.sh"),
            PathBuf::from("link"),
            odd.clone(),
            PathBuf::from("kept.txt"),
        ];
        let head = repo.head_oid().unwrap();
        let oid = repo
            .save_paths("refs/kern/saved/t/1", &paths, "kern: saved\n")
            .unwrap();
        let commit = repo.git().find_commit(oid).unwrap();
        assert_eq!(commit.parent_id(0).unwrap(), head);
        let tree = commit.tree().unwrap();
        let blob = |p: &Path| {
            let e = tree.get_path(p).unwrap();
            (
                e.filemode(),
                repo.git().find_blob(e.id()).unwrap().content().to_vec(),
            )
        };
        assert_eq!(
            blob(Path::new("changed.txt")),
            (0o100_644, b"new\n".to_vec())
        );
        assert_eq!(
            blob(Path::new("made/deep/new.sh")),
            (0o100_755, b"#!/bin/sh\n".to_vec())
        );
        assert_eq!(blob(Path::new("link")), (0o120_000, b"kept.txt".to_vec()));
        assert_eq!(blob(&odd).1, b"latin-1 name\n".to_vec());
        assert!(
            tree.get_path(Path::new("kept.txt")).is_err(),
            "the deletion is saved"
        );
        assert_eq!(
            repo.git().refname_to_id("refs/kern/saved/t/1").unwrap(),
            oid
        );
        assert_eq!(repo.head_oid(), Some(head), "HEAD did not move");

        repo.restore_paths(&paths).unwrap();
        assert_eq!(
            fs::read_to_string(top.join("changed.txt")).unwrap(),
            "old\n"
        );
        assert_eq!(fs::read_to_string(top.join("kept.txt")).unwrap(), "kept\n");
        assert!(!top.join("made").exists(), "created folders pruned");
        assert!(fs::symlink_metadata(top.join("link")).is_err());
        assert!(fs::symlink_metadata(top.join(&odd)).is_err());
        assert!(repo.dirty_paths(&[]).unwrap().is_empty());
        assert_eq!(
            repo.refs_under("refs/kern/saved/").unwrap(),
            vec!["refs/kern/saved/t/1".to_string()]
        );
    }
}
