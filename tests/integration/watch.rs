//! The watched night (DESIGN.md section 20): the heartbeat of progress in the run's lock, and
//! `kern watch`, which restarts a run that died, stops and restarts one that stalled, bounds
//! its restarts, adopts a live run and ends with the run. Runs are caught in a stage by the
//! gate in front of the scripted agent (`support/gate.rs`), never by sleeps; `--stall-after`
//! is given in seconds because the stall is what is measured, and each test asserts what
//! happened (noticed, restarted, committed once), never how long it took.

use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::gate::Gate;
use crate::support::project::Project;
use crate::support::wait_for_file;

/// The run's lock record, once there is one (the first JSON value of the file).
fn lock_record(p: &Project) -> Option<Value> {
    let text = std::fs::read_to_string(p.path().join(".git/kern.lock")).ok()?;
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .next()?
        .ok()
}

/// Polls (up to a minute, against a broken build only) until `ready` holds of the lock record.
fn lock_until(p: &Project, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(record) = lock_record(p).filter(|r| ready(r)) {
            return record;
        }
        assert!(
            Instant::now() < deadline,
            "the lock never got there: {:?}",
            lock_record(p)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: i32, signal: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
}

/// Waits until `pid` is stopped (`T` in `/proc/<pid>/stat`): a SIGSTOP has taken hold.
fn wait_stopped(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if state == Some("T") {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never stopped: {stat}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn committed(p: &Project, subject: &str) -> usize {
    p.log().iter().filter(|s| *s == subject).count()
}

#[test]
fn the_heartbeat_moves_with_the_agents_output_and_stands_still_while_the_run_is_stopped() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    gate.hold("implement", 0);
    let child = p
        .run(&["3", "0"])
        .env("KERN_AGENT", gate.agent())
        .spawn_with(Stdio::null(), Stdio::null());
    wait_for_file(&gate.started("implement", 0));
    let first = lock_until(&p, |r| r["beat"]["moved"] == "output");
    assert_eq!(first["beat"]["stage"], "implement", "{first}");
    assert!(
        first["beat"]["quiet_until"].is_string(),
        "the idle timeout bounds the agent's silence: {first}"
    );
    // The agent prints: the heartbeat moves on.
    let bytes = first["beat"]["bytes"].as_u64().unwrap();
    let later = lock_until(&p, |r| r["beat"]["bytes"].as_u64() > Some(bytes));
    assert_ne!(later["beat"]["at"], Value::Null);
    // Stopped, the run cannot move, however busy its agent is.
    let pid = first["pid"].as_i64().unwrap() as i32;
    signal(pid, Signal::SIGSTOP);
    wait_stopped(pid);
    let frozen = lock_record(&p).unwrap()["beat"].clone();
    gate.wait_ticks(25);
    assert_eq!(lock_record(&p).unwrap()["beat"], frozen);
    signal(pid, Signal::SIGCONT);
    lock_until(&p, |r| r["beat"] != frozen);
    gate.release("implement", 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(committed(&p, "Alpha"), 1);
}
