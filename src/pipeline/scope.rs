//! A declared scope (`> **Scope:**`, DESIGN.md section 16): the paths a task may change. After
//! implement, what it changed outside them is set aside, so no unrelated edit lands in the
//! task's commit.
//!
//! Decisions a reader must know:
//! - The Scope is the person's, held as of the task's start like Check and Must: paths and
//!   globs relative to the work tree's top, a folder naming everything below it, `*` crossing
//!   folders as in git's pathspecs (`*.md` is every Markdown file).
//! - Companions of in-scope changes are in scope too ([`companion`], pure and table-tested):
//!   a test whose name carries an in-scope file's stem, a lockfile beside a changed manifest,
//!   a snapshot of an in-scope file; so are the red tests of a task tested first.
//! - `--scope set-aside` (the default) saves what is outside under
//!   `refs/kern/saved/<task>/out-of-scope-<n>`, puts those paths back to HEAD, and names them in
//!   an `Out of scope` note it writes at once (so it lands in the task's commit, also for a
//!   parallel task); no paid retry for it. `--scope strict` makes
//!   it a failed attempt instead; `--scope off` turns it off.

use std::path::PathBuf;

use globset::{Glob, GlobSetBuilder};

use super::TaskRun;
use super::guard::SpecGuard;
use crate::cli::ScopeMode;
use crate::error::{Error, Result};
use crate::event::{IterationEnd, RunEvent, Told};
use crate::state::lock::RunLock;
use crate::text;

/// Lockfiles and the manifests they belong to.
const LOCKFILES: &[(&str, &[&str])] = &[
    ("Cargo.lock", &["Cargo.toml"]),
    ("package-lock.json", &["package.json"]),
    ("npm-shrinkwrap.json", &["package.json"]),
    ("yarn.lock", &["package.json"]),
    ("pnpm-lock.yaml", &["package.json"]),
    ("bun.lockb", &["package.json"]),
    ("poetry.lock", &["pyproject.toml"]),
    ("uv.lock", &["pyproject.toml"]),
    ("Pipfile.lock", &["Pipfile"]),
    ("go.sum", &["go.mod"]),
    ("Gemfile.lock", &["Gemfile"]),
    ("composer.lock", &["composer.json"]),
    ("mix.lock", &["mix.exs"]),
];

/// The changed paths outside `patterns` that are no companion of an in-scope change, in order.
pub(crate) fn outside(patterns: &[String], changed: &[String]) -> Result<Vec<String>> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p.trim_end_matches('/'))
            .map_err(|e| Error::Usage(format!("the Scope pattern `{p}` is not a glob: {e}")))?;
        set.add(glob);
        // A folder names everything below it.
        if !p.contains('*') {
            let below = format!("{}/**", p.trim_end_matches('/'));
            set.add(Glob::new(&below).map_err(|e| Error::Usage(e.to_string()))?);
        }
    }
    let set = set.build().map_err(|e| Error::Usage(e.to_string()))?;
    let inside: Vec<&String> = changed
        .iter()
        .filter(|c| set.is_match(c.as_str()))
        .collect();
    Ok(changed
        .iter()
        .filter(|c| !set.is_match(c.as_str()))
        .filter(|c| !inside.iter().any(|i| companion(c, i)))
        .cloned()
        .collect())
}

