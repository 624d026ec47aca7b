//! The real-agent tier: the real `claude` CLI (pinned by `.ci/install-claude`), driven by the
//! scripted mock model API of `support/mock_model_api.rs` on 127.0.0.1, run exactly with kern's
//! argv (DESIGN.md section 4) in a temporary git repository with a throw-away HOME.
//!
//! These tests prove the tier's machinery and pin down the CLI behaviours kern relies on: tools
//! really run, `--json-schema` yields `structured_output`, the read-only and no-commit policies
//! hold, and API errors surface as kern's classifier expects. The one decision a reader must
//! know: the tier installs the pinned CLI itself (`.ci/install-claude`, once per process, npm
//! into a cache outside the repository), and a CLI that cannot be installed FAILS these tests
//! with the installer's message unless `KERN_SKIP_REAL_CLAUDE=1` says to skip them; a silently
//! skipped tier would prove nothing. The installer itself is tested here too, with a fake npm.
//!
//! The runs are serialised (one CLI at a time): each is a 245 MB native process and the
//! printed timings are only meaningful without contention. No network is needed.

use crate::support::mock_model_api;
use crate::support::tools;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kern::testing::stage::Stage;
use mock_model_api::{
    Answer, CLAUDE_ENV_REMOVE, MockModelApi, Rule, Script, Turn, claude_executable,
    installer_script, run_installer, strict_report,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// The longest any one CLI run may take before it is killed (the 401 scenario with default
/// retries is stopped long before, at its first `api_retry` event).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// One real CLI at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The CLI to run, or `None` when `KERN_SKIP_REAL_CLAUDE=1` asks to skip; panics with the fix
/// when it is missing.
fn claude_or_skip(test: &str) -> Option<PathBuf> {
    if std::env::var("KERN_SKIP_REAL_CLAUDE").is_ok_and(|v| v == "1") {
        eprintln!("skipping {test}: KERN_SKIP_REAL_CLAUDE=1");
        return None;
    }
    match claude_executable() {
        Ok(bin) => Some(bin),
        Err(message) => panic!("{message}"),
    }
}

/// kern's argv for the research stage (DESIGN.md section 4).
fn research_args() -> Vec<String> {
    let mut args = common_args();
    args.extend([
        "--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch".to_string(),
        "--allowedTools=WebSearch,WebFetch".to_string(),
        format!("--json-schema={}", Stage::Research.schema()),
    ]);
    args
}

/// kern's argv for the implement stage, deny rules included.
fn implement_args() -> Vec<String> {
    let mut args = implement_args_without_deny_rules();
    args.insert(
        args.len() - 1,
        "--disallowedTools=Bash(git commit *),Bash(git * commit *),Bash(git push *),\
         Bash(git push),Bash(git * push *),Bash(git * push)"
            .to_string(),
    );
    args
}

/// The implement argv minus the deny rules: the control that shows the deny rules matter.
fn implement_args_without_deny_rules() -> Vec<String> {
    let mut args = common_args();
    args.extend([
        "--tools=default".to_string(),
        "--allowedTools=Bash,Edit,Write,NotebookEdit,Read,Grep,Glob".to_string(),
        format!("--json-schema={}", Stage::Implement.schema()),
    ]);
    args
}

fn common_args() -> Vec<String> {
    [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "sonnet",
        "--no-session-persistence",
        "--permission-mode",
        "dontAsk",
    ]
    .map(str::to_string)
    .to_vec()
}

/// A temporary git repository (one commit holding `README.md` = `a\n`, a local identity so
/// that a commit the policy fails to stop would really succeed) and a throw-away HOME.
struct Sandbox {
    repo: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let repo = tempfile::tempdir().expect("temp repo");
        let home = tempfile::tempdir().expect("temp home");
        let git = git2::Repository::init(repo.path()).expect("git init");
        let mut config = git.config().expect("repo config");
        config.set_str("user.name", "Test").expect("user.name");
        config
            .set_str("user.email", "test@example.com")
            .expect("user.email");
        std::fs::write(repo.path().join("README.md"), "a\n").expect("write README.md");
        let mut index = git.index().expect("index");
        index
            .add_path(Path::new("README.md"))
            .expect("add README.md");
        index.write().expect("write index");
        let tree = git
            .find_tree(index.write_tree().expect("tree"))
            .expect("find tree");
        let signature = git.signature().expect("signature");
        git.commit(Some("HEAD"), &signature, &signature, "init", &tree, &[])
            .expect("initial commit");
        Sandbox { repo, home }
    }

    /// The repository's path, canonical: the CLI's tools want absolute paths.
    fn path(&self) -> PathBuf {
        self.repo
            .path()
            .canonicalize()
            .expect("canonical repo path")
    }

    fn head(&self) -> git2::Oid {
        let git = git2::Repository::open(self.repo.path()).expect("open repo");
        git.head().expect("HEAD").target().expect("HEAD target")
    }

    /// `git status` as (path, status bits), untracked files included.
    fn status(&self) -> Vec<(String, u32)> {
        let git = git2::Repository::open(self.repo.path()).expect("open repo");
        let mut options = git2::StatusOptions::new();
        options.include_untracked(true).recurse_untracked_dirs(true);
        let statuses = git.statuses(Some(&mut options)).expect("statuses");
        statuses
            .iter()
            .map(|s| (s.path().unwrap_or("?").to_string(), s.status().bits()))
            .collect()
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.repo.path().join(name)).ok()
    }
}

