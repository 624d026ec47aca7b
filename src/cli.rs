//! What the person typed: the clap definition of kern's command line, nothing resolved yet.
//!
//! Every run option has a `KERN_*` environment variable and shows its default in `--help`.
//! Durations are written `90s`, `15m`, `1h` or as plain seconds. Resolution (the agent kind,
//! paths, budgets) happens in `settings.rs`, so this file stays a plain description. The
//! options every command accepts are shown in a subcommand's `--help` only where it uses them
//! ([`command`]: `kern log --help` has no `--agent`); they are still accepted everywhere.
//!
//! Here: [`Cli`], the options every command takes and the subcommands. Beside it: the options
//! of a run (`run.rs`) and of a night (`night.rs`), how a flag's value is read (`value.rs`),
//! and what a word typed where the count goes meant (`word_for_count.rs`).
// The doc comments below are clap's help text, shown as written (`program:<path>`), not
// markdown for rustdoc.
#![allow(rustdoc::invalid_html_tags)]

use std::path::PathBuf;
use std::time::Duration;

#[cfg(test)]
use clap::FromArgMatches;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

pub use crate::reporter::ColorChoice;
pub use night::{NightOptions, ScheduleArgs, Scheduler, watch_args};
pub use run::{CheckBaseline, RunOptions, ScopeMode};
pub use value::{Pace, parse_duration, parse_size};
pub use word_for_count::{WordForCount, word_for_count};

use value::{DAY, duration_between, filter_value};

mod night;
mod run;
mod value;
mod word_for_count;

const EXAMPLES: &str = "\
Examples:
  kern 10 30          take up to 10 tasks, 30 s apart (run it before bed)
  kern -n             dry run: show what would happen, change nothing
  kern status         tasks by state, the next task, the state folder
  kern report         the morning after: how the last run ended, what needs you
  kern watch 10 30    kern 10 30, started again if it dies or stalls (--detach: in the background)
  kern demo           watch the whole loop in a throw-away repository";

/// kern takes the next task from SPEC.md and drives a coding agent through research,
/// implement and review, then commits the work itself. Unattended, resumable, locked.
#[derive(Debug, Parser)]
#[command(
    name = "kern",
    version,
    about,
    after_help = EXAMPLES,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// What to do instead of a run.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// How many tasks to take at most (1 to 10000).
    #[arg(value_name = "ITERATIONS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub iterations: u32,

    /// Pause between iterations: 30, 90s, 15m, 1h (0 to 24h).
    #[arg(value_name = "DELAY", default_value = "10", value_parser = duration_between::<0, DAY>)]
    pub delay: Duration,

    /// Show what would happen and change nothing: no lock, no agent, no write.
    #[arg(short = 'n', long)]
    pub dry_run: bool,

    /// With -n: write the prompts and schemas of the stages it shows into DIR (created if
    /// missing; nothing else is written), and name them in its command lines, so that a stage
    /// can be run by hand. Default: not written.
    #[arg(long = "prompts", value_name = "DIR", requires = "dry_run")]
    pub prompts_dir: Option<std::path::PathBuf>,

    /// Options of a run.
    #[command(flatten)]
    pub run: RunOptions,

    /// Options of a night: its deadline, its watchdog.
    #[command(flatten)]
    pub night: NightOptions,

    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalOptions,

    /// The fence's lists (`[sandbox]` in `.kern/config.toml`).
    #[command(flatten)]
    pub fence: SandboxOptions,

    /// Where each setting that is not at its default came from (filled by
    /// `settings::config::command_line`, which folds in `.kern/config.toml`).
    #[arg(skip)]
    pub origins: Vec<Origin>,
}

