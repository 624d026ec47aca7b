//! Tasks from the tracker (issue 45, DESIGN.md section 22): `kern import github` brings open
//! issues into SPEC.md, and `--tracker github` tells them what became of their tasks — through
//! a fake `gh` that answers with what the real gh 2.23.0 printed
//! (`tests/fixtures/gh-2.23.0/`) and logs every call (`support::fakes::fake_gh`).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::fakes::{fake_gh, gh_calls, gh_left_running};
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
    let spec = "- [x] Dark theme, done my way\n  > **Issue:** ACME/App#12\n- [ ] Crash fix (renamed)\n  > **Issue:** https://github.com/acme/app/issues/17\n- [ ] Footer\n  > **Issue:** the footer one\n";
    let p = Project::new(spec);
    let (bin, _) = with_gh(&p);
    let out = p.run(&["import", "github"]).path_first(&bin).expect(0);
    // An Issue note that names no issue keeps none out: the import says so first.
    out.stderr_has("kern: SPEC.md:6:1: warning: the Issue note of task `Footer` names no issue: `the footer one` — write it as `owner/repo#N` or the issue's address")
        .stderr_has("imported 2 issues")
        .stderr_has("ACME/App#12    as `Dark theme, done my way`")
        .stderr_has("acme/app#17    as `Crash fix (renamed)`");
    let text = p.read("SPEC.md");
    assert!(text.starts_with(spec), "{text}");
    assert_eq!(text.matches("**Issue:**").count(), 5, "{text}");
    assert!(!text.contains("- [ ] Add a dark mode"), "{text}");
    assert!(
        !text.contains("- [ ] Crash on an empty config file"),
        "{text}"
    );
}

