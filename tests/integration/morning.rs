//! The morning after (issue 16, issue 14 items 5 and 6): `kern report` read back from
//! `run.jsonl` (terminal, `--json`, `--markdown`, `--html`), `--notify`, following a run
//! (`kern status`, `kern log -f`, `--detach`), SIGHUP, and the sleep inhibitor.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::during::spawn;
use crate::support::project::{Project, texts};
use crate::support::tools;
use crate::support::wait_for_file;

/// The five tasks of a mixed night, each meant to end its own way.
const MIXED_SPEC: &str = "# Tasks

- [ ] Commit me after a wait
- [ ] Split me
- [ ] Skip me
- [ ] Violate me
- [ ] Block me
";

/// The scripted agent's plan for the mixed night.
fn mixed_scenario() -> Value {
    json!({
        "tasks": [
            {"match": "Commit me", "implement": [
                {"error": "usage_limit", "resets_in_secs": 1},
                {"write": {"commit.txt": "done\n"}, "cost_usd": 0.5}
            ]},
            {"match": "Split me", "implement": {"result": {
                "status": "DECOMPOSED", "summary": "two parts", "subtasks": ["Part one"]}}},
            {"match": "Skip me", "implement": {"write": {"half.txt": "half\n"}, "result": {
                "status": "SKIPPED", "summary": "the design is not settled"}}},
            {"match": "Violate me", "research": [
                {"write": {"sneaky.txt": "no\n"}},
                {}
            ]},
            {"match": "Block me", "implement": {"write": {"block.txt": "x\n"}, "result": {
                "status": "FAILED", "summary": "the test still fails"}}}
        ],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "done\n"}},
            "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
        }
    })
}

/// Runs the mixed night: returns the project after `kern 10 0` ended (exit 4: a task is
/// blocked). Unfenced (`--sandbox off`): inside kern's fence research sees the tree through a
/// private layer and cannot change it, so `Violate me` would have no violation to report.
fn mixed_night() -> Project {
    let p = Project::new(MIXED_SPEC);
    p.scenario(&mixed_scenario());
    p.run(&[])
        .env("KERN_RESET_MARGIN", "0")
        .args([
            "10",
            "0",
            "--max-attempts",
            "2",
            "--max-cost",
            "50",
            "--sandbox=off",
        ])
        .expect(4);
    p
}

fn report(p: &Project, args: &[&str]) -> (i32, String, String) {
    let out = p.run(&["report"]).args(args).any_exit();
    (out.code.unwrap_or(-1), out.stdout, out.stderr)
}

/// The JSON's shape: every key with the type of its value (arrays by their first element).
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!("null"),
    }
}

fn golden(name: &str, text: &str) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("KERN_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        text, expected,
        "run KERN_BLESS=1 cargo test --test integration morning to accept"
    );
}

