//! Issue 29's rough edges, each as the person met it with the real binary: YAML front matter,
//! prompt overrides that cannot work, `kern init --prompts` in a project, the order of the
//! failure tiers, a plain-text agent that lingers after its result, terminal escapes in
//! titles and messages, a repository owned by someone else, a repository deleted mid-run, a
//! missing absolute `program:` path, messages that said a thing twice, and `kern -n --prompts`.

use crate::support::project;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use project::Project;
use serde_json::{Value, json};

/// A plain-text `program:` agent script at `path` with `body` after the shebang.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// 1. YAML front matter is metadata, never tasks, and kern's edits keep it byte for byte.

const FRONT_MATTER: &str = "---\ntitle: Plan\ntags:\n- [ ] not a task in front matter\n---\n";

#[test]
fn front_matter_holds_no_tasks_and_survives_a_run_byte_for_byte() {
    let spec = format!("{FRONT_MATTER}\n# Plan\n\n- [ ] Real task\n");
    let p = Project::new(&spec);
    let status = p.run(&["status", "--json"]).expect(0);
    let j: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(j["next"]["title"], "Real task", "{}", status.stdout);
    assert_eq!(
        j["counts"],
        json!({"pending": 1, "in_progress": 0, "done": 0, "blocked": 0})
    );
    let dry = p.run(&["-n"]).expect(0);
    assert!(
        dry.stdout
            .contains("would take: `Real task` (SPEC.md:9) — it is the first pending task"),
        "{}",
        dry.stdout
    );
    p.run(&["1", "0"]).expect(0);
    let after = p.read("SPEC.md");
    assert!(after.starts_with(&format!("{FRONT_MATTER}\n# Plan\n\n- [x] Real task\n")));
    assert_eq!(p.log()[0], "Real task");
}

// 2. Prompt overrides that cannot work stop kern before any agent: run, -n and doctor.

#[test]
fn prompt_overrides_that_cannot_work_exit_2_before_any_agent() {
    let cases = [
        (
            "1_research.md",
            "",
            "1_research.md`: the template is empty — write a prompt that uses {TASK}, or delete the file to use the built-in one",
        ),
        (
            "2_implement.md",
            "---\nmodel: opus\n---\nDo the work.\n",
            "2_implement.md`: the template never uses {TASK}, so the agent would never learn its task — put {TASK} where the task goes, or delete the file to use the built-in one",
        ),
        (
            "research.md",
            "Research {TASK}.\n",
            "research.md`: kern reads no template of this name — it reads 1_research.md, 2_tests.md, 2_implement.md and 3_commit.md from .kern/prompts/; rename the file, or delete it",
        ),
    ];
    for (name, text, message) in cases {
        let p = Project::new("- [ ] One\n");
        p.write(&format!(".kern/prompts/{name}"), text);
        p.commit_all("prompt override");
        let run = p.run(&["1", "0"]).expect(2);
        run.stderr_has(message);
        assert!(p.prompts("research").is_empty(), "{name}: no agent ran");
        p.run(&["-n"]).expect(2).stderr_has(message);
        let doctor = p.run(&["doctor"]).expect(2);
        doctor.stderr_has("✗ prompt templates: `");
        doctor.stderr_has(message.split(" — ").next().unwrap());
    }
}

// 3. `kern init --prompts` in a project writes the templates and leaves the lists alone.

#[test]
fn init_prompts_in_an_existing_project_writes_the_templates_only() {
    let p = Project::new("- [ ] Mine\n");
    let run = p.run(&["init", "--prompts"]).expect(0);
    assert_eq!(
        run.stderr,
        "kern: wrote .kern/prompts/1_research.md, .kern/prompts/2_tests.md, .kern/prompts/2_implement.md, .kern/prompts/3_commit.md; kept SPEC.md as it is\n\
         kern: commit them before a run (`git add .kern/prompts && git commit`): a new task starts only on a clean tree\n"
    );
    assert_eq!(p.read("SPEC.md"), "- [ ] Mine\n");
    assert!(!p.path().join("LEARNINGS.md").exists());
    assert!(p.read(".kern/prompts/2_implement.md").contains("{TASK}"));
    // Still never overwrites.
    p.run(&["init", "--prompts"])
        .expect(2)
        .stderr_has("`.kern/prompts/1_research.md` already exists");
}

