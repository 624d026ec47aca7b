//! Asking libgit2's status: of the whole tree or of a few paths, with what `git status`
//! does not count as a change taken out. The one place kern calls `git_status_list_new`.
//!
//! The decisions a reader must know:
//! - libgit2 filters its whole index by a list of paths, but reads only one path's index
//!   entries when asked about it as a pathspec; so a few plain paths are asked about one by
//!   one, and many paths, or a path a pathspec would read as a pattern, in one list.
//! - Asked about some paths, libgit2's status runs against a copy of the index holding only
//!   their entries: its status copies the whole index's list of entries for each side it
//!   compares (two copies at once, 1.6 MB on 100,000 files — the run's largest moment), however
//!   few paths it is asked about. The copy is libgit2's own index type, swapped in as the
//!   repository's for the one call; an entry the real index would re-check as racily clean
//!   (changed in the second the index was written) is re-checked by content in the copy too.

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
    /// Asked about one path as a pathspec, libgit2 reads the index and walks the work tree
    /// only under it; a list of paths has no common folder to start from, so a few paths are
    /// asked about one by one (100,000 files: milliseconds for each look). A path a pathspec
    /// would read as a pattern is never asked that way. Either way the index libgit2 reads is
    /// a copy of the asked paths' entries (see the module docs).
    pub(super) fn status_of(&self, only: Option<&BTreeSet<PathBuf>>) -> Result<Vec<Change>> {
        let one_by_one = only.is_some_and(one_by_one);
        let mut changes = Vec::new();
        match only {
            Some(paths) if one_by_one => {
                for path in paths {
                    let mut opts = status_options();
                    opts.pathspec(path.as_path());
                    changes.extend(self.statuses_with(&mut opts, Some(&[path.as_path()]))?);
                }
            }
            Some(paths) => {
                let mut opts = status_options();
                opts.disable_pathspec_match(true);
                for path in paths {
                    opts.pathspec(path.as_path());
                }
                let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                changes = self.statuses_with(&mut opts, Some(&paths))?;
            }
            None => changes = self.statuses_with(&mut status_options(), None)?,
        }
        sort(&mut changes);
        Ok(changes)
    }

    /// libgit2's status with `opts` — limited to `only`, asked against a copy of their
    /// entries — what git does not count as a change taken out; unsorted.
    fn statuses_with(
        &self,
        opts: &mut StatusOptions,
        only: Option<&[&Path]>,
    ) -> Result<Vec<Change>> {
        let ctx = |e| Error::git("reading the status of the work tree", e);
        let statuses = match only {
            Some(paths) => {
                self.with_index_of(paths, || self.repo.statuses(Some(opts)).map_err(ctx))?
            }
            None => self.repo.statuses(Some(opts)).map_err(ctx)?,
        };
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

    /// libgit2's status of one path (relative), asked against a copy of its entries.
    pub(super) fn status_of_file(&self, path: &Path) -> Result<Status> {
        self.with_index_of(&[path], || {
            self.repo
                .status_file(path)
                .map_err(|e| Error::git("reading the status of the work tree", e))
        })
    }

    /// Runs `ask` — a libgit2 status or diff limited to `paths` (relative) — with the
    /// repository's index swapped for a copy of its entries at and under `paths` (see the
    /// module docs), and puts the index back whatever `ask` answered. An index that ignores
    /// case, or an entry a copy would not take as it is, is asked about whole, as before.
    pub(super) fn with_index_of<T>(
        &self,
        paths: &[&Path],
        ask: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut real = self.index_from_disk(false)?;
        let Some(mut copy) = self.copy_of_entries(&real, paths) else {
            return ask();
        };
        let ctx = |e| Error::git("asking about a copy of the index's entries", e);
        self.repo.set_index(&mut copy).map_err(ctx)?;
        let answer = ask();
        self.repo.set_index(&mut real).map_err(ctx)?;
        answer
    }

    /// A new in-memory index with `index`'s entries at and under `paths` and its flags; an
    /// entry the real index would re-check as racily clean (changed in the second the index
    /// was written: libgit2 compares its time with the index file's) has its time zeroed, so
    /// that the copy re-checks it by content too. `None` for an index that ignores case (a
    /// path's entries are then not found by its bytes) or an entry the copy refuses.
    fn copy_of_entries(&self, index: &git2::Index, paths: &[&Path]) -> Option<git2::Index> {
        let mut copy = git2::Index::new_ext(self.repo.object_format()).ok()?;
        // SAFETY: both pointers are live indexes this function holds; `git_index_caps` only
        // reads one's flags (ignore case, file modes, links), `git_index_set_caps` sets them
        // on the other, nothing else.
        let caps = unsafe {
            use git2::Binding;
            let caps = git_index_caps(index.raw());
            git_index_set_caps(copy.raw(), caps);
            caps
        };
        if caps & INDEX_IGNORE_CASE != 0 {
            return None;
        }
        let racy_from = self.index_stamp().map(|s| s.mtime());
        for path in paths {
            for mut entry in entries_under(index, path) {
                let mtime = (
                    i64::from(entry.mtime.seconds()),
                    i64::from(entry.mtime.nanoseconds()),
                );
                if racy_from.is_some_and(|from| mtime >= from) {
                    entry.mtime = git2::IndexTime::new(0, 0);
                }
                copy.add(&entry).ok()?;
            }
        }
        Some(copy)
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

/// libgit2's `GIT_INDEX_CAPABILITY_IGNORE_CASE`.
const INDEX_IGNORE_CASE: std::ffi::c_int = 1;

// Two functions of libgit2's API that libgit2-sys does not declare.
unsafe extern "C" {
    fn git_index_caps(index: *const libgit2_sys::git_index) -> std::ffi::c_int;
    fn git_index_set_caps(
        index: *mut libgit2_sys::git_index,
        caps: std::ffi::c_int,
    ) -> std::ffi::c_int;
}

/// `index`'s entries (every stage) at `path` and under it as a folder.
fn entries_under(index: &git2::Index, path: &Path) -> Vec<IndexEntry> {
    let bytes = path.as_os_str().as_bytes();
    let Ok(start) = index.find_prefix(path) else {
        return Vec::new();
    };
    (start..index.len())
        .map_while(|i| index.get(i))
        .take_while(|e| e.path.starts_with(bytes))
        .filter(|e| e.path.len() == bytes.len() || e.path[bytes.len()] == b'/')
        .collect()
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

    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(dir.path()).unwrap();
        let mut cfg = git.config().unwrap();
        cfg.set_str("user.name", "T").unwrap();
        cfg.set_str("user.email", "t@example.com").unwrap();
        // Only the modification time tells a change the size does not: the racy case.
        cfg.set_bool("core.trustctime", false).unwrap();
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut index = git.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = index.write_tree().unwrap();
        let sig = git.signature().unwrap();
        git.commit(
            Some("HEAD"),
            &sig,
            &sig,
            "c",
            &git.find_tree(tree).unwrap(),
            &[],
        )
        .unwrap();
        (dir, git)
    }

    fn whole(top: &Path) -> Vec<String> {
        shown(&Repository::discover(top).unwrap().status_of(None).unwrap())
    }

    fn shown(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| format!("{} {:?}", c.path.display(), c.status))
            .collect()
    }

    fn asked(top: &Path, paths: &[&str]) -> Vec<String> {
        let repo = Repository::discover(top).unwrap();
        let only: BTreeSet<PathBuf> = paths.iter().map(PathBuf::from).collect();
        let changes = repo.status_of(Some(&only)).unwrap();
        // The repository's own index is back, whole.
        assert_eq!(
            repo.repo.index().unwrap().len(),
            repo.index_from_disk(false).unwrap().len()
        );
        assert!(repo.repo.index().unwrap().path().is_some());
        shown(&changes)
    }

    #[test]
    fn a_file_changed_in_the_second_the_index_was_written_is_still_seen_through_the_copy() {
        let (dir, git) = repo_with(&[
            ("a/racy.txt", "aaaa"),
            ("a/calm.txt", "cccc"),
            ("b.txt", "b"),
        ]);
        let top = dir.path();
        let entry = git
            .index()
            .unwrap()
            .get_path(Path::new("a/racy.txt"), 0)
            .unwrap();
        let when = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                entry.mtime.seconds().cast_unsigned().into(),
                entry.mtime.nanoseconds(),
            );
        // The index written in the same instant as the file; then the file changed, keeping
        // its size and time: only its content tells.
        let index_file = std::fs::File::options()
            .write(true)
            .open(git.path().join("index"))
            .unwrap();
        index_file.set_modified(when).unwrap();
        std::fs::write(top.join("a/racy.txt"), "bbbb").unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(top.join("a/racy.txt"))
            .unwrap();
        file.set_modified(when).unwrap();
        std::fs::write(top.join("a/new.txt"), "new").unwrap();
        let whole = whole(top);
        assert_eq!(
            whole,
            ["a/new.txt Status(WT_NEW)", "a/racy.txt Status(WT_MODIFIED)"]
        );
        assert_eq!(
            asked(top, &["a/racy.txt"]),
            ["a/racy.txt Status(WT_MODIFIED)"]
        );
        assert_eq!(asked(top, &["a"]), whole);
        assert_eq!(asked(top, &["a/racy.txt", "a/new.txt", "b.txt"]), whole);
        assert_eq!(asked(top, &["b.txt"]), Vec::<String>::new());
    }

    #[test]
    fn intent_to_add_and_skip_worktree_entries_are_copied_as_they_are() {
        let (dir, _git) = repo_with(&[("s/kept.txt", "k"), ("t.txt", "t")]);
        let top = dir.path();
        std::fs::write(top.join("s/intent.txt"), "later").unwrap();
        std::fs::write(top.join("s/kept.txt"), "changed, but skipped").unwrap();
        std::fs::write(top.join("t.txt"), "changed").unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(top)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        git(&["add", "-N", "s/intent.txt"]);
        git(&["update-index", "--skip-worktree", "s/kept.txt"]);
        let whole = whole(top);
        assert!(
            whole.iter().any(|c| c.starts_with("s/intent.txt")),
            "{whole:?}"
        );
        assert!(
            !whole.iter().any(|c| c.starts_with("s/kept.txt")),
            "{whole:?}"
        );
        assert_eq!(asked(top, &["s", "t.txt"]), whole);
        assert_eq!(asked(top, &["s/intent.txt", "s/kept.txt", "t.txt"]), whole);
    }

    #[test]
    fn staged_and_unmerged_entries_are_copied_with_their_stages() {
        let (dir, git) = repo_with(&[("x.txt", "x"), ("y/z.txt", "z")]);
        let top = dir.path();
        let mut index = git.index().unwrap();
        let blob = git.blob(b"theirs").unwrap();
        let mut theirs =
            crate::repository::index_entries::bare_entry(b"y/z.txt".to_vec(), 0o100_644, blob);
        theirs.flags = 3 << 12;
        index.add(&theirs).unwrap();
        std::fs::write(top.join("x.txt"), "staged").unwrap();
        index.add_path(Path::new("x.txt")).unwrap();
        index.write().unwrap();
        let whole = whole(top);
        assert_eq!(whole.len(), 2, "{whole:?}");
        assert_eq!(asked(top, &["x.txt", "y"]), whole);
    }
}
