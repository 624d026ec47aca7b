//! kern's commit, as `git add -A && git commit -m` would make it: stage (staging.rs), run the
//! hooks, sign when signing is on, commit on HEAD, verify.
//!
//! The one decision a reader must know: the index is built from the person's current index
//! (so git's stat cache saves re-hashing clean files), updated from the work tree, and judged
//! entry by entry against HEAD's tree before the hooks see it. Paths dirty before the task
//! (`--allow-dirty`) are left out and their staged state is put back afterwards, so the
//! person's own staging survives kern's commit. Any failure before the commit exists puts the
//! index back as it was. A `pre-commit` hook that fails after changing only files kern staged
//! (a fixer: whitespace, end of file, a formatter) gets what a person would do: its fixes are
//! staged and the hook runs once more (pre_commit.rs). A refused message is its own error
//! ([`Error::CommitMessageRefused`]), so the loop can ask for a better message.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{ErrorCode, Index, IndexEntry, Oid, Signature, Tree};

use super::Repository;
use super::hooks::HookRun;
use super::message::Cleanup;
use super::signing::Signer;
use super::staging::Staging;
use crate::error::{Error, Result};

/// What to commit.
#[derive(Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The message (cleaned of trailing whitespace as `git commit -m` does).
    pub message: &'a str,
    /// Paths left out of the commit: those dirty before the task under `--allow-dirty`
    /// (relative to the top, or absolute; a folder covers what it holds).
    pub exclude: &'a [PathBuf],
    /// Skip the `pre-commit` and `commit-msg` hooks (`--no-verify`), as git does.
    pub no_verify: bool,
    /// Hears what the person should know while the commit is under way (waiting for an
    /// `index.lock`); `None` says nothing.
    pub notify: Option<&'a dyn Fn(&str)>,
}

impl std::fmt::Debug for CommitRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitRequest")
            .field("message", &self.message)
            .field("exclude", &self.exclude)
            .field("no_verify", &self.no_verify)
            .finish_non_exhaustive()
    }
}

/// What the commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The new commit; `None` when there was nothing to commit.
    pub sha: Option<Oid>,
    /// Changed files that were not committed, and why.
    pub left_out: Vec<LeftOut>,
    /// What else the person should hear: a hook's fixes staged, a `post-commit` hook that
    /// failed, a filter that was bypassed.
    pub notes: Vec<String>,
}

/// A changed file kern did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Relative, `/`-separated path.
    pub path: String,
    /// Why, e.g. `sensitive file name (.env)` or `looks like a GitHub token`.
    pub reason: String,
}

impl Repository {
    /// Commits every allowed change on HEAD (see the module docs). Nothing changed: `sha` is
    /// `None` and no commit is made. A failing hook: [`Error::HookFailed`] or
    /// [`Error::CommitMessageRefused`], no commit, and the index as it was before.
    pub fn commit(&self, req: &CommitRequest<'_>) -> Result<CommitOutcome> {
        let out = self.commit_inner(req);
        // The commit read and wrote the whole index: what it freed goes back.
        super::memory::trim_memory();
        out
    }

