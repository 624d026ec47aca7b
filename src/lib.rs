//! kern: a git-native loop runner that drives a SPEC.md task list to commits with a coding
//! agent, unattended. DESIGN.md is the contract between the parts; each module below owns one
//! concept and says so in its opening doc comment.
//!
//! The floors, top to bottom; a module uses only the ones below it, never one above
//! (`docs/architecture.md`; `tests/integration/architecture.rs` fails on a use that points up):
//! `command → pipeline → workspace → settings → cli → reporter → {prompt, repository, state,
//! learnings, retry, scripted_agent, tracker} → {agent, event} → {stage, supervisor} → sandbox →
//! spec → atomic_file → error → {text, timestamp, private_file, oid}`, the one exception
//! `error → spec` (the error enum carries SPEC.md's diagnostics).
//!
//! - `command/`: one file per subcommand (`claims.rs`: `status --remote`, `release`; `watch/`,
//!   the watchdog above a night, with its pure decisions in `decide.rs`; `schedule.rs`, the
//!   night installed with the system's scheduler, its unit texts in `schedule/units.rs`), and
//!   `running.rs`, the live view `status` shows, and `tracked.rs`, the tasks from the tracker.
//! - `pipeline/`: the loop (`mod.rs`, `iteration.rs`, the pure `decide.rs`, audits, the
//!   journaled commit, recovery, `error_research.rs` — what the next attempt is told after a
//!   failure, and when the approaches are exhausted — `parallel/` (`-j`), `remote/` (tasks
//!   claimed on a git remote and landed there, `--remote`)), and `pipeline/stage/`: one stage
//!   as the loop runs it — `plan.rs` (the one `StagePlan` the run carries out and the dry run
//!   prints), `inputs.rs` (what it sees), `runner.rs` (to a decision,
//!   using the pure `retry::next_step`), `attempt.rs` (one try; agent output becomes the record).
//! - `workspace`, `settings` (with `.kern/config.toml` folded in), [`cli`].
//! - `reporter/` (what the person sees, `--notify`; `voice.rs` words every run event).
//! - `prompt/` (the template engine), `repository/` (everything git), `state/` (the state
//!   folder and its naming, the journal, the lock with its heartbeat, `run.jsonl`, the report,
//!   `watch.json`, resume inference),
//!   `learnings` (with its `constraint` lifecycle), `retry`, `scripted_agent`, `tracker` (GitHub
//!   issues in and out of SPEC.md through `gh`: `kern import`, and `--tracker`'s listener).
//! - `agent/` (argv, stream parsers, failure classes) and `event/` (what happens in a run: the
//!   `RunEvent` and `Told` every listener hears); `stage/` (the stage vocabulary: kinds,
//!   tool policies, reports, schemas, the record) and `supervisor/` (process groups, signals).
//! - `sandbox/`: kern's fence around every agent and whatever runs its code — its pure
//!   description, the Linux init (`kern __fence`: namespaces, mounts, Landlock), the macOS
//!   Seatbelt profile, the egress proxy, and the preflight that says whether it can be made.
//! - `spec/` (SPEC.md), `atomic_file`, [`error`], and the leaves `text`, `timestamp`,
//!   `private_file`, `oid`.
//!
//! The modules are private: the compiler reports what nothing uses. [`testing`] is the one seam
//! the integration tests, the benchmarks and the fuzz target reach through.

mod agent;
mod atomic_file;
pub mod cli;
mod command;
pub mod error;
mod event;
mod learnings;
mod oid;
mod pipeline;
mod private_file;
mod prompt;
mod reporter;
mod repository;
mod retry;
mod sandbox;
mod scripted_agent;
mod settings;
mod spec;
mod stage;
mod state;
mod supervisor;
mod text;
mod timestamp;
mod tracker;
mod workspace;

