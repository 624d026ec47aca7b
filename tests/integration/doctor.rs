//! `kern doctor`, run as the real binary: each check passing and failing, with its fix line and
//! the exit code (0 all pass, 5 only the agent, 2 otherwise). The agent CLIs are fake `claude`
//! and `codex` scripts, alone on PATH, answering `--version`, `auth status` and `login status`
//! as the real ones do (AGENT-CLIS.md).

use crate::support::project;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use project::Project;
use serde_json::json;

const NOT_LOGGED_IN: &str =
    "{\n  \"loggedIn\": false,\n  \"authMethod\": \"none\",\n  \"apiProvider\": \"firstParty\"\n}";
const LOGGED_IN: &str = "{\n  \"loggedIn\": true,\n  \"authMethod\": \"claude.ai\",\n  \"apiProvider\": \"firstParty\"\n}";

/// A folder for fake agent binaries: it is the whole PATH of the doctor.
struct Bin(tempfile::TempDir);

impl Bin {
    fn new() -> Bin {
        Bin(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn script(&self, name: &str, body: &str) -> &Bin {
        let path = self.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        self
    }

    /// `claude`: `--version` as 2.1.197; `auth status` logged in or not (exit 1, as the real one).
    fn claude(&self, logged_in: bool) -> &Bin {
        let (status, code) = if logged_in {
            (LOGGED_IN, 0)
        } else {
            (NOT_LOGGED_IN, 1)
        };
        self.script(
            "claude",
            &format!(
                "case \"$*\" in\n  --version) echo '2.1.197 (Claude Code)' ;;\n  'auth status') printf '%s\\n' '{status}'; exit {code} ;;\n  *) echo \"unexpected: $*\" >&2; exit 2 ;;\nesac\n"
            ),
        )
    }

    /// `codex`: `--version` as 0.169.0; `login status` as the real one, on stderr, after the
    /// warning codex-cli 0.169.0 prints first when its home is under a temporary folder.
    fn codex(&self, logged_in: bool) -> &Bin {
        let status = if logged_in {
            "echo 'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir \"/tmp\"' >&2; echo 'Logged in using an API key - sk-proj-***' >&2; exit 0"
        } else {
            "echo 'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir \"/tmp\"' >&2; echo 'Not logged in' >&2; exit 1"
        };
        self.script(
            "codex",
            &format!(
                "case \"$*\" in\n  --version) echo 'codex-cli 0.169.0' ;;\n  'login status') {status} ;;\n  *) echo \"unexpected: $*\" >&2; exit 2 ;;\nesac\n"
            ),
        )
    }
}

/// `kern doctor` in `cwd` with `agent`, PATH = `bin` only, and a git config of the repository
/// alone (empty HOME, no system config); Codex's home is `codex_home(p)`, with no key in the
/// environment.
fn doctor_in(cwd: &Path, p: &Project, bin: &Bin, agent: &str) -> (Option<i32>, String) {
    doctor_with(cwd, p, bin, agent, &[])
}

/// The same with `env` added.
fn doctor_with(
    cwd: &Path,
    p: &Project,
    bin: &Bin,
    agent: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let home = p.outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(codex_home(p)).unwrap();
    let out = p
        .run(&["doctor"])
        .current_dir(cwd)
        .env("PATH", bin.path())
        .env("KERN_AGENT", agent)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("CODEX_HOME", codex_home(p))
        .env_remove([
            "CODEX_API_KEY",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
            "EMAIL",
            "GIT_DIR",
            "GIT_WORK_TREE",
        ])
        .envs(env.iter().copied())
        // The callers check the code: every doctor outcome is a row of their tables.
        .any_exit();
    (out.code, out.stderr)
}

fn doctor(p: &Project, bin: &Bin, agent: &str) -> (Option<i32>, String) {
    doctor_in(p.path(), p, bin, agent)
}

/// Codex's home folder for the doctor runs (`CODEX_HOME`), inside their HOME.
fn codex_home(p: &Project) -> PathBuf {
    p.outside.path().join("home").join("codex")
}

fn top(p: &Project) -> String {
    p.path().canonicalize().unwrap().display().to_string()
}

/// The line of check `name`, and the line after it.
fn check<'a>(err: &'a str, name: &str) -> (&'a str, &'a str) {
    let lines: Vec<&str> = err.lines().collect();
    let i = lines
        .iter()
        .position(|l| {
            l[l.char_indices().nth(2).map_or(0, |(i, _)| i)..].starts_with(&format!("{name}: "))
        })
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{err}"));
    (lines[i], lines.get(i + 1).copied().unwrap_or(""))
}

fn lock_path(p: &Project) -> PathBuf {
    p.path().join(".git/kern.lock")
}

/// How the doctor names this kernel's Landlock: its ABI, asked of the kernel as kern asks.
fn landlock() -> String {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns the ABI version.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) };
    if abi > 0 {
        format!("Landlock ABI {abi}")
    } else {
        "no Landlock in this kernel".into()
    }
}

