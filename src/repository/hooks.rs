//! Running the person's git hooks around a commit the way `git commit -m` runs them:
//! `pre-commit`, `prepare-commit-msg <file> message`, `commit-msg <file>`, `post-commit`.
//!
//! The one decision a reader must know: a hook is looked up in `core.hooksPath` when set
//! (a relative path is taken from the work tree top, as git does) and otherwise in the common
//! git folder's `hooks/` (shared by linked worktrees); only an executable file counts, so the
//! `*.sample` files and a hook without its execute bit are skipped, as git skips them. A hook
//! runs in the work tree top with git's variables (`GIT_INDEX_FILE`, `GIT_EDITOR=:`,
//! `GIT_PREFIX`, the author), stdin closed, stdout and stderr captured together in order,
//! through the supervisor's probe: in its own process group, stopped as a group at
//! `--hook-timeout`, inside the fence kern gives hooks (they run code of the work tree the
//! agent may have written: `pipeline/fence.rs`), whose denials wait for the pipeline to take
//! them ([`Repository::take_hook_denied`]). A failure carries the output's tail.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::Signature;

use super::Repository;
use crate::error::{Error, Result};
use crate::supervisor::probe::{self, Probe};

/// The hooks around a commit, in the order git runs them.
pub(crate) const COMMIT_HOOKS: [&str; 4] = [
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
];

/// How a hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HookRun {
    /// No such hook (or not executable): nothing ran.
    Absent,
    /// It exited 0.
    Passed,
    /// It failed, timed out or could not start; its output's tail and how it ended.
    Failed(String),
}

impl Repository {
    /// Runs the commit's hooks inside `fence` from now on (`None`: unfenced).
    pub(crate) fn set_hook_fence(&self, fence: Option<crate::sandbox::Fence>) {
        self.hook_fence.borrow_mut().0 = fence;
    }

    /// What the fence denied the hooks since the last call.
    pub(crate) fn take_hook_denied(&self) -> Option<crate::sandbox::FenceReport> {
        self.hook_fence.borrow_mut().1.take()
    }

    /// The folder hooks are taken from: `core.hooksPath` (relative to the top), else the
    /// common git folder's `hooks/`.
    pub fn hooks_dir(&self) -> PathBuf {
        let configured = self
            .repo
            .config()
            .ok()
            .and_then(|c| c.get_path("core.hooksPath").ok());
        match configured {
            Some(p) if p.is_absolute() => p,
            Some(p) => self.top.join(p),
            None => self.repo.commondir().join("hooks"),
        }
    }

    /// Which of git's commit hooks exist (and would run), in git's order.
    pub fn commit_hooks(&self) -> Vec<&'static str> {
        let dir = self.hooks_dir();
        COMMIT_HOOKS
            .into_iter()
            .filter(|name| hook_present(&dir, name))
            .collect()
    }

    /// Runs hook `name` from `dir` with `args`, as git would for a commit by `author`.
    pub(super) fn run_hook(
        &self,
        dir: &Path,
        name: &str,
        args: &[OsString],
        author: &Signature<'_>,
        timeout: Duration,
    ) -> HookRun {
        if !hook_present(dir, name) {
            return HookRun::Absent;
        }
        let path = dir.join(name);
        let mut probe = Probe::new(path.as_os_str(), args.iter().cloned(), &self.top, timeout);
        let when = author.when();
        let offset = when.offset_minutes();
        let date = format!(
            "@{} {}{:02}{:02}",
            when.seconds(),
            if offset < 0 { '-' } else { '+' },
            offset.abs() / 60,
            offset.abs() % 60
        );
        probe.env = vec![
            ("GIT_DIR".into(), self.repo.path().into()),
            (
                "GIT_INDEX_FILE".into(),
                self.repo.path().join("index").into(),
            ),
            // git sets this so a hook that opens an editor does not hang an unattended run.
            ("GIT_EDITOR".into(), ":".into()),
            ("GIT_PREFIX".into(), "".into()),
            (
                "GIT_AUTHOR_NAME".into(),
                String::from_utf8_lossy(author.name_bytes())
                    .into_owned()
                    .into(),
            ),
            (
                "GIT_AUTHOR_EMAIL".into(),
                String::from_utf8_lossy(author.email_bytes())
                    .into_owned()
                    .into(),
            ),
            ("GIT_AUTHOR_DATE".into(), date.into()),
        ];
        probe.fence.clone_from(&self.hook_fence.borrow().0);
        let ran = probe::run(probe);
        if let Ok(out) = &ran
            && let Some(report) = &out.fence
        {
            let mut held = self.hook_fence.borrow_mut();
            match &mut held.1 {
                Some(all) => all.absorb(report),
                None => held.1 = Some(report.clone()),
            }
        }
        match ran {
            Ok(out) if out.end.success() => HookRun::Passed,
            Ok(out) => {
                let mut how = out.end.describe();
                if matches!(out.end, probe::ProbeEnd::TimedOut(_)) {
                    how.push_str(" — raise --hook-timeout if it needs longer");
                }
                HookRun::Failed(if out.output.is_empty() {
                    format!("(no output; {how})")
                } else {
                    format!("{}\n({how})", out.output)
                })
            }
            Err(e) => HookRun::Failed(format!("could not run `{}`: {e}", path.display())),
        }
    }

    /// Runs a message hook (`prepare-commit-msg`, `commit-msg`) on `message`, written to
    /// `COMMIT_EDITMSG` where git puts it and where hooks such as commitlint expect it, and
    /// returns the message as the hook left it (the commit cleans it once, after the hooks, as
    /// git does: `message.rs`). A refusal is [`Error::CommitMessageRefused`].
    pub(super) fn message_hook(
        &self,
        dir: &Path,
        name: &str,
        extra: Option<&str>,
        message: &str,
        author: &Signature<'_>,
        timeout: Duration,
    ) -> Result<String> {
        if !hook_present(dir, name) {
            return Ok(message.to_string());
        }
        let path = self.repo.path().join("COMMIT_EDITMSG");
        std::fs::write(&path, message).map_err(|e| Error::io(&path, e))?;
        let mut args: Vec<OsString> = vec![path.clone().into()];
        args.extend(extra.map(OsString::from));
        if let HookRun::Failed(output) = self.run_hook(dir, name, &args, author, timeout) {
            return Err(Error::CommitMessageRefused {
                hook: name.to_string(),
                output,
            });
        }
        let edited = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        Ok(String::from_utf8_lossy(&edited).into_owned())
    }
}

/// True when `dir/name` is an executable file: what git counts as a hook.
pub(super) fn hook_present(dir: &Path, name: &str) -> bool {
    std::fs::metadata(dir.join(name))
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