#[test]
fn a_mixed_night_reads_back_from_run_jsonl_in_every_form() {
    let p = mixed_night();
    let log = p.run_log();

    // --json: each fact matches run.jsonl.
    let (code, out, err) = report(&p, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    golden(
        "report-shape.json",
        &(serde_json::to_string_pretty(&shape(&r)).unwrap() + "\n"),
    );
    assert_eq!(r["runs"].as_array().unwrap().len(), 1);
    let run = &r["runs"][0];
    assert_eq!(run["exit_code"], 4);
    assert_eq!(run["end"], "finished");
    let tasks = run["tasks"].as_array().unwrap();
    let task = |title: &str| -> &Value {
        tasks
            .iter()
            .find(|t| t["title"] == title)
            .unwrap_or_else(|| panic!("{title}: {out}"))
    };
    let ends: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t["title"].as_str().unwrap(), t["end"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ends,
        [
            ("Commit me after a wait", "committed"),
            ("Split me", "decomposed"),
            ("Part one", "committed"),
            ("Skip me", "skipped"),
            ("Violate me", "committed"),
            ("Block me", "blocked"),
        ],
        "{out}"
    );
    for commit in log.iter().filter(|e| e["event"] == "commit") {
        let t = task(commit["task"].as_str().unwrap());
        assert_eq!(t["commit"]["sha"], commit["sha"]);
        assert_eq!(t["commit"]["subject"], commit["subject"]);
    }
    assert_eq!(p.log()[0], "Add violate-me");
    let decomposed = log.iter().find(|e| e["event"] == "decomposed").unwrap();
    assert_eq!(task("Split me")["subtasks"], decomposed["subtasks"]);
    let skipped = log.iter().find(|e| e["event"] == "skipped").unwrap();
    assert_eq!(task("Skip me")["skipped"][0], skipped["reason"]);
    let set_aside: Vec<&Value> = log.iter().filter(|e| e["event"] == "set_aside").collect();
    for s in &set_aside {
        let t = task(s["task"].as_str().unwrap());
        assert!(
            t["set_aside"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["git_ref"] == s["git_ref"]),
            "{out}"
        );
    }
    let blocked = log.iter().find(|e| e["event"] == "blocked").unwrap();
    assert_eq!(task("Block me")["blocked"], blocked["why"]);
    let violation = log.iter().find(|e| e["event"] == "violation").unwrap();
    assert_eq!(
        task("Violate me")["violations"][0]["saved"],
        violation["saved"]
    );
    let stage_ends: Vec<&Value> = log.iter().filter(|e| e["event"] == "stage_end").collect();
    let stages: usize = tasks
        .iter()
        .map(|t| t["stages"].as_array().unwrap().len())
        .sum();
    assert_eq!(stages, stage_ends.len());
    let cost: f64 = stage_ends
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((run["totals"]["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9);
    let usage_waits = stage_ends
        .iter()
        .flat_map(|e| e["waits"].as_array().cloned().unwrap_or_default())
        .filter(|w| w["kind"] == "usage_limit")
        .count();
    assert_eq!(usage_waits, 1);
    assert_eq!(run["totals"]["usage_limit_waits"], 1);
    let attempts = log
        .iter()
        .filter(|e| e["event"] == "attempt_failed")
        .count();
    assert_eq!(run["totals"]["failed_attempts"], attempts as u64);
    assert_eq!(run["max_cost_usd"], 50.0);
    let needs: Vec<&str> = run["needs_you"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(needs[0], "blocked", "{out}");
    assert!(
        needs.contains(&"violation") && needs.contains(&"set_aside"),
        "{needs:?}"
    );

    // The terminal page: the first line says how it ended; what needs the person comes first.
    let (code, page, _) = report(&p, &[]);
    assert_eq!(code, 0);
    let first = page.lines().next().unwrap();
    assert!(
        first.starts_with("Finished, but 6 things need you — all 10 iterations ran: "),
        "{page}"
    );
    // The sixth: the night ran unfenced (`mixed_night`'s `--sandbox off`).
    assert!(
        page.contains("the agents ran unfenced (--sandbox off)"),
        "{page}"
    );
    assert!(
        first.ends_with("3 committed, 1 decomposed, 1 skipped, 1 blocked."),
        "{page}"
    );
    let needs_at = page.find("Needs you").unwrap();
    assert!(needs_at < page.find("Tasks").unwrap());
    for s in &set_aside {
        assert!(page.contains(s["git_ref"].as_str().unwrap()), "{page}");
    }
    assert!(
        page.contains(violation["saved"][0].as_str().unwrap()),
        "{page}"
    );
    assert!(page.contains("waited "), "{page}");
    assert!(page.contains("cost             $"), "{page}");
    assert!(page.contains(" of $50.00"), "{page}");
    assert!(!page.contains('\x1b'), "NO_COLOR");
    let (_, coloured, _) = report(&p, &["--color", "always"]);
    assert!(coloured.contains("\x1b[31m✗\x1b[0m"), "{coloured}");

    // Markdown: the same facts, one table row per task.
    let (code, md, _) = report(&p, &["--markdown"]);
    assert_eq!(code, 0);
    assert!(
        md.starts_with("**Finished, but 6 things need you — all 10 iterations ran: "),
        "{md}"
    );
    for t in tasks {
        let title = t["title"].as_str().unwrap();
        assert!(md.contains(&format!("\n| {title} | ")), "{title}: {md}");
    }
    assert!(md.contains("### Needs you"), "{md}");

    // HTML: one timeline row per task, one bar per stage; it opens in Chromium.
    let html_path = p.outside.path().join("night.html");
    let (code, _, err) = report(&p, &["--html", html_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("kern: wrote "), "{err}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let doc = scraper::Html::parse_document(&html);
    let sel = |s: &str| scraper::Selector::parse(s).unwrap();
    assert_eq!(
        doc.select(&sel("svg.timeline g.task-row")).count(),
        tasks.len()
    );
    assert_eq!(doc.select(&sel("svg.timeline rect.stage")).count(), stages);
    assert_eq!(
        doc.select(&sel("svg.timeline rect.wait.usage_limit"))
            .count(),
        1
    );
    assert_eq!(doc.select(&sel("table.tasks tr.task")).count(), tasks.len());
    assert_eq!(doc.select(&sel("script")).count(), 0);
    let rows: Vec<String> = doc
        .select(&sel("g.task-row"))
        .map(|g| g.value().attr("data-task").unwrap().to_string())
        .collect();
    let titles: Vec<String> = tasks
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rows, titles);
    let h1: String = doc.select(&sel("h1")).next().unwrap().text().collect();
    assert_eq!(h1, run["headline"].as_str().unwrap());
    screenshot(&html_path, &p.outside.path().join("night.png"));
}

/// Opens `html` in headless Chromium and takes a screenshot. Without Chromium: a failure under
/// `.ci/run`, skipped elsewhere or with `KERN_SKIP_CHROMIUM=1` (`support::tools::system_tool`).
fn screenshot(html: &Path, png: &Path) {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        // A failure under .ci/run; elsewhere skipped, named on the terminal.
        tools::system_tool("chromium", "chromium", "KERN_SKIP_CHROMIUM");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let (_, err) = texts(&out);
    assert!(out.status.success(), "chromium failed: {err}");
    let bytes = std::fs::read(png).unwrap_or_default();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
        "no screenshot: {err}"
    );
    if let Ok(dir) = std::env::var("KERN_KEEP_SCREENSHOT") {
        std::fs::copy(png, Path::new(&dir).join("night.png")).unwrap();
        std::fs::copy(html, Path::new(&dir).join("night.html")).unwrap();
    }
}

#[test]
fn a_failed_night_says_so_in_its_first_line() {
    let p = Project::new("- [ ] First\n- [ ] Second\n");
    p.scenario(
        &json!({"tasks": [{"match": "Second", "research": {"error": "auth"}}],
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}}),
    );
    p.run(&["5", "0"]).expect(5);
    let (code, page, _) = report(&p, &[]);
    assert_eq!(code, 0);
    let first = page.lines().next().unwrap();
    assert!(
        first.starts_with("Stopped early at iteration 2 of 5: the agent needs you — "),
        "{page}"
    );
    assert!(first.ends_with("(1 committed)."), "{page}");
    assert!(page.contains("✗ kern stopped (exit 5): "), "{page}");
}

/// A notifier that appends each event (KERN_EVENT, then the JSON) to `file`.
fn recorder(file: &Path) -> String {
    format!(
        "printf '%s ' \"$KERN_EVENT\" >> '{0}'; cat >> '{0}'",
        file.display()
    )
}

fn events(file: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (kind, json) = l.split_once(' ').unwrap();
            (kind.to_string(), serde_json::from_str(json).unwrap())
        })
        .collect()
}

#[test]
fn notify_receives_every_kind_of_event() {
    let p = Project::new("- [ ] Wait for it\n- [ ] Block me\n");
    let file = p.outside.path().join("events.txt");
    p.scenario(&json!({"tasks": [
        {"match": "Wait for it", "implement": [{"error": "usage_limit", "resets_in_secs": 1},
                                               {"write": {"wait.txt": "done\n"}}]},
        {"match": "Block me", "implement": {"result": {"status": "FAILED", "summary": "no"}}}
    ]}));
    p.run(&[])
        .env("KERN_RESET_MARGIN", "0")
        .env("KERN_NOTIFY", recorder(&file))
        .args(["5", "0", "--max-attempts", "1"])
        .expect(4);
    let got = events(&file);
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["usage_limit_wait", "task_blocked", "run_ended"],
        "{got:?}"
    );
    for (kind, json) in &got {
        assert_eq!(json["event"], kind.as_str());
        assert_eq!(
            json["project"],
            p.path().file_name().unwrap().to_str().unwrap()
        );
        assert!(json["run"].as_str().unwrap().contains('-'));
    }
    let wait = &got[0].1;
    assert_eq!(wait["stage"], "implement");
    assert_eq!(wait["task"], "Wait for it");
    assert!(wait["resets_at"].as_str().unwrap().ends_with('Z'), "{wait}");
    assert_eq!(got[1].1["task"], "Block me");
    let ended = &got[2].1;
    assert_eq!(ended["exit_code"], 4);
    assert_eq!(ended["totals"]["committed"], 1);
    assert_eq!(ended["totals"]["blocked"], 1);
    assert!(
        ended["headline"]
            .as_str()
            .unwrap()
            .starts_with("Finished, but 1 thing needs you — "),
        "{ended}"
    );

    // Stopped for the person: exit 5 (the agent), then exit 2 (SPEC.md).
    let q = Project::new("- [ ] Anything\n");
    q.scenario(&json!({"default": {"research": {"error": "auth"}}}));
    let file = q.outside.path().join("events.txt");
    q.run(&[])
        .env("KERN_NOTIFY", recorder(&file))
        .args(["1", "0"])
        .expect(5);
    let got = events(&file);
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["stopped_for_person", "run_ended"]);
    assert_eq!(got[0].1["exit_code"], 5);
    assert!(
        got[0].1["message"]
            .as_str()
            .unwrap()
            .contains("is not logged in"),
        "{:?}",
        got[0]
    );

    q.write("SPEC.md", "- [] Broken\n");
    std::fs::remove_file(&file).unwrap();
    q.run(&[])
        .env("KERN_NOTIFY", recorder(&file))
        .args(["1", "0"])
        .expect(2);
    let got = events(&file);
    assert_eq!(got[0].0, "stopped_for_person", "{got:?}");
    assert_eq!(got[0].1["exit_code"], 2);
}

