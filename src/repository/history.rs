//! History only moves forwards, and `.git` is part of the audit (DESIGN.md sections 4 and 8).
//!
//! After a stage, [`Repository::restore_history`] compares HEAD and the run's refs
//! ([`super::Ownership`]: its branch, and for a parallel task the run's branch too) with the
//! snapshot from before it and puts back what the stage moved the wrong way: the branch
//! rewound or deleted (`git reset --hard HEAD~1`, `git branch -D`), HEAD on another branch or
//! detached (`git checkout -b x`). Before anything is put back, what the agent made is kept
//! under `refs/kern/agent/…`, so every commit it made stays reachable. A branch the stage only
//! moved forwards (it committed on top) is left as it is: history moved forwards, and the audit
//! reports it. Refs the rest of the run moves forwards meanwhile ([`super::RefFilter::forwards`]:
//! the run's branch, seen from a parallel task's worktree) are taken where they moved to
//! ([`Repository::forward_moves_taken`]) and put back only when moved any other way.
//!
//! Every other ref is shared with the person and their tools (another worktree's branch, an
//! editor's fetch, a stash, a tag, another kern): created or moved forwards it is no finding;
//! rewound or deleted, [`Repository::shared_losses`] names it and the audit keeps its old tip
//! under `refs/kern/saved/…` — never put back, because kern cannot tell the person from the
//! agent there. A stash pushed on top of another is no loss: the older one is still listed.
//!
//! [`GitFiles`] is the other half: the hooks outside the work tree (`.git/hooks`, or a
//! `core.hooksPath` outside it), `.git/config` and `.git/info/exclude`, read before a stage and
//! put back after it when the stage changed them — so a hook an agent planted never runs inside
//! kern's commit. Hooks inside the work tree (`core.hooksPath = .husky`) are files of the
//! project: a change to them is work, reviewed and committed like any other.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::Oid;

use super::{RefsSnapshot, Repository, short};
use crate::error::{Error, Result};

/// What [`Repository::restore_history`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryRepair {
    /// One sentence per ref put back (empty: the history only moved forwards, or not at all).
    pub restored: Vec<String>,
    /// Where the agent's refs were kept (`refs/kern/agent/…`).
    pub kept: Vec<String>,
}

/// A shared ref a stage saw rewound, moved sideways or deleted (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedLoss {
    /// The ref's full name.
    pub name: String,
    /// Where it pointed before the stage.
    pub old: Oid,
    /// Where it points now, none when deleted.
    pub new: Option<Oid>,
}

impl std::fmt::Display for SharedLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.new {
            Some(new) => write!(
                f,
                "`{}` moved back from {} to {}",
                self.name,
                short(self.old),
                short(new)
            ),
            None => write!(f, "`{}` deleted (was {})", self.name, short(self.old)),
        }
    }
}

impl Repository {
    /// `before` with the refs that others may move forwards ([`RefFilter::forwards`]) taken
    /// as they are in `now` where they only moved forwards: what the stage itself did is then
    /// the difference from `before` to `now`.
    pub fn forward_moves_taken(&self, before: &RefsSnapshot, now: &RefsSnapshot) -> RefsSnapshot {
        let mut taken = before.clone();
        for name in &self.foreign_refs.forwards {
            let (Some(old), Some(new)) = (before.refs.get(name), now.refs.get(name)) else {
                continue;
            };
            if let (Ok(old_oid), Ok(new_oid)) = (super::parse_oid(old), super::parse_oid(new))
                && self.contains(new_oid, old_oid)
            {
                taken.refs.insert(name.clone(), new.clone());
            }
        }
        taken
    }

    /// The commits from `from` (excluded; `None`: from the root) up to `to`, oldest first,
    /// each as its short id and subject: what was committed on a branch that moved forwards.
    pub fn commits_between(
        &self,
        from: Option<git2::Oid>,
        to: git2::Oid,
    ) -> Result<Vec<(String, String)>> {
        let walk = || -> std::result::Result<Vec<(String, String)>, git2::Error> {
            let mut walk = self.repo.revwalk()?;
            walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
            walk.push(to)?;
            if let Some(from) = from {
                walk.hide(from)?;
            }
            walk.map(|oid| {
                let commit = self.repo.find_commit(oid?)?;
                let subject = String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                    .into_owned();
                Ok((short(commit.id()), subject))
            })
            .collect()
        };
        walk().map_err(|e| Error::git("listing the commits a stage made", e))
    }

