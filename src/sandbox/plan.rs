//! What `kern __fence` is told to do (PURE to build): the mounts in the order they are made,
//! the network inside, the command and where it runs. kern writes it as JSON into the
//! session's private folder; the init reads it before it makes a single namespace.
//!
//! The one decision a reader must know: mounts are made shallow to deep, so a deeper path's
//! treatment wins over its parent's (see `fence.rs`); among paths of one depth the order is
//! the description's. Paths that do not exist are left out by the caller ([`build`] takes a
//! predicate), so the plan holds only what can be mounted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Fence;
use super::Network;

/// The mount that gives one path its treatment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub(crate) enum MountOp {
    /// `target` bound onto itself, writable or read-only.
    Bind {
        /// The path.
        target: PathBuf,
        /// Writable (else read-only).
        writable: bool,
    },
    /// An empty, read-only folder over `target`, holding empty placeholders of what it hid
    /// (so that opening one is seen and recorded).
    HideDir {
        /// The hidden folder.
        target: PathBuf,
    },
    /// An empty read-only file over `target` (a copy of `placeholder`).
    HideFile {
        /// The hidden file (or socket).
        target: PathBuf,
        /// The empty file kern made for it.
        placeholder: PathBuf,
    },
    /// A private writable layer over `target`, its writes in `upper` (thrown away).
    Overlay {
        /// The cache folder.
        target: PathBuf,
        /// Where the writes go.
        upper: PathBuf,
        /// The layer's work folder (same file system as `upper`).
        work: PathBuf,
        /// `upper` and `work` are in a tmpfs the init mounts on their folder first: the session's
        /// own folder is inside `target` (a cache folder that holds it), and a layer may not overlap what it covers.
        memory: bool,
    },
    /// A fresh writable tmpfs over a machine's temporary folder (`/tmp`): what was there is
    /// out of sight, and the deeper mounts inside it find their mount points made.
    Temp {
        /// The temporary folder.
        target: PathBuf,
    },
    /// `source` bound writable at `target` (the private TMPDIR onto itself).
    Private {
        /// The path.
        target: PathBuf,
    },
}

impl MountOp {
    /// The path the mount is made at.
    pub(crate) fn target(&self) -> &Path {
        match self {
            MountOp::Bind { target, .. }
            | MountOp::HideDir { target }
            | MountOp::HideFile { target, .. }
            | MountOp::Overlay { target, .. }
            | MountOp::Temp { target }
            | MountOp::Private { target } => target,
        }
    }

    /// True when the fenced process may write there.
    pub(crate) fn writable(&self) -> bool {
        match self {
            MountOp::Bind { writable, .. } => *writable,
            MountOp::Overlay { .. } | MountOp::Temp { .. } | MountOp::Private { .. } => true,
            MountOp::HideDir { .. } | MountOp::HideFile { .. } => false,
        }
    }
}

/// The network inside the fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum NetPlan {
    /// The machine's network (no network namespace).
    Open,
    /// A network of its own with only loopback, nothing listening.
    None,
    /// A network of its own where `proxy_port` on loopback is kern's proxy and each of
    /// `forwards` is the same port of the machine's loopback, both reached through `socket`.
    List {
        /// The proxy's port inside.
        proxy_port: u16,
        /// Loopback ports forwarded to the machine's (allowed local services).
        forwards: Vec<u16>,
        /// kern's proxy socket.
        socket: PathBuf,
    },
}

/// Everything `kern __fence` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// The program (an absolute path).
    pub program: PathBuf,
    /// Its arguments (argv\[1..\]).
    pub args: Vec<String>,
    /// Its working folder.
    pub cwd: PathBuf,
    /// The mounts, in order.
    pub mounts: Vec<MountOp>,
    /// The network.
    pub network: NetPlan,
    /// Where the fenced process may write, for Landlock beneath the mounts.
    pub writable: Vec<PathBuf>,
    /// Whether Landlock is applied: not for Codex, whose own sandbox (bubblewrap) mounts, which
    /// a Landlock domain forbids; the namespaces hold the fence alone there.
    pub landlock: bool,
    /// Where the init writes what it denied (JSON lines).
    pub denials: PathBuf,
    /// Where the init writes why it could not make the fence.
    pub failure: PathBuf,
    /// An inotify descriptor kern lends the init for its watch of the placeholders (inherited
    /// under this number); `None`: the init makes its own. Closing the last descriptor of an
    /// inotify instance that watched files waits a grace period of the kernel's (about 15 ms),
    /// so the instances live in kern for the whole run and a stage never waits for one.
    #[serde(default)]
    pub watch_fd: Option<i32>,
}

