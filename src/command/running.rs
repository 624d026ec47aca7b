//! What a running run is doing now, for `kern status`: read-only, from the lock record (pid,
//! phase, start) and the state folder (`run.jsonl` for its task, iteration, stage and cost so
//! far; the current stage's raw stream `stageN.jsonl` for the agent's last tool call).
//!
//! The decision a reader must know: nothing here waits for or disturbs the run — the stream
//! file is read from its last [`TAIL_BYTES`] only, through the same parser the run uses, so a
//! 64 MB stream costs status no more than a short one.
//!
//! It lives beside `status` (its one user), not in `state/`: it parses agent streams, and the
//! state folder does not import the agents.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

use crate::agent::Agent;
use crate::agent::stream::{LineSignal, StreamParser};
use crate::event::RunEvent;
use crate::stage::Stage;
use crate::state::StateDir;
use crate::state::lock::{Heartbeat, LockRecord};
use crate::state::run_log;
use crate::state::watch::WatchRecord;
use crate::timestamp::Timestamp;

/// How much of the end of the stage stream is read for the last tool call.
const TAIL_BYTES: u64 = 256 * 1024;

/// A running run, as far as its files tell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunningRun {
    /// Its pid.
    pub pid: i32,
    /// Its run id, when `run.jsonl` has it.
    pub run: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// Seconds since then.
    pub elapsed_s: u64,
    /// What the lock record says it does.
    pub phase: String,
    /// The iteration and how many were asked for.
    pub iteration: Option<u32>,
    /// Iterations asked for.
    pub iterations: Option<u32>,
    /// The task of the current iteration.
    pub task: Option<String>,
    /// The stage running now.
    pub stage: Option<Stage>,
    /// Seconds since that stage started.
    pub stage_elapsed_s: Option<u64>,
    /// The agent's last tool call in that stage (`Edit src/lib.rs`).
    pub last_tool: Option<String>,
    /// What the finished stages of the run cost.
    pub cost_usd: f64,
    /// The `--max-cost` budget.
    pub max_cost_usd: Option<f64>,
    /// The run's last sign of progress, as its lock's heartbeat says (DESIGN.md section 20).
    pub beat: Option<Heartbeat>,
    /// Seconds since then.
    pub moved_s: Option<u64>,
    /// With parallel tasks (`-j`): every task running now, in the order they started.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<RunningTask>,
}

/// One task of a run with parallel tasks, as `kern status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunningTask {
    /// Its title.
    pub task: String,
    /// The stage running now.
    pub stage: Option<Stage>,
    /// Seconds since that stage started.
    pub stage_elapsed_s: Option<u64>,
    /// The agent's last tool call in that stage.
    pub last_tool: Option<String>,
}

