//! `kern demo`: the whole loop, for real, in a throw-away repository, with the built-in scripted
//! agent instead of a model — offline, no account, a few seconds.
//!
//! What it builds, under one temp folder `kern-demo-<random>/`:
//! - `greet/`: a git repository (identity set locally, so a machine without a git identity
//!   works) holding a tiny shell project, a four-task SPEC.md and an initial commit;
//! - `agent/`: the scenario of the scripted agent (real edits per task, matched by task title;
//!   one task is DECOMPOSED into two subtasks, done in the next iterations) and a wrapper
//!   script `exec <this kern> scripted-agent <scenario>`;
//! - `state/`: the state root of the run.
//!
//! Then it runs the real loop (`pipeline::run`) on it through `--agent program:<wrapper>` with
//! delay 0, the person's own `--color`/`-q` and the normal live output, and ends by printing
//! `git log --oneline`, the final SPEC.md and the state folder. With `--keep` everything stays
//! and jq recipes that work on what is left are printed; otherwise the folder is removed (also
//! kept when the run failed, so there is something to look at).
//!
//! Decisions a reader must know:
//! - The demo's repository and state root are given to the run as settings
//!   (`Settings::cwd`, `Settings::state_root`): no `chdir`, no environment change.
//! - The person's run options that could break or slow the demo (`--check`, `--model`,
//!   `--max-cost`, `--allow-dirty`, `--spec`) are replaced; hooks are skipped (`--no-verify`),
//!   so a global `core.hooksPath` cannot refuse the demo's commits.
//! - The demo's state root is its own (`state/` above), not the person's: the `kern status`,
//!   `kern report` and `kern log` it prints for a kept repository name it with
//!   `KERN_STATE_DIR=…`, so they work as printed from anywhere. The jq recipes read its
//!   `run.jsonl`; the last iteration's stage records are in the state folder's `last/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::Agent;
use crate::error::{Error, Result};
use crate::reporter::Reporter;
use crate::settings::Settings;
use crate::supervisor::interrupt::Interrupt;

/// The demo repository's folder name (and so its project id).
pub(crate) const PROJECT: &str = "greet";

/// The branch the demo repository starts on.
pub(crate) const BRANCH: &str = "main";

/// Iterations the demo allows; it needs six, and stops when nothing is left.
const ITERATIONS: u32 = 10;

/// The git identity of the demo repository (repository-local config).
const IDENTITY: (&str, &str) = ("kern demo", "demo@kern.invalid");

/// The demo's SPEC.md.
pub(crate) const SPEC: &str = "# greet: tasks

A task list for `kern demo`. kern takes the first unfinished task, one per iteration.

- [ ] Greet a person by name
  `sh greet.sh Ada` prints `Hello, Ada!`; without a name it still greets the world.
- [ ] Greet in other languages
  `--lang fr` or `--lang de` before the name chooses French or German.
- [ ] Add a test script
  `sh test.sh` checks every greeting and prints `ok`.
- [ ] Document the usage in README.md
";

const README: &str = "# greet

A tiny greeting script.
";

const LEARNINGS: &str = "# Learnings

kern appends what the agents learn here.
";

const GREET_0: &str = "#!/bin/sh
# greet.sh: prints a greeting.
echo \"Hello, world!\"
";

const GREET_1: &str = "#!/bin/sh
# greet.sh [NAME]: prints a greeting.
name=\"${1:-world}\"
echo \"Hello, $name!\"
";

const GREET_2: &str = "#!/bin/sh
# greet.sh [--lang fr] [NAME]: prints a greeting.
greeting=\"Hello\"
if [ \"$1\" = \"--lang\" ]; then
  case \"$2\" in
    fr) greeting=\"Bonjour\" ;;
  esac
  shift 2
fi
name=\"${1:-world}\"
echo \"$greeting, $name!\"
";

const GREET_3: &str = "#!/bin/sh
# greet.sh [--lang fr|de] [NAME]: prints a greeting.
greeting=\"Hello\"
if [ \"$1\" = \"--lang\" ]; then
  case \"$2\" in
    fr) greeting=\"Bonjour\" ;;
    de) greeting=\"Hallo\" ;;
  esac
  shift 2
fi
name=\"${1:-world}\"
echo \"$greeting, $name!\"
";

