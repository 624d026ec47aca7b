//! What the person sees, through the real binary (DESIGN.md section 10; issue "Prompts and
//! context, the dry run, and what the person sees"): plain timestamped lines without control
//! characters in a pipe, the live status line and the summary on a real terminal (tmux),
//! `-q`, colour choices, and the countdown of a usage-limit wait.
//!
//! The terminal tests need `tmux` (`.ci/run` installs it). Each uses a private tmux server
//! (its own socket in a temporary folder) that it kills at the end, and polls `capture-pane`
//! for the text it expects with a generous deadline: the deadline only keeps a broken build
//! from hanging the suite, it is not a timing assertion.

use crate::support::{project, tools};

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use project::Project;
use regex::Regex;
use serde_json::json;

/// Three tasks that go through a retry, a usage-limit wait, a skip and two commits.
fn eventful(p: &Project) {
    p.scenario(&json!({
        "default": {
            "research": {"result": {"notes": ["look at out/"]}},
            "implement": {"write": {"out/{slug}.txt": "done: {task}\n"},
                          "result": {"status": "SUCCESS", "summary": "wrote out/{slug}.txt"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        },
        "tasks": [
            {"match": "Flaky", "implement": [
                {"error": "overloaded"},
                {"write": {"out/flaky.txt": "ok\n"}, "result": {"status": "SUCCESS", "summary": "s"}}
            ]},
            {"match": "Limited", "implement": [
                {"error": "usage_limit", "resets_in_secs": 1},
                {"write": {"out/limited.txt": "ok\n"}, "result": {"status": "SUCCESS", "summary": "s"}}
            ]},
            {"match": "Skip", "implement": {"result": {"status": "SKIPPED", "summary": "needs a person"}}}
        ]
    }));
}

const EVENTFUL_SPEC: &str = "- [ ] Flaky task\n- [ ] Limited task\n- [ ] Skip me\n";

/// Asserts that every line is `<RFC 3339 UTC seconds> kern: <text>` and nothing but `\n`
/// is a control character.
fn assert_plain(err: &str) {
    let stamped =
        Regex::new(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z kern: ").unwrap();
    assert!(err.ends_with('\n'), "{err:?}");
    for line in err.lines() {
        assert!(stamped.is_match(line), "not a plain line: {line:?}");
        assert!(
            !line.chars().any(char::is_control),
            "a control character in {line:?}"
        );
    }
}

#[test]
fn piped_output_of_a_full_run_is_plain_timestamped_lines_without_control_characters() {
    let p = Project::new(EVENTFUL_SPEC);
    eventful(&p);
    // With a margin the wait is never zero, so its line always shows.
    let out = p
        .run(&["3", "0", "--reset-margin", "1s"])
        .env_remove(["NO_COLOR"])
        .env_remove(["KERN_COLOR"])
        .timeout(Duration::from_secs(120))
        .expect(0);
    let (stdout, err) = (&out.stdout, &out.stderr);
    assert_eq!(stdout, "");
    assert_plain(err);
    for expected in [
        "kern: [1/3] Flaky task\n",
        "kern: implement started\n",
        "kern: warning: implement failed (",
        "kern: waiting ",
        "kern: ✓ commit     COMMIT ",
        "kern: • implement  SKIPPED ",
        "kern: run ended: ",
        "kern:   committed        2\n",
        "kern:   skipped          1\n",
        "kern:   retries          1\n",
    ] {
        assert!(err.contains(expected), "{expected:?} missing: {err}");
    }
    assert_eq!(p.log()[..2], ["Add limited-task", "Add flaky-task"]);
}

#[test]
fn quiet_prints_only_the_summary() {
    let p = Project::new(EVENTFUL_SPEC);
    eventful(&p);
    let out = p
        .run(&["3", "0", "-q", "--reset-margin", "0"])
        .timeout(Duration::from_secs(120))
        .expect(0);
    let (stdout, err) = (&out.stdout, &out.stderr);
    assert_eq!(stdout, "");
    // DESIGN.md section 10: only errors and the summary. The run had a retry (a warning in the
    // other modes): nothing precedes the summary.
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("kern: run ended: "),
        "the summary comes first: {err}"
    );
    let row = Regex::new(r"^  [a-z]+( [a-z]+)? +\S|^    \S").unwrap();
    for line in &lines[1..] {
        assert!(row.is_match(line), "not a summary row: {line:?} in {err}");
    }
    for row in [
        "  committed        2",
        "  skipped          1",
        "  retries          1",
        "  state folder     ",
    ] {
        assert!(err.contains(row), "{row:?}: {err}");
    }
    assert!(!err.contains("warning"), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    assert_eq!(p.log().len(), 3, "the run itself is the same");
}

#[test]
fn quiet_still_prints_errors() {
    let p = Project::new("- [ ] T\n");
    p.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let out = p.run(&["1", "0", "-q"]).expect(5);
    let err = &out.stderr;
    assert!(err.contains("kern: error: "), "{err}");
    assert!(err.contains("is not logged in"), "{err}");
}

#[test]
fn no_color_and_color_never_print_no_escape_codes() {
    for (args, no_color) in [
        (vec!["--color", "never"], false),
        (vec!["--color", "auto"], true),
        (vec![], true),
    ] {
        let p = Project::new("- [ ] One\n");
        p.scenario(&json!({"default": {"implement": {"write": {"one.txt": "done\n"}}}}));
        let run = p.run(&["1", "0"]).args(&args);
        let run = if no_color {
            run.env("NO_COLOR", "1")
        } else {
            run.env_remove(["NO_COLOR"])
        };
        let err = run.expect(0).stderr;
        assert_plain(&err);
        assert!(err.contains("✓ commit"), "{err}");
    }
}

#[test]
fn color_always_in_a_pipe_is_plain_lines_with_colour_codes_only() {
    // The reporter's decision: `--color always` colours the plain lines (CI logs render
    // SGR codes) but never draws the live status line, which needs a terminal.
    let p = Project::new("- [ ] One\n");
    p.scenario(&json!({"default": {"implement": {"write": {"one.txt": "done\n"}}}}));
    let out = p
        .run(&["1", "0", "--color", "always"])
        .env_remove(["NO_COLOR"])
        .expect(0);
    let err = &out.stderr;
    assert!(err.contains("\x1b[32m✓\x1b[0m commit"), "{err:?}");
    let sgr = Regex::new("\x1b\\[[0-9;]*m").unwrap();
    let stripped = sgr.replace_all(err, "");
    assert!(!stripped.contains('\x1b'), "only SGR codes: {err:?}");
    assert!(!err.contains('\r'), "{err:?}");
    assert_plain(&stripped);
}

#[test]
fn a_usage_limit_is_waited_out_with_a_countdown_and_the_stage_then_succeeds() {
    let p = Project::new("- [ ] Limited task\n");
    eventful(&p);
    // The reset is under a second away when kern reads it; the margin makes the wait 1-3 s.
    let out = p
        .run(&["1", "0"])
        .env("KERN_RESET_MARGIN", "2s")
        .timeout(Duration::from_secs(120))
        .expect(0);
    let err = &out.stderr;
    assert!(
        Regex::new(r"kern: waiting [1-9]s — You've hit your session limit · resets ")
            .unwrap()
            .is_match(err),
        "the wait is shown: {err}"
    );
    assert_eq!(p.log()[0], "Add limited-task");
    assert_eq!(p.prompts("implement").len(), 2);
    // Not a failure and not a retry; the summary counts the wait and its time.
    assert!(!p.read("SPEC.md").contains("Attempt"));
    assert!(err.contains("kern:   retries          0\n"), "{err}");
    assert!(
        Regex::new(r"kern:   waits            1 \([1-9]s\)\n")
            .unwrap()
            .is_match(err),
        "{err}"
    );
}

/// A private tmux server, killed when dropped.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `command` (a shell command line) in a detached 160x50 session.
    fn start(command: &str) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let tmux = Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-x", "160", "-y", "50", command])
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-u")
            .arg("-S")
            .arg(&self.socket)
            .env("LC_ALL", "C.UTF-8")
            .env_remove("TMUX");
        cmd
    }

    /// The pane as text (`escapes`: with colour and attribute codes).
    fn capture(&self, escapes: bool) -> String {
        let mut cmd = self.command();
        cmd.args(["capture-pane", "-p", "-J"]);
        if escapes {
            cmd.arg("-e");
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls the pane until `done` holds, calling `seen` on every capture; returns the
    /// capture that satisfied `done`.
    fn wait_for(
        &self,
        what: &str,
        mut seen: impl FnMut(&str),
        done: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.capture(false);
            seen(&screen);
            if done(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{what} never showed:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

/// The shell command running kern for `p` in tmux, then printing its exit code and keeping
/// the pane open.
fn kern_in_tmux(p: &Project, no_color: bool) -> String {
    let mut run = p
        .run(&["1", "0"])
        .env_remove(["NO_COLOR", "KERN_COLOR", "KERN_RETRY_DELAY"])
        .env("KERN_RESET_MARGIN", "0");
    if no_color {
        run = run.env("NO_COLOR", "1");
    }
    format!("{}; echo KERN-EXIT=$?; sleep 600", run.shell_words())
}

/// One task whose implement stage works visibly for a while, then hits a usage limit that
/// resets in a few seconds, then succeeds.
fn terminal_project() -> Project {
    let p = Project::new("- [ ] Show the status line\n");
    p.scenario(&json!({"default": {
        "research": {"result": {"notes": ["n"]}},
        "implement": [
            {"write": {"out/a.txt": "a\n"}, "sleep_ms": 3000, "error": "usage_limit", "resets_in_secs": 4},
            {"write": {"out/a.txt": "a\n"}, "result": {"status": "SUCCESS", "summary": "s"}}
        ],
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add a"}}
    }}));
    p
}

/// Lines of `screen` that are the live status line of `stage` (there is at most one).
fn status_lines<'s>(screen: &'s str, stage: &str) -> Vec<&'s str> {
    let head = format!("[1/1] {stage} · Show the status line · ");
    screen.lines().filter(|l| l.contains(&head)).collect()
}

fn assert_final_screen(screen: &str, p: &Project) {
    assert!(screen.contains("KERN-EXIT=0"), "{screen}");
    assert!(
        screen.contains("kern: run ended: 1 iteration ran"),
        "{screen}"
    );
    assert!(screen.contains("  ✓ implement  SUCCESS "), "{screen}");
    assert!(screen.contains("  ✓ commit     COMMIT "), "{screen}");
    assert!(
        screen.contains("  waiting ") && screen.contains(" — You've hit your session limit"),
        "the start of the wait stays on screen: {screen}"
    );
    assert!(screen.contains("  waits            1 ("), "{screen}");
    assert!(
        status_lines(screen, "implement").is_empty() && !screen.contains(" left"),
        "the status line is cleared at the end: {screen}"
    );
    assert_eq!(p.log()[0], "Add a");
}

#[test]
fn on_a_terminal_the_status_line_updates_in_place_and_the_summary_follows() {
    if !tools::system_tool("tmux", "tmux", "KERN_SKIP_TMUX") {
        return;
    }
    let p = terminal_project();
    let tmux = Tmux::start(&kern_in_tmux(&p, false));
    let mut shown = std::collections::BTreeSet::new();
    let mut record = |screen: &str| {
        let lines = status_lines(screen, "implement");
        assert!(
            lines.len() <= 1,
            "one status line, updated in place: {screen}"
        );
        let waiting: Vec<&str> = screen
            .lines()
            .filter(|l| l.contains("[1/1] waiting · "))
            .collect();
        assert!(lines.len() + waiting.len() <= 1, "{screen}");
        for line in lines.into_iter().chain(waiting) {
            shown.insert(line.trim_end().to_string());
        }
    };
    let screen = tmux.wait_for("the implement status line", &mut record, |s| {
        status_lines(s, "implement")
            .iter()
            .any(|l| l.contains(" · $0.01 · Write ") && l.contains("out/a.txt"))
    });
    assert!(
        screen.contains("  ✓ research "),
        "the finished stage is printed above: {screen}"
    );
    tmux.wait_for("the countdown", &mut record, |s| {
        s.lines().any(|l| {
            l.contains("[1/1] waiting · You've hit your session limit") && l.contains("s left")
        })
    });
    let screen = tmux.wait_for("the summary", &mut record, |s| s.contains("KERN-EXIT="));
    assert_final_screen(&screen, &p);
    assert!(
        shown.len() >= 2,
        "the status line changed while kern ran: {shown:?}"
    );
    let coloured = tmux.capture(true);
    assert!(
        coloured.contains("\x1b[32m✓"),
        "colour on a terminal: {coloured:?}"
    );
}

#[test]
fn on_a_terminal_no_color_keeps_the_status_line_without_colour() {
    if !tools::system_tool("tmux", "tmux", "KERN_SKIP_TMUX") {
        return;
    }
    let p = terminal_project();
    let tmux = Tmux::start(&kern_in_tmux(&p, true));
    tmux.wait_for(
        "the implement status line",
        |_| {},
        |s| {
            status_lines(s, "implement")
                .iter()
                .any(|l| l.contains(" · $0.01 · Write "))
        },
    );
    let screen = tmux.wait_for("the summary", |_| {}, |s| s.contains("KERN-EXIT="));
    assert_final_screen(&screen, &p);
    let escapes = tmux.capture(true);
    for code in ["\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m"] {
        assert!(
            !escapes.contains(code),
            "{code:?} under NO_COLOR: {escapes:?}"
        );
    }
}
