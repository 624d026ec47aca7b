//! What a fence saw: the attempts it denied (what, and how often) and the variables it kept
//! back — `kern.sandbox` in every stage record, the morning report's list, the review's
//! prompt.
//!
//! The one decision a reader must know: a denial names a path or a host and counts repeats;
//! the list is bounded ([`MAX_DENIALS`] distinct ones, then only counted), so an agent that
//! loops on a refused connection cannot grow a record without bound. Which attempts can be
//! named at all is the fence's business (docs/safety.md says which are and which are not).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Mode, Network};

/// The most distinct denials a report keeps; more are counted in [`FenceReport::more`].
pub(crate) const MAX_DENIALS: usize = 100;

/// What kind of attempt was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DenialKind {
    /// A read of a hidden file.
    Read,
    /// A write outside the writable paths.
    Write,
    /// A connection to a host that is not allowed.
    Connect,
    /// A name lookup (DNS) from inside, where there is none.
    Resolve,
    /// A signal to a process outside the fenced tree.
    Signal,
}

/// One denied attempt, with how often it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// What was tried.
    pub kind: DenialKind,
    /// The path, `host:port` or pid.
    pub target: String,
    /// How many times.
    pub count: u32,
}

impl Denial {
    /// "tried to read ~/.ssh/id_ed25519", "tried to reach 203.0.113.5:443 (3 times)"; a path
    /// under `home` is written with `~`.
    pub fn sentence(&self, home: Option<&Path>) -> String {
        let target = match home {
            Some(home) if self.kind != DenialKind::Connect => {
                match Path::new(&self.target).strip_prefix(home) {
                    Ok(rest) if !home.as_os_str().is_empty() && home != Path::new("/") => {
                        format!("~/{}", rest.display())
                    }
                    _ => self.target.clone(),
                }
            }
            _ => self.target.clone(),
        };
        let verb = match self.kind {
            DenialKind::Read => "read",
            DenialKind::Write => "write",
            DenialKind::Connect => "reach",
            DenialKind::Resolve => "resolve",
            DenialKind::Signal => "signal",
        };
        let times = if self.count > 1 {
            format!(" ({} times)", self.count)
        } else {
            String::new()
        };
        format!("tried to {verb} {target}{times}")
    }
}

/// `kern.sandbox` of a stage record: how the stage was fenced and what was denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceReport {
    /// `kern`, `agent` or `off`.
    pub mode: Mode,
    /// The network, when kern fenced the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// The hosts kern's proxy let through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The denied attempts, each once with its count, in the order first seen.
    #[serde(default)]
    pub denied: Vec<Denial>,
    /// Denied attempts beyond [`MAX_DENIALS`] distinct ones: counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: u32,
    /// The environment variables kept from the process (their names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_dropped: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl FenceReport {
    /// The report of a stage run with `mode` and nothing denied (yet).
    pub fn new(mode: Mode) -> FenceReport {
        FenceReport {
            mode,
            network: None,
            hosts: Vec::new(),
            denied: Vec::new(),
            more: 0,
            env_dropped: Vec::new(),
        }
    }

    /// Counts one attempt of `kind` at `target`.
    pub(crate) fn deny(&mut self, kind: DenialKind, target: &str) {
        self.deny_times(kind, target, 1);
    }

    /// Counts `times` attempts of `kind` at `target`.
    pub(crate) fn deny_times(&mut self, kind: DenialKind, target: &str, times: u32) {
        if let Some(d) = self
            .denied
            .iter_mut()
            .find(|d| d.kind == kind && d.target == target)
        {
            d.count = d.count.saturating_add(times);
        } else if self.denied.len() < MAX_DENIALS {
            self.denied.push(Denial {
                kind,
                target: target.to_string(),
                count: times,
            });
        } else {
            self.more = self.more.saturating_add(times);
        }
    }

    /// Adds every denial of `other` (a try after a retry, the check after implement).
    pub(crate) fn absorb(&mut self, other: &FenceReport) {
        for d in &other.denied {
            self.deny_times(d.kind, &d.target, d.count);
        }
        self.more = self.more.saturating_add(other.more);
        for name in &other.env_dropped {
            if !self.env_dropped.contains(name) {
                self.env_dropped.push(name.clone());
            }
        }
    }

    /// How many attempts were denied in all.
    pub fn total(&self) -> u64 {
        self.denied.iter().map(|d| u64::from(d.count)).sum::<u64>() + u64::from(self.more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_counted_bounded_and_said() {
        let mut r = FenceReport::new(Mode::Kern);
        r.deny(DenialKind::Read, "/home/me/.ssh/id_ed25519");
        r.deny(DenialKind::Connect, "203.0.113.5:443");
        r.deny(DenialKind::Connect, "203.0.113.5:443");
        r.deny(DenialKind::Connect, "203.0.113.5:443");
        let home = Some(Path::new("/home/me"));
        let said: Vec<String> = r.denied.iter().map(|d| d.sentence(home)).collect();
        assert_eq!(
            said,
            [
                "tried to read ~/.ssh/id_ed25519",
                "tried to reach 203.0.113.5:443 (3 times)"
            ]
        );
        for i in 0..(MAX_DENIALS + 5) {
            r.deny(DenialKind::Write, &format!("/etc/x{i}"));
        }
        assert_eq!(r.denied.len(), MAX_DENIALS);
        assert_eq!(r.total(), 4 + MAX_DENIALS as u64 + 5);
        let signal = Denial {
            kind: DenialKind::Signal,
            target: "pid 4242".into(),
            count: 1,
        };
        assert_eq!(
            signal.sentence(Some(Path::new("/"))),
            "tried to signal pid 4242"
        );
    }

    #[test]
    fn the_record_shape_is_stable() {
        let mut r = FenceReport::new(Mode::Kern);
        r.network = Some(Network::List);
        r.hosts = vec!["api.anthropic.com".into()];
        r.deny(DenialKind::Resolve, "example.com");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({
                "mode": "kern",
                "network": "list",
                "hosts": ["api.anthropic.com"],
                "denied": [{"kind": "resolve", "target": "example.com", "count": 1}]
            })
        );
        let off = serde_json::to_value(FenceReport::new(Mode::Off)).unwrap();
        assert_eq!(off, serde_json::json!({"mode": "off", "denied": []}));
    }
}
