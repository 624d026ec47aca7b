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
