//! The Claude Code command line and environment for one stage (DESIGN.md section 4,
//! AGENT-CLIS.md).
//!
//! The one decision a reader must know: every variadic flag (`--tools`, `--allowedTools`,
//! `--disallowedTools`) is written as one `--flag=value` argument. Written as `--flag value`,
//! such a flag swallows whatever follows it, and the prompt never goes into argv at all: it is
//! written to stdin, because argv strings over 128 KiB fail on Linux.
//!
//! Besides the tool policy, kern lowers the CLI's own API retries ([`MAX_RETRIES`]) so that
//! they do not stack under kern's backoff, can cap a stage's spend (`--max-budget-usd`), can
//! put the implement stage's shell commands in Claude Code's OS sandbox
//! ([`SANDBOX_SETTINGS`]), and denies the implement stage edits of kern's own files (SPEC.md
//! and LEARNINGS.md, [`protect_rules`]).

use std::path::PathBuf;

use crate::stage::Stage;

/// What to do when Claude Code is not logged in.
pub(crate) const LOGIN_HINT: &str = "run `claude` once to log in, or set ANTHROPIC_API_KEY";

/// The flags every stage gets before its model: headless, one JSON event per line.
const HEAD: [&str; 4] = ["-p", "--output-format", "stream-json", "--verbose"];

/// The flags every stage gets after its model: no transcript under `~/.claude/projects`, and
/// no prompt for permission (a denied call is listed in the result instead).
const SESSION: [&str; 3] = ["--no-session-persistence", "--permission-mode", "dontAsk"];

/// Deny rules that together block `git commit` and `git push` in the forms AGENT-CLIS.md
/// verified (`git commit`, `git -C . commit`, `git -c k=v commit`, and the push forms). They
/// are best effort (`bash -c` gets past); kern's audit of HEAD and refs is the guarantee.
pub(crate) const GIT_WRITE_DENY_RULES: [&str; 6] = [
    "Bash(git commit *)",
    "Bash(git * commit *)",
    "Bash(git push *)",
    "Bash(git push)",
    "Bash(git * push *)",
    "Bash(git * push)",
];

/// The CLI's own retries of a failed API call (`CLAUDE_CODE_MAX_RETRIES`; its default is 10,
/// about 0.5 s doubling to 35 s between tries). Two quick tries ride out a blip; anything
/// longer is kern's to retry, with its own backoff, its record and its `--retries`.
pub(crate) const MAX_RETRIES: &str = "2";

/// Claude Code's settings that put the shell commands of a stage in its OS sandbox
/// (bubblewrap and socat on Linux), given with `--settings`: writes only inside the working
/// folder (and the sandbox's own `TMPDIR`), none to `.git/hooks`, no network beyond what the
/// person's own sandbox settings allow. `failIfUnavailable`: without bubblewrap the CLI
/// refuses to start (it says so on stderr) instead of running unsandboxed;
/// `allowUnsandboxedCommands: false`: the model cannot ask to leave it.
pub const SANDBOX_SETTINGS: &str =
    r#"{"sandbox":{"enabled":true,"failIfUnavailable":true,"allowUnsandboxedCommands":false}}"#;

/// What a stage may add to the command line besides its tool policy.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Options<'a> {
    /// The most the stage may spend, in USD (`--max-budget-usd`); only a positive, finite
    /// amount is passed.
    pub max_budget_usd: Option<f64>,
    /// Run the shell commands of the stages that edit (implement, the tests step) in the OS
    /// sandbox ([`SANDBOX_SETTINGS`]).
    /// Read-only stages need none: they have no write tools and `dontAsk` refuses writing
    /// shell commands.
    pub sandbox: bool,
    /// Absolute paths the implement stage may not edit ([`protect_rules`]); read-only stages
    /// have no edit tools at all.
    pub protected: &'a [PathBuf],
}

