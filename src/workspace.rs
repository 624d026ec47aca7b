//! The workspace of a run: the repository, SPEC.md and LEARNINGS.md beside it, the state
//! folder, and the prompt templates — everything fixed for the length of a run, found once.
//!
//! The one decision a reader must know: opening a workspace only reads. `kern status`, `kern
//! -n` and `kern doctor` open the same workspace a run does, so they describe exactly the run
//! that would happen, and none of them writes a byte. Opening one checks the state folder
//! (`StateDir::locate`): one another user could write in stops every command here, before
//! anything is read from it.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::prompt::Templates;
use crate::repository::{GitOptions, Repository};
use crate::settings::Settings;
use crate::spec::{self, Document, SelectOptions, Severity, SpecFile, TaskState};
use crate::state::StateDir;

/// Everything fixed for the length of a run.
pub(crate) struct Workspace {
    /// The repository.
    pub repo: Repository,
    /// SPEC.md, absolute.
    pub spec_path: PathBuf,
    /// SPEC.md as shown in messages and prompts (relative to the top folder).
    pub spec_display: String,
    /// LEARNINGS.md, absolute (beside SPEC.md).
    pub learnings_path: PathBuf,
    /// The state folder.
    pub state_dir: StateDir,
    /// The prompt templates, checked.
    pub templates: Templates,
    /// A parallel task's worktree: the copies of SPEC.md and LEARNINGS.md it holds (relative),
    /// which are nobody's — never the task's work, never reverted. Empty for the run's own
    /// work tree.
    pub copies: Vec<PathBuf>,
}

/// The state folder of the repository `repo` for what its HEAD is now (a branch, an unborn
/// branch, or the worktree's detached HEAD), under the state root `settings` name: located and
/// checked, never made.
pub(crate) fn state_dir_of(settings: &Settings, repo: &Repository) -> Result<StateDir> {
    StateDir::locate(
        &settings.state_root,
        repo.top(),
        &crate::state::head_folder(repo.head()?.branch()),
    )
}

impl Workspace {
    /// Takes the run lock of this work tree (honouring the original script's lock folder), or
    /// fails with exit 3 naming the holder; a stale lock is taken over and returned.
    pub(crate) fn take_lock(
        &self,
        settings: &Settings,
    ) -> Result<(
        crate::state::lock::RunLock,
        Option<crate::state::lock::Takeover>,
    )> {
        crate::state::lock::RunLock::acquire(
            &self.repo.run_lock_path(),
            Some(
                &self
                    .state_dir
                    .legacy_lock_dir(self.repo.top(), &self.repo.branch_name()?),
            ),
            &settings.argv,
        )
    }

    /// Opens the repository holding `settings.cwd`, resolves SPEC.md and the state folder
    /// (checked), and loads the templates. Reads only.
    pub(crate) fn open(settings: &Settings) -> Result<Workspace> {
        let mut repo = Repository::discover(&settings.cwd)?;
        let top = repo.top().to_path_buf();
        let spec_path = spec_path(&settings.spec, &top, &settings.cwd);
        let spec_display = spec_path.strip_prefix(&top).map_or_else(
            |_| spec_path.display().to_string(),
            |p| p.display().to_string(),
        );
        let learnings_path = spec_path.with_file_name("LEARNINGS.md");
        repo.set_options(GitOptions {
            own_files: vec![spec_path.clone(), learnings_path.clone()],
            hook_timeout: settings.hook_timeout,
            max_file_size: settings.max_file_size,
            no_verify: settings.no_verify,
            ..GitOptions::default()
        });
        let state_dir = state_dir_of(settings, &repo)?;
        let templates = Templates::load(&top)?;
        Ok(Workspace {
            repo,
            spec_path,
            spec_display,
            learnings_path,
            state_dir,
            templates,
            copies: Vec::new(),
        })
    }

    /// The task list of the same name in the folder kern runs in when it is not the one kern
    /// reads (see [`task_list_here`]), relative to the repository's top folder.
    pub(crate) fn task_list_here(&self, settings: &Settings) -> Option<String> {
        task_list_here(
            &settings.spec,
            self.repo.top(),
            &settings.cwd,
            &self.spec_path,
        )
        .map(|p| p.display().to_string())
    }

    /// The workspace of a parallel task (DESIGN.md section 15): the repository of its
    /// `worktree`, the run's own SPEC.md and LEARNINGS.md (kern alone edits them, for every
    /// task), the task's `state_dir`, the run's templates. `foreign_refs` are the refs the
    /// rest of the run moves while this task's stages run.
    pub(crate) fn for_job(
        &self,
        settings: &Settings,
        worktree: &std::path::Path,
        state_dir: StateDir,
        foreign_refs: crate::repository::RefFilter,
    ) -> Result<Workspace> {
        let mut repo = Repository::discover(worktree)?;
        let rel = |p: &std::path::Path| {
            p.strip_prefix(self.repo.top())
                .map(std::path::Path::to_path_buf)
                .ok()
        };
        let copies: Vec<PathBuf> = [&self.spec_path, &self.learnings_path]
            .into_iter()
            .filter_map(|p| rel(p))
            .collect();
        repo.set_options(GitOptions {
            own_files: copies.clone(),
            hook_timeout: settings.hook_timeout,
            max_file_size: settings.max_file_size,
            foreign_refs,
            no_verify: settings.no_verify,
        });
        Ok(Workspace {
            repo,
            spec_path: self.spec_path.clone(),
            spec_display: self.spec_display.clone(),
            learnings_path: self.learnings_path.clone(),
            state_dir,
            templates: self.templates.clone(),
            copies,
        })
    }

