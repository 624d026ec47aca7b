//! Many machines, one SPEC.md (`kern --remote`, issue 32, DESIGN.md section 18): one bare
//! remote and N clones on this machine, each with its own `kern` process. No network; events
//! inside stages are ordered by files the test creates, never by sleeps.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::during::git_in;
use crate::support::project::{self, Project, texts};

mod fetch;

/// A bare remote made from a project, and clones of it ("machines").
pub(crate) struct Fleet {
    pub(crate) seed: Project,
    remote: PathBuf,
    clones: Vec<PathBuf>,
}

impl Fleet {
    /// `machines` clones of a remote holding `spec` (and the seed's scripted agent).
    pub(crate) fn new(spec: &str, machines: usize) -> Fleet {
        let seed = Project::new(spec);
        let remote = seed.outside.path().join("remote.git");
        git_in(
            seed.outside.path(),
            &[
                "clone",
                "--quiet",
                "--bare",
                &seed.path().display().to_string(),
                "remote.git",
            ],
        );
        let clones = (0..machines)
            .map(|i| {
                let name = format!("machine-{i}");
                git_in(
                    seed.outside.path(),
                    &["clone", "--quiet", &remote.display().to_string(), &name],
                );
                let dir = seed.outside.path().join(name);
                git_in(&dir, &["config", "user.name", "Test Person"]);
                git_in(&dir, &["config", "user.email", "test@example.com"]);
                dir
            })
            .collect();
        Fleet {
            seed,
            remote,
            clones,
        }
    }