#[test]
fn a_hanging_or_failing_notifier_changes_neither_the_exit_code_nor_the_run() {
    let p = Project::new("- [ ] Alpha\n");
    p.scenario(&json!({"default": {"implement": {"write": {"a.txt": "a\n"}}}}));
    let started = Instant::now();
    let out = p
        .run(&[])
        .env("KERN_NOTIFY", "cat > /dev/null; sleep 300")
        .args(["1", "0"])
        .expect(0);
    let took = started.elapsed();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // Bound: 10 s, then SIGTERM, 2 s grace, SIGKILL; the run itself takes about a second.
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(p.log().len(), 2);
    let notify_log = std::fs::read_to_string(p.state_dir().join("notify.log")).unwrap();
    assert!(
        notify_log.contains(" run_ended: stopped after 10s (the limit)"),
        "{notify_log}"
    );

    let q = Project::new("- [ ] Alpha\n");
    q.run(&[])
        .env("KERN_NOTIFY", "echo 'webhook down' >&2; exit 7")
        .args(["1", "0"])
        .expect(0);
    let notify_log = std::fs::read_to_string(q.state_dir().join("notify.log")).unwrap();
    assert!(
        notify_log.contains(" run_ended: exit 7\nwebhook down\n"),
        "{notify_log}"
    );
}

