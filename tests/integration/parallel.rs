//! Parallel tasks in worktrees (`-j N`) and review branches (`--review`, `kern accept`,
//! `kern reject`): issue 17, DESIGN.md section 15. Events inside stages are ordered by files
//! the agents and the test create, never by sleeps.

use crate::support::during::spawn;
use crate::support::project::{Project, texts};
use crate::support::wait_for_file;

use std::path::Path;

use serde_json::{Value, json};

/// A shell line that waits (at most 60 s, so a broken build cannot hang the suite) until
/// `path` exists, then writes `yes` to `seen` — or `no` when it never came.
fn wait_then_note(path: &Path, seen: &str) -> String {
    format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; if [ -e '{}' ]; then echo yes > '{seen}'; else echo no > '{seen}'; fi",
        path.display(),
        path.display()
    )
}

/// Appends `line` to the shared event log of the test (one line per `echo`: atomic).
fn note(log: &Path, line: &str) -> String {
    format!("echo '{line}' >> '{}'", log.display())
}

fn event_log(p: &Project) -> Vec<String> {
    std::fs::read_to_string(p.outside.path().join("events"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A commit-msg hook of the commitlint kind: a subject must start with `feat: `, else the hook
/// says `subject must start with feat:` and refuses.
fn refuse_subjects_without_feat(p: &Project) {
    use std::os::unix::fs::PermissionsExt;
    let hook = p.path().join(".git/hooks/commit-msg");
    std::fs::write(
        &hook,
        "#!/bin/sh\nhead -n 1 \"$1\" | grep -q '^feat: ' || { echo 'subject must start with feat:' >&2; exit 1; }\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every commit of the branch, newest first: (subject, number of parents).
fn history(p: &Project) -> Vec<(String, usize)> {
    let r = git2::Repository::open(p.path()).unwrap();
    let mut walk = r.revwalk().unwrap();
    walk.push_head().unwrap();
    walk.map(|oid| {
        let c = r.find_commit(oid.unwrap()).unwrap();
        (
            String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned(),
            c.parent_count(),
        )
    })
    .collect()
}

/// No task worktree, folder or branch is left behind.
fn nothing_left_behind(p: &Project) {
    let r = git2::Repository::open(p.path()).unwrap();
    let worktrees = r.worktrees().unwrap();
    assert_eq!(
        worktrees.len(),
        0,
        "stale worktrees: {:?}",
        worktrees.iter().collect::<Vec<_>>()
    );
    let branches: Vec<String> = r
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_string())
        .filter(|n| n.starts_with("kern/"))
        .collect();
    assert!(branches.is_empty(), "task branches left: {branches:?}");
    let jobs = p.state_dir().join("jobs");
    let left: Vec<_> = std::fs::read_dir(&jobs)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "job folders left: {left:?}");
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
}

#[test]
fn six_independent_tasks_run_three_at_a_time_and_land_once_each_in_a_linear_history() {
    let spec: String = (1..=6).map(|i| format!("- [ ] Task {i}\n")).collect();
    let p = Project::new(&spec);
    let events = p.outside.path().join("events");
    // Task 1's implement waits until task 2's has begun: only parallel tasks get there.
    let started_2 = p.outside.path().join("started-task-2");
    let overlapped = p.outside.path().join("overlapped");
    p.scenario(&json!({
        "tasks": [
            {"match": "Task 1", "implement": {
                "shell": [wait_then_note(&started_2, &overlapped.display().to_string())],
                "write": {"out/{slug}.txt": "work of {task}\n"}}},
            {"match": "Task 2", "implement": {
                "shell": [format!("touch '{}'", started_2.display())],
                "write": {"out/{slug}.txt": "work of {task}\n"}}}
        ],
        "default": {
            "implement": {"write": {"out/{slug}.txt": "work of {task}\n"},
                          "shell": [note(&events, "implement {task}")]}
        }
    }));
    let ran = p.run(&["10", "0", "-j", "3"]).expect(0);
    assert_eq!(
        std::fs::read_to_string(&overlapped).unwrap().trim(),
        "yes",
        "tasks 1 and 2 ran at the same time"
    );
    let history = history(&p);
    assert!(
        history
            .iter()
            .all(|(_, parents)| *parents == 1 || history.last().is_some())
    );
    assert!(
        history.iter().take(6).all(|(_, parents)| *parents == 1),
        "linear: {history:?}"
    );
    for i in 1..=6 {
        let subject = format!("Task {i}");
        assert_eq!(
            history.iter().filter(|(s, _)| *s == subject).count(),
            1,
            "committed exactly once: {history:?}"
        );
        assert_eq!(
            p.read(&format!("out/task-{i}.txt")),
            format!("work of Task {i}\n")
        );
    }
    assert_eq!(history.len(), 7, "{history:?}");
    let spec = p.read("SPEC.md");
    assert_eq!(spec.matches("- [x]").count(), 6, "{spec}");
    nothing_left_behind(&p);
    // Each task's stages are labelled with its task.
    assert!(ran.stderr.contains("kern: [Task 3] "), "{}", ran.stderr);
}

#[test]
fn two_tasks_editing_the_same_lines_both_land_the_second_retried_on_the_new_tip() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.write("shared.txt", "one\ntwo\nthree\n");
    p.commit_all("shared");
    // Beta's first implement waits until Alpha is on the branch, so its work conflicts.
    let wait_for_alpha = "i=0; until git log --format=%s master | grep -qx Alpha || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done";
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": {"write": {"shared.txt": "one by Alpha\ntwo\nthree\n"}}},
            {"match": "Beta", "implement": [
                {"write": {"shared.txt": "one by Beta\ntwo\nthree\n"}, "shell": [wait_for_alpha]},
                {"write": {"shared.txt": "one by Alpha\ntwo by Beta\nthree\n"}}
            ]}
        ]
    }));
    let ran = p.run(&["10", "0", "-j", "2"]).expect(0);
    ran.stderr_has("`Beta` conflicts with the branch in `shared.txt`");
    let subjects: Vec<String> = history(&p).into_iter().map(|(s, _)| s).collect();
    assert_eq!(subjects, vec!["Beta", "Alpha", "shared", "initial"]);
    assert_eq!(p.read("shared.txt"), "one by Alpha\ntwo by Beta\nthree\n");
    // The conflicting work is kept, byte for byte, and the retry was told why.
    let r = git2::Repository::open(p.path()).unwrap();
    let kept = r
        .revparse_single("refs/kern/attempts/beta/1:shared.txt")
        .unwrap();
    assert_eq!(
        kept.as_blob().unwrap().content(),
        b"one by Beta\ntwo\nthree\n"
    );
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("**Attempt 1:** its work conflicted with the branch in `shared.txt`"),
        "{spec}"
    );
    let prompts = p.prompts("implement");
    assert!(
        prompts
            .last()
            .unwrap()
            .contains("refs/kern/attempts/beta/1"),
        "the retry reads the Attempt note"
    );
    nothing_left_behind(&p);
    assert_eq!(p.run_events("conflict").len(), 1);
}

