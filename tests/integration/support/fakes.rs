//! Fake agent CLIs for the integration tests: small shell scripts in a temporary `bin` folder
//! placed first on PATH as `claude` or `codex`. The ones that only answer print a canned
//! stream; [`scripted_claude`] hands over to the built-in scripted agent, setting
//! `KERN_STAGE` from the `--tools=` flag, because a `claude` agent gets no `KERN_*` variables.
//! Each logs the argv it was given per stage, for tests that hold kern's exact command line.
#![allow(dead_code)]

use std::path::PathBuf;

use super::project::Project;

/// The `--tools=` flag of each stage and the stage it names, for the fakes.
pub(crate) const CLAUDE_TOOLS: [(&str, &str); 3] = [
    ("--tools=Read,Grep,Glob,Bash,WebSearch,WebFetch", "research"),
    ("--tools=default", "implement"),
    ("--tools=Read,Grep,Glob,Bash", "commit"),
];

/// Writes an executable `name` into the project's fake `bin` folder and returns the folder.
pub(crate) fn fake(p: &Project, name: &str, script: &str) -> PathBuf {
    let bin = p.outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The shell that names the stage from the fake's arguments into `$stage`.
pub(crate) fn stage_from_args(claude: bool) -> String {
    let mut cases = String::new();
    if claude {
        for (flag, stage) in CLAUDE_TOOLS {
            cases.push_str(&format!("    {flag}) stage={stage} ;;\n"));
        }
    } else {
        for (n, stage) in [(1, "research"), (2, "implement"), (3, "commit")] {
            cases.push_str(&format!("    */stage{n}.schema.json) stage={stage} ;;\n"));
        }
    }
    format!("stage=unknown\nfor a in \"$@\"; do\n  case \"$a\" in\n{cases}  esac\ndone\n")
}

/// A fake that logs its argv (one per line) and stdin to `<log>/<stage>.argv|.stdin`, writes
/// `out.txt` in implement, and prints `<log>/<stage>.out`.
pub(crate) fn logging_fake(p: &Project, name: &str, claude: bool) -> (PathBuf, PathBuf) {
    let log = p.outside.path().join("log");
    std::fs::create_dir_all(&log).unwrap();
    let script = format!(
        "#!/bin/sh\n{}log='{}'\nprintf '%s\\n' \"$@\" > \"$log/$stage.argv\"\ncat > \"$log/$stage.stdin\"\nif [ \"$stage\" = implement ]; then echo 'made by the fake' > out.txt; fi\ncat \"$log/$stage.out\"\n",
        stage_from_args(claude),
        log.display()
    );
    (fake(p, name, &script), log)
}

/// A fake `claude` that hands over to the scripted agent with the project's scenario, after
/// logging its argv (one per line) to `<outside>/log/<stage>.argv`.
pub(crate) fn scripted_claude(p: &Project) -> PathBuf {
    let log = p.outside.path().join("log");
    std::fs::create_dir_all(&log).unwrap();
    let script = format!(
        "#!/bin/sh\n{}printf '%s\\n' \"$@\" > '{}'/\"$stage.argv\"\nKERN_STAGE=$stage\nexport KERN_STAGE\nexec '{}' scripted-agent '{}'\n",
        stage_from_args(true),
        log.display(),
        super::kern_bin().display(),
        p.scenario_path().display()
    );
    fake(p, "claude", &script)
}

/// A fake GitHub CLI: the answers the real `gh` 2.23.0 gave (`tests/fixtures/gh-2.23.0/`,
/// stdout, stderr and exit code of each), chosen by the command and by the mode in
/// `<log>/mode` (`ok` when absent; `odd` or `none`: other issues to list;
/// `not-logged-in`, `offline`, `rate-limited`, or `hang`:
/// it never answers, its processes' ids in `<log>/<n>.pid` and `<n>.child` for
/// [`gh_left_running`]). Each call is logged: its arguments one per line in `<log>/<n>.args`,
/// its stdin in `<log>/<n>.stdin` (n from 1). Returns the `bin` folder to put first on PATH
/// and the log folder.
pub(crate) fn fake_gh(p: &Project) -> (PathBuf, PathBuf) {
    let log = p.outside.path().join("gh-log");
    std::fs::create_dir_all(&log).unwrap();
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gh-2.23.0");
    let script = format!(
        r#"#!/bin/sh
fixtures='{fixtures}'
log='{log}'
n=1
while [ -e "$log/$n.args" ]; do n=$((n + 1)); done
: > "$log/$n.args"
for a in "$@"; do printf '%s\n' "$a" >> "$log/$n.args"; done
cat > "$log/$n.stdin"
mode=$(cat "$log/mode" 2>/dev/null || echo ok)
case "$1 $2 $3" in
  "pr create "*) echo https://github.com/acme/app/pull/7; exit 0 ;;
  "issue list "*) name=issue-list ;;
  "issue comment "*) name=issue-comment ;;
  "api --method POST") name=label-add ;;
  *) name=label-remove ;;
esac
case "$mode" in
  hang)
    # Waits for a file no test makes (a minute at most, then says it was never stopped),
    # in a child of its own: kern must stop the call and what it started.
    echo $$ > "$log/$n.pid"
    (i=0; while [ ! -e "$log/release" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done) &
    echo $! > "$log/$n.child"
    wait
    echo "fake gh: never stopped" >&2
    exit 1 ;;
  odd|none) [ "$name" = issue-list ] && name=issue-list-$mode ;;
  not-logged-in) name=issue-list-not-logged-in ;;
  offline) name=issue-list-offline ;;
  rate-limited)
    case "$name" in
      issue-list) name=issue-list-rate-limited ;;
      issue-comment) name=issue-comment-rate-limited ;;
      *) name=label-add-rate-limited ;;
    esac ;;
esac
cat "$fixtures/$name.stdout"
cat "$fixtures/$name.stderr" >&2
exit $(cat "$fixtures/$name.exit")
"#,
        fixtures = fixtures.display(),
        log = log.display()
    );
    (fake(p, "gh", &script), log)
}

/// The processes of the calls of a [`fake_gh`] in mode `hang` (the call and the child it
/// started) that still run: none once kern stopped them.
pub(crate) fn gh_left_running(log: &std::path::Path) -> Vec<String> {
    let mut running = Vec::new();
    let mut hung = 0;
    for entry in std::fs::read_dir(log).unwrap() {
        let path = entry.unwrap().path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("pid" | "child")
        ) {
            continue;
        }
        hung += 1;
        let pid = std::fs::read_to_string(&path).unwrap().trim().to_string();
        // A zombie (stopped, its parent gone, not yet reaped by init) runs no more.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state.rsplit(')').next().unwrap_or("").trim_start();
        if !state.is_empty() && !state.starts_with('Z') && !state.starts_with('X') {
            running.push(format!("{}: {pid}", path.display()));
        }
    }
    assert!(hung > 0, "no call of gh hung: {}", log.display());
    running
}

/// The calls a [`fake_gh`] logged, in order: each one's arguments and stdin.
pub(crate) fn gh_calls(log: &std::path::Path) -> Vec<(Vec<String>, String)> {
    let mut calls = Vec::new();
    for n in 1.. {
        let Ok(args) = std::fs::read_to_string(log.join(format!("{n}.args"))) else {
            break;
        };
        let stdin = std::fs::read_to_string(log.join(format!("{n}.stdin"))).unwrap_or_default();
        calls.push((args.lines().map(str::to_string).collect(), stdin));
    }
    calls
}
