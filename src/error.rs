//! One error type for kern, and the one place exit codes live.
//!
//! Every failure a person can meet is a variant here, named subject-then-failure, carrying the
//! paths and names it concerns and, where there is one, the fix. `main.rs` prints the message
//! and exits with [`Error::exit_code`]; nothing else in kern chooses an exit code. The ends of a
//! run that are not failures of kern itself but still must not exit 0 (a blocked task, a spent
//! budget, an interruption) are variants too, so that this stays the only table.

use std::path::PathBuf;

/// kern's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit code: done, nothing left or all iterations ran, or the night's deadline came (a planned
/// end, not a new code: a CI job ended by `--deadline` stays green).
pub const EXIT_OK: u8 = 0;
/// Exit code: internal or I/O failure; `kern watch` gave up on a run that kept dying or
/// stalling.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: usage error, invalid SPEC.md (tasks whose After notes wait for each other
/// among it) or template, dirty tree, unusable repository.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: another kern holds the lock for this project and branch (or, for `kern watch`,
/// another watchdog watches it).
pub const EXIT_LOCKED: u8 = 3;
/// Exit code: finished, but a task is blocked (the open tasks that wait on it named in the
/// end line) or the last task failed.
pub const EXIT_UNFINISHED: u8 = 4;
/// Exit code: the agent needs the user (missing, not logged in, rejected its arguments).
pub const EXIT_AGENT_NEEDS_USER: u8 = 5;
/// Exit code: the `--max-cost` budget is spent.
pub const EXIT_BUDGET: u8 = 6;

/// How many changed paths [`Error::dirty_tree`] names before it counts the rest.
pub const DIRTY_NAMED: usize = 10;