/// What one CLI run produced.
struct Run {
    exit_code: Option<i32>,
    /// Each stdout line parsed, with the time since spawn at which it arrived.
    events: Vec<(Duration, Value)>,
    /// Each stdout line exactly as it arrived (for recording fixtures).
    lines: Vec<String>,
    stderr: String,
    elapsed: Duration,
    /// Set when the run was stopped by `stop_when` (as kern stops an agent early): how long
    /// after SIGTERM the CLI exited, or `None` when it needed SIGKILL.
    #[allow(
        clippy::option_option,
        reason = "not stopped, stopped and exited, stopped and killed"
    )]
    stopped: Option<Option<Duration>>,
}

impl Run {
    fn result(&self) -> &Value {
        self.events
            .iter()
            .map(|(_, event)| event)
            .rfind(|event| event["type"] == "result")
            .unwrap_or_else(|| panic!("no result event; {}", self.dump()))
    }

    fn first(&self, kind: &str, subtype: Option<&str>) -> Option<&(Duration, Value)> {
        self.events.iter().find(|(_, event)| {
            event["type"] == kind && subtype.is_none_or(|s| event["subtype"] == s)
        })
    }

    fn all(&self, kind: &str, subtype: Option<&str>) -> Vec<&Value> {
        self.events
            .iter()
            .map(|(_, event)| event)
            .filter(|event| event["type"] == kind && subtype.is_none_or(|s| event["subtype"] == s))
            .collect()
    }

    /// Every `tool_result` block the CLI fed back, in order.
    fn tool_results(&self) -> Vec<&Value> {
        self.all("user", None)
            .into_iter()
            .filter_map(|event| event["message"]["content"].as_array())
            .flatten()
            .filter(|block| block["type"] == "tool_result")
            .collect()
    }

    fn dump(&self) -> String {
        let lines: Vec<String> = self.events.iter().map(|(_, e)| e.to_string()).collect();
        format!(
            "exit {:?} after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.exit_code,
            self.elapsed,
            lines.join("\n"),
            self.stderr
        )
    }

    fn report_timing(&self, label: &str) {
        let at = |kind: &str, subtype: Option<&str>| {
            self.first(kind, subtype)
                .map_or("-".to_string(), |(t, _)| format!("{} ms", t.as_millis()))
        };
        let duration_ms = self
            .events
            .iter()
            .rfind(|(_, e)| e["type"] == "result")
            .map_or(Value::Null, |(_, e)| e["duration_ms"].clone());
        eprintln!(
            "timing {label}: init at {}, first api_retry at {}, result at {}, exit {:?} after {} \
             ms (result.duration_ms {duration_ms})",
            at("system", Some("init")),
            at("system", Some("api_retry")),
            at("result", None),
            self.exit_code,
            self.elapsed.as_millis()
        );
    }
}

