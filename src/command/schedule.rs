//! `kern schedule`: a night every day, started by the system's own scheduler (DESIGN.md
//! section 20) — a systemd user timer and service where systemd runs, a launchd agent on
//! macOS, and elsewhere the crontab line to add — each running `kern watch` with the night's
//! arguments in this repository. `--list` shows the nights kern scheduled, `--remove` takes
//! this repository's away and leaves nothing behind.
//!
//! Decisions a reader must know:
//! - The files are plain text named after the repository (`kern-<name>.service`, `.timer`;
//!   `dev.kern-<name>.plist`), written in the person's own folders (`$XDG_CONFIG_HOME`, the
//!   home folder): no root. A second repository of the same name gets `kern-<name>-<hash>`.
//! - Installing asks the scheduler to take the files (`systemctl --user daemon-reload`, then
//!   `enable --now` the timer; `launchctl bootstrap`); where that cannot be done here (no user
//!   session bus over ssh, no systemctl), the files stay written and kern prints the commands
//!   to run. The night's arguments are checked now, not at 23:00.
//! - What the text says is pure (`schedule/units.rs`, checked against golden files); this file
//!   writes, runs the scheduler's commands and removes.

mod units;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::Scheduler;
use crate::error::{Error, Result};
use crate::repository::Repository;
use crate::settings::Settings;
use crate::supervisor::probe::{self, Probe};
use crate::timestamp::Until;
use units::Night;

/// How long a scheduler's command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);

/// What `kern schedule` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// When the night starts every day.
    pub at: Option<Until>,
    /// When it ends (the run's `--until`).
    pub until: Option<Until>,
    /// Which scheduler.
    pub scheduler: Scheduler,
    /// `--list`.
    pub list: bool,
    /// `--remove`.
    pub remove: bool,
    /// The night's arguments.
    pub args: Vec<String>,
}

/// The scheduler this machine has, for `auto`.
fn which(asked: Scheduler) -> Scheduler {
    match asked {
        Scheduler::Auto if cfg!(target_os = "macos") => Scheduler::Launchd,
        // systemd's own test of whether it runs the machine (`sd_booted`).
        Scheduler::Auto if Path::new("/run/systemd/system").is_dir() => Scheduler::Systemd,
        Scheduler::Auto => Scheduler::Cron,
        other => other,
    }
}

/// Runs `kern schedule`.
pub(crate) fn run(settings: &Settings, request: &Request) -> Result<()> {
    let kind = which(request.scheduler);
    let dirs = Dirs::of(settings);
    if request.list {
        return list(kind, &dirs);
    }
    let repo = Repository::discover(&settings.cwd)?;
    let top = repo.top().to_path_buf();
    if request.remove {
        return remove(kind, &dirs, &top);
    }
    let Some(Until::Clock { hour, minute }) = request.at else {
        return Err(Error::Usage(
            "kern schedule needs --at, the time the night starts every day (--at 23:00)".into(),
        ));
    };
    let mut args = vec!["watch".to_string()];
    if let Some(Until::Clock { hour, minute }) = request.until {
        args.extend(["--until".to_string(), format!("{hour:02}:{minute:02}")]);
    }
    args.extend(request.args.iter().cloned());
    check_args(&args[1..])?;
    let kern = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Error::io("the kern executable", e))?;
    let night = Night {
        name: unit_name(kind, &dirs, &top),
        repo: top,
        kern,
        args,
        at: (hour, minute),
        path: settings
            .path_var
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    };
    match kind {
        Scheduler::Launchd => install_launchd(&night, &dirs),
        Scheduler::Cron | Scheduler::Auto => {
            say(&format!(
                "cron starts this night: add the line below with `crontab -e` (it runs `kern watch` in {} every day at {})",
                night.repo.display(),
                night.at_text()
            ));
            out(&units::crontab_line(&night))
        }
        Scheduler::Systemd => install_systemd(&night, &dirs),
    }
}

/// The folders each scheduler keeps its files in.
struct Dirs {
    systemd: PathBuf,
    launch_agents: PathBuf,
    logs: PathBuf,
    config_home: PathBuf,
}

impl Dirs {
    fn of(settings: &Settings) -> Dirs {
        Dirs {
            systemd: settings.config_home.join("systemd/user"),
            launch_agents: settings.home.join("Library/LaunchAgents"),
            logs: settings.home.join("Library/Logs"),
            config_home: settings.config_home.clone(),
        }
    }
}

/// The night's arguments as a run would read them, checked now: a typo is found at the
/// prompt, not at 23:00.
fn check_args(args: &[String]) -> Result<()> {
    let argv = std::iter::once("kern".to_string()).chain(args.iter().cloned());
    let matches = crate::cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| {
            Error::Usage(format!(
                "the night's arguments (after `--`): {}",
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
            ))
        })?;
    let cli = <crate::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .map_err(|e| Error::Usage(format!("the night's arguments (after `--`): {e}")))?;
    if cli.command.is_some() || cli.dry_run || cli.run.detach {
        return Err(Error::Usage(
            "the night's arguments (after `--`) are a run's — ITERATIONS, DELAY and options, as `kern 20 30 --check 'cargo test'` takes them; not a subcommand, -n or --detach".into(),
        ));
    }
    Ok(())
}

