//! Usage windows (DESIGN.md §21): what the agents report of their windows goes into each stage
//! record (`kern.window`) and each `stage_end` event, `kern report` gives each task's share of
//! each window (or, where none was reported, its dollars and tokens), `kern status` shows the
//! window now; `--pace` pauses before a stage that would cross the line, by the window's shape.
//!
//! The scripted agent reports a window with `usage` (Claude Code's `rate_limit_event`); its
//! reset time is "now + resets_in_secs" as the agent runs, so the waits here are real but
//! short, and no test orders events with a sleep.

use serde_json::{Value, json};

use crate::remote::{Fleet, tasks};
use crate::support::project::{Project, texts};

fn usage(utilization: f64, resets_in_secs: u64) -> Value {
    json!({"utilization": utilization, "window": "five_hour", "resets_in_secs": resets_in_secs})
}

fn record(p: &Project, name: &str) -> Value {
    let path = p.state_dir().join("last").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn each_stage_records_its_share_of_the_window_and_the_report_gives_each_tasks() {
    let spec = "- [ ] Plain\n- [ ] First\n- [ ] Second\n";
    let scenario = json!({
        "tasks": [
            {"match": "First",
             "research": {"usage": usage(0.40, 7200)},
             "implement": {"write": {"out/first.txt": "1\n"}, "usage": usage(0.47, 7200)},
             "commit": {"usage": usage(0.49, 7200)}},
            {"match": "Second",
             "research": {"usage": usage(0.52, 7200)},
             "implement": {"write": {"out/second.txt": "2\n"}, "usage": usage(0.60, 7200)},
             "commit": {"usage": usage(0.61, 7200)}},
        ],
        "default": {"implement": {"write": {"out/plain.txt": "p\n"}}}
    });
    let p = Project::new(spec);
    p.scenario(&scenario);
    p.run(&["5", "0"]).expect(0);
    assert_eq!(p.log(), ["Second", "First", "Plain", "initial"]);

    // The stage record of Second's implement: its use before and after.
    let implement = record(&p, "stage2.json");
    let window = &implement["kern"]["window"];
    assert_eq!(window.as_array().map(Vec::len), Some(1), "{implement:#}");
    assert_eq!(window[0]["kind"], "five_hour");
    assert_eq!(window[0]["used_before"], 52.0);
    assert_eq!(window[0]["used_after"], 60.0);
    assert!(window[0]["resets_at"].as_i64().unwrap() > 0);
    assert!(window[0]["agent"].as_str().unwrap().starts_with("program:"));

    // run.jsonl has each stage's window; the first reading has no "before".
    let ends = p.run_events("stage_end");
    let windows: Vec<(Value, Value)> = ends
        .iter()
        .filter_map(|e| e["window"].get(0))
        .map(|w| (w["used_before"].clone(), w["used_after"].clone()))
        .collect();
    assert_eq!(
        windows,
        [
            (Value::Null, json!(40.0)),
            (json!(40.0), json!(47.0)),
            (json!(47.0), json!(49.0)),
            (json!(49.0), json!(52.0)),
            (json!(52.0), json!(60.0)),
            (json!(60.0), json!(61.0)),
        ]
    );
    assert!(ends.iter().all(|e| e["tokens"].as_u64().unwrap() > 0));

    // The report: each task's share, or what stands in for it.
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains("5-hour window (now 61 %)")
            && report.contains("this task used 12 % of program:"),
        "{report}"
    );
    assert!(
        report.contains("this task used at least 9 % of program:")
            && report.contains("(now 49 %; 1 stage without an earlier reading)"),
        "{report}"
    );
    assert!(
        report.contains("usage window: none reported — cost and tokens stand in: $0.03, ")
            && report.contains(" tokens\n"),
        "{report}"
    );
    // The totals: a line per window.
    assert!(
        report.contains("usage windows    program:")
            && report.contains(
                "5-hour window now 61 %; the run's tasks used at least 21 % of it (1 stage without an earlier reading)"
            ),
        "{report}"
    );
    let json: Value = serde_json::from_str(&p.run(&["report", "--json"]).expect(0).stdout).unwrap();
    let second = &json["runs"][0]["tasks"][2];
    assert_eq!(second["title"], "Second");
    assert_eq!(second["windows"][0]["used"], 12.0);
    assert_eq!(second["windows"][0]["unknown_stages"], 0);

    // The HTML report draws the window over the night: the use through each reading, each
    // stage's share a bar in its task's colour, each task's share in the legend.
    let page_path = p.outside.path().join("report.html");
    p.run(&["report", "--html", page_path.to_str().unwrap()])
        .expect(0);
    let page = std::fs::read_to_string(&page_path).unwrap();
    let chart = page
        .split("<svg class=\"window-chart\" data-window=\"five_hour\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no chart of the 5-hour window:\n{page}"));
    let chart = &chart[..chart.find("</ul>").unwrap()];
    // Six readings on the line; five stages with an earlier reading have a bar.
    let line = chart
        .split("points=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert_eq!(line.split(' ').count(), 6, "{chart}");
    // In the order the stages ran: the use rises 40, 47, 49, 52, 60, 61 (up is a smaller y),
    // and time goes on.
    let xy: Vec<(f64, f64)> = line
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert!(
        xy.windows(2).all(|w| w[1].1 < w[0].1 && w[1].0 >= w[0].0),
        "{line}"
    );
    assert_eq!(chart.matches("<rect class=\"share\"").count(), 5, "{chart}");
    assert_eq!(chart.matches("data-task=\"Second\"").count(), 3, "{chart}");
    assert!(
        chart.contains("Second — implement: 52 → 60 % (8 points)</title>"),
        "{chart}"
    );
    assert!(chart.contains("<text class=\"now\""), "{chart}");
    assert!(chart.contains(">61 %</text>"), "{chart}");
    assert!(
        chart.contains("</i>Second: 12 %</li>") && chart.contains("</i>First: at least 9 %</li>"),
        "{chart}"
    );
    assert!(!chart.contains("</i>Plain"), "no window, no share: {chart}");
    assert!(page.contains("<h3>program:"), "{page}");
    assert!(!page.contains("<script"), "no script: {page}");
    // The text report's line per window is there too.
    assert!(page.contains("5-hour window now 61 %; the run"), "{page}");

    // Status: the window now.
    let status = p.run(&["status"]).expect(0).stdout;
    assert!(
        status.contains("5-hour window 61 % used, resets in 1h 59m")
            || status.contains("5-hour window 61 % used, resets in 2h"),
        "{status}"
    );
    let status: Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(status["windows"][0]["used_after"], 61.0);
}

