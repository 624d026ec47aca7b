//! `--pr`: a task parked on `kern/<task>` on the remote gets a pull request, opened with the
//! GitHub CLI (`gh pr create`) when it is installed; without it kern says so and the branch
//! waits on the remote as `--review` leaves it.
//!
//! The one decision a reader must know: kern never talks to a forge itself — `gh` holds the
//! person's login and knows the forge; kern only builds its command line (pure, tested here)
//! and runs it bounded, in the clone, with prompts off.

use std::path::Path;
use std::time::Duration;

use crate::supervisor::probe::{self, Probe};

/// How long `gh pr create` may take.
const GH_TIMEOUT: Duration = Duration::from_secs(120);

/// `gh`'s arguments for a pull request of `head` onto `base` for the task `title`; `closes`
/// (`Closes acme/app#12`, with `--tracker`) end its body, so GitHub links the issue to the pull
/// request and closes it when the pull request is merged.
pub(crate) fn gh_args(base: &str, head: &str, title: &str, closes: &[String]) -> Vec<String> {
    let mut body = format!(
        "kern's work on the task {} of SPEC.md, reviewed by its review stage and parked for you (`kern --pr`).\n\nRead it with `git log -p {base}..{head}`; merging it lands the task, and SPEC.md on `{base}` already names this branch in the task's Review note.",
        crate::spec::Quoted(title)
    );
    if !closes.is_empty() {
        body.push_str("\n\n");
        body.push_str(&closes.join("\n"));
    }
    vec![
        "pr".into(),
        "create".into(),
        "--base".into(),
        base.into(),
        "--head".into(),
        head.into(),
        "--title".into(),
        title.into(),
        "--body".into(),
        body,
    ]
}

/// Opens the pull request with `gh` found on `path_var`: what to tell the person.
pub(crate) fn open(
    top: &Path,
    path_var: Option<&std::ffi::OsStr>,
    base: &str,
    head: &str,
    title: &str,
    closes: &[String],
) -> Result<String, String> {
    let Some(gh) = crate::supervisor::awake::find("gh", path_var) else {
        return Err(format!(
            "`gh` (the GitHub CLI) is not installed: open the pull request for `{head}` yourself, or install `gh` and log in (`gh auth login`)"
        ));
    };
    let mut probe = Probe::new(gh, gh_args(base, head, title, closes), top, GH_TIMEOUT);
    probe.env.push(("GH_PROMPT_DISABLED".into(), "1".into()));
    match probe::run(probe) {
        Ok(out) if out.end.success() => Ok(format!(
            "opened a pull request for `{head}`: {}",
            out.output.lines().last().unwrap_or("").trim()
        )),
        Ok(out) => Err(format!(
            "`gh pr create` for `{head}` failed ({}): {} — the branch waits on the remote; open the pull request yourself",
            out.end.describe(),
            out.output.lines().last().unwrap_or("").trim()
        )),
        Err(e) => Err(format!(
            "`gh` could not start ({e}) — open the pull request for `{head}` yourself"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pull_request_names_the_branch_the_base_and_the_task() {
        let args = gh_args("main", "kern/add-the-parser", "Add the parser", &[]);
        assert_eq!(
            args[..8],
            [
                "pr",
                "create",
                "--base",
                "main",
                "--head",
                "kern/add-the-parser",
                "--title",
                "Add the parser"
            ]
        );
        assert_eq!(args[8], "--body");
        assert!(
            args[9].contains("`git log -p main..kern/add-the-parser`"),
            "{}",
            args[9]
        );
        let closing = gh_args(
            "main",
            "kern/add-the-parser",
            "Add the parser",
            &["Closes acme/app#12".into()],
        );
        assert!(
            closing[9].ends_with("Review note.\n\nCloses acme/app#12"),
            "{}",
            closing[9]
        );
    }
}
