//! The paths whose entries differ between two trees, found entry by entry, never descending
//! into a folder whose tree is the same on both sides.
//!
//! The one decision a reader must know: libgit2's tree-to-tree diff flattens both trees and
//! reads every tree object of each, so comparing HEAD before and after a one-file commit reads
//! 2,000 trees on a 100,000-file repository (and keeps them in libgit2's object cache); this
//! walk reads only the trees on the changed paths. It compares ids and modes, no content, and
//! names each changed path once: a file that became a folder is the file (gone) and the
//! folder's files (new).

use std::collections::BTreeMap;

use git2::{ObjectType, Oid};

/// One side of a changed path: its object id and mode, `None` when absent on that side.
pub(super) type Side = Option<(Oid, i32)>;

/// What to do with a folder whose trees differ, or with a changed path.
pub(super) trait TreeVisitor {
    /// `false` skips the folder `path` (relative, with its trailing `/`): nothing under it is
    /// reported.
    fn enter(&mut self, _path: &[u8]) -> bool {
        true
    }

    /// A path (relative, no trailing `/`) whose entry differs; `false` stops the walk.
    fn changed(&mut self, path: &[u8], old: Side, new: Side) -> bool;
}

/// Walks the differences between the trees `old` and `new` (`None`: the empty tree) in git's
/// order, telling `visitor`. `false` when the visitor stopped the walk.
pub(super) fn walk(
    repo: &git2::Repository,
    old: Option<Oid>,
    new: Option<Oid>,
    visitor: &mut dyn TreeVisitor,
) -> Result<bool, git2::Error> {
    let mut prefix = Vec::new();
    compare(repo, &mut prefix, old, new, visitor)
}

/// Every path that differs between `old` and `new`, in git's order.
pub(super) fn changed_paths(
    repo: &git2::Repository,
    old: Option<Oid>,
    new: Option<Oid>,
) -> Result<Vec<Vec<u8>>, git2::Error> {
    struct All(Vec<Vec<u8>>);
    impl TreeVisitor for All {
        fn changed(&mut self, path: &[u8], _: Side, _: Side) -> bool {
            self.0.push(path.to_vec());
            true
        }
    }
    let mut all = All(Vec::new());
    walk(repo, old, new, &mut all)?;
    Ok(all.0)
}