    /// `kern ARGS` on machine `i`, with the seed's scripted agent and its own state root.
    pub(crate) fn kern(&self, i: usize, args: &[&str]) -> project::KernRun<'_> {
        self.seed.run(args).current_dir(&self.clones[i]).env(
            "KERN_STATE_DIR",
            self.seed.outside.path().join(format!("state-{i}")),
        )
    }

    fn spawn(&self, i: usize, args: &[&str]) -> Child {
        self.kern(i, args)
            .spawn_with(Stdio::piped(), Stdio::piped())
    }

    /// `git ARGS` in the bare remote.
    pub(crate) fn remote_git(&self, args: &[&str]) -> String {
        git_in(&self.remote, args)
    }

    /// The remote's master: (subject, parents) newest first.
    fn history(&self) -> Vec<(String, usize)> {
        self.remote_git(&["log", "--format=%s%x09%P", "master"])
            .lines()
            .map(|l| {
                let (s, p) = l.split_once('\t').unwrap();
                (s.to_string(), p.split_whitespace().count())
            })
            .collect()
    }

    pub(crate) fn remote_file(&self, path: &str) -> String {
        self.remote_git(&["show", &format!("master:{path}")])
    }

    pub(crate) fn claims(&self) -> Vec<String> {
        self.remote_git(&["for-each-ref", "--format=%(refname)", "refs/kern/claims/"])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

fn ok(out: &Output, what: &str) {
    let (stdout, stderr) = texts(out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
}

/// Every task of `tasks` committed exactly once on the remote's master, linear history,
/// SPEC.md all done, no claim left.
pub(crate) fn all_landed_once(fleet: &Fleet, tasks: usize) {
    let history = fleet.history();
    assert!(
        history.iter().all(|(_, parents)| *parents <= 1),
        "linear: {history:?}"
    );
    for i in 1..=tasks {
        let subject = format!("Task {i}");
        assert_eq!(
            history.iter().filter(|(s, _)| *s == subject).count(),
            1,
            "{subject} committed exactly once: {history:?}"
        );
        assert_eq!(
            fleet.remote_file(&format!("out/task-{i}.txt")),
            format!("done Task {i}\n")
        );
    }
    let spec = fleet.remote_file("SPEC.md");
    assert_eq!(spec.matches("- [x]").count(), tasks, "{spec}");
    assert_eq!(fleet.claims(), Vec::<String>::new(), "no claim left");
    assert_eq!(
        fleet.remote_git(&["for-each-ref", "refs/kern/work/"]),
        "",
        "no work in progress left"
    );
}

pub(crate) fn tasks(n: usize) -> String {
    (1..=n).map(|i| format!("- [ ] Task {i}\n")).collect()
}

#[test]
fn two_machines_racing_for_one_task_a_hundred_times_one_wins_each_time() {
    let fleet = Fleet::new(&tasks(1), 2);
    for round in 0..100 {
        let key = format!("race-{round}");
        let children: Vec<Child> = (0..2)
            .map(|i| {
                fleet
                    .kern(i, &["claim", &key, "--remote", "origin"])
                    .spawn_with(Stdio::piped(), Stdio::piped())
            })
            .collect();
        let outs: Vec<Output> = children.into_iter().map(finish).collect();
        for out in &outs {
            ok(out, "kern claim");
        }
        let won = outs
            .iter()
            .filter(|o| String::from_utf8_lossy(&o.stdout) == "claimed\n")
            .count();
        assert_eq!(won, 1, "round {round}: {outs:?}");
    }
    assert_eq!(fleet.claims().len(), 100);
}

#[test]
fn an_unknown_remote_is_exit_2_naming_the_flag_and_the_fix() {
    let fleet = Fleet::new(&tasks(1), 1);
    let out = fleet.kern(0, &["1", "0", "--remote", "upstream"]).expect(2);
    out.stderr_has("--remote `upstream`: this clone has no remote of that name (it has `origin`)");
    out.stderr_has("git remote add upstream <url>");
}

#[test]
fn an_unreachable_remote_is_exit_2_naming_the_flag() {
    let fleet = Fleet::new(&tasks(1), 1);
    std::fs::rename(&fleet.remote, fleet.seed.outside.path().join("gone.git")).unwrap();
    let out = fleet.kern(0, &["1", "0", "--remote", "origin"]).expect(2);
    out.stderr_has(
        "--remote `origin`: fetching the branch and the claims (`refs/heads/master`, `refs/kern/claims/*`) failed: fatal: '",
    );
    out.stderr_has("does not appear to be a git repository");
    out.stderr_has("check that `git fetch origin` works from this clone");
    assert!(
        !out.stderr.contains("fetched 6 times"),
        "a remote that is gone is not fetched again: {}",
        out.stderr
    );
}

#[test]
fn one_machine_lands_every_task_on_the_remote_and_leaves_no_claim() {
    let fleet = Fleet::new(&tasks(3), 1);
    let out = fleet.kern(0, &["10", "0", "--remote", "origin"]).expect(0);
    all_landed_once(&fleet, 3);
    out.stderr_has("claimed `Task 1` on `origin`");
    out.stderr_has("landed `Task 3` on `origin/master`");
}

fn machines_share_twelve_tasks(machines: usize, more: &[&str]) {
    let fleet = Fleet::new(&tasks(12), machines);
    let args = [&["20", "0", "--remote", "origin"][..], more].concat();
    let children: Vec<Child> = (0..machines).map(|i| fleet.spawn(i, &args)).collect();
    let outs: Vec<Output> = children.into_iter().map(finish).collect();
    for (i, out) in outs.iter().enumerate() {
        ok(out, &format!("machine {i}"));
    }
    all_landed_once(&fleet, 12);
    // Each machine worked: the claims were shared out.
    let working = outs
        .iter()
        .filter(|o| texts(o).1.contains("landed `Task"))
        .count();
    assert!(
        working >= 2,
        "only {working} machine(s) landed a task: {:#?}",
        outs.iter().map(|o| texts(o).1).collect::<Vec<_>>()
    );
}

#[test]
fn three_machines_with_two_jobs_each_share_twelve_tasks_each_landed_once() {
    machines_share_twelve_tasks(3, &["-j", "2"]);
}

#[test]
fn six_machines_share_twelve_tasks_each_landed_once() {
    machines_share_twelve_tasks(6, &[]);
}

/// Waits (a minute at most, a bound against a broken build) until `reached`.
fn wait_until(what: &str, reached: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached() {
        assert!(Instant::now() < deadline, "{what} was never reached");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A machine killed (kill -9) in `stage`: its claim lapses and another machine takes the task
/// over and lands it; every task lands once.
fn killed_in_stage_is_taken_over(stage: &str) {
    let fleet = Fleet::new(&tasks(3), 2);
    let marker = fleet.seed.outside.path().join("in-stage");
    let never = fleet.seed.outside.path().join("never");
    // Task 1's first time in `stage` says so and hangs; its second time (the takeover) works.
    let mut first = json!({"shell": [
        format!("touch '{}'", marker.display()),
        // The killed machine's agent is orphaned (no kern takes over on its clone): it
                // also ends when the test's folder is gone, whenever the file is missed.
                format!(
                    "while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done",
                    never.display(),
                    fleet.seed.outside.path().display()
                )
    ]});
    let plain = match stage {
        "research" => json!({"result": {"notes": ["n"]}}),
        "implement" => json!({"write": {"out/{slug}.txt": "done {task}\n"}}),
        _ => json!({"result": {"verdict": "COMMIT", "subject": "{task}"}}),
    };
    for (k, v) in plain.as_object().unwrap() {
        first[k] = v.clone();
    }
    let mut task1 = json!({"match": "Task 1"});
    task1[stage] = json!([first, plain]);
    fleet.seed.scenario(&json!({
        "tasks": [task1],
        "default": {"implement": {"write": {"out/{slug}.txt": "done {task}\n"}}}
    }));
    let ttl = ["--claim-ttl", "3s"];
    let mut victim = fleet.spawn(
        0,
        &[&["1", "0", "--remote", "origin"][..], &ttl[..]].concat(),
    );
    wait_until(&format!("task 1's {stage}"), || marker.exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    victim.wait().unwrap();
    assert_eq!(fleet.claims(), vec!["refs/kern/claims/task-1".to_string()]);
    let out = fleet
        .kern(
            1,
            &[&["10", "0", "--remote", "origin"][..], &ttl[..]].concat(),
        )
        .expect(0);
    out.stderr_has("took over `Task 1` on `origin`: the claim of pid ")
        .stderr_has("lapsed (attempt 2)");
    all_landed_once(&fleet, 3);
    std::fs::write(&never, "").unwrap();
}

#[test]
fn a_machine_killed_in_research_is_taken_over_after_its_claim_lapses() {
    killed_in_stage_is_taken_over("research");
}

#[test]
fn a_machine_killed_in_implement_is_taken_over_after_its_claim_lapses() {
    killed_in_stage_is_taken_over("implement");
}

#[test]
fn a_machine_killed_in_review_is_taken_over_after_its_claim_lapses() {
    killed_in_stage_is_taken_over("commit");
}

#[test]
fn a_remote_refusing_pushes_to_master_leaves_the_work_on_its_branch_and_says_so() {
    let fleet = Fleet::new(&tasks(1), 1);
    let hook = fleet.remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do\n  [ \"$ref\" = refs/heads/master ] && { echo 'master is protected' >&2; exit 1; }\ndone\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = fleet.remote_git(&["rev-parse", "master"]);
    let out = fleet.kern(0, &["1", "0", "--remote", "origin"]).expect(4);
    out.stderr_has("the remote `origin` refused the push to `master` ([remote rejected] (pre-receive hook declined)): the work of `Task 1` is on the branch `kern/task-1` here and on `origin`");
    assert_eq!(fleet.remote_git(&["rev-parse", "master"]), before);
    assert_eq!(
        fleet.remote_git(&["show", "kern/task-1:out/task-1.txt"]),
        "done Task 1\n"
    );
    assert_eq!(fleet.claims(), Vec::<String>::new(), "its claim was freed");
}

#[test]
fn status_lists_the_claims_and_release_frees_one() {
    let fleet = Fleet::new(&tasks(2), 2);
    fleet
        .kern(0, &["claim", "task-1", "--remote", "origin"])
        .expect(0);
    let status = fleet.kern(1, &["status", "--remote"]).expect(0);
    let stdout = &status.stdout;
    assert!(
        stdout.starts_with("claims on `origin` (refs/kern/claims/):\n  task-1: pid "),
        "{stdout}"
    );
    assert!(stdout.contains(", attempt 1, expires "), "{stdout}");
    let release = fleet.kern(1, &["release", "Task 1"]).expect(0);
    release.stderr_has("released `refs/kern/claims/task-1` on `origin`");
    assert_eq!(fleet.claims(), Vec::<String>::new());
    let again = fleet.kern(1, &["release", "Task 1"]).expect(2);
    again.stderr_has("no claim on `Task 1` on `origin`");
}

/// A scenario where Task 1's implement says it began (touches `marker`) and waits for `go`
/// the first time, and is plain the second time.
fn task_1_waits_in_implement(fleet: &Fleet, marker: &Path, go: &Path) {
    let plain = json!({"write": {"out/{slug}.txt": "done {task}\n"}});
    fleet.seed.scenario(&json!({
        "tasks": [{"match": "Task 1", "implement": [
            {"shell": [
                format!("touch '{}'", marker.display()),
                format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display())
            ], "write": {"out/{slug}.txt": "done {task}\n"}},
            plain
        ]}],
        "default": {"implement": plain}
    }));
}

/// The claim record's `field` on the remote, for `key`.
fn claim_field(fleet: &Fleet, key: &str, field: &str) -> String {
    fleet
        .remote_git(&[
            "log",
            "-1",
            "--format=%B",
            &format!("refs/kern/claims/{key}"),
        ])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}: ")).map(str::to_string))
        .unwrap()
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn a_claim_is_renewed_while_its_task_runs_past_its_time() {
    let fleet = Fleet::new(&tasks(1), 2);
    let marker = fleet.seed.outside.path().join("in-implement");
    let go = fleet.seed.outside.path().join("go");
    task_1_waits_in_implement(&fleet, &marker, &go);
    let worker = fleet.spawn(0, &["1", "0", "--remote", "origin", "--claim-ttl", "2s"]);
    wait_until("task 1's implement", || marker.exists());
    let first: i64 = claim_field(&fleet, "task-1", "expires").parse().unwrap();
    // Past the first expiry (a time to reach, not an order of events).
    wait_until("the first expiry", || now_s() > first + 1);
    let other = fleet
        .kern(1, &["claim", "task-1", "--remote", "origin"])
        .expect(0);
    assert_eq!(other.stdout, "held\n", "the claim was renewed");
    let renewed: i64 = claim_field(&fleet, "task-1", "expires").parse().unwrap();
    assert!(renewed > first, "{renewed} > {first}");
    assert_eq!(claim_field(&fleet, "task-1", "attempt"), "1");
    std::fs::write(&go, "").unwrap();
    ok(&finish(worker), "the worker");
    all_landed_once(&fleet, 1);
}

#[test]
fn a_machine_paused_past_its_claim_never_lands_the_task_another_took_over() {
    use nix::sys::signal::{Signal, kill};
    let fleet = Fleet::new(&tasks(1), 2);
    let marker = fleet.seed.outside.path().join("in-implement");
    let go = fleet.seed.outside.path().join("go");
    task_1_waits_in_implement(&fleet, &marker, &go);
    let paused = fleet.spawn(0, &["1", "0", "--remote", "origin", "--claim-ttl", "2s"]);
    let pid = nix::unistd::Pid::from_raw(paused.id() as i32);
    wait_until("task 1's implement", || marker.exists());
    kill(pid, Signal::SIGSTOP).unwrap();
    let expires: i64 = claim_field(&fleet, "task-1", "expires").parse().unwrap();
    wait_until("the claim's expiry", || now_s() > expires);
    fleet
        .kern(1, &["1", "0", "--remote", "origin", "--claim-ttl", "2s"])
        .expect(0);
    std::fs::write(&go, "").unwrap();
    kill(pid, Signal::SIGCONT).unwrap();
    let out = finish(paused);
    let (_, stderr) = texts(&out);
    assert!(
        stderr.contains("lost the claim on `Task 1`")
            || stderr.contains("`Task 1` was not landed: its claim lapsed"),
        "{stderr}"
    );
    assert!(!stderr.contains("landed `Task 1`"), "{stderr}");
    all_landed_once(&fleet, 1);
}

#[test]
fn a_conflict_between_machines_is_retried_on_the_new_tip_and_both_land_once() {
    let fleet = Fleet::new("- [ ] Alpha\n- [ ] Beta\n", 2);
    std::fs::write(fleet.clones[0].join("shared.txt"), "one\ntwo\nthree\n").unwrap();
    git_in(&fleet.clones[0], &["add", "shared.txt"]);
    git_in(&fleet.clones[0], &["commit", "--quiet", "-m", "shared"]);
    git_in(&fleet.clones[0], &["push", "--quiet", "origin", "master"]);
    let beta_began = fleet.seed.outside.path().join("beta-began");
    let remote = fleet.remote.display().to_string();
    // Alpha waits until Beta began; Beta's first attempt waits until Alpha landed: they
    // overlap, on two machines, and Beta's work conflicts.
    fleet.seed.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": {
                "shell": [format!("while [ ! -e '{}' ]; do sleep 0.05; done", beta_began.display())],
                "write": {"shared.txt": "one by Alpha\ntwo\nthree\n"}}},
            {"match": "Beta", "implement": [
                {"shell": [
                    format!("touch '{}'", beta_began.display()),
                    format!("until git --git-dir='{remote}' log --format=%s master | grep -qx Alpha; do sleep 0.05; done")
                ], "write": {"shared.txt": "one by Beta\ntwo\nthree\n"}},
                {"write": {"shared.txt": "one by Alpha\ntwo by Beta\nthree\n"}}
            ]}
        ]
    }));
    let children: Vec<Child> = (0..2)
        .map(|i| fleet.spawn(i, &["5", "0", "--remote", "origin"]))
        .collect();
    let outs: Vec<Output> = children.into_iter().map(finish).collect();
    for (i, out) in outs.iter().enumerate() {
        ok(out, &format!("machine {i}"));
    }
    let stderr: String = outs.iter().map(|o| texts(o).1).collect();
    assert!(
        stderr.contains("`Beta` conflicts with the branch in `shared.txt`"),
        "{stderr}"
    );
    let subjects: Vec<String> = fleet.history().into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        subjects.iter().filter(|s| *s == "Beta").count(),
        1,
        "{subjects:?}"
    );
    assert_eq!(subjects.iter().filter(|s| *s == "Alpha").count(), 1);
    assert!(fleet.history().iter().all(|(_, p)| *p <= 1));
    assert_eq!(
        fleet.remote_file("shared.txt"),
        "one by Alpha\ntwo by Beta\nthree\n"
    );
    let spec = fleet.remote_file("SPEC.md");
    assert!(
        spec.contains("**Attempt 1:** its work conflicted with the branch in `shared.txt`"),
        "{spec}"
    );
    assert_eq!(spec.matches("- [x]").count(), 2, "{spec}");
    assert_eq!(fleet.claims(), Vec::<String>::new());
}

