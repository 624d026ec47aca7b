//! The watched night (DESIGN.md section 20): the heartbeat of progress in the run's lock, and
//! `kern watch`, which restarts a run that died, stops and restarts one that stalled, bounds
//! its restarts, adopts a live run and ends with the run. Runs are caught in a stage by the
//! gate in front of the scripted agent (`support/gate.rs`), never by sleeps; `--stall-after`
//! is given in seconds because the stall is what is measured, and each test asserts what
//! happened (noticed, restarted, committed once), never how long it took.
//!
//! The other parts live beside it, so `cargo test --test integration -- watch` runs
//! them all: `deadline.rs` (`--until`, `--deadline`, with `--remote`) and `schedule.rs`
//! (`kern schedule`).

mod deadline;
mod schedule;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::support::gate::Gate;
use crate::support::project::{KernRun, Project};
use crate::support::{is_dead, wait_dead, wait_for_file};

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

/// The pid holding the lock, once a run holds it.
fn run_pid(p: &Project) -> i32 {
    lock_until(p, |r| r["pid"].is_i64())["pid"]
        .as_i64()
        .unwrap() as i32
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

/// `kern watch ARGS` in `p` with the gated agent and no delay between restarts, its stderr
/// to `watch.stderr` (the run's lines are there too: nobody has to read a pipe).
fn watch(p: &Project, gate: &Gate, args: &[&str]) -> Child {
    watch_with(p.run(&["watch"]).env("KERN_AGENT", gate.agent()), p, args)
}

fn watch_with(run: KernRun<'_>, p: &Project, args: &[&str]) -> Child {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p.outside.path().join("watch.stderr"))
        .unwrap();
    run.args(args)
        .env("KERN_RESTART_DELAY", "0")
        .spawn_with(Stdio::null(), stderr)
}

/// Waits for a `kern watch` to end: its exit code and everything written to `watch.stderr`.
fn finish(p: &Project, mut child: Child) -> (i32, String) {
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(p.outside.path().join("watch.stderr")).unwrap_or_default();
    (status.code().unwrap_or(-1), stderr)
}

/// `watch.json` in the state folder.
fn watch_record(p: &Project) -> Value {
    let path = p.state_dir().join("watch.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The notifications a `--notify "cat >> FILE"` received.
fn notifications(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
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

#[test]
fn a_run_stopped_with_sigstop_in_implement_is_noticed_notified_restarted_and_committed_once() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    // The first implement is stopped there; the second waits so that `status` can be read.
    gate.hold("implement", 0);
    gate.hold("implement", 1);
    let notified = p.outside.path().join("notified.jsonl");
    let notify = format!("cat >> '{}'", notified.display());
    let child = watch(
        &p,
        &gate,
        &[
            "3",
            "0",
            "--stall-after",
            "3",
            "--idle-timeout",
            "2",
            "--notify",
            &notify,
        ],
    );
    let watchdog = child.id() as i32;
    wait_for_file(&gate.started("implement", 0));
    let stuck = run_pid(&p);
    signal(stuck, Signal::SIGSTOP);
    // Noticed, stopped, started again: the new run resumes implement.
    wait_for_file(&gate.started("implement", 1));
    assert!(wait_dead(stuck), "the stalled run was stopped");
    let status = p.run(&["status"]).expect(0);
    assert!(
        status.stdout.contains(&format!(
            "watch:     watched by pid {watchdog}, 1 restart (stalled "
        )),
        "{}",
        status.stdout
    );
    gate.release("implement", 1);
    let (code, err) = finish(&p, child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(committed(&p, "Alpha"), 1, "{:?}", p.log());
    assert!(p.read("SPEC.md").contains("- [x] Alpha"));
    let record = watch_record(&p);
    let restarts = record["restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{record}");
    assert_eq!(restarts[0]["why"], "stalled", "{record}");
    assert_eq!(restarts[0]["run_pid"], stuck, "{record}");
    assert_eq!(record["ended"]["exit_code"], 0, "{record}");
    assert!(err.contains("stalled"), "{err}");
    let told = notifications(&notified);
    let stalled: Vec<&Value> = told
        .iter()
        .filter(|n| n["event"] == "run_stalled")
        .collect();
    assert_eq!(stalled.len(), 1, "{told:?}");
    assert!(
        stalled[0]["text"].as_str().unwrap().contains("stalled"),
        "{told:?}"
    );
    let logged = p.run_events("watch_restart");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["why"], "stalled");
    let report = p.run(&["report"]).expect(0);
    assert!(
        report.stdout.contains("1 restart") && report.stdout.contains("stalled"),
        "{}",
        report.stdout
    );
}

/// kill -9 of the run while `stage` runs, under a watchdog: restarted, resumed at that stage,
/// every task committed once.
fn killed_in(stage: &str) {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let gate = Gate::new(&p);
    gate.hold(stage, 0);
    let notified = p.outside.path().join("notified.jsonl");
    let notify = format!("cat >> '{}'", notified.display());
    let child = watch(&p, &gate, &["5", "0", "--notify", &notify]);
    wait_for_file(&gate.started(stage, 0));
    let killed = run_pid(&p);
    signal(killed, Signal::SIGKILL);
    let (code, err) = finish(&p, child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(committed(&p, "Alpha"), 1, "{:?}", p.log());
    assert_eq!(committed(&p, "Beta"), 1, "{:?}", p.log());
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [x] Alpha") && spec.contains("- [x] Beta"),
        "{spec}"
    );
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    let record = watch_record(&p);
    let restarts = record["restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{record}");
    assert_eq!(restarts[0]["why"], "died", "{record}");
    assert_eq!(restarts[0]["run_pid"], killed, "{record}");
    // The second run resumed the task at the stage that was killed.
    let starts = p.run_events("run_start");
    assert_eq!(starts.len(), 2, "{starts:?}");
    let second = starts[1]["run"].clone();
    let resumed = p
        .run_events("iteration_start")
        .into_iter()
        .find(|e| e["run"] == second)
        .unwrap();
    assert_eq!(resumed["task"], "Alpha");
    assert_eq!(resumed["resume"], stage, "{resumed}");
    // Said (--notify, the run log) and kept for the morning.
    let told = notifications(&notified);
    let died: Vec<&Value> = told.iter().filter(|n| n["event"] == "run_died").collect();
    assert_eq!(died.len(), 1, "{told:?}");
    assert!(
        died[0]["text"].as_str().unwrap().contains("SIGKILL"),
        "{told:?}"
    );
    let logged = p.run_events("watch_restart");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["why"], "died", "{logged:?}");
    let report = p.run(&["report"]).expect(0);
    assert!(
        report.stdout.contains("↻ died ") && report.stdout.contains(&format!("run pid {killed}")),
        "{}",
        report.stdout
    );
}

#[test]
fn a_run_killed_in_research_is_restarted_and_resumed() {
    killed_in("research");
}

#[test]
fn a_run_killed_in_implement_is_restarted_and_resumed() {
    killed_in("implement");
}

#[test]
fn a_run_killed_in_review_is_restarted_and_resumed() {
    killed_in("commit");
}

#[test]
fn a_detached_night_is_watched_and_its_killed_run_started_again() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    gate.hold("implement", 0);
    let out = p
        .run(&["3", "0", "--detach"])
        .env("KERN_AGENT", gate.agent())
        .env("KERN_RESTART_DELAY", "0")
        .expect(0);
    let watchdog: i32 = out
        .stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{out:?}"));
    wait_for_file(&gate.started("implement", 0));
    let killed = run_pid(&p);
    assert_ne!(killed, watchdog, "the pid printed is the watchdog's");
    signal(killed, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(120);
    let record = loop {
        let record = watch_record(&p);
        if !record["ended"].is_null() {
            break record;
        }
        assert!(Instant::now() < deadline, "the night never ended: {record}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(wait_dead(watchdog), "the watchdog ends with its night");
    assert_eq!(record["pid"], watchdog, "{record}");
    assert_eq!(record["ended"]["exit_code"], 0, "{record}");
    let restarts = record["restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{record}");
    assert_eq!(restarts[0]["why"], "died", "{record}");
    assert_eq!(restarts[0]["run_pid"], killed, "{record}");
    assert_eq!(committed(&p, "Alpha"), 1, "{:?}", p.log());
}

#[test]
fn a_run_that_stops_for_the_person_ends_the_watchdog_with_its_code_and_is_not_restarted() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let child = watch_with(p.run(&["watch"]), &p, &["3", "0", "--max-restarts", "3"]);
    let (code, err) = finish(&p, child);
    assert_eq!(code, 5, "the agent needs the person: {err}");
    assert_eq!(p.run_events("run_start").len(), 1, "never started again");
    let record = watch_record(&p);
    assert_eq!(record["restarts"], json!([]), "{record}");
    assert_eq!(record["ended"]["exit_code"], 5, "{record}");
    assert_eq!(record["ended"]["gave_up"], false, "{record}");
    assert!(err.contains("[watch] the night ends (exit 5)"), "{err}");
}

#[test]
fn a_run_that_dies_at_start_every_time_is_left_stopped_after_max_restarts_and_named() {
    let p = Project::new("- [ ] Alpha\n");
    // An agent that kills the run that started it (read from the lock), every time.
    let agent = p.outside.path().join("killer.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\npid=$(sed -n 's/^  \"pid\": \\([0-9]*\\),$/\\1/p' .git/kern.lock)\nkill -9 \"$pid\"\nsleep 5\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let notified = p.outside.path().join("notified.jsonl");
    let notify = format!("cat >> '{}'", notified.display());
    // Unfenced (`KERN_SANDBOX=off`, inherited by each run): inside kern's fence the agent
    // cannot signal a process outside its own tree, kern least of all (fence.rs).
    let run = p
        .run(&["watch"])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .env("KERN_SANDBOX", "off");
    let child = watch_with(
        run,
        &p,
        &["3", "0", "--max-restarts", "2", "--notify", &notify],
    );
    let (code, err) = finish(&p, child);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the run died 3 times in a row without finishing a task"),
        "{err}"
    );
    assert!(err.contains("SIGKILL"), "{err}");
    assert_eq!(p.run_events("run_start").len(), 3);
    let record = watch_record(&p);
    assert_eq!(record["restarts"].as_array().unwrap().len(), 2, "{record}");
    assert_eq!(record["ended"]["exit_code"], 1, "{record}");
    let told = notifications(&notified);
    let gave_up: Vec<&Value> = told
        .iter()
        .filter(|n| n["event"] == "watch_gave_up")
        .collect();
    assert_eq!(gave_up.len(), 1, "{told:?}");
    assert!(
        gave_up[0]["text"]
            .as_str()
            .unwrap()
            .contains("died 3 times in a row"),
        "{told:?}"
    );
    assert!(!p.path().join(".git/kern.lock").exists() || lock_record(&p).is_some());
}

#[test]
fn a_usage_limit_wait_longer_than_stall_after_is_not_a_stall() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {
        "research": [{"error": "usage_limit", "resets_in_secs": 8}, {}],
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}
    }}));
    let gate = Gate::new(&p);
    let run = p
        .run(&["watch"])
        .env("KERN_AGENT", gate.agent())
        .env("KERN_RESET_MARGIN", "0");
    let child = watch_with(run, &p, &["3", "0", "--stall-after", "3"]);
    let (code, err) = finish(&p, child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(committed(&p, "Alpha"), 1);
    let record = watch_record(&p);
    assert_eq!(record["restarts"], json!([]), "{record}");
    assert_eq!(p.run_events("run_start").len(), 1);
    let research = p
        .run_events("stage_end")
        .into_iter()
        .find(|e| e["stage"] == "research")
        .unwrap();
    assert_eq!(research["waits"][0]["kind"], "usage_limit", "{research}");
}