#[test]
fn everything_in_place_passes_every_check_and_exits_0() {
    let p = Project::new("- [ ] One\n- [x] Two\n");
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    let top = top(&p);
    let expected = format!(
        "✓ git repository: `{top}/.git`\n\
         ✓ work tree: `{top}`\n\
         ✓ git operation: no merge, rebase or other operation in progress\n\
         ✓ git: not on PATH — nothing here needs it (only --remote and reftable refs do)\n\
         ✓ git identity: Test Person <test@example.com>\n\
         ✓ commit signing: off (`commit.gpgsign` is not set)\n\
         ✓ git index: no `index.lock`, not a sparse index\n\
         ✓ filter drivers: none named in .gitattributes\n\
         ✓ SPEC.md: 1 pending, 0 in progress, 1 done, 0 blocked\n\
         ✓ prompt templates: built in\n\
         ✓ clean tree: no uncommitted changes\n\
         ✓ agent: `claude` 2.1.197 (Claude Code) (`{bin}/claude`)\n\
         ✓ agent login: logged in (claude.ai, `claude auth status`)\n\
         ✓ sandbox: kern's fence works here (user, mount, network and PID namespaces, {landlock}, network list): writes only in the work tree, secrets hidden, only the allowed hosts reachable\n\
         ✓ settings: retry-delay from KERN_RETRY_DELAY, agent from KERN_AGENT, sandbox-write from KERN_SANDBOX_WRITE\n\
         ✓ state folder: `{root}` will be created (`{outside}` is writable)\n\
         ✓ run lock: free (`{lock}`)\n",
        bin = bin.path().display(),
        root = p.state_root().display(),
        outside = p.outside.path().display(),
        lock = lock_path(&p).display(),
        landlock = landlock(),
    );
    assert_eq!((code, err.as_str()), (Some(0), expected.as_str()));
    assert!(!p.state_root().exists(), "doctor creates no state folder");
    assert_eq!(
        std::fs::read_dir(p.outside.path()).unwrap().count(),
        3,
        "doctor leaves nothing beside the scenario, the agent wrapper and HOME"
    );
}

#[test]
fn claude_not_logged_in_exits_5_with_the_login_fix() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    bin.claude(false);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            "✗ agent login: not logged in (`claude auth status`)",
            "    fix: run `claude` once to log in, or set ANTHROPIC_API_KEY"
        )
    );
    assert!(
        err.ends_with("kern: error: doctor found 1 problem — fix each ✗ above as its `fix:` line says, then run `kern doctor` again\n"),
        "{err}"
    );
}

#[test]
fn a_missing_claude_exits_5_and_skips_the_login() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent"),
        (
            "✗ agent: `claude` not found on PATH",
            "    fix: install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent"
        )
    );
    assert_eq!(
        check(&err, "agent login").0,
        "- agent login: skipped: no `claude`"
    );
}