    /// Whose each ref is during a stage that began at `before` (see [`super::Ownership`]).
    pub fn ownership(&self, before: &RefsSnapshot) -> super::Ownership {
        super::Ownership::new(before.head_target(), &self.foreign_refs.forwards)
    }

    /// The shared refs that went from `before` to `now` other than forwards: rewound, moved
    /// sideways or deleted (see the module docs). Creations and forward moves are not listed.
    pub fn shared_losses(&self, before: &RefsSnapshot, now: &RefsSnapshot) -> Vec<SharedLoss> {
        let ownership = self.ownership(before);
        let mut out = Vec::new();
        for (name, old) in &before.refs {
            let new = now.refs.get(name);
            if new == Some(old) || ownership.whose(name) == super::refs::Whose::Run {
                continue;
            }
            let Ok(old) = super::parse_oid(old) else {
                continue; // a symbolic ref (`refs/remotes/origin/HEAD`): nothing to lose
            };
            let new = new.and_then(|n| super::parse_oid(n).ok());
            if new.is_some_and(|new| self.only_added(name, old, new)) {
                continue;
            }
            out.push(SharedLoss {
                name: name.clone(),
                old,
                new,
            });
        }
        out
    }

    /// True when a shared ref that went from `old` to `new` lost nothing: a commit (or a tag
    /// of one) moved forwards, or a stash pushed on top of `old`, which its reflog still lists.
    fn only_added(&self, name: &str, old: Oid, new: Oid) -> bool {
        if name == "refs/stash" {
            return self
                .repo
                .reflog(name)
                .is_ok_and(|log| log.iter().any(|entry| entry.id_new() == old));
        }
        let commit = |oid: Oid| {
            self.repo
                .find_object(oid, None)
                .and_then(|o| o.peel_to_commit())
                .map(|c| c.id())
        };
        match (commit(old), commit(new)) {
            (Ok(old), Ok(new)) => self.contains(new, old),
            _ => false,
        }
    }

    /// Keeps the old tips of `losses` under `prefix` (`refs/kern/saved/<task>/<stage>-<n>/`),
    /// each at its own name there; returns the refs written.
    pub fn keep_shared(&self, prefix: &str, losses: &[SharedLoss]) -> Result<Vec<String>> {
        let mut kept = Vec::new();
        for loss in losses {
            let name = format!("{prefix}{}", loss.name.trim_start_matches("refs/"));
            self.set_ref(
                &name,
                loss.old,
                "kern: kept a shared ref's old tip (moved back during a stage)",
            )?;
            kept.push(name);
        }
        Ok(kept)
    }