#[test]
fn review_parks_each_task_on_its_branch_on_the_remote_and_spec_md_says_so() {
    let fleet = Fleet::new(&tasks(2), 1);
    let before = fleet.remote_git(&["rev-parse", "master"]);
    fleet
        .kern(0, &["5", "0", "--remote", "origin", "--review"])
        .expect(0);
    for i in 1..=2 {
        assert_eq!(
            fleet.remote_git(&["show", &format!("kern/task-{i}:out/task-{i}.txt")]),
            format!("done Task {i}\n")
        );
    }
    // master holds SPEC.md's notes only: no work landed.
    let changed = fleet.remote_git(&["diff", "--name-only", before.trim(), "master"]);
    assert_eq!(changed.trim(), "SPEC.md");
    let spec = fleet.remote_file("SPEC.md");
    assert_eq!(spec.matches("- [x]").count(), 2, "{spec}");
    assert!(spec.contains("**Review:** `kern/task-1`"), "{spec}");
    assert_eq!(fleet.claims(), Vec::<String>::new());
}

/// The clone folder of machine `i` (for debugging a failing test).
#[allow(dead_code)]
fn clone_of(fleet: &Fleet, i: usize) -> &Path {
    &fleet.clones[i]
}

/// A folder for PATH holding only `git` and `sh` (and what `extra` names: name, script).
fn bare_path(fleet: &Fleet, extra: &[(&str, &str)]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = fleet.seed.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    for (name, script) in extra {
        std::fs::write(bin.join(name), script).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.display().to_string()
}

#[test]
fn pr_parks_the_task_on_the_remote_and_opens_a_pull_request_with_gh() {
    let fleet = Fleet::new(&tasks(1), 1);
    let calls = fleet.seed.outside.path().join("gh-calls");
    let gh = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\necho https://github.com/o/r/pull/7\n",
        calls.display()
    );
    let path = bare_path(&fleet, &[("gh", &gh)]);
    let out = fleet
        .kern(0, &["1", "0", "--remote", "origin", "--pr"])
        .env("PATH", path)
        .expect(0);
    out.stderr_has("opened a pull request for `kern/task-1`: https://github.com/o/r/pull/7");
    let called = std::fs::read_to_string(&calls).unwrap();
    assert!(
        called.starts_with("pr create --base master --head kern/task-1 --title Task 1 --body "),
        "{called}"
    );
    assert_eq!(
        fleet.remote_git(&["show", "kern/task-1:out/task-1.txt"]),
        "done Task 1\n"
    );
    assert!(
        fleet
            .remote_file("SPEC.md")
            .contains("**Review:** `kern/task-1`")
    );
}

