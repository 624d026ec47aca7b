//! A machine's fetch racing the other machines (`--remote`, DESIGN.md section 18): git lists the
//! remote's refs, then asks for their objects, and a claim created, renewed or freed in between
//! makes the remote answer `upload-pack: not our ref <id>`; another git updating this clone's
//! fetched refs makes the fetch fail with `cannot lock ref`. kern fetches again (the refs listed
//! anew) and the night goes on; a remote that keeps failing is still exit 2, naming the remote,
//! the refs and the fix.
//!
//! The race is made deterministic by a `git` first on PATH that counts kern's fetches of the
//! claims (or of a task's work in progress, or of the usage ledgers) and makes the ones the
//! test names meet it: `N:ref` answers with the remote's own
//! words for a ref that moved under the fetch, `N:lock` holds the lock another git in this
//! clone would hold on the fetched branch while the real `git fetch` runs (its own failure).

use std::path::{Path, PathBuf};

use super::{Fleet, all_landed_once, killed_in_implement_then_taken_over, tasks};
use crate::support::fakes::fake;

/// The real git, found on PATH before the fake is put first.
fn real_git() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .expect("git on PATH")
}

const ZEROS: &str = "0000000000000000000000000000000000000000";

/// Puts the racing `git` into the seed's fake `bin` folder: the fetches of the refs under
/// `refs` (`refs/kern/claims/`) listed in `races` (`"1:lock 2:ref"`; `all:ref` for every one)
/// meet a ref moving under them. Returns the folder and the file counting those fetches.
fn racing_git(fleet: &Fleet, refs: &str, races: &str) -> (PathBuf, PathBuf) {
    let count = fleet.seed.outside.path().join("counted-fetches");
    let script = format!(
        r#"#!/bin/sh
real='{real}'
case " $* " in
  *" fetch "*"{refs}"*)
    n=$(( $(cat '{count}' 2>/dev/null || echo 0) + 1 ))
    echo "$n" > '{count}'
    case " {races} " in
      *" $n:ref "*|*" all:ref "*)
        echo "fatal: git upload-pack: not our ref {ZEROS}" >&2
        echo "fatal: remote error: upload-pack: not our ref {ZEROS}" >&2
        exit 128 ;;
      *" $n:lock "*)
        refs="$2/.git/refs/kern/remote/origin/heads"
        mkdir -p "$refs"
        : > "$refs/master.lock"
        "$real" "$@"
        code=$?
        rm -f "$refs/master.lock"
        exit $code ;;
    esac ;;
esac
exec "$real" "$@"
"#,
        real = real_git().display(),
        count = count.display(),
    );
    (fake(&fleet.seed, "git", &script), count)
}

fn fetches(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |n| n.trim().parse().unwrap())
}

#[test]
fn a_fetch_meeting_a_claim_moved_under_it_is_fetched_again_and_the_night_goes_on() {
    let fleet = Fleet::new(&tasks(2), 1);
    // The run's first fetch meets another git's lock on the fetched branch, its second a
    // claim moved on the remote; a later one (a pick or a landing) a claim moved again.
    let (bin, count) = racing_git(&fleet, "refs/kern/claims/", "1:lock 2:ref 4:ref");
    fleet
        .kern(0, &["10", "0", "--remote", "origin"])
        .path_first(&bin)
        .expect(0);
    all_landed_once(&fleet, 2);
    assert!(
        fetches(&count) > 4,
        "each raced fetch was run again: {} fetches of the claims",
        fetches(&count)
    );
    assert!(
        !clone_has_lock(&fleet),
        "the other git's lock was gone when kern fetched again"
    );
}

fn clone_has_lock(fleet: &Fleet) -> bool {
    fleet.clones[0]
        .join(".git/refs/kern/remote/origin/heads/master.lock")
        .exists()
}

#[test]
fn a_remote_whose_refs_move_under_every_fetch_is_exit_2_naming_the_remote_the_refs_and_the_fix() {
    let fleet = Fleet::new(&tasks(1), 1);
    let (bin, count) = racing_git(&fleet, "refs/kern/claims/", "all:ref");
    let before = fleet.seed.read("SPEC.md");
    let out = fleet
        .kern(0, &["1", "0", "--remote", "origin"])
        .path_first(&bin)
        .expect(2);
    out.stderr_has(&format!(
        "--remote `origin`: fetching the branch and the claims (`refs/heads/master`, `refs/kern/claims/*`) failed: fatal: git upload-pack: not our ref {ZEROS}"
    ));
    out.stderr_has("(fetched 6 times, a ref moved or was locked under each fetch: another machine or git process keeps changing it)");
    out.stderr_has("check that `git fetch origin` works from this clone");
    assert_eq!(fetches(&count), 6, "the fetch and its five retries");
    assert_eq!(fleet.claims(), Vec::<String>::new(), "nothing claimed");
    assert_eq!(
        std::fs::read_to_string(fleet.clones[0].join("SPEC.md")).unwrap(),
        before,
        "SPEC.md untouched"
    );
}

#[test]
fn a_fetch_of_the_work_in_progress_meeting_a_ref_moved_under_it_is_fetched_again_and_the_work_resumed()
 {
    let fleet = Fleet::new(&tasks(1), 2);
    let (bin, count) = racing_git(&fleet, "refs/kern/work/", "1:ref 2:ref");
    // Before, a failed fetch of the work was taken for "no work pushed": the task started
    // over without it.
    killed_in_implement_then_taken_over(&fleet, |run| run.path_first(&bin));
    assert_eq!(fetches(&count), 3, "two races, then the work came");
}

#[test]
fn a_fetch_of_the_usage_ledger_meeting_a_ref_moved_under_it_is_fetched_again_and_the_ledger_used() {
    let fleet = Fleet::new(&tasks(1), 1);
    let (bin, count) = racing_git(&fleet, "refs/kern/pace/", "1:ref");
    fleet.seed.scenario(&serde_json::json!({
        "default": {
            "research": {"usage": {"utilization": 0.30, "window": "five_hour", "resets_in_secs": 7200}},
            "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}
        }
    }));
    let out = fleet
        .kern(0, &["1", "0", "--remote", "origin", "--pace=80"])
        .path_first(&bin)
        .expect(0);
    // Before, the raced fetch was "the ledger could not be used": the machine judged alone.
    let log = std::fs::read_to_string(
        fleet
            .seed
            .outside
            .path()
            .join("state-0/machine-0/master/run.jsonl"),
    )
    .unwrap();
    assert!(
        !out.stderr.contains("could not be used") && !log.contains("could not be used"),
        "{}\n{log}",
        out.stderr
    );
    assert!(fetches(&count) >= 2, "the raced fetch was run again");
    let ledger = fleet.remote_git(&["for-each-ref", "--format=%(refname)", "refs/kern/pace/"]);
    assert_eq!(
        ledger.lines().count(),
        1,
        "the account's ledger was published: {ledger:?}"
    );
    all_landed_once(&fleet, 1);
}