/// Reads what the run holding `record` is doing, from `state_dir`.
pub(crate) fn read(record: &LockRecord, state_dir: &StateDir) -> RunningRun {
    let mut running = RunningRun {
        pid: record.pid,
        run: None,
        started_at: record.started_at,
        elapsed_s: record.started_at.elapsed().as_secs(),
        phase: record.phase.to_string(),
        iteration: None,
        iterations: None,
        task: None,
        stage: None,
        stage_elapsed_s: None,
        last_tool: None,
        cost_usd: 0.0,
        max_cost_usd: None,
        beat: record.beat.as_deref().cloned(),
        moved_s: record.beat.as_ref().map(|b| b.at.elapsed().as_secs()),
        tasks: Vec::new(),
    };
    let prefix = format!("{}-", record.pid);
    let events = run_events(&state_dir.run_log(), &prefix);
    let Some(run_id) = events
        .iter()
        .rev()
        .find(|e| e.run.starts_with(&prefix) && e.ts >= record.started_at)
        .map(|e| e.run.clone())
    else {
        return running;
    };
    let mut agent = String::new();
    // Each task whose iteration runs, with its open stage (one task unless `-j`).
    let mut open: Vec<(String, Option<(Stage, Timestamp)>)> = Vec::new();
    let mut parallel = false;
    for e in events.iter().filter(|e| e.run == run_id) {
        match &e.event {
            RunEvent::RunStart {
                iterations,
                agent: a,
                max_cost_usd,
                ..
            } => {
                running.iterations = Some(*iterations);
                agent.clone_from(a);
                running.max_cost_usd = *max_cost_usd;
            }
            RunEvent::IterationStart { index, task, .. } => {
                running.iteration = Some(*index);
                open.retain(|(t, _)| t != task);
                open.push((task.clone(), None));
                parallel |= open.len() > 1;
            }
            RunEvent::StageStart { stage, task, .. } => {
                match open.iter_mut().find(|(t, _)| t == task) {
                    Some((_, stage_open)) => *stage_open = Some((*stage, e.ts)),
                    None => open.push((task.clone(), Some((*stage, e.ts)))),
                }
            }
            RunEvent::StageEnd { cost_usd, task, .. } => {
                running.cost_usd += cost_usd;
                let which = match task {
                    Some(task) => open.iter_mut().find(|(t, _)| t == task),
                    None => open.last_mut(),
                };
                if let Some((_, stage_open)) = which {
                    *stage_open = None;
                }
            }
            RunEvent::IterationEnd { task, .. } => open.retain(|(t, _)| t != task),
            _ => {}
        }
    }
    running.run = Some(run_id);
    let format = agent
        .parse::<Agent>()
        .map_or(crate::agent::stream::StreamFormat::Detect, |a| {
            a.stream_format()
        });
    let tool_of = |dir: &StateDir, stage: Stage| {
        last_tool(&dir.stage_stream(stage), StreamParser::new(format))
    };
    // Tasks in worktrees (`-j`, `--review`) keep their stage files in their own folders.
    let in_jobs = parallel || state_dir.jobs_dir().exists();
    if let Some((task, stage_open)) = open.last() {
        running.task = Some(task.clone());
        if let Some((stage, since)) = stage_open {
            running.stage = Some(*stage);
            running.stage_elapsed_s = Some(since.elapsed().as_secs());
            let dir = if in_jobs {
                state_dir.job(&crate::text::slug(task))
            } else {
                state_dir.clone()
            };
            running.last_tool = tool_of(&dir, *stage);
        }
    }
    if in_jobs {
        running.tasks = open
            .iter()
            .map(|(task, stage_open)| {
                let dir = state_dir.job(&crate::text::slug(task));
                RunningTask {
                    task: task.clone(),
                    stage: stage_open.map(|(s, _)| s),
                    stage_elapsed_s: stage_open.map(|(_, t)| t.elapsed().as_secs()),
                    last_tool: stage_open.and_then(|(s, _)| tool_of(&dir, s)),
                }
            })
            .collect();
    }
    running
}

/// The watchdog of this folder's night (`watch.json`) for `kern status --json`: its record,
/// whether it runs (`live`), or `null` when no watchdog ever watched here.
pub(crate) fn watch(state_dir: &StateDir) -> serde_json::Value {
    let Some(record) = WatchRecord::load(&state_dir.watch_record()) else {
        return serde_json::Value::Null;
    };
    let host = nix::unistd::gethostname().map_or_else(
        |_| "unknown".to_string(),
        |h| h.to_string_lossy().into_owned(),
    );
    let live = record.is_live(&host);
    let mut value = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("live".into(), live.into());
    }
    value
}

