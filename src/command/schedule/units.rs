//! What `kern schedule` writes, as pure text: a systemd user service and timer, a launchd
//! agent's plist, a crontab line — each one plain text a person can read, naming the
//! repository and the command it runs — and what `--list` reads back from the files it wrote.
//!
//! The one decision a reader must know: every scheduler starts the same command, `kern watch`
//! with the night's arguments in the repository's top folder, with the PATH the person had when
//! scheduling (an agent CLI installed under the home folder is found at 23:00 as it was at the
//! prompt). Each format's quoting is its own: systemd's `ExecStart=` (double quotes, `%%`,
//! `$$`), XML for launchd, `sh` words and `\%` for cron.

use std::path::{Path, PathBuf};

/// One scheduled night.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Night {
    /// The unit's name without its suffix (`kern-app`); launchd's label is `dev.` + it.
    pub name: String,
    /// The repository's top folder, where it runs.
    pub repo: PathBuf,
    /// The kern executable.
    pub kern: PathBuf,
    /// kern's arguments: `watch`, then the night's.
    pub args: Vec<String>,
    /// When it starts every day: hour and minute.
    pub at: (u32, u32),
    /// The PATH it runs with.
    pub path: Option<String>,
}

impl Night {
    /// `23:00`.
    pub(crate) fn at_text(&self) -> String {
        format!("{:02}:{:02}", self.at.0, self.at.1)
    }

