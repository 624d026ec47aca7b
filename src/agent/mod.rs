//! The agent kinds kern can run, as one closed enum, and how each is invoked for a stage.
//!
//! The one decision a reader must know: this layer only *describes* a process
//! ([`Invocation`]), *reads* what it printed ([`stream::StreamParser`]) and *judges* how it
//! ended ([`failure::classify`]); it never runs anything. The supervisor runs the invocation and feeds stdout lines to the parser, so that
//! every command line and every parse is testable without a process.

pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod codex_provider;
pub(crate) mod failure;
mod failure_class;
pub(crate) mod program;
pub(crate) mod reset_time;
pub(crate) mod stream;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::stage::Stage;
pub(crate) use stream::StreamFormat;

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
        Agent::from_flag("--agent", text)
    }
}

impl Agent {
    /// The agent `text` names, as the value of `flag` (for the error message).
    pub fn from_flag(flag: &str, text: &str) -> Result<Agent, String> {
        match text {
            "claude" => Ok(Agent::Claude),
            "codex" => Ok(Agent::Codex),
            _ => match text.strip_prefix("program:") {
                Some(path) if !path.is_empty() => Ok(Agent::Program(PathBuf::from(path))),
                _ => Err(format!(
                    "{flag}: unknown agent `{text}` — use claude, codex or program:<path>"
                )),
            },
        }
    }
}

/// An agent and the model it runs a stage with (`None`: the agent's own default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StageAgent {
    /// The agent.
    pub agent: Agent,
    /// Its model for the stage.
    pub model: Option<String>,
}

/// The agents a stage may run on: its own, and the one it moves to when its own hits a usage
/// limit that resets too late (`--fallback-agent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StageAgents {
    /// `--agent`, or `--review-agent` for the review stage.
    pub primary: StageAgent,
    /// `--fallback-agent`, unless it is the primary agent itself.
    pub fallback: Option<StageAgent>,
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

/// Everything the agent layer needs to describe one stage's process.
#[derive(Debug, Clone)]
pub struct InvocationRequest<'a> {
    /// The stage to run.
    pub stage: Stage,
    /// The model, already resolved by the caller (`--model`, else the template's `model:`);
    /// `None` lets the agent use its own default.
    pub model: Option<&'a str>,
    /// The rendered prompt; it goes to stdin, never into argv.
    pub prompt: Vec<u8>,
    /// The repository's top folder: the working folder of the process.
    pub cwd: &'a Path,
    /// Where the caller wrote the stage's JSON schema (Codex `--output-schema`, `KERN_SCHEMA`).
    pub schema_path: &'a Path,
    /// The state folder of this project and branch (`KERN_STATE_DIR`).
    pub state_dir: &'a Path,
    /// The task's title (`KERN_TASK`).
    pub task_title: &'a str,
    /// The most this stage may spend, in USD: Claude's `--max-budget-usd` (the caller passes
    /// what is left of `--max-cost`). Codex and programs have no such cap.
    pub max_budget_usd: Option<f64>,
    /// Run the implement stage's shell commands in Claude Code's OS sandbox
    /// (`claude::SANDBOX_SETTINGS`); other agents already sandbox (Codex) or decide themselves.
    pub sandbox: bool,
    /// Absolute paths the implement stage may not edit (SPEC.md and LEARNINGS.md): Claude's
    /// deny rules (`claude::protect_rules`). Codex has no per-file rule; kern's audit holds
    /// for every agent.
    pub protected: &'a [PathBuf],
}

impl Agent {
    /// The process that runs `req.stage` with this agent.
    pub fn invocation(&self, req: InvocationRequest<'_>) -> Invocation {
        let (args, env) = match self {
            Agent::Claude => {
                let options = claude::Options {
                    max_budget_usd: req.max_budget_usd,
                    sandbox: req.sandbox,
                    protected: req.protected,
                };
                (claude::args(req.stage, req.model, options), claude::env())
            }
            Agent::Codex => (
                codex::args(req.stage, req.model, req.cwd, req.schema_path),
                Vec::new(),
            ),
            Agent::Program(_) => (
                Vec::new(),
                program::env(req.stage, req.schema_path, req.state_dir, req.task_title),
            ),
        };
        Invocation {
            program: self.program(),
            args,
            env,
            cwd: req.cwd.to_path_buf(),
            stdin: req.prompt,
            fence: None,
        }
    }

    /// The executable: `claude` or `codex` (looked up on PATH), or the program's path.
    pub fn program(&self) -> PathBuf {
        match self {
            Agent::Claude => PathBuf::from("claude"),
            Agent::Codex => PathBuf::from("codex"),
            Agent::Program(path) => path.clone(),
        }
    }

    /// How this agent's stdout is to be read.
    pub fn stream_format(&self) -> StreamFormat {
        match self {
            Agent::Claude => StreamFormat::Claude,
            Agent::Codex => StreamFormat::Codex,
            Agent::Program(_) => StreamFormat::Detect,
        }
    }

