//! Every path under kern's state folder, and the project id that scopes it.
//!
//! Layout (DESIGN.md section 3): `<root>/<project-id>/<branch>/stageN.{json,jsonl,stderr,
//! prompt.md}` (the tests step of a task tested first: `stage2-tests.*`), `check.log`,
//! `red.log` and `green.log` (the current iteration's, moved into `last/` and copied into
//! `runs/<run-id>/<NN>-<task>/` when it ends: `records.rs`), `run.jsonl`, `run.log`. The root is `$KERN_STATE_DIR`, else the
//! user's own state folder that survives a reboot (a night's `run.jsonl` is what `kern report`
//! reads the morning after): `$XDG_STATE_HOME/kern`, else `~/.local/state/kern` (on macOS
//! `~/Library/Application Support/kern`). Versions before put it under
//! `${TMPDIR:-/tmp}/claude/kern`, where anyone could read it; nothing there is moved or read
//! ([`StateDir::old_root`] is only named, by `doctor`). The run lock is not here but in the
//! work tree's git dir (see `lock.rs`), so it holds whatever the state root is. The branch
//! folder is the branch name escaped (`/` as `%2F`), and `HEAD` for a detached HEAD.
//!
//! The folders are the user's alone (`privacy.rs`): [`StateDir::locate`] checks the root, the
//! project and the branch folders that exist and refuses any another user could write in, so
//! every record kern reads back comes from a folder that passed; [`StateDir::create`] makes
//! the missing ones `0700`. Files in them are `0600`, written through `private_file` and
//! `atomic_file::write_private`.
//!
//! The project id is the basename of the work tree's top folder. Two different repositories
//! with the same basename must not share a folder: the project folder records its owner's path
//! in `.owner`, and a second repository gets `<basename>-<8 hex of a hash of its path>`.
//! [`StateDir::locate`] only reads (a dry run must not write); [`StateDir::create`] claims.

pub(crate) mod journal;
pub(crate) mod lock;
pub(crate) mod privacy;
pub(crate) mod records;
pub(crate) mod resume;
pub(crate) mod rotating;
pub(crate) mod run_log;
pub(crate) mod run_report;
pub(crate) mod watch;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::stage::Stage;

const OWNER_FILE: &str = ".owner";

/// The state folder of one project and branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateDir {
    root: PathBuf,
    project_id: String,
    branch: String,
    /// The work tree whose folder this is (recorded in `.owner`).
    top: PathBuf,
    /// Whether the root was private (`0700`) when this run claimed it: a root made again after
    /// a tmp cleaner took it is made private again, whoever made it first (see
    /// [`StateDir::remake`]).
    root_private: std::sync::OnceLock<bool>,
}

impl StateDir {
    /// The state root: `$KERN_STATE_DIR`, else `$XDG_STATE_HOME/kern` (an absolute one), else
    /// `<home>/.local/state/kern` — on macOS `<home>/Library/Application Support/kern` (the
    /// values given here, empty ones already dropped).
    pub(crate) fn root_for(
        kern_state_dir: Option<OsString>,
        xdg_state_home: Option<OsString>,
        home: Option<OsString>,
    ) -> PathBuf {
        if let Some(dir) = kern_state_dir {
            return PathBuf::from(dir);
        }
        if let Some(state) = xdg_state_home
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
        {
            return state.join("kern");
        }
        let home = home.map_or_else(|| PathBuf::from("/"), PathBuf::from);
        if cfg!(target_os = "macos") {
            home.join("Library/Application Support/kern")
        } else {
            home.join(".local/state/kern")
        }
    }

    /// Where kern kept its state before the root moved: `${TMPDIR:-/tmp}/claude/kern`.
    pub(crate) fn old_root(tmpdir: Option<OsString>) -> PathBuf {
        tmpdir
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
            .join("claude")
            .join("kern")
    }

