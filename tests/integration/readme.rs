//! The README cannot drift: every command in its shell blocks is in the table below, and the
//! tests here run each one (or, for the cargo commands, check what they rely on). A command
//! added to the README that the table does not know fails `readme_commands_are_all_known`, so
//! a new command needs a test. The SPEC.md example must be valid, and every option in the
//! options table must exist with its environment variable.
//!
//! The jq recipes run against a real state folder (a run stopped with Ctrl-C during review, so
//! its stage files are kept) with the `jq` on PATH; CI installs it (`.ci/run`).

use crate::support::{kern_bin, kern_in, project, tools};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use project::{KernRun, Project, texts};
use serde_json::{Value, json};

/// The README alone (its first lines are the set-up commands).
const README_MD: &str = include_str!("../../README.md");

/// Every page a newcomer reads, the README first, then `docs/` as the README links it: their
/// commands and examples are tested as one text (`every_docs_page_is_read_here` keeps the list
/// whole).
const PAGES: &[(&str, &str)] = &[
    ("README.md", README_MD),
    (
        "docs/spec-format.md",
        include_str!("../../docs/spec-format.md"),
    ),
    ("docs/records.md", include_str!("../../docs/records.md")),
    ("docs/parallel.md", include_str!("../../docs/parallel.md")),
    ("docs/agents.md", include_str!("../../docs/agents.md")),
    (
        "docs/scripted-agent.md",
        include_str!("../../docs/scripted-agent.md"),
    ),
    ("docs/git.md", include_str!("../../docs/git.md")),
    ("docs/safety.md", include_str!("../../docs/safety.md")),
    ("docs/options.md", include_str!("../../docs/options.md")),
    ("docs/ci.md", include_str!("../../docs/ci.md")),
    ("docs/nights.md", include_str!("../../docs/nights.md")),
    ("docs/tracker.md", include_str!("../../docs/tracker.md")),
    (
        "docs/development.md",
        include_str!("../../docs/development.md"),
    ),
    (
        "docs/benchmarks.md",
        include_str!("../../docs/benchmarks.md"),
    ),
    (
        "docs/architecture.md",
        include_str!("../../docs/architecture.md"),
    ),
];

/// The pages of [`PAGES`] as one text.
static README: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    PAGES
        .iter()
        .map(|(_, text)| *text)
        .collect::<Vec<_>>()
        .join("\n")
});
const CARGO_TOML: &str = include_str!("../../Cargo.toml");

/// How each README command is covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `cargo run --release -- demo`: the built binary's `demo` (the same code path).
    Demo,
    /// `cargo test`: this run; only its place in the README is checked.
    CargoTest,
    /// `cargo test --test integration -- A B`: part of this run; each named module must exist.
    TestTargets,
    /// `cargo install --locked --path .`: not run; the package, its binary and the lock that
    /// lets it reuse the demo's build are checked.
    CargoInstall,
    /// `kern doctor`: run with a fake, logged-in `claude`.
    Doctor,
    /// The daily-use `kern` commands: run in order on a scratch project.
    Daily,
    /// The jq recipes: run in order on a real state folder.
    Jq,
    /// The recipes for after a run: run on the state folder a finished run left.
    JqAfter,
    /// The `git` commands on what kern set aside: run on a repository where it did.
    SavedRefs,
    /// The morning-after commands: run in order after a real run.
    Morning,
    /// The `--notify` recipes: run with fake `curl` and `notify-send` on PATH.
    Notify,
    /// The two-agent examples: run with a fake `codex` on PATH.
    TwoAgents,
    /// The parallel-task and review commands: run in order on a scratch project.
    Parallel,
    /// The many-machines commands: run in order on a clone of a bare remote.
    Remote,
    /// The watched, scheduled and timed nights: run in order on a scratch project.
    Nights,
    /// The tracker commands: run in order with a fake `gh` on PATH.
    Tracker,
    /// The recipes for a task tested first: run after one was committed.
    TestsFirst,
    /// The usage-window recipes: run after a task whose agent reported its window.
    Windows,
    /// The benchmark commands (minutes each, never part of `cargo test`): the scripts exist and
    /// are executable, the criterion bench is declared.
    Bench,
    /// The first night without an account (docs/scripted-agent.md): run in order on a project.
    ScriptedNight,
    /// The first night with Codex: run with a fake, logged-in `codex` on PATH.
    CodexNight,
}

/// Every command the README may show, exactly as written (trailing comment removed).
const KNOWN: &[(&str, How)] = &[
    ("cargo run --release -- demo", How::Demo),
    ("cargo test", How::CargoTest),
    (
        "cargo test --test integration -- real_agent real_claude real_codex real_two_agents",
        How::TestTargets,
    ),
    ("cargo install --locked --path .", How::CargoInstall),
    ("kern doctor", How::Doctor),
    ("kern init", How::Daily),
    ("kern -n", How::Daily),
    ("kern 10 30", How::Daily),
    ("kern status", How::Daily),
    ("kern", How::Daily),
    ("d=\"$(kern status --dir)\"", How::Jq),
    ("jq .result \"$d/stage2.json\"", How::Jq),
    ("jq .kern.outcome \"$d/stage2.json\"", How::Jq),
    ("jq '.total_cost_usd' \"$d\"/stage[123].json", How::Jq),
    (
        "jq '.permission_denials[].tool_input' \"$d/stage1.json\"",
        How::Jq,
    ),
    ("jq .kern.sandbox \"$d/stage2.json\"", How::Jq),
    (
        "jq -c 'select(.event == \"commit\")' \"$d/run.jsonl\"",
        How::Jq,
    ),
    (
        "jq -c 'select(.event == \"denied\")' \"$d/run.jsonl\"",
        How::Jq,
    ),
    (
        "jq .result \"$(kern status --dir)/last/stage2.json\"",
        How::JqAfter,
    ),
    ("ls \"$(kern status --dir)/runs/\"", How::JqAfter),
    ("git for-each-ref refs/kern", How::SavedRefs),
    (
        "git show refs/kern/attempts/add-the-parser/1",
        How::SavedRefs,
    ),
    ("kern report", How::Morning),
    ("kern report --since 12h --markdown", How::Morning),
    ("kern report --html night.html", How::Morning),
    ("kern 10 30 --detach", How::Morning),
    ("kern log -f", How::Morning),
    (
        "kern 10 30 --notify 'jq -r .text | curl -s -d @- ntfy.sh/my-kern-night'",
        How::Notify,
    ),
    (
        "kern 10 30 --notify 'jq -c \"{text: .text}\" | curl -s -H \"Content-Type: application/json\" -d @- \"$SLACK_WEBHOOK_URL\"'",
        How::Notify,
    ),
    (
        "kern 10 30 --notify 'notify-send \"kern: $KERN_EVENT\" \"$(jq -r .text)\"'",
        How::Notify,
    ),
    ("kern 10 30 -j 3", How::Parallel),
    ("kern -n -j 3", How::Parallel),
    ("kern 10 30 -j 2 --review", How::Parallel),
    (
        "kern reject \"Split the HTTP client\" --reason \"keep the retry logic in one place\"",
        How::Parallel,
    ),
    ("kern accept", How::Parallel),
    ("kern watch 10 30", How::Nights),
    ("kern 20 30 --until 07:00", How::Nights),
    (
        "kern schedule --at 23:00 --until 07:00 -- 20 30 --check 'cargo test'",
        How::Nights,
    ),
    ("kern schedule --list", How::Nights),
    ("kern schedule --remove", How::Nights),
    ("kern 20 0 --remote origin", How::Remote),
    ("kern status --remote", How::Remote),
    ("kern release \"Add the parser\"", How::Remote),
    ("kern doctor --agent codex", How::CodexNight),
    ("kern 10 30 --agent codex", How::CodexNight),
    ("kern import github --label kern -n", How::Tracker),
    ("kern import github --label kern", How::Tracker),
    ("kern 10 30 --tracker github", How::Tracker),
    ("kern 10 30 --fallback-agent codex", How::TwoAgents),
    ("kern 10 30 --review-agent codex", How::TwoAgents),
    (
        "jq -c 'select(.event == \"agent_switch\")' \"$(kern status --dir)/run.jsonl\"",
        How::TwoAgents,
    ),
    ("benches/run", How::Bench),
    ("BENCH_RUNS=20 benches/run", How::Bench),
    ("BENCH_ONLY=\"iteration large\" benches/run", How::Bench),
    ("BENCH_BASELINE=/path/to/old/kern benches/run", How::Bench),
    ("cargo bench --bench spec", How::Bench),
    ("benches/parallel", How::Bench),
    ("KERN_BEFORE=/path/to/old/kern benches/phantom", How::Bench),
    (
        "jq .kern.tests_first \"$(kern status --dir)/last/stage2.json\"",
        How::TestsFirst,
    ),
    (
        "jq -c 'select(.event == \"tests_red\" or .event == \"tests_green\")' \"$(kern status --dir)/run.jsonl\"",
        How::TestsFirst,
    ),
    (
        "jq .kern.window \"$(kern status --dir)/last/stage2.json\"",
        How::Windows,
    ),
    (
        "jq -c 'select(.event == \"stage_end\") | [.task, .stage, .window]' \"$(kern status --dir)/run.jsonl\"",
        How::Windows,
    ),
    (
        "jq -c 'select(.event == \"paced\" or .event == \"resumed\")' \"$(kern status --dir)/run.jsonl\"",
        How::Windows,
    ),
    ("KERN_BEFORE=/path/to/old/kern benches/cost", How::Bench),
    ("benches/remote", How::Bench),
    ("benches/fence", How::Bench),
    (
        r"printf '#!/bin/sh\nexec kern scripted-agent .kern/scenario.json\n' > .kern/agent.sh",
        How::ScriptedNight,
    ),
    ("chmod +x .kern/agent.sh", How::ScriptedNight),
    (
        "git add .kern && git commit -m \"A scripted agent for a night without an account\"",
        How::ScriptedNight,
    ),
    (
        "kern doctor --agent program:.kern/agent.sh",
        How::ScriptedNight,
    ),
    ("kern -n --agent program:.kern/agent.sh", How::ScriptedNight),
    (
        "kern 10 30 --agent program:.kern/agent.sh",
        How::ScriptedNight,
    ),
];

