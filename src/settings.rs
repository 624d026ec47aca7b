//! Resolved settings: what a run will actually do, decided once from the command line, the
//! working folder and the environment, and handed down (cli -> settings -> command -> pipeline
//! -> stages -> agent/supervisor).
//!
//! The one decision a reader must know: [`Settings::resolve`] is the only reader of the
//! process's environment and working folder on the run path (clap reads the `KERN_*` option
//! variables just before it). Everything below takes what it needs from here, so `kern demo`
//! runs the real loop on its own repository and state root by passing other settings — no
//! `chdir`, no `setenv` — and `kern::run` can be called twice in one process.

pub(crate) mod config;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::agent::Agent;
use crate::cli::{CheckBaseline, Cli};
use crate::error::{Error, Result};
use crate::reporter::{ColorChoice, OutputEnv};
use crate::retry::RetryPolicy;
use crate::state::StateDir;
use crate::supervisor::invocation::Limits;

/// Longest retry delay: later retries grow exponentially up to this.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(10 * 60);

/// Where `--pace` draws the line in a usage window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaceLine {
    /// At most this fraction of the window.
    AtMost(f64),
    /// No more than the share of the window already elapsed, plus a margin.
    Even,
}

impl From<crate::cli::Pace> for PaceLine {
    fn from(pace: crate::cli::Pace) -> PaceLine {
        match pace {
            crate::cli::Pace::Percent(p) => PaceLine::AtMost(f64::from(p) / 100.0),
            crate::cli::Pace::Even => PaceLine::Even,
        }
    }
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
    /// The agent of the review stage, when it is not `agent` (`--review-agent`).
    pub review_agent: Option<Agent>,
    /// The review stage's model (`--review-model`).
    pub review_model: Option<String>,
    /// The agent a stage moves to when its own agent hits a far usage limit
    /// (`--fallback-agent`); never the same as `agent`.
    pub fallback_agent: Option<Agent>,
    /// The fallback agent's model (`--fallback-model`).
    pub fallback_model: Option<String>,
    /// How much of a short usage window (5-hour) kern spends (`--pace`).
    pub pace: Option<PaceLine>,
    /// How much of a week-long usage window kern spends (`--pace-week`; else as `pace`).
    pub pace_week: Option<PaceLine>,
    /// The fence (`--sandbox`, `--sandbox-network`, `[sandbox]` in `.kern/config.toml`).
    pub sandbox: SandboxSettings,
    /// Stage time limits.
    pub limits: Limits,
    /// Retries and waits.
    pub retry: RetryPolicy,
    /// Failed attempts before decomposition is asked for (once: a failure under it blocks).
    pub max_attempts: u32,
    /// The cost budget in USD.
    pub max_cost: Option<f64>,
    /// The check command.
    pub check: Option<String>,
    /// Whether the check runs once before any agent.
    pub check_baseline: CheckBaseline,
    /// The check command's time limit.
    pub check_timeout: Duration,
    /// Start on a dirty tree, leaving those paths out of commits.
    pub allow_dirty: bool,
    /// `--tests-read-only`: no task may change or delete an existing test file.
    pub tests_read_only: bool,
    /// `--tests-first`: every task is tested first, its check the command.
    pub tests_first: bool,
    /// `--scope`: what happens to changes outside a task's Scope.
    pub scope: crate::cli::ScopeMode,
    /// `--max-task-files`: a task whose Scope covers more files is split before it is
    /// implemented.
    pub max_task_files: Option<u32>,
    /// `--level`: every task's discovery level, unless its own Level note says otherwise.
    pub level: Option<u8>,
    /// Skip git hooks.
    pub no_verify: bool,
    /// The longest a git hook, clean filter or signing program may run.
    pub hook_timeout: Duration,
    /// New or changed files larger than this stay out of commits.
    pub max_file_size: u64,
    /// `--skip-optional`: never start an optional task (`[ ]*`).
    pub skip_optional: bool,
    /// `-j N`: tasks run at once, each in its own worktree (1: in the work tree itself).
    pub jobs: u32,
    /// `--review`: each task's commit stays on its branch `kern/<task>`.
    pub review: bool,
    /// `--remote`: the git remote the run claims tasks on and lands them through.
    pub remote: Option<String>,
    /// `--pr`: each task parked as with `review`, and a pull request opened for it.
    pub pr: bool,
    /// `--claim-ttl`: how long a claim holds unless renewed.
    pub claim_ttl: std::time::Duration,
    /// The state root (`$KERN_STATE_DIR`, else `$XDG_STATE_HOME/kern`, else
    /// `~/.local/state/kern`; see `state`).
    pub state_root: PathBuf,
    /// Where versions before kept the state (`${TMPDIR:-/tmp}/claude/kern`): only named, by
    /// `kern doctor`, when this project has a folder there.
    pub old_state_root: PathBuf,
    /// The folder kern runs in (the repository is found from here).
    pub cwd: PathBuf,
    /// kern's own command line, for the lock record.
    pub argv: Vec<String>,
    /// Where each setting that is not at its default came from: the command line, a `KERN_*`
    /// variable or `.kern/config.toml:LINE` (for `-n` and `doctor`).
    pub origins: Vec<config::Origin>,
    /// What the environment says about output: `NO_COLOR`, `TERM=dumb`, `KERN_LOG`.
    pub output: OutputEnv,
    /// The `--notify` command.
    pub notify: Option<String>,
    /// `--tracker`: the tracker told what becomes of the tasks that came from it.
    pub tracker: Option<crate::cli::Tracker>,
    /// How long one call of the tracker's CLI may take.
    pub tracker_timeout: Duration,
    /// `--detach`: start the run in the background and return.
    pub detach: bool,
    /// This is the background run `--detach` started: no terminal; its lines go to run.log.
    pub detached: bool,
    /// `PATH`, where the sleep inhibitor is looked for.
    pub path_var: Option<OsString>,
    /// What `kern watch` does with a run that dies or stalls.
    pub watch: WatchPolicy,
    /// The `kern watch` that started this run (`--watched-by`), for `run.jsonl`.
    pub watched_by: Option<String>,
    /// The night's deadline (`--until`, `--deadline`, or the watchdog's `--deadline-at`).
    pub deadline: Option<Deadline>,
    /// The home folder (`HOME`), where launchd's agents are.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` (an absolute one), else `<home>/.config`: where systemd's user units
    /// are.
    pub config_home: PathBuf,
}

