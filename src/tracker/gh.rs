//! The GitHub CLI, `gh`, as kern calls it: the command lines (pure, tested here), one bounded
//! call, and what a failed call means.
//!
//! Decisions a reader must know:
//! - kern never talks to GitHub itself: `gh` holds the person's login and knows their
//!   server. Each call is a probe (`supervisor::probe`): its own process group, stopped at
//!   the time limit with whatever it started, prompts and colour off, the update check off.
//!   Text kern sends (a comment, a label) goes on stdin, never into the arguments.
//! - A failure is classified from gh's exit code and its own words (recorded from gh 2.23.0
//!   in `tests/fixtures/gh-2.23.0/`): exit 4 or `gh auth login` is not logged in, `rate limit`
//!   is rate-limited, `error connecting to` is offline. Not installed and not logged in are
//!   the person's to fix ([`GhFailure::needs_person`]); the rest may pass.

use std::ffi::OsStr;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::spec::IssueRef;
use crate::supervisor::probe::{self, Probe, ProbeEnd};

/// The most of gh's stdout kern reads: an issue list of a few hundred issues is far less.
const STDOUT_CAP: u64 = 32 << 20;

/// The GitHub CLI, found (or not) on the PATH kern was given.
#[derive(Debug, Clone)]
pub(crate) struct Gh {
    program: Option<PathBuf>,
    cwd: PathBuf,
    timeout: Duration,
}

/// Why a call of `gh` did not do what kern asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GhFailure {
    /// No `gh` on the PATH.
    NotInstalled,
    /// gh has no login for the server (exit 4), or its token was refused (HTTP 401).
    NotLoggedIn(String),
    /// GitHub's rate limit (primary or secondary).
    RateLimited(String),
    /// gh could not reach the server.
    Offline(String),
    /// gh ran past its time limit and was stopped.
    TimedOut(Duration),
    /// Anything else gh said (a repository or issue it cannot see, a bad option).
    Failed(String),
}

impl GhFailure {
    /// What a finished gh call that failed means, from its exit code and its words.
    pub(crate) fn classify(code: Option<i32>, said: &str) -> GhFailure {
        let lower = said.to_ascii_lowercase();
        let words = last_words(said);
        if code == Some(4)
            || lower.contains("gh auth login")
            || lower.contains("bad credentials")
            || lower.contains("http 401")
        {
            GhFailure::NotLoggedIn(words)
        } else if lower.contains("rate limit") || lower.contains("http 429") {
            GhFailure::RateLimited(words)
        } else if lower.contains("error connecting to")
            || lower.contains("no such host")
            || lower.contains("connection refused")
            || lower.contains("network is unreachable")
            || lower.contains("i/o timeout")
            || lower.contains("tls handshake timeout")
        {
            GhFailure::Offline(words)
        } else {
            GhFailure::Failed(words)
        }
    }

