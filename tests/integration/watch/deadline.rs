//! A night's deadline (`--until`, `--deadline`; DESIGN.md section 20): no stage starts that
//! could not finish before it, a stage still running then is stopped and resumes on the next
//! run, and the run ends as planned (exit 0), its report's first line saying so; with
//! `--remote` the work in progress is pushed and the claims freed first (on `remote.rs`'s
//! fleet of clones).
//!
//! The deadlines here are seconds away because the deadline is what is tested; each test
//! leaves several seconds of slack around every step a loaded machine could delay, and asserts
//! what happened, never how long it took.

use serde_json::json;

use crate::remote::{Fleet, all_landed_once, tasks};
use crate::support::fakes::{fake_gh, gh_calls};
use crate::support::gate::Gate;
use crate::support::project::Project;

#[test]
fn no_stage_starts_that_could_not_finish_before_the_deadline() {
    let p = Project::new("- [ ] Alpha\n");
    let out = p
        .run(&["3", "0", "--deadline", "30m", "--stage-timeout", "1h"])
        .expect(0);
    out.stderr_has("the research stage may take up to 1h (its --stage-timeout) and only ");
    assert!(p.prompts("research").is_empty(), "no agent ran");
    assert_eq!(p.log(), vec!["initial"]);
    let ends = p.run_events("run_end");
    assert_eq!(ends.len(), 1);
    assert!(ends[0]["deadline"].is_string(), "{:?}", ends[0]);
    assert_eq!(ends[0]["exit_code"], 0);
    let report = p.run(&["report"]).expect(0);
    let first = report.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Ended at the deadline ")
            && first.contains("the research stage may take up to 1h"),
        "{}",
        report.stdout
    );
}

#[test]
fn a_stage_still_running_at_the_deadline_is_stopped_and_resumes_on_the_next_run() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let gate = Gate::new(&p);
    // Beta's implement (the second implement, and any retry of it) is still busy when the
    // deadline comes.
    for n in 1..=4 {
        gate.hold("implement", n);
    }
    // Alpha's stages fit (each may take its 10 s timeout; they start well before 10 s); after
    // the 12 s pause Beta's start by this run's medians, and its implement, started with at
    // most 8 s left, is cut at the deadline whatever the machine's speed — never by its own
    // 10 s timeout first.
    let out = p
        .run(&["3", "12", "--deadline", "20", "--stage-timeout", "10"])
        .env("KERN_AGENT", gate.agent())
        .expect(0);
    out.stderr_has("it came during the implement stage, which resumes on the next run");
    assert_eq!(p.log(), vec!["Alpha", "initial"]);
    assert!(
        p.read("SPEC.md").contains("- [~] Beta"),
        "{}",
        p.read("SPEC.md")
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.state_dir().join("stage2.json")).unwrap()).unwrap();
    assert_eq!(record["kern"]["outcome"], "interrupted", "{record}");
    assert!(
        record["kern"]["failure"]
            .as_str()
            .unwrap_or_default()
            .starts_with("stopped at the deadline "),
        "{record}"
    );
    let report = p.run(&["report"]).expect(0);
    assert!(
        report.stdout.starts_with("Ended at the deadline "),
        "{}",
        report.stdout
    );
    // The next night picks Beta up at its implement stage, and commits it once.
    for n in 1..=4 {
        gate.release("implement", n);
    }
    p.run(&["3", "0"]).env("KERN_AGENT", gate.agent()).expect(0);
    assert_eq!(p.log(), vec!["Beta", "Alpha", "initial"]);
    let starts = p.run_events("iteration_start");
    let resumed = starts.last().unwrap();
    assert_eq!(resumed["task"], "Beta");
    assert_eq!(resumed["resume"], "implement", "{resumed}");
}