#[test]
fn pace_pauses_before_a_stage_until_the_reset_then_spends_at_most_a_first_hour_share() {
    let spec = "- [ ] First\n- [ ] Second\n";
    let p = Project::new(spec);
    p.scenario(&json!({
        "tasks": [{"match": "First",
                   "research": {"usage": usage(0.85, 10)},
                   "implement": {"write": {"out/first.txt": "1\n"}, "usage": usage(0.30, 5 * 3600)}}],
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
    }));
    let out = p
        .run(&["5", "0", "--pace=80", "--reset-margin=0s", "--max-wait=10m"])
        .expect(0);
    let err = &out.stderr;
    // Research left the window at 85 %: implement waits for the reset, then runs.
    assert!(
        err.contains("five-hour window is 85% used, resets in")
            && err.contains("(the pace is 80%) — pausing"),
        "{err}"
    );
    assert!(
        err.contains("--pace: going on with the implement stage after"),
        "{err}"
    );
    // The new window is 30 % used in its first hour (the share is 20 % + 5): the task under
    // way finishes, no new one is taken.
    assert!(
        err.contains("five-hour window is 30% used")
            && err.contains("(the first-hour share after the reset is 25%) — no new task taken"),
        "{err}"
    );
    assert_eq!(p.log(), ["First", "initial"]);
    assert!(p.read("SPEC.md").contains("- [ ] Second"));

    let paced = p.run_events("paced");
    assert_eq!(paced.len(), 2, "{paced:?}");
    assert_eq!(
        (
            &paced[0]["action"],
            &paced[0]["stage"],
            &paced[0]["task"],
            &paced[0]["kind"]
        ),
        (
            &json!("pause"),
            &json!("implement"),
            &json!("First"),
            &json!("five_hour")
        )
    );
    assert!(paced[0]["until"].as_i64().is_some());
    assert_eq!(paced[1]["action"], "stop");
    let resumed = p.run_events("resumed");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(resumed[0]["stage"], "implement");
    assert!(resumed[0]["waited_ms"].as_u64().unwrap() > 0);

    // The report has a row for each.
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(report.contains("(the pace is 80%) — pausing"), "{report}");
    assert!(
        report.contains("--pace: went on with the implement stage after"),
        "{report}"
    );
    // The pause is waiting time in the totals.
    let json: Value = serde_json::from_str(&p.run(&["report", "--json"]).expect(0).stdout).unwrap();
    assert!(
        json["runs"][0]["totals"]["wait_ms"].as_u64().unwrap() > 0,
        "{json:#}"
    );
    assert!(
        report.contains("first-hour share after the reset is 25%"),
        "{report}"
    );
    // Research had no earlier reading, implement read a new window: First's share is unknown.
    assert!(
        report.contains(
            "5-hour window at 30 % after this task (its share unknown: no earlier reading)"
        ),
        "{report}"
    );
}

