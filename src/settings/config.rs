//! A project's settings file, `.kern/config.toml` (DESIGN.md section 11): every option that is
//! not a one-off, under the long name of its flag, in the flag's own units.
//!
//! Decisions a reader must know:
//! - Clap is the single source of names, values and checks: a key is an option's long name
//!   (`stage-timeout`, or `stage_timeout`), and its value is handed to clap exactly as
//!   `--stage-timeout=<value>` would be, so the file accepts what the flag accepts and nothing
//!   else. Flags and `KERN_*` variables win: a key is applied only where clap found neither.
//! - The file is found from the working folder as git finds the repository (the top of the
//!   work tree); outside a repository there is none. An unknown key, a value of the wrong
//!   shape or one clap refuses is exit 2 with `.kern/config.toml:LINE` and the fix, before
//!   anything runs.
//! - An option whose value is optional (`--pace`, `num_args = 0..=1` with `require_equals`)
//!   takes it only after `=`; followed by a separate number or value (`--pace 80`) it is exit 2
//!   with the fix (`--pace=80`), checked on argv before clap reads it, since clap would take
//!   the `80` as the next argument (the iterations) without a word.
//! - A word where the count goes is read as the person meant it (`cli::word_for_count`):
//!   `kern help [SUBCOMMAND]` is help, `kern stauts` is exit 2 naming the nearest command.
//! - Where each setting came from ([`Origin`]) is kept for `kern -n` and `kern doctor`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{ArgAction, CommandFactory, FromArgMatches, parser::ValueSource};

pub(crate) use crate::cli::Origin;
use crate::cli::{Cli, WordForCount};
use crate::error::{Error, Result};

/// The settings file, relative to the work tree's top.
pub(crate) const CONFIG_PATH: &str = ".kern/config.toml";

/// Options that are one-offs (or not options at all): never read from the file.
const ONE_OFFS: &[&str] = &[
    "help",
    "version",
    "iterations",
    "delay",
    "dry_run",
    "verbose",
    "quiet",
    "detach",
    "detached",
    "prompts_dir",
];