/// A scenario whose implement stage of every task waits for `go`.
fn implement_waits_for(go: &Path) -> Value {
    json!({"default": {
        "implement": {
            "write": {"out/{slug}.txt": "done\n"},
            "shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())]
        }
    }})
}

/// Polls `kern status --json` until `ready` holds (bounded against a broken build).
fn status_until(p: &Project, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = p.run(&["status", "--json"]).expect(0);
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
        if ready(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "status never got there: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn status_during_a_run_names_the_task_the_stage_and_the_last_tool_call() {
    let p = Project::new("- [ ] Alpha\n");
    let go = p.outside.path().join("go");
    p.scenario(&implement_waits_for(&go));
    let child = spawn(&p, &["3", "0", "--max-cost", "9"]);
    let v = status_until(&p, |v| {
        v["running"]["stage"] == "implement" && v["running"]["last_tool"].is_string()
    });
    let running = &v["running"];
    assert_eq!(running["task"], "Alpha");
    assert_eq!(running["iteration"], 1);
    assert_eq!(running["iterations"], 3);
    assert_eq!(
        running["last_tool"].as_str().unwrap().split(' ').next(),
        Some("Write"),
        "{v}"
    );
    assert!(
        running["cost_usd"].as_f64().unwrap() > 0.0,
        "research was paid: {v}"
    );
    assert_eq!(running["max_cost_usd"], 9.0);
    let out = p.run(&["status"]).expect(0);
    let human = &out.stdout;
    assert!(human.contains("\n  task:    Alpha\n"), "{human}");
    assert!(human.contains("\n  stage:   implement, for "), "{human}");
    assert!(human.contains(" — last tool call: Write "), "{human}");
    assert!(human.contains(" so far, of $9.00\n"), "{human}");
    // What moved last, from the lock's heartbeat.
    assert!(
        human.contains("\n  moved:   ") && human.contains(" ago: "),
        "{human}"
    );
    assert!(running["beat"]["moved"].is_string(), "{v}");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    let v = status_until(&p, |_| true);
    assert!(v["running"].is_null(), "{v}");
}

#[test]
fn log_follow_follows_a_detached_run_to_its_end() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    p.scenario(&implement_waits_for(&go));
    let out = p.run(&["3", "0", "--detach"]).expect(0);
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    let pid: i32 = stdout.trim().parse().unwrap_or_else(|_| panic!("{stdout}"));
    assert!(
        stderr.contains(&format!(
            "running in the background as pid {pid} — follow it with `kern log -f`"
        )),
        "{stderr}"
    );
    // The pid printed is the night's watchdog; the run it started holds the lock when
    // --detach returns.
    let watch: Value =
        serde_json::from_slice(&std::fs::read(p.state_dir().join("watch.json")).unwrap()).unwrap();
    assert_eq!(watch["pid"], pid, "{watch}");
    let run = watch["run"]["pid"].as_i64().unwrap();
    assert_ne!(run, i64::from(pid));
    let lock = std::fs::read_to_string(p.path().join(".git/kern.lock")).unwrap();
    assert!(lock.contains(&format!("\"pid\": {run}")), "{lock}");
    assert!(
        stderr.contains(&format!("watching the run (pid {run})")),
        "{stderr}"
    );
    let follower = p
        .run(&["log", "-f"])
        .spawn_with(Stdio::piped(), Stdio::piped());
    std::fs::write(&go, "").unwrap();
    let out = follower.wait_with_output().unwrap();
    let (followed, err) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(followed.contains(" kern: [1/3] Alpha\n"), "{followed}");
    assert!(followed.contains(" kern: [2/3] Beta\n"), "{followed}");
    assert!(
        followed.contains(" kern: run ended: nothing left to do\n"),
        "{followed}"
    );
    assert_eq!(p.log(), vec!["Beta", "Alpha", "initial"]);
    // Every line once: the background run's stderr is run.log, its reporter writes there too.
    assert_eq!(followed.matches("[1/3] Alpha").count(), 1, "{followed}");
}

