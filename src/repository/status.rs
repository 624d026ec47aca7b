//! What `git status` lists — tracked changes, staged or not, and untracked files `.gitignore`
//! allows — and how a run knows it without walking the whole tree at every look.
//!
//! Decisions a reader must know:
//! - During a run ([`Repository::watch_work_tree`]) the work tree's folders are watched
//!   (watch.rs). A look then asks libgit2 only about the paths the watch names, registered
//!   submodules, and the paths whose index entry or HEAD entry changed since; every other
//!   path's status is what the last look found: the cost grows with the change, not with the
//!   repository.
//!   Whatever the watch cannot vouch for — an overflow, a `.gitignore`, `.gitattributes`,
//!   `info/exclude` or git config that changed, a repository created inside the tree — is a
//!   whole walk, and so is every look without a watch (other commands, other systems).
//! - A whole walk watches each folder before libgit2 reads it, and skips ignored folders
//!   without descending; folders holding tracked files are watched even when ignored.
//! - Paths are bytes end to end: a name that is not UTF-8 is a path like any other.
//! - A look through the watch asks libgit2 (status_ask.rs) about a few paths one by one,
//!   each as a pathspec (libgit2 then reads only that path's index entries; a list of paths
//!   costs a pass over the whole index), and about many paths, or a path a pathspec would
//!   read as a pattern, in one list.
//! - A watched run also bounds its process's memory (memory.rs): no libgit2 object
//!   cache, large buffers returned to the system when freed, pack files mapped a little at
//!   a time, free heap pages given back after a walk, a read of the index, a look that
//!   asked libgit2 and a commit.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use git2::{Oid, Status};

use super::change::Change;
use super::index_entries::IndexEntries;
use super::memory::{bound_memory, trim_memory};
use super::snapshot::Stamp;
use super::status_ask::sort;
use super::watch::Watch;
use super::{Repository, Timed, staging};
use crate::error::{Error, Result};

/// This process's status looks, the whole walks among them, and the looks through the watch
/// that had something to ask libgit2: `-v` logs them per iteration, and a test holds them
/// down.
static LOOKS: AtomicU64 = AtomicU64::new(0);
static WALKS: AtomicU64 = AtomicU64::new(0);
static ASKS: AtomicU64 = AtomicU64::new(0);

/// How many status looks this process has made so far (see [`Repository::changes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusCounts {
    /// Looks: each a whole walk or a look through the watch.
    pub(crate) looks: u64,
    /// Whole walks among them.
    pub(crate) walks: u64,
    /// Looks through the watch that asked libgit2 about some paths; the others found nothing
    /// changed since the look before and answered from it.
    pub(crate) asks: u64,
}

impl StatusCounts {
    /// The counts so far.
    pub(crate) fn now() -> StatusCounts {
        StatusCounts {
            looks: LOOKS.load(Ordering::Relaxed),
            walks: WALKS.load(Ordering::Relaxed),
            asks: ASKS.load(Ordering::Relaxed),
        }
    }

    /// What was counted since `before`.
    #[must_use]
    pub(crate) fn since(self, before: StatusCounts) -> StatusCounts {
        StatusCounts {
            looks: self.looks - before.looks,
            walks: self.walks - before.walks,
            asks: self.asks - before.asks,
        }
    }
}

/// What a run's status looks remember between looks.
#[derive(Default)]
pub(super) struct StatusCache {
    /// A run asked for the watch ([`Repository::watch_work_tree`]).
    wanted: bool,
    /// The watch could not be made or kept: every look is a whole walk.
    gave_up: bool,
    watch: Option<Watch>,
    known: Option<Known>,
    /// Whole walks so far (the tests tell a look through the watch from a walk by it).
    walks: u32,
}

/// What a look through the watch found.
enum Look {
    /// The changes now.
    Changes(Vec<Change>),
    /// Only a whole walk can tell.
    Rescan,
    /// A folder could not be watched: the watch is given up.
    GiveUp,
}

/// The last look's result and what it was made against.
struct Known {
    changes: Vec<Change>,
    index_stamp: Option<Stamp>,
    entries: IndexEntries,
    digest: u64,
    head_tree: Option<Oid>,
    rules: Vec<Option<Stamp>>,
}

