//! One fenced process, from kern's side: its private folder (TMPDIR, placeholders, cache
//! layers, the proxy's socket, the plan), its proxy, the command that runs it fenced, and
//! afterwards what was denied.
//!
//! The one decision a reader must know: every session's folder lives in one folder of the
//! user's (`$TMPDIR/kern-fence-<uid>`, `0700`) that the fence hides, so a fenced process sees
//! its own TMPDIR and proxy socket and no other session's; the folder is removed when the
//! session ends, whatever the process did in it. The command is looked up on the `PATH` the
//! process will get before anything is made, so a missing agent is the same error with or
//! without the fence.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Mode;
use super::env::fenced_env;
use super::fence::Fence;
use super::plan::Scratch;
#[cfg(target_os = "linux")]
use super::plan::{self, Found};
use super::proxy::Proxy;
use super::report::{DenialKind, FenceReport};

/// The command that runs a process fenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// The program to start (kern itself as the fence's init on Linux).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its whole environment (nothing is inherited besides).
    pub env: Vec<(OsString, OsString)>,
    /// A descriptor of kern's the program must inherit under its own number: whoever spawns
    /// the command clears its close-on-exec flag in the child ([`inherit`]).
    pub inherit: Option<std::os::fd::RawFd>,
}

/// Clears the close-on-exec flag of `fd` in a child about to exec (a `pre_exec` step; only
/// `fcntl`, which is async-signal-safe).
pub(crate) fn inherit(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl(2) on a descriptor number; a bad one fails with EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Why a fenced process could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The program is not on the `PATH` (or at its path).
    #[error("`{}` not found", .0.display())]
    NotFound(PathBuf),
    /// The program is not executable.
    #[error("`{}` is not executable", .0.display())]
    NotExecutable(PathBuf),
    /// The session's folder or proxy could not be made.
    #[error("cannot prepare the fence: {0}")]
    Prepare(String),
}

/// The fence could not be made around a process: its cause tag and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetupFailure {
    /// The cause (`userns-off`, `max-userns`, …: `linux::init::Cause`).
    pub cause: String,
    /// What happened, in words.
    pub message: String,
}

/// A fenced process's session.
pub(crate) struct Session {
    dir: Option<tempfile::TempDir>,
    scratch: Scratch,
    proxy: Option<Proxy>,
    report: FenceReport,
    watch: Option<WatchLease>,
}

/// What the session needs from the process to fence.
pub(crate) struct Process<'a> {
    /// The program, as the invocation names it.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// The variables the invocation adds (kern's own).
    pub env: &'a [(String, String)],
    /// The variables it must not inherit (a hook's `GIT_DIR` of another repository, …).
    pub remove: &'a [String],
    /// Its working folder.
    pub cwd: &'a Path,
}

impl Session {
    /// Prepares the fence `fence` around `process` and returns the command to spawn.
    pub(crate) fn start(
        fence: &Fence,
        process: &Process<'_>,
    ) -> Result<(Session, Command), StartError> {
        let prepare = |what: &str, e: std::io::Error| StartError::Prepare(format!("{what}: {e}"));
        let inherited: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| !process.remove.iter().any(|r| name == r.as_str()))
            .collect();
        let path_var = process
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        let program = locate(process.program, process.cwd, path_var.as_deref())?;

        let parent = sessions_root().map_err(|e| prepare("its folder", e))?;
        sweep(&parent);
        let dir = tempfile::Builder::new()
            .prefix("s")
            .tempdir_in(&parent)
            .map_err(|e| prepare("its folder", e))?;
        let base = dir.path().to_path_buf();
        std::fs::write(
            base.join(OWNER),
            owner_of(std::process::id()).unwrap_or_default(),
        )
        .map_err(|e| prepare("its folder", e))?;
        let scratch = Scratch {
            tmp: base.join("tmp"),
            placeholders: base.join("ph"),
            layers: base.join("layers"),
            socket: base.join("sock").join("proxy.sock"),
            denials: base.join("denials.jsonl"),
            failure: base.join("failure"),
        };
        for folder in [&scratch.tmp, &scratch.placeholders, &scratch.layers] {
            std::fs::create_dir(folder).map_err(|e| prepare("its folder", e))?;
        }
        std::fs::create_dir(base.join("sock")).map_err(|e| prepare("its folder", e))?;