/// The command line `args` (argv, the program first) with the settings file of the
/// repository holding `cwd` folded in. Clap's own errors and `--help` end the process as clap
/// does; a bad settings file is an [`Error::Usage`].
pub(crate) fn command_line(args: Vec<OsString>, cwd: &Path) -> Result<Cli> {
    let command = crate::cli::command();
    if let Some(message) = value_after_a_space(&command, &args) {
        return Err(Error::Usage(message));
    }
    let matches = match command.clone().try_get_matches_from(&args) {
        Ok(matches) => matches,
        Err(e) => match crate::cli::word_for_count(&e, &args) {
            Some(WordForCount::Unknown(message)) => return Err(Error::Usage(message)),
            Some(WordForCount::Help(sub)) => {
                let help: Vec<&str> = std::iter::once("kern")
                    .chain(sub.as_deref())
                    .chain(std::iter::once("--help"))
                    .collect();
                command
                    .clone()
                    .try_get_matches_from(help)
                    .err()
                    .unwrap_or(e)
                    .exit()
            }
            None => e.exit(),
        },
    };
    let file = find(cwd);
    let entries = match &file {
        Some(path) => read(path)?,
        None => Vec::new(),
    };
    let mut injected = Vec::new();
    let mut from_file = Vec::new();
    for entry in &entries {
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(entry.name.as_str()))
            .filter(|a| !ONE_OFFS.contains(&a.get_id().as_str()) && !a.is_hide_set())
            .ok_or_else(|| {
                let fix = if entry.key.starts_with("[sandbox]") {
                    "the `[sandbox]` keys are mode, network, hide, write, allow_hosts, pass_env and checks (docs/options.md)".to_string()
                } else {
                    fix_unknown()
                };
                entry.error(&format!("unknown key `{}`", entry.key), &fix)
            })?;
        let id = arg.get_id().as_str();
        if matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let flag = matches!(arg.get_action(), ArgAction::SetTrue);
        let list = matches!(arg.get_action(), ArgAction::Append);
        let scalar = |value: &toml::Value| match value {
            toml::Value::String(s) => Some(format!("--{}={s}", entry.name)),
            toml::Value::Integer(n) => Some(format!("--{}={n}", entry.name)),
            toml::Value::Float(x) => Some(format!("--{}={x}", entry.name)),
            toml::Value::Boolean(b) => Some(format!("--{}={b}", entry.name)),
            _ => None,
        };
        let givens: Vec<String> = match (&entry.value, flag) {
            (toml::Value::Boolean(false), true) => continue,
            (toml::Value::Boolean(true), true) => vec![format!("--{}", entry.name)],
            (_, true) => {
                return Err(entry.error(
                    &format!("`{}` is a switch", entry.key),
                    &format!("write `{} = true` or `{} = false`", entry.key, entry.key),
                ));
            }
            (toml::Value::Array(items), false) if list => {
                let givens: Option<Vec<String>> = items.iter().map(scalar).collect();
                givens.ok_or_else(|| {
                    entry.error(
                        &format!("`{}` takes a list of strings", entry.key),
                        &format!("write it as `{} = [\"…\", \"…\"]`", entry.key),
                    )
                })?
            }
            (value, false) => match scalar(value) {
                Some(given) => vec![given],
                None => {
                    return Err(entry.error(
                        &format!("`{}` takes one value", entry.key),
                        &format!(
                            "write it as on the command line, e.g. `{} = \"…\"`",
                            entry.key
                        ),
                    ));
                }
            },
        };
        for given in &givens {
            // Each value alone first, so that a refusal names its own line.
            if let Err(e) = command
                .clone()
                .try_get_matches_from([OsString::from("kern"), OsString::from(given)])
            {
                let said = e.to_string();
                let said = said
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
                    .to_string();
                return Err(entry.error(
                    &format!("`{}`: {said}", entry.key),
                    &format!(
                        "write the value as `kern --{}` takes it (`kern --help`)",
                        entry.name
                    ),
                ));
            }
        }
        let shown: Vec<String> = givens
            .iter()
            .map(|given| {
                given
                    .split_once('=')
                    .map_or_else(|| "true".to_string(), |(_, v)| v.to_string())
            })
            .collect();
        injected.extend(givens.into_iter().map(OsString::from));
        from_file.push((id.to_string(), entry.line, shown.join(", ")));
    }
    let mut all = args.clone();
    all.splice(1.min(all.len())..1.min(all.len()), injected);
    let matches = command
        .clone()
        .try_get_matches_from(&all)
        .unwrap_or_else(|e| e.exit());
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.origins = origins(&command, &matches, &from_file);
    Ok(cli)
}

/// The usage error for an option whose value is optional (`num_args = 0..=1` with
/// `require_equals`, such as `--pace`) followed by a separate word that is a valid value for
/// it or a number: clap would read `--pace 80` as `--pace` alone and `80` as the next argument (the
/// iterations, silently), so the person is told to write `--pace=80`. Found from the clap
/// definition, for every such option of kern and its subcommands; nothing after `--`.
fn value_after_a_space(command: &clap::Command, args: &[OsString]) -> Option<String> {
    let mut optional: Vec<(Option<&str>, &clap::Arg)> = Vec::new();
    let takes_optional = |a: &clap::Arg| {
        a.is_require_equals_set() && a.get_num_args().is_some_and(|n| n.min_values() == 0)
    };
    optional.extend(
        command
            .get_arguments()
            .filter(|a| takes_optional(a))
            .map(|a| (None, a)),
    );
    for sub in command.get_subcommands() {
        optional.extend(
            sub.get_arguments()
                .filter(|a| takes_optional(a))
                .map(|a| (Some(sub.get_name()), a)),
        );
    }
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str().unwrap_or(""))
        .take_while(|a| *a != "--")
        .collect();
    for pair in words.windows(2) {
        let (flag, value) = (pair[0], pair[1]);
        let Some(long) = flag.strip_prefix("--") else {
            continue;
        };
        if value.starts_with('-') {
            continue;
        }
        for (sub, arg) in &optional {
            if arg.get_long() != Some(long) {
                continue;
            }
            let given = format!("--{long}={value}");
            let probe: Vec<&str> = std::iter::once("kern")
                .chain(*sub)
                .chain(std::iter::once(given.as_str()))
                .collect();
            let number = value.parse::<f64>().is_ok();
            if !number && command.clone().try_get_matches_from(probe).is_err() {
                continue;
            }
            // What the option alone stands for, as clap fills it in.
            let bare = format!("--{long}");
            let alone = command
                .clone()
                .try_get_matches_from(
                    std::iter::once("kern")
                        .chain(*sub)
                        .chain(std::iter::once(bare.as_str())),
                )
                .ok()
                .and_then(|m| {
                    let m = match sub {
                        Some(name) => m.subcommand_matches(name)?.clone(),
                        None => m,
                    };
                    let raw = m.get_raw(arg.get_id().as_str())?.next()?.to_string_lossy();
                    Some(format!(" (`--{long}` alone means {raw})"))
                })
                .unwrap_or_default();
            return Some(format!(
                "`--{long} {value}`: --{long} takes its value only after `=` — write `--{long}={value}`{alone}"
            ));
        }
    }
    None
}

