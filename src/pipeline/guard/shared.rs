//! SPEC.md as every task of a run shares it, also when several run at once (`-j`), with the
//! changes other people made to it (what the run counts is in `ledger`).
//!
//! The one decision a reader must know: kern alone writes SPEC.md, through one [`SpecFile`]
//! shared by every task of the run (DESIGN.md section 2), so parallel tasks never race each
//! other's edits. Whatever changed the file between kern's own reads and writes was someone
//! else — the person, or an agent against its orders — and is logged here as it is seen, so a
//! stage reports exactly the changes that were not kern's, whichever task kern was writing
//! for meanwhile.
//!
//! SPEC.md is read once per step, not once per question: [`SharedSpec::reload`] answers from
//! the document kern last read or wrote until the step ends because something else may have
//! written the file since — an agent's stage ended, the check or a commit's hooks ran, kern
//! put paths of the work tree back ([`SharedSpec::after`] and [`SharedSpec::after_await`],
//! around the effect itself), or a new iteration began ([`super::SpecGuard::step`]). Only `guard/` can end a step without an
//! effect. Every write still starts from the file as it is now
//! ([`SpecFile::apply_reporting`]), so a step's view can make kern ask the person's file one
//! question late, never lose their edit. Parallel tasks share the view: any task's new step
//! drops it, so a view is never older than the latest step of any task.

use std::cell::RefCell;
use std::rc::Rc;

use crate::error::Result;
use crate::spec::{Document, Edit, SpecFile, TaskIdentity, Written};

/// SPEC.md, shared by every task of the run.
#[derive(Clone)]
pub(crate) struct SharedSpec(Rc<RefCell<Inner>>);

struct Inner {
    file: SpecFile,
    /// The document as of the current step, when kern read or wrote it in this step.
    view: Option<Document>,
    /// Changes that were not kern's, in the order they were seen.
    changes: Vec<String>,
}

impl SharedSpec {
    pub(crate) fn new(file: SpecFile) -> SharedSpec {
        SharedSpec(Rc::new(RefCell::new(Inner {
            file,
            view: None,
            changes: Vec::new(),
        })))
    }

    /// The file as of this step: read again at the first question of a step (a change since
    /// kern last read or wrote it is logged), answered from that reading after.
    pub(crate) fn reload(&self) -> Result<Document> {
        let mut inner = self.0.borrow_mut();
        if let Some(view) = &inner.view {
            return Ok(view.clone());
        }
        let (doc, previous) = inner.file.reload_with_previous()?;
        if let Some(previous) = previous {
            let changes = crate::spec::changes(&previous, &doc);
            inner.changes.extend(changes);
        }
        inner.view = Some(doc.clone());
        Ok(doc)
    }

    /// The step ends: something else may have written SPEC.md since kern's last look, and
    /// the next question reads the file again.
    pub(super) fn end_step(&self) {
        self.0.borrow_mut().view = None;
    }

    /// Awaits `effect`, which may write SPEC.md (an agent's stage, a check), and ends the
    /// step when it is done, whatever it returned. The effect is awaited on the heap (one
    /// allocation per stage or check): awaited in place, the run's future would hold it twice
    /// (the argument and its awaited copy) and grow past clippy's `large_futures` limit.
    pub(crate) async fn after_await<T>(&self, effect: impl Future<Output = T>) -> T {
        let out = Box::pin(effect).await;
        self.end_step();
        out
    }

    /// Runs `effect`, which may write SPEC.md (a hook, a put-back of paths, a stash put
    /// back), and ends the step when it returns, whatever it returned.
    pub(crate) fn after<T>(&self, effect: impl FnOnce() -> T) -> T {
        let out = effect();
        self.end_step();
        out
    }

    /// Applies kern's `edits` to `task` (see [`SpecFile::apply_reporting`]), after logging any
    /// change that came before them; the written document is this step's view.
    pub(crate) fn apply_reporting(&self, task: &TaskIdentity, edits: &[Edit]) -> Result<Written> {
        let mut inner = self.0.borrow_mut();
        let written = inner.file.apply_reporting(task, edits);
        inner.view = written.as_ref().ok().map(|w| w.document.clone());
        if let Ok(Written {
            found_change: Some((seen, found)),
            ..
        }) = &written
        {
            let changes = crate::spec::changes(seen, found);
            inner.changes.extend(changes);
        }
        written
    }

    /// The text kern last read or wrote.
    pub(crate) fn last_text(&self) -> String {
        self.0.borrow().file.last_text().to_string()
    }

    /// Writes `text` back (see [`SpecFile::restore`]).
    pub(crate) fn restore(&self, text: &str) -> Result<()> {
        self.end_step();
        self.0.borrow_mut().file.restore(text)
    }

    /// Where the log of others' changes stands now.
    pub(crate) fn mark(&self) -> usize {
        self.0.borrow().changes.len()
    }

    /// The changes that were not kern's, seen since `mark`.
    pub(crate) fn changes_since(&self, mark: usize) -> Vec<String> {
        self.0
            .borrow()
            .changes
            .get(mark..)
            .unwrap_or_default()
            .to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_reads_the_file_once_and_only_changes_kern_did_not_make_are_logged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n- [ ] b\n").unwrap();
        let (file, doc) = SpecFile::load(&path).unwrap();
        let spec = SharedSpec::new(file);
        let other = spec.clone();
        let mark = spec.mark();
        // kern, for another task, writes; then the person marks `b` done.
        other
            .apply_reporting(
                &doc.identity(0),
                &[Edit::SetState(crate::spec::TaskState::InProgress)],
            )
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("- [ ] b", "- [x] b")).unwrap();
        // Within kern's step the file is not read again: the view is what kern wrote.
        assert_eq!(
            spec.reload().unwrap().tasks()[1].state,
            crate::spec::TaskState::Pending
        );
        assert!(spec.changes_since(mark).is_empty());
        // The next step reads it, and names the person's change.
        spec.end_step();
        spec.reload().unwrap();
        assert_eq!(spec.changes_since(mark), vec!["`b` [ ] → [x]"]);
        assert!(spec.changes_since(spec.mark()).is_empty());
    }

    #[test]
    fn an_effect_run_through_after_ends_the_step_whatever_it_returned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SPEC.md");
        std::fs::write(&path, "- [ ] a\n").unwrap();
        let spec = SharedSpec::new(SpecFile::load(&path).unwrap().0);
        let state = |spec: &SharedSpec| spec.reload().unwrap().tasks()[0].state;
        assert_eq!(state(&spec), crate::spec::TaskState::Pending);
        // Written outside an effect: the step's view stands.
        std::fs::write(&path, "- [x] a\n").unwrap();
        assert_eq!(state(&spec), crate::spec::TaskState::Pending);
        // An effect that wrote (a hook, say) and succeeded: the next question reads the file.
        let out = spec.after(|| std::fs::write(&path, "- [!] a\n").map(|()| 7));
        assert_eq!(out.unwrap(), 7);
        assert_eq!(state(&spec), crate::spec::TaskState::Blocked);
        // One that wrote, then failed: read again too.
        let failed: std::io::Result<()> = spec.after(|| {
            std::fs::write(&path, "- [x] a\n")?;
            Err(std::io::Error::other("the hook failed"))
        });
        assert!(failed.is_err());
        assert_eq!(state(&spec), crate::spec::TaskState::Done);
    }
}