// 4. Decomposition is asked for before any block.

#[test]
fn one_allowed_attempt_asks_for_decomposition_before_blocking() {
    let p = Project::new("- [ ] Hard task\n");
    p.scenario(&json!({"default": {
        "implement": {"result": {"status": "FAILED", "summary": "no", "attempt_note": "the build broke"}}
    }}));
    let run = p.run(&["2", "0", "--max-attempts", "1"]).expect(4);
    let prompts = p.prompts("implement");
    assert_eq!(prompts.len(), 2, "{}", run.stderr);
    assert!(!prompts[0].contains("Decomposition is required"));
    assert!(
        prompts[1].contains("Decomposition is required"),
        "{}",
        prompts[1]
    );
    let spec = p.read("SPEC.md");
    assert!(spec.starts_with("- [!] Hard task"), "{spec}");
    assert!(
        spec.contains("> **Blocked:** the decomposition request was answered: the build broke — after 1 failed attempt; a person must look. Tried: 1) the build broke"),
        "{spec}"
    );
}

#[test]
fn three_identical_failures_ask_for_decomposition_instead_of_blocking() {
    let p = Project::new("- [ ] Hard task\n");
    p.scenario(&json!({"default": {
        "implement": {"result": {"status": "FAILED", "summary": "no", "attempt_note": "the build broke"}}
    }}));
    p.run(&["4", "0"]).expect(4);
    let prompts = p.prompts("implement");
    assert_eq!(prompts.len(), 4);
    assert!(prompts[3].contains("Decomposition is required"));
    let spec = p.read("SPEC.md");
    assert!(
        spec.contains(
            "> **Blocked:** the decomposition request was answered: the build broke — after 3 failed attempts; a person must look. Tried: 1) the build broke (3 attempts)"
        ),
        "{spec}"
    );
}

// 5. A plain-text agent that reported its result and lingers: the result stands.

#[test]
fn a_plain_text_agent_that_lingers_after_its_result_is_stopped_and_its_result_used() {
    let p = Project::new("- [ ] Add out\n");
    let agent = p.outside.path().join("lingering.sh");
    script(
        &agent,
        r#"cat > /dev/null
case "$KERN_STAGE" in
  research) echo '{"notes": ["read it"]}' ;;
  implement) echo done > out.txt; printf '{\n  "status": "SUCCESS",\n  "summary": "wrote out.txt"\n}\n' ;;
  commit) echo '{"verdict": "COMMIT", "subject": "Add out.txt"}' ;;
esac
sleep 60 &
wait
"#,
    );
    let started = std::time::Instant::now();
    let run = p
        .run(&[
            "1",
            "0",
            "--idle-timeout",
            "20",
            "--result-grace",
            "1",
            "--retries",
            "0",
        ])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .expect(0);
    assert_eq!(p.log()[0], "Add out.txt", "{}", run.stderr);
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
}

#[test]
fn plain_text_that_is_not_a_report_keeps_the_idle_timeout() {
    let p = Project::new("- [ ] Add out\n");
    let agent = p.outside.path().join("chatty.sh");
    script(
        &agent,
        "cat > /dev/null\necho '{\"plan\": \"think first\"}'\nsleep 60\n",
    );
    let run = p
        .run(&["1", "0", "--idle-timeout", "1", "--retries", "0"])
        .env("KERN_AGENT", format!("program:{}", agent.display()))
        .expect(4);
    run.stderr_has("agent printed nothing for 1s");
}

// 6. Terminal escapes from titles and agent text.

const ESCAPED_TITLE: &str = "Fix \x1b]0;pwned\x07 the \x1b[31mred\x1b[0m bug";

