//! The run's side of the account's usage ledger (`--remote` with `--pace`): before each pace
//! judgment, fetch `refs/kern/pace/<account-hash>` (bounded by [`LEDGER_TIMEOUT`]), merge this
//! run's latest readings into it ([`pace_ledger::merge`]), publish the result with the
//! compare-and-swap push claims use, and judge by the account's view ([`pace_ledger::view`]).
//!
//! The one decision a reader must know: the ledger never stops a night by itself being out of
//! reach. A remote that cannot be read in time, or refuses the push, is one warning for the
//! run and the gate judges by this machine's readings, as without `--remote`. A push that lost
//! the race fetches again and merges again, so no machine's reading is lost.

use std::path::PathBuf;
use std::time::Duration;

use super::pace_ledger::{self, Book, MAX_PUBLISH_ROUNDS, PACE, Reading};
use crate::agent::stream::window::Window;
use crate::event::{RunEvent, Told};
use crate::pipeline::cx::Cx;
use crate::pipeline::ledger::Ledger;
use crate::pipeline::teller::Teller;
use crate::repository::Repository;
use crate::repository::remote::{Expected, Pushed, RefUpdate};

/// How long the fetch of the ledger may take before the gate judges by this machine alone.
pub(crate) const LEDGER_TIMEOUT: Duration = Duration::from_secs(20);

/// The account id `agent`'s own config records, where kern can read one (see
/// [`pace_ledger`]'s docs): Claude Code's `oauthAccount.accountUuid`.
fn account_of(agent: &str) -> Option<String> {
    if agent != "claude" {
        return None;
    }
    let file = match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(dir) => PathBuf::from(dir).join(".claude.json"),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".claude.json"),
    };
    pace_ledger::claude_account(&std::fs::read_to_string(file).ok()?)
}

/// The readings of `mine` by `machine` at `now`, each keeping the time it was first published
/// at (`published`: each window and its time) when it has not changed since.
fn readings(mine: &[Window], machine: &str, now: i64, published: &[(Window, i64)]) -> Vec<Reading> {
    mine.iter()
        .map(|w| {
            let read_at = published
                .iter()
                .find(|(p, _)| p == w)
                .map_or(now, |(_, at)| *at);
            Reading::of(w, machine, read_at)
        })
        .collect()
}

/// Publishes `mine` into account `key`'s ledger on `remote`: fetch, merge, push expecting what
/// was fetched, again while another machine won the race. Returns the ledger as it stands, or
/// why it could not be used.
pub(crate) fn publish(
    repo: &Repository,
    remote: &str,
    key: &str,
    mine: &[Reading],
    now: i64,
    timeout: Duration,
) -> Result<Vec<Reading>, String> {
    let name = format!("{PACE}{key}");
    for _ in 0..MAX_PUBLISH_ROUNDS {
        let read = repo.fetch_pace(remote, key, timeout)?;
        let old = read
            .as_ref()
            .map(|(_, message)| Book::parse(message).readings)
            .unwrap_or_default();
        let merged = pace_ledger::merge(&old, mine, now);
        if read.is_some() && merged == pace_ledger::merge(&old, &[], now) {
            return Ok(merged);
        }
        let book = Book {
            account: key.to_string(),
            readings: merged.clone(),
        };
        let commit = repo
            .claim_commit(&book.message())
            .map_err(|e| e.to_string())?;
        let expected = read.map_or(Expected::Absent, |(oid, _)| Expected::At(oid));
        match repo.push_expecting(
            remote,
            &[RefUpdate {
                name: name.clone(),
                new: Some(commit),
                expected,
            }],
        ) {
            Ok(Pushed::Done) => return Ok(merged),
            Ok(Pushed::Stale) => {}
            Ok(Pushed::Refused(why)) => return Err(why),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "{MAX_PUBLISH_ROUNDS} pushes in a row lost the race to other machines"
    ))
}