/// Runs the CLI with `args` in `sandbox`, pointed at `mock`, the prompt on stdin (then
/// closed), in its own process group. `extra_env` is added last. The run is killed at
/// [`RUN_TIMEOUT`], and stopped (SIGTERM to the group, then SIGKILL) as soon as an event
/// satisfies `stop_when`.
fn run_claude(
    bin: &Path,
    args: &[String],
    mock: &MockModelApi,
    sandbox: &Sandbox,
    prompt: &str,
    extra_env: &[(&str, &str)],
    stop_when: impl Fn(&Value) -> bool,
) -> Run {
    let mut command = Command::new(bin);
    command
        .args(args)
        .current_dir(sandbox.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for name in CLAUDE_ENV_REMOVE {
        command.env_remove(name);
    }
    command.envs(mock.claude_env(sandbox.home.path()));
    command.envs(extra_env.iter().copied());

    let started = Instant::now();
    let mut child = command.spawn().expect("spawn claude");
    let pgid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits i32"));
    {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(prompt.as_bytes()).expect("write prompt");
    }
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (lines_tx, lines_rx) = mpsc::channel();
    let stdout_thread = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send((started.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    let stderr_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let deadline = started + RUN_TIMEOUT;
    let mut events = Vec::new();
    let mut lines = Vec::new();
    let mut stopped = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok((at, line)) => {
                let event: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({"type": "unparsed", "line": line}));
                let stop = stop_when(&event);
                events.push((at, event));
                lines.push(line);
                if stop {
                    stopped = Some(stop_group(pgid, &mut child));
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = killpg(pgid, Signal::SIGKILL);
                let _ = child.wait();
                panic!(
                    "claude ran past {RUN_TIMEOUT:?} and was killed; events so far:\n{}",
                    events
                        .iter()
                        .map(|(_, e): &(Duration, Value)| e.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
        }
    }
    let status = child.wait().expect("wait for claude");
    let elapsed = started.elapsed();
    // Lines that arrived between the stop and the exit are kept too.
    let _ = stdout_thread.join();
    for (at, line) in lines_rx.try_iter() {
        let event = serde_json::from_str(&line)
            .unwrap_or_else(|_| json!({"type": "unparsed", "line": line}));
        events.push((at, event));
        lines.push(line);
    }
    let stderr = stderr_thread.join().unwrap_or_default();
    Run {
        exit_code: status.code(),
        events,
        lines,
        stderr,
        elapsed,
        stopped,
    }
}

/// SIGTERM to the group, up to 2 s of grace, then SIGKILL: how kern stops an agent. Returns
/// how long the leader took to exit after SIGTERM, or `None` when SIGKILL was needed.
fn stop_group(pgid: Pid, child: &mut std::process::Child) -> Option<Duration> {
    let signalled = Instant::now();
    let _ = killpg(pgid, Signal::SIGTERM);
    let mut exited = None;
    for _ in 0..40 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            exited = Some(signalled.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The rest of the group (tool subprocesses) goes too, whatever the leader did.
    let _ = killpg(pgid, Signal::SIGKILL);
    exited
}

fn never(_: &Value) -> bool {
    false
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `permission_denials` of a result as (tool_name, tool_input) pairs.
fn denials(result: &Value) -> Vec<(String, Value)> {
    result["permission_denials"]
        .as_array()
        .expect("permission_denials is an array")
        .iter()
        .map(|d| {
            (
                d["tool_name"].as_str().unwrap_or_default().to_string(),
                d["tool_input"].clone(),
            )
        })
        .collect()
}

#[test]
fn implement_stage_writes_a_file_runs_bash_and_reports_success() {
    let Some(bin) = claude_or_skip("implement_stage_writes_a_file_runs_bash_and_reports_success")
    else {
        return;
    };
    let _serial = serial();
    let sandbox = Sandbox::new();
    let hello = sandbox.path().join("hello.txt");
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-IMPLEMENT-HELLO",
            vec![
                Turn::tool(
                    "Write",
                    json!({"file_path": hello.display().to_string(), "content": "hello from the mock\n"}),
                ),
                Turn::tool(
                    "Bash",
                    json!({"command": "cat hello.txt", "description": "show it"}),
                ),
                Turn::report(
                    Stage::Implement,
                    json!({"status": "SUCCESS", "summary": "wrote hello.txt"}),
                ),
            ],
        )],
    });

    let run = run_claude(
        &bin,
        &implement_args(),
        &mock,
        &sandbox,
        "TASK-IMPLEMENT-HELLO: create hello.txt\n",
        &[],
        never,
    );
    run.report_timing("implement success");

    assert_eq!(run.exit_code, Some(0), "{}", run.dump());
    assert_eq!(
        sandbox.read("hello.txt").as_deref(),
        Some("hello from the mock\n")
    );
    let result = run.result();
    assert_eq!(result["subtype"], "success", "{}", run.dump());
    assert_eq!(result["is_error"], false);
    assert_eq!(
        result["structured_output"],
        strict_report(
            Stage::Implement,
            json!({"status": "SUCCESS", "summary": "wrote hello.txt"})
        )
    );
    assert_eq!(result["num_turns"], 4);
    assert_eq!(denials(result), vec![]);
    assert!(
        result["total_cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{result}"
    );

    let tool_results = run.tool_results();
    assert_eq!(tool_results.len(), 3, "{}", run.dump());
    assert_eq!(tool_results[1]["content"], "hello from the mock");
    assert_eq!(tool_results[1]["is_error"], false);

    let scripted = mock.scripted_requests();
    let turns: Vec<usize> = scripted.iter().map(|r| r.assistant_turns).collect();
    assert_eq!(turns, vec![0, 1, 2]);
    assert!(
        scripted
            .iter()
            .all(|r| r.stream && r.path.ends_with(":streamRawPredict"))
    );
    assert!(
        scripted[0]
            .tool_names
            .iter()
            .any(|t| t == "StructuredOutput")
    );
    assert!(scripted[2].last_user_text.contains("hello from the mock"));
    let side: Vec<String> = mock
        .requests()
        .iter()
        .filter(|r| r.answer == Answer::Side)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    eprintln!("side requests: {side:?}");
}

#[test]
fn research_stage_cannot_write_or_edit_files() {
    let Some(bin) = claude_or_skip("research_stage_cannot_write_or_edit_files") else {
        return;
    };
    let _serial = serial();
    let sandbox = Sandbox::new();
    let x = sandbox.path().join("x.txt");
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-RESEARCH-READONLY",
            vec![
                Turn::tool(
                    "Write",
                    json!({"file_path": x.display().to_string(), "content": "x\n"}),
                ),
                Turn::tool(
                    "Bash",
                    json!({"command": "sed -i s/a/b/ README.md", "description": "edit"}),
                ),
                Turn::report(
                    Stage::Research,
                    json!({"notes": ["README.md holds a single line"]}),
                ),
            ],
        )],
    });

    let run = run_claude(
        &bin,
        &research_args(),
        &mock,
        &sandbox,
        "TASK-RESEARCH-READONLY: look around\n",
        &[],
        never,
    );
    run.report_timing("research read-only");

    assert_eq!(run.exit_code, Some(0), "{}", run.dump());
    assert_eq!(sandbox.read("x.txt"), None);
    assert_eq!(sandbox.read("README.md").as_deref(), Some("a\n"));
    assert_eq!(sandbox.status(), vec![]);
    let init = &run.first("system", Some("init")).expect("init event").1;
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!tools.contains(&"Write"), "{tools:?}");
    assert!(!tools.contains(&"Edit"), "{tools:?}");

    let result = run.result();
    assert_eq!(result["is_error"], false, "{}", run.dump());
    assert_eq!(
        result["structured_output"],
        strict_report(
            Stage::Research,
            json!({"notes": ["README.md holds a single line"]})
        )
    );
    // Write is not in --tools: the call fails inside the session, and is no permission denial.
    // The sed is a Bash call dontAsk refuses: a denial.
    assert_eq!(
        denials(result),
        vec![(
            "Bash".to_string(),
            json!({"command": "sed -i s/a/b/ README.md", "description": "edit"})
        )],
        "{}",
        run.dump()
    );
    let tool_results = run.tool_results();
    assert_eq!(tool_results.len(), 3, "{}", run.dump());
    // The wording changes between releases (2.1.197: "Write exists but is not enabled in this
    // context", 2.1.330: "Write is disabled for this session"); the meaning does not.
    let write_answer = tool_results[0]["content"].as_str().unwrap_or_default();
    assert!(
        write_answer.starts_with("<tool_use_error>Error: No such tool available: Write."),
        "{write_answer}"
    );
    assert_eq!(tool_results[0]["is_error"], true);
    let sed_answer = tool_results[1]["content"].as_str().unwrap_or_default();
    assert!(
        sed_answer.starts_with(
            "Permission to use Bash has been denied because Claude Code is running in don't ask \
             mode."
        ),
        "{sed_answer}"
    );
    assert_eq!(tool_results[1]["is_error"], true);
}

