//! kern: a git-native loop runner that drives a SPEC.md task list to commits with a coding
//! agent, unattended. See DESIGN.md for the contract between the parts; each module below owns
//! one concept and says so in its opening doc comment.

pub mod agent;
pub mod atomic_file;
pub mod cli;
pub mod config;
pub mod error;
pub mod interrupt;
pub mod process_identity;
pub mod scripted_agent;
pub mod spec;
pub mod stage;
pub mod state_dir;
pub mod supervisor;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};

/// Runs the command the person typed. `main.rs` maps the error to an exit code.
pub async fn run(cli: Cli) -> Result<()> {
    let _settings = config::Settings::from_cli(&cli)?;
    match cli.command {
        None if cli.dry_run => Err(Error::NotAvailable("-n")),
        None => Err(Error::NotAvailable("run")),
        Some(Command::Status { .. }) => Err(Error::NotAvailable("status")),
        Some(Command::Init { .. }) => Err(Error::NotAvailable("init")),
        Some(Command::Demo { .. }) => Err(Error::NotAvailable("demo")),
        Some(Command::Doctor) => Err(Error::NotAvailable("doctor")),
        Some(Command::Completions { .. }) => Err(Error::NotAvailable("completions")),
        Some(Command::Man) => Err(Error::NotAvailable("man")),
        Some(Command::ScriptedAgent { scenario }) => scripted_agent::run(&scenario),
    }
}
