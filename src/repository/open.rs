//! Opening a repository as git would: found from a folder by walking up, refused with git's own
//! fix when git itself would refuse it (another user's repository: `safe.directory`; a bare
//! one), when libgit2 cannot read its format (a split index), and given kern's reftable refs
//! when it keeps its refs in reftable files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{GitOptions, OwnFiles, Repository, reftable, status};
use crate::error::{Error, Result};

/// What a libgit2 error on opening or reading a repository says about a format it cannot read,
/// as the clause and the exact fix [`Error::RepositoryFormat`] shows; `None` for any other
/// error. Reftable refs and SHA-256 objects are read since issue 27 (their clauses stay for a
/// libgit2 that refuses them all the same).
pub(crate) fn unreadable_format(message: &str) -> Option<(String, String)> {
    if message.contains("extensions.refstorage") {
        Some((
            "stores its refs in the reftable format (`extensions.refStorage`, Git 3.0's default)".into(),
            "convert it to files with `git refs migrate --ref-format=files` (git 2.46 or newer; your refs and history stay as they are), or run kern in a clone made with `git clone --ref-format=files`".into(),
        ))
    } else if message.contains("object format 'sha256'") || message.contains("objectformat") {
        Some((
            "is a SHA-256 repository (`extensions.objectFormat = sha256`, Git 3.0's default)".into(),
            "run kern in a SHA-1 repository: git cannot convert one in place, so a SHA-256 project needs a SHA-1 mirror (`git init --object-format=sha1`, then `git fast-export --all | git fast-import` into it)".into(),
        ))
    } else if message.contains("mandatory extension: 'link'") {
        Some((
            "has a split index (`core.splitIndex`)".into(),
            "merge it with `git update-index --no-split-index` and keep it off with `git config core.splitIndex false`".into(),
        ))
    } else {
        None
    }
}

/// Lets libgit2 open repositories whose refs are in the reftable format (`extensions.refStorage`):
/// [`Repository::discover`] gives such a repository kern's reftable refs (`reftable.rs`). Called
/// once, before the first repository is opened.
pub(crate) fn accept_formats() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: libgit2 keeps the list in a global; `Once` makes this the only write, and it
        // happens before this process opens a repository through kern.
        if let Err(e) = unsafe { git2::opts::set_extensions(&["refstorage"]) } {
            tracing::warn!("cannot accept the reftable extension: {}", e.message());
        }
    });
}

/// The git folder holding `start`, for a message (the folder itself when none is found).
fn git_dir_of(start: &Path) -> PathBuf {
    start
        .ancestors()
        .map(|dir| dir.join(".git"))
        .find(|git| git.exists())
        .unwrap_or_else(|| start.to_path_buf())
}

/// A split index (`core.splitIndex`, a `sharedindex.*` file) is one libgit2 cannot read: say so
/// at open, with git's own fix, instead of failing at the first read of the index.
fn split_index_check(repo: &git2::Repository) -> Result<()> {
    let split = repo
        .config()
        .and_then(|c| c.get_bool("core.splitindex"))
        .unwrap_or(false)
        || std::fs::read_dir(repo.path()).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
        });
    if !split {
        return Ok(());
    }
    match repo.index().and_then(|mut i| i.read(true)) {
        Err(e) => match unreadable_format(e.message()) {
            Some((what, fix)) => Err(Error::RepositoryFormat {
                path: repo.path().to_path_buf(),
                what,
                fix,
            }),
            None => Err(Error::git("reading the index", e)),
        },
        Ok(()) => Ok(()),
    }
}