    /// The kind, for counting and for warning once per kind: `not installed`, `not logged
    /// in`, `rate-limited`, `offline`, `timed out`, `failed`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            GhFailure::NotInstalled => "not installed",
            GhFailure::NotLoggedIn(_) => "not logged in",
            GhFailure::RateLimited(_) => "rate-limited",
            GhFailure::Offline(_) => "offline",
            GhFailure::TimedOut(_) => "timed out",
            GhFailure::Failed(_) => "failed",
        }
    }

    /// True when only the person can mend it (install gh, log in): no later call can succeed.
    pub(crate) fn needs_person(&self) -> bool {
        matches!(self, GhFailure::NotInstalled | GhFailure::NotLoggedIn(_))
    }

    /// What went wrong, in kern's words, with gh's own when it said something.
    pub(crate) fn why(&self) -> String {
        let with = |what: &str, said: &String| {
            // gh starts some of its messages with its own name.
            let said = said.strip_prefix("gh: ").unwrap_or(said);
            if said.is_empty() {
                what.to_string()
            } else {
                format!("{what} (gh: {said})")
            }
        };
        match self {
            GhFailure::NotInstalled => "`gh` (the GitHub CLI) is not installed".to_string(),
            GhFailure::NotLoggedIn(said) => with("`gh` is not logged in", said),
            GhFailure::RateLimited(said) => with("GitHub's rate limit is reached", said),
            GhFailure::Offline(said) => with("`gh` cannot reach GitHub", said),
            GhFailure::TimedOut(limit) => format!(
                "`gh` did not answer within {} and was stopped",
                crate::text::duration(*limit)
            ),
            GhFailure::Failed(said) => with("`gh` failed", said),
        }
    }

    /// What the person can do about it.
    pub(crate) fn fix(&self) -> &'static str {
        match self {
            GhFailure::NotInstalled => {
                "install the GitHub CLI (https://cli.github.com) and log in with `gh auth login`"
            }
            GhFailure::NotLoggedIn(_) => "log in with `gh auth login` (or set GH_TOKEN)",
            GhFailure::RateLimited(_) => "wait for the limit to reset (`gh api rate_limit`)",
            GhFailure::Offline(_) | GhFailure::TimedOut(_) => {
                "check the network (`gh auth status` tells whether GitHub answers)"
            }
            GhFailure::Failed(_) => "run the same `gh` command by hand to see why",
        }
    }
}

/// The last lines gh printed that say something, at most three, joined: its message.
fn last_words(said: &str) -> String {
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let from = lines.len().saturating_sub(3);
    let words = lines[from..].join(" ");
    crate::text::clean(&words.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl Gh {
    /// `gh` as found on `path_var` (the PATH kern runs with), called in `cwd` and stopped
    /// after `timeout`.
    pub(crate) fn new(path_var: Option<&OsStr>, cwd: &Path, timeout: Duration) -> Gh {
        Gh {
            program: crate::supervisor::awake::find("gh", path_var),
            cwd: cwd.to_path_buf(),
            timeout,
        }
    }

    /// Runs `gh args…` with `stdin` (if any) to its end or its time limit: what it printed
    /// on stdout, or why it failed.
    pub(crate) fn call(&self, args: &[String], stdin: Option<&str>) -> Result<String, GhFailure> {
        let program = self.program.as_ref().ok_or(GhFailure::NotInstalled)?;
        let failed = |e: std::io::Error| GhFailure::Failed(format!("cannot run gh: {e}"));
        let mut probe = Probe::new(program, args, &self.cwd, self.timeout);
        for (name, value) in [
            ("GH_PROMPT_DISABLED", "1"),
            ("GH_NO_UPDATE_NOTIFIER", "1"),
            ("GH_SPINNER_DISABLED", "1"),
            ("NO_COLOR", "1"),
            ("CLICOLOR", "0"),
        ] {
            probe.env.push((name.into(), value.into()));
        }
        probe.env_remove.push("GH_PAGER".into());
        if let Some(text) = stdin {
            let mut input = tempfile::tempfile().map_err(failed)?;
            input.write_all(text.as_bytes()).map_err(failed)?;
            input.rewind().map_err(failed)?;
            probe.stdin = Some(input);
        }
        let mut stdout = tempfile::tempfile().map_err(failed)?;
        probe.stdout = Some(stdout.try_clone().map_err(failed)?);
        tracing::debug!(?args, "gh");
        let out = match probe::run(probe) {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(GhFailure::NotInstalled);
            }
            Err(e) => return Err(failed(e)),
        };
        match out.end {
            ProbeEnd::TimedOut(limit) => Err(GhFailure::TimedOut(limit)),
            end if end.success() => {
                let mut text = String::new();
                stdout.rewind().map_err(failed)?;
                stdout
                    .take(STDOUT_CAP)
                    .read_to_string(&mut text)
                    .map_err(failed)?;
                Ok(text)
            }
            ProbeEnd::Exited(status) => {
                use std::os::unix::process::ExitStatusExt;
                let said = if out.output.trim().is_empty() {
                    status
                        .signal()
                        .map_or_else(String::new, |s| format!("killed by signal {s}"))
                } else {
                    out.output
                };
                Err(GhFailure::classify(status.code(), &said))
            }
        }
    }
}

/// Which open issues `kern import github` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListFilter {
    /// `owner/repo` (`host/owner/repo`); `None`: the repository gh finds from the git remote.
    pub repo: Option<String>,
    /// Labels an issue must all carry.
    pub labels: Vec<String>,
    /// The milestone (title or number).
    pub milestone: Option<String>,
    /// The assignee's login (`@me` for the person logged in).
    pub assignee: Option<String>,
    /// At most this many.
    pub limit: u32,
}

