//! The state folder belongs to its user: the folders kern keeps transcripts and records in are
//! checked as ssh checks `~/.ssh`, and the ones kern makes are `0700`.
//!
//! The rule, for the root, the project folder and the branch folder (every start checks the
//! ones that exist, before any agent runs): a real folder, not a symlink; owned by the user
//! kern runs as (its effective uid); writable by no one else. A folder that fails is refused
//! with exit 2, naming it, its owner and mode, and the fix ([`judge`] is the rule as a pure
//! function). Writable is the danger — another user could plant the records kern reads back
//! (`task.json`, `edits.json`, `commit.json`, the stage records) —, so a root the person chose
//! that others may only *read* (their own `KERN_STATE_DIR`, `0755`) passes: the project and
//! branch folders below it are kern's own and are made `0700` when a run claims them, so
//! nothing in them can be read either. Every folder kern creates is `0700` from the start
//! (set on the folder itself: the umask is the agents' too and stays as it is). The folders
//! under a branch folder (a parallel task's `jobs/<slug>/`) need no check of their own: no one
//! else can write in a folder that passed. The folders above the root are not checked (ssh
//! stops at the home folder too): the default root is in the user's home, and a root the person
//! names in `/tmp` cannot be replaced by others there (the sticky bit).

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// The mode of every folder kern creates in its state tree.
pub(crate) const FOLDER_MODE: u32 = 0o700;

/// What `lstat` says about a folder of the state tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// A symlink (lstat: the link itself, not what it names).
    pub symlink: bool,
    /// A folder (false for a file, a socket…).
    pub folder: bool,
    /// The owner's uid.
    pub owner: u32,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// What the check makes of a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The user's alone: no one else can read, list or write it.
    Private,
    /// The user's and writable by no one else, but others may read or list it: fine for a root
    /// the person chose; kern narrows its own folders to `0700`.
    Readable,
    /// Refused.
    Unsafe(Unsafe),
}

/// Why a folder is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsafe {
    /// A symlink: kern would keep its records wherever it points.
    Symlink,
    /// Not a folder at all.
    NotAFolder,
    /// Another user owns it.
    Owner,
    /// Group or others may write in it.
    Writable,
}

/// The rule (see the module docs) for a folder found as `found` by a kern running as `euid`.
pub(crate) fn judge(euid: u32, found: Found) -> Verdict {
    if found.symlink {
        Verdict::Unsafe(Unsafe::Symlink)
    } else if !found.folder {
        Verdict::Unsafe(Unsafe::NotAFolder)
    } else if found.owner != euid {
        Verdict::Unsafe(Unsafe::Owner)
    } else if found.mode & 0o022 != 0 {
        Verdict::Unsafe(Unsafe::Writable)
    } else if found.mode & 0o077 != 0 {
        Verdict::Readable
    } else {
        Verdict::Private
    }
}

/// Checks the folder at `path`: `None` when it does not exist, the verdict when it passes,
/// [`Error::StateFolderUnsafe`] when it is refused.
pub(crate) fn inspect(path: &Path) -> Result<Option<Verdict>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unusable(path, &e)),
    };
    let found = Found {
        symlink: meta.file_type().is_symlink(),
        folder: meta.is_dir(),
        owner: meta.uid(),
        mode: meta.mode() & 0o7777,
    };
    let euid = nix::unistd::geteuid().as_raw();
    match judge(euid, found) {
        Verdict::Unsafe(why) => Err(refusal(path, found, why, euid)),
        verdict => Ok(Some(verdict)),
    }
}

/// Whose a folder kern claims is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The root: created `0700` (with any missing folders above it) when missing; an existing
    /// one is the person's and keeps its mode.
    Root,
    /// A folder of kern's own below the root: created `0700` when missing, narrowed to `0700`
    /// when it exists and others may read it.
    Own,
}

/// Makes sure the folder at `path` exists and passes the check (see [`Claim`]).
pub(crate) fn claim(path: &Path, claim: Claim) -> Result<()> {
    let verdict = match inspect(path)? {
        Some(verdict) => verdict,
        None => {
            let made = fs::DirBuilder::new()
                .recursive(claim == Claim::Root)
                .mode(FOLDER_MODE)
                .create(path);
            match made {
                Ok(()) => set_private(path)?,
                // Made by someone else just now: the check below judges it.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(unusable(path, &e)),
            }
            inspect(path)?.ok_or_else(|| {
                Error::io(path, std::io::Error::from(std::io::ErrorKind::NotFound))
            })?
        }
    };
    if verdict == Verdict::Readable && claim == Claim::Own {
        set_private(path)?;
    }
    Ok(())
}

/// A state folder kern can neither read nor make (a `HOME` it cannot write, as a service
/// account has; a path through a file): the folder, why, and the fix — exit 2.
fn unusable(path: &Path, e: &std::io::Error) -> Error {
    Error::Usage(format!(
        "kern cannot make or read its state folder `{}` ({e}) — point KERN_STATE_DIR (or XDG_STATE_HOME) at a folder you own and can write, then run kern again",
        path.display()
    ))
}