    /// Puts back every ref of the run the stage moved the wrong way (see the module docs),
    /// keeping what the agent made under `keep_prefix` (e.g.
    /// `refs/kern/agent/add-the-parser/2/`). Shared refs are never touched here.
    pub fn restore_history(
        &self,
        before: &RefsSnapshot,
        keep_prefix: &str,
    ) -> Result<HistoryRepair> {
        let ownership = self.ownership(before);
        let before = before.runs_only(&ownership);
        let after = self.refs_snapshot()?.runs_only(&ownership);
        let mut repair = HistoryRepair::default();
        let branch = before.head_target.clone();
        for (name, old) in &before.refs {
            let new = after.refs.get(name);
            if new == Some(old) {
                continue;
            }
            let (Ok(old_oid), new_oid) = (
                super::parse_oid(old),
                new.and_then(|n| super::parse_oid(n).ok()),
            ) else {
                continue; // a symbolic ref: HEAD-like, handled below
            };
            let forwards = new_oid.is_some_and(|n| self.contains(n, old_oid));
            // Only the run's own branch may move forwards (an agent that committed).
            if forwards && Some(name) == branch.as_ref() {
                continue;
            }
            if let Some(n) = new_oid {
                let kept = format!("{keep_prefix}{}", name.trim_start_matches("refs/"));
                self.set_ref(&kept, n, "kern: kept what an agent made")?;
                repair.kept.push(kept);
            }
            self.set_ref(name, old_oid, "kern: put back what an agent moved")?;
            repair.restored.push(match new {
                Some(n) => format!(
                    "{name} put back from {} to {}",
                    short_hex(n),
                    short_hex(old)
                ),
                None => format!(
                    "{name} restored at {} (the agent deleted it)",
                    short_hex(old)
                ),
            });
        }
        if after.head_target != before.head_target {
            if let Some(oid) = after.head_oid {
                let kept = format!("{keep_prefix}HEAD");
                self.set_ref(&kept, oid, "kern: kept where an agent left HEAD")?;
                repair.kept.push(kept);
            }
            match &before.head_target {
                Some(target) => self
                    .repo
                    .set_head(target)
                    .map_err(|e| Error::git(format!("putting HEAD back on `{target}`"), e))?,
                None => {
                    if let Some(oid) = before.head_oid {
                        self.repo
                            .set_head_detached(oid)
                            .map_err(|e| Error::git("putting the detached HEAD back", e))?;
                    }
                }
            }
            repair.restored.push(format!(
                "HEAD put back on {} (the agent moved it to {})",
                show_target(before.head_target.as_deref()),
                show_target(after.head_target.as_deref())
            ));
        }
        Ok(repair)
    }
}

impl Repository {
    /// Removes the ref lock files (`refs/…/*.lock`, this worktree's `HEAD.lock`,
    /// `packed-refs.lock`) written since `stale_run_started`: a kern killed while it moved a
    /// ref leaves one, and libgit2 then refuses every later update of that ref. Older lock
    /// files are someone else's and stay, and so does another worktree's `HEAD.lock`. The
    /// repository is shared (another worktree's kern, the person's git): a lock file younger
    /// than [`LIVE_REF_LOCK`] may be a live writer's, which holds it for milliseconds, so it
    /// is waited for and removed only when it is still there, unchanged, after that.
    /// Returns what was removed.
    pub fn recover_ref_locks(
        &self,
        stale_run_started: std::time::SystemTime,
    ) -> Result<Vec<PathBuf>> {
        let mut candidates = vec![
            self.repo.path().join("HEAD.lock"),
            self.repo.commondir().join("packed-refs.lock"),
        ];
        for dir in [self.repo.path(), self.repo.commondir()] {
            collect_locks(&dir.join("refs"), &mut candidates);
        }
        candidates.sort();
        candidates.dedup();
        let mut removed = Vec::new();
        for path in candidates {
            let Ok(modified) = fs::symlink_metadata(&path).and_then(|m| m.modified()) else {
                continue;
            };
            if modified < stale_run_started {
                continue;
            }
            let age = modified.elapsed().unwrap_or_default();
            if let Some(wait) = LIVE_REF_LOCK.checked_sub(age).filter(|w| !w.is_zero()) {
                std::thread::sleep(wait);
                let still = fs::symlink_metadata(&path).and_then(|m| m.modified());
                if !still.is_ok_and(|m| m == modified) {
                    continue;
                }
            }
            if fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
        Ok(removed)
    }
}

/// How long a ref lock file may be a live writer's (git and libgit2 hold one for the few
/// milliseconds of one ref update): a younger one is not taken for a crashed kern's.
const LIVE_REF_LOCK: std::time::Duration = std::time::Duration::from_secs(2);

/// Every `*.lock` file under `dir`, recursively.
fn collect_locks(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_locks(&path, out);
        } else if path.extension().is_some_and(|e| e == "lock") {
            out.push(path);
        }
    }
}

fn short_hex(hex: &str) -> &str {
    hex.get(..7).unwrap_or(hex)
}

fn show_target(target: Option<&str>) -> String {
    target.unwrap_or("a detached commit").to_string()
}

