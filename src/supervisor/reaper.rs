//! No escaped processes: a child that left the agent's process group (`setsid`, a daemon that
//! double-forked) must not outlive its stage and write into the tree after kern moved on.
//!
//! The one decision a reader must know: kern makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so every orphan below it is re-parented to kern instead of to
//! init and stays findable. After each supervised run, [`stop_escaped`] stops every child of
//! kern (and its descendants) that is neither in kern's own process group nor in a group a
//! supervisor is running right now ([`Active`]): kern's own helpers stay in its group, agents
//! and checks run in groups of their own, so an adopted process outside all of them escaped.
//! Only a process that is a subreaper sweeps: one that is not (a test harness calling the
//! supervisor) adopts nothing and must not touch its other children. Stopping is SIGTERM, a
//! grace, SIGKILL, and kern reaps exactly the pids it adopted (never `waitpid(-1)`, which could
//! take the status of a child tokio is waiting for). Linux only; elsewhere a no-op.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid};

/// How often a stopping descendant is checked for being gone.
const POLL: Duration = Duration::from_millis(20);

/// The process groups supervisors are running now (parallel jobs run several).
static ACTIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// A process group a supervisor is running, registered for as long as this lives.
pub(crate) struct Active(i32);

impl Active {
    /// Registers group `pgid` as running.
    pub(crate) fn register(pgid: i32) -> Active {
        if let Ok(mut active) = ACTIVE.lock() {
            active.push(pgid);
        }
        Active(pgid)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Ok(mut active) = ACTIVE.lock() {
            active.retain(|&g| g != self.0);
        }
    }
}

/// True when this process adopts orphans (kern made itself a subreaper).
fn is_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::get_child_subreaper().unwrap_or(false)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Makes kern a child subreaper; false where that is not possible.
pub(crate) fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Stops every descendant of this process outside its process group (see the module docs),
/// giving each `grace` between SIGTERM and SIGKILL, and returns the pids it stopped.
pub(crate) fn stop_escaped(grace: Duration) -> Vec<i32> {
    if !is_subreaper() {
        return Vec::new();
    }
    let me = getpid().as_raw();
    let my_group = getpgrp().as_raw();
    let mut stopped = Vec::new();
    // Killing a daemon re-parents its own children to kern: look again until none is left.
    for _ in 0..8 {
        let active = ACTIVE.lock().map(|a| a.clone()).unwrap_or_default();
        let escaped: Vec<i32> = escaped_below(me, my_group, &active)
            .into_iter()
            .filter(|pid| !stopped.contains(pid))
            .collect();
        if escaped.is_empty() {
            break;
        }
        for &pid in &escaped {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && escaped.iter().any(|&p| alive(p)) {
            reap(&escaped, me);
            std::thread::sleep(POLL);
        }
        for &pid in &escaped {
            if alive(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && escaped.iter().any(|&p| alive(p)) {
            reap(&escaped, me);
            std::thread::sleep(POLL);
        }
        reap(&escaped, me);
        stopped.extend(escaped);
    }
    stopped
}

/// Reaps those of `pids` that are kern's own (adopted) children and have exited.
fn reap(pids: &[i32], me: i32) {
    for &pid in pids {
        if parent_of(pid) == Some(me) {
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// True while `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match stat(pid) {
        Some(s) => s.state != 'Z' && s.state != 'X',
        None => false,
    }
}

fn parent_of(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.ppid)
}

/// The children of `root` outside `own_group` and the `active` groups, with all their
/// descendants.
fn escaped_below(root: i32, own_group: i32, active: &[i32]) -> Vec<i32> {
    let tree = children_by_parent();
    let mut out = Vec::new();
    let mut todo: Vec<i32> = tree
        .get(&root)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|(_, group)| *group != own_group && !active.contains(group))
        .map(|&(pid, _)| pid)
        .collect();
    while let Some(p) = todo.pop() {
        out.push(p);
        todo.extend(
            tree.get(&p)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|&(c, _)| c),
        );
    }
    out
}

/// Every living process by its parent, with its process group.
fn children_by_parent() -> HashMap<i32, Vec<(i32, i32)>> {
    let mut children: HashMap<i32, Vec<(i32, i32)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return children;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(s) = stat(pid)
            && s.state != 'Z'
            && s.state != 'X'
        {
            children.entry(s.ppid).or_default().push((pid, s.pgrp));
        }
    }
    children
}

/// The fields of `/proc/<pid>/stat` kern needs.
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: split after the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat { state, ppid, pgrp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_reads_this_process() {
        let me = stat(std::process::id() as i32).unwrap();
        assert_eq!(me.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(me.pgrp, getpgrp().as_raw());
        assert!(alive(std::process::id() as i32));
        assert!(!alive(i32::MAX));
    }
}
