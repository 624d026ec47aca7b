//! `kern schedule` (DESIGN.md section 20): the night installed with the system's own scheduler
//! — a systemd user timer and service (checked by `systemd-analyze verify` where it is
//! installed; the exact text is checked against golden files by the unit tests of
//! `command/schedule/units.rs`), a launchd agent, a crontab line — `--list` and `--remove`,
//! which leaves nothing behind. Every test has its own HOME and XDG_CONFIG_HOME, and fake
//! `systemctl` and `launchctl` that log what they are asked: the person's own `~/.config` and
//! user session are never touched.

use std::path::{Path, PathBuf};

use crate::support::fakes::fake;
use crate::support::project::{KernRun, Project};

/// A project in a folder named `my app` (the unit is named after it), with its own HOME and
/// config folder, and fakes of the schedulers' commands that log to `scheduler.log`.
struct Scheduled {
    p: Project,
    home: PathBuf,
    config: PathBuf,
    log: PathBuf,
    bin: PathBuf,
}

impl Scheduled {
    fn new() -> Scheduled {
        let p = Project::named("my app", "master", "- [ ] Add the parser\n");
        let home = p.outside.path().join("home");
        let config = home.join(".config");
        std::fs::create_dir_all(&config).unwrap();
        let log = p.outside.path().join("scheduler.log");
        // As the real systemctl does, `enable` links the timer into timers.target.wants and
        // `disable` removes the link.
        let systemctl = format!(
            "#!/bin/sh\necho \"systemctl $*\" >> '{log}'\nd=\"$XDG_CONFIG_HOME/systemd/user\"\ncase \"$2 $3\" in\n  'enable --now') mkdir -p \"$d/timers.target.wants\" && ln -sf \"$d/$4\" \"$d/timers.target.wants/$4\" ;;\n  'disable --now') rm -f \"$d/timers.target.wants/$4\" ;;\nesac\n",
            log = log.display()
        );
        fake(&p, "systemctl", &systemctl);
        let bin = fake(
            &p,
            "launchctl",
            &format!("#!/bin/sh\necho \"launchctl $*\" >> '{}'\n", log.display()),
        );
        Scheduled {
            p,
            home,
            config,
            log,
            bin,
        }
    }

    /// `kern schedule ARGS` with this HOME and config folder and the fakes first on PATH.
    fn schedule(&self, args: &[&str]) -> KernRun<'_> {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.p
            .run(&["schedule"])
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("PATH", path)
    }

    fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Every file under `dir`, however deep.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_systemd_timer_and_service_are_written_taken_listed_and_removed_without_a_trace() {
    let s = Scheduled::new();
    let out = s
        .schedule(&[
            "--scheduler",
            "systemd",
            "--at",
            "23:00",
            "--until",
            "07:00",
            "--",
            "20",
            "30",
            "--check",
            "cargo test",
        ])
        .expect(0);
    let units = s.config.join("systemd/user");
    let service = std::fs::read_to_string(units.join("kern-my-app.service")).unwrap();
    let timer = std::fs::read_to_string(units.join("kern-my-app.timer")).unwrap();
    assert!(
        service.contains(&format!("\nWorkingDirectory={}\n", s.p.path().display())),
        "{service}"
    );
    assert!(
        service.contains(" watch --until 07:00 20 30 --check \"cargo test\"\n"),
        "{service}"
    );
    assert!(timer.contains("\nOnCalendar=*-*-* 23:00:00\n"), "{timer}");
    assert_eq!(
        s.logged(),
        "systemctl --user daemon-reload\nsystemctl --user enable --now kern-my-app.timer\n"
    );
    out.stderr_has("systemd starts it: `systemctl --user list-timers kern-my-app.timer`");
    // systemd's own check, where systemd is installed.
    if let Ok(verify) = std::process::Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(units.join("kern-my-app.service"))
        .arg(units.join("kern-my-app.timer"))
        .env("XDG_RUNTIME_DIR", s.p.outside.path())
        .env("HOME", &s.home)
        .env("XDG_CONFIG_HOME", &s.config)
        .output()
    {
        let said = String::from_utf8_lossy(&verify.stderr);
        assert!(verify.status.success(), "systemd-analyze verify: {said}");
        assert!(
            !said.contains("kern-my-app"),
            "systemd-analyze verify: {said}"
        );
    }
    let listed = s.schedule(&["--scheduler", "systemd", "--list"]).expect(0);
    assert!(
        listed.stdout.starts_with(&format!(
            "kern-my-app\tevery day at 23:00\t{}\t",
            s.p.path().display()
        )),
        "{}",
        listed.stdout
    );
    let removed = s
        .schedule(&["--scheduler", "systemd", "--remove"])
        .expect(0);
    removed.stderr_has("removed ");
    assert!(
        s.logged()
            .contains("systemctl --user disable --now kern-my-app.timer\n"),
        "{}",
        s.logged()
    );
    assert_eq!(files_under(&s.home), Vec::<PathBuf>::new(), "nothing left");
    let left: Vec<PathBuf> = std::fs::read_dir(&s.config)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "no empty folder left");
    let listed = s.schedule(&["--scheduler", "systemd", "--list"]).expect(0);
    assert_eq!(listed.stdout, "");
    listed.stderr_has("no night is scheduled");
}