#[test]
fn a_second_conflict_blocks_the_task_and_leaves_its_work_on_its_branch() {
    let p = Project::new("- [ ] Alpha\n- [ ] Gamma\n- [ ] Beta\n");
    p.write("shared.txt", "one\n");
    p.commit_all("shared");
    let after = |who: &str| {
        format!(
            "i=0; until git log --format=%s master | grep -qx {who} || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done"
        )
    };
    // Alpha and Gamma start together; Gamma's work lands after Alpha's: a conflict. Its retry
    // starts beside Beta and lands after Beta's: a second conflict.
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": {"write": {"shared.txt": "Alpha\n"}}},
            {"match": "Beta", "implement": {"write": {"shared.txt": "Beta\n"}}},
            {"match": "Gamma", "implement": [
                {"write": {"shared.txt": "Gamma\n"}, "shell": [after("Alpha")]},
                {"write": {"shared.txt": "Gamma again\n"}, "shell": [after("Beta")]}
            ]}
        ]
    }));
    let heard = p.outside.path().join("notified");
    let ran = p
        .run(&["10", "0", "-j", "2"])
        .env("KERN_NOTIFY", format!("cat >> '{}'", heard.display()))
        .expect(4);
    ran.stderr_has("blocked `Gamma`");
    // Blocked like any task: `--notify` hears it.
    let heard = std::fs::read_to_string(&heard).unwrap();
    assert!(
        heard.contains("\"event\":\"task_blocked\"") && heard.contains("Gamma"),
        "{heard}"
    );
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [!] Gamma"), "{spec}");
    assert!(spec.contains("`kern/gamma`"), "{spec}");
    let r = git2::Repository::open(p.path()).unwrap();
    let on_branch = r.revparse_single("kern/gamma:shared.txt").unwrap();
    assert_eq!(on_branch.as_blob().unwrap().content(), b"Gamma again\n");
    let first = r
        .revparse_single("refs/kern/attempts/gamma/1:shared.txt")
        .unwrap();
    assert_eq!(first.as_blob().unwrap().content(), b"Gamma\n");
    assert_eq!(p.read("shared.txt"), "Beta\n");
    assert_eq!(r.worktrees().unwrap().len(), 0);
}

