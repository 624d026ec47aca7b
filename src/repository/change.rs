//! One path as `git status` lists it: what the status look finds and the commit's rules
//! judge (`staging::would_leave_out`), so neither file needs the other's.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use git2::Status;

/// One path `git status` lists, with its status bits.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// Relative to the top, without a trailing `/`.
    pub(crate) path: PathBuf,
    /// A folder listed as one path: a nested repository, or a submodule whose checkout moved.
    pub(crate) folder: bool,
    /// libgit2's status bits.
    pub(crate) status: Status,
}

impl Change {
    /// The path as `git status` sorts it (a folder with its trailing `/`).
    pub(super) fn sort_key(&self) -> Vec<u8> {
        let mut key = self.path.as_os_str().as_bytes().to_vec();
        if self.folder {
            key.push(b'/');
        }
        key
    }
}