        let mut fence = fence.clone();
        fence.hidden.push(parent.clone());
        fence.shown.push(base.join("sock"));
        // The program (as named and where its link leads), kern's own (a `program:` agent may
        // call kern) and the folders of the PATH are reached where they are, also inside a
        // temporary folder the fence empties.
        let mut programs = vec![program.clone()];
        programs.extend(std::env::current_exe().ok());
        programs.extend(
            programs
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect::<Vec<_>>(),
        );
        let path_dirs: Vec<PathBuf> = path_var
            .as_deref()
            .map(|v| std::env::split_paths(v).collect())
            .unwrap_or_default();
        let reach = super::fence::reach_in_temp(&fence, &programs, &path_dirs);
        fence.shown.extend(reach);
        let tmp = scratch.tmp.to_string_lossy().into_owned();
        let mut fence_vars: Vec<(String, String)> = vec![
            ("TMPDIR".into(), tmp.clone()),
            ("TMP".into(), tmp.clone()),
            ("TEMP".into(), tmp.clone()),
            ("XDG_RUNTIME_DIR".into(), tmp),
        ];
        if fence.who != super::Who::Hook {
            // `.git` is read-only: `git status` need not try the index lock it may skip (and
            // be named for trying).
            fence_vars.push(("GIT_OPTIONAL_LOCKS".into(), "0".into()));
        }
        let mut report = FenceReport::new(Mode::Kern);
        report.network = Some(fence.network);
        report.hosts = fence.hosts.iter().map(ToString::to_string).collect();
        let Platform {
            program,
            args,
            proxy,
            watch,
        } = platform_command(&fence, &program, process, &scratch, &mut fence_vars)?;
        let env = fenced_env(&inherited, process.env, &fence_vars, &fence.pass_env);
        report.env_dropped = env.dropped;
        let command = Command {
            program,
            args,
            env: env.vars,
            inherit: watch.as_ref().map(WatchLease::raw),
        };
        Ok((
            Session {
                dir: Some(dir),
                scratch,
                proxy,
                report,
                watch,
            },
            command,
        ))
    }

    /// Ends the session after its process ended: what was denied, or why the fence could not
    /// be made. The session's folder is removed.
    pub(crate) fn finish(mut self) -> Result<FenceReport, SetupFailure> {
        let failure = std::fs::read_to_string(&self.scratch.failure).unwrap_or_default();
        let mut report = self.report.clone();
        if let Some(proxy) = self.proxy.take() {
            report.absorb(&proxy.finish());
        }
        let log = std::fs::read_to_string(&self.scratch.denials).unwrap_or_default();
        for line in log.lines() {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let kind = serde_json::from_value::<DenialKind>(value["kind"].clone());
            if let (Ok(kind), Some(target)) = (kind, value["target"].as_str()) {
                report.deny(kind, target);
            }
        }
        self.remove();
        // The process has ended: its init no longer reads the watch, another session may.
        if let Some(watch) = self.watch.take() {
            watch.give_back();
        }
        match failure.trim().split_once('\t') {
            Some((cause, message)) => Err(SetupFailure {
                cause: cause.to_string(),
                message: message.to_string(),
            }),
            None => Ok(report),
        }
    }

    fn remove(&mut self) {
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            if dir.close().is_err() {
                // A layer's work folder is left mode 000 by the kernel: open it up, then again.
                make_removable(&path);
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What a platform starts a fenced process with.
struct Platform {
    program: PathBuf,
    args: Vec<OsString>,
    proxy: Option<Proxy>,
    watch: Option<WatchLease>,
}

/// The inotify instances lent to the sessions' inits, kept for as long as kern runs (see
/// `Plan::watch_fd`: the last close of one that watched files waits for the kernel).
static WATCHES: std::sync::Mutex<Vec<std::os::fd::OwnedFd>> = std::sync::Mutex::new(Vec::new());

/// One inotify instance lent to one session until its process has ended; dropped unreturned
/// (a session that did not finish), it is closed instead, never lent to two inits at once.
struct WatchLease(std::os::fd::OwnedFd);

impl WatchLease {
    /// An instance from the pool, or a new one; `None` when the kernel makes none.
    #[cfg(target_os = "linux")]
    fn lend() -> Option<WatchLease> {
        let pooled = WATCHES.lock().ok().and_then(|mut pool| pool.pop());
        match pooled {
            Some(fd) => Some(WatchLease(fd)),
            None => nix::sys::inotify::Inotify::init(nix::sys::inotify::InitFlags::IN_CLOEXEC)
                .ok()
                .map(|inotify| WatchLease(inotify.into())),
        }
    }

    fn raw(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }

    /// Back to the pool, for the next session.
    fn give_back(self) {
        if let Ok(mut pool) = WATCHES.lock() {
            pool.push(self.0);
        }
    }
}

/// The proxy's variables for a fenced process that reaches kern's proxy at `port` on its
/// loopback.
fn proxy_vars(port: u16, vars: &mut Vec<(String, String)>) {
    let url = format!("http://127.0.0.1:{port}");
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        vars.push((name.into(), url.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        vars.push((name.into(), "localhost,127.0.0.1,::1".into()));
    }
    vars.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
}

/// What starts the fenced process on Linux: kern's own init with the plan (written into the
/// session's folder), its proxy on the session's socket.
#[cfg(target_os = "linux")]
fn platform_command(
    fence: &Fence,
    program: &Path,
    process: &Process<'_>,
    scratch: &Scratch,
    vars: &mut Vec<(String, String)>,
) -> Result<Platform, StartError> {
    let prepare = |what: &str, e: std::io::Error| StartError::Prepare(format!("{what}: {e}"));
    let found = |p: &Path| match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Found::Dir,
        Ok(_) => Found::Other,
        Err(_) if std::fs::symlink_metadata(p).is_ok() => Found::Other,
        Err(_) => Found::Missing,
    };
    let mut plan = plan::build(fence, program, process.args, process.cwd, scratch, &found);
    let watch = plan
        .mounts
        .iter()
        .any(|op| {
            matches!(
                op,
                plan::MountOp::HideFile { .. } | plan::MountOp::HideDir { .. }
            )
        })
        .then(WatchLease::lend)
        .flatten();
    plan.watch_fd = watch.as_ref().map(WatchLease::raw);
    for op in &plan.mounts {
        match op {
            plan::MountOp::HideFile { placeholder, .. } => {
                std::fs::write(placeholder, b"").map_err(|e| prepare("a placeholder", e))?;
            }
            plan::MountOp::Overlay {
                upper,
                work,
                memory: false,
                ..
            } => {
                std::fs::create_dir_all(upper).map_err(|e| prepare("a cache layer", e))?;
                std::fs::create_dir_all(work).map_err(|e| prepare("a cache layer", e))?;
            }
            plan::MountOp::Overlay {
                upper,
                memory: true,
                ..
            } => {
                if let Some(base) = upper.parent() {
                    std::fs::create_dir_all(base).map_err(|e| prepare("a layer", e))?;
                }
            }
            _ => {}
        }
    }
    let plan_path = scratch.tmp.with_file_name("plan.json");
    let bytes =
        serde_json::to_vec(&plan).map_err(|e| StartError::Prepare(format!("its plan: {e}")))?;
    std::fs::write(&plan_path, bytes).map_err(|e| prepare("its plan", e))?;
    let proxy = match &plan.network {
        plan::NetPlan::List { proxy_port, .. } => {
            proxy_vars(*proxy_port, vars);
            Some(
                Proxy::on_socket(&scratch.socket, fence.hosts.clone())
                    .map_err(|e| prepare("its proxy", e))?,
            )
        }
        plan::NetPlan::None | plan::NetPlan::Open => None,
    };
    Ok(Platform {
        program: PathBuf::from("/proc/self/exe"),
        args: vec![OsString::from("__fence"), plan_path.into_os_string()],
        proxy,
        watch,
    })
}

/// What starts the fenced process on macOS: `sandbox-exec` with the fence's Seatbelt profile,
/// kern's proxy on a loopback port. Untested by kern's CI (see `macos.rs`).
#[cfg(target_os = "macos")]
fn platform_command(
    fence: &Fence,
    program: &Path,
    process: &Process<'_>,
    scratch: &Scratch,
    vars: &mut Vec<(String, String)>,
) -> Result<Platform, StartError> {
    let prepare = |what: &str, e: std::io::Error| StartError::Prepare(format!("{what}: {e}"));
    let real = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let mut resolved = fence.clone();
    for list in [
        &mut resolved.writable,
        &mut resolved.read_only,
        &mut resolved.private,
        &mut resolved.hidden,
        &mut resolved.shown,
    ] {
        *list = list.iter().map(real).collect();
    }
    let (proxy, port) = match fence.network {
        super::Network::List => {
            let (proxy, port) =
                Proxy::on_loopback(fence.hosts.clone()).map_err(|e| prepare("its proxy", e))?;
            proxy_vars(port, vars);
            (Some(proxy), Some(port))
        }
        super::Network::None | super::Network::Open => (None, None),
    };
    let profile = super::macos::profile(&resolved, &real(&scratch.tmp), port);
    let (program, args) = super::macos::command(&profile, program, process.args);
    Ok(Platform {
        program,
        args,
        proxy,
        watch: None,
    })
}

/// Where the fence cannot be made at all.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn platform_command(
    _fence: &Fence,
    _program: &Path,
    _process: &Process<'_>,
    _scratch: &Scratch,
    _vars: &mut Vec<(String, String)>,
) -> Result<Platform, StartError> {
    Err(StartError::Prepare(
        "kern's fence is made on Linux and macOS only".into(),
    ))
}

/// `$TMPDIR/kern-fence-<uid>`: made `0700` when missing; refused when it is not this user's
/// own private folder (another user could otherwise plant what a fence binds).
fn sessions_root() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = nix::unistd::geteuid().as_raw();
    let root = std::env::temp_dir().join(format!("kern-fence-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "`{}` is not a private folder of this user — remove it",
            root.display()
        )));
    }
    Ok(root)
}