/// `kern-<name>` for the repository at `top`; `kern-<name>-<hash>` when a night of another
/// repository of the same name holds that one.
fn unit_name(kind: Scheduler, dirs: &Dirs, top: &Path) -> String {
    let base = top.file_name().map_or_else(
        || "root".into(),
        |n| crate::text::slug(&n.to_string_lossy()),
    );
    let name = format!("kern-{base}");
    let other = match kind {
        Scheduler::Launchd => read(&dirs.launch_agents.join(format!("dev.{name}.plist")))
            .and_then(|p| units::read_plist(&p)),
        _ => read(&dirs.systemd.join(format!("{name}.service"))).and_then(|s| {
            units::read_systemd(&s, &read(&dirs.systemd.join(format!("{name}.timer")))?)
        }),
    };
    match other {
        Some(listed) if Path::new(&listed.repo) != top => {
            format!("{name}-{}", crate::state::path_hash8(top))
        }
        _ => name,
    }
}

fn install_systemd(night: &Night, dirs: &Dirs) -> Result<()> {
    let service = dirs.systemd.join(format!("{}.service", night.name));
    let timer = dirs.systemd.join(format!("{}.timer", night.name));
    std::fs::create_dir_all(&dirs.systemd).map_err(|e| Error::io(&dirs.systemd, e))?;
    crate::atomic_file::write(&service, units::systemd_service(night).as_bytes())?;
    crate::atomic_file::write(&timer, units::systemd_timer(night).as_bytes())?;
    say(&format!(
        "a night in {} every day at {}: `{}`",
        night.repo.display(),
        night.at_text(),
        night.command_line()
    ));
    say(&format!(
        "wrote {} and {}",
        service.display(),
        timer.display()
    ));
    let unit = format!("{}.timer", night.name);
    let taken = systemctl(&["daemon-reload"], &night.repo)
        .and_then(|()| systemctl(&["enable", "--now", &unit], &night.repo));
    match taken {
        Ok(()) => say(&format!(
            "systemd starts it: `systemctl --user list-timers {unit}` shows the next start; so that it starts while you are logged out too, run `loginctl enable-linger $USER` once"
        )),
        Err(why) => say(&format!(
            "systemd did not take it here ({why}) — in a session of yours, run: systemctl --user daemon-reload && systemctl --user enable --now {unit}"
        )),
    }
    Ok(())
}

fn install_launchd(night: &Night, dirs: &Dirs) -> Result<()> {
    let plist = dirs.launch_agents.join(format!("{}.plist", night.label()));
    let log = dirs.logs.join(format!("{}.log", night.name));
    std::fs::create_dir_all(&dirs.launch_agents).map_err(|e| Error::io(&dirs.launch_agents, e))?;
    std::fs::create_dir_all(&dirs.logs).map_err(|e| Error::io(&dirs.logs, e))?;
    crate::atomic_file::write(&plist, units::launchd_plist(night, &log).as_bytes())?;
    say(&format!(
        "a night in {} every day at {}: `{}`",
        night.repo.display(),
        night.at_text(),
        night.command_line()
    ));
    say(&format!("wrote {}", plist.display()));
    let domain = format!("gui/{}", nix::unistd::getuid());
    // A night scheduled before is replaced: out first (nothing to take out is fine).
    let _ = launchctl(
        &["bootout", &format!("{domain}/{}", night.label())],
        &night.repo,
    );
    match launchctl(
        &["bootstrap", &domain, &plist.display().to_string()],
        &night.repo,
    ) {
        Ok(()) => say("launchd starts it (`launchctl print` shows it)"),
        Err(why) => say(&format!(
            "launchd did not take it here ({why}) — run: launchctl bootstrap {domain} {}",
            crate::text::shell_quote(&plist.display().to_string())
        )),
    }
    Ok(())
}

/// `--list`: every night kern scheduled with `kind`, one line each on stdout.
fn list(kind: Scheduler, dirs: &Dirs) -> Result<()> {
    let mut lines = Vec::new();
    match kind {
        Scheduler::Systemd => {
            for (name, service) in files(&dirs.systemd, "kern-", ".service") {
                let timer = read(&dirs.systemd.join(format!("{name}.timer"))).unwrap_or_default();
                if let Some(l) = units::read_systemd(&service, &timer) {
                    lines.push(format!(
                        "{name}\tevery day at {}\t{}\t{}",
                        l.at, l.repo, l.command
                    ));
                }
            }
        }
        Scheduler::Launchd => {
            for (label, plist) in files(&dirs.launch_agents, "dev.kern-", ".plist") {
                if let Some(l) = units::read_plist(&plist) {
                    let name = label.trim_start_matches("dev.");
                    lines.push(format!(
                        "{name}\tevery day at {}\t{}\t{}",
                        l.at, l.repo, l.command
                    ));
                }
            }
        }
        Scheduler::Cron | Scheduler::Auto => {
            say(
                "kern writes nothing for cron: `crontab -l | grep 'kern watch'` lists the lines you added",
            );
            return Ok(());
        }
    }
    if lines.is_empty() {
        say("no night is scheduled (kern schedule --at 23:00 -- 20 30 schedules one here)");
    }
    for line in lines {
        out(&line)?;
    }
    Ok(())
}

