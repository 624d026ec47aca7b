//! The fence on Linux: `kern __fence PLAN`, a tiny init kern re-executes itself as for each
//! fenced process. It makes the user, mount, PID, IPC and (unless the network is open)
//! network namespaces itself — no external program —, lays out the file system (`mounts.rs`),
//! brings the network up with kern's proxy on it (`net.rs`), watches the hidden files
//! (`watch.rs`) and the calls the fence will refuse (`notify.rs`), and starts the command with
//! no capabilities and Landlock beneath (`lockdown.rs`).
//!
//! The one decision a reader must know: three processes, each with one job. The first (the
//! one kern started: the process group leader the supervisor watches, killed with its group,
//! dying with kern) makes the namespaces and mounts, then forks the second — PID 1 of the new
//! PID namespace — and waits for it, forwarding signals. PID 1 mounts the namespace's `/proc`,
//! serves the network and the watch on threads, forks the command, forwards signals to it,
//! reaps orphans, and hands the command's exit status back; when PID 1 ends the kernel kills
//! everything left in the namespace, so nothing the command started outlives it. The first
//! process then ends as the command ended (its exit code, or the signal that killed it), so
//! the supervisor sees the command's end. A fork only happens while the process forking is
//! single-threaded (`unshare` of a user namespace requires it, and the command's process
//! allocates before `exec`).
//!
//! The denials log has two writers, PID 1's watch thread and its seccomp listener, appending
//! to one file: each line goes out in one `write` ([`log_denial`]), so two lines written at
//! once never interleave (a formatted write is many small ones, and two mixed lines were two
//! denials lost).

pub(crate) mod init;
mod lockdown;
pub(crate) mod mounts;
pub(crate) mod net;
mod notify;
mod watch;

/// Appends one denial (`{"kind": …, "target": …}`) and its newline to the denials log in a
/// single `write` (the log is opened for appending: one write lands whole, whatever the other
/// writer does).
pub(crate) fn log_denial(log: &std::fs::File, denial: &serde_json::Value) {
    use std::io::Write;
    let mut line = denial.to_string();
    line.push('\n');
    let mut log = log;
    let _ = log.write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::log_denial;
    use std::path::Path;

    #[test]
    fn two_writers_at_once_never_mix_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("denials.jsonl");
        let open = || {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .unwrap()
        };
        let writers: Vec<_> = ["read", "write"]
            .into_iter()
            .map(|kind| {
                let log = open();
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        let target = Path::new("/home/me/.ssh").join(format!("key-{i}"));
                        log_denial(&log, &serde_json::json!({"kind": kind, "target": target}));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4000);
        for line in lines {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(
                value["kind"] == "read" || value["kind"] == "write",
                "{line}"
            );
        }
    }
}
