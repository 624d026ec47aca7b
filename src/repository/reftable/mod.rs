//! Refs of a reftable repository (`extensions.refStorage = reftable`, Git 3.0's default), which
//! libgit2 cannot read: a libgit2 refdb backend whose reads and writes are git's own plumbing,
//! installed at open ([`install`]) for such a repository only. Everything else of libgit2 —
//! objects, the index, status, commits — is unchanged and sees the refs through it, so the rest
//! of kern never knows which ref store a repository has.
//!
//! Decisions a reader must know:
//! - Reads: one `git for-each-ref --include-root-refs` (plus `git symbolic-ref HEAD` when HEAD
//!   names an unborn branch) lists every ref; the list is kept while the reftable's
//!   `tables.list` files are byte for byte the same (every ref update and compaction rewrites
//!   them), so a run asks git again only after a ref moved.
//! - Writes: `git update-ref --no-deref --stdin`, always with the old value libgit2 expects
//!   (`update <ref> <new> <old>`, `create`, `delete <ref> <old>`): a ref someone else moved
//!   meanwhile is `GIT_EMODIFIED`, as with the files backend. git writes the reflog (with git's
//!   identity), atomically, so a kill -9 leaves the refs as they were or as written.
//! - Reflogs cannot be read through it (libgit2 has no way for a backend to build one): a
//!   reflog read is "not found", which kern treats as "nothing known" (a stash moved by an
//!   agent is then kept under `refs/kern/saved/`, as any other moved shared ref). Renaming a
//!   ref, reflog writes and ref transactions are refused; kern uses none of them.
//! - No panic crosses into C: every callback runs inside `catch_unwind`, and returns -1 with
//!   a libgit2 error message when anything fails.
//! - All of libgit2's C interface — the backend's vtable of callbacks, every `unsafe` block —
//!   is `ffi.rs`, a thin translation onto this file's safe [`Store`]: which refs there are, and
//!   the `update-ref` commands a write or a delete sends (pure, table-tested here).

mod ffi;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use git2::Oid;

/// True when the repository keeps its refs in reftable files.
pub(super) fn is_reftable(config: &git2::Config) -> bool {
    config
        .get_string("extensions.refstorage")
        .is_ok_and(|v| v.eq_ignore_ascii_case("reftable"))
}

/// Where a ref points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Direct(Oid),
    Symbolic(String),
}

/// Every ref, as git listed it while the `tables.list` files held `key`.
struct Listing {
    key: Vec<Option<Vec<u8>>>,
    refs: Arc<BTreeMap<String, Target>>,
}

/// The repository as git sees it, and the last listing of its refs.
pub(super) struct Store {
    git_dir: PathBuf,
    format: git2::ObjectFormat,
    tables: Vec<PathBuf>,
    listing: Mutex<Option<Listing>>,
}

impl Store {
    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(&self.git_dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_COMMON_DIR")
            .env_remove("GIT_INDEX_FILE")
            .stdin(Stdio::null());
        cmd
    }

    fn key(&self) -> Vec<Option<Vec<u8>>> {
        self.tables.iter().map(|t| std::fs::read(t).ok()).collect()
    }

    /// Every ref now (HEAD and the root refs among them).
    pub(super) fn refs(&self) -> Result<Arc<BTreeMap<String, Target>>, String> {
        let key = self.key();
        let mut guard = self
            .listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A `tables.list` that cannot be read says nothing about change: ask git every time.
        if let Some(listing) = guard.as_ref()
            && listing.key == key
            && key.iter().all(Option::is_some)
        {
            return Ok(Arc::clone(&listing.refs));
        }
        let refs = Arc::new(self.list()?);
        *guard = Some(Listing {
            key,
            refs: Arc::clone(&refs),
        });
        Ok(refs)
    }

