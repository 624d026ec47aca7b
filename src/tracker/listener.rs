//! What the tracker hears of a run (`--tracker github`): the run's events, answered with a
//! comment on the task's issue when the task is taken, skipped or blocked, and — with
//! `--remote` — a label naming the machine while its claim holds.
//!
//! Decisions a reader must know:
//! - The loop knows nothing of trackers: the events it emits for every listener carry the
//!   task's issue (from its Issue note), and [`asks`] — pure, table-tested — says what each
//!   means here. The teller hands every event to [`Tracker::on`] and tells what comes back.
//! - Each happening is said once: "taken" is said when the task is taken up and not again
//!   while it stays taken — a resumed task, a run killed and started again — because what kern
//!   last said on each issue is kept in the state folder (`tracker.json`, forgotten when the
//!   task is committed); a skip or a block is said each time it happens (the task was taken
//!   again in between).
//! - A failed call is one event ([`RunEvent::TrackerFailed`]) and one warning for the first of
//!   its kind; the run goes on. When only the person can mend it (`gh` missing, not logged
//!   in), the tracker stays quiet for the rest of the run instead of failing at every task.
//!   A label already gone is no failure.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::gh::{self, Gh, GhFailure};
use crate::event::{RunEvent, Told};
use crate::spec::{IssueRef, Quoted};

/// GitHub's longest label name.
const LABEL_MAX: usize = 50;

/// What kern says on an issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Said {
    /// The task was taken up.
    Taken,
    /// The task was skipped; it comes back later.
    Skipped,
    /// The task was blocked `[!]`.
    Blocked,
}

impl Said {
    fn name(self) -> &'static str {
        match self {
            Said::Taken => "taken",
            Said::Skipped => "skipped",
            Said::Blocked => "blocked",
        }
    }
}

/// One thing the tracker is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A comment on the issue.
    Comment {
        /// The issue.
        issue: IssueRef,
        /// What happened.
        said: Said,
        /// The comment's text (markdown).
        text: String,
    },
    /// The label goes on the issue.
    Label {
        /// The issue.
        issue: IssueRef,
        /// The label.
        label: String,
    },
    /// The label comes off the issue.
    Unlabel {
        /// The issue.
        issue: IssueRef,
        /// The label.
        label: String,
    },
}

impl Ask {
    fn issue(&self) -> &IssueRef {
        match self {
            Ask::Comment { issue, .. } | Ask::Label { issue, .. } | Ask::Unlabel { issue, .. } => {
                issue
            }
        }
    }

    /// What it is, as the person reads it: `comment (taken)`, `label kern:builder`.
    fn what(&self) -> String {
        match self {
            Ask::Comment { said, .. } => format!("comment ({})", said.name()),
            Ask::Label { label, .. } => format!("label `{label}`"),
            Ask::Unlabel { label, .. } => format!("taking off the label `{label}`"),
        }
    }

    /// What was done, as the person reads it: `commented (taken) on`, `labelled … on`.
    fn done(&self) -> String {
        match self {
            Ask::Comment { said, .. } => format!("commented ({}) on", said.name()),
            Ask::Label { label, .. } => format!("labelled `{label}`:"),
            Ask::Unlabel { label, .. } => format!("took the label `{label}` off"),
        }
    }
}

/// The label that says the machine `host` holds a task's claim: `kern:<host>`, at most
/// [`LABEL_MAX`] characters.
pub(crate) fn label_for(host: &str) -> String {
    let host: String = host
        .chars()
        .filter(|c| !c.is_control() && *c != ',')
        .collect();
    crate::text::truncate(&format!("kern:{}", host.trim()), LABEL_MAX)
}

