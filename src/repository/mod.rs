//! Everything git, through libgit2: the repository (opened as git would: `open.rs`), its HEAD
//! and state, what is dirty, and git's own `index.lock`. Commits (staging, hooks, filters, signing), prompt context, ref
//! and work-tree snapshots, kern's own files, an agent's stash and the preflight live in the
//! sub-modules, one concept each.
//!
//! The one decision a reader must know: every local read and write goes through `git2`, so kern's
//! behaviour does not depend on the installed git, its version, its aliases or its pager; the
//! programs kern runs are the person's own — hooks, filter drivers and signing programs, as git
//! would run them — and git itself only where libgit2 cannot do what git does: `git var` where
//! only git can say who commits (`identity.rs`), the refs of a reftable repository
//! (`reftable/`, a libgit2 refdb backend over `git for-each-ref` and `git update-ref`,
//! installed at open), and `git fetch`/`git push` for `--remote` (`remote.rs`: libgit2's push
//! cannot state a ref's expected old value, which a claim needs). SHA-256 repositories are
//! libgit2's own (git2's `unstable-sha256`); ids kern wrote down are read back in their format
//! ([`parse_oid`]). A repository in a format kern cannot read (a split index; reftable refs with
//! no git to read them) is refused at open with git's own fix ([`unreadable_format`]). What
//! counts as a change is what `git status` shows: skip-worktree (sparse) entries never do, a
//! filtered file (Git LFS) whose clean output is the staged blob does not, and a submodule
//! counts only when its checkout moved.

mod change;
mod commit;
mod context;
mod encoding;
mod filter;
mod history;
mod hooks;
mod identity;
mod index_entries;
mod memory;
mod message;
mod open;
mod own_files;
mod pre_commit;
mod preflight;
mod refs;
mod reftable;
pub(crate) mod remote;
mod save;
pub(crate) mod sensitive;
mod signing;
mod snapshot;
mod spill;
mod staging;
mod stash;
mod status;
mod status_ask;
mod timing;
mod tree_diff;
mod tree_write;
mod watch;
mod worktree;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use git2::RepositoryState;

use crate::error::{Error, Result};

pub(crate) use change::Change;
pub use commit::{CommitRequest, LeftOut};
pub(crate) use filter::FilterDriver;
pub(crate) use history::GitFiles;
pub(crate) use open::{
    accept_formats, git_folders, safe_directory_fix, unreadable_format, untrusted_path,
};
pub(crate) use own_files::OwnFiles;
pub(crate) use refs::{Ownership, RefsSnapshot};
pub(crate) use save::KERN_REFS;
pub(crate) use snapshot::WorkTreeSnapshot;
pub(crate) use status::StatusCounts;
pub(crate) use timing::Timed;
pub(crate) use worktree::{Applied, TASK_BRANCH_PREFIX};

/// `--hook-timeout`'s default: the longest a hook, filter or signing program may run.
pub(crate) const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// `--max-file-size`'s default (100 MiB): what code hosts accept in one file.
pub(crate) const DEFAULT_MAX_FILE_SIZE: u64 = 100 << 20;

/// How long a commit waits for an `index.lock` held by someone else.
pub const INDEX_LOCK_WAIT: Duration = Duration::from_secs(10);

/// What a run tells the git layer: its own files and the limits of the person's programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOptions {
    /// kern's own files (SPEC.md and LEARNINGS.md), absolute or relative to the top.
    pub own_files: Vec<PathBuf>,
    /// The longest a hook, clean filter or signing program may run (`--hook-timeout`).
    pub hook_timeout: Duration,
    /// Larger new or changed files are left out of commits (`--max-file-size`).
    pub max_file_size: u64,
    /// Refs other parts of kern move while this work tree's stage runs (a parallel task's
    /// view: the run's branch, `refs/kern/`, the other tasks' branches): left out of
    /// the refs snapshots (`RefsSnapshot`), so the audit neither reports nor puts them back.
    pub foreign_refs: RefFilter,
    /// `--no-verify`: the person's hooks around a commit and a push do not run.
    pub no_verify: bool,
}