fn set_private(path: &Path) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(FOLDER_MODE))
        .map_err(|e| Error::io(path, e))
}

/// The refusal of `path`: what is wrong, its owner and mode, and the fix.
fn refusal(path: &Path, found: Found, why: Unsafe, euid: u32) -> Error {
    let shown = path.display();
    let (problem, fix) = match why {
        Unsafe::Symlink => (
            match fs::read_link(path) {
                Ok(target) => format!("is a symlink to `{}`", target.display()),
                Err(_) => "is a symlink".to_string(),
            },
            "kern does not follow links in its state folder: remove the link (kern then creates a private folder there), or choose another folder with KERN_STATE_DIR".to_string(),
        ),
        Unsafe::NotAFolder => (
            "is not a folder".to_string(),
            "remove it, or choose another folder with KERN_STATE_DIR".to_string(),
        ),
        Unsafe::Owner => (
            format!("is not yours (kern runs as {})", user(euid)),
            format!(
                "another user could read kern's transcripts there and plant records it reads back: have it removed (or `chown` it to you, then `chmod 700 {shown}`), or choose a folder of your own with KERN_STATE_DIR"
            ),
        ),
        Unsafe::Writable => (
            "is writable by group or others".to_string(),
            format!(
                "they could plant records kern reads back: `chmod 700 {shown}`, or choose another folder with KERN_STATE_DIR"
            ),
        ),
    };
    Error::StateFolderUnsafe {
        path: path.to_path_buf(),
        problem,
        owner: user(found.owner),
        mode: found.mode,
        fix,
    }
}

/// `` `name` (uid N) ``, or `uid N` when the user has no name.
fn user(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("`{}` (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        const ME: u32 = 1000;
        let folder = |owner, mode| Found {
            symlink: false,
            folder: true,
            owner,
            mode,
        };
        let table = [
            (folder(ME, 0o700), Verdict::Private),
            (folder(ME, 0o500), Verdict::Private),
            (folder(ME, 0o755), Verdict::Readable),
            (folder(ME, 0o711), Verdict::Readable),
            (folder(ME, 0o750), Verdict::Readable),
            (folder(ME, 0o770), Verdict::Unsafe(Unsafe::Writable)),
            (folder(ME, 0o702), Verdict::Unsafe(Unsafe::Writable)),
            (folder(ME, 0o777), Verdict::Unsafe(Unsafe::Writable)),
            (folder(ME, 0o1777), Verdict::Unsafe(Unsafe::Writable)),
            (folder(0, 0o700), Verdict::Unsafe(Unsafe::Owner)),
            (folder(65534, 0o777), Verdict::Unsafe(Unsafe::Owner)),
            (
                Found {
                    symlink: true,
                    folder: false,
                    owner: ME,
                    mode: 0o777,
                },
                Verdict::Unsafe(Unsafe::Symlink),
            ),
            (
                Found {
                    symlink: true,
                    folder: false,
                    owner: 65534,
                    mode: 0o777,
                },
                Verdict::Unsafe(Unsafe::Symlink),
            ),
            (
                Found {
                    symlink: false,
                    folder: false,
                    owner: ME,
                    mode: 0o600,
                },
                Verdict::Unsafe(Unsafe::NotAFolder),
            ),
        ];
        for (found, verdict) in table {
            assert_eq!(judge(ME, found), verdict, "{found:?}");
        }
        // Root is held to the same rule: its own folders only.
        assert_eq!(
            judge(0, folder(1000, 0o700)),
            Verdict::Unsafe(Unsafe::Owner)
        );
    }

    #[test]
    fn claiming_creates_0700_narrows_its_own_and_refuses_the_unsafe() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let root = dir.path().join("a/b/kern");
        claim(&root, Claim::Root).unwrap();
        assert_eq!((mode(&root), mode(&dir.path().join("a"))), (0o700, 0o700));
        let project = root.join("app");
        fs::create_dir(&project).unwrap();
        fs::set_permissions(&project, fs::Permissions::from_mode(0o755)).unwrap();
        claim(&project, Claim::Own).unwrap();
        assert_eq!(mode(&project), 0o700, "kern's own folder is narrowed");
        let mine = dir.path().join("mine");
        fs::create_dir(&mine).unwrap();
        fs::set_permissions(&mine, fs::Permissions::from_mode(0o755)).unwrap();
        claim(&mine, Claim::Root).unwrap();
        assert_eq!(mode(&mine), 0o755, "a root the person chose keeps its mode");
        fs::set_permissions(&mine, fs::Permissions::from_mode(0o777)).unwrap();
        let e = claim(&mine, Claim::Root).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "state folder `{m}` is writable by group or others: owner {me}, mode 0777 — they could plant records kern reads back: `chmod 700 {m}`, or choose another folder with KERN_STATE_DIR",
                m = mine.display(),
                me = user(nix::unistd::geteuid().as_raw()),
            )
        );
        let link = root.join("main");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        let e = claim(&link, Claim::Own).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "state folder `{}` is a symlink to `{}`: owner",
                link.display(),
                mine.display()
            )),
            "{e}"
        );
        assert_eq!(inspect(&root.join("none")).unwrap(), None);
    }
}
