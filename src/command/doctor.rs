//! `kern doctor`: a preflight of everything a run needs, one line per check with ✓ or ✗, and
//! for each ✗ the exact fix on the next line.
//!
//! Checks, in order: inside a git repository; not bare; no merge or rebase in progress; git
//! identity (as kern's commit reads it: `author_from_env`); commit signing (the key found when
//! `commit.gpgsign` is on), git's index (`index.lock`, a sparse index), filter drivers (the
//! repository's preflight); SPEC.md present and valid (the first diagnostic); prompt overrides
//! valid; the agent binary found and its version; the agent logged in (`claude auth status`;
//! for Codex, what its configured provider needs: the OpenAI login through `codex login
//! status`, an `env_key` variable, or nothing; no network needed); the same two for
//! `--review-agent` and `--fallback-agent` when given; with `--sandbox`, bubblewrap and socat
//! for Claude Code's OS sandbox; the state root writable; the run lock free, or its holder. A
//! check that depends on a failed one is shown as
//! skipped with the reason, and does not count.
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

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::agent::codex_provider::{self, Credential};
use crate::agent::{self, Agent};
use crate::error::{Error, Result};
use crate::prompt::Templates;
use crate::repository::Repository;
use crate::settings::Settings;
use crate::spec::{self, Document, Severity, SpecFile};
use crate::stage::Stage;
use crate::state::lock::RunLock;

