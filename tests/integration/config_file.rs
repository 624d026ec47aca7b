//! A project's settings file, `.kern/config.toml` (issue 29): every option that is not a
//! one-off, under its flag's long name and in its units; flags and `KERN_*` variables win; an
//! unknown key or a bad value stops kern before any agent with the file's line and the fix;
//! `kern -n` and `kern doctor` say where each setting came from; `kern init --config` writes a
//! commented starter.

use crate::support::project::Project;

fn with_config(text: &str) -> Project {
    let p = Project::new("- [ ] Alpha\n");
    p.write(".kern/config.toml", text);
    p.commit_all("the project's settings");
    p
}

fn agent_calls(p: &Project) -> usize {
    std::fs::read_to_string(p.outside.path().join("scenario.calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn the_dry_run_and_the_doctor_name_where_each_setting_came_from() {
    let p = with_config(
        "# the night's settings\ncheck = \"test -f out/alpha.txt\"\nmax-attempts = 2\nstage_timeout = \"20m\"\n",
    );
    let out = p
        .run(&["-n", "--max-attempts", "4"])
        .env("KERN_RETRIES", "5")
        .expect(0)
        .stdout;
    assert!(
        out.contains("setting:     check = test -f out/alpha.txt (.kern/config.toml:2)"),
        "{out}"
    );
    assert!(
        out.contains("setting:     stage-timeout = 20m (.kern/config.toml:4)"),
        "{out}"
    );
    assert!(
        out.contains("setting:     max-attempts = 4 (command line)"),
        "the flag wins: {out}"
    );
    assert!(
        out.contains("setting:     retries = 5 (KERN_RETRIES)"),
        "{out}"
    );
    assert!(out.contains("check gate: `test -f out/alpha.txt`"), "{out}");
    let doctor = p.run(&["doctor"]).expect(0);
    let err = doctor.stderr.clone();
    assert!(
        err.contains("✓ settings: ") && err.contains("check from .kern/config.toml:2"),
        "{err}"
    );
}

#[test]
fn a_run_uses_the_files_settings_and_a_variable_wins_over_the_file() {
    // The file's check passes on the starting commit and fails once the work is there.
    let failing = "check = \"test ! -f out/alpha.txt\"\nmax-attempts = 1\n";
    let p = with_config(failing);
    p.run(&["1", "0"]).expect(4);
    assert!(
        p.read("SPEC.md").contains("> **Attempt 1:**"),
        "{}",
        p.read("SPEC.md")
    );
    assert_eq!(p.log().len(), 2, "no commit of the task");
    // KERN_CHECK wins over the file.
    let q = with_config(failing);
    q.run(&["1", "0"]).env("KERN_CHECK", "true").expect(0);
    assert_eq!(q.log()[0], "Alpha");
}

#[test]
fn an_unknown_key_or_a_bad_value_stops_kern_before_any_agent_with_the_line_and_the_fix() {
    for (text, said) in [
        (
            "check = \"true\"\nmax-atempts = 3\n",
            "kern: error: `.kern/config.toml:2`: unknown key `max-atempts` — the keys are the long options of `kern --help`",
        ),
        (
            "stage-timeout = \"soon\"\n",
            "kern: error: `.kern/config.toml:1`: `stage-timeout`: invalid value 'soon'",
        ),
        (
            "jobs = 99\n",
            "kern: error: `.kern/config.toml:1`: `jobs`: invalid value '99'",
        ),
        (
            "allow-dirty = \"yes\"\n",
            "kern: error: `.kern/config.toml:1`: `allow-dirty` is a switch — write `allow-dirty = true` or `allow-dirty = false`",
        ),
    ] {
        let p = with_config(text);
        for args in [&["1", "0"][..], &["-n"], &["doctor"], &["status"]] {
            p.run(args).expect(2).stderr_has(said);
        }
        assert_eq!(agent_calls(&p), 0, "{text}");
        // `kern status --json` keeps its promise of one JSON object, also on this error.
        let json = p.run(&["status", "--json"]).expect(2).stdout;
        let error: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains(".kern/config.toml:"),
            "{json}"
        );
    }
}

#[test]
fn init_config_writes_a_commented_starter_once_and_it_changes_nothing() {
    let p = Project::new("- [ ] Alpha\n");
    p.run(&["init", "--config"])
        .expect(0)
        .stderr_has(".kern/config.toml");
    let text = p.read(".kern/config.toml");
    assert!(text.contains("# stage-timeout = \"60m\""), "{text}");
    assert!(text.contains("# check = \"cargo test\""), "{text}");
    assert!(!text.contains("dry-run"), "one-offs stay out: {text}");
    p.commit_all("kern settings"); // as `kern init --config` says: a run needs a clean tree
    let out = p.run(&["-n"]).expect(0).stdout;
    assert!(!out.contains("config.toml"), "all commented out: {out}");
    p.run(&["init", "--config"])
        .expect(2)
        .stderr_has("`.kern/config.toml` already exists — kern init never overwrites");
    assert_eq!(p.read(".kern/config.toml"), text);
}