    /// The command as a shell reads it: `'/usr/bin/kern' watch --until 07:00 20 30`.
    pub(crate) fn command_line(&self) -> String {
        std::iter::once(self.kern.display().to_string())
            .chain(self.args.iter().cloned())
            .map(|w| crate::text::shell_quote(&w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// launchd's label: `dev.kern-app`.
    pub(crate) fn label(&self) -> String {
        format!("dev.{}", self.name)
    }
}

/// The header every file kern writes begins with, which `--list` recognises.
const MARK: &str = "kern schedule";

/// The systemd user service: `kern watch` in the repository, stopped as a whole on `stop`.
pub(crate) fn systemd_service(night: &Night) -> String {
    let mut out = format!(
        "# Written by `{MARK}` for {repo}: a night of kern every day at {at}.\n# `kern schedule --remove` in that repository removes it.\n[Unit]\nDescription=kern: a night of tasks in {described}\n\n[Service]\nType=simple\nWorkingDirectory={dir}\n",
        repo = night.repo.display(),
        described = night.repo.display().to_string().replace('%', "%%"),
        at = night.at_text(),
        // A path, never quoted there (systemd takes the quotes for part of it).
        dir = night.repo.display().to_string().replace('%', "%%"),
    );
    if let Some(path) = &night.path {
        out.push_str(&format!(
            "Environment={}\n",
            systemd_word(&format!("PATH={path}"))
        ));
    }
    let words: Vec<String> = std::iter::once(night.kern.display().to_string())
        .chain(night.args.iter().cloned())
        .map(|w| systemd_word(&w))
        .collect();
    out.push_str(&format!(
        "ExecStart={}\n# SIGTERM to the watchdog alone, which stops the run; the rest after a minute.\nKillMode=mixed\nTimeoutStopSec=60\n",
        words.join(" ")
    ));
    out
}

/// The systemd user timer that starts the service every day at the night's time (a start
/// missed while the machine was off is not made up: the night has its own end).
pub(crate) fn systemd_timer(night: &Night) -> String {
    format!(
        "# Written by `{MARK}` for {repo}: a night of kern every day at {at}.\n# `kern schedule --remove` in that repository removes it.\n[Unit]\nDescription=kern: start the night in {described} at {at}\n\n[Timer]\nOnCalendar=*-*-* {at}:00\nPersistent=false\nUnit={name}.service\n\n[Install]\nWantedBy=timers.target\n",
        repo = night.repo.display(),
        described = night.repo.display().to_string().replace('%', "%%"),
        at = night.at_text(),
        name = night.name,
    )
}

/// The launchd agent: `kern watch` in the repository every day at the night's time, its own
/// output (before the state folder's `run.log` takes over) in `log`.
pub(crate) fn launchd_plist(night: &Night, log: &Path) -> String {
    let string = |s: &str| format!("<string>{}</string>", xml(s));
    let mut args = format!("\t\t{}\n", string(&night.kern.display().to_string()));
    for a in &night.args {
        args.push_str(&format!("\t\t{}\n", string(a)));
    }
    let env = night.path.as_ref().map_or(String::new(), |path| {
        format!(
            "\t<key>EnvironmentVariables</key>\n\t<dict>\n\t\t<key>PATH</key>\n\t\t{}\n\t</dict>\n",
            string(path)
        )
    });
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<!-- Written by `{MARK}` for {comment}: a night of kern every day at {at}; its remove option, in that repository, removes it. -->\n<plist version=\"1.0\">\n<dict>\n\t<key>Label</key>\n\t{label}\n\t<key>ProgramArguments</key>\n\t<array>\n{args}\t</array>\n\t<key>WorkingDirectory</key>\n\t{dir}\n{env}\t<key>StartCalendarInterval</key>\n\t<dict>\n\t\t<key>Hour</key>\n\t\t<integer>{hour}</integer>\n\t\t<key>Minute</key>\n\t\t<integer>{minute}</integer>\n\t</dict>\n\t<key>StandardOutPath</key>\n\t{log}\n\t<key>StandardErrorPath</key>\n\t{log}\n</dict>\n</plist>\n",
        // No `--` inside an XML comment.
        comment = xml(&night.repo.display().to_string()).replace("--", "- -"),
        at = night.at_text(),
        label = string(&night.label()),
        dir = string(&night.repo.display().to_string()),
        hour = night.at.0,
        minute = night.at.1,
        log = string(&log.display().to_string()),
    )
}

/// The crontab line for a system with neither: `cd` into the repository, the PATH, the command.
pub(crate) fn crontab_line(night: &Night) -> String {
    let mut line = format!(
        "{} {} * * * cd {} && ",
        night.at.1,
        night.at.0,
        crate::text::shell_quote(&night.repo.display().to_string())
    );
    if let Some(path) = &night.path {
        line.push_str(&format!("PATH={} ", crate::text::shell_quote(path)));
    }
    line.push_str(&night.command_line());
    line.push_str(" >/dev/null 2>&1");
    // cron ends a command at an unescaped `%`.
    line.replace('%', "\\%")
}

/// A scheduled night as `--list` shows it, read back from the files kern wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The repository it runs in.
    pub repo: String,
    /// `23:00`.
    pub at: String,
    /// The command, as the unit says it.
    pub command: String,
}

/// The night a systemd service and timer kern wrote hold; `None` for files not kern's.
pub(crate) fn read_systemd(service: &str, timer: &str) -> Option<Listed> {
    if !service.contains(MARK) {
        return None;
    }
    let value = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::to_string)
    };
    let at = value(timer, "OnCalendar=*-*-* ")?;
    Some(Listed {
        repo: value(service, "WorkingDirectory=")?.replace("%%", "%"),
        at: at.strip_suffix(":00").unwrap_or(&at).to_string(),
        command: value(service, "ExecStart=")?,
    })
}

/// The night a launchd plist kern wrote holds; `None` for a file not kern's.
pub(crate) fn read_plist(plist: &str) -> Option<Listed> {
    if !plist.contains(MARK) {
        return None;
    }
    // The text of the element after `<key>KEY</key>`.
    let after = |key: &str| -> Option<String> {
        let rest = &plist[plist.find(&format!("<key>{key}</key>"))? + key.len() + 11..];
        let open = rest.find('<')?;
        let start = rest[open..].find('>')? + open + 1;
        let end = rest[start..].find('<')? + start;
        Some(unxml(&rest[start..end]))
    };
    let args: Vec<String> = plist
        .split("<key>ProgramArguments</key>")
        .nth(1)?
        .split("</array>")
        .next()?
        .split("<string>")
        .skip(1)
        .filter_map(|s| s.split("</string>").next())
        .map(|s| crate::text::shell_quote(&unxml(s)))
        .collect();
    let hour: u32 = after("Hour")?.parse().ok()?;
    let minute: u32 = after("Minute")?.parse().ok()?;
    Some(Listed {
        repo: after("WorkingDirectory")?,
        at: format!("{hour:02}:{minute:02}"),
        command: args.join(" "),
    })
}

