//! Bounded logs: `run.jsonl` and `run.log` grow by appending and rotate once they reach
//! [`ROTATE_BYTES`] — the full file becomes `<name>.1` (replacing an older one) and a new file
//! starts. So each takes at most twice that on disk however long kern runs there.
//!
//! The decision a reader must know: every append opens the file (`0600`, never through a
//! symlink: `private_file`), checks its size, and writes the whole line with one `write` on a
//! file opened for appending, so a line is never split between two files and a crash leaves
//! whole lines. Readers that look back in time (`kern
//! report --since`) read the rotated file first, then the current one ([`read_with_rotated`]).
//! Each run marks where its lines begin in `run.log` (`run.log.start`: [`mark_start`]), so
//! `kern log -f` follows the current run without replaying the earlier ones.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The size at which `run.jsonl` and `run.log` rotate: 8 MiB (tens of thousands of lines,
/// hundreds of nights).
pub(crate) const ROTATE_BYTES: u64 = 8 * 1024 * 1024;

/// The rotated file of `path`: `run.jsonl` → `run.jsonl.1`.
pub(crate) fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// `<log>.start`: where the latest run's lines begin in `log` (`run.log.start`).
pub(crate) fn start_mark(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".start");
    PathBuf::from(name)
}

/// Records that a run's lines begin at the end of `log` as it is now: its inode and length
/// (nothing yet: where the next file begins), so `kern log -f` starts at this run instead of
/// replaying the earlier ones. Best effort.
pub(crate) fn mark_start(log: &Path) {
    use std::os::unix::fs::MetadataExt;
    let (ino, len) = fs::symlink_metadata(log).map_or((0, 0), |m| (m.ino(), m.len()));
    let _ =
        crate::atomic_file::write_private(&start_mark(log), format!("{ino} {len}\n").as_bytes());
}

/// Where the latest run's lines begin in `log`, when the mark is of the file there now (a
/// rotation since makes it the start of the file): the byte offset.
pub(crate) fn run_start(log: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(log) else {
        return 0;
    };
    let mark = crate::private_file::read_to_string(&start_mark(log)).unwrap_or_default();
    let mut parts = mark.split_whitespace().map(str::parse::<u64>);
    match (parts.next(), parts.next()) {
        (Some(Ok(ino)), Some(Ok(len))) if ino == meta.ino() && len <= meta.len() => len,
        _ => 0,
    }
}

/// Appends `bytes` (one or more whole lines) to `path`, rotating it first when they would take
/// it past `limit`. A file that is empty is never rotated, so a line larger than `limit` is
/// still written.
pub(crate) fn append(path: &Path, bytes: &[u8], limit: u64) -> io::Result<()> {
    let open = || crate::private_file::append(path);
    let mut file = open()?;
    let len = file.metadata()?.len();
    if len > 0 && len + bytes.len() as u64 > limit {
        drop(file);
        fs::rename(path, rotated(path))?;
        file = open()?;
    }
    file.write_all(bytes)
}

/// The rotated file's text followed by the current file's: everything kept, oldest first.
/// Missing files read as empty.
pub(crate) fn read_with_rotated(path: &Path) -> io::Result<String> {
    let mut text = read_or_empty(&rotated(path))?;
    text.push_str(&read_or_empty(path)?);
    Ok(text)
}

fn read_or_empty(path: &Path) -> io::Result<String> {
    match crate::private_file::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// A `Write` that appends each `write` call as a unit to a rotating file; for the reporter's
/// `run.log` (it hands over one whole line per call). Errors are returned, never panicked on.
#[derive(Debug, Clone)]
pub(crate) struct RotatingFile {
    path: PathBuf,
    limit: u64,
}

impl RotatingFile {
    /// A rotating file at `path` with the default limit.
    pub(crate) fn new(path: PathBuf) -> RotatingFile {
        RotatingFile {
            path,
            limit: ROTATE_BYTES,
        }
    }

    #[cfg(test)]
    /// The same with another limit (tests).
    pub(crate) fn with_limit(path: PathBuf, limit: u64) -> RotatingFile {
        RotatingFile { path, limit }
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        append(&self.path, buf, self.limit)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_limit_and_reads_back_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        let mut file = RotatingFile::with_limit(path.clone(), 10);
        // (line, current file after it, rotated file after it)
        let table = [
            ("aaaa\n", "aaaa\n", None),
            ("bbbb\n", "aaaa\nbbbb\n", None),
            ("cccc\n", "cccc\n", Some("aaaa\nbbbb\n")),
            (
                "a line longer than the limit\n",
                "a line longer than the limit\n",
                Some("cccc\n"),
            ),
            ("d\n", "d\n", Some("a line longer than the limit\n")),
        ];
        for (line, current, old) in table {
            file.write_all(line.as_bytes()).unwrap();
            assert_eq!(fs::read_to_string(&path).unwrap(), current, "{line}");
            assert_eq!(
                fs::read_to_string(rotated(&path)).ok().as_deref(),
                old,
                "{line}"
            );
        }
        assert_eq!(
            read_with_rotated(&path).unwrap(),
            "a line longer than the limit\nd\n"
        );
        assert_eq!(read_with_rotated(&dir.path().join("none")).unwrap(), "");
        assert_eq!(
            rotated(Path::new("/s/run.jsonl")),
            Path::new("/s/run.jsonl.1")
        );
    }
}
