//! Work-tree snapshots: the audit of a read-only stage, and the undo of what it changed.
//!
//! The one decision a reader must know: a snapshot stores only what git status says differs
//! from the index (dirty and untracked-not-ignored files, byte for byte, with mode and symlink
//! target), plus the index file and a digest of its entries. A clean tracked file needs no copy:
//! the index already holds its content, so any later change to it shows up in status and is
//! restored from the index. Comparing is cheap: a dirty file whose size, mtime, ctime and inode
//! are unchanged is not re-read (ctime cannot be set back by a program). Ignored files are
//! outside the audit, like build output. Large dirty files (over 8 MiB) are kept in a temporary
//! folder instead of memory. When a created file is removed, the folders above it that are now
//! empty and hold no tracked file are removed too; an empty untracked folder that existed before
//! the stage and received a file during it is therefore removed as well (git cannot see empty
//! folders, so the snapshot cannot either). Editor artefacts of kern's own files (vim's swap
//! file of SPEC.md) are the person's: never a change, never reverted. A clean file put back from
//! the index goes through its filter driver's smudge command (a Git LFS file gets its content,
//! not its pointer), and is compared through the clean command.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{RefsSnapshot, Repository};
use crate::error::{Error, Result};

/// Dirty files larger than this are copied to a temporary folder rather than kept in memory.
const INLINE_LIMIT: u64 = 8 << 20;

/// The name under which a change of the index itself is reported.
pub const INDEX_CHANGE: &str = "(index)";

/// The state of the work tree, the index and the refs at one moment.
pub struct WorkTreeSnapshot {
    refs: RefsSnapshot,
    index_bytes: Option<Vec<u8>>,
    index_digest: u64,
    files: BTreeMap<String, FileState>,
    spill: Option<tempfile::TempDir>,
}

impl WorkTreeSnapshot {
    /// HEAD and the refs when the snapshot was taken.
    pub fn refs(&self) -> &RefsSnapshot {
        &self.refs
    }

