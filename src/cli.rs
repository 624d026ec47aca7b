//! What the person typed: the clap definition of kern's command line, nothing resolved yet.
//!
//! Every run option has a `KERN_*` environment variable and shows its default in `--help`.
//! Durations are written `90s`, `15m`, `1h` or as plain seconds. Resolution (the agent kind,
//! paths, budgets) happens in `settings.rs`, so this file stays a plain description. The
//! options every command accepts are shown in a subcommand's `--help` only where it uses them
//! ([`command`]: `kern log --help` has no `--agent`); they are still accepted everywhere.
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

mod night;

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

/// Options of a run (and of a dry run, which shows their effect).
#[derive(Debug, Clone, Args)]
pub struct RunOptions {
    /// The model for every stage, overriding the templates' `model:` front matter.
    #[arg(long, value_name = "MODEL", env = "KERN_MODEL")]
    pub model: Option<String>,

    /// Longest a stage may run (1s to 24h).
    #[arg(long, value_name = "DURATION", env = "KERN_STAGE_TIMEOUT", default_value = "60m", value_parser = duration_between::<1, DAY>)]
    pub stage_timeout: Duration,

    /// Longest an agent may print nothing (1s to 24h).
    #[arg(long, value_name = "DURATION", env = "KERN_IDLE_TIMEOUT", default_value = "15m", value_parser = duration_between::<1, DAY>)]
    pub idle_timeout: Duration,

    /// How long an agent that reported its result may take to exit before it is stopped (0 to 1h).
    #[arg(long, value_name = "DURATION", env = "KERN_RESULT_GRACE", default_value = "10s", value_parser = duration_between::<0, HOUR>)]
    pub result_grace: Duration,

    /// Retries of a stage after a transient failure (overload, network, timeout), 0 to 20.
    #[arg(long, value_name = "N", env = "KERN_RETRIES", default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub retries: u32,

    /// The first retry delay; later ones grow exponentially, with jitter, up to 10 min (0 to 1h).
    #[arg(long, value_name = "DURATION", env = "KERN_RETRY_DELAY", default_value = "30s", value_parser = duration_between::<0, HOUR>)]
    pub retry_delay: Duration,

    /// Longest wait for a usage-limit reset before the run stops (0 to 7 days).
    #[arg(long, value_name = "DURATION", env = "KERN_MAX_WAIT", default_value = "6h", value_parser = duration_between::<0, WEEK>)]
    pub max_wait: Duration,

    /// Extra wait after a usage-limit reset time before the stage is tried again (the reset
    /// times agents announce are rounded, and clocks differ); 0 to 1h.
    #[arg(long, value_name = "DURATION", env = "KERN_RESET_MARGIN", default_value = "60s", value_parser = duration_between::<0, HOUR>)]
    pub reset_margin: Duration,

    /// Failed attempts before kern asks for decomposition, once; an attempt under that request
    /// that fails too blocks the task (1 to 100).
    #[arg(long, value_name = "N", env = "KERN_MAX_ATTEMPTS", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,

    /// Stop cleanly (exit 6) once the run has cost this many USD (more than 0, at most 100000).
    /// Each Claude stage also gets what is left as its own `--max-budget-usd`.
    #[arg(long, value_name = "USD", env = "KERN_MAX_COST", value_parser = parse_cost)]
    pub max_cost: Option<f64>,

    /// The fallback agent's model (default: the templates' `model:` for Claude, Codex's own
    /// default for Codex).
    #[arg(long, value_name = "MODEL", env = "KERN_FALLBACK_MODEL")]
    pub fallback_model: Option<String>,

    /// Move a stage to the fallback agent when its agent's usage limit resets later than this
    /// (0 to 24h); a nearer reset is waited out.
    #[arg(long, value_name = "DURATION", env = "KERN_FALLBACK_AFTER", default_value = "15m", value_parser = duration_between::<0, DAY>)]
    pub fallback_after: Duration,

    /// The review agent's model (default: --model when the review runs on the main agent,
    /// else the templates' `model:` for Claude, Codex's own default for Codex).
    #[arg(long, value_name = "MODEL", env = "KERN_REVIEW_MODEL")]
    pub review_model: Option<String>,

