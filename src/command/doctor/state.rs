//! The state checks: the state root and this project's folders are the user's alone (the
//! check every start makes, `state::privacy`) and the root can take files; a folder this
//! project had where versions before kept the state is named, with how to move it; the run
//! lock of this project and branch is free (or whose it is).
//!
//! The decision a reader must know: doctor changes nothing — the state-root check creates and
//! removes one temp file in the nearest existing folder of the root, never the project folder;
//! the old folder is never moved; the lock is only read.

use std::path::{Path, PathBuf};

use super::Check;
use crate::error::Error;
use crate::repository::Repository;
use crate::state::StateDir;
use crate::state::lock::RunLock;
use crate::state::privacy::{self, Verdict};

/// The state folder: the root and this project's folders pass the check every start makes,
/// and the root can take files — a temp file is created and removed in it, or, when it does
/// not exist yet, in its nearest existing folder (where a run would create it).
pub(super) fn state_root_check(root: &Path, repo: Option<&Repository>) -> Check {
    const NAME: &str = "state folder";
    let checked = match repo {
        Some(repo) => repo
            .head()
            .map(|head| crate::state::head_folder(head.branch()))
            .map_or(Ok(()), |branch| {
                StateDir::locate(root, repo.top(), &branch).map(drop)
            }),
        None => privacy::inspect(root).map(drop),
    };
    if let Err(e @ Error::StateFolderUnsafe { .. }) = checked {
        let text = e.to_string();
        let (detail, fix) = super::split_fix(&text, "");
        let detail = detail.strip_prefix("state folder ").unwrap_or(&detail);
        return Check::fail(NAME, detail, fix);
    }
    let fix = "set KERN_STATE_DIR to a writable folder";
    let mut dir = root.to_path_buf();
    loop {
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Check::fail(
                    NAME,
                    format!(
                        "`{}` cannot be created: `{}` is not a folder",
                        root.display(),
                        dir.display()
                    ),
                    fix,
                );
            }
            Err(_) => match dir.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => dir = parent.to_path_buf(),
                _ => {
                    dir = PathBuf::from(".");
                    break;
                }
            },
        }
    }
    match tempfile::Builder::new()
        .prefix(".kern-doctor-")
        .tempfile_in(&dir)
    {
        Ok(file) => {
            let _ = file.close();
            if dir == root {
                let whose = match privacy::inspect(root) {
                    Ok(Some(Verdict::Readable)) => {
                        "yours, and no one else can write in it (others may list it; kern's folders in it are 0700)"
                    }
                    _ => "yours alone",
                };
                Check::pass(NAME, format!("`{}` is writable, {whose}", root.display()))
            } else {
                Check::pass(
                    NAME,
                    format!(
                        "`{}` will be created (`{}` is writable)",
                        root.display(),
                        dir.display()
                    ),
                )
            }
        }
        Err(e) => Check::fail(
            NAME,
            format!("`{}` is not writable: {e}", dir.display()),
            fix,
        ),
    }
}

/// This project's folder where versions before kept the state (`${TMPDIR:-/tmp}/claude/kern`),
/// when there is one: kern reads nothing from it and moves nothing; the line says how to.
pub(super) fn old_state_check(old_root: &Path, root: &Path, repo: &Repository) -> Option<Check> {
    let name = repo.top().file_name()?;
    let old = old_root.join(name);
    if old_root == root || std::fs::symlink_metadata(&old).is_err() {
        return None;
    }
    let new = root.join(name);
    Some(Check::pass(
        "old state folder",
        format!(
            "`{old}` is from an earlier kern, which kept its state where others could read it; kern now keeps it in `{root}` and neither reads nor moves the old one — to keep its run log for `kern report`, move it yourself (`mkdir -p -m 700 '{root}' && mv '{old}' '{new}'`, when `{new}` does not exist yet), else delete it",
            old = old.display(),
            root = root.display(),
            new = new.display(),
        ),
    ))
}

/// The run lock of this project and branch: free, stale, or held (then the holder).
pub(super) fn lock_check(repo: &Repository) -> Check {
    const NAME: &str = "run lock";
    let path = repo.run_lock_path();
    match RunLock::inspect(&path) {
        None => Check::pass(NAME, format!("free (`{}`)", path.display())),
        Some((record, false)) => Check::pass(
            NAME,
            format!(
                "stale lock of pid {} (not running): the next run takes it over",
                record.pid
            ),
        ),
        Some((record, true)) => Check::fail(
            NAME,
            format!("held by another kern: {}", record.holder()),
            format!(
                "wait for that run to end, or stop it with `kill -INT {}` (its task resumes on the next run)",
                record.pid
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Verdict;
    use super::*;

    #[test]
    fn state_root_check_finds_the_nearest_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a/b/state");
        let c = state_root_check(&root, None);
        assert_eq!(c.verdict, Verdict::Pass);
        assert_eq!(
            c.detail,
            format!(
                "`{}` will be created (`{}` is writable)",
                root.display(),
                dir.path().display()
            )
        );
        assert!(!dir.path().join("a").exists(), "doctor creates nothing");
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let c = state_root_check(&file.join("state"), None);
        assert!(c.failed());
        assert_eq!(
            c.detail,
            format!(
                "`{}/state` cannot be created: `{}` is not a folder",
                file.display(),
                file.display()
            )
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