/// What the tracker is asked when it hears `event`, this machine's label being `label`.
pub(crate) fn asks(event: &RunEvent, label: &str) -> Vec<Ask> {
    let on = |issue: &Option<String>| issue.as_deref().and_then(IssueRef::parse);
    let comment = |issue: IssueRef, said: Said, text: String| Ask::Comment { issue, said, text };
    match event {
        RunEvent::Told(Told::TaskSelected { task, issue, .. }) => on(issue)
            .map(|i| comment(i, Said::Taken, taken_text(task)))
            .into_iter()
            .collect(),
        RunEvent::Skipped {
            task,
            reason,
            issue,
        } => on(issue)
            .map(|i| comment(i, Said::Skipped, skipped_text(task, reason)))
            .into_iter()
            .collect(),
        RunEvent::Blocked {
            task,
            why,
            issue,
            note,
            ..
        } => on(issue)
            .map(|i| {
                let note = if note.trim().is_empty() { why } else { note };
                comment(i, Said::Blocked, blocked_text(task, note))
            })
            .into_iter()
            .collect(),
        RunEvent::Told(Told::Claimed { issue, .. }) => on(issue)
            .map(|issue| Ask::Label {
                issue,
                label: label.to_string(),
            })
            .into_iter()
            .collect(),
        RunEvent::Told(Told::TookOver {
            issue, from_host, ..
        }) => {
            let Some(issue) = on(issue) else {
                return Vec::new();
            };
            let mut out = vec![Ask::Label {
                issue: issue.clone(),
                label: label.to_string(),
            }];
            if let Some(theirs) = from_host.as_deref().map(label_for)
                && theirs != label
            {
                out.push(Ask::Unlabel {
                    issue,
                    label: theirs,
                });
            }
            out
        }
        RunEvent::Told(
            Told::Landed { issue, .. }
            | Told::Released { issue, .. }
            | Told::ClaimLost { issue, .. },
        ) => on(issue)
            .map(|issue| Ask::Unlabel {
                issue,
                label: label.to_string(),
            })
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// The comment on an issue whose task kern took up.
fn taken_text(task: &str) -> String {
    format!(
        "kern took this up: the task {} is in progress in SPEC.md. The commit that finishes it closes this issue once it reaches the default branch.",
        Quoted(&clean(task))
    )
}

/// The comment on an issue whose task kern skipped.
fn skipped_text(task: &str, reason: &str) -> String {
    format!(
        "kern skipped the task {} for now; it stays in SPEC.md and kern takes it up again later. Why:\n\n{}",
        Quoted(&clean(task)),
        quoted(reason)
    )
}

/// The comment on an issue whose task kern blocked: its Blocked note.
fn blocked_text(task: &str, note: &str) -> String {
    format!(
        "kern stopped working on the task {} and marked it blocked `[!]` in SPEC.md:\n\n{}\n\nA person must look: setting the task back to `[ ]` hands it to kern again.",
        Quoted(&clean(task)),
        quoted(&format!("**Blocked:** {note}"))
    )
}

/// `text` as a markdown quote, its control characters gone.
fn quoted(text: &str) -> String {
    clean(text)
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn clean(text: &str) -> String {
    crate::text::strip_controls(text)
}

/// What kern last said on each issue, kept in the state folder.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Memory {
    said: BTreeMap<String, Said>,
}

/// The tracker of a run (`--tracker github`).
pub(crate) struct Tracker {
    gh: Gh,
    label: String,
    memory_path: PathBuf,
    memory: Memory,
    /// Only the person can mend what failed: nothing more is asked this run.
    off: bool,
    /// The kinds of failure the person was warned of.
    warned: Vec<&'static str>,
    /// The issues of the tasks taken up in this run, by title: a committed task's issue is
    /// forgotten, so that a task from it later (a reopened issue imported again) is announced.
    taken: BTreeMap<String, String>,
}

impl Tracker {
    /// The tracker of a run on the machine `host`, calling `gh`, keeping what it said in
    /// `memory_path`.
    pub(crate) fn new(gh: Gh, host: &str, memory_path: PathBuf) -> Tracker {
        let memory = crate::private_file::read(&memory_path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Tracker {
            gh,
            label: label_for(host),
            memory_path,
            memory,
            off: false,
            warned: Vec::new(),
            taken: BTreeMap::new(),
        }
    }

    /// The tracker of a run on this machine (its host name labels the issues it claims),
    /// calling the `gh` found on `path_var` in `top`, each call stopped after `timeout`.
    pub(crate) fn on_this_machine(
        path_var: Option<&std::ffi::OsStr>,
        top: &std::path::Path,
        timeout: std::time::Duration,
        memory_path: PathBuf,
    ) -> Tracker {
        let host = nix::unistd::gethostname()
            .map_or_else(|_| "unknown".into(), |h| h.to_string_lossy().into_owned());
        Tracker::new(Gh::new(path_var, top, timeout), &host, memory_path)
    }

    /// Hears `event`: asks the tracker what it means, and returns what to tell of it (what was
    /// done, what failed).
    pub(crate) fn on(&mut self, event: &RunEvent) -> Vec<RunEvent> {
        match event {
            RunEvent::Told(Told::TaskSelected {
                task,
                issue: Some(issue),
                ..
            }) => {
                self.taken.insert(task.clone(), issue.clone());
            }
            RunEvent::Commit { task, .. } => {
                if let Some(issue) = self.taken.remove(task)
                    && self.memory.said.remove(&issue).is_some()
                {
                    self.save();
                }
            }
            _ => {}
        }
        let mut told = Vec::new();
        for ask in asks(event, &self.label) {
            if self.off {
                break;
            }
            let key = ask.issue().to_string();
            if let Ask::Comment {
                said: Said::Taken, ..
            } = &ask
                && self.memory.said.get(&key) == Some(&Said::Taken)
            {
                continue;
            }
            match self.call(&ask) {
                Ok(()) => {
                    if let Ask::Comment { said, .. } = &ask {
                        self.memory.said.insert(key.clone(), *said);
                        self.save();
                    }
                    told.push(RunEvent::Told(Told::Tracked {
                        issue: key,
                        action: ask.done(),
                    }));
                }
                Err(failure) => {
                    let warn = !self.warned.contains(&failure.kind());
                    if warn {
                        self.warned.push(failure.kind());
                    }
                    self.off = failure.needs_person();
                    told.push(RunEvent::TrackerFailed {
                        issue: key,
                        action: ask.what(),
                        why: failure.why(),
                        fix: failure.fix().to_string(),
                        off: self.off,
                        warn,
                    });
                }
            }
        }
        told
    }

    fn call(&self, ask: &Ask) -> Result<(), GhFailure> {
        match ask {
            Ask::Comment { issue, text, .. } => {
                self.gh.call(&gh::comment_args(issue), Some(text)).map(drop)
            }
            Ask::Label { issue, label } => self
                .gh
                .call(&gh::label_args(issue), Some(&gh::label_body(label)))
                .map(drop),
            Ask::Unlabel { issue, label } => {
                match self.gh.call(&gh::unlabel_args(issue, label), None) {
                    // Not on the issue (any more): what kern wanted.
                    Err(GhFailure::Failed(said)) if said.contains("Label does not exist") => Ok(()),
                    other => other.map(drop),
                }
            }
        }
    }

    fn save(&self) {
        let written = serde_json::to_vec_pretty(&self.memory)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::atomic_file::write_private(&self.memory_path, &bytes)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %self.memory_path.display(), "cannot keep what the tracker was told");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(n: u64) -> IssueRef {
        IssueRef::parse(&format!("acme/app#{n}")).unwrap()
    }

    #[test]
    fn what_each_event_asks_of_the_tracker() {
        let some = |n: u64| Some(format!("acme/app#{n}"));
        let label = "kern:builder";
        let start = |i: Option<String>| {
            RunEvent::Told(Told::TaskSelected {
                task: "Add a dark mode".into(),
                spec: "SPEC.md".into(),
                line: 3,
                why: "it is the first pending task".into(),
                next: "research".into(),
                issue: i,
            })
        };
        assert_eq!(
            asks(&start(some(12)), label),
            [Ask::Comment {
                issue: issue(12),
                said: Said::Taken,
                text: "kern took this up: the task `Add a dark mode` is in progress in SPEC.md. The commit that finishes it closes this issue once it reaches the default branch.".into(),
            }]
        );
        assert!(asks(&start(None), label).is_empty());
        let skipped = RunEvent::Skipped {
            task: "T".into(),
            reason: "the API is not designed yet".into(),
            issue: some(12),
        };
        assert_eq!(
            asks(&skipped, label),
            [Ask::Comment {
                issue: issue(12),
                said: Said::Skipped,
                text: "kern skipped the task `T` for now; it stays in SPEC.md and kern takes it up again later. Why:\n\n> the API is not designed yet".into(),
            }]
        );
        let blocked = RunEvent::Blocked {
            task: "T".into(),
            why: "3 failed attempts".into(),
            line: 3,
            issue: some(12),
            note: "3 failed attempts, decomposition included — a person must look\nsecond line"
                .into(),
        };
        assert_eq!(
            asks(&blocked, label),
            [Ask::Comment {
                issue: issue(12),
                said: Said::Blocked,
                text: "kern stopped working on the task `T` and marked it blocked `[!]` in SPEC.md:\n\n> **Blocked:** 3 failed attempts, decomposition included — a person must look\n> second line\n\nA person must look: setting the task back to `[ ]` hands it to kern again.".into(),
            }]
        );
        let claimed = RunEvent::Told(Told::Claimed {
            task: "T".into(),
            remote: "origin".into(),
            claim: "refs/kern/claims/t".into(),
            issue: some(12),
        });
        assert_eq!(
            asks(&claimed, label),
            [Ask::Label {
                issue: issue(12),
                label: label.into()
            }]
        );
        let took = RunEvent::Told(Told::TookOver {
            task: "T".into(),
            remote: "origin".into(),
            holder: "pid 7 on laptop".into(),
            attempt: 2,
            issue: some(12),
            from_host: Some("laptop".into()),
        });
        assert_eq!(
            asks(&took, label),
            [
                Ask::Label {
                    issue: issue(12),
                    label: label.into()
                },
                Ask::Unlabel {
                    issue: issue(12),
                    label: "kern:laptop".into()
                }
            ]
        );
        for freed in [
            Told::Released {
                task: "T".into(),
                issue: some(12),
            },
            Told::ClaimLost {
                task: "T".into(),
                issue: some(12),
            },
            Told::Landed {
                task: "T".into(),
                remote: "origin".into(),
                branch: "main".into(),
                issue: some(12),
            },
        ] {
            assert_eq!(
                asks(&RunEvent::Told(freed), label),
                [Ask::Unlabel {
                    issue: issue(12),
                    label: label.into()
                }]
            );
        }
        assert!(asks(&RunEvent::Hangup {}, label).is_empty());
    }

    #[test]
    fn a_label_names_the_machine_within_githubs_length() {
        assert_eq!(label_for("builder"), "kern:builder");
        assert_eq!(label_for("a,b\u{7}"), "kern:ab");
        assert_eq!(label_for(&"x".repeat(80)).chars().count(), LABEL_MAX);
    }
}