/// What the integration tests, the benchmarks and the fuzz target reach inside the crate, and
/// nothing else: the modules are private so the compiler reports what no one uses.
#[doc(hidden)]
pub mod testing {
    pub mod agent {
        pub use crate::agent::Invocation;
        pub mod claude {
            pub use crate::agent::claude::SANDBOX_SETTINGS;
        }
        pub mod codex_provider {
            pub use crate::agent::codex_provider::{CodexProvider, Credential, provider};
        }
    }
    pub mod command {
        pub mod init {
            pub use crate::command::init::{STARTER_LEARNINGS, STARTER_SPEC};
        }
    }
    pub mod prompt {
        pub use crate::prompt::{
            BUDGET_ATTEMPTS, BUDGET_COMMITS, BUDGET_DIFF, BUDGET_LEARNINGS, BUDGET_PREV_RESULT,
            BUDGET_SPEC_PATH, BUDGET_TASK, Templates,
        };
    }
    pub mod repository {
        pub use crate::repository::{
            CommitRequest, GitOptions, Head, INDEX_LOCK_WAIT, LeftOut, Repository,
        };
    }
    pub mod spec {
        pub use crate::spec::{
            Applied, Document, Edit, NoteKind, SpecFile, Task, TaskIdentity, TaskState, apply,
            apply_edit, select, validate,
        };
    }
    pub mod stage {
        pub use crate::stage::Stage;
    }
    pub mod state {
        pub use crate::state::head_folder;
        pub mod lock {
            pub use crate::state::lock::{
                AgentGroup, LockRecord, Phase, RunLock, Takeover, stop_orphaned_agent,
            };
        }
    }
    pub mod supervisor {
        pub use crate::supervisor::{
            EndReason, Finished, LINE_CAP, Limits, LineAction, ProcessGroup, STDOUT_CAP,
            SpawnError, StreamFiles, run,
        };
        pub mod identity {
            pub use crate::supervisor::identity::{ProcessIdentity, pid_alive, start_time};
        }
        pub mod interrupt {
            pub use crate::supervisor::interrupt::Interrupt;
        }
    }
}

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::command::{completions, demo, doctor, dry_run, init, status};
use crate::error::{Error, Result};
use crate::reporter::diagnostics;
use crate::settings::Settings;
use crate::supervisor::interrupt;

/// The command line this process was started with, with the project's `.kern/config.toml`
/// folded in (flags and `KERN_*` variables win). Clap's own errors and `--help` end the
/// process as clap does; a bad settings file is an error (exit 2).
pub fn command_line() -> Result<Cli> {
    repository::accept_formats();
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    settings::config::command_line(args.clone(), &cwd).inspect_err(|e| {
        // `kern status --json` prints one JSON object, also when the settings file is bad.
        if args.iter().any(|a| a == "status") && args.iter().any(|a| a == "--json") {
            let _ = status::print_out(&format!("{}\n", status::error_json(e)));
        }
    })
}

/// The fence's own entry points, which run before anything else (no runtime, no thread: a
/// user namespace is only made by a single-threaded process): `kern __fence PLAN`, the init
/// of a fenced process, and `kern __fence-ok`, the command of the fence's preflight. `None`
/// for every other command line.
pub fn fence_entry() -> Option<u8> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    if first == sandbox::preflight::OK_ARG {
        return Some(0);
    }
    if first != "__fence" {
        return None;
    }
    #[cfg(target_os = "linux")]
    {
        let plan = args.next()?;
        let code = sandbox::linux::init::main(std::path::Path::new(&plan));
        Some(u8::try_from(code).unwrap_or(1))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Some(125)
    }
}

/// Runs the command the person typed. `main.rs` maps the error to an exit code.
pub async fn run(cli: Cli) -> Result<()> {
    let settings = match Settings::from_process(&cli) {
        Ok(settings) => settings,
        Err(e) => {
            if let Some(Command::Status { json: true, .. }) = cli.command {
                status::print_out(&format!("{}\n", status::error_json(&e)))?;
            }
            return Err(e);
        }
    };
    run_with(cli, &settings).await
}