/// The status line of a watchdog (`watch` of [`watch`]): `watched by pid 4100, 1 restart
/// (stalled 23:14–23:29)` while it runs; a watchdog gone while a run goes on (`running`) is
/// said, with the way to watch it again; an ended one is history (`kern report` has it).
/// Times are shown by `clock` (the local time of day).
pub(crate) fn watch_line(
    watch: &serde_json::Value,
    running: bool,
    clock: &dyn Fn(Timestamp) -> String,
) -> String {
    let Ok(record) = serde_json::from_value::<WatchRecord>(watch.clone()) else {
        return String::new();
    };
    if record.ended.is_some() {
        return String::new();
    }
    if watch["live"] != serde_json::Value::Bool(true) {
        if !running {
            return String::new();
        }
        return format!(
            "watch:     its watchdog (pid {}) is gone: the night goes on unwatched — `kern watch {}` watches it again\n",
            record.pid,
            record
                .args
                .iter()
                .map(|a| crate::text::shell_quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let mut line = format!("watch:     watched by pid {}", record.pid);
    if !record.restarts.is_empty() {
        let gaps: Vec<String> = record
            .restarts
            .iter()
            .rev()
            .take(3)
            .rev()
            .map(|r| format!("{} {}–{}", r.why, clock(r.from), clock(r.to)))
            .collect();
        line.push_str(&format!(
            ", {} ({}{})",
            crate::text::count(record.restarts.len(), "restart", "restarts"),
            if record.restarts.len() > 3 {
                "…, "
            } else {
                ""
            },
            gaps.join(", ")
        ));
    }
    line.push('\n');
    line
}

/// A time as the local clock shows it: `23:14`.
pub(crate) fn local_clock(t: Timestamp) -> String {
    chrono::DateTime::<chrono::Local>::from(t.system_time())
        .format("%H:%M")
        .to_string()
}

/// The events at the end of `run.jsonl` that hold the run whose id starts with `prefix`: the
/// file is read from its end in growing pieces until that run's `run_start` is in them (a
/// long `run.jsonl` costs status only the current run's lines); the rotated file is read only
/// when the run began there.
fn run_events(path: &Path, prefix: &str) -> Vec<run_log::LoggedEvent> {
    let Ok(mut file) = crate::private_file::open(path) else {
        return run_log::read_all(path).unwrap_or_default();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut take = TAIL_BYTES;
    loop {
        let start = len.saturating_sub(take);
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(&bytes);
        let text = if start > 0 {
            text.split_once('\n').map_or("", |(_, rest)| rest)
        } else {
            &text
        };
        let events = run_log::parse(text);
        let started_here = events
            .iter()
            .any(|e| e.run.starts_with(prefix) && matches!(e.event, RunEvent::RunStart { .. }));
        if started_here {
            return events;
        }
        if start == 0 {
            // The run began in the rotated file (or wrote no run_start): read both.
            return run_log::read_all(path).unwrap_or(events);
        }
        take = take.saturating_mul(4);
    }
}

/// The last tool call in the stream file at `path` (its last [`TAIL_BYTES`]).
fn last_tool(path: &Path, mut parser: StreamParser) -> Option<String> {
    let mut file = crate::private_file::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if start > 0 {
        lines.next(); // cut in the middle
    }
    let mut last = None;
    for line in lines {
        if let LineSignal::Progress(p) = parser.push_line(line) {
            last = Some(if p.detail.is_empty() {
                p.tool
            } else {
                format!("{} {}", p.tool, p.detail)
            });
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::lock::Phase;

    #[test]
    fn the_stage_task_cost_and_last_tool_of_a_running_run() {
        let root = tempfile::tempdir().unwrap();
        let sd = StateDir::locate(root.path(), Path::new("/a/app"), "main").unwrap();
        sd.create().unwrap();
        let started: Timestamp = "2026-11-18T01:00:00Z".parse().unwrap();
        let lines = [
            r#"{"ts":"2026-11-17T01:00:00Z","run":"77-old","event":"run_start","iterations":1,"delay_s":0,"agent":"claude"}"#,
            r#"{"ts":"2026-11-18T01:00:00Z","run":"77-new","event":"run_start","iterations":10,"delay_s":0,"agent":"claude","max_cost_usd":5.0}"#,
            r#"{"ts":"2026-11-18T01:00:01Z","run":"77-new","event":"iteration_start","index":2,"task":"Add the parser","line":3,"resume":"research"}"#,
            r#"{"ts":"2026-11-18T01:00:01Z","run":"77-new","event":"stage_start","stage":"research","task":"Add the parser","prompt_bytes":1}"#,
            r#"{"ts":"2026-11-18T01:00:09Z","run":"77-new","event":"stage_end","stage":"research","outcome":"succeeded","cost_usd":0.25,"duration_ms":8000,"retries":0}"#,
            r#"{"ts":"2026-11-18T01:00:09Z","run":"77-new","event":"stage_start","stage":"implement","task":"Add the parser","prompt_bytes":1}"#,
        ];
        std::fs::write(sd.run_log(), lines.join("\n") + "\n").unwrap();
        std::fs::write(
            sd.stage_stream(Stage::Implement),
            concat!(
                r#"{"type":"system","subtype":"init","session_id":"s","tools":[],"model":"m"}"#,
                "\n",
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"src/a.rs"}}]}}"#,
                "\n",
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Edit","input":{"file_path":"src/lib.rs"}}]}}"#,
                "\n"
            ),
        )
        .unwrap();
        let record = LockRecord {
            pid: 77,
            start_time: None,
            host: "h".into(),
            started_at: started,
            argv: vec![],
            phase: Phase::Stage(Stage::Implement),
            agent_group: None,
            recovering: None,
            beat: Some(Box::new(Heartbeat {
                at: Timestamp::now(),
                moved: crate::state::lock::Moved::Output {
                    stage: Stage::Implement,
                    bytes: 2048,
                },
                quiet_until: None,
            })),
        };
        let r = read(&record, &sd);
        assert_eq!(r.moved_s, Some(0));
        assert_eq!(
            r.beat.map(|b| b.moved.to_string()).as_deref(),
            Some("the implement agent's output (2.0 KiB so far)")
        );
        assert_eq!(r.run.as_deref(), Some("77-new"));
        assert_eq!(r.iteration, Some(2));
        assert_eq!(r.iterations, Some(10));
        assert_eq!(r.task.as_deref(), Some("Add the parser"));
        assert_eq!(r.stage, Some(Stage::Implement));
        assert_eq!(r.phase, "implement");
        assert_eq!(r.cost_usd, 0.25);
        assert_eq!(r.max_cost_usd, Some(5.0));
        assert_eq!(r.last_tool.as_deref(), Some("Edit src/lib.rs"));
    }

    #[test]
    fn a_watchdog_is_shown_while_it_watches_with_its_gaps() {
        use crate::event::Lost;
        use crate::state::watch::Restart;
        let t = |s: i64| Timestamp::from_epoch_seconds(1_795_000_000 + s);
        let clock = |t: Timestamp| format!("{}", t.epoch_seconds() - 1_795_000_000);
        let restart = |why, from, to| Restart {
            why,
            run_pid: 9,
            detail: String::new(),
            from: t(from),
            to: t(to),
        };
        let mut record = WatchRecord {
            id: "watch-4100-x".into(),
            pid: 4100,
            start_time: None,
            host: "h".into(),
            started_at: t(0),
            args: vec![
                "10".into(),
                "30".into(),
                "--check".into(),
                "cargo test".into(),
            ],
            run: None,
            restarts: vec![restart(Lost::Stalled, 10, 20)],
            ended: None,
        };
        let line = |record: &WatchRecord, live: bool| {
            let mut v = serde_json::to_value(record).unwrap();
            v["live"] = live.into();
            watch_line(&v, true, &clock)
        };
        assert_eq!(
            line(&record, true),
            "watch:     watched by pid 4100, 1 restart (stalled 10–20)\n"
        );
        assert_eq!(
            line(&record, false),
            "watch:     its watchdog (pid 4100) is gone: the night goes on unwatched — `kern watch 10 30 --check 'cargo test'` watches it again\n"
        );
        record.restarts = (0..5).map(|i| restart(Lost::Died, i, i + 1)).collect();
        assert_eq!(
            line(&record, true),
            "watch:     watched by pid 4100, 5 restarts (…, died 2–3, died 3–4, died 4–5)\n"
        );
        record.restarts.clear();
        assert_eq!(line(&record, true), "watch:     watched by pid 4100\n");
        record.ended = Some(crate::state::watch::WatchEnded {
            at: t(9),
            exit_code: 0,
            why: "done".into(),
            gave_up: false,
        });
        assert_eq!(line(&record, true), "");
        assert_eq!(watch_line(&serde_json::Value::Null, true, &clock), "");
        record.ended = None;
        let mut gone = serde_json::to_value(&record).unwrap();
        gone["live"] = false.into();
        assert_eq!(
            watch_line(&gone, false, &clock),
            "",
            "nothing runs: history"
        );
    }

    #[test]
    fn only_the_end_of_a_long_run_jsonl_is_read_for_the_current_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let other = r#"{"ts":"2026-11-17T01:00:00Z","run":"5-old","event":"check","command":"true","passed":true}"#;
        let mut text = format!("{other}\n").repeat(20_000);
        text.push_str(r#"{"ts":"2026-11-18T01:00:00Z","run":"77-new","event":"run_start","iterations":3,"delay_s":0,"agent":"claude"}"#);
        text.push('\n');
        text.push_str(&format!("{other}\n").repeat(5_000));
        std::fs::write(&path, &text).unwrap();
        let events = run_events(&path, "77-");
        assert!(events.len() < 20_000, "read {} events", events.len());
        assert!(events.iter().any(|e| e.run == "77-new"));
        // A run whose start is not in the file at all: everything is read.
        assert_eq!(run_events(&path, "78-").len(), 25_001);
    }
}
