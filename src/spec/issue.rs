//! The `Issue` note: the tracker issue a task came from, `> **Issue:** owner/repo#N`, which
//! `kern import` writes and which is the person's from then on.
//!
//! The one decision a reader must know: an issue is named the way GitHub itself cross-links
//! one — `owner/repo#N` (with the host first, `host/owner/repo#N`, for a GitHub Enterprise
//! server) — and matched as GitHub matches names, without regard to case. The note is what
//! ties a task to its issue, whatever the task is called: a renamed task keeps its issue, and
//! an issue already in SPEC.md is never imported twice. The note's first word is read; a
//! markdown link or the issue's address is read too, so a person may write either.

use std::fmt;

/// The host an issue lives on when its name has none.
pub(crate) const GITHUB: &str = "github.com";

/// One tracker issue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) struct IssueRef {
    /// The server, when it is not github.com (a GitHub Enterprise host).
    pub host: Option<String>,
    /// The repository's owner.
    pub owner: String,
    /// The repository's name.
    pub repo: String,
    /// The issue's number.
    pub number: u64,
}

impl IssueRef {
    /// Reads the first word of a note's text: `owner/repo#N`, `host/owner/repo#N`, the issue's
    /// address (`https://github.com/owner/repo/issues/N`), or a markdown link to either, in
    /// backticks or not. `None` when it names no issue.
    pub(crate) fn parse(text: &str) -> Option<IssueRef> {
        let line = text.trim_start().lines().next()?;
        // `[owner/repo#N](https://…)`: the link text names it, else the address.
        if let Some(rest) = line.strip_prefix('[')
            && let Some((label, target)) = rest.split_once("](")
        {
            let target = target.split(')').next().unwrap_or(target);
            return IssueRef::parse(label).or_else(|| IssueRef::parse(target));
        }
        let first = line.split_whitespace().next()?;
        let word = first.trim_matches('`');
        if let Some(url) = word
            .strip_prefix("https://")
            .or_else(|| word.strip_prefix("http://"))
        {
            return IssueRef::from_address(url);
        }
        let (path, number) = word.rsplit_once('#')?;
        let number = number_of(number)?;
        let parts: Vec<&str> = path.split('/').collect();
        let (host, owner, repo) = match parts.as_slice() {
            [owner, repo] => (None, *owner, *repo),
            [host, owner, repo] if host.contains('.') => (Some(*host), *owner, *repo),
            _ => return None,
        };
        IssueRef::new(host, owner, repo, number)
    }

    /// The issue at `https://<address>` (`github.com/owner/repo/issues/N`), as `gh` reports it.
    pub(crate) fn from_url(url: &str) -> Option<IssueRef> {
        let url = url.trim();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?;
        IssueRef::from_address(rest)
    }

    fn from_address(rest: &str) -> Option<IssueRef> {
        let rest = rest.split(['?', '#']).next()?.trim_end_matches('/');
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            [host, owner, repo, "issues", number] => {
                let host = (!host.eq_ignore_ascii_case(GITHUB)).then_some(*host);
                IssueRef::new(host, owner, repo, number_of(number)?)
            }
            _ => None,
        }
    }

    fn new(host: Option<&str>, owner: &str, repo: &str, number: u64) -> Option<IssueRef> {
        let name = |s: &str, extra: &[char]| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || extra.contains(&c))
        };
        let host = host.filter(|h| !h.eq_ignore_ascii_case(GITHUB));
        if !name(owner, &['_']) || !name(repo, &['.', '_']) || number == 0 {
            return None;
        }
        if host.is_some_and(|h| !name(h, &['.', ':'])) {
            return None;
        }
        Some(IssueRef {
            host: host.map(str::to_ascii_lowercase),
            owner: owner.to_string(),
            repo: repo.to_string(),
            number,
        })
    }

    /// True when both name one issue (names compared without regard to case, as GitHub does).
    pub(crate) fn same(&self, other: &IssueRef) -> bool {
        self.number == other.number
            && self.host == other.host
            && self.owner.eq_ignore_ascii_case(&other.owner)
            && self.repo.eq_ignore_ascii_case(&other.repo)
    }

    /// The repository as `gh --repo` takes it: `owner/repo`, `host/owner/repo` off github.com.
    pub(crate) fn repo_arg(&self) -> String {
        match &self.host {
            Some(host) => format!("{host}/{}/{}", self.owner, self.repo),
            None => format!("{}/{}", self.owner, self.repo),
        }
    }

    /// The issue's web address.
    pub(crate) fn url(&self) -> String {
        format!(
            "https://{}/{}/{}/issues/{}",
            self.host.as_deref().unwrap_or(GITHUB),
            self.owner,
            self.repo,
            self.number
        )
    }

    /// How a commit message names it for GitHub to close (`owner/repo#N`: the server is the
    /// one the commit is pushed to).
    pub(crate) fn short(&self) -> String {
        format!("{}/{}#{}", self.owner, self.repo, self.number)
    }
}