#[test]
fn pr_without_gh_says_so_and_leaves_the_branch_on_the_remote() {
    let fleet = Fleet::new(&tasks(1), 1);
    let path = bare_path(&fleet, &[]);
    let out = fleet
        .kern(0, &["1", "0", "--remote", "origin", "--pr"])
        .env("PATH", path)
        .expect(0);
    out.stderr_has(
        "`gh` (the GitHub CLI) is not installed: open the pull request for `kern/task-1` yourself",
    );
    assert_eq!(
        fleet.remote_git(&["show", "kern/task-1:out/task-1.txt"]),
        "done Task 1\n"
    );
}

#[test]
fn a_machine_killed_in_implement_leaves_its_work_for_the_machine_taking_over() {
    let fleet = Fleet::new(&tasks(1), 2);
    killed_in_implement_then_taken_over(&fleet, |run| run);
}

/// Machine 0 is killed in task 1's implement after its work in progress reached the remote;
/// machine 1, run through `taker`, takes the task over from that work and lands it.
pub(crate) fn killed_in_implement_then_taken_over(
    fleet: &Fleet,
    taker: impl FnOnce(project::KernRun<'_>) -> project::KernRun<'_>,
) {
    let marker = fleet.seed.outside.path().join("in-implement");
    let never = fleet.seed.outside.path().join("never");
    let plain = json!({"write": {"out/{slug}.txt": "done {task}\n"}});
    fleet.seed.scenario(&json!({
        "tasks": [{"match": "Task 1", "implement": [
            {"shell": [
                "echo half > half.txt".to_string(),
                format!("touch '{}'", marker.display()),
                // The killed machine's agent is orphaned (no kern takes over on its clone): it
                // also ends when the test's folder is gone, whenever the file is missed.
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
    let ttl = ["--claim-ttl", "3s"];
    let mut victim = fleet.spawn(
        0,
        &[&["1", "0", "--remote", "origin"][..], &ttl[..]].concat(),
    );
    wait_until("task 1's implement", || marker.exists());
    // Its work in progress reaches the remote at a renewal of its claim.
    wait_until("the pushed work", || {
        !fleet
            .remote_git(&["for-each-ref", "refs/kern/work/task-1"])
            .is_empty()
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    victim.wait().unwrap();
    let out = taker(fleet.kern(
        1,
        &[&["1", "0", "--remote", "origin"][..], &ttl[..]].concat(),
    ))
    .expect(0);
    out.stderr_has(
        "`Task 1` resumes from the work its last machine pushed (`refs/kern/work/task-1`: 1 path)",
    );
    // The half-done work lands with the task: the taking machine's agent never wrote it.
    assert_eq!(fleet.remote_file("half.txt"), "half\n");
    all_landed_once(fleet, 1);
    std::fs::write(&never, "").unwrap();
}

/// The SPEC.md-only commits `--remote` publishes (here `--review`'s notes) are made as git
/// would make them: the clone's identity, signed when it signs.
#[test]
fn spec_md_outcome_commits_are_signed_with_the_persons_identity() {
    let fleet = Fleet::new(&tasks(1), 1);
    let key = fleet.seed.outside.path().join("signing-key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "kern-test", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let clone = &fleet.clones[0];
    git_in(clone, &["config", "gpg.format", "ssh"]);
    git_in(
        clone,
        &["config", "user.signingkey", &key.display().to_string()],
    );
    git_in(clone, &["config", "commit.gpgsign", "true"]);
    let before = fleet.remote_git(&["rev-parse", "master"]);
    fleet
        .kern(0, &["5", "0", "--remote", "origin", "--review"])
        .expect(0);
    let new = fleet.remote_git(&["rev-list", &format!("{}..master", before.trim())]);
    assert!(!new.trim().is_empty(), "SPEC.md's notes were published");
    for commit in new.lines() {
        let raw = fleet.remote_git(&["cat-file", "commit", commit]);
        assert!(raw.contains("\ngpgsig "), "signed: {raw}");
        assert!(
            raw.contains("\nauthor Test Person <test@example.com>"),
            "{raw}"
        );
    }
}
