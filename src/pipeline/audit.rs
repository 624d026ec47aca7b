//! The audit after every stage (DESIGN.md sections 4 and 8): what the stage changed that its
//! tool policy forbids, set aside and put back — never destroyed.
//!
//! Decisions a reader must know:
//! - Whose ref is it (DESIGN.md section 4): only the run's own refs are judged — HEAD and the
//!   branch it commits to (for a parallel task, its `kern/<task>` branch and the run's
//!   branch). Their history only moves forwards: the branch deleted or rewound, HEAD on another
//!   branch or detached are put back, and what the agent made is kept under
//!   `refs/kern/agent/<task>/<n>/`. The work tree is then put back to HEAD too (saved under the
//!   same prefix first), and the stage counts as failed. The run's branch moving forwards (a
//!   commit, the agent's or the person's in the same work tree) is kept and told once, with
//!   each commit's subject: during implement that is no violation (kern cannot tell whose it
//!   is); during a read-only stage, which may move no ref, it is one.
//! - Every other ref is shared with the person and their tools (another worktree's commits,
//!   an editor's fetch, a stash, a tag, a second kern): its creations and forward moves are no
//!   finding; a rewind or deletion is named and its old tip kept under
//!   `refs/kern/saved/<task>/<stage>-<n>/`, but never put back and never held against the task.
//! - A `git stash` made in the run's work tree during the stage (new on top of `git stash
//!   list`, based on HEAD) is a git write by the agent: its changes go back into the tree —
//!   SPEC.md's `[~]` among them, so it never reads as a hand edit — the entry is kept under
//!   `refs/kern/agent/<task>/<n>/stash` and taken out of the list; older stashes are never
//!   touched. It is a violation, judged as any other (`repository/stash.rs`).
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
use crate::pipeline::guard::SharedSpec;
use crate::repository::{GitFiles, RefsSnapshot, Repository, Timed, WorkTreeSnapshot};
#[cfg(test)]
use crate::spec::SpecFile;
use crate::stage::Stage;
use crate::text;
use crate::workspace::Workspace;

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
    /// Commits on the run's branch during a stage that may make them (implement), one
    /// sentence: kept in history, told, never a violation — kern cannot tell the agent's from
    /// the person's in the same work tree.
    pub commits: Vec<String>,
}

/// Paths no audit, revert or set-aside may touch: kern's own files, the person's
/// `--allow-dirty` paths (the task's `excluded`), and files kern left out of its commits.
pub(super) fn untouchable(
    ws: &Workspace,
    excluded: &[PathBuf],
    left_out: &[PathBuf],
) -> Vec<PathBuf> {
    let mut keep = ws.own_files();
    keep.extend(excluded.iter().cloned());
    keep.extend(left_out.iter().cloned());
    keep
}

/// What the audit of `stage` compares against, taken right before its agent starts.
pub(super) fn before(ws: &Workspace, spec: &SharedSpec, stage: Stage) -> Result<Before> {
    let _timed = Timed::start("before_stage");
    let (snapshot, refs) = if stage.tools().is_read_only() {
        let snapshot = ws.repo.snapshot()?;
        let refs = snapshot.refs().clone();
        (Some(snapshot), refs)
    } else {
        (None, ws.repo.refs_snapshot()?)
    };
    Ok(Before {
        snapshot,
        refs,
        git_files: ws.repo.git_files()?,
        spec_mark: spec.mark(),
    })
}

