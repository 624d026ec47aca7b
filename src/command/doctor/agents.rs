//! The agent checks: each agent a run uses (`--agent`, `--review-agent`, `--fallback-agent`,
//! each once) found and answering `--version`, and logged in as its provider needs; with
//! `--sandbox agent`, what Claude Code's OS sandbox needs.
//!
//! The decision a reader must know: these checks are marked `for_agent`, so when only
//! they fail the doctor exits 5, as a run would; a login is read from the CLI's own status
//! command or Codex's configuration (no network needed).

use std::path::{Path, PathBuf};

use super::probe::{PROBE_TIMEOUT, Probe, find_on_path, first_line, is_executable, probe};
use super::{Check, split_fix};
use crate::agent::codex_provider::{self, Credential};
use crate::agent::{self, Agent};
use crate::settings::Settings;

/// The agents a run uses, each once, with the role that names its checks (`None`: the
/// `--agent`, checked as `agent`).
pub(super) fn agent_roles(settings: &Settings) -> Vec<(Option<&'static str>, Agent)> {
    let mut roles = vec![(None, settings.agent.clone())];
    let review = settings.review_agent.as_ref();
    let fallback = settings.fallback_agent.as_ref();
    match (review, fallback) {
        (Some(r), Some(f)) if r == f => roles.push((Some("review and fallback"), r.clone())),
        _ => {
            if let Some(r) = review {
                roles.push((Some("review"), r.clone()));
            }
            if let Some(f) = fallback {
                roles.push((Some("fallback"), f.clone()));
            }
        }
    }
    roles
}

/// `--sandbox agent`: Claude Code's OS sandbox needs bubblewrap (`bwrap`) and `socat` on Linux,
/// and the CLI refuses to start the implement stage without them.
pub(super) fn sandbox_check(settings: &Settings) -> Check {
    const NAME: &str = "sandbox";
    let uses_claude = agent_roles(settings)
        .iter()
        .any(|(_, agent)| *agent == Agent::Claude);
    if !uses_claude {
        return Check::pass(
            NAME,
            "--sandbox agent applies to Claude Code only; no stage runs on it (Codex sandboxes itself), and kern's fence is off",
        );
    }
    if !cfg!(target_os = "linux") {
        return Check::pass(NAME, "Claude Code's sandbox needs nothing extra here");
    }
    let tools: Vec<(&str, Option<PathBuf>)> = ["bwrap", "socat"]
        .into_iter()
        .map(|tool| (tool, find_on_path(Path::new(tool))))
        .collect();
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(_, found)| found.is_none())
        .map(|(tool, _)| *tool)
        .collect();
    if missing.is_empty() {
        let found: Vec<String> = tools
            .iter()
            .filter_map(|(tool, path)| {
                path.as_ref()
                    .map(|p| format!("`{tool}` (`{}`)", p.display()))
            })
            .collect();
        Check::pass(
            NAME,
            format!("Claude Code's OS sandbox has {}", found.join(" and ")),
        )
    } else {
        Check::fail(
            NAME,
            format!(
                "--sandbox agent needs {} on PATH: Claude Code refuses to start the implement stage without {}",
                missing
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                if missing.len() == 1 { "it" } else { "them" }
            ),
            "install them (`apt-get install bubblewrap socat`), or leave --sandbox out for kern's own fence",
        )
    }
}

