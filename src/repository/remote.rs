//! The git remote of `kern --remote NAME` (DESIGN.md section 18): fetching the target branch and
//! the claims, making a claim's commit, and pushing refs with an explicit expected old value.
//!
//! The one decision a reader must know: a push is git's own `git push --porcelain --atomic`
//! with `--force-with-lease=<ref>:<expected>` for every ref (an empty expected value: the ref
//! must not exist). The expected value travels to the remote as the update's old value, and
//! `git receive-pack` applies all the updates in one ref transaction that fails when any ref is
//! not at its old value: a compare-and-swap done by the remote, never a bare
//! `--force-with-lease` (which a concurrent fetch silently voids). libgit2's push cannot state
//! an old value, so this is the one place kern runs `git` itself. The remote's refs are fetched
//! under `refs/kern/remote/<name>/` (never `refs/remotes/`: an agent's audit counts those).
//! A push that carries work to a branch runs the person's `pre-push` hook as `git push` runs
//! it (unless `--no-verify`), bounded by `--hook-timeout`; a hook that says no is a refusal,
//! like a remote's. Pushes of kern's own refs alone (claims, work in progress) skip it.

use std::path::Path;
use std::process::{Command, Stdio};

use git2::Oid;

use super::Repository;
use crate::error::{Error, Result};
use crate::supervisor::probe::{self, Probe};

/// How a refusal by this clone's own `pre-push` hook starts ([`Pushed::Refused`]).
pub(crate) const PRE_PUSH_DECLINED: &str = "this clone's pre-push hook declined";

/// Where the claims live on the remote.
pub(crate) const CLAIMS: &str = "refs/kern/claims/";

/// Where the usage ledgers live on the remote, one per account (`<account-hash>`).
pub(crate) const PACE: &str = "refs/kern/pace/";

/// What a pushed ref must be on the remote before the push changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expected {
    /// The ref must not exist.
    Absent,
    /// The ref must point at this commit.
    At(Oid),
    /// Whatever it is: the ref is this run's alone (a task branch it parks work on).
    Any,
}

/// One ref a push sets (`new: Some`) or deletes (`new: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefUpdate {
    /// The full ref name on the remote.
    pub(crate) name: String,
    pub(crate) new: Option<Oid>,
    pub(crate) expected: Expected,
}

/// How the remote answered a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Every ref was updated.
    Done,
    /// Nothing was updated: a ref was not at its expected value (someone else moved it).
    Stale,
    /// Nothing was updated: the remote refused (a hook, a protected branch), with its words.
    Refused(String),
}

impl Repository {
    /// `Ok` when `name` is a remote of this clone; else a usage error naming `--remote`.
    pub(crate) fn check_remote(&self, name: &str) -> Result<()> {
        if self.repo.find_remote(name).is_ok() {
            return Ok(());
        }
        let known: Vec<String> = self
            .repo
            .remotes()
            .map(|r| {
                r.iter()
                    .flatten()
                    .flatten()
                    .map(|n| format!("`{n}`"))
                    .collect()
            })
            .unwrap_or_default();
        Err(Error::Usage(format!(
            "--remote `{name}`: this clone has no remote of that name ({}) — give one of `git remote -v`, or add it with `git remote add {name} <url>`",
            if known.is_empty() {
                "it has none".to_string()
            } else {
                format!("it has {}", known.join(", "))
            }
        )))
    }

    /// Fetches the remote's `branch` and every claim into `refs/kern/remote/<remote>/`
    /// (claims gone from the remote are pruned) and returns the branch's tip there.
    pub(crate) fn fetch_remote(&self, remote: &str, branch: &str) -> Result<Oid> {
        let local = remote_branch_ref(remote, branch);
        self.run_git(
            remote,
            "fetching the branch and the claims",
            &[
                "fetch",
                "--quiet",
                "--prune",
                "--no-tags",
                "--no-write-fetch-head",
                remote,
                &format!("+refs/heads/{branch}:{local}"),
                &format!("+{CLAIMS}*:refs/kern/remote/{remote}/claims/*"),
            ],
        )?;
        self.repo
            .refname_to_id(&local)
            .map_err(|e| Error::git(format!("reading `{local}` after the fetch"), e))
    }