impl fmt::Display for IssueRef {
    /// `owner/repo#N`, or `host/owner/repo#N` off github.com: what the Issue note holds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.repo_arg(), self.number)
    }
}

/// A positive issue number in decimal digits only.
fn number_of(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(host: Option<&str>, owner: &str, repo: &str, number: u64) -> IssueRef {
        IssueRef {
            host: host.map(str::to_string),
            owner: owner.into(),
            repo: repo.into(),
            number,
        }
    }

    #[test]
    fn every_way_a_person_names_an_issue() {
        let dark = Some(issue(None, "acme", "app", 12));
        let cases: &[(&str, Option<IssueRef>)] = &[
            ("acme/app#12", dark.clone()),
            ("`acme/app#12`", dark.clone()),
            ("acme/app#12 (imported 2026-11-28)", dark.clone()),
            ("https://github.com/acme/app/issues/12", dark.clone()),
            ("https://GitHub.com/acme/app/issues/12/", dark.clone()),
            (
                "[acme/app#12](https://github.com/acme/app/issues/12)",
                dark.clone(),
            ),
            (
                "[the dark mode](https://github.com/acme/app/issues/12)",
                dark.clone(),
            ),
            ("github.com/acme/app#12", dark.clone()),
            (
                "ghe.example.com/team/tool.rs#3",
                Some(issue(Some("ghe.example.com"), "team", "tool.rs", 3)),
            ),
            (
                "https://ghe.example.com/team/tool/issues/3",
                Some(issue(Some("ghe.example.com"), "team", "tool", 3)),
            ),
            (
                "my_org/my-repo.v2#7",
                Some(issue(None, "my_org", "my-repo.v2", 7)),
            ),
            ("#12", None),
            ("acme#12", None),
            ("acme/app#", None),
            ("acme/app#0", None),
            ("acme/app#12a", None),
            ("acme/app 12", None),
            ("a/b/c#1", None),
            ("acme/app#-1", None),
            ("https://github.com/acme/app/pull/12", None),
            ("acme/a pp#1", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(&IssueRef::parse(text), want, "{text:?}");
        }
    }

    #[test]
    fn an_issue_is_written_as_it_is_read_and_matched_without_case() {
        let a = issue(None, "Acme", "App", 12);
        assert_eq!(a.to_string(), "Acme/App#12");
        assert_eq!(IssueRef::parse(&a.to_string()), Some(a.clone()));
        assert_eq!(a.url(), "https://github.com/Acme/App/issues/12");
        assert_eq!(a.repo_arg(), "Acme/App");
        assert_eq!(a.short(), "Acme/App#12");
        assert!(a.same(&issue(None, "acme", "app", 12)));
        assert!(!a.same(&issue(None, "acme", "app", 13)));
        assert!(!a.same(&issue(Some("ghe.example.com"), "acme", "app", 12)));
        let ghe = issue(Some("ghe.example.com"), "team", "tool", 3);
        assert_eq!(ghe.to_string(), "ghe.example.com/team/tool#3");
        assert_eq!(ghe.url(), "https://ghe.example.com/team/tool/issues/3");
        assert_eq!(ghe.short(), "team/tool#3");
        assert_eq!(
            IssueRef::from_url("https://github.com/acme/app/issues/12"),
            Some(issue(None, "acme", "app", 12))
        );
        assert_eq!(IssueRef::from_url("acme/app#12"), None);
    }
}
