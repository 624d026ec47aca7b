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
//!
//! A fetch races the other machines: git lists the remote's refs, then asks for their objects,
//! and a claim created, renewed or freed in between makes the remote answer `upload-pack: not
//! our ref <id>` (another git updating this clone's fetched refs makes it `cannot lock ref`).
//! Such a fetch is run again, the refs listed anew, after a backoff ([`FETCH_RETRIES`] times);
//! [`fetch_failure`] is the pure call of which of git's words are such a race, which mean a
//! ref that is not there, and which a remote that cannot be used (the run stops, exit 2).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use backoff::backoff::Backoff;

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

/// How many times a fetch that met a ref moving under it is run again before kern gives up.
pub(crate) const FETCH_RETRIES: usize = 5;

/// The first wait before a fetch is run again; each next one doubles (with jitter).
const FETCH_FIRST_DELAY: Duration = Duration::from_millis(200);

/// The longest wait before a fetch is run again.
const FETCH_MAX_DELAY: Duration = Duration::from_secs(4);

/// What a failed `git fetch` means, from git's words ([`fetch_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchFailure {
    /// A ref moved or vanished under the fetch — another machine's claim update between git's
    /// listing of the remote's refs and its request for their objects, or another git updating
    /// this clone's fetched refs: the same fetch, run again, lists the refs anew.
    Raced,
    /// A ref asked for by name is not on the remote.
    NoSuchRef,
    /// The remote cannot be used as it is: unreachable, not a repository, credentials refused.
    Fatal,
}

