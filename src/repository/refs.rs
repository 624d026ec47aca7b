//! Snapshots of HEAD and every ref, to prove that a stage moved no history, and whose each ref
//! is ([`Ownership`]).
//!
//! Decisions a reader must know:
//! - Refs are compared by name and target only (a symbolic ref by the name it points to, a
//!   direct ref by its object id); reflogs and packing do not count, so `git gc` or `git
//!   pack-refs` by an agent is not a change, but any commit, reset, branch, tag or stash is.
//! - Whose a ref is (DESIGN.md section 4): HEAD, the branch HEAD named when the stage began and
//!   the refs the rest of the run moves forwards are the run's. Everything else — branches
//!   checked out in other worktrees, other branches, `refs/remotes/*`, `refs/stash`, tags,
//!   notes, another kern's branch — is shared with the person and their tools, whom kern
//!   cannot tell from the agent there.

use std::collections::BTreeMap;

use super::{Repository, short};
use crate::error::{Error, Result};

/// HEAD and every ref at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefsSnapshot {
    /// HEAD's symbolic target (`refs/heads/main`), or `None` when detached.
    pub(super) head_target: Option<String>,
    /// The commit HEAD resolves to (`None` on an unborn branch).
    pub(super) head_oid: Option<git2::Oid>,
    /// Every ref: a direct ref's target as hex, a symbolic ref's as `-> name`.
    pub(super) refs: BTreeMap<String, String>,
}

/// Whose a ref is during a stage (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// The run's: moved any way but forwards by a stage, it is put back.
    Run,
    /// Shared with the person and their tools: never put back.
    Shared,
}

/// The refs that are the run's during one stage (see the module docs): the branch HEAD named
/// when the stage began and the refs the rest of the run moves forwards. HEAD itself is always
/// the run's: it is the work tree's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    own: Vec<String>,
}

impl Ownership {
    /// The run's refs: `branch` (HEAD's symbolic target as the stage began, none when
    /// detached) and `forwards` (refs the run itself moves while the stage runs).
    pub fn new(branch: Option<&str>, forwards: &[String]) -> Ownership {
        let mut own: Vec<String> = branch.into_iter().map(str::to_string).collect();
        own.extend(forwards.iter().cloned());
        Ownership { own }
    }

    /// Whose the ref `name` is.
    pub fn whose(&self, name: &str) -> Whose {
        if name == "HEAD" || self.own.iter().any(|o| o == name) {
            Whose::Run
        } else {
            Whose::Shared
        }
    }
}

impl RefsSnapshot {
    /// The commit HEAD resolved to.
    pub fn head_oid(&self) -> Option<git2::Oid> {
        self.head_oid
    }

    /// The commit the direct ref `name` points to, none when it does not exist.
    pub fn target(&self, name: &str) -> Option<git2::Oid> {
        self.refs.get(name).and_then(|t| super::parse_oid(t).ok())
    }

    /// The branch HEAD names (`refs/heads/main`), none when detached.
    pub fn head_target(&self) -> Option<&str> {
        self.head_target.as_deref()
    }

    /// This snapshot with only the refs `ownership` calls the run's (HEAD is always kept).
    pub fn runs_only(&self, ownership: &Ownership) -> RefsSnapshot {
        RefsSnapshot {
            head_target: self.head_target.clone(),
            head_oid: self.head_oid,
            refs: self
                .refs
                .iter()
                .filter(|(name, _)| ownership.whose(name) == Whose::Run)
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect(),
        }
    }

    /// What moved from `self` to `other`, one sentence per change; empty when nothing did.
    pub fn diff(&self, other: &RefsSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        if self.head_target != other.head_target {
            let show = |t: &Option<String>| t.clone().unwrap_or_else(|| "a detached commit".into());
            out.push(format!(
                "HEAD now points to {} (was {})",
                show(&other.head_target),
                show(&self.head_target)
            ));
        }
        if self.head_oid != other.head_oid {
            let show = |o: Option<git2::Oid>| o.map_or_else(|| "nothing".into(), short);
            out.push(format!(
                "HEAD moved from {} to {}",
                show(self.head_oid),
                show(other.head_oid)
            ));
        }
        let shorten = |t: &str| {
            if t.len() == 40 || t.len() == 64 {
                t[..7].to_string()
            } else {
                t.to_string()
            }
        };
        for (name, before) in &self.refs {
            match other.refs.get(name) {
                None => out.push(format!("{name} deleted (was {})", shorten(before))),
                Some(after) if after != before => out.push(format!(
                    "{name} moved from {} to {}",
                    shorten(before),
                    shorten(after)
                )),
                Some(_) => {}
            }
        }
        for (name, after) in &other.refs {
            if !self.refs.contains_key(name) {
                out.push(format!("{name} created at {}", shorten(after)));
            }
        }
        out
    }
}

