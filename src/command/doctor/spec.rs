//! The person's files a run reads: SPEC.md (present, UTF-8, valid), the prompt templates
//! (built in, or overrides in `.kern/prompts/` that parse), and the tree the next task would
//! start on (the clean-tree rule of `pipeline::start`).
//!
//! Decisions a reader must know: a SPEC.md with errors shows only its first (with how many
//! more); warnings do not fail the check, they are counted (`kern -n` shows them). Uncommitted
//! changes fail the doctor only where they would stop the run — the next task starts anew on
//! them without `--allow-dirty` —, so its exit code 2 keeps meaning "a run would stop here".

use std::path::Path;

use super::Check;
use crate::error::Error;
use crate::pipeline::start::{StartTree, tree_at_start};
use crate::prompt::Templates;
use crate::settings::Settings;
use crate::spec::{self, Document, Severity, SpecFile};
use crate::stage::Stage;
use crate::workspace::Workspace;

/// SPEC.md exists, is UTF-8 and validates; the first error is shown.
pub(super) fn spec_check(settings: &Settings, top: &Path) -> Check {
    let path = if settings.spec.is_absolute() {
        settings.spec.clone()
    } else {
        top.join(&settings.spec)
    };
    let display = path
        .strip_prefix(top)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string());
    let doc: Document = match SpecFile::load(&path) {
        Ok((_, doc)) => doc,
        Err(e) => return Check::from_error(&display, &e, "fix the file"),
    };
    let diagnostics = spec::validate(&doc);
    let errors: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if let Some(first) = errors.first() {
        let more = match errors.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        let fix = if first.fix.is_empty() {
            "fix the line shown".to_string()
        } else {
            first.fix_in(&display)
        };
        return Check::fail(
            &display,
            format!(
                "`{display}:{}:{}`: {}{more}",
                first.line,
                first.column,
                first.message_in(&display)
            ),
            fix,
        );
    }
    let c = doc.counts();
    let warnings = diagnostics.len();
    let mut detail = format!(
        "{} pending, {} in progress, {} done, {} blocked",
        c.pending, c.in_progress, c.done, c.blocked
    );
    if warnings > 0 {
        detail.push_str(&format!(
            "; {warnings} warning{} (`kern -n` shows them)",
            if warnings == 1 { "" } else { "s" }
        ));
    }
    Check::pass(display, detail)
}

/// The templates load: built in, or overrides in `.kern/prompts/` that parse. Every broken
/// template is a failed check of its own, so one `kern doctor` names them all.
pub(super) fn templates_checks(top: &Path) -> Vec<Check> {
    const NAME: &str = "prompt templates";
    let problems = Templates::problems(top);
    if !problems.is_empty() {
        return problems
            .iter()
            .map(|e| {
                Check::from_error(
                    NAME,
                    e,
                    "fix the template, or delete it to use the built-in one",
                )
            })
            .collect();
    }
    let overrides: Vec<String> = Stage::ALL
        .iter()
        .map(|s| Path::new(".kern/prompts").join(s.template_name()))
        .filter(|p| top.join(p).exists())
        .map(|p| format!("`{}`", p.display()))
        .collect();
    vec![if overrides.is_empty() {
        Check::pass(NAME, "built in")
    } else {
        Check::pass(NAME, format!("overridden by {}", overrides.join(", ")))
    }]
}

/// The tree the next task would start on: the person's uncommitted changes fail the check when
/// that task starts anew on them without `--allow-dirty` (the run would stop at once, exit 2);
/// a resumed task, a clean tree, `--allow-dirty` or nothing to take pass.
pub(super) fn clean_tree_check(settings: &Settings) -> Check {
    const NAME: &str = "clean tree";
    let Ok(ws) = Workspace::open(settings) else {
        return Check::skipped(NAME, "no usable workspace (see above)");
    };
    let Ok((_, doc)) = SpecFile::load(&ws.spec_path) else {
        return Check::skipped(NAME, "no readable task list");
    };
    let Some(selection) = spec::select_with(&doc, &ws.select_options(settings, &doc)) else {
        return Check::pass(NAME, "no task to start");
    };
    let title = spec::quote_title(&doc.tasks()[selection.task].title);
    match tree_at_start(&ws, &doc, selection.task) {
        Err(e) => Check::from_error(NAME, &e, "look at the tree with `git status`"),
        Ok(StartTree::Clean) => Check::pass(NAME, "no uncommitted changes"),
        Ok(StartTree::Resumes) => Check::pass(
            NAME,
            format!("{title} resumes, on the tree as it is (a new task needs a clean one)"),
        ),
        Ok(StartTree::Dirty(paths)) if settings.allow_dirty => Check::pass(
            NAME,
            format!(
                "uncommitted changes: {}, left out of kern's commits (--allow-dirty)",
                crate::error::dirty_names(&paths).join(", ")
            ),
        ),
        Ok(StartTree::Dirty(paths)) => Check::from_error(NAME, &Error::dirty_tree(&paths), ""),
    }
}