#[test]
fn a_task_and_its_subtask_never_run_together_and_after_notes_order_tasks() {
    let p = Project::new(
        "- [ ] Parent\n  - [ ] Child one\n  - [ ] Child two\n- [ ] API\n  > **After:** Schema\n- [ ] Schema\n",
    );
    let events = p.outside.path().join("events");
    p.scenario(&json!({"default": {
        "research": {"shell": [note(&events, "start {task}")]},
        "implement": {"write": {"out/{slug}.txt": "{task}\n"}},
        "commit": {"shell": [note(&events, "end {task}")]}
    }}));
    p.run(&["20", "0", "-j", "4"]).expect(0);
    let log = event_log(&p);
    let at = |line: &str| {
        log.iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("{line} missing from {log:?}"))
    };
    // The parent is done by its subtasks: it never runs beside either of them.
    if let Some(parent) = log.iter().position(|l| l == "start Parent") {
        assert!(
            parent > at("end Child one") && parent > at("end Child two"),
            "{log:?}"
        );
    }
    assert!(at("start API") > at("end Schema"), "{log:?}");
    let spec = p.read("SPEC.md");
    assert_eq!(spec.matches("[x]").count(), 5, "{spec}");
    nothing_left_behind(&p);
}

#[test]
fn the_budget_stops_new_stages_in_every_job_and_the_next_run_finishes_each_task_once() {
    let spec: String = (1..=6).map(|i| format!("- [ ] Task {i}\n")).collect();
    let p = Project::new(&spec);
    p.scenario(&json!({"default": {
        "research": {"cost_usd": 0.5},
        "implement": {"write": {"out/{slug}.txt": "{task}\n"}, "cost_usd": 0.5},
        "commit": {"cost_usd": 0.5}
    }}));
    let ran = p.run(&["10", "0", "-j", "3", "--max-cost", "2"]).expect(6);
    ran.stderr_has("--max-cost");
    let spent: f64 = p
        .run_events("stage_end")
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap_or(0.0))
        .sum();
    // Three jobs may each finish the stage they were in when the budget was crossed: no more.
    assert!(spent <= 2.0 + 3.0 * 0.5 + 1e-9, "spent {spent}");
    // The end names what the run spent in all, as the summary does.
    let said = format!("${spent:.2} of $2.00");
    ran.stderr_has(&format!("the cost budget is spent: {said}"));
    ran.stderr_has(&format!("cost             {said}"));
    p.run(&["10", "0", "-j", "3"]).expect(0);
    each_task_landed_once(&p, 6);
    nothing_left_behind(&p);
}

/// `Task 1` … `Task n` each landed exactly once.
fn each_task_landed_once(p: &Project, n: usize) {
    let history = history(p);
    for i in 1..=n {
        let subject = format!("Task {i}");
        assert_eq!(
            history.iter().filter(|(s, _)| *s == subject).count(),
            1,
            "{history:?}"
        );
    }
}

/// Starts `kern 10 0 -j jobs` with every implement waiting for the file `go` (returned) after
/// announcing itself; returns once `jobs` tasks (`Task 1` …) are in their implement stage.
fn jobs_in_flight(p: &Project, jobs: usize) -> (std::process::Child, std::path::PathBuf) {
    let go = p.outside.path().join("go");
    let flags = p.outside.path().join("flags");
    std::fs::create_dir_all(&flags).unwrap();
    p.scenario(&json!({"default": {
        "implement": {
            "write": {"out/{slug}.txt": "{task}\n"},
            "shell": [
                format!("touch '{}/{{slug}}'", flags.display()),
                format!("while [ ! -e '{}' ]; do sleep 0.01; done", go.display())
            ]
        }
    }}));
    let child = spawn(p, &["10", "0", "-j", &jobs.to_string()]);
    for i in 1..=jobs {
        wait_for_file(&flags.join(format!("task-{i}")));
    }
    (child, go)
}

/// Three jobs in flight (each implement waits for `go` after announcing itself), then
/// `signal`; then `go` and a plain second run finish every task exactly once.
fn stop_three_jobs_then_resume(signal: nix::sys::signal::Signal) {
    let spec: String = (1..=4).map(|i| format!("- [ ] Task {i}\n")).collect();
    let p = Project::new(&spec);
    let (mut child, go) = jobs_in_flight(&p, 3);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let status = child.wait().unwrap();
    if signal == nix::sys::signal::Signal::SIGINT {
        assert_eq!(status.code(), Some(130));
    }
    let spec = p.read("SPEC.md");
    assert_eq!(spec.matches("- [~]").count(), 3, "{spec}");
    assert!(p.head_files().iter().all(|f| !f.starts_with("out/")));
    std::fs::write(&go, "").unwrap();
    p.run(&["10", "0", "-j", "3"]).expect(0);
    let history = history(&p);
    for i in 1..=4 {
        let subject = format!("Task {i}");
        assert_eq!(
            history.iter().filter(|(s, _)| *s == subject).count(),
            1,
            "{history:?}"
        );
        assert_eq!(p.read(&format!("out/task-{i}.txt")), format!("{subject}\n"));
    }
    nothing_left_behind(&p);
}

