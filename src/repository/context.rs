//! Git context for prompts: recent commits (and their subjects, for the message convention) and
//! the diff of the work, each within a byte budget.
//!
//! The one decision a reader must know: the diff is the work tree (untracked files included,
//! ignored ones not) against a base commit, as `git diff <base>` plus new files would show it,
//! looking only at the paths that can differ — what status lists and what changed between the
//! base and HEAD — so its cost grows with the change, not with the repository;
//! the stat comes first and is never dropped for the patch, so a reviewer sees the whole shape
//! of a change even when its patch is cut. Files over 1 MiB are diffed as binary, in the recent
//! commits' stats too, so no large blob is ever loaded whole; a commit touching more than
//! [`STAT_MAX_FILES`] files (an import, a mass reformat) has only that many counted, with a
//! line saying how many more it touched, so its cost never grows with the repository.

use std::collections::HashMap;
use std::fmt::Write as _;

use git2::{DiffOptions, DiffStatsFormat, Patch, Sort};

use super::tree_diff::Side;
use super::{Repository, covers, fit, fit_prefix, short};
use crate::error::{Error, Result};

/// Files larger than this are shown as binary in a diff.
const DIFF_MAX_FILE: i64 = 1 << 20;

/// The most files a recent commit's stat counts: the whole text has a 4 KiB budget, so more
/// lines than this could never be shown.
pub(super) const STAT_MAX_FILES: usize = 40;

