//! kern: a git-native loop runner that drives a SPEC.md task list to commits with a coding
//! agent, unattended. See DESIGN.md for the contract between the parts; each module below owns
//! one concept and says so in its opening doc comment. Data flows one way:
//! cli -> config -> pipeline -> stage_runner -> agent/supervisor; pipeline -> spec/repository.

pub mod agent;
pub mod atomic_file;
pub mod cli;
pub mod command;
pub mod error;
pub mod learnings;
pub mod pipeline;
pub mod prompt;
pub mod reporter;
pub mod repository;
pub mod retry;
pub mod scripted_agent;
pub mod settings;
pub mod spec;
pub mod stage;
pub mod state;
pub mod supervisor;
pub mod timestamp;
pub mod workspace;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::command::{completions, demo, doctor, dry_run, init, status};
use crate::error::{Error, Result};
use crate::reporter::diagnostics;
use crate::settings::Settings;
use crate::supervisor::interrupt;

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
        None if settings.dry_run => dry_run::run(settings),
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
        Some(Command::Status { json, dir }) => status::run(settings, json, dir),
        Some(Command::Init { prompts }) => {
            let repo = repository::Repository::discover(&settings.cwd)?;
            let written = init::run(repo.top(), &settings.spec, prompts)?;
            if !settings.quiet {
                let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
                eprintln!("kern: wrote {}", names.join(", "));
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
        Some(Command::Log { follow }) => command::log::run(settings, follow),
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
