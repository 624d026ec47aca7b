//! `kern doctor`: a preflight of everything a run needs, one line per check with ✓ or ✗, and
//! for each ✗ the exact fix on the next line.
//!
//! Checks, in order: inside a git repository; not bare; no merge or rebase in progress; the
//! `git` program on PATH and its version (a failure only where `--remote` or reftable refs
//! need it); git identity (as kern's commit reads it: `author_from_env`); commit signing (the key found when
//! `commit.gpgsign` is on), git's index (`index.lock`, a sparse index), filter drivers (the
//! repository's preflight); SPEC.md present and valid (the first diagnostic); prompt overrides
//! valid; the tree the next task starts on (uncommitted changes named, and a failure only where
//! the run would stop on them: a new task without `--allow-dirty`); the agent binary found and its version; the agent logged in (`claude auth status`;
//! for Codex, what its configured provider needs: the OpenAI login through `codex login
//! status`, an `env_key` variable, or nothing; no network needed); the same two for
//! `--review-agent` and `--fallback-agent` when given; kern's fence, made as a stage would make
//! it (with `--sandbox agent`: bubblewrap and socat for Claude Code's OS sandbox instead); where the settings came from (flags, `KERN_*`,
//! `.kern/config.toml`); the state folder the user's alone (the check every start
//! makes) and writable; this project's folder where earlier versions kept the state, named with
//! how to move it, when there is one; the run lock free, or its holder. A
//! check that depends on a failed one is shown as
//! skipped with the reason, and does not count.
//!
//! This file owns the runner (every check, in that order), the report and the exit decision;
//! the checks live by subject in `git`, `spec` (SPEC.md and the prompt templates), `agents`
//! and `state`, and `probe` finds and runs external programs.
//!
//! Decisions a reader must know:
//! - Doctor changes nothing: the state-root check creates and removes one temp file in the
//!   nearest existing folder of the root, never the project folder; the lock is only read.
//! - Every external command runs with [`PROBE_TIMEOUT`] in its own process group, which is
//!   killed when the time is up, so a hanging agent CLI cannot hang the doctor.
//! - Exit code: 0 when everything passes; 2 when anything but the agent fails (a run would
//!   stop there first); 5 when only the agent checks fail (binary missing or broken, not
//!   logged in), as a run would.
//! - Output goes to stderr, like everything kern prints for a person.

mod agents;
mod git;
mod probe;
mod spec;
mod state;

use std::path::Path;

use crate::error::{Error, Result};
use crate::settings::Settings;

use agents::{agent_checks, agent_roles, sandbox_check};
use git::{
    REFTABLE_NEEDS, REMOTE_NEEDS, commit_checks, git_check, identity_check, repository_checks,
};
use spec::{clean_tree_check, spec_check, templates_checks};
use state::{lock_check, old_state_check, state_root_check};

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It passed.
    Pass,
    /// It failed; the fix says what to do.
    Fail {
        /// The exact fix, one line.
        fix: String,
    },
    /// It could not be checked because an earlier check failed.
    Skipped,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    /// What is checked (`git repository`, `SPEC.md`, `agent`…).
    pub name: String,
    /// What was found, or why the check was skipped.
    pub detail: String,
    /// Pass, fail or skipped.
    pub verdict: Verdict,
    /// True for the agent's own checks (binary, version, login): they make the exit code 5.
    pub agent: bool,
}

impl Check {
    fn pass(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            detail: detail.into(),
            verdict: Verdict::Pass,
            agent: false,
        }
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            detail: detail.into(),
            verdict: Verdict::Fail { fix: fix.into() },
            agent: false,
        }
    }

    fn skipped(name: impl Into<String>, why: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            detail: format!("skipped: {}", why.into()),
            verdict: Verdict::Skipped,
            agent: false,
        }
    }

    /// A failure from one of kern's own errors: the message up to ` — ` is what was found,
    /// the rest is the fix (house style), else `fallback_fix`.
    fn from_error(name: impl Into<String>, error: &Error, fallback_fix: &str) -> Check {
        let text = error.to_string();
        let first = text.lines().next().unwrap_or_default();
        let (detail, fix) = split_fix(first, fallback_fix);
        Check::fail(name, detail, fix)
    }

    fn for_agent(mut self) -> Check {
        self.agent = true;
        self
    }

    /// True when the check failed.
    pub(crate) fn failed(&self) -> bool {
        matches!(self.verdict, Verdict::Fail { .. })
    }
}