#[test]
fn a_stage_whose_agent_prints_is_busy_not_stalled() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    gate.hold("implement", 0);
    let child = watch(
        &p,
        &gate,
        &["3", "0", "--stall-after", "3", "--idle-timeout", "2"],
    );
    wait_for_file(&gate.started("implement", 0));
    // Twice --stall-after of printing, measured by what the agent printed.
    gate.wait_ticks(60);
    gate.release("implement", 0);
    let (code, err) = finish(&p, child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(watch_record(&p)["restarts"], json!([]));
    assert_eq!(committed(&p, "Alpha"), 1);
}

#[test]
fn a_watchdog_killed_and_started_again_adopts_the_live_run() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    gate.hold("implement", 0);
    let mut first = watch(&p, &gate, &["3", "0"]);
    wait_for_file(&gate.started("implement", 0));
    let run = run_pid(&p);
    signal(first.id() as i32, Signal::SIGKILL);
    first.wait().unwrap();
    assert!(!is_dead(run), "the run goes on without its watchdog");
    let status = p.run(&["status"]).expect(0);
    assert!(
        status.stdout.contains(&format!(
            "watch:     its watchdog (pid {}) is gone: the night goes on unwatched — `kern watch 3 0` watches it again\n",
            first.id()
        )),
        "{}",
        status.stdout
    );
    let second = watch(&p, &gate, &["3", "0"]);
    let pid = i64::from(second.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let record = watch_record(&p);
        if record["pid"] == pid && record["run"]["pid"] == run {
            assert_eq!(record["run"]["adopted"], true, "{record}");
            break;
        }
        assert!(Instant::now() < deadline, "never adopted: {record}");
        std::thread::sleep(Duration::from_millis(20));
    }
    gate.release("implement", 0);
    let (code, err) = finish(&p, second);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.run_events("run_start").len(), 1, "never two runs");
    assert_eq!(committed(&p, "Alpha"), 1);
    assert!(err.contains(&format!("adopted the run pid {run}")), "{err}");
}

#[test]
fn a_watched_night_keeps_one_deadline_across_its_restarts() {
    let p = Project::new("- [ ] Alpha\n");
    let gate = Gate::new(&p);
    gate.hold("research", 0);
    let child = watch(&p, &gate, &["3", "0", "--deadline", "2h"]);
    wait_for_file(&gate.started("research", 0));
    let deadline_of = |record: &Value| {
        record["argv"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|a| a.starts_with("--deadline-at="))
            .map(str::to_string)
    };
    let first = lock_until(&p, |r| r["pid"].is_i64());
    let deadline = deadline_of(&first).expect("the run is given the night's deadline");
    signal(first["pid"].as_i64().unwrap() as i32, Signal::SIGKILL);
    let second = lock_until(&p, |r| r["pid"].is_i64() && r["pid"] != first["pid"]);
    assert_eq!(deadline_of(&second).as_deref(), Some(deadline.as_str()));
    let (code, err) = finish(&p, child);
    assert_eq!(code, 0, "{err}");
    assert_eq!(committed(&p, "Alpha"), 1);
}