    fn commit_inner(&self, req: &CommitRequest<'_>) -> Result<CommitOutcome> {
        let _timed = super::Timed::start("commit");
        let author = self.author()?;
        let committer = self.committer()?;
        self.ensure_no_operation_in_progress()?;
        // Read once: opening the config costs more than the rest of a small commit.
        let config = self.config_snapshot()?;
        let signer = Signer::from_config(&config, &ident(&committer))?;
        let cleanup = Cleanup::of(&config);
        let exclude: Vec<PathBuf> = req
            .exclude
            .iter()
            .filter_map(|p| self.relative_path(p))
            .collect();
        let ctx = |what: &'static str| move |e: git2::Error| self.index_error(what, e);

        let (head_commit, head_tree) = self.head_commit_and_tree()?;
        let head_tree_id = head_tree.as_ref().map(Tree::id);

        self.wait_for_index_lock(req.notify)?;
        let saved_index = self.back_up_index()?;
        let mut index = self.repo.index().map_err(ctx("opening the index"))?;
        // Read again only when it changed on disk: every change kern makes to it in memory is
        // written, or undone by reading it again (a 100,000-entry index takes 40 ms to read).
        index.read(false).map_err(ctx("reading the index"))?;
        let persons_entries = excluded_entries(&index, &exclude);

        let mut staging = Staging::new(self, config, exclude);
        // From here on, any failure puts the index back as the person had it.
        let restore = |e: Error| match self.restore_index_backup(&saved_index) {
            Ok(()) => e,
            Err(restore_error) => Error::Internal(format!(
                "{e}; and the index could not be restored: {restore_error}"
            )),
        };
        let staged = staging
            .stage_all(&mut index)
            .and_then(|()| staging.judge_index(&mut index, head_tree.as_ref()))
            .and_then(|judged| self.write_tree(&mut index, judged, head_tree_id, req.notify));
        let mut tree_id = staged.map_err(restore)?;
        let mut notes = Vec::new();
        let nothing = |staging: Staging<'_>, notes: Vec<String>| CommitOutcome {
            sha: None,
            left_out: into_left_out(staging.left_out),
            notes,
        };
        if Some(tree_id) == head_tree_id {
            self.put_back(&mut index, &persons_entries)?;
            return Ok(nothing(staging, notes));
        }