/// While its tasks run in their worktrees the run itself writes nothing: a run killed then
/// did not die writing, so the next run leaves a git lock taken since (the person's `git
/// commit` waiting on its editor) alone and says so, instead of removing it as its own.
#[test]
fn a_run_killed_while_its_tasks_run_leaves_the_persons_index_lock_alone() {
    let p = Project::new("- [ ] Task 1\n- [ ] Task 2\n");
    let (mut child, go) = jobs_in_flight(&p, 2);
    let status = p.run(&["status"]).expect(0);
    assert!(
        !status.stdout.contains("phase: writing"),
        "the run writes nothing while its tasks run:\n{}",
        status.stdout
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    std::fs::write(&go, "").unwrap();
    // The person's `git commit`, waiting on their editor, holds the index lock.
    let lock = p.path().join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let ran = p.run(&["10", "0", "-j", "2"]).expect(2);
    ran.stderr_has("index.lock");
    assert!(lock.exists(), "the person's index.lock was removed");
    std::fs::remove_file(&lock).unwrap();
    p.run(&["10", "0", "-j", "2"]).expect(0);
    each_task_landed_once(&p, 2);
}

#[test]
fn ctrl_c_with_three_jobs_in_flight_resumes_each_task_exactly_once() {
    stop_three_jobs_then_resume(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn kill_9_with_three_jobs_in_flight_resumes_each_task_exactly_once() {
    stop_three_jobs_then_resume(nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn a_path_the_person_changed_is_never_written_over_by_a_parallel_task() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.write("notes.txt", "mine\n");
    p.commit_all("notes");
    let started = p.outside.path().join("started");
    let go = p.outside.path().join("go");
    let wait_go = format!("while [ ! -e '{}' ]; do sleep 0.01; done", go.display());
    // Beta lands first, after the edit (its commit leaves the person's file out); then Alpha,
    // whose work changes that file.
    let after_beta = "i=0; until git log --format=%s master | grep -qx Beta || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done";
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": [
                {"write": {"notes.txt": "Alpha's\n"},
                 "shell": [format!("touch '{}'", started.display()), wait_go.clone(), after_beta.to_string()]},
                {"write": {"alpha.txt": "Alpha\n"}}
            ]},
            {"match": "Beta", "implement": {"write": {"beta.txt": "Beta\n"}, "shell": [wait_go]}}
        ]
    }));
    let child = spawn(&p, &["10", "0", "-j", "2", "--allow-dirty"]);
    wait_for_file(&started);
    // Over breakfast, the person edits the same file in the work tree.
    p.write("notes.txt", "mine, edited\n");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    assert_eq!(
        p.read("notes.txt"),
        "mine, edited\n",
        "the person's edit stays: {}\n{:?}",
        texts(&out).1,
        history(&p)
    );
    let r = git2::Repository::open(p.path()).unwrap();
    let kept = r
        .revparse_single("refs/kern/attempts/alpha/1:notes.txt")
        .unwrap();
    assert_eq!(kept.as_blob().unwrap().content(), b"Alpha's\n");
    assert!(p.head_files().contains(&"alpha.txt".to_string()));
    let spec = p.read("SPEC.md");
    assert!(spec.contains("changed by hand in the work tree"), "{spec}");
}

