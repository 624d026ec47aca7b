//! SPEC.md on disk: loading it, and writing kern's edits without ever losing a hand edit.
//!
//! The one decision a reader must know: every write starts from the file as it is *now*, not
//! from what kern read earlier. [`SpecFile::apply`] re-reads the file, re-locates the task by
//! identity and applies the edits to the fresh text; it writes through
//! [`crate::atomic_file`] (temp file, fsync, rename, permissions kept) and closes the races
//! around that rename:
//!
//! 1. Right before the rename it checks that the path still names the file it read and that
//!    the bytes are unchanged; otherwise it drops the temp file and starts over.
//! 2. It keeps the replaced file open. A writer that opened SPEC.md before the rename (an
//!    `echo … >> SPEC.md` in flight) writes into that old, now unlinked file. After the rename
//!    kern waits until no process has the old file open for writing — it asks the kernel for a
//!    read lease (`F_SETLEASE`), which is refused exactly while a writer holds the file — and
//!    then reads it again. Bytes that arrived there are folded in: appended bytes are joined to
//!    the fresh text, any other change is taken as the person's new version, and kern's edits
//!    are applied once more on top.
//!
//! Edits apply to the file as it is now, whatever rewrote it: a formatter that reformatted
//! SPEC.md inside kern's commit (a pre-commit hook running prettier) is the person's tooling, so
//! kern re-locates the task by identity in the formatted text (formatting-insensitively when a
//! formatter re-spelled the title's emphasis or escapes, see [`Document::find`]) and its notes,
//! whatever shape the formatter left them in, are read and extended as kern's.
//!
//! Every message names the file as the caller shows it ([`SpecFile::load_as`]), so a
//! diagnostic reads `SPEC.md:3:1: …` wherever it comes from.
//!
//! Residual windows (documented, not closed): a *whole-file replacement* (an editor saving by
//! rename) landing in the microseconds between the final re-check and kern's own rename is
//! overwritten; and where leases are unavailable (a file owned by another user without
//! `CAP_LEASE`, some network file systems, a hard-linked SPEC.md) or a writer keeps the old file
//! open longer than two seconds, kern reads the old file once at once and again at the start of
//! the next write, so only bytes written to it after kern's last look are lost.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::append::{NewTask, append};
use super::diagnostic::{Diagnostic, Severity};
use super::document::{Document, Quoted, TaskIdentity, check_text};
use super::edit::{Edit, EditError, apply_edits};
use crate::atomic_file;
use crate::error::{Error, Result};

/// How often a write starts over because the file changed under it before giving up.
const MAX_ROUNDS: usize = 64;

/// How long kern waits for writers of the replaced file to close it.
const WRITER_WAIT: Duration = Duration::from_secs(2);

/// SPEC.md as kern last read and wrote it.
#[derive(Debug)]
pub struct SpecFile {
    path: PathBuf,
    display: String,
    last_text: String,
    /// `last_text` parsed, kept so that an unchanged file is never parsed twice.
    parsed: Option<Document>,
    lingering: Vec<Lingering>,
}

/// What a write did.
#[derive(Debug, Clone)]
pub struct Written {
    /// The document kern wrote.
    pub document: Document,
    /// True when kern rewrote the task's notes block from an older or a formatter's shape in
    /// its own layout (every note's text kept) before adding its note: worth telling the
    /// person once.
    pub rewrote_notes: bool,
    /// When someone else wrote the file since kern last read or wrote it: what kern had seen,
    /// and what it found before its write (their change is kept; this names it).
    pub found_change: Option<(Document, Document)>,
}

/// A replaced file that a writer still held open when kern stopped waiting: checked again at
/// the next write for bytes appended after `seen`.
#[derive(Debug)]
struct Lingering {
    file: File,
    seen: u64,
}

impl SpecFile {
    /// Reads and parses SPEC.md, naming it by its path in messages. See [`SpecFile::load_as`].
    pub fn load(path: &Path) -> Result<(SpecFile, Document)> {
        SpecFile::load_as(path, &path.display().to_string())
    }

