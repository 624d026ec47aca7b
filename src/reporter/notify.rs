//! `--notify CMD` (`KERN_NOTIFY`): tells the person's own command about the moments that
//! matter when nobody watches — the run ended, a task was blocked, a usage-limit wait began,
//! the run stopped for the person. CMD runs through `sh -c` in the repository's top folder
//! with one JSON object on stdin and `KERN_EVENT` set to the event's name. Every object has
//! `event`, `ts`, `text` (one line for a person: `jq -r .text`), `run`, `project`, `branch`,
//! `repository` and `state_dir`, and the event's own fields.
//!
//! The decision a reader must know: a notifier never affects the run. Events run one after
//! another, in order, on a thread of their own through the supervisor (its own process group, killed with everything it
//! started after [`NOTIFY_TIMEOUT`], then SIGTERM, a 2 s grace and SIGKILL), so a slow, hanging
//! or failing notifier costs the run nothing until its end, where kern waits for the last
//! notifications (at most [`NOTIFY_TIMEOUT`] plus the grace and the drain) before it exits with
//! the code it was going to exit with anyway. What the command printed, and how it ended, is
//! appended to `notify.log` in the state folder.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::supervisor::interrupt::Interrupt;
use crate::supervisor::{self, EndReason, Invocation, Limits, StreamFiles};
use crate::timestamp::Timestamp;

/// How long a notifier may run before it is stopped.
pub(crate) const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// The moments a notifier hears about; `KERN_EVENT` is [`EventKind::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// The run ended (always the last event), with the report's totals.
    RunEnded,
    /// kern gave up on a task and marked it `[!]`.
    TaskBlocked,
    /// A usage limit was hit; the run waits for its reset.
    UsageLimitWait,
    /// The run stopped because the person must act (exit 2 or 5).
    StoppedForPerson,
    /// `kern watch`: the run died; it is started again.
    RunDied,
    /// `kern watch`: the run showed no progress for `--stall-after`; it was stopped and is
    /// started again.
    RunStalled,
    /// `kern watch` gave up on a run that keeps dying or stalling: it is left stopped.
    WatchGaveUp,
}

impl EventKind {
    /// The name in `KERN_EVENT` and the JSON's `event`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventKind::RunEnded => "run_ended",
            EventKind::TaskBlocked => "task_blocked",
            EventKind::UsageLimitWait => "usage_limit_wait",
            EventKind::StoppedForPerson => "stopped_for_person",
            EventKind::RunDied => "run_died",
            EventKind::RunStalled => "run_stalled",
            EventKind::WatchGaveUp => "watch_gave_up",
        }
    }
}

/// Runs the `--notify` command for each event. Shared by reference; all methods take `&self`.
pub(crate) struct Notifier {
    command: String,
    cwd: PathBuf,
    state_dir: PathBuf,
    /// Fields every event carries (project, branch, run, state folder).
    context: Map<String, Value>,
    queue: Mutex<Option<(std::sync::mpsc::Sender<Job>, JoinHandle<()>)>>,
    log_lock: Arc<Mutex<()>>,
    counter: AtomicU64,
    timeout: Duration,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier running `command` in `cwd`, logging to `notify.log` in `state_dir`; every
    /// event carries `context`'s fields.
    pub(crate) fn new(
        command: &str,
        cwd: &Path,
        state_dir: &Path,
        context: Map<String, Value>,
    ) -> Notifier {
        Notifier {
            command: command.to_string(),
            cwd: cwd.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            context,
            queue: Mutex::new(None),
            log_lock: Arc::new(Mutex::new(())),
            counter: AtomicU64::new(0),
            timeout: NOTIFY_TIMEOUT,
        }
    }

    #[cfg(test)]
    /// The same with another time limit (tests).
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Notifier {
        self.timeout = timeout;
        self
    }

    /// The JSON a notifier gets for `kind` with `fields`: `event`, `ts`, the context, then
    /// the fields.
    pub(crate) fn payload(&self, kind: EventKind, fields: Value) -> Value {
        let mut object = Map::new();
        object.insert("event".into(), json!(kind.name()));
        object.insert("ts".into(), json!(Timestamp::now()));
        object.extend(self.context.clone());
        if let Value::Object(fields) = fields {
            object.extend(fields);
        }
        Value::Object(object)
    }

    /// Queues the command for `kind` (events run in order, one at a time) and returns at once.
    pub(crate) fn send(&self, kind: EventKind, fields: Value) {
        let payload = self.payload(kind, fields);
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let job = Job {
            command: self.command.clone(),
            cwd: self.cwd.clone(),
            state_dir: self.state_dir.clone(),
            kind,
            payload,
            n,
            timeout: self.timeout,
            log_lock: Arc::clone(&self.log_lock),
        };
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.is_none() {
            let (sender, receiver) = std::sync::mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("kern-notify".into())
                .spawn(move || {
                    for job in receiver {
                        job.run();
                    }
                });
            match spawned {
                Ok(handle) => *queue = Some((sender, handle)),
                Err(error) => {
                    tracing::warn!(%error, "cannot start the notifier thread");
                    return;
                }
            }
        }
        if let Some((sender, _)) = queue.as_ref() {
            let _ = sender.send(job);
        }
    }

    /// Waits for every notification queued so far (each is bounded by its time limit).
    pub(crate) fn wait(&self) {
        let taken = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((sender, handle)) = taken {
            drop(sender);
            let _ = handle.join();
        }
    }
}