#[test]
fn pace_even_keeps_to_the_elapsed_share_and_pace_week_to_the_week() {
    let spec = "- [ ] First\n- [ ] Second\n";
    let week =
        |used: f64| json!({"utilization": used, "window": "seven_day", "resets_in_secs": 86_400});
    // (what First's research reports, the flags, the line kern prints, both tasks taken)
    type Case<'a> = (Value, &'a [&'a str], Option<[&'a str; 2]>);
    let cases: [Case; 4] = [
        // 4 h of 5 h left: 1 h elapsed, 20 % + 5 allowed; 50 % is past it, the catch-up is
        // past --max-wait.
        (
            usage(0.50, 4 * 3600),
            &["--pace=even"],
            Some([
                "five-hour window is 50% used, resets in",
                "(the even pace is 25%)",
            ]),
        ),
        (usage(0.10, 4 * 3600), &["--pace=even"], None),
        (
            week(0.75),
            &["--pace=90", "--pace-week=70"],
            Some([
                "seven-day window is 75% used, resets in",
                "(the pace is 70%)",
            ]),
        ),
        (week(0.75), &["--pace=90", "--pace-week=80"], None),
    ];
    for (reported, flags, line) in cases {
        let p = Project::new(spec);
        p.scenario(&json!({
            "tasks": [{"match": "First", "research": {"usage": reported}}],
            "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
        }));
        let out = p.run(&["5", "0", "--max-wait=10m"]).args(flags).expect(0);
        match line {
            Some([line, pace]) => {
                out.stderr_has(line);
                out.stderr_has(pace);
                out.stderr_has("no new task taken");
                assert_eq!(p.log(), ["First", "initial"], "{flags:?}");
                assert_eq!(p.run_events("paced")[0]["action"], "stop");
            }
            None => {
                assert_eq!(p.log(), ["Second", "First", "initial"], "{flags:?}");
                assert!(p.run_events("paced").is_empty(), "{flags:?}");
            }
        }
    }
}

/// The account's ledger on the remote, as `git log` in the bare remote shows it: the highest
/// reading of each window kind in it.
fn ledger_readings(fleet: &Fleet) -> Vec<Value> {
    let refs = fleet.remote_git(&["for-each-ref", "--format=%(refname)", "refs/kern/pace/"]);
    refs.lines()
        .flat_map(|r| {
            let message = fleet.remote_git(&["log", "-1", "--format=%B", r]);
            let (_, json) = message.split_once("\n\n").unwrap();
            let book: Value = serde_json::from_str(json.trim()).unwrap();
            book["readings"].as_array().unwrap().clone()
        })
        .collect()
}