/// `gh issue list` for the open issues `filter` names, as JSON (the fields kern reads).
pub(crate) fn list_args(filter: &ListFilter) -> Vec<String> {
    let mut args: Vec<String> = [
        "issue",
        "list",
        "--state",
        "open",
        "--limit",
        &filter.limit.to_string(),
        "--json",
        "number,title,body,url",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let mut option = |flag: &str, value: &str| {
        args.push(flag.to_string());
        args.push(value.to_string());
    };
    if let Some(repo) = &filter.repo {
        option("--repo", repo);
    }
    for label in &filter.labels {
        option("--label", label);
    }
    if let Some(milestone) = &filter.milestone {
        option("--milestone", milestone);
    }
    if let Some(assignee) = &filter.assignee {
        option("--assignee", assignee);
    }
    args
}

/// `gh issue comment` on `issue`, the comment's text on stdin.
pub(crate) fn comment_args(issue: &IssueRef) -> Vec<String> {
    vec![
        "issue".into(),
        "comment".into(),
        issue.number.to_string(),
        "--repo".into(),
        issue.repo_arg(),
        "--body-file".into(),
        "-".into(),
    ]
}

/// `gh api` adding a label to `issue`, its JSON body ([`label_body`]) on stdin: GitHub makes
/// the label when the repository lacks it.
pub(crate) fn label_args(issue: &IssueRef) -> Vec<String> {
    let mut args = api_args(issue, "POST", "/labels");
    args.extend(["--input".into(), "-".into()]);
    args
}

/// The body of [`label_args`].
pub(crate) fn label_body(label: &str) -> String {
    serde_json::json!({ "labels": [label] }).to_string()
}

/// `gh api` taking the label `label` off `issue`.
pub(crate) fn unlabel_args(issue: &IssueRef, label: &str) -> Vec<String> {
    api_args(issue, "DELETE", &format!("/labels/{}", path_segment(label)))
}

/// `api --method METHOD repos/<owner>/<repo>/issues/<n><tail>` (and `--hostname` off
/// github.com).
fn api_args(issue: &IssueRef, method: &str, tail: &str) -> Vec<String> {
    let mut args = vec![
        "api".to_string(),
        "--method".into(),
        method.into(),
        format!(
            "repos/{}/{}/issues/{}{tail}",
            path_segment(&issue.owner),
            path_segment(&issue.repo),
            issue.number
        ),
    ];
    if let Some(host) = &issue.host {
        args.extend(["--hostname".into(), host.clone()]);
    }
    args
}

/// `text` as one segment of a URL path: everything but unreserved characters percent-encoded.
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> (Option<i32>, String) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gh-2.23.0");
        let code = std::fs::read_to_string(dir.join(format!("{name}.exit")))
            .unwrap()
            .trim()
            .parse()
            .ok();
        let said = std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap();
        (code, said)
    }

    #[test]
    fn what_the_real_gh_says_is_classified() {
        for (name, kind) in [
            ("issue-list-not-logged-in", "not logged in"),
            ("issue-list-offline", "offline"),
            ("issue-list-rate-limited", "rate-limited"),
            ("issue-comment-rate-limited", "rate-limited"),
            ("label-add-rate-limited", "rate-limited"),
            ("label-remove-missing", "failed"),
        ] {
            let (code, said) = fixture(name);
            assert_eq!(GhFailure::classify(code, &said).kind(), kind, "{name}");
        }
        let (code, said) = fixture("issue-list-not-logged-in");
        let failure = GhFailure::classify(code, &said);
        assert!(failure.needs_person());
        assert_eq!(
            failure.why(),
            "`gh` is not logged in (gh: To get started with GitHub CLI, please run: gh auth login Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.)"
        );
        let (code, said) = fixture("label-add-rate-limited");
        assert_eq!(
            GhFailure::classify(code, &said).why(),
            "GitHub's rate limit is reached (gh: API rate limit exceeded for user ID 1234. (HTTP 403))"
        );
        let (code, said) = fixture("issue-list-offline");
        assert_eq!(
            GhFailure::classify(code, &said).why(),
            "`gh` cannot reach GitHub (gh: error connecting to api.github.com check your internet connection or https://githubstatus.com)"
        );
    }

    #[test]
    fn other_words_and_codes() {
        let cases: &[(Option<i32>, &str, &str)] = &[
            (Some(1), "gh: Bad credentials (HTTP 401)", "not logged in"),
            (
                Some(1),
                "HTTP 401: Bad credentials (https://api.github.com/graphql)\nTry authenticating with:  gh auth login",
                "not logged in",
            ),
            (
                Some(1),
                "You have exceeded a secondary rate limit",
                "rate-limited",
            ),
            (Some(1), "gh: Too Many Requests (HTTP 429)", "rate-limited"),
            (
                Some(1),
                "Post \"https://api.github.com/graphql\": dial tcp: lookup api.github.com: no such host",
                "offline",
            ),
            (
                Some(1),
                "GraphQL: Could not resolve to a Repository with the name 'acme/nope'. (repository)",
                "failed",
            ),
            (Some(2), "", "failed"),
        ];
        for (code, said, kind) in cases {
            assert_eq!(GhFailure::classify(*code, said).kind(), *kind, "{said}");
        }
        assert!(!GhFailure::Offline(String::new()).needs_person());
        assert_eq!(
            GhFailure::TimedOut(Duration::from_secs(30)).why(),
            "`gh` did not answer within 30s and was stopped"
        );
    }

    fn issue(host: Option<&str>) -> IssueRef {
        IssueRef {
            host: host.map(str::to_string),
            owner: "acme".into(),
            repo: "app".into(),
            number: 12,
        }
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            list_args(&ListFilter {
                limit: 100,
                ..ListFilter::default()
            }),
            [
                "issue",
                "list",
                "--state",
                "open",
                "--limit",
                "100",
                "--json",
                "number,title,body,url"
            ]
        );
        assert_eq!(
            list_args(&ListFilter {
                repo: Some("acme/app".into()),
                labels: vec!["kern".into(), "good first issue".into()],
                milestone: Some("v1".into()),
                assignee: Some("@me".into()),
                limit: 5,
            })[8..],
            [
                "--repo",
                "acme/app",
                "--label",
                "kern",
                "--label",
                "good first issue",
                "--milestone",
                "v1",
                "--assignee",
                "@me"
            ]
        );
        assert_eq!(
            comment_args(&issue(None)),
            [
                "issue",
                "comment",
                "12",
                "--repo",
                "acme/app",
                "--body-file",
                "-"
            ]
        );
        assert_eq!(
            comment_args(&issue(Some("ghe.example.com")))[4],
            "ghe.example.com/acme/app"
        );
        assert_eq!(
            label_args(&issue(None)),
            [
                "api",
                "--method",
                "POST",
                "repos/acme/app/issues/12/labels",
                "--input",
                "-"
            ]
        );
        assert_eq!(label_body("kern:builder"), r#"{"labels":["kern:builder"]}"#);
        assert_eq!(
            unlabel_args(&issue(None), "kern:my box"),
            [
                "api",
                "--method",
                "DELETE",
                "repos/acme/app/issues/12/labels/kern%3Amy%20box"
            ]
        );
        assert_eq!(
            unlabel_args(&issue(Some("ghe.example.com")), "kern:b")[4..],
            ["--hostname", "ghe.example.com"]
        );
    }
}
