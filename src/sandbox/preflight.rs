//! Can the fence be made here? kern answers by making one: a fenced run of kern itself that
//! exits at once (`kern __fence-ok`) — the same namespaces, mounts and network a stage gets.
//! A run, `kern -n` and `kern doctor` ask before any agent starts.
//!
//! The one decision a reader must know: the answer is never guessed from settings files. The
//! kernel is asked by doing what a stage will do, and only when that fails are the settings
//! read, to name the cause and the way out (the setting to change, a container that allows
//! it, or `--sandbox off` to accept the risk knowingly).

use std::path::Path;
use std::time::{Duration, Instant};

use super::session::{Process, Session};
use super::{Fence, Network, Who};

/// What the preflight found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Preflight {
    /// The fence works; it took this long to make and end.
    Works(Duration),
    /// It cannot be made: what is missing, and the ways out.
    Unavailable {
        /// What is missing, in words.
        missing: String,
        /// The ways out.
        fix: String,
    },
}

/// The argument that makes kern exit 0 at once (the preflight's fenced command).
pub(crate) const OK_ARG: &str = "__fence-ok";

/// Makes a fence with `network` around `kern __fence-ok` in `cwd` and says whether it worked.
pub(crate) fn check(network: Network, cwd: &Path) -> Preflight {
    if !cfg!(any(target_os = "linux", target_os = "macos")) {
        return Preflight::Unavailable {
            missing: "kern's fence is made on Linux and macOS only".into(),
            fix: fix_for("other"),
        };
    }
    let Ok(exe) = std::env::current_exe() else {
        return Preflight::Unavailable {
            missing: "kern cannot find its own program to start the fence".into(),
            fix: fix_for("other"),
        };
    };
    let fence = Fence {
        who: Who::Check,
        network,
        writable: vec![cwd.to_path_buf()],
        read_only: Vec::new(),
        private: Vec::new(),
        temp: Vec::new(),
        hidden: Vec::new(),
        shown: Vec::new(),
        hosts: Vec::new(),
        pass_env: Vec::new(),
    };
    let started = Instant::now();
    let args = [OK_ARG.to_string()];
    let process = Process {
        program: &exe,
        args: &args,
        env: &[],
        remove: &[],
        cwd,
    };
    let (session, command) = match Session::start(&fence, &process) {
        Ok(started) => started,
        Err(e) => {
            return Preflight::Unavailable {
                missing: e.to_string(),
                fix: fix_for("other"),
            };
        }
    };
    let mut spawn = std::process::Command::new(&command.program);
    if let Some(fd) = command.inherit {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure only calls fcntl(2), which is async-signal-safe.
        unsafe {
            spawn.pre_exec(move || super::session::inherit(fd));
        }
    }
    let output = spawn
        .args(&command.args)
        .env_clear()
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    let finished = session.finish();
    match (output, finished) {
        (_, Err(failure)) => Preflight::Unavailable {
            missing: failure.message,
            fix: fix_for(&failure.cause),
        },
        (Ok(out), Ok(_)) if out.status.success() => Preflight::Works(started.elapsed()),
        (Ok(out), Ok(_)) => Preflight::Unavailable {
            missing: format!(
                "a fenced test process failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            fix: fix_for("other"),
        },
        (Err(e), Ok(_)) => Preflight::Unavailable {
            missing: format!("cannot start kern's fence: {e}"),
            fix: fix_for("other"),
        },
    }
}

/// The layers kern's fence has on this machine, in words: the namespaces, and Landlock with
/// its ABI where the kernel has it.
pub(crate) fn layers() -> String {
    if cfg!(target_os = "macos") {
        return "a Seatbelt profile".into();
    }
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the ABI version; no memory is passed.
    #[cfg(target_os = "linux")]
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) };
    #[cfg(not(target_os = "linux"))]
    let abi = -1i64;
    if abi > 0 {
        format!("user, mount, network and PID namespaces, Landlock ABI {abi}")
    } else {
        "user, mount, network and PID namespaces, no Landlock in this kernel".into()
    }
}

/// The ways out for a failure's cause tag (`linux::init::Cause`).
pub(crate) fn fix_for(cause: &str) -> String {
    let setting = match cause {
        "userns-off" => {
            "allow them: `sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d to keep it)"
        }
        "apparmor" => {
            "allow them: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or give kern an AppArmor profile with `userns,`"
        }
        "max-userns" => {
            "allow them: `sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d to keep it)"
        }
        "nesting" => "run kern less deeply nested (outside the container it runs in)",
        "no-userns" => "use a kernel built with user namespaces (CONFIG_USER_NS)",
        "refused" => {
            "allow user namespaces where kern runs (Docker: `--security-opt seccomp=unconfined`, or a profile allowing `unshare` and `clone`; Podman and most VMs allow them)"
        }
        "mount" => {
            "run kern where a user namespace may mount (outside a container that masks /proc, or with `--security-opt systempaths=unconfined`)"
        }
        _ => "run kern on Linux with user namespaces, or on macOS",
    };
    format!(
        "{setting}; or run kern inside a container or VM whose damage you accept; or pass `--sandbox off` (KERN_SANDBOX=off) to run the agent unfenced, knowingly"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_has_its_setting_and_the_two_other_ways_out() {
        for (cause, setting) in [
            ("userns-off", "kernel.unprivileged_userns_clone=1"),
            ("apparmor", "kernel.apparmor_restrict_unprivileged_userns=0"),
            ("max-userns", "user.max_user_namespaces=15000"),
            ("refused", "seccomp=unconfined"),
            ("mount", "masks /proc"),
            ("other", "on Linux with user namespaces"),
        ] {
            let fix = fix_for(cause);
            assert!(fix.contains(setting), "{cause}: {fix}");
            assert!(fix.contains("--sandbox off"), "{cause}: {fix}");
            assert!(fix.contains("container or VM"), "{cause}: {fix}");
        }
    }
}