/// Waits (a minute at most, a bound against a broken build) until `reached`.
fn wait_until(what: &str, reached: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !reached() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} was never reached"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn three_machines_on_one_account_stop_together_at_the_accounts_line() {
    let fleet = Fleet::new(&tasks(9), 3);
    let go = fleet.seed.outside.path().join("go");
    // Task 1's research reads the account at 85 %; every other task's reads 30 % and its
    // implement waits for `go`, which the test gives once the ledger has the 85 %.
    let plain = json!({"write": {"out/{slug}.txt": "done {task}\n"}});
    fleet.seed.scenario(&json!({
        "tasks": [{"match": "Task 1", "research": {"usage": usage(0.85, 7200)}, "implement": plain}],
        "default": {
            "research": {"usage": usage(0.30, 7200)},
            // It also ends once the test's folder is gone, should the test fail first.
            "implement": {"shell": [format!(
                              "while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done",
                              go.display(),
                              fleet.seed.outside.path().display()
                          )],
                          "write": {"out/{slug}.txt": "done {task}\n"}}
        }
    }));
    let args = [
        "20",
        "0",
        "--remote",
        "origin",
        "--pace=80",
        "--max-wait=1m",
    ];
    let children: Vec<_> = (0..3)
        .map(|i| {
            fleet
                .kern(i, &args)
                .spawn_with(std::process::Stdio::piped(), std::process::Stdio::piped())
        })
        .collect();
    wait_until("the ledger holding 85 %", || {
        ledger_readings(&fleet)
            .iter()
            .any(|r| r["used_percent"] == 85.0)
    });
    std::fs::write(&go, "").unwrap();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (i, out) in outs.iter().enumerate() {
        let (_, err) = texts(out);
        assert_eq!(out.status.code(), Some(0), "machine {i}:\n{err}");
        // Each machine stops at the account's line, whichever machine read it.
        assert!(
            err.contains("the program:")
                && err.contains(" account's five-hour window is 85% used")
                && err.contains("(the pace is 80%) — no new task taken"),
            "machine {i}:\n{err}"
        );
    }
    // Only the tasks under way when the line was read landed; the rest are left for later.
    let spec = fleet.remote_file("SPEC.md");
    let done = spec.matches("- [x]").count();
    assert!((1..=3).contains(&done), "{spec}");
    assert!(spec.contains("- [x] Task 1"), "{spec}");
    assert!(spec.contains("- [ ] Task 9"), "{spec}");
    // The ledger holds each run's readings, the reading machine named.
    let readings = ledger_readings(&fleet);
    assert!(
        readings
            .iter()
            .all(|r| r["kind"] == "five_hour" && r["machine"].as_str().unwrap().contains("(run ")),
        "{readings:#?}"
    );

    // A machine that reads the ledger at the line starts no stage.
    let again = fleet.kern(0, &args).expect(0);
    again.stderr_has(" account's five-hour window is 85% used");
    again.stderr_has("no new task taken");
    assert!(
        !again.stderr.contains("research"),
        "no stage started:\n{}",
        again.stderr
    );
    assert_eq!(fleet.remote_file("SPEC.md"), spec);
}

#[test]
fn a_remote_refusing_the_ledger_is_one_warning_and_the_machine_judges_alone() {
    let fleet = Fleet::new(&tasks(3), 1);
    let hook = fleet
        .seed
        .outside
        .path()
        .join("remote.git")
        .join("hooks")
        .join("pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do case $ref in refs/kern/pace/*) echo 'no ledgers here' >&2; exit 1;; esac; done\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    fleet.seed.scenario(&json!({
        "default": {"research": {"usage": usage(0.30, 7200)},
                    "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}}
    }));
    let out = fleet
        .kern(0, &["5", "0", "--remote", "origin", "--pace=80"])
        .expect(0);
    let warning = "--pace: the account's usage ledger on `origin` (refs/kern/pace/";
    assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
    out.stderr_has("(pre-receive hook declined)");
    out.stderr_has("— judging by this machine's readings");
    assert_eq!(fleet.remote_file("SPEC.md").matches("- [x]").count(), 3);
    assert_eq!(ledger_readings(&fleet), Vec::<Value>::new());
}