#[test]
fn hand_edits_of_spec_md_during_a_parallel_run_survive_and_kern_follows_them() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n");
    let started_a = p.outside.path().join("started-a");
    let started_b = p.outside.path().join("started-b");
    let go = p.outside.path().join("go");
    let wait_go = format!("while [ ! -e '{}' ]; do sleep 0.01; done", go.display());
    p.scenario(&json!({
        "default": {"implement": {"write": {"{slug}.txt": "work of {task}\n"}}},
        "tasks": [
            {"match": "Alpha", "implement": {"write": {"alpha.txt": "Alpha\n"},
             "shell": [format!("touch '{}'", started_a.display()), wait_go.clone()]}},
            {"match": "Beta", "implement": {"write": {"beta.txt": "Beta\n"},
             "shell": [format!("touch '{}'", started_b.display()), wait_go]}}
        ]
    }));
    let child = spawn(&p, &["10", "0", "-j", "2"]);
    wait_for_file(&started_a);
    wait_for_file(&started_b);
    // Both tasks are in implement, each in its worktree. The person, in the main SPEC.md,
    // rewords the one in flight and the one waiting, and appends a task with a description.
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [~] Beta\n"), "{spec}");
    let edited = spec
        .replace("- [~] Beta\n", "- [~] Beta, reworded\n")
        .replace(
            "- [ ] Gamma\n",
            "- [ ] Gamma, reworded\n- [ ] Delta\n\n  Its description, kept as written.\n",
        );
    p.write("SPEC.md", &edited);
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = texts(&out).1;
    assert_eq!(out.status.code(), Some(0), "{err}");
    let spec = p.read("SPEC.md");
    for line in [
        "- [x] Alpha\n",
        "- [x] Beta, reworded\n",
        "- [x] Gamma, reworded\n",
        "- [x] Delta\n",
        "  Its description, kept as written.\n",
    ] {
        assert!(spec.contains(line), "`{line}` in:\n{spec}\n{err}");
    }
    assert!(
        !spec.contains("- [x] Beta\n") && !spec.contains("Gamma\n"),
        "{spec}"
    );
    assert!(err.contains("not by kern"), "the hand edit is named: {err}");
    // The work Beta did before the person reworded it is kept, and the reworded task landed.
    let r = git2::Repository::open(p.path()).unwrap();
    let kept = r
        .revparse_single("refs/kern/attempts/beta/1:beta.txt")
        .unwrap();
    assert_eq!(kept.as_blob().unwrap().content(), b"Beta\n");
    let files = p.head_files();
    for file in ["alpha.txt", "beta.txt", "gamma-reworded.txt", "delta.txt"] {
        assert!(files.contains(&file.to_string()), "{file}: {files:?}");
    }
    assert!(
        history(&p).iter().all(|(_, parents)| *parents <= 1),
        "{:?}",
        history(&p)
    );
    let committed = r.revparse_single("HEAD:SPEC.md").unwrap();
    assert_eq!(
        committed.as_blob().unwrap().content(),
        spec.as_bytes(),
        "SPEC.md committed as it is"
    );
}

#[test]
fn a_message_refused_at_integration_goes_back_to_the_tasks_review_not_to_implement() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    refuse_subjects_without_feat(&p);
    // Each task's first review proposes a subject the hook refuses, its second one it accepts
    // (one entry per task: the scripted agent counts invocations per entry).
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": {"write": {"alpha.txt": "Alpha\n"}},
             "commit": [
                {"result": {"verdict": "COMMIT", "subject": "Add alpha"}},
                {"result": {"verdict": "COMMIT", "subject": "feat: add alpha"}}
             ]},
            {"match": "Beta", "implement": {"write": {"beta.txt": "Beta\n"}},
             "commit": [
                {"result": {"verdict": "COMMIT", "subject": "Add beta"}},
                {"result": {"verdict": "COMMIT", "subject": "feat: add beta"}}
             ]}
        ]
    }));
    let ran = p.run(&["10", "0", "-j", "2"]).expect(0);
    ran.stderr_has("asking the task's review for a new message (1 of 2)");
    let mut subjects = p.log();
    subjects.sort();
    assert_eq!(subjects, ["feat: add alpha", "feat: add beta", "initial"]);
    // Implement ran once per task; each review twice, the second asked for a message only.
    assert_eq!(p.prompts("implement").len(), 2);
    let reviews = p.prompts("commit");
    assert_eq!(reviews.len(), 4, "two reviews per task");
    let asked: Vec<&String> = reviews
        .iter()
        .filter(|r| r.contains("subject must start with feat:"))
        .collect();
    assert_eq!(asked.len(), 2, "each second review reads the hook's output");
    assert!(asked.iter().any(|r| r.contains("Add alpha")), "{asked:?}");
    assert!(asked.iter().any(|r| r.contains("Add beta")), "{asked:?}");
    let spec = p.read("SPEC.md");
    assert!(!spec.contains("Attempt"), "no failed attempt: {spec}");
    assert!(
        spec.contains("- [x] Alpha") && spec.contains("- [x] Beta"),
        "{spec}"
    );
    assert_eq!(p.dirty(), Vec::<String>::new(), "a clean tree");
}

#[test]
fn a_message_still_refused_after_two_new_ones_is_one_failed_attempt_of_a_parallel_task() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    refuse_subjects_without_feat(&p);
    // Alpha's review never learns; Beta's first subject passes.
    p.scenario(&json!({
        "default": {"implement": {"write": {"{slug}.txt": "work of {task}\n"}}},
        "tasks": [
            {"match": "Alpha", "commit": {"result": {"verdict": "COMMIT", "subject": "Add alpha"}}},
            {"match": "Beta", "commit": {"result": {"verdict": "COMMIT", "subject": "feat: add beta"}}}
        ]
    }));
    let ran = p
        .run(&["10", "0", "-j", "2", "--max-attempts", "1"])
        .expect(4);
    ran.stderr_has("asking the task's review for a new message (2 of 2)");
    assert_eq!(p.log(), ["feat: add beta", "initial"]);
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [!] Alpha"), "{spec}");
    assert!(
        spec.contains("the `commit-msg` hook refused the commit message 3 times"),
        "{spec}"
    );
    let alpha = |stage: &str| {
        p.prompts(stage)
            .iter()
            .filter(|r| r.contains("Alpha"))
            .count()
    };
    // Two failed attempts (the first asks for decomposition, the second blocks), each one
    // implement stage: none for a message.
    assert_eq!(alpha("implement"), 2, "no implement stage for a message");
    assert_eq!(
        alpha("commit"),
        6,
        "per attempt, the first review and two requests for a message"
    );
    // Its work is kept, and nothing of it is left in the tree.
    let r = git2::Repository::open(p.path()).unwrap();
    let kept = r
        .revparse_single("refs/kern/attempts/alpha/1:alpha.txt")
        .unwrap();
    assert_eq!(kept.as_blob().unwrap().content(), b"work of Alpha\n");
    assert_eq!(
        p.dirty(),
        vec!["SPEC.md".to_string()],
        "only the Blocked note"
    );
}