    /// Finds the state folder for the work tree at `worktree_top` on `branch_folder` (already
    /// sanitised: no `/`), applying the collision rule, and checks the root, the project and
    /// the branch folders that exist ([`privacy::inspect`]): one another user could write in is
    /// [`crate::error::Error::StateFolderUnsafe`]. Reads only.
    pub(crate) fn locate(
        root: &Path,
        worktree_top: &Path,
        branch_folder: &str,
    ) -> Result<StateDir> {
        let base = worktree_top
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "root".to_string());
        let mut project_id = base.clone();
        if privacy::inspect(root)?.is_some() && privacy::inspect(&root.join(&base))?.is_some() {
            let owner_path = root.join(&base).join(OWNER_FILE);
            if let Ok(owner) = crate::private_file::read_to_string(&owner_path)
                && Path::new(owner.trim_end_matches('\n')) != worktree_top
            {
                project_id = format!("{base}-{}", path_hash8(worktree_top));
                privacy::inspect(&root.join(&project_id))?;
            }
            privacy::inspect(&root.join(&project_id).join(branch_folder))?;
        }
        Ok(StateDir {
            root: root.to_path_buf(),
            project_id,
            branch: branch_folder.to_string(),
            top: worktree_top.to_path_buf(),
            root_private: std::sync::OnceLock::new(),
        })
    }

    /// Creates the folders (`0700`, each checked; see [`privacy::claim`]) and claims the
    /// project id for this work tree.
    pub(crate) fn create(&self) -> Result<()> {
        privacy::claim(&self.root, privacy::Claim::Root)?;
        let private = privacy::inspect(&self.root)? == Some(privacy::Verdict::Private);
        let _ = self.root_private.set(private);
        let mut dir = self.project_dir();
        privacy::claim(&dir, privacy::Claim::Own)?;
        for part in Path::new(&self.branch).components() {
            dir.push(part);
            privacy::claim(&dir, privacy::Claim::Own)?;
        }
        let owner = self.project_dir().join(OWNER_FILE);
        if fs::symlink_metadata(&owner).is_err() {
            let text = format!("{}\n", self.top.display());
            crate::atomic_file::write_private(&owner, text.as_bytes())?;
        }
        Ok(())
    }

    /// Creates the folders again when they are gone (a tmp cleaner removed them while a stage
    /// ran), as [`StateDir::create`] does: `0700`, each checked. A root that was private when
    /// the run claimed it is private again, also when another process made it again first
    /// (with its own mode) between the removal and this. True when it had to.
    pub(crate) fn remake(&self) -> Result<bool> {
        if fs::symlink_metadata(self.dir()).is_ok() {
            return Ok(false);
        }
        let was_private = self.root_private.get().copied();
        self.create()?;
        if was_private == Some(true) {
            privacy::claim(&self.root, privacy::Claim::Own)?;
        }
        Ok(true)
    }

    /// The project id (basename, or basename plus hash on a collision).
    pub(crate) fn project_id(&self) -> &str {
        &self.project_id
    }

    /// The branch folder name.
    pub(crate) fn branch(&self) -> &str {
        &self.branch
    }

    /// `<root>/<project-id>`.
    pub(crate) fn project_dir(&self) -> PathBuf {
        self.root.join(&self.project_id)
    }

    /// `<root>/<project-id>/<branch>`: where the stage files live.
    pub(crate) fn dir(&self) -> PathBuf {
        self.project_dir().join(&self.branch)
    }

    /// `<root>/<project>-<branch>.lock.d`: the original bash script's lock folder, named as
    /// the script named it (the work tree's basename; `/` in the branch became `-`).
    pub(crate) fn legacy_lock_dir(&self, worktree_top: &Path, branch: &str) -> PathBuf {
        let base = worktree_top
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.root
            .join(format!("{base}-{}.lock.d", branch.replace('/', "-")))
    }

    /// `stageN.json`: the stage record.
    pub(crate) fn stage_record(&self, stage: Stage) -> PathBuf {
        self.stage_file(stage, "json")
    }

    /// `stageN.jsonl`: the agent's stdout as it arrived.
    pub(crate) fn stage_stream(&self, stage: Stage) -> PathBuf {
        self.stage_file(stage, "jsonl")
    }

    /// `stageN.stderr`: the agent's stderr (capped, tail kept).
    pub(crate) fn stage_stderr(&self, stage: Stage) -> PathBuf {
        self.stage_file(stage, "stderr")
    }

    /// `stageN.prompt.md`: the exact prompt sent on stdin.
    pub(crate) fn stage_prompt(&self, stage: Stage) -> PathBuf {
        self.stage_file(stage, "prompt.md")
    }

    /// `stageN.schema.json`: the stage's JSON schema, for agents that take it as a file. Not a
    /// per-iteration file: it never changes, so it stays.
    pub(crate) fn stage_schema(&self, stage: Stage) -> PathBuf {
        self.stage_file(stage, "schema.json")
    }

    /// `check.log`: output of the check command.
    pub(crate) fn check_log(&self) -> PathBuf {
        self.dir().join("check.log")
    }

    /// `red.log`: the output of a task's tests run on its base commit (`Tests: first`).
    pub(crate) fn red_log(&self) -> PathBuf {
        self.dir().join("red.log")
    }

    /// `green.log`: the output of a task's tests run after implement (`Tests: first`), when
    /// their command is not the check's.
    pub(crate) fn green_log(&self) -> PathBuf {
        self.dir().join("green.log")
    }

    /// `check-baseline.log`: output of the check run before any agent (kept).
    pub(crate) fn baseline_log(&self) -> PathBuf {
        self.dir().join("check-baseline.log")
    }

    /// `run.jsonl`: the event log, kept across iterations and runs.
    pub(crate) fn run_log(&self) -> PathBuf {
        self.dir().join("run.jsonl")
    }

    /// `watch.json`: the `kern watch` of this folder's nights — its pid, its run, every
    /// restart and gap (see `watch.rs`).
    pub(crate) fn watch_record(&self) -> PathBuf {
        self.dir().join("watch.json")
    }

    /// `watch.lock`: held (flock) by the live `kern watch` of this folder: one at a time.
    pub(crate) fn watch_lock(&self) -> PathBuf {
        self.dir().join("watch.lock")
    }

    /// `run.log`: the run's output lines, as the plain output shows them (rotates).
    pub(crate) fn output_log(&self) -> PathBuf {
        self.dir().join("run.log")
    }

    /// `refused-message.json`: a parallel task's commit message a hook refused at integration,
    /// for its review to answer with a new one (an iteration file).
    pub(crate) fn refused_message(&self) -> PathBuf {
        self.dir().join("refused-message.json")
    }

    /// `task.json`: what kern recorded when the current task started (outlives iterations).
    pub(crate) fn task_start(&self) -> PathBuf {
        self.dir().join("task.json")
    }

    /// `edits.json`: kern's edits that SPEC.md could not take yet (see `journal.rs`).
    pub(crate) fn pending_edits(&self) -> PathBuf {
        self.dir().join("edits.json")
    }

    /// `left-out.json`: changed files kern left out of its commits (see `journal.rs`).
    pub(crate) fn left_out(&self) -> PathBuf {
        self.dir().join("left-out.json")
    }

    /// `commit.json`: a commit kern was about to make (see `journal.rs`).
    pub(crate) fn pending_commit(&self) -> PathBuf {
        self.dir().join("commit.json")
    }

    /// `tracker.json`: what kern last said on each tracker issue (`--tracker`), so that a task
    /// resumed, or taken again after a crash, is not announced twice (outlives runs).
    pub(crate) fn tracker(&self) -> PathBuf {
        self.dir().join("tracker.json")
    }

    /// `jobs/`: the parallel tasks' folders (`-j`, `--review`).
    pub(crate) fn jobs_dir(&self) -> PathBuf {
        self.dir().join("jobs")
    }

    /// `jobs/<slug>/`: a parallel task's own state folder — its stage files, its `task.json`,
    /// its `job.json` — with its git worktree in `tree/`.
    pub(crate) fn job(&self, slug: &str) -> StateDir {
        StateDir {
            root: self.root.clone(),
            project_id: self.project_id.clone(),
            branch: format!("{}/jobs/{slug}", self.branch),
            top: self.top.clone(),
            root_private: self.root_private.clone(),
        }
    }

    /// `job.json` (in a parallel task's folder): which task it is (see `journal.rs`).
    pub(crate) fn job_record(&self) -> PathBuf {
        self.dir().join("job.json")
    }

    /// `tree/` (in a parallel task's folder): its git worktree.
    pub(crate) fn job_tree(&self) -> PathBuf {
        self.dir().join("tree")
    }

    /// `integrating.json`: a parallel task's work being written into the work tree (see
    /// `journal.rs`).
    pub(crate) fn integrating(&self) -> PathBuf {
        self.dir().join("integrating.json")
    }

    /// `conflicts.json`: how often each parallel task's work conflicted with the branch.
    pub(crate) fn conflicts(&self) -> PathBuf {
        self.dir().join("conflicts.json")
    }

    /// Every per-iteration file of every stage (not `run.jsonl`).
    pub(crate) fn iteration_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for stage in Stage::ALL {
            files.push(self.stage_record(stage));
            files.push(self.stage_stream(stage));
            for i in 0..2 {
                files.push(crate::supervisor::capped::segment(
                    &self.stage_stream(stage),
                    i,
                ));
            }
            files.push(self.stage_stderr(stage));
            files.push(self.stage_prompt(stage));
        }
        files.push(self.check_log());
        files.push(self.red_log());
        files.push(self.green_log());
        files.push(self.refused_message());
        files
    }

    /// Moves the per-iteration files out of the way so the next iteration cannot take them for
    /// resume state: into `last/` and `runs/<run_id>/` of the branch folder, where they stay
    /// readable (see `records.rs`). Missing files are fine.
    pub(crate) fn clear_iteration_files(&self, run_id: &str) -> Result<()> {
        records::retire(self, run_id)
    }

    /// The branch folder whose `last/` and `runs/` keep this folder's records: the folder
    /// itself, or for a parallel task's `jobs/<slug>/` the branch folder above it.
    pub(crate) fn records_home(&self) -> PathBuf {
        match self.branch.split_once("/jobs/") {
            Some((branch, _)) => self.project_dir().join(branch),
            None => self.dir(),
        }
    }

    /// `last/`: the stage files of the last iteration that ended.
    pub(crate) fn last_dir(&self) -> PathBuf {
        self.records_home().join(records::LAST)
    }

    /// `runs/`: each iteration's records and prompts, per run and task.
    pub(crate) fn runs_dir(&self) -> PathBuf {
        self.records_home().join(records::RUNS)
    }

    fn stage_file(&self, stage: Stage, extension: &str) -> PathBuf {
        self.dir()
            .join(format!("{}.{extension}", stage.file_stem()))
    }
}

