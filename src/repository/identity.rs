//! Who commits: the author and committer `git commit` would name.
//!
//! The one decision a reader must know: libgit2 reads `user.name` and `user.email`,
//! `GIT_AUTHOR_*`/`GIT_COMMITTER_*`, and the `includeIf` conditions it knows (`gitdir:`,
//! `gitdir/i:`, `onbranch:`). Two ways of choosing an identity are git's alone — an `includeIf
//! "hasconfig:remote.*.url:…"` (git's documented way to pick a work identity by remote) and
//! settings given through `GIT_CONFIG_COUNT`/`GIT_CONFIG_PARAMETERS` — and libgit2 silently
//! skips them, which put a person's private address into their employer's history. Where the
//! configuration uses either, kern asks git itself (`git var GIT_AUTHOR_IDENT`, the one place
//! kern runs the `git` program); without git installed there, it stops rather than guess.

use std::ffi::OsString;

use git2::Signature;

use super::Repository;
use crate::error::{Error, Result};

/// Whose identity: the author or the committer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Author,
    Committer,
}

impl Repository {
    /// The author a commit made now would name (see the module docs).
    pub fn author(&self) -> Result<Signature<'static>> {
        self.person(Role::Author)
    }

    /// The committer a commit made now would name (see the module docs).
    pub fn committer(&self) -> Result<Signature<'static>> {
        self.person(Role::Committer)
    }

    fn person(&self, role: Role) -> Result<Signature<'static>> {
        if self.identity_is_gits() {
            return self.ask_git(role);
        }
        let found = match role {
            Role::Author => self.repo.author_from_env(),
            Role::Committer => self.repo.committer_from_env(),
        };
        found.map_err(|_| Error::GitIdentity)
    }

    /// True when only git can say who commits here (see the module docs).
    fn identity_is_gits(&self) -> bool {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if env("GIT_CONFIG_COUNT").is_some() || env("GIT_CONFIG_PARAMETERS").is_some() {
            return true;
        }
        let Ok(config) = self.repo.config() else {
            return false;
        };
        let Ok(mut entries) = config.entries(Some("includeif\\..*")) else {
            return false;
        };
        let mut found = false;
        while let Some(Ok(entry)) = entries.next() {
            if entry
                .name_bytes()
                .to_ascii_lowercase()
                .starts_with(b"includeif.hasconfig:")
            {
                found = true;
            }
        }
        found
    }

    /// `git var GIT_AUTHOR_IDENT` (or `GIT_COMMITTER_IDENT`) in the work tree.
    fn ask_git(&self, role: Role) -> Result<Signature<'static>> {
        let var = match role {
            Role::Author => "GIT_AUTHOR_IDENT",
            Role::Committer => "GIT_COMMITTER_IDENT",
        };
        let out = std::process::Command::new("git")
            .args([OsString::from("var"), OsString::from(var)])
            .current_dir(&self.top)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                Error::Repository(format!(
                    "your git configuration picks the identity by a condition only git evaluates (`includeIf \"hasconfig:…\"` or GIT_CONFIG_COUNT), and `git` could not be run to ask it: {e} — install git, or set user.name and user.email in this repository (`git config user.email you@example.com`)"
                ))
            })?;
        if !out.status.success() {
            return Err(Error::GitIdentity);
        }
        parse_ident(&String::from_utf8_lossy(&out.stdout)).ok_or(Error::GitIdentity)
    }
}

/// A `Name <email> 1700000000 +0100` line as git prints it.
fn parse_ident(line: &str) -> Option<Signature<'static>> {
    let line = line.trim_end();
    let open = line.rfind('<')?;
    let close = open + line[open..].find('>')?;
    let name = line[..open].trim();
    let email = &line[open + 1..close];
    let mut rest = line[close + 1..].split_whitespace();
    let secs: i64 = rest.next()?.parse().ok()?;
    let zone = rest.next()?;
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits = zone.trim_start_matches(['+', '-']);
    let hours: i32 = digits.get(..2)?.parse().ok()?;
    let minutes: i32 = digits.get(2..4)?.parse().ok()?;
    let time = git2::Time::new(secs, sign * (hours * 60 + minutes));
    Signature::new(name, email, &time).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_ident_lines_are_read_as_git_prints_them() {
        let me = parse_ident("Pat Acme <pat@acme.example> 1700000000 +0130\n").unwrap();
        assert_eq!(me.name(), Ok("Pat Acme"));
        assert_eq!(me.email(), Ok("pat@acme.example"));
        assert_eq!(me.when().seconds(), 1_700_000_000);
        assert_eq!(me.when().offset_minutes(), 90);
        let west = parse_ident("A <a@b> 1 -0800").unwrap();
        assert_eq!(west.when().offset_minutes(), -480);
        assert!(parse_ident("no identity").is_none());
    }
}
