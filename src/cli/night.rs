//! The options of a night, beside a run's own (`run.rs`): its deadline (`--until`,
//! `--deadline`), its watchdog's (`--stall-after`, `--max-restarts`, `--restart-delay`), the
//! hidden ones `kern watch` gives the run it starts, and the words of `kern watch` and `kern
//! schedule` (DESIGN.md section 20).
// The doc comments below are clap's help text, shown as written.
#![allow(rustdoc::invalid_html_tags)]

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::command;
use super::value::{DAY, HOUR, WEEK, duration_between};

/// Options of a night.
#[derive(Debug, Clone, Args)]
pub struct NightOptions {
    /// With `kern watch` (and `--detach`): how long a run may show no sign of progress — no
    /// event, no agent output, no tick of a wait — beyond the silences its own limits bound
    /// (--idle-timeout, --check-timeout, --hook-timeout) before the watchdog stops it and
    /// starts it again (3s to 24h).
    #[arg(long, value_name = "DURATION", env = "KERN_STALL_AFTER", default_value = "15m", value_parser = duration_between::<3, DAY>)]
    pub stall_after: Duration,

    /// With `kern watch`: how many times in a row (without a task finished between them) the
    /// watchdog starts a run that died or stalled before it leaves it stopped (0 to 100).
    #[arg(long, value_name = "N", env = "KERN_MAX_RESTARTS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_restarts: u32,

    /// With `kern watch`: the wait before a run is started again; each restart in a row doubles
    /// it, up to 10 min (0 to 1h).
    #[arg(long, value_name = "DURATION", env = "KERN_RESTART_DELAY", default_value = "30s", value_parser = duration_between::<0, HOUR>)]
    pub restart_delay: Duration,

    /// End the night by TIME: a time of day (07:00: its next coming by the local clock) or a
    /// moment (2026-11-19T07:00:00+01:00). No stage starts that could not finish before it, a
    /// stage still running then is stopped (it resumes on the next run), and the run ends with
    /// exit 0; with --deadline too, the earlier one holds. Default: no deadline.
    #[arg(long, value_name = "TIME", env = "KERN_UNTIL", value_parser = crate::timestamp::parse_until)]
    pub until: Option<crate::timestamp::Until>,

    /// End the night this long after it starts (5h45m), as --until does (1s to 7 days).
    /// Default: no deadline.
    #[arg(long, value_name = "DURATION", env = "KERN_DEADLINE", value_parser = duration_between::<1, WEEK>)]
    pub deadline: Option<Duration>,

    /// Set by `kern watch` on the run it starts: the night's deadline as one moment, so that a
    /// run started again keeps it.
    #[arg(long, hide = true, value_name = "TIME", value_parser = clap::value_parser!(crate::timestamp::Timestamp))]
    pub deadline_at: Option<crate::timestamp::Timestamp>,

    /// Set by `kern watch` on the run it starts: the watch's id, which the run's `run.jsonl`
    /// lines name.
    #[arg(long, hide = true, value_name = "ID")]
    pub watched_by: Option<String>,
}

/// What `kern schedule` takes.
#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// When the night starts, every day: a time of day (23:00).
    #[arg(long, value_name = "HH:MM", value_parser = crate::timestamp::parse_clock, required_unless_present_any = ["list", "remove"])]
    pub at: Option<crate::timestamp::Until>,
    /// When the night ends: a time of day (07:00), the run's --until.
    #[arg(long, value_name = "HH:MM", value_parser = crate::timestamp::parse_clock)]
    pub until: Option<crate::timestamp::Until>,
    /// The scheduler: auto (systemd where it runs, launchd on macOS, else cron), systemd,
    /// launchd or cron.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = Scheduler::Auto)]
    pub scheduler: Scheduler,
    /// List the nights kern has scheduled (for every repository).
    #[arg(long, conflicts_with_all = ["at", "until", "remove"])]
    pub list: bool,
    /// Remove this repository's night from the scheduler, leaving nothing behind.
    #[arg(long, conflicts_with_all = ["at", "until"])]
    pub remove: bool,
    /// The run's arguments (after `--`): ITERATIONS, DELAY and options, as `kern` takes them.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// The scheduler `kern schedule` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scheduler {
    /// systemd where it runs, launchd on macOS, else cron.
    Auto,
    /// A systemd user timer and service.
    Systemd,
    /// A launchd agent.
    Launchd,
    /// The crontab line, printed.
    Cron,
}

/// The run's arguments in `argv` (the program first) of a `kern watch` command line: every
/// argument but the program and the word `watch` itself (global options may stand before it:
/// `kern -v watch 10 30`). `None` when `argv` is no `kern watch`.
pub fn watch_args(argv: &[String]) -> Option<Vec<String>> {
    let command = command();
    let mut expects_value = false;
    for (i, arg) in argv.iter().enumerate().skip(1) {
        if expects_value {
            expects_value = false;
            continue;
        }
        if arg == "--" {
            return None;
        }
        if arg == "watch" {
            let mut args: Vec<String> = argv[1..i].to_vec();
            args.extend(argv[i + 1..].iter().cloned());
            return Some(args);
        }
        // An option that takes its value as the next argument (`--spec watch`).
        expects_value = !arg.contains('=')
            && command.get_arguments().any(|a| {
                let named = match arg.strip_prefix("--") {
                    Some(long) => a.get_long() == Some(long),
                    None => arg.len() == 2 && a.get_short().is_some_and(|c| arg.ends_with(c)),
                };
                named && a.get_action().takes_values()
            });
        if !arg.starts_with('-') {
            // ITERATIONS or another subcommand: no `kern watch`.
            return None;
        }
    }
    None
}
