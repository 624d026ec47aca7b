//! The state folder belongs to its user (issue 33): kern refuses a state folder another user
//! owns or could write in, or one that is a symlink, before any agent runs (exit 2, naming the
//! folder, its owner and mode, and the fix); everything a run creates there is `0700`/`0600`;
//! records are never read through a symlink; and a state folder a tmp cleaner removed during a
//! stage is made again (issue 29, item 9).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::project::{Project, texts};
use crate::support::{remove_tree_under_a_writer, wait_for_file};

/// `nobody`'s uid on Linux.
const NOBODY: u32 = 65534;

/// True when the tests run as root (`/proc/self` belongs to the effective uid).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_nobody(path: &Path) {
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// The scripted agent's calls: empty when no agent ran.
fn agent_calls(p: &Project) -> String {
    std::fs::read_to_string(p.outside.path().join("scenario.calls.jsonl")).unwrap_or_default()
}

/// The project folder under the state root (the repository's basename).
fn project_dir(p: &Project) -> PathBuf {
    p.state_dir().parent().unwrap().to_path_buf()
}

/// An unsafe state folder, as the test makes it: what it is and which folder it concerns.
struct Unsafe {
    what: &'static str,
    /// Makes it; returns the folder the refusal must name.
    make: fn(&Project) -> PathBuf,
    /// What the refusal says about the folder.
    problem: &'static str,
    /// Needs root (a chown to `nobody`).
    needs_root: bool,
}

fn unsafe_folders() -> Vec<Unsafe> {
    vec![
        Unsafe {
            what: "a root owned by nobody",
            make: |p| {
                let root = p.state_root();
                std::fs::create_dir(&root).unwrap();
                set_mode(&root, 0o700);
                chown_nobody(&root);
                root
            },
            problem: "is not yours",
            needs_root: true,
        },
        Unsafe {
            what: "a project folder owned by nobody, mode 0777",
            make: |p| {
                let project = project_dir(p);
                std::fs::create_dir_all(&project).unwrap();
                set_mode(&p.state_root(), 0o700);
                set_mode(&project, 0o777);
                chown_nobody(&project);
                project
            },
            problem: "is not yours",
            needs_root: true,
        },
        Unsafe {
            what: "a root of mode 0777",
            make: |p| {
                let root = p.state_root();
                std::fs::create_dir(&root).unwrap();
                set_mode(&root, 0o777);
                root
            },
            problem: "is writable by group or others",
            needs_root: false,
        },
        Unsafe {
            what: "a branch folder of mode 0777",
            make: |p| {
                let branch = p.state_dir();
                std::fs::create_dir_all(&branch).unwrap();
                set_mode(&branch, 0o777);
                branch
            },
            problem: "is writable by group or others",
            needs_root: false,
        },
        Unsafe {
            what: "a symlinked branch folder",
            make: |p| {
                let elsewhere = p.outside.path().join("elsewhere");
                std::fs::create_dir(&elsewhere).unwrap();
                set_mode(&elsewhere, 0o700);
                std::fs::create_dir_all(project_dir(p)).unwrap();
                std::os::unix::fs::symlink(&elsewhere, p.state_dir()).unwrap();
                p.state_dir()
            },
            problem: "is a symlink to",
            needs_root: false,
        },
    ]
}

/// A state root kern cannot make (a service account's `HOME` it cannot write; here a path
/// through a file, which stops root too) is exit 2 naming the folder and the fix, before any
/// agent, for a run and for the commands that only read.
#[test]
fn a_state_folder_kern_cannot_make_exits_2_naming_it_and_the_fix() {
    let p = Project::new("- [ ] One\n");
    for args in [&["1", "0"][..], &["-n"], &["status"]] {
        let ran = p
            .run(args)
            .env("KERN_STATE_DIR", "/dev/null/state")
            .expect(2);
        ran.stderr_has("kern cannot make or read its state folder `/dev/null/state`")
            .stderr_has("point KERN_STATE_DIR (or XDG_STATE_HOME) at a folder you own");
    }
    assert_eq!(agent_calls(&p), "", "no agent ran");
}

