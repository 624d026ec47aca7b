//! Running the person's git hooks (`pre-commit`, `commit-msg`) the way git runs them.
//!
//! The one decision a reader must know: a hook is looked up in `core.hooksPath` when set
//! (a relative path is taken from the work tree top, as git does) and otherwise in the common
//! git folder's `hooks/` (shared by linked worktrees); only an executable file counts, so the
//! `*.sample` files and a hook without its execute bit are skipped, as git skips them. The hook
//! runs in the work tree top with `GIT_DIR` and `GIT_INDEX_FILE` set, stdin closed, and its
//! stdout and stderr captured together in order; a failure carries the output's tail.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::Repository;
use crate::error::{Error, Result};

/// How much of a failing hook's output is kept in the error.
const OUTPUT_TAIL: u64 = 4096;

impl Repository {
    /// The folder hooks are taken from.
    pub(super) fn hooks_dir(&self) -> PathBuf {
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

    /// Runs hook `name` from `dir` with `args` if it exists and is executable; true when it
    /// ran. A non-zero exit, a death by signal or a failure to start is
    /// [`Error::HookFailed`].
    pub(super) fn run_hook(&self, dir: &Path, name: &str, args: &[&OsStr]) -> Result<bool> {
        if !hook_present(dir, name) {
            return Ok(false);
        }
        let path = dir.join(name);
        let failed = |output: String| Error::HookFailed {
            hook: name.to_string(),
            output,
        };
        let mut log = tempfile::tempfile().map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let log_err = log.try_clone().map_err(|e| Error::io(&path, e))?;
        let log_out = log.try_clone().map_err(|e| Error::io(&path, e))?;
        let index_file = self.repo.path().join("index");
        let status = Command::new(&path)
            .args(args)
            .current_dir(&self.top)
            .env("GIT_DIR", self.repo.path())
            .env("GIT_INDEX_FILE", &index_file)
            // git sets this so a hook that opens an editor does not hang an unattended run.
            .env("GIT_EDITOR", ":")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_out))
            .stderr(Stdio::from(log_err))
            .status()
            .map_err(|e| failed(format!("could not run `{}`: {e}", path.display())))?;
        if status.success() {
            return Ok(true);
        }
        let tail = read_tail(&mut log, OUTPUT_TAIL);
        let how = match status.code() {
            Some(code) => format!("exit status {code}"),
            None => "killed by a signal".to_string(),
        };
        Err(failed(if tail.is_empty() {
            format!("(no output; {how})")
        } else {
            format!("{tail}\n({how})")
        }))
    }
}

/// True when `dir/name` is an executable file: what git counts as a hook.
pub(super) fn hook_present(dir: &Path, name: &str) -> bool {
    std::fs::metadata(dir.join(name))
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The last `max` bytes of `file` as text, starting at a line when one starts near the cut.
fn read_tail(file: &mut File, max: u64) -> String {
    let len = file.seek(SeekFrom::End(0)).unwrap_or(0);
    let start = len.saturating_sub(max);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = if start > 0 {
        match text.find('\n') {
            Some(nl) => &text[nl + 1..],
            None => &text[..],
        }
    } else {
        &text[..]
    };
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_tail_starts_at_a_line() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"first line\nsecond line\nthird\n").unwrap();
        assert_eq!(read_tail(&mut f, 1000), "first line\nsecond line\nthird");
        assert_eq!(read_tail(&mut f, 15), "third");
    }
}
