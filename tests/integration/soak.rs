//! Crash soak (DESIGN.md section 12): a ten-task run with a scripted agent that sleeps inside
//! its stages, stopped at random moments — SIGKILL in one test, SIGINT (Ctrl-C) in the other —
//! and restarted each time until a run ends with exit 0 and nothing left. Afterwards every task
//! is `[x]` and committed exactly once, SPEC.md parses and validates, every file the agent
//! wrote is in HEAD with the right content, the tree is clean, no lock is left and no agent
//! outlives the run.
//!
//! The moments come from a seeded xorshift PRNG. The base seed is `KERN_SOAK_SEED` when set,
//! else taken from the clock so that every run explores new moments; each round derives its own
//! seed from it. On failure the test prints the seed and the timeline of every round (delay,
//! the lock's phase at the kill, exit status), so a run can be replayed with
//! `KERN_SOAK_SEED=<seed> cargo test --test integration soak`. When a project finishes before the wanted
//! number of kills, the soak checks it and goes on with a fresh one, so the number of kills
//! does not depend on the speed of the machine; the rounds are bounded either way.

use crate::support::project;

use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use project::Project;
use serde_json::json;

/// Ten tasks, two of them parents of two subtasks each: eight leaves, eight commits.
const SPEC: &str = "# Soak

- [ ] Alpha
- [ ] Bravo
- [ ] Charlie
  - [ ] Charlie one
  - [ ] Charlie two
- [ ] Delta
- [ ] Echo
- [ ] Foxtrot
  - [ ] Foxtrot one
  - [ ] Foxtrot two
";

/// The leaf tasks (title, slug): the ones the agent works on.
const LEAVES: [(&str, &str); 8] = [
    ("Alpha", "alpha"),
    ("Bravo", "bravo"),
    ("Charlie one", "charlie-one"),
    ("Charlie two", "charlie-two"),
    ("Delta", "delta"),
    ("Echo", "echo"),
    ("Foxtrot one", "foxtrot-one"),
    ("Foxtrot two", "foxtrot-two"),
];

/// The longest a single run may take before the soak calls it stuck.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// xorshift64*: tiny, seedable, good enough to spread kill moments.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so that nearby seeds give unrelated streams (and 0 is fine).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `low..high` (milliseconds).
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