impl Repository {
    /// Finds the repository holding `start`, walking up as git does. Linked worktrees work; a
    /// bare repository or a folder outside git is an [`Error::Repository`] with the fix.
    pub fn discover(start: &Path) -> Result<Repository> {
        accept_formats();
        let repo = git2::Repository::discover(start).map_err(|e| {
            if let Some(path) = untrusted_path(&e, start) {
                Error::Repository(format!(
                    "`{}` is owned by another user, and git works in such a repository only when told it is safe (`safe.directory`) — if you trust it, run `{}`, then kern again",
                    path.display(),
                    safe_directory_fix(&path)
                ))
            } else if e.code() == git2::ErrorCode::NotFound {
                Error::Repository(format!(
                    "`{}` is not inside a git repository — run kern inside a git repository, or `git init` first",
                    start.display()
                ))
            } else if let Some((what, fix)) = unreadable_format(e.message()) {
                Error::RepositoryFormat {
                    path: git_dir_of(start),
                    what,
                    fix,
                }
            } else {
                Error::git(format!("opening the repository at `{}`", start.display()), e)
            }
        })?;
        if repo.config().is_ok_and(|c| reftable::is_reftable(&c)) {
            reftable::install(&repo).map_err(|e| Error::RepositoryFormat {
                path: repo.path().components().collect(),
                what: format!("stores its refs in the reftable format (`extensions.refStorage`, Git 3.0's default), and git, through which kern reads them, could not list them ({e})"),
                fix: "install git 2.46 or newer and put it on the PATH, or convert the refs with `git refs migrate --ref-format=files`".into(),
            })?;
        }
        split_index_check(&repo)?;
        let workdir = match repo.workdir() {
            Some(w) if !repo.is_bare() => w.to_path_buf(),
            _ => {
                let path = repo.path().to_string_lossy();
                return Err(Error::Repository(format!(
                    "`{}` is a bare repository — kern needs a work tree; run it in a clone with a checkout",
                    path.trim_end_matches('/')
                )));
            }
        };
        let top = workdir.canonicalize().map_err(|e| Error::io(&workdir, e))?;
        let options = GitOptions::default();
        Ok(Repository {
            repo,
            top,
            own: OwnFiles::default(),
            hook_timeout: options.hook_timeout,
            no_verify: options.no_verify,
            max_file_size: options.max_file_size,
            foreign_refs: options.foreign_refs,
            recent_commits_cache: RefCell::new(None),
            commit_stats: RefCell::new((Vec::new(), HashMap::new())),
            clean_ids: RefCell::new(HashMap::new()),
            status: RefCell::new(status::StatusCache::default()),
            hook_fence: RefCell::new((None, None)),
        })
    }
}

/// The git folder and the common git folder of the work tree at `top` (a linked worktree's
/// own and its repository's), for the fence: `None` when `top` is no repository libgit2 opens.
pub(crate) fn git_folders(top: &Path) -> Option<(PathBuf, PathBuf)> {
    let repo = git2::Repository::open(top).ok()?;
    let clean = |p: &Path| -> PathBuf { p.components().collect() };
    Some((clean(repo.path()), clean(repo.commondir())))
}

/// The repository git refused to open because another user owns it (git's `safe.directory`
/// check, which libgit2 makes too): its top folder, as git's own fix names it. `None` for any
/// other error.
pub(crate) fn untrusted_path(error: &git2::Error, start: &Path) -> Option<PathBuf> {
    if error.code() != git2::ErrorCode::Owner {
        return None;
    }
    // libgit2: "repository path '/x/' is not owned by current user".
    let quoted = error.message().split('\'').nth(1).filter(|p| !p.is_empty());
    let path = quoted.map_or_else(|| start.to_path_buf(), PathBuf::from);
    let path = match path.file_name() {
        Some(name) if name == ".git" => path.parent().map_or(path.clone(), Path::to_path_buf),
        _ => path,
    };
    Some(path.components().collect())
}

/// git's own fix for an untrusted repository at `path`.
pub(crate) fn safe_directory_fix(path: &Path) -> String {
    format!(
        "git config --global --add safe.directory {}",
        crate::text::shell_quote(&path.display().to_string())
    )
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn formats_libgit2_cannot_read_are_named_with_their_fix() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "unsupported extension name extensions.refstorage",
                Some("git refs migrate --ref-format=files"),
            ),
            ("unknown object format 'sha256'", Some("SHA-1 repository")),
            (
                "unsupported mandatory extension: 'link'",
                Some("git update-index --no-split-index"),
            ),
            ("failed to resolve path", None),
        ];
        for (message, fix) in cases {
            assert_eq!(
                unreadable_format(message).map(|(_, f)| f.contains(fix.unwrap_or(""))),
                fix.map(|_| true),
                "{message}"
            );
        }
    }

    #[test]
    fn an_untrusted_repository_is_named_as_gits_fix_names_it() {
        let owner = |message: &str| {
            git2::Error::new(git2::ErrorCode::Owner, git2::ErrorClass::Config, message)
        };
        let cases = [
            (
                "repository path '/tmp/own/' is not owned by current user",
                Some("/tmp/own"),
            ),
            (
                "repository path '/tmp/own/.git/' is not owned by current user",
                Some("/tmp/own"),
            ),
            ("not owned", Some("/start")),
        ];
        for (message, want) in cases {
            assert_eq!(
                untrusted_path(&owner(message), Path::new("/start")),
                want.map(PathBuf::from),
                "{message}"
            );
        }
        let other = git2::Error::new(
            git2::ErrorCode::NotFound,
            git2::ErrorClass::Repository,
            "repository path '/x' not found",
        );
        assert_eq!(untrusted_path(&other, Path::new("/start")), None);
        assert_eq!(
            safe_directory_fix(Path::new("/tmp/my repo")),
            "git config --global --add safe.directory '/tmp/my repo'"
        );
    }
}