/// When the night ends (DESIGN.md section 20): no stage starts that cannot finish before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// The moment.
    pub at: crate::timestamp::Timestamp,
    /// It as the person reads it: the local time of day (`07:00`), with the date when it is
    /// not today.
    pub shown: String,
}

impl Deadline {
    /// The deadline a command line asks for, seen at `now` (local time): `--deadline-at` (a
    /// watchdog's, kept across restarts), else the earlier of `--until` and `--deadline`.
    pub(crate) fn resolve<Tz: chrono::TimeZone>(
        deadline_at: Option<crate::timestamp::Timestamp>,
        until: Option<crate::timestamp::Until>,
        after: Option<Duration>,
        now: &chrono::DateTime<Tz>,
    ) -> Option<Deadline>
    where
        Tz::Offset: std::fmt::Display,
    {
        let start = crate::timestamp::Timestamp::from_epoch_seconds(now.timestamp());
        let until = until.map(|u| u.next_after(now));
        let after = after.map(|d| {
            crate::timestamp::Timestamp::from_epoch_seconds(
                start
                    .epoch_seconds()
                    .saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)),
            )
        });
        let earlier = match (until, after) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let at = deadline_at.or(earlier)?;
        let local =
            chrono::DateTime::<chrono::Utc>::from(at.system_time()).with_timezone(&now.timezone());
        let shown = if local.date_naive() == now.date_naive() {
            local.format("%H:%M").to_string()
        } else {
            local.format("%Y-%m-%d %H:%M").to_string()
        };
        Some(Deadline { at, shown })
    }
}

/// How `kern watch` keeps a night going (DESIGN.md section 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchPolicy {
    /// No progress for this long, beyond the silences the run's own limits bound, is a stall.
    pub stall_after: Duration,
    /// Restarts in a row (without a task finished between them) before the run is left
    /// stopped.
    pub max_restarts: u32,
    /// The wait before the first restart in a row (doubled for each next one).
    pub restart_delay: Duration,
}