/// The commands of every shell block (```sh, ```shell, ```console), block by block. A ```bash
/// or ```python block is a script (an agent program), run whole by its own test.
fn shell_blocks(markdown: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(info)) => {
                if ["sh", "shell", "console"].contains(&info.trim()) {
                    current = Some(Vec::new());
                } else {
                    // Another language: skip to its closing fence.
                    current = None;
                }
            }
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some(commands), None) => {
                let command = strip_comment(line);
                if !command.is_empty() {
                    commands.push(command);
                }
            }
            (None, None) => {}
        }
    }
    blocks
}

/// The line without a trailing `# comment` (a `#` after whitespace, outside quotes), trimmed.
fn strip_comment(line: &str) -> String {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => {
                return line[..i].trim().to_string();
            }
            _ => {}
        }
        previous = c;
    }
    line.trim().to_string()
}

/// The README's commands covered by `how`, in README order.
fn commands(how: How) -> Vec<String> {
    shell_blocks(&README)
        .into_iter()
        .flatten()
        .filter(|c| KNOWN.iter().any(|(k, h)| k == c && *h == how))
        .collect()
}

/// A block in another language would hide commands from this test: only these are allowed.
fn fenced_languages(markdown: &str) -> Vec<String> {
    let mut inside = false;
    let mut languages = Vec::new();
    for line in markdown.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if !inside {
                languages.push(info.trim().to_string());
            }
            inside = !inside;
        }
    }
    languages
}

#[test]
fn readme_commands_are_all_known() {
    let all: Vec<String> = shell_blocks(&README).into_iter().flatten().collect();
    let unknown: Vec<&String> = all
        .iter()
        .filter(|c| !KNOWN.iter().any(|(k, _)| k == c))
        .collect();
    assert!(
        unknown.is_empty(),
        "README.md shows commands no test runs: {unknown:?} — add each to KNOWN in tests/integration/readme.rs with a test that runs it"
    );
    let stale: Vec<&str> = KNOWN
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !all.iter().any(|c| c == k))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN lists commands the README no longer shows: {stale:?}"
    );
    for language in fenced_languages(&README) {
        assert!(
            [
                "sh", "markdown", "toml", "json", "bash", "python", "yaml", ""
            ]
            .contains(&language.as_str()),
            "a ```{language} block: use ```sh for commands (this test reads those) or extend the test"
        );
    }
}

/// The Codex provider the README shows is one `kern doctor` reads as it says: a custom
/// provider at its `base_url` that needs no login.
#[test]
fn the_readmes_codex_provider_is_what_doctor_reads() {
    let block = README
        .split("```toml\n")
        .skip(1)
        .map(|rest| &rest[..rest.find("```").expect("its closing fence")])
        .find(|b| b.contains("[model_providers"))
        .expect("the Codex config.toml example");
    let provider = kern::testing::agent::codex_provider::provider(Some(block));
    assert_eq!(
        provider,
        Ok(kern::testing::agent::codex_provider::CodexProvider {
            id: "local".into(),
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            credential: kern::testing::agent::codex_provider::Credential::Nothing,
        })
    );
}

#[test]
fn every_docs_page_is_read_here() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        {
            assert!(
                PAGES.iter().any(|(page, _)| *page == name),
                "{name} is not in PAGES: its commands would go untested"
            );
        }
    }
    for (page, _) in PAGES.iter().skip(1) {
        let name = &page["docs/".len()..];
        let linked = PAGES.iter().any(|(other, text)| {
            other != page
                && (text.contains(&format!("]({page}")) || text.contains(&format!("]({name}")))
        });
        assert!(linked, "{page} is linked from no other page");
    }
}

#[test]
fn the_first_commands_are_the_demo_and_the_tests() {
    let first_heading = README_MD.find("\n## ").unwrap();
    let first_block = README_MD.find("```sh").unwrap();
    assert!(
        first_block < first_heading,
        "the two commands come before any section"
    );
    assert_eq!(
        shell_blocks(README_MD)[0],
        ["cargo run --release -- demo", "cargo test"],
        "`cargo test` is this very run; the demo is run by `demo_runs_offline_and_commits`"
    );
    assert_eq!(commands(How::CargoTest), ["cargo test"]);
}

#[test]
fn test_targets_named_in_the_readme_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let commands = commands(How::TestTargets);
    assert!(!commands.is_empty());
    for command in commands {
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(words[..2], ["cargo", "test"], "{command}");
        assert_eq!(words[2], "--test", "{command}");
        let target = root.join("tests").join(words[3]).join("main.rs");
        assert!(
            target.is_file(),
            "`{command}` names a test binary that does not exist: {}",
            target.display()
        );
        assert_eq!(words.get(4), Some(&"--"), "{command}");
        for module in &words[5..] {
            let file = root
                .join("tests")
                .join(words[3])
                .join(format!("{module}.rs"));
            assert!(
                file.is_file(),
                "`{command}` names a test module that does not exist: {}",
                file.display()
            );
        }
    }
}

#[test]
fn cargo_install_path_installs_a_binary_named_kern() {
    // `--locked`: without it cargo resolves the dependencies anew, to newer versions than
    // Cargo.lock's, and compiles every one a second time after the demo's build.
    assert_eq!(
        commands(How::CargoInstall),
        ["cargo install --locked --path ."]
    );
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.lock")
            .is_file()
    );
    let package = CARGO_TOML
        .split("\n[")
        .next()
        .expect("the [package] table comes first");
    assert!(package.starts_with("[package]\n"), "{package}");
    assert!(package.contains("\nname = \"kern\"\n"), "{package}");
    assert!(package.contains("\ndefault-run = \"kern\"\n"), "{package}");
    assert!(
        !CARGO_TOML.contains("[[bin]]"),
        "the only binary is the default one, src/main.rs, named after the package"
    );
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/main.rs")
            .is_file()
    );
    assert_eq!(kern_bin().file_name().unwrap(), "kern");
}