fn split_fix(text: &str, fallback_fix: &str) -> (String, String) {
    match text.split_once(" — ") {
        Some((detail, fix)) => (detail.to_string(), fix.to_string()),
        None => (text.to_string(), fallback_fix.to_string()),
    }
}

/// Runs every check from the current folder, prints the report on stderr, and fails with
/// [`Error::DoctorFound`] when anything failed.
pub(crate) async fn run(settings: &Settings) -> Result<()> {
    let checks = checks(settings, &settings.cwd).await;
    eprint!("{}", render(&checks));
    outcome(&checks)
}

/// Where the settings that are not at their defaults came from (`.kern/config.toml`, flags,
/// `KERN_*` variables): informational, it always passes (a bad settings file stops kern
/// before the doctor starts, naming its line).
fn settings_check(settings: &Settings) -> Check {
    let detail = if settings.origins.is_empty() {
        "all at their defaults (no flags, no KERN_* variables, no .kern/config.toml)".to_string()
    } else {
        settings
            .origins
            .iter()
            .map(|o| format!("{} from {}", o.name, o.source))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Check::pass("settings", detail)
}

/// The exit decision for a finished list of checks (see the module docs).
pub(crate) fn outcome(checks: &[Check]) -> Result<()> {
    let failed: Vec<&Check> = checks.iter().filter(|c| c.failed()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::DoctorFound {
        problems: failed.len(),
        agent_only: failed.iter().all(|c| c.agent),
    })
}

/// The report: one line per check, and an indented `fix:` line under each failure.
pub(crate) fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let mark = match check.verdict {
            Verdict::Pass => '✓',
            Verdict::Fail { .. } => '✗',
            Verdict::Skipped => '-',
        };
        out.push_str(&format!("{mark} {}: {}\n", check.name, check.detail));
        if let Verdict::Fail { fix } = &check.verdict {
            out.push_str(&format!("    fix: {fix}\n"));
        }
    }
    out
}

/// The `sandbox` line: with `--sandbox kern`, whether kern's fence can be made here (kern makes
/// one, as a stage would) and what it holds; with `off`, that kern does not fence (`agent` has
/// the line of Claude Code's own sandbox instead).
fn fence_check(settings: &Settings, top: &Path) -> Check {
    const NAME: &str = "sandbox";
    match settings.sandbox.mode {
        crate::sandbox::Mode::Kern => match crate::pipeline::fence::preflight(settings, top) {
            Ok(_) => Check::pass(
                NAME,
                format!(
                    "kern's fence works here ({}, network {}): writes only in the work tree, secrets hidden, {}",
                    crate::sandbox::preflight::layers(),
                    settings.sandbox.network,
                    match settings.sandbox.network {
                        crate::sandbox::Network::List => "only the allowed hosts reachable",
                        crate::sandbox::Network::None => "no network",
                        crate::sandbox::Network::Open =>
                            "the network open (--sandbox-network open)",
                    }
                ),
            ),
            Err(Error::SandboxUnavailable { missing, fix }) => Check::fail(
                NAME,
                format!("kern's fence cannot be made here: {missing}"),
                fix,
            ),
            Err(e) => Check::from_error(NAME, &e, "pass --sandbox off to run unfenced, knowingly"),
        },
        crate::sandbox::Mode::Agent | crate::sandbox::Mode::Off => Check::pass(
            NAME,
            "--sandbox off: the agents run unfenced, with your whole account (files, network, credentials)",
        ),
    }
}

