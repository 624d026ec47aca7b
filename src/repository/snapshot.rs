//! Work-tree snapshots: the audit of a read-only stage, and the undo of what it changed.
//!
//! The one decision a reader must know: a snapshot holds what differs from the index — the
//! dirty and untracked-not-ignored files git status lists, byte for byte, with mode and
//! symlink target — plus the index file and a digest of its entries; never the whole tree. A
//! clean tracked file needs no copy: the index already holds its content, so any later change
//! to it shows up in status and is restored from the index. Comparing is cheap: a dirty file
//! whose size, mtime, ctime and inode are unchanged is not re-read (ctime cannot be set back by
//! a program). Ignored files are outside the audit, like build output. A snapshot keeps at most
//! [`super::spill::INLINE_BUDGET`] bytes in memory; larger files, the rest, and an index over
//! [`INDEX_INLINE`] go to a temporary folder. Paths are bytes end to end: a name that is not
//! UTF-8 is saved, compared and reverted like any other. When a created file is removed, the
//! folders above it that are now empty and hold no tracked file are removed too; an empty
//! untracked folder that existed before the stage and received a file during it is therefore
//! removed as well (git cannot see empty folders, so the snapshot cannot either). Editor
//! artefacts of kern's own files (vim's swap file of SPEC.md) are the person's: never a change,
//! never reverted. A clean file put back from the index goes through its filter driver's
//! smudge command (a Git LFS file gets its content, not its pointer), and is compared through
//! the clean command.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::spill::{Content, INDEX_INLINE, Spill, make_room, remove_any, write_new};
use super::{RefsSnapshot, Repository};
use crate::error::{Error, Result};

/// The name under which a change of the index itself is reported.
pub(crate) const INDEX_CHANGE: &str = "(index)";

/// The state of the work tree, the index and the refs at one moment.
pub struct WorkTreeSnapshot {
    refs: RefsSnapshot,
    index: IndexCopy,
    files: BTreeMap<PathBuf, FileState>,
    /// Kept for the copies it holds: dropping the snapshot removes them.
    _copies: Spill,
}

impl WorkTreeSnapshot {
    /// HEAD and the refs when the snapshot was taken.
    pub fn refs(&self) -> &RefsSnapshot {
        &self.refs
    }

    /// The relative paths whose content the snapshot holds (dirty or untracked then), as text.
    pub fn dirty_paths(&self) -> impl Iterator<Item = String> + '_ {
        self.files.keys().map(|p| p.to_string_lossy().into_owned())
    }
}

/// What changed since a snapshot, or what a revert put back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeChanges {
    /// The index entries changed.
    pub index: bool,
    /// Files created, changed or deleted, relative to the top, sorted by their bytes; a
    /// folder listed as one path (a nested repository) ends with `/`.
    pub paths: Vec<PathBuf>,
}

impl TreeChanges {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.index && self.paths.is_empty()
    }

    /// For the person and the records: [`INDEX_CHANGE`] first, then each path as text.
    pub fn names(&self) -> Vec<String> {
        self.index
            .then(|| INDEX_CHANGE.to_string())
            .into_iter()
            .chain(self.paths.iter().map(|p| p.to_string_lossy().into_owned()))
            .collect()
    }
}

/// The index file as it was: its stamp and entry digest, and its bytes (none: no index).
struct IndexCopy {
    stamp: Option<Stamp>,
    digest: u64,
    content: Option<Content>,
}

/// One path as it was.
#[derive(Debug)]
enum FileState {
    Missing,
    Link(PathBuf),
    File {
        mode: u32,
        stamp: Stamp,
        content: Content,
    },
    /// A folder where status lists one (a nested repository, a submodule): only its
    /// existence is compared, never its content.
    Folder,
}

/// What changes whenever a file's content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
}

impl Stamp {
    pub(super) fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }

    /// The modification time: seconds and nanoseconds since the epoch.
    pub(super) fn mtime(&self) -> (i64, i64) {
        self.mtime
    }
}

/// What a path must become on revert.
enum Target<'a> {
    Snapshot(&'a FileState),
    Blob { mode: u32, id: git2::Oid },
    Absent,
}

impl Repository {
    /// Records HEAD, the refs, the index, and every dirty or untracked-not-ignored file.
    pub fn snapshot(&self) -> Result<WorkTreeSnapshot> {
        let mut timed = super::Timed::start("snapshot");
        let refs = self.refs_snapshot()?;
        let mut spill = Spill::default();
        let index = self.copy_index(&mut spill)?;
        let mut files = BTreeMap::new();
        for change in self.changes()? {
            let state = self.capture(&change.path, &mut spill)?;
            files.insert(change.path, state);
        }
        timed.count(files.len());
        Ok(WorkTreeSnapshot {
            refs,
            index,
            files,
            _copies: spill,
        })
    }

