//! The environment of a `program:<path>` agent (DESIGN.md section 4).
//!
//! Where it is found: a bare name (`program:my-agent`) on PATH; a path with a `/` relative to
//! the repository's top folder, where kern runs agents, and never on PATH. A run finds out at
//! spawn time; `kern -n` checks the same beforehand ([`locate`]), with the same messages.
//!
//! The one decision a reader must know: a program gets no arguments at all, only the prompt
//! on stdin and five `KERN_*` variables, so that any executable — a shell script, the built-in
//! scripted agent, a wrapper around another CLI — can be an agent without parsing a command
//! line. It cannot reject arguments it never gets, which is why `failure::classify` does not
//! look for argument errors in a program's stderr.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::stage::Stage;

/// What to do when a program reports that it is not logged in.
pub(crate) const LOGIN_HINT: &str = "see the agent program's own documentation for how to log in";

/// The variables added to the inherited environment, in a fixed order.
pub(crate) fn env(
    stage: Stage,
    schema_path: &Path,
    state_dir: &Path,
    task_title: &str,
) -> Vec<(String, String)> {
    vec![
        ("KERN_STAGE".to_string(), stage.name().to_string()),
        ("KERN_TOOLS".to_string(), stage.tools().as_str().to_string()),
        (
            "KERN_SCHEMA".to_string(),
            schema_path.to_string_lossy().into_owned(),
        ),
        (
            "KERN_STATE_DIR".to_string(),
            state_dir.to_string_lossy().into_owned(),
        ),
        ("KERN_TASK".to_string(), task_title.to_string()),
    ]
}

/// Where `path` runs from `cwd` (the repository's top folder): the executable file, or the
/// error a run would stop with (exit 5), so that `kern -n` fails the same way.
pub(crate) fn locate(path: &Path, cwd: &Path) -> Result<PathBuf> {
    let bare = path.components().count() == 1 && !path.is_absolute();
    let found = if bare {
        std::env::var_os("PATH").and_then(|var| {
            std::env::split_paths(&var)
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| dir.join(path))
                .find(|candidate| candidate.is_file())
        })
    } else {
        Some(cwd.join(path)).filter(|p| p.exists())
    };
    let Some(found) = found else {
        return Err(not_found(path));
    };
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&found) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => Ok(found),
        _ => Err(not_executable(path)),
    }
}

/// A program that does not exist: on PATH for a bare name, else at its path.
pub(crate) fn not_found(path: &Path) -> Error {
    let bare = path.components().count() == 1 && !path.is_absolute();
    Error::AgentNeedsUser {
        message: if bare {
            format!(
                "`{}` not found on PATH — check the name given to --agent program:<path> (or KERN_AGENT), or put its folder on PATH",
                path.display()
            )
        } else {
            format!(
                "`{}` not found — check the path given to --agent program:<path> (or KERN_AGENT)",
                path.display()
            )
        },
    }
}

/// A program that exists but may not be run.
pub(crate) fn not_executable(path: &Path) -> Error {
    Error::AgentNeedsUser {
        message: format!(
            "`{}` is not executable — `chmod +x` it or check --agent",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program's whole interface per stage: five variables, in this order.
    #[test]
    fn env_per_stage_is_exact() {
        for (stage, tools) in [
            (Stage::Research, "read-only"),
            (Stage::Implement, "full"),
            (Stage::Review, "git-read"),
        ] {
            let expected: Vec<(String, String)> = [
                ("KERN_STAGE", stage.name()),
                ("KERN_TOOLS", tools),
                ("KERN_SCHEMA", "/state/stage.schema.json"),
                ("KERN_STATE_DIR", "/state"),
                ("KERN_TASK", "Write out-1.txt"),
            ]
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
            assert_eq!(
                env(
                    stage,
                    Path::new("/state/stage.schema.json"),
                    Path::new("/state"),
                    "Write out-1.txt"
                ),
                expected,
                "{stage}"
            );
        }
    }

    #[test]
    fn programs_are_found_at_their_path_or_on_path_and_named_as_a_run_names_them() {
        let top = tempfile::tempdir().unwrap();
        let script = top.path().join("agent.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let plain = top.path().join("notes.txt");
        std::fs::write(&plain, "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate(&script, Path::new("/")).unwrap(), script);
        assert_eq!(
            locate(Path::new("./agent.sh"), top.path()).unwrap(),
            top.path().join("./agent.sh")
        );
        assert_eq!(
            locate(Path::new("sh"), top.path())
                .unwrap()
                .file_name()
                .unwrap(),
            "sh"
        );
        let cases = [
            (
                "/nonexistent/agent",
                "`/nonexistent/agent` not found — check the path given to --agent program:<path> (or KERN_AGENT)",
            ),
            (
                "./missing.sh",
                "`./missing.sh` not found — check the path given to --agent program:<path> (or KERN_AGENT)",
            ),
            (
                "no-such-kern-agent",
                "`no-such-kern-agent` not found on PATH — check the name given to --agent program:<path> (or KERN_AGENT), or put its folder on PATH",
            ),
            (
                "notes.txt",
                "`notes.txt` not found on PATH — check the name given to --agent program:<path> (or KERN_AGENT), or put its folder on PATH",
            ),
            (
                "./notes.txt",
                "`./notes.txt` is not executable — `chmod +x` it or check --agent",
            ),
        ];
        for (path, message) in cases {
            let error = locate(Path::new(path), top.path()).unwrap_err();
            assert_eq!(error.to_string(), message, "{path}");
            assert_eq!(error.exit_code(), 5, "{path}");
        }
    }
}