impl Repository {
    /// HEAD (its symbolic target and commit) and every ref with its target, now.
    pub fn refs_snapshot(&self) -> Result<RefsSnapshot> {
        let head = self
            .repo
            .find_reference("HEAD")
            .map_err(|e| Error::git("reading HEAD", e))?;
        let head_target = head
            .symbolic_target_bytes()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let mut refs = BTreeMap::new();
        let iter = self
            .repo
            .references()
            .map_err(|e| Error::git("listing refs", e))?;
        for reference in iter {
            let reference = reference.map_err(|e| Error::git("listing refs", e))?;
            let name = String::from_utf8_lossy(reference.name_bytes()).into_owned();
            if self.foreign_refs.covers(&name) {
                continue;
            }
            let target = match (reference.target(), reference.symbolic_target_bytes()) {
                (Some(oid), _) => oid.to_string(),
                (None, Some(sym)) => format!("-> {}", String::from_utf8_lossy(sym)),
                (None, None) => "?".to_string(),
            };
            refs.insert(name, target);
        }
        Ok(RefsSnapshot {
            head_target,
            head_oid: self.head_oid(),
            refs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_owns_head_its_branch_and_the_refs_it_moves_itself() {
        let serial = Ownership::new(Some("refs/heads/main"), &[]);
        let job = Ownership::new(
            Some("refs/heads/kern/add-x"),
            &["refs/heads/main".to_string()],
        );
        let detached = Ownership::new(None, &[]);
        for (ownership, name, whose) in [
            (&serial, "HEAD", Whose::Run),
            (&serial, "refs/heads/main", Whose::Run),
            (&serial, "refs/heads/feature", Whose::Shared),
            (&serial, "refs/heads/main-2", Whose::Shared),
            (&serial, "refs/remotes/origin/main", Whose::Shared),
            (&serial, "refs/stash", Whose::Shared),
            (&serial, "refs/tags/v1", Whose::Shared),
            (&serial, "refs/notes/commits", Whose::Shared),
            (&serial, "refs/kern/saved/x/research-1", Whose::Shared),
            (&job, "refs/heads/kern/add-x", Whose::Run),
            (&job, "refs/heads/main", Whose::Run),
            (&job, "refs/heads/kern/other-task", Whose::Shared),
            (&detached, "HEAD", Whose::Run),
            (&detached, "refs/heads/main", Whose::Shared),
        ] {
            assert_eq!(ownership.whose(name), whose, "{name} in {ownership:?}");
        }
    }

    #[test]
    fn diff_names_every_kind_of_move() {
        let a = git2::Oid::from_str("1111111111111111111111111111111111111111").unwrap();
        let b = git2::Oid::from_str("2222222222222222222222222222222222222222").unwrap();
        let before = RefsSnapshot {
            head_target: Some("refs/heads/main".into()),
            head_oid: Some(a),
            refs: BTreeMap::from([
                ("refs/heads/main".to_string(), a.to_string()),
                ("refs/tags/old".to_string(), a.to_string()),
            ]),
        };
        assert!(before.diff(&before.clone()).is_empty());
        let after = RefsSnapshot {
            head_target: None,
            head_oid: Some(b),
            refs: BTreeMap::from([
                ("refs/heads/main".to_string(), b.to_string()),
                ("refs/stash".to_string(), b.to_string()),
            ]),
        };
        assert_eq!(
            before.diff(&after),
            vec![
                "HEAD now points to a detached commit (was refs/heads/main)",
                "HEAD moved from 1111111 to 2222222",
                "refs/heads/main moved from 1111111 to 2222222",
                "refs/tags/old deleted (was 1111111)",
                "refs/stash created at 2222222",
            ]
        );
    }
}