/// [`walk`] for the folder `prefix` (empty, or ending in `/`).
fn compare(
    repo: &git2::Repository,
    prefix: &mut Vec<u8>,
    old: Option<Oid>,
    new: Option<Oid>,
    visitor: &mut dyn TreeVisitor,
) -> Result<bool, git2::Error> {
    if old == new {
        return Ok(true);
    }
    let (old, new) = (entries(repo, old)?, entries(repo, new)?);
    let mut names: Vec<&Vec<u8>> = old.keys().chain(new.keys()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let (a, b) = (old.get(name).copied(), new.get(name).copied());
        if a == b {
            continue;
        }
        let len = prefix.len();
        prefix.extend_from_slice(name);
        let go_on = if name.ends_with(b"/") {
            !visitor.enter(prefix)
                || compare(repo, prefix, a.map(|a| a.0), b.map(|b| b.0), visitor)?
        } else {
            visitor.changed(prefix, a, b)
        };
        prefix.truncate(len);
        if !go_on {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A tree's entries keyed as git orders them: a folder's name with its `/`.
fn entries(
    repo: &git2::Repository,
    tree: Option<Oid>,
) -> Result<BTreeMap<Vec<u8>, (Oid, i32)>, git2::Error> {
    let mut out = BTreeMap::new();
    if let Some(id) = tree {
        for entry in &repo.find_tree(id)? {
            let mut name = entry.name_bytes().to_vec();
            if entry.kind() == Some(ObjectType::Tree) {
                name.push(b'/');
            }
            out.insert(name, (entry.id(), entry.filemode()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of `files` (path, content); a `.sh` file is executable.
    fn tree(repo: &git2::Repository, files: &[(&str, &str)]) -> Oid {
        let mut index = git2::Index::new().unwrap();
        for (path, content) in files {
            let id = repo.blob(content.as_bytes()).unwrap();
            let exec = std::path::Path::new(path)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("sh"));
            let mode = if exec { 0o100755 } else { 0o100644 };
            index
                .add(&crate::repository::index_entries::bare_entry(
                    path.as_bytes().to_vec(),
                    mode,
                    id,
                ))
                .unwrap();
        }
        index.write_tree_to(repo).unwrap()
    }

    fn shown(paths: Vec<Vec<u8>>) -> Vec<String> {
        paths
            .into_iter()
            .map(|p| String::from_utf8(p).unwrap())
            .collect()
    }

    #[test]
    fn names_what_libgit2s_diff_names_without_reading_equal_folders() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let before = tree(
            &repo,
            &[
                ("a.txt", "a"),
                ("same/x.txt", "x"),
                ("same/deep/y.txt", "y"),
                ("d/edit.txt", "1"),
                ("d/gone.txt", "g"),
                ("d/run.sh", "#!"),
                ("file-then-folder", "f"),
                ("z.txt", "z"),
            ],
        );
        let after = tree(
            &repo,
            &[
                ("a.txt", "a"),
                ("same/x.txt", "x"),
                ("same/deep/y.txt", "y"),
                ("d/edit.txt", "2"),
                ("d/new.txt", "n"),
                ("d/run", "#!"),
                ("file-then-folder/inside.txt", "i"),
                ("new/deeper/w.txt", "w"),
                ("z.txt", "z"),
            ],
        );
        let ours = shown(changed_paths(&repo, Some(before), Some(after)).unwrap());
        assert_eq!(
            ours,
            [
                "d/edit.txt",
                "d/gone.txt",
                "d/new.txt",
                "d/run",
                "d/run.sh",
                "file-then-folder",
                "file-then-folder/inside.txt",
                "new/deeper/w.txt",
            ]
        );
        // The same set as libgit2's own diff.
        let (a, b) = (
            repo.find_tree(before).unwrap(),
            repo.find_tree(after).unwrap(),
        );
        let diff = repo.diff_tree_to_tree(Some(&a), Some(&b), None).unwrap();
        let mut theirs: Vec<String> = diff
            .deltas()
            .map(|d| {
                let p = d.new_file().path().or(d.old_file().path()).unwrap();
                p.to_str().unwrap().to_string()
            })
            .collect();
        theirs.sort();
        let mut sorted = ours.clone();
        sorted.sort();
        assert_eq!(sorted, theirs);
        // Against the empty tree, and of a tree with itself.
        assert_eq!(changed_paths(&repo, None, Some(before)).unwrap().len(), 8);
        assert!(
            changed_paths(&repo, Some(after), Some(after))
                .unwrap()
                .is_empty()
        );
        // A mode change alone is a change.
        let exec = tree(&repo, &[("a.sh", "s")]);
        let plain = {
            let id = repo.blob(b"s").unwrap();
            let mut index = git2::Index::new().unwrap();
            index
                .add(&crate::repository::index_entries::bare_entry(
                    b"a.sh".to_vec(),
                    0o100644,
                    id,
                ))
                .unwrap();
            index.write_tree_to(&repo).unwrap()
        };
        assert_eq!(
            shown(changed_paths(&repo, Some(exec), Some(plain)).unwrap()),
            ["a.sh"]
        );
    }

    #[test]
    fn a_visitor_skips_folders_and_stops_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let after = tree(
            &repo,
            &[
                ("a/1.txt", "1"),
                ("b/2.txt", "2"),
                ("c/3.txt", "3"),
                ("d.txt", "4"),
            ],
        );
        struct Some2 {
            seen: Vec<String>,
        }
        impl TreeVisitor for Some2 {
            fn enter(&mut self, path: &[u8]) -> bool {
                path != b"b/"
            }
            fn changed(&mut self, path: &[u8], old: Side, new: Side) -> bool {
                assert!(old.is_none() && new.is_some());
                self.seen.push(String::from_utf8(path.to_vec()).unwrap());
                self.seen.len() < 2
            }
        }
        let mut v = Some2 { seen: Vec::new() };
        assert!(!walk(&repo, None, Some(after), &mut v).unwrap());
        assert_eq!(v.seen, ["a/1.txt", "c/3.txt"]);
    }
}