    /// Pace the agents' usage windows (Claude's, Codex's): PERCENT (1 to 100; `--pace` alone
    /// is 90) is the most of the short (5-hour) window kern spends, `even` spends no more of a
    /// window than the share of it already elapsed plus 5 points. kern pauses before a stage that
    /// would cross the line and goes on at the reset (within --max-wait; else it takes no new
    /// task, exit 0), spending at most a first-hour share of the new window; with
    /// --fallback-agent, it hands the next stages to it until the window resets.
    #[arg(long, value_name = "PERCENT|even", env = "KERN_PACE", num_args = 0..=1, require_equals = true, default_missing_value = "90", value_parser = pace_value)]
    pub pace: Option<Pace>,

    /// The most of the week-long windows (`seven_day`) kern spends, in percent (1 to 100);
    /// default: as --pace.
    #[arg(long, value_name = "PERCENT", env = "KERN_PACE_WEEK", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub pace_week: Option<u8>,

    /// A command that must pass after implement (a task's own `> **Check:**` note wins).
    #[arg(long, value_name = "CMD", env = "KERN_CHECK")]
    pub check: Option<String>,

    /// Run the check once before any agent, on the commit the run starts from (`run`), or not
    /// (`skip`). A check that fails there stops the run with exit 2, spending nothing.
    #[arg(long, value_enum, value_name = "WHEN", env = "KERN_CHECK_BASELINE", default_value_t = CheckBaseline::Run)]
    pub check_baseline: CheckBaseline,

    /// Longest the check command may run (1s to 24h).
    #[arg(long, value_name = "DURATION", env = "KERN_CHECK_TIMEOUT", default_value = "10m", value_parser = duration_between::<1, DAY>)]
    pub check_timeout: Duration,

    /// Every task's existing test files are read-only: a task that changes or deletes one fails
    /// its attempt (new test files are fine), as a task's own `> **Tests:** read-only` note says.
    #[arg(long, env = "KERN_TESTS_READ_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub tests_read_only: bool,

    /// Every task is tested first, with its check (`--check` or its `> **Check:**` note) as the
    /// command, as a task's own `> **Tests:** first` note says: a tests step writes the task's
    /// tests before implement; they must fail on the base commit, are then held read-only,
    /// and must pass after implement.
    #[arg(long, env = "KERN_TESTS_FIRST", value_parser = clap::builder::BoolishValueParser::new())]
    pub tests_first: bool,

    /// Every task's discovery level (0 to 3) instead of the one kern rates from the task: 0
    /// skips research, 1 keeps it short, 2 is the default, 3 researches and reviews with the
    /// strongest model. A task's own `> **Level:**` note wins.
    #[arg(long, value_name = "N", env = "KERN_LEVEL", value_parser = clap::value_parser!(u8).range(0..=3))]
    pub level: Option<u8>,

    /// Ask for decomposition before the first implement attempt when a task's Scope covers
    /// more than N files (1 to 10000; default: off).
    #[arg(long, value_name = "N", env = "KERN_MAX_TASK_FILES", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_task_files: Option<u32>,

    /// What happens to a task's changes outside its `> **Scope:**`: set-aside (saved under
    /// refs/kern/saved/, put back, named in an Out of scope note), strict (a failed attempt),
    /// or off.
    #[arg(long, value_enum, value_name = "MODE", env = "KERN_SCOPE", default_value_t = ScopeMode::SetAside)]
    pub scope: ScopeMode,

    /// Start a task on a dirty tree; the paths dirty before it stay out of kern's commits.
    #[arg(long, env = "KERN_ALLOW_DIRTY")]
    pub allow_dirty: bool,

    /// Do not run the pre-commit and commit-msg hooks, nor with --remote the pre-push hook (as
    /// `git commit --no-verify` and `git push --no-verify`).
    #[arg(long, env = "KERN_NO_VERIFY")]
    pub no_verify: bool,

    /// Longest a git hook, clean filter or signing program may run before its process group
    /// is stopped (1s to 24h).
    #[arg(long, value_name = "DURATION", env = "KERN_HOOK_TIMEOUT", default_value = "10m", value_parser = duration_between::<1, DAY>)]
    pub hook_timeout: Duration,