#[test]
fn control_characters_never_reach_the_terminal_or_the_commit() {
    let p = Project::new(&format!("- [ ] {ESCAPED_TITLE}\n"));
    p.scenario(&json!({"default": {
        "implement": {"write": {"out.txt": "x\n"}},
        "commit": {"result": {"verdict": "COMMIT", "subject": "Fix \u{1b}]0;pwned\u{7} the \u{1b}[31mred\u{1b}[0m bug", "body": "with \u{1b}[2J a clear\r\nscreen"}}
    }}));
    let control = |s: &str| s.chars().any(|c| c.is_control() && c != '\n');
    let status = p.run(&["status"]).expect(0);
    assert!(!control(&status.stdout), "{:?}", status.stdout);
    assert!(
        status
            .stdout
            .contains("Fix \\e]0;pwned\\a the \\e[31mred\\e[0m bug"),
        "{:?}",
        status.stdout
    );
    let dry = p.run(&["-n"]).expect(0);
    assert!(!control(&dry.stdout), "{:?}", dry.stdout);
    let run = p.run(&["1", "0"]).expect(0);
    assert!(!control(&run.stderr), "{:?}", run.stderr);
    let r = git2::Repository::open(p.path()).unwrap();
    let message = r
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .message()
        .unwrap()
        .to_string();
    assert_eq!(message, "Fix  the red bug\n\nwith  a clear\nscreen\n");
}

// 7. A repository owned by another user.

#[test]
fn a_repository_owned_by_another_user_exits_2_with_gits_fix() {
    use std::os::unix::fs::MetadataExt;
    let p = Project::new("- [ ] One\n");
    if std::fs::metadata(p.path()).unwrap().uid() != 0 {
        println!("skipped: handing the repository to `nobody` needs root");
        return;
    }
    let chown = |owner: &str| {
        let done = std::process::Command::new("chown")
            .args(["-R", owner])
            .arg(p.path())
            .status()
            .unwrap();
        assert!(done.success());
    };
    chown("nobody");
    let top = p.path().canonicalize().unwrap();
    let fix = format!("git config --global --add safe.directory {}", top.display());
    for args in [&["1", "0"][..], &["status"], &["-n"], &["doctor"]] {
        let run = p.run(args).expect(2);
        run.stderr_has(&format!("`{}` is owned by another user", top.display()));
        run.stderr_has(&fix);
    }
    chown("root");
}

// 8. An agent that deletes `.git` (unfenced: inside kern's fence `.git` is read-only and the
// delete fails, fence.rs).

#[test]
fn an_agent_that_deletes_the_repository_exits_2_saying_what_kern_still_holds() {
    let p = Project::new("- [ ] One\n");
    p.scenario(&json!({"default": {
        "implement": {"delete": [".git"], "write": {"out.txt": "x\n"}}
    }}));
    let state = p.state_dir();
    let run = p.run(&["1", "0", "--sandbox=off"]).expect(2);
    let git_dir = p.path().canonicalize().unwrap().join(".git");
    run.stderr_has(&format!(
        "kern: error: the repository is gone: `{}` no longer exists",
        git_dir.display()
    ));
    run.stderr_has(&format!("`{}`", state.display()));
    assert!(state.join("stage2.json").exists());
}

// 10. An absolute `program:` path that does not exist.

#[test]
fn a_missing_absolute_program_exits_5_in_the_run_and_in_the_dry_run() {
    let p = Project::new("- [ ] One\n");
    let message = "kern: error: `/nonexistent/agent` not found — check the path given to --agent program:<path> (or KERN_AGENT)";
    for args in [&["1", "0"][..], &["-n"]] {
        let run = p
            .run(args)
            .env("KERN_AGENT", "program:/nonexistent/agent")
            .expect(5);
        run.stderr_has(message);
        assert!(!run.stderr.contains("on PATH"), "{}", run.stderr);
    }
    let run = p
        .run(&["-n"])
        .env("KERN_AGENT", "program:no-such-kern-agent")
        .expect(5);
    run.stderr_has("`no-such-kern-agent` not found on PATH");
}

// 11. One wording per message.

#[test]
fn a_spec_warning_in_a_run_says_warning_once() {
    let p = Project::new("- [P] someone else's\n- [ ] One\n");
    let run = p.run(&["1", "0"]).expect(0);
    run.stderr_has("kern: warning: SPEC.md:1:3: `[P]` is not one of kern's task markers");
    assert!(
        !run.stderr.contains("warning: SPEC.md:1:3: warning:"),
        "{}",
        run.stderr
    );
    // Plural only for many.
    run.stderr_has(" kern: run ended: 1 iteration ran\n");
}

#[test]
fn costs_under_a_cent_read_as_money() {
    let p = Project::new("- [ ] One\n");
    p.scenario(&json!({"default": {
        "research": {"cost_usd": 0.002},
        "implement": {"write": {"out.txt": "x\n"}, "cost_usd": 0.004},
        "commit": {"cost_usd": 0.003}
    }}));
    let run = p.run(&["1", "0"]).expect(0);
    run.stderr_has("cost             $0.009\n");
}