const TEST: &str = "#!/bin/sh
# test.sh: checks every greeting of greet.sh; prints ok, or the first difference.
check() {
  want=\"$1\"; shift
  got=\"$(sh greet.sh \"$@\")\"
  [ \"$got\" = \"$want\" ] || { echo \"greet.sh $*: got '$got', want '$want'\"; exit 1; }
}
check \"Hello, world!\"
check \"Hello, Ada!\" Ada
check \"Bonjour, Ada!\" --lang fr Ada
check \"Hallo, Ada!\" --lang de Ada
echo ok
";

const USAGE: &str = "
## Usage

    sh greet.sh [--lang fr|de] [NAME]

`sh test.sh` checks every greeting.
";

/// The subtasks the agent decomposes "Greet in other languages" into.
const SUBTASKS: [&str; 2] = [
    "Add French: --lang fr says Bonjour",
    "Add German: --lang de says Hallo",
];

/// The scripted agent's scenario: per task (matched by a substring of its title), what each
/// stage does. Research reads, implement edits and runs the script, review checks and names
/// the commit. Public so the unit tests and the README test can check it.
pub(crate) fn scenario() -> Value {
    let research = |notes: &[&str]| json!({"shell": ["cat greet.sh"], "result": {"notes": notes}});
    let implement = |files: Value, shell: &[&str], summary: &str| json!({"write": files, "shell": shell, "result": {"status": "SUCCESS", "summary": summary}});
    let review = |shell: &str, subject: &str| json!({"shell": [shell], "result": {"verdict": "COMMIT", "subject": subject}});
    json!({
        "default": {
            "research": research(&["the whole program is `greet.sh`"]),
            "commit": review("sh greet.sh Ada", "{task}")
        },
        "tasks": [
            {
                "match": "Greet a person by name",
                "research": research(&["greet.sh prints a fixed `Hello, world!`", "take the name from `$1`, default `world`"]),
                "implement": implement(json!({"greet.sh": GREET_1}), &["sh greet.sh Ada", "sh greet.sh"], "greet.sh takes an optional NAME"),
                "commit": review("sh greet.sh Ada", "greet.sh: greet a person by name")
            },
            {
                "match": "other languages",
                "research": research(&["two languages are two separate changes: one task each"]),
                "implement": {"result": {
                    "status": "DECOMPOSED",
                    "summary": "two languages, one subtask each",
                    "subtasks": SUBTASKS
                }}
            },
            {
                "match": "Add French",
                "implement": implement(json!({"greet.sh": GREET_2}), &["sh greet.sh --lang fr Ada"], "--lang fr greets in French"),
                "commit": review("sh greet.sh --lang fr Ada", "greet.sh: --lang fr greets in French")
            },
            {
                "match": "Add German",
                "implement": implement(json!({"greet.sh": GREET_3}), &["sh greet.sh --lang de Ada"], "--lang de greets in German"),
                "commit": review("sh greet.sh --lang de Ada", "greet.sh: --lang de greets in German")
            },
            {
                "match": "Add a test script",
                "implement": {
                    "write": {"test.sh": TEST},
                    "shell": ["sh test.sh"],
                    "result": {
                        "status": "SUCCESS",
                        "summary": "test.sh checks all four greetings",
                        "learnings": ["run `sh test.sh` after every change to greet.sh"]
                    }
                },
                "commit": review("sh test.sh", "test.sh: check every greeting")
            },
            {
                "match": "Document the usage",
                "research": research(&["README.md has no usage section yet"]),
                "implement": {
                    "append": {"README.md": USAGE},
                    "shell": ["sh test.sh"],
                    "result": {"status": "SUCCESS", "summary": "README.md shows the usage"}
                },
                "commit": review("cat README.md", "README.md: document the usage")
            }
        ]
    })
}

/// The folders of one demo.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The temp folder holding everything.
    pub root: PathBuf,
    /// The git repository.
    pub repo: PathBuf,
    /// The scenario and the wrapper script.
    pub agent: PathBuf,
    /// The state root of the run.
    pub state_root: PathBuf,
}

impl Layout {
    /// The folders under `root`.
    pub(crate) fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
            repo: root.join(PROJECT),
            agent: root.join("agent"),
            state_root: root.join("state"),
        }
    }

    /// The state folder of the demo's project and branch.
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.state_root.join(PROJECT).join(BRANCH)
    }

    /// The wrapper script kern runs as the agent.
    pub(crate) fn wrapper(&self) -> PathBuf {
        self.agent.join("agent.sh")
    }
}