/// One word of a systemd command line or assignment: as it is when plain, else in double
/// quotes; `%` and `$` doubled, as systemd reads them.
fn systemd_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b));
    let quoted = if plain {
        word.to_string()
    } else {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    };
    quoted.replace('%', "%%").replace('$', "$$")
}

/// Text as XML character data.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn unxml(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The night of the golden files: every character the formats must quote.
    fn night() -> Night {
        Night {
            name: "kern-my-app".into(),
            repo: "/home/me/src/my app".into(),
            kern: "/home/me/.cargo/bin/kern".into(),
            args: [
                "watch",
                "--until",
                "07:00",
                "20",
                "30",
                "--check",
                "cargo test && echo \"100% $HOME\"",
            ]
            .map(String::from)
            .to_vec(),
            at: (23, 0),
            path: Some("/home/me/.cargo/bin:/usr/local/bin:/usr/bin:/bin".into()),
        }
    }

    /// Compares `written` with the golden file `name` (`KERN_BLESS=1` rewrites it).
    fn golden(name: &str, written: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/schedule")
            .join(name);
        if std::env::var_os("KERN_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, written).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            written,
            want,
            "{} differs — run KERN_BLESS=1 cargo test to accept a change",
            path.display()
        );
    }

    #[test]
    fn the_units_match_their_golden_files() {
        let n = night();
        golden("kern-my-app.service", &systemd_service(&n));
        golden("kern-my-app.timer", &systemd_timer(&n));
        golden(
            "dev.kern-my-app.plist",
            &launchd_plist(&n, Path::new("/home/me/Library/Logs/kern-my-app.log")),
        );
        golden("crontab.txt", &format!("{}\n", crontab_line(&n)));
    }

    #[test]
    fn list_reads_back_what_was_written() {
        let n = night();
        let listed = read_systemd(&systemd_service(&n), &systemd_timer(&n)).unwrap();
        assert_eq!(listed.repo, "/home/me/src/my app");
        assert_eq!(listed.at, "23:00");
        assert!(
            listed
                .command
                .starts_with("/home/me/.cargo/bin/kern watch --until 07:00")
        );
        let plist = launchd_plist(&n, Path::new("/l.log"));
        let listed = read_plist(&plist).unwrap();
        assert_eq!(listed.repo, "/home/me/src/my app");
        assert_eq!(listed.at, "23:00");
        assert_eq!(
            listed.command,
            "/home/me/.cargo/bin/kern watch --until 07:00 20 30 --check 'cargo test && echo \"100% $HOME\"'"
        );
        assert_eq!(read_systemd("[Service]\nExecStart=/bin/true\n", ""), None);
        assert_eq!(read_plist("<plist></plist>"), None);
        // An XML comment holds no `--`, whatever the repository is called.
        let odd = Night {
            repo: "/home/me/a--b".into(),
            ..night()
        };
        let plist = launchd_plist(&odd, Path::new("/l.log"));
        let comment = plist
            .split("<!--")
            .nth(1)
            .unwrap()
            .split("-->")
            .next()
            .unwrap();
        assert!(!comment.contains("--"), "{comment}");
    }

    #[test]
    fn systemd_words_are_quoted_as_systemd_reads_them() {
        for (word, quoted) in [
            ("20", "20"),
            ("/usr/bin/kern", "/usr/bin/kern"),
            ("cargo test", "\"cargo test\""),
            ("a\"b", "\"a\\\"b\""),
            ("50%", "\"50%%\""),
            ("$HOME", "\"$$HOME\""),
            ("", "\"\""),
        ] {
            assert_eq!(systemd_word(word), quoted, "{word}");
        }
    }
}
