//! Where a snapshot keeps the bytes it must be able to write back: in memory up to a budget,
//! else copied to a temporary folder; and the index file's backup around a commit.
//!
//! The one decision a reader must know: memory is bounded, not the copies — at most
//! [`INLINE_BUDGET`] bytes of file content (no single file over [`INLINE_FILE`]) and an index of
//! at most [`INDEX_INLINE`] bytes stay in memory, whatever the size of the repository; the
//! rest is copied to a folder that is removed with the snapshot.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Repository;
use crate::error::{Error, Result};

/// The most bytes of file content a snapshot keeps in memory; the rest is copied to a
/// temporary folder. A single file larger than [`INLINE_FILE`] always is.
pub(super) const INLINE_BUDGET: u64 = 4 << 20;

/// Files larger than this are never kept in memory.
pub(super) const INLINE_FILE: u64 = 1 << 20;

/// An index file larger than this (about 10,000 entries) is copied, not kept in memory.
pub(super) const INDEX_INLINE: u64 = 1 << 20;

#[derive(Debug)]
pub(super) enum Content {
    Inline(Vec<u8>),
    Spilled(PathBuf),
}

impl Content {
    pub(super) fn read(&self) -> Result<Vec<u8>> {
        match self {
            Content::Inline(bytes) => Ok(bytes.clone()),
            Content::Spilled(copy) => fs::read(copy).map_err(|e| Error::io(copy, e)),
        }
    }
}

/// The temporary folder for what a snapshot does not keep in memory, made when first needed,
/// and how many bytes it keeps in memory.
#[derive(Default)]
pub(super) struct Spill {
    dir: Option<tempfile::TempDir>,
    inline: u64,
}

impl Spill {
    /// Where a copy named `name` goes.
    pub(super) fn path(&mut self, name: &str) -> Result<PathBuf> {
        if self.dir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix("kern-snapshot-")
                .tempdir()
                .map_err(|e| Error::io(std::env::temp_dir(), e))?;
            self.dir = Some(dir);
        }
        Ok(self
            .dir
            .as_ref()
            .map(|d| d.path().join(name))
            .unwrap_or_default())
    }

    /// Keeps `full` (of `len` bytes) in memory while the budget allows, else copies it.
    pub(super) fn keep(&mut self, full: &Path, len: u64, name: &str) -> Result<Content> {
        if len <= INLINE_FILE && self.inline + len <= INLINE_BUDGET {
            let bytes = fs::read(full).map_err(|e| Error::io(full, e))?;
            self.inline += bytes.len() as u64;
            return Ok(Content::Inline(bytes));
        }
        let copy = self.path(name)?;
        fs::copy(full, &copy).map_err(|e| Error::io(full, e))?;
        Ok(Content::Spilled(copy))
    }
}

/// The index file's bytes, to be written back if a commit fails: in memory when small, else
/// copied aside (a large index is rewritten whole by every commit; its copy costs a file copy,
/// not its size in memory).
pub(super) struct IndexBackup {
    content: Option<Content>,
    _copies: Spill,
}

impl Repository {
    /// Keeps the index file as it is now (see [`IndexBackup`]).
    pub(super) fn back_up_index(&self) -> Result<IndexBackup> {
        let path = self.repo.path().join("index");
        let mut spill = Spill::default();
        let content = match fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&path, e)),
            Ok(meta) if meta.len() <= INDEX_INLINE => Some(Content::Inline(
                fs::read(&path).map_err(|e| Error::io(&path, e))?,
            )),
            Ok(_) => {
                let copy = spill.path("index")?;
                fs::copy(&path, &copy).map_err(|e| Error::io(&path, e))?;
                Some(Content::Spilled(copy))
            }
        };
        Ok(IndexBackup {
            content,
            _copies: spill,
        })
    }

    /// Writes `backup` back as the index (or removes the index when there was none), and
    /// makes libgit2 read it again.
    pub(super) fn restore_index_backup(&self, backup: &IndexBackup) -> Result<()> {
        let path = self.repo.path().join("index");
        match &backup.content {
            Some(content) => crate::atomic_file::write(&path, &content.read()?)?,
            None => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            },
        }
        self.index_from_disk(true).map(drop)
    }
}

/// Clears the way for a new file at `full`: removes what is there, creates its folders.
pub(super) fn make_room(full: &Path) -> Result<()> {
    remove_any(full)?;
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    Ok(())
}

/// Removes a file, symlink or folder (with its content); a missing path is fine.
pub(super) fn remove_any(full: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(full) {
        Err(_) => return Ok(()),
        Ok(m) if m.is_dir() => fs::remove_dir_all(full),
        Ok(_) => fs::remove_file(full),
    };
    result.map_err(|e| Error::io(full, e))
}

/// Creates `full` afresh with `bytes`, asking for `mode` (the umask applies).
pub(super) fn write_new(full: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(full)
        .map_err(|e| Error::io(full, e))?;
    f.write_all(bytes).map_err(|e| Error::io(full, e))
}