/// The settings file of the repository holding `cwd`, when it has one.
fn find(cwd: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(cwd).ok()?;
    let path = repo.workdir()?.join(CONFIG_PATH);
    path.is_file().then_some(path)
}

/// One `key = value` of the file.
struct Entry {
    /// As written.
    key: String,
    /// As a long option name (`_` read as `-`).
    name: String,
    value: toml::Value,
    line: usize,
}

impl Entry {
    fn error(&self, what: &str, fix: &str) -> Error {
        Error::Usage(format!("`{CONFIG_PATH}:{}`: {what} — {fix}", self.line))
    }
}

fn fix_unknown() -> String {
    let names: Vec<String> = Cli::command()
        .get_arguments()
        .filter(|a| !ONE_OFFS.contains(&a.get_id().as_str()) && !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    format!(
        "the keys are the long options of `kern --help`: {}",
        names.join(", ")
    )
}

/// The file's entries in order, each with its line.
fn read(path: &Path) -> Result<Vec<Entry>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse(&text)
}

/// The entries of a settings file's text (see [`read`]).
fn parse(text: &str) -> Result<Vec<Entry>> {
    let line_of = |offset: usize| 1 + text[..offset.min(text.len())].matches('\n').count();
    let table: std::collections::BTreeMap<toml::Spanned<String>, toml::Value> =
        toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(s.start));
            Error::Usage(format!(
                "`{CONFIG_PATH}:{line}`: not valid TOML: {} — write one `key = value` a line, e.g. `stage-timeout = \"30m\"`",
                e.message().trim_end()
            ))
        })?;
    let mut entries: Vec<Entry> = Vec::new();
    for (key, value) in table {
        if key.get_ref() == SANDBOX_TABLE && value.is_table() {
            continue;
        }
        entries.push(Entry {
            line: line_of(key.span().start),
            name: key.get_ref().replace('_', "-"),
            key: key.into_inner(),
            value,
        });
    }
    entries.extend(sandbox_entries(text, &line_of)?);
    entries.sort_by_key(|e| e.line);
    Ok(entries)
}

/// The table of the fence's settings.
const SANDBOX_TABLE: &str = "sandbox";

/// The `[sandbox]` table's entries, each under its option's name: `mode` is `--sandbox`,
/// `network` is `--sandbox-network`, any other key `k` is `--sandbox-k` (`allow_hosts` is
/// `--sandbox-allow-hosts`). Read with their lines, for the errors.
fn sandbox_entries(text: &str, line_of: &dyn Fn(usize) -> usize) -> Result<Vec<Entry>> {
    #[derive(serde::Deserialize)]
    struct Doc {
        #[serde(default)]
        sandbox: Option<toml::Value>,
    }
    #[derive(serde::Deserialize)]
    struct WithTable {
        sandbox: std::collections::BTreeMap<toml::Spanned<String>, toml::Value>,
    }
    let is_table = toml::from_str::<Doc>(text)
        .ok()
        .and_then(|d| d.sandbox)
        .is_some_and(|v| v.is_table());
    if !is_table {
        return Ok(Vec::new());
    }
    let table: WithTable = toml::from_str(text).map_err(|e| {
        Error::Usage(format!(
            "`{CONFIG_PATH}:{}`: not valid TOML: {}",
            e.span().map_or(1, |s| line_of(s.start)),
            e.message().trim_end()
        ))
    })?;
    Ok(table
        .sandbox
        .into_iter()
        .map(|(key, value)| {
            let name = match key.get_ref().as_str() {
                "mode" => "sandbox".to_string(),
                k => format!("sandbox-{}", k.replace('_', "-")),
            };
            Entry {
                line: line_of(key.span().start),
                name,
                key: format!("[sandbox] {}", key.get_ref()),
                value,
            }
        })
        .collect())
}

