//! The stage records an iteration leaves behind, kept readable after it ends: the last
//! iteration's in `<branch folder>/last/`, and every iteration's records and prompts in
//! `<branch folder>/runs/<run-id>/<NN>-<task-slug>/`, within a size cap.
//!
//! Decisions a reader must know:
//! - An iteration's files are *moved* out of the branch folder when it ends (renamed into a
//!   fresh folder that then replaces `last/`), never left where they were: the branch folder's
//!   own `stageN.*` files are what a run resumes from, and resume reads nothing else, so a kept
//!   record can never be taken for the current task's state.
//! - `runs/` keeps copies of the `.json` records and the prompts only (the `stageN.jsonl`
//!   streams and stderr can be large; `last/` has them for the last iteration). When `runs/`
//!   holds more than [`RUNS_CAP`] bytes, the oldest runs' folders go (by modification time),
//!   never the current run's. Failing to copy into `runs/` never stops a run; failing to move
//!   the files out of the branch folder does (as failing to remove them did).
//! - A parallel task's iteration (`jobs/<slug>/`) keeps its records in the branch folder's
//!   `last/` and `runs/` too, since its own folder goes once its work is integrated.
//! - The folders are `0700` (made through [`privacy::claim`]) and the files `0600`: moved
//!   files keep their mode, copies are written through `private_file`.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::StateDir;
use super::privacy::{self, Claim};
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::stage::record::StageRecord;

/// The most `runs/` may hold before the oldest runs are removed: 50 MiB.
pub(crate) const RUNS_CAP: u64 = 50 * 1024 * 1024;

/// `last/`: the stage files of the last iteration that ended.
pub(crate) const LAST: &str = "last";

/// `runs/`: every iteration's records, per run and task.
pub(crate) const RUNS: &str = "runs";

/// Moves the iteration files of `state_dir` that exist into `last/` of its branch folder
/// (replacing the one before) and copies its records and prompts into
/// `runs/<run_id>/<NN>-<task-slug>/`, then trims `runs/` to [`RUNS_CAP`]. Nothing to move:
/// nothing changes (an iteration that ran no stage leaves `last/` as it was).
pub(crate) fn retire(state_dir: &StateDir, run_id: &str) -> Result<()> {
    let found: Vec<PathBuf> = state_dir
        .iteration_files()
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    let home = state_dir.records_home();
    let fresh = home.join(format!(".last-{}", unique()));
    privacy::claim(&fresh, Claim::Own)?;
    for path in &found {
        if let Some(name) = path.file_name() {
            fs::rename(path, fresh.join(name)).map_err(|e| Error::io(path, e))?;
        }
    }
    // The copy is for reading later: a failure to make it never stops the run.
    if let Err(e) = archive(&fresh, &home.join(RUNS), run_id) {
        tracing::debug!(error = %e, "could not keep the iteration's records in runs/");
    }
    let last = home.join(LAST);
    let old = home.join(format!(".last-old-{}", unique()));
    match fs::rename(&last, &old) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&last, e)),
    }
    fs::rename(&fresh, &last).map_err(|e| Error::io(&last, e))?;
    let _ = fs::remove_dir_all(&old);
    trim(&home.join(RUNS), run_id, RUNS_CAP);
    Ok(())
}

/// A name part no other iteration ending at the same time uses.
fn unique() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// True for the files `runs/` keeps: the stage records and the prompts.
fn kept_in_runs(name: &str) -> bool {
    let stage = name.strip_prefix("stage").unwrap_or("");
    let kind = stage.trim_start_matches(|c: char| c.is_ascii_digit());
    let kind = kind.strip_prefix("-tests").unwrap_or(kind);
    (!stage.is_empty() && [".json", ".prompt.md"].contains(&kind)) || name == "refused-message.json"
}

/// Copies the records and prompts of `from` into `runs/<run_id>/<NN>-<slug>/`.
fn archive(from: &Path, runs: &Path, run_id: &str) -> Result<()> {
    let title = Stage::ALL
        .iter()
        .find_map(|s| StageRecord::load(&from.join(format!("{}.json", s.file_stem()))))
        .map(|r| r.kern.task.title);
    let slug = crate::text::slug(title.as_deref().unwrap_or("task"));
    privacy::claim(runs, Claim::Own)?;
    let run = runs.join(run_id);
    privacy::claim(&run, Claim::Own)?;
    let taken = fs::read_dir(&run).map_err(|e| Error::io(&run, e))?.count();
    let to = run.join(format!("{:02}-{slug}", taken + 1));
    privacy::claim(&to, Claim::Own)?;
    let mut names: Vec<String> = fs::read_dir(from)
        .map_err(|e| Error::io(from, e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| kept_in_runs(n))
        .collect();
    names.sort();
    for name in names {
        let bytes = crate::private_file::read(&from.join(&name))
            .map_err(|e| Error::io(from.join(&name), e))?;
        let path = to.join(&name);
        crate::private_file::create(&path)
            .and_then(|mut f| f.write_all(&bytes))
            .map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

/// Removes the oldest runs' folders of `runs` (by modification time) until what is left holds
/// at most `cap` bytes; the folder of `current` stays whatever its size. Best effort.
fn trim(runs: &Path, current: &str, cap: u64) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let mut folders: Vec<(std::time::SystemTime, PathBuf, u64)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let meta = fs::symlink_metadata(&path).ok()?;
            if !meta.is_dir() {
                return None;
            }
            let bytes = size(&path);
            Some((meta.modified().ok()?, path, bytes))
        })
        .collect();
    let mut total: u64 = folders.iter().map(|(_, _, s)| s).sum();
    folders.sort();
    for (_, path, bytes) in folders {
        if total <= cap {
            break;
        }
        if path.file_name().is_some_and(|n| n == current) {
            continue;
        }
        if fs::remove_dir_all(&path).is_ok() {
            total = total.saturating_sub(bytes);
        }
    }
}

