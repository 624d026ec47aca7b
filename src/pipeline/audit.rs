//! The audit after every stage (DESIGN.md sections 4 and 8): what the stage changed that its
//! tool policy forbids, set aside and put back — never destroyed.
//!
//! Decisions a reader must know:
//! - Whose ref is it (DESIGN.md section 4): only the run's own refs are judged — HEAD and the
//!   branch it commits to (for a parallel task, its `kern/<task>` branch and the run's
//!   branch). Their history only moves forwards: the branch deleted or rewound, HEAD on another
//!   branch or detached are put back, and what the agent made is kept under
//!   `refs/kern/agent/<task>/<n>/`. The work tree is then put back to HEAD too (saved under the
//!   same prefix first), and the stage counts as failed. The run's branch moving forwards (the
//!   agent committed) is reported and kept.
//! - Every other ref is shared with the person and their tools (another worktree's commits,
//!   an editor's fetch, a stash, a tag, a second kern): its creations and forward moves are no
//!   finding; a rewind or deletion is named and its old tip kept under
//!   `refs/kern/saved/<task>/<stage>-<n>/`, but never put back and never held against the task.
//! - `.git` is audited: hooks outside the work tree, `config` and `info/exclude` are put back
//!   when a stage changed them; the stage's versions are saved under `refs/kern/saved/`.
//! - A read-only stage (research, review) must leave the work tree and the index as they
//!   were; what it changed is saved under `refs/kern/saved/<task>/<stage>-<n>` and reverted.
//!   kern's own files and the person's `--allow-dirty` paths are outside every revert: a person
//!   may edit them at any moment.
//! - SPEC.md is the person's: a change to it during a stage is never reverted; changes of
//!   markers, Check notes and tasks kern did not make are reported by name ([`crate::spec::changes`]).
//! - Only a read-only stage gets a work-tree snapshot (the copies of what is dirty): the
//!   implement stage may change anything, so before it kern records the refs and `.git` files
//!   alone. What the tree looks like after a stage is the repository's status look, which
//!   during a run costs what changed (repository/status.rs), and is what the next stage's
//!   snapshot and the commit start from. Paths are bytes end to end.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::pipeline::{Run, TaskRun};
use crate::repository::{GitFiles, RefsSnapshot, Timed, WorkTreeSnapshot};
use crate::stage::Stage;
use crate::text;

/// What the audit needs from before a stage.
pub(super) struct Before {
    /// The work tree and the index, for a read-only stage.
    snapshot: Option<WorkTreeSnapshot>,
    refs: RefsSnapshot,
    git_files: GitFiles,
    /// Where the log of SPEC.md changes that were not kern's stood as the stage began.
    pub spec_mark: usize,
}

/// What the audit found and did.
#[derive(Debug, Default)]
pub(super) struct Findings {
    /// One sentence per forbidden change.
    pub violations: Vec<String>,
    /// What was put back.
    pub reverted: Vec<String>,
    /// Where what was taken out is kept.
    pub saved: Vec<String>,
    /// The stage moved history the wrong way: its result cannot be used.
    pub history_moved: bool,
    /// Shared refs moved back during the stage, one sentence each: kept and named, not held
    /// against the task (whoever moved them, kern cannot tell the person from the agent).
    pub shared: Vec<String>,
    /// Where their old tips are kept.
    pub shared_kept: Vec<String>,
}

