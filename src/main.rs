//! The `kern` binary: parse the command line, start the runtime, run, map errors to exit codes.

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(code) = kern::fence_entry() {
        return ExitCode::from(code);
    }
    let cli = match kern::command_line() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "kern: error: {error}");
            return ExitCode::from(error.exit_code());
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kern: error: cannot start the async runtime: {e}");
            return ExitCode::from(kern::error::EXIT_FAILURE);
        }
    };
    match runtime.block_on(kern::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Not eprintln!: it panics when stderr is gone (a terminal closed mid-run), and
            // the exit code must still say how the run ended.
            let _ = writeln!(std::io::stderr(), "kern: error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
