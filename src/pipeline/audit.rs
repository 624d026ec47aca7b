//! The audit after every stage (DESIGN.md section 4): what the stage changed that its tool
//! policy forbids, and putting it back.
//!
//! Decisions a reader must know:
//! - A read-only stage (research, review) must leave the work tree and the index as they
//!   were; what it changed is reverted and recorded as a violation. kern's own files (SPEC.md,
//!   LEARNINGS.md) are never reverted: a person may edit them during any stage.
//! - Moved refs are recorded as violations; the history itself is left as it is.
//! - SPEC.md must still parse and hold the task; else kern's copy from before the stage goes
//!   back.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::pipeline::Run;
use crate::repository::{RefsSnapshot, WorkTreeSnapshot};
use crate::spec::{self, Document, Severity, TaskIdentity};
use crate::stage::Stage;

/// What the audit needs from before a stage.
pub(super) struct Before {
    snapshot: WorkTreeSnapshot,
    refs: RefsSnapshot,
    spec: String,
}

/// What the audit found and did.
#[derive(Debug, Default)]
pub(super) struct Findings {
    /// One sentence per forbidden change.
    pub violations: Vec<String>,
    /// What was put back.
    pub reverted: Vec<String>,
}

impl Run<'_> {
    /// Takes what the audit compares against, right before a stage's agent starts.
    pub(super) fn before_stage(&self) -> Result<Before> {
        Ok(Before {
            snapshot: self.ws.repo.snapshot()?,
            refs: self.ws.repo.refs_snapshot()?,
            spec: std::fs::read_to_string(&self.ws.spec_path)
                .map_err(|e| crate::error::Error::io(&self.ws.spec_path, e))?,
        })
    }

    /// Audits `stage` against `before` (see the module docs).
    pub(super) fn audit(
        &mut self,
        stage: Stage,
        before: &Before,
        task: &TaskIdentity,
    ) -> Result<Findings> {
        let mut found = Findings::default();
        let refs_after = self.ws.repo.refs_snapshot()?;
        for moved in before.refs.diff(&refs_after) {
            found.violations.push(format!(
                "{} stage moved {moved} (history left as it is)",
                stage.name()
            ));
        }
        if stage.tools().is_read_only() {
            let own = self.ws.own_files();
            let changed: Vec<String> = self
                .ws
                .repo
                .changes_since(&before.snapshot)?
                .into_iter()
                .filter(|p| !own.iter().any(|o| Path::new(p) == o))
                .collect();
            if !changed.is_empty() {
                let own_refs: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
                found.reverted = self.ws.repo.revert_to(&before.snapshot, &own_refs)?;
                found.violations.push(format!(
                    "{} stage is read-only but changed {} (reverted)",
                    stage.name(),
                    changed.join(", ")
                ));
            }
        }
        if let Some(v) = self.audit_spec(&before.spec, task)? {
            found.violations.push(v);
        }
        Ok(found)
    }

    /// SPEC.md must still parse and hold the task; else kern's copy goes back.
    fn audit_spec(&mut self, before: &str, task: &TaskIdentity) -> Result<Option<String>> {
        let Ok(now) = std::fs::read(&self.ws.spec_path) else {
            self.spec.restore(before)?;
            return Ok(Some(format!(
                "{} was deleted (restored)",
                self.ws.spec_display
            )));
        };
        let broken = match Document::from_bytes(&now) {
            Err(_) => true,
            Ok(doc) => {
                spec::validate(&doc)
                    .iter()
                    .any(|d| d.severity == Severity::Error)
                    || doc.find(task).is_none()
            }
        };
        if broken {
            self.spec.restore(before)?;
            return Ok(Some(format!(
                "{} no longer parsed or lost the task (kern's copy restored)",
                self.ws.spec_display
            )));
        }
        Ok(None)
    }
}