#[test]
fn a_claude_that_fails_its_version_exits_5() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    bin.script("claude", "echo 'Error: cannot find module' >&2; exit 1\n");
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent"),
        (
            "✗ agent: `claude --version` exited with 1: Error: cannot find module",
            "    fix: install Claude Code (`npm install -g @anthropic-ai/claude-code`) or choose another agent with --agent"
        )
    );
}

#[test]
fn codex_logged_in_passes_and_logged_out_exits_5() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    bin.codex(true);
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "agent").0,
        format!(
            "✓ agent: `codex` codex-cli 0.169.0 (`{}/codex`)",
            bin.path().display()
        )
    );
    assert_eq!(
        check(&err, "agent login").0,
        "✓ agent login: provider `openai`: Logged in using an API key - sk-proj-*** (`codex login status`)"
    );

    bin.codex(false);
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            "✗ agent login: provider `openai`: Not logged in (`codex login status`)",
            "    fix: run `codex login` once, or set CODEX_API_KEY"
        )
    );
    assert!(
        !err.contains("WARNING"),
        "Codex's own warning is not the state:\n{err}"
    );

    // `codex exec` takes an API key from CODEX_API_KEY without a login.
    let (code, err) = doctor_with(p.path(), &p, &bin, "codex", &[("CODEX_API_KEY", "sk-x")]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "agent login").0,
        "✓ agent login: provider `openai`: `CODEX_API_KEY` is set (`codex login status`: Not logged in)"
    );
}

#[test]
fn codex_with_a_custom_provider_is_checked_for_what_that_provider_needs() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    // Logged out: `codex login status` says so for any provider, and must not decide.
    bin.codex(false);
    let config = codex_home(&p).join("config.toml");
    let config_shown = config.display().to_string();
    std::fs::create_dir_all(codex_home(&p)).unwrap();

    std::fs::write(
        &config,
        "model_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:9/v1\"\nwire_api = \"responses\"\n",
    )
    .unwrap();
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "agent login").0,
        format!(
            "✓ agent login: provider `mock` at http://127.0.0.1:9/v1 needs no login (`{config_shown}`)"
        )
    );

    std::fs::write(
        &config,
        "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://x.example/openai\"\nenv_key = \"AZURE_OPENAI_API_KEY\"\n",
    )
    .unwrap();
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            format!("✗ agent login: provider `azure` at https://x.example/openai reads its key from `AZURE_OPENAI_API_KEY`, which is not set (`{config_shown}`)").as_str(),
            "    fix: export AZURE_OPENAI_API_KEY=<the provider's API key> (the `env_key` of `[model_providers.azure]`)"
        )
    );
    let (code, err) = doctor_with(
        p.path(),
        &p,
        &bin,
        "codex",
        &[("AZURE_OPENAI_API_KEY", "k")],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "agent login").0,
        format!(
            "✓ agent login: provider `azure` at https://x.example/openai: its key `AZURE_OPENAI_API_KEY` is set (`{config_shown}`)"
        )
    );

    std::fs::write(&config, "model_provider = \"nowhere\"\n").unwrap();
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            format!("✗ agent login: `{config_shown}`: `model_provider = \"nowhere\"` names a provider that is not defined").as_str(),
            "    fix: add a `[model_providers.nowhere]` table with its `base_url`, or use `openai`"
        )
    );

    std::fs::write(&config, "model_provider = \n").unwrap();
    let (code, err) = doctor(&p, &bin, "codex");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            format!("✗ agent login: `{config_shown}`: line 1: string values must be quoted, expected literal string").as_str(),
            "    fix: fix the file, or move it aside"
        )
    );

    let missing = p.outside.path().join("no-such-codex-home");
    let (code, err) = doctor_with(
        p.path(),
        &p,
        &bin,
        "codex",
        &[("CODEX_HOME", missing.to_str().unwrap())],
    );
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent login"),
        (
            format!(
                "✗ agent login: CODEX_HOME is `{}`, which does not exist (codex refuses to start)",
                missing.display()
            )
            .as_str(),
            "    fix: create that folder, or unset CODEX_HOME"
        )
    );
}

