//! Atomic file replacement: the only way kern writes a file a person or a reader may look at.
//!
//! A write goes to a temp file in the same folder (so the rename cannot cross file systems),
//! is flushed with fsync, takes the permissions of the file it replaces, and is renamed over
//! it; the folder is fsynced so the rename itself survives a crash. A reader therefore sees
//! the old bytes or the new bytes, never a mix, and a kill -9 at any moment loses nothing.
//! A symlink is written through: its target is replaced and the link stays (a symlinked
//! SPEC.md stays a link). The `_private` writes are for kern's state folder: the new file is
//! `0600` whatever the file it replaces was, and a symlink there is replaced by the file, never
//! written through (see `private_file`); [`write_unsynced_private`] keeps the atomic rename but
//! skips both fsyncs, for files kern rewrites before every use.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Temp files are named `.kern-<six random characters>.tmp`.
const TEMP_PREFIX: &str = ".kern-";
const TEMP_SUFFIX: &str = ".tmp";
const TEMP_RANDOM: usize = 6;

/// Replaces `path` with `bytes` atomically, keeping the permissions of an existing file.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    prepare(path, bytes)?.commit()
}

/// Like [`write`], for a file of kern's state folder: `0600`, a symlink replaced, not followed.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    prepare_with(path, bytes, true, Access::Private)?.commit()
}

/// Like [`write_private`] (a reader still sees the old bytes or the new, never a mix) but
/// without either fsync: for files kern rewrites before every use, such as a stage's prompt
/// and schema, which a crash of the machine cannot make matter. Two fsyncs per file were most
/// of kern's own time per stage on a slow disk (see `docs/benchmarks.md`).
pub(crate) fn write_unsynced_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let Prepared { temp, path, .. } = prepare_with(path, bytes, false, Access::Private)?;
    temp.persist(&path).map_err(|e| Error::io(&path, e.error))?;
    Ok(())
}

/// Who may read the file a write makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// As the file it replaces, or as the umask makes a new one; written through a symlink.
    AsBefore,
    /// The owner only (`0600`); a symlink at the path is replaced.
    Private,
}

/// A replacement written to its temp file and fsynced, not yet renamed over the target. Split
/// from [`write`] so that a caller can look at the target once more right before the rename
/// (SPEC.md does, so that no concurrent hand edit is lost). Dropping it removes the temp file.
pub(crate) struct Prepared {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
    dir: PathBuf,
}

/// Writes `bytes` to a fsynced temp file beside `path`, with `path`'s permissions.
pub(crate) fn prepare(path: &Path, bytes: &[u8]) -> Result<Prepared> {
    prepare_with(path, bytes, true, Access::AsBefore)
}