/// Unfenced (`--sandbox off`): inside kern's fence a task's worktree reaches the repository's
/// refs read-only and `git update-ref` fails; it is the audit this test and the next hold.
#[test]
fn an_agent_that_moves_the_runs_branch_back_from_its_worktree_is_put_back() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    // Alpha's agent waits until Beta has landed, then rewinds the run's branch by name from its
    // worktree (the one way there: git refuses to check out or force a branch checked out
    // elsewhere), dropping Beta's commit from it.
    let after_beta = "i=0; until git log --format=%s master | grep -qx Beta || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done";
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": [
                {"write": {"alpha.txt": "Alpha\n"},
                 "shell": [after_beta, "git update-ref refs/heads/master master~1"]},
                {"write": {"alpha.txt": "Alpha\n"}}
            ]},
            {"match": "Beta", "implement": {"write": {"beta.txt": "Beta\n"}}}
        ]
    }));
    let ran = p.run(&["10", "0", "-j", "2", "--sandbox=off"]).expect(0);
    ran.stderr_has("refs/heads/master put back");
    assert_eq!(
        history(&p),
        [
            ("Alpha".to_string(), 1),
            ("Beta".to_string(), 1),
            ("initial".to_string(), 0)
        ],
        "Beta stays on the branch and Alpha lands on top"
    );
    let files = p.head_files();
    assert!(files.contains(&"beta.txt".to_string()) && files.contains(&"alpha.txt".to_string()));
    // Where the agent had moved the branch is kept.
    let r = git2::Repository::open(p.path()).unwrap();
    let kept = r
        .revparse_single("refs/kern/agent/alpha/branch-1")
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert_eq!(kept.summary_bytes(), Some(&b"initial"[..]));
    assert!(p.read("SPEC.md").contains("- [x] Alpha"));
    let violations = p.run_events("violation");
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["saved"][0], "refs/kern/agent/alpha/branch-1");
    assert_eq!(p.dirty(), Vec::<String>::new(), "a clean tree");
}

#[test]
fn the_runs_own_commits_during_a_tasks_stage_are_no_violation() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    // Beta lands while Alpha's implement runs: the run's branch moves forwards under it.
    let after_beta = "i=0; until git log --format=%s master | grep -qx Beta || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done";
    p.scenario(&json!({"tasks": [
        {"match": "Alpha", "implement": {"write": {"alpha.txt": "Alpha\n"}, "shell": [after_beta]}},
        {"match": "Beta", "implement": {"write": {"beta.txt": "Beta\n"}}}
    ]}));
    p.run(&["10", "0", "-j", "2"]).expect(0);
    assert_eq!(p.log(), ["Alpha", "Beta", "initial"]);
    assert_eq!(p.run_events("violation"), Vec::<Value>::new());
}

#[test]
fn an_agent_that_moves_the_runs_branch_back_during_its_stage_fails_that_attempt() {
    let p = Project::new("- [ ] Alpha\n");
    p.write("earlier.txt", "earlier\n");
    p.commit_all("earlier");
    // Alpha's agent rewinds the run's branch below where its stage found it.
    p.scenario(&json!({"tasks": [
        {"match": "Alpha", "implement": [
            {"write": {"alpha.txt": "Alpha\n"},
             "shell": ["git update-ref refs/heads/master master~1"]},
            {"write": {"alpha.txt": "Alpha\n"}}
        ]}
    ]}));
    p.run(&["10", "0", "-j", "2", "--sandbox=off"]).expect(0);
    assert_eq!(p.log(), ["Alpha", "earlier", "initial"]);
    let violations = p.run_events("violation");
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["stage"], "implement");
    assert!(
        p.read("SPEC.md").contains("moved history"),
        "the attempt failed and says why"
    );
}