/// The agent's binary and version, then its login.
pub(super) async fn agent_checks(agent: &Agent, cwd: &Path) -> Vec<Check> {
    const BINARY: &str = "agent";
    const LOGIN: &str = "agent login";
    let (name, install) = match agent {
        Agent::Claude => (
            "claude",
            "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent",
        ),
        Agent::Codex => (
            "codex",
            "install Codex (`npm install -g @openai/codex`) or choose another agent with --agent",
        ),
        Agent::Program(path) => {
            return vec![
                program_check(path, cwd).for_agent(),
                Check::skipped(LOGIN, "a program agent has no login kern can check"),
            ];
        }
    };
    let Some(binary) = find_on_path(Path::new(name)) else {
        return vec![
            Check::fail(BINARY, format!("`{name}` not found on PATH"), install).for_agent(),
            Check::skipped(LOGIN, format!("no `{name}`")),
        ];
    };
    let version = match probe(&binary, &["--version"], cwd, PROBE_TIMEOUT).await {
        Probe::Exited {
            code: Some(0),
            stdout,
            stderr,
        } => Check::pass(
            BINARY,
            format!(
                "`{name}` {} (`{}`)",
                first_line(&stdout, &stderr),
                binary.display()
            ),
        ),
        other => {
            return vec![
                Check::fail(
                    BINARY,
                    format!("`{name} --version` {}", other.failure()),
                    install,
                )
                .for_agent(),
                Check::skipped(LOGIN, format!("`{name}` does not run")),
            ];
        }
    };
    let login = match agent {
        Agent::Claude => claude_login(&binary, cwd).await,
        _ => codex_login(&binary, cwd).await,
    };
    vec![version.for_agent(), login.for_agent()]
}

/// `claude auth status`: JSON with `loggedIn`, exit 1 when not logged in.
async fn claude_login(binary: &Path, cwd: &Path) -> Check {
    const NAME: &str = "agent login";
    let hint = agent::claude::LOGIN_HINT;
    match probe(binary, &["auth", "status"], cwd, PROBE_TIMEOUT).await {
        Probe::Exited {
            code,
            stdout,
            stderr,
        } => {
            let status: Option<serde_json::Value> = serde_json::from_str(&stdout).ok();
            let logged_in = status
                .as_ref()
                .and_then(|s| s.get("loggedIn"))
                .and_then(serde_json::Value::as_bool);
            let method = status
                .as_ref()
                .and_then(|s| s.get("authMethod"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown method");
            match (logged_in, code) {
                (Some(true), Some(0)) => {
                    Check::pass(NAME, format!("logged in ({method}, `claude auth status`)"))
                }
                (Some(false), _) => Check::fail(NAME, "not logged in (`claude auth status`)", hint),
                _ => Check::fail(
                    NAME,
                    format!(
                        "`claude auth status` {}",
                        Probe::Exited {
                            code,
                            stdout,
                            stderr
                        }
                        .failure()
                    ),
                    hint,
                ),
            }
        }
        other => Check::fail(
            NAME,
            format!("`claude auth status` {}", other.failure()),
            hint,
        ),
    }
}

/// Codex: the provider `codex exec` would use (its `config.toml` in `CODEX_HOME`, default
/// `~/.codex`) and what that provider needs — the OpenAI login (`codex login status`, or
/// `CODEX_API_KEY`), the variable its `env_key` names, or nothing.
async fn codex_login(binary: &Path, cwd: &Path) -> Check {
    const NAME: &str = "agent login";
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let codex_home_var = var("CODEX_HOME");
    let Some(dir) = codex_provider::codex_home(codex_home_var.as_deref(), home.as_deref()) else {
        return Check::fail(
            NAME,
            "neither CODEX_HOME nor HOME is set: Codex has no configuration folder",
            "set HOME, or CODEX_HOME to Codex's folder",
        );
    };
    if codex_home_var.is_some() && !dir.is_dir() {
        return Check::fail(
            NAME,
            format!(
                "CODEX_HOME is `{}`, which does not exist (codex refuses to start)",
                dir.display()
            ),
            "create that folder, or unset CODEX_HOME",
        );
    }
    let config_path = dir.join("config.toml");
    let text = match std::fs::read_to_string(&config_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("cannot read `{}`: {e}", config_path.display()),
                "check the file's permissions",
            );
        }
    };
    let source = match &text {
        Some(_) => format!("`{}`", config_path.display()),
        None => format!("no `{}`: the default", config_path.display()),
    };
    let provider = match codex_provider::provider(text.as_deref()) {
        Ok(provider) => provider,
        Err(message) => {
            let (detail, fix) = split_fix(&message, "fix the file, or move it aside");
            return Check::fail(NAME, format!("`{}`: {detail}", config_path.display()), fix);
        }
    };
    let id = &provider.id;
    let at = provider
        .base_url
        .as_ref()
        .map(|url| format!(" at {url}"))
        .unwrap_or_default();
    match &provider.credential {
        Credential::Nothing => Check::pass(
            NAME,
            format!("provider `{id}`{at} needs no login ({source})"),
        ),
        Credential::TokenInConfig => Check::pass(
            NAME,
            format!("provider `{id}`{at} has its token in {source}"),
        ),
        Credential::EnvKey(key) if var(key).is_some() => Check::pass(
            NAME,
            format!("provider `{id}`{at}: its key `{key}` is set ({source})"),
        ),
        Credential::EnvKey(key) => Check::fail(
            NAME,
            format!("provider `{id}`{at} reads its key from `{key}`, which is not set ({source})"),
            format!(
                "export {key}=<the provider's API key> (the `env_key` of `[model_providers.{id}]`)"
            ),
        ),
        Credential::OpenAiLogin => {
            openai_login(binary, cwd, id, var(codex_provider::API_KEY_VAR).is_some()).await
        }
    }
}