/// Everything that can go wrong in kern.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Command-line input that clap cannot judge alone (a bad `--agent`, a bad duration).
    #[error("{0}")]
    Usage(String),

    /// SPEC.md does not exist.
    #[error("`{}` not found — run `kern init` to write a starter SPEC.md, or pass --spec PATH", path.display())]
    SpecMissing {
        /// The path kern looked at.
        path: PathBuf,
    },

    /// SPEC.md failed validation; `report` holds one `FILE:LINE:COL: message — fix` per line.
    #[error("{report}")]
    SpecInvalid {
        /// The rendered diagnostics, one per line.
        report: String,
    },

    /// SPEC.md cannot be used as it is: each diagnostic names `FILE:LINE:COL`, what is wrong
    /// and the fix (not UTF-8 text, a malformed task marker, an edit of kern's that would
    /// change how the lines around it read). `kern status --json` prints them as data.
    #[error("{}", diagnostics.iter().map(|d| d.render(file)).collect::<Vec<_>>().join("\n"))]
    SpecRefused {
        /// The task list as shown in messages (as given, relative to where kern runs).
        file: String,
        /// What is wrong, where, and the fix; at least one.
        diagnostics: Vec<crate::spec::Diagnostic>,
    },

    /// An edit of SPEC.md could not be applied or verified; the file is unchanged.
    #[error("`{}`: {message}", path.display())]
    SpecEdit {
        /// The SPEC.md path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },

    /// A prompt template is broken (unknown placeholder, bad front matter).
    #[error("`{}:{line}`: {message}", path.display())]
    Template {
        /// The template file (or its embedded name).
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and the fix.
        message: String,
    },

    /// A prompt override that parses but cannot work: empty, without `{TASK}`, or a file in
    /// `.kern/prompts/` kern would never read.
    #[error("`{}`: {message}", path.display())]
    TemplateUnusable {
        /// The file in `.kern/prompts/`.
        path: PathBuf,
        /// What is wrong and the fix.
        message: String,
    },

    /// A new task may only start on a clean tree.
    #[error(
        "the work tree has uncommitted changes: {} — commit or stash them, or pass --allow-dirty to leave them out of kern's commits",
        files.join(", ")
    )]
    DirtyTree {
        /// The changed paths, relative to the work tree (see [`Error::dirty_tree`]).
        files: Vec<String>,
    },

    /// A task to be tested first (`> **Tests:** first`, `--tests-first`) with no command to
    /// test it with.
    #[error(
        "task {} ({spec}:{line}) is to be tested first but has no command — write `> **Tests:** first <command>`, add a `> **Check:** <command>` note, or pass --check",
        crate::spec::Quoted(title)
    )]
    TestsFirstCommand {
        /// The task's title.
        title: String,
        /// SPEC.md as the person names it.
        spec: String,
        /// The task's line.
        line: usize,
    },

    /// The repository cannot be used as it is (not a repository, bare, merge in progress…).
    #[error("{0}")]
    Repository(String),

    /// The repository is in a format kern cannot read: a split index, reftable refs with no git
    /// to read them.
    #[error("`{}` {what}, which kern cannot read yet — {fix}", path.display())]
    RepositoryFormat {
        /// The repository's git folder.
        path: PathBuf,
        /// What it is, as a clause (`is a SHA-256 repository`).
        what: String,
        /// The exact fix.
        fix: String,
    },

    /// The repository disappeared while kern ran (an agent deleted `.git`): nothing can be
    /// committed or put back; the state folder still holds what the stages produced.
    #[error(
        "the repository is gone: `{}` no longer exists, so kern can neither commit nor put anything back — the state folder `{}` still holds the task's stage files (`stageN.json`, the prompts, the agents' output) and `run.jsonl`; restore `.git` (from a clone or a backup) and run kern again to resume the task",
        git_dir.display(),
        state_dir.display()
    )]
    RepositoryGone {
        /// The repository's git folder, as it was when the run began.
        git_dir: PathBuf,
        /// The run's state folder.
        state_dir: PathBuf,
    },

    /// git's own `index.lock` is present and was not left by a dead kern.
    #[error(
        "`{}` exists: another git process may be running — if none is, remove the file and run kern again",
        path.display()
    )]
    IndexLocked {
        /// The lock file.
        path: PathBuf,
    },

    /// The check command fails before any agent ran: every task would fail its gate.
    #[error(
        "the check `{command}` fails before any change, so every task would fail it — fix what it reports, change --check, or pass --check-baseline=skip:\n{output}"
    )]
    CheckFailsAtBaseline {
        /// The check command.
        command: String,
        /// The last lines of its output.
        output: String,
    },

    /// git has no author identity configured.
    #[error(
        "git has no author identity — run `git config --global user.name \"Your Name\"` and `git config --global user.email you@example.com`"
    )]
    GitIdentity,

    /// A libgit2 call failed.
    #[error("git: {context}: {source}")]
    Git {
        /// What kern was doing.
        context: String,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },

    /// A git hook (`pre-commit`, `commit-msg`) refused the commit; nothing was committed.
    #[error(
        "the `{hook}` hook failed, nothing was committed — fix what it reports, or pass --no-verify to skip hooks:\n{output}"
    )]
    HookFailed {
        /// The hook's name.
        hook: String,
        /// The tail of the hook's combined stdout and stderr.
        output: String,
    },

    /// A `commit-msg` or `prepare-commit-msg` hook refused the message; nothing was committed.
    /// The work is fine: the loop may ask for another message.
    #[error(
        "the `{hook}` hook refused the commit message, nothing was committed — {}:\n{output}",
        message_hook_fix(hook)
    )]
    CommitMessageRefused {
        /// The hook's name.
        hook: String,
        /// The tail of the hook's combined stdout and stderr.
        output: String,
    },

    /// A filter driver `.gitattributes` names is required but kern cannot run it.
    #[error(
        "the `{driver}` filter is required (`filter.{driver}.required`) but kern cannot run it: {why}"
    )]
    FilterUnusable {
        /// The driver's name (`lfs`).
        driver: String,
        /// Why, with the fix.
        why: String,
    },

    /// A required filter driver's clean command failed; nothing was committed.
    #[error(
        "the `{driver}` clean filter failed on `{path}`, nothing was committed — fix the filter (`git add {path}` shows git's view of it):\n{output}"
    )]
    FilterFailed {
        /// The driver's name.
        driver: String,
        /// The file it failed on.
        path: String,
        /// The tail of its output, and how it ended.
        output: String,
    },

    /// Signing is on with a format kern cannot sign with.
    #[error(
        "commits must be signed (`commit.gpgsign`) with `gpg.format` `{format}`, which kern cannot sign with — use openpgp or ssh, or turn signing off for this repository (`git config commit.gpgsign false`)"
    )]
    SigningUnsupported {
        /// The configured `gpg.format`.
        format: String,
    },

    /// Signing is on and the commit could not be signed; nothing was committed.
    #[error("cannot sign the commit ({format}): {message}")]
    SigningFailed {
        /// `openpgp` or `ssh`.
        format: String,
        /// What went wrong, with the fix.
        message: String,
    },

    /// Another kern holds the run lock for this project and branch.
    #[error("another kern is running on this project and branch ({holder}); lock `{}`", path.display())]
    LockHeld {
        /// The lock file.
        path: PathBuf,
        /// Who holds it: pid, host, since when, phase.
        holder: String,
    },

    /// The agent cannot run without the person (missing binary, not logged in, bad key…).
    #[error("{message}")]
    AgentNeedsUser {
        /// What is wrong and what to do.
        message: String,
    },

    /// kern's fence cannot be made here (`--sandbox kern`, the default): nothing was run
    /// unfenced (see `sandbox::preflight`).
    #[error("kern's fence cannot be made here: {missing} — {fix}")]
    SandboxUnavailable {
        /// What is missing.
        missing: String,
        /// The ways out.
        fix: String,
    },

    /// A folder of the state tree is not the user's alone (another owner, writable by others,
    /// a symlink): kern stops before any agent runs (see `state::privacy`).
    #[error("state folder `{}` {problem}: owner {owner}, mode {mode:04o} — {fix}", path.display())]
    StateFolderUnsafe {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// Its owner: `` `name` (uid N) ``.
        owner: String,
        /// Its permission bits.
        mode: u32,
        /// The fix.
        fix: String,
    },

    /// A file could not be read or written.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A disk is full: kern stops before it leaves half-written state behind.
    #[error(
        "no space left on the device holding `{}` — free some space and run kern again; kern's own state folders are under the state root (`kern status --dir` shows this project's) and old ones can be deleted",
        path.display()
    )]
    NoSpace {
        /// The file kern was writing.
        path: PathBuf,
    },

    /// A bug or an impossible state; the message says where.
    #[error("internal error: {0}")]
    Internal(String),

    /// The run finished, but a task is blocked or the last task failed.
    #[error("{0}")]
    Unfinished(String),

    /// The `--max-cost` budget is spent.
    #[error("the cost budget is spent: {} of {} — raise --max-cost to go on", crate::text::cost(*.spent), crate::text::cost(*.limit))]
    BudgetSpent {
        /// What the run cost so far, in USD.
        spent: f64,
        /// The budget, in USD.
        limit: f64,
    },

    /// `kern doctor` found problems; it printed each with its fix.
    #[error(
        "doctor found {problems} problem{} — fix each ✗ above as its `fix:` line says, then run `kern doctor` again",
        if *.problems == 1 { "" } else { "s" }
    )]
    DoctorFound {
        /// How many checks failed.
        problems: usize,
        /// True when only the agent's checks failed (exit 5, else 2).
        agent_only: bool,
    },

    /// Another `kern watch` watches this project and branch.
    #[error(
        "another kern watch is watching this project and branch ({holder}) — stop it with `kill {pid}`, or let it go on; `{}`",
        path.display()
    )]
    WatchHeld {
        /// Its `watch.lock`.
        path: PathBuf,
        /// Its pid.
        pid: i32,
        /// Who it is: pid, since when, its run.
        holder: String,
    },

    /// The run `kern watch` watched ended by itself with a code other than 0: the watchdog
    /// ends with it.
    #[error("the watched run ended with exit {code}: {ended}")]
    WatchEnded {
        /// The run's exit code, which the watchdog exits with too.
        code: u8,
        /// How the run said it ended.
        ended: String,
    },

    /// `kern watch` gave up on a run that kept dying or stalling and left it stopped.
    #[error("{why}")]
    WatchGaveUp {
        /// What happened, with where to look.
        why: String,
    },

    /// The run `--detach` started in the background ended before it took the lock.
    #[error("the background run ended at once (exit {code}) — `{}` says why:\n{tail}", log.display())]
    DetachedRunEnded {
        /// Its exit code, which this command exits with too.
        code: u8,
        /// Its `run.log`.
        log: PathBuf,
        /// The last lines of it.
        tail: String,
    },

    /// The git remote of `--remote` could not be read or written (unreachable, no such branch).
    #[error(
        "--remote `{remote}`: {what} failed: {detail} — check that `git fetch {remote}` works from this clone (network, credentials, the branch exists there), then run kern again"
    )]
    Remote {
        /// The remote's name.
        remote: String,
        /// What kern was doing.
        what: String,
        /// git's own words.
        detail: String,
    },

    /// The night's deadline (`--until`, `--deadline`) ends the run: a planned end, which the
    /// loop turns into an exit 0 with `why` as how it ended (DESIGN.md section 20); the task
    /// in progress resumes on the next run.
    #[error("the deadline {shown} ends the night: {why}")]
    DeadlineReached {
        /// The deadline.
        at: crate::timestamp::Timestamp,
        /// It as the person reads it (`07:00`).
        shown: String,
        /// Why no more is done: what would have crossed it, or what was stopped at it.
        why: String,
    },

    /// The tracker's CLI (`gh`) could not do what `kern import` asked; nothing was written.
    #[error("{what}: {why} — {fix}; nothing was written")]
    Tracker {
        /// What kern asked (`listing the open issues of acme/app`).
        what: String,
        /// Why it failed, with gh's own words.
        why: String,
        /// What the person can do.
        fix: String,
    },

    /// SIGINT or SIGTERM stopped the run; the resume state is kept.
    #[error("interrupted by {} — the task resumes where it stopped on the next run", signal_name(*.signal))]
    Interrupted {
        /// The signal number (2 or 15).
        signal: i32,
    },
}