    /// New or changed files larger than this stay out of commits (and are named): 100M, 1G,
    /// 500K or bytes (up to 1024G).
    #[arg(long, value_name = "SIZE", env = "KERN_MAX_FILE_SIZE", default_value = "100M", value_parser = parse_size)]
    pub max_file_size: u64,

    /// Leave optional tasks (Kiro's `[ ]*`) alone; without it they are taken after every other.
    #[arg(long, env = "KERN_SKIP_OPTIONAL", value_parser = clap::builder::BoolishValueParser::new())]
    pub skip_optional: bool,

    /// Run up to N independent tasks at once, each in its own git worktree on a branch
    /// `kern/<task>`, committed on this branch one at a time (1 to 16; 1 runs one task at a
    /// time in the work tree itself).
    #[arg(short = 'j', long, value_name = "N", env = "KERN_JOBS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub jobs: u32,

    /// Leave each task's commit on its branch `kern/<task>` for you to review; SPEC.md marks it
    /// done with a Review note. `kern accept` lands them, `kern reject` reopens one.
    #[arg(long, env = "KERN_REVIEW", value_parser = clap::builder::BoolishValueParser::new())]
    pub review: bool,

    /// Take tasks through the git remote NAME, with any number of other machines running kern on
    /// clones of it: each task is claimed on the remote first (`refs/kern/claims/<task>`), runs
    /// as a `-j` task does and lands on this branch there. Default: no remote, this clone only.
    #[arg(long, value_name = "NAME", env = "KERN_REMOTE")]
    pub remote: Option<String>,

    /// With --remote: park each task's commit on its branch `kern/<task>` on the remote (as
    /// --review does) and open a pull request for it with the GitHub CLI `gh`, when installed.
    #[arg(long, env = "KERN_PR", requires = "remote", value_parser = clap::builder::BoolishValueParser::new())]
    pub pr: bool,

    /// With --remote: how long a claim holds unless its machine renews it (renewed while the
    /// task runs; a machine killed loses its tasks to another after this long).
    #[arg(long, hide = true, value_name = "DURATION", env = "KERN_CLAIM_TTL", default_value = "10m", value_parser = duration_between::<1, DAY>)]
    pub claim_ttl: Duration,

    /// A command run (through `sh -c`) with a JSON event on stdin and KERN_EVENT set when the
    /// run ends, a task is blocked, a usage-limit wait begins, or the run stops for the person
    /// (under `kern watch` also when the run died or stalled, and when the watchdog gives up);
    /// it gets 10 s, and never changes the run's outcome.
    #[arg(long, value_name = "CMD", env = "KERN_NOTIFY")]
    pub notify: Option<String>,

    /// Tell the tracker what happens to tasks that came from it (`kern import`): a task with an
    /// Issue note closes its issue by a `Closes owner/repo#N` trailer in its commit, and leaves
    /// a comment when it is taken, skipped or blocked; with --remote its issue is labelled with
    /// the machine that holds it. Through the GitHub CLI `gh`; a failure is a warning. Default:
    /// off.
    #[arg(long, value_enum, value_name = "TRACKER", env = "KERN_TRACKER")]
    pub tracker: Option<Tracker>,

    /// How long one call of the tracker's CLI (`gh`) may take before it is stopped.
    #[arg(long, hide = true, value_name = "DURATION", env = "KERN_TRACKER_TIMEOUT", default_value = "60s", value_parser = duration_between::<1, HOUR>)]
    pub tracker_timeout: Duration,

    /// Run in the background: print the pid and how to follow it (`kern log -f`), then return;
    /// the run's output goes to `run.log` in the state folder.
    #[arg(long, conflicts_with = "dry_run")]
    pub detach: bool,

    /// Set by `--detach` on the background run itself: no terminal, its lines go to run.log.
    #[arg(long, hide = true)]
    pub detached: bool,
}

/// What happens to changes outside a task's Scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScopeMode {
    /// Saved under refs/kern/saved/, put back, named in an Out of scope note; no retry.
    SetAside,
    /// A failed attempt.
    Strict,
    /// Not checked.
    Off,
}

/// An issue tracker kern reads tasks from and tells what became of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tracker {
    /// GitHub issues, through the GitHub CLI `gh` (logged in: `gh auth login`).
    Github,
}

