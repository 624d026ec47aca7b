//! Tasks from the tracker (issue 45, DESIGN.md section 22): `kern import github` brings open
//! issues into SPEC.md, and `--tracker github` tells them what became of their tasks — through
//! a fake `gh` that answers with what the real gh 2.23.0 printed
//! (`tests/fixtures/gh-2.23.0/`) and logs every call (`support::fakes::fake_gh`).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::fakes::{fake_gh, gh_calls};
use crate::support::project::Project;

/// SPEC.md after importing the recorded issues into `- [ ] Mine`: oldest issue first, the text
/// fenced, the long one cut, the checklists as criteria.
const IMPORTED: &str = include_str!("../golden/tracker-imported.md");

fn with_gh(p: &Project) -> (PathBuf, PathBuf) {
    fake_gh(p)
}

fn set_mode(log: &Path, mode: &str) {
    std::fs::write(log.join("mode"), mode).unwrap();
}

fn args_of(calls: &[(Vec<String>, String)]) -> Vec<String> {
    calls.iter().map(|(a, _)| a.join(" ")).collect()
}

#[test]
fn import_brings_each_open_issue_in_once_as_a_task_written_not_committed() {
    let p = Project::new("# Tasks\n\n- [ ] Mine\n");
    let (bin, log) = with_gh(&p);
    let out = p
        .run(&["import", "github", "--label", "kern"])
        .path_first(&bin)
        .expect(0);
    assert_eq!(
        args_of(&gh_calls(&log)),
        ["issue list --state open --limit 100 --json number,title,body,url --label kern"]
    );
    assert_eq!(p.read("SPEC.md"), IMPORTED);
    out.stderr_has("kern: imported 4 issues into SPEC.md (written, not committed unless --commit: read them, then run kern):")
        .stderr_has("line 4     acme/app#9     \"Paginate `list` output\"")
        .stderr_has("(2 criteria; its text cut at 60 lines or 6 KiB)");
    // Written, not committed.
    assert_eq!(p.log(), ["initial"]);
    assert_eq!(p.dirty(), ["SPEC.md"]);
    // Valid for kern, and every imported task is one kern takes.
    let status = p.run(&["status", "--json"]).expect(0);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["counts"]["pending"], 5, "{status}");
    // Again: nothing comes in twice.
    let again = p
        .run(&["import", "github", "--label", "kern"])
        .path_first(&bin)
        .expect(0);
    again.stderr_has("kern: nothing to import: 4 issues are open, all in the task list already — SPEC.md is unchanged");
    assert_eq!(p.read("SPEC.md"), IMPORTED);
}

#[test]
fn a_renamed_or_finished_task_keeps_its_issue_out_of_the_next_import() {
    let spec = "- [x] Dark theme, done my way\n  > **Issue:** ACME/App#12\n- [ ] Crash fix (renamed)\n  > **Issue:** https://github.com/acme/app/issues/17\n";
    let p = Project::new(spec);
    let (bin, _) = with_gh(&p);
    let out = p.run(&["import", "github"]).path_first(&bin).expect(0);
    out.stderr_has("imported 2 issues")
        .stderr_has("ACME/App#12    as `Dark theme, done my way`")
        .stderr_has("acme/app#17    as `Crash fix (renamed)`");
    let text = p.read("SPEC.md");
    assert!(text.starts_with(spec), "{text}");
    assert_eq!(text.matches("**Issue:**").count(), 4, "{text}");
    assert!(!text.contains("- [ ] Add a dark mode"), "{text}");
    assert!(
        !text.contains("- [ ] Crash on an empty config file"),
        "{text}"
    );
}