/// Audits `stage` of the task `title` against `before` (see the module docs): `ws`'s
/// repository, SPEC.md through `spec`, and nothing under the `keep` paths.
pub(super) fn audit(
    ws: &Workspace,
    spec: &SharedSpec,
    keep: &[PathBuf],
    stage: Stage,
    before: &Before,
    title: &str,
) -> Result<Findings> {
    let _timed = Timed::start("audit");
    let mut found = Findings::default();
    let slug = text::slug(title);

    // A `git stash` made in the run's work tree during the stage: its changes go back into
    // the tree before anything else looks at the tree or SPEC.md (see the module docs).
    let stashes = ws.repo.stashes_since(before.refs.target("refs/stash"))?;
    if !stashes.is_empty() {
        let prefix = next_ref(&ws.repo, &format!("refs/kern/agent/{slug}/"))?;
        let mut kept = Vec::new();
        let mut left = Vec::new();
        // The stashes put back may hold SPEC.md: a new step after them.
        spec.after(|| -> Result<()> {
            // Oldest first: a later stash holds what the tree had after the earlier one.
            for (i, stash) in stashes.iter().rev().enumerate() {
                let name = match i {
                    0 => format!("{prefix}/stash"),
                    n => format!("{prefix}/stash-{}", n + 1),
                };
                ws.repo
                    .set_ref(&name, *stash, "kern: kept a stash an agent made")?;
                let back = ws.repo.unstash(*stash)?;
                found.reverted.extend(
                    back.restored
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned()),
                );
                left.extend(back.left);
                kept.push(name);
            }
            ws.repo.drop_newest_stashes(stashes.len())
        })?;
        let mut sentence = format!(
            "{} stage ran `git stash`: its changes are put back in the tree; the stash is kept at `{}` and taken out of `git stash list`",
            stage.name(),
            kept.join("`, `")
        );
        if !left.is_empty() {
            let names: Vec<String> = left.iter().map(|p| p.display().to_string()).collect();
            sentence.push_str(&format!(
                " ({} changed after the stash, so left as they are; the stash has the earlier version)",
                text::some_of(&names, 10)
            ));
        }
        found.violations.push(sentence);
        found.saved.extend(kept);
    }

    // History: the run's refs are put back when moved any way but forwards; a shared ref
    // moved back is kept and named, never put back (see the module docs).
    let refs_after = ws.repo.refs_snapshot()?;
    // A parallel task: the run's branch may have moved forwards by the run's own commits.
    let before_refs = ws.repo.forward_moves_taken(&before.refs, &refs_after);
    let losses = ws.repo.shared_losses(&before_refs, &refs_after);
    if !losses.is_empty() {
        let prefix = next_ref(
            &ws.repo,
            &format!("refs/kern/saved/{slug}/{}-", stage.name()),
        )?;
        let kept = ws.repo.keep_shared(&format!("{prefix}/"), &losses)?;
        found.shared.extend(losses.iter().map(|l| {
            format!(
                "{l} during the {} stage — not the run's ref, so left as it is; the old tip is kept under `{prefix}/`",
                stage.name()
            )
        }));
        found.shared_kept.extend(kept);
    }
    let ownership = ws.repo.ownership(&before_refs);
    let moved = before_refs
        .runs_only(&ownership)
        .diff(&refs_after.runs_only(&ownership));
    if !moved.is_empty() {
        let prefix = next_ref(&ws.repo, &format!("refs/kern/agent/{slug}/"))?;
        let repair = ws
            .repo
            .restore_history(&before_refs, &format!("{prefix}/"))?;
        if repair.restored.is_empty() {
            // Only forwards: commits on the run's branch, the agent's or the person's in this
            // work tree. Kept, and told once; a violation only where the stage is read-only.
            let made = match refs_after.head_oid() {
                Some(to) if Some(to) != before_refs.head_oid() => {
                    ws.repo.commits_between(before_refs.head_oid(), to)?
                }
                _ => Vec::new(),
            };
            let sentence = if made.is_empty() {
                format!(
                    "{} during the {} stage — kept in history (it only moved forwards)",
                    moved.join("; "),
                    stage.name()
                )
            } else {
                committed_sentence(&made, before_refs.head_target(), stage)
            };
            if stage.tools().is_read_only() {
                found.violations.push(sentence);
            } else {
                found.commits.push(sentence);
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
            let mut paths = changed_paths(&ws.repo, keep)?;
            let dirty = ws.repo.dirty_paths(&[])?;
            paths.extend(
                ws.own_files()
                    .into_iter()
                    .filter(|p| dirty.iter().any(|x| Path::new(x) == p)),
            );
            if !paths.is_empty() {
                let worktree = format!("{prefix}/worktree");
                put_aside(
                    ws,
                    spec,
                    &worktree,
                    &paths,
                    &format!("kern: the work tree an agent left after moving history ({title})\n"),
                )?;
                let text = spec.last_text();
                spec.restore(&text)?;
                found
                    .reverted
                    .extend(paths.iter().map(|p| p.to_string_lossy().into_owned()));
                found.saved.push(worktree);
            }
            found.saved.extend(repair.kept);
        }
    }

    // `.git` files.
    let git_now = ws.repo.git_files()?;
    let changed = before.git_files.changed(&git_now);
    if !changed.is_empty() {
        let saved = next_ref(
            &ws.repo,
            &format!("refs/kern/saved/{slug}/{}-git-", stage.name()),
        )?;
        ws.repo
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
        let mut changed = ws.repo.tree_changes_since(snapshot)?;
        changed
            .paths
            .retain(|p| !keep.iter().any(|k| p.starts_with(k)));
        if !changed.is_empty() {
            let files = &changed.paths;
            let mut note = String::new();
            if !files.is_empty() {
                let saved = next_ref(
                    &ws.repo,
                    &format!("refs/kern/saved/{slug}/{}-", stage.name()),
                )?;
                ws.repo.save_paths(
                    &saved,
                    files,
                    &format!(
                        "kern: what the read-only {} stage changed ({title})\n",
                        stage.name()
                    ),
                )?;
                note = format!("; saved at `{saved}`");
                found.saved.push(saved);
            }
            let keep_refs: Vec<&Path> = keep.iter().map(PathBuf::as_path).collect();
            found
                .reverted
                .extend(ws.repo.revert(snapshot, &keep_refs)?.names());
            found.violations.push(format!(
                "{} stage is read-only but changed {} (reverted{note})",
                stage.name(),
                changed.names().join(", ")
            ));
        }
    }
    Ok(found)
}