#[test]
fn odd_issues_come_in_as_text_under_front_matter_and_no_line_of_theirs_becomes_a_task() {
    let spec = "---\ntitle: Roadmap\n---\n\n# Tasks\n\n- [ ] Mine\n";
    let p = Project::new(spec);
    let (bin, log) = with_gh(&p);
    set_mode(&log, "odd");
    p.run(&["import", "github"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("imported 3 issues")
        .stderr_has("acme/app#30    \"Fix **bold** [link](http://x) `code` <b>html</b> & \\ | # [x] txt.exe\" (2 criteria)\n")
        .stderr_has("acme/app#31    `- [ ] A title that looks like a task`\n")
        .stderr_has("acme/app#32    `A huge log` (1 criterion; its text cut at 60 lines or 6 KiB)");
    let text = p.read("SPEC.md");
    // The person's lines, front matter first, are as they were; the tasks come after them.
    assert!(text.starts_with(spec), "{text}");
    // The right-to-left override is gone: the title reads as it shows.
    assert!(
        !text.contains('\u{202e}') && !text.contains('\u{202c}'),
        "{text}"
    );
    assert!(
        text.contains("\n- [ ] Fix **bold** [link](http://x) `code` <b>html</b> & \\ | # [x] txt.exe\n  > **Issue:** acme/app#30\n  `````\n  - [ ] Looks like a task\n"),
        "{text}"
    );
    // The checkboxes outside code and comments are its criteria, the rest text.
    assert!(
        text.contains("  `````\n  Acceptance criteria:\n  - [ ] Looks like a task\n  - [x] Looks done\n- [ ] - [ ] A title that looks like a task\n"),
        "{text}"
    );
    assert!(
        text.contains("  ````\n  ```rust\n  fn main() {\n  - [ ] in an unclosed fence\n  ````\n- [ ] A huge log\n"),
        "{text}"
    );
    // The long text is cut; its criteria come from all of it.
    assert!(
        text.ends_with("  [… cut here: the whole issue is at https://github.com/acme/app/issues/32]\n  ```\n  Acceptance criteria:\n  - [ ] past the cut\n"),
        "{text}"
    );
    assert!(text.len() < spec.len() + 10 * 1024, "{}", text.len());
    // Three tasks came in, no more: no line of an issue reads as a task of SPEC.md.
    let pending = |p: &Project| {
        let status = p.run(&["status", "--json"]).expect(0);
        let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
        status["counts"]["pending"].clone()
    };
    assert_eq!(pending(&p), 4);
    // A task written after them by hand is a task too: nothing of theirs is left open.
    p.write("SPEC.md", &format!("{text}- [ ] Later, by hand\n"));
    assert_eq!(pending(&p), 5);
}

#[test]
fn an_import_that_brings_nothing_or_cannot_write_says_why_and_writes_nothing() {
    let p = Project::new("- [ ] Mine\n\n```\nsome code left open\n");
    let (bin, log) = with_gh(&p);
    p.run(&["import", "github", "--label", "kern"])
        .path_first(&bin)
        .expect(2)
        .stderr_has("kern: error: SPEC.md:3:1: kern cannot add the imported tasks at the end of the file: the block that starts here runs to its end and would swallow them — close what is left open (a code block's fence, an HTML block's `-->`), then import again");
    assert_eq!(
        p.read("SPEC.md"),
        "- [ ] Mine\n\n```\nsome code left open\n"
    );
    // A label no open issue carries: gh lists none, and the message names the filter.
    set_mode(&log, "none");
    p.run(&["import", "github", "--label", "no such label"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("kern: nothing to import: no open issue matches --label 'no such label' — SPEC.md is unchanged");
    assert_eq!(
        p.read("SPEC.md"),
        "- [ ] Mine\n\n```\nsome code left open\n"
    );
    assert!(p.dirty().is_empty());
    // An empty label (an unset variable in a script) is refused: gh would drop it and list
    // every open issue.
    let calls = gh_calls(&log).len();
    p.run(&["import", "github", "--label", ""])
        .path_first(&bin)
        .expect(2)
        .stderr_has("invalid value '' for '--label <LABEL>': it is empty, and gh would list every open issue for it — give a value, or leave the option out");
    assert_eq!(gh_calls(&log).len(), calls);
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
        if mode == "hang" {
            // The call that hung was stopped, with the child it started.
            assert_eq!(gh_left_running(&log), Vec::<String>::new());
        }
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

/// The tracker's comments so far: (issue number, its text), in order.
fn comments(log: &Path) -> Vec<(String, String)> {
    gh_calls(log)
        .into_iter()
        .filter(|(args, _)| args[..2] == ["issue", "comment"])
        .map(|(args, stdin)| {
            assert_eq!(
                args[3..],
                ["--repo", "acme/app", "--body-file", "-"],
                "{args:?}"
            );
            (args[2].clone(), stdin)
        })
        .collect()
}

#[test]
fn the_issue_hears_when_its_task_is_taken_skipped_and_blocked_once_each() {
    let p = Project::new(
        "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n- [ ] Crash fix\n  > **Issue:** acme/app#17\n- [ ] Mine\n",
    );
    p.scenario(&json!({
        "tasks": [
            {"match": "Add a dark mode", "research": [
                {"result": {"notes": [], "skip_reason": "the palette is not chosen yet"}},
                {}
            ]},
            {"match": "Crash fix", "research": {"result": {
                "notes": [], "skip_reason": "which config format wins?", "skip_kind": "needs_person"
            }}}
        ],
        "default": {"implement": {"write": {"out/{slug}.txt": "done {task}\n"}}}
    }));
    let (bin, log) = with_gh(&p);
    let out = p
        .run(&["5", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(4);
    let said: Vec<(String, String)> = comments(&log);
    let kinds: Vec<(&str, &str)> = said
        .iter()
        .map(|(n, text)| {
            let kind = if text.starts_with("kern took this up") {
                "taken"
            } else if text.starts_with("kern skipped") {
                "skipped"
            } else if text.starts_with("kern stopped") {
                "blocked"
            } else {
                "?"
            };
            (n.as_str(), kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("12", "taken"),
            ("12", "skipped"),
            ("17", "taken"),
            ("17", "blocked"),
            ("12", "taken"),
        ],
        "{said:?}"
    );
    assert!(
        said[1].1.contains("the palette is not chosen yet"),
        "{}",
        said[1].1
    );
    assert!(
        said[3]
            .1
            .contains("> **Blocked:** needs you: which config format wins?"),
        "{}",
        said[3].1
    );
    // The task's line names its issue; the comment is told after it.
    let selected = out
        .stderr
        .find("task `Add a dark mode` (SPEC.md:1, issue acme/app#12): it is the first pending task")
        .unwrap_or_else(|| panic!("{}", out.stderr));
    let commented = out
        .stderr
        .find("kern: commented (taken) on acme/app#12")
        .unwrap();
    assert!(selected < commented, "{}", out.stderr);
    assert!(messages(&p)[0].starts_with("Add a dark mode"));
    assert!(messages(&p)[0].ends_with("Closes acme/app#12"));
    // Only comments: no label without --remote.
    assert_eq!(gh_calls(&log).len(), 5);
}

#[test]
fn a_task_taken_up_again_in_the_next_run_is_not_announced_twice() {
    let p = Project::new("- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n");
    p.scenario(&json!({
        "tasks": [{"match": "Add a dark mode", "implement": [
            {"result": {"status": "FAILED", "summary": "tried", "attempt_note": "the build broke"}},
            {"write": {"out/dark.txt": "dark\n"}}
        ]}]
    }));
    let (bin, log) = with_gh(&p);
    p.run(&["1", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(4);
    assert!(p.read("SPEC.md").starts_with("- [~] Add a dark mode"));
    p.run(&["1", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    assert_eq!(comments(&log).len(), 1, "{:?}", comments(&log));
    assert!(messages(&p)[0].ends_with("Closes acme/app#12"));
    // Done, the issue reopened and its task imported again: a new take is told again.
    p.write(
        "SPEC.md",
        &format!(
            "{}- [ ] Dark mode, again\n  > **Issue:** acme/app#12\n",
            p.read("SPEC.md")
        ),
    );
    p.commit_all("the issue again");
    // (The scenario's implement changes nothing for this task: a failed attempt, exit 4.)
    p.run(&["1", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(4);
    assert_eq!(comments(&log).len(), 2, "{:?}", comments(&log));
}

#[test]
fn each_gh_failure_is_one_warning_and_an_event_and_the_night_goes_on() {
    let spec = "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n- [ ] Crash fix\n  > **Issue:** acme/app#17\n";
    // (mode, what the warning says, events recorded, the tracker off after the first)
    let cases: &[(&str, &str, usize, bool)] = &[
        (
            "not-installed",
            "`gh` (the GitHub CLI) is not installed — install the GitHub CLI (https://cli.github.com) and log in with `gh auth login`",
            1,
            true,
        ),
        (
            "not-logged-in",
            "`gh` is not logged in (gh: To get started with GitHub CLI, please run: gh auth login Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.) — log in with `gh auth login` (or set GH_TOKEN)",
            1,
            true,
        ),
        (
            "offline",
            "`gh` cannot reach GitHub (gh: error connecting to api.github.com check your internet connection or https://githubstatus.com) — check the network (`gh auth status` tells whether GitHub answers)",
            2,
            false,
        ),
        (
            "rate-limited",
            "GitHub's rate limit is reached (gh: GraphQL: API rate limit exceeded for user ID 1234.) — wait for the limit to reset (`gh api rate_limit`)",
            2,
            false,
        ),
        (
            "hang",
            "`gh` did not answer within 1s and was stopped — check the network",
            2,
            false,
        ),
    ];
    for (mode, said, recorded, off) in cases {
        let p = Project::new(spec);
        let (bin, log) = with_gh(&p);
        let run = p
            .run(&["2", "0", "--tracker", "github"])
            .env("KERN_TRACKER_TIMEOUT", "1s");
        let run = if *mode == "not-installed" {
            run.env("PATH", path_without_gh(&p))
        } else {
            set_mode(&log, mode);
            run.path_first(&bin)
        };
        let out = run.expect(0);
        // The night went on: both tasks committed, each closing its issue.
        let all = messages(&p);
        assert!(all[0].ends_with("Closes acme/app#17"), "{mode}: {all:?}");
        assert!(all[1].ends_with("Closes acme/app#12"), "{mode}: {all:?}");
        // One warning, with gh's words and the fix.
        assert_eq!(
            out.stderr.matches("warning: the tracker:").count(),
            1,
            "{mode}: {}",
            out.stderr
        );
        out.stderr_has(&format!(
            "warning: the tracker: comment (taken) on acme/app#12 failed: {said}"
        ));
        out.stderr_has(if *off {
            "the tracker is off for the rest of the run, the night goes on"
        } else {
            "the night goes on (the next failures like it are only recorded in run.jsonl)"
        });
        if *mode == "hang" {
            // Every call that hung was stopped, with the child it started.
            assert_eq!(gh_left_running(&log), Vec::<String>::new());
        }
        let events = p.run_events("tracker_failed");
        assert_eq!(events.len(), *recorded, "{mode}: {events:?}");
        assert_eq!(events[0]["issue"], "acme/app#12", "{mode}");
        assert_eq!(events[0]["action"], "comment (taken)", "{mode}");
        assert_eq!(events[0]["off"], json!(*off), "{mode}");
        if !off {
            assert_eq!(events[1]["issue"], "acme/app#17", "{mode}");
        }
        // The morning report names it once.
        let report = p.run(&["report"]).expect(0);
        assert_eq!(
            report
                .stdout
                .matches("the tracker: comment (taken)")
                .count(),
            1,
            "{mode}: {}",
            report.stdout
        );
        // With how many more calls failed so.
        assert_eq!(
            report.stdout.contains(" (and 1 more call like it)"),
            !off,
            "{mode}: {}",
            report.stdout
        );
    }
}

/// A bare remote made from `p` and a clone of it ("a machine"): the clone's folder.
fn machine(p: &Project) -> PathBuf {
    let git = crate::support::during::git_in;
    let outside = p.outside.path();
    git(
        outside,
        &[
            "clone",
            "--quiet",
            "--bare",
            &p.path().display().to_string(),
            "remote.git",
        ],
    );
    let remote = outside.join("remote.git").display().to_string();
    git(outside, &["clone", "--quiet", &remote, "machine"]);
    let clone = outside.join("machine");
    git(&clone, &["config", "user.name", "Test Person"]);
    git(&clone, &["config", "user.email", "test@example.com"]);
    clone
}

#[test]
fn with_remote_a_claim_labels_the_issue_with_the_machine_and_the_landing_takes_it_off() {
    let p = Project::new("- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n");
    let clone = machine(&p);
    let (bin, log) = with_gh(&p);
    p.run(&["1", "0", "--remote", "origin", "--tracker", "github"])
        .current_dir(&clone)
        .env("KERN_STATE_DIR", p.outside.path().join("state-machine"))
        .path_first(&bin)
        .expect(0);
    let host = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let label = format!("kern:{host}");
    let calls = gh_calls(&log);
    let asked: Vec<String> = calls.iter().map(|(a, _)| a[..3].join(" ")).collect();
    assert_eq!(
        asked,
        [
            "api --method POST",
            "issue comment 12",
            "api --method DELETE"
        ],
        "{calls:?}"
    );
    assert_eq!(calls[0].0[3], "repos/acme/app/issues/12/labels");
    assert_eq!(calls[0].1.trim(), format!("{{\"labels\":[\"{label}\"]}}"));
    assert!(
        calls[2].0[3].starts_with("repos/acme/app/issues/12/labels/kern%3A"),
        "{:?}",
        calls[2]
    );
    let landed = crate::support::during::git_in(
        &p.outside.path().join("remote.git"),
        &["log", "-1", "--format=%B", "master"],
    );
    assert!(
        landed.trim_end().ends_with("Closes acme/app#12"),
        "{landed}"
    );
}

#[test]
fn with_remote_a_label_gh_cannot_set_is_a_warning_and_the_task_lands() {
    let p = Project::new("- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n");
    let clone = machine(&p);
    let (bin, log) = with_gh(&p);
    set_mode(&log, "rate-limited");
    let out = p
        .run(&["1", "0", "--remote", "origin", "--tracker", "github"])
        .current_dir(&clone)
        .env("KERN_STATE_DIR", p.outside.path().join("state-machine"))
        .path_first(&bin)
        .expect(0);
    // The label, the comment and the label's removal were each asked once and failed.
    let asked: Vec<String> = gh_calls(&log)
        .iter()
        .map(|(a, _)| a[..3].join(" "))
        .collect();
    assert_eq!(
        asked,
        [
            "api --method POST",
            "issue comment 12",
            "api --method DELETE"
        ]
    );
    let host = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    out.stderr_has(&format!("warning: the tracker: label `kern:{host}` on acme/app#12 failed: GitHub's rate limit is reached (gh: API rate limit exceeded for user ID 1234. (HTTP 403)) — wait for the limit to reset (`gh api rate_limit`); the night goes on"));
    // One warning: the comment's and the removal's failures of the same kind are only recorded.
    assert_eq!(
        out.stderr.matches("warning: the tracker:").count(),
        1,
        "{}",
        out.stderr
    );
    // The task landed on the remote all the same, closing its issue.
    let landed = crate::support::during::git_in(
        &p.outside.path().join("remote.git"),
        &["log", "-1", "--format=%B", "master"],
    );
    assert!(
        landed.trim_end().ends_with("Closes acme/app#12"),
        "{landed}"
    );
}

#[test]
fn with_pr_the_pull_request_says_it_closes_the_issue() {
    let p = Project::new("- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n");
    let clone = machine(&p);
    let (bin, log) = with_gh(&p);
    p.run(&[
        "1",
        "0",
        "--remote",
        "origin",
        "--pr",
        "--tracker",
        "github",
    ])
    .current_dir(&clone)
    .env("KERN_STATE_DIR", p.outside.path().join("state-machine"))
    .path_first(&bin)
    .expect(0)
    .stderr_has(
        "opened a pull request for `kern/add-a-dark-mode`: https://github.com/acme/app/pull/7",
    );
    let calls = gh_calls(&log);
    let pr = calls
        .iter()
        .find(|(a, _)| a[..2] == ["pr", "create"])
        .unwrap_or_else(|| panic!("{calls:?}"));
    // The log holds an argument a line: the body's lines follow `--body`.
    let args = pr.0.join("\n");
    let body = args.split("\n--body\n").nth(1).unwrap();
    assert!(body.ends_with("\n\nCloses acme/app#12"), "{body}");
    // The claim's label came off when the task was parked and its claim freed.
    assert_eq!(
        calls.last().unwrap().0[..3].join(" "),
        "api --method DELETE",
        "{calls:?}"
    );
}

#[test]
fn status_shows_each_tasks_issue_and_the_report_links_them() {
    let p = Project::new(
        "- [x] Old\n  > **Issue:** acme/app#3\n- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n- [ ] Mine\n",
    );
    let status = p.run(&["status"]).expect(0);
    assert!(
        status
            .stdout
            .contains("issues:    line 3 [ ] acme/app#12 `Add a dark mode`\n           line 1 [x] acme/app#3 `Old`\n"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("issue:     acme/app#12 (https://github.com/acme/app/issues/12)\n"),
        "{}",
        status.stdout
    );
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(
        json["next"]["issue"],
        json!({"name": "acme/app#12", "url": "https://github.com/acme/app/issues/12"})
    );
    assert_eq!(json["issues"].as_array().unwrap().len(), 2, "{json}");
    let (bin, _) = with_gh(&p);
    p.run(&["2", "0", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains("      issue acme/app#12: https://github.com/acme/app/issues/12\n"),
        "{report}"
    );
    let markdown = p.run(&["report", "--markdown"]).expect(0).stdout;
    assert!(
        markdown
            .contains("| Add a dark mode ([acme/app#12](https://github.com/acme/app/issues/12)) |"),
        "{markdown}"
    );
    assert!(markdown.contains("| Mine |"), "{markdown}");
    let html = p.outside.path().join("night.html");
    p.run(&["report", "--html", html.to_str().unwrap()])
        .expect(0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Add a dark mode <a class=\"issue\" href=\"https://github.com/acme/app/issues/12\">acme/app#12</a>"),
        "{page}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&p.run(&["report", "--json"]).expect(0).stdout).unwrap();
    assert_eq!(
        json["runs"][0]["tasks"][0]["issue"],
        json!({"name": "acme/app#12", "url": "https://github.com/acme/app/issues/12"})
    );
    assert!(json["runs"][0]["tasks"][1].get("issue").is_none(), "{json}");
}

#[test]
fn without_a_task_list_the_import_starts_one_and_the_dry_run_names_the_tracker() {
    let p = Project::new("- [ ] Mine\n");
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    p.commit_all("no task list");
    let (bin, _) = with_gh(&p);
    p.run(&["import", "github", "-n"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("kern: SPEC.md does not exist: it would be made, with a `# Tasks` heading")
        .stderr_has("4 new tasks would come in");
    assert!(!p.path().join("SPEC.md").exists());
    p.run(&["import", "github", "--commit"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("kern: made SPEC.md for the imported tasks");
    assert!(
        p.read("SPEC.md")
            .starts_with("# Tasks\n\n- [ ] Paginate `list` output\n")
    );
    assert_eq!(p.log()[0], "SPEC.md: 4 tasks from the tracker");
    // A task list in a folder that is not there yet: the folder is made, as `kern init` does.
    p.run(&["import", "github", "--spec", "plans/next/TODO.md"])
        .path_first(&bin)
        .expect(0)
        .stderr_has("kern: made plans/next/TODO.md for the imported tasks");
    assert!(
        p.read("plans/next/TODO.md")
            .starts_with("# Tasks\n\n- [ ] Paginate `list` output\n")
    );
    std::fs::remove_dir_all(p.path().join("plans")).unwrap();
    // The dry run of a night says what the tracker will hear of the next task.
    let out = p
        .run(&["-n", "--tracker", "github"])
        .path_first(&bin)
        .expect(0);
    assert!(
        out.stdout.contains(&format!(
            "tracker:    github — its commit closes acme/app#9; `gh` ({}) comments on it when it is taken, skipped or blocked",
            bin.join("gh").display()
        )),
        "{}",
        out.stdout
    );
}