#[test]
fn import_dry_run_shows_what_would_come_in_and_writes_nothing() {
    let p = Project::new("- [ ] Mine\n  > **Issue:** acme/app#20\n");
    let (bin, log) = with_gh(&p);
    let out = p
        .run(&["import", "github", "-n"])
        .path_first(&bin)
        .expect(0);
    out.stderr_has(
        "kern: 3 new tasks would come in at the end of SPEC.md (-n: nothing is written):",
    )
    .stderr_has(
        "acme/app#9     \"Paginate `list` output\" (2 criteria; its text cut at 60 lines or 6 KiB)",
    )
    .stderr_has("acme/app#12    `Add a dark mode` (2 criteria)")
    .stderr_has("acme/app#17    `Crash on an empty config file` (1 criterion)")
    .stderr_has("acme/app#20    as `Mine`");
    assert_eq!(
        p.read("SPEC.md"),
        "- [ ] Mine\n  > **Issue:** acme/app#20\n"
    );
    assert!(p.dirty().is_empty());
    assert_eq!(gh_calls(&log).len(), 1);
}

#[test]
fn import_commit_commits_spec_md_alone_and_refuses_a_spec_md_with_changes_of_yours() {
    let p = Project::new("# Tasks\n\n- [ ] Mine\n");
    let (bin, log) = with_gh(&p);
    // The person's own change elsewhere stays theirs.
    p.write("README.md", "# scratch, edited\n");
    p.run(&["import", "github", "--commit"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("kern: committed ");
    assert_eq!(p.log()[0], "SPEC.md: 4 tasks from the tracker");
    assert_eq!(p.dirty(), ["README.md"]);
    let head = crate::support::during::git_in(p.path(), &["show", "--stat", "--format=%B", "HEAD"]);
    assert!(head.contains("- acme/app#12 Add a dark mode"), "{head}");
    assert!(
        head.contains("SPEC.md |") && !head.contains("README.md"),
        "{head}"
    );
    // A SPEC.md with an uncommitted change of the person's is refused before gh is asked.
    p.write("SPEC.md", &format!("{}- [ ] By hand\n", p.read("SPEC.md")));
    let before = p.read("SPEC.md");
    let calls = gh_calls(&log).len();
    p.run(&["import", "github", "--commit"])
        .path_first(&bin)
        .expect(2)
        .stderr_has("--commit: `SPEC.md` has changes that are not committed — commit them first, or import without --commit and commit it yourself");
    assert_eq!(p.read("SPEC.md"), before);
    assert_eq!(gh_calls(&log).len(), calls);
}

/// A folder for PATH holding only `sh` and `git`: no `gh`, whatever this machine has.
fn path_without_gh(p: &Project) -> PathBuf {
    let bin = p.outside.path().join("bare-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["sh", "git"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

#[test]
fn import_says_what_gh_could_not_do_and_writes_nothing() {
    let p = Project::new("- [ ] Mine\n");
    let bare = path_without_gh(&p);
    p.run(&["import", "github"])
        .env("PATH", &bare)
        .expect(2)
        .stderr_has("kern: error: listing the open issues of this repository (`gh issue list`): `gh` (the GitHub CLI) is not installed — install the GitHub CLI (https://cli.github.com) and log in with `gh auth login`; nothing was written");
    let (bin, log) = with_gh(&p);
    for (mode, said) in [
        (
            "not-logged-in",
            "`gh` is not logged in (gh: To get started with GitHub CLI, please run: gh auth login Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.) — log in with `gh auth login` (or set GH_TOKEN); nothing was written",
        ),
        (
            "offline",
            "`gh` cannot reach GitHub (gh: error connecting to api.github.com check your internet connection or https://githubstatus.com)",
        ),
        (
            "rate-limited",
            "GitHub's rate limit is reached (gh: GraphQL: API rate limit exceeded for user ID 1234.) — wait for the limit to reset",
        ),
        ("hang", "`gh` did not answer within 1s and was stopped"),
    ] {
        set_mode(&log, mode);
        p.run(&["import", "github", "--repo", "acme/app"])
            .path_first(&bin)
            .env("KERN_TRACKER_TIMEOUT", "1s")
            .expect(2)
            .stderr_has("listing the open issues of `acme/app` (`gh issue list`): ")
            .stderr_has(said);
        assert_eq!(p.read("SPEC.md"), "- [ ] Mine\n", "{mode}");
    }
}

#[test]
fn imported_tasks_keep_their_criteria_and_kern_ticks_them_at_commit() {
    let p = Project::new("# Tasks\n");
    let (bin, _) = with_gh(&p);
    p.run(&["import", "github", "--commit"])
        .path_first(&bin)
        .expect(0);
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done {task}\n"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains("- [x] Paginate `list` output\n  > **Issue:** acme/app#9\n"),
        "{spec}"
    );
    assert!(
        spec.contains("  Acceptance criteria:\n  - [x] `--page N` shows page N\n  - [x] `--per-page` sets the size\n"),
        "{spec}"
    );
    // The implement stage read the issue's text as the task's, and its criteria.
    let prompt = &p.prompts("implement")[0];
    assert!(prompt.contains("Line 55 of the design notes."), "{prompt}");
    assert!(
        prompt.contains("[… cut here: the whole issue is at https://github.com/acme/app/issues/9]"),
        "{prompt}"
    );
    assert!(!prompt.contains("Line 56 of"), "{prompt}");
}

/// The full messages of the branch's commits, newest first.
fn messages(p: &Project) -> Vec<String> {
    crate::support::during::git_in(p.path(), &["log", "--format=%B%x00"])
        .split('\0')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn with_the_tracker_a_task_from_an_issue_closes_it_by_its_commit_and_only_then() {
    let spec = "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n- [ ] Mine\n";
    let p = Project::new(spec);
    let (bin, _) = with_gh(&p);
    p.run(&["2", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    let all = messages(&p);
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all[1].starts_with("Add a dark mode"), "{all:?}");
    assert!(all[1].ends_with("\n\nCloses acme/app#12"), "{}", all[1]);
    assert!(!all[0].contains("Closes"), "{}", all[0]);
    // Without the tracker, no trailer: the issue is the person's to close.
    let q = Project::new(spec);
    q.run(&["1", "0"]).expect(0);
    assert!(!messages(&q)[0].contains("Closes"), "{:?}", messages(&q));
    // The settings file turns it on as the flag does.
    let r = Project::new(spec);
    r.write(".kern/config.toml", "tracker = \"github\"\n");
    r.commit_all("settings");
    let (bin, _) = with_gh(&r);
    r.run(&["1", "0"]).path_first(&bin).expect(0);
    assert!(
        messages(&r)[0].ends_with("\n\nCloses acme/app#12"),
        "{:?}",
        messages(&r)
    );
}

#[test]
fn a_parent_from_an_issue_closes_with_the_commit_of_its_last_subtask() {
    let p = Project::new(
        "- [ ] Paginate the list\n  > **Issue:** acme/app#9\n  - [ ] Part one\n  - [ ] Part two\n",
    );
    let (bin, _) = with_gh(&p);
    p.run(&["2", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    let all = messages(&p);
    assert!(
        all[1].starts_with("Part one") && !all[1].contains("Closes"),
        "{all:?}"
    );
    assert!(all[0].starts_with("Part two"), "{all:?}");
    assert!(all[0].ends_with("\n\nCloses acme/app#9"), "{}", all[0]);
    assert!(p.read("SPEC.md").starts_with("- [x] Paginate the list"));
}

#[test]
fn parallel_tasks_from_issues_close_each_its_own() {
    let p = Project::new(
        "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n- [ ] Show the version\n  > **Issue:** acme/app#20\n",
    );
    let (bin, _) = with_gh(&p);
    p.run(&["2", "0", "-j", "2", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    let all = messages(&p);
    let closing = |subject: &str| {
        all.iter()
            .find(|m| m.starts_with(subject))
            .unwrap_or_else(|| panic!("{subject}: {all:?}"))
            .clone()
    };
    assert!(closing("Add a dark mode").ends_with("Closes acme/app#12"));
    assert!(closing("Show the version").ends_with("Closes acme/app#20"));
}