#[test]
fn sighup_mid_run_does_not_end_the_night_and_run_log_holds_its_lines() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    p.scenario(&implement_waits_for(&go));
    let mut child = spawn(&p, &["3", "0"]);
    wait_for_file(&p.state_dir().join("stage2.jsonl"));
    // The terminal goes away: SIGHUP, and nobody reads stderr any more.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    drop(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.run_events("hangup").iter().any(|_| true) {
        assert!(Instant::now() < deadline, "no hangup event");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(p.log(), vec!["Beta", "Alpha", "initial"]);
    let run_log = std::fs::read_to_string(p.state_dir().join("run.log")).unwrap();
    for line in [
        " kern: [1/3] Alpha\n",
        " kern: the terminal went away (SIGHUP): the run goes on, its lines continue here\n",
        " kern: [2/3] Beta\n",
        " kern: run ended: nothing left to do\n",
    ] {
        assert!(run_log.contains(line), "{line}: {run_log}");
    }
    let (code, page, _) = report(&p, &[]);
    assert_eq!(code, 0);
    assert!(page.contains("note: the terminal went away at "), "{page}");
}

#[test]
fn a_run_keeps_the_machine_awake_says_so_and_the_inhibitor_dies_with_it() {
    // `caffeinate` (macOS) is used wherever it is found; systemd-inhibit's arguments are
    // unit-tested in `supervisor/awake.rs` (it is only tried where systemd runs).
    let p = Project::new("- [ ] Alpha\n");
    let bin = p.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let args = p.outside.path().join("inhibit.args");
    let fake = bin.join("caffeinate");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\necho $$ >> '{0}'\nexec sleep 300\n",
            args.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = p
        .run(&["1", "0"])
        .env("PATH", path)
        .spawn_with(Stdio::inherit(), Stdio::piped());
    let kern_pid = child.id();
    let out = child.wait_with_output().unwrap();
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("kern: keeping the machine awake while the run lasts (caffeinate)\n"),
        "{err}"
    );
    let text = std::fs::read_to_string(&args).unwrap();
    let (argv, pid) = text.split_once('\n').unwrap();
    assert_eq!(argv, format!("-i -w {kern_pid}"));
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.contains(") Z "),
        "the inhibitor outlived the run: {stat}"
    );
}