fn prepare_with(path: &Path, bytes: &[u8], sync: bool, access: Access) -> Result<Prepared> {
    let path = &match access {
        Access::AsBefore => through_links(path),
        Access::Private => path.to_path_buf(),
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let existing_permissions = match access {
        Access::AsBefore => fs::metadata(path).ok().map(|m| m.permissions()),
        Access::Private => Some(fs::Permissions::from_mode(crate::private_file::FILE_MODE)),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    temp.write_all(bytes)
        .map_err(|e| Error::io(temp.path(), e))?;
    if sync {
        temp.as_file()
            .sync_all()
            .map_err(|e| Error::io(temp.path(), e))?;
    }
    if let Some(permissions) = existing_permissions {
        fs::set_permissions(temp.path(), permissions).map_err(|e| Error::io(temp.path(), e))?;
    } else {
        // tempfile creates 0600; a new file should get the usual 0644-under-umask instead.
        let mode = 0o666 & !current_umask();
        fs::set_permissions(temp.path(), fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(temp.path(), e))?;
    }
    Ok(Prepared {
        temp,
        path: path.clone(),
        dir: dir.to_path_buf(),
    })
}

impl Prepared {
    /// Renames the temp file over the target and fsyncs the folder.
    pub(crate) fn commit(self) -> Result<()> {
        let Prepared { temp, path, dir } = self;
        temp.persist(&path).map_err(|e| Error::io(&path, e.error))?;
        if let Ok(d) = fs::File::open(&dir) {
            // Best effort: some file systems refuse fsync on a directory.
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// The file `path` names: a symlink is written through (its target is replaced, the link
/// stays a link, as editors do), a dangling one names its target's path.
fn through_links(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or_else(|_| {
            fs::read_link(path).map_or_else(
                |_| path.to_path_buf(),
                |target| match path.parent() {
                    Some(parent) => parent.join(target),
                    None => target,
                },
            )
        }),
        _ => path.to_path_buf(),
    }
}

/// Removes the temp files a killed kern left in `dir` (a kill between creating the temp file
/// and the rename leaves one). Only names of exactly kern's pattern are touched; the caller
/// must hold the run lock, so that no live kern is writing one. Returns what was removed.
pub(crate) fn remove_leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let ours = name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|rest| rest.strip_suffix(TEMP_SUFFIX))
            .is_some_and(|random| {
                random.len() == TEMP_RANDOM && random.bytes().all(|b| b.is_ascii_alphanumeric())
            });
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if ours && is_file && fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed.sort();
    removed
}

fn current_umask() -> u32 {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o022));
    umask(old);
    old.bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_leftovers_takes_only_kerns_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            (".kern-Ab12Cd.tmp", true),
            (".kern-Ab12C.tmp", false),
            (".kern-Ab12Cd.tmp.bak", false),
            ("kern-Ab12Cd.tmp", false),
            (".kern-Ab-2Cd.tmp", false),
            ("SPEC.md", false),
        ];
        for (name, _) in names {
            fs::write(dir.path().join(name), "x").unwrap();
        }
        fs::create_dir(dir.path().join(".kern-Zz99Zz.tmp")).unwrap();
        let removed = remove_leftovers(dir.path());
        assert_eq!(removed, vec![dir.path().join(".kern-Ab12Cd.tmp")]);
        for (name, gone) in names {
            assert_eq!(!dir.path().join(name).exists(), gone, "{name}");
        }
        assert!(dir.path().join(".kern-Zz99Zz.tmp").is_dir());
        // A temp file of a write in progress matches the pattern (what a kill leaves).
        let prepared = prepare(&dir.path().join("SPEC.md"), b"new").unwrap();
        assert_eq!(remove_leftovers(dir.path()).len(), 1);
        drop(prepared);
    }

    #[test]
    fn replaces_content_and_keeps_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }

    #[test]
    fn creates_a_new_file_readable_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.json");
        write(&path, b"{}").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o044, 0o044 & (0o666 & !current_umask()));
    }

    #[test]
    fn a_private_write_is_0600_and_replaces_a_symlink() {
        type Writer = fn(&Path, &[u8]) -> Result<()>;
        let writers: [(&str, Writer); 2] = [
            ("write_private", write_private),
            ("write_unsynced_private", write_unsynced_private),
        ];
        for (name, writer) in writers {
            let dir = tempfile::tempdir().unwrap();
            let new = dir.path().join("task.json");
            writer(&new, b"{}").unwrap();
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode(&new), 0o600, "{name}");
            let old = dir.path().join("edits.json");
            fs::write(&old, "old").unwrap();
            fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).unwrap();
            writer(&old, b"new").unwrap();
            assert_eq!(
                (fs::read_to_string(&old).unwrap().as_str(), mode(&old)),
                ("new", 0o600)
            );
            let target = dir.path().join("elsewhere");
            fs::write(&target, "kept").unwrap();
            let link = dir.path().join("commit.json");
            std::os::unix::fs::symlink(&target, &link).unwrap();
            writer(&link, b"mine").unwrap();
            assert!(
                !fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{name}"
            );
            assert_eq!(fs::read_to_string(&target).unwrap(), "kept", "{name}");
            assert_eq!(mode(&link), 0o600, "{name}");
        }
    }
}