/// True when `path` belongs to the in-scope change `of`: a test or snapshot carrying its stem,
/// or a lockfile beside it when it is that lockfile's manifest.
pub(crate) fn companion(path: &str, of: &str) -> bool {
    let (dir, name) = split(path);
    let (of_dir, of_name) = split(of);
    if let Some((_, manifests)) = LOCKFILES.iter().find(|(lock, _)| *lock == name) {
        return dir == of_dir && manifests.contains(&of_name);
    }
    let stem = of_name.split('.').next().unwrap_or(of_name);
    // A folder's own file (`parser/mod.rs`, `parser/index.ts`) is named by its folder.
    let folder = of_dir.rsplit('/').next().unwrap_or("");
    let names: Vec<&str> = [stem, folder]
        .into_iter()
        .filter(|n| n.len() >= 3)
        .filter(|n| {
            !matches!(
                *n,
                "mod" | "index" | "lib" | "main" | "src" | "app" | "__init__"
            )
        })
        .collect();
    let extension = |n: &str| {
        std::path::Path::new(n)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("snap"))
    };
    let snapshot = dir.split('/').any(|d| d == "__snapshots__")
        || extension(name)
        || name.strip_suffix(".new").is_some_and(extension);
    (crate::spec::is_test_path(path) || snapshot) && names.iter().any(|n| name.contains(n))
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Sets aside (or, strict, fails the attempt for) what the task changed outside its Scope;
/// `Some` when the iteration ended (see [`super::end::end_task`] for the guard, the lock and
/// the left-out paths).
pub(super) fn scope_gate(
    guard: &SpecGuard<'_, '_>,
    lock: &mut RunLock,
    left_out: &[PathBuf],
    it: &mut TaskRun,
) -> Result<Option<IterationEnd>> {
    if it.start.scope.is_empty() || guard.cx.settings.scope == ScopeMode::Off {
        return Ok(None);
    }
    let changed: Vec<String> = crate::pipeline::audit::changed_paths(
        &guard.cx.ws.repo,
        &crate::pipeline::audit::untouchable(guard.cx.ws, &it.start.excluded, left_out),
    )?
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect();
    let mut out = outside(&it.start.scope, &changed)?;
    // A task tested first: its red tests are its proof, wherever they are.
    if let Some(red) = it.start.red_of(&it.identity) {
        out.retain(|p| !red.tests.contains(p));
    }
    if out.is_empty() {
        return Ok(None);
    }
    let names = out
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if guard.cx.settings.scope == ScopeMode::Strict {
        let note = crate::reporter::voice::out_of_scope(&it.start.scope, &out);
        guard.teller.emit(RunEvent::Told(Told::OutOfScope {
            scope: it.start.scope.clone(),
            paths: out.clone(),
        }));
        let attempts = guard.attempts(it)?;
        return match super::decide::after_check(
            super::decide::CheckResult::Failed(note),
            &attempts,
            guard.cx.settings.max_attempts,
        ) {
            super::decide::Next::End(decision) => {
                super::end::end_task(guard, lock, left_out, it, decision).map(Some)
            }
            super::decide::Next::Go(()) => Ok(None),
        };
    }
    let slug = text::slug(&it.title);
    let paths: Vec<PathBuf> = out.iter().map(PathBuf::from).collect();
    let saved = crate::pipeline::audit::put_aside_at_next(
        guard.cx.ws,
        guard.spec,
        &format!("refs/kern/saved/{slug}/out-of-scope-"),
        &paths,
        &format!(
            "kern: what {} changed outside its Scope\n",
            crate::spec::Quoted(&it.title)
        ),
    )?;
    let note = format!("{names} set aside at `{saved}` (outside the task's Scope)");
    guard.teller.emit(RunEvent::Told(Told::ScopeSetAside {
        task: it.title.clone(),
        note: note.clone(),
    }));
    guard.teller.emit(RunEvent::SetAside {
        task: it.title.clone(),
        git_ref: saved,
        paths: out,
        why: "outside the task's Scope".into(),
    });
    // Written now, so that it lands in the task's own commit however the task gets there
    // (a parallel task is committed by the run, from SPEC.md as it then is).
    let edits = [crate::spec::Edit::AddOutOfScope(note)];
    match guard.task_now(it, &edits)? {
        super::guard::TaskNow::Ours(ticket) => {
            guard.edit_task(it, ticket, &edits)?;
            Ok(None)
        }
        other => super::end::follow_person(guard, lock, left_out, it, &other).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_lies_outside_a_scope() {
        let changed: Vec<String> = [
            "src/parser/mod.rs",
            "src/parser/lex.rs",
            "tests/parser_test.rs",
            "Cargo.toml",
            "Cargo.lock",
            "src/unrelated.rs",
            "docs/notes.md",
            "README.md",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let scope: Vec<String> = ["src/parser", "Cargo.toml", "*.md"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            outside(&scope, &changed).unwrap(),
            vec!["src/unrelated.rs"],
            "`*` crosses folders, as in git's pathspecs: docs/notes.md is in"
        );
    }

    #[test]
    fn companions_of_in_scope_changes() {
        for (path, of, yes) in [
            ("tests/parser_test.rs", "src/parser.rs", true),
            ("src/parser.test.ts", "src/parser.ts", true),
            ("src/__snapshots__/parser.ts.snap", "src/parser.ts", true),
            ("Cargo.lock", "Cargo.toml", true),
            ("web/package-lock.json", "web/package.json", true),
            ("package-lock.json", "web/package.json", false),
            ("tests/lexer_test.rs", "src/parser.rs", false),
            ("src/parser_extra.rs", "src/parser.rs", false),
            ("tests/a_test.rs", "src/a.rs", false),
            ("tests/parser_test.rs", "src/parser/lex.rs", true),
            ("tests/app_test.rs", "src/app/mod.rs", false),
        ] {
            assert_eq!(companion(path, of), yes, "{path} of {of}");
        }
    }
}