/// `run.jsonl` and `run.log` rotate; the report reads the rotated file for `--since`.
#[test]
fn the_report_reads_the_rotated_run_jsonl() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.run(&["1", "0"]).expect(0);
    let dir = p.state_dir();
    std::fs::rename(dir.join("run.jsonl"), dir.join("run.jsonl.1")).unwrap();
    p.run(&["1", "0"]).expect(0);
    let (code, json, err) = report(&p, &["--since", "1h", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&json).unwrap();
    let titles: Vec<&str> = r["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["tasks"][0]["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Alpha", "Beta"]);
    let (code, _, err) = report(&p, &["--run", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no run `nope` — the last runs are "), "{err}");
}

/// The number on the live summary's line `label` (`  committed        2`), and the text after.
fn summary_count(output: &str, label: &str) -> (u64, String) {
    let line = output
        .lines()
        .map(|l| l.split_once("kern: ").map_or(l, |(_, rest)| rest))
        .find_map(|l| {
            l.strip_prefix("  ")
                .and_then(|l| l.strip_prefix(label))
                .filter(|rest| rest.starts_with("  "))
        })
        .unwrap_or_else(|| panic!("no `{label}` line in the summary:\n{output}"));
    let rest = line.trim();
    let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (number.parse().unwrap_or(0), rest.to_string())
}

/// The live summary and `kern report` are folds of the same events: one night, by one task at
/// a time and with `-j 2`, reads the same in both.
#[test]
fn the_live_summary_and_the_morning_report_count_the_same_night() {
    for jobs in ["1", "2"] {
        let p = Project::new(MIXED_SPEC);
        p.scenario(&mixed_scenario());
        // Iterations enough for the night to end by itself: with `-j 2` a free slot takes the
        // skipped task again while another runs (DESIGN: a task with a Skipped note comes back
        // when no other is pending), so ten could run out before `Block me` is blocked.
        let ran = p
            .run(&[])
            .env("KERN_RESET_MARGIN", "0")
            .args([
                "30",
                "0",
                "--max-attempts",
                "2",
                "--max-cost",
                "50",
                "-j",
                jobs,
            ])
            .expect(4);
        let live = format!("{}{}", ran.stdout, ran.stderr);
        let (code, out, err) = report(&p, &["--json"]);
        assert_eq!(code, 0, "{err}");
        let r: Value = serde_json::from_str(&out).unwrap();
        let totals = &r["runs"][0]["totals"];
        for (label, key) in [
            ("committed", "committed"),
            ("skipped", "skipped"),
            ("blocked", "blocked"),
            ("failed attempts", "failed_attempts"),
            ("retries", "retries"),
            ("waits", "usage_limit_waits"),
        ] {
            assert_eq!(
                summary_count(&live, label).0,
                totals[key].as_u64().unwrap(),
                "-j {jobs}: `{label}` in the live summary against `{key}` in the report\n{live}\n{out}"
            );
        }
        let cost = summary_count(&live, "cost").1;
        assert!(
            cost.starts_with(&format!("${:.2}", totals["cost_usd"].as_f64().unwrap())),
            "-j {jobs}: {cost} against {}",
            totals["cost_usd"]
        );
        assert!(
            totals["committed"].as_u64().unwrap() >= 2,
            "-j {jobs}: {out}"
        );
        assert_eq!(totals["blocked"], 1, "-j {jobs}: {out}");
    }
}

/// A night that ends while a task's last attempt has failed says which task and why under
/// "needs you" — it said only "all 2 iterations ran".
#[test]
fn a_task_whose_last_attempt_failed_when_the_night_ended_needs_you_with_its_reason() {
    let p = Project::new("- [ ] Fails\n");
    p.scenario(&json!({"default": {"implement": {"result": {
        "status": "FAILED", "summary": "the linker is missing"}}}}));
    p.run(&["2", "0", "--max-attempts", "3"]).expect(4);
    let (code, out, err) = report(&p, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("✗ `Fails` failed its attempt 2: ")
            && out.contains("the linker is missing")
            && out.contains("the next run takes it up again"),
        "{out}"
    );
    assert!(!out.contains("✗ all 2 iterations ran"), "{out}");
    let (_, json, _) = report(&p, &["--json"]);
    let r: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(r["runs"][0]["needs_you"][0]["kind"], "failed", "{json}");
    assert_eq!(r["runs"][0]["needs_you"][0]["task"], "Fails", "{json}");
}