#[test]
fn an_unsafe_state_folder_exits_2_with_the_fix_before_any_agent() {
    for case in unsafe_folders() {
        if case.needs_root && !running_as_root() {
            println!("skipped `{}`: needs root to chown to nobody", case.what);
            continue;
        }
        for args in [&["1", "0"][..], &["-n"], &["status"], &["report"], &["log"]] {
            let p = Project::new("- [ ] One\n");
            let folder = (case.make)(&p);
            let ran = p.run(args).expect(2);
            let line = ran
                .stderr
                .lines()
                .find(|l| l.contains(&format!("state folder `{}`", folder.display())))
                .unwrap_or_else(|| panic!("{}, {args:?}: no refusal in {}", case.what, ran.stderr));
            let owner = if case.needs_root { NOBODY } else { 0 };
            for part in [
                case.problem,
                &format!(
                    "(uid {})",
                    std::fs::symlink_metadata(&folder).unwrap().uid()
                ),
                &format!("mode {:04o}", mode(&folder)),
                "KERN_STATE_DIR",
            ] {
                assert!(
                    line.contains(part),
                    "{}, {args:?}: no {part:?} in {line}",
                    case.what
                );
            }
            if case.needs_root {
                assert!(line.contains(&format!("(uid {owner})")), "{line}");
                assert!(line.contains("`nobody`"), "{line}");
            }
            if !case.what.contains("symlink") {
                assert!(
                    line.contains(&format!("chmod 700 {}", folder.display())),
                    "{}, {args:?}: {line}",
                    case.what
                );
            }
            assert_eq!(agent_calls(&p), "", "{}, {args:?}: an agent ran", case.what);
            assert_eq!(p.log(), ["initial"], "{}, {args:?}", case.what);
            assert_eq!(p.read("SPEC.md"), "- [ ] One\n", "{}, {args:?}", case.what);
        }
    }
}

#[test]
fn doctor_shows_an_unsafe_state_folder_as_a_failed_check() {
    for case in unsafe_folders() {
        if case.needs_root && !running_as_root() {
            println!("skipped `{}`: needs root to chown to nobody", case.what);
            continue;
        }
        let p = Project::new("- [ ] One\n");
        let folder = (case.make)(&p);
        let ran = p.run(&["doctor"]).expect(2);
        let lines: Vec<&str> = ran.stderr.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.starts_with("✗ state folder: "))
            .unwrap_or_else(|| {
                panic!(
                    "{}: no failed state folder line in {}",
                    case.what, ran.stderr
                )
            });
        assert!(
            lines[i].starts_with(&format!(
                "✗ state folder: `{}` {}",
                folder.display(),
                case.problem
            )),
            "{}: {}",
            case.what,
            lines[i]
        );
        assert!(
            lines[i].contains(&format!("mode {:04o}", mode(&folder))),
            "{}",
            lines[i]
        );
        assert!(
            lines[i + 1].starts_with("    fix: ") && lines[i + 1].contains("KERN_STATE_DIR"),
            "{}: {}",
            case.what,
            lines[i + 1]
        );
        assert_eq!(
            lines.iter().filter(|l| l.starts_with('✗')).count(),
            1,
            "{}: only the state folder fails\n{}",
            case.what,
            ran.stderr
        );
        assert_eq!(agent_calls(&p), "", "{}", case.what);
    }
}

#[test]
fn a_root_of_the_persons_own_that_others_may_read_is_used_and_kerns_folders_are_0700() {
    let p = Project::new("- [ ] One\n");
    std::fs::create_dir(p.state_root()).unwrap();
    set_mode(&p.state_root(), 0o755);
    p.run(&["1", "0"]).expect(0);
    assert_eq!(
        mode(&p.state_root()),
        0o755,
        "the person's root keeps its mode"
    );
    assert_eq!(mode(&project_dir(&p)), 0o700);
    assert_eq!(mode(&p.state_dir()), 0o700);
}

/// The umask of this process (the agents' too), from `/proc/self/status`.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

/// Every folder and file under `root` whose mode is not `0700` (folders) or `0600` (files),
/// and how many of each there are; a parallel task's worktree (`jobs/<slug>/tree`) is the
/// project's files, checked out as git does, and not looked into.
fn not_private(root: &Path) -> (Vec<String>, usize, usize) {
    let (mut wrong, mut folders, mut files) = (Vec::new(), 0, 0);
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue; // removed while we looked (a stream's tail segment)
        };
        let in_jobs = path
            .parent()
            .and_then(Path::parent)
            .is_some_and(|p| p.ends_with("jobs"));
        if in_jobs && path.ends_with("tree") {
            continue;
        }
        let want = if meta.is_dir() {
            folders += 1;
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            0o700
        } else {
            files += 1;
            0o600
        };
        if meta.mode() & 0o7777 != want || meta.file_type().is_symlink() {
            wrong.push(format!("{:o} {}", meta.mode() & 0o7777, path.display()));
        }
    }
    (wrong, folders, files)
}

