//! Staging the work tree into the index as `git add -A` would, judging every path first.
//!
//! The one decision a reader must know: kern walks what `git status` lists and stages each
//! path itself — a deletion is removed, a file goes through its filter driver's clean command
//! when `.gitattributes` names one (else through libgit2, which applies text/eol conversion
//! and streams the blob from disk), a moved registered submodule gets its new commit id — after
//! judging it — a file with a `working-tree-encoding` is stored as UTF-8, as git stores it
//! (`encoding.rs`), or left out when it does not decode —: left out when it is dirty from
//! before the task (`--allow-dirty`), sensitive by
//! name or content, larger than `--max-file-size` (measured on what would be stored, so a big
//! Git LFS file's small pointer is fine), or a nested repository nobody registered. Editor
//! artefacts of kern's own files and skip-worktree (sparse) entries are never touched. Content
//! is read in bounded pieces, never whole. Then every difference between HEAD and the index —
//! also one an agent staged itself — is judged again (the index's tree is written and compared
//! with HEAD's folder by folder, so this costs what changed), and a left-out path gets HEAD's
//! entry back. A deletion is committed even for a sensitive name: removing a file cannot leak it.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use git2::{Config, Delta, Index, IndexEntry, IndexTime, Oid, Tree};

use super::filter::Cleaned;
use super::index_entries::{MODE_GITLINK, MODE_LINK, bare_entry};
use super::sensitive::{self, Finding};
use super::{Change, Repository};
use crate::error::{Error, Result};

/// Why a path the person changed (`--allow-dirty`: before the task, or beside a parallel task
/// in the work tree) is left out of kern's commit.
const PERSONS_OWN: &str = "the person's own change (--allow-dirty)";

/// One commit's staging: what it left out and what it has judged.
pub(super) struct Staging<'r> {
    repo: &'r Repository,
    config: Config,
    exclude: Vec<PathBuf>,
    /// Changed paths not committed, and why.
    pub(super) left_out: BTreeMap<String, String>,
    /// Things the person should hear (a filter that failed and was bypassed).
    pub(super) notes: Vec<String>,
    /// Path → the object kern staged after judging it.
    judged: HashMap<PathBuf, Oid>,
}

impl<'r> Staging<'r> {
    pub(super) fn new(repo: &'r Repository, config: Config, exclude: Vec<PathBuf>) -> Staging<'r> {
        Staging {
            repo,
            config,
            exclude,
            left_out: BTreeMap::new(),
            notes: Vec::new(),
            judged: HashMap::new(),
        }
    }

    /// Stages every path `git status` lists.
    pub(super) fn stage_all(&mut self, index: &mut Index) -> Result<()> {
        let _timed = super::Timed::start("commit.stage");
        for change in self.repo.changes()? {
            self.stage_path(index, &change.path)?;
        }
        Ok(())
    }

    /// Stages `paths` as they are in the work tree now (a pre-commit hook's fixes).
    pub(super) fn stage_paths(&mut self, index: &mut Index, paths: &[PathBuf]) -> Result<()> {
        for path in paths {
            self.judged.remove(path);
            self.stage_path(index, path)?;
        }
        Ok(())
    }

    /// Stages one path as the work tree has it, or leaves it out (see the module docs).
    fn stage_path(&mut self, index: &mut Index, rel: &Path) -> Result<()> {
        let repo = self.repo;
        if self.exclude.iter().any(|e| rel.starts_with(e)) {
            self.leave_out(rel, PERSONS_OWN.into());
            return Ok(());
        }
        if repo.own.is_artefact_path(rel) {
            return Ok(());
        }
        let entry = index.get_path(rel, 0);
        if entry.as_ref().is_some_and(skip_worktree) {
            return Ok(());
        }
        let full = repo.top.join(rel);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            if entry.is_some() {
                index.remove_path(rel).map_err(|e| {
                    Error::git(format!("staging the deletion of `{}`", rel.display()), e)
                })?;
            }
            return Ok(());
        };
        if meta.is_dir() {
            return self.stage_folder(index, rel, entry.as_ref());
        }
        if let Some(finding) = sensitive::sensitive_name(rel) {
            self.leave_out(rel, finding.to_string());
            return Ok(());
        }
        if meta.file_type().is_symlink() {
            return self.add_path(index, rel);
        }
        if let Some(driver) = repo.filter_driver(&self.config, rel)? {
            match repo.clean(&driver, rel, repo.hook_timeout)? {
                Cleaned::Blob(out) => return self.add_cleaned(index, rel, &meta, out.path()),
                Cleaned::AsIs(note) => self.notes.extend(note),
            }
        }
        if let Some(encoded) = repo.encoded(&self.config, rel) {
            let bytes = fs::read(&full).map_err(|e| Error::io(&full, e))?;
            return match encoded.to_git(&bytes) {
                Ok(utf8) => {
                    let mut out = tempfile::NamedTempFile::new()
                        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
                    std::io::Write::write_all(&mut out, &utf8)
                        .map_err(|e| Error::io(out.path(), e))?;
                    self.add_cleaned(index, rel, &meta, out.path())
                }
                Err(why) => {
                    self.leave_out(
                        rel,
                        format!(
                            "its working-tree-encoding is {}, but it holds {why}; git refuses to add it too",
                            encoded.encoding
                        ),
                    );
                    Ok(())
                }
            };
        }
        if let Some(why) = judge_content(repo, &full, meta.len()) {
            self.leave_out(rel, why);
            return Ok(());
        }
        self.add_path(index, rel)
    }