/// Deny rules that keep Claude's file tools (Edit, Write, MultiEdit, NotebookEdit) off
/// `paths`, each absolute: `Edit(//abs/path)`. Seen on 2.1.330 (and 2.1.197): an `Edit(…)`
/// rule refuses a Write too ("File is in a directory that is denied by your permission
/// settings", listed in `permission_denials`) while a `Write(…)` rule refuses nothing; the
/// `//` form is an absolute path, where a bare `SPEC.md` would match that name in every
/// folder; spaces, commas and parentheses in the path are parsed correctly. Best effort like
/// every rule (`echo > SPEC.md` in Bash gets past): kern treats any change of SPEC.md during
/// a stage as the person's and never commits an agent's edit of it as its own.
pub(crate) fn protect_rules(paths: &[PathBuf]) -> Vec<String> {
    let mut rules: Vec<String> = Vec::new();
    for path in paths.iter().filter(|p| p.is_absolute()) {
        let rule = format!("Edit(/{})", path.display());
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    rules
}

/// The stage's tool policy as Claude flags; `protected` are the files the implement stage may
/// not edit ([`protect_rules`]).
pub(crate) fn tool_flags(stage: Stage, protected: &[PathBuf]) -> Vec<String> {
    match stage {
        Stage::Research => vec![
            "--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch".to_string(),
            // dontAsk denies what is not allowed; web access is harmless to the work tree.
            "--allowedTools=WebSearch,WebFetch".to_string(),
        ],
        Stage::Tests | Stage::Implement => vec![
            "--tools=default".to_string(),
            "--allowedTools=Bash,Edit,Write,NotebookEdit,Read,Grep,Glob".to_string(),
            format!(
                "--disallowedTools={}",
                GIT_WRITE_DENY_RULES
                    .iter()
                    .map(std::string::ToString::to_string)
                    .chain(protect_rules(protected))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ],
        // No allow rules: in dontAsk mode read-only git (status, diff, log) is already
        // allowed, and a rule like `Bash(git diff:*)` would widen it to `git diff --output`.
        Stage::Review => vec!["--tools=Read,Grep,Glob,Bash".to_string()],
    }
}

/// The complete argv (after the program name) for `stage`.
pub(crate) fn args(stage: Stage, model: Option<&str>, options: Options<'_>) -> Vec<String> {
    let mut args: Vec<String> = HEAD.iter().map(std::string::ToString::to_string).collect();
    if let Some(model) = model {
        args.push("--model".to_string());
        args.push(model.to_string());
    }
    args.extend(SESSION.iter().map(std::string::ToString::to_string));
    args.extend(tool_flags(stage, options.protected));
    if let Some(budget) = options.max_budget_usd.filter(|b| b.is_finite() && *b > 0.0) {
        args.push("--max-budget-usd".to_string());
        args.push(budget.to_string());
    }
    if options.sandbox && matches!(stage, Stage::Tests | Stage::Implement) {
        args.push(format!("--settings={SANDBOX_SETTINGS}"));
    }
    args.push(format!("--json-schema={}", stage.schema()));
    args
}

/// The variables added to the inherited environment: the CLI's own retries lowered.
pub(crate) fn env() -> Vec<(String, String)> {
    vec![(
        "CLAUDE_CODE_MAX_RETRIES".to_string(),
        MAX_RETRIES.to_string(),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn argv_per_stage_is_exact() {
        let table: [(Stage, Option<&str>, Vec<&str>); 4] = [
            (
                Stage::Research,
                Some("opus"),
                vec![
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--model",
                    "opus",
                    "--no-session-persistence",
                    "--permission-mode",
                    "dontAsk",
                    "--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch",
                    "--allowedTools=WebSearch,WebFetch",
                ],
            ),
            (
                Stage::Implement,
                Some("claude-sonnet-4-5"),
                vec![
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--model",
                    "claude-sonnet-4-5",
                    "--no-session-persistence",
                    "--permission-mode",
                    "dontAsk",
                    "--tools=default",
                    "--allowedTools=Bash,Edit,Write,NotebookEdit,Read,Grep,Glob",
                    "--disallowedTools=Bash(git commit *),Bash(git * commit *),Bash(git push *),Bash(git push),Bash(git * push *),Bash(git * push)",
                ],
            ),
            (
                Stage::Review,
                Some("sonnet"),
                vec![
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--model",
                    "sonnet",
                    "--no-session-persistence",
                    "--permission-mode",
                    "dontAsk",
                    "--tools=Read,Grep,Glob,Bash",
                ],
            ),
            (
                Stage::Review,
                None,
                vec![
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--no-session-persistence",
                    "--permission-mode",
                    "dontAsk",
                    "--tools=Read,Grep,Glob,Bash",
                ],
            ),
        ];
        for (stage, model, head) in table {
            let mut expected = strings(&head);
            expected.push(format!("--json-schema={}", stage.schema()));
            assert_eq!(
                args(stage, model, Options::default()),
                expected,
                "{stage} {model:?}"
            );
        }
    }

    #[test]
    fn budget_and_sandbox_come_before_the_schema() {
        let sandbox = format!("--settings={SANDBOX_SETTINGS}");
        let table: [(Stage, Options, Vec<&str>); 6] = [
            (
                Stage::Implement,
                Options {
                    max_budget_usd: Some(0.25),
                    sandbox: true,
                    ..Options::default()
                },
                vec!["--max-budget-usd", "0.25", &sandbox],
            ),
            (
                Stage::Research,
                Options {
                    max_budget_usd: Some(1.0),
                    sandbox: true,
                    ..Options::default()
                },
                vec!["--max-budget-usd", "1"],
            ),
            (
                Stage::Review,
                Options {
                    max_budget_usd: Some(0.000_5),
                    sandbox: false,
                    ..Options::default()
                },
                vec!["--max-budget-usd", "0.0005"],
            ),
            (
                Stage::Implement,
                Options {
                    max_budget_usd: Some(0.0),
                    sandbox: false,
                    ..Options::default()
                },
                vec![],
            ),
            (
                Stage::Implement,
                Options {
                    max_budget_usd: Some(f64::NAN),
                    sandbox: false,
                    ..Options::default()
                },
                vec![],
            ),
            (
                Stage::Implement,
                Options {
                    max_budget_usd: None,
                    sandbox: true,
                    ..Options::default()
                },
                vec![&sandbox],
            ),
        ];
        for (stage, options, extra) in table {
            let mut expected = args(stage, Some("opus"), Options::default());
            let schema = expected.pop().unwrap();
            expected.extend(strings(&extra));
            expected.push(schema);
            assert_eq!(
                args(stage, Some("opus"), options),
                expected,
                "{stage} {options:?}"
            );
        }
        let settings: serde_json::Value = serde_json::from_str(SANDBOX_SETTINGS).unwrap();
        assert_eq!(settings["sandbox"]["enabled"], true);
    }

    #[test]
    fn implement_may_not_edit_kerns_own_files() {
        let protected = [
            PathBuf::from("/home/me/my project/SPEC.md"),
            PathBuf::from("/home/me/my project/LEARNINGS.md"),
            PathBuf::from("relative/is/skipped.md"),
            PathBuf::from("/home/me/my project/SPEC.md"),
        ];
        assert_eq!(
            protect_rules(&protected),
            vec![
                "Edit(//home/me/my project/SPEC.md)",
                "Edit(//home/me/my project/LEARNINGS.md)",
            ]
        );
        let options = Options {
            protected: &protected[..2],
            ..Options::default()
        };
        let implement = args(Stage::Implement, None, options);
        assert!(
            implement.contains(&"--disallowedTools=Bash(git commit *),Bash(git * commit *),Bash(git push *),Bash(git push),Bash(git * push *),Bash(git * push),Edit(//home/me/my project/SPEC.md),Edit(//home/me/my project/LEARNINGS.md)".to_string()),
            "{implement:?}"
        );
        for stage in [Stage::Research, Stage::Review] {
            assert_eq!(
                args(stage, None, options),
                args(stage, None, Options::default()),
                "{stage} has no edit tools to deny"
            );
        }
    }

    #[test]
    fn the_cli_retries_little_by_itself() {
        assert_eq!(
            env(),
            vec![("CLAUDE_CODE_MAX_RETRIES".to_string(), "2".to_string())]
        );
    }

    #[test]
    fn variadic_flags_are_single_arguments() {
        for stage in Stage::ALL {
            let protected = [PathBuf::from("/repo/SPEC.md")];
            let options = Options {
                max_budget_usd: Some(2.0),
                sandbox: true,
                protected: &protected,
            };
            for arg in args(stage, Some("opus"), options) {
                for flag in [
                    "--tools",
                    "--allowedTools",
                    "--disallowedTools",
                    "--json-schema",
                    "--settings",
                ] {
                    assert_ne!(arg, flag, "{stage}: `{flag}` must be written `{flag}=…`");
                }
            }
        }
    }
}