    /// Files created, changed or deleted since `snap` and whether the index entries changed,
    /// as text: see [`Repository::tree_changes_since`].
    pub fn changes_since(&self, snap: &WorkTreeSnapshot) -> Result<Vec<String>> {
        Ok(self.tree_changes_since(snap)?.names())
    }

    /// Files created, changed or deleted since `snap`, and whether the index entries changed.
    /// HEAD and refs are compared by the caller with [`WorkTreeSnapshot::refs`].
    pub fn tree_changes_since(&self, snap: &WorkTreeSnapshot) -> Result<TreeChanges> {
        let _timed = super::Timed::start("changes_since");
        let mut out = TreeChanges {
            index: self.index_changed(&snap.index)?,
            paths: Vec::new(),
        };
        let now = self.folders_now()?;
        for rel in now.keys().chain(snap.files.keys()).collect::<BTreeSet<_>>() {
            if self.own.is_artefact_path(rel) {
                continue;
            }
            let changed = match snap.files.get(rel) {
                Some(state) => !self.matches(rel, state)?,
                None => true,
            };
            if changed {
                out.paths.push(shown(rel, snap, &now));
            }
        }
        sort_paths(&mut out.paths);
        Ok(out)
    }

    /// Puts the work tree and the index back as they were at `snap`, as text: see
    /// [`Repository::revert`].
    pub fn revert_to(&self, snap: &WorkTreeSnapshot, keep: &[&Path]) -> Result<Vec<String>> {
        Ok(self.revert(snap, keep)?.names())
    }

    /// Puts the work tree and the index back as they were at `snap`: created files removed
    /// (and the folders they needed, when now empty), changed and deleted files restored —
    /// dirty ones from the snapshot, clean ones from the index. Returns what was reverted.
    /// HEAD and refs are not touched. Paths in `keep` (relative to the top) and what they hold
    /// are left as they are now: kern's own SPEC.md, which a person may edit during any stage,
    /// and the person's `--allow-dirty` paths.
    pub fn revert(&self, snap: &WorkTreeSnapshot, keep: &[&Path]) -> Result<TreeChanges> {
        let _timed = super::Timed::start("revert");
        let mut reverted = TreeChanges::default();
        let index_path = self.repo.path().join("index");
        let mut index = self
            .repo
            .index()
            .map_err(|e| Error::git("opening the index", e))?;
        if self.index_changed(&snap.index)? {
            match &snap.index.content {
                Some(content) => crate::atomic_file::write(&index_path, &content.read()?)?,
                None => fs::remove_file(&index_path).map_err(|e| Error::io(&index_path, e))?,
            }
            reverted.index = true;
            index
                .read(true)
                .map_err(|e| Error::git("reading the index", e))?;
        } else {
            index
                .read(false)
                .map_err(|e| Error::git("reading the index", e))?;
        }

        let now = self.folders_now()?;
        let candidates: BTreeSet<&PathBuf> = now.keys().chain(snap.files.keys()).collect();
        let mut removals = Vec::new();
        let mut writes = Vec::new();
        for rel in candidates {
            if keep.iter().any(|k| rel.starts_with(k))
                || self.own.is_artefact_path(rel)
                || keep.iter().any(|k| is_artefact_of(k, rel))
            {
                continue;
            }
            let target = match snap.files.get(rel) {
                Some(state) => Target::Snapshot(state),
                None => match index.get_path(rel, 0) {
                    Some(entry) => Target::Blob {
                        mode: entry.mode,
                        id: entry.id,
                    },
                    None => Target::Absent,
                },
            };
            let done = match &target {
                Target::Snapshot(state) => self.matches(rel, state)?,
                Target::Blob { mode, id } => self.matches_blob(rel, *mode, *id),
                Target::Absent => false,
            };
            if done {
                continue;
            }
            match target {
                Target::Absent | Target::Snapshot(FileState::Missing) => removals.push(rel),
                other => writes.push((rel, other)),
            }
        }
        // Deepest first, so a created folder's files go before the folder itself.
        removals.sort_by_key(|r| std::cmp::Reverse(r.components().count()));
        for rel in removals {
            let full = self.top.join(rel);
            remove_any(&full)?;
            self.prune_empty_parents(&full, &index);
            reverted.paths.push(shown(rel, snap, &now));
        }
        for (rel, target) in writes {
            let full = self.top.join(rel);
            match target {
                Target::Snapshot(state) => write_state(&full, state)?,
                Target::Blob { mode, id } => self.write_blob(rel, mode, id)?,
                Target::Absent => {}
            }
            reverted.paths.push(shown(rel, snap, &now));
        }
        sort_paths(&mut reverted.paths);
        reverted.paths.dedup();
        Ok(reverted)
    }

