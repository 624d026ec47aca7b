//! `kern report`: what a run did, read back from `run.jsonl` (the rotated file too) — the last
//! run by default, `--since 12h|DATE` for every run active since then, `--run ID` for one.
//! Output: a terminal page (colour per `--color`), `--json` (the model, schema-versioned),
//! `--markdown`, and `--html FILE` (one self-contained page with a timeline). A night a
//! `kern watch` kept going is one night: by default the report holds every run its watchdog
//! watched, and the watchdog's restarts with the gaps they left.
//!
//! Decisions a reader must know:
//! - The report is the command's product, so it goes to stdout (`kern report | less`, `kern
//!   report --markdown | pbcopy`); only `--html`'s "wrote FILE" goes to stderr.
//! - It reads only: `run.jsonl`, the run lock's record (a run without an end line is
//!   "running" only while its pid still holds the lock) and, for a task parked for review, the
//!   repository's refs: its branch still there is waiting, gone with its commit kept under
//!   `refs/kern/attempts/` is rejected, otherwise accepted (then it counts as committed). It
//!   never writes the state folder.
//! - The files: `text` (terminal and Markdown), `html` (the page), `window_chart` (the page's
//!   chart of each usage window), `windows` (the usage windows' words both use); the model they render,
//!   the pure fold of events into a report, is `state::run_report`.

mod html;
mod night;
mod text;
mod window_chart;
mod windows;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::reporter::ColorChoice;
use crate::repository::Repository;
use crate::settings::Settings;
use crate::state::lock::RunLock;
use crate::state::run_log::{self, LoggedEvent};
use crate::state::run_report::{self, ReviewOutcome};
use crate::timestamp::Timestamp;

/// What `kern report` was asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReportRequest {
    /// Every run active at or after this moment.
    pub since: Option<Timestamp>,
    /// One run, by id or a unique start of it.
    pub run: Option<String>,
    /// The model as JSON.
    pub json: bool,
    /// Markdown.
    pub markdown: bool,
    /// Write the HTML page here, instead of the terminal page (besides `--json` or
    /// `--markdown`).
    pub html: Option<PathBuf>,
}

/// Runs `kern report`.
pub(crate) fn run(settings: &Settings, request: &ReportRequest) -> Result<()> {
    let repo = Repository::discover(&settings.cwd)?;
    let state_dir = crate::workspace::state_dir_of(settings, &repo)?;
    let log_path = state_dir.run_log();
    let events = run_log::read_all(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let lock = RunLock::inspect(&repo.run_lock_path());
    let report = build(&events, request, &|id| {
        lock.as_ref().is_some_and(|(record, live)| {
            *live && id.split('-').next() == Some(record.pid.to_string().as_str())
        })
    })
    .map_err(|message| Error::Usage(format!("`{}`: {message}", log_path.display())))?;
    // A task parked for review may have been accepted or rejected since the run.
    let mut report = report;
    run_report::settle_reviews(&mut report, &|branch, sha| {
        let slug = branch.strip_prefix("kern/").unwrap_or(branch);
        if repo.task_branch(slug).is_some() {
            ReviewOutcome::Waiting
        } else if repo.kept_under(&format!("refs/kern/attempts/{slug}/"), sha) {
            ReviewOutcome::Rejected
        } else {
            ReviewOutcome::Accepted
        }
    });
    let color = match settings.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::io::stdout().is_terminal() && !settings.output.no_color,
    };
    if let Some(path) = &request.html {
        let page = html::page(&report);
        crate::atomic_file::write(path, page.as_bytes())?;
        if !settings.quiet {
            eprintln_quiet(&format!("kern: wrote {}", path.display()));
        }
    }
    let text = if request.json {
        let mut text = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::Internal(format!("cannot encode the report: {e}")))?;
        text.push('\n');
        text
    } else if request.markdown {
        text::markdown(&report)
    } else if request.html.is_some() {
        String::new()
    } else {
        text::terminal(&report, color)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("stdout", e)),
        _ => Ok(()),
    }
}