        // As git: whitespace before the hooks (unless verbatim), the person's cleanup after.
        let first = if cleanup == Cleanup::Verbatim {
            Cleanup::Verbatim
        } else {
            Cleanup::Whitespace
        };
        let mut message = first.clean(req.message).map_err(restore)?;
        let hooks = self.hooks_dir();
        if !req.no_verify {
            let tree = self.pre_commit(
                &hooks,
                &mut staging,
                &mut index,
                (head_tree.as_ref(), tree_id),
                &author,
                req,
                &mut notes,
            );
            tree_id = tree.map_err(restore)?;
            if Some(tree_id) == head_tree_id {
                self.put_back(&mut index, &persons_entries)?;
                return Ok(nothing(staging, notes));
            }
        }
        // git runs prepare-commit-msg even with --no-verify.
        message = self
            .message_hook(
                &hooks,
                "prepare-commit-msg",
                Some("message"),
                &message,
                &author,
                self.hook_timeout,
            )
            .map_err(restore)?;
        if !req.no_verify {
            message = self
                .message_hook(
                    &hooks,
                    "commit-msg",
                    None,
                    &message,
                    &author,
                    self.hook_timeout,
                )
                .map_err(restore)?;
        }
        message = cleanup.clean(&message).map_err(restore)?;
        if message.trim().is_empty() {
            return Err(restore(Error::Repository(
                "the commit message is empty — nothing was committed".into(),
            )));
        }

        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| restore(Error::git("reading the new tree", e)))?;
        let parents: Vec<&git2::Commit<'_>> = head_commit.iter().collect();
        let oid = self
            .create_commit(
                signer.as_ref(),
                &author,
                &committer,
                &message,
                &tree,
                &parents,
            )
            .map_err(restore)?;
        self.verify_commit(oid, tree_id)?;
        self.put_back(&mut index, &persons_entries)?;
        if let HookRun::Failed(output) =
            self.run_hook(&hooks, "post-commit", &[], &author, self.hook_timeout)
        {
            notes.push(format!(
                "the `post-commit` hook failed (the commit stands, as with git):\n{output}"
            ));
        }
        notes.extend(staging.notes);
        Ok(CommitOutcome {
            sha: Some(oid),
            left_out: into_left_out(staging.left_out),
            notes,
        })
    }

    /// A parallel task's work as a commit on its worktree's HEAD (its `kern/<task>` branch):
    /// staged exactly as [`Repository::commit`] stages (filters, left-out files, `exclude`),
    /// but kern's own record — no hooks, not signed. `None` when nothing changed. The task's
    /// real commit is made on the run's branch when it is integrated.
    pub fn commit_work(&self, message: &str, exclude: &[PathBuf]) -> Result<CommitOutcome> {
        let config = self.config_snapshot()?;
        let exclude: Vec<PathBuf> = exclude
            .iter()
            .filter_map(|p| self.relative_path(p))
            .collect();
        let ctx = |what: &'static str| move |e: git2::Error| self.index_error(what, e);
        let (head_commit, head_tree) = self.head_commit_and_tree()?;
        self.wait_for_index_lock(None)?;
        let mut index = self.repo.index().map_err(ctx("opening the index"))?;
        index.read(true).map_err(ctx("reading the index"))?;
        let mut staging = Staging::new(self, config, exclude);
        staging.stage_all(&mut index)?;
        let judged = staging.judge_index(&mut index, head_tree.as_ref())?;
        let tree_id =
            self.write_tree(&mut index, judged, head_tree.as_ref().map(Tree::id), None)?;
        let left_out = into_left_out(std::mem::take(&mut staging.left_out));
        if Some(tree_id) == head_tree.as_ref().map(Tree::id) {
            return Ok(CommitOutcome {
                sha: None,
                left_out,
                notes: Vec::new(),
            });
        }
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| Error::git("reading the new tree", e))?;
        let sig = self.kern_signature()?;
        let parents: Vec<&git2::Commit<'_>> = head_commit.iter().collect();
        let oid = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .map_err(|e| Error::git("committing the task's work on its branch", e))?;
        Ok(CommitOutcome {
            sha: Some(oid),
            left_out,
            notes: std::mem::take(&mut staging.notes),
        })
    }

    /// Writes the index (waiting out a briefly held `index.lock`) and its tree — `judged`, the
    /// tree judging wrote when it changed nothing, or written now: the folders that differ
    /// from `head`'s.
    pub(super) fn write_tree(
        &self,
        index: &mut Index,
        judged: Option<Oid>,
        head: Option<Oid>,
        notify: Option<&dyn Fn(&str)>,
    ) -> Result<Oid> {
        let timed = super::Timed::start("commit.write_index");
        self.write_index(index, "writing the index", notify)?;
        drop(timed);
        if let Some(tree) = judged {
            return Ok(tree);
        }
        let _timed = super::Timed::start("commit.write_tree");
        super::tree_write::write_index_tree(&self.repo, index, head)
            .map_err(|e| self.index_error("writing the tree", e))
    }

    /// A commit on `parent` that changes the file `path` (relative to the top) alone, to
    /// `text`, with `message`, made as git would make it — git's identity, signed when git
    /// would sign — that moves no ref: for an outcome kern publishes without a work tree
    /// (`--remote`'s SPEC.md-only commits). Hooks do not run: no work tree is committed.
    pub fn commit_file(&self, parent: Oid, path: &Path, text: &str, message: &str) -> Result<Oid> {
        let git = |e: git2::Error| Error::git("committing SPEC.md's outcome of a task", e);
        let parent_commit = self.repo.find_commit(parent).map_err(git)?;
        let parent_tree = parent_commit.tree().map_err(git)?;
        let blob = self.repo.blob(text.as_bytes()).map_err(git)?;
        let mut index = git2::Index::new_ext(self.repo.object_format()).map_err(git)?;
        index.read_tree(&parent_tree).map_err(git)?;
        let mode = parent_tree
            .get_path(path)
            .map_or(0o100_644, |e| e.filemode().cast_unsigned());
        index
            .add(&super::index_entries::bare_entry(
                path.as_os_str().as_bytes().to_vec(),
                mode,
                blob,
            ))
            .map_err(git)?;
        let tree = index.write_tree_to(&self.repo).map_err(git)?;
        self.commit_tree(tree, parent, message)
    }

    /// `path`'s text at `commit` (empty when it has none there).
    pub fn text_at(&self, commit: Oid, path: &Path) -> String {
        self.repo
            .find_commit(commit)
            .ok()
            .and_then(|c| c.tree().ok())
            .and_then(|t| t.get_path(path).ok())
            .and_then(|e| self.repo.find_blob(e.id()).ok())
            .map(|b| String::from_utf8_lossy(b.content()).into_owned())
            .unwrap_or_default()
    }

    /// A commit of `tree` on `parent` with `message`, as git would make it; it moves no ref.
    fn commit_tree(&self, tree: Oid, parent: Oid, message: &str) -> Result<Oid> {
        let git = |e: git2::Error| Error::git("committing SPEC.md's outcome of a task", e);
        let author = self.author()?;
        let committer = self.committer()?;
        let config = self.config_snapshot()?;
        let signer = Signer::from_config(&config, &ident(&committer))?;
        let message = Cleanup::of(&config).clean(message)?;
        let tree = self.repo.find_tree(tree).map_err(git)?;
        let parent = self.repo.find_commit(parent).map_err(git)?;
        let Some(signer) = signer else {
            return self
                .repo
                .commit(None, &author, &committer, &message, &tree, &[&parent])
                .map_err(git);
        };
        let buffer = self
            .repo
            .commit_create_buffer(&author, &committer, &message, &tree, &[&parent])
            .map_err(git)?;
        let signature = signer.sign(&buffer, &self.top, self.hook_timeout)?;
        let content = std::str::from_utf8(&buffer)
            .map_err(|e| Error::Internal(format!("the commit to sign is not UTF-8: {e}")))?;
        self.repo
            .commit_signed(content, &signature, Some(signature_header(&self.repo)))
            .map_err(git)
    }

    /// Makes the commit and moves HEAD: through libgit2 when unsigned; signed, through
    /// `commit_create_buffer`, the signer and `commit_signed`, then HEAD moved by kern with
    /// the reflog entry git writes.
    fn create_commit(
        &self,
        signer: Option<&Signer>,
        author: &Signature<'_>,
        committer: &Signature<'_>,
        message: &str,
        tree: &git2::Tree<'_>,
        parents: &[&git2::Commit<'_>],
    ) -> Result<Oid> {
        let Some(signer) = signer else {
            return self
                .repo
                .commit(Some("HEAD"), author, committer, message, tree, parents)
                .map_err(|e| self.index_error("creating the commit", e));
        };
        let buffer = self
            .repo
            .commit_create_buffer(author, committer, message, tree, parents)
            .map_err(|e| Error::git("building the commit", e))?;
        let signature = signer.sign(&buffer, &self.top, self.hook_timeout)?;
        let content = std::str::from_utf8(&buffer)
            .map_err(|e| Error::Internal(format!("the commit to sign is not UTF-8: {e}")))?;
        let oid = self
            .repo
            .commit_signed(content, &signature, Some(signature_header(&self.repo)))
            .map_err(|e| Error::git("storing the signed commit", e))?;
        let subject = message.lines().next().unwrap_or_default();
        let old = parents.first().map(|p| p.id());
        let reflog = match old {
            Some(_) => format!("commit: {subject}"),
            None => format!("commit (initial): {subject}"),
        };
        let head = self
            .repo
            .find_reference("HEAD")
            .map_err(|e| Error::git("reading HEAD", e))?;
        let target = head
            .symbolic_target_bytes()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let moved = match (target, old) {
            (Some(branch), Some(old)) => self
                .repo
                .reference_matching(&branch, oid, true, old, &reflog),
            (Some(branch), None) => self.repo.reference(&branch, oid, false, &reflog),
            (None, Some(old)) => self
                .repo
                .reference_matching("HEAD", oid, true, old, &reflog),
            (None, None) => self.repo.reference("HEAD", oid, false, &reflog),
        };
        moved.map_err(|e| self.index_error("moving the branch to the signed commit", e))?;
        Ok(oid)
    }

    /// Proves that HEAD now is `oid` and that its tree is `tree_id`.
    fn verify_commit(&self, oid: Oid, tree_id: Oid) -> Result<()> {
        let head = self.head_oid();
        if head != Some(oid) {
            return Err(Error::Internal(format!(
                "after committing {oid}, HEAD is {} — check `git log` before running kern again",
                head.map_or_else(|| "unborn".into(), |o| o.to_string())
            )));
        }
        let tree = self
            .repo
            .find_commit(oid)
            .map_err(|e| Error::git("reading the new commit", e))?
            .tree_id();
        if tree != tree_id {
            return Err(Error::Internal(format!(
                "commit {oid} holds tree {tree}, not the staged tree {tree_id}"
            )));
        }
        Ok(())
    }

    /// Puts the person's own index entries back for `--allow-dirty` paths.
    fn put_back(&self, index: &mut Index, entries: &[(Vec<u8>, Option<IndexEntry>)]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        for (path, entry) in entries {
            let path = Path::new(std::ffi::OsStr::from_bytes(path));
            let result = match entry {
                Some(entry) => index.add(entry),
                None => match index.get_path(path, 0) {
                    Some(_) => index.remove_path(path),
                    None => Ok(()),
                },
            };
            result.map_err(|e| self.index_error("restoring staged --allow-dirty files", e))?;
        }
        index
            .write()
            .map_err(|e| self.index_error("writing the index", e))
    }

    /// HEAD's commit and tree; both `None` on an unborn branch.
    fn head_commit_and_tree(&self) -> Result<(Option<git2::Commit<'_>>, Option<Tree<'_>>)> {
        let ctx = |what: &'static str| move |e: git2::Error| self.index_error(what, e);
        let head_commit = match self.head_oid() {
            Some(oid) => Some(self.repo.find_commit(oid).map_err(ctx("reading HEAD"))?),
            None => None,
        };
        let head_tree = match &head_commit {
            Some(c) => Some(c.tree().map_err(ctx("reading HEAD's tree"))?),
            None => None,
        };
        Ok((head_commit, head_tree))
    }

    /// A libgit2 error, with a held `index.lock` (or ref lock) turned into its own error.
    pub(super) fn index_error(&self, what: &str, e: git2::Error) -> Error {
        if e.code() == ErrorCode::Locked {
            Error::IndexLocked {
                path: self.repo.path().join("index.lock"),
            }
        } else {
            Error::git(what, e)
        }
    }
}