/// kern ARGS in the background with every review stage waiting for the file it returns: the
/// state tree is at its fullest while it waits.
fn held_in_review(p: &Project, args: &[&str]) -> (std::path::PathBuf, std::process::Child) {
    let go = p.outside.path().join("go");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}},
        "commit": {"shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())]}
    }}));
    let child = p.run(&[]).args(args).spawn();
    (go, child)
}

#[test]
fn a_fresh_runs_folders_are_0700_and_files_0600_and_the_agents_files_keep_the_umask() {
    let p = Project::new("- [ ] One\n");
    let (go, child) = held_in_review(&p, &["1", "0", "--check", "true"]);
    // During the commit stage every kind of file is there: records, streams, prompts, stderr,
    // the check's log, the journal, the logs.
    wait_for_file(&p.state_dir().join("stage3.jsonl"));
    let (wrong, folders, files) = not_private(&p.state_root());
    assert!(wrong.is_empty(), "not private during a stage: {wrong:#?}");
    for file in [
        "stage1.json",
        "stage2.jsonl",
        "stage2.prompt.md",
        "stage2.stderr",
        "check.log",
        "task.json",
        "run.jsonl",
        "run.log",
    ] {
        assert!(
            p.state_dir().join(file).exists(),
            "{file} is there to check"
        );
    }
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    assert_eq!(p.log().len(), 2, "a task committed: {:?}", p.log());
    let (wrong, after_folders, after_files) = not_private(&p.state_root());
    assert!(wrong.is_empty(), "not private after the run: {wrong:#?}");
    println!(
        "state tree: during the commit stage {folders} folders 0700, {files} files 0600; after the run {after_folders} and {after_files}"
    );
    // kern does not change the umask: the agent's file in the repository has the usual mode.
    assert_eq!(mode(&p.path().join("out/one.txt")), 0o666 & !umask());
}

#[test]
fn a_planted_record_in_a_folder_that_fails_the_check_is_never_read() {
    let p = Project::new("- [ ] One\n");
    std::fs::create_dir_all(p.state_dir()).unwrap();
    set_mode(&p.state_dir(), 0o777);
    std::fs::write(p.state_dir().join("edits.json"), planted_edits()).unwrap();
    p.run(&["1", "0"]).expect(2);
    assert!(
        !p.read("SPEC.md").contains("PLANTED"),
        "{}",
        p.read("SPEC.md")
    );
    assert_eq!(agent_calls(&p), "");
}

/// kern's pending edits of task `One` (`edits.json`) as another user would plant them: block
/// the task with a note of theirs.
fn planted_edits() -> String {
    json!({
        "identity": {"path": ["One"], "occurrence": 0},
        "title": "One",
        "edits": [{"add_blocked": "PLANTED by another user"}, {"set_state": "blocked"}]
    })
    .to_string()
}