#[test]
fn review_parks_each_commit_on_its_branch_and_accept_and_reject_settle_them() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"{slug}.txt": "work of {task}\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Add {slug}"}}
    }}));
    let head_before = git2::Repository::open(p.path())
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    let ran = p.run(&["10", "0", "--review"]).expect(0);
    ran.stderr_has("to review        2");
    let r = git2::Repository::open(p.path()).unwrap();
    assert_eq!(
        r.head().unwrap().target(),
        Some(head_before),
        "the branch is untouched"
    );
    for (slug, title) in [("alpha", "Alpha"), ("beta", "Beta")] {
        let tip = r
            .find_branch(&format!("kern/{slug}"), git2::BranchType::Local)
            .unwrap()
            .get()
            .peel_to_commit()
            .unwrap();
        assert_eq!(tip.summary_bytes(), Some(format!("Add {slug}").as_bytes()));
        assert_eq!(tip.parent_id(0).unwrap(), head_before);
        let file = tip
            .tree()
            .unwrap()
            .get_path(Path::new(&format!("{slug}.txt")))
            .is_ok();
        assert!(file, "{title}'s work is on its branch");
        assert!(
            tip.tree()
                .unwrap()
                .get_path(Path::new("SPEC.md"))
                .unwrap()
                .id()
                == r.find_commit(head_before)
                    .unwrap()
                    .tree()
                    .unwrap()
                    .get_path(Path::new("SPEC.md"))
                    .unwrap()
                    .id(),
            "the worktree's SPEC.md copy is nobody's work"
        );
    }
    let spec = p.read("SPEC.md");
    assert!(spec.contains("**Review:** `kern/alpha`"), "{spec}");
    assert!(spec.contains("- [x] Beta"), "{spec}");
    assert_eq!(r.worktrees().unwrap().len(), 0);
    let report = p.run(&["report", "--json"]).expect(0);
    let report: Value = serde_json::from_str(&report.stdout).unwrap();
    let needs = report["runs"][0]["needs_you"].to_string();
    assert!(
        needs.contains("kern/alpha") && needs.contains("kern/beta"),
        "{needs}"
    );

    p.run(&["reject", "Beta", "--reason", "use the other API"])
        .expect(0)
        .stderr_has("reopened `Beta` [ ]");
    let spec = p.read("SPEC.md");
    assert!(spec.contains("- [ ] Beta"), "{spec}");
    assert!(
        spec.contains("rejected in review: use the other API"),
        "{spec}"
    );
    assert!(
        r.revparse_single("refs/kern/attempts/beta/1:beta.txt")
            .is_ok()
    );
    assert!(r.find_branch("kern/beta", git2::BranchType::Local).is_err());

    p.run(&["accept"]).expect(0).stderr_has("accepted `Alpha`");
    let subjects: Vec<String> = history(&p).into_iter().map(|(s, _)| s).collect();
    assert_eq!(subjects, vec!["Add alpha", "initial"]);
    assert_eq!(p.read("alpha.txt"), "work of Alpha\n");
    assert!(
        r.find_branch("kern/alpha", git2::BranchType::Local)
            .is_err()
    );
    assert!(!p.path().join("beta.txt").exists());
    p.run(&["accept", "Nothing"])
        .expect(2)
        .stderr_has("no task waiting for review matches `Nothing`");
}

#[test]
fn dry_run_shows_which_tasks_would_run_together() {
    // Sibling subtasks are a sequence (`Child two` after `Child one`); `API` waits for
    // `Schema` (its After note).
    let p = Project::new(
        "- [ ] Parent\n  - [ ] Child one\n  - [ ] Child two\n- [ ] API\n  > **After:** Schema\n- [ ] Schema\n",
    );
    let ran = p.run(&["-n", "-j", "3"]).expect(0);
    let text = format!("{}{}", ran.stdout, ran.stderr);
    assert!(
        text.contains("would run together (-j 3): `Child one`, `Schema`"),
        "{text}"
    );
}

#[test]
fn a_usage_limit_one_task_hits_pauses_the_others_next_stage() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let lock = p.path().join(".git/worktrees/kern-alpha/kern.lock");
    // Beta's research ends once Alpha's task waits for the reset (its lock says so).
    let alpha_waits = format!(
        "i=0; until grep -q waiting '{}' 2>/dev/null || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done",
        lock.display()
    );
    p.scenario(&json!({
        "tasks": [
            {"match": "Alpha", "implement": [
                {"error": "usage_limit", "resets_in_secs": 2},
                {"write": {"alpha.txt": "Alpha\n"}}
            ]},
            {"match": "Beta", "research": {"shell": [alpha_waits]},
             "implement": {"write": {"beta.txt": "Beta\n"}}}
        ]
    }));
    p.run(&["10", "0", "-j", "2"])
        .env("KERN_RESET_MARGIN", "0")
        .expect(0);
    let beta_implement: Vec<Value> = p
        .run_events("stage_end")
        .into_iter()
        .filter(|e| e["stage"] == "implement")
        .filter(|e| {
            e["waits"].as_array().is_some_and(|w| {
                w.iter()
                    .any(|w| w["reason"] == "usage limit (hit by another task)")
            })
        })
        .collect();
    assert_eq!(beta_implement.len(), 1, "{:?}", p.run_events("stage_end"));
    assert_eq!(p.read("alpha.txt"), "Alpha\n");
    assert_eq!(p.read("beta.txt"), "Beta\n");
    nothing_left_behind(&p);
}