    /// A folder status lists: a registered submodule's new checkout, or a nested repository
    /// nobody registered (left out: git would store a gitlink no clone can check out).
    fn stage_folder(
        &mut self,
        index: &mut Index,
        rel: &Path,
        entry: Option<&IndexEntry>,
    ) -> Result<()> {
        let Some(entry) = entry.filter(|e| e.mode == MODE_GITLINK) else {
            self.leave_out(rel, nested_repo_reason(rel));
            return Ok(());
        };
        // Not checked out (an empty folder): nothing moved.
        let Some(head) = super::checked_out_commit(&self.repo.top.join(rel)) else {
            return Ok(());
        };
        if head != entry.id {
            index
                .add(&bare_entry(bytes(rel).to_vec(), MODE_GITLINK, head))
                .map_err(|e| Error::git(format!("staging the submodule `{}`", rel.display()), e))?;
        }
        self.judged.insert(rel.to_path_buf(), head);
        Ok(())
    }

    /// libgit2 stages the file: its own text/eol filters, the blob streamed, real stat data.
    fn add_path(&mut self, index: &mut Index, rel: &Path) -> Result<()> {
        index.add_path(rel).map_err(|e| {
            self.repo
                .index_error(&format!("staging `{}`", rel.display()), e)
        })?;
        if let Some(entry) = index.get_path(rel, 0) {
            self.judged.insert(rel.to_path_buf(), entry.id);
        }
        Ok(())
    }