// 12. `kern -n --prompts DIR`: command lines a person can run.

#[test]
fn dry_run_prompts_writes_the_prompts_its_command_lines_read() {
    let p = Project::new("- [ ] One\n");
    let dir = p.outside.path().join("dry");
    let dry = p.run(&["-n", "--prompts", dir.to_str().unwrap()]).expect(0);
    for stage in 1..=3 {
        let prompt = dir.join(format!("stage{stage}.prompt.md"));
        let schema = dir.join(format!("stage{stage}.schema.json"));
        assert!(
            dry.stdout.contains(&format!(" < {}\n", prompt.display())),
            "{}",
            dry.stdout
        );
        assert!(
            dry.stdout
                .contains(&format!("KERN_SCHEMA={}\n", schema.display())),
            "{}",
            dry.stdout
        );
        assert!(std::fs::read_to_string(&prompt).unwrap().contains("One"));
        let schema: Value = serde_json::from_slice(&std::fs::read(&schema).unwrap()).unwrap();
        assert_eq!(schema["type"], "object");
    }
    assert!(!p.state_dir().exists(), "the state folder is not written");
    p.run(&["--prompts", dir.to_str().unwrap()])
        .expect(2)
        .stderr_has("--dry-run");
}

/// A monorepo: in `packages/app`, `kern --spec SPEC.md` means the package's task list, as the
/// shell reads the path, when the repository's top folder has no file of that name; with one
/// there, the top folder's wins, as before.
#[test]
fn a_relative_spec_is_found_from_the_folder_kern_runs_in_when_the_top_has_none() {
    let p = Project::new("- [ ] Top task\n");
    p.write(
        "packages/app/PLAN.md",
        "---\nowner: pat\n---\n\n- [ ] Package task\n",
    );
    p.commit_all("a package with its own plan");
    let app = p.path().join("packages/app");
    let ran = p
        .run(&["1", "0", "--spec", "PLAN.md"])
        .current_dir(&app)
        .expect(0);
    ran.stderr_has("task `Package task` (packages/app/PLAN.md:5)");
    assert!(
        p.read("packages/app/PLAN.md")
            .contains("- [x] Package task")
    );
    assert_eq!(p.read("SPEC.md"), "- [ ] Top task\n");
    // SPEC.md is at the top: the default still means that one, from any folder.
    p.run(&["1", "0"])
        .current_dir(&app)
        .expect(0)
        .stderr_has("task `Top task` (SPEC.md:1)");
}

/// A monorepo whose package keeps a SPEC.md of its own: from the package's folder, the top
/// folder's SPEC.md still wins (as documented), and kern says so with the flag that works on the
/// package's — in `-n`, `status` and the run itself — instead of a night on the wrong list.
#[test]
fn a_task_list_in_the_folder_kern_runs_in_that_it_does_not_read_is_named() {
    let p = Project::new("- [ ] Top task\n");
    p.write("packages/app/SPEC.md", "- [ ] Package task\n");
    p.commit_all("a package with its own task list");
    let app = p.path().join("packages/app");
    let said = "`SPEC.md` is the task list kern works on, the repository's top folder's; `packages/app/SPEC.md` in the folder you are in is another one — to work on it: `kern --spec packages/app/SPEC.md`";
    for args in [&["-n"][..], &["status"], &["1", "0"]] {
        p.run(args).current_dir(&app).expect(0).stderr_has(said);
    }
    assert!(p.read("SPEC.md").starts_with("- [x] Top task"));
    // From the top, or naming the package's list, there is nothing to say.
    for (dir, args) in [
        (p.path().to_path_buf(), &["status"][..]),
        (app.clone(), &["--spec", "packages/app/SPEC.md", "status"]),
    ] {
        let err = p.run(args).current_dir(&dir).expect(0).stderr;
        assert!(!err.contains("another one"), "{err}");
    }
    p.run(&["1", "0", "--spec", "packages/app/SPEC.md"])
        .current_dir(&app)
        .expect(0)
        .stderr_has("task `Package task` (packages/app/SPEC.md:1)");
}
