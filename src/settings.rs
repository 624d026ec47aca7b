//! Resolved settings: what a run will actually do, decided once from the command line and the
//! environment, and handed down (cli -> config -> pipeline -> stages -> agent/supervisor).
//!
//! Nothing below this layer reads the command line or `KERN_*` variables again. The state root
//! (`KERN_STATE_DIR`) is resolved here once, through `StateDir::root_from_env`, so that
//! `kern status --dir` and a run agree, and so that `kern demo` can point a run at its own
//! throw-away state root without touching the process environment.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::Agent;
use crate::cli::{Cli, ColorChoice};
use crate::error::{Error, Result};
use crate::state::StateDir;

/// Longest retry delay: later retries grow exponentially up to this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(10 * 60);

/// Iterations in a row that change nothing (no commit, no SPEC.md change) before a run stops
/// instead of spinning.
pub const MAX_IDLE_ITERATIONS: u32 = 3;

/// The time limits of one stage, enforced by the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageLimits {
    /// Longest a stage may run in all.
    pub stage_timeout: Duration,
    /// Longest the agent may print no line.
    pub idle_timeout: Duration,
    /// How long an agent that printed its result event may take to exit.
    pub result_grace: Duration,
}

/// How failed stages are retried and how long a usage limit may be waited out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after a transient failure.
    pub retries: u32,
    /// The first delay.
    pub first_delay: Duration,
    /// The largest delay.
    pub max_delay: Duration,
    /// The longest wait for a usage-limit reset.
    pub max_wait: Duration,
    /// Extra time after a usage-limit reset before the stage is tried again.
    pub reset_margin: Duration,
}

/// Everything a run needs to know, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Iterations at most.
    pub iterations: u32,
    /// Pause between iterations.
    pub delay: Duration,
    /// Dry run: no side effects at all.
    pub dry_run: bool,
    /// `-v` count.
    pub verbose: u8,
    /// `-q`.
    pub quiet: bool,
    /// Colour choice.
    pub color: ColorChoice,
    /// SPEC.md, as given (relative paths are relative to the repository's top folder).
    pub spec: PathBuf,
    /// The agent kind.
    pub agent: Agent,
    /// A model overriding the templates' front matter.
    pub model: Option<String>,
    /// Stage time limits.
    pub limits: StageLimits,
    /// Retries and waits.
    pub retry: RetryPolicy,
    /// Failed attempts before decomposition is asked for, and again before blocking.
    pub max_attempts: u32,
    /// The cost budget in USD.
    pub max_cost: Option<f64>,
    /// The check command.
    pub check: Option<String>,
    /// The check command's time limit.
    pub check_timeout: Duration,
    /// Start on a dirty tree, leaving those paths out of commits.
    pub allow_dirty: bool,
    /// Skip git hooks.
    pub no_verify: bool,
    /// `--skip-optional`: never start an optional task (`[ ]*`).
    pub skip_optional: bool,
    /// The state root (`$KERN_STATE_DIR`, else `${TMPDIR:-/tmp}/claude/kern`).
    pub state_root: PathBuf,
}

impl Settings {
    /// How task selection treats optional tasks.
    pub fn select_options(&self) -> crate::spec::SelectOptions {
        crate::spec::SelectOptions {
            skip_optional: self.skip_optional,
        }
    }

    /// Resolves the command line.
    pub fn from_cli(cli: &Cli) -> Result<Settings> {
        let agent: Agent = cli.global.agent.parse().map_err(Error::Usage)?;
        let run = &cli.run;
        Ok(Settings {
            iterations: cli.iterations,
            delay: cli.delay,
            dry_run: cli.dry_run,
            verbose: cli.global.verbose,
            quiet: cli.global.quiet,
            color: cli.global.color,
            spec: cli.global.spec.clone(),
            agent,
            model: run.model.clone().filter(|m| !m.trim().is_empty()),
            limits: StageLimits {
                stage_timeout: run.stage_timeout,
                idle_timeout: run.idle_timeout,
                result_grace: run.result_grace,
            },
            retry: RetryPolicy {
                retries: run.retries,
                first_delay: run.retry_delay,
                max_delay: MAX_RETRY_DELAY.max(run.retry_delay),
                max_wait: run.max_wait,
                reset_margin: run.reset_margin,
            },
            max_attempts: run.max_attempts,
            max_cost: run.max_cost,
            check: run.check.clone().filter(|c| !c.trim().is_empty()),
            check_timeout: run.check_timeout,
            allow_dirty: run.allow_dirty,
            no_verify: run.no_verify,
            skip_optional: run.skip_optional,
            state_root: StateDir::root_from_env(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn defaults_match_the_design() {
        let s = Settings::from_cli(&Cli::try_parse_from(["kern"]).unwrap()).unwrap();
        assert_eq!(s.iterations, 5);
        assert_eq!(s.delay, Duration::from_secs(10));
        assert_eq!(s.agent, Agent::Claude);
        assert_eq!(s.limits.stage_timeout, Duration::from_secs(3600));
        assert_eq!(s.limits.idle_timeout, Duration::from_secs(900));
        assert_eq!(s.limits.result_grace, Duration::from_secs(10));
        assert_eq!(s.retry.retries, 3);
        assert_eq!(s.retry.first_delay, Duration::from_secs(30));
        assert_eq!(s.retry.max_delay, Duration::from_secs(600));
        assert_eq!(s.retry.max_wait, Duration::from_secs(6 * 3600));
        assert_eq!(s.retry.reset_margin, Duration::from_secs(60));
        assert_eq!(s.max_attempts, 3);
        assert!(!s.skip_optional);
        let cli = Cli::try_parse_from(["kern", "--skip-optional"]).unwrap();
        assert!(
            Settings::from_cli(&cli)
                .unwrap()
                .select_options()
                .skip_optional
        );
    }

    #[test]
    fn a_bad_agent_is_a_usage_error() {
        let cli = Cli::try_parse_from(["kern", "--agent", "gpt"]).unwrap();
        let e = Settings::from_cli(&cli).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("claude, codex or program:<path>"),
            "{e}"
        );
    }
}
