//! What the supervisor runs: one process, described completely ([`Invocation`]), and the time
//! limits it runs under ([`Limits`]). The agent layer builds invocations; the supervisor only
//! runs them, so it knows nothing about stages or agents. An invocation may name the fence it
//! runs in; the supervisor then asks the sandbox for the command that runs it so.

use std::path::PathBuf;
use std::time::Duration;

/// One process to run for one stage: everything the supervisor needs, nothing it must decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program (a name looked up on PATH, or a path).
    pub program: PathBuf,
    /// The arguments, exactly (argv\[1..\]).
    pub args: Vec<String>,
    /// Variables added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// The working folder (the repository's top folder).
    pub cwd: PathBuf,
    /// The prompt, written to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// The fence it runs in (`None`: unfenced, with kern's whole environment).
    pub fence: Option<crate::sandbox::Fence>,
}

/// The time limits of one run of an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest it may run in all.
    pub stage_timeout: Duration,
    /// Longest it may print no line.
    pub idle_timeout: Duration,
    /// How long a process that printed its result event may take to exit.
    pub result_grace: Duration,
}