    /// Stages a clean filter's output as the blob, with the work-tree file's stat data, so
    /// that status trusts the entry as git's own `git add` would leave it.
    fn add_cleaned(
        &mut self,
        index: &mut Index,
        rel: &Path,
        meta: &fs::Metadata,
        blob: &Path,
    ) -> Result<()> {
        let size = fs::metadata(blob).map_or(0, |m| m.len());
        if let Some(why) = judge_content(self.repo, blob, size) {
            self.leave_out(rel, why);
            return Ok(());
        }
        let id = self
            .repo
            .repo
            .blob_path(blob)
            .map_err(|e| Error::git(format!("storing the filtered `{}`", rel.display()), e))?;
        let mode = match index.get_path(rel, 0) {
            // Without core.fileMode the executable bit is not trusted: keep the staged mode.
            Some(entry) if !self.config.get_bool("core.filemode").unwrap_or(true) => entry.mode,
            _ if meta.mode() & 0o111 != 0 => 0o100755,
            _ => 0o100644,
        };
        let entry = IndexEntry {
            // The index keeps 32-bit stat fields; git truncates them the same way.
            ctime: IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32),
            mtime: IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32),
            dev: meta.dev() as u32,
            ino: meta.ino() as u32,
            mode,
            uid: meta.uid(),
            gid: meta.gid(),
            file_size: meta.len() as u32,
            id,
            flags: bytes(rel).len().min(0xfff) as u16,
            flags_extended: 0,
            path: bytes(rel).to_vec(),
        };
        index
            .add(&entry)
            .map_err(|e| Error::git(format!("staging the filtered `{}`", rel.display()), e))?;
        self.judged.insert(rel.to_path_buf(), id);
        Ok(())
    }

    /// Judges every difference between HEAD's tree and the index; an excluded or sensitive
    /// path gets HEAD's entry back (or leaves the index when HEAD lacks it). Returns the
    /// index's tree (written) when judging changed nothing in it.
    pub(super) fn judge_index(
        &mut self,
        index: &mut Index,
        head_tree: Option<&Tree<'_>>,
    ) -> Result<Option<Oid>> {
        let _timed = super::Timed::start("commit.judge");
        let repo = self.repo;
        let mut reverts: Vec<(PathBuf, Option<String>)> = Vec::new();
        let (tree, changes) = index_changes(repo, index, head_tree)?;
        for (rel, staged) in changes {
            if self.exclude.iter().any(|e| rel.starts_with(e)) {
                reverts.push((rel, Some(PERSONS_OWN.into())));
                continue;
            }
            if repo.own.is_artefact_path(&rel) {
                reverts.push((rel, None));
                continue;
            }
            let Some((id, mode)) = staged else {
                continue;
            };
            if self.judged.get(&rel) == Some(&id) {
                continue;
            }
            let why = if mode == MODE_GITLINK {
                None
            } else if let Some(finding) = sensitive::sensitive_name(&rel) {
                Some(finding.to_string())
            } else if mode == MODE_LINK {
                None
            } else {
                judge_blob(repo, &rel, id)?
            };
            match why {
                Some(why) => reverts.push((rel, Some(why))),
                None => {
                    self.judged.insert(rel, id);
                }
            }
        }
        let unchanged = tree.filter(|_| reverts.is_empty());
        let head_entry = |rel: &Path| head_tree.and_then(|t| t.get_path(rel).ok());
        for (rel, why) in reverts {
            let result = match head_entry(&rel) {
                Some(entry) => index.add(&bare_entry(
                    bytes(&rel).to_vec(),
                    entry.filemode() as u32,
                    entry.id(),
                )),
                None => index.remove_path(&rel),
            };
            result.map_err(|e| {
                Error::git(format!("keeping `{}` out of the commit", rel.display()), e)
            })?;
            if let Some(why) = why {
                self.leave_out(&rel, why);
            }
        }
        Ok(unchanged)
    }

    fn leave_out(&mut self, rel: &Path, why: String) {
        self.left_out
            .entry(rel.to_string_lossy().into_owned())
            .or_insert(why);
    }
}

/// A path's staged object and mode; `None`: deleted.
type Staged = Option<(Oid, u32)>;

/// A path that differs between HEAD and the index, with what the index holds for it.
type StagedPath = (PathBuf, Staged);

/// The index's tree (`None` when it cannot be written as one) and the paths whose entries
/// differ between HEAD's tree and `index`, each with its staged object and mode (`None`:
/// deleted). The index's tree is written first — only its folders that differ from HEAD's
/// (tree_write.rs) — and compared with HEAD's without descending into equal folders
/// (tree_diff.rs), so the cost of reading grows with the change. An index that cannot be
/// written as a tree (unmerged entries) is compared entry by entry, as libgit2's diff does.
fn index_changes(
    repo: &Repository,
    index: &mut Index,
    head_tree: Option<&Tree<'_>>,
) -> Result<(Option<Oid>, Vec<StagedPath>)> {
    let ctx = |e| Error::git("comparing the index with HEAD", e);
    let as_path = |p: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(p));
    let head = head_tree.map(Tree::id);
    if let Ok(tree) = super::tree_write::write_index_tree(&repo.repo, index, head) {
        struct Found(Vec<StagedPath>);
        impl super::tree_diff::TreeVisitor for Found {
            fn changed(
                &mut self,
                path: &[u8],
                _: super::tree_diff::Side,
                new: super::tree_diff::Side,
            ) -> bool {
                let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
                self.0.push((path, new.map(|(id, mode)| (id, mode as u32))));
                true
            }
        }
        let mut staged = Found(Vec::new());
        super::tree_diff::walk(&repo.repo, head, Some(tree), &mut staged).map_err(ctx)?;
        return Ok((Some(tree), staged.0));
    }
    let diff = repo
        .repo
        .diff_tree_to_index(head_tree, Some(index), None)
        .map_err(ctx)?;
    let changes = diff
        .deltas()
        .filter_map(|delta| {
            let file = delta.new_file();
            let rel = file.path_bytes().or(delta.old_file().path_bytes())?;
            let staged =
                (delta.status() != Delta::Deleted).then(|| (file.id(), u32::from(file.mode())));
            Some((as_path(rel), staged))
        })
        .collect();
    Ok((None, changes))
}