impl Repository {
    /// The latest `count` commits on HEAD, each as `<sha7> <subject>` and its diff stat, cut to
    /// `budget` bytes with a note. An unborn branch gives `(no commits yet)`. Paths in
    /// `exclude` (kern's own SPEC.md and LEARNINGS.md, which every kern commit touches) are
    /// left out of the stats: diffing a large SPEC.md ten times per prompt was most of kern's
    /// own time. The text is cached per HEAD, which cannot move between a task's stages, and
    /// each commit's stat per commit, so a new HEAD costs one commit's stat.
    pub fn recent_commits(
        &self,
        count: usize,
        exclude: &[&std::path::Path],
        budget: usize,
    ) -> Result<String> {
        let _timed = super::Timed::start("recent_commits");
        let Some(head) = self.head_oid() else {
            return Ok(fit("(no commits yet)\n".to_string(), budget));
        };
        let exclude: Vec<String> = exclude.iter().filter_map(|p| self.relative(p)).collect();
        let key = (head, count, budget, exclude.clone());
        if let Some((k, text)) = self.recent_commits_cache.borrow().as_ref()
            && *k == key
        {
            return Ok(text.clone());
        }
        let ctx = |e| Error::git("reading recent commits", e);
        let mut walk = self.repo.revwalk().map_err(ctx)?;
        walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)
            .map_err(ctx)?;
        walk.push(head).map_err(ctx)?;
        let mut out = String::new();
        let mut stats = self.commit_stats.borrow_mut();
        if stats.0 != exclude {
            *stats = (exclude.clone(), HashMap::new());
        }
        let mut shown = Vec::new();
        for oid in walk.take(count) {
            let oid = oid.map_err(ctx)?;
            shown.push(oid);
            let text = match stats.1.get(&oid) {
                Some(text) => text.clone(),
                None => {
                    let text = self.commit_stat(oid, &exclude).map_err(ctx)?;
                    stats.1.insert(oid, text.clone());
                    text
                }
            };
            out.push_str(&text);
        }
        stats.1.retain(|oid, _| shown.contains(oid));
        let text = fit(out, budget);
        *self.recent_commits_cache.borrow_mut() = Some((key, text.clone()));
        Ok(text)
    }

    /// One commit as `<sha7> <subject>`, its diff stat (at most [`STAT_MAX_FILES`] files
    /// counted, paths in `exclude` left out) and a blank line.
    fn commit_stat(
        &self,
        oid: git2::Oid,
        exclude: &[String],
    ) -> std::result::Result<String, git2::Error> {
        let commit = self.repo.find_commit(oid)?;
        let tree = commit.tree()?;
        let parent_tree = match commit.parents().next() {
            Some(p) => Some(p.tree()?),
            None => None,
        };
        let (paths, total) = self.commit_paths(parent_tree.as_ref(), &tree, exclude)?;
        let subject = String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default());
        let mut out = format!("{} {subject}\n", short(commit.id()));
        if !paths.is_empty() {
            let mut opts = DiffOptions::new();
            // Without a limit libgit2 loads blobs up to 512 MiB whole to count lines.
            opts.disable_pathspec_match(true).max_size(DIFF_MAX_FILE);
            for path in &paths {
                opts.pathspec(path);
            }
            let diff =
                self.repo
                    .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(&mut opts))?;
            let buf = diff.stats()?.to_buf(DiffStatsFormat::FULL, 80)?;
            out.push_str(&String::from_utf8_lossy(&buf));
            if total > paths.len() {
                let _ = writeln!(
                    out,
                    " (and {} more files, not counted)",
                    total - paths.len()
                );
            }
        }
        out.push('\n');
        Ok(out)
    }

    /// The first [`STAT_MAX_FILES`] paths (in git's order) that differ between `old` and
    /// `new`, leaving out `exclude`, and how many differ in all. Equal subtrees are skipped
    /// (tree_diff.rs) and only the first paths kept: a commit of 100,000 files costs a walk,
    /// not 10 MB.
    fn commit_paths(
        &self,
        old: Option<&git2::Tree<'_>>,
        new: &git2::Tree<'_>,
        exclude: &[String],
    ) -> std::result::Result<(Vec<Vec<u8>>, usize), git2::Error> {
        struct Count<'a> {
            exclude: &'a [String],
            first: Vec<Vec<u8>>,
            total: usize,
        }
        impl Count<'_> {
            fn excluded(&self, path: &[u8]) -> bool {
                let path = String::from_utf8_lossy(path);
                self.exclude.iter().any(|e| covers(e, &path))
            }
        }
        impl super::tree_diff::TreeVisitor for Count<'_> {
            fn enter(&mut self, path: &[u8]) -> bool {
                !self.excluded(path)
            }
            fn changed(&mut self, path: &[u8], _: Side, _: Side) -> bool {
                if !self.excluded(path) {
                    self.total += 1;
                    if self.first.len() < STAT_MAX_FILES {
                        self.first.push(path.to_vec());
                    }
                }
                true
            }
        }
        let mut count = Count {
            exclude,
            first: Vec::new(),
            total: 0,
        };
        super::tree_diff::walk(
            &self.repo,
            old.map(git2::Tree::id),
            Some(new.id()),
            &mut count,
        )?;
        Ok((count.first, count.total))
    }

    /// True when the work tree (with untracked, not ignored files) differs from `base`
    /// (`None`: the empty tree) in any path outside `exclude` — exactly when [`diff_since`]
    /// would show a change, without reading a patch. Commits made on top of `base` count, so
    /// work an agent committed itself is a change too.
    ///
    /// [`diff_since`]: Repository::diff_since
    pub fn changed_since(
        &self,
        base: Option<git2::Oid>,
        exclude: &[&std::path::Path],
    ) -> Result<bool> {
        let ctx = |e| Error::git("comparing the work with the task's start", e);
        let tree = self.tree_of(base, "comparing the work with the task's start")?;
        let paths = self.work_paths(tree.as_ref())?;
        let exclude: Vec<String> = exclude.iter().filter_map(|p| self.relative(p)).collect();
        let path_of = |f: git2::DiffFile<'_>| {
            f.path_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        // A few paths one by one, each a pathspec: libgit2 then walks only the work tree under
        // it, where a list of paths has no common folder to start from (status_ask.rs). Each
        // is asked against a copy of its own index entries.
        let all: Vec<&std::path::Path> = paths.iter().map(std::path::PathBuf::as_path).collect();
        let lists: Vec<(DiffOptions, Vec<&std::path::Path>)> =
            if super::status_ask::one_by_one(&paths) {
                all.iter()
                    .map(|&path| {
                        let mut opts = work_diff_options();
                        opts.pathspec(path);
                        (opts, vec![path])
                    })
                    .collect()
            } else if paths.is_empty() {
                Vec::new()
            } else {
                vec![(work_diff_list(&paths), all)]
            };
        for (mut opts, asked) in lists {
            let diff = self.with_index_of(&asked, || {
                self.repo
                    .diff_tree_to_workdir_with_index(tree.as_ref(), Some(&mut opts))
                    .map_err(ctx)
            })?;
            let changed = diff.deltas().any(|delta| {
                [path_of(delta.old_file()), path_of(delta.new_file())]
                    .into_iter()
                    .flatten()
                    .all(|p| !exclude.iter().any(|e| covers(e, &p)))
            });
            if changed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The subjects of the latest `count` commits on HEAD, newest first as `git log` lists
    /// them; none on an unborn branch. What the review's message convention is read from:
    /// commit objects only, no tree or blob is read, and the walk stops after `count` (a
    /// topological sort would read the whole history first: 24 ms on 20,000 commits, against
    /// 0.1 ms).
    pub fn recent_subjects(&self, count: usize) -> Result<Vec<String>> {
        let Some(head) = self.head_oid() else {
            return Ok(Vec::new());
        };
        let ctx = |e| Error::git("reading recent commit subjects", e);
        let mut walk = self.repo.revwalk().map_err(ctx)?;
        walk.set_sorting(Sort::NONE).map_err(ctx)?;
        walk.push(head).map_err(ctx)?;
        let mut subjects = Vec::new();
        for oid in walk.take(count) {
            let commit = self.repo.find_commit(oid.map_err(ctx)?).map_err(ctx)?;
            let subject = String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default());
            subjects.push(subject.into_owned());
        }
        Ok(subjects)
    }

    /// The only paths where the work tree (untracked files included) can differ from `base`:
    /// what status lists, and what changed between `base` and HEAD (an agent's own commits).
    fn work_paths(
        &self,
        base: Option<&git2::Tree<'_>>,
    ) -> Result<std::collections::BTreeSet<std::path::PathBuf>> {
        let mut paths: std::collections::BTreeSet<std::path::PathBuf> =
            self.status_paths()?.into_iter().collect();
        let head_tree = self.head_tree_id();
        let base_tree = base.map(git2::Tree::id);
        if head_tree != base_tree {
            paths.extend(self.tree_changes(base_tree, head_tree)?);
        }
        Ok(paths)
    }

    /// The work tree (with untracked, not ignored files) against `base` (`None`: the empty
    /// tree), minus `exclude` (relative or absolute paths; a folder covers what it holds):
    /// the stat first, then the patch, the whole within `budget` bytes, cuts noted.
    pub fn diff_since(
        &self,
        base: Option<git2::Oid>,
        exclude: &[&std::path::Path],
        budget: usize,
    ) -> Result<String> {
        let _timed = super::Timed::start("diff");
        let ctx = |e| Error::git("computing the diff of the work", e);
        let tree = self.tree_of(base, "computing the diff of the work")?;
        let paths = self.work_paths(tree.as_ref())?;
        if paths.is_empty() {
            return Ok(fit("(no changes)\n".to_string(), budget));
        }
        let mut opts = work_diff_list(&paths);
        opts.show_untracked_content(true).max_size(DIFF_MAX_FILE);
        let asked: Vec<&std::path::Path> = paths.iter().map(std::path::PathBuf::as_path).collect();
        let mut diff = self.with_index_of(&asked, || {
            self.repo
                .diff_tree_to_workdir_with_index(tree.as_ref(), Some(&mut opts))
                .map_err(ctx)
        })?;
        diff.find_similar(None).map_err(ctx)?;
        let exclude: Vec<String> = exclude.iter().filter_map(|p| self.relative(p)).collect();

        let mut stat_lines = Vec::new();
        let (mut files, mut added, mut deleted) = (0usize, 0usize, 0usize);
        let mut patch_text = String::new();
        let mut patch_total = 0usize;
        for idx in 0..diff.deltas().len() {
            let Some(delta) = diff.get_delta(idx) else {
                continue;
            };
            let path_of = |f: git2::DiffFile<'_>| {
                f.path_bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            let old = path_of(delta.old_file());
            let new = path_of(delta.new_file());
            let excluded = [&old, &new]
                .into_iter()
                .flatten()
                .any(|p| exclude.iter().any(|e| covers(e, p)));
            if excluded {
                continue;
            }
            let Some(mut patch) = Patch::from_diff(&diff, idx).map_err(ctx)? else {
                continue;
            };
            let name = match (&old, &new) {
                (Some(o), Some(n)) if o != n => format!("{o} => {n}"),
                (_, Some(n)) => n.clone(),
                (Some(o), None) => o.clone(),
                (None, None) => continue,
            };
            files += 1;
            if delta.flags().is_binary() {
                stat_lines.push((name, None));
            } else {
                let (_, adds, dels) = patch.line_stats().map_err(ctx)?;
                added += adds;
                deleted += dels;
                stat_lines.push((name, Some((adds, dels))));
            }
            let buf = patch.to_buf().map_err(ctx)?;
            patch_total += buf.len();
            if patch_text.len() <= budget {
                patch_text.push_str(&String::from_utf8_lossy(&buf));
            }
        }
        if files == 0 {
            return Ok(fit("(no changes)\n".to_string(), budget));
        }
        let stat = render_stat(&stat_lines, files, added, deleted);
        let stat = fit(stat, budget);
        let rest = budget.saturating_sub(stat.len() + 1);
        let patch = fit_prefix(patch_text, patch_total, rest);
        Ok(if patch.is_empty() {
            stat
        } else {
            format!("{stat}\n{patch}")
        })
    }
}

