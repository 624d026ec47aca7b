//! kern: a git-native loop runner that drives a SPEC.md task list to commits with a coding
//! agent, unattended. See DESIGN.md for the contract between the parts; each module below owns
//! one concept and says so in its opening doc comment.

pub mod agent;
pub mod atomic_file;
pub mod cli;
pub mod completions;
pub mod config;
pub mod error;
pub mod init;
pub mod process_identity;
pub mod prompt;
pub mod spec;
pub mod stage;
pub mod state_dir;

use std::io::Write;
use std::path::PathBuf;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};

/// Runs the command the person typed. `main.rs` maps the error to an exit code.
pub async fn run(cli: Cli) -> Result<()> {
    let _settings = config::Settings::from_cli(&cli)?;
    match cli.command {
        None if cli.dry_run => Err(Error::NotAvailable("-n")),
        None => Err(Error::NotAvailable("run")),
        Some(Command::Status { .. }) => Err(Error::NotAvailable("status")),
        Some(Command::Init { prompts }) => {
            let top = repository_top()?;
            let written = init::run(&top, &cli.global.spec, prompts)?;
            if !cli.global.quiet {
                let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
                eprintln!("kern: wrote {}", names.join(", "));
            }
            Ok(())
        }
        Some(Command::Demo { .. }) => Err(Error::NotAvailable("demo")),
        Some(Command::Doctor) => Err(Error::NotAvailable("doctor")),
        Some(Command::Completions { shell }) => {
            to_stdout(|out| completions::completions(shell, out))
        }
        Some(Command::Man) => to_stdout(completions::man_page),
        Some(Command::ScriptedAgent { .. }) => Err(Error::NotAvailable("scripted-agent")),
    }
}

/// The top folder of the repository around the working directory.
///
/// Interim: the git layer (`repository.rs`) will own discovery; until it lands, `kern init`
/// finds the top folder here.
fn repository_top() -> Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let outside = || {
        Error::Repository(format!(
            "`{}` is not inside a git repository — run kern init inside a git repository (git init first)",
            cwd.display()
        ))
    };
    let repository = match git2::Repository::discover(&cwd) {
        Ok(repository) => repository,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(outside()),
        Err(e) => return Err(Error::git("cannot open the repository", e)),
    };
    match repository.workdir() {
        Some(top) => Ok(top.to_path_buf()),
        None => Err(Error::Repository(format!(
            "`{}` is a bare repository — run kern init in a work tree",
            repository.path().display()
        ))),
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
