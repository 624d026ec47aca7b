//! The fence (DESIGN.md §19): every agent process, and whatever runs the agent's code (the
//! check, `run` must-haves, the commit's hooks), runs inside a fence kern sets up itself, on by
//! default — writes only in the work tree (its `.git` read-only; for research and review a
//! private layer over it, thrown away), a private TMPDIR, its own empty `/tmp` and the agent's
//! own folders; the person's secrets absent; no network but kern's proxy to the
//! allowed hosts; secret variables not passed; only its own processes visible.
//!
//! The one decision a reader must know: this floor describes and builds the fence; it never
//! decides *when* to fence. [`fence::describe`] is pure (what is writable, hidden, allowed);
//! [`session::Session`] turns a description and a command into the command that runs fenced
//! (on Linux kern re-executes itself as a tiny init, `kern __fence`, that makes the user, mount,
//! network and PID namespaces, applies Landlock beneath and starts the command — `linux/`;
//! on macOS `sandbox-exec` with a Seatbelt profile — `macos.rs`), runs the egress proxy for
//! it (`proxy.rs`) and reads back what was denied (`report.rs`). The supervisor asks a session
//! for the command and knows nothing of namespaces; the pipeline says who runs and with what.
//!
//! Where the fence cannot be made, [`preflight::check`] says why and how out, and kern stops
//! before any agent (exit 2): never a silent run without it.

pub(crate) mod env;
pub(crate) mod fence;
pub(crate) mod hosts;
#[cfg(target_os = "linux")]
pub(crate) mod linux;
pub(crate) mod macos;
pub(crate) mod plan;
pub(crate) mod preflight;
pub(crate) mod proxy;
pub(crate) mod report;
pub(crate) mod secrets;
pub(crate) mod session;

use std::fmt;
use std::str::FromStr;

pub(crate) use fence::{Fence, FenceInput, describe};
pub(crate) use hosts::{AgentKind, HostRule};
pub(crate) use report::{Denial, FenceReport};

/// `--sandbox`: whose fence, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// kern's own fence around every fenced process (the default).
    Kern,
    /// No fence of kern's; Claude Code's own sandbox for the implement stage's shell commands
    /// (what `--sandbox` meant before).
    Agent,
    /// No fence at all: the agent runs with the person's whole account.
    Off,
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Mode, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "kern" | "" | "true" | "1" | "yes" | "on" => Ok(Mode::Kern),
            "agent" => Ok(Mode::Agent),
            "off" => Ok(Mode::Off),
            "false" | "0" | "no" => Err(format!(
                "`{text}`: --sandbox is no longer a switch — it chooses the fence: kern (the default, kern's own fence), agent (Claude Code's own sandbox, what --sandbox meant before) or off (no fence); leave it out for kern's fence, or write --sandbox=off to run unfenced knowingly"
            )),
            _ => Err(format!(
                "`{text}` is not a sandbox — use kern (the default), agent or off"
            )),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Kern => "kern",
            Mode::Agent => "agent",
            Mode::Off => "off",
        })
    }
}

/// `--sandbox-network`: what a fenced process may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Only kern's proxy, which lets through the listed hosts (the default).
    List,
    /// Nothing outside the fence.
    None,
    /// The machine's network, unfiltered.
    Open,
}

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Network, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "list" => Ok(Network::List),
            "none" => Ok(Network::None),
            "open" => Ok(Network::Open),
            _ => Err(format!(
                "`{text}` is not a network — use list (the default: the allowed hosts only), none or open"
            )),
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Network::List => "list",
            Network::None => "none",
            Network::Open => "open",
        })
    }
}

/// `[sandbox] checks`: where the check, `run` must-haves and the commit's hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChecksPlace {
    /// In the fence of the implement stage (the default): they run code the agent wrote.
    Inside,
    /// Unfenced, as before: the person's documented way out.
    Outside,
}

/// Who runs inside a fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "who")]
pub enum Who {
    /// An agent running a stage.
    Agent {
        /// Its kind: its own folders, key and API follow from it.
        kind: AgentKind,
    },
    /// The check or a `run` must-have.
    Check,
    /// A git hook around kern's commit.
    Hook,
}

impl Who {
    /// The agent kind whose folders, key and API the fence allows ([`AgentKind::None`] for
    /// checks and hooks).
    pub fn agent_kind(self) -> AgentKind {
        match self {
            Who::Agent { kind } => kind,
            Who::Check | Who::Hook => AgentKind::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_old_and_new_spellings() {
        let cases: &[(&str, Result<Mode, &str>)] = &[
            ("kern", Ok(Mode::Kern)),
            ("KERN", Ok(Mode::Kern)),
            ("true", Ok(Mode::Kern)),
            ("1", Ok(Mode::Kern)),
            ("agent", Ok(Mode::Agent)),
            ("off", Ok(Mode::Off)),
            ("false", Err("--sandbox is no longer a switch")),
            ("0", Err("write --sandbox=off")),
            ("bwrap", Err("use kern (the default), agent or off")),
        ];
        for (text, want) in cases {
            match (text.parse::<Mode>(), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text}"),
                (Err(got), Err(part)) => assert!(got.contains(part), "{text}: {got}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
        for network in ["list", "none", "open"] {
            assert_eq!(network.parse::<Network>().unwrap().to_string(), network);
        }
        assert!("all".parse::<Network>().is_err());
    }
}
