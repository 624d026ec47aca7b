//! The agent kinds kern can run, as one closed enum.

use std::path::PathBuf;
use std::str::FromStr;

/// Which agent CLI runs the stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`claude`), the default.
    Claude,
    /// OpenAI Codex (`codex exec`).
    Codex,
    /// Any executable; see DESIGN.md section 4 for its environment.
    Program(PathBuf),
}

impl FromStr for Agent {
    type Err = String;

    fn from_str(text: &str) -> Result<Agent, String> {
        match text {
            "claude" => Ok(Agent::Claude),
            "codex" => Ok(Agent::Codex),
            _ => match text.strip_prefix("program:") {
                Some(path) if !path.is_empty() => Ok(Agent::Program(PathBuf::from(path))),
                _ => Err(format!(
                    "--agent: unknown agent `{text}` — use claude, codex or program:<path>"
                )),
            },
        }
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Agent::Claude => f.write_str("claude"),
            Agent::Codex => f.write_str("codex"),
            Agent::Program(path) => write!(f, "program:{}", path.display()),
        }
    }
}

/// One process to run for one stage: everything the supervisor needs, nothing it must decide.
/// The supervisor knows nothing about stages or agents; it runs exactly this.
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
}