#[test]
fn implement_stage_cannot_commit() {
    let Some(bin) = claude_or_skip("implement_stage_cannot_commit") else {
        return;
    };
    let _serial = serial();
    let (run, sandbox, head_before) = commit_attempt(&bin, &implement_args());
    run.report_timing("implement git commit");

    assert_eq!(run.exit_code, Some(0), "{}", run.dump());
    assert_eq!(sandbox.head(), head_before, "HEAD moved: {}", run.dump());
    assert_eq!(sandbox.read("README.md").as_deref(), Some("a\nb\n"));
    let result = run.result();
    assert_eq!(result["structured_output"]["status"], "FAILED");
    let tool_results = run.tool_results();
    assert_eq!(
        tool_results[1]["content"],
        "Permission to use Bash with command git -C . commit -am x has been denied."
    );
    assert_eq!(tool_results[1]["is_error"], true);
    assert_eq!(
        denials(result),
        vec![(
            "Bash".to_string(),
            json!({"command": "git -C . commit -am x", "description": "commit"})
        )],
        "{}",
        run.dump()
    );
}

/// The control for `implement_stage_cannot_commit`: the same scenario without the deny rules
/// really commits, so that test fails if the deny rules stop working.
#[test]
fn implement_stage_commits_without_the_deny_rules() {
    let Some(bin) = claude_or_skip("implement_stage_commits_without_the_deny_rules") else {
        return;
    };
    let _serial = serial();
    let (run, sandbox, head_before) = commit_attempt(&bin, &implement_args_without_deny_rules());
    run.report_timing("implement git commit, no deny rules");

    assert_eq!(run.exit_code, Some(0), "{}", run.dump());
    assert_ne!(sandbox.head(), head_before, "{}", run.dump());
    assert_eq!(denials(run.result()), vec![]);
}

/// Appends to README.md through Bash, then runs `git -C . commit -am x`, then reports FAILED.
fn commit_attempt(bin: &Path, args: &[String]) -> (Run, Sandbox, git2::Oid) {
    let sandbox = Sandbox::new();
    let head_before = sandbox.head();
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-IMPLEMENT-COMMIT",
            vec![
                Turn::tool(
                    "Bash",
                    json!({"command": "printf 'b\\n' >> README.md", "description": "edit"}),
                ),
                Turn::tool(
                    "Bash",
                    json!({"command": "git -C . commit -am x", "description": "commit"}),
                ),
                Turn::report(
                    Stage::Implement,
                    json!({"status": "FAILED", "summary": "could not commit"}),
                ),
            ],
        )],
    });
    let run = run_claude(
        bin,
        args,
        &mock,
        &sandbox,
        "TASK-IMPLEMENT-COMMIT: change and commit\n",
        &[],
        never,
    );
    (run, sandbox, head_before)
}