impl Run<'_> {
    /// Takes what the audit of `stage` compares against, right before its agent starts.
    pub(super) fn before_stage(&self, stage: Stage) -> Result<Before> {
        let _timed = Timed::start("before_stage");
        let (snapshot, refs) = if stage.tools().is_read_only() {
            let snapshot = self.ws.repo.snapshot()?;
            let refs = snapshot.refs().clone();
            (Some(snapshot), refs)
        } else {
            (None, self.ws.repo.refs_snapshot()?)
        };
        Ok(Before {
            snapshot,
            refs,
            git_files: self.ws.repo.git_files()?,
            spec_mark: self.spec.mark(),
        })
    }

    /// Audits `stage` against `before` (see the module docs).
    pub(super) fn audit(
        &mut self,
        stage: Stage,
        before: &Before,
        it: &TaskRun,
    ) -> Result<Findings> {
        let _timed = Timed::start("audit");
        let mut found = Findings::default();
        let slug = text::slug(&it.title);
        // A kill while refs or the index are rewritten below must let the next run clean up.
        self.lock.set_phase(crate::state::lock::Phase::Writing)?;

        // History: the run's refs are put back when moved any way but forwards; a shared ref
        // moved back is kept and named, never put back (see the module docs).
        let refs_after = self.ws.repo.refs_snapshot()?;
        // A parallel task: the run's branch may have moved forwards by the run's own commits.
        let before_refs = self.ws.repo.forward_moves_taken(&before.refs, &refs_after);
        let losses = self.ws.repo.shared_losses(&before_refs, &refs_after);
        if !losses.is_empty() {
            let prefix = self.next_ref(&format!("refs/kern/saved/{slug}/{}-", stage.name()))?;
            let kept = self.ws.repo.keep_shared(&format!("{prefix}/"), &losses)?;
            found.shared.extend(losses.iter().map(|l| {
                format!(
                    "{l} during the {} stage — not the run's ref, so left as it is; the old tip is kept under `{prefix}/`",
                    stage.name()
                )
            }));
            found.shared_kept.extend(kept);
        }
        let ownership = self.ws.repo.ownership(&before_refs);
        let moved = before_refs
            .runs_only(&ownership)
            .diff(&refs_after.runs_only(&ownership));
        if !moved.is_empty() {
            let prefix = self.next_ref(&format!("refs/kern/agent/{slug}/"))?;
            let repair = self
                .ws
                .repo
                .restore_history(&before_refs, &format!("{prefix}/"))?;
            if repair.restored.is_empty() {
                for m in moved {
                    found.violations.push(format!(
                        "{} stage: {m} (history kept: it only moved forwards)",
                        stage.name()
                    ));
                }
            } else {
                found.history_moved = true;
                found.violations.push(format!(
                    "{} stage moved history: {}",
                    stage.name(),
                    repair.restored.join("; ")
                ));
                // Moving history rewrote tracked files, kern's own among them: everything goes
                // back to HEAD, SPEC.md to the text kern last saw (each saved first).
                let mut paths = self.changed_paths(it)?;
                let dirty = self.ws.repo.dirty_paths(&[])?;
                paths.extend(
                    self.ws
                        .own_files()
                        .into_iter()
                        .filter(|p| dirty.iter().any(|x| Path::new(x) == p)),
                );
                if !paths.is_empty() {
                    let worktree = format!("{prefix}/worktree");
                    self.ws.repo.save_paths(
                        &worktree,
                        &paths,
                        &format!(
                            "kern: the work tree an agent left after moving history ({})\n",
                            it.title
                        ),
                    )?;
                    self.ws.repo.restore_paths(&paths)?;
                    self.spec.next_step();
                    let text = self.spec.last_text();
                    self.spec.restore(&text)?;
                    found
                        .reverted
                        .extend(paths.iter().map(|p| p.to_string_lossy().into_owned()));
                    found.saved.push(worktree);
                }
                found.saved.extend(repair.kept);
            }
        }

        // `.git` files.
        let git_now = self.ws.repo.git_files()?;
        let changed = before.git_files.changed(&git_now);
        if !changed.is_empty() {
            let saved = self.next_ref(&format!("refs/kern/saved/{slug}/{}-git-", stage.name()))?;
            self.ws
                .repo
                .restore_git_files(&before.git_files, &changed, &saved)?;
            let names: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
            found.violations.push(format!(
                "{} stage changed {} (put back; its version is kept at `{saved}`)",
                stage.name(),
                names.join(", ")
            ));
            found.reverted.extend(names);
            found.saved.push(saved);
        }

        // The work tree, for a read-only stage.
        if let Some(snapshot) = &before.snapshot {
            let keep = self.untouchable(it);
            let mut changed = self.ws.repo.tree_changes_since(snapshot)?;
            changed
                .paths
                .retain(|p| !keep.iter().any(|k| p.starts_with(k)));
            if !changed.is_empty() {
                let files = &changed.paths;
                let mut note = String::new();
                if !files.is_empty() {
                    let saved =
                        self.next_ref(&format!("refs/kern/saved/{slug}/{}-", stage.name()))?;
                    self.ws.repo.save_paths(
                        &saved,
                        files,
                        &format!(
                            "kern: what the read-only {} stage changed ({})\n",
                            stage.name(),
                            it.title
                        ),
                    )?;
                    note = format!("; saved at `{saved}`");
                    found.saved.push(saved);
                }
                let keep_refs: Vec<&Path> = keep.iter().map(PathBuf::as_path).collect();
                found
                    .reverted
                    .extend(self.ws.repo.revert(snapshot, &keep_refs)?.names());
                found.violations.push(format!(
                    "{} stage is read-only but changed {} (reverted{note})",
                    stage.name(),
                    changed.names().join(", ")
                ));
            }
        }
        Ok(found)
    }

    /// Paths no audit, revert or set-aside may touch: kern's own files, the person's
    /// `--allow-dirty` paths, and files kern left out of its commits.
    pub(super) fn untouchable(&self, it: &TaskRun) -> Vec<PathBuf> {
        let mut keep = self.ws.own_files();
        keep.extend(it.start.excluded.iter().cloned());
        keep.extend(self.left_out.paths.iter().cloned());
        keep
    }

    /// The paths that differ from HEAD in the work tree, except the untouchable ones.
    pub(super) fn changed_paths(&self, it: &TaskRun) -> Result<Vec<PathBuf>> {
        let keep = self.untouchable(it);
        let keep_refs: Vec<&Path> = keep.iter().map(PathBuf::as_path).collect();
        self.ws.repo.dirty_files(&keep_refs)
    }

    /// The next free ref name `<prefix><n>` (n from 1).
    pub(super) fn next_ref(&self, prefix: &str) -> Result<String> {
        let taken = self.ws.repo.refs_under(prefix)?;
        let n = (1..)
            .find(|n| {
                let name = format!("{prefix}{n}");
                !taken
                    .iter()
                    .any(|t| t == &name || t.starts_with(&format!("{name}/")))
            })
            .unwrap_or(1);
        Ok(format!("{prefix}{n}"))
    }
}