/// The session's own paths a plan refers to.
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    /// The private TMPDIR.
    pub tmp: PathBuf,
    /// Folder of the empty placeholders of hidden files.
    pub placeholders: PathBuf,
    /// Folder of the private layers' writes.
    pub layers: PathBuf,
    /// kern's proxy socket.
    pub socket: PathBuf,
    /// The denials log.
    pub denials: PathBuf,
    /// The failure file.
    pub failure: PathBuf,
}

/// What the machine has at a path, as far as the plan cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing.
    Missing,
    /// A folder.
    Dir,
    /// Anything else (a file, a socket).
    Other,
}

/// The port of kern's proxy inside the fence: 3128 (the common proxy port) unless a forwarded
/// local service has it.
pub(crate) fn proxy_port(forwards: &[u16]) -> u16 {
    (3128..u16::MAX)
        .find(|p| !forwards.contains(p))
        .unwrap_or(3127)
}

/// The plan that runs `program args` in `cwd` inside `fence`; `found` says what is at a path.
pub(crate) fn build(
    fence: &Fence,
    program: &Path,
    args: &[String],
    cwd: &Path,
    scratch: &Scratch,
    found: &dyn Fn(&Path) -> Found,
) -> Plan {
    let mut mounts: Vec<MountOp> = Vec::new();
    let mut files = 0usize;
    let mut layers = 0usize;
    // Every path once, with the treatment of its last mention (the deeper lists come later).
    for path in &fence.hidden {
        match found(path) {
            Found::Missing => {}
            Found::Dir => mounts.push(MountOp::HideDir {
                target: path.clone(),
            }),
            Found::Other => {
                files += 1;
                mounts.push(MountOp::HideFile {
                    target: path.clone(),
                    placeholder: scratch.placeholders.join(files.to_string()),
                });
            }
        }
    }
    for path in &fence.temp {
        if found(path) == Found::Dir {
            mounts.push(MountOp::Temp {
                target: path.clone(),
            });
        }
    }
    for path in &fence.private {
        if found(path) == Found::Dir {
            layers += 1;
            let base = scratch.layers.join(layers.to_string());
            mounts.push(MountOp::Overlay {
                target: path.clone(),
                upper: base.join("upper"),
                work: base.join("work"),
                memory: base.starts_with(path),
            });
        }
    }
    for path in &fence.shown {
        if found(path) != Found::Missing {
            mounts.push(MountOp::Bind {
                target: path.clone(),
                writable: false,
            });
        }
    }
    for path in &fence.writable {
        if found(path) != Found::Missing {
            mounts.push(MountOp::Bind {
                target: path.clone(),
                writable: true,
            });
        }
    }
    for path in &fence.read_only {
        if found(path) != Found::Missing {
            mounts.push(MountOp::Bind {
                target: path.clone(),
                writable: false,
            });
        }
    }
    mounts.push(MountOp::Private {
        target: scratch.tmp.clone(),
    });
    // One treatment per path: the last one given wins (a cache the person made writable is
    // a bind, not a layer).
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut unique: Vec<MountOp> = Vec::new();
    for op in mounts.into_iter().rev() {
        if !seen.iter().any(|p| p == op.target()) {
            seen.push(op.target().to_path_buf());
            unique.push(op);
        }
    }
    unique.reverse();
    unique.sort_by_key(|op| op.target().components().count());

    let forwards: Vec<u16> = fence
        .hosts
        .iter()
        .filter_map(super::HostRule::loopback)
        .collect();
    let network = match fence.network {
        Network::Open => NetPlan::Open,
        Network::None => NetPlan::None,
        Network::List => NetPlan::List {
            proxy_port: proxy_port(&forwards),
            forwards,
            socket: scratch.socket.clone(),
        },
    };
    let mut writable: Vec<PathBuf> = unique
        .iter()
        .filter(|op| op.writable())
        .map(|op| op.target().to_path_buf())
        .collect();
    writable.sort();
    Plan {
        program: program.to_path_buf(),
        args: args.to_vec(),
        cwd: cwd.to_path_buf(),
        mounts: unique,
        network,
        writable,
        landlock: fence.who
            != super::Who::Agent {
                kind: super::AgentKind::Codex,
            },
        denials: scratch.denials.clone(),
        failure: scratch.failure.clone(),
        watch_fd: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{AgentKind, Who};

    fn fence() -> Fence {
        Fence {
            who: Who::Agent {
                kind: AgentKind::Claude,
            },
            network: Network::List,
            writable: vec![
                "/s/p/b/jobs/t/tree".into(),
                "/h/.claude".into(),
                "/h/.cache/x".into(),
            ],
            read_only: vec!["/s/p/b/jobs/t/tree/.git".into()],
            private: vec!["/h/.cache".into(), "/h/.cache/x".into(), "/h/.npm".into()],
            temp: vec!["/tmp".into(), "/dev/shm".into()],
            hidden: vec![
                "/h/.ssh".into(),
                "/h/.netrc".into(),
                "/s".into(),
                "/h/.aws".into(),
                "/tmp/tmux-0".into(),
                "/tmp/home/.ssh".into(),
            ],
            shown: vec!["/s/p/b/jobs/t".into(), "/tmp/home".into()],
            hosts: vec![
                "api.anthropic.com".parse().unwrap(),
                "127.0.0.1:3128".parse().unwrap(),
            ],
            pass_env: vec![],
        }
    }

    fn scratch() -> Scratch {
        Scratch {
            tmp: "/tmp/f/tmp".into(),
            placeholders: "/tmp/f/ph".into(),
            layers: "/tmp/f/layers".into(),
            socket: "/tmp/f/proxy.sock".into(),
            denials: "/tmp/f/denials".into(),
            failure: "/tmp/f/failure".into(),
        }
    }

    #[test]
    fn mounts_go_shallow_to_deep_one_per_path_and_skip_what_is_missing() {
        let found = |p: &Path| match p.to_str().unwrap() {
            "/h/.aws" => Found::Missing,
            "/h/.netrc" => Found::Other,
            _ => Found::Dir,
        };
        let plan = build(
            &fence(),
            Path::new("/usr/bin/claude"),
            &["-p".into()],
            Path::new("/s/p/b/jobs/t/tree"),
            &scratch(),
            &found,
        );
        let ops: Vec<String> = plan
            .mounts
            .iter()
            .map(|op| match op {
                MountOp::Bind { target, writable } => {
                    format!(
                        "{} {}",
                        if *writable { "rw" } else { "ro" },
                        target.display()
                    )
                }
                MountOp::HideDir { target } => format!("hide {}", target.display()),
                MountOp::HideFile {
                    target,
                    placeholder,
                } => format!("hide {} ({})", target.display(), placeholder.display()),
                MountOp::Overlay {
                    target,
                    upper,
                    memory,
                    ..
                } => format!(
                    "layer {} ({}{})",
                    target.display(),
                    upper.display(),
                    if *memory { ", in memory" } else { "" }
                ),
                MountOp::Temp { target } => format!("temp {}", target.display()),
                MountOp::Private { target } => format!("tmp {}", target.display()),
            })
            .collect();
        assert_eq!(
            ops,
            [
                "hide /s",
                "temp /tmp",
                "hide /h/.ssh",
                "hide /h/.netrc (/tmp/f/ph/1)",
                "hide /tmp/tmux-0",
                "temp /dev/shm",
                "layer /h/.cache (/tmp/f/layers/1/upper)",
                "layer /h/.npm (/tmp/f/layers/3/upper)",
                "ro /tmp/home",
                "rw /h/.claude",
                "hide /tmp/home/.ssh",
                "rw /h/.cache/x",
                "tmp /tmp/f/tmp",
                "ro /s/p/b/jobs/t",
                "rw /s/p/b/jobs/t/tree",
                "ro /s/p/b/jobs/t/tree/.git",
            ]
        );
        assert_eq!(
            plan.network,
            NetPlan::List {
                proxy_port: 3129,
                forwards: vec![3128],
                socket: "/tmp/f/proxy.sock".into()
            }
        );
        assert_eq!(
            plan.writable,
            [
                PathBuf::from("/dev/shm"),
                "/h/.cache".into(),
                "/h/.cache/x".into(),
                "/h/.claude".into(),
                "/h/.npm".into(),
                "/s/p/b/jobs/t/tree".into(),
                "/tmp".into(),
                "/tmp/f/tmp".into(),
            ]
        );
    }
}