    fn list(&self) -> Result<BTreeMap<String, Target>, String> {
        let out = self
            .git()
            .args([
                "for-each-ref",
                "--include-root-refs",
                "--format=%(refname)%00%(objectname)%00%(symref)",
            ])
            .output()
            .map_err(|e| format!("cannot run `git for-each-ref`: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`git for-each-ref` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let mut refs = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut parts = line.split('\0');
            let (Some(name), Some(id), symref) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let target = match symref.filter(|s| !s.is_empty()) {
                Some(to) => Target::Symbolic(to.to_string()),
                None => match Oid::from_str_ext(id, self.format) {
                    Ok(oid) => Target::Direct(oid),
                    Err(_) => continue,
                },
            };
            refs.insert(name.to_string(), target);
        }
        if !refs.contains_key("HEAD") {
            // HEAD names a branch with no commit yet: for-each-ref leaves it out.
            let out = self
                .git()
                .args(["symbolic-ref", "-q", "HEAD"])
                .output()
                .map_err(|e| format!("cannot run `git symbolic-ref`: {e}"))?;
            let to = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !to.is_empty() {
                refs.insert("HEAD".into(), Target::Symbolic(to));
            }
        }
        Ok(refs)
    }

    /// Runs `commands` through one `git update-ref --no-deref --stdin` (one transaction).
    pub(super) fn update(&self, commands: &str, message: Option<&str>) -> Result<(), Refused> {
        let mut cmd = self.git();
        cmd.args(["update-ref", "--no-deref"]);
        if let Some(message) = message.filter(|m| !m.is_empty()) {
            cmd.arg("-m").arg(message.replace('\n', " "));
        }
        cmd.arg("--stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let result = (|| {
            let mut child = cmd.spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(commands.as_bytes())?;
            }
            child.wait_with_output()
        })();
        *self
            .listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        let out = result.map_err(|e| Refused {
            why: Why::Failed,
            message: format!("cannot run `git update-ref`: {e}"),
        })?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let why = if err.contains("already exists") {
            Why::Exists
        } else if err.contains("but expected") || err.contains("is at") {
            Why::Modified
        } else {
            Why::Failed
        };
        Err(Refused {
            why,
            message: format!("`git update-ref` refused `{}`: {err}", commands.trim()),
        })
    }

    /// The refs under `refs/` whose names match `glob` (all with none), in name order: what
    /// the files backend iterates (HEAD and the other root refs left out).
    pub(super) fn under_refs(&self, glob: Option<&str>) -> Result<Vec<(String, Target)>, String> {
        let refs = self.refs()?;
        let matcher = match glob.map(|g| globset::Glob::new(g).map(|g| g.compile_matcher())) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => return Err(format!("bad ref pattern: {e}")),
            None => None,
        };
        Ok(refs
            .range::<str, _>((
                std::ops::Bound::Included("refs/"),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(name, _)| name.starts_with("refs/"))
            .filter(|(name, _)| matcher.as_ref().is_none_or(|m| m.is_match(name)))
            .map(|(name, target)| (name.clone(), target.clone()))
            .collect())
    }
}

/// Makes libgit2 read and write the refs of the reftable repository `repo` through git (see
/// the module docs). An error says why git could not list them (no git, or one too old).
pub(in crate::repository) fn install(repo: &git2::Repository) -> Result<(), String> {
    let git_dir = repo.path().to_path_buf();
    let common = repo.commondir().to_path_buf();
    let mut tables = vec![common.join("reftable").join("tables.list")];
    if git_dir.components().ne(common.components()) {
        tables.push(git_dir.join("reftable").join("tables.list"));
    }
    let store = Store {
        git_dir,
        format: repo.object_format(),
        tables,
        listing: Mutex::new(None),
    };
    store.refs()?;
    ffi::install(repo, store)
}

/// Why git refused a ref update: libgit2's error codes for it are the backend's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// A ref to create exists (`GIT_EEXISTS`).
    Exists,
    /// The ref is no longer at the expected old value (`GIT_EMODIFIED`).
    Modified,
    /// Anything else.
    Failed,
}

/// A ref update git refused, and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    /// Why.
    pub(super) why: Why,
    /// git's message, with the commands it refused.
    pub(super) message: String,
}