/// How the fenced processes are fenced: what the person chose, and what the environment says
/// about where the agents and caches keep their files.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// `--sandbox`.
    pub mode: crate::sandbox::Mode,
    /// `--sandbox-network`.
    pub network: crate::sandbox::Network,
    /// `[sandbox] hide`.
    pub hide: Vec<PathBuf>,
    /// `[sandbox] write`.
    pub write: Vec<PathBuf>,
    /// `[sandbox] allow_hosts`.
    pub allow_hosts: Vec<crate::sandbox::HostRule>,
    /// `[sandbox] pass_env`.
    pub pass_env: Vec<String>,
    /// `[sandbox] checks`.
    pub checks: crate::sandbox::ChecksPlace,
    /// The home folder.
    pub home: Option<PathBuf>,
    /// Where Claude Code is pointed for its API (`ANTHROPIC_BASE_URL`, the Vertex and Bedrock
    /// ones), when it is.
    pub claude_urls: Vec<String>,
    /// Claude Code's configuration folder when moved (`CLAUDE_CONFIG_DIR`).
    pub claude_dir: Option<PathBuf>,
    /// Codex's home (`CODEX_HOME`, else `~/.codex`).
    pub codex_home: Option<PathBuf>,
    /// Cache folders named by variables (`PRE_COMMIT_HOME`, `XDG_CACHE_HOME`, `CARGO_HOME`,
    /// …).
    pub cache_dirs: Vec<PathBuf>,
    /// The person's session sockets and folders named by variables (`SSH_AUTH_SOCK`,
    /// `XDG_RUNTIME_DIR`, `GNUPGHOME`): hidden.
    pub session_paths: Vec<PathBuf>,
}

impl SandboxSettings {
    /// What the environment `var` says, with the person's choices from `cli`.
    fn resolve(cli: &Cli, var: &dyn Fn(&str) -> Option<OsString>) -> SandboxSettings {
        let path = |name: &str| var(name).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = path("HOME");
        let claude_urls = [
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_VERTEX_BASE_URL",
            "ANTHROPIC_BEDROCK_BASE_URL",
        ]
        .iter()
        .filter_map(|name| var(name).map(|v| v.to_string_lossy().into_owned()))
        .collect();
        let mut cache_dirs: Vec<PathBuf> = crate::sandbox::secrets::CACHE_VARIABLES
            .iter()
            .filter_map(|name| path(name))
            .collect();
        if let Some(cargo) = path("CARGO_HOME") {
            // Cargo writes its locks at the top (`.package-cache`, `.global-cache`), not only
            // in `registry/` and `git/`: the whole folder is the layer, its credentials hidden.
            cache_dirs.push(cargo);
        }
        let mut session_paths: Vec<PathBuf> = ["SSH_AUTH_SOCK", "XDG_RUNTIME_DIR", "GNUPGHOME"]
            .iter()
            .filter_map(|name| path(name))
            .collect();
        if let Some(cargo) = path("CARGO_HOME") {
            session_paths.push(cargo.join("credentials.toml"));
            session_paths.push(cargo.join("credentials"));
        }
        let codex_home = crate::agent::codex_provider::codex_home(
            var("CODEX_HOME")
                .map(|v| v.to_string_lossy().into_owned())
                .as_deref(),
            home.as_deref(),
        );
        SandboxSettings {
            mode: cli.global.sandbox,
            network: cli.global.sandbox_network,
            hide: cli.fence.sandbox_hide.clone(),
            write: cli.fence.sandbox_write.clone(),
            allow_hosts: cli.fence.sandbox_allow_hosts.clone(),
            pass_env: cli.fence.sandbox_pass_env.clone(),
            checks: cli.fence.sandbox_checks,
            claude_dir: path("CLAUDE_CONFIG_DIR"),
            codex_home,
            home,
            claude_urls,
            cache_dirs,
            session_paths,
        }
    }
}

/// Reads one environment variable (the process's, or a test's table).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

impl Settings {
    /// How long the run's own limits let each kind of silence last, for its heartbeat: an
    /// agent `--idle-timeout`, the check `--check-timeout`, a commit four hooks of
    /// `--hook-timeout` each (pre-commit, prepare-commit-msg, commit-msg, post-commit).
    pub(crate) fn quiet_limits(&self) -> crate::state::lock::QuietLimits {
        crate::state::lock::QuietLimits {
            agent: self.limits.idle_timeout,
            check: self.check_timeout,
            commit: self.hook_timeout.saturating_mul(4),
        }
    }