/// The bytes of the files below `path` (symlinks not followed).
fn size(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path).map_or(0, |entries| {
        entries
            .filter_map(std::result::Result::ok)
            .map(|e| size(&e.path()))
            .sum()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn state() -> (tempfile::TempDir, StateDir) {
        let root = tempfile::tempdir().unwrap();
        let sd = StateDir::locate(root.path(), Path::new("/a/app"), "main").unwrap();
        sd.create().unwrap();
        (root, sd)
    }

    fn write(path: &Path, text: &str) {
        crate::private_file::create(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    #[test]
    fn files_kept_in_runs() {
        let cases = [
            ("stage1.json", true),
            ("stage2.prompt.md", true),
            ("stage2-tests.json", true),
            ("stage2-tests.prompt.md", true),
            ("stage2-tests.jsonl", false),
            ("refused-message.json", true),
            ("stage2.jsonl", false),
            ("stage2.jsonl.1", false),
            ("stage3.stderr", false),
            ("check.log", false),
        ];
        for (name, kept) in cases {
            assert_eq!(kept_in_runs(name), kept, "{name}");
        }
    }

    #[test]
    fn an_iteration_moves_into_last_and_is_copied_into_runs() {
        let (_root, sd) = state();
        for round in 1..=2 {
            write(
                &sd.stage_record(Stage::Research),
                &format!("{{\"round\": {round}}}"),
            );
            write(&sd.stage_stream(Stage::Research), "{}\n");
            write(&sd.stage_prompt(Stage::Research), "prompt");
            write(&sd.check_log(), "ok");
            retire(&sd, "run-1").unwrap();
            assert!(!sd.stage_record(Stage::Research).exists());
            assert!(!sd.check_log().exists());
        }
        let last = sd.dir().join(LAST);
        let mut names: Vec<String> = fs::read_dir(&last)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "check.log",
                "stage1.json",
                "stage1.jsonl",
                "stage1.prompt.md"
            ]
        );
        assert_eq!(
            fs::read_to_string(last.join("stage1.json")).unwrap(),
            "{\"round\": 2}"
        );
        assert_eq!(mode(&last), 0o700);
        assert_eq!(mode(&last.join("stage1.json")), 0o600);
        let run = sd.dir().join(RUNS).join("run-1");
        for task in ["01-task", "02-task"] {
            let mut names: Vec<String> = fs::read_dir(run.join(task))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["stage1.json", "stage1.prompt.md"], "{task}");
            assert_eq!(mode(&run.join(task)), 0o700);
            assert_eq!(mode(&run.join(task).join("stage1.json")), 0o600);
        }
        // Nothing to move: last/ stays as it was.
        retire(&sd, "run-1").unwrap();
        assert!(last.join("stage1.json").exists());
        assert_eq!(fs::read_dir(&run).unwrap().count(), 2);
    }

    #[test]
    fn a_parallel_tasks_records_go_to_the_branch_folder() {
        let (_root, sd) = state();
        let job = sd.job("say-hello");
        fs::create_dir_all(job.dir()).unwrap();
        write(&job.stage_record(Stage::Implement), "{}");
        retire(&job, "run-1").unwrap();
        assert!(sd.dir().join("last/stage2.json").exists());
        assert!(sd.dir().join("runs/run-1/01-task/stage2.json").exists());
    }

    #[test]
    fn runs_beyond_the_cap_go_oldest_first_but_never_the_current_one() {
        let root = tempfile::tempdir().unwrap();
        let runs = root.path();
        let epoch = std::time::SystemTime::UNIX_EPOCH;
        for (name, bytes, age) in [("a", 40, 1), ("b", 40, 2), ("c", 40, 3)] {
            fs::create_dir(runs.join(name)).unwrap();
            fs::write(runs.join(name).join("f"), vec![b'x'; bytes]).unwrap();
            let when = epoch + std::time::Duration::from_secs(1_000_000 * age);
            fs::File::open(runs.join(name))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        trim(runs, "a", 80);
        assert!(runs.join("a").exists(), "the current run stays");
        assert!(!runs.join("b").exists(), "the oldest other run goes");
        assert!(runs.join("c").exists());
        trim(runs, "c", 10);
        assert!(!runs.join("a").exists());
        assert!(
            runs.join("c").exists(),
            "the current run stays over the cap"
        );
    }
}