impl Default for GitOptions {
    fn default() -> Self {
        GitOptions {
            own_files: Vec::new(),
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            foreign_refs: RefFilter::default(),
            no_verify: false,
        }
    }
}

/// Names of refs: a name ending in `/` covers every ref under it; `except` wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefFilter {
    /// Full ref names, or prefixes ending in `/`.
    pub names: Vec<String>,
    /// Full ref names never covered.
    pub except: Vec<String>,
    /// Full ref names that are audited, but that the rest of the run moves forwards meanwhile
    /// (the run's branch while a parallel task's stage runs): moved forwards is no finding,
    /// moved any other way is put back.
    pub forwards: Vec<String>,
}

impl RefFilter {
    /// True when `name` is covered.
    pub fn covers(&self, name: &str) -> bool {
        !self.except.iter().any(|e| e == name)
            && self.names.iter().any(|n| {
                if n.ends_with('/') {
                    name.starts_with(n.as_str())
                } else {
                    name == n
                }
            })
    }
}

/// The commit checked out in the repository at `path` (a submodule), read as git reads it
/// (a reftable submodule's refs through git); `None` when there is none.
fn checked_out_commit(path: &Path) -> Option<git2::Oid> {
    let sub = git2::Repository::open(path).ok()?;
    if sub.config().is_ok_and(|c| reftable::is_reftable(&c)) {
        reftable::install(&sub).ok()?;
    }
    sub.head().ok().and_then(|h| h.target())
}

pub(crate) use crate::oid::parse as parse_oid;

/// A repository with a work tree, opened through libgit2.
pub struct Repository {
    repo: git2::Repository,
    top: PathBuf,
    own: OwnFiles,
    hook_timeout: Duration,
    no_verify: bool,
    max_file_size: u64,
    foreign_refs: RefFilter,
    /// `recent_commits` by (HEAD, count, budget, excluded paths): see context.rs.
    recent_commits_cache: RefCell<Option<(RecentCommitsKey, String)>>,
    /// Each recent commit's stat text, for the excluded paths it was made with: see context.rs.
    commit_stats: RefCell<CommitStats>,
    /// A filtered file's clean blob id by path, valid while its stamp is unchanged.
    clean_ids: RefCell<HashMap<PathBuf, (snapshot::Stamp, git2::Oid)>>,
    /// What the last status look found, and the work-tree watch: see status.rs.
    status: RefCell<status::StatusCache>,
    /// The fence the commit's hooks run in (`None`: unfenced), and what it denied them since
    /// it was last asked (see hooks.rs).
    hook_fence: RefCell<(
        Option<crate::sandbox::Fence>,
        Option<crate::sandbox::FenceReport>,
    )>,
}

type RecentCommitsKey = (git2::Oid, usize, usize, Vec<String>);
type CommitStats = (Vec<String>, HashMap<git2::Oid, String>);

/// Where HEAD points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// On a branch that has commits (its short name, e.g. `feature/x`).
    Branch(String),
    /// On a branch that has no commit yet (a fresh `git init`).
    Unborn(String),
    /// Not on a branch.
    Detached(git2::Oid),
}

impl Head {
    /// The branch HEAD is on, born or unborn; `None` when detached.
    pub fn branch(&self) -> Option<&str> {
        match self {
            Head::Branch(name) | Head::Unborn(name) => Some(name),
            Head::Detached(_) => None,
        }
    }
}

impl Repository {
    /// Sets what a run tells the git layer (see [`GitOptions`]); until then the defaults hold
    /// and no file counts as kern's own.
    pub fn set_options(&mut self, options: GitOptions) {
        self.own = OwnFiles::new(own_files::relative_paths(&self.top, &options.own_files));
        self.hook_timeout = options.hook_timeout;
        self.no_verify = options.no_verify;
        self.max_file_size = options.max_file_size;
        self.foreign_refs = options.foreign_refs;
    }