/// Whether the check runs once before any agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckBaseline {
    /// Run it on the starting commit; a failure stops the run before any agent.
    Run,
    /// Do not.
    Skip,
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

/// What a word typed where the count goes (`kern stauts`, `kern help`) meant: clap reads the
/// first word that is not a subcommand as ITERATIONS and would answer "invalid value".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordForCount {
    /// `kern help [SUBCOMMAND]`: the help of kern, or of that subcommand.
    Help(Option<String>),
    /// Any other word: the usage error, with the nearest subcommand when one is near.
    Unknown(String),
}

/// The word of `args` that clap's `error` refused as ITERATIONS, read as the person meant it
/// (see [`WordForCount`]); `None` for any other error, and for a refused number (`kern 0`,
/// `kern -5`), which clap's own message explains.
pub fn word_for_count(error: &clap::Error, args: &[std::ffi::OsString]) -> Option<WordForCount> {
    let command = command();
    // Clap may stop at a later argument first (`kern statsu --json`): then the word is the one
    // that, with only what comes before it, is refused as ITERATIONS.
    let word = refused_count(error).or_else(|| {
        (1..args.len())
            .filter(|&i| args[i].to_str().is_some_and(|a| !a.starts_with('-')))
            .find_map(|i| {
                let error = command.clone().try_get_matches_from(&args[..=i]).err()?;
                refused_count(&error)
            })
    })?;
    if !word.chars().any(char::is_alphabetic) {
        return None;
    }
    let listed = Cli::command();
    let names: Vec<&str> = listed
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    let word = word.as_str();
    if word == "help" {
        let after = args
            .iter()
            .skip_while(|a| a.to_str() != Some("help"))
            .nth(1)
            .and_then(|a| a.to_str())
            .filter(|a| names.contains(a))
            .map(str::to_string);
        return Some(WordForCount::Help(after));
    }
    // A typo (two edits, or a third of a long name) or the start of a name (`comp`).
    let nearest = names
        .iter()
        .chain(std::iter::once(&"help"))
        .map(|name| {
            let started = word.len() >= 3 && name.starts_with(word);
            let distance = if started {
                0
            } else {
                strsim::damerau_levenshtein(word, name)
            };
            (distance, *name)
        })
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 3))
        .min();
    Some(WordForCount::Unknown(match nearest {
        Some((_, name)) => format!(
            "`{word}` is not a command, nor a number of tasks — did you mean `kern {name}`?"
        ),
        None => format!(
            "`{word}` is not a command, nor a number of tasks — the commands are {}; `kern --help` says what each does",
            names.join(", ")
        ),
    }))
}

/// The value clap's `error` refused as ITERATIONS, if that is what it refused.
fn refused_count(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    match (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) {
        (Some(ContextValue::String(arg)), Some(ContextValue::String(word)))
            if arg == "[ITERATIONS]" =>
        {
            Some(word.clone())
        }
        _ => None,
    }
}

/// Parses `90s`, `15m`, `1h`, `1h30m` or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|e| format!("`{text}`: {e}"));
    }
    humantime::parse_duration(text)
        .map_err(|_| format!("`{text}` is not a duration — write it as 30, 90s, 15m or 1h"))
}

/// An hour, in seconds.
const HOUR: u64 = 3600;
/// A day, in seconds.
const DAY: u64 = 24 * HOUR;
/// A week, in seconds.
const WEEK: u64 = 7 * DAY;

/// How `--pace` paces a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// At most this percent of the window.
    Percent(u8),
    /// No more than the share of the window already elapsed, plus a margin.
    Even,
}

/// `--pace`'s value: `even`, or a percent from 1 to 100.
fn pace_value(text: &str) -> Result<Pace, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("even") {
        return Ok(Pace::Even);
    }
    match text.trim_end_matches('%').parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(Pace::Percent(p)),
        _ => Err(format!(
            "`{text}` is not a pace — give a percent from 1 to 100 (`--pace=80`) or `--pace=even`"
        )),
    }
}

/// A duration from `MIN` to `MAX` seconds, both included.
fn duration_between<const MIN: u64, const MAX: u64>(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_secs(MIN) || d > Duration::from_secs(MAX) {
        let show = |secs| crate::text::duration(Duration::from_secs(secs));
        return Err(format!(
            "`{}` is out of range — give {} to {}",
            text.trim(),
            show(MIN),
            show(MAX)
        ));
    }
    Ok(d)
}