    /// What the person must do to give the agent working credentials; the tail of every
    /// "not logged in" message.
    pub fn login_hint(&self) -> &'static str {
        match self {
            Agent::Claude => claude::LOGIN_HINT,
            Agent::Codex => codex::LOGIN_HINT,
            Agent::Program(_) => program::LOGIN_HINT,
        }
    }
}

pub use crate::supervisor::invocation::Invocation;

#[cfg(test)]
mod tests {
    use super::*;

    fn request(stage: Stage, model: Option<&str>) -> InvocationRequest<'_> {
        InvocationRequest {
            stage,
            model,
            prompt: b"the prompt\n".to_vec(),
            cwd: Path::new("/home/user/project"),
            schema_path: Path::new("/tmp/claude/kern/project/main/stage.schema.json"),
            state_dir: Path::new("/tmp/claude/kern/project/main"),
            task_title: "Write out-1.txt",
            max_budget_usd: None,
            sandbox: false,
            protected: &[],
        }
    }

    /// Each agent's argv is pinned by one table, beside the code that builds it
    /// (`claude::tests::argv_per_stage_is_exact`, `codex::tests::argv_per_stage_is_exact`,
    /// `program::tests`); here only what `invocation` adds: the program, the argv of the agent's
    /// own module, its environment, the folder and the prompt on stdin.
    #[test]
    fn every_agent_and_stage_is_invoked_through_its_own_table() {
        let cwd = Path::new("/home/user/project");
        let schema = Path::new("/tmp/claude/kern/project/main/stage.schema.json");
        let state = Path::new("/tmp/claude/kern/project/main");
        for stage in Stage::ALL {
            let options = claude::Options {
                max_budget_usd: None,
                sandbox: false,
                protected: &[],
            };
            let program = PathBuf::from("./agents/fake.sh");
            for (agent, args, env) in [
                (
                    Agent::Claude,
                    claude::args(stage, Some("sonnet"), options),
                    claude::env(),
                ),
                (
                    Agent::Codex,
                    codex::args(stage, Some("sonnet"), cwd, schema),
                    Vec::new(),
                ),
                // The model never reaches a program: it has no arguments.
                (
                    Agent::Program(program.clone()),
                    Vec::new(),
                    program::env(stage, schema, state, "Write out-1.txt"),
                ),
            ] {
                assert_eq!(
                    agent.invocation(request(stage, Some("sonnet"))),
                    Invocation {
                        program: agent.program(),
                        args,
                        env,
                        cwd: cwd.to_path_buf(),
                        stdin: b"the prompt\n".to_vec(),
                        fence: None,
                    },
                    "{agent} {stage}"
                );
            }
        }
    }

    #[test]
    fn the_prompt_is_never_in_argv() {
        let marker = "UNIQUE-PROMPT-MARKER";
        for agent in [
            Agent::Claude,
            Agent::Codex,
            Agent::Program(PathBuf::from("/bin/a")),
        ] {
            for stage in Stage::ALL {
                let mut req = request(stage, Some("m"));
                req.prompt = marker.as_bytes().to_vec();
                let inv = agent.invocation(req);
                assert!(
                    inv.args.iter().all(|a| !a.contains(marker)),
                    "{agent} {stage}"
                );
                assert_eq!(inv.stdin, marker.as_bytes(), "{agent} {stage}");
            }
        }
    }

    #[test]
    fn budget_sandbox_and_protected_files_reach_only_claude() {
        for stage in Stage::ALL {
            for agent in [Agent::Codex, Agent::Program(PathBuf::from("/bin/a"))] {
                let protected = [PathBuf::from("/p/SPEC.md")];
                let mut capped = request(stage, Some("m"));
                capped.max_budget_usd = Some(0.5);
                capped.sandbox = true;
                capped.protected = &protected;
                assert_eq!(
                    agent.invocation(capped),
                    agent.invocation(request(stage, Some("m"))),
                    "{agent} {stage}"
                );
            }
            let mut capped = request(stage, Some("m"));
            capped.max_budget_usd = Some(0.5);
            let args = Agent::Claude.invocation(capped).args;
            assert!(
                args.windows(2).any(|w| w == ["--max-budget-usd", "0.5"]),
                "{stage}: {args:?}"
            );
        }
    }

    #[test]
    fn formats_programs_and_hints() {
        let table = [
            (
                Agent::Claude,
                "claude",
                StreamFormat::Claude,
                "run `claude` once to log in, or set ANTHROPIC_API_KEY",
            ),
            (
                Agent::Codex,
                "codex",
                StreamFormat::Codex,
                "run `codex login` once, or set CODEX_API_KEY",
            ),
            (
                Agent::Program(PathBuf::from("/opt/agent")),
                "/opt/agent",
                StreamFormat::Detect,
                "see the agent program's own documentation for how to log in",
            ),
        ];
        for (agent, program, format, hint) in table {
            assert_eq!(agent.program(), PathBuf::from(program));
            assert_eq!(agent.stream_format(), format);
            assert_eq!(agent.login_hint(), hint);
        }
    }
}