/// The `update-ref --stdin` line that deletes `name`, if it still is what `old` and
/// `old_target` say (neither: whatever it is now).
pub(super) fn delete_command(name: &str, old: Option<&str>, old_target: Option<&str>) -> String {
    match (old, old_target) {
        (Some(old), _) => format!("delete {name} {old}\n"),
        (None, Some(to)) => format!("symref-delete {name} {to}\n"),
        (None, None) => format!("delete {name}\n"),
    }
}

/// The `update-ref --stdin` line that makes `name` what `new` says, if it still is what `old`
/// and `old_target` say (`force` without either: whatever it is now; neither and no force: it
/// must not exist).
pub(super) fn write_command(
    name: &str,
    new: &Target,
    force: bool,
    old: Option<&str>,
    old_target: Option<&str>,
) -> String {
    match new {
        Target::Direct(oid) => match (old, old_target) {
            (Some(old), _) => format!("update {name} {oid} {old}\n"),
            (None, Some(to)) => format!("symref-verify {name} {to}\nupdate {name} {oid}\n"),
            (None, None) if force => format!("update {name} {oid}\n"),
            (None, None) => format!("create {name} {oid}\n"),
        },
        Target::Symbolic(to) => match (old, old_target) {
            (Some(old), _) => format!("symref-update {name} {to} oid {old}\n"),
            (None, Some(was)) => format!("symref-update {name} {to} ref {was}\n"),
            (None, None) if force => format!("symref-update {name} {to}\n"),
            (None, None) => format!("symref-create {name} {to}\n"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_keeps_its_expected_old_value() {
        let oid = Oid::from_str("1111111111111111111111111111111111111111").unwrap();
        let direct = Target::Direct(oid);
        let to = Target::Symbolic("refs/heads/b".into());
        let cases = [
            (
                &direct,
                false,
                Some("2222"),
                None,
                format!("update r {oid} 2222\n"),
            ),
            (&direct, true, None, None, format!("update r {oid}\n")),
            (&direct, false, None, None, format!("create r {oid}\n")),
            (
                &direct,
                true,
                None,
                Some("refs/heads/a"),
                format!("symref-verify r refs/heads/a\nupdate r {oid}\n"),
            ),
            (
                &to,
                false,
                None,
                None,
                "symref-create r refs/heads/b\n".into(),
            ),
            (
                &to,
                true,
                None,
                Some("refs/heads/a"),
                "symref-update r refs/heads/b ref refs/heads/a\n".into(),
            ),
            (
                &to,
                true,
                Some("2222"),
                None,
                "symref-update r refs/heads/b oid 2222\n".into(),
            ),
        ];
        for (new, force, old, old_target, want) in cases {
            assert_eq!(write_command("r", new, force, old, old_target), want);
        }
    }

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn libgit2_reads_and_writes_reftable_refs_through_git_with_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        git(top, &["init", "-q", "-b", "main", "--ref-format=reftable"]);
        super::super::accept_formats();
        let repo = git2::Repository::open(top).unwrap();
        assert!(repo.config().is_ok_and(|c| is_reftable(&c)));
        install(&repo).unwrap();
        // Unborn: HEAD names main, which does not exist yet.
        assert_eq!(
            repo.find_reference("HEAD")
                .unwrap()
                .symbolic_target()
                .unwrap(),
            Some("refs/heads/main")
        );
        assert!(repo.head().is_err());
        let sig = git2::Signature::now("T", "t@example.com").unwrap();
        let tree = repo
            .find_tree(repo.index().unwrap().write_tree().unwrap())
            .unwrap();
        let one = repo
            .commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
            .unwrap();
        assert_eq!(git(top, &["rev-parse", "main"]).trim(), one.to_string());
        let first = repo.find_commit(one).unwrap();
        let two = repo
            .commit(Some("HEAD"), &sig, &sig, "two", &tree, &[&first])
            .unwrap();
        assert_eq!(repo.head().unwrap().target(), Some(two));
        assert_eq!(
            git(top, &["reflog", "--format=%gs", "main"]),
            "commit: two\ncommit (initial): one\n"
        );
        // Someone else moves main: a write expecting the old value is refused, not applied.
        git(top, &["update-ref", "refs/heads/main", &one.to_string()]);
        let stale = repo
            .reference_matching("refs/heads/main", two, true, two, "stale")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(stale.code(), git2::ErrorCode::Modified, "{stale}");
        assert_eq!(git(top, &["rev-parse", "main"]).trim(), one.to_string());
        // Creating what exists is refused; forcing it is not.
        let exists = repo
            .reference("refs/heads/main", two, false, "again")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(exists.code(), git2::ErrorCode::Exists, "{exists}");
        repo.reference("refs/kern/saved/a/x", two, true, "keep")
            .unwrap();
        repo.reference("refs/kern/saved/b", one, true, "keep")
            .unwrap();
        let names = |glob: &str| -> Vec<String> {
            repo.references_glob(glob)
                .unwrap()
                .map(|r| r.unwrap().name().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names("refs/kern/saved/*"),
            ["refs/kern/saved/a/x", "refs/kern/saved/b"]
        );
        assert_eq!(
            repo.references().unwrap().count(),
            3,
            "refs/ only, HEAD apart"
        );
        // Deleting checks the old value too.
        let mut saved = repo.find_reference("refs/kern/saved/b").unwrap();
        git(top, &["update-ref", "refs/kern/saved/b", &two.to_string()]);
        assert!(saved.delete().is_err());
        repo.find_reference("refs/kern/saved/b")
            .unwrap()
            .delete()
            .unwrap();
        assert_eq!(names("refs/kern/saved/*"), ["refs/kern/saved/a/x"]);
        let fsck = Command::new("git")
            .args(["fsck", "--strict", "--no-progress"])
            .current_dir(top)
            .output()
            .unwrap();
        assert!(fsck.status.success() && fsck.stderr.is_empty(), "{fsck:?}");
    }

    #[test]
    fn the_store_answers_in_safe_types_and_refuses_what_moved() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        git(top, &["init", "-q", "-b", "main", "--ref-format=reftable"]);
        git(
            top,
            &[
                "-c",
                "user.name=T",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "one",
            ],
        );
        let one = git(top, &["rev-parse", "HEAD"]).trim().to_string();
        let repo = git2::Repository::open(top).unwrap();
        let store = Store {
            git_dir: repo.path().to_path_buf(),
            format: repo.object_format(),
            tables: vec![repo.path().join("reftable").join("tables.list")],
            listing: Mutex::new(None),
        };
        let oid = Oid::from_str(&one).unwrap();
        store
            .update(
                &write_command("refs/kern/a", &Target::Direct(oid), false, None, None),
                None,
            )
            .unwrap();
        let again = store
            .update(
                &write_command("refs/kern/a", &Target::Direct(oid), false, None, None),
                None,
            )
            .unwrap_err();
        assert_eq!(again.why, Why::Exists, "{}", again.message);
        let stale = "0000000000000000000000000000000000000001";
        let moved = store
            .update(&delete_command("refs/kern/a", Some(stale), None), None)
            .unwrap_err();
        assert_eq!(moved.why, Why::Modified, "{}", moved.message);
        assert_eq!(
            store.under_refs(Some("refs/kern/*")).unwrap(),
            [("refs/kern/a".to_string(), Target::Direct(oid))]
        );
        assert_eq!(
            store.under_refs(None).unwrap().len(),
            2,
            "refs/heads/main and refs/kern/a; HEAD is a root ref"
        );
        assert!(store.under_refs(Some("refs/[")).is_err());
        store
            .update(&delete_command("refs/kern/a", Some(&one), None), None)
            .unwrap();
        assert!(store.under_refs(Some("refs/kern/*")).unwrap().is_empty());
    }

    #[test]
    fn a_delete_keeps_its_expected_old_value() {
        for (old, target, want) in [
            (Some("2222"), None, "delete r 2222\n"),
            (None, Some("refs/heads/a"), "symref-delete r refs/heads/a\n"),
            (None, None, "delete r\n"),
        ] {
            assert_eq!(delete_command("r", old, target), want);
        }
    }
}
