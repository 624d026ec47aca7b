//! What a task starts from (`TaskStart`, journaled): its base commit, and the person's own
//! changed files in the tree, which stay theirs.
//!
//! The decision a reader must know: a new task starts only on a clean tree — the person's
//! changed files stop the run (exit 2) unless `--allow-dirty`, and then they are remembered as
//! the person's for the whole run and left out of every commit kern makes. Files kern itself left
//! out of a commit (secrets, too large) never block a start. `kern -n` and `kern doctor` ask
//! the same rule ([`tree_at_start`]) so that they name the paths before a night stops on them.
//!
//! [`tree_at_start`] and [`task_start`] read the repository: they are held by
//! tests/integration/nothing_lost.rs, doctor.rs and second_round.rs (the dirty tree named).

use crate::error::{Error, Result};
use crate::event::{RunEvent, Told};
use crate::pipeline::Cx;
use crate::pipeline::teller::Teller;
use crate::spec::TestsFirst;
use crate::spec::{Document, TaskState};
use crate::state::journal::{self, LeftOut, TaskStart};
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};

/// True when taking `task` starts it anew (the clean-tree rule applies), false when it
/// resumes: it is in progress, or part of a chain that is.
pub(crate) fn starts_new(doc: &Document, task: usize) -> bool {
    let chain_started = doc
        .ancestors(task)
        .iter()
        .any(|&a| doc.tasks()[a].state == TaskState::InProgress);
    doc.tasks()[task].state == TaskState::Pending && !chain_started
}

/// The person's changed paths in `ws`'s tree that a new task does not start on: what differs
/// from HEAD, less kern's own files and the files kern left out of its commits (`left_out`).
pub(crate) fn dirty_for_start(ws: &Workspace, left_out: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let own = ws.own_files();
    let own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
    Ok(ws
        .repo
        .dirty_files(&own)?
        .into_iter()
        .filter(|p| !left_out.contains(p))
        .collect())
}

/// The tree the next start of a task would meet ([`tree_at_start`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartTree {
    /// The task resumes (it, or its chain, is in progress): a dirty tree is normal.
    Resumes,
    /// The task starts anew on a clean tree.
    Clean,
    /// The task starts anew on these changed paths of the person's: the run stops there
    /// (exit 2) unless `--allow-dirty`, which leaves them out of every kern commit.
    Dirty(Vec<PathBuf>),
}

/// What starting `task` would meet now, for `kern -n` and `kern doctor` (reads only): the rule
/// [`task_start`] applies, with the files kern left out of its commits as the state folder
/// records them.
pub(crate) fn tree_at_start(ws: &Workspace, doc: &Document, task: usize) -> Result<StartTree> {
    let identity = doc.identity(task);
    let resumes =
        journal::load::<TaskStart>(&ws.state_dir.task_start()).is_some_and(|s| s.covers(&identity));
    if resumes || !starts_new(doc, task) {
        return Ok(StartTree::Resumes);
    }
    let left_out: LeftOut = journal::load(&ws.state_dir.left_out()).unwrap_or_default();
    let dirty = dirty_for_start(ws, &left_out.paths)?;
    Ok(if dirty.is_empty() {
        StartTree::Clean
    } else {
        StartTree::Dirty(dirty)
    })
}

/// The task's start record: reused when it belongs to this task (or the decomposed task
/// it is part of), else made now — which for a new task enforces the clean-tree rule; the
/// person's dirty paths it meets join `left_out`'s, told through `teller`.
pub(super) fn task_start(
    cx: Cx,
    teller: &Teller,
    left_out: &mut LeftOut,
    doc: &Document,
    task: usize,
) -> Result<TaskStart> {
    let identity = doc.identity(task);
    let path = cx.ws.state_dir.task_start();
    if let Some(start) = journal::load::<TaskStart>(&path).filter(|s| s.covers(&identity)) {
        remember_persons(left_out, &start.excluded);
        return Ok(start);
    }
    let mut excluded = Vec::new();
    if starts_new(doc, task) {
        // Files kern left out of a commit (secrets, too large) never block a start; the
        // person's own dirty paths always count, however often kern has left them out.
        let dirty = dirty_for_start(cx.ws, &left_out.paths)?;
        if !dirty.is_empty() && !cx.settings.allow_dirty {
            return Err(Error::dirty_tree(&dirty));
        }
        let new: Vec<String> = dirty
            .iter()
            .filter(|p| !left_out.persons.contains(p))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if !new.is_empty() {
            teller.emit(RunEvent::Told(Told::PersonsPaths { paths: new }));
        }
        remember_persons(left_out, &dirty);
        excluded.clone_from(&left_out.persons);
    }
    let t = &doc.tasks()[task];
    let tests_first =
        match t.tests_first_command(cx.settings.tests_first, cx.settings.check.as_deref()) {
            TestsFirst::NoCommand => {
                return Err(Error::TestsFirstCommand {
                    title: t.title.clone(),
                    spec: cx.ws.spec_display.clone(),
                    line: t.line,
                });
            }
            how => how.command(),
        };
    let start = TaskStart {
        identity,
        base_commit: cx.ws.repo.head_oid().map(|o| o.to_string()),
        excluded,
        check: t.check_command().map(str::to_string),
        must: super::verify::held_at_start(cx.ws.repo.top(), &t.must_text()),
        tests_read_only: t.tests_read_only(),
        scope: t.scope(),
        tests_first,
        red: None,
    };
    journal::save(&path, &start)?;
    Ok(start)
}

/// Adds `paths` to the person's `--allow-dirty` paths of this run.
fn remember_persons(left_out: &mut LeftOut, paths: &[PathBuf]) {
    for path in paths {
        if !left_out.persons.contains(path) {
            left_out.persons.push(path.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persons_paths_are_remembered_once_each_in_the_order_first_met() {
        let mut left_out = LeftOut::default();
        let p = |s: &str| PathBuf::from(s);
        remember_persons(&mut left_out, &[p("notes.txt"), p("a.rs")]);
        remember_persons(&mut left_out, &[p("a.rs"), p("b.rs")]);
        assert_eq!(left_out.persons, vec![p("notes.txt"), p("a.rs"), p("b.rs")]);
        assert!(
            left_out.paths.is_empty(),
            "kern's own left-out paths are apart"
        );
    }

    #[test]
    fn a_task_starts_new_only_when_it_and_its_chain_are_untouched() {
        let doc = Document::parse(
            "- [ ] a
  - [ ] a1
- [~] b
  - [ ] b1
- [ ] c
",
        );
        let at = |title: &str| doc.tasks().iter().position(|t| t.title == title).unwrap();
        assert!(starts_new(&doc, at("a")));
        assert!(starts_new(&doc, at("a1")));
        assert!(!starts_new(&doc, at("b")), "in progress: it resumes");
        assert!(!starts_new(&doc, at("b1")), "its chain is in progress");
        assert!(starts_new(&doc, at("c")));
    }
}
