//! Integration tests of the run lock, with real second processes: the test binary re-runs
//! its own `lock_holder_child` test as a child that takes the lock and holds it until its
//! stdin closes.

use crate::support::git as git_support;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use git_support::{is_child, rerun_test};
use kern::error::Error;
use kern::testing::state::lock::{AgentGroup, LockRecord, RunLock, Takeover, stop_orphaned_agent};
use kern::testing::supervisor::identity::{ProcessIdentity, start_time};

const LOCK_ENV: &str = "KERN_TEST_LOCK";
const LEGACY_ENV: &str = "KERN_TEST_LEGACY";

/// The child: takes the lock, says so, holds it until stdin closes.
#[test]
fn lock_holder_child() {
    if !is_child() {
        return;
    }
    let path = PathBuf::from(std::env::var_os(LOCK_ENV).unwrap());
    let legacy = PathBuf::from(std::env::var_os(LEGACY_ENV).unwrap());
    let (mut lock, _) =
        RunLock::acquire(&path, Some(&legacy), &["kern".into(), "3".into()]).unwrap();
    lock.set_phase(kern::testing::state::lock::Phase::from("implement"))
        .unwrap();
    println!("locked {}", std::process::id());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {}
    drop(lock);
}

struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Kept open so the child can still print its test result.
    stdout: BufReader<ChildStdout>,
    pid: i32,
}

impl Holder {
    fn start(paths: &Paths) -> Holder {
        let mut child = rerun_test("lock::lock_holder_child")
            .env(LOCK_ENV, &paths.lock)
            .env(LEGACY_ENV, &paths.legacy)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut pid = None;
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap() > 0 {
            // libtest prints `test lock_holder_child ... ` on the same line first.
            if let Some(at) = line.find("locked ") {
                pid = Some(line[at + 7..].trim().parse().unwrap());
                break;
            }
            line.clear();
        }
        let stdin = child.stdin.take();
        Holder {
            pid: pid.expect("the child took the lock"),
            child,
            stdin,
            stdout,
        }
    }

    /// Closes stdin: the child releases the lock and exits.
    fn release(mut self) {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        assert!(self.child.wait().unwrap().success(), "{rest}");
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(status.signal(), Some(9));
    }
}

struct Paths {
    _dir: tempfile::TempDir,
    lock: PathBuf,
    legacy: PathBuf,
}

fn paths() -> Paths {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("state/app-main.lock");
    let legacy = dir.path().join("state/app-main.lock.d");
    Paths {
        lock,
        legacy,
        _dir: dir,
    }
}

fn argv() -> Vec<String> {
    vec!["kern".into(), "10".into(), "30".into()]
}

fn host() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn record_for(pid: i32, start_time: Option<u64>) -> LockRecord {
    LockRecord {
        pid,
        start_time,
        host: host(),
        started_at: "2025-06-01T10:00:00+00:00".parse().unwrap(),
        argv: argv(),
        phase: "research".into(),
        agent_group: None,
        recovering: None,
        beat: None,
    }
}

fn write_record(path: &Path, record: &LockRecord) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_string(record).unwrap()).unwrap();
}

/// A live process that is not kern, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_kern_is_refused_while_the_first_holds_the_lock() {
    // Repeated: the hand-over between processes must never race.
    for round in 0..10 {
        let p = paths();
        let holder = Holder::start(&p);
        let before = fs::read(&p.lock).unwrap();
        let err = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap_err();
        assert_eq!(err.exit_code(), 3, "round {round}");
        let Error::LockHeld { path, holder: who } = &err else {
            panic!("round {round}: {err:?}");
        };
        assert_eq!(path, &p.lock);
        assert!(
            who.starts_with(&format!("pid {} on host {}, started ", holder.pid, host())),
            "{who}"
        );
        assert!(who.ends_with(", phase implement"), "{who}");
        assert_eq!(
            fs::read(&p.lock).unwrap(),
            before,
            "the holder's file is untouched"
        );
        let (record, live) = RunLock::inspect(&p.lock).unwrap();
        assert_eq!((record.pid, live), (holder.pid, true));

        holder.release();
        assert!(!p.lock.exists(), "released on drop");
        let (lock, takeover) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
        assert_eq!(takeover, None, "a clean release leaves nothing stale");
        assert_eq!(lock.record().pid, std::process::id() as i32);
    }
}

