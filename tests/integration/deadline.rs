//! A night's deadline (`--until`, `--deadline`; DESIGN.md section 20): no stage starts that
//! could not finish before it, a stage still running then is stopped and resumes on the next
//! run, and the run ends as planned (exit 0), its report's first line saying so. The `--remote`
//! side (work pushed, claims freed) is in `remote.rs`.
//!
//! The deadlines here are seconds away because the deadline is what is tested; each test
//! leaves several seconds of slack around every step a loaded machine could delay, and asserts
//! what happened, never how long it took.

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
    // Alpha's stages fit (each may take its 10 s timeout; they start well before 15 s); after
    // the pause Beta's start by this run's medians, and its implement is cut at the deadline.
    let out = p
        .run(&["3", "14", "--deadline", "25", "--stage-timeout", "10"])
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
