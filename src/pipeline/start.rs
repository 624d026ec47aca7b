//! What a task starts from (`TaskStart`, journaled): its base commit, and the person's own
//! changed files in the tree, which stay theirs.
//!
//! The decision a reader must know: a new task starts only on a clean tree — the person's
//! changed files stop the run (exit 2) unless `--allow-dirty`, and then they are remembered as
//! the person's for the whole run and left out of every commit kern makes. Files kern itself left
//! out of a commit (secrets, too large) never block a start.

use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::pipeline::Run;
use crate::spec::TestsFirst;
use crate::spec::{Document, TaskState};
use crate::state::journal::{self, TaskStart};
use std::path::PathBuf;

impl Run<'_> {
    /// The task's start record: reused when it belongs to this task (or the decomposed task
    /// it is part of), else made now — which for a new task enforces the clean-tree rule.
    pub(super) fn task_start(&mut self, doc: &Document, task: usize) -> Result<TaskStart> {
        let identity = doc.identity(task);
        let path = self.ws.state_dir.task_start();
        if let Some(start) = journal::load::<TaskStart>(&path).filter(|s| s.covers(&identity)) {
            self.remember_persons(&start.excluded);
            return Ok(start);
        }
        let chain_started = doc
            .ancestors(task)
            .iter()
            .any(|&a| doc.tasks()[a].state == TaskState::InProgress);
        let is_new = doc.tasks()[task].state == TaskState::Pending && !chain_started;
        let mut excluded = Vec::new();
        if is_new {
            let own = self.ws.own_files();
            let own: Vec<&std::path::Path> = own.iter().map(PathBuf::as_path).collect();
            // Files kern left out of a commit (secrets, too large) never block a start; the
            // person's own dirty paths always count, however often kern has left them out.
            let dirty: Vec<PathBuf> = self
                .ws
                .repo
                .dirty_files(&own)?
                .into_iter()
                .filter(|p| !self.left_out.paths.contains(p))
                .collect();
            if !dirty.is_empty() && !self.settings.allow_dirty {
                return Err(Error::DirtyTree {
                    files: dirty
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect(),
                });
            }
            let new: Vec<String> = dirty
                .iter()
                .filter(|p| !self.left_out.persons.contains(p))
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if !new.is_empty() {
                self.teller
                    .emit(RunEvent::Told(Told::PersonsPaths { paths: new }));
            }
            self.remember_persons(&dirty);
            excluded.clone_from(&self.left_out.persons);
        }
        let t = &doc.tasks()[task];
        let tests_first = match t
            .tests_first_command(self.settings.tests_first, self.settings.check.as_deref())
        {
            TestsFirst::NoCommand => {
                return Err(Error::TestsFirstCommand {
                    title: t.title.clone(),
                    spec: self.ws.spec_display.clone(),
                    line: t.line,
                });
            }
            how => how.command(),
        };
        let start = TaskStart {
            identity,
            base_commit: self.ws.repo.head_oid().map(|o| o.to_string()),
            excluded,
            check: t.check_command().map(str::to_string),
            must: super::verify::held_at_start(self.ws.repo.top(), &t.must_text()),
            tests_read_only: t.tests_read_only(),
            scope: t.scope(),
            tests_first,
            red: None,
        };
        journal::save(&path, &start)?;
        Ok(start)
    }

    /// Adds `paths` to the person's `--allow-dirty` paths of this run.
    fn remember_persons(&mut self, paths: &[PathBuf]) {
        for path in paths {
            if !self.left_out.persons.contains(path) {
                self.left_out.persons.push(path.clone());
            }
        }
    }
}
