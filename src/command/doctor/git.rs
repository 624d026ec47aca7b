//! The git checks: a repository with a work tree and no operation in progress, the identity
//! kern's commit would use, what else would stop that commit (signing, `index.lock`, filter
//! drivers), and the `git` program on PATH — which kern runs only for `--remote` (fetch, push)
//! and a reftable repository's refs, so it fails only where one of those needs it.
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

/// What of kern needs the `git` program, and from which version (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GitNeed {
    /// The feature, as the person named it (`--remote`, `reftable refs`).
    pub what: &'static str,
    /// The oldest git that has what kern uses.
    pub since: (u32, u32),
    /// What kern runs git for.
    pub runs: &'static str,
}

/// `--remote`: `git fetch --no-write-fetch-head` (2.29) and `git push --atomic
/// --force-with-lease=<ref>:<expect>`.
pub(super) const REMOTE_NEEDS: GitNeed = GitNeed {
    what: "--remote",
    since: (2, 29),
    runs: "to fetch and push",
};

/// Reftable refs: `git for-each-ref` and `git update-ref` on them (2.46).
pub(super) const REFTABLE_NEEDS: GitNeed = GitNeed {
    what: "this repository's reftable refs",
    since: (2, 46),
    runs: "to read and write them",
};

/// `git version 2.47.3` (also `2.39.5 (Apple Git-154)`): major and minor.
fn git_version(text: &str) -> Option<(u32, u32)> {
    let version = text.trim().strip_prefix("git version ")?;
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The git check (pure): `found` is git's path and its `--version` line, `None` when there is
/// no git on PATH; `needs` what of kern uses it here.
pub(super) fn git_verdict(found: Option<(&Path, &str)>, needs: &[GitNeed]) -> Check {
    const NAME: &str = "git";
    let newest = needs.iter().max_by_key(|n| n.since);
    let Some((path, line)) = found else {
        return match newest {
            Some(need) => Check::fail(
                NAME,
                format!(
                    "`git` not found on PATH — {} runs git {}",
                    need.what, need.runs
                ),
                format!(
                    "install git {}.{} or newer and put it on PATH",
                    need.since.0, need.since.1
                ),
            ),
            None => Check::pass(
                NAME,
                "not on PATH — nothing here needs it (only --remote and reftable refs do)",
            ),
        };
    };
    let line = line.trim();
    let version = git_version(line);
    let too_old = needs
        .iter()
        .filter(|n| version.is_none_or(|v| v < n.since))
        .max_by_key(|n| n.since);
    match (too_old, newest) {
        (Some(need), _) => Check::fail(
            NAME,
            format!(
                "{line} is older than {} needs ({}.{} or newer)",
                need.what, need.since.0, need.since.1
            ),
            format!(
                "install git {}.{} or newer and put it first on PATH",
                need.since.0, need.since.1
            ),
        ),
        (None, Some(_)) => {
            let enough: Vec<String> = needs
                .iter()
                .map(|n| format!("{} ({}.{} or newer)", n.what, n.since.0, n.since.1))
                .collect();
            Check::pass(
                NAME,
                format!(
                    "{line} (`{}`), enough for {}",
                    path.display(),
                    enough.join(" and ")
                ),
            )
        }
        (None, None) => Check::pass(NAME, format!("{line} (`{}`)", path.display())),
    }
}

/// The `git` program on PATH and its version, against what `needs` of it.
pub(super) async fn git_check(cwd: &Path, needs: &[GitNeed]) -> Check {
    let Some(path) = super::probe::find_on_path(Path::new("git")) else {
        return git_verdict(None, needs);
    };
    let line =
        match super::probe::probe(&path, &["--version"], cwd, super::probe::PROBE_TIMEOUT).await {
            super::probe::Probe::Exited {
                code: Some(0),
                stdout,
                stderr,
            } => super::probe::first_line(&stdout, &stderr),
            other => format!("a git that {}", other.failure()),
        };
    git_verdict(Some((&path, &line)), needs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::doctor::Verdict;

    #[test]
    fn git_is_checked_against_what_needs_it() {
        let path = Path::new("/usr/bin/git");
        let fail = |c: &Check| match &c.verdict {
            Verdict::Fail { fix } => Some(fix.clone()),
            _ => None,
        };
        // (the --version line, what needs git, the detail, the fix)
        type Case<'a> = (Option<&'a str>, &'a [GitNeed], &'a str, Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (
                Some("git version 2.47.3"),
                &[],
                "git version 2.47.3 (`/usr/bin/git`)",
                None,
            ),
            (
                Some("git version 2.29.0"),
                &[REMOTE_NEEDS],
                "git version 2.29.0 (`/usr/bin/git`), enough for --remote (2.29 or newer)",
                None,
            ),
            (
                Some("git version 2.39.5 (Apple Git-154)"),
                &[REMOTE_NEEDS, REFTABLE_NEEDS],
                "git version 2.39.5 (Apple Git-154) is older than this repository's reftable refs needs (2.46 or newer)",
                Some("install git 2.46 or newer and put it first on PATH"),
            ),
            (
                Some("git version 2.28.1"),
                &[REMOTE_NEEDS],
                "git version 2.28.1 is older than --remote needs (2.29 or newer)",
                Some("install git 2.29 or newer and put it first on PATH"),
            ),
            (
                Some("hub version 2.14"),
                &[REMOTE_NEEDS],
                "hub version 2.14 is older than --remote needs (2.29 or newer)",
                Some("install git 2.29 or newer and put it first on PATH"),
            ),
            (
                None,
                &[],
                "not on PATH — nothing here needs it (only --remote and reftable refs do)",
                None,
            ),
            (
                None,
                &[REMOTE_NEEDS],
                "`git` not found on PATH — --remote runs git to fetch and push",
                Some("install git 2.29 or newer and put it on PATH"),
            ),
        ];
        for (line, needs, detail, fix) in cases {
            let check = git_verdict(line.map(|l| (path, l)), needs);
            assert_eq!(check.detail, *detail, "{line:?}");
            assert_eq!(fail(&check).as_deref(), *fix, "{line:?}");
        }
    }
}