    /// Reads and parses SPEC.md; `display` is how every message names the file (as given,
    /// `SPEC.md`). A missing file is [`Error::SpecMissing`]; a file that is not UTF-8 text is
    /// [`Error::SpecRefused`] with the diagnostic. The document is not validated here.
    pub fn load_as(path: &Path, display: &str) -> Result<(SpecFile, Document)> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::SpecMissing {
                    path: PathBuf::from(display),
                });
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let text = decode(display, &bytes)?;
        let doc = Document::parse(text);
        let file = SpecFile {
            path: path.to_path_buf(),
            display: display.to_string(),
            last_text: text.to_string(),
            parsed: Some(doc.clone()),
            lingering: Vec::new(),
        };
        Ok((file, doc))
    }

    /// Reads the file again (after the agent ran, or at the start of an iteration).
    /// The file is parsed only when its text changed since kern last read or wrote it.
    pub fn reload(&mut self) -> Result<Document> {
        let (_, text) = read_current(&self.path, &self.display)?;
        let doc = self.parse(&text);
        self.last_text = text;
        self.parsed = Some(doc.clone());
        Ok(doc)
    }

    /// [`SpecFile::reload`], also handing back the document kern saw before when the text
    /// changed since (someone else wrote the file): `None` when it did not.
    pub fn reload_with_previous(&mut self) -> Result<(Document, Option<Document>)> {
        let (_, text) = read_current(&self.path, &self.display)?;
        if text == self.last_text
            && let Some(doc) = &self.parsed
        {
            return Ok((doc.clone(), None));
        }
        let previous = self
            .parsed
            .take()
            .unwrap_or_else(|| Document::parse(&self.last_text));
        let doc = Document::parse(&text);
        self.last_text = text;
        self.parsed = Some(doc.clone());
        Ok((doc, Some(previous)))
    }

    /// `text` parsed: the kept document when it is the text kern last saw, else a new parse.
    fn parse(&self, text: &str) -> Document {
        match &self.parsed {
            Some(doc) if text == self.last_text => doc.clone(),
            _ => Document::parse(text),
        }
    }

    /// The path kern reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The text kern last read or wrote.
    pub fn last_text(&self) -> &str {
        &self.last_text
    }

    /// The path as messages show it.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Applies `edits` in order to the task `task` in the file as it is now, writes the result
    /// atomically, and returns the document kern wrote. Hand edits made at any moment survive
    /// (see the module doc for the exact guarantee). On any error nothing is written.
    pub fn apply(&mut self, task: &TaskIdentity, edits: &[Edit]) -> Result<Document> {
        self.apply_reporting(task, edits).map(|w| w.document)
    }

    /// [`SpecFile::apply`], also saying whether a notes block was rewritten in kern's layout.
    /// An edit that cannot be written, as the error the person sees: a verification failure is
    /// [`Error::SpecRefused`] (exit 2) naming the task's line and what to change.
    pub fn apply_reporting(&mut self, task: &TaskIdentity, edits: &[Edit]) -> Result<Written> {
        let display = self.display.clone();
        let (written, ()) = self.write_with(|base, base_doc| {
            if edits.is_empty() {
                return Ok((base.to_string(), base_doc, false, ()));
            }
            let applied =
                apply_edits(&base_doc, task, edits).map_err(|e| edit_error(&display, e, edits))?;
            Ok((applied.text, applied.document, applied.rewrote_notes, ()))
        })?;
        Ok(written)
    }

    /// Appends `tasks` at the end of the file as it is now (`kern import`), leaving out those
    /// whose issue a task of the file names by then (the person, or another import, added it
    /// meanwhile); returns the document written and the tasks appended. A file whose end cannot
    /// take them as tasks is [`Error::SpecRefused`] (exit 2) naming the line where the block
    /// that would swallow them starts; nothing is written.
    pub(crate) fn append(&mut self, tasks: &[NewTask]) -> Result<(Document, Vec<NewTask>)> {
        let display = self.display.clone();
        let (written, added) = self.write_with(|base, base_doc| {
            let fresh: Vec<NewTask> = tasks
                .iter()
                .filter(|t| {
                    !base_doc
                        .tasks()
                        .iter()
                        .any(|d| d.issue().is_some_and(|i| i.same(&t.issue)))
                })
                .cloned()
                .collect();
            if fresh.is_empty() {
                return Ok((base.to_string(), base_doc, false, fresh));
            }
            let (text, doc) =
                append(&base_doc, &fresh).map_err(|diagnostic| Error::SpecRefused {
                    file: display.clone(),
                    diagnostics: vec![diagnostic],
                })?;
            Ok((text, doc, false, fresh))
        })?;
        Ok((written.document, added))
    }

    /// Writes what `change` makes of the file as it is now (its text and parse: the new text,
    /// its parse, whether a notes block was rewritten, and what the caller wants back),
    /// atomically, never losing a write someone else makes meanwhile (see the module docs).
    fn write_with<T>(
        &mut self,
        change: impl Fn(&str, Document) -> Result<(String, Document, bool, T)>,
    ) -> Result<(Written, T)> {
        // (text to edit, the file content it was derived from): set when the file moved on
        // after kern built its text, so that the next round can carry that text forward.
        let mut carry: Option<(String, String)> = None;
        let mut found_change = None;
        for _ in 0..MAX_ROUNDS {
            let (held, disk) = read_current(&self.path, &self.display)?;
            if found_change.is_none() && disk != self.last_text {
                found_change = Some((self.parse(&self.last_text), Document::parse(&disk)));
            }
            let mut base = match carry.take() {
                Some((base, was)) => match disk.strip_prefix(was.as_str()) {
                    Some(tail) => base + tail,
                    None => {
                        tracing::warn!(path = %self.path.display(), "SPEC.md replaced while kern folded in a concurrent write");
                        disk.clone()
                    }
                },
                None => disk.clone(),
            };
            for late in self.take_lingering() {
                base.push_str(&late);
            }
            if base != self.last_text {
                tracing::debug!(path = %self.path.display(), "SPEC.md changed since kern read it; re-applying on the fresh text");
            }
            let base_doc = self.parse(&base);
            let (text, doc, rewrote_notes, back) = change(&base, base_doc)?;
            let written = |document: Document| Written {
                document,
                rewrote_notes,
                found_change: found_change.clone(),
            };
            if text == disk {
                self.last_text = text;
                self.parsed = Some(doc.clone());
                return Ok((written(doc), back));
            }
            let prepared = atomic_file::prepare(&self.path, text.as_bytes())?;
            if !still_same(&self.path, &held, &disk)? {
                drop(prepared);
                carry = Some((base, disk));
                continue;
            }
            prepared.commit()?;
            let quiet = writers_gone(&held, WRITER_WAIT);
            let old = read_all(&held).map_err(|e| Error::io(&self.path, e))?;
            let unchanged = old == disk.as_bytes();
            if !quiet {
                // A writer still holds the replaced file: look again at the next write.
                self.lingering.push(Lingering {
                    file: held,
                    seen: old.len() as u64,
                });
            }
            if unchanged {
                self.last_text = text;
                self.parsed = Some(doc.clone());
                return Ok((written(doc), back));
            }
            // Something reached the old file after the re-check: fold it in and go again.
            let old = String::from_utf8_lossy(&old).into_owned();
            let folded = match old.strip_prefix(disk.as_str()) {
                Some(appended) => base + appended,
                None => old,
            };
            carry = Some((folded, text));
        }
        Err(Error::SpecEdit {
            path: PathBuf::from(&self.display),
            message: "the file kept changing while kern wrote it — try again".to_string(),
        })
    }
}