/// A `git diff --stat` look-alike: ` path | N +++--`, then the totals line.
fn render_stat(
    lines: &[(String, Option<(usize, usize)>)],
    files: usize,
    added: usize,
    deleted: usize,
) -> String {
    const BAR: usize = 40;
    let width = lines.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let largest = lines
        .iter()
        .filter_map(|(_, s)| s.map(|(a, d)| a + d))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (name, counts) in lines {
        match counts {
            None => {
                let _ = writeln!(out, " {name:<width$} | Bin");
            }
            Some((a, d)) => {
                let (pa, pd) = if largest > BAR {
                    // Scale, but keep at least one mark for any non-zero count.
                    let scale = |n: usize| {
                        if n == 0 {
                            0
                        } else {
                            (n * BAR / largest).max(1)
                        }
                    };
                    (scale(*a), scale(*d))
                } else {
                    (*a, *d)
                };
                let _ = writeln!(
                    out,
                    " {name:<width$} | {} {}{}",
                    a + d,
                    "+".repeat(pa),
                    "-".repeat(pd)
                );
            }
        }
    }
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let _ = writeln!(
        out,
        " {}, {}, {}",
        plural(files, "file changed", "files changed"),
        plural(added, "insertion(+)", "insertions(+)"),
        plural(deleted, "deletion(-)", "deletions(-)")
    );
    out
}

/// The options of a diff of the work tree, untracked files included.
fn work_diff_options() -> DiffOptions {
    let mut opts = DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true);
    opts
}

/// [`work_diff_options`] limited to exactly `paths` (a folder stands for what it holds).
fn work_diff_list(paths: &std::collections::BTreeSet<std::path::PathBuf>) -> DiffOptions {
    let mut opts = work_diff_options();
    opts.disable_pathspec_match(true);
    for path in paths {
        opts.pathspec(path.as_path());
    }
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_look_like_git() {
        let lines = vec![
            ("src/a.rs".to_string(), Some((3, 1))),
            ("logo.png".to_string(), None),
        ];
        assert_eq!(
            render_stat(&lines, 2, 3, 1),
            " src/a.rs | 4 +++-\n logo.png | Bin\n 2 files changed, 3 insertions(+), 1 deletion(-)\n"
        );
        let big = vec![("a".to_string(), Some((400, 1)))];
        assert_eq!(
            render_stat(&big, 1, 400, 1),
            format!(
                " a | 401 {}-\n 1 file changed, 400 insertions(+), 1 deletion(-)\n",
                "+".repeat(39)
            )
        );
    }
}
