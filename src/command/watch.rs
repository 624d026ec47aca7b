//! `kern watch [ARGS…]`: the watchdog above a night (DESIGN.md section 20). It starts the run
//! with ARGS and stays beside it: a run that died (its pid gone, its lock stale) is started
//! again and resumes where it stopped; one whose heartbeat stood still for `--stall-after` is
//! stopped (its process group: SIGTERM with SIGCONT, a grace, SIGKILL) and started again;
//! restarts in a row are bounded (`--max-restarts`, with a doubling backoff); a run that ended
//! by itself ends the watchdog with its exit code. It says so on its lines, in `run.jsonl`
//! (its own lines, its id as `run`) and to `--notify`, and keeps `watch.json` for `kern status`.
//!
//! Decisions a reader must know:
//! - The watchdog is a client of the lock and the state folder only: no git, no agent, no
//!   pipeline. What it decides is pure (`decide.rs`); `follow.rs` follows the run to its end
//!   and stops a stalled one; this file starts and restarts it, and keeps the records.
//! - Never two runs: a live run it finds (its watchdog killed) is adopted, not doubled; a run
//!   that another kern started meanwhile makes the one it starts exit 3, which ends it too.
//!   One watchdog at a time holds `watch.lock` (a second one exits 3).
//! - The run is started in its own process group and without a parent-death signal, so a
//!   watchdog killed with -9 leaves it going; Ctrl-C or SIGTERM to the watchdog is passed on
//!   to the run, which stops as it always does, and the watchdog ends with its code.

mod decide;
mod follow;

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::event::{IterationEnd, Lost, RunEvent, Told};
use crate::reporter::notify::Notifier;
use crate::reporter::{Mode, Reporter, voice};
use crate::repository::Repository;
use crate::settings::Settings;
use crate::state::StateDir;
use crate::state::lock::RunLock;
use crate::state::rotating::RotatingFile;
use crate::state::run_log::{self, RunLog};
use crate::state::watch::{Restart, WatchEnded, WatchRecord, WatchedRun};
use crate::supervisor::identity::{ProcessIdentity, has_exited};
use crate::supervisor::interrupt::Interrupt;
use crate::timestamp::Timestamp;
use decide::Next;
use follow::Watched;

/// How often the watchdog looks at its run.
const POLL: Duration = Duration::from_millis(250);

/// Runs `kern watch`: `settings` are the watchdog's own; its run's come from the arguments
/// after the word `watch`.
pub(crate) fn run(settings: &Settings) -> Result<()> {
    let args = crate::cli::watch_args(&settings.argv).unwrap_or_default();
    let night = night_settings(settings, &args)?;
    if night.detach {
        // `kern watch … --detach`: the same watchdog, in the background.
        return super::detach::run(&night);
    }
    let repo = Repository::discover(&night.cwd)?;
    let state_dir = crate::workspace::state_dir_of(&night, &repo)?;
    state_dir.create()?;
    let _held = hold(&state_dir)?;
    let mut watchdog = Watchdog::new(night, args, &repo, state_dir)?;
    let result = watchdog.night();
    watchdog.reporter.settle_notifications();
    result
}

/// The settings the run will have: the run's arguments as `kern ARGS` reads them (with the
/// project's `.kern/config.toml` folded in), so the watchdog knows `--stall-after`,
/// `--notify` and the state folder as the run does.
fn night_settings(settings: &Settings, args: &[String]) -> Result<Settings> {
    let argv: Vec<String> = std::iter::once("kern".to_string())
        .chain(args.iter().cloned())
        .collect();
    let cli = crate::settings::config::command_line(
        argv.iter().map(OsString::from).collect(),
        &settings.cwd,
    )?;
    if cli.command.is_some() {
        return Err(Error::Usage(
            "kern watch takes a run's arguments (ITERATIONS, DELAY and options), not a subcommand — `kern watch 10 30 --check 'cargo test'`".into(),
        ));
    }
    if cli.dry_run {
        return Err(Error::Usage(
            "kern watch keeps a night going and has no dry run — `kern -n` shows what the night would do".into(),
        ));
    }
    Settings::from_process_as(&cli, argv)
}