/// The session sockets and folders of the machine's temporary folders that exist now
/// (`secrets::TEMP_SESSIONS`: a name, or a prefix ending in `-`).
pub(crate) fn temp_sessions() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for pattern in super::secrets::TEMP_SESSIONS {
        let path = Path::new(pattern);
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let name = name.to_string_lossy();
        if !name.ends_with('-') {
            if std::fs::symlink_metadata(path).is_ok() {
                found.push(path.to_path_buf());
            }
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        found.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(name.as_ref()))
                .map(|e| e.path()),
        );
    }
    found
}

/// The file in a session's folder that names the kern it belongs to (`<pid> <start time>`).
const OWNER: &str = "owner";

/// `<pid> <start time>` of process `pid`, as `/proc/<pid>/stat` has them.
fn owner_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}

/// Removes the folders of sessions whose kern is gone (killed before it could end them): a
/// folder whose owner is not the same process any more, or that names none and is an hour old.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let owner = std::fs::read_to_string(path.join(OWNER)).ok();
        let age = || {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
        };
        if is_stale(owner.as_deref(), owner_of, age) && std::fs::remove_dir_all(&path).is_err() {
            make_removable(&path);
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether a session folder is another kern's that is gone (PURE but for the two lookups):
/// its `owner` names a process that is not the same any more. A folder whose owner file is
/// missing or still empty — a kern beside this one is making it right now — is stale only
/// once it is an hour old.
fn is_stale(
    owner: Option<&str>,
    owner_of: impl Fn(u32) -> Option<String>,
    age: impl Fn() -> Option<std::time::Duration>,
) -> bool {
    match owner.map(str::trim).filter(|o| !o.is_empty()) {
        Some(owner) => {
            let pid = owner.split_whitespace().next().and_then(|p| p.parse().ok());
            pid.and_then(owner_of).as_deref() != Some(owner)
        }
        None => age().is_some_and(|age| age > std::time::Duration::from_secs(3600)),
    }
}

fn make_removable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                make_removable(&entry.path());
            }
        }
    }
}