/// Where a setting that is not at its default came from (`kern -n`, `kern doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The option's long name (`stage-timeout`).
    pub name: String,
    /// The value as given.
    pub value: String,
    /// Where: `command line`, `KERN_STAGE_TIMEOUT`, or `.kern/config.toml:3`.
    pub source: String,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct GlobalOptions {
    /// Diagnostics on stderr: -v for debug, -vv for trace (also KERN_LOG=debug|trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Print only errors and the end-of-run summary.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// The task list, relative to the repository's top folder.
    #[arg(
        long,
        value_name = "PATH",
        env = "KERN_SPEC",
        default_value = "SPEC.md",
        global = true
    )]
    pub spec: PathBuf,

    /// Colour and the live status line: auto (on a terminal, unless NO_COLOR), always, never.
    #[arg(long, value_enum, env = "KERN_COLOR", default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// The agent: claude, codex, or program:<path> for any executable.
    #[arg(
        long,
        value_name = "AGENT",
        env = "KERN_AGENT",
        default_value = "claude",
        global = true
    )]
    pub agent: String,

    /// A second agent for usage limits: a stage whose agent hit a limit that resets later
    /// than --fallback-after runs on this one (same tools, same schema); kern goes back once
    /// the limit has reset. claude, codex or program:<path>.
    #[arg(long, value_name = "AGENT", env = "KERN_FALLBACK_AGENT", global = true)]
    pub fallback_agent: Option<String>,

    /// The agent of the review stage, when another model should judge the work (default: the
    /// main agent). claude, codex or program:<path>.
    #[arg(long, value_name = "AGENT", env = "KERN_REVIEW_AGENT", global = true)]
    pub review_agent: Option<String>,

    /// The fence around every agent and whatever runs its code (the check, `run` must-haves,
    /// the commit's hooks): kern (kern's own fence: writes only in the work tree, secrets
    /// absent, no network but the allowed hosts, only its own processes), agent (Claude Code's
    /// own sandbox for the implement stage's shell, what this flag meant before; no fence of
    /// kern's), or off (no fence at all, said on every stage line). The flag alone is kern.
    #[arg(
        long,
        value_name = "MODE",
        env = "KERN_SANDBOX",
        default_value = "kern",
        num_args = 0..=1,
        default_missing_value = "kern",
        value_parser = parse_sandbox,
        global = true
    )]
    pub sandbox: crate::sandbox::Mode,

    /// The fenced processes' network: list (only through kern's proxy, to the agent's own API
    /// and the `[sandbox] allow_hosts` of `.kern/config.toml`), none (nothing leaves), or open
    /// (the machine's network, unfiltered).
    #[arg(
        long,
        value_name = "NETWORK",
        env = "KERN_SANDBOX_NETWORK",
        default_value = "list",
        value_parser = parse_network,
        global = true
    )]
    pub sandbox_network: crate::sandbox::Network,
}

/// The fence's lists, kept in `.kern/config.toml` under `[sandbox]` (`hide = [..]`,
/// `write = [..]`, `allow_hosts = [..]`, `pass_env = [..]`, `checks = ".."`); each is also a
/// flag, given once per item, and a `KERN_*` variable (paths `:`-separated, hosts and names
/// `,`-separated).
#[derive(Debug, Clone, Args)]
pub struct SandboxOptions {
    /// A path the fence hides besides its own list (`~/` is the home folder; a relative path
    /// is taken from the repository's top): the fenced processes find it empty.
    #[arg(long, value_name = "PATH", env = "KERN_SANDBOX_HIDE", value_delimiter = ':', action = clap::ArgAction::Append)]
    pub sandbox_hide: Vec<PathBuf>,

    /// A path the fenced processes may write besides the work tree, their private TMPDIR and
    /// the agent's own folders (`~/` is the home folder; relative: from the repository's top).
    #[arg(long, value_name = "PATH", env = "KERN_SANDBOX_WRITE", value_delimiter = ':', action = clap::ArgAction::Append)]
    pub sandbox_write: Vec<PathBuf>,

    /// A host the fenced processes may reach through kern's proxy besides the agent's own API:
    /// `registry.npmjs.org`, `*.crates.io`, `github.com:22`, `127.0.0.1:8080` (a bare host is
    /// ports 443 and 80).
    #[arg(long, value_name = "HOST", env = "KERN_SANDBOX_ALLOW_HOSTS", value_delimiter = ',', action = clap::ArgAction::Append, value_parser = parse_host)]
    pub sandbox_allow_hosts: Vec<crate::sandbox::HostRule>,

    /// An environment variable passed into the fence although its name looks like a secret
    /// (`*_TOKEN`, `*_SECRET`, `*_KEY`, `*PASSWORD*`, the well-known ones).
    #[arg(long, value_name = "NAME", env = "KERN_SANDBOX_PASS_ENV", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub sandbox_pass_env: Vec<String>,

    /// Where the check, `run` must-haves and the commit's hooks run: inside (the fence of the
    /// implement stage: they run code the agent wrote) or outside (unfenced, your choice).
    #[arg(long, value_enum, value_name = "WHERE", env = "KERN_SANDBOX_CHECKS", default_value_t = crate::sandbox::ChecksPlace::Inside)]
    pub sandbox_checks: crate::sandbox::ChecksPlace,
}