#[test]
fn overloaded_529_is_an_error_result_and_a_second_run_succeeds() {
    let Some(bin) = claude_or_skip("overloaded_529_is_an_error_result_and_a_second_run_succeeds")
    else {
        return;
    };
    let _serial = serial();
    let sandbox = Sandbox::new();
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-OVERLOADED",
            vec![
                Turn::http_error(529, "overloaded_error", "Overloaded", 2),
                Turn::report(
                    Stage::Implement,
                    json!({"status": "SUCCESS", "summary": "done after 529"}),
                ),
            ],
        )],
    });
    let prompt = "TASK-OVERLOADED: do it\n";
    let retries = [("CLAUDE_CODE_MAX_RETRIES", "1")];

    let first = run_claude(
        &bin,
        &implement_args(),
        &mock,
        &sandbox,
        prompt,
        &retries,
        never,
    );
    first.report_timing("529 with CLAUDE_CODE_MAX_RETRIES=1");
    assert_eq!(first.exit_code, Some(1), "{}", first.dump());
    let result = first.result();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 529);
    assert!(
        result["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("API Error: 529 Overloaded.")),
        "{result}"
    );
    let retries_seen = first.all("system", Some("api_retry"));
    assert_eq!(retries_seen.len(), 1, "{}", first.dump());
    assert_eq!(retries_seen[0]["error_status"], 529);
    assert_eq!(retries_seen[0]["error"], "overloaded");
    assert_eq!(retries_seen[0]["max_retries"], 1);
    let errors: Vec<&Value> = first
        .all("assistant", None)
        .into_iter()
        .filter(|e| !e["error"].is_null())
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["error"], "server_error");
    let statuses: Vec<Answer> = mock
        .scripted_requests()
        .into_iter()
        .map(|r| r.answer)
        .collect();
    assert_eq!(
        statuses,
        vec![
            Answer::Error {
                rule: 0,
                turn: 0,
                status: 529
            },
            Answer::Error {
                rule: 0,
                turn: 0,
                status: 529
            },
        ]
    );

    let second = run_claude(
        &bin,
        &implement_args(),
        &mock,
        &sandbox,
        prompt,
        &retries,
        never,
    );
    second.report_timing("529 recovered");
    assert_eq!(second.exit_code, Some(0), "{}", second.dump());
    let result = second.result();
    assert_eq!(result["is_error"], false);
    assert_eq!(result["api_error_status"], Value::Null);
    assert_eq!(result["structured_output"]["summary"], "done after 529");
    assert_eq!(second.all("system", Some("api_retry")).len(), 0);
}

#[test]
fn unauthorized_401_is_an_authentication_failure() {
    let Some(bin) = claude_or_skip("unauthorized_401_is_an_authentication_failure") else {
        return;
    };
    let _serial = serial();
    let sandbox = Sandbox::new();
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-UNAUTHORIZED",
            vec![Turn::http_error(
                401,
                "authentication_error",
                "invalid x-api-key",
                u32::MAX,
            )],
        )],
    });
    let run = run_claude(
        &bin,
        &research_args(),
        &mock,
        &sandbox,
        "TASK-UNAUTHORIZED: anything\n",
        &[("CLAUDE_CODE_MAX_RETRIES", "1")],
        never,
    );
    run.report_timing("401 with CLAUDE_CODE_MAX_RETRIES=1");

    assert_eq!(run.exit_code, Some(1), "{}", run.dump());
    let retry = &run
        .first("system", Some("api_retry"))
        .expect("an api_retry event")
        .1;
    assert_eq!(retry["error_status"], 401);
    assert_eq!(retry["error"], "authentication_failed");
    let result = run.result();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 401);
    let errors: Vec<&Value> = run
        .all("assistant", None)
        .into_iter()
        .filter(|e| !e["error"].is_null())
        .collect();
    assert_eq!(errors.len(), 1, "{}", run.dump());
    assert_eq!(errors[0]["error"], "authentication_failed");
    assert_eq!(result["result"], "Not logged in · Please run /login");
}

/// With the CLI's default retries a 401 takes minutes to give up; kern stops it at the first
/// `api_retry` that says `authentication_failed`. This proves that event comes early.
#[test]
fn unauthorized_401_with_default_retries_is_decisive_at_the_first_api_retry() {
    let Some(bin) =
        claude_or_skip("unauthorized_401_with_default_retries_is_decisive_at_the_first_api_retry")
    else {
        return;
    };
    let _serial = serial();
    let sandbox = Sandbox::new();
    let mock = MockModelApi::start(Script {
        rules: vec![Rule::new(
            "TASK-UNAUTHORIZED",
            vec![Turn::http_error(
                401,
                "authentication_error",
                "invalid x-api-key",
                u32::MAX,
            )],
        )],
    });
    let run = run_claude(
        &bin,
        &research_args(),
        &mock,
        &sandbox,
        "TASK-UNAUTHORIZED: anything\n",
        &[],
        |event| {
            event["type"] == "system"
                && event["subtype"] == "api_retry"
                && event["error"] == "authentication_failed"
        },
    );
    run.report_timing("401 default retries, stopped at first api_retry");

    let stopped = run
        .stopped
        .unwrap_or_else(|| panic!("not stopped: {}", run.dump()));
    eprintln!("401 default retries: exited {stopped:?} after SIGTERM (None: needed SIGKILL)");
    let retry = &run
        .first("system", Some("api_retry"))
        .expect("an api_retry event")
        .1;
    // The CLI means to retry (2.1.197: ten times over minutes; 2.1.330: twice over about two
    // seconds), and its first retry already says why: that is where kern stops it.
    assert_eq!(retry["attempt"], 1);
    assert!(
        retry["max_retries"].as_u64().is_some_and(|n| n >= 1),
        "{retry}"
    );
    assert_eq!(retry["error_status"], 401);
    assert!(run.first("result", None).is_none(), "{}", run.dump());
}