/// How long an agent CLI may take to answer `--version` or its login status.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
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
pub struct Check {
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
    pub fn failed(&self) -> bool {
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
pub async fn run(settings: &Settings) -> Result<()> {
    let checks = checks(settings, &settings.cwd).await;
    eprint!("{}", render(&checks));
    outcome(&checks)
}

/// The exit decision for a finished list of checks (see the module docs).
pub fn outcome(checks: &[Check]) -> Result<()> {
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
pub fn render(checks: &[Check]) -> String {
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

/// Runs every check for a kern started in `cwd`.
pub async fn checks(settings: &Settings, cwd: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    let repo = repository_checks(cwd, &mut checks);
    checks.push(identity_check(repo.as_ref()));
    checks.extend(commit_checks(repo.as_ref()));
    match &repo {
        Some(repo) => {
            checks.push(spec_check(settings, repo.top()));
            checks.push(templates_check(repo.top()));
        }
        None => {
            checks.push(Check::skipped(
                settings.spec.display().to_string(),
                "no usable repository",
            ));
            checks.push(Check::skipped("prompt templates", "no usable repository"));
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
    if settings.sandbox {
        checks.push(sandbox_check(settings).for_agent());
    }
    checks.push(state_root_check(&settings.state_root));
    checks.push(match &repo {
        Some(repo) => lock_check(repo),
        None => Check::skipped("run lock", "no usable repository"),
    });
    checks
}

/// Inside a repository, not bare, no operation in progress. Returns the repository when it can
/// be used.
fn repository_checks(cwd: &Path, checks: &mut Vec<Check>) -> Option<Repository> {
    let git = match git2::Repository::discover(cwd) {
        Ok(git) => git,
        Err(e) => {
            let (detail, fix) = if e.code() == git2::ErrorCode::NotFound {
                (
                    format!("`{}` is not inside a git repository", cwd.display()),
                    "run kern inside a git repository, or `git init` first".to_string(),
                )
            } else {
                (
                    format!(
                        "cannot open the repository at `{}`: {}",
                        cwd.display(),
                        e.message()
                    ),
                    "check the repository with `git status`".to_string(),
                )
            };
            checks.push(Check::fail("git repository", detail, fix));
            checks.push(Check::skipped("work tree", "no repository"));
            checks.push(Check::skipped("git operation", "no repository"));
            return None;
        }
    };
    let git_dir = git
        .path()
        .to_string_lossy()
        .trim_end_matches('/')
        .to_string();
    checks.push(Check::pass("git repository", format!("`{git_dir}`")));
    if git.is_bare() || git.workdir().is_none() {
        checks.push(Check::fail(
            "work tree",
            format!("`{git_dir}` is a bare repository"),
            format!("run kern in a clone with a checkout: `git clone {git_dir} <folder>`"),
        ));
        checks.push(Check::skipped("git operation", "no work tree"));
        return None;
    }
    let repo = match Repository::discover(cwd) {
        Ok(repo) => repo,
        Err(e) => {
            checks.push(Check::from_error(
                "work tree",
                &e,
                "check it with `git status`",
            ));
            checks.push(Check::skipped("git operation", "no work tree"));
            return None;
        }
    };
    checks.push(Check::pass(
        "work tree",
        format!("`{}`", repo.top().display()),
    ));
    checks.push(match repo.ensure_no_operation_in_progress() {
        Ok(()) => Check::pass(
            "git operation",
            "no merge, rebase or other operation in progress",
        ),
        Err(e) => Check::from_error("git operation", &e, "finish or abort it"),
    });
    Some(repo)
}

/// The author and committer a kern commit would use.
fn identity_check(repo: Option<&Repository>) -> Check {
    const NAME: &str = "git identity";
    let fix = r#"git config --global user.name "Your Name" && git config --global user.email you@example.com"#;
    let signature = match repo {
        Some(repo) => repo
            .git()
            .author_from_env()
            .and_then(|author| repo.git().committer_from_env().map(|_| author)),
        None => git2::Config::open_default().and_then(|config| {
            git2::Signature::now(
                &config.get_string("user.name")?,
                &config.get_string("user.email")?,
            )
        }),
    };
    match signature {
        Ok(me) => Check::pass(
            NAME,
            format!(
                "{} <{}>",
                String::from_utf8_lossy(me.name_bytes()),
                String::from_utf8_lossy(me.email_bytes())
            ),
        ),
        Err(_) => Check::fail(
            NAME,
            "git has no author identity (user.name, user.email)",
            fix,
        ),
    }
}

/// What else would stop kern's commit: signing, git's `index.lock`, filter drivers (the
/// repository's own preflight; identity and the operation are checked above).
fn commit_checks(repo: Option<&Repository>) -> Vec<Check> {
    const NAMES: [&str; 3] = ["commit signing", "git index", "filter drivers"];
    let Some(repo) = repo else {
        return NAMES
            .iter()
            .map(|name| Check::skipped(*name, "no usable repository"))
            .collect();
    };
    repo.preflight()
        .into_iter()
        .filter(|check| NAMES.contains(&check.name))
        .map(|check| match check.result {
            Ok(detail) => Check::pass(check.name, detail),
            Err(e) => Check::from_error(check.name, &e, "fix it as the message says"),
        })
        .collect()
}

/// SPEC.md exists, is UTF-8 and validates; the first error is shown.
fn spec_check(settings: &Settings, top: &Path) -> Check {
    let path = if settings.spec.is_absolute() {
        settings.spec.clone()
    } else {
        top.join(&settings.spec)
    };
    let display = path
        .strip_prefix(top)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string());
    let doc: Document = match SpecFile::load(&path) {
        Ok((_, doc)) => doc,
        Err(e) => return Check::from_error(&display, &e, "fix the file"),
    };
    let diagnostics = spec::validate(&doc);
    let errors: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if let Some(first) = errors.first() {
        let more = match errors.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        let fix = if first.fix.is_empty() {
            "fix the line shown".to_string()
        } else {
            first.fix.clone()
        };
        return Check::fail(
            &display,
            format!(
                "`{display}:{}:{}`: {}{more}",
                first.line, first.column, first.message
            ),
            fix,
        );
    }
    let c = doc.counts();
    let warnings = diagnostics.len();
    let mut detail = format!(
        "{} pending, {} in progress, {} done, {} blocked",
        c.pending, c.in_progress, c.done, c.blocked
    );
    if warnings > 0 {
        detail.push_str(&format!(
            "; {warnings} warning{} (`kern -n` shows them)",
            if warnings == 1 { "" } else { "s" }
        ));
    }
    Check::pass(display, detail)
}

/// The templates load: built in, or overrides in `.kern/prompts/` that parse.
fn templates_check(top: &Path) -> Check {
    const NAME: &str = "prompt templates";
    match Templates::load(top) {
        Ok(_) => {
            let overrides: Vec<String> = Stage::ALL
                .iter()
                .map(|s| Path::new(".kern/prompts").join(s.template_name()))
                .filter(|p| top.join(p).exists())
                .map(|p| format!("`{}`", p.display()))
                .collect();
            if overrides.is_empty() {
                Check::pass(NAME, "built in")
            } else {
                Check::pass(NAME, format!("overridden by {}", overrides.join(", ")))
            }
        }
        Err(e) => Check::from_error(
            NAME,
            &e,
            "fix the template, or delete it to use the built-in one",
        ),
    }
}

/// The agents a run uses, each once, with the role that names its checks (`None`: the
/// `--agent`, checked as `agent`).
fn agent_roles(settings: &Settings) -> Vec<(Option<&'static str>, Agent)> {
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

/// `--sandbox`: Claude Code's OS sandbox needs bubblewrap (`bwrap`) and `socat` on Linux, and
/// the CLI refuses to start the implement stage without them.
fn sandbox_check(settings: &Settings) -> Check {
    const NAME: &str = "sandbox";
    let uses_claude = agent_roles(settings)
        .iter()
        .any(|(_, agent)| *agent == Agent::Claude);
    if !uses_claude {
        return Check::pass(
            NAME,
            "--sandbox applies to Claude Code only; no stage runs on it (Codex sandboxes itself)",
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
                "--sandbox needs {} on PATH: Claude Code refuses to start the implement stage without {}",
                missing
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                if missing.len() == 1 { "it" } else { "them" }
            ),
            "install them (`apt-get install bubblewrap socat`), or leave --sandbox out",
        )
    }
}

/// The agent's binary and version, then its login.
async fn agent_checks(agent: &Agent, cwd: &Path) -> Vec<Check> {
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
        .map(str::to_string)
        .unwrap_or_else(|| first_line(stdout, stderr))
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

/// The state root can take files: a temp file is created and removed in it, or — when it does
/// not exist yet — in its nearest existing folder (where a run would create it).
fn state_root_check(root: &Path) -> Check {
    const NAME: &str = "state folder";
    let fix = "set KERN_STATE_DIR to a writable folder";
    let mut dir = root.to_path_buf();
    loop {
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Check::fail(
                    NAME,
                    format!(
                        "`{}` cannot be created: `{}` is not a folder",
                        root.display(),
                        dir.display()
                    ),
                    fix,
                );
            }
            Err(_) => match dir.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => dir = parent.to_path_buf(),
                _ => {
                    dir = PathBuf::from(".");
                    break;
                }
            },
        }
    }
    match tempfile::Builder::new()
        .prefix(".kern-doctor-")
        .tempfile_in(&dir)
    {
        Ok(file) => {
            let _ = file.close();
            if dir == root {
                Check::pass(NAME, format!("`{}` is writable", root.display()))
            } else {
                Check::pass(
                    NAME,
                    format!(
                        "`{}` will be created (`{}` is writable)",
                        root.display(),
                        dir.display()
                    ),
                )
            }
        }
        Err(e) => Check::fail(
            NAME,
            format!("`{}` is not writable: {e}", dir.display()),
            fix,
        ),
    }
}

/// The run lock of this project and branch: free, stale, or held (then the holder).
fn lock_check(repo: &Repository) -> Check {
    const NAME: &str = "run lock";
    let path = repo.run_lock_path();
    match RunLock::inspect(&path) {
        None => Check::pass(NAME, format!("free (`{}`)", path.display())),
        Some((record, false)) => Check::pass(
            NAME,
            format!(
                "stale lock of pid {} (not running): the next run takes it over",
                record.pid
            ),
        ),
        Some((record, true)) => Check::fail(
            NAME,
            format!("held by another kern: {}", record.holder()),
            format!(
                "wait for that run to end, or stop it with `kill -INT {}` (its task resumes on the next run)",
                record.pid
            ),
        ),
    }
}

/// The first non-empty line of stdout, else of stderr, trimmed.
fn first_line(stdout: &str, stderr: &str) -> String {
    stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(no output)")
        .to_string()
}

/// `name` looked up on PATH: the first existing executable file.
pub fn find_on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && is_executable(&m))
        })
}

fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// How an external command ended.
#[derive(Debug)]
pub enum Probe {
    /// It exited (`code` is `None` when a signal ended it).
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// Its stdout, lossily decoded.
        stdout: String,
        /// Its stderr, lossily decoded.
        stderr: String,
    },
    /// It did not finish in time and its process group was killed.
    TimedOut(Duration),
    /// It could not be started.
    Failed(String),
}

impl Probe {
    /// What went wrong, for a message: `exited with 3: <first line>`, `did not answer…`.
    fn failure(&self) -> String {
        match self {
            Probe::Exited {
                code,
                stdout,
                stderr,
            } => {
                let how = match code {
                    Some(code) => format!("exited with {code}"),
                    None => "was killed by a signal".to_string(),
                };
                format!("{how}: {}", first_line(stdout, stderr))
            }
            Probe::TimedOut(limit) => format!(
                "did not answer within {} and was stopped",
                crate::reporter::text::duration(*limit)
            ),
            Probe::Failed(why) => format!("could not be started: {why}"),
        }
    }
}

/// Runs `program args` in `cwd` with no stdin, in its own process group, for at most `limit`.
pub async fn probe(program: &Path, args: &[&str], cwd: &Path, limit: Duration) -> Probe {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Probe::Failed(e.to_string()),
    };
    let pgid = child.id().map(|id| id as i32);
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(output)) => Probe::Exited {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Ok(Err(e)) => Probe::Failed(e.to_string()),
        Err(_) => {
            // The whole group: a CLI that hangs may do so in a child of its own. The leader
            // itself is killed and reaped by `kill_on_drop` when the future is dropped.
            if let Some(pgid) = pgid {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Probe::TimedOut(limit)
        }
    }
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
            let got = outcome(&checks).err().map(|e| e.exit_code()).unwrap_or(0);
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

    #[test]
    fn first_line_prefers_stdout() {
        for (stdout, stderr, want) in [
            ("2.1.197 (Claude Code)\n", "", "2.1.197 (Claude Code)"),
            (
                "\n  \n",
                "Logged in using ChatGPT\n",
                "Logged in using ChatGPT",
            ),
            ("", "", "(no output)"),
        ] {
            assert_eq!(first_line(stdout, stderr), want);
        }
    }

    #[tokio::test]
    async fn a_hanging_probe_is_stopped_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let probe = probe(
            Path::new("sh"),
            &["-c", &script],
            dir.path(),
            Duration::from_secs(2),
        )
        .await;
        assert!(matches!(probe, Probe::TimedOut(_)), "{probe:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild got SIGKILL with its group; it is gone or a zombie awaiting its reaper.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten();
            if matches!(state, None | Some('Z')) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild {pid} still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[tokio::test]
    async fn probes_report_exit_codes_and_missing_programs() {
        let dir = tempfile::tempdir().unwrap();
        let p = probe(
            Path::new("sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            dir.path(),
            PROBE_TIMEOUT,
        )
        .await;
        assert_eq!(p.failure(), "exited with 3: out");
        let p = probe(
            Path::new("/nonexistent/agent"),
            &[],
            dir.path(),
            PROBE_TIMEOUT,
        )
        .await;
        assert!(matches!(p, Probe::Failed(_)), "{p:?}");
    }

    #[test]
    fn state_root_check_finds_the_nearest_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a/b/state");
        let c = state_root_check(&root);
        assert_eq!(c.verdict, Verdict::Pass);
        assert_eq!(
            c.detail,
            format!(
                "`{}` will be created (`{}` is writable)",
                root.display(),
                dir.path().display()
            )
        );
        assert!(!dir.path().join("a").exists(), "doctor creates nothing");
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let c = state_root_check(&file.join("state"));
        assert!(c.failed());
        assert_eq!(
            c.detail,
            format!(
                "`{}/state` cannot be created: `{}` is not a folder",
                file.display(),
                file.display()
            )
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