#[test]
fn the_report_of_a_parallel_night_gives_each_task_its_own_stages_and_cost() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n");
    let go = p.outside.path().join("go");
    // Beta's implement ends last, after the others' stages interleaved with its own.
    p.scenario(&json!({
        "tasks": [{"match": "Beta", "implement": {
            "write": {"beta.txt": "Beta\n"}, "cost_usd": 0.5,
            "shell": [format!("i=0; until [ -e '{}' ] || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done", go.display())]
        }}],
        "default": {
            "implement": {"write": {"{slug}.txt": "{task}\n"}},
            "commit": {"shell": [format!("touch '{}'", go.display())]}
        }
    }));
    p.run(&["10", "0", "-j", "3"]).expect(0);
    let out = p.run(&["report", "--json"]).expect(0);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let tasks = report["runs"][0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{report}");
    for task in tasks {
        let stages: Vec<&str> = task["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stage"].as_str().unwrap())
            .collect();
        assert_eq!(stages, ["research", "implement", "commit"], "{task}");
        let cost = task["cost_usd"].as_f64().unwrap();
        let want = if task["title"] == "Beta" { 0.52 } else { 0.03 };
        assert!((cost - want).abs() < 1e-9, "{task}");
    }
}

#[test]
fn status_during_a_parallel_run_names_each_task_its_stage_and_last_tool_call() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let go = p.outside.path().join("go");
    let flags = p.outside.path().join("flags");
    std::fs::create_dir_all(&flags).unwrap();
    p.scenario(&json!({"default": {"implement": {
        "write": {"{slug}.txt": "{task}\n"},
        "shell": [
            format!("touch '{}/{{slug}}'", flags.display()),
            format!("while [ ! -e '{}' ]; do sleep 0.01; done", go.display())
        ]
    }}}));
    let child = spawn(&p, &["10", "0", "-j", "2"]);
    wait_for_file(&flags.join("alpha"));
    wait_for_file(&flags.join("beta"));
    let out = p.run(&["status", "--json"]).expect(0);
    let status: Value = serde_json::from_str(&out.stdout).unwrap();
    let tasks = status["running"]["tasks"].as_array().unwrap();
    let mut titles: Vec<&str> = tasks.iter().map(|t| t["task"].as_str().unwrap()).collect();
    titles.sort_unstable();
    assert_eq!(titles, ["Alpha", "Beta"], "{status}");
    for t in tasks {
        assert_eq!(t["stage"], "implement", "{status}");
        assert!(
            t["last_tool"]
                .as_str()
                .is_some_and(|tool| tool.starts_with("Bash touch ")),
            "{status}"
        );
    }
    let out = p.run(&["status"]).expect(0);
    let human = out.stdout;
    assert!(
        human.contains("  task:    Alpha — implement, for "),
        "{human}"
    );
    assert!(
        human.contains("  task:    Beta — implement, for "),
        "{human}"
    );
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
}

#[test]
fn pace_takes_no_new_task_once_a_parallel_task_reports_its_window_used_past_it() {
    let p = Project::new("- [ ] First\n- [ ] Second\n- [ ] Third\n");
    // Second finishes only once First is on the branch, so First's report of its usage is
    // read before a slot frees for Third.
    let wait_for_first = "i=0; until git log --format=%s master | grep -qx First || [ $i -ge 6000 ]; do sleep 0.01; i=$((i+1)); done";
    p.scenario(&json!({
        "tasks": [
            {"match": "First", "research": {"usage": {"utilization": 0.95, "resets_in_secs": 7200}}},
            {"match": "Second", "implement": {"write": {"out/second.txt": "done\n"}, "shell": [wait_for_first]}}
        ],
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}
    }));
    let ran = p
        .run(&["5", "0", "-j", "2", "--pace", "--max-wait=1h"])
        .expect(0);
    let subjects: Vec<String> = history(&p).into_iter().map(|(s, _)| s).collect();
    assert_eq!(subjects, vec!["Second", "First", "initial"]);
    assert!(p.read("SPEC.md").contains("- [ ] Third"));
    ran.stderr_has("five-hour window is 95% used");
    ran.stderr_has("no new task taken; run kern again later, or raise --pace");
    nothing_left_behind(&p);
}
