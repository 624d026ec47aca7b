//! Test helpers for temporary git repositories, built with git2 (never the `git` program),
//! and for re-running one test of the current test binary in a child process.
//!
//! Every repository gets a repo-local identity, so tests do not depend on the machine's
//! global git config; the one test about a missing identity runs in a child process with its
//! own `HOME`.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary repository with a work tree on branch `main`.
pub(crate) struct TestRepo {
    pub dir: tempfile::TempDir,
    pub git: git2::Repository,
}

impl TestRepo {
    /// `git init` on `main`, with a local user.name and user.email.
    pub(crate) fn new() -> TestRepo {
        let dir = tempfile::tempdir().unwrap();
        let git = init_at(dir.path());
        TestRepo { dir, git }
    }

    /// The work tree top (canonical).
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// Writes a file (creating folders).
    pub(crate) fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// Reads a file.
    pub(crate) fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.dir.path().join(rel)).unwrap()
    }

    /// True when the file exists (a dangling symlink counts).
    pub(crate) fn exists(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.dir.path().join(rel)).is_ok()
    }

    /// Writes an executable script.
    pub(crate) fn write_script(&self, rel: &str, body: &str) {
        self.write(rel, body);
        let path = self.dir.path().join(rel);
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Stages everything and commits it with git2 directly (set-up, not kern's commit).
    pub(crate) fn commit_all(&self, message: &str) -> git2::Oid {
        let mut index = self.git.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = self.git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Set Up", "setup@example.com").unwrap();
        let parent = self.git.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        self.git
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    /// The index as it is on disk now (the handle's cached copy is reloaded).
    pub(crate) fn fresh_index(&self) -> git2::Index {
        let mut index = self.git.index().unwrap();
        index.read(true).unwrap();
        index
    }

    /// Paths in HEAD's tree (files and symlinks), sorted.
    pub(crate) fn head_files(&self) -> Vec<String> {
        let tree = self.git.head().unwrap().peel_to_tree().unwrap();
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                out.push(format!("{root}{}", entry.name().unwrap()));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        out.sort();
        out
    }

    /// A file's content and mode in HEAD.
    pub(crate) fn head_entry(&self, rel: &str) -> Option<(Vec<u8>, i32)> {
        let tree = self.git.head().ok()?.peel_to_tree().ok()?;
        let entry = tree.get_path(Path::new(rel)).ok()?;
        let blob = self.git.find_blob(entry.id()).ok()?;
        Some((blob.content().to_vec(), entry.filemode()))
    }

    /// The number of commits on HEAD.
    pub(crate) fn commit_count(&self) -> usize {
        let mut walk = self.git.revwalk().unwrap();
        if walk.push_head().is_err() {
            return 0;
        }
        walk.count()
    }

    /// HEAD's message.
    pub(crate) fn head_message(&self) -> String {
        self.git
            .head()
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .message()
            .unwrap()
            .to_string()
    }

    /// Opens the repository through kern.
    pub(crate) fn kern(&self) -> kern::testing::repository::Repository {
        kern::testing::repository::Repository::discover(self.dir.path()).unwrap()
    }
}

/// `git init` at `path` on `main` with a local identity.
pub(crate) fn init_at(path: &Path) -> git2::Repository {
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let git = git2::Repository::init_opts(path, &opts).unwrap();
    let mut config = git.config().unwrap();
    config.set_str("user.name", "Kern Test").unwrap();
    config.set_str("user.email", "kern@example.com").unwrap();
    drop(config);
    git
}

/// A command that re-runs the single test `name` of this test binary, with `CHILD_ENV` set
/// so the test knows it is the child. The child prints `CHILD_MARKER` when its body ran.
pub(crate) fn rerun_test(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1");
    cmd
}

/// Set in a child started by [`rerun_test`].
pub(crate) const CHILD_ENV: &str = "KERN_TEST_CHILD";

/// Printed by a child test when its body ran (so the parent knows it was not filtered out).
pub(crate) const CHILD_MARKER: &str = "kern-test-child-ran";

/// True inside a child started by [`rerun_test`].
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}