impl Repository {
    /// True when `path` (absolute, or relative to the top folder) is a file git does not track
    /// yet and does not ignore: kern's commit of the first task will take it in.
    pub fn is_untracked(&self, path: &Path) -> bool {
        let relative = path.strip_prefix(&self.top).unwrap_or(path);
        self.status_of_file(relative)
            .is_ok_and(|s| s.contains(Status::WT_NEW))
    }

    /// True when `path` (absolute, or relative to the top folder) differs from HEAD in the
    /// index or the work tree, or is a file git does not track yet (and does not ignore).
    pub fn has_changes(&self, path: &Path) -> bool {
        let relative = path.strip_prefix(&self.top).unwrap_or(path);
        self.status_of_file(relative)
            .is_ok_and(|s| !s.is_empty() && !s.contains(Status::IGNORED))
    }

    /// Keeps a watch on the work tree from the next status on, so that later looks cost what
    /// changed (see the module docs). For a run, which looks many times; a single look (a
    /// dry run, `kern status`) is cheaper without.
    ///
    /// It also bounds the memory of the run's process (see `bound_memory`).
    pub fn watch_work_tree(&self) {
        bound_memory();
        self.status.borrow_mut().wanted = true;
    }

    /// Paths with uncommitted changes that a commit would take: tracked changes (staged or
    /// not) and untracked files that `.gitignore` allows, minus `ignore` (relative to the top
    /// or absolute), kern's own files and their editor artefacts, and what a commit would
    /// leave out anyway (secrets, files over `--max-file-size`, a nested repository): those
    /// stay in the tree and never block a start. Sorted, relative, `/`-separated, as text.
    pub fn dirty_paths(&self, ignore: &[&Path]) -> Result<Vec<String>> {
        Ok(self
            .dirty_files(ignore)?
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect())
    }

    /// [`Repository::dirty_paths`] as paths, byte for byte.
    pub fn dirty_files(&self, ignore: &[&Path]) -> Result<Vec<PathBuf>> {
        let ignore: Vec<PathBuf> = ignore
            .iter()
            .filter_map(|p| self.relative_path(p))
            .collect();
        let config = self.config_snapshot()?;
        let mut paths = Vec::new();
        for change in self.changes()? {
            if ignore.iter().any(|i| change.path.starts_with(i))
                || self.own.is_own_path(&change.path)
                || self.own.is_artefact_path(&change.path)
            {
                continue;
            }
            if staging::would_leave_out(self, &config, &change)?.is_some() {
                continue;
            }
            paths.push(change.path);
        }
        Ok(paths)
    }

    /// Every path `git status` would list, sorted; a submodule or nested repository is one.
    pub(super) fn status_paths(&self) -> Result<Vec<PathBuf>> {
        Ok(self.changes()?.into_iter().map(|c| c.path).collect())
    }

    /// What `git status` lists, sorted by path (see the module docs of `repository` for what
    /// is not a change).
    pub(crate) fn changes(&self) -> Result<Vec<Change>> {
        LOOKS.fetch_add(1, Ordering::Relaxed);
        let mut cache = self.status.borrow_mut();
        if cache.wanted && cache.known.is_some() {
            let mut timed = Timed::start("status.watched");
            match self.look_again(&mut cache)? {
                Look::Changes(changes) => {
                    timed.count(changes.len());
                    return Ok(changes);
                }
                Look::Rescan => {}
                Look::GiveUp => {
                    cache.gave_up = true;
                    cache.watch = None;
                }
            }
            cache.known = None;
        }
        let mut timed = Timed::start("status.full");
        cache.walks += 1;
        WALKS.fetch_add(1, Ordering::Relaxed);
        let changes = if cache.wanted {
            self.rescan(&mut cache)?
        } else {
            self.status_of(None)?
        };
        timed.count(changes.len());
        Ok(changes)
    }