#[test]
fn pace_does_not_wait_for_a_reset_after_the_nights_end_it_ends_the_night() {
    let spec = "- [ ] First\n- [ ] Second\n";
    // (the night's end, what kern does): the reset in 2 h comes after a 1 h night, before a
    // 3 h one. The test clock lets a pause pass at once, so the old behaviour (a pause past
    // the night's end, then Second) shows without a two-hour wait.
    for (deadline, ends) in [("1h", true), ("3h", false)] {
        let p = Project::new(spec);
        let clock = p.outside.path().join("clock");
        std::fs::write(&clock, "0\n").unwrap();
        p.scenario(&json!({
            "tasks": [{"match": "First", "research": {"usage": usage(0.85, 7200)}}],
            "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
        }));
        let out = p
            .run(&[
                "5",
                "0",
                "--pace=80",
                "--max-wait=6h",
                "--reset-margin=0s",
                // Stages fit the night (the default timeout, 1 h, would not fit a 1 h one).
                "--stage-timeout=10m",
                "--deadline",
                deadline,
            ])
            .env("KERN_TEST_CLOCK", &clock)
            .expect(0);
        if ends {
            out.stderr_has("five-hour window is 85% used, resets in");
            out.stderr_has("— waiting would pass the night's end (");
            out.stderr_has("): no new task taken, the night ends");
            assert_eq!(p.log(), ["First", "initial"]);
            let paced = p.run_events("paced");
            assert_eq!(paced.len(), 1, "{paced:?}");
            assert_eq!(paced[0]["action"], "stop");
            assert!(p.run_events("resumed").is_empty());
        } else {
            out.stderr_has("(the pace is 80%) — pausing ");
            assert_eq!(p.log(), ["Second", "First", "initial"], "{}", out.stderr);
            assert_eq!(p.run_events("resumed").len(), 1);
        }
    }
}

#[test]
fn a_stage_of_a_task_on_another_machine_pauses_at_the_accounts_line() {
    let fleet = Fleet::new(&tasks(2), 2);
    let go = fleet.seed.outside.path().join("go");
    // Task 1's research reads the account at 85 % for 20 s more; Task 2's reads 30 % and its
    // implement waits for `go`, given once the ledger has the 85 %: Task 2's review, on the
    // other machine, must pause for the account's reset.
    fleet.seed.scenario(&json!({
        "tasks": [{"match": "Task 1", "research": {"usage": usage(0.85, 20)},
                   "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}}],
        "default": {
            "research": {"usage": usage(0.30, 20)},
            "implement": {"shell": [format!(
                              "while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done",
                              go.display(),
                              fleet.seed.outside.path().display()
                          )],
                          "write": {"out/{slug}.txt": "done {task}\n"}}
        }
    }));
    let args = [
        "1",
        "0",
        "--remote",
        "origin",
        "--pace=80",
        "--max-wait=10m",
        "--reset-margin=0s",
    ];
    let children: Vec<_> = (0..2)
        .map(|i| {
            fleet
                .kern(i, &args)
                .spawn_with(std::process::Stdio::piped(), std::process::Stdio::piped())
        })
        .collect();
    wait_until("the ledger holding 85 %", || {
        ledger_readings(&fleet)
            .iter()
            .any(|r| r["used_percent"] == 85.0)
    });
    std::fs::write(&go, "").unwrap();
    let errs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let (_, err) = texts(&out);
            assert_eq!(out.status.code(), Some(0), "{err}");
            err
        })
        .collect();
    let second = errs
        .iter()
        .find(|e| e.contains("claimed `Task 2`"))
        .unwrap_or_else(|| panic!("no machine took Task 2: {errs:#?}"));
    assert!(
        second.contains(" account's five-hour window is 85% used")
            && second.contains("(the pace is 80%) — pausing"),
        "{second}"
    );
    assert_eq!(fleet.remote_file("SPEC.md").matches("- [x]").count(), 2);
}