    /// Fetches the work in progress a task's last claim holder pushed (`refs/kern/work/<key>`);
    /// `None` when there is none.
    pub(crate) fn fetch_work(&self, remote: &str, key: &str) -> Result<Option<Oid>> {
        let local = format!("refs/kern/remote/{remote}/work/{key}");
        let out = self.git_output(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &format!("+refs/kern/work/{key}:{local}"),
        ])?;
        if !out.status.success() {
            // The ref is not there: no work was pushed.
            return Ok(None);
        }
        Ok(self.repo.refname_to_id(&local).ok())
    }

    /// Fetches the usage ledgers (`refs/kern/pace/*`, [`PACE`]) into
    /// `refs/kern/remote/<remote>/pace/`, bounded by `timeout`, and returns account `key`'s:
    /// its commit and message, `None` when the remote has none. `Err` (with git's words) when
    /// the remote could not be read in time.
    pub(crate) fn fetch_pace(
        &self,
        remote: &str,
        key: &str,
        timeout: std::time::Duration,
    ) -> std::result::Result<Option<(Oid, String)>, String> {
        let args = [
            "fetch".to_string(),
            "--quiet".into(),
            "--prune".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            remote.into(),
            format!("+{PACE}*:refs/kern/remote/{remote}/pace/*"),
        ];
        let mut probe = Probe::new("git", args, &self.top, timeout);
        probe.env = vec![
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
            ("LC_ALL".into(), "C".into()),
        ];
        let ran = probe::run(probe).map_err(|e| e.to_string())?;
        if !ran.end.success() {
            let words = ran.output.lines().last().unwrap_or("").trim().to_string();
            return Err(format!("{}: {words}", ran.end.describe()));
        }
        let local = format!("refs/kern/remote/{remote}/pace/{key}");
        let Ok(oid) = self.repo.refname_to_id(&local) else {
            return Ok(None);
        };
        let message = self
            .repo
            .find_commit(oid)
            .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
            .unwrap_or_default();
        Ok(Some((oid, message)))
    }

    /// The claims as last fetched: task key, claim commit, its message.
    pub(crate) fn fetched_claims(&self, remote: &str) -> Result<Vec<(String, Oid, String)>> {
        let prefix = format!("refs/kern/remote/{remote}/claims/");
        let git = |e: git2::Error| Error::git("reading the fetched claims", e);
        let mut out = Vec::new();
        for r in self
            .repo
            .references_glob(&format!("{prefix}*"))
            .map_err(git)?
        {
            let r = r.map_err(git)?;
            let (Ok(name), Some(oid)) = (r.name(), r.target()) else {
                continue;
            };
            let message = self
                .repo
                .find_commit(oid)
                .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
                .unwrap_or_default();
            out.push((name[prefix.len()..].to_string(), oid, message));
        }
        out.sort();
        Ok(out)
    }

    /// A claim's commit: no parent, the empty tree, `message` (the claim's record).
    pub(crate) fn claim_commit(&self, message: &str) -> Result<Oid> {
        let git = |e: git2::Error| Error::git("making a claim's commit", e);
        let tree = self
            .repo
            .treebuilder(None)
            .and_then(|b| b.write())
            .map_err(git)?;
        let tree = self.repo.find_tree(tree).map_err(git)?;
        let who = git2::Signature::now("kern", "kern@localhost").map_err(git)?;
        self.repo
            .commit(None, &who, &who, message, &tree, &[])
            .map_err(git)
    }

    /// Pushes `updates` to `remote` all or nothing, each only when the remote has it at its
    /// expected value (see the module docs).
    pub(crate) fn push_expecting(&self, remote: &str, updates: &[RefUpdate]) -> Result<Pushed> {
        let verify = runs_pre_push(updates, self.no_verify);
        let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--atomic".into()];
        if !verify {
            args.push("--no-verify".into());
        }
        for u in updates {
            let expected = match u.expected {
                Expected::Absent => String::new(),
                Expected::At(oid) => oid.to_string(),
                Expected::Any => continue,
            };
            args.push(format!("--force-with-lease={}:{expected}", u.name));
        }
        args.push(remote.into());
        for u in updates {
            let force = if u.expected == Expected::Any { "+" } else { "" };
            match u.new {
                Some(oid) => args.push(format!("{force}{oid}:{}", u.name)),
                None => args.push(format!("{force}:{}", u.name)),
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if !verify {
            let out = self.git_output(&args)?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            return match push_verdict(&stdout, out.status.success()) {
                Some(pushed) => Ok(pushed),
                None => Err(remote_error(remote, "pushing", &out.stderr)),
            };
        }
        // git runs the pre-push hook: bounded as kern bounds every hook (`--hook-timeout`).
        let mut stdout = tempfile::tempfile().map_err(|e| Error::io("a temporary file", e))?;
        let mut probe = Probe::new("git", args, &self.top, self.hook_timeout);
        probe.env = vec![
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
            ("LC_ALL".into(), "C".into()),
        ];
        probe.stdout = Some(
            stdout
                .try_clone()
                .map_err(|e| Error::io("a temporary file", e))?,
        );
        let ran = probe::run(probe).map_err(|e| Error::io(Path::new("git"), e))?;
        let porcelain = probe::read_tail(&mut stdout, 1 << 20);
        let hook = self.hooks_dir().join("pre-push");
        match push_verdict(&porcelain, ran.end.success()) {
            Some(pushed) => Ok(pushed),
            // git stopped before the remote: the hook said no (or ran out of time).
            None if is_executable(&hook) && !ran.output.contains("fatal:") => {
                Ok(Pushed::Refused(format!(
                    "{PRE_PUSH_DECLINED} ({}): {}",
                    ran.end.describe(),
                    hook_words(&ran.output)
                )))
            }
            None => Err(remote_error(remote, "pushing", ran.output.as_bytes())),
        }
    }

    /// Runs `git ARGS` in the work tree; a failure is an error naming the remote.
    fn run_git(&self, remote: &str, what: &str, args: &[&str]) -> Result<()> {
        let out = self.git_output(args)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(remote_error(remote, what, &out.stderr))
        }
    }

    fn git_output(&self, args: &[&str]) -> Result<std::process::Output> {
        Command::new("git")
            .arg("-C")
            .arg(&self.top)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(Path::new("git"), e))
    }
}