/// Runs every check for a kern started in `cwd`.
pub(crate) async fn checks(settings: &Settings, cwd: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    let repo = repository_checks(cwd, &mut checks);
    let mut needs = Vec::new();
    if settings.remote.is_some() {
        needs.push(REMOTE_NEEDS);
    }
    if repo
        .as_ref()
        .is_some_and(crate::repository::Repository::uses_reftable)
    {
        needs.push(REFTABLE_NEEDS);
    }
    checks.push(git_check(cwd, &needs).await);
    checks.push(identity_check(repo.as_ref()));
    checks.extend(commit_checks(repo.as_ref()));
    match &repo {
        Some(repo) => {
            checks.push(spec_check(settings, repo.top()));
            checks.extend(templates_checks(repo.top()));
            checks.push(clean_tree_check(settings));
        }
        None => {
            checks.push(Check::skipped(
                settings.spec.display().to_string(),
                "no usable repository",
            ));
            checks.push(Check::skipped("prompt templates", "no usable repository"));
            checks.push(Check::skipped("clean tree", "no usable repository"));
        }
    }
    let top = repo.as_ref().map(|r| r.top().to_path_buf());
    for (role, agent) in agent_roles(settings) {
        let mut found = agent_checks(&agent, top.as_deref().unwrap_or(cwd)).await;
        if let Some(role) = role {
            for check in &mut found {
                check.name = format!("{role} {}", check.name);
            }
        }
        checks.extend(found);
    }
    if settings.sandbox.mode == crate::sandbox::Mode::Agent {
        checks.push(sandbox_check(settings).for_agent());
    } else {
        checks.push(fence_check(settings, top.as_deref().unwrap_or(cwd)));
    }
    checks.push(settings_check(settings));
    checks.push(state_root_check(&settings.state_root, repo.as_ref()));
    if let Some(repo) = &repo {
        checks.extend(old_state_check(
            &settings.old_state_root,
            &settings.state_root,
            repo,
        ));
    }
    checks.push(match &repo {
        Some(repo) => lock_check(repo),
        None => Check::skipped("run lock", "no usable repository"),
    });
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(name: &str, agent: bool) -> Check {
        let mut c = Check::fail(name, "d", "f");
        c.agent = agent;
        c
    }

    #[test]
    fn exit_codes() {
        let cases: Vec<(Vec<Check>, u8)> = vec![
            (vec![Check::pass("a", "d"), Check::skipped("b", "w")], 0),
            (vec![Check::pass("a", "d"), fail("agent", true)], 5),
            (vec![fail("agent", true), fail("agent login", true)], 5),
            (vec![fail("SPEC.md", false), fail("agent", true)], 2),
            (vec![fail("git repository", false)], 2),
        ];
        for (checks, code) in cases {
            let got = outcome(&checks).err().map_or(0, |e| e.exit_code());
            assert_eq!(got, code, "{checks:?}");
        }
    }

    #[test]
    fn rendering_puts_the_fix_under_each_failure() {
        let checks = vec![
            Check::pass("git repository", "`/r/.git`"),
            Check::fail(
                "SPEC.md",
                "`SPEC.md:3:3`: unknown task marker `[-]`",
                "use [ ], [~], [x] or [!]",
            ),
            Check::skipped("run lock", "no usable repository"),
        ];
        assert_eq!(
            render(&checks),
            "✓ git repository: `/r/.git`\n\
             ✗ SPEC.md: `SPEC.md:3:3`: unknown task marker `[-]`\n    fix: use [ ], [~], [x] or [!]\n\
             - run lock: skipped: no usable repository\n"
        );
    }

    #[test]
    fn errors_split_into_what_and_fix() {
        let e = Error::SpecMissing {
            path: "SPEC.md".into(),
        };
        let c = Check::from_error("SPEC.md", &e, "unused");
        assert_eq!(c.detail, "`SPEC.md` not found");
        assert_eq!(
            c.verdict,
            Verdict::Fail {
                fix: "run `kern init` to write a starter SPEC.md, or pass --spec PATH".into()
            }
        );
        let c = Check::from_error("x", &Error::Internal("boom".into()), "the fallback");
        assert_eq!(
            (c.detail.as_str(), c.verdict),
            (
                "internal error: boom",
                Verdict::Fail {
                    fix: "the fallback".into()
                }
            )
        );
    }
}