/// The windows `--pace` judges `agent` by at `now`, given this machine's readings `mine`:
/// with `--remote` (in the run and in each of its tasks' runs), the account's view of the
/// shared ledger after this run's readings are published to it, and `true`; else `mine`, and
/// `false`. What was published, and that the ledger could not be used (said once), are kept
/// in the run's `run_ledger`.
pub(in crate::pipeline) fn account_windows(
    cx: Cx<'_>,
    teller: &Teller<'_>,
    run_ledger: &Ledger,
    agent: &str,
    mine: Vec<Window>,
    now: i64,
) -> (Vec<Window>, bool) {
    let Some(remote) = cx.settings.remote.as_deref() else {
        return (mine, false);
    };
    let key = pace_ledger::account_key(agent, account_of(agent).as_deref());
    let machine = format!(
        "{} (run {})",
        nix::unistd::gethostname()
            .map_or_else(|_| "unknown".into(), |h| h.to_string_lossy().into_owned()),
        teller.run_id()
    );
    let ours = readings(&mine, &machine, now, &run_ledger.published());
    match publish(&cx.ws.repo, remote, &key, &ours, now, LEDGER_TIMEOUT) {
        Ok(ledger) => {
            run_ledger.publish(
                mine.iter()
                    .cloned()
                    .zip(ours.iter().map(|r| r.read_at))
                    .collect(),
            );
            let mut view: Vec<Window> = pace_ledger::view(&ledger, now)
                .into_iter()
                .map(|(w, _)| w)
                .collect();
            // A window only this machine knows (not fresh to the ledger) still counts.
            for w in mine {
                if !view.iter().any(|v| v.kind == w.kind) {
                    view.push(w);
                }
            }
            (view, true)
        }
        Err(why) => {
            if run_ledger.pace_ledger_failed() {
                teller.emit(RunEvent::Told(Told::Paced {
                    line: format!(
                        "--pace: the account's usage ledger on `{remote}` ({PACE}{key}) could not be used ({why}) — judging by this machine's readings"
                    ),
                    handed_over: false,
                }));
            }
            (mine, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &std::path::Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// 10 machines publish 10 readings each into one account's ledger at once, each through
    /// the fetch, merge and compare-and-swap push the run uses: all 100 are in it at the end.
    #[test]
    fn a_hundred_racing_updates_of_one_ledger_lose_none() {
        const MACHINES: usize = 10;
        const EACH: usize = 10;
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("remote.git");
        git(dir.path(), &["init", "--quiet", "--bare", "remote.git"]);
        let now = 1_000_000;
        let threads: Vec<_> = (0..MACHINES)
            .map(|m| {
                let clone = dir.path().join(format!("machine-{m}"));
                git(dir.path(), &["init", "--quiet", &format!("machine-{m}")]);
                git(
                    &clone,
                    &["remote", "add", "origin", &bare.display().to_string()],
                );
                std::thread::spawn(move || {
                    let repo = Repository::discover(&clone).unwrap();
                    for i in 0..EACH {
                        let reading = Reading {
                            kind: format!("k{i}"),
                            used_percent: 1.0,
                            resets_at: Some(now + 3600),
                            read_at: now,
                            machine: format!("m{m}"),
                        };
                        publish(
                            &repo,
                            "origin",
                            "account",
                            &[reading],
                            now,
                            Duration::from_secs(60),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&bare)
            .args(["log", "-1", "--format=%B", "refs/kern/pace/account"])
            .output()
            .unwrap();
        let book = Book::parse(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(book.account, "account");
        assert_eq!(book.readings.len(), MACHINES * EACH, "{book:#?}");
    }

    #[test]
    fn an_unchanged_reading_keeps_the_time_it_was_first_published_at() {
        let w = |used: f64| Window {
            kind: "five_hour".into(),
            used,
            resets_at: Some(9_000),
        };
        let first = readings(&[w(0.4)], "m", 100, &[]);
        assert_eq!(first[0].read_at, 100);
        let published = vec![(w(0.4), 100)];
        assert_eq!(readings(&[w(0.4)], "m", 200, &published), first);
        assert_eq!(readings(&[w(0.5)], "m", 200, &published)[0].read_at, 200);
    }
}
