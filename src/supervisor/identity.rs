//! Telling a live process from a dead one, and from a different process that reuses its pid.
//!
//! A pid alone is not an identity: after a crash the pid in a lock file may belong to an
//! unrelated process. On Linux the start time (field 22 of `/proc/<pid>/stat`, in clock ticks
//! since boot) makes the pair (pid, start time) unique. Elsewhere there is no cheap, portable
//! start time, so only liveness (`kill(pid, 0)`) is used: a reused pid then looks alive, and
//! kern errs on the side of "still running" — it refuses rather than deletes.

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// A process as (pid, start time); the start time is `None` where the OS cannot tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// The process id.
    pub pid: i32,
    /// Start time in clock ticks since boot (Linux), if known.
    pub start_time: Option<u64>,
}

impl ProcessIdentity {
    /// The identity of this kern process.
    pub fn current() -> ProcessIdentity {
        ProcessIdentity::of(std::process::id() as i32)
    }

    /// The identity of a running process (its start time read now).
    pub fn of(pid: i32) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            start_time: start_time(pid),
        }
    }

    /// True when a process with this pid is alive and, where start times are known, is the
    /// same process (not a later one that reused the pid).
    pub fn is_running(&self) -> bool {
        if !pid_alive(self.pid) {
            return false;
        }
        match (self.start_time, start_time(self.pid)) {
            (Some(recorded), Some(now)) => recorded == now,
            _ => true,
        }
    }
}

/// True when a process with `pid` exists (a zombie counts as existing).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match kill(Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// True when `pid` runs no more: gone, or a zombie not reaped yet (its parent is gone too, or
/// has not waited for it). Linux reads `/proc`; elsewhere only a process that is gone.
pub(crate) fn has_exited(pid: i32) -> bool {
    if cfg!(target_os = "linux") {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .is_some_and(|state| state == "Z" || state == "X"),
            Err(_) => !pid_alive(pid),
        }
    } else {
        !pid_alive(pid)
    }
}

/// True while process group `pgid` has a member that is not a zombie. A zombie cannot write
/// anything; counting it as alive made kern wait out whole grace periods in containers whose
/// first process does not reap orphans (found by the crash soak). Linux scans `/proc`;
/// elsewhere any member, zombies included, counts (`kill(-pgid, 0)`).
#[cfg(target_os = "linux")]
pub(crate) fn group_alive(pgid: i32) -> bool {
    if pgid <= 0 || kill(Pid::from_raw(-pgid), None) == Err(Errno::ESRCH) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            return false;
        };
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_state_and_group(&stat))
            .is_some_and(|(state, group)| group == pgid && state != 'Z')
    })
}

/// Without `/proc`: any member counts, zombies included.
#[cfg(not(target_os = "linux"))]
pub fn group_alive(pgid: i32) -> bool {
    pgid > 0 && kill(Pid::from_raw(-pgid), None) != Err(Errno::ESRCH)
}

/// Fields 3 (state) and 5 (process group) of a `/proc/<pid>/stat` line.
#[cfg(target_os = "linux")]
fn parse_state_and_group(stat: &str) -> Option<(char, i32)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// The start time of `pid` in clock ticks since boot, from `/proc/<pid>/stat` (Linux only).
#[cfg(target_os = "linux")]
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Without `/proc` there is no start time; liveness alone is used (see the module docs).
#[cfg(not(target_os = "linux"))]
pub fn start_time(_pid: i32) -> Option<u64> {
    None
}

/// Field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and
/// may itself hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards; start time is field 22 → index 19 here.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_start_time_even_with_odd_command_names() {
        let stat =
            "1234 (a b) c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn this_process_is_running_and_a_changed_start_time_is_not() {
        let me = ProcessIdentity::current();
        assert!(me.is_running());
        if let Some(t) = me.start_time {
            let reused = ProcessIdentity {
                pid: me.pid,
                start_time: Some(t + 1),
            };
            assert!(!reused.is_running(), "pid reuse must read as not running");
        }
    }

    #[test]
    fn state_and_group_are_read_after_the_command_name() {
        let stat = "1234 (a) b) Z 1 777 1234 0 -1";
        assert_eq!(parse_state_and_group(stat), Some(('Z', 777)));
    }

    #[test]
    fn a_group_of_only_zombies_is_not_alive() {
        use std::os::unix::process::CommandExt;
        // A child in its own group that exits and is not reaped yet: a zombie.
        let mut child = std::process::Command::new("true")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while group_alive(pgid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!group_alive(pgid), "a zombie-only group reads as gone");
        assert!(
            pid_alive(pgid),
            "the zombie is still there (not reaped yet)"
        );
        child.wait().unwrap();
        let me = nix::unistd::getpgrp().as_raw();
        assert!(group_alive(me), "this test's own group is alive");
    }

    #[test]
    fn a_dead_pid_is_not_running() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(
            !ProcessIdentity {
                pid,
                start_time: None
            }
            .is_running()
        );
    }
}