#[test]
fn a_program_agent_must_exist_and_be_executable() {
    let p = Project::new("- [ ] One\n");
    let bin = Bin::new();
    let (code, err) = doctor(&p, &bin, "program:/nonexistent/agent");
    assert_eq!(code, Some(5), "{err}");
    assert_eq!(
        check(&err, "agent"),
        (
            "✗ agent: `/nonexistent/agent` not found",
            "    fix: check the path given to --agent program:<path> (or KERN_AGENT)"
        )
    );
    assert_eq!(
        check(&err, "agent login").0,
        "- agent login: skipped: a program agent has no login kern can check"
    );

    p.write("agent.sh", "#!/bin/sh\n");
    p.commit_all("the agent, not executable");
    let (code, err) = doctor(&p, &bin, "program:./agent.sh");
    assert_eq!(code, Some(5), "{err}");
    let path = format!("{}/./agent.sh", top(&p));
    assert_eq!(
        check(&err, "agent"),
        (
            format!("✗ agent: `{path}` is not executable").as_str(),
            format!("    fix: chmod +x {path}").as_str()
        )
    );

    let wrapper = p.outside.path().join("agent.sh");
    let (code, err) = doctor(&p, &bin, &format!("program:{}", wrapper.display()));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "agent").0,
        format!("✓ agent: program `{}` (executable)", wrapper.display())
    );
}

#[test]
fn an_invalid_spec_exits_2_with_its_first_diagnostic() {
    let p = Project::new("- [ ] One\n- [ x] Two\n- [] Three\n");
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        check(&err, "SPEC.md"),
        (
            "✗ SPEC.md: `SPEC.md:2:3`: malformed task marker `[ x]` (and 1 more)",
            "    fix: use [ ], [~], [x] or [!]: exactly one character inside the brackets"
        )
    );
}

#[test]
fn a_missing_spec_exits_2_with_the_init_fix() {
    let p = Project::new("- [ ] One\n");
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        check(&err, "SPEC.md"),
        (
            format!("✗ SPEC.md: `{}/SPEC.md` not found", top(&p)).as_str(),
            "    fix: run `kern init` to write a starter SPEC.md, or pass --spec PATH"
        )
    );
}

#[test]
fn outside_a_repository_exits_2_and_skips_what_needs_one() {
    let p = Project::new("- [ ] One\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor_in(elsewhere.path(), &p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        check(&err, "git repository"),
        (
            format!(
                "✗ git repository: `{}` is not inside a git repository",
                elsewhere.path().display()
            )
            .as_str(),
            "    fix: run kern inside a git repository, or `git init` first"
        )
    );
    for (name, why) in [
        ("work tree", "no repository"),
        ("git operation", "no repository"),
        ("SPEC.md", "no usable repository"),
        ("prompt templates", "no usable repository"),
        ("run lock", "no usable repository"),
    ] {
        assert_eq!(check(&err, name).0, format!("- {name}: skipped: {why}"));
    }
    assert!(
        err.contains("doctor found 2 problems"),
        "the repository and the identity (empty HOME): {err}"
    );
}