/// One notification, run on its own thread.
struct Job {
    command: String,
    cwd: PathBuf,
    state_dir: PathBuf,
    kind: EventKind,
    payload: Value,
    n: u64,
    timeout: Duration,
    log_lock: Arc<Mutex<()>>,
}

impl Job {
    fn run(self) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                self.log(&format!("could not run: {error}"), "");
                return;
            }
        };
        let mut stdin = serde_json::to_vec(&self.payload).unwrap_or_default();
        stdin.push(b'\n');
        let invocation = Invocation {
            program: "sh".into(),
            args: vec!["-c".into(), self.command.clone()],
            env: vec![("KERN_EVENT".into(), self.kind.name().into())],
            cwd: self.cwd.clone(),
            stdin,
            fence: None,
        };
        let limits = Limits {
            stage_timeout: self.timeout,
            idle_timeout: self.timeout,
            result_grace: self.timeout,
        };
        let out = self
            .state_dir
            .join(format!(".notify-{}-{}.out", std::process::id(), self.n));
        let files = StreamFiles {
            stdout: out.clone(),
            stdout_cap: 64 * 1024,
            stderr: out.with_extension("err"),
            stderr_cap: 16 * 1024,
        };
        let finished = runtime.block_on(supervisor::run(
            &invocation,
            &limits,
            &files,
            &Interrupt::none(),
            &mut |_| {},
            &mut |_| supervisor::LineAction::Continue,
        ));
        let printed = std::fs::read(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(&files.stderr);
        let (how, stderr) = match finished {
            Ok(f) => {
                let how = match f.end {
                    EndReason::StageTimeout | EndReason::IdleTimeout => format!(
                        "stopped after {} (the limit)",
                        crate::text::duration(self.timeout)
                    ),
                    _ => match (f.exit_code, f.signal) {
                        (Some(code), _) => format!("exit {code}"),
                        (None, Some(signal)) => format!("killed by signal {signal}"),
                        _ => "ended".to_string(),
                    },
                };
                (how, f.stderr_tail)
            }
            Err(error) => (format!("could not run: {error}"), String::new()),
        };
        let mut text = String::from_utf8_lossy(&printed).into_owned();
        text.push_str(&stderr);
        self.log(&how, &text);
    }

    /// Appends `== <ts> <event>: <how>` and the command's output to `notify.log`.
    fn log(&self, how: &str, output: &str) {
        let _guard = self.log_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entry = format!("== {} {}: {how}\n", Timestamp::now(), self.kind.name());
        entry.push_str(output);
        if !output.is_empty() && !output.ends_with('\n') {
            entry.push('\n');
        }
        let path = self.state_dir.join("notify.log");
        let written =
            crate::private_file::append(&path).and_then(|mut f| f.write_all(entry.as_bytes()));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "cannot write notify.log");
        }
        tracing::debug!(event = self.kind.name(), %how, "notifier finished");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn notifier(dir: &Path, command: &str) -> Notifier {
        let mut context = Map::new();
        context.insert("project".into(), json!("app"));
        Notifier::new(command, dir, dir, context)
    }

    #[test]
    fn the_command_gets_the_event_on_stdin_and_in_kern_event() {
        let dir = tempfile::tempdir().unwrap();
        let got = dir.path().join("got");
        let n = notifier(
            dir.path(),
            &format!(
                "echo \"$KERN_EVENT\" >> '{0}'; cat >> '{0}'; echo said hello",
                got.display()
            ),
        );
        n.send(EventKind::TaskBlocked, json!({"task": "Hard"}));
        n.wait();
        let text = std::fs::read_to_string(&got).unwrap();
        let (name, json) = text.split_once('\n').unwrap();
        assert_eq!(name, "task_blocked");
        let v: Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(v["event"], "task_blocked");
        assert_eq!(v["project"], "app");
        assert_eq!(v["task"], "Hard");
        assert!(v["ts"].as_str().unwrap().ends_with('Z'));
        let log = std::fs::read_to_string(dir.path().join("notify.log")).unwrap();
        assert!(log.contains(" task_blocked: exit 0\nsaid hello\n"), "{log}");
    }

    #[test]
    fn a_hanging_notifier_is_stopped_at_its_limit_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let n = notifier(
            dir.path(),
            &format!("sleep 300 & echo $! > '{}'; wait", pid_file.display()),
        )
        .with_timeout(Duration::from_millis(300));
        let started = Instant::now();
        n.send(EventKind::RunEnded, json!({}));
        n.wait();
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Gone, or a zombie nobody reaped (containers): either way it runs no more.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
        assert!(
            matches!(state, None | Some("Z")),
            "the notifier's child outlived it: {state:?}"
        );
        let log = std::fs::read_to_string(dir.path().join("notify.log")).unwrap();
        assert!(
            log.contains(" run_ended: stopped after 0s (the limit)"),
            "{log}"
        );
    }

    #[test]
    fn a_failing_notifier_is_logged() {
        let dir = tempfile::tempdir().unwrap();
        let n = notifier(dir.path(), "echo nope >&2; exit 3");
        n.send(EventKind::UsageLimitWait, json!({}));
        n.wait();
        let log = std::fs::read_to_string(dir.path().join("notify.log")).unwrap();
        assert!(log.contains(" usage_limit_wait: exit 3\nnope\n"), "{log}");
    }
}