/// An issue tracker kern reads tasks from and tells what became of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tracker {
    /// GitHub issues, through the GitHub CLI `gh` (logged in: `gh auth login`).
    Github,
}

/// kern's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tasks by state, the next task, the resume point, the lock holder, the state folder.
    Status {
        /// Print one JSON object on stdout.
        #[arg(long, conflicts_with = "dir")]
        json: bool,
        /// Print only the state folder path.
        #[arg(long)]
        dir: bool,
        /// List the claims on the remote NAME (default `origin`): task, holder, expiry; with
        /// --json as one JSON object.
        #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "origin", conflicts_with = "dir")]
        remote: Option<String>,
    },
    /// Free a task's claim on the remote (`kern --remote`) by hand: another machine may take
    /// the task at once.
    Release {
        /// The task, by title (or the start of it) or by its claim's key.
        task: String,
        /// The remote.
        #[arg(long, value_name = "NAME", default_value = "origin")]
        remote: String,
    },
    /// Claim a task's key on the remote once and print `claimed` or `held` (the tests' race).
    #[command(hide = true)]
    Claim {
        /// The claim's key.
        key: String,
        /// The remote.
        #[arg(long, value_name = "NAME", default_value = "origin")]
        remote: String,
    },
    /// Keep a night going: start the run, start it again when it dies or stalls, end with it.
    ///
    /// The run is started with ARGS, as `kern ARGS` takes them; one that dies, or shows no
    /// progress for --stall-after, is started again, at most --max-restarts times in a row;
    /// the watchdog ends with the run's exit code. A live run whose watchdog is gone is
    /// adopted.
    Watch {
        /// The run's arguments: ITERATIONS, DELAY and options, as `kern` takes them.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Start a night every day with the system's scheduler (systemd, launchd, or a crontab line).
    ///
    /// Every day at --at, `kern watch` starts the run with ARGS (after `--`) in this repository,
    /// ending it by --until: a systemd user timer and service, a launchd agent on macOS, or,
    /// where neither is, the crontab line to add. --list shows the nights scheduled, --remove
    /// takes this repository's away.
    Schedule(ScheduleArgs),
    /// What a run did, from run.jsonl: how it ended, what needs you, each task, the totals.
    Report {
        /// Every run active since then: 12h, 90m, 2d, a date (2026-11-18) or a time.
        #[arg(long, value_name = "WHEN", conflicts_with = "run", value_parser = crate::timestamp::parse_since)]
        since: Option<crate::timestamp::Timestamp>,
        /// One run, by its id (or the start of it), as `--json` shows it.
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        /// Print the report as JSON (its shape is versioned by `schema`).
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the report as Markdown, for a pull request or a chat.
        #[arg(long)]
        markdown: bool,
        /// Write the report to FILE as one self-contained HTML page with a timeline, instead of
        /// printing it (with --json or --markdown, besides printing that).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Print the run's output lines (run.log in the state folder); -f follows a running run.
    Log {
        /// Keep printing new lines while a run holds the lock; return when it ends.
        #[arg(short, long)]
        follow: bool,
    },
    /// Land tasks parked with `--review` on the current branch, one commit each (all of them,
    /// or the tasks named), and delete their branches.
    Accept {
        /// Tasks by title (or the start of it) or by branch (`kern/<task>`); none: every one.
        tasks: Vec<String>,
    },
    /// Bring open issues into SPEC.md as tasks, each once, with an Issue note that names it (its
    /// text under it, its checklist as the task's criteria); SPEC.md is written, not
    /// committed, unless --commit.
    Import {
        /// Where the issues are: github (through the GitHub CLI `gh`).
        #[arg(value_enum)]
        tracker: Tracker,
        /// Only issues with this label (repeat it for issues with all of them).
        #[arg(long, value_name = "LABEL", value_parser = filter_value)]
        label: Vec<String>,
        /// Only issues in this milestone (its title or number).
        #[arg(long, value_name = "NAME", value_parser = filter_value)]
        milestone: Option<String>,
        /// Only issues assigned to this login (`@me`: you).
        #[arg(long, value_name = "LOGIN", value_parser = filter_value)]
        assignee: Option<String>,
        /// The repository, OWNER/REPO (default: the one `gh` finds from this clone's remote).
        #[arg(long, value_name = "OWNER/REPO", value_parser = filter_value)]
        repo: Option<String>,
        /// At most this many issues (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// Show what would come in; write nothing.
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Commit SPEC.md with the new tasks (and nothing else); refused while SPEC.md has
        /// changes of yours that are not committed.
        #[arg(long, conflicts_with = "dry_run")]
        commit: bool,
    },
    /// Reopen a task parked with `--review`: it goes back to `[ ]` with the reason as an
    /// Attempt note; its branch is kept under `refs/kern/attempts/` and deleted.
    Reject {
        /// The task, by title (or the start of it) or by branch (`kern/<task>`).
        task: String,
        /// Why: the next attempt reads it.
        #[arg(long, value_name = "TEXT", default_value = "rejected in review")]
        reason: String,
    },
    /// Write a starter SPEC.md and LEARNINGS.md (never overwrites).
    Init {
        /// Also copy the default prompt templates into `.kern/prompts/` for editing; in a
        /// project that has its SPEC.md, only the templates are written.
        #[arg(long)]
        prompts: bool,
        /// Write only a commented `.kern/config.toml` (every setting, all commented out).
        #[arg(long, conflicts_with = "prompts")]
        config: bool,
    },
    /// Run the whole loop in a throw-away repository with a built-in scripted agent.
    Demo {
        /// Keep the demo repository and print its path.
        #[arg(long)]
        keep: bool,
    },
    /// Check that everything a run needs is in place, and say how to fix what is not.
    Doctor,
    /// Print shell completions.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(hide = true)]
    Man,
    /// The built-in scripted agent (used by `kern demo` and the tests).
    #[command(hide = true)]
    ScriptedAgent {
        /// The scenario file (JSON).
        scenario: PathBuf,
    },
}

/// The options every command accepts (`global = true`) that a subcommand ignores, by
/// subcommand: hidden from that subcommand's `--help` (see [`command`]). Still accepted there,
/// so a `KERN_*` variable or a habit (`kern status --agent codex`) never breaks it.
pub(crate) const IGNORED_BY: &[(&str, &[&str])] = &[
    (
        "status",
        &[
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "report",
        &[
            "spec",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "log",
        &[
            "quiet",
            "spec",
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "accept",
        &[
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "reject",
        &[
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "import",
        &[
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
        ],
    ),
    (
        "init",
        &[
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    (
        "demo",
        &[
            "spec",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
    // The night's own options go after `--`.
    (
        "schedule",
        &[
            "spec",
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
        ],
    ),
    (
        "completions",
        &[
            "quiet",
            "spec",
            "color",
            "agent",
            "fallback_agent",
            "review_agent",
            "sandbox",
            "sandbox_network",
        ],
    ),
];

/// kern's command line as clap parses it: [`Cli`]'s, with each subcommand's `--help` showing
/// only the options it takes (`IGNORED_BY`). Clap copies a global option into every
/// subcommand that lacks one of that id when it builds the command, so each ignored one is
/// given to its subcommand beforehand as a hidden copy; its value still reaches [`Cli`].
pub fn command() -> clap::Command {
    let mut command = Cli::command();
    for (name, ignored) in IGNORED_BY {
        let copies: Vec<clap::Arg> = command
            .get_arguments()
            .filter(|a| ignored.contains(&a.get_id().as_str()))
            .map(|a| a.clone().hide(true))
            .collect();
        command = command.mut_subcommand(*name, |sub| sub.args(copies));
    }
    command
}

/// `--sandbox`: kern, agent or off. What `--sandbox` was before (a switch turning on Claude
/// Code's own sandbox) still reads: `true` (and a bare `--sandbox`) is kern's fence, which now
/// does more; `false` is refused with the choice it has become.
fn parse_sandbox(text: &str) -> Result<crate::sandbox::Mode, String> {
    text.parse()
}

/// `--sandbox-network`: list, none or open.
fn parse_network(text: &str) -> Result<crate::sandbox::Network, String> {
    text.parse()
}

/// `--sandbox-allow-hosts`: a host, `*.domain`, `host:port`, an IP or `[v6]:port`.
fn parse_host(text: &str) -> Result<crate::sandbox::HostRule, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_subcommands_parse() {
        let cli = Cli::try_parse_from(["kern", "10", "30"]).unwrap();
        assert_eq!((cli.iterations, cli.delay), (10, Duration::from_secs(30)));
        assert!(cli.command.is_none());
        let cli = Cli::try_parse_from(["kern"]).unwrap();
        assert_eq!((cli.iterations, cli.delay), (5, Duration::from_secs(10)));
        let cli = Cli::try_parse_from(["kern", "status", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Status {
                json: true,
                dir: false,
                remote: None,
            })
        ));
        let cli = Cli::try_parse_from(["kern", "status", "--remote"]).unwrap();
        assert!(
            matches!(cli.command, Some(Command::Status { remote: Some(r), .. }) if r == "origin")
        );
        let cli = Cli::try_parse_from(["kern", "status", "--remote", "up"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Status { remote: Some(r), .. }) if r == "up"));
        let cli = Cli::try_parse_from(["kern", "--remote", "origin", "-j", "2"]).unwrap();
        assert_eq!(cli.run.remote.as_deref(), Some("origin"));
        assert_eq!(cli.run.claim_ttl, Duration::from_secs(600));
        assert!(
            Cli::try_parse_from(["kern", "--pr"]).is_err(),
            "--pr needs --remote"
        );
        let cli = Cli::try_parse_from(["kern", "--spec", "PLAN.md", "status"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Status { .. })));
        assert_eq!(cli.global.spec, PathBuf::from("PLAN.md"));
        let cli = Cli::try_parse_from(["kern", "-n", "--spec", "PLAN.md"]).unwrap();
        assert!(cli.dry_run);
        assert_eq!(cli.global.spec, PathBuf::from("PLAN.md"));
    }

    #[test]
    fn bad_input_is_rejected() {
        for argv in [
            vec!["kern", "abc"],
            vec!["kern", "10", "-5"],
            vec!["kern", "--frobnicate"],
            vec!["kern", "0"],
            vec!["kern", "--max-cost", "-1"],
            vec!["kern", "--max-cost", "0"],
            vec!["kern", "2", "18446744073709551615"],
            vec!["kern", "10001"],
            vec!["kern", "--stage-timeout", "0"],
            vec!["kern", "--idle-timeout", "0"],
            vec!["kern", "--check-timeout", "0"],
            vec!["kern", "--stage-timeout", "25h"],
            vec!["kern", "--max-wait", "8d"],
            vec!["kern", "--retries", "21"],
            vec!["kern", "--max-attempts", "0"],
            vec!["kern", "--max-attempts", "101"],
            vec!["kern", "--fallback-after", "25h"],
            vec!["kern", "--pace=0"],
            vec!["kern", "--pace=101"],
            vec!["kern", "--pace=lots"],
            vec!["kern", "--pace-week=0"],
            vec!["kern", "--pace-week=even"],
        ] {
            let err = Cli::try_parse_from(&argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
    }

    #[test]
    fn pace_takes_a_value_only_with_an_equals_sign() {
        let cli = Cli::try_parse_from(["kern", "--pace", "10", "30"]).unwrap();
        assert_eq!(cli.run.pace, Some(Pace::Percent(90)));
        assert_eq!((cli.iterations, cli.delay), (10, Duration::from_secs(30)));
        let cli = Cli::try_parse_from(["kern", "--pace=75"]).unwrap();
        assert_eq!(cli.run.pace, Some(Pace::Percent(75)));
        let cli = Cli::try_parse_from(["kern", "--pace=even", "--pace-week=70"]).unwrap();
        assert_eq!(
            (cli.run.pace, cli.run.pace_week),
            (Some(Pace::Even), Some(70))
        );
        let cli = Cli::try_parse_from(["kern", "--pace-week", "70", "10"]).unwrap();
        assert_eq!((cli.run.pace_week, cli.iterations), (Some(70), 10));
        let cli = Cli::try_parse_from(["kern"]).unwrap();
        assert_eq!((cli.run.pace, cli.run.pace_week), (None, None));
    }

    #[test]
    fn agent_flags_reach_every_command() {
        let cli = Cli::try_parse_from([
            "kern",
            "doctor",
            "--fallback-agent",
            "codex",
            "--review-agent",
            "codex",
            "--sandbox",
        ])
        .unwrap();
        assert_eq!(cli.global.fallback_agent.as_deref(), Some("codex"));
        assert_eq!(cli.global.review_agent.as_deref(), Some("codex"));
        assert_eq!(cli.global.sandbox, crate::sandbox::Mode::Kern);
        let cli = Cli::try_parse_from(["kern", "--fallback-after", "0"]).unwrap();
        assert_eq!(cli.run.fallback_after, Duration::ZERO);
        let cli = Cli::try_parse_from(["kern"]).unwrap();
        assert_eq!(cli.run.fallback_after, Duration::from_secs(900));
    }

    #[test]
    fn a_watch_hands_the_run_every_argument_but_its_own_word() {
        let argv =
            |words: &[&str]| -> Vec<String> { words.iter().map(|w| (*w).to_string()).collect() };
        let cases: &[(&[&str], Option<&[&str]>)] = &[
            (&["kern", "watch", "10", "30"], Some(&["10", "30"])),
            (
                &["kern", "watch", "10", "--check", "watch"],
                Some(&["10", "--check", "watch"]),
            ),
            (
                &["kern", "-v", "watch", "--agent", "codex"],
                Some(&["-v", "--agent", "codex"]),
            ),
            (
                &["kern", "--spec", "watch", "watch", "3"],
                Some(&["--spec", "watch", "3"]),
            ),
            (&["kern", "--spec=x.md", "watch"], Some(&["--spec=x.md"])),
            (&["kern", "watch"], Some(&[])),
            (&["kern", "10", "watch"], None),
            (&["kern", "status"], None),
            (&["kern", "--", "watch"], None),
            (&["kern"], None),
        ];
        for (words, want) in cases {
            assert_eq!(watch_args(&argv(words)), want.map(&argv), "{words:?}");
        }
        let cli = Cli::try_parse_from(["kern", "watch", "10", "--stall-after", "3"]).unwrap();
        assert!(
            matches!(&cli.command, Some(Command::Watch { args }) if args == &["10", "--stall-after", "3"]),
            "{:?}",
            cli.command
        );
        let cli =
            Cli::try_parse_from(["kern", "--stall-after", "20m", "--max-restarts", "0"]).unwrap();
        assert_eq!(cli.night.stall_after, Duration::from_secs(1200));
        assert_eq!(cli.night.max_restarts, 0);
        assert!(Cli::try_parse_from(["kern", "--stall-after", "2"]).is_err());
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The `--help` of `kern <sub>`, as the person sees it.
    fn help(sub: &str) -> String {
        let mut command = command();
        command.build();
        command
            .find_subcommand_mut(sub)
            .unwrap()
            .render_help()
            .to_string()
    }

    #[test]
    fn every_ignored_option_is_a_global_one_of_a_subcommand() {
        let command = Cli::command();
        for (name, ignored) in IGNORED_BY {
            assert!(command.find_subcommand(name).is_some(), "{name}");
            for id in *ignored {
                assert!(
                    command
                        .get_arguments()
                        .any(|a| a.get_id() == *id && a.is_global_set()),
                    "{name}: {id}"
                );
            }
        }
    }

    #[test]
    fn subcommand_help_shows_only_the_options_it_takes() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "status",
                &["--spec", "--json", "--dir"],
                &["--agent", "--sandbox", "--color"],
            ),
            (
                "report",
                &["--since", "--color", "--quiet"],
                &["--agent", "--spec", "--review-agent"],
            ),
            (
                "log",
                &["--follow", "--verbose"],
                &["--agent", "--spec", "--quiet", "--color"],
            ),
            (
                "init",
                &["--spec", "--prompts"],
                &["--agent", "--fallback-agent", "--color"],
            ),
            ("demo", &["--keep", "--color"], &["--agent", "--spec"]),
            (
                "doctor",
                &[
                    "--agent",
                    "--fallback-agent",
                    "--review-agent",
                    "--sandbox",
                    "--spec",
                ],
                &[],
            ),
        ];
        for (sub, shown, hidden) in cases {
            let text = help(sub);
            for option in *shown {
                assert!(
                    text.contains(option),
                    "`kern {sub} --help` lacks {option}:\n{text}"
                );
            }
            for option in *hidden {
                assert!(
                    !text.contains(option),
                    "`kern {sub} --help` lists {option}:\n{text}"
                );
            }
        }
        // Hidden, still accepted.
        let matches = command()
            .try_get_matches_from(["kern", "log", "--agent", "codex", "--spec", "X.md"])
            .unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        assert_eq!(cli.global.agent, "codex");
        assert_eq!(cli.global.spec, PathBuf::from("X.md"));
    }
}