/// A fetch that did not succeed: what git's words mean, the words, and how many times it ran.
#[derive(Debug)]
struct FetchFailed {
    failure: FetchFailure,
    words: String,
    tries: usize,
}

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
        let fetched = self.fetch_retrying(&[
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &format!("+refs/heads/{branch}:{local}"),
            &format!("+{CLAIMS}*:refs/kern/remote/{remote}/claims/*"),
        ])?;
        if let Err(failed) = fetched {
            return Err(fetch_error(
                remote,
                &format!("fetching the branch and the claims (`refs/heads/{branch}`, `{CLAIMS}*`)"),
                &failed,
            ));
        }
        self.repo
            .refname_to_id(&local)
            .map_err(|e| Error::git(format!("reading `{local}` after the fetch"), e))
    }

    /// Fetches the work in progress a task's last claim holder pushed (`refs/kern/work/<key>`);
    /// `None` when there is none. A remote that cannot be read is an error: the work may be
    /// there, and a task started without it would do it again.
    pub(crate) fn fetch_work(&self, remote: &str, key: &str) -> Result<Option<Oid>> {
        let local = format!("refs/kern/remote/{remote}/work/{key}");
        let fetched = self.fetch_retrying(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &format!("+refs/kern/work/{key}:{local}"),
        ])?;
        match fetched {
            Ok(()) => Ok(self.repo.refname_to_id(&local).ok()),
            // The ref is not there: no work was pushed.
            Err(failed) if failed.failure == FetchFailure::NoSuchRef => Ok(None),
            Err(failed) => Err(fetch_error(
                remote,
                &format!("fetching the work in progress (`refs/kern/work/{key}`)"),
                &failed,
            )),
        }
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
        let fetched = retrying(|| -> std::result::Result<Option<String>, String> {
            let mut probe = Probe::new("git", args.clone(), &self.top, timeout);
            probe.env = vec![
                ("GIT_TERMINAL_PROMPT".into(), "0".into()),
                ("LC_ALL".into(), "C".into()),
            ];
            let ran = probe::run(probe).map_err(|e| e.to_string())?;
            Ok(if ran.end.success() {
                None
            } else {
                Some(format!("{}\n{}", ran.end.describe(), ran.output.trim()))
            })
        })?;
        if let Err(failed) = fetched {
            let (how, words) = failed.words.split_once('\n').unwrap_or((&failed.words, ""));
            let last = words.lines().last().unwrap_or("").trim();
            return Err(match failed.failure {
                FetchFailure::Raced => format!(
                    "{how}: {last} (fetched {} times, a ref moved or was locked under each fetch)",
                    failed.tries
                ),
                _ => format!("{how}: {last}"),
            });
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

    /// Runs `git ARGS` (a fetch) in the work tree, again while it meets a ref moving under it
    /// ([`retrying`]); `Err` inside: how it failed in the end.
    fn fetch_retrying(&self, args: &[&str]) -> Result<std::result::Result<(), FetchFailed>> {
        retrying(|| {
            let out = self.git_output(args)?;
            Ok(if out.status.success() {
                None
            } else {
                Some(String::from_utf8_lossy(&out.stderr).into_owned())
            })
        })
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

/// Runs `fetch` (`None`: it succeeded; `Some`: git's words of its failure) until it succeeds,
/// fails otherwise than by a race, or has been run again [`FETCH_RETRIES`] times, waiting the
/// backoff's delay between tries ([`refetch_after`]). `Err` inside: how it failed in the end.
fn retrying<E>(
    mut fetch: impl FnMut() -> std::result::Result<Option<String>, E>,
) -> std::result::Result<std::result::Result<(), FetchFailed>, E> {
    let delays = fetch_delays();
    let mut tries = 0;
    loop {
        let failed = fetch()?;
        tries += 1;
        let Some(words) = failed else {
            return Ok(Ok(()));
        };
        let failure = fetch_failure(&words);
        match refetch_after(failure, tries, &delays) {
            Some(delay) => {
                tracing::info!(
                    tries,
                    error = %words.trim().replace('\n', "; "),
                    "a ref moved under the fetch: fetching again in {delay:?}"
                );
                std::thread::sleep(delay);
            }
            None => {
                return Ok(Err(FetchFailed {
                    failure,
                    words,
                    tries,
                }));
            }
        }
    }
}

/// The waits before each fetch run again: [`FETCH_RETRIES`] of them, doubling from
/// [`FETCH_FIRST_DELAY`] with ±25 % jitter (the `backoff` crate), never above
/// [`FETCH_MAX_DELAY`].
fn fetch_delays() -> Vec<Duration> {
    let mut backoff = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(FETCH_FIRST_DELAY)
        .with_randomization_factor(0.25)
        .with_multiplier(2.0)
        .with_max_interval(FETCH_MAX_DELAY)
        .with_max_elapsed_time(None)
        .build();
    (0..FETCH_RETRIES)
        .map(|_| {
            backoff
                .next_backoff()
                .unwrap_or(FETCH_MAX_DELAY)
                .min(FETCH_MAX_DELAY)
        })
        .collect()
}

/// After a fetch failed with `failure` on its `tries`-th run: the wait before running it
/// again, `None` to give up (not a race, or `delays` — one per retry — are spent). Pure.
fn refetch_after(failure: FetchFailure, tries: usize, delays: &[Duration]) -> Option<Duration> {
    match failure {
        FetchFailure::Raced => delays.get(tries.checked_sub(1)?).copied(),
        FetchFailure::NoSuchRef | FetchFailure::Fatal => None,
    }
}

/// What a failed `git fetch` means, from its words (run with `LC_ALL=C`). Pure.
///
/// - A race ([`FetchFailure::Raced`]): the remote's `upload-pack: not our ref <id>` (a ref
///   listed moved or vanished before its object was asked for: protocol v2 refuses a `want`
///   for an object the remote cannot read, v0 and stateless HTTP one that is no longer a
///   ref's tip unless `uploadpack.allowReachableSHA1InWant`), the client's `unadvertised
///   object` and `did not send all necessary objects`, and this clone's `cannot lock ref` /
///   `is at … but expected …` / `some local refs could not be updated` / a `.lock` that
///   exists (another git updating the same fetched refs).
/// - A ref that is not there ([`FetchFailure::NoSuchRef`]): `couldn't find remote ref`.
/// - Anything else is [`FetchFailure::Fatal`]: the remote is unreachable, not a repository,
///   refuses the credentials — running the fetch again would not help.
pub(crate) fn fetch_failure(words: &str) -> FetchFailure {
    let words = words.to_ascii_lowercase();
    let raced = [
        "not our ref",
        "cannot lock ref",
        "but expected",
        "some local refs could not be updated",
        "unable to update local ref",
        ".lock': file exists",
        "did not send all necessary objects",
        "unadvertised object",
    ];
    if raced.iter().any(|w| words.contains(w)) {
        FetchFailure::Raced
    } else if words.contains("couldn't find remote ref") {
        FetchFailure::NoSuchRef
    } else {
        FetchFailure::Fatal
    }
}

/// The error of a fetch that failed in the end: git's words, and when refs kept moving under
/// it, how many times it ran.
fn fetch_error(remote: &str, what: &str, failed: &FetchFailed) -> Error {
    let mut error = remote_error(remote, what, failed.words.as_bytes());
    if let Error::Remote { detail, .. } = &mut error
        && failed.failure == FetchFailure::Raced
    {
        detail.push_str(&format!(
            " (fetched {} times, a ref moved or was locked under each fetch: another machine or git process keeps changing it)",
            failed.tries
        ));
    }
    error
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
    fn a_fetch_failure_is_a_race_a_missing_ref_or_fatal_by_gits_words() {
        use FetchFailure::{Fatal, NoSuchRef, Raced};
        let zeros = "0".repeat(40);
        let claim = "6a53a73f95aa6e5029a48464e746cf55079f3dfa";
        let table: Vec<(String, FetchFailure)> = vec![
            // The remote: a claim moved or went between git's listing and its `want`.
            (
                format!("fatal: git upload-pack: not our ref {zeros}\nfatal: remote error: upload-pack: not our ref {zeros}\n"),
                Raced,
            ),
            (
                format!("fatal: remote error: upload-pack: not our ref {claim}\nfatal: the remote end hung up unexpectedly\n"),
                Raced,
            ),
            (
                "error: Server does not allow request for unadvertised object 6a53a73f\nfatal: remote did not send all necessary objects\n".into(),
                Raced,
            ),
            // This clone: another git updating the same fetched refs.
            (
                format!("error: cannot lock ref 'refs/kern/remote/origin/claims/t0': is at {claim} but expected {zeros}\n ! 6a53a73f...0000000 refs/kern/claims/t0 -> refs/kern/remote/origin/claims/t0  (unable to update local ref)\n"),
                Raced,
            ),
            (
                "error: cannot lock ref 'refs/kern/remote/origin/heads/master': Unable to create '/c/.git/refs/kern/remote/origin/heads/master.lock': File exists.\n".into(),
                Raced,
            ),
            (
                "error: some local refs could not be updated; try running\n 'git remote prune origin' to remove any old, conflicting branches\n".into(),
                Raced,
            ),
            // A ref asked for by name that is not there.
            (
                "fatal: couldn't find remote ref refs/kern/work/task-1\n".into(),
                NoSuchRef,
            ),
            (
                "fatal: couldn't find remote ref refs/heads/master\n".into(),
                NoSuchRef,
            ),
            // A remote that cannot be used.
            (
                "fatal: '/r/gone.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n".into(),
                Fatal,
            ),
            (
                "ssh: Could not resolve hostname git.example: Name or service not known\nfatal: Could not read from remote repository.\n".into(),
                Fatal,
            ),
            (
                "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.\n".into(),
                Fatal,
            ),
            (
                "remote: Repository not found.\nfatal: repository 'https://github.com/a/b.git/' not found\n".into(),
                Fatal,
            ),
            (
                "fatal: unable to access 'https://git.example/r.git/': Failed to connect to git.example port 443: Connection refused\n".into(),
                Fatal,
            ),
            (String::new(), Fatal),
        ];
        for (words, want) in &table {
            assert_eq!(fetch_failure(words), *want, "{words}");
        }
    }

    #[test]
    fn only_a_race_is_fetched_again_once_per_delay() {
        use FetchFailure::{Fatal, NoSuchRef, Raced};
        let delays = [
            Duration::from_millis(200),
            Duration::from_millis(400),
            Duration::from_millis(800),
        ];
        // (failure, the run that failed, the wait before the next)
        let table = [
            (Raced, 1, Some(Duration::from_millis(200))),
            (Raced, 2, Some(Duration::from_millis(400))),
            (Raced, 3, Some(Duration::from_millis(800))),
            (Raced, 4, None),
            (Raced, 0, None),
            (NoSuchRef, 1, None),
            (Fatal, 1, None),
        ];
        for (failure, tries, want) in table {
            assert_eq!(
                refetch_after(failure, tries, &delays),
                want,
                "{failure:?} on run {tries}"
            );
        }
        let delays = fetch_delays();
        assert_eq!(delays.len(), FETCH_RETRIES);
        for (i, delay) in delays.iter().enumerate() {
            let base = FETCH_FIRST_DELAY.as_secs_f64() * 2f64.powi(i as i32);
            let low = Duration::from_secs_f64((base * 0.75).min(FETCH_MAX_DELAY.as_secs_f64()));
            assert!(
                *delay >= low.saturating_sub(Duration::from_millis(1)) && *delay <= FETCH_MAX_DELAY,
                "delay {i}: {delay:?}"
            );
        }
    }

    #[test]
    fn a_fetch_is_run_again_while_it_races_and_says_so_when_it_gives_up() {
        let not_our_ref = "fatal: remote error: upload-pack: not our ref 0000000000000000000000000000000000000000\n";
        let mut runs = 0;
        let fetched = retrying(|| -> std::result::Result<_, ()> {
            runs += 1;
            Ok((runs < 3).then(|| not_our_ref.to_string()))
        });
        assert!(matches!(fetched, Ok(Ok(()))));
        assert_eq!(runs, 3, "two races, then the fetch went through");
        let mut runs = 0;
        let gone = retrying(|| -> std::result::Result<_, ()> {
            runs += 1;
            Ok(Some(
                "fatal: '/r' does not appear to be a git repository\n".to_string(),
            ))
        });
        let Ok(Err(failed)) = gone else {
            panic!("a remote that is gone fails");
        };
        assert_eq!(
            (runs, failed.tries, failed.failure),
            (1, 1, FetchFailure::Fatal)
        );
        let error = fetch_error("origin", "fetching the branch", &failed).to_string();
        assert!(
            error.contains(
                "--remote `origin`: fetching the branch failed: fatal: '/r' does not appear"
            ),
            "{error}"
        );
        assert!(!error.contains("fetched"), "{error}");
        let raced = FetchFailed {
            failure: FetchFailure::Raced,
            words: not_our_ref.into(),
            tries: FETCH_RETRIES + 1,
        };
        let error = fetch_error("origin", "fetching the branch", &raced).to_string();
        assert!(
            error.contains("upload-pack: not our ref 0000000000000000000000000000000000000000 (fetched 6 times, a ref moved or was locked under each fetch"),
            "{error}"
        );
        assert!(
            error.contains("check that `git fetch origin` works"),
            "{error}"
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