/// Takes `watch.lock`: one watchdog per project and branch.
fn hold(state_dir: &StateDir) -> Result<File> {
    let path = state_dir.watch_lock();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match fs2::FileExt::try_lock_exclusive(&file) {
        Ok(()) => Ok(file),
        Err(e) if e.raw_os_error() == fs2::lock_contended_error().raw_os_error() => {
            let other = WatchRecord::load(&state_dir.watch_record());
            let pid = other.as_ref().map_or(0, |r| r.pid);
            let holder = other.map_or_else(
                || "its record is being written".to_string(),
                |r| {
                    let run = r
                        .run
                        .map(|run| format!(", its run pid {}", run.pid))
                        .unwrap_or_default();
                    format!("pid {}, since {}{run}", r.pid, r.started_at)
                },
            );
            Err(Error::WatchHeld { path, pid, holder })
        }
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// The watchdog of one night.
struct Watchdog {
    night: Settings,
    args: Vec<String>,
    id: String,
    host: String,
    lock_path: PathBuf,
    state_dir: StateDir,
    record: WatchRecord,
    reporter: Reporter,
    log: RunLog,
    interrupt: Interrupt,
}

impl Watchdog {
    fn new(
        night: Settings,
        args: Vec<String>,
        repo: &Repository,
        state_dir: StateDir,
    ) -> Result<Watchdog> {
        let me = ProcessIdentity::current();
        let started_at = Timestamp::now();
        let id = format!("watch-{}-{started_at}", me.pid);
        let host = nix::unistd::gethostname().map_or_else(
            |_| "unknown".to_string(),
            |h| h.to_string_lossy().into_owned(),
        );
        let mode = if night.quiet {
            Mode::Quiet
        } else {
            Mode::Plain
        };
        let base = if night.detached {
            // Its stderr is run.log already: the log alone writes there.
            Reporter::with_writer(mode, false, Box::new(std::io::sink()))
        } else {
            Reporter::with_writer(mode, false, Box::new(std::io::stderr()))
        };
        let reporter = base.for_job("watch");
        if !night.detached {
            crate::state::rotating::mark_start(&state_dir.output_log());
        }
        reporter.attach_log(Box::new(RotatingFile::new(state_dir.output_log())));
        if let Some(command) = &night.notify {
            let mut context = serde_json::Map::new();
            context.insert("run".into(), id.clone().into());
            context.insert("project".into(), state_dir.project_id().into());
            context.insert(
                "branch".into(),
                repo.branch_name().unwrap_or_default().into(),
            );
            context.insert("repository".into(), repo.top().display().to_string().into());
            context.insert(
                "state_dir".into(),
                state_dir.dir().display().to_string().into(),
            );
            reporter.attach_notifier(Notifier::new(
                command,
                repo.top(),
                &state_dir.dir(),
                context,
            ));
        }
        let record = WatchRecord {
            id: id.clone(),
            pid: me.pid,
            start_time: me.start_time,
            host: host.clone(),
            started_at,
            args: args.clone(),
            run: None,
            restarts: Vec::new(),
            ended: None,
        };
        Ok(Watchdog {
            log: RunLog::new(state_dir.run_log(), id.clone()),
            lock_path: repo.run_lock_path(),
            interrupt: Interrupt::install()?,
            night,
            args,
            id,
            host,
            state_dir,
            record,
            reporter,
        })
    }

    /// The night: start (or adopt) the run, follow it, and start it again while that is the
    /// thing to do.
    fn night(&mut self) -> Result<()> {
        self.save()?;
        self.tell(RunEvent::WatchStart {
            pid: self.record.pid,
            stall_after_s: self.night.watch.stall_after.as_secs(),
            max_restarts: self.night.watch.max_restarts,
        });
        // Why each run in a row was lost, since the last task a run finished.
        let mut lost: Vec<Lost> = Vec::new();
        let mut gap: Option<(Lost, i32, String, Timestamp)> = None;
        loop {
            let since = Timestamp::now();
            let mut watched = match self.live_run() {
                Some(watched) => watched,
                None => Watched::Child(self.spawn()?),
            };
            let pid = watched.pid();
            if let Watched::Child(_) = watched {
                self.interrupt.add_child_group(pid);
            }
            let adopted = matches!(watched, Watched::Adopted { .. });
            if let Some((why, run_pid, detail, from)) = gap.take() {
                let to = Timestamp::now();
                self.record.restarts.push(Restart {
                    why,
                    run_pid,
                    detail: detail.clone(),
                    from,
                    to,
                });
                self.tell(RunEvent::WatchRestart {
                    why,
                    run_pid,
                    detail,
                    from,
                    to,
                    restart: u32::try_from(lost.len()).unwrap_or(u32::MAX),
                });
            }
            self.record.run = Some(WatchedRun {
                pid,
                adopted,
                since,
            });
            self.save()?;
            self.tell(RunEvent::WatchRun { pid, adopted });
            let seen = self.follow(&mut watched)?;
            self.interrupt.remove_child_group(pid);
            let started = match &watched {
                Watched::Adopted { since, .. } => *since,
                Watched::Child(_) => since,
            };
            if self.finished_a_task(pid, started) {
                lost.clear();
            }
            let in_a_row = u32::try_from(lost.len()).unwrap_or(u32::MAX);
            let detail = seen.stall.clone().unwrap_or_else(|| {
                decide::ending_text(
                    seen.ending,
                    seen.record.as_ref().map(|r| r.phase.to_string()).as_deref(),
                )
            });
            let past_deadline = self
                .night
                .deadline
                .as_ref()
                .is_some_and(|d| Timestamp::now() >= d.at);
            match decide::after(seen.ending, in_a_row, &self.night.watch, past_deadline) {
                Next::End(code) => {
                    let ended = self.run_ended(pid, started).unwrap_or_else(|| {
                        match self.night.deadline.as_ref().filter(|_| past_deadline) {
                            Some(d) => format!(
                                "the run {} ({detail}) after the deadline {}: it is not started again",
                                decide::lost_word(seen.ending),
                                d.shown
                            ),
                            None => "it stopped before its night began (its own message says why)"
                                .to_string(),
                        }
                    });
                    return self.end(code, ended, false);
                }
                Next::GiveUp(why) => {
                    lost.push(why);
                    let why = decide::gave_up(&lost, &detail);
                    self.end(crate::error::EXIT_FAILURE, why.clone(), true)?;
                    return Err(Error::WatchGaveUp { why });
                }
                Next::Restart { why, delay } => {
                    lost.push(why);
                    self.tell(RunEvent::Told(Told::RunLost {
                        why,
                        run_pid: pid,
                        detail: detail.clone(),
                        delay,
                        restart: u32::try_from(lost.len()).unwrap_or(u32::MAX),
                        of: self.night.watch.max_restarts,
                    }));
                    let from = seen
                        .record
                        .as_ref()
                        .and_then(|r| r.beat.as_ref().map(|b| b.at))
                        .unwrap_or(started);
                    gap = Some((why, pid, detail, from));
                    if self.pause(delay) {
                        let code = 128 + self.interrupt.requested().unwrap_or(2);
                        return self.end(
                            u8::try_from(code).unwrap_or(130),
                            "stopped before the run was started again".into(),
                            false,
                        );
                    }
                }
            }
        }
    }

    /// A run already going on this work tree (its watchdog gone): adopted.
    fn live_run(&self) -> Option<Watched> {
        let (record, live) = RunLock::inspect(&self.lock_path)?;
        (live && record.host == self.host && !has_exited(record.pid)).then_some(Watched::Adopted {
            run: ProcessIdentity {
                pid: record.pid,
                start_time: record.start_time,
            },
            since: record.started_at,
        })
    }

    /// Starts the run: this kern with the run's arguments, in its own process group, its
    /// output where the watchdog's goes.
    fn spawn(&self) -> Result<Child> {
        let exe = std::env::current_exe().map_err(|e| Error::io("the kern executable", e))?;
        let mut command = Command::new(&exe);
        command.arg(format!("--watched-by={}", self.id));
        if let Some(deadline) = &self.night.deadline {
            // One moment for the whole night: a run started again keeps it.
            command.arg(format!("--deadline-at={}", deadline.at));
        }
        command
            .args(&self.args)
            .current_dir(&self.night.cwd)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(&exe, e))
    }

    /// Waits `delay` before a restart; true when a stop was asked for meanwhile.
    fn pause(&self, delay: Duration) -> bool {
        let end = Instant::now() + delay;
        loop {
            if self.interrupt.requested().is_some() {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            std::thread::sleep((end - now).min(POLL));
        }
    }

    /// The events `run.jsonl` holds of the run `pid` that started at or after `since`.
    fn events_of(&self, pid: i32, since: Timestamp) -> Vec<RunEvent> {
        let prefix = format!("{pid}-");
        run_log::read_all(&self.state_dir.run_log())
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.run.starts_with(&prefix) && e.ts >= since)
            .map(|e| e.event)
            .collect()
    }

    /// True when the run `pid` finished a task (an iteration ended): a restart after it
    /// starts a new count of restarts in a row.
    fn finished_a_task(&self, pid: i32, since: Timestamp) -> bool {
        self.events_of(pid, since).iter().any(|e| {
            matches!(
                e,
                RunEvent::IterationEnd { end, .. } if *end != IterationEnd::NothingLeft
            )
        })
    }

    /// The exit code the run `pid` recorded at its end.
    fn exit_code(&self, pid: i32, since: Timestamp) -> Option<u8> {
        self.events_of(pid, since)
            .into_iter()
            .rev()
            .find_map(|e| match e {
                RunEvent::RunEnd { exit_code, .. } => Some(exit_code),
                _ => None,
            })
    }

    /// How the run `pid` said it ended.
    fn run_ended(&self, pid: i32, since: Timestamp) -> Option<String> {
        self.events_of(pid, since)
            .into_iter()
            .rev()
            .find_map(|e| match e {
                RunEvent::RunEnd { ended, .. } => Some(ended),
                _ => None,
            })
    }

    /// The night ends with `exit_code`: said, recorded, and kept in `watch.json`.
    fn end(&mut self, exit_code: u8, ended: String, gave_up: bool) -> Result<()> {
        self.record.ended = Some(WatchEnded {
            at: Timestamp::now(),
            exit_code,
            why: ended.clone(),
            gave_up,
        });
        self.save()?;
        self.tell(RunEvent::WatchEnd {
            exit_code,
            ended: ended.clone(),
            gave_up,
        });
        match exit_code {
            0 => Ok(()),
            _ if gave_up => Ok(()),
            code => Err(Error::WatchEnded { code, ended }),
        }
    }

    fn save(&self) -> Result<()> {
        self.record.save(&self.state_dir.watch_record())
    }

    /// Tells a happening: the watchdog's line, `--notify`, and `run.jsonl` when recorded.
    fn tell(&self, event: RunEvent) {
        self.reporter.hear(&event);
        if let Some((kind, fields)) = voice::notice(&event) {
            self.reporter.notify(kind, fields);
        }
        if event.is_recorded() {
            self.log.event(event);
        }
    }
}