/// Runs the demo (`kern demo [--keep]`).
pub(crate) async fn run(settings: &Settings, keep: bool) -> Result<()> {
    let temp = tempfile::Builder::new()
        .prefix("kern-demo-")
        .tempdir()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let layout = Layout::new(temp.path());
    let kern = std::env::current_exe().map_err(|e| Error::io("the kern executable", e))?;
    build(&layout, &kern)?;

    let demo = demo_settings(settings, &layout);
    if !settings.quiet {
        eprintln!("{}", intro(&layout));
    }
    let reporter = Reporter::new(settings.color, settings.quiet, &settings.output);
    let interrupt = Interrupt::install()?;
    let result = super::run::run(&demo, &reporter, &interrupt).await;
    drop(reporter);

    match result {
        Ok(()) => {
            let text = ending(&layout, keep, settings.quiet)?;
            if keep {
                let _ = temp.keep();
            } else {
                temp.close().map_err(|e| Error::io(&layout.root, e))?;
            }
            eprint!("{text}");
            Ok(())
        }
        Err(e @ Error::Interrupted { .. }) if !keep => Err(e),
        Err(e) => {
            let _ = temp.keep();
            eprintln!(
                "kern demo: kept `{}` to look at what went wrong",
                layout.root.display()
            );
            Err(e)
        }
    }
}

/// The settings of the demo's run: the person's output choices, everything else the demo's.
pub(crate) fn demo_settings(settings: &Settings, layout: &Layout) -> Settings {
    // The scripted agent keeps its counts beside its scenario: its own folder, writable in the
    // fence as Claude Code's `~/.claude` is for Claude.
    let mut sandbox = settings.sandbox.clone();
    sandbox.write.push(layout.agent.clone());
    Settings {
        sandbox,
        iterations: ITERATIONS,
        delay: Duration::ZERO,
        dry_run: false,
        spec: PathBuf::from("SPEC.md"),
        agent: Agent::Program(layout.wrapper()),
        model: None,
        max_cost: None,
        check: None,
        allow_dirty: false,
        tests_read_only: false,
        tests_first: false,
        scope: crate::cli::ScopeMode::SetAside,
        max_task_files: None,
        level: None,
        no_verify: true,
        notify: None,
        tracker: None,
        detach: false,
        detached: false,
        remote: None,
        pr: false,
        state_root: layout.state_root.clone(),
        cwd: layout.repo.clone(),
        ..settings.clone()
    }
}

