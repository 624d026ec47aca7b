//! Asking libgit2's status: of the whole tree or of a few paths, with what `git status`
//! does not count as a change taken out. The one place kern calls `git_status_list_new`.
//!
//! The decision a reader must know: libgit2 filters its whole index by a list of paths, but
//! reads only one path's index entries when asked about it as a pathspec; so a few plain
//! paths are asked about one by one, and many paths, or a path a pathspec would read as a
//! pattern, in one list.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{IndexEntry, Oid, Status, StatusOptions};

use super::Repository;
use super::change::Change;
use super::snapshot::Stamp;
use crate::error::{Error, Result};

impl Repository {
    /// libgit2's status, of the whole tree or of exactly `only` (a folder stands for what it
    /// holds), with what git does not count as a change taken out.
    ///
    /// libgit2 reads every index entry to answer a list of paths (it filters the whole
    /// index by the list), but only the entries under one path when it is asked about that
    /// path as a pathspec: a few paths are asked about one by one (100,000 index entries:
    /// milliseconds for each look). A path a pathspec would read as a pattern is never
    /// asked that way.
    pub(super) fn status_of(&self, only: Option<&BTreeSet<PathBuf>>) -> Result<Vec<Change>> {
        let one_by_one = only.is_some_and(one_by_one);
        let mut changes = Vec::new();
        match only {
            Some(paths) if one_by_one => {
                for path in paths {
                    let mut opts = status_options();
                    opts.pathspec(path.as_path());
                    changes.extend(self.statuses_with(&mut opts)?);
                }
            }
            Some(paths) => {
                let mut opts = status_options();
                opts.disable_pathspec_match(true);
                for path in paths {
                    opts.pathspec(path.as_path());
                }
                changes = self.statuses_with(&mut opts)?;
            }
            None => changes = self.statuses_with(&mut status_options())?,
        }
        sort(&mut changes);
        Ok(changes)
    }

    /// libgit2's status with `opts`, what git does not count as a change taken out; unsorted.
    fn statuses_with(&self, opts: &mut StatusOptions) -> Result<Vec<Change>> {
        let statuses = self
            .repo
            .statuses(Some(opts))
            .map_err(|e| Error::git("reading the status of the work tree", e))?;
        let index = self.index_from_disk(false)?;
        let mut config = None;
        let mut changes: Vec<Change> = Vec::new();
        for entry in statuses.iter() {
            let mut status = entry.status();
            let bytes = entry.path_bytes();
            let folder = bytes.ends_with(b"/");
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(
                bytes.strip_suffix(b"/").unwrap_or(bytes),
            ));
            if status.is_ignored() {
                if !(folder && self.nested_repository(&path)) {
                    continue;
                }
                status = Status::WT_NEW;
            }
            let staged = index.get_path(&path, 0);
            if let Some(staged) = &staged
                && !self.is_change(staged, status, &path, &mut config)?
            {
                continue;
            }
            changes.push(Change {
                path,
                folder,
                status,
            });
        }
        Ok(changes)
    }

    /// True for a folder libgit2 calls ignored that `.gitignore` does not ignore: a nested
    /// repository with a commit, which `git status` lists as untracked.
    fn nested_repository(&self, path: &Path) -> bool {
        self.top.join(path).join(".git").exists()
            && !self.repo.is_path_ignored(path).unwrap_or(true)
    }

    /// Whether a path status lists, with this index entry, is a change `git status` shows.
    fn is_change(
        &self,
        staged: &IndexEntry,
        status: Status,
        path: &Path,
        config: &mut Option<git2::Config>,
    ) -> Result<bool> {
        if staged.flags_extended & git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits() != 0 {
            return Ok(false);
        }
        let index_side = Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_TYPECHANGE
            | Status::INDEX_RENAMED;
        if status.intersects(index_side) || !status.contains(Status::WT_MODIFIED) {
            return Ok(true);
        }
        if staged.mode == super::index_entries::MODE_GITLINK {
            // Only a moved checkout is a change; edits inside the submodule are its own.
            let head = super::checked_out_commit(&self.top.join(path));
            return Ok(head.is_some_and(|h| h != staged.id));
        }
        if config.is_none() {
            *config = Some(self.config_snapshot()?);
        }
        let Some(config) = config.as_ref() else {
            return Ok(true);
        };
        if self.filter_driver(config, path)?.is_none() && self.encoded(config, path).is_none() {
            return Ok(true);
        }
        Ok(self.clean_id(config, path) != Some(staged.id))
    }

    /// The blob id of a filtered work-tree file, cached while the file is unchanged.
    fn clean_id(&self, config: &git2::Config, rel: &Path) -> Option<Oid> {
        let meta = std::fs::symlink_metadata(self.top.join(rel)).ok()?;
        let stamp = Stamp::of(&meta);
        if let Some((s, id)) = self.clean_ids.borrow().get(rel)
            && *s == stamp
        {
            return Some(*id);
        }
        let id = self.work_tree_blob_id(config, rel, self.hook_timeout)?;
        self.clean_ids
            .borrow_mut()
            .insert(rel.to_path_buf(), (stamp, id));
        Some(id)
    }
}

/// At most this many paths are asked about one by one (see `status_of`); more are asked
/// about in one list, which costs one pass over the index.
const ONE_BY_ONE: usize = 16;

/// True when `paths` are few and each means exactly itself as a pathspec: asked about one
/// by one, each reads only its own index entries (see `status_of`).
pub(super) fn one_by_one(paths: &BTreeSet<PathBuf>) -> bool {
    !paths.is_empty() && paths.len() <= ONE_BY_ONE && paths.iter().all(|p| literal_pathspec(p))
}

/// What kern asks libgit2's status for. Ignored entries are asked for (folders not descended
/// into) only because libgit2 reports an untracked nested repository that has a commit as
/// ignored, where git lists it as untracked; see `nested_repository`.
fn status_options() -> StatusOptions {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(false)
        .renames_head_to_index(false);
    opts
}

/// True when `path` means exactly itself (and what it holds) as a pathspec: not empty, and
/// none of the bytes a pathspec reads as a pattern, a negation, a comment or an escape.
fn literal_pathspec(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    !bytes.is_empty()
        && !bytes.starts_with(b"/")
        && !bytes.ends_with(b"/")
        && bytes
            .iter()
            .all(|&b| b >= 0x80 || b.is_ascii_alphanumeric() || b"._-/+,=@~%:".contains(&b))
}

/// Sorted as `git status` sorts, one entry per path.
pub(super) fn sort(changes: &mut Vec<Change>) {
    changes.sort_by_cached_key(Change::sort_key);
    changes.dedup_by(|a, b| a.path == b.path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_are_asked_about_as_pathspecs() {
        let cases = [
            ("SPEC.md", true),
            ("d0000/f000.txt", true),
            ("a-b_c/v1.2+x,y=z@h~1%:q", true),
            ("d\u{e9}j\u{e0}/vu.txt", true),
            ("", false),
            ("*.txt", false),
            ("a?b", false),
            ("[ab]", false),
            ("a\\b", false),
            ("!neg", false),
            ("#note", false),
            ("with space", false),
            ("trailing ", false),
            ("tab\tname", false),
        ];
        for (path, want) in cases {
            assert_eq!(literal_pathspec(Path::new(path)), want, "{path:?}");
        }
    }
}