/// The files of `.git` a stage must not change: hooks outside the work tree, the config, the
/// exclude file — their content (and the hooks' modes) at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitFiles {
    files: BTreeMap<PathBuf, Option<(u32, Vec<u8>)>>,
}

impl GitFiles {
    /// The files that differ between `self` (before) and `now`, by path.
    pub fn changed(&self, now: &GitFiles) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .files
            .keys()
            .chain(now.files.keys())
            .filter(|p| {
                self.files.get(*p).cloned().flatten() != now.files.get(*p).cloned().flatten()
            })
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

impl Repository {
    /// Reads the `.git` files a stage must not change (see [`GitFiles`]).
    pub fn git_files(&self) -> Result<GitFiles> {
        let mut files = BTreeMap::new();
        let common = self.repo.commondir().to_path_buf();
        for path in [
            common.join("config"),
            common.join("info").join("exclude"),
            self.repo.path().join("config.worktree"),
        ] {
            files.insert(path.clone(), read_file(&path)?);
        }
        let hooks = self.hooks_dir();
        let outside_work_tree =
            !hooks.starts_with(&self.top) || hooks.starts_with(self.repo.path());
        if outside_work_tree && let Ok(entries) = fs::read_dir(&hooks) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_file() {
                    files.insert(path.clone(), read_file(&path)?);
                }
            }
        }
        Ok(GitFiles { files })
    }

    /// Saves the stage's version of the `changed` `.git` files as a commit under `refname`
    /// (a tree of `git/<path inside .git>` files, no parent) and puts `before`'s versions back.
    pub fn restore_git_files(
        &self,
        before: &GitFiles,
        changed: &[PathBuf],
        refname: &str,
    ) -> Result<()> {
        let mut index = git2::Index::new_ext(self.repo.object_format())
            .map_err(|e| Error::git("a new index", e))?;
        let common = self.repo.commondir().to_path_buf();
        for path in changed {
            if let Some((mode, bytes)) = read_file(path)? {
                let rel = path
                    .strip_prefix(&common)
                    .or_else(|_| path.strip_prefix(self.repo.path()))
                    .map_or_else(
                        |_| Path::new("hooks").join(path.file_name().unwrap_or_default()),
                        |r| Path::new("git").join(r),
                    );
                let id = self
                    .repo
                    .blob(&bytes)
                    .map_err(|e| Error::git("saving a .git file", e))?;
                let mode = if mode & 0o111 != 0 {
                    0o100_755
                } else {
                    0o100_644
                };
                let entry =
                    super::index_entries::bare_entry(rel.as_os_str().as_bytes().to_vec(), mode, id);
                index
                    .add(&entry)
                    .map_err(|e| Error::git("saving a .git file", e))?;
            }
        }
        let tree = index
            .write_tree_to(&self.repo)
            .and_then(|id| self.repo.find_tree(id))
            .map_err(|e| Error::git("saving .git files", e))?;
        let sig = self
            .repo
            .signature()
            .or_else(|_| git2::Signature::now("kern", "kern@localhost"))
            .map_err(|e| Error::git("a signature", e))?;
        let oid = self
            .repo
            .commit(
                None,
                &sig,
                &sig,
                "kern: .git files a stage changed\n",
                &tree,
                &[],
            )
            .map_err(|e| Error::git("saving .git files", e))?;
        self.set_ref(refname, oid, "kern: saved .git files a stage changed")?;
        for path in changed {
            match before.files.get(path).cloned().flatten() {
                Some((mode, bytes)) => {
                    crate::atomic_file::write(path, &bytes)?;
                    fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o7777))
                        .map_err(|e| Error::io(path, e))?;
                }
                None => match fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(path, e)),
                },
            }
        }
        Ok(())
    }
}

/// A file's mode and bytes, `None` when it does not exist.
fn read_file(path: &Path) -> Result<Option<(u32, Vec<u8>)>> {
    match fs::read(path) {
        Ok(bytes) => {
            let mode = fs::metadata(path)
                .map(|m| m.permissions().mode())
                .map_err(|e| Error::io(path, e))?;
            Ok(Some((mode, bytes)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}