#[test]
fn a_record_is_never_read_through_a_symlink() {
    let p = Project::new("- [ ] One\n");
    let planted = p.outside.path().join("planted.json");
    std::fs::write(&planted, planted_edits()).unwrap();
    std::fs::create_dir_all(p.state_dir()).unwrap();
    set_mode(&p.state_root(), 0o700);
    set_mode(&project_dir(&p), 0o700);
    set_mode(&p.state_dir(), 0o700);
    std::os::unix::fs::symlink(&planted, p.state_dir().join("edits.json")).unwrap();
    p.run(&["1", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(!spec.contains("PLANTED"), "{spec}");
    assert!(spec.starts_with("- [x] One\n"), "{spec}");
    assert_eq!(std::fs::read_to_string(&planted).unwrap(), planted_edits());
}

/// A scenario whose implement stage waits for the file `go` before it writes its work.
fn waiting_implement(go: &Path) -> Value {
    json!({"default": {
        "implement": {
            "shell": [format!("while [ ! -f '{}' ]; do sleep 0.01; done", go.display())],
            "write": {"out/{slug}.txt": "done {task}\n"}
        }
    }})
}

#[test]
fn a_state_folder_removed_during_a_stage_is_made_again_and_the_run_goes_on() {
    for removed in ["branch folder", "root"] {
        let p = Project::new("- [ ] One\n");
        let go = p.outside.path().join("go");
        p.scenario(&waiting_implement(&go));
        let child = p.run(&["1", "0"]).spawn();
        wait_for_file(&p.state_dir().join("stage2.jsonl"));
        // A tmp cleaner: the whole folder goes, the stage's open files with it.
        let gone = match removed {
            "root" => p.state_root(),
            _ => p.state_dir(),
        };
        remove_tree_under_a_writer(&gone);
        std::fs::write(&go, "").unwrap();
        let out = child.wait_with_output().unwrap();
        let err = texts(&out).1;
        assert!(
            !err.contains(".kern-") && !err.contains("No such file"),
            "{removed}: {err}"
        );
        assert_eq!(out.status.code(), Some(0), "{removed}: {err}");
        assert_eq!(p.log().len(), 2, "{removed}: a task committed: {err}");
        assert!(p.read("SPEC.md").starts_with("- [x] One\n"), "{removed}");
        assert!(
            err.contains("was removed during the implement stage"),
            "{removed}: {err}"
        );
        for dir in [p.state_root(), project_dir(&p), p.state_dir()] {
            assert_eq!(mode(&dir), 0o700, "{removed}: {}", dir.display());
        }
        assert!(
            p.state_dir().join("run.jsonl").exists(),
            "{removed}: the log goes on"
        );
    }
}

#[test]
fn status_dir_prints_the_private_default_root_under_home() {
    let p = Project::new("- [ ] One\n");
    let home = p.outside.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let ran = p
        .run(&["status", "--dir"])
        .env("KERN_STATE_DIR", "")
        .env("XDG_STATE_HOME", "")
        .env("HOME", &home)
        .expect(0);
    let name = p.path().file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        ran.stdout,
        format!("{}/.local/state/kern/{name}/master\n", home.display())
    );
    assert!(!home.join(".local").exists(), "status creates nothing");
    let xdg = p.outside.path().join("xdg");
    let ran = p
        .run(&["status", "--dir"])
        .env("KERN_STATE_DIR", "")
        .env("XDG_STATE_HOME", &xdg)
        .env("HOME", &home)
        .expect(0);
    assert_eq!(
        ran.stdout,
        format!("{}/kern/{name}/master\n", xdg.display())
    );
}

#[test]
fn parallel_tasks_folders_are_0700_and_their_worktrees_keep_normal_modes() {
    let p = Project::new("- [ ] Alpha\n- [ ] Beta\n");
    let (go, child) = held_in_review(&p, &["2", "0", "-j", "2"]);
    let jobs = p.state_dir().join("jobs");
    for slug in ["alpha", "beta"] {
        wait_for_file(&jobs.join(slug).join("stage3.jsonl"));
    }
    // The worktrees are the project's files, checked out as git does: their parent folders
    // are kern's.
    let trees: Vec<PathBuf> = ["alpha", "beta"]
        .iter()
        .map(|slug| jobs.join(slug).join("tree"))
        .collect();
    for tree in &trees {
        assert_eq!(mode(&tree.join("README.md")), 0o666 & !umask());
    }
    let (wrong, folders, files) = not_private(&p.state_root());
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        wrong.is_empty(),
        "not private during parallel tasks: {wrong:#?}"
    );
    // root, project, branch, jobs/, one per task
    assert!(
        folders >= 6 && files > 10,
        "{folders} folders, {files} files"
    );
    println!("parallel state tree: {folders} folders 0700, {files} files 0600");
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    assert_eq!(p.log().len(), 3, "both tasks committed: {:?}", p.log());
}

#[test]
fn doctor_names_an_old_state_folder_of_this_project_and_moves_nothing() {
    let p = Project::new("- [ ] One\n");
    let tmp = p.outside.path().join("tmp");
    let name = p.path().file_name().unwrap().to_string_lossy().into_owned();
    let old = tmp.join("claude/kern").join(&name);
    std::fs::create_dir_all(old.join("master")).unwrap();
    std::fs::write(old.join("master/run.jsonl"), "").unwrap();
    let ran = p.run(&["doctor"]).env("TMPDIR", &tmp).expect(0);
    let line = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("✓ old state folder: "))
        .unwrap_or_else(|| panic!("no old state folder line in {}", ran.stderr));
    let root = p.state_root();
    assert!(
        line.contains(&format!(
            "`{}` is from an earlier kern, which kept its state where others could read it; kern now keeps it in `{}`",
            old.display(),
            root.display()
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "mkdir -p -m 700 '{}' && mv '{}' '{}'",
            root.display(),
            old.display(),
            root.join(&name).display()
        )),
        "{line}"
    );
    assert!(old.join("master/run.jsonl").exists(), "nothing moved");
    assert!(!root.exists(), "doctor creates nothing");
    // A run neither reads nor moves it either.
    p.run(&["1", "0"]).env("TMPDIR", &tmp).expect(0);
    assert!(old.join("master/run.jsonl").exists(), "nothing moved");
}