#[test]
fn a_bare_repository_exits_2() {
    let p = Project::new("- [ ] One\n");
    let bare = tempfile::tempdir().unwrap();
    git2::Repository::init_bare(bare.path()).unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor_in(bare.path(), &p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    let path = bare.path().display().to_string();
    assert_eq!(
        check(&err, "work tree"),
        (
            format!("✗ work tree: `{path}` is a bare repository").as_str(),
            format!("    fix: run kern in a clone with a checkout: `git clone {path} <folder>`")
                .as_str()
        )
    );
    assert_eq!(
        check(&err, "SPEC.md").0,
        "- SPEC.md: skipped: no usable repository"
    );
}

#[test]
fn a_merge_in_progress_exits_2_with_how_to_finish_it() {
    let p = Project::new("- [ ] One\n");
    let head = git2::Repository::open(p.path())
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    std::fs::write(p.path().join(".git/MERGE_HEAD"), format!("{head}\n")).unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    let (line, fix) = check(&err, "git operation");
    assert!(
        line.starts_with("✗ git operation: ") && line.contains("a merge"),
        "{line}"
    );
    assert_eq!(
        fix,
        "    fix: finish it (`git commit`) or abort it (`git merge --abort`), then run kern again"
    );
}

#[test]
fn a_missing_git_identity_shows_the_git_config_fix() {
    let p = Project::new("- [ ] One\n");
    let mut config = git2::Repository::open(p.path()).unwrap().config().unwrap();
    config.remove("user.name").unwrap();
    config.remove("user.email").unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        check(&err, "git identity"),
        (
            "✗ git identity: git has no author identity (user.name, user.email)",
            r#"    fix: git config --global user.name "Your Name" && git config --global user.email you@example.com"#
        )
    );
}

#[test]
fn a_broken_prompt_override_is_named_with_file_and_line() {
    let p = Project::new("- [ ] One\n");
    p.write(
        ".kern/prompts/2_implement.md",
        "---\nmodel: opus\n---\nDo {TASK}.\nSee {DIF}.\n",
    );
    p.commit_all("a prompt override");
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    let (line, fix) = check(&err, "prompt templates");
    assert_eq!(
        line,
        format!(
            "✗ prompt templates: `{}/.kern/prompts/2_implement.md:5`: unknown placeholder `{{DIF}}`",
            top(&p)
        )
    );
    assert!(fix.starts_with("    fix: use one of {TASK}, "), "{fix}");

    p.write(
        ".kern/prompts/2_implement.md",
        "---\nmodel: opus\n---\nDo {TASK}.\n",
    );
    p.commit_all("the override fixed");
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "prompt templates").0,
        "✓ prompt templates: overridden by `.kern/prompts/2_implement.md`"
    );
}

#[test]
fn every_broken_prompt_override_is_named_at_once() {
    // Three mistakes in `.kern/prompts/`: one doctor names them all, not one a run.
    let p = Project::new("- [ ] One\n");
    p.write(".kern/prompts/1_research.md", "Look at {TASK}.\n{NOPE}\n");
    p.write(
        ".kern/prompts/3_commit.md",
        "---\nmodel opus\n---\nReview {TASK}.\n",
    );
    p.write(".kern/prompts/research.md", "Look at {TASK}.\n");
    p.commit_all("prompt overrides");
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    let failed: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("✗ prompt templates: "))
        .collect();
    let top = top(&p);
    assert_eq!(failed.len(), 3, "{err}");
    assert!(
        failed[0].contains(&format!(
            "`{top}/.kern/prompts/1_research.md:2`: unknown placeholder `{{NOPE}}`"
        )),
        "{err}"
    );
    assert!(failed[1].contains("3_commit.md"), "{err}");
    assert!(
        failed[1].contains("`model opus` in the front matter"),
        "{err}"
    );
    assert!(
        failed[2].contains("research.md`: kern reads no template of this name"),
        "{err}"
    );
}

#[test]
fn an_unwritable_state_root_exits_2() {
    let p = Project::new("- [ ] One\n");
    let file = p.outside.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let cmd_root = file.join("state");
    let out = p
        .run(&["doctor"])
        .env("PATH", bin.path())
        .env("KERN_AGENT", "claude")
        .env("KERN_STATE_DIR", &cmd_root)
        .expect(2);
    let err = &out.stderr;
    assert_eq!(
        check(err, "state folder"),
        (
            format!(
                "✗ state folder: `{}` cannot be created: `{}` is not a folder",
                cmd_root.display(),
                file.display()
            )
            .as_str(),
            "    fix: set KERN_STATE_DIR to a writable folder"
        )
    );
}

