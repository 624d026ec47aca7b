//! Snapshots of HEAD and every ref, to prove that a stage moved no history.
//!
//! The one decision a reader must know: refs are compared by name and target only (a symbolic
//! ref by the name it points to, a direct ref by its object id); reflogs and packing do not
//! count, so `git gc` or `git pack-refs` by an agent is not a change, but any commit, reset,
//! branch, tag or stash is.

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

impl RefsSnapshot {
    /// The commit HEAD resolved to.
    pub fn head_oid(&self) -> Option<git2::Oid> {
        self.head_oid
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
            if t.len() == 40 {
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
