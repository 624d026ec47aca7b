//! A word typed where the count goes (`kern stauts`, `kern help`): clap reads the first word
//! that is not a subcommand as ITERATIONS and would answer "invalid value".
//!
//! The decision a reader must know: only a refused word with a letter in it is read this way —
//! `help` as the help, anything else as the nearest subcommand or the list of them; a refused
//! number (`kern 0`, `kern -5`) keeps clap's own message.

use clap::CommandFactory;

use super::{Cli, command};

/// What a word typed where the count goes (`kern stauts`, `kern help`) meant: clap reads the
/// first word that is not a subcommand as ITERATIONS and would answer "invalid value".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordForCount {
    /// `kern help [SUBCOMMAND]`: the help of kern, or of that subcommand.
    Help(Option<String>),
    /// Any other word: the usage error, with the nearest subcommand when one is near.
    Unknown(String),
}

/// The word of `args` that clap's `error` refused as ITERATIONS, read as the person meant it
/// (see [`WordForCount`]); `None` for any other error, and for a refused number (`kern 0`,
/// `kern -5`), which clap's own message explains.
pub fn word_for_count(error: &clap::Error, args: &[std::ffi::OsString]) -> Option<WordForCount> {
    let command = command();
    // Clap may stop at a later argument first (`kern statsu --json`): then the word is the one
    // that, with only what comes before it, is refused as ITERATIONS.
    let word = refused_count(error).or_else(|| {
        (1..args.len())
            .filter(|&i| args[i].to_str().is_some_and(|a| !a.starts_with('-')))
            .find_map(|i| {
                let error = command.clone().try_get_matches_from(&args[..=i]).err()?;
                refused_count(&error)
            })
    })?;
    if !word.chars().any(char::is_alphabetic) {
        return None;
    }
    let listed = Cli::command();
    let names: Vec<&str> = listed
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    let word = word.as_str();
    if word == "help" {
        let after = args
            .iter()
            .skip_while(|a| a.to_str() != Some("help"))
            .nth(1)
            .and_then(|a| a.to_str())
            .filter(|a| names.contains(a))
            .map(str::to_string);
        return Some(WordForCount::Help(after));
    }
    // A typo (two edits, or a third of a long name) or the start of a name (`comp`).
    let nearest = names
        .iter()
        .chain(std::iter::once(&"help"))
        .map(|name| {
            let started = word.len() >= 3 && name.starts_with(word);
            let distance = if started {
                0
            } else {
                strsim::damerau_levenshtein(word, name)
            };
            (distance, *name)
        })
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 3))
        .min();
    Some(WordForCount::Unknown(match nearest {
        Some((_, name)) => format!(
            "`{word}` is not a command, nor a number of tasks — did you mean `kern {name}`?"
        ),
        None => format!(
            "`{word}` is not a command, nor a number of tasks — the commands are {}; `kern --help` says what each does",
            names.join(", ")
        ),
    }))
}

/// The value clap's `error` refused as ITERATIONS, if that is what it refused.
fn refused_count(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    match (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) {
        (Some(ContextValue::String(arg)), Some(ContextValue::String(word)))
            if arg == "[ITERATIONS]" =>
        {
            Some(word.clone())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_where_the_count_goes_is_help_or_the_nearest_command() {
        let read = |argv: &[&str]| {
            let args: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
            let error = command().try_get_matches_from(&args).unwrap_err();
            word_for_count(&error, &args)
        };
        let meant = |name: &str| {
            format!("is not a command, nor a number of tasks — did you mean `kern {name}`?")
        };
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["kern", "stauts"], Some("status")),
            (&["kern", "statsu", "--json"], Some("status")),
            (&["kern", "dcotor"], Some("doctor")),
            (&["kern", "reprot"], Some("report")),
            (&["kern", "-v", "inti"], Some("init")),
            (&["kern", "compl"], Some("completions")),
            (&["kern", "helo"], Some("help")),
            (&["kern", "wacth", "10", "30"], Some("watch")),
            (&["kern", "schedul", "--list"], Some("schedule")),
        ];
        for (argv, name) in cases {
            match read(argv) {
                Some(WordForCount::Unknown(message)) => {
                    assert!(
                        message.ends_with(&meant(name.unwrap())),
                        "{argv:?}: {message}"
                    );
                }
                other => panic!("{argv:?}: {other:?}"),
            }
        }
        match read(&["kern", "frobnicate"]) {
            Some(WordForCount::Unknown(message)) => assert!(
                message.starts_with("`frobnicate` is not a command, nor a number of tasks — the commands are status, release, watch, schedule, report,"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(read(&["kern", "help"]), Some(WordForCount::Help(None)));
        assert_eq!(
            read(&["kern", "help", "status"]),
            Some(WordForCount::Help(Some("status".into())))
        );
        assert_eq!(
            read(&["kern", "help", "nope"]),
            Some(WordForCount::Help(None))
        );
        // Numbers out of range and bad delays keep clap's own message.
        assert_eq!(read(&["kern", "0"]), None);
        assert_eq!(read(&["kern", "10", "soon"]), None);
    }
}
