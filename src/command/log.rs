//! `kern log [-f]`: prints the run's output lines (`run.log` in the state folder: the same
//! lines as the plain output, written whatever the terminal did) and with `-f` follows them.
//!
//! The decision a reader must know: `-f` follows while a run holds the lock or a `kern watch`
//! watches the night (between a run that died and its restart no run holds it) and returns
//! once neither does and every line is printed, so `kern log -f` after `kern 10 30 --detach`
//! ends with the night. `-f` starts where the latest run's lines begin (`run.log.start`, marked by
//! each run), not at the first run's; plain `kern log` prints the whole file. A rotation (the
//! file replaced by a new one) is followed from the new file's start. Reads only.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::repository::Repository;
use crate::settings::Settings;
use crate::state::lock::RunLock;

/// How often `-f` looks for new lines.
const POLL: Duration = Duration::from_millis(200);

/// Runs `kern log`.
pub(crate) fn run(settings: &Settings, follow: bool) -> Result<()> {
    let repo = Repository::discover(&settings.cwd)?;
    let state_dir = crate::workspace::state_dir_of(settings, &repo)?;
    let path = state_dir.output_log();
    let lock = repo.run_lock_path();
    let watch = state_dir.watch_record();
    let host = nix::unistd::gethostname().map_or_else(
        |_| "unknown".to_string(),
        |h| h.to_string_lossy().into_owned(),
    );
    let running = || {
        RunLock::inspect(&lock).is_some_and(|(_, live)| live)
            || crate::state::watch::WatchRecord::load(&watch).is_some_and(|w| w.is_live(&host))
    };
    if !(path.exists() || follow && running()) {
        return Err(Error::Usage(format!(
            "`{}` does not exist yet: no run has written output here — start one with `kern` (or `kern --detach`)",
            path.display()
        )));
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // Following starts at the latest run; printing once prints everything.
    let start = if follow {
        crate::state::rotating::run_start(&path)
    } else {
        0
    };
    follow_file(&path, start, follow, &running, &mut out)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Error::Interrupted { signal: 13 },
            _ => Error::io(&path, e),
        })
        .or_else(|e| match e {
            // A reader that closed the pipe (`| head`) is not an error.
            Error::Interrupted { signal: 13 } => Ok(()),
            other => Err(other),
        })
}

/// Copies `path` to `out` from byte `start` (of the file there now; a file that replaces it
/// is copied from its beginning); with `follow`, keeps copying new bytes while `running()` is
/// true, then copies what is left and returns.
fn follow_file(
    path: &Path,
    start: u64,
    follow: bool,
    running: &dyn Fn() -> bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut file: Option<(File, u64)> = None;
    let mut offset = 0u64;
    let mut first = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Whether a run holds the lock, asked before reading: a run that ends after this
        // still has its last lines read below, and the next round returns.
        let live = follow && running();
        if let Ok(meta) = std::fs::metadata(path) {
            let replaced = file.as_ref().is_none_or(|(_, ino)| *ino != meta.ino());
            if replaced || meta.len() < offset {
                file = Some((crate::private_file::open(path)?, meta.ino()));
                offset = if first && start <= meta.len() {
                    start
                } else {
                    0
                };
            }
            first = false;
        }
        if let Some((f, _)) = file.as_mut() {
            f.seek(SeekFrom::Start(offset))?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n])?;
                offset += n as u64;
            }
            out.flush()?;
        }
        if !live {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn follows_growth_and_rotation_until_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        std::fs::write(&path, "one\n").unwrap();
        let rounds = Cell::new(0);
        let running = || {
            rounds.set(rounds.get() + 1);
            match rounds.get() {
                2 => {
                    std::fs::write(&path, "one\ntwo\n").unwrap();
                    true
                }
                3 => {
                    std::fs::rename(&path, dir.path().join("run.log.1")).unwrap();
                    std::fs::write(&path, "three\n").unwrap();
                    true
                }
                4 => {
                    std::fs::write(&path, "three\nfour\n").unwrap();
                    false
                }
                _ => true,
            }
        };
        let mut out = Vec::new();
        follow_file(&path, 0, true, &running, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "one\ntwo\nthree\nfour\n");
        let mut out = Vec::new();
        follow_file(&path, 0, false, &|| true, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "three\nfour\n");
        let mut out = Vec::new();
        follow_file(&path, 6, true, &|| false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "four\n",
            "from the run's start"
        );
        let mut out = Vec::new();
        follow_file(&path, 99, true, &|| false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "three\nfour\n",
            "a start past the end"
        );
    }
}