/// The OpenAI login of Codex: `codex login status` exits 0 when logged in; without a login,
/// an API key in `CODEX_API_KEY` serves `codex exec` as well.
async fn openai_login(binary: &Path, cwd: &Path, id: &str, api_key_set: bool) -> Check {
    const NAME: &str = "agent login";
    let hint = agent::codex::LOGIN_HINT;
    match probe(binary, &["login", "status"], cwd, PROBE_TIMEOUT).await {
        Probe::Exited {
            code: Some(0),
            stdout,
            stderr,
        } => Check::pass(
            NAME,
            format!(
                "provider `{id}`: {} (`codex login status`)",
                status_line(&stdout, &stderr)
            ),
        ),
        Probe::Exited {
            code: Some(_),
            stdout,
            stderr,
        } => {
            let status = status_line(&stdout, &stderr);
            if api_key_set {
                Check::pass(
                    NAME,
                    format!(
                        "provider `{id}`: `{}` is set (`codex login status`: {status})",
                        codex_provider::API_KEY_VAR
                    ),
                )
            } else {
                Check::fail(
                    NAME,
                    format!("provider `{id}`: {status} (`codex login status`)"),
                    hint,
                )
            }
        }
        other => Check::fail(
            NAME,
            format!("`codex login status` {}", other.failure()),
            hint,
        ),
    }
}

/// The line that says the state: the first non-empty line of stdout, else of stderr, that is
/// not one of Codex's `WARNING:` lines about its own set-up.
fn status_line(stdout: &str, stderr: &str) -> String {
    stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("WARNING:"))
        .map_or_else(|| first_line(stdout, stderr), str::to_string)
}

/// A `program:<path>` agent: found (on PATH when the path has no `/`; relative paths are
/// relative to the repository's top folder, where kern runs agents) and executable.
fn program_check(path: &Path, cwd: &Path) -> Check {
    const NAME: &str = "agent";
    let fix = "check the path given to --agent program:<path> (or KERN_AGENT)";
    let resolved = if path.components().count() == 1 && !path.is_absolute() {
        match find_on_path(path) {
            Some(found) => found,
            None => {
                return Check::fail(NAME, format!("`{}` not found on PATH", path.display()), fix);
            }
        }
    } else {
        cwd.join(path)
    };
    match std::fs::metadata(&resolved) {
        Ok(meta) if meta.is_file() && is_executable(&meta) => Check::pass(
            NAME,
            format!("program `{}` (executable)", resolved.display()),
        ),
        Ok(meta) if meta.is_file() => Check::fail(
            NAME,
            format!("`{}` is not executable", resolved.display()),
            format!("chmod +x {}", resolved.display()),
        ),
        Ok(_) => Check::fail(NAME, format!("`{}` is not a file", resolved.display()), fix),
        Err(_) => Check::fail(NAME, format!("`{}` not found", resolved.display()), fix),
    }
}