/// Runs `cli` with resolved `settings` (the testable core: no process state is read here).
pub async fn run_with(cli: Cli, settings: &Settings) -> Result<()> {
    diagnostics::init(settings.verbose, settings.color, &settings.output);
    match cli.command {
        None if settings.dry_run => dry_run::run(settings, cli.prompts_dir.as_deref()),
        None if settings.detach => command::detach::run(settings),
        None => {
            let reporter = if settings.detached {
                // Its lines reach run.log through the reporter; stdout and stderr are run.log
                // too (for what bypasses the reporter), so nothing is written twice.
                reporter::Reporter::with_writer(
                    reporter::Mode::Plain,
                    false,
                    Box::new(std::io::sink()),
                )
            } else {
                reporter::Reporter::new(settings.color, settings.quiet, &settings.output)
            };
            let interrupt = interrupt::Interrupt::install()?;
            command::run::run(settings, &reporter, &interrupt).await
        }
        Some(Command::Status {
            remote: Some(remote),
            json,
            ..
        }) => command::claims::status(settings, &remote, json),
        Some(Command::Status { json, dir, .. }) => status::run(settings, json, dir),
        Some(Command::Release { task, remote }) => {
            command::claims::release(settings, &task, &remote)
        }
        Some(Command::Claim { key, remote }) => {
            command::claims::claim_once(settings, &key, &remote)
        }
        Some(Command::Init { config: true, .. }) => {
            let repo = repository::Repository::discover(&settings.cwd)?;
            let written = settings::config::write_starter(repo.top())?;
            if !settings.quiet {
                eprintln!("kern: wrote {}", written.display());
                let relative = written.strip_prefix(repo.top()).unwrap_or(&written);
                eprintln!("{}", init::commit_advice(relative, 1));
            }
            Ok(())
        }
        Some(Command::Init { prompts, .. }) => {
            let repo = repository::Repository::discover(&settings.cwd)?;
            let written = init::run(repo.top(), &settings.spec, prompts)?;
            if !settings.quiet {
                let names: Vec<String> = written
                    .files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                match &written.kept {
                    Some(spec) => eprintln!(
                        "kern: wrote {}; kept {} as it is",
                        names.join(", "),
                        spec.display()
                    ),
                    None => eprintln!("kern: wrote {}", names.join(", ")),
                }
                if prompts {
                    eprintln!(
                        "{}",
                        init::commit_advice(
                            std::path::Path::new(".kern/prompts"),
                            crate::stage::Stage::ALL.len(),
                        )
                    );
                }
            }
            Ok(())
        }
        Some(Command::Report {
            since,
            run,
            json,
            markdown,
            html,
        }) => command::report::run(
            settings,
            &command::report::ReportRequest {
                since,
                run,
                json,
                markdown,
                html,
            },
        ),
        Some(Command::Import {
            tracker: _,
            label,
            milestone,
            assignee,
            repo,
            limit,
            dry_run,
            commit,
        }) => command::import::run(
            settings,
            &command::import::ImportRequest {
                filter: tracker::gh::ListFilter {
                    repo,
                    labels: label,
                    milestone,
                    assignee,
                    limit,
                },
                dry_run: dry_run || settings.dry_run,
                commit,
            },
        ),
        Some(Command::Log { follow }) => command::log::run(settings, follow),
        Some(Command::Watch { .. }) => command::watch::run(settings),
        Some(Command::Schedule(args)) => command::schedule::run(
            settings,
            &command::schedule::Request {
                at: args.at,
                until: args.until,
                scheduler: args.scheduler,
                list: args.list,
                remove: args.remove,
                args: args.args,
            },
        ),
        Some(Command::Accept { tasks }) => command::review::accept(settings, &tasks),
        Some(Command::Reject { task, reason }) => command::review::reject(settings, &task, &reason),
        Some(Command::Demo { keep }) => demo::run(settings, keep).await,
        Some(Command::Doctor) => doctor::run(settings).await,
        Some(Command::Completions { shell }) => {
            to_stdout(|out| completions::completions(shell, out))
        }
        Some(Command::Man) => to_stdout(completions::man_page),
        Some(Command::ScriptedAgent { scenario }) => scripted_agent::run(&scenario),
    }
}

/// Writes machine output to stdout; a reader that closed the pipe early (`| head`) is not an
/// error.
fn to_stdout(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match write(&mut out) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("stdout", e)),
        _ => Ok(()),
    }
}
