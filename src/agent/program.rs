//! The environment of a `program:<path>` agent (DESIGN.md section 4).
//!
//! The one decision a reader must know: a program gets no arguments at all, only the prompt
//! on stdin and five `KERN_*` variables, so that any executable — a shell script, the built-in
//! scripted agent, a wrapper around another CLI — can be an agent without parsing a command
//! line. It cannot reject arguments it never gets, which is why `failure::classify` does not
//! look for argument errors in a program's stderr.

use std::path::Path;

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