    /// The digest of the index entries (see index_entries.rs) and the index file's stamp.
    pub(super) fn index_digest_now(&self) -> Result<(Option<Stamp>, u64)> {
        let stamp = self.index_stamp();
        if let Some(known) = &self.status.borrow().known
            && known.index_stamp == stamp
            && stamp.is_some()
        {
            return Ok((stamp, known.digest));
        }
        let index = self.index_from_disk(false)?;
        Ok((stamp, IndexEntries::digest_of(&index)))
    }

    /// A look through the watch (see the module docs).
    fn look_again(&self, cache: &mut StatusCache) -> Result<Look> {
        let (Some(watch), Some(known)) = (cache.watch.as_mut(), cache.known.as_mut()) else {
            return Ok(Look::Rescan);
        };
        let touched = watch.drain();
        if touched.rescan
            || touched.paths.iter().any(|p| p.ends_with(".git"))
            || self.rule_stamps() != known.rules
        {
            return Ok(Look::Rescan);
        }
        for folder in &touched.new_folders {
            if !self.watch_folders(watch, folder) {
                return Ok(Look::GiveUp);
            }
        }
        let mut paths = touched.paths;
        let index_stamp = self.index_stamp();
        if index_stamp != known.index_stamp || index_stamp.is_none() {
            let index = self.index_from_disk(false)?;
            let old = std::mem::take(&mut known.entries);
            let Some((entries, changed)) = old.update(&index) else {
                return Ok(Look::Rescan);
            };
            drop(index);
            paths.extend(changed);
            for folder in entries.folders() {
                if !watch.watches(&folder) && watch.add(&self.top, &folder).is_err() {
                    return Ok(Look::GiveUp);
                }
            }
            known.digest = entries.digest();
            known.entries = entries;
            known.index_stamp = index_stamp;
            trim_memory();
        }
        let head_tree = self.head_tree_id();
        if head_tree != known.head_tree {
            paths.extend(self.tree_changes(known.head_tree, head_tree)?);
            known.head_tree = head_tree;
        }
        // A submodule's checkout moves inside its own repository, which is not watched.
        paths.extend(known.entries.gitlinks().map(Path::to_path_buf));
        if !paths.is_empty() {
            ASKS.fetch_add(1, Ordering::Relaxed);
            let fresh = self.status_of(Some(&paths))?;
            known.changes.retain(|c| !covered(&paths, &c.path));
            known.changes.extend(fresh);
            sort(&mut known.changes);
            // libgit2's status copies the index's entry list twice and reads trees: what
            // it freed goes back before the next stage.
            trim_memory();
        }
        Ok(Look::Changes(known.changes.clone()))
    }

    /// A whole walk; with the watch wanted, every folder is watched first and the result
    /// kept for the next look.
    fn rescan(&self, cache: &mut StatusCache) -> Result<Vec<Change>> {
        cache.known = None;
        if cache.watch.is_none() && !cache.gave_up {
            match Watch::new() {
                Ok(watch) => cache.watch = Some(watch),
                Err(e) => {
                    tracing::debug!(error = %e, "no work-tree watch: every status walks the tree");
                    cache.gave_up = true;
                }
            }
        }
        let Some(watch) = cache.watch.as_mut() else {
            return self.status_of(None);
        };
        // What is queued is stale: the walk below looks at everything.
        watch.drain();
        let index_stamp = self.index_stamp();
        let rules = self.rule_stamps();
        let entries = self.read_index_entries()?;
        let head_tree = self.head_tree_id();
        let watched = self.watch_folders(watch, Path::new(""))
            && entries
                .folders()
                .into_iter()
                .all(|f| watch.watches(&f) || watch.add(&self.top, &f).is_ok());
        if !watched {
            cache.gave_up = true;
            cache.watch = None;
            return self.status_of(None);
        }
        tracing::debug!(folders = watch.len(), "watching the work tree");
        let changes = self.status_of(None)?;
        cache.known = Some(Known {
            changes: changes.clone(),
            index_stamp,
            digest: entries.digest(),
            entries,
            head_tree,
            rules,
        });
        trim_memory();
        Ok(changes)
    }