/// Writes the repository (with its initial commit), the scenario and the wrapper script.
pub(crate) fn build(layout: &Layout, kern: &Path) -> Result<()> {
    for dir in [&layout.repo, &layout.agent] {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head(BRANCH);
    let repo = git2::Repository::init_opts(&layout.repo, &options)
        .map_err(|e| Error::git("creating the demo repository", e))?;
    let mut config = repo
        .config()
        .map_err(|e| Error::git("opening the demo repository's config", e))?;
    for (key, value) in [("user.name", IDENTITY.0), ("user.email", IDENTITY.1)] {
        config
            .set_str(key, value)
            .map_err(|e| Error::git(format!("setting {key}"), e))?;
    }
    for (name, text) in [
        ("README.md", README),
        ("greet.sh", GREET_0),
        ("SPEC.md", SPEC),
        ("LEARNINGS.md", LEARNINGS),
    ] {
        let path = layout.repo.join(name);
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    }
    initial_commit(&repo)?;

    let scenario_path = layout.agent.join("scenario.json");
    let scenario = serde_json::to_vec_pretty(&scenario())
        .map_err(|e| Error::Internal(format!("demo scenario: {e}")))?;
    std::fs::write(&scenario_path, scenario).map_err(|e| Error::io(&scenario_path, e))?;
    let wrapper = layout.wrapper();
    let script = format!(
        "#!/bin/sh\nexec {} scripted-agent {}\n",
        crate::text::shell_quote(&kern.to_string_lossy()),
        crate::text::shell_quote(&scenario_path.to_string_lossy())
    );
    std::fs::write(&wrapper, script).map_err(|e| Error::io(&wrapper, e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(&wrapper, e))
}

fn initial_commit(repo: &git2::Repository) -> Result<()> {
    let git = |what: &'static str| move |e: git2::Error| Error::git(what, e);
    let mut index = repo.index().map_err(git("reading the index"))?;
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .map_err(git("adding the demo files"))?;
    index.write().map_err(git("writing the index"))?;
    let tree_id = index.write_tree().map_err(git("writing the tree"))?;
    let tree = repo.find_tree(tree_id).map_err(git("reading the tree"))?;
    let me = git2::Signature::now(IDENTITY.0, IDENTITY.1).map_err(git("the demo identity"))?;
    repo.commit(
        Some("HEAD"),
        &me,
        &me,
        "Start the greet project",
        &tree,
        &[],
    )
    .map_err(git("making the initial commit"))?;
    Ok(())
}

/// The paragraph printed before the run.
pub(crate) fn intro(layout: &Layout) -> String {
    format!(
        "kern demo: a throw-away git repository with a four-task SPEC.md, driven to commits by \
         kern's real loop (research, implement, review, commit; one task gets decomposed into \
         subtasks on the way). The agent is kern's built-in scripted agent instead of a model: \
         offline, no account, real edits, pretend costs.\nrepository: {}\n",
        layout.repo.display()
    )
}

/// What the demo prints after the run: the log, SPEC.md, the state folder and what to try.
pub(crate) fn ending(layout: &Layout, keep: bool, quiet: bool) -> Result<String> {
    let mut out = String::new();
    out.push_str("\ngit log --oneline:\n");
    for line in log_oneline(&layout.repo)? {
        let _ = writeln!(out, "  {line}");
    }
    if !quiet {
        let spec_path = layout.repo.join("SPEC.md");
        let spec = std::fs::read_to_string(&spec_path).map_err(|e| Error::io(&spec_path, e))?;
        out.push_str("\nSPEC.md now:\n");
        for line in spec.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let state = layout.state_dir();
    let run_log = crate::text::shell_quote(&state.join("run.jsonl").to_string_lossy());
    if keep {
        let _ = writeln!(
            out,
            "\nkept: {}\n  repository:   {}\n  state folder: {}\ntry:\n  git -C {} log --stat\n  jq -c 'select(.event == \"commit\")' {run_log}\n  jq -c 'select(.event == \"stage_end\") | {{stage, outcome, cost_usd}}' {run_log}",
            layout.root.display(),
            layout.repo.display(),
            state.display(),
            crate::text::shell_quote(&layout.repo.to_string_lossy()),
        );
        // The demo's state root is its own, not the default one: each command names it.
        let _ = writeln!(
            out,
            "\nfrom the kept repository (the demo keeps its own state root, so each command names it):"
        );
        let prefix = format!(
            "cd {} && KERN_STATE_DIR={}",
            crate::text::shell_quote(&layout.repo.to_string_lossy()),
            crate::text::shell_quote(&layout.state_root.to_string_lossy()),
        );
        for command in ["kern status", "kern report", "kern log"] {
            let _ = writeln!(out, "  {prefix} {command}");
        }
    } else {
        let _ = writeln!(
            out,
            "\nstate folder: {} (removed with the repository; `kern demo --keep` keeps both)",
            state.display()
        );
    }
    out.push_str(
        "\nin your own project, after a task: jq .result \"$(kern status --dir)/last/stage2.json\"\n",
    );
    Ok(out)
}

/// `git log --oneline` of HEAD, through libgit2.
pub(crate) fn log_oneline(repo: &Path) -> Result<Vec<String>> {
    let git = |what: &'static str| move |e: git2::Error| Error::git(what, e);
    let repo = git2::Repository::open(repo).map_err(git("opening the demo repository"))?;
    let mut walk = repo.revwalk().map_err(git("walking the history"))?;
    walk.push_head().map_err(git("walking the history"))?;
    let mut lines = Vec::new();
    for oid in walk {
        let commit = repo
            .find_commit(oid.map_err(git("walking the history"))?)
            .map_err(git("reading a commit"))?;
        let hex = commit.id().to_string();
        lines.push(format!(
            "{} {}",
            &hex[..7],
            commit.summary().ok().flatten().unwrap_or("")
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_agent::Scenario;
    use crate::spec::{self, Document, TaskState};
    use crate::stage::Stage;

    #[test]
    fn the_scenario_parses_and_gives_every_task_its_own_plan() {
        let scenario = Scenario::parse(&scenario().to_string()).unwrap();
        let doc = Document::parse(SPEC);
        let mut titles: Vec<String> = doc.tasks().iter().map(|t| t.title.clone()).collect();
        titles.extend(SUBTASKS.iter().map(std::string::ToString::to_string));
        let keys: Vec<String> = titles
            .iter()
            .map(|t| scenario.plan(t, Stage::Implement).0)
            .collect();
        assert_eq!(
            keys,
            [
                "tasks[0]/implement",
                "tasks[1]/implement",
                "tasks[4]/implement",
                "tasks[5]/implement",
                "tasks[2]/implement",
                "tasks[3]/implement"
            ]
        );
    }

    #[test]
    fn the_spec_is_valid_and_all_pending() {
        let doc = Document::parse(SPEC);
        assert!(spec::validate(&doc).is_empty());
        let states: Vec<TaskState> = doc.tasks().iter().map(|t| t.state).collect();
        assert_eq!(states, [TaskState::Pending; 4]);
    }

    #[test]
    fn the_test_script_passes_on_the_last_greet_script_only() {
        let dir = tempfile::tempdir().unwrap();
        let run = |greet: &str| {
            std::fs::write(dir.path().join("greet.sh"), greet).unwrap();
            std::fs::write(dir.path().join("test.sh"), TEST).unwrap();
            let out = std::process::Command::new("sh")
                .arg("test.sh")
                .current_dir(dir.path())
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        assert_eq!(run(GREET_3), (true, "ok\n".to_string()));
        assert_eq!(
            run(GREET_2),
            (
                false,
                "greet.sh --lang de Ada: got 'Hello, Ada!', want 'Hallo, Ada!'\n".to_string()
            )
        );
    }

    #[test]
    fn shell_quoting() {
        for (text, quoted) in [
            ("/tmp/kern-demo-a1/greet", "/tmp/kern-demo-a1/greet"),
            ("/tmp/my dir/x", "'/tmp/my dir/x'"),
            ("it's", r"'it'\''s'"),
            ("", "''"),
        ] {
            assert_eq!(crate::text::shell_quote(text), quoted, "{text}");
        }
    }

    #[test]
    fn build_makes_a_repository_with_one_commit_and_a_working_wrapper() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        build(&layout, Path::new("/opt/my kern/kern")).unwrap();
        assert_eq!(
            log_oneline(&layout.repo).unwrap()[0][8..],
            *"Start the greet project"
        );
        let repo = git2::Repository::open(&layout.repo).unwrap();
        let me = repo.signature().unwrap();
        assert_eq!(
            (me.name().ok(), me.email().ok()),
            (Some("kern demo"), Some("demo@kern.invalid"))
        );
        assert_eq!(
            repo.head().unwrap().shorthand().ok(),
            Some(BRANCH),
            "the state folder path printed depends on it"
        );
        let wrapper = std::fs::read_to_string(layout.wrapper()).unwrap();
        assert_eq!(
            wrapper,
            format!(
                "#!/bin/sh\nexec '/opt/my kern/kern' scripted-agent {}/scenario.json\n",
                layout.agent.display()
            )
        );
    }

    #[test]
    fn demo_settings_keep_output_choices_and_replace_the_rest() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "kern",
            "-q",
            "--color",
            "never",
            "--check",
            "false",
            "--max-cost",
            "1",
            "--model",
            "opus",
        ])
        .unwrap();
        let person = Settings::resolve(&cli, "/".into(), Vec::new(), &|_| None).unwrap();
        let layout = Layout::new(Path::new("/tmp/kern-demo-x"));
        let s = demo_settings(&person, &layout);
        assert!(s.quiet);
        assert_eq!(s.color, crate::cli::ColorChoice::Never);
        assert_eq!((s.check, s.max_cost, s.model), (None, None, None));
        assert_eq!(s.delay, Duration::ZERO);
        assert_eq!(
            s.agent,
            Agent::Program(PathBuf::from("/tmp/kern-demo-x/agent/agent.sh"))
        );
        assert_eq!(s.state_root, PathBuf::from("/tmp/kern-demo-x/state"));
        assert!(s.no_verify);
    }
}