    /// How selection runs here: `settings`' options, with the tasks of `doc` parked for review
    /// (done with a Review note, their branch `kern/<task>` still there): a task whose After
    /// note names one waits until `kern accept` lands it.
    pub(crate) fn select_options(&self, settings: &Settings, doc: &Document) -> SelectOptions {
        let mut options = settings.select_options();
        options.parked = doc
            .tasks()
            .iter()
            .filter(|t| t.state == TaskState::Done)
            .filter_map(|t| {
                let slug = t.review_branch()?.strip_prefix("kern/")?;
                self.repo.task_branch(slug).map(|_| t.title.clone())
            })
            .collect();
        options
    }

    /// Loads SPEC.md and validates it: warnings are returned, errors are
    /// [`Error::SpecRefused`] with every diagnostic.
    pub(crate) fn load_spec(&self) -> Result<(SpecFile, Document, Vec<String>)> {
        let (file, doc) = SpecFile::load_as(&self.spec_path, &self.spec_display)?;
        let diagnostics = spec::validate(&doc);
        let errors: Vec<spec::Diagnostic> = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .cloned()
            .collect();
        if !errors.is_empty() {
            return Err(Error::SpecRefused {
                file: self.spec_display.clone(),
                diagnostics: errors,
            });
        }
        let warnings = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.render(&self.spec_display))
            .collect();
        Ok((file, doc, warnings))
    }

    /// Validates a parsed SPEC.md: the warnings, rendered without their `warning: ` label
    /// (the reporter's `warn` adds it), or [`Error::SpecInvalid`] holding every error.
    pub(crate) fn validate(&self, doc: &Document) -> Result<Vec<String>> {
        let diagnostics = spec::validate(doc);
        let errors: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.render(&self.spec_display))
            .collect();
        if !errors.is_empty() {
            return Err(Error::SpecInvalid {
                report: errors.join("\n"),
            });
        }
        Ok(diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.render_unlabelled(&self.spec_display))
            .collect())
    }

    /// kern's own files, relative to the top folder: never part of the clean-tree rule and
    /// never reverted by an audit (a person may edit SPEC.md during any stage). A symlinked
    /// SPEC.md counts twice: the link and the file it names, when that is in the work tree.
    pub(crate) fn own_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.copies.clone();
        for path in [&self.spec_path, &self.learnings_path] {
            let real = std::fs::canonicalize(path).ok();
            for p in std::iter::once(path.clone()).chain(real) {
                if let Ok(rel) = p.strip_prefix(self.repo.top())
                    && !files.iter().any(|f| f == rel)
                {
                    files.push(rel.to_path_buf());
                }
            }
        }
        files
    }
}

/// The task list of the same name in the folder kern runs in, relative to `top`, when it is
/// another file than the `chosen` one (the top folder's, which wins): a monorepo's package
/// with a SPEC.md of its own, which the person may think kern works on.
fn task_list_here(spec: &Path, top: &Path, cwd: &Path, chosen: &Path) -> Option<PathBuf> {
    if spec.is_absolute() {
        return None;
    }
    let here = cwd.join(spec).canonicalize().ok()?;
    let top = top.canonicalize().ok()?;
    let other = here.is_file() && chosen.canonicalize().ok()? != here;
    other
        .then(|| here.strip_prefix(&top).ok().map(Path::to_path_buf))
        .flatten()
}

/// Where the task list is: an absolute path as given; a relative one from the repository's
/// top folder (so `kern` finds `SPEC.md` from any folder of the repository), else — when no
/// such file is there — from the folder kern runs in, as the shell would read it (`cd
/// packages/app && kern --spec SPEC.md` in a monorepo).
fn spec_path(spec: &Path, top: &Path, cwd: &Path) -> PathBuf {
    if spec.is_absolute() {
        return spec.to_path_buf();
    }
    let from_top = top.join(spec);
    if from_top.exists() {
        return from_top;
    }
    let inside = |p: &Path| {
        let (p, top) = (p.canonicalize().ok(), top.canonicalize().ok());
        p.zip(top)
            .filter(|(p, top)| p.starts_with(top))
            .map(|(p, _)| p)
    };
    match inside(&cwd.join(spec)) {
        Some(found) if found.is_file() => found,
        _ => from_top,
    }
}
