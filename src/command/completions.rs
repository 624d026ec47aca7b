//! Shell completions (`kern completions <shell>`) and the man page (`kern man`, hidden), both
//! generated from the clap definition in `cli.rs`.
//!
//! The one decision a reader must know: nothing here is written by hand, so the completions and
//! the man page cannot drift from the real command line; a new flag appears in both by itself.
//! The completions come from [`completion_command`], so a subcommand offers only
//! the options it takes (`kern log --<TAB>` has no `--agent`), as its `--help` shows them.

use clap::CommandFactory;

use crate::cli::{Cli, IGNORED_BY};

/// The name the completions are registered under: the binary's name.
const BIN_NAME: &str = "kern";

/// kern's command line for shell completions: as [`crate::cli::command`] parses it, with each
/// subcommand offering only the options it takes. The completion generators list hidden
/// options too, so here the options every command accepts are not global: the top level has
/// them, and each subcommand its own visible copy of those it does not ignore
/// ([`IGNORED_BY`]). Only for generating scripts: kern parses with [`crate::cli::command`].
pub(crate) fn completion_command() -> clap::Command {
    let base = Cli::command();
    let globals: Vec<clap::Arg> = base
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    base.mut_args(|a| {
        if a.is_global_set() {
            a.global(false)
        } else {
            a
        }
    })
    .mut_subcommands(|sub| {
        let ignored = IGNORED_BY
            .iter()
            .find(|(name, _)| *name == sub.get_name())
            .map_or(&[][..], |(_, ignored)| *ignored);
        let takes: Vec<clap::Arg> = globals
            .iter()
            .filter(|a| !ignored.contains(&a.get_id().as_str()))
            .map(|a| a.clone().global(false))
            .collect();
        sub.args(takes)
    })
}

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
    fn completions_offer_each_subcommand_what_it_takes_and_parse_as_kern_does() {
        let mut completion = completion_command();
        completion.build();
        completion.clone().debug_assert();
        let longs = |sub: &str| -> Vec<String> {
            completion
                .find_subcommand(sub)
                .unwrap()
                .get_arguments()
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect()
        };
        assert!(!longs("log").contains(&"agent".to_string()));
        assert!(longs("log").contains(&"verbose".to_string()));
        assert!(longs("doctor").contains(&"fallback-agent".to_string()));
        assert!(longs("status").contains(&"spec".to_string()));
        let top: Vec<&str> = completion
            .get_arguments()
            .filter_map(clap::Arg::get_long)
            .collect();
        assert!(top.contains(&"agent") && top.contains(&"max-attempts"));
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