/// Writes a line to stderr; a closed stderr is not an error here.
fn eprintln_quiet(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The report of the runs `request` chooses from `events`; `Err` says why none matched.
pub(crate) fn build(
    events: &[LoggedEvent],
    request: &ReportRequest,
    running: &dyn Fn(&str) -> bool,
) -> std::result::Result<run_report::Report, String> {
    let all = run_report::runs(events);
    if all.is_empty() {
        return Err("no run is recorded for this project and branch yet — run kern first (kern report reads run.jsonl in the state folder: `kern status --dir`)".into());
    }
    let chosen: Vec<(String, Vec<&LoggedEvent>)> = if let Some(id) = &request.run {
        let exact: Vec<_> = all.iter().filter(|(r, _)| r == id).cloned().collect();
        let matching: Vec<_> = if exact.is_empty() {
            all.iter()
                .filter(|(r, _)| r.starts_with(id.as_str()))
                .cloned()
                .collect()
        } else {
            exact
        };
        match matching.len() {
            1 => matching,
            0 => {
                return Err(format!(
                    "no run `{id}` — the last runs are {}",
                    last_ids(&all)
                ));
            }
            n => {
                return Err(format!(
                    "`{id}` names {n} runs — give more of the id: {}",
                    last_ids(&all)
                ));
            }
        }
    } else if let Some(since) = request.since {
        let chosen: Vec<_> = all
            .iter()
            .filter(|(_, events)| events.last().is_some_and(|e| e.ts >= since))
            .cloned()
            .collect();
        if chosen.is_empty() {
            return Err(format!(
                "no run since {since} — the last runs are {}",
                last_ids(&all)
            ));
        }
        chosen
    } else {
        last_night(&all)
    };
    Ok(run_report::build(&chosen, running))
}

/// The last run — and when a `kern watch` watched it, the whole night: that watchdog's lines
/// and every run it watched.
fn last_night<'a>(all: &[(String, Vec<&'a LoggedEvent>)]) -> Vec<(String, Vec<&'a LoggedEvent>)> {
    let Some((id, events)) = all
        .iter()
        .rev()
        .find(|(_, events)| !run_report::is_watch(events))
    else {
        return all.last().cloned().into_iter().collect();
    };
    match run_report::watch_of(id, events, all) {
        Some(watch) => all
            .iter()
            .filter(|(other, events)| {
                other == watch
                    || !run_report::is_watch(events)
                        && run_report::watch_of(other, events, all) == Some(watch)
            })
            .cloned()
            .collect(),
        None => vec![(id.clone(), events.clone())],
    }
}

/// The last few run ids, newest first, for messages.
fn last_ids(all: &[(String, Vec<&LoggedEvent>)]) -> String {
    let ids: Vec<String> = all
        .iter()
        .rev()
        .take(5)
        .map(|(id, _)| format!("`{id}`"))
        .collect();
    ids.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_chosen_by_default_id_or_time() {
        let events = run_log::parse(crate::state::run_report::tests::NIGHT);
        let ids = |request: &ReportRequest| -> std::result::Result<Vec<String>, String> {
            build(&events, request, &|_| false).map(|r| r.runs.into_iter().map(|r| r.run).collect())
        };
        let last = "4242-2026-11-18T01:00:00Z".to_string();
        let first = "4100-2026-11-17T22:00:00Z".to_string();
        assert_eq!(ids(&ReportRequest::default()), Ok(vec![last.clone()]));
        let by = |run: &str| ReportRequest {
            run: Some(run.into()),
            ..ReportRequest::default()
        };
        assert_eq!(ids(&by("4100")), Ok(vec![first.clone()]));
        assert_eq!(ids(&by(&last)), Ok(vec![last.clone()]));
        assert_eq!(
            ids(&by("4")),
            Err(format!(
                "`4` names 2 runs — give more of the id: `{last}`, `{first}`"
            ))
        );
        assert_eq!(
            ids(&by("99")),
            Err(format!(
                "no run `99` — the last runs are `{last}`, `{first}`"
            ))
        );
        let since = |t: &str| ReportRequest {
            since: Some(t.parse().unwrap()),
            ..ReportRequest::default()
        };
        assert_eq!(
            ids(&since("2026-11-17T00:00:00Z")),
            Ok(vec![first, last.clone()])
        );
        assert_eq!(ids(&since("2026-11-18T02:00:00Z")), Ok(vec![last]));
        assert!(
            ids(&since("2026-11-19T00:00:00Z"))
                .unwrap_err()
                .starts_with("no run since")
        );
        assert!(
            build(&[], &ReportRequest::default(), &|_| false)
                .unwrap_err()
                .starts_with("no run is recorded")
        );
    }

    #[test]
    fn the_json_of_the_night_matches_the_golden_file() {
        let report = run_report::tests::night();
        let text = serde_json::to_string_pretty(&report).unwrap() + "\n";
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/report-night.json"
        );
        if std::env::var_os("KERN_BLESS").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let expected = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            text, expected,
            "run KERN_BLESS=1 cargo test --lib report to accept"
        );
    }
}