impl Error {
    /// The process exit code for this error (DESIGN.md section 11).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_)
            | Error::SpecMissing { .. }
            | Error::SpecInvalid { .. }
            | Error::SpecRefused { .. }
            | Error::Template { .. }
            | Error::TemplateUnusable { .. }
            | Error::DirtyTree { .. }
            | Error::TestsFirstCommand { .. }
            | Error::Repository(_)
            | Error::RepositoryFormat { .. }
            | Error::RepositoryGone { .. }
            | Error::IndexLocked { .. }
            | Error::CheckFailsAtBaseline { .. }
            | Error::GitIdentity
            | Error::FilterUnusable { .. }
            | Error::FilterFailed { .. }
            | Error::SigningUnsupported { .. }
            | Error::SigningFailed { .. }
            | Error::StateFolderUnsafe { .. }
            | Error::SandboxUnavailable { .. }
            | Error::Remote { .. }
            | Error::Tracker { .. } => EXIT_USAGE,
            Error::LockHeld { .. } | Error::WatchHeld { .. } => EXIT_LOCKED,
            Error::Unfinished(_) => EXIT_UNFINISHED,
            Error::AgentNeedsUser { .. } => EXIT_AGENT_NEEDS_USER,
            Error::BudgetSpent { .. } => EXIT_BUDGET,
            Error::Interrupted { signal } => (128 + signal) as u8,
            Error::DeadlineReached { .. } => EXIT_OK,
            Error::DetachedRunEnded { code, .. } | Error::WatchEnded { code, .. } => *code,
            Error::DoctorFound { agent_only, .. } => {
                if *agent_only {
                    EXIT_AGENT_NEEDS_USER
                } else {
                    EXIT_USAGE
                }
            }
            Error::SpecEdit { .. }
            | Error::WatchGaveUp { .. }
            | Error::Git { .. }
            | Error::HookFailed { .. }
            | Error::CommitMessageRefused { .. }
            | Error::Io { .. }
            | Error::NoSpace { .. }
            | Error::Internal(_) => EXIT_FAILURE,
        }
    }

    /// Wraps an I/O error with the path it concerns; a full disk is [`Error::NoSpace`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        if source.raw_os_error() == Some(nix::libc::ENOSPC)
            || source.kind() == std::io::ErrorKind::StorageFull
        {
            return Error::NoSpace { path: path.into() };
        }
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// [`Error::DirtyTree`] for `paths`, naming the first [`DIRTY_NAMED`] of them and how many
    /// more there are (a tree with thousands of changes stays one readable line).
    pub fn dirty_tree(paths: &[PathBuf]) -> Error {
        Error::DirtyTree {
            files: dirty_names(paths),
        }
    }

    /// Wraps a libgit2 error with what kern was doing.
    pub fn git(context: impl Into<String>, source: git2::Error) -> Error {
        Error::Git {
            context: context.into(),
            source,
        }
    }
}

