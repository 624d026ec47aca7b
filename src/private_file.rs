//! Files only their owner can read: how kern opens every file of its state folder (stage
//! prompts, the agent's transcripts, check output, logs and the records it reads back).
//!
//! Decisions a reader must know:
//! - Modes are set on each file kern creates, never through the umask: the agents are kern's
//!   children, and a changed umask would make the files they write in the person's repository
//!   `0600` too. A file created here is `0600`; one that already existed with more open bits
//!   (an earlier kern made its logs `0644`) is narrowed to `0600` when kern opens it to write.
//! - Nothing here follows a symlink at the last component (`O_NOFOLLOW`): a link planted in
//!   place of a record is an error (`ELOOP`), never a way to make kern read or write elsewhere.
//!   The folders above are the state check's business (`state::privacy`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every file kern creates in its state folder.
pub(crate) const FILE_MODE: u32 = 0o600;

/// Creates `path` (or truncates it) for writing, `0600`, not through a symlink.
pub(crate) fn create(path: &Path) -> io::Result<File> {
    narrowed(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)?,
    )
}

/// Opens `path` for appending (creating it `0600`), not through a symlink.
pub(crate) fn append(path: &Path) -> io::Result<File> {
    narrowed(
        OpenOptions::new()
            .append(true)
            .create(true)
            .mode(FILE_MODE)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)?,
    )
}

/// Opens `path` for reading, not through a symlink.
pub(crate) fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// Reads all of `path`, not through a symlink.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads all of `path` as UTF-8 text, not through a symlink.
pub(crate) fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// `file` with its mode narrowed to `0600` when it was more open (a file of an earlier kern).
fn narrowed(file: File) -> io::Result<File> {
    let mode = file.metadata()?.permissions().mode() & 0o7777;
    if mode != FILE_MODE {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_and_earlier_files_end_up_0600() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("run.jsonl");
        append(&new).unwrap().write_all(b"one\n").unwrap();
        append(&new).unwrap().write_all(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "one\ntwo\n");
        assert_eq!(mode(&new), 0o600);
        let old = dir.path().join("stage1.jsonl");
        std::fs::write(&old, "old").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        create(&old).unwrap().write_all(b"new").unwrap();
        assert_eq!(
            (read_to_string(&old).unwrap().as_str(), mode(&old)),
            ("new", 0o600)
        );
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "planted").unwrap();
        let link = dir.path().join("task.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let loops = |r: io::Result<()>| r.unwrap_err().raw_os_error() == Some(nix::libc::ELOOP);
        assert!(loops(read(&link).map(drop)), "read");
        assert!(loops(read_to_string(&link).map(drop)), "read_to_string");
        assert!(loops(create(&link).map(drop)), "create");
        assert!(loops(append(&link).map(drop)), "append");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "planted");
    }
}