/// A fake `npm` for the installer tests: logs each call's subcommand to `$FAKE_NPM_LOG`,
/// answers `view`, and on `install` (after a pause that widens the window two unserialised
/// installers would race in) writes a `node_modules/.bin/claude` under `--prefix` that reports
/// the requested version.
const FAKE_NPM: &str = r#"#!/bin/sh
echo "$1" >> "$FAKE_NPM_LOG"
case "$1" in
view) echo "${2##*@}"; exit 0 ;;
install) ;;
*) exit 1 ;;
esac
prefix=
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) prefix="$2"; shift ;;
    *@*) version="${1##*@}" ;;
    esac
    shift
done
sleep 0.3
mkdir -p "$prefix/node_modules/.bin"
printf '#!/bin/sh\necho "%s (Claude Code)"\n' "$version" > "$prefix/node_modules/.bin/claude"
chmod +x "$prefix/node_modules/.bin/claude"
"#;

/// A folder holding links to the few tools the installer needs besides npm, and `npm` itself
/// when `fake_npm` is given, to be used as the whole PATH.
fn installer_path(root: &Path, fake_npm: Option<&str>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["bash", "sh", "dirname", "mkdir", "flock", "chmod", "sleep"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(tool))
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("`{tool}` not found in /usr/bin or /bin"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    if let Some(script) = fake_npm {
        let npm = bin.join("npm");
        std::fs::write(&npm, script).unwrap();
        std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

#[test]
fn installer_installs_once_when_run_concurrently() {
    const RUNS: usize = 4;
    let root = tempfile::tempdir().unwrap();
    let path = installer_path(root.path(), Some(FAKE_NPM));
    let cache = root.path().join("cache/claude-code-9.9.9");
    let log = root.path().join("npm.log");
    let script = installer_script();
    let answers: Vec<Result<PathBuf, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..RUNS)
            .map(|_| {
                scope.spawn(|| {
                    run_installer(
                        &script,
                        &[
                            ("PATH", path.as_os_str()),
                            ("HOME", root.path().as_os_str()),
                            ("KERN_CLAUDE_CACHE", cache.as_os_str()),
                            ("KERN_CLAUDE_VERSION", "9.9.9".as_ref()),
                            ("FAKE_NPM_LOG", log.as_os_str()),
                        ],
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let expected = cache.join("node_modules/.bin/claude");
    assert_eq!(answers, vec![Ok(expected.clone()); RUNS]);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "view\ninstall\n");
    let version = Command::new(&expected).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        "9.9.9 (Claude Code)\n"
    );
}

#[test]
fn installer_failure_is_the_error_with_the_installers_message() {
    let root = tempfile::tempdir().unwrap();
    let path = installer_path(root.path(), None);
    let cache = root.path().join("cache/claude-code-9.9.9");
    let error = run_installer(
        &installer_script(),
        &[
            ("PATH", path.as_os_str()),
            ("HOME", root.path().as_os_str()),
            ("KERN_CLAUDE_CACHE", cache.as_os_str()),
        ],
    )
    .unwrap_err();
    let script = installer_script();
    assert_eq!(
        error,
        format!(
            "`{}` failed (exit status: 1) — set KERN_SKIP_REAL_CLAUDE=1 to skip the real-agent \
             tests:\ninstall-claude: error: `npm` not found on PATH — install Node.js 18 or \
             newer (it ships npm), then run .ci/install-claude again",
            script.display()
        )
    );
    assert!(!cache.exists(), "nothing installed");
}

/// Re-records `tests/fixtures/claude-<version>/` with the installed CLI (the version it reports):
/// every scenario its README lists, run exactly as the tier runs the CLI, against the mock.
/// Not a test of its own: run it after moving the pin, then adapt the unit tests that read
/// the fixtures.
///
/// `KERN_RECORD_FIXTURES=1 cargo test --test integration real_claude::record_fixtures -- --ignored`
#[test]
#[ignore = "records fixtures; run by hand after moving the pin"]
fn record_fixtures() {
    if std::env::var("KERN_RECORD_FIXTURES").as_deref() != Ok("1") {
        eprintln!("set KERN_RECORD_FIXTURES=1 to record");
        return;
    }
    let bin = claude_executable().unwrap_or_else(|e| panic!("{e}"));
    let _serial = serial();
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .expect("claude --version");
    let version = version
        .split_whitespace()
        .next()
        .expect("a version")
        .to_string();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("claude-{version}"));
    std::fs::create_dir_all(&dir).expect("fixture folder");

    let commit_args = || {
        let mut args = common_args();
        args.push("--tools=Read,Grep,Glob,Bash".to_string());
        args.push(format!("--json-schema={}", Stage::Review.schema()));
        args
    };
    let with = |mut args: Vec<String>, extra: &[&str]| {
        let schema = args.pop().expect("the schema flag");
        args.extend(extra.iter().map(std::string::ToString::to_string));
        args.push(schema);
        args
    };
    let retries = |n: &'static str| [("CLAUDE_CODE_MAX_RETRIES", n)];
    let http = |status: u16, kind: &str, message: &str| {
        vec![Turn::http_error(status, kind, message, u32::MAX)]
    };
    // (name, argv, turns given the sandbox's path, env, stop at the first api_retry)
    type Scenario = (
        &'static str,
        Vec<String>,
        Box<dyn Fn(&Path) -> Vec<Turn>>,
        Vec<(&'static str, &'static str)>,
        bool,
    );
    let scenarios: Vec<Scenario> = vec![
        (
            "research-success",
            research_args(),
            Box::new(|_| {
                vec![
                    Turn::tool("Glob", json!({"pattern": "*"})),
                    Turn::report(
                        Stage::Research,
                        json!({"notes": ["Files: out-1.txt does not exist yet",
                            "Pattern: one file per task holding its number"]}),
                    ),
                ]
            }),
            vec![],
            false,
        ),
        (
            "implement-success",
            implement_args(),
            Box::new(|root| {
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": root.join("out-1.txt").display().to_string(), "content": "1\n"}),
                    ),
                    Turn::tool(
                        "Bash",
                        json!({"command": "cat out-1.txt", "description": "check"}),
                    ),
                    Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote out-1.txt",
                            "learnings": ["the real CLI wrote out-1.txt"]}),
                    ),
                ]
            }),
            vec![],
            false,
        ),
        (
            "commit-success",
            commit_args(),
            Box::new(|_| {
                vec![
                    Turn::tool(
                        "Bash",
                        json!({"command": "git status --short", "description": "status"}),
                    ),
                    Turn::report(
                        Stage::Review,
                        json!({"verdict": "COMMIT", "subject": "Add out-1.txt through the real CLI",
                            "body": "Reviewed by the scripted model."}),
                    ),
                ]
            }),
            vec![],
            false,
        ),
        (
            "implement-max-turns",
            with(implement_args(), &["--max-turns", "1"]),
            Box::new(|_| {
                vec![
                    Turn::tool("Bash", json!({"command": "ls", "description": "look"})),
                    Turn::tool(
                        "Bash",
                        json!({"command": "ls -a", "description": "look again"}),
                    ),
                ]
            }),
            vec![],
            false,
        ),
        (
            "implement-max-budget",
            with(implement_args(), &["--max-budget-usd", "0.0001"]),
            Box::new(|_| {
                vec![
                    Turn::tool("Bash", json!({"command": "ls", "description": "look"})),
                    Turn::tool(
                        "Bash",
                        json!({"command": "ls -a", "description": "look again"}),
                    ),
                ]
            }),
            vec![],
            false,
        ),
        (
            "api-401-max-retries-2",
            research_args(),
            Box::new(move |_| http(401, "authentication_error", "invalid x-api-key")),
            retries("2").to_vec(),
            false,
        ),
        (
            "api-401-first-retry",
            research_args(),
            Box::new(move |_| http(401, "authentication_error", "invalid x-api-key")),
            vec![],
            true,
        ),
        (
            "api-400-invalid-request",
            research_args(),
            Box::new(move |_| {
                http(
                    400,
                    "invalid_request_error",
                    "tools.0.custom.input_schema: JSON schema is invalid",
                )
            }),
            retries("2").to_vec(),
            false,
        ),
        (
            "api-400-prompt-too-long",
            research_args(),
            Box::new(move |_| {
                http(
                    400,
                    "invalid_request_error",
                    "prompt is too long: 250000 tokens > 200000 maximum",
                )
            }),
            retries("2").to_vec(),
            false,
        ),
        (
            "api-429-rate-limit",
            research_args(),
            Box::new(move |_| {
                http(
                    429,
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                )
            }),
            retries("1").to_vec(),
            false,
        ),
        (
            "api-500-server-error",
            research_args(),
            Box::new(move |_| http(500, "api_error", "Internal server error")),
            retries("1").to_vec(),
            false,
        ),
        (
            "api-529-overloaded",
            research_args(),
            Box::new(move |_| http(529, "overloaded_error", "Overloaded")),
            retries("1").to_vec(),
            false,
        ),
    ];
    for (name, args, turns, env, stop_at_retry) in scenarios {
        let sandbox = Sandbox::new();
        let mock = MockModelApi::start(Script {
            rules: vec![Rule::new("FIXTURE-TASK", turns(&sandbox.path()))],
        });
        let run = run_claude(
            &bin,
            &args,
            &mock,
            &sandbox,
            "FIXTURE-TASK: do it\n",
            &env,
            |event| stop_at_retry && event["type"] == "system" && event["subtype"] == "api_retry",
        );
        write_fixture(
            &dir,
            name,
            &run.lines,
            &run.stderr,
            (!stop_at_retry).then_some(run.exit_code).flatten(),
            &sandbox,
        );
    }

    // No connection: a loopback port nobody listens on.
    {
        let sandbox = Sandbox::new();
        let mock = MockModelApi::start(Script::default());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let closed = format!("http://127.0.0.1:{port}/v1");
        let run = run_claude(
            &bin,
            &research_args(),
            &mock,
            &sandbox,
            "FIXTURE-TASK: do it\n",
            &[
                ("ANTHROPIC_VERTEX_BASE_URL", closed.as_str()),
                ("CLAUDE_CODE_MAX_RETRIES", "1"),
            ],
            never,
        );
        write_fixture(
            &dir,
            "connection-refused",
            &run.lines,
            &run.stderr,
            run.exit_code,
            &sandbox,
        );
    }

    // Not logged in (no credential of any kind), and arguments the CLI rejects.
    for (name, args) in [
        ("not-logged-in", research_args()),
        (
            "usage-error-no-verbose",
            ["-p", "--output-format", "stream-json"]
                .map(str::to_string)
                .to_vec(),
        ),
    ] {
        let sandbox = Sandbox::new();
        let mut command = Command::new(&bin);
        command.args(&args).current_dir(sandbox.path()).env_clear();
        command
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sandbox.home.path())
            .env("CLAUDE_CONFIG_DIR", sandbox.home.path().join(".claude"))
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn claude");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"FIXTURE-TASK: do it\n")
            .expect("prompt");
        let output = child.wait_with_output().expect("claude output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
        write_fixture(
            &dir,
            name,
            &lines,
            &String::from_utf8_lossy(&output.stderr),
            output.status.code(),
            &sandbox,
        );
    }
    eprintln!("recorded into {}", dir.display());
}