#[test]
fn the_record_of_a_sigkilled_holder_is_taken_over() {
    for _ in 0..10 {
        let p = paths();
        let holder = Holder::start(&p);
        let pid = holder.pid;
        holder.kill9();
        let (record, live) = RunLock::inspect(&p.lock).unwrap();
        assert_eq!((record.pid, live), (pid, false));
        let (lock, takeover) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
        let Some(Takeover::Stale { record, why }) = takeover else {
            panic!("{takeover:?}");
        };
        assert_eq!(record.pid, pid);
        assert_eq!(record.phase.to_string(), "implement");
        assert_eq!(why, format!("process {pid} is no longer running"));
        let (mine, live) = RunLock::inspect(&p.lock).unwrap();
        assert_eq!(mine, lock.record());
        assert!(live);
    }
}

#[test]
fn a_live_pid_with_another_start_time_is_a_reused_pid_and_stale() {
    let p = paths();
    let other = Sleeper::start();
    let real = start_time(other.pid());
    let Some(real) = real else {
        // Without /proc there is no start time; liveness alone is documented to refuse.
        return;
    };
    write_record(&p.lock, &record_for(other.pid(), Some(real + 1)));
    let (_lock, takeover) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
    let Some(Takeover::Stale { record, why }) = takeover else {
        panic!("{takeover:?}");
    };
    assert_eq!(record.pid, other.pid());
    assert_eq!(
        why,
        format!(
            "process {} is now another program (its start time differs: the pid was reused)",
            other.pid()
        )
    );
}

#[test]
fn a_record_naming_a_live_process_is_refused_even_without_a_flock_and_never_deleted() {
    let p = paths();
    let other = Sleeper::start();
    let record = record_for(other.pid(), start_time(other.pid()));
    write_record(&p.lock, &record);
    let before = fs::read(&p.lock).unwrap();
    let ino = fs::metadata(&p.lock).unwrap().ino();
    let err = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "another kern is running on this project and branch ({}); lock `{}`",
            record.holder(),
            p.lock.display()
        )
    );
    assert_eq!(fs::read(&p.lock).unwrap(), before);
    assert_eq!(fs::metadata(&p.lock).unwrap().ino(), ino);
}

#[test]
fn an_unreadable_record_is_taken_over() {
    let p = paths();
    fs::create_dir_all(p.lock.parent().unwrap()).unwrap();
    fs::write(&p.lock, "{\"pid\": 12").unwrap();
    let (lock, takeover) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
    assert_eq!(
        takeover,
        Some(Takeover::Unreadable {
            path: p.lock.clone()
        })
    );
    let text = fs::read_to_string(&p.lock).unwrap();
    let written: LockRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(written, lock.record());
    assert_eq!(written.argv, argv());
    assert_eq!(written.phase.to_string(), "starting");
}

#[test]
fn the_original_scripts_lock_folder_is_honoured() {
    // A live pid: refused, folder kept.
    let p = paths();
    let other = Sleeper::start();
    fs::create_dir_all(&p.legacy).unwrap();
    fs::write(p.legacy.join("pid"), format!("{}\n", other.pid())).unwrap();
    let err = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap_err();
    assert_eq!(err.exit_code(), 3);
    assert_eq!(
        err.to_string(),
        format!(
            "another kern is running on this project and branch (pid {}, the original kern script — if it is not running, remove the folder); lock `{}`",
            other.pid(),
            p.legacy.display()
        )
    );
    assert!(p.legacy.join("pid").exists());

    // No pid file: kern cannot tell, so it refuses and keeps it.
    fs::remove_file(p.legacy.join("pid")).unwrap();
    let err = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap_err();
    assert_eq!(err.exit_code(), 3);
    assert!(err.to_string().contains("without a pid file"), "{err}");
    assert!(p.legacy.is_dir());

    // A dead pid: stale, removed, reported.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    fs::write(p.legacy.join("pid"), format!("{dead_pid}\n")).unwrap();
    let (_lock, takeover) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
    assert_eq!(
        takeover,
        Some(Takeover::LegacyDir {
            path: p.legacy.clone()
        })
    );
    assert!(!p.legacy.exists());
}