    /// How task selection treats optional tasks.
    pub fn select_options(&self) -> crate::spec::SelectOptions {
        crate::spec::SelectOptions {
            skip_optional: self.skip_optional,
            parked: Vec::new(),
        }
    }

    /// The settings of this process: its command line, working folder and environment (with
    /// the home folder from the user database when `HOME` is not set: a service, a cron job).
    pub fn from_process(cli: &Cli) -> Result<Settings> {
        Settings::from_process_as(cli, std::env::args().collect())
    }

    /// [`Settings::from_process`] for a command line `argv` this process was not started
    /// with (the run `kern watch` starts: its settings are the ones that run will have).
    pub(crate) fn from_process_as(cli: &Cli, argv: Vec<String>) -> Result<Settings> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let env = |name: &str| match std::env::var_os(name) {
            Some(value) if !value.is_empty() => Some(value),
            _ if name == "HOME" => nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|user| user.dir.into_os_string()),
            value => value,
        };
        Settings::resolve(cli, cwd, argv, &env)
    }

    /// Resolves the command line against a working folder and an environment.
    pub fn resolve(cli: &Cli, cwd: PathBuf, argv: Vec<String>, env: Env<'_>) -> Result<Settings> {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        let agent: Agent = cli.global.agent.parse().map_err(Error::Usage)?;
        let run = &cli.run;
        let named = |flag: &str, value: &Option<String>| -> Result<Option<Agent>> {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| Agent::from_flag(flag, v).map_err(Error::Usage))
                .transpose()
        };
        let fallback_agent = named("--fallback-agent", &cli.global.fallback_agent)?;
        let review_agent =
            named("--review-agent", &cli.global.review_agent)?.filter(|a| *a != agent);
        let nonempty = |m: &Option<String>| m.clone().filter(|m| !m.trim().is_empty());
        let fallback_model = nonempty(&run.fallback_model);
        if fallback_agent.as_ref() == Some(&agent) {
            return Err(Error::Usage(format!(
                "--fallback-agent `{agent}` is the --agent itself — give the other agent (claude or codex), or leave --fallback-agent out"
            )));
        }
        if fallback_model.is_some() && fallback_agent.is_none() {
            return Err(Error::Usage(
                "--fallback-model is set but --fallback-agent is not — give --fallback-agent, or unset --fallback-model (KERN_FALLBACK_MODEL)".into(),
            ));
        }
        Ok(Settings {
            iterations: cli.iterations,
            delay: cli.delay,
            dry_run: cli.dry_run,
            verbose: cli.global.verbose,
            quiet: cli.global.quiet,
            color: cli.global.color,
            spec: cli.global.spec.clone(),
            agent,
            model: nonempty(&run.model),
            review_agent,
            review_model: nonempty(&run.review_model),
            fallback_agent,
            fallback_model,
            pace: run.pace.map(PaceLine::from),
            pace_week: run
                .pace_week
                .map(crate::cli::Pace::Percent)
                .map(PaceLine::from),
            sandbox: SandboxSettings::resolve(cli, &var),
            limits: Limits {
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
                fallback_after: run.fallback_after,
            },
            max_attempts: run.max_attempts,
            max_cost: run.max_cost,
            check: run.check.clone().filter(|c| !c.trim().is_empty()),
            check_baseline: run.check_baseline,
            check_timeout: run.check_timeout,
            allow_dirty: run.allow_dirty,
            tests_read_only: run.tests_read_only,
            tests_first: run.tests_first,
            scope: run.scope,
            max_task_files: run.max_task_files,
            level: run.level,
            no_verify: run.no_verify,
            hook_timeout: run.hook_timeout,
            max_file_size: run.max_file_size,
            state_root: StateDir::root_for(
                var("KERN_STATE_DIR"),
                var("XDG_STATE_HOME"),
                var("HOME"),
            ),
            old_state_root: StateDir::old_root(var("TMPDIR")),
            cwd,
            argv,
            origins: cli.origins.clone(),
            output: OutputEnv {
                no_color: var("NO_COLOR").is_some(),
                dumb_terminal: env("TERM").is_some_and(|t| t == "dumb"),
                kern_log: var("KERN_LOG").map(|v| v.to_string_lossy().into_owned()),
            },
            skip_optional: run.skip_optional,
            jobs: run.jobs,
            review: run.review || run.pr,
            pr: run.pr,
            remote: run.remote.clone().filter(|r| !r.trim().is_empty()),
            claim_ttl: run.claim_ttl,
            notify: run.notify.clone().filter(|c| !c.trim().is_empty()),
            tracker: run.tracker,
            tracker_timeout: run.tracker_timeout,
            detach: run.detach,
            detached: run.detached,
            path_var: var("PATH"),
            watch: WatchPolicy {
                stall_after: cli.night.stall_after,
                max_restarts: cli.night.max_restarts,
                restart_delay: cli.night.restart_delay,
            },
            watched_by: cli
                .night
                .watched_by
                .clone()
                .filter(|w| !w.trim().is_empty()),
            home: var("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
            config_home: var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| {
                    var("HOME")
                        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
                        .join(".config")
                }),
            deadline: Deadline::resolve(
                cli.night.deadline_at,
                cli.night.until,
                cli.night.deadline,
                &chrono::Local::now(),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_deadline_is_one_moment_the_watchdogs_first() {
        let zone = chrono::FixedOffset::east_opt(3600).unwrap();
        let now = chrono::TimeZone::with_ymd_and_hms(&zone, 2026, 11, 18, 23, 0, 0).unwrap();
        let until = Some(crate::timestamp::Until::Clock { hour: 7, minute: 0 });
        let at: crate::timestamp::Timestamp = "2026-11-19T05:00:00Z".parse().unwrap();
        let cases = [
            (None, None, None, None),
            (
                None,
                until,
                None,
                Some(("2026-11-19T06:00:00Z", "2026-11-19 07:00")),
            ),
            (
                None,
                None,
                Some(Duration::from_secs(1800)),
                Some(("2026-11-18T22:30:00Z", "23:30")),
            ),
            (
                Some(at),
                until,
                None,
                Some(("2026-11-19T05:00:00Z", "2026-11-19 06:00")),
            ),
            // Both: the earlier one holds.
            (
                None,
                until,
                Some(Duration::from_secs(3600)),
                Some(("2026-11-18T23:00:00Z", "2026-11-19 00:00")),
            ),
        ];
        for (deadline_at, until, after, want) in cases {
            let got = Deadline::resolve(deadline_at, until, after, &now);
            assert_eq!(
                got.as_ref().map(|d| (d.at.to_string(), d.shown.clone())),
                want.map(|(a, s)| (a.to_string(), s.to_string())),
                "{deadline_at:?} {until:?} {after:?}"
            );
        }
    }

    /// The settings for `argv` in `/work` with exactly the environment `vars`.
    fn resolve(argv: &[&str], vars: &[(&str, &str)]) -> Settings {
        let cli = Cli::try_parse_from(argv).unwrap();
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_string(), OsString::from(v)))
            .collect();
        let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Settings::resolve(&cli, "/work".into(), Vec::new(), &env).unwrap()
    }

    #[test]
    fn the_state_root_and_output_come_from_the_given_environment() {
        let s = resolve(&["kern"], &[("HOME", "/home/me")]);
        let home_state = if cfg!(target_os = "macos") {
            "/home/me/Library/Application Support/kern"
        } else {
            "/home/me/.local/state/kern"
        };
        assert_eq!(s.state_root, PathBuf::from(home_state));
        assert_eq!(s.old_state_root, PathBuf::from("/tmp/claude/kern"));
        assert_eq!(s.output, OutputEnv::default());
        assert_eq!(s.cwd, PathBuf::from("/work"));
        let s = resolve(
            &["kern"],
            &[
                ("HOME", "/home/me"),
                ("XDG_STATE_HOME", "/home/me/state"),
                ("TMPDIR", "/var/tmp"),
                ("NO_COLOR", "1"),
                ("TERM", "dumb"),
            ],
        );
        assert_eq!(s.state_root, PathBuf::from("/home/me/state/kern"));
        assert_eq!(s.old_state_root, PathBuf::from("/var/tmp/claude/kern"));
        assert!(s.output.no_color && s.output.dumb_terminal);
        // A relative XDG_STATE_HOME is invalid (the XDG spec): ignored.
        let s = resolve(
            &["kern"],
            &[("HOME", "/home/me"), ("XDG_STATE_HOME", "state")],
        );
        assert_eq!(s.state_root, PathBuf::from(home_state));
        let s = resolve(
            &["kern"],
            &[
                ("KERN_STATE_DIR", "/s"),
                ("TMPDIR", "/var/tmp"),
                ("NO_COLOR", ""),
            ],
        );
        assert_eq!(s.state_root, PathBuf::from("/s"));
        assert!(!s.output.no_color, "an empty NO_COLOR is no request");
    }

    #[test]
    fn defaults_match_the_design() {
        let s = resolve(&["kern"], &[]);
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
        assert_eq!(s.hook_timeout, Duration::from_secs(600));
        assert_eq!(s.max_file_size, 100 << 20);
        assert!(!s.skip_optional);
        let cli = Cli::try_parse_from(["kern", "--skip-optional"]).unwrap();
        assert!(
            Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None)
                .unwrap()
                .select_options()
                .skip_optional
        );
    }

    #[test]
    fn fallback_and_review_agents() {
        let s = resolve(&["kern"], &[]);
        assert_eq!(
            (s.fallback_agent, s.review_agent, s.pace),
            (None, None, None)
        );
        assert_eq!(s.sandbox.mode, crate::sandbox::Mode::Kern);
        let s = resolve(
            &[
                "kern",
                "--fallback-agent",
                "codex",
                "--fallback-model",
                "o3",
                "--review-agent",
                "program:/bin/reviewer",
                "--pace",
                "--sandbox=agent",
            ],
            &[],
        );
        assert_eq!(s.fallback_agent, Some(Agent::Codex));
        assert_eq!(s.fallback_model.as_deref(), Some("o3"));
        assert_eq!(
            s.review_agent,
            Some(Agent::Program(PathBuf::from("/bin/reviewer")))
        );
        assert_eq!(s.pace, Some(PaceLine::AtMost(0.9)));
        assert_eq!(s.sandbox.mode, crate::sandbox::Mode::Agent);
        // A review agent that is the agent itself is none.
        let s = resolve(
            &[
                "kern",
                "--fallback-agent",
                "claude",
                "--agent",
                "codex",
                "--review-agent",
                "codex",
                "--pace=80",
            ],
            &[],
        );
        assert_eq!(s.agent, Agent::Codex);
        assert_eq!(s.fallback_agent, Some(Agent::Claude));
        assert_eq!(s.review_agent, None);
        assert_eq!(s.pace, Some(PaceLine::AtMost(0.8)));
        assert_eq!(s.pace_week, None);
        let s = resolve(&["kern", "--pace=even", "--pace-week=70"], &[]);
        assert_eq!(
            (s.pace, s.pace_week),
            (Some(PaceLine::Even), Some(PaceLine::AtMost(0.7)))
        );
    }

    #[test]
    fn bad_fallback_and_review_agents_are_usage_errors() {
        let table: [(&[&str], &str); 4] = [
            (
                &["kern", "--fallback-agent", "gpt"],
                "--fallback-agent: unknown agent `gpt` — use claude, codex or program:<path>",
            ),
            (
                &["kern", "--review-agent", "program:"],
                "--review-agent: unknown agent `program:` — use claude, codex or program:<path>",
            ),
            (
                &["kern", "--fallback-agent", "claude"],
                "--fallback-agent `claude` is the --agent itself — give the other agent (claude or codex), or leave --fallback-agent out",
            ),
            (
                &["kern", "--fallback-model", "o3"],
                "--fallback-model is set but --fallback-agent is not — give --fallback-agent, or unset --fallback-model (KERN_FALLBACK_MODEL)",
            ),
        ];
        for (argv, message) in table {
            let cli = Cli::try_parse_from(argv).unwrap();
            let e = Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{argv:?}");
            assert_eq!(e.to_string(), message, "{argv:?}");
        }
    }

    #[test]
    fn a_bad_agent_is_a_usage_error() {
        let cli = Cli::try_parse_from(["kern", "--agent", "gpt"]).unwrap();
        let e = Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("claude, codex or program:<path>"),
            "{e}"
        );
    }
}
