//! Programs from outside Rust that some tests run, and what happens when one is missing.
//!
//! - **Registry tools** (prettier, husky, lint-staged, commitlint from npm; mdformat,
//!   pre-commit and its fixers from PyPI): the tests install them themselves, pinned, into a
//!   cache outside the repository through `.ci/install-test-tools` (once per test process; a
//!   warm cache touches no network), exactly as the real-agent tiers install the agent CLIs.
//!   Tests run them with [`RegistryTools::apply`], so the pinned versions are used whatever
//!   else is on the machine's `PATH`. A failed install fails the test with the installer's
//!   message; the callers keep their `KERN_SKIP_…=1` switches.
//! - **System packages** (tmux, jq, git-lfs, gnupg, ssh-keygen, chromium, bubblewrap, socat),
//!   which only the machine's package manager installs: [`system_tool`]. `.ci/run` installs
//!   every one and sets `KERN_REQUIRE_TEST_TOOLS=1`, under which a missing one fails its test with
//!   the install command. Elsewhere (a newcomer's first `cargo test`) the test is skipped
//!   with one line on the terminal that names the program and the command to install it.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where the registry tools are: the folders to put in front of `PATH`, and the npm prefix
/// they were installed under (commitlint finds its shared config through it, as it would in a
/// global install).
#[derive(Debug)]
pub(crate) struct RegistryTools {
    path: OsString,
    npm_prefix: PathBuf,
}

impl RegistryTools {
    /// Sets `PATH` and `NPM_CONFIG_PREFIX` of `cmd` so that it (and every hook or tool it
    /// starts) runs the pinned tools.
    pub(crate) fn apply(&self, cmd: &mut Command) {
        cmd.env("PATH", &self.path)
            .env("NPM_CONFIG_PREFIX", &self.npm_prefix);
    }

    /// The npm prefix the pinned tools were installed under.
    pub(crate) fn npm_prefix(&self) -> &Path {
        &self.npm_prefix
    }

    /// The folders the pinned tools are in, first on the returned `PATH`.
    pub(crate) fn path(&self) -> &OsString {
        &self.path
    }
}

/// The pinned registry tools, installed on first use (`.ci/install-test-tools`). Panics with
/// the installer's message when it fails.
pub(crate) fn registry_tools() -> &'static RegistryTools {
    static TOOLS: OnceLock<Result<RegistryTools, String>> = OnceLock::new();
    match TOOLS.get_or_init(install_registry_tools) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

fn install_registry_tools() -> Result<RegistryTools, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-test-tools");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some(dirs) = stdout.lines().last().filter(|_| out.status.success()) else {
        return Err(format!(
            "the formatter and hook-manager tests need prettier, husky, lint-staged, commitlint \
             (npm) and mdformat, pre-commit (PyPI); installing them failed:\n{stderr}\n\
             Run `.ci/install-test-tools` to see why, or set KERN_SKIP_FORMATTERS=1 and \
             KERN_SKIP_HOOK_MANAGERS=1 to skip these tests."
        ));
    };
    let mut path = OsString::from(dirs);
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    let npm_prefix = dirs
        .split(':')
        .next()
        .and_then(|bin| Path::new(bin).parent())
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("`{}` printed no folder: {stdout}", script.display()))?;
    Ok(RegistryTools { path, npm_prefix })
}

/// True when `tool` (from the system package `package`) runs. When it does not: false if
/// `skip_var=1` asks to skip; a failure naming the install command under
/// `KERN_REQUIRE_TEST_TOOLS=1` (`.ci/run`); otherwise false, after a line on the terminal
/// that says which test is skipped and how to install what it needs.
pub(crate) fn system_tool(tool: &str, package: &str, skip_var: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if found {
        return true;
    }
    let install = format!("apt-get install {package}");
    if std::env::var(skip_var).is_ok_and(|v| v == "1") {
        eprintln!("skipped: `{tool}` is missing and {skip_var}=1");
        return false;
    }
    assert!(
        !std::env::var("KERN_REQUIRE_TEST_TOOLS").is_ok_and(|v| v == "1"),
        "`{tool}` is not installed — `{install}` (.ci/run does), or set {skip_var}=1 to skip this test"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    // Straight to the terminal: the test harness captures eprintln! of a passing test.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: `{tool}` is not installed — `{install}` runs it (.ci/run installs it \
         and requires it)"
    );
    false
}