/// `--remove`: this repository's night taken from the scheduler, its files deleted.
fn remove(kind: Scheduler, dirs: &Dirs, top: &Path) -> Result<()> {
    let mine = |repo: &str| Path::new(repo) == top;
    let mut removed = Vec::new();
    match kind {
        Scheduler::Systemd => {
            for (name, service) in files(&dirs.systemd, "kern-", ".service") {
                let timer_path = dirs.systemd.join(format!("{name}.timer"));
                let timer = read(&timer_path).unwrap_or_default();
                if !units::read_systemd(&service, &timer).is_some_and(|l| mine(&l.repo)) {
                    continue;
                }
                let unit = format!("{name}.timer");
                if let Err(why) = systemctl(&["disable", "--now", &unit], top) {
                    say(&format!(
                        "systemd could not stop it here ({why}): its files go all the same"
                    ));
                }
                let wants = dirs.systemd.join("timers.target.wants").join(&unit);
                for path in [
                    dirs.systemd.join(format!("{name}.service")),
                    timer_path,
                    wants,
                ] {
                    if std::fs::symlink_metadata(&path).is_ok() {
                        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                        removed.push(path);
                    }
                }
                let _ = systemctl(&["daemon-reload"], top);
            }
            // The folders kern made for them go too, when nothing else is in them.
            remove_empty(&dirs.systemd.join("timers.target.wants"), &dirs.config_home);
            remove_empty(&dirs.systemd, &dirs.config_home);
        }
        Scheduler::Launchd => {
            for (label, plist) in files(&dirs.launch_agents, "dev.kern-", ".plist") {
                if !units::read_plist(&plist).is_some_and(|l| mine(&l.repo)) {
                    continue;
                }
                let domain = format!("gui/{}", nix::unistd::getuid());
                let _ = launchctl(&["bootout", &format!("{domain}/{label}")], top);
                let kern_name = label.trim_start_matches("dev.");
                for path in [
                    dirs.launch_agents.join(format!("{label}.plist")),
                    dirs.logs.join(format!("{kern_name}.log")),
                ] {
                    if std::fs::symlink_metadata(&path).is_ok() {
                        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                        removed.push(path);
                    }
                }
            }
        }
        Scheduler::Cron | Scheduler::Auto => {
            say(
                "kern writes nothing for cron: remove the line from your crontab with `crontab -e`",
            );
            return Ok(());
        }
    }
    if removed.is_empty() {
        say(&format!("no night is scheduled for {}", top.display()));
    }
    for path in removed {
        say(&format!("removed {}", path.display()));
    }
    Ok(())
}

/// The files in `dir` named `<prefix>…<suffix>`: their names without the suffix (the prefix
/// kept), and their text.
fn files(dir: &Path, prefix: &str, suffix: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_prefix(prefix).and(name.strip_suffix(suffix))?;
            Some((stem.to_string(), read(&e.path())?))
        })
        .collect();
    found.sort();
    found
}

/// Removes `dir` and the empty folders above it, up to `stop` (not included).
fn remove_empty(dir: &Path, stop: &Path) {
    let mut dir = dir.to_path_buf();
    while dir.starts_with(stop) && dir != stop && std::fs::remove_dir(&dir).is_ok() {
        if !dir.pop() {
            break;
        }
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `systemctl --user ARGS`: `Err` says why it did not work (not installed, no session bus).
fn systemctl(args: &[&str], cwd: &Path) -> std::result::Result<(), String> {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    command("systemctl", &all, cwd)
}

fn launchctl(args: &[&str], cwd: &Path) -> std::result::Result<(), String> {
    command("launchctl", args, cwd)
}

fn command(program: &str, args: &[&str], cwd: &Path) -> std::result::Result<(), String> {
    match probe::run(Probe::new(
        program,
        args.iter().copied(),
        cwd,
        COMMAND_LIMIT,
    )) {
        Ok(out) if out.end.success() => Ok(()),
        Ok(out) => {
            let said = crate::text::first_line(&out.output);
            let said = if said.trim().is_empty() {
                out.end.describe()
            } else {
                crate::text::truncate(said.trim(), 200)
            };
            Err(format!("`{program} {}`: {said}", args.join(" ")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("`{program}` is not installed here"))
        }
        Err(e) => Err(format!("`{program}` could not run: {e}")),
    }
}

/// A line for the person (stderr).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "kern: {line}");
}

/// Machine output (stdout): a crontab line, the list.
fn out(line: &str) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match writeln!(out, "{line}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("stdout", e)),
        _ => Ok(()),
    }
}