    /// Watches `start` and every folder under it that is neither ignored nor another
    /// repository, each before it is read. `false` when a folder cannot be watched (no
    /// inotify watches left): the caller gives the watch up.
    fn watch_folders(&self, watch: &mut Watch, start: &Path) -> bool {
        let mut stack = vec![start.to_path_buf()];
        while let Some(folder) = stack.pop() {
            match watch.add(&self.top, &folder) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "cannot watch the work tree (raise fs.inotify.max_user_watches): every status walks it"
                    );
                    return false;
                }
            }
            let Ok(entries) = std::fs::read_dir(self.top.join(&folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) || entry.file_name() == ".git" {
                    continue;
                }
                let rel = folder.join(entry.file_name());
                if entry.path().join(".git").exists()
                    || self.repo.is_path_ignored(&rel).unwrap_or(false)
                {
                    continue;
                }
                stack.push(rel);
            }
        }
        true
    }

    /// The stamp of the index file (`None`: there is none).
    pub(super) fn index_stamp(&self) -> Option<Stamp> {
        std::fs::metadata(self.repo.path().join("index"))
            .ok()
            .map(|m| Stamp::of(&m))
    }

    /// The index's entries as they are on disk now.
    fn read_index_entries(&self) -> Result<IndexEntries> {
        let index = self.index_from_disk(false)?;
        Ok(IndexEntries::of(&index))
    }

    /// The stamps of the files outside the work tree that change what status counts or how
    /// it reads files: `info/exclude`, `info/attributes`, the git config files, and the
    /// global ignore and attributes files.
    fn rule_stamps(&self) -> Vec<Option<Stamp>> {
        let git = self.repo.path();
        let common = self.repo.commondir();
        let mut files = vec![
            git.join("config"),
            common.join("config"),
            common.join("info/exclude"),
            common.join("info/attributes"),
            PathBuf::from("/etc/gitconfig"),
        ];
        if let Some(home) = std::env::var_os("HOME") {
            files.push(Path::new(&home).join(".gitconfig"));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")));
        if let Some(xdg) = xdg {
            for name in ["config", "ignore", "attributes"] {
                files.push(xdg.join("git").join(name));
            }
        }
        if let Ok(config) = self.repo.config() {
            for key in ["core.excludesFile", "core.attributesFile"] {
                if let Ok(path) = config.get_path(key) {
                    files.push(path);
                }
            }
        }
        files
            .iter()
            .map(|f| std::fs::metadata(f).ok().map(|m| Stamp::of(&m)))
            .collect()
    }

    /// HEAD's tree; `None` on an unborn branch.
    pub(super) fn head_tree_id(&self) -> Option<Oid> {
        self.head_oid()
            .and_then(|oid| self.repo.find_commit(oid).ok())
            .map(|c| c.tree_id())
    }

    /// The paths that differ between two trees (no content read; see tree_diff.rs).
    pub(super) fn tree_changes(&self, old: Option<Oid>, new: Option<Oid>) -> Result<Vec<PathBuf>> {
        let paths = super::tree_diff::changed_paths(&self.repo, old, new)
            .map_err(|e| Error::git("comparing HEAD with the last look", e))?;
        Ok(paths
            .into_iter()
            .map(|p| PathBuf::from(std::ffi::OsString::from_vec(p)))
            .collect())
    }
}