/// `kern demo` with no git identity, no claude on PATH, no KERN_* settings, no colour.
fn demo(args: &[&str]) -> (Option<i32>, String) {
    let home = tempfile::tempdir().unwrap();
    let identity = std::env::vars()
        .map(|(key, _)| key)
        .filter(|key| key.starts_with("GIT_AUTHOR") || key.starts_with("GIT_COMMITTER"));
    let ran = kern_in(home.path())
        .args(["demo"])
        .args(args)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PATH", "/usr/bin:/bin")
        .env_remove(identity)
        .env_remove(["KERN_STATE_DIR"])
        .any_exit();
    (ran.code, ran.stderr)
}

/// The value after `label` on the line that starts with it.
fn after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no `{label}` line in:\n{text}"))
        .trim()
}

/// The lines under `heading` up to the next empty line.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn demo_runs_offline_and_commits() {
    assert_eq!(commands(How::Demo), ["cargo run --release -- demo"]);
    let (code, err) = demo(&[]);
    assert_eq!(code, Some(0), "{err}");
    let repo = PathBuf::from(after(&err, "repository: "));
    let log = section(&err, "git log --oneline:");
    let subjects: Vec<&str> = log.iter().map(|l| &l.trim()[8..]).collect();
    assert_eq!(
        subjects,
        [
            "README.md: document the usage",
            "test.sh: check every greeting",
            "greet.sh: --lang de greets in German",
            "greet.sh: --lang fr greets in French",
            "greet.sh: greet a person by name",
            "Start the greet project"
        ],
        "{err}"
    );
    assert!(err.contains("run ended: nothing left to do"), "{err}");
    let spec: Vec<&str> = section(&err, "SPEC.md now:");
    assert!(spec.iter().any(|l| l.contains("- [x] Add German")), "{err}");
    assert!(
        !spec.iter().any(|l| l.contains("[ ]") || l.contains("[~]")),
        "{err}"
    );
    assert!(
        !repo.parent().unwrap().exists(),
        "without --keep the demo removes its folder: {}",
        repo.display()
    );
}