/// One sentence for the commits `made` (short id, subject; oldest first) on `branch` (a full
/// ref name; `None`: a detached HEAD) during `stage`.
fn committed_sentence(made: &[(String, String)], branch: Option<&str>, stage: Stage) -> String {
    let listed: Vec<String> = made
        .iter()
        .map(|(id, subject)| format!("{id} \"{}\"", text::strip_controls(subject)))
        .collect();
    let on = branch.map_or_else(
        || "the detached HEAD".to_string(),
        |b| format!("`{}`", b.trim_start_matches("refs/heads/")),
    );
    format!(
        "{} {} committed on {on} during the {} stage — kept in history, not part of the task's commit",
        text::some_of(&listed, 5),
        if made.len() == 1 { "was" } else { "were" },
        stage.name()
    )
}

/// Saves `paths` of the work tree under `git_ref` (a commit saying `message`), then puts
/// exactly those paths back to HEAD: set aside, never destroyed. SPEC.md may have been among
/// them, so the shared view reads it again.
pub(super) fn put_aside(
    ws: &Workspace,
    spec: &SharedSpec,
    git_ref: &str,
    paths: &[PathBuf],
    message: &str,
) -> Result<()> {
    ws.repo.save_paths(git_ref, paths, message)?;
    spec.after(|| ws.repo.restore_paths(paths))
}

/// [`put_aside`] under the next free ref `<prefix><n>` ([`next_ref`]); returns that ref.
pub(super) fn put_aside_at_next(
    ws: &Workspace,
    spec: &SharedSpec,
    prefix: &str,
    paths: &[PathBuf],
    message: &str,
) -> Result<String> {
    let git_ref = next_ref(&ws.repo, prefix)?;
    put_aside(ws, spec, &git_ref, paths, message)?;
    Ok(git_ref)
}

/// The paths that differ from HEAD in the work tree, except those under `keep`.
pub(super) fn changed_paths(repo: &Repository, keep: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let keep: Vec<&Path> = keep.iter().map(PathBuf::as_path).collect();
    repo.dirty_files(&keep)
}

