//! The Claude Code command line for one stage (DESIGN.md section 4, AGENT-CLIS.md).
//!
//! The one decision a reader must know: every variadic flag (`--tools`, `--allowedTools`,
//! `--disallowedTools`) is written as one `--flag=value` argument. Written as `--flag value`,
//! such a flag swallows whatever follows it, and the prompt never goes into argv at all: it is
//! written to stdin, because argv strings over 128 KiB fail on Linux.

use crate::stage::Stage;

/// What to do when Claude Code is not logged in.
pub const LOGIN_HINT: &str = "run `claude` once to log in, or set ANTHROPIC_API_KEY";

/// The flags every stage gets before its model: headless, one JSON event per line.
const HEAD: [&str; 4] = ["-p", "--output-format", "stream-json", "--verbose"];

/// The flags every stage gets after its model: no transcript under `~/.claude/projects`, and
/// no prompt for permission (a denied call is listed in the result instead).
const SESSION: [&str; 3] = ["--no-session-persistence", "--permission-mode", "dontAsk"];

/// Deny rules that together block `git commit` and `git push` in the forms AGENT-CLIS.md
/// verified (`git commit`, `git -C . commit`, `git -c k=v commit`, and the push forms). They
/// are best effort (`bash -c` gets past); kern's audit of HEAD and refs is the guarantee.
pub const GIT_WRITE_DENY_RULES: [&str; 6] = [
    "Bash(git commit *)",
    "Bash(git * commit *)",
    "Bash(git push *)",
    "Bash(git push)",
    "Bash(git * push *)",
    "Bash(git * push)",
];

/// The stage's tool policy as Claude flags.
pub fn tool_flags(stage: Stage) -> Vec<String> {
    match stage {
        Stage::Research => vec![
            "--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch".to_string(),
            // dontAsk denies what is not allowed; web access is harmless to the work tree.
            "--allowedTools=WebSearch,WebFetch".to_string(),
        ],
        Stage::Implement => vec![
            "--tools=default".to_string(),
            "--allowedTools=Bash,Edit,Write,NotebookEdit,Read,Grep,Glob".to_string(),
            format!("--disallowedTools={}", GIT_WRITE_DENY_RULES.join(",")),
        ],
        // No allow rules: in dontAsk mode read-only git (status, diff, log) is already
        // allowed, and a rule like `Bash(git diff:*)` would widen it to `git diff --output`.
        Stage::Review => vec!["--tools=Read,Grep,Glob,Bash".to_string()],
    }
}

/// The complete argv (after the program name) for `stage`.
pub fn args(stage: Stage, model: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = HEAD.iter().map(|s| s.to_string()).collect();
    if let Some(model) = model {
        args.push("--model".to_string());
        args.push(model.to_string());
    }
    args.extend(SESSION.iter().map(|s| s.to_string()));
    args.extend(tool_flags(stage));
    args.push(format!("--json-schema={}", stage.schema()));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
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
            assert_eq!(args(stage, model), expected, "{stage} {model:?}");
        }
    }

    #[test]
    fn variadic_flags_are_single_arguments() {
        for stage in Stage::ALL {
            for arg in args(stage, Some("opus")) {
                for flag in [
                    "--tools",
                    "--allowedTools",
                    "--disallowedTools",
                    "--json-schema",
                ] {
                    assert_ne!(arg, flag, "{stage}: `{flag}` must be written `{flag}=…`");
                }
            }
        }
    }
}