/// The stage runner tells the run's lock where a stage stands (`StageWatch`): waiting out a
/// usage limit, then running again, is what `kern status` reads from it.
#[test]
fn the_lock_says_a_stage_waits_for_its_usage_limit_then_runs_again() {
    let p = Project::new("- [ ] One\n");
    p.scenario(&json!({"default": {"implement": [
        {"error": "usage_limit", "resets_in_secs": 2},
        {"write": {"out.txt": "done\n"}}
    ]}}));
    let mut run = p
        .run(&["1", "0"])
        .env("KERN_RESET_MARGIN", "0")
        .spawn_with(Stdio::null(), Stdio::null());
    let lock = lock_path(&p);
    let deadline = Instant::now() + Duration::from_secs(60);
    let phase =
        || kern::testing::state::lock::RunLock::inspect(&lock).map(|(r, _)| r.phase.to_string());
    while phase().as_deref() != Some("implement: waiting for usage limit reset") {
        assert!(
            Instant::now() < deadline,
            "the lock never said the stage waits: {:?}",
            phase()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(run.wait().unwrap().success());
    assert_eq!(p.read("out.txt"), "done\n");
}

#[test]
fn a_live_lock_holder_is_shown_with_how_to_stop_it() {
    let p = Project::new("- [ ] One\n");
    p.scenario(&json!({"default": {"research": {"sleep_before_ms": 120_000}}}));
    let mut run = p.run(&["1", "0"]).spawn_with(Stdio::null(), Stdio::null());
    let lock = lock_path(&p);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Wait for the last rewrite of the record before the agent's long sleep (the agent's
    // group): `RunLock::inspect` reads a record being rewritten as no lock at all.
    while !kern::testing::state::lock::RunLock::inspect(&lock)
        .is_some_and(|(r, _)| r.phase.to_string() == "research" && r.agent_group.is_some())
    {
        assert!(Instant::now() < deadline, "the run never reached research");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bin = Bin::new();
    let wrapper = p.outside.path().join("agent.sh");
    let (code, err) = doctor(&p, &bin, &format!("program:{}", wrapper.display()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(130));

    assert_eq!(code, Some(2), "{err}");
    let (line, fix) = check(&err, "run lock");
    let pid = run.id();
    assert!(
        line.starts_with(&format!(
            "✗ run lock: held by another kern: pid {pid} on host "
        )) && line.ends_with(", phase research"),
        "{line}"
    );
    assert_eq!(
        fix,
        format!(
            "    fix: wait for that run to end, or stop it with `kill -INT {pid}` (its task resumes on the next run)"
        )
    );
}

#[test]
fn a_stale_lock_passes_and_says_the_next_run_takes_it_over() {
    let p = Project::new("- [ ] One\n");
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let record = json!({
        "pid": gone.id(),
        "start_time": 1,
        "host": nix::unistd::gethostname().unwrap().to_string_lossy(),
        "started_at": "2025-01-01T00:00:00Z",
        "argv": ["kern"],
        "phase": "implement",
        "agent_group": null
    });
    let lock = lock_path(&p);
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, record.to_string()).unwrap();
    let bin = Bin::new();
    bin.claude(true);
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        check(&err, "run lock").0,
        format!(
            "✓ run lock: stale lock of pid {} (not running): the next run takes it over",
            gone.id()
        )
    );
    assert!(lock.exists(), "doctor never touches a lock");
}

#[test]
fn agent_and_other_problems_together_exit_2() {
    let p = Project::new("- [ x] One\n");
    let bin = Bin::new();
    let (code, err) = doctor(&p, &bin, "claude");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("✗ agent: `claude` not found on PATH"), "{err}");
    assert!(err.contains("doctor found 2 problems"), "{err}");
}