/// Why a path `git status` lists would be left out of a commit, judged from the work tree
/// (`None`: it would be committed). The clean-tree check uses it, so that what kern leaves
/// out never blocks a start.
pub(super) fn would_leave_out(
    repo: &Repository,
    config: &Config,
    change: &Change,
) -> Result<Option<String>> {
    let rel = change.path.as_path();
    let full = repo.top.join(rel);
    let Ok(meta) = fs::symlink_metadata(&full) else {
        return Ok(None);
    };
    if meta.is_dir() {
        // A registered submodule shows as modified; a nested repository nobody added as new.
        return Ok(change.status.is_wt_new().then(|| nested_repo_reason(rel)));
    }
    if let Some(finding) = sensitive::sensitive_name(rel) {
        return Ok(Some(finding.to_string()));
    }
    if meta.file_type().is_symlink()
        || repo.filter_driver(config, rel)?.is_some()
        || repo.encoded(config, rel).is_some()
    {
        return Ok(None);
    }
    Ok(judge_content(repo, &full, meta.len()))
}

/// Too large, or a secret inside: why the content at `full` stays out.
fn judge_content(repo: &Repository, full: &Path, size: u64) -> Option<String> {
    if size > repo.max_file_size {
        return Some(too_large(size, repo.max_file_size));
    }
    let file = fs::File::open(full).ok()?;
    sensitive::scan_reader(file)
        .ok()
        .flatten()
        .map(|finding: Finding| finding.to_string())
}

/// The same judgement for a blob already in the object store (what an agent staged).
fn judge_blob(repo: &Repository, rel: &Path, id: Oid) -> Result<Option<String>> {
    let odb = repo
        .repo
        .odb()
        .map_err(|e| Error::git("opening the object store", e))?;
    let (size, _) = odb
        .read_header(id)
        .map_err(|e| Error::git(format!("reading the staged `{}`", rel.display()), e))?;
    if size as u64 > repo.max_file_size {
        return Ok(Some(too_large(size as u64, repo.max_file_size)));
    }
    let finding = match odb.reader(id) {
        Ok((reader, _, _)) => sensitive::scan_reader(reader).ok().flatten(),
        // A packed object cannot be streamed; it is within the size limit, so read it.
        Err(_) => {
            let blob = repo
                .repo
                .find_blob(id)
                .map_err(|e| Error::git(format!("reading the staged `{}`", rel.display()), e))?;
            sensitive::sensitive_content(blob.content())
        }
    };
    Ok(finding.map(|f| f.to_string()))
}

fn too_large(size: u64, limit: u64) -> String {
    format!(
        "larger than --max-file-size ({} > {})",
        human_size(size),
        human_size(limit)
    )
}

fn nested_repo_reason(rel: &Path) -> String {
    let rel = rel.display();
    format!(
        "a nested git repository — register it with `git submodule add <url> {rel}`, or add `{rel}/` to .gitignore"
    )
}

/// A path's bytes, as the index stores them.
fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// `110.0 MiB`, `512 KiB`, `12 B`.
pub(super) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn skip_worktree(entry: &IndexEntry) -> bool {
    entry.flags_extended & git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits() != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        let cases = [
            (12, "12 B"),
            (2048, "2 KiB"),
            (100 << 20, "100 MiB"),
            (110 * (1 << 20) + (1 << 19), "110.5 MiB"),
            (3 << 30, "3 GiB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(human_size(bytes), want, "{bytes}");
        }
        assert_eq!(
            too_large(110 << 20, 100 << 20),
            "larger than --max-file-size (110 MiB > 100 MiB)"
        );
    }
}