/// Where every setting that is not at its default came from.
fn origins(
    command: &clap::Command,
    matches: &clap::ArgMatches,
    from_file: &[(String, usize, String)],
) -> Vec<Origin> {
    let mut out = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if ONE_OFFS.contains(&id) || arg.is_hide_set() {
            continue;
        }
        let Some(name) = arg.get_long() else { continue };
        let raw = || {
            matches
                .get_raw(id)
                .map(|v| {
                    v.map(|s| s.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default()
        };
        let source = if let Some((_, line, value)) = from_file.iter().find(|(i, ..)| i == id) {
            Some((format!("{CONFIG_PATH}:{line}"), value.clone()))
        } else {
            match matches.value_source(id) {
                Some(ValueSource::CommandLine) => Some(("command line".to_string(), raw())),
                Some(ValueSource::EnvVariable) => Some((
                    arg.get_env()
                        .map_or_else(String::new, |e| e.to_string_lossy().into_owned()),
                    raw(),
                )),
                _ => None,
            }
        };
        if let Some((source, value)) = source {
            out.push(Origin {
                name: name.to_string(),
                value,
                source,
            });
        }
    }
    out
}

/// The commented starter `kern init --config` writes: every key, its help and its default,
/// all commented out, so the file changes nothing until a line is uncommented.
pub(crate) fn starter() -> String {
    let mut out = String::from(
        "# kern's settings for this project (kern init --config). Each key is a long option of\n\
         # `kern --help`, with the same values and units; a flag or KERN_* variable wins over the\n\
         # file. Uncomment a line to use it. `kern -n` shows where each setting came from.\n",
    );
    let mut fence = String::from(
        "\n# The fence around every agent and whatever runs its code (docs/safety.md). `mode` is\n# --sandbox, `network` --sandbox-network; each other key is the --sandbox-<key> option,\n# given as a list.\n# [sandbox]\n",
    );
    for arg in Cli::command().get_arguments() {
        let id = arg.get_id().as_str();
        if ONE_OFFS.contains(&id) || arg.is_hide_set() {
            continue;
        }
        let Some(name) = arg.get_long() else { continue };
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        if let Some(key) = name.strip_prefix("sandbox") {
            let key = match key.trim_start_matches('-') {
                "" => "mode".to_string(),
                k => k.replace('-', "_"),
            };
            let example = match key.as_str() {
                "hide" => "[\"~/secrets\"]".to_string(),
                "write" => "[\"~/.cache/mytool\"]".to_string(),
                "allow_hosts" => "[\"registry.npmjs.org\"]".to_string(),
                "pass_env" => "[\"NPM_TOKEN\"]".to_string(),
                _ => arg
                    .get_default_values()
                    .first()
                    .map(|d| toml_string(&d.to_string_lossy()))
                    .unwrap_or_default(),
            };
            fence.push('\n');
            for line in wrap(&help, 94) {
                fence.push_str(&format!("# {line}\n"));
            }
            fence.push_str(&format!("# {key} = {example}\n"));
            continue;
        }
        out.push('\n');
        for line in wrap(&help, 94) {
            out.push_str(&format!("# {line}\n"));
        }
        let example = if matches!(arg.get_action(), ArgAction::SetTrue) {
            "false".to_string()
        } else {
            match arg.get_default_values().first() {
                Some(d) => toml_string(&d.to_string_lossy()),
                None => match name {
                    "check" => toml_string("cargo test"),
                    "notify" => toml_string("notify-send kern \"$KERN_EVENT\""),
                    "max-cost" => "20".to_string(),
                    "level" => "2".to_string(),
                    "pace" => "90".to_string(),
                    "pace-week" => "70".to_string(),
                    "model" | "fallback-model" | "review-model" => toml_string("sonnet"),
                    "fallback-agent" | "review-agent" => toml_string("codex"),
                    "until" => toml_string("07:00"),
                    "deadline" => toml_string("5h45m"),
                    "tracker" => toml_string("github"),
                    _ if arg
                        .get_value_names()
                        .is_some_and(|n| n.iter().any(|v| v.as_str() == "N")) =>
                    {
                        "10".to_string()
                    }
                    _ => toml_string("…"),
                },
            }
        };
        let example = match (name, arg.get_default_values().first()) {
            ("retries" | "max-attempts" | "jobs", Some(d)) => d.to_string_lossy().into_owned(),
            _ => example,
        };
        out.push_str(&format!("# {name} = {example}\n"));
    }
    out.push_str(&fence);
    out
}

/// `text` as a TOML basic string (JSON's escapes are TOML's).
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `text` cut into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// Writes the starter settings file into the work tree at `top`; never overwrites.
pub(crate) fn write_starter(top: &Path) -> Result<PathBuf> {
    let path = top.join(CONFIG_PATH);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(Error::Usage(format!(
            "`{CONFIG_PATH}` already exists — kern init never overwrites; edit it"
        )));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    crate::atomic_file::write(&path, starter().as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(config: &str, args: &[&str]) -> Result<Cli> {
        let top = tempfile::tempdir().unwrap();
        git2::Repository::init(top.path()).unwrap();
        std::fs::create_dir_all(top.path().join(".kern")).unwrap();
        std::fs::write(top.path().join(CONFIG_PATH), config).unwrap();
        let mut argv = vec![OsString::from("kern")];
        argv.extend(args.iter().map(OsString::from));
        command_line(argv, top.path())
    }

    #[test]
    fn an_optional_value_after_a_space_is_refused_with_the_fix() {
        let refused = "`--pace 80`: --pace takes its value only after `=` — write `--pace=80` (`--pace` alone means 90)";
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["--pace", "80"], Some(refused)),
            (&["10", "30", "--pace", "80"], Some(refused)),
            (&["-n", "--pace", "80", "--model", "x"], Some(refused)),
            (&["--pace=80"], None),
            (&["--pace", "-n"], None),
            (&["--pace"], None),
            (&["--pace", "7m"], None),
            (
                &["--pace", "101"],
                Some(
                    "`--pace 101`: --pace takes its value only after `=` — write `--pace=101` (`--pace` alone means 90)",
                ),
            ),
            (&["--model", "80"], None),
            (&["--", "--pace", "80"], None),
        ];
        for (args, wanted) in cases {
            let mut argv = vec![OsString::from("kern")];
            argv.extend(args.iter().map(OsString::from));
            assert_eq!(
                value_after_a_space(&Cli::command(), &argv).as_deref(),
                *wanted,
                "{args:?}"
            );
        }
    }

    #[test]
    fn keys_are_long_options_and_flags_win() {
        let c = cli(
            "stage-timeout = \"30m\"\nmax_attempts = 5\nallow-dirty = true\ncheck = \"make test\"\nmax-cost = 2.5\n",
            &["--max-attempts", "7"],
        )
        .unwrap();
        assert_eq!(c.run.stage_timeout, std::time::Duration::from_secs(1800));
        assert_eq!(c.run.max_attempts, 7, "the flag wins");
        assert!(c.run.allow_dirty);
        assert_eq!(c.run.check.as_deref(), Some("make test"));
        assert_eq!(c.run.max_cost, Some(2.5));
        let sources: Vec<(String, String)> = c
            .origins
            .iter()
            .map(|o| (o.name.clone(), o.source.clone()))
            .collect();
        assert!(sources.contains(&("stage-timeout".into(), ".kern/config.toml:1".into())));
        assert!(sources.contains(&("max-attempts".into(), "command line".into())));
        assert!(sources.contains(&("check".into(), ".kern/config.toml:4".into())));
    }

    #[test]
    fn the_sandbox_table_holds_the_fences_lists() {
        let c = cli(
            "check = \"make\"\n\n[sandbox]\nhide = [\"~/secrets\", \"keys\"]\nwrite = [\"~/.cache/tool\"]\nallow_hosts = [\"registry.npmjs.org\", \"127.0.0.1:8080\"]\npass_env = [\"NPM_TOKEN\"]\nchecks = \"outside\"\nnetwork = \"none\"\nmode = \"kern\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            c.fence.sandbox_hide,
            [PathBuf::from("~/secrets"), PathBuf::from("keys")]
        );
        assert_eq!(c.fence.sandbox_write, [PathBuf::from("~/.cache/tool")]);
        let hosts: Vec<String> = c
            .fence
            .sandbox_allow_hosts
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(hosts, ["registry.npmjs.org", "127.0.0.1:8080"]);
        assert_eq!(c.fence.sandbox_pass_env, ["NPM_TOKEN"]);
        assert_eq!(c.fence.sandbox_checks, crate::sandbox::ChecksPlace::Outside);
        assert_eq!(c.global.sandbox_network, crate::sandbox::Network::None);
        let hide = c.origins.iter().find(|o| o.name == "sandbox-hide").unwrap();
        assert_eq!(
            (hide.value.as_str(), hide.source.as_str()),
            ("~/secrets, keys", ".kern/config.toml:4")
        );
        // The old switch still reads; a flag wins over the table.
        let c = cli("sandbox = true\n", &[]).unwrap();
        assert_eq!(c.global.sandbox, crate::sandbox::Mode::Kern);
        let c = cli("[sandbox]\nmode = \"off\"\n", &["--sandbox=agent"]).unwrap();
        assert_eq!(c.global.sandbox, crate::sandbox::Mode::Agent);
        let cases: &[(&str, &str)] = &[
            (
                "[sandbox]\nhide = \"~/.x\"\nallow-hostz = [\"a\"]\n",
                "`.kern/config.toml:3`: unknown key `[sandbox] allow-hostz`",
            ),
            (
                "[sandbox]\nallow_hosts = [\"https://x\"]\n",
                "`.kern/config.toml:2`: `[sandbox] allow_hosts`: invalid value 'https://x'",
            ),
            (
                "[sandbox]\nhide = [1, [2]]\n",
                "`.kern/config.toml:2`: `[sandbox] hide` takes a list of strings",
            ),
            (
                "sandbox = false\n",
                "`.kern/config.toml:1`: `sandbox`: invalid value 'false'",
            ),
        ];
        for (text, start) in cases {
            let e = cli(text, &[]).err().unwrap_or_else(|| panic!("{text:?}"));
            assert!(e.to_string().starts_with(start), "{text:?}: {e}");
            assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn bad_files_name_the_line_and_the_fix() {
        let cases: &[(&str, &str)] = &[
            (
                "check = \"x\"\nstage-timout = \"30m\"\n",
                "`.kern/config.toml:2`: unknown key `stage-timout` — the keys are the long options of `kern --help`:",
            ),
            (
                "\n\nstage-timeout = \"forever\"\n",
                "`.kern/config.toml:3`: `stage-timeout`: invalid value 'forever' for '--stage-timeout <DURATION>'",
            ),
            (
                "allow-dirty = \"yes\"\n",
                "`.kern/config.toml:1`: `allow-dirty` is a switch — write `allow-dirty = true` or `allow-dirty = false`",
            ),
            (
                "check = [\"a\"]\n",
                "`.kern/config.toml:1`: `check` takes one value",
            ),
            (
                "dry-run = true\n",
                "`.kern/config.toml:1`: unknown key `dry-run`",
            ),
            ("check = \n", "`.kern/config.toml:1`: not valid TOML"),
        ];
        for (text, start) in cases {
            let e = cli(text, &[]).err().unwrap_or_else(|| panic!("{text:?}"));
            assert!(e.to_string().starts_with(start), "{text:?}: {e}");
            assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn the_starter_changes_nothing_and_every_key_in_it_is_accepted() {
        let text = starter();
        assert!(cli(&text, &[]).unwrap().origins.is_empty());
        let uncommented: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.contains(" = ") || *l == "[sandbox]")
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            uncommented.contains("stage-timeout = \"60m\""),
            "{uncommented}"
        );
        cli(&uncommented, &[]).unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    }
}