/// `Name <email>`, as gpg's default key is named.
fn ident(who: &Signature<'_>) -> String {
    format!(
        "{} <{}>",
        String::from_utf8_lossy(who.name_bytes()),
        String::from_utf8_lossy(who.email_bytes())
    )
}

/// The index entries (stage 0) under the excluded paths, with every excluded path that has
/// no entry recorded as `None`.
fn excluded_entries(index: &Index, exclude: &[PathBuf]) -> Vec<(Vec<u8>, Option<IndexEntry>)> {
    if exclude.is_empty() {
        return Vec::new();
    }
    let under = |x: &Path, p: &[u8]| Path::new(std::ffi::OsStr::from_bytes(p)).starts_with(x);
    let mut out: Vec<(Vec<u8>, Option<IndexEntry>)> = index
        .iter()
        .filter(|e| exclude.iter().any(|x| under(x, &e.path)))
        .map(|e| (e.path.clone(), Some(e)))
        .collect();
    for x in exclude {
        if !out.iter().any(|(p, _)| under(x, p)) {
            out.push((x.as_os_str().as_bytes().to_vec(), None));
        }
    }
    out
}

fn into_left_out(map: BTreeMap<String, String>) -> Vec<LeftOut> {
    map.into_iter()
        .map(|(path, reason)| LeftOut { path, reason })
        .collect()
}

/// The commit header git keeps a signature in: `gpgsig` in a SHA-1 repository, `gpgsig-sha256`
/// in a SHA-256 one (git's `gpg_sig_headers`), where `git verify-commit` looks for it.
fn signature_header(repo: &git2::Repository) -> &'static str {
    match repo.object_format() {
        git2::ObjectFormat::Sha256 => "gpgsig-sha256",
        git2::ObjectFormat::Sha1 => "gpgsig",
    }
}