    /// The relative paths whose content the snapshot holds (dirty or untracked then).
    pub fn dirty_paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
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

#[derive(Debug)]
enum Content {
    Inline(Vec<u8>),
    Spilled(PathBuf),
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
        let _timed = super::Timed::start("snapshot");
        let refs = self.refs_snapshot()?;
        let index_path = self.repo.path().join("index");
        let index_bytes = match fs::read(&index_path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&index_path, e)),
        };
        let index_digest = self.index_digest()?;
        let mut snap = WorkTreeSnapshot {
            refs,
            index_bytes,
            index_digest,
            files: BTreeMap::new(),
            spill: None,
        };
        for rel in self.status_paths()? {
            let state = self.capture(&rel, &mut snap.spill)?;
            snap.files.insert(rel, state);
        }
        Ok(snap)
    }

    /// Files created, changed or deleted since `snap` (relative paths, sorted), and
    /// [`INDEX_CHANGE`] when the index entries changed. HEAD and refs are compared by the
    /// caller with [`WorkTreeSnapshot::refs`].
    pub fn changes_since(&self, snap: &WorkTreeSnapshot) -> Result<Vec<String>> {
        let _timed = super::Timed::start("changes_since");
        let mut out = Vec::new();
        if self.index_digest()? != snap.index_digest {
            out.push(INDEX_CHANGE.to_string());
        }
        let now: BTreeSet<String> = self.status_paths()?.into_iter().collect();
        for rel in now.iter().chain(snap.files.keys()).collect::<BTreeSet<_>>() {
            if self.own.is_artefact(rel.trim_end_matches('/')) {
                continue;
            }
            let changed = match snap.files.get(rel) {
                Some(state) => !self.matches(rel, state)?,
                None => true,
            };
            if changed {
                out.push(rel.clone());
            }
        }
        Ok(out)
    }

    /// Puts the work tree and the index back as they were at `snap`: created files removed
    /// (and the folders they needed, when now empty), changed and deleted files restored —
    /// dirty ones from the snapshot, clean ones from the index. Returns what was reverted
    /// ([`INDEX_CHANGE`] for the index). HEAD and refs are not touched. Paths in `keep` are
    /// left as they are now: kern's own SPEC.md, which a person may edit during any stage.
    pub fn revert_to(&self, snap: &WorkTreeSnapshot, keep: &[&Path]) -> Result<Vec<String>> {
        let _timed = super::Timed::start("revert");
        let mut reverted = Vec::new();
        let index_path = self.repo.path().join("index");
        if self.index_digest()? != snap.index_digest {
            match &snap.index_bytes {
                Some(bytes) => crate::atomic_file::write(&index_path, bytes)?,
                None => fs::remove_file(&index_path).map_err(|e| Error::io(&index_path, e))?,
            }
            reverted.push(INDEX_CHANGE.to_string());
        }
        let mut index = self
            .repo
            .index()
            .map_err(|e| Error::git("opening the index", e))?;
        index
            .read(true)
            .map_err(|e| Error::git("reading the index", e))?;

        let now: BTreeSet<String> = self.status_paths()?.into_iter().collect();
        let candidates: BTreeSet<&String> = now.iter().chain(snap.files.keys()).collect();
        let mut removals = Vec::new();
        let mut writes = Vec::new();
        for rel in candidates {
            if keep
                .iter()
                .any(|k| Path::new(rel.trim_end_matches('/')) == *k)
                || self.own.is_artefact(rel.trim_end_matches('/'))
                || keep.iter().any(|k| {
                    super::own_files::artefact_of(&k.to_string_lossy(), rel.trim_end_matches('/'))
                })
            {
                continue;
            }
            let target = match snap.files.get(rel) {
                Some(state) => Target::Snapshot(state),
                None => match index.get_path(Path::new(rel.trim_end_matches('/')), 0) {
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
        removals.sort_by_key(|r| std::cmp::Reverse(r.matches('/').count()));
        for rel in removals {
            let full = self.top.join(rel.trim_end_matches('/'));
            remove_any(&full)?;
            self.prune_empty_parents(&full, &index);
            reverted.push(rel.clone());
        }
        for (rel, target) in writes {
            let full = self.top.join(rel.trim_end_matches('/'));
            match target {
                Target::Snapshot(state) => self.write_state(&full, state)?,
                Target::Blob { mode, id } => self.write_blob(&full, mode, id)?,
                Target::Absent => {}
            }
            reverted.push(rel.clone());
        }
        reverted.sort();
        reverted.dedup();
        Ok(reverted)
    }

    /// A digest of the index entries (path, mode, object, stage): stat data is left out, so
    /// an index merely refreshed by `git status` is not a change.
    fn index_digest(&self) -> Result<u64> {
        let _timed = super::Timed::start("index_digest");
        let mut index = self
            .repo
            .index()
            .map_err(|e| Error::git("opening the index", e))?;
        index
            .read(true)
            .map_err(|e| Error::git("reading the index", e))?;
        let mut h = DefaultHasher::new();
        for entry in index.iter() {
            entry.path.hash(&mut h);
            entry.mode.hash(&mut h);
            entry.id.as_bytes().hash(&mut h);
            (entry.flags & 0x3000).hash(&mut h);
        }
        Ok(h.finish())
    }

    fn capture(&self, rel: &str, spill: &mut Option<tempfile::TempDir>) -> Result<FileState> {
        let full = self.top.join(rel.trim_end_matches('/'));
        let meta = match fs::symlink_metadata(&full) {
            Ok(m) => m,
            Err(_) => return Ok(FileState::Missing),
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&full).map_err(|e| Error::io(&full, e))?;
            return Ok(FileState::Link(target));
        }
        if meta.is_dir() {
            return Ok(FileState::Folder);
        }
        let content = if meta.len() > INLINE_LIMIT {
            if spill.is_none() {
                let dir = tempfile::Builder::new()
                    .prefix("kern-snapshot-")
                    .tempdir()
                    .map_err(|e| Error::io(std::env::temp_dir(), e))?;
                *spill = Some(dir);
            }
            let dir = spill
                .as_ref()
                .map(|d| d.path().to_path_buf())
                .unwrap_or_default();
            let copy = dir.join(format!(
                "{}",
                git2::Oid::hash_object(git2::ObjectType::Blob, rel.as_bytes())
                    .map_err(|e| Error::git("naming a snapshot copy", e))?
            ));
            fs::copy(&full, &copy).map_err(|e| Error::io(&full, e))?;
            Content::Spilled(copy)
        } else {
            Content::Inline(fs::read(&full).map_err(|e| Error::io(&full, e))?)
        };
        Ok(FileState::File {
            mode: meta.permissions().mode() & 0o7777,
            stamp: Stamp::of(&meta),
            content,
        })
    }

    /// True when the path is now as `state` recorded it.
    fn matches(&self, rel: &str, state: &FileState) -> Result<bool> {
        let full = self.top.join(rel.trim_end_matches('/'));
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
                    match content {
                        Content::Inline(bytes) => now == *bytes,
                        Content::Spilled(copy) => {
                            fs::read(copy).map_err(|e| Error::io(copy, e))? == now
                        }
                    }
                }
            }
        })
    }

    /// True when the path now holds the staged object `id` with `mode`.
    fn matches_blob(&self, rel: &str, mode: u32, id: git2::Oid) -> bool {
        let full = self.top.join(rel);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            return false;
        };
        match mode {
            0o120000 => {
                let Ok(target) = fs::read_link(&full) else {
                    return false;
                };
                use std::os::unix::ffi::OsStrExt;
                git2::Oid::hash_object(git2::ObjectType::Blob, target.as_os_str().as_bytes())
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
                    Err(_) => {
                        git2::Oid::hash_file(git2::ObjectType::Blob, &full).is_ok_and(|o| o == id)
                    }
                }
            }
        }
    }

    fn write_state(&self, full: &Path, state: &FileState) -> Result<()> {
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

    fn write_blob(&self, full: &Path, mode: u32, id: git2::Oid) -> Result<()> {
        if mode == 0o160000 {
            return Ok(());
        }
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| Error::git(format!("reading `{}` from the index", full.display()), e))?;
        make_room(full)?;
        if mode == 0o120000 {
            use std::os::unix::ffi::OsStrExt;
            let target = std::ffi::OsStr::from_bytes(blob.content());
            return std::os::unix::fs::symlink(target, full).map_err(|e| Error::io(full, e));
        }
        // Created through the umask, as git checks files out.
        let perm = if mode == 0o100755 { 0o777 } else { 0o666 };
        let rel = full
            .strip_prefix(&self.top)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        let smudged = self
            .config_snapshot()
            .ok()
            .and_then(|config| self.filter_driver(&config, &rel).ok().flatten())
            .and_then(|driver| self.smudge(&driver, &rel, blob.content(), self.hook_timeout));
        match smudged {
            Some(content) => {
                let mut from = fs::File::open(content.path()).map_err(|e| Error::io(full, e))?;
                let mut to = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(perm)
                    .open(full)
                    .map_err(|e| Error::io(full, e))?;
                std::io::copy(&mut from, &mut to)
                    .map(|_| ())
                    .map_err(|e| Error::io(full, e))
            }
            None => write_new(full, blob.content(), perm),
        }
    }

    /// Removes folders above `full` that are now empty and hold no tracked file, up to the top.
    fn prune_empty_parents(&self, full: &Path, index: &git2::Index) {
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.top || !d.starts_with(&self.top) {
                break;
            }
            let rel = d
                .strip_prefix(&self.top)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_default();
            let prefix = format!("{rel}/");
            let tracked = index.iter().any(|e| e.path.starts_with(prefix.as_bytes()));
            if tracked || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

/// Clears the way for a new file at `full`: removes what is there, creates its folders.
fn make_room(full: &Path) -> Result<()> {
    remove_any(full)?;
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    Ok(())
}

/// Removes a file, symlink or folder (with its content); a missing path is fine.
fn remove_any(full: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(full) {
        Err(_) => return Ok(()),
        Ok(m) if m.is_dir() => fs::remove_dir_all(full),
        Ok(_) => fs::remove_file(full),
    };
    result.map_err(|e| Error::io(full, e))
}

/// Creates `full` afresh with `bytes`, asking for `mode` (the umask applies).
fn write_new(full: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(full)
        .map_err(|e| Error::io(full, e))?;
    f.write_all(bytes).map_err(|e| Error::io(full, e))
}