#[test]
fn set_phase_rewrites_the_record_in_place_and_keeps_the_lock() {
    let p = paths();
    let (mut lock, _) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
    let ino = fs::metadata(&p.lock).unwrap().ino();
    lock.set_phase(kern::testing::state::lock::Phase::from("commit"))
        .unwrap();
    let group = AgentGroup {
        pgid: 4242,
        leader_start_time: Some(7),
    };
    lock.set_agent_group(Some(group)).unwrap();
    let written: LockRecord = serde_json::from_str(&fs::read_to_string(&p.lock).unwrap()).unwrap();
    assert_eq!(written.phase.to_string(), "commit");
    assert_eq!(written.agent_group, Some(group));
    assert_eq!(written.pid, std::process::id() as i32);
    assert_eq!(
        written.start_time,
        ProcessIdentity::current().start_time,
        "the start time is recorded"
    );
    assert_eq!(fs::metadata(&p.lock).unwrap().ino(), ino, "same inode");
    // Still locked: another open file description cannot take the flock.
    let probe = fs::File::open(&p.lock).unwrap();
    assert!(fs2::FileExt::try_lock_exclusive(&probe).is_err());
    drop(probe);
    assert!(matches!(
        RunLock::acquire(&p.lock, Some(&p.legacy), &argv()),
        Err(Error::LockHeld { .. })
    ));
    // That refusal did not remove or change the holder's file.
    let again: LockRecord = serde_json::from_str(&fs::read_to_string(&p.lock).unwrap()).unwrap();
    assert_eq!(again, written);
    drop(lock);
    assert!(!p.lock.exists());
    let probe_dir = p.lock.parent().unwrap();
    assert!(probe_dir.is_dir());
}

#[test]
fn drop_never_removes_a_file_that_is_no_longer_ours() {
    let p = paths();
    let (lock, _) = RunLock::acquire(&p.lock, Some(&p.legacy), &argv()).unwrap();
    // Someone replaced the file (a new inode at the path).
    let other = p.lock.with_extension("other");
    fs::write(&other, "not kern's").unwrap();
    fs::rename(&other, &p.lock).unwrap();
    drop(lock);
    assert_eq!(fs::read_to_string(&p.lock).unwrap(), "not kern's");
}

#[test]
fn inspect_reports_nothing_for_a_missing_lock() {
    let p = paths();
    assert_eq!(RunLock::inspect(&p.lock), None);
}

#[test]
fn an_orphaned_agent_group_is_stopped_only_if_it_is_the_same_process() {
    let Some(_) = start_time(std::process::id() as i32) else {
        return; // Without start times nothing is ever stopped (documented).
    };
    let mut agent = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = agent.id() as i32;
    let leader = start_time(pid).unwrap();
    let mut record = record_for(999_999, None);

    record.agent_group = Some(AgentGroup {
        pgid: pid,
        leader_start_time: Some(leader + 1),
    });
    assert!(!stop_orphaned_agent(&record), "another process: untouched");
    assert_eq!(agent.try_wait().unwrap(), None, "still running");

    record.agent_group = Some(AgentGroup {
        pgid: pid,
        leader_start_time: Some(leader),
    });
    // Reap it as it dies, as init would for a real orphan.
    let reaper = std::thread::spawn(move || agent.wait().unwrap());
    assert!(stop_orphaned_agent(&record));
    assert_eq!(reaper.join().unwrap().signal(), Some(15));
}