#[test]
fn without_a_user_session_the_units_are_written_and_the_commands_to_run_said() {
    let s = Scheduled::new();
    fake(
        &s.p,
        "systemctl",
        "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n",
    );
    let out = s
        .schedule(&["--scheduler", "systemd", "--at", "22:30", "--", "10", "30"])
        .expect(0);
    out.stderr_has("systemd did not take it here (`systemctl --user daemon-reload`: Failed to connect to bus: No medium found) — in a session of yours, run: systemctl --user daemon-reload && systemctl --user enable --now kern-my-app.timer");
    assert!(s.config.join("systemd/user/kern-my-app.timer").exists());
    // Taken away again without a session: the files and the folders made for them go.
    let removed = s
        .schedule(&["--scheduler", "systemd", "--remove"])
        .expect(0);
    removed.stderr_has("systemd could not stop it here");
    let left: Vec<PathBuf> = std::fs::read_dir(&s.config)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "nothing left");
}

#[test]
fn a_launchd_agent_is_written_bootstrapped_listed_and_removed_without_a_trace() {
    let s = Scheduled::new();
    s.schedule(&["--scheduler", "launchd", "--at", "23:15", "--", "20", "30"])
        .expect(0);
    let plist_path = s.home.join("Library/LaunchAgents/dev.kern-my-app.plist");
    let plist = std::fs::read_to_string(&plist_path).unwrap();
    assert!(
        plist.contains("<key>Hour</key>\n\t\t<integer>23</integer>"),
        "{plist}"
    );
    assert!(
        plist.contains("<key>Minute</key>\n\t\t<integer>15</integer>"),
        "{plist}"
    );
    let uid = nix::unistd::getuid();
    assert!(
        s.logged().contains(&format!(
            "launchctl bootstrap gui/{uid} {}\n",
            plist_path.display()
        )),
        "{}",
        s.logged()
    );
    let listed = s.schedule(&["--scheduler", "launchd", "--list"]).expect(0);
    assert!(
        listed
            .stdout
            .starts_with("kern-my-app\tevery day at 23:15\t"),
        "{}",
        listed.stdout
    );
    std::fs::write(s.home.join("Library/Logs/kern-my-app.log"), "a night\n").unwrap();
    s.schedule(&["--scheduler", "launchd", "--remove"])
        .expect(0);
    assert!(
        s.logged()
            .contains(&format!("launchctl bootout gui/{uid}/dev.kern-my-app\n")),
        "{}",
        s.logged()
    );
    assert_eq!(files_under(&s.home), Vec::<PathBuf>::new(), "nothing left");
}

#[test]
fn where_there_is_neither_the_crontab_line_is_printed_and_nothing_written() {
    let s = Scheduled::new();
    let out = s
        .schedule(&["--scheduler", "cron", "--at", "23:00", "--", "20", "30"])
        .expect(0);
    let line = out.stdout.trim_end();
    assert!(
        line.starts_with(&format!(
            "0 23 * * * cd '{}' && PATH=",
            s.p.path().display()
        )),
        "{line}"
    );
    assert!(line.ends_with(" watch 20 30 >/dev/null 2>&1"), "{line}");
    out.stderr_has("add the line below with `crontab -e`");
    assert_eq!(files_under(&s.home), Vec::<PathBuf>::new());
    s.schedule(&["--scheduler", "cron", "--remove"])
        .expect(0)
        .stderr_has("remove the line from your crontab with `crontab -e`");
}

#[test]
fn the_nights_arguments_are_checked_when_it_is_scheduled() {
    let s = Scheduled::new();
    s.schedule(&[
        "--scheduler",
        "systemd",
        "--at",
        "23:00",
        "--",
        "20",
        "--frobnicate",
    ])
    .expect(2)
    .stderr_has("the night's arguments (after `--`): unexpected argument '--frobnicate'");
    s.schedule(&["--scheduler", "systemd", "--at", "23:00", "--", "status"])
        .expect(2)
        .stderr_has("not a subcommand, -n or --detach");
    s.schedule(&["--scheduler", "systemd", "--at", "7pm", "--", "20"])
        .expect(2)
        .stderr_has("`7pm` is not a time of day — write it as 23:00");
    assert_eq!(files_under(&s.home), Vec::<PathBuf>::new());
    assert_eq!(s.logged(), "");
}