/// True when a push of `updates` runs the person's `pre-push` hook, as `git push` would: it
/// carries work to a branch (`refs/heads/…`), and `--no-verify` is off. A push of kern's own
/// refs alone (claims, work in progress, the ledger) is kern's bookkeeping, not the person's
/// push, and skips it.
fn runs_pre_push(updates: &[RefUpdate], no_verify: bool) -> bool {
    !no_verify && updates.iter().any(|u| u.name.starts_with("refs/heads/"))
}

/// The hook's own words from git's output, without git's closing `error: failed to push`.
fn hook_words(output: &str) -> String {
    let words: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("error: failed to push"))
        .collect();
    if words.is_empty() {
        "it printed nothing".to_string()
    } else {
        words
            .iter()
            .rev()
            .take(3)
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// True for an executable file (a hook git would run).
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where the remote's `branch` is fetched to.
pub(crate) fn remote_branch_ref(remote: &str, branch: &str) -> String {
    format!("refs/kern/remote/{remote}/heads/{branch}")
}

fn remote_error(remote: &str, what: &str, stderr: &[u8]) -> Error {
    let text = String::from_utf8_lossy(stderr);
    let detail = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect::<Vec<_>>()
        .join("; ");
    Error::Remote {
        remote: remote.to_string(),
        what: what.to_string(),
        detail,
    }
}

/// What `git push --porcelain --atomic` said, from its status lines (`<flag>\t<from>:<to>\t
/// <summary>`); `None` when it printed none (the remote was not reached).
fn push_verdict(porcelain: &str, success: bool) -> Option<Pushed> {
    let lines: Vec<(&str, &str)> = porcelain
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let flag = parts.next()?;
            let _refs = parts.next()?;
            Some((flag, parts.next().unwrap_or("")))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    if success && lines.iter().all(|(flag, _)| *flag != "!") {
        return Some(Pushed::Done);
    }
    let refused = lines.iter().find(|(flag, summary)| {
        *flag == "!"
            && summary.starts_with("[remote rejected]")
            && ["declined", "denied", "protected", "refus"]
                .iter()
                .any(|w| summary.contains(w))
    });
    Some(match refused {
        Some((_, summary)) => Pushed::Refused(summary.to_string()),
        None => Pushed::Stale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pre_push_hook_runs_for_work_pushed_to_a_branch_only() {
        let update = |name: &str| RefUpdate {
            name: name.into(),
            new: None,
            expected: Expected::Any,
        };
        let cases = [
            (
                vec![update("refs/heads/master"), update(CLAIMS)],
                false,
                true,
            ),
            (vec![update("refs/heads/kern/a")], false, true),
            (vec![update("refs/heads/master")], true, false),
            (vec![update("refs/kern/claims/a")], false, false),
            (vec![update("refs/kern/work/a")], false, false),
        ];
        for (updates, no_verify, runs) in cases {
            assert_eq!(runs_pre_push(&updates, no_verify), runs, "{updates:?}");
        }
        assert_eq!(
            hook_words("tests failed\nerror: failed to push some refs to 'x'\n"),
            "tests failed"
        );
        assert_eq!(
            hook_words("error: failed to push some refs\n"),
            "it printed nothing"
        );
    }

    #[test]
    fn a_push_is_done_stale_or_refused_by_its_status_lines() {
        let table: &[(&str, bool, Option<Pushed>)] = &[
            ("", false, None),
            ("To /r\nDone\n", true, None),
            (
                "To /r\n \tabc:refs/kern/claims/a\t[new reference]\nDone\n",
                true,
                Some(Pushed::Done),
            ),
            (
                "To /r\n=\tabc:refs/heads/kern/a\t[up to date]\nDone\n",
                true,
                Some(Pushed::Done),
            ),
            (
                "To /r\n!\tabc:refs/kern/claims/a\t[rejected] (stale info)\nDone\n",
                false,
                Some(Pushed::Stale),
            ),
            (
                "To /r\n!\tabc:refs/heads/master\t[remote rejected] (failed to update ref)\n!\t:refs/kern/claims/a\t[remote rejected] (atomic transaction failed)\nDone\n",
                false,
                Some(Pushed::Stale),
            ),
            (
                "To /r\n!\tabc:refs/heads/master\t[remote rejected] (pre-receive hook declined)\n!\t:refs/kern/claims/a\t[remote rejected] (atomic push failed)\nDone\n",
                false,
                Some(Pushed::Refused(
                    "[remote rejected] (pre-receive hook declined)".into(),
                )),
            ),
        ];
        for (out, ok, want) in table {
            assert_eq!(push_verdict(out, *ok), *want, "{out}");
        }
    }
}