    /// True when the repository keeps its refs in the reftable format (read through git).
    pub fn uses_reftable(&self) -> bool {
        self.repo.config().is_ok_and(|c| reftable::is_reftable(&c))
    }

    /// The top folder of the work tree (canonical, no trailing slash).
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The repository's git folder (`<top>/.git`, or a worktree's own), without a trailing
    /// slash.
    pub fn git_dir(&self) -> PathBuf {
        self.repo.path().components().collect()
    }

    /// True when the git folder no longer exists: something (an agent) deleted the repository
    /// while kern held it open.
    pub fn is_gone(&self) -> bool {
        !self.repo.path().exists()
    }

    /// The underlying libgit2 repository, for callers that need a read kern does not wrap.
    pub fn git(&self) -> &git2::Repository {
        &self.repo
    }

    /// True when `commit` is in the history of `tip` (`tip` is `commit` or descends from it):
    /// a ref that went from `commit` to `tip` only moved forwards.
    pub fn contains(&self, tip: git2::Oid, commit: git2::Oid) -> bool {
        tip == commit || self.repo.graph_descendant_of(tip, commit).unwrap_or(false)
    }

    /// True when the tree of commit `commit` holds a file at `rel`.
    pub fn file_at(&self, commit: git2::Oid, rel: &Path) -> bool {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .and_then(|t| t.get_path(rel))
            .is_ok()
    }

    /// The index as it is on disk now; `force` reads it even when libgit2 believes its copy
    /// is current (a file replaced within the same second).
    fn index_from_disk(&self, force: bool) -> Result<git2::Index> {
        let mut index = self
            .repo
            .index()
            .map_err(|e| Error::git("opening the index", e))?;
        index
            .read(force)
            .map_err(|e| Error::git("reading the index", e))?;
        Ok(index)
    }

    /// The tree of the commit `oid`, none for none (an unborn branch); `context` names the
    /// step in an error.
    fn tree_of(&self, oid: Option<git2::Oid>, context: &str) -> Result<Option<git2::Tree<'_>>> {
        oid.map(|oid| {
            self.repo
                .find_commit(oid)
                .and_then(|c| c.tree())
                .map_err(|e| Error::git(context, e))
        })
        .transpose()
    }

    /// Where HEAD points.
    pub fn head(&self) -> Result<Head> {
        let head = self
            .repo
            .find_reference("HEAD")
            .map_err(|e| Error::git("reading HEAD", e))?;
        match head.symbolic_target_bytes() {
            Some(target) => {
                let target = &*String::from_utf8_lossy(target);
                let name = target
                    .strip_prefix("refs/heads/")
                    .unwrap_or(target)
                    .to_string();
                match self.repo.refname_to_id(target) {
                    Ok(_) => Ok(Head::Branch(name)),
                    Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(Head::Unborn(name)),
                    Err(e) => Err(Error::git(format!("resolving `{target}`"), e)),
                }
            }
            None => head
                .target()
                .map(Head::Detached)
                .ok_or_else(|| Error::Internal("HEAD is neither symbolic nor direct".into())),
        }
    }

    /// The run lock of this work tree: `kern.lock` in its own git dir (`.git/kern.lock`, or
    /// `.git/worktrees/<name>/kern.lock` for a linked worktree).
    pub fn run_lock_path(&self) -> PathBuf {
        self.repo.path().join("kern.lock")
    }

    /// The branch name as the original script saw it (for its legacy lock folder): the branch,
    /// else `HEAD`.
    pub fn branch_name(&self) -> Result<String> {
        Ok(match self.head()? {
            Head::Branch(name) | Head::Unborn(name) => name,
            Head::Detached(_) => "HEAD".to_string(),
        })
    }

    /// The commit HEAD points to; `None` on an unborn branch.
    pub fn head_oid(&self) -> Option<git2::Oid> {
        self.repo.head().ok().and_then(|h| h.target())
    }

    /// Refuses to work while git is in the middle of a merge, rebase, cherry-pick, revert,
    /// bisect or `git am`: kern's commit would mix its work into the person's operation.
    pub fn ensure_no_operation_in_progress(&self) -> Result<()> {
        let (what, fix) = match self.repo.state() {
            RepositoryState::Clean => return Ok(()),
            RepositoryState::Merge => (
                "a merge",
                "finish it (`git commit`) or abort it (`git merge --abort`)",
            ),
            RepositoryState::Revert | RepositoryState::RevertSequence => (
                "a revert",
                "finish it (`git revert --continue`) or abort it (`git revert --abort`)",
            ),
            RepositoryState::CherryPick | RepositoryState::CherryPickSequence => (
                "a cherry-pick",
                "finish it (`git cherry-pick --continue`) or abort it (`git cherry-pick --abort`)",
            ),
            RepositoryState::Bisect => ("a bisect", "end it (`git bisect reset`)"),
            RepositoryState::Rebase
            | RepositoryState::RebaseInteractive
            | RepositoryState::RebaseMerge
            | RepositoryState::ApplyMailboxOrRebase => (
                "a rebase",
                "finish it (`git rebase --continue`) or abort it (`git rebase --abort`)",
            ),
            RepositoryState::ApplyMailbox => (
                "`git am`",
                "finish it (`git am --continue`) or abort it (`git am --abort`)",
            ),
        };
        Err(Error::Repository(format!(
            "{what} is in progress — {fix}, then run kern again"
        )))
    }

    /// A snapshot of the git config (files read once).
    fn config_snapshot(&self) -> Result<git2::Config> {
        self.repo
            .config()
            .and_then(|mut c| c.snapshot())
            .map_err(|e| Error::git("reading the git config", e))
    }

    /// Path of git's own index lock (per worktree).
    fn index_lock_path(&self) -> PathBuf {
        self.repo.path().join("index.lock")
    }

    /// True when git's `index.lock` exists.
    pub fn index_lock_present(&self) -> bool {
        self.index_lock_path().exists()
    }

    /// Waits up to [`INDEX_LOCK_WAIT`] for an `index.lock` held by someone else (an editor's
    /// background `git status`) to go, telling `notify` once that it waits. Still there:
    /// [`Error::IndexLocked`].
    pub fn wait_for_index_lock(&self, notify: Option<&dyn Fn(&str)>) -> Result<()> {
        let path = self.index_lock_path();
        if !path.exists() {
            return Ok(());
        }
        if let Some(notify) = notify {
            notify(&format!(
                "waiting for `{}`: another git process is using the index (up to {} s)",
                path.display(),
                INDEX_LOCK_WAIT.as_secs()
            ));
        }
        let deadline = std::time::Instant::now() + INDEX_LOCK_WAIT;
        while path.exists() {
            if std::time::Instant::now() >= deadline {
                return Err(Error::IndexLocked { path });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Writes `index` to disk, waiting out an `index.lock` held for a moment by someone else
    /// (an editor's background `git status`) as the commit does ([`Self::wait_for_index_lock`],
    /// telling `notify`); `what` names the step in an error. Every index kern writes in the
    /// work tree goes through here.
    pub(crate) fn write_index(
        &self,
        index: &mut git2::Index,
        what: &str,
        notify: Option<&dyn Fn(&str)>,
    ) -> Result<()> {
        match index.write() {
            Err(e) if e.code() == git2::ErrorCode::Locked => {
                self.wait_for_index_lock(notify)?;
                index.write().map_err(|e| self.index_error(what, e))
            }
            other => other.map_err(|e| self.index_error(what, e)),
        }
    }

    /// Deals with an `index.lock` found when taking over the lock of a dead kern run that
    /// started at `stale_run_started`. A lock file written since that run started may be the
    /// one that run left while committing: it is removed and its path returned so the caller
    /// can say so. A lock file that predates the run cannot be kern's: [`Error::IndexLocked`].
    /// No lock file: `Ok(None)`.
    pub fn recover_index_lock(&self, stale_run_started: SystemTime) -> Result<Option<PathBuf>> {
        let path = self.index_lock_path();
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let modified = meta.modified().map_err(|e| Error::io(&path, e))?;
        if modified < stale_run_started {
            return Err(Error::IndexLocked { path });
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(Some(path)),
            // Gone meanwhile: whoever held it finished; nothing left to recover.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// `path` relative to the top, byte for byte, without `.` parts; `None` when it lies
    /// outside the work tree or is the top itself.
    fn relative_path(&self, path: &Path) -> Option<PathBuf> {
        let rel = if path.is_absolute() {
            path.strip_prefix(&self.top)
                .ok()
                .map(Path::to_path_buf)
                .or_else(|| {
                    let canonical = path
                        .parent()
                        .and_then(|p| p.canonicalize().ok())
                        .map(|p| p.join(path.file_name().unwrap_or_default()))?;
                    canonical
                        .strip_prefix(&self.top)
                        .ok()
                        .map(Path::to_path_buf)
                })?
        } else {
            path.to_path_buf()
        };
        let rel: PathBuf = rel
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        (!rel.as_os_str().is_empty()).then_some(rel)
    }

    /// `path` relative to the top, `/`-separated, without `.` parts; `None` when it lies
    /// outside the work tree.
    fn relative(&self, path: &Path) -> Option<String> {
        self.relative_path(path)
            .map(|p| p.to_string_lossy().into_owned())
    }
}

/// True when `rule` (a relative path) names `path` itself or a folder holding it.
fn covers(rule: &str, path: &str) -> bool {
    let rule = rule.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    path == rule
        || path
            .strip_prefix(rule)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Seven hex digits, as `git log --oneline` shows them.
fn short(oid: git2::Oid) -> String {
    let mut s = oid.to_string();
    s.truncate(7);
    s
}

/// Cuts `text` to at most `budget` bytes, ending with `[… N more bytes cut]` when anything was
/// cut. Prefers to cut at a line end when one is near, never inside a UTF-8 character.
fn fit(text: String, budget: usize) -> String {
    let total = text.len();
    fit_prefix(text, total, budget)
}

/// As [`fit`], for `text` that is the start of a longer text of `total` bytes (so a caller
/// need not build a huge text only to cut it).
fn fit_prefix(text: String, total: usize, budget: usize) -> String {
    if total <= budget && text.len() == total {
        return text;
    }
    // The note's own length depends on N; N <= total, so this bounds it from above.
    let note_max = format!("\n[… {total} more bytes cut]\n").len();
    if budget < note_max {
        return text[..floor_char_boundary(&text, budget)].to_string();
    }
    let mut keep = floor_char_boundary(&text, budget - note_max);
    if let Some(nl) = text[..keep].rfind('\n')
        && nl >= keep / 2
    {
        keep = nl + 1;
    }
    let cut = total - keep;
    let mut out = text;
    out.truncate(keep);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("[… {cut} more bytes cut]\n"));
    out
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_matches_the_path_or_a_folder_above_it() {
        let cases = [
            ("SPEC.md", "SPEC.md", true),
            ("SPEC.md", "SPEC.md.bak", false),
            ("docs", "docs/a.md", true),
            ("docs/", "docs/a.md", true),
            ("docs", "docsx/a.md", false),
            ("a/b", "a", false),
        ];
        for (rule, path, want) in cases {
            assert_eq!(covers(rule, path), want, "{rule} {path}");
        }
    }

    #[test]
    fn fit_keeps_short_text_and_cuts_long_text_with_a_note() {
        assert_eq!(fit("abc".into(), 3), "abc");
        let text = "line one\nline two\nline three\n".repeat(20);
        let out = fit(text.clone(), 100);
        assert!(out.len() <= 100, "{} > 100", out.len());
        let kept = out.find("[…").unwrap();
        let cut = text.len() - kept;
        assert!(
            out.ends_with(&format!("[… {cut} more bytes cut]\n")),
            "{out}"
        );
        assert!(text.starts_with(&out[..kept]));
        // A multi-byte character is never split.
        let wide = "é".repeat(100);
        for budget in 0..60 {
            let out = fit(wide.clone(), budget);
            assert!(out.len() <= budget);
        }
    }
}