/// An edit that cannot be written, as the error the person sees: a verification failure is the
/// file's markdown around the task, which the person can change (exit 2).
fn edit_error(display: &str, e: EditError, edits: &[Edit]) -> Error {
    match e {
            EditError::Verification {
                task, line, column, ..
            } => Error::SpecRefused {
                file: display.to_string(),
                diagnostics: vec![Diagnostic {
                    severity: Severity::Error,
                    line,
                    column,
                    message: format!(
                        "kern cannot add its {} to task {} without changing how the lines around it read",
                        edits
                            .iter()
                            .map(Edit::describe)
                            .collect::<Vec<_>>()
                            .join(" and "),
                        Quoted(&task)
                    ),
                    fix: "separate the task's own text (a table, a quote, a code block) from its first line with a blank line, close any code block left open (```), then run kern again".to_string(),
                }],
            },
            other => Error::SpecEdit {
                path: PathBuf::from(display),
                message: other.to_string(),
            },
        }
}

impl SpecFile {
    /// Puts `text` back (kern's own copy, after an agent corrupted the file).
    pub fn restore(&mut self, text: &str) -> Result<()> {
        atomic_file::write(&self.path, text.as_bytes())?;
        if text != self.last_text {
            self.parsed = None;
        }
        self.last_text = text.to_string();
        Ok(())
    }

    /// Bytes appended to replaced files since kern last looked; forgets files nobody writes.
    fn take_lingering(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.lingering.retain_mut(|l| {
            let mut extra = Vec::new();
            let mut at = l.seen;
            let mut buf = [0u8; 8192];
            while let Ok(n) = l.file.read_at(&mut buf, at) {
                if n == 0 {
                    break;
                }
                extra.extend_from_slice(&buf[..n]);
                at += n as u64;
            }
            l.seen = at;
            if !extra.is_empty() {
                out.push(String::from_utf8_lossy(&extra).into_owned());
            }
            !writers_gone(&l.file, Duration::ZERO)
        });
        out
    }
}

/// Reads of SPEC.md from disk in this process, for `-v`'s per-iteration count.
static READS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl SpecFile {
    /// How often this process has read SPEC.md from disk (loads, reloads and the re-reads of
    /// every write): `-v` logs it per iteration, and a test holds it down.
    pub fn read_count() -> u64 {
        READS.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Opens SPEC.md read-only and reads it as text.
fn read_current(path: &Path, display: &str) -> Result<(File, String)> {
    READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::SpecMissing {
            path: PathBuf::from(display),
        },
        _ => Error::io(path, e),
    })?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    let text = decode(display, &bytes)?.to_string();
    Ok((file, text))
}