fn base_seed() -> u64 {
    match std::env::var("KERN_SOAK_SEED") {
        Ok(s) => s.trim().parse().expect("KERN_SOAK_SEED must be a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

/// The scenario: every stage records its pid outside the repository and sleeps; implement
/// writes `out/<slug>.txt`, adds its slug to the shared `log.txt` once, and deletes
/// `old/<slug>.txt`. Every invocation of a stage for a task does the same thing, so a stage
/// run again after a kill leaves the same result.
fn scenario(pids: &Path) -> serde_json::Value {
    let pid = |stage: &str| format!("echo \"$PPID {{slug}} {stage}\" >> '{}'", pids.display());
    json!({"default": {
        "research": {
            "sleep_before_ms": 10,
            "shell": [pid("research")],
            "sleep_ms": 80,
            "result": {"notes": ["look at {slug}"]}
        },
        "implement": {
            "sleep_before_ms": 20,
            "write": {"out/{slug}.txt": "done {task}\n"},
            "delete": ["old/{slug}.txt"],
            "shell": [
                pid("implement"),
                "grep -qx '{slug}' log.txt 2>/dev/null || echo '{slug}' >> log.txt"
            ],
            "sleep_ms": 120,
            "result": {"status": "SUCCESS", "summary": "did {slug}"}
        },
        "commit": {
            "sleep_before_ms": 10,
            "shell": [pid("commit")],
            "sleep_ms": 60,
            "result": {"verdict": "COMMIT", "subject": "Do {slug}"}
        }
    }})
}

/// One project of the soak: the repository with the starting files, and where pids go.
struct Soaked {
    project: Project,
    pids: PathBuf,
}

fn new_project() -> Soaked {
    let project = Project::new(SPEC);
    for (_, slug) in LEAVES {
        project.write(&format!("old/{slug}.txt"), &format!("old {slug}\n"));
    }
    project.commit_all("old files");
    let pids = project.outside.path().join("pids");
    project.scenario(&scenario(&pids));
    Soaked { project, pids }
}

fn lock_path(p: &Project) -> PathBuf {
    p.path().join(".git/kern.lock")
}

/// The phase the lock names now ("-" without a lock file or a readable phase).
fn lock_phase(p: &Project) -> String {
    std::fs::read(lock_path(p))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["phase"].as_str().map(str::to_string))
        .unwrap_or_else(|| "-".into())
}

fn spawn(p: &Project, stderr: &Path) -> Child {
    p.run(&["100", "0"])
        .spawn_with(Stdio::null(), std::fs::File::create(stderr).unwrap())
}

/// Waits for the child, at most [`RUN_LIMIT`]; a stuck kern is killed and the soak fails.
fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: kern did not end within {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => format!("{status:?}"),
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The timeline of the soak, printed when it fails.
static TIMELINE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn note(line: String) {
    TIMELINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(line);
}

/// Runs `body`; on a panic prints the seed and the timeline, then fails.
fn with_timeline(name: &str, seed: u64, body: impl FnOnce()) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    if let Err(panic) = result {
        let timeline = TIMELINE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut text = format!("{name} failed; replay with KERN_SOAK_SEED={seed}\ntimeline:\n");
        for line in timeline.iter().filter(|l| l.starts_with(name)) {
            let _ = writeln!(text, "  {line}");
        }
        eprintln!("{text}");
        std::panic::resume_unwind(panic);
    }
}

/// What one soak did, for the summary line.
#[derive(Default)]
struct Tally {
    stops: usize,
    projects: usize,
    phases: std::collections::BTreeMap<String, usize>,
}

/// Stops kern with `signal` at `wanted` random moments (over as many fresh projects as it
/// takes), then lets the last run finish and checks every project.
fn soak(name: &str, signal: Signal, wanted: usize, seed: u64) -> Tally {
    let mut tally = Tally::default();
    let mut round: u64 = 0;
    while tally.stops < wanted {
        let mut owned = Some(new_project());
        // KERN_SOAK_KEEP=1 keeps the folders for a post-mortem (leaked: never dropped).
        let kept;
        let soaked: &Soaked = if std::env::var_os("KERN_SOAK_KEEP").is_some() {
            kept = Box::leak(Box::new(owned.take().unwrap()));
            kept
        } else {
            owned.as_ref().unwrap()
        };
        tally.projects += 1;
        let p = &soaked.project;
        note(format!(
            "{name} project {}: {} (state {})",
            tally.projects,
            p.path().display(),
            p.outside.path().display()
        ));
        let mut finished = false;
        while tally.stops < wanted {
            round += 1;
            assert!(
                round < 10 * wanted as u64,
                "{name}: too many rounds without enough stops"
            );
            let round_seed = seed.wrapping_add(round);
            let mut rng = Rng::new(round_seed);
            let stderr = p.outside.path().join(format!("round-{round}.stderr"));
            let lock = lock_path(p);
            let mut child = spawn(p, &stderr);
            if signal == Signal::SIGINT {
                // Ctrl-C is handled once kern has installed its handler, which it does before
                // it takes the lock; a SIGINT before that is the default action, not kern's.
                let deadline = Instant::now() + RUN_LIMIT;
                while !lock.exists() && child.try_wait().unwrap().is_none() {
                    assert!(Instant::now() < deadline, "{name}: no lock appeared");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let delay = rng.between(0, 900);
            std::thread::sleep(Duration::from_millis(delay));
            let phase = lock_phase(p);
            let early = child.try_wait().unwrap();
            let status = match early {
                Some(status) => status,
                None => {
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal)
                        .unwrap();
                    wait_bounded(&mut child, name)
                }
            };
            note(format!(
                "{name} round {round} (seed {round_seed}) project {}: {delay} ms, phase {phase}: {}{}",
                tally.projects,
                describe(status),
                if early.is_some() {
                    " before the signal"
                } else {
                    ""
                }
            ));
            let expected = match signal {
                Signal::SIGKILL => status.signal() == Some(libc_sigkill()),
                _ => status.code() == Some(130),
            };
            if expected && early.is_none() {
                tally.stops += 1;
                *tally.phases.entry(phase).or_default() += 1;
                continue;
            }
            // kern ended by itself (before the signal, or with the signal arriving too late to
            // matter): the only acceptable end is exit 0 with everything done.
            assert_eq!(
                status.code(),
                Some(0),
                "{name} round {round}: {}; stderr:\n{}",
                describe(status),
                tail(&stderr)
            );
            finished = true;
            break;
        }
        if !finished {
            let stderr = p.outside.path().join("final.stderr");
            let mut child = spawn(p, &stderr);
            let status = wait_bounded(&mut child, name);
            note(format!(
                "{name} final run project {}: {}",
                tally.projects,
                describe(status)
            ));
            assert_eq!(
                status.code(),
                Some(0),
                "{name}: the run after the last stop: {}; stderr:\n{}",
                describe(status),
                tail(&stderr)
            );
        }
        check_done(name, soaked);
        note(format!("{name} project {} checked", tally.projects));
    }
    tally
}

fn libc_sigkill() -> i32 {
    Signal::SIGKILL as i32
}

/// A file's bytes in HEAD's tree, None when it is not there.
fn head_blob(p: &Project, rel: &str) -> Option<String> {
    let repo = git2::Repository::open(p.path()).unwrap();
    let tree = repo.head().unwrap().peel_to_tree().unwrap();
    let entry = tree.get_path(Path::new(rel)).ok()?;
    let blob = repo.find_blob(entry.id()).unwrap();
    Some(String::from_utf8(blob.content().to_vec()).unwrap())
}

/// Everything that must hold once a soaked project is done.
fn check_done(name: &str, soaked: &Soaked) {
    let p = &soaked.project;

    let spec = p.read("SPEC.md");
    let doc = kern::testing::spec::Document::parse(&spec);
    let errors: Vec<String> = kern::testing::spec::validate(&doc)
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.render("SPEC.md"))
        .collect();
    assert_eq!(errors, Vec::<String>::new(), "{name}: SPEC.md:\n{spec}");
    let tree: Vec<(String, Option<String>)> = doc
        .tasks()
        .iter()
        .map(|t| {
            let parent = t.parent.map(|i| doc.tasks()[i].title.clone());
            (t.title.clone(), parent)
        })
        .filter(|(_, parent)| parent.is_some())
        .collect();
    let nested = |child: &str, parent: &str| (child.to_string(), Some(parent.to_string()));
    assert_eq!(
        tree,
        vec![
            nested("Charlie one", "Charlie"),
            nested("Charlie two", "Charlie"),
            nested("Foxtrot one", "Foxtrot"),
            nested("Foxtrot two", "Foxtrot"),
        ],
        "{name}: the subtasks are still nested:\n{spec}"
    );
    let states: Vec<(String, &str)> = doc
        .tasks()
        .iter()
        .map(|t| (t.title.clone(), t.state.as_str()))
        .collect();
    assert_eq!(states.len(), 10, "{name}: {states:?}\n{spec}");
    assert!(
        states.iter().all(|(_, s)| *s == "done"),
        "{name}: every task is [x]: {states:?}\n{spec}"
    );
    assert!(
        kern::testing::spec::select(&doc).is_none(),
        "{name}: nothing left"
    );
    assert_eq!(
        head_blob(p, "SPEC.md").as_deref(),
        Some(spec.as_str()),
        "{name}: SPEC.md is committed as it is"
    );

    let log = p.log();
    let mut expected: Vec<String> = LEAVES.iter().map(|(_, s)| format!("Do {s}")).collect();
    expected.push("old files".into());
    expected.push("initial".into());
    let mut got = log.clone();
    got.sort();
    expected.sort();
    assert_eq!(
        got, expected,
        "{name}: one commit per task, no other: {log:?}"
    );

    for (title, slug) in LEAVES {
        assert_eq!(
            head_blob(p, &format!("out/{slug}.txt")),
            Some(format!("done {title}\n")),
            "{name}: out/{slug}.txt in HEAD"
        );
        assert_eq!(
            head_blob(p, &format!("old/{slug}.txt")),
            None,
            "{name}: old/{slug}.txt deleted in HEAD"
        );
    }
    let mut files = p.head_files();
    files.sort();
    let mut wanted: Vec<String> = LEAVES.iter().map(|(_, s)| format!("out/{s}.txt")).collect();
    wanted.extend(["README.md", "SPEC.md", "log.txt"].map(String::from));
    wanted.sort();
    assert_eq!(
        files, wanted,
        "{name}: HEAD holds exactly the agent's files and SPEC.md"
    );
    let shared = head_blob(p, "log.txt").unwrap_or_default();
    let mut lines: Vec<&str> = shared.lines().collect();
    lines.sort_unstable();
    let mut slugs: Vec<&str> = LEAVES.iter().map(|(_, s)| *s).collect();
    slugs.sort_unstable();
    assert_eq!(lines, slugs, "{name}: log.txt in HEAD:\n{shared}");

    assert_eq!(p.dirty(), Vec::<String>::new(), "{name}: the tree is clean");
    assert!(!lock_path(p).exists(), "{name}: no stray lock");
    let state = p.state_dir();
    for file in [
        "commit.json",
        "task.json",
        "stage1.json",
        "stage2.json",
        "stage3.json",
    ] {
        assert!(
            !state.join(file).exists(),
            "{name}: no `{file}` left in the state folder"
        );
    }

    let pids = std::fs::read_to_string(&soaked.pids).unwrap_or_default();
    let scenario = p.scenario_path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    for line in pids.lines() {
        let pid = line.split_whitespace().next().unwrap_or("");
        // The pid is this soak's agent only while its command line names this scenario (pids
        // are reused).
        let alive = || {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&scenario))
        };
        while alive() {
            assert!(
                Instant::now() < deadline,
                "{name}: agent `{line}` outlived the runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn sigkill_at_random_moments_then_restart_commits_every_task_once() {
    let seed = base_seed();
    with_timeline("sigkill", seed, || {
        let tally = soak("sigkill", Signal::SIGKILL, 32, seed);
        eprintln!(
            "sigkill soak: seed {seed}, {} kills over {} project(s), phases {:?}",
            tally.stops, tally.projects, tally.phases
        );
    });
}

#[test]
fn ctrl_c_at_random_moments_exits_130_and_resumes_to_every_task_once() {
    let seed = base_seed() ^ 0x5A5A;
    with_timeline("sigint", seed, || {
        let tally = soak("sigint", Signal::SIGINT, 20, seed);
        eprintln!(
            "sigint soak: seed {seed}, {} interrupts over {} project(s), phases {:?}",
            tally.stops, tally.projects, tally.phases
        );
    });
}