    /// The paths status lists now, each with whether it is a folder listed as one path.
    fn folders_now(&self) -> Result<BTreeMap<PathBuf, bool>> {
        Ok(self
            .changes()?
            .into_iter()
            .map(|c| (c.path, c.folder))
            .collect())
    }

    /// True when the index entries differ from `copy`'s (an index merely refreshed by `git
    /// status` does not).
    fn index_changed(&self, copy: &IndexCopy) -> Result<bool> {
        let (stamp, digest) = self.index_digest_now()?;
        if stamp.is_none() || copy.stamp.is_none() {
            return Ok(stamp.is_some() != copy.stamp.is_some() || digest != copy.digest);
        }
        Ok(stamp != copy.stamp && digest != copy.digest)
    }

    /// The index file as it is now: kept in memory when small, else copied.
    fn copy_index(&self, spill: &mut Spill) -> Result<IndexCopy> {
        let index_path = self.repo.path().join("index");
        // The index is replaced whole (written aside, renamed over): a stamp that is the same
        // before and after the copy means the copy and the digest belong together.
        for _ in 0..3 {
            let (stamp, digest) = self.index_digest_now()?;
            let Some(before) = stamp else {
                return Ok(IndexCopy {
                    stamp,
                    digest,
                    content: None,
                });
            };
            let content = if before.len <= INDEX_INLINE {
                match fs::read(&index_path) {
                    Ok(bytes) => Content::Inline(bytes),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io(&index_path, e)),
                }
            } else {
                let copy = spill.path("index")?;
                match fs::copy(&index_path, &copy) {
                    Ok(_) => Content::Spilled(copy),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io(&index_path, e)),
                }
            };
            let after = fs::metadata(&index_path).ok().map(|m| Stamp::of(&m));
            if after == stamp {
                return Ok(IndexCopy {
                    stamp,
                    digest,
                    content: Some(content),
                });
            }
        }
        Err(Error::Repository(format!(
            "`{}` kept changing while kern saved it before a stage — stop the program rewriting the index (an editor's git integration), then run kern again",
            index_path.display()
        )))
    }

    fn capture(&self, rel: &Path, spill: &mut Spill) -> Result<FileState> {
        let full = self.top.join(rel);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            return Ok(FileState::Missing);
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&full).map_err(|e| Error::io(&full, e))?;
            return Ok(FileState::Link(target));
        }
        if meta.is_dir() {
            return Ok(FileState::Folder);
        }
        let name = git2::Oid::hash_object(git2::ObjectType::Blob, rel.as_os_str().as_bytes())
            .map_err(|e| Error::git("naming a snapshot copy", e))?
            .to_string();
        let content = spill.keep(&full, meta.len(), &name)?;
        Ok(FileState::File {
            mode: meta.permissions().mode() & 0o7777,
            stamp: Stamp::of(&meta),
            content,
        })
    }

    /// True when the path is now as `state` recorded it.
    fn matches(&self, rel: &Path, state: &FileState) -> Result<bool> {
        let full = self.top.join(rel);
        let meta = fs::symlink_metadata(&full).ok();
        Ok(match (state, meta) {
            (FileState::Missing, None) => true,
            (FileState::Missing, Some(_)) | (_, None) => false,
            (FileState::Link(target), Some(m)) => {
                m.file_type().is_symlink() && fs::read_link(&full).ok().as_ref() == Some(target)
            }
            (FileState::Folder, Some(m)) => m.is_dir(),
            (
                FileState::File {
                    mode,
                    stamp,
                    content,
                },
                Some(m),
            ) => {
                if !m.is_file() || m.permissions().mode() & 0o7777 != *mode {
                    false
                } else if Stamp::of(&m) == *stamp {
                    true
                } else if m.len() != stamp.len {
                    false
                } else {
                    let now = fs::read(&full).map_err(|e| Error::io(&full, e))?;
                    content.read()? == now
                }
            }
        })
    }

    /// True when the path now holds the staged object `id` with `mode`.
    fn matches_blob(&self, rel: &Path, mode: u32, id: git2::Oid) -> bool {
        let full = self.top.join(rel);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            return false;
        };
        match mode {
            0o120000 => {
                let Ok(target) = fs::read_link(&full) else {
                    return false;
                };
                git2::Oid::hash_object_ext(
                    git2::ObjectType::Blob,
                    target.as_os_str().as_bytes(),
                    self.repo.object_format(),
                )
                .is_ok_and(|o| o == id)
            }
            0o160000 => true,
            _ => {
                let exec = meta.permissions().mode() & 0o111 != 0;
                if !meta.is_file() || exec != (mode == 0o100755) {
                    return false;
                }
                match self.config_snapshot() {
                    Ok(config) => {
                        self.work_tree_blob_id(&config, rel, self.hook_timeout) == Some(id)
                    }
                    Err(_) => git2::Oid::hash_file_ext(
                        git2::ObjectType::Blob,
                        &full,
                        self.repo.object_format(),
                    )
                    .is_ok_and(|o| o == id),
                }
            }
        }
    }

    fn write_blob(&self, rel: &Path, mode: u32, id: git2::Oid) -> Result<()> {
        if mode == 0o160000 {
            return Ok(());
        }
        let full = self.top.join(rel);
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| Error::git(format!("reading `{}` from the index", full.display()), e))?;
        make_room(&full)?;
        if mode == 0o120000 {
            let target = std::ffi::OsStr::from_bytes(blob.content());
            return std::os::unix::fs::symlink(target, &full).map_err(|e| Error::io(&full, e));
        }
        // Created through the umask, as git checks files out.
        let perm = if mode == 0o100755 { 0o777 } else { 0o666 };
        let config = self.config_snapshot().ok();
        if let Some(bytes) = config
            .as_ref()
            .and_then(|config| self.encoded(config, rel))
            .and_then(|encoded| encoded.to_work_tree(blob.content()))
        {
            return write_new(&full, &bytes, perm);
        }
        let smudged = config
            .and_then(|config| self.filter_driver(&config, rel).ok().flatten())
            .and_then(|driver| self.smudge(&driver, rel, blob.content(), self.hook_timeout));
        match smudged {
            Some(content) => {
                let mut from = fs::File::open(content.path()).map_err(|e| Error::io(&full, e))?;
                let mut to = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(perm)
                    .open(&full)
                    .map_err(|e| Error::io(&full, e))?;
                std::io::copy(&mut from, &mut to)
                    .map(|_| ())
                    .map_err(|e| Error::io(&full, e))
            }
            None => write_new(&full, blob.content(), perm),
        }
    }

    /// Removes folders above `full` that are now empty and hold no tracked file, up to the top.
    fn prune_empty_parents(&self, full: &Path, index: &git2::Index) {
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.top || !d.starts_with(&self.top) {
                break;
            }
            let Ok(rel) = d.strip_prefix(&self.top) else {
                break;
            };
            let mut prefix = rel.as_os_str().as_bytes().to_vec();
            prefix.push(b'/');
            let tracked = index.find_prefix(prefix).is_ok();
            if tracked || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

/// True when `candidate` is an editor artefact of the own file `own` (both relative).
fn is_artefact_of(own: &Path, candidate: &Path) -> bool {
    match (own.to_str(), candidate.to_str()) {
        (Some(own), Some(candidate)) => super::own_files::artefact_of(own, candidate),
        _ => false,
    }
}

/// `rel` as a change names it: with a trailing `/` for a folder listed as one path.
fn shown(rel: &Path, snap: &WorkTreeSnapshot, now: &BTreeMap<PathBuf, bool>) -> PathBuf {
    let folder = now.get(rel).copied().unwrap_or(false)
        || matches!(snap.files.get(rel), Some(FileState::Folder));
    if !folder {
        return rel.to_path_buf();
    }
    let mut bytes = rel.as_os_str().as_bytes().to_vec();
    bytes.push(b'/');
    PathBuf::from(std::ffi::OsStr::from_bytes(&bytes))
}

/// Sorted by their bytes, as git sorts paths.
fn sort_paths(paths: &mut [PathBuf]) {
    paths.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
}

/// Makes `full` what `state` says it was.
fn write_state(full: &Path, state: &FileState) -> Result<()> {
    make_room(full)?;
    match state {
        FileState::Missing | FileState::Folder => Ok(()),
        FileState::Link(target) => {
            std::os::unix::fs::symlink(target, full).map_err(|e| Error::io(full, e))
        }
        FileState::File { mode, content, .. } => {
            match content {
                Content::Inline(bytes) => write_new(full, bytes, *mode)?,
                Content::Spilled(copy) => {
                    fs::copy(copy, full).map_err(|e| Error::io(full, e))?;
                }
            }
            fs::set_permissions(full, fs::Permissions::from_mode(*mode))
                .map_err(|e| Error::io(full, e))
        }
    }
}