fn decode<'b>(display: &str, bytes: &'b [u8]) -> Result<&'b str> {
    check_text(bytes).map_err(|d| Error::SpecRefused {
        file: display.to_string(),
        diagnostics: vec![d],
    })
}

/// True when `path` still names the file `held` and it still holds exactly `disk`.
fn still_same(path: &Path, held: &File, disk: &str) -> Result<bool> {
    let now = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(path, e)),
    };
    let then = held.metadata().map_err(|e| Error::io(path, e))?;
    if (now.dev(), now.ino()) != (then.dev(), then.ino()) {
        return Ok(false);
    }
    Ok(read_all(held).map_err(|e| Error::io(path, e))? == disk.as_bytes())
}

fn read_all(file: &File) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = file.read_at(&mut buf, out.len() as u64)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Waits (up to `wait`) until no process holds `file` open for writing. False when that cannot
/// be known (leases unavailable, the file still linked elsewhere) or the wait ran out.
fn writers_gone(file: &File, wait: Duration) -> bool {
    use nix::libc;
    // With the file still linked somewhere, a new opener could break the lease, and the lease
    // break signal (SIGIO) would end kern: only unlinked files are asked about.
    match file.metadata() {
        Ok(m) if m.nlink() == 0 => {}
        _ => return false,
    }
    let fd = file.as_raw_fd();
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: F_SETLEASE takes an integer argument and touches no memory of ours; `fd`
        // belongs to `file`, which outlives the call.
        let taken = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0;
        if taken {
            // SAFETY: as above; releasing the lease kern just took.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return true;
        }
        let busy = io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
        if !busy || Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TaskState;
    use std::io::Write;

    #[test]
    fn load_reports_missing_and_binary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        let err = SpecFile::load(&path).unwrap_err();
        assert!(matches!(err, Error::SpecMissing { .. }), "{err:?}");
        std::fs::write(&path, b"- [ ] a\n\xfe\n").unwrap();
        let err = SpecFile::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:2:1: not valid UTF-8 (byte 0xfe) — save the file as UTF-8",
                path.display()
            )
        );
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn apply_re_locates_the_task_in_a_hand_edited_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n- [ ] b\n").unwrap();
        let (mut spec, doc) = SpecFile::load(&path).unwrap();
        let id = doc.identity(1);
        std::fs::write(&path, "# New heading\n\n- [ ] new\n- [ ] a\n- [ ] b\n").unwrap();
        let doc = spec
            .apply(
                &id,
                &[
                    Edit::SetState(TaskState::InProgress),
                    Edit::AddAttempt("x".into()),
                ],
            )
            .unwrap();
        let expected = "# New heading\n\n- [ ] new\n- [ ] a\n- [~] b\n  > **Attempt 1:** x\n";
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
        assert_eq!(doc.text(), expected);
        assert_eq!(spec.last_text(), expected);
    }

    #[test]
    fn failed_edit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n").unwrap();
        let (mut spec, doc) = SpecFile::load(&path).unwrap();
        let id = doc.identity(0);
        std::fs::write(&path, "- [ ] renamed\n").unwrap();
        let err = spec
            .apply(&id, &[Edit::SetState(TaskState::Done)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "`{}`: task `a` is no longer in the file — was it renamed or removed by hand?",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "- [ ] renamed\n");
    }

    #[test]
    fn an_edit_that_would_change_the_markdown_around_it_is_exit_2_with_the_location() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        let text = "# T\n\n- [ ] a\n  ```\n  code\n";
        std::fs::write(&path, text).unwrap();
        let (mut spec, doc) = SpecFile::load_as(&path, "SPEC.md").unwrap();
        let err = spec
            .apply(&doc.identity(0), &[Edit::InsertSubtasks(vec!["s".into()])])
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            err.to_string(),
            "SPEC.md:3:3: kern cannot add its subtasks to task `a` without changing how the lines around it read — separate the task's own text (a table, a quote, a code block) from its first line with a blank line, close any code block left open (```), then run kern again"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn bytes_appended_to_the_replaced_file_are_folded_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n").unwrap();
        let (mut spec, doc) = SpecFile::load(&path).unwrap();
        let id = doc.identity(0);
        // A writer that opened the file before kern's rename and writes after it.
        let mut writer = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let appender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            writer.write_all(b"- [ ] late\n").unwrap();
        });
        spec.apply(&id, &[Edit::SetState(TaskState::Done)]).unwrap();
        appender.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "- [x] a\n- [ ] late\n"
        );
    }

    #[test]
    fn restore_puts_kerns_copy_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n").unwrap();
        let (mut spec, _) = SpecFile::load(&path).unwrap();
        std::fs::write(&path, "garbage").unwrap();
        spec.restore("- [ ] a\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "- [ ] a\n");
        assert_eq!(spec.path(), path.as_path());
    }
}