/// The next free ref name `<prefix><n>` (n from 1).
pub(super) fn next_ref(repo: &Repository, prefix: &str) -> Result<String> {
    let taken = repo.refs_under(prefix)?;
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

/// The tree of commit `oid` in `repo`.
pub(super) fn tree_of(repo: &Repository, oid: git2::Oid) -> Result<git2::Oid> {
    repo.git()
        .find_commit(oid)
        .map(|c| c.tree_id())
        .map_err(|e| crate::error::Error::git("reading a commit's tree", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_on_the_branch_read_as_one_sentence() {
        let made = |n: usize| -> Vec<(String, String)> {
            (1..=n)
                .map(|i| (format!("abc000{i}"), format!("Commit {i}")))
                .collect()
        };
        let cases = [
            (
                made(1),
                Some("refs/heads/main"),
                Stage::Implement,
                "abc0001 \"Commit 1\" was committed on `main` during the implement stage — kept in history, not part of the task's commit",
            ),
            (
                made(2),
                None,
                Stage::Research,
                "abc0001 \"Commit 1\", abc0002 \"Commit 2\" were committed on the detached HEAD during the research stage — kept in history, not part of the task's commit",
            ),
            (
                made(7),
                Some("refs/heads/feature/x"),
                Stage::Implement,
                "abc0001 \"Commit 1\", abc0002 \"Commit 2\", abc0003 \"Commit 3\", abc0004 \"Commit 4\", abc0005 \"Commit 5\", and 2 more were committed on `feature/x` during the implement stage — kept in history, not part of the task's commit",
            ),
        ];
        for (made, branch, stage, want) in cases {
            assert_eq!(committed_sentence(&made, branch, stage), want);
        }
    }
    use crate::cli::Cli;
    use crate::settings::Settings;
    use clap::Parser;

    /// A repository in `dir` with `files` committed, and its workspace (state under `state`).
    fn workspace(dir: &Path, state: &Path, files: &[(&str, &str)]) -> Workspace {
        let repo = git2::Repository::init(dir).unwrap();
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            std::fs::write(dir.join(path), text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("P", "p@p").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();
        let cli = Cli::try_parse_from(["kern"]).unwrap();
        let state = state.as_os_str().to_os_string();
        let settings = Settings::resolve(&cli, dir.to_path_buf(), Vec::new(), &|k| {
            (k == "KERN_STATE_DIR").then(|| state.clone())
        })
        .unwrap();
        Workspace::open(&settings).unwrap()
    }

    #[test]
    fn a_read_only_stage_s_changes_are_saved_and_put_back_and_kept_paths_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let ws = workspace(
            dir.path(),
            state.path(),
            &[("SPEC.md", "- [ ] T\n"), ("a.txt", "a\n")],
        );
        let spec = SharedSpec::new(SpecFile::load(&ws.spec_path).unwrap().0);
        std::fs::write(dir.path().join("person.txt"), "the person's\n").unwrap();
        let start = before(&ws, &spec, Stage::Research).unwrap();
        // The stage changes a tracked file, adds one, and touches the person's file.
        std::fs::write(dir.path().join("a.txt"), "changed\n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "new\n").unwrap();
        std::fs::write(dir.path().join("person.txt"), "the person's, edited\n").unwrap();
        let keep = [PathBuf::from("person.txt")];
        let found = audit(&ws, &spec, &keep, Stage::Research, &start, "T").unwrap();
        assert_eq!(found.violations.len(), 1, "{found:?}");
        assert!(
            found.violations[0].starts_with("research stage is read-only but changed"),
            "{found:?}"
        );
        assert!(!found.history_moved);
        assert_eq!(found.saved, ["refs/kern/saved/t/research-1"]);
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).ok();
        assert_eq!(read("a.txt").as_deref(), Some("a\n"));
        assert_eq!(read("b.txt"), None);
        assert_eq!(
            read("person.txt").as_deref(),
            Some("the person's, edited\n")
        );
        // What it changed is kept, not destroyed.
        let git = git2::Repository::open(dir.path()).unwrap();
        let saved = git
            .find_reference("refs/kern/saved/t/research-1")
            .unwrap()
            .peel_to_tree()
            .unwrap();
        let blob = |p: &str| {
            let entry = saved.get_path(Path::new(p)).unwrap();
            String::from_utf8(git.find_blob(entry.id()).unwrap().content().to_vec()).unwrap()
        };
        assert_eq!(blob("a.txt"), "changed\n");
        assert_eq!(blob("b.txt"), "new\n");
        // A second audit of an unchanged tree finds nothing.
        let again = before(&ws, &spec, Stage::Research).unwrap();
        let clean = audit(&ws, &spec, &keep, Stage::Research, &again, "T").unwrap();
        assert!(
            clean.violations.is_empty() && clean.saved.is_empty(),
            "{clean:?}"
        );
    }
}