/// The state folder of a detached HEAD: `HEAD` can never be a branch's name, and the folder is
/// per work tree (the project folder is), so it is stable across the commits kern makes.
pub(crate) const DETACHED_FOLDER: &str = "HEAD";

/// The state-folder name of a HEAD on `branch` (from `Head::branch`): the branch escaped by
/// `branch_folder` (an unborn branch uses its name too), a detached HEAD `DETACHED_FOLDER`,
/// one stable folder per work tree. The workspace asks this; git does not know the naming.
pub fn head_folder(branch: Option<&str>) -> String {
    branch.map_or_else(|| DETACHED_FOLDER.to_string(), branch_folder)
}

/// A branch name as a folder name, escaped so that no two branches share a folder: `%`
/// becomes `%25` and `/` becomes `%2F` (`feature/x` and `feature-x` differ).
pub(crate) fn branch_folder(branch: &str) -> String {
    branch.replace('%', "%25").replace('/', "%2F")
}

/// Eight hex digits of a stable hash of a path (SHA-1 through libgit2; stable across versions
/// and runs, unlike std's hasher).
pub(crate) fn path_hash8(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let oid = git2::Oid::hash_object(git2::ObjectType::Blob, path.as_os_str().as_bytes())
        .map_or_else(|_| "00000000".to_string(), |o| o.to_string());
    oid[..8].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_root_made_again_by_another_process_is_private_again() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("state");
        let sd = StateDir::locate(&root, Path::new("/home/me/app"), "main").unwrap();
        sd.create().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&root), 0o700);
        // A tmp cleaner takes the root; another process makes it again with its own mode
        // before kern looks.
        fs::remove_dir_all(&root).unwrap();
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(sd.remake().unwrap());
        for dir in [root.clone(), sd.project_dir(), sd.dir()] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        // A root the person keeps readable is theirs: a folder below it made again leaves it so.
        let theirs = base.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        fs::set_permissions(&theirs, fs::Permissions::from_mode(0o755)).unwrap();
        let sd = StateDir::locate(&theirs, Path::new("/home/me/app"), "main").unwrap();
        sd.create().unwrap();
        fs::remove_dir_all(sd.project_dir()).unwrap();
        assert!(sd.remake().unwrap());
        assert_eq!(mode(&theirs), 0o755);
        assert_eq!(mode(&sd.dir()), 0o700);
    }

    #[test]
    fn paths_follow_the_design_layout() {
        let sd = StateDir::locate(Path::new("/s"), Path::new("/home/me/app"), "feature-x").unwrap();
        assert_eq!(sd.project_id(), "app");
        assert_eq!(sd.dir(), Path::new("/s/app/feature-x"));
        assert_eq!(
            sd.stage_record(Stage::Implement),
            Path::new("/s/app/feature-x/stage2.json")
        );
        assert_eq!(
            sd.stage_stream(Stage::Research),
            Path::new("/s/app/feature-x/stage1.jsonl")
        );
        assert_eq!(
            sd.legacy_lock_dir(Path::new("/home/me/app"), "feature/x"),
            Path::new("/s/app-feature-x.lock.d")
        );
        assert_eq!(branch_folder("feature/x/y"), "feature%2Fx%2Fy");
        assert_ne!(branch_folder("feature/x"), branch_folder("feature-x"));
        assert_ne!(branch_folder("a%2Fb"), branch_folder("a/b"));
        assert_eq!(branch_folder("100%"), "100%25");
    }

    #[test]
    fn a_second_repository_with_the_same_name_gets_a_hashed_id() {
        let root = tempfile::tempdir().unwrap();
        let first = StateDir::locate(root.path(), Path::new("/a/app"), "main").unwrap();
        first.create().unwrap();
        assert_eq!(first.project_id(), "app");
        // The owner itself keeps the plain name.
        assert_eq!(
            StateDir::locate(root.path(), Path::new("/a/app"), "main")
                .unwrap()
                .project_id(),
            "app"
        );
        let second = StateDir::locate(root.path(), Path::new("/b/app"), "main").unwrap();
        assert_eq!(
            second.project_id(),
            format!("app-{}", path_hash8(Path::new("/b/app")))
        );
        assert_eq!(second.project_id().len(), "app-".len() + 8);
        // Stable: the same path gives the same id again.
        assert_eq!(
            StateDir::locate(root.path(), Path::new("/b/app"), "main").unwrap(),
            second
        );
    }

    #[test]
    fn clearing_removes_stage_files_but_keeps_the_run_log() {
        let root = tempfile::tempdir().unwrap();
        let sd = StateDir::locate(root.path(), Path::new("/a/app"), "main").unwrap();
        sd.create().unwrap();
        fs::write(sd.stage_record(Stage::Research), "{}").unwrap();
        fs::write(sd.stage_schema(Stage::Research), "{}").unwrap();
        fs::write(sd.check_log(), "x").unwrap();
        fs::write(sd.run_log(), "{}\n").unwrap();
        sd.clear_iteration_files("run").unwrap();
        assert!(!sd.stage_record(Stage::Research).exists());
        assert!(!sd.check_log().exists());
        assert!(sd.last_dir().join("stage1.json").exists());
        assert_eq!(sd.last_dir(), Path::new(&sd.dir()).join("last"));
        assert_eq!(sd.job("x").last_dir(), sd.last_dir());
        assert_eq!(sd.job("x").runs_dir(), sd.dir().join("runs"));
        assert!(sd.run_log().exists());
        assert!(sd.stage_schema(Stage::Research).exists(), "schemas stay");
    }
}