/// At its deadline a machine pushes the work of the task it holds, publishes its SPEC.md lines
/// and frees its claim (DESIGN.md section 20): nothing dangles, and the next machine to claim
/// the task resumes from that work.
#[test]
fn at_its_deadline_a_machine_pushes_its_work_frees_its_claim_and_the_next_resumes_it() {
    let fleet = Fleet::new(&tasks(2), 2);
    let never = fleet.seed.outside.path().join("never");
    let plain = json!({"write": {"out/{slug}.txt": "done {task}\n"}});
    fleet.seed.scenario(&json!({
        "tasks": [{"match": "Task 2", "implement": [
            {"shell": [
                "echo half > half.txt".to_string(),
                format!(
                    "while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done",
                    never.display(),
                    fleet.seed.outside.path().display()
                )
            ]},
            plain
        ]}],
        "default": {"implement": plain}
    }));
    // Task 1's stages fit (10 s each, started well before 10 s); after the 12 s pause Task 2's
    // start by this run's medians, and its implement, started with at most 8 s left, is cut at
    // the deadline — never by its own 10 s timeout first.
    let out = fleet
        .kern(
            0,
            &[
                "3",
                "12",
                "--remote",
                "origin",
                "--deadline",
                "20",
                "--stage-timeout",
                "10",
            ],
        )
        .expect(0);
    out.stderr_has("it came during the implement stage, which resumes on the next run");
    assert_eq!(fleet.claims(), Vec::<String>::new(), "the claim is freed");
    assert_eq!(
        fleet.remote_git(&["show", "refs/kern/work/task-2:half.txt"]),
        "half\n",
        "the work in progress is on the remote"
    );
    assert!(
        fleet.remote_file("SPEC.md").contains("- [~] Task 2"),
        "{}",
        fleet.remote_file("SPEC.md")
    );
    // Another machine claims Task 2 and goes on from that work.
    let out = fleet.kern(1, &["3", "0", "--remote", "origin"]).expect(0);
    out.stderr_has(
        "`Task 2` resumes from the work its last machine pushed (`refs/kern/work/task-2`: 1 path)",
    );
    assert_eq!(fleet.remote_file("half.txt"), "half\n");
    all_landed_once(&fleet, 2);
    std::fs::write(&never, "").unwrap();
}

/// With `--tracker github` too, the claim freed at the deadline takes the machine's label off
/// the task's issue, as a claim freed at the run's end does: nothing dangles on the issue.
#[test]
fn at_its_deadline_a_machine_takes_its_label_off_the_issue_of_the_task_it_leaves() {
    let fleet = Fleet::new("- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n", 1);
    let never = fleet.seed.outside.path().join("never");
    fleet
        .seed
        .scenario(&json!({"default": {"implement": {"shell": [format!(
            "while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done",
            never.display(),
            fleet.seed.outside.path().display()
        )]}}}));
    let (bin, log) = fake_gh(&fleet.seed);
    // Research fits and implement starts (each by its 5 s timeout), then every try of
    // implement is cut, by its timeout or at the deadline, until none fits.
    fleet
        .kern(
            0,
            &[
                "1",
                "0",
                "--remote",
                "origin",
                "--tracker",
                "github",
                "--deadline",
                "20",
                "--stage-timeout",
                "5",
            ],
        )
        .path_first(&bin)
        .expect(0)
        .stderr_has("deadline");
    std::fs::write(&never, "").unwrap();
    assert_eq!(fleet.claims(), Vec::<String>::new(), "the claim is freed");
    let calls = gh_calls(&log);
    let asked: Vec<String> = calls.iter().map(|(a, _)| a[..3].join(" ")).collect();
    assert_eq!(
        asked.first().map(String::as_str),
        Some("api --method POST"),
        "{calls:?}"
    );
    assert_eq!(
        asked.last().map(String::as_str),
        Some("api --method DELETE"),
        "the label comes off: {calls:?}"
    );
    assert!(
        calls.last().unwrap().0[3].starts_with("repos/acme/app/issues/12/labels/kern%3A"),
        "{calls:?}"
    );
    assert!(
        fleet
            .remote_file("SPEC.md")
            .contains("- [~] Add a dark mode"),
        "{}",
        fleet.remote_file("SPEC.md")
    );
}
