//! Shell completions (`kern completions <shell>`) and the man page (`kern man`, hidden), both
//! generated from the clap definition in `cli.rs`.
//!
//! The one decision a reader must know: nothing here is written by hand, so the completions and
//! the man page cannot drift from the real command line; a new flag appears in both by itself.
//! The completions come from [`crate::cli::completion_command`], so a subcommand offers only
//! the options it takes (`kern log --<TAB>` has no `--agent`), as its `--help` shows them.

use clap::CommandFactory;

use crate::cli::{Cli, completion_command};

/// The name the completions are registered under: the binary's name.
const BIN_NAME: &str = "kern";

/// Writes the completion script for `shell` to `out`.
pub(crate) fn completions(
    shell: clap_complete::Shell,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    // clap_complete::generate panics on a write error; generating into memory first turns a
    // closed pipe (`kern completions bash | head`) into an ordinary error for the caller.
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut completion_command(), BIN_NAME, &mut buffer);
    out.write_all(&buffer)?;
    out.flush()
}

/// Writes kern's man page (roff, section 1) to `out`.
pub(crate) fn man_page(out: &mut dyn std::io::Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;

    fn completion_text(shell: Shell) -> String {
        let mut out = Vec::new();
        completions(shell, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn completions_name_kern_and_its_options() {
        let cases = [
            (Shell::Bash, "_kern()"),
            (Shell::Zsh, "#compdef kern"),
            (Shell::Fish, "complete -c kern"),
            (Shell::Elvish, "edit:completion:arg-completer[kern]"),
            (
                Shell::PowerShell,
                "Register-ArgumentCompleter -Native -CommandName 'kern'",
            ),
        ];
        for (shell, marker) in cases {
            let text = completion_text(shell);
            assert!(text.contains(marker), "{shell}: {marker}");
            for word in ["dry-run", "max-attempts", "status", "init", "completions"] {
                assert!(text.contains(word), "{shell}: {word}");
            }
        }
        assert!(completion_text(Shell::Bash).contains("--dry-run"));
    }

    #[test]
    fn man_page_has_the_title_and_the_options() {
        let mut out = Vec::new();
        man_page(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let title = format!(".TH kern 1  \"kern {}\"", env!("CARGO_PKG_VERSION"));
        assert!(
            text.starts_with(&format!("{title}\n")) || text.contains(&title),
            "{text}"
        );
        for option in [r"\-\-max\-attempts", r"\-\-dry\-run", r"\-\-stage\-timeout"] {
            assert!(text.contains(option), "{option}");
        }
    }

    #[test]
    fn a_closed_pipe_is_an_error_not_a_panic() {
        struct Closed;
        impl std::io::Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let error = completions(Shell::Bash, &mut Closed).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
        let error = man_page(&mut Closed).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
