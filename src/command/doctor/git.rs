//! The git checks: a repository with a work tree and no operation in progress, the identity
//! kern's commit would use, and what else would stop that commit (signing, `index.lock`,
//! filter drivers).
//!
//! The decision a reader must know: the identity and commit checks ask the repository what
//! kern's own commit asks it (`Repository::author`, `Repository::preflight`), not a copy of
//! those rules.

use std::path::Path;

use super::Check;
use crate::repository::{Repository, safe_directory_fix, untrusted_path};

/// Inside a repository, not bare, no operation in progress. Returns the repository when it can
/// be used.
pub(super) fn repository_checks(cwd: &Path, checks: &mut Vec<Check>) -> Option<Repository> {
    let git = match git2::Repository::discover(cwd) {
        Ok(git) => git,
        Err(e) => {
            let (detail, fix) = if let Some(path) = untrusted_path(&e, cwd) {
                (
                    format!(
                        "`{}` is owned by another user, and git works in it only when told it is safe (`safe.directory`)",
                        path.display()
                    ),
                    format!("if you trust it: `{}`", safe_directory_fix(&path)),
                )
            } else if e.code() == git2::ErrorCode::NotFound {
                (
                    format!("`{}` is not inside a git repository", cwd.display()),
                    "run kern inside a git repository, or `git init` first".to_string(),
                )
            } else if let Some((what, fix)) = crate::repository::unreadable_format(e.message()) {
                (
                    format!(
                        "the repository at `{}` {what}, which kern cannot read yet",
                        cwd.display()
                    ),
                    fix,
                )
            } else {
                (
                    format!(
                        "cannot open the repository at `{}`: {}",
                        cwd.display(),
                        e.message()
                    ),
                    "check the repository with `git status`".to_string(),
                )
            };
            checks.push(Check::fail("git repository", detail, fix));
            checks.push(Check::skipped("work tree", "no repository"));
            checks.push(Check::skipped("git operation", "no repository"));
            return None;
        }
    };
    let git_dir = git
        .path()
        .to_string_lossy()
        .trim_end_matches('/')
        .to_string();
    checks.push(Check::pass("git repository", format!("`{git_dir}`")));
    if git.is_bare() || git.workdir().is_none() {
        checks.push(Check::fail(
            "work tree",
            format!("`{git_dir}` is a bare repository"),
            format!("run kern in a clone with a checkout: `git clone {git_dir} <folder>`"),
        ));
        checks.push(Check::skipped("git operation", "no work tree"));
        return None;
    }
    let repo = match Repository::discover(cwd) {
        Ok(repo) => repo,
        Err(e) => {
            checks.push(Check::from_error(
                "work tree",
                &e,
                "check it with `git status`",
            ));
            checks.push(Check::skipped("git operation", "no work tree"));
            return None;
        }
    };
    checks.push(Check::pass(
        "work tree",
        format!("`{}`", repo.top().display()),
    ));
    checks.push(match repo.ensure_no_operation_in_progress() {
        Ok(()) => Check::pass(
            "git operation",
            "no merge, rebase or other operation in progress",
        ),
        Err(e) => Check::from_error("git operation", &e, "finish or abort it"),
    });
    Some(repo)
}

/// The author and committer a kern commit would use.
pub(super) fn identity_check(repo: Option<&Repository>) -> Check {
    const NAME: &str = "git identity";
    let fix = r#"git config --global user.name "Your Name" && git config --global user.email you@example.com"#;
    let signature = match repo {
        Some(repo) => repo
            .author()
            .and_then(|author| repo.committer().map(|_| author)),
        None => git2::Config::open_default()
            .and_then(|config| {
                git2::Signature::now(
                    &config.get_string("user.name")?,
                    &config.get_string("user.email")?,
                )
            })
            .map_err(|_| crate::error::Error::GitIdentity),
    };
    match signature {
        Ok(me) => Check::pass(
            NAME,
            format!(
                "{} <{}>",
                String::from_utf8_lossy(me.name_bytes()),
                String::from_utf8_lossy(me.email_bytes())
            ),
        ),
        Err(_) => Check::fail(
            NAME,
            "git has no author identity (user.name, user.email)",
            fix,
        ),
    }
}

/// What else would stop kern's commit: signing, git's `index.lock`, filter drivers (the
/// repository's own preflight; identity and the operation are checked above).
pub(super) fn commit_checks(repo: Option<&Repository>) -> Vec<Check> {
    const NAMES: [&str; 3] = ["commit signing", "git index", "filter drivers"];
    let Some(repo) = repo else {
        return NAMES
            .iter()
            .map(|name| Check::skipped(*name, "no usable repository"))
            .collect();
    };
    repo.preflight()
        .into_iter()
        .filter(|check| NAMES.contains(&check.name))
        .map(|check| match check.result {
            Ok(detail) => Check::pass(check.name, detail),
            Err(e) => Check::from_error(check.name, &e, "fix it as the message says"),
        })
        .collect()
}
