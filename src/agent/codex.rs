//! The Codex (`codex exec`) command line for one stage (DESIGN.md section 4, AGENT-CLIS.md).
//!
//! The one decision a reader must know: Codex's tool policy is its sandbox, nothing finer —
//! `read-only` for research and review, `workspace-write` for implement (which also keeps
//! `.git` read-only). `-m` is passed only when a model is given: Claude model names from the
//! templates mean nothing to Codex, so the caller passes one only for an explicit `--model`.

use std::path::Path;

use crate::stage::Stage;

/// What to do when Codex is not logged in.
pub(crate) const LOGIN_HINT: &str = "run `codex login` once, or set CODEX_API_KEY";

/// The sandbox mode that enforces `stage`'s tool policy.
pub(crate) fn sandbox(stage: Stage) -> &'static str {
    if stage.tools().is_read_only() {
        "read-only"
    } else {
        "workspace-write"
    }
}

/// The complete argv (after the program name) for `stage`. `repo` is the repository's top
/// folder and `schema_path` the stage's schema file, which the caller has written. Paths that
/// are not UTF-8 are passed lossily; kern's state folder and the repository path are UTF-8 in
/// every setup we know of.
pub(crate) fn args(
    stage: Stage,
    model: Option<&str>,
    repo: &Path,
    schema_path: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = ["exec", "--json", "--ephemeral"]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    if let Some(model) = model {
        args.push("-m".to_string());
        args.push(model.to_string());
    }
    args.push("-C".to_string());
    args.push(repo.to_string_lossy().into_owned());
    args.push("--sandbox".to_string());
    args.push(sandbox(stage).to_string());
    args.push("--output-schema".to_string());
    args.push(schema_path.to_string_lossy().into_owned());
    // `-` makes codex read the prompt from stdin, which the supervisor then closes.
    args.push("-".to_string());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_per_stage_is_exact() {
        let repo = Path::new("/home/user/project");
        let table: [(Stage, Option<&str>, &str, Vec<&str>); 4] = [
            (
                Stage::Research,
                None,
                "/tmp/claude/kern/project/main/stage1.schema.json",
                vec![
                    "exec",
                    "--json",
                    "--ephemeral",
                    "-C",
                    "/home/user/project",
                    "--sandbox",
                    "read-only",
                    "--output-schema",
                    "/tmp/claude/kern/project/main/stage1.schema.json",
                    "-",
                ],
            ),
            (
                Stage::Implement,
                Some("gpt-5-codex"),
                "/s/stage2.schema.json",
                vec![
                    "exec",
                    "--json",
                    "--ephemeral",
                    "-m",
                    "gpt-5-codex",
                    "-C",
                    "/home/user/project",
                    "--sandbox",
                    "workspace-write",
                    "--output-schema",
                    "/s/stage2.schema.json",
                    "-",
                ],
            ),
            (
                Stage::Implement,
                None,
                "/s/stage2.schema.json",
                vec![
                    "exec",
                    "--json",
                    "--ephemeral",
                    "-C",
                    "/home/user/project",
                    "--sandbox",
                    "workspace-write",
                    "--output-schema",
                    "/s/stage2.schema.json",
                    "-",
                ],
            ),
            (
                Stage::Review,
                Some("o3"),
                "/s/stage3.schema.json",
                vec![
                    "exec",
                    "--json",
                    "--ephemeral",
                    "-m",
                    "o3",
                    "-C",
                    "/home/user/project",
                    "--sandbox",
                    "read-only",
                    "--output-schema",
                    "/s/stage3.schema.json",
                    "-",
                ],
            ),
        ];
        for (stage, model, schema, expected) in table {
            assert_eq!(
                args(stage, model, repo, Path::new(schema)),
                expected,
                "{stage} {model:?}"
            );
        }
    }
}