/// The changed paths a message names: the first [`DIRTY_NAMED`], then `and N more`.
pub(crate) fn dirty_names(paths: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    vec![crate::text::some_of(&names, DIRTY_NAMED)]
}

/// The fix for a refused commit message: `--no-verify` skips `commit-msg` only.
fn message_hook_fix(hook: &str) -> &'static str {
    if hook == "commit-msg" {
        "write a message it accepts, or pass --no-verify to skip it"
    } else {
        "fix the hook (--no-verify does not skip it, as in git)"
    }
}

/// The name of a signal kern reacts to (`SIGINT`, `SIGTERM`, `SIGHUP`).
pub(crate) fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name() {
        assert_eq!(signal_name(1), "SIGHUP");
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "a signal");
    }

    #[test]
    fn a_dirty_tree_names_ten_paths_and_counts_the_rest() {
        let paths = |n: usize| -> Vec<PathBuf> {
            (1..=n).map(|i| PathBuf::from(format!("f{i}"))).collect()
        };
        let cases = [
            (1, "f1"),
            (10, "f1, f2, f3, f4, f5, f6, f7, f8, f9, f10"),
            (12, "f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, and 2 more"),
        ];
        for (n, listed) in cases {
            assert_eq!(
                Error::dirty_tree(&paths(n)).to_string(),
                format!(
                    "the work tree has uncommitted changes: {listed} — commit or stash them, or pass --allow-dirty to leave them out of kern's commits"
                ),
                "{n}"
            );
        }
    }

    #[test]
    fn exit_codes_follow_the_design_table() {
        let cases: Vec<(Error, u8)> = vec![
            (Error::Usage("x".into()), 2),
            (
                Error::SandboxUnavailable {
                    missing: "no user namespaces".into(),
                    fix: "--sandbox off".into(),
                },
                2,
            ),
            (
                Error::Remote {
                    remote: "origin".into(),
                    what: "fetching".into(),
                    detail: "unreachable".into(),
                },
                2,
            ),
            (
                Error::SpecMissing {
                    path: "SPEC.md".into(),
                },
                2,
            ),
            (
                Error::Tracker {
                    what: "listing the open issues".into(),
                    why: "`gh` is not logged in".into(),
                    fix: "log in with `gh auth login`".into(),
                },
                2,
            ),
            (
                Error::DirtyTree {
                    files: vec!["a".into()],
                },
                2,
            ),
            (
                Error::TestsFirstCommand {
                    title: "t".into(),
                    spec: "SPEC.md".into(),
                    line: 1,
                },
                2,
            ),
            (
                Error::TemplateUnusable {
                    path: ".kern/prompts/research.md".into(),
                    message: "m".into(),
                },
                2,
            ),
            (
                Error::RepositoryGone {
                    git_dir: "/r/.git".into(),
                    state_dir: "/s".into(),
                },
                2,
            ),
            (
                Error::LockHeld {
                    path: "l".into(),
                    holder: "pid 1".into(),
                },
                3,
            ),
            (
                Error::WatchHeld {
                    path: "w".into(),
                    pid: 1,
                    holder: "pid 1".into(),
                },
                3,
            ),
            (Error::WatchGaveUp { why: "w".into() }, 1),
            (
                Error::WatchEnded {
                    code: 4,
                    ended: "blocked".into(),
                },
                4,
            ),
            (Error::Unfinished("blocked".into()), 4),
            (
                Error::AgentNeedsUser {
                    message: "login".into(),
                },
                5,
            ),
            (
                Error::BudgetSpent {
                    spent: 2.0,
                    limit: 1.0,
                },
                6,
            ),
            (
                Error::DeadlineReached {
                    at: crate::timestamp::Timestamp::from_epoch_seconds(0),
                    shown: "07:00".into(),
                    why: "w".into(),
                },
                0,
            ),
            (Error::Interrupted { signal: 2 }, 130),
            (Error::Interrupted { signal: 15 }, 143),
            (Error::Internal("x".into()), 1),
            (
                Error::CommitMessageRefused {
                    hook: "commit-msg".into(),
                    output: "no".into(),
                },
                1,
            ),
            (
                Error::FilterUnusable {
                    driver: "lfs".into(),
                    why: "w".into(),
                },
                2,
            ),
            (
                Error::FilterFailed {
                    driver: "lfs".into(),
                    path: "a.bin".into(),
                    output: "o".into(),
                },
                2,
            ),
            (
                Error::SigningUnsupported {
                    format: "x509".into(),
                },
                2,
            ),
            (
                Error::SigningFailed {
                    format: "ssh".into(),
                    message: "m".into(),
                },
                2,
            ),
            (
                Error::StateFolderUnsafe {
                    path: "/s".into(),
                    problem: "is not yours".into(),
                    owner: "uid 1".into(),
                    mode: 0o777,
                    fix: "f".into(),
                },
                2,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(error.exit_code(), code, "{error}");
        }
    }

    #[test]
    fn budget_message_shows_small_amounts() {
        let e = Error::BudgetSpent {
            spent: 0.13,
            limit: 0.000001,
        };
        assert_eq!(
            e.to_string(),
            "the cost budget is spent: $0.13 of $0.000001 — raise --max-cost to go on"
        );
    }

    #[test]
    fn a_full_disk_names_the_file_and_what_to_delete() {
        let e = Error::io(
            "/tmp/claude/kern/app/main/stage2.json",
            std::io::Error::from_raw_os_error(nix::libc::ENOSPC),
        );
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.to_string().starts_with(
                "no space left on the device holding `/tmp/claude/kern/app/main/stage2.json` — free some space"
            ),
            "{e}"
        );
    }

    #[test]
    fn git_fidelity_errors_name_the_fix() {
        let cases = [
            (
                Error::FilterFailed {
                    driver: "crypt".into(),
                    path: "secrets/a".into(),
                    output: "no key\n(exit status 1)".into(),
                },
                "the `crypt` clean filter failed on `secrets/a`, nothing was committed — fix the filter (`git add secrets/a` shows git's view of it):\nno key\n(exit status 1)",
            ),
            (
                Error::SigningFailed {
                    format: "openpgp".into(),
                    message: "`gpg -bsau k` did not sign — check the key".into(),
                },
                "cannot sign the commit (openpgp): `gpg -bsau k` did not sign — check the key",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn spec_missing_names_the_fix() {
        let e = Error::SpecMissing {
            path: "SPEC.md".into(),
        };
        assert_eq!(
            e.to_string(),
            "`SPEC.md` not found — run `kern init` to write a starter SPEC.md, or pass --spec PATH"
        );
    }
}