/// Writes `NAME.jsonl` (the lines), `NAME.stderr` and `NAME.exit` (absent when the run was
/// stopped), with the sandbox's paths rewritten to `/home/user/project` and `/home/user`.
fn write_fixture(
    dir: &Path,
    name: &str,
    lines: &[String],
    stderr: &str,
    exit: Option<i32>,
    sandbox: &Sandbox,
) {
    let repo = sandbox.path().display().to_string();
    let home = sandbox
        .home
        .path()
        .canonicalize()
        .expect("canonical home")
        .display()
        .to_string();
    let clean = |text: &str| {
        text.replace(&repo, "/home/user/project")
            .replace(&home, "/home/user")
    };
    let mut stream = String::new();
    for line in lines {
        stream.push_str(&clean(line));
        stream.push('\n');
    }
    std::fs::write(dir.join(format!("{name}.jsonl")), stream).expect("write jsonl");
    std::fs::write(dir.join(format!("{name}.stderr")), clean(stderr)).expect("write stderr");
    let exit_path = dir.join(format!("{name}.exit"));
    match exit {
        Some(code) => std::fs::write(&exit_path, format!("{code}\n")).expect("write exit"),
        None => {
            let _ = std::fs::remove_file(&exit_path);
        }
    }
}

/// The OS sandbox kern can give the implement stage (`kern::testing::agent::claude::SANDBOX_SETTINGS`
/// through `--settings`) runs headless: a shell command writes inside the repository, but not
/// outside it nor into `.git/hooks` — whether the CLI refuses such a command up front (a
/// permission denial in `dontAsk` mode) or the sandbox's read-only mount stops it. The control
/// without the settings writes outside, so the sandbox is what held. Needs bubblewrap and
/// socat.
#[test]
fn the_os_sandbox_confines_implements_shell_to_the_repository() {
    let Some(bin) = claude_or_skip("the_os_sandbox_confines_implements_shell_to_the_repository")
    else {
        return;
    };
    if std::env::var("KERN_SKIP_CLAUDE_SANDBOX").is_ok_and(|v| v == "1") {
        eprintln!("skipping: KERN_SKIP_CLAUDE_SANDBOX=1");
        return;
    }
    for (tool, package) in [("bwrap", "bubblewrap"), ("socat", "socat")] {
        if !tools::system_tool(tool, package, "KERN_SKIP_CLAUDE_SANDBOX") {
            return;
        }
    }
    let _serial = serial();
    let outside = tempfile::tempdir().expect("a folder outside the repository");
    let target = outside.path().join("outside.txt");
    let commands = [
        "echo in > inside.txt && cat inside.txt".to_string(),
        format!("echo out > {}", target.display()),
        "echo hook > .git/hooks/pre-commit".to_string(),
    ];
    let sandboxed = {
        let mut args = implement_args();
        let schema = args.pop().expect("schema flag");
        args.push(format!(
            "--settings={}",
            kern::testing::agent::claude::SANDBOX_SETTINGS
        ));
        args.push(schema);
        args
    };
    for (args, confined) in [(sandboxed, true), (implement_args(), false)] {
        let sandbox = Sandbox::new();
        let _ = std::fs::remove_file(&target);
        let mock = MockModelApi::start(Script {
            rules: vec![Rule::new(
                "TASK-SANDBOX",
                commands
                    .iter()
                    .map(|c| Turn::tool("Bash", json!({"command": c, "description": "write"})))
                    .chain([Turn::report(
                        Stage::Implement,
                        json!({"status": "SUCCESS", "summary": "wrote"}),
                    )])
                    .collect(),
            )],
        });
        let run = run_claude(
            &bin,
            &args,
            &mock,
            &sandbox,
            "TASK-SANDBOX: write files\n",
            &[],
            never,
        );
        let label = if confined {
            "sandboxed"
        } else {
            "not sandboxed"
        };
        run.report_timing(label);
        let results: Vec<String> = run
            .tool_results()
            .iter()
            .map(|r| r["content"].as_str().unwrap_or_default().to_string())
            .collect();
        eprintln!("{label}: tool results {results:?}");
        assert_eq!(run.exit_code, Some(0), "{}", run.dump());
        assert_eq!(
            sandbox.read("inside.txt").as_deref(),
            Some("in\n"),
            "{}",
            run.dump()
        );
        assert_eq!(target.exists(), !confined, "{}", run.dump());
        // 2.1.330 refuses a write into `.git` in dontAsk mode even without the sandbox (seen);
        // with it, the hooks are out of reach either way.
        if confined {
            assert!(
                !sandbox.path().join(".git/hooks/pre-commit").exists(),
                "{}",
                run.dump()
            );
        }
    }
}