/// Where `program` runs from: a path (relative to `cwd`) as it is, a bare name on `path_var`.
pub(crate) fn locate(
    program: &Path,
    cwd: &Path,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, StartError> {
    use std::os::unix::fs::PermissionsExt;
    let bare = program.components().count() == 1 && !program.is_absolute();
    let candidate = if bare {
        path_var
            .map(std::env::split_paths)
            .into_iter()
            .flatten()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or_else(|| StartError::NotFound(program.to_path_buf()))?
    } else {
        cwd.join(program)
    };
    match std::fs::metadata(&candidate) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(candidate),
        Ok(_) => Err(StartError::NotExecutable(program.to_path_buf())),
        Err(_) => Err(StartError::NotFound(program.to_path_buf())),
    }
}

#[cfg(test)]
mod tests {
    use super::is_stale;
    use std::time::Duration;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_lent_watch_is_an_inotify_instance_closed_on_exec_and_goes_back_to_the_pool() {
        use super::{WATCHES, WatchLease};
        let is_inotify = |fd: i32| {
            std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
        };
        // SAFETY: fcntl(2) on a descriptor number.
        let close_on_exec = |fd: i32| unsafe { libc::fcntl(fd, libc::F_GETFD) } == libc::FD_CLOEXEC;
        let lease = WatchLease::lend().unwrap();
        let fd = lease.raw();
        assert!(is_inotify(fd) && close_on_exec(fd));
        // Two sessions at once never share one.
        let other = WatchLease::lend().unwrap();
        assert_ne!(other.raw(), fd);
        lease.give_back();
        assert!(is_inotify(fd), "kept open for the next session");
        other.give_back();
        let pooled = WATCHES.lock().unwrap().len();
        assert!(pooled >= 1, "{pooled}");
    }

    #[test]
    fn a_session_folder_is_stale_only_when_its_kern_is_gone_or_it_is_old_and_ownerless() {
        let alive = |pid: u32| (pid == 42).then(|| "42 1000".to_string());
        let new = || Some(Duration::from_secs(1));
        let old = || Some(Duration::from_secs(7200));
        for (owner, age_is_old, stale) in [
            (Some("42 1000"), false, false),
            (Some("42 1000\n"), false, false),
            // The same pid, another process (started later).
            (Some("42 999"), false, true),
            (Some("7 1000"), false, true),
            // Being made by a kern beside this one: no owner yet, or an empty one.
            (None, false, false),
            (Some(""), false, false),
            (Some("  \n"), false, false),
            (None, true, true),
            (Some(""), true, true),
        ] {
            let got = if age_is_old {
                is_stale(owner, alive, old)
            } else {
                is_stale(owner, alive, new)
            };
            assert_eq!(got, stale, "{owner:?}, old: {age_is_old}");
        }
    }
}