/// Parses `100M`, `1G`, `500K`, `2MiB` or plain bytes (binary multiples, as git's own sizes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => u32::MAX,
    };
    match number.parse::<u64>() {
        Ok(n) if shift != u32::MAX && n > 0 => n
            .checked_mul(1u64 << shift)
            .filter(|bytes| *bytes <= 1 << 40)
            .ok_or_else(|| format!("`{text}` is out of range — give at most 1024G")),
        _ => Err(format!(
            "`{text}` is not a size — write it as 100M, 1G, 500K or a number of bytes"
        )),
    }
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

/// A filter of `kern import` (a label, a milestone, a login, a repository): not empty, since
/// `gh` drops an empty one and lists every issue.
fn filter_value(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(
            "it is empty, and gh would list every open issue for it — give a value, or leave the option out".to_string(),
        );
    }
    Ok(text.to_string())
}

fn parse_cost(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100_000.0 => Ok(v),
        _ => Err(format!(
            "`{text}` is not an amount in USD from 0.01 to 100000 — write it as 5 or 2.50"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for (text, secs) in [
            ("30", 30),
            ("90s", 90),
            ("15m", 900),
            ("1h", 3600),
            ("1h30m", 5400),
            ("0", 0),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        for bad in ["", "-5", "abc", "5x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn import_filters_are_not_empty() {
        assert_eq!(
            filter_value("good first issue").as_deref(),
            Ok("good first issue")
        );
        for bad in ["", "  "] {
            assert!(filter_value(bad).unwrap_err().contains("every open issue"));
        }
    }

    #[test]
    fn sizes() {
        for (text, bytes) in [
            ("100M", 100 << 20),
            ("100m", 100 << 20),
            ("1G", 1 << 30),
            ("500K", 500 << 10),
            ("2MiB", 2 << 20),
            ("4096", 4096),
            ("10 MB", 10 << 20),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "0", "-5", "abc", "5X", "1.5G"] {
            assert_eq!(
                parse_size(bad),
                Err(format!(
                    "`{}` is not a size — write it as 100M, 1G, 500K or a number of bytes",
                    bad.trim()
                )),
                "{bad}"
            );
        }
    }

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
    fn a_word_where_the_count_goes_is_help_or_the_nearest_command() {
        let read = |argv: &[&str]| {
            let args: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
            let error = command().try_get_matches_from(&args).unwrap_err();
            word_for_count(&error, &args)
        };
        let meant = |name: &str| {
            format!("is not a command, nor a number of tasks — did you mean `kern {name}`?")
        };
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["kern", "stauts"], Some("status")),
            (&["kern", "statsu", "--json"], Some("status")),
            (&["kern", "dcotor"], Some("doctor")),
            (&["kern", "reprot"], Some("report")),
            (&["kern", "-v", "inti"], Some("init")),
            (&["kern", "compl"], Some("completions")),
            (&["kern", "helo"], Some("help")),
            (&["kern", "wacth", "10", "30"], Some("watch")),
            (&["kern", "schedul", "--list"], Some("schedule")),
        ];
        for (argv, name) in cases {
            match read(argv) {
                Some(WordForCount::Unknown(message)) => {
                    assert!(
                        message.ends_with(&meant(name.unwrap())),
                        "{argv:?}: {message}"
                    );
                }
                other => panic!("{argv:?}: {other:?}"),
            }
        }
        match read(&["kern", "frobnicate"]) {
            Some(WordForCount::Unknown(message)) => assert!(
                message.starts_with("`frobnicate` is not a command, nor a number of tasks — the commands are status, release, watch, schedule, report,"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(read(&["kern", "help"]), Some(WordForCount::Help(None)));
        assert_eq!(
            read(&["kern", "help", "status"]),
            Some(WordForCount::Help(Some("status".into())))
        );
        assert_eq!(
            read(&["kern", "help", "nope"]),
            Some(WordForCount::Help(None))
        );
        // Numbers out of range and bad delays keep clap's own message.
        assert_eq!(read(&["kern", "0"]), None);
        assert_eq!(read(&["kern", "10", "soon"]), None);
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
