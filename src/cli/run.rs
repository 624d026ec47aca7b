//! The options of a run (and of a dry run, which shows their effect), beside the night's
//! (`night.rs`) and the ones every command takes (`cli.rs`).
//!
//! The decision a reader must know: every one has a `KERN_*` environment variable and its
//! default in `--help`, and its range is checked as clap reads it (`value.rs`); what they
//! mean together is resolved in `settings.rs`.
// The doc comments below are clap's help text, shown as written (`kern/<task>`), not
// markdown for rustdoc.
#![allow(rustdoc::invalid_html_tags)]

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::Tracker;
use super::value::{DAY, HOUR, Pace, WEEK, duration_between, pace_value, parse_cost, parse_size};

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

/// Whether the check runs once before any agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckBaseline {
    /// Run it on the starting commit; a failure stops the run before any agent.
    Run,
    /// Do not.
    Skip,
}