#[test]
fn demo_keep_keeps_everything_and_its_recipes_work() {
    let (code, err) = demo(&["--keep"]);
    assert_eq!(code, Some(0), "{err}");
    let root = PathBuf::from(after(&err, "kept: "));
    let repo = root.join("greet");
    let check = || -> Result<(), String> {
        let spec = std::fs::read_to_string(repo.join("SPEC.md")).map_err(|e| e.to_string())?;
        let doc = kern::testing::spec::Document::parse(&spec);
        let states: Vec<_> = doc
            .tasks()
            .iter()
            .map(|t| (t.title.clone(), t.state))
            .collect();
        if states.len() != 6
            || states
                .iter()
                .any(|(_, s)| *s != kern::testing::spec::TaskState::Done)
        {
            return Err(format!("not every task is done: {states:?}"));
        }
        let git = git2::Repository::open(&repo).map_err(|e| e.to_string())?;
        let mut walk = git.revwalk().map_err(|e| e.to_string())?;
        walk.push_head().map_err(|e| e.to_string())?;
        if walk.count() != 6 {
            return Err("expected 6 commits".into());
        }
        if !git.statuses(None).map_err(|e| e.to_string())?.is_empty() {
            return Err("the work tree is not clean".into());
        }
        let test = Command::new("sh")
            .arg("test.sh")
            .current_dir(&repo)
            .output()
            .map_err(|e| e.to_string())?;
        if test.stdout != b"ok\n" {
            return Err(format!(
                "test.sh: {}",
                String::from_utf8_lossy(&test.stdout)
            ));
        }
        // Every command the demo says to try works on what it kept.
        let tries = section(&err, "try:");
        if tries.len() != 3 {
            return Err(format!("three recipes expected: {tries:?}"));
        }
        for line in tries {
            let out = Command::new("sh")
                .args(["-c", line.trim()])
                .output()
                .map_err(|e| e.to_string())?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || stdout.trim().is_empty() {
                return Err(format!(
                    "`{line}` failed: {stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            if line.contains("\"commit\"") && stdout.lines().count() != 5 {
                return Err(format!("five commits in run.jsonl expected: {stdout}"));
            }
        }
        Ok(())
    };
    let result = check();
    std::fs::remove_dir_all(&root).unwrap();
    result.unwrap();
}

/// A `claude` that is installed and logged in, alone on PATH with the system tools.
fn fake_claude(dir: &Path) -> String {
    let path = dir.join("claude");
    std::fs::write(
        &path,
        "#!/bin/sh\ncase \"$*\" in\n  --version) echo '2.1.197 (Claude Code)' ;;\n  'auth status') echo '{\"loggedIn\": true, \"authMethod\": \"claude.ai\"}' ;;\n  *) exit 2 ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", dir.display())
}

#[test]
fn kern_doctor_passes_in_a_ready_project() {
    assert_eq!(commands(How::Doctor), ["kern doctor"]);
    let p = Project::new("- [ ] One\n");
    let bin = tempfile::tempdir().unwrap();
    let out = p
        .run(&["doctor"])
        .env("KERN_AGENT", "claude")
        .env("PATH", fake_claude(bin.path()))
        .expect(0);
    let err = &out.stderr;
    assert_eq!(
        err.lines().filter(|l| l.starts_with("✓ ")).count(),
        17,
        "{err}"
    );
    assert!(err.contains("✓ sandbox: kern's fence works here"), "{err}");
}

/// Runs a README `kern …` command (split on spaces, as the shell would) in the project.
/// Runs a README command: its exit code and stderr.
fn run_kern(p: &Project, command: &str) -> (Option<i32>, String) {
    let (code, _, err) = run_kern_report(p, command);
    (code, err)
}

/// Runs a README command: its exit code, stdout (a report) and stderr.
fn run_kern_report(p: &Project, command: &str) -> (Option<i32>, String, String) {
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let out = p.run(&[]).args(&args).any_exit();
    (out.code, out.stdout, out.stderr)
}

#[test]
fn daily_use_commands_run_in_order() {
    let daily = commands(How::Daily);
    assert_eq!(
        daily,
        ["kern init", "kern -n", "kern 10 30", "kern status", "kern"],
        "the order below follows the README's"
    );
    let p = Project::new("unused\n");
    p.scenario(&json!({"default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}}}));
    std::fs::remove_file(p.path().join("SPEC.md")).unwrap();
    p.commit_all("no SPEC.md yet");
    let before = p.log().len();
    for command in &daily {
        match command.as_str() {
            "kern init" => {
                let (code, err) = run_kern(&p, command);
                assert_eq!(code, Some(0), "{err}");
                assert!(p.read("SPEC.md").contains("- [ ] "));
                assert!(p.path().join("LEARNINGS.md").is_file());
                let (code, err) = run_kern(&p, command);
                assert_eq!(code, Some(2), "never overwrites: {err}");
                assert!(err.contains("SPEC.md"), "{err}");
            }
            "kern -n" => {
                let spec = p.read("SPEC.md");
                let (code, report, err) = run_kern_report(&p, command);
                assert_eq!(code, Some(0), "{err}");
                assert!(
                    report.contains(
                        "Nothing to do: replace the example tasks in SPEC.md with your own"
                    ),
                    "the starter's examples are never taken, and -n says what to do: {report}"
                );
                assert_eq!(p.read("SPEC.md"), spec, "changes nothing");
                assert!(!p.state_root().exists(), "writes no state folder");
            }
            "kern 10 30" => {
                // One task: the 30 s delay only applies while work is left.
                p.write("SPEC.md", "- [ ] Say hello\n");
                let (code, err) = run_kern(&p, command);
                assert_eq!(code, Some(0), "{err}");
                assert!(p.read("SPEC.md").starts_with("- [x] Say hello\n"));
                assert_eq!(p.log().len(), before + 1, "{err}");
                assert!(!err.contains("next iteration in"), "no sleep: {err}");
            }
            "kern status" => {
                let (code, report, err) = run_kern_report(&p, command);
                assert_eq!(code, Some(0), "{err}");
                assert!(
                    report.contains("tasks:     0 pending, 0 in progress, 1 done, 0 blocked"),
                    "{report}"
                );
            }
            "kern" => {
                let mut spec = p.read("SPEC.md");
                spec.push_str("- [ ] Say goodbye\n");
                p.write("SPEC.md", &spec);
                let (code, err) = run_kern(&p, command);
                assert_eq!(code, Some(0), "{err}");
                let spec = p.read("SPEC.md");
                assert!(spec.contains("- [x] Say goodbye\n"), "{spec}");
                assert!(!spec.contains("[ ]"), "{spec}");
                assert_eq!(p.log().len(), before + 2, "{err}");
            }
            other => panic!("no step for the README command `{other}`"),
        }
    }
}

#[test]
fn the_spec_example_is_valid() {
    let start = README.find("```markdown\n").expect("the SPEC.md example") + "```markdown\n".len();
    let end = start + README[start..].find("```\n").unwrap();
    let p = Project::new(&README[start..end]);
    let out = p.run(&["status", "--json"]).expect(0);
    let stdout = &out.stdout;
    let status: Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(
        status["counts"],
        json!({"pending": 4, "in_progress": 1, "done": 1, "blocked": 1}),
        "{stdout}"
    );
    assert_eq!(status["next"]["title"], "Add a `--json` flag to `list`");
    assert!(
        status["next"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("it is in progress"),
        "{stdout}"
    );
}

/// The rows of the options table under `heading` in `text` (`| \`--flag\` | … |`): each row's
/// cells, trimmed, and its long option.
fn option_rows<'t>(text: &'t str, heading: &str) -> Vec<(Vec<&'t str>, &'t str)> {
    let table = text
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{heading}` section"))
        .split("\n## ")
        .next()
        .unwrap_or_default();
    table
        .lines()
        .filter(|l| l.starts_with("| `-"))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let long = cells[1]
                .trim_matches('`')
                .split([',', ' '])
                .find(|w| w.starts_with("--"))
                .unwrap_or_else(|| panic!("no long option in `{row}`"));
            (cells, long)
        })
        .collect()
}

#[test]
fn every_option_in_the_table_exists_with_its_variable_and_default() {
    let dir = tempfile::tempdir().unwrap();
    let ran = kern_in(dir.path()).args(["--help"]).expect(0);
    let help = ran.utf8_stdout();
    let mut seen = 0;
    for (cells, long) in option_rows(&README, "## Options") {
        let (variable, default) = (cells[2], cells[3]);
        assert!(help.contains(long), "`{long}` is not in `kern --help`");
        let variable = variable.trim_matches('`');
        if !variable.is_empty() {
            assert!(
                help.contains(variable),
                "`{variable}` ({long}) is not in `kern --help`"
            );
        }
        let default = default.trim_matches('`');
        if !["", "none", "off", "from templates"].contains(&default) {
            let block = help.split(long).nth(1).unwrap();
            let block = &block[..block.find("\n  -").unwrap_or(block.len())];
            assert!(
                block.contains(&format!("[default: {default}]")),
                "{long}: the README says default {default}; --help says:{block}"
            );
        }
        seen += 1;
    }
    assert!(seen >= 19, "the options table was not read: {seen} rows");
}

#[test]
fn every_option_of_kern_import_github_in_its_table_exists_with_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let ran = kern_in(dir.path()).args(["import", "--help"]).expect(0);
    let help = ran.utf8_stdout();
    let mut seen = 0;
    for (cells, long) in option_rows(&README, "## Options of `kern import github`") {
        let default = cells[2].trim_matches('`');
        let block = help
            .split(&format!("{long} "))
            .nth(1)
            .or_else(|| help.split(&format!("{long}\n")).nth(1))
            .unwrap_or_else(|| panic!("`{long}` is not in `kern import --help`:\n{help}"));
        let block = &block[..block.find("\n  -").unwrap_or(block.len())];
        if default.parse::<u32>().is_ok() {
            assert!(
                block.contains(&format!("[default: {default}]")),
                "{long}: the table says default {default}; --help says:{block}"
            );
        }
        seen += 1;
    }
    assert_eq!(seen, 7, "the import's options table was not read");
}

/// Runs a README shell recipe (`set -e` first) through `run` (the project's environment, the
/// kern under test first on PATH): whether it succeeded, its stdout and its stderr.
fn run_recipe(run: KernRun<'_>, script: &str) -> (bool, String, String) {
    let ran = run.shell(&format!("set -e\n{script}\n")).any_exit();
    (ran.code == Some(0), ran.stdout, ran.stderr)
}

#[test]
fn the_records_recipes_work_after_the_run_has_ended() {
    if !tools::system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    let p = Project::new("- [ ] First\n");
    p.run(&["1", "0"]).expect(0);
    let recipes = commands(How::JqAfter);
    assert_eq!(recipes.len(), 2, "{recipes:?}");
    for recipe in &recipes {
        let (ok, stdout, stderr) = run_recipe(p.run(&[]), recipe);
        assert!(ok, "`{recipe}` failed: {stderr}");
        if recipe.starts_with("jq") {
            assert!(stdout.contains("did First"), "{stdout}");
        } else {
            assert_eq!(stdout.lines().count(), 1, "one run: {stdout}");
        }
    }
}

#[test]
fn the_tests_first_recipes_show_red_then_green() {
    if !tools::system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    let p = Project::new("- [ ] First\n  > **Tests:** first sh tests/first_test.sh\n");
    p.scenario(&json!({"default": {
        "tests": {"write": {"tests/first_test.sh": "test -f out/first.txt || { echo 'FAIL: no out/first.txt'; exit 1; }\n"}},
        "implement": {"write": {"out/first.txt": "done\n"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    let recipes = commands(How::TestsFirst);
    assert_eq!(recipes.len(), 2, "{recipes:?}");
    let (ok, stdout, stderr) = run_recipe(p.run(&[]), &recipes[0]);
    assert!(ok, "`{}` failed: {stderr}", recipes[0]);
    let record: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(record["command"], "sh tests/first_test.sh");
    assert_eq!(record["red"], "FAIL: no out/first.txt");
    assert_eq!(record["passed"], true);
    let (ok, stdout, stderr) = run_recipe(p.run(&[]), &recipes[1]);
    assert!(ok, "`{}` failed: {stderr}", recipes[1]);
    let events: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(events, ["tests_red", "tests_green"]);
}

#[test]
fn the_window_recipes_show_each_stages_use_and_the_pauses() {
    if !tools::system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    let p = Project::new("- [ ] First\n");
    let usage = |used: f64, secs: u64| json!({"utilization": used, "window": "five_hour", "resets_in_secs": secs});
    p.scenario(&json!({"default": {
        "research": {"usage": usage(0.85, 8)},
        "implement": {"write": {"out/first.txt": "done\n"}, "usage": usage(0.05, 5 * 3600)}
    }}));
    p.run(&["1", "0", "--pace=80", "--reset-margin=0s"])
        .expect(0);
    let recipes = commands(How::Windows);
    assert_eq!(recipes.len(), 3, "{recipes:?}");
    let out = |recipe: &str| {
        let (ok, stdout, stderr) = run_recipe(p.run(&[]), recipe);
        assert!(ok, "`{recipe}` failed: {stderr}");
        stdout
    };
    let window: Value = serde_json::from_str(&out(&recipes[0])).unwrap();
    assert_eq!(window[0]["kind"], "five_hour");
    assert_eq!(window[0]["used_after"], 5.0);
    let stages: Vec<Value> = out(&recipes[1])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stages.len(), 3, "{stages:?}");
    assert_eq!(stages[0][2][0]["used_after"], 85.0);
    let paused: Vec<Value> = out(&recipes[2])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        paused
            .iter()
            .map(|e| e["event"].clone())
            .collect::<Vec<_>>(),
        [json!("paced"), json!("resumed")]
    );
}

#[test]
fn jq_recipes_work_on_a_real_state_folder() {
    if !tools::system_tool("jq", "jq", "KERN_SKIP_JQ") {
        return;
    }
    // One task committed, the next stopped with Ctrl-C during review: stage files kept.
    let p = Project::new("- [ ] First\n- [ ] Second\n");
    p.scenario(&json!({
        "default": {"implement": {"write": {"out/{slug}.txt": "done\n"}}},
        "tasks": [
            // Inside kern's fence: refused, and named in run.jsonl.
            {"match": "First", "implement": {
                "write": {"out/{slug}.txt": "done\n"},
                "shell": ["echo x > /etc/kern-readme-recipe 2>/dev/null || true"]
            }},
            {"match": "Second", "commit": {"sleep_before_ms": 120_000}}
        ]
    }));
    let mut run = p.run(&["2", "0"]).spawn_with(Stdio::null(), Stdio::null());
    // The scripted agent logs each call before it sleeps: the second review is running.
    let deadline = Instant::now() + Duration::from_secs(60);
    let calls = p.outside.path().join("scenario.calls.jsonl");
    let reviews = || {
        // Read while the agent appends: a line still being written does not parse yet.
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|c| c["stage"] == "commit")
            .count()
    };
    while reviews() < 2 {
        assert!(Instant::now() < deadline, "the second review never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(130));

    let recipes = commands(How::Jq);
    assert_eq!(
        recipes[0], "d=\"$(kern status --dir)\"",
        "the recipes start by setting $d"
    );
    let d = p.state_dir().display().to_string();
    for recipe in &recipes[1..] {
        let (ok, stdout, stderr) = run_recipe(p.run(&[]), &format!("{}\n{recipe}", recipes[0]));
        assert!(ok, "`{recipe}` in `{d}` failed: {stderr}");
        let lines: Vec<&str> = stdout.lines().collect();
        match recipe.as_str() {
            "jq .result \"$d/stage2.json\"" => {
                assert_eq!(
                    lines,
                    ["\"{\\\"status\\\":\\\"SUCCESS\\\",\\\"summary\\\":\\\"did Second\\\"}\""]
                );
            }
            "jq .kern.outcome \"$d/stage2.json\"" => assert_eq!(lines, ["\"succeeded\""]),
            "jq '.total_cost_usd' \"$d\"/stage[123].json" => {
                // Research and implement of the interrupted task, and its interrupted review.
                assert_eq!(lines, ["0.01", "0.01", "0"], "{stdout}");
            }
            "jq '.permission_denials[].tool_input' \"$d/stage1.json\"" => {
                // The scripted agent is refused nothing; exit 0 proves the array is there
                // (`[]` on a missing key fails: "Cannot iterate over null").
                assert_eq!(lines, Vec::<&str>::new());
            }
            "jq -c 'select(.event == \"commit\")' \"$d/run.jsonl\"" => {
                assert_eq!(lines.len(), 1, "{stdout}");
                let commit: Value = serde_json::from_str(lines[0]).unwrap();
                assert_eq!(commit["task"], "First");
            }
            "jq .kern.sandbox \"$d/stage2.json\"" => {
                let fence: Value = serde_json::from_str(&stdout).unwrap();
                assert_eq!(
                    (&fence["mode"], &fence["network"]),
                    (&json!("kern"), &json!("list"))
                );
                assert_eq!(
                    fence["denied"],
                    json!([]),
                    "Second's implement tried nothing"
                );
            }
            "jq -c 'select(.event == \"denied\")' \"$d/run.jsonl\"" => {
                assert_eq!(lines.len(), 1, "{stdout}");
                let denied: Value = serde_json::from_str(lines[0]).unwrap();
                assert_eq!(
                    (&denied["task"], &denied["by"]),
                    (&json!("First"), &json!("implement"))
                );
                assert_eq!(
                    denied["denied"][0]["target"], "/etc/kern-readme-recipe",
                    "{stdout}"
                );
            }
            other => panic!("no expectation for the README recipe `{other}`"),
        }
    }
}

/// The `kern …` commands written inline in the prose, e.g. `kern init --prompts`.
fn inline_kern_commands(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut inside_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            inside_fence = !inside_fence;
            continue;
        }
        if inside_fence {
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && (span == "kern" || span.starts_with("kern ")) {
                commands.push(span.to_string());
            }
        }
    }
    commands
}

#[test]
fn inline_kern_commands_parse_with_the_real_command_line() {
    use clap::Parser;
    let commands = inline_kern_commands(&README);
    assert!(
        commands.contains(&"kern demo --keep".to_string()),
        "{commands:?}"
    );
    for command in &commands {
        // In a pipeline (`kern status | grep next`) the kern part must parse.
        let kern_part = command.split('|').next().unwrap_or(command);
        let words: Vec<&str> = kern_part.split_whitespace().collect();
        if let Err(e) = kern::cli::Cli::try_parse_from(&words) {
            // `kern help status` is read before clap's verdict, as kern reads it.
            let args: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
            if !matches!(
                kern::cli::word_for_count(&e, &args),
                Some(kern::cli::WordForCount::Help(_))
            ) {
                panic!("README.md shows `{command}`, which kern rejects: {e}");
            }
        }
    }
}

#[test]
fn comments_and_quotes() {
    for (line, command) in [
        ("kern 10 30         # up to 10 tasks", "kern 10 30"),
        (
            "jq -c 'select(.a == \"#x\")' f  # c",
            "jq -c 'select(.a == \"#x\")' f",
        ),
        ("echo a#b", "echo a#b"),
        ("   ", ""),
    ] {
        assert_eq!(strip_comment(line), command);
    }
    let blocks = shell_blocks(
        "```sh\na # x\n\nb\n```\n```markdown\n- [ ] c\n```\n```console\nd\n```\n```bash\ne\n```\n",
    );
    assert_eq!(
        blocks,
        [vec!["a", "b"], vec!["d"]],
        "a bash block is a script"
    );
}

#[test]
fn the_saved_refs_recipes_show_what_kern_set_aside() {
    let commands = commands(How::SavedRefs);
    assert_eq!(commands.len(), 2, "{commands:?}");
    let p = Project::new("- [ ] Add the parser\n");
    p.scenario(&json!({"default": {
        "implement": {"write": {"src/parser.rs": "fn parse() {}\n"},
                      "result": {"status": "SKIPPED", "summary": "the grammar is not settled"}}
    }}));
    p.run(&["1", "0"]).expect(0);
    let mut outputs = Vec::new();
    for command in &commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(p.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {}", texts(&out).1);
        outputs.push(texts(&out).0);
    }
    assert!(
        outputs[0].contains("refs/kern/attempts/add-the-parser/1"),
        "{}",
        outputs[0]
    );
    assert!(outputs[1].contains("+fn parse() {}"), "{}", outputs[1]);
}

/// The bodies of the fenced blocks of `language` in `markdown`.
fn code_blocks(markdown: &str, language: &str) -> Vec<String> {
    markdown
        .split(&format!("```{language}\n"))
        .skip(1)
        .map(|rest| rest[..rest.find("\n```").map_or(rest.len(), |i| i + 1)].to_string())
        .collect()
}

#[test]
fn the_program_agent_examples_in_two_languages_commit_a_task() {
    let page = PAGES
        .iter()
        .find(|(page, _)| *page == "docs/agents.md")
        .unwrap()
        .1;
    for language in ["bash", "python"] {
        let blocks = code_blocks(page, language);
        assert_eq!(blocks.len(), 1, "one {language} example");
        let p = Project::new("- [ ] Write the first note\n");
        let agent = p.outside.path().join(format!("agent-{language}"));
        std::fs::write(&agent, &blocks[0]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = p
            .run(&[])
            .env("KERN_AGENT", format!("program:{}", agent.display()))
            .args(["1", "0"])
            .expect(0);
        let err = &out.stderr;
        assert_eq!(p.log()[0], "Write the first note", "{language}: {err}");
        assert_eq!(p.read("notes.txt"), "Write the first note\n", "{language}");
    }
}

#[test]
fn the_benchmark_commands_name_what_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for command in commands(How::Bench) {
        if command == "cargo bench --bench spec" {
            assert!(
                CARGO_TOML.contains("[[bench]]\nname = \"spec\""),
                "{command}"
            );
            continue;
        }
        let script = command.split_whitespace().last().unwrap();
        let mode = std::fs::metadata(root.join(script))
            .unwrap_or_else(|e| panic!("{command}: {e}"))
            .permissions();
        use std::os::unix::fs::PermissionsExt;
        assert!(mode.mode() & 0o111 != 0, "{command}: not executable");
    }
}

#[test]
fn the_morning_after_commands_run_in_order() {
    let mut morning = commands(How::Morning);
    // The README shows `kern report` as the last step of a first night; docs/records.md again.
    let mut seen = std::collections::HashSet::new();
    morning.retain(|c| seen.insert(c.clone()));
    assert_eq!(morning.len(), 5, "{morning:?}");
    let p = Project::new("- [ ] Say hello\n- [ ] Say goodbye\n");
    p.run(&["1", "0"]).expect(0);
    for command in &morning {
        match command.as_str() {
            "kern report" | "kern report --since 12h --markdown" => {
                let words: Vec<&str> = command.split(' ').skip(1).collect();
                let out = p.run(&[]).args(&words).expect(0);
                let stdout = &out.stdout;
                assert!(
                    stdout.contains("Finished — 1 iteration ran: 1 committed"),
                    "{stdout}"
                );
            }
            "kern report --html night.html" => {
                let (code, err) = run_kern(&p, command);
                assert_eq!(code, Some(0), "{err}");
                assert!(p.read("night.html").starts_with("<!DOCTYPE html>"));
                std::fs::remove_file(p.path().join("night.html")).unwrap();
            }
            "kern 10 30 --detach" => {
                let out = p.run(&["10", "30", "--detach"]).expect(0);
                let stdout = &out.stdout;
                assert!(stdout.trim().parse::<u32>().is_ok(), "the pid: {stdout}");
            }
            "kern log -f" => {
                let out = p.run(&["log", "-f"]).expect(0);
                let stdout = &out.stdout;
                assert!(stdout.contains(" kern: [1/10] Say goodbye\n"), "{stdout}");
                assert!(
                    stdout.contains(" kern: run ended: nothing left to do\n"),
                    "{stdout}"
                );
            }
            other => panic!("no step for the README command `{other}`"),
        }
    }
    assert_eq!(p.log(), vec!["Say goodbye", "Say hello", "initial"]);
}

#[test]
fn the_notify_recipes_send_the_events_text() {
    let recipes = commands(How::Notify);
    assert_eq!(recipes.len(), 3, "{recipes:?}");
    let p = Project::new("- [ ] Say hello\n");
    let bin = p.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sent = p.outside.path().join("sent");
    for fake in ["curl", "notify-send"] {
        let path = bin.join(fake);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n{{ echo \"{fake} $*\"; [ \"{fake}\" = curl ] && cat; echo; }} >> '{}'\n",
                sent.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (i, recipe) in recipes.iter().enumerate() {
        let notify = recipe
            .strip_prefix("kern 10 30 --notify '")
            .and_then(|r| r.strip_suffix('\''))
            .unwrap_or_else(|| panic!("{recipe}"));
        let _ = std::fs::remove_file(&sent);
        p.write("SPEC.md", &format!("- [ ] Say hello {i}\n"));
        p.commit_all("next task");
        p.run(&[])
            .env("PATH", &path)
            .env("SLACK_WEBHOOK_URL", "https://hooks.example.invalid/x")
            .args(["10", "0", "--notify", notify])
            .expect(0);
        let sent = std::fs::read_to_string(&sent).unwrap_or_default();
        let headline = "Finished — nothing left to do: 1 committed.";
        match i {
            0 => assert_eq!(
                sent,
                format!("curl -s -d @- ntfy.sh/my-kern-night\n{headline}\n\n")
            ),
            1 => assert_eq!(
                sent,
                format!(
                    "curl -s -H Content-Type: application/json -d @- https://hooks.example.invalid/x\n{{\"text\":\"{headline}\"}}\n\n"
                )
            ),
            _ => assert_eq!(sent, format!("notify-send kern: run_ended {headline}\n\n")),
        }
    }
}

/// A fake `codex` in a new `bin` folder of `p`: it answers each stage (told by its schema
/// file, `stage<N>.schema.json`) with a canned Codex stream carrying that stage's report; in
/// implement it writes `codex.txt` first. Returns the folder.
fn fake_codex(p: &Project) -> PathBuf {
    let bin = p.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let reports = [
        json!({"notes": ["read by codex"], "skip_reason": null, "skip_kind": null}),
        json!({"status": "SUCCESS", "summary": "codex wrote codex.txt", "attempt_note": null,
               "subtasks": null, "learnings": null, "no_change_reason": null}),
        json!({"verdict": "COMMIT", "subject": "Reviewed by codex", "body": null,
               "reason": null, "learnings": null}),
    ];
    let mut cases = String::new();
    for (n, report) in reports.iter().enumerate() {
        let events = [
            json!({"type": "thread.started", "thread_id": "t-1"}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                "text": report.to_string()}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}}),
        ];
        let file = p.outside.path().join(format!("codex-stage{}.jsonl", n + 1));
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(&file, text).unwrap();
        cases.push_str(&format!(
            "    */stage{}.schema.json) out='{}' ;;\n",
            n + 1,
            file.display()
        ));
    }
    let script = format!(
        "#!/bin/sh\nout=''\nfor a in \"$@\"; do\n  case \"$a\" in\n{cases}  esac\ndone\ncat > /dev/null\ncase \"$out\" in *stage2*) echo 'by codex' > codex.txt ;; esac\ncat \"$out\"\n"
    );
    // What `kern doctor` asks: the version, and the login (on stderr, as codex-cli 0.169.0).
    let script = script.replacen(
        "#!/bin/sh\n",
        "#!/bin/sh\ncase \"$*\" in\n  --version) echo 'codex-cli 0.169.0'; exit 0 ;;\n  'login status') echo 'Logged in using ChatGPT' >&2; exit 0 ;;\nesac\n",
        1,
    );
    let path = bin.join("codex");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn two_agent_examples_run_as_the_readme_says() {
    let examples = commands(How::TwoAgents);
    assert_eq!(examples.len(), 3, "{examples:?}");
    for example in &examples {
        let p = Project::new("- [ ] Say hello\n");
        let bin = fake_codex(&p);
        match example.as_str() {
            "kern 10 30 --fallback-agent codex" => {
                // The main agent is at its usage limit for an hour: Codex does the task.
                p.scenario(&json!({"default": {"research": {"error": "usage_limit", "resets_in_secs": 3600}}}));
                let args: Vec<&str> = example.split_whitespace().skip(1).collect();
                p.run(&[]).args(&args).path_first(&bin).expect(0);
                assert_eq!(p.log()[0], "Reviewed by codex");
                assert!(p.head_files().contains(&"codex.txt".to_string()));
                // The jq recipe lists the moves.
                let recipe = &examples[2];
                let (ok, stdout, stderr) = run_recipe(p.run(&[]).path_first(&bin), recipe);
                assert!(ok, "`{recipe}`: {stderr}");
                let moves: Vec<Value> = stdout
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                assert_eq!(moves.len(), 3, "{stdout}");
                assert!(moves.iter().all(|m| m["to"] == "codex"), "{stdout}");
            }
            "kern 10 30 --review-agent codex" => {
                p.scenario(&json!({"default": {"implement": {"write": {"hello.txt": "hello\n"}}}}));
                let args: Vec<&str> = example.split_whitespace().skip(1).collect();
                p.run(&[]).args(&args).path_first(&bin).expect(0);
                assert_eq!(p.log()[0], "Reviewed by codex");
                assert!(
                    p.prompts("commit").is_empty(),
                    "the main agent did not review"
                );
                assert_eq!(p.prompts("implement").len(), 1);
            }
            recipe if recipe.starts_with("jq ") => {}
            other => panic!("no step for the README command `{other}`"),
        }
    }
}

#[test]
fn the_parallel_and_review_commands_run_as_the_readme_says() {
    let steps = commands(How::Parallel);
    assert_eq!(steps.len(), 5, "{steps:?}");
    let p = Project::new("- [ ] One\n- [ ] Two\n- [ ] Three\n");
    // As a shell runs it: the quoted titles are one word each.
    let run = |step: &str| {
        let ran = p.shell(step).expect(0);
        format!("{}{}", ran.stdout, ran.stderr)
    };
    for step in &steps {
        let said = run(step);
        match step.as_str() {
            "kern 10 30 -j 3" => {
                assert_eq!(p.log().len(), 4, "{:?}", p.log());
                assert!(said.contains("[Two] "), "{said}");
                // The review's tasks, for the steps that follow.
                p.write(
                    "SPEC.md",
                    &format!(
                        "{}- [ ] Add the parser\n- [ ] Split the HTTP client\n",
                        p.read("SPEC.md")
                    ),
                );
                p.commit_all("two more tasks");
            }
            "kern -n -j 3" => assert!(
                said.contains(
                    "would run together (-j 3): `Add the parser`, `Split the HTTP client`"
                ),
                "{said}"
            ),
            "kern 10 30 -j 2 --review" => {
                assert_eq!(p.log()[0], "two more tasks");
                assert!(p.read("SPEC.md").contains("`kern/add-the-parser`"));
            }
            s if s.starts_with("kern reject") => {
                let spec = p.read("SPEC.md");
                assert!(spec.contains("- [ ] Split the HTTP client"), "{spec}");
                assert!(spec.contains("keep the retry logic in one place"), "{spec}");
            }
            "kern accept" => {
                assert_eq!(p.log()[0], "Add the parser");
                assert_eq!(p.read("out/add-the-parser.txt"), "done Add the parser\n");
            }
            other => panic!("no step for the README command `{other}`"),
        }
    }
}

#[test]
fn the_nights_commands_run_as_the_docs_say() {
    let steps = commands(How::Nights);
    assert_eq!(steps.len(), 5, "{steps:?}");
    let p = Project::new("- [ ] Add the parser\n");
    // `kern schedule` with a home of its own, and fakes of the schedulers' commands first on
    // PATH: whichever scheduler this machine has, nothing of the person's is touched.
    let home = p.outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut bin = PathBuf::new();
    for name in ["systemctl", "launchctl"] {
        bin = crate::support::fakes::fake(&p, name, "#!/bin/sh\nexit 0\n");
    }
    let shell = |step: &str| {
        let ran = p
            .shell(step)
            .path_first(&bin)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .expect(0);
        format!("{}{}", ran.stdout, ran.stderr)
    };
    for step in &steps {
        let words: Vec<&str> = step.split_whitespace().skip(1).collect();
        match step.as_str() {
            s if s.starts_with("kern schedule --at") => {
                let said = shell(s);
                assert!(
                    said.contains(" watch --until 07:00 20 30 --check"),
                    "{said}"
                );
            }
            "kern schedule --list" => {
                shell(step);
            }
            "kern schedule --remove" => {
                shell(step);
                let left: Vec<_> = walk(&home);
                assert!(left.is_empty(), "{left:?}");
            }
            "kern watch 10 30" => {
                p.run(&words)
                    .expect(0)
                    .stderr_has("[watch] started the run (pid ");
                assert_eq!(p.log()[0], "Add the parser");
                let watch: Value = serde_json::from_slice(
                    &std::fs::read(p.state_dir().join("watch.json")).unwrap(),
                )
                .unwrap();
                assert_eq!(watch["ended"]["exit_code"], 0, "{watch}");
            }
            "kern 20 30 --until 07:00" => {
                // A night that ends by 07:00, started in a time zone where it is about 19:00
                // now, so the stages fit (each may take its hour); it ends when nothing is left.
                p.write(
                    "SPEC.md",
                    &format!("{}- [ ] Write the docs\n", p.read("SPEC.md")),
                );
                p.commit_all("one more task");
                let hour = (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    / 3600
                    % 24) as i64;
                let east = (19 - hour + 36) % 24 - 12;
                p.run(&words).env("TZ", format!("KRN{}", -east)).expect(0);
                assert_eq!(p.log()[0], "Write the docs");
            }
            other => panic!("no step for the README command `{other}`"),
        }
    }
}

/// Every file under `dir`, however deep.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// A bare remote holding `spec` (made from a fresh project) and a clone of it at `clone`.
fn remote_and_clone(spec: &str, clone: &Path) -> (Project, PathBuf) {
    let seed = Project::new(spec);
    let remote = seed.outside.path().join("remote.git");
    let git = |dir: &Path, args: &[&str]| {
        crate::support::during::git_in(dir, args);
    };
    git(
        seed.outside.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            &seed.path().display().to_string(),
            "remote.git",
        ],
    );
    git(
        seed.outside.path(),
        &[
            "clone",
            "--quiet",
            &remote.display().to_string(),
            &clone.display().to_string(),
        ],
    );
    git(clone, &["config", "user.name", "Test Person"]);
    git(clone, &["config", "user.email", "test@example.com"]);
    (seed, remote)
}

/// `sh -c STEP` in `dir` as the seed's kern would run there, the built kern first on PATH.
fn shell_step(
    seed: &Project,
    dir: &Path,
    step: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let ran = seed
        .shell(step)
        .envs(env.iter().copied())
        .current_dir(dir)
        .any_exit();
    (ran.code, ran.stdout, ran.stderr)
}

#[test]
fn the_many_machines_commands_run_as_the_docs_say() {
    let steps = commands(How::Remote);
    assert_eq!(steps.len(), 5, "{steps:?}");
    let place = tempfile::tempdir().unwrap();
    let clone = place.path().join("machine");
    let (seed, remote) = remote_and_clone("- [ ] Add the parser\n- [ ] Write the docs\n", &clone);
    let state = seed
        .outside
        .path()
        .join("state-machine")
        .display()
        .to_string();
    let env = [("KERN_STATE_DIR", state.as_str())];
    let log = || {
        let out = Command::new("git")
            .args(["log", "--format=%s", "master"])
            .current_dir(&remote)
            .output()
            .unwrap();
        texts(&out).0
    };
    for step in &steps {
        if step.starts_with("kern release") {
            // A claim to free: one a machine holds.
            let (code, out, err) = shell_step(
                &seed,
                &clone,
                "kern claim add-the-parser --remote origin",
                &env,
            );
            assert_eq!((code, out.as_str()), (Some(0), "claimed\n"), "{err}");
        }
        let (code, stdout, stderr) = shell_step(&seed, &clone, step, &env);
        assert_eq!(code, Some(0), "`{step}`: {stderr}");
        match step.as_str() {
            "kern 20 0 --remote origin" => {
                assert_eq!(log(), "Write the docs\nAdd the parser\ninitial\n");
            }
            "kern status --remote" => {
                assert_eq!(stdout, "claims on `origin` (refs/kern/claims/):\n  none\n");
            }
            s if s.starts_with("kern release") => {
                assert!(
                    stderr.contains("released `refs/kern/claims/add-the-parser` on `origin`"),
                    "{stderr}"
                );
                let (_, listed, _) = shell_step(&seed, &clone, "kern status --remote", &env);
                assert!(listed.ends_with("  none\n"), "{listed}");
            }
            other => panic!("no step for the docs' command `{other}`"),
        }
    }
}

#[test]
fn the_tracker_commands_run_as_the_docs_say() {
    let steps = commands(How::Tracker);
    assert_eq!(steps.len(), 3, "{steps:?}");
    let p = Project::new("- [ ] Mine\n");
    let (bin, log) = crate::support::fakes::fake_gh(&p);
    for step in &steps {
        if step.contains("--tracker") {
            // One task, so that the 30 s pause never comes: nothing is left after it.
            p.write(
                "SPEC.md",
                "- [ ] Add a dark mode\n  > **Issue:** acme/app#12\n",
            );
            p.commit_all("one task from an issue");
        }
        let before = p.read("SPEC.md");
        let (ok, _, stderr) = run_recipe(p.run(&[]).path_first(&bin), step);
        assert!(ok, "`{step}` failed: {stderr}");
        if step.ends_with(" -n") {
            assert_eq!(p.read("SPEC.md"), before);
            assert!(stderr.contains("4 new tasks would come in"), "{stderr}");
        } else if step.contains("--tracker") {
            let log = crate::support::during::git_in(p.path(), &["log", "-1", "--format=%B"]);
            assert!(log.ends_with("\n\nCloses acme/app#12\n\n"), "{log:?}");
        } else {
            assert!(
                stderr.contains("imported 4 issues into SPEC.md"),
                "{stderr}"
            );
            assert!(p.read("SPEC.md").contains("> **Issue:** acme/app#12"));
        }
    }
    // The two imports asked for the label; the night commented on the issue it took.
    let calls: Vec<String> = crate::support::fakes::gh_calls(&log)
        .iter()
        .map(|(args, _)| args.join(" "))
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls[..2].iter().all(|c| c.ends_with("--label kern")),
        "{calls:?}"
    );
    assert!(calls[2].starts_with("issue comment 12 "), "{calls:?}");
}

/// The shell loop of docs/ci.md, with an `ssh` that runs the command on a "machine": a clone
/// of its own (its HOME holds `project`) with a state folder of its own.
#[test]
fn the_shell_loop_on_n_machines_lands_every_task_once() {
    let page = PAGES
        .iter()
        .find(|(page, _)| *page == "docs/ci.md")
        .unwrap()
        .1;
    let blocks = code_blocks(page, "bash");
    assert_eq!(blocks.len(), 1, "one shell loop");
    let place = tempfile::tempdir().unwrap();
    let hosts: Vec<&str> = blocks[0]
        .split("for host in ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(hosts, ["build-1", "build-2", "build-3"]);
    let spec: String = (1..=6).map(|i| format!("- [ ] Task {i}\n")).collect();
    let first = place.path().join(hosts[0]).join("project");
    std::fs::create_dir_all(first.parent().unwrap()).unwrap();
    let (seed, remote) = remote_and_clone(&spec, &first);
    for host in &hosts[1..] {
        let dir = place.path().join(host);
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("git")
            .args(["clone", "--quiet", &remote.display().to_string(), "project"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success());
        for (k, v) in [
            ("user.name", "Test Person"),
            ("user.email", "test@example.com"),
        ] {
            Command::new("git")
                .args(["config", k, v])
                .current_dir(dir.join("project"))
                .status()
                .unwrap();
        }
    }
    let bin = seed.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\nhost=$1; shift\nHOME='{0}'/$host KERN_STATE_DIR='{0}'/$host/state exec sh -c \"$*\"\n",
            place.path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = seed.outside.path().join("loop.sh");
    std::fs::write(&script, &blocks[0]).unwrap();
    let stderr = seed
        .shell(r#"sh "$1""#)
        .args([script.display().to_string()])
        .path_first(&bin)
        .current_dir(place.path())
        .expect(0)
        .stderr;
    let log = Command::new("git")
        .args(["log", "--format=%s", "master"])
        .current_dir(&remote)
        .output()
        .unwrap();
    let log = texts(&log).0;
    for i in 1..=6 {
        assert_eq!(
            log.lines().filter(|l| *l == format!("Task {i}")).count(),
            1,
            "{log}\n{stderr}"
        );
    }
}

/// docs/scripted-agent.md's first night without an account, step by step on a project: the
/// scenario its JSON block shows, then each command of its shell blocks in order.
#[test]
fn the_first_night_without_an_account_runs_as_its_page_says() {
    let steps = commands(How::ScriptedNight);
    assert_eq!(steps.len(), 6, "{steps:?}");
    let page = PAGES
        .iter()
        .find(|(name, _)| *name == "docs/scripted-agent.md")
        .unwrap()
        .1;
    let section = page
        .split("# A first night without an account\n")
        .nth(1)
        .and_then(|rest| rest.split("\n# ").next())
        .expect("the section");
    let scenario = section
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the scenario's JSON block");
    let p = Project::new("# Tasks\n\n- [ ] Add the greeting\n");
    p.write(".kern/scenario.json", scenario.trim());
    for step in &steps {
        let (code, stdout, stderr) = shell_step(&p, p.path(), step, &[]);
        assert_eq!(code, Some(0), "`{step}`:\n{stdout}\n{stderr}");
    }
    assert_eq!(p.log()[0], "Add the greeting");
    assert_eq!(
        p.read("notes/add-the-greeting.md"),
        "# Add the greeting\n\nDone by the scripted agent.\n"
    );
    assert!(p.read("SPEC.md").contains("- [x] Add the greeting"));
    assert!(p.dirty().is_empty(), "{:?}", p.dirty());
    assert!(
        p.state_dir()
            .join("scripted-agent/scenario.counts.json")
            .is_file()
    );
}

/// The README's first night with Codex: the doctor passes with a logged-in `codex`, and the
/// night runs every stage on it.
#[test]
fn the_first_night_with_codex_runs_as_the_readme_says() {
    let steps = commands(How::CodexNight);
    assert_eq!(
        steps,
        ["kern doctor --agent codex", "kern 10 30 --agent codex"]
    );
    let p = Project::new("- [ ] Say hello\n");
    let bin = fake_codex(&p);
    let home = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for step in &steps {
        let args: Vec<&str> = step.split_whitespace().skip(1).collect();
        let ran = p
            .run(&[])
            .args(&args)
            .env("PATH", &path)
            .env("CODEX_HOME", home.path())
            .env_remove(["CODEX_API_KEY", "OPENAI_API_KEY"])
            .expect(0);
        if step.contains("doctor") {
            ran.stderr_has("✓ agent: `codex` codex-cli 0.169.0");
        }
    }
    assert_eq!(p.log()[0], "Reviewed by codex");
    assert!(p.head_files().contains(&"codex.txt".to_string()));
    assert!(
        p.prompts("research").is_empty(),
        "the scripted agent ran no stage"
    );
}

#[test]
fn the_license_cargo_toml_names_is_there() {
    assert!(CARGO_TOML.contains("\nlicense = \"MIT\"\n"), "{CARGO_TOML}");
    let license = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("LICENSE"))
        .expect("the LICENSE file Cargo.toml's `license` names");
    assert!(
        license.starts_with("MIT License\n\nCopyright (c) "),
        "{license}"
    );
    assert!(
        license
            .lines()
            .nth(2)
            .unwrap()
            .ends_with(" the kern authors"),
        "{license}"
    );
    assert!(license.contains("THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND"));
    assert!(README_MD.contains("[LICENSE](LICENSE)"));
}

/// Where completions come from is said, and what it names works.
#[test]
fn the_readme_says_where_completions_come_from() {
    assert!(README_MD.contains("`kern completions bash`"), "{README_MD}");
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let named = README_MD.contains(&format!("`{shell}`"))
            || README_MD.contains(&format!("`kern completions {shell}`"));
        assert!(named, "the README names {shell}");
        let ran = kern_in(dir.path()).args(["completions", shell]).expect(0);
        assert!(!ran.utf8_stdout().is_empty(), "{shell}");
    }
}

/// The `tEXt` chunk `key` of a PNG file.
fn png_text(png: &[u8], key: &str) -> Option<String> {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let mut at = 8;
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        let body = &png[at + 8..at + 8 + len];
        if kind == b"tEXt"
            && let Some(text) = body.strip_prefix(format!("{key}\0").as_bytes())
        {
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        at += 12 + len;
    }
    None
}

/// The README's screenshot is of the demo as it is: its `Comment` names the models the page
/// shows (written when it was taken), and they are the models the demo's report names now.
#[test]
fn the_readmes_screenshot_shows_the_models_the_demo_prints() {
    let png = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/morning-report.png"))
        .unwrap();
    let comment = png_text(&png, "Comment").expect("the screenshot says what it shows");
    let shown: Vec<&str> = comment
        .split("models: ")
        .nth(1)
        .expect("the models it shows")
        .split(", ")
        .collect();
    let (code, err) = demo(&["--keep"]);
    assert_eq!(code, Some(0), "{err}");
    let root = PathBuf::from(after(&err, "kept: "));
    let report = kern_in(&root.join("greet"))
        .args(["report", "--json"])
        .env("KERN_STATE_DIR", root.join("state"))
        .expect(0);
    std::fs::remove_dir_all(&root).unwrap();
    let report: Value = serde_json::from_str(&report.stdout).unwrap();
    let mut printed: Vec<String> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["tasks"].as_array().unwrap())
        .flat_map(|t| t["stages"].as_array().unwrap())
        .map(|s| s["model"].as_str().unwrap_or("").to_string())
        .collect();
    printed.sort();
    printed.dedup();
    assert_eq!(
        printed, shown,
        "retake docs/morning-report.png from `kern demo --keep`'s report --html"
    );
}