/// True when `path` or a folder holding it is in `paths`.
fn covered(paths: &BTreeSet<PathBuf>, path: &Path) -> bool {
    path.ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .any(|a| paths.contains(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_covered_by_itself_and_its_folders_only() {
        let paths: BTreeSet<PathBuf> = ["a/b", "c.txt"].iter().map(PathBuf::from).collect();
        let cases = [
            ("a/b", true),
            ("a/b/c/d.txt", true),
            ("a", false),
            ("a/bc", false),
            ("c.txt", true),
            ("c.txt.bak", false),
        ];
        for (path, want) in cases {
            assert_eq!(covered(&paths, Path::new(path)), want, "{path}");
        }
    }

    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn init() -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let git = git2::Repository::init(dir.path()).unwrap();
        let mut cfg = git.config().unwrap();
        cfg.set_str("user.name", "T").unwrap();
        cfg.set_str("user.email", "t@example.com").unwrap();
        (dir, git)
    }

    fn write(top: &Path, rel: &str, text: &str) {
        let path = top.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn commit_all(git: &git2::Repository) {
        let mut index = git.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git.signature().unwrap();
        let parent = git.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        git.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents)
            .unwrap();
    }

    fn shown(changes: Vec<Change>) -> Vec<String> {
        changes
            .iter()
            .map(|c| {
                format!(
                    "{}{} {:?}",
                    c.path.display(),
                    if c.folder { "/" } else { "" },
                    c.status
                )
            })
            .collect()
    }

    /// What a fresh look (a whole walk, no watch) says now.
    fn walked(top: &Path) -> Vec<String> {
        shown(Repository::discover(top).unwrap().changes().unwrap())
    }

    type Step = (&'static str, fn(&Path, &git2::Repository), bool);

    #[test]
    fn a_watched_look_says_what_a_whole_walk_says_and_walks_only_when_it_must() {
        let (dir, git) = init();
        let top = dir.path().canonicalize().unwrap();
        write(&top, ".gitignore", "*.log\nbuild/\n");
        for d in ["a", "b/c", "d"] {
            for f in ["one.txt", "two.txt"] {
                write(&top, &format!("{d}/{f}"), "text\n");
            }
        }
        write(&top, "run.sh", "#!/bin/sh\n");
        write(
            &top,
            "build/keep.txt",
            "tracked, inside an ignored folder\n",
        );
        commit_all(&git);
        let mut index = git.index().unwrap();
        index.add_path(Path::new("build/keep.txt")).unwrap();
        index.write().unwrap();
        commit_all(&git);

        // A registered submodule.
        let sub = git2::Repository::init(top.join("sub")).unwrap();
        write(&top, "sub/s.txt", "s\n");
        commit_all(&sub);
        let mut index = git.index().unwrap();
        let head = sub.head().unwrap().target().unwrap();
        index
            .add(&crate::repository::index_entries::bare_entry(
                b"sub".to_vec(),
                0o160000,
                head,
            ))
            .unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git.signature().unwrap();
        let parent = git.head().unwrap().peel_to_commit().unwrap();
        git.commit(Some("HEAD"), &sig, &sig, "sub", &tree, &[&parent])
            .unwrap();

        let repo = Repository::discover(&top).unwrap();
        repo.watch_work_tree();
        assert_eq!(shown(repo.changes().unwrap()), walked(&top));
        // Each step changes the tree; `true`: only a whole walk can tell (the watch says so).
        let steps: Vec<Step> = vec![
            ("nothing", |_, _| {}, false),
            ("edit", |t, _| write(t, "a/one.txt", "changed\n"), false),
            ("new file", |t, _| write(t, "b/c/new.txt", "n\n"), false),
            (
                "new folders",
                |t, _| write(t, "x/y/z/deep.txt", "d\n"),
                false,
            ),
            (
                "deeper",
                |t, _| write(t, "x/y/z/w/deeper.txt", "d\n"),
                false,
            ),
            (
                "delete",
                |t, _| fs::remove_file(t.join("a/two.txt")).unwrap(),
                false,
            ),
            (
                "rename a folder",
                |t, _| fs::rename(t.join("d"), t.join("d2")).unwrap(),
                false,
            ),
            (
                "edit in the moved folder",
                |t, _| write(t, "d2/one.txt", "m\n"),
                false,
            ),
            (
                "chmod",
                |t, _| {
                    fs::set_permissions(t.join("run.sh"), fs::Permissions::from_mode(0o755))
                        .unwrap();
                },
                false,
            ),
            ("ignored file", |t, _| write(t, "debug.log", "l\n"), false),
            (
                "tracked file in an ignored folder",
                |t, _| write(t, "build/keep.txt", "k\n"),
                false,
            ),
            (
                "untracked file in an ignored folder",
                |t, _| write(t, "build/out.o", "o\n"),
                false,
            ),
            (
                "a commit in the submodule",
                |t, _| {
                    let sub = git2::Repository::open(t.join("sub")).unwrap();
                    write(t, "sub/s.txt", "moved\n");
                    commit_all(&sub);
                },
                false,
            ),
            (
                "stage",
                |_, g| {
                    let mut index = g.index().unwrap();
                    index.read(true).unwrap();
                    index.add_path(Path::new("b/c/new.txt")).unwrap();
                    index.write().unwrap();
                },
                false,
            ),
            ("commit", |_, g| commit_all(g), false),
            (
                "back to the committed text",
                |t, _| write(t, "a/one.txt", "changed\n"),
                false,
            ),
            (
                "symlink",
                |t, _| {
                    fs::remove_file(t.join("b/c/one.txt")).unwrap();
                    std::os::unix::fs::symlink("two.txt", t.join("b/c/one.txt")).unwrap();
                },
                false,
            ),
            (
                "remove a tracked folder",
                |t, _| fs::remove_dir_all(t.join("b")).unwrap(),
                false,
            ),
            (
                "empty folder",
                |t, _| fs::create_dir(t.join("e")).unwrap(),
                false,
            ),
            ("a file in it", |t, _| write(t, "e/f.txt", "f\n"), false),
            (
                "a name that is not UTF-8",
                |t, _| {
                    use std::os::unix::ffi::OsStrExt;
                    let name = std::ffi::OsStr::from_bytes(b"e/caf\xe9.txt");
                    fs::write(t.join(name), "latin-1\n").unwrap();
                },
                false,
            ),
            (
                "gitignore",
                |t, _| write(t, ".gitignore", "*.log\nbuild/\ne/\n"),
                true,
            ),
            (
                "info/exclude",
                |t, _| write(t, ".git/info/exclude", "x/\n"),
                true,
            ),
            (
                "a new repository",
                |t, _| drop(git2::Repository::init(t.join("e2")).unwrap()),
                false,
            ),
            ("a folder", |t, _| write(t, "g/file.txt", "g\n"), false),
            (
                "made a repository",
                |t, _| drop(git2::Repository::init(t.join("g")).unwrap()),
                true,
            ),
        ];
        for (what, step, walks) in steps {
            step(&top, &git);
            let before = repo.status.borrow().walks;
            assert_eq!(
                shown(repo.changes().unwrap()),
                walked(&top),
                "after: {what}"
            );
            let walked_now = repo.status.borrow().walks > before;
            assert_eq!(walked_now, walks, "whole walk after: {what}");
        }
        assert!(repo.status.borrow().watch.is_some(), "the watch was kept");
    }

    #[test]
    fn random_changes_look_the_same_through_the_watch_as_in_a_whole_walk() {
        let (dir, git) = init();
        let top = dir.path().canonicalize().unwrap();
        let folders = ["", "p", "p/q", "r"];
        for (n, folder) in folders.iter().enumerate() {
            write(&top, &format!("{folder}/f{n}.txt"), "base\n");
        }
        commit_all(&git);
        let repo = Repository::discover(&top).unwrap();
        repo.watch_work_tree();
        repo.changes().unwrap();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        for round in 0..300 {
            let folder = folders[next(folders.len() as u64) as usize];
            let name = format!("{folder}/f{}.txt", next(6));
            let path = top.join(&name);
            match next(6) {
                0 | 1 => write(&top, &name, &format!("{}\n", next(3))),
                2 => drop(fs::remove_file(&path)),
                3 => {
                    let sub = top.join(folder).join(format!("n{}", next(3)));
                    drop(fs::create_dir_all(&sub));
                    if next(2) == 0 {
                        drop(fs::write(sub.join("inside.txt"), "i\n"));
                    }
                }
                4 => {
                    let to = top.join(folders[next(folders.len() as u64) as usize]);
                    let to = to.join(format!("f{}.txt", next(6)));
                    drop(fs::rename(&path, to));
                }
                _ => {
                    let sub = top.join(folder).join(format!("n{}", next(3)));
                    drop(fs::remove_dir_all(&sub));
                }
            }
            if round % 3 == 0 {
                assert_eq!(
                    shown(repo.changes().unwrap()),
                    walked(&top),
                    "round {round}"
                );
            }
        }
        assert_eq!(repo.status.borrow().walks, 1, "never walked again");
    }
}
