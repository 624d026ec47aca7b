//! The index written as a tree — the tree `git write-tree` writes — reading and writing only
//! the folders that differ from a base tree (HEAD's).
//!
//! The one decision a reader must know: libgit2's `git_index_write_tree` reuses its tree cache
//! for the folders no entry changed, but after writing it reads the whole new tree back to
//! rebuild that cache — every tree object of HEAD (1,001 on 100,000 files), whatever changed —
//! which brings most of the pack's index into memory at the commit, the run's largest moment
//! (1.7 MB of 33 MiB). Here every folder's tree is hashed from the index's entries (no object
//! read), the new ids are compared with the base's from the top down (reading only the base's
//! trees on changed paths), and only the trees that differ are checked and written. libgit2's
//! own tree cache is left as it is, invalid along the changed paths; git treats that as a cache
//! to rebuild, no more. Anything this does not handle exactly as libgit2 — unmerged or
//! intent-to-add entries, an index not in byte order (a case-insensitive one), a mode or a name
//! a tree may not hold, an object that is not there — goes to libgit2's writer, which writes it
//! or refuses it with its own words.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use git2::{Index, IndexEntryExtendedFlag, ObjectType, Oid};

/// The modes a tree entry may have (a folder's is written by this module).
const MODES: [u32; 4] = [0o100_644, 0o100_755, 0o120_000, 0o160_000];
/// A folder's mode in a tree.
const MODE_TREE: u32 = 0o40_000;

/// Writes `index` as a tree of `repo` and returns its id: only the folders whose trees differ
/// from `base`'s (`None`: no base, every folder) are written, after libgit2's checks of their
/// entries. Falls back to libgit2's writer for what it alone handles (see the module docs).
pub(super) fn write_index_tree(
    repo: &git2::Repository,
    index: &mut Index,
    base: Option<Oid>,
) -> Result<Oid, git2::Error> {
    match write_changed(repo, index, base)? {
        Some(id) => Ok(id),
        None => index.write_tree_to(repo),
    }
}

/// [`write_index_tree`] without the fallback: `None` when the index holds what only libgit2's
/// writer handles.
fn write_changed(
    repo: &git2::Repository,
    index: &Index,
    base: Option<Oid>,
) -> Result<Option<Oid>, git2::Error> {
    if index.has_conflicts() {
        return Ok(None);
    }
    let format = repo.object_format();
    // The first pass: every folder's id, hashed, nothing read or written.
    let mut ids: BTreeMap<Vec<u8>, Oid> = BTreeMap::new();
    let hashed = fold(index, |folder, entries| {
        let id = Oid::hash_object_ext(ObjectType::Tree, &serialize(entries), format).ok()?;
        ids.insert(folder.to_vec(), id);
        Some(id)
    });
    let Some(root) = hashed else {
        return Ok(None);
    };
    let changed = changed_folders(repo, &ids, base)?;
    if changed.is_empty() {
        return Ok(Some(root));
    }
    // The second pass: the changed folders checked as libgit2 checks them, and written.
    let odb = repo.odb()?;
    let mut failure = None;
    let written = fold(index, |folder, entries| {
        let known = ids.get(folder).copied();
        if !changed.contains(folder) {
            return known;
        }
        if !entries.iter().all(|e| acceptable(&odb, e)) {
            return None;
        }
        match odb.write(ObjectType::Tree, &serialize(entries)) {
            Ok(id) if Some(id) == known => Some(id),
            Ok(_) => None,
            Err(e) => {
                failure = Some(e);
                None
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(written)
}

/// A tree entry: its name, mode and object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: Vec<u8>,
    mode: u32,
    id: Oid,
}

/// Visits every folder of `index` bottom-up — its path (empty for the top, no trailing `/`)
/// and its entries in tree order, each subfolder with the id `visit` returned for it — and
/// returns the top's id. `None` when `visit` refused a folder, or the index holds what only
/// libgit2 writes: an entry unmerged or intent-to-add, paths not in strict byte order, a mode
/// no tree holds, a file and a folder of one name.
fn fold(index: &Index, mut visit: impl FnMut(&[u8], &[Entry]) -> Option<Oid>) -> Option<Oid> {
    // The open folders, the top first: each one's path and the entries found so far.
    let mut open: Vec<(Vec<u8>, Vec<Entry>)> = vec![(Vec::new(), Vec::new())];
    let mut previous: Option<Vec<u8>> = None;
    for entry in index.iter() {
        let stage = (entry.flags >> 12) & 3;
        let intent = IndexEntryExtendedFlag::INTENT_TO_ADD.bits();
        if stage != 0 || entry.flags_extended & intent != 0 || !MODES.contains(&entry.mode) {
            return None;
        }
        if previous.as_ref().is_some_and(|p| *p >= entry.path) {
            return None;
        }
        let path = &entry.path;
        // Close the open folders this path is not inside.
        while open.len() > 1 && !inside(path, &open[open.len() - 1].0) {
            close(&mut open, &mut visit)?;
        }
        // Open the folders between the innermost open one and the file.
        let (parent, _) = &open[open.len() - 1];
        let start = if parent.is_empty() {
            0
        } else {
            parent.len() + 1
        };
        let mut from = start;
        while let Some(slash) = path[from..].iter().position(|&b| b == b'/') {
            open.push((path[..from + slash].to_vec(), Vec::new()));
            from += slash + 1;
        }
        let last = open.len() - 1;
        open[last].1.push(Entry {
            name: path[from..].to_vec(),
            mode: entry.mode,
            id: entry.id,
        });
        previous = Some(entry.path);
    }
    while open.len() > 1 {
        close(&mut open, &mut visit)?;
    }
    let (top, mut entries) = open.pop()?;
    sort(&mut entries)?;
    visit(&top, &entries)
}

/// Closes the innermost open folder: its id, through `visit`, becomes an entry of its parent.
fn close(
    open: &mut Vec<(Vec<u8>, Vec<Entry>)>,
    visit: &mut impl FnMut(&[u8], &[Entry]) -> Option<Oid>,
) -> Option<()> {
    let (path, mut entries) = open.pop()?;
    sort(&mut entries)?;
    let id = visit(&path, &entries)?;
    let name = path.rsplit(|&b| b == b'/').next()?.to_vec();
    open.last_mut()?.1.push(Entry {
        name,
        mode: MODE_TREE,
        id,
    });
    Some(())
}

/// Whether `path` is inside the folder `folder` (not the top).
fn inside(path: &[u8], folder: &[u8]) -> bool {
    path.len() > folder.len() && path.starts_with(folder) && path[folder.len()] == b'/'
}

/// Puts a folder's entries in git's tree order (a folder's name compared as if it ended in
/// `/`); `None` when two entries share a name.
fn sort(entries: &mut [Entry]) -> Option<()> {
    entries.sort_by(tree_order);
    // A file and a folder of one name are not neighbours in tree order (`a`, `a.txt`, `a/`).
    let mut names: Vec<&[u8]> = entries.iter().map(|e| e.name.as_slice()).collect();
    names.sort_unstable();
    names.windows(2).all(|w| w[0] != w[1]).then_some(())
}

/// git's order of a tree's entries.
fn tree_order(a: &Entry, b: &Entry) -> Ordering {
    fn key(e: &Entry) -> impl Iterator<Item = u8> + '_ {
        let slash = (e.mode == MODE_TREE).then_some(b'/');
        e.name.iter().copied().chain(slash)
    }
    key(a).cmp(key(b))
}

/// A tree object's content: per entry, its mode in octal, a space, its name, a NUL and its id.
fn serialize(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * 64);
    for e in entries {
        out.extend_from_slice(format!("{:o} ", e.mode).as_bytes());
        out.extend_from_slice(&e.name);
        out.push(0);
        out.extend_from_slice(e.id.as_bytes());
    }
    out
}

/// Whether libgit2 would take `entry` into a tree it writes: a name a tree may hold (not
/// empty, `.`, `..`, nor anything that could be read as `.git` — those are left to libgit2),
/// an id that is not zero, and for a file an object of the kind its mode says. A subfolder's
/// entry's tree was written by this module.
fn acceptable(odb: &git2::Odb<'_>, entry: &Entry) -> bool {
    if !plain_name(&entry.name) || entry.id.is_zero() {
        return false;
    }
    entry.mode == MODE_TREE
        || entry.mode == 0o160_000
        || odb
            .read_header(entry.id)
            .is_ok_and(|(_, kind)| kind == ObjectType::Blob)
}

/// A name no repository setting makes a tree refuse: not empty, `.` or `..`, and not one of
/// the ways to spell `.git` on a file system that ignores case, trailing dots and spaces,
/// some Unicode characters, or reads a short name (`GIT~1`) or a stream (`.git::$DATA`).
fn plain_name(name: &[u8]) -> bool {
    if name.is_empty() || name == b"." || name == b".." {
        return false;
    }
    let bare: Vec<u8> = name
        .iter()
        .filter(|&&b| b != b'.' && b != b' ' && b < 0x80)
        .map(u8::to_ascii_lowercase)
        .collect();
    !(bare == b"git" || bare.starts_with(b"git~") || bare.starts_with(b"git:"))
}

/// The folders (paths as [`fold`] names them) whose new ids in `ids` differ from `base`'s
/// trees at the same paths, found from the top down: a folder whose id is the base's is not
/// entered, so only the base's trees on changed paths are read.
fn changed_folders(
    repo: &git2::Repository,
    ids: &BTreeMap<Vec<u8>, Oid>,
    base: Option<Oid>,
) -> Result<BTreeSet<Vec<u8>>, git2::Error> {
    let mut changed = BTreeSet::new();
    let mut todo: Vec<(Vec<u8>, Option<Oid>)> = vec![(Vec::new(), base)];
    while let Some((folder, was)) = todo.pop() {
        if ids.get(&folder).copied() == was {
            continue;
        }
        let tree = match was {
            Some(id) => Some(repo.find_tree(id)?),
            None => None,
        };
        for child in children(ids, &folder) {
            let name = &child[child.len() - child_name_len(&child, &folder)..];
            let before = tree
                .as_ref()
                .and_then(|t| t.get_name_bytes(name))
                .filter(|e| e.kind() == Some(ObjectType::Tree))
                .map(|e| e.id());
            todo.push((child, before));
        }
        changed.insert(folder);
    }
    Ok(changed)
}

/// The folders of `ids` directly inside `folder`.
fn children(ids: &BTreeMap<Vec<u8>, Oid>, folder: &[u8]) -> Vec<Vec<u8>> {
    let mut prefix = folder.to_vec();
    if !prefix.is_empty() {
        prefix.push(b'/');
    }
    ids.range(prefix.clone()..)
        .map(|(path, _)| path)
        .take_while(|path| path.starts_with(&prefix))
        .filter(|path| path.len() > prefix.len() && !path[prefix.len()..].contains(&b'/'))
        .cloned()
        .collect()
}

/// The length of `child`'s own name, `child` being directly inside `folder`.
fn child_name_len(child: &[u8], folder: &[u8]) -> usize {
    if folder.is_empty() {
        child.len()
    } else {
        child.len() - folder.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repository::index_entries::bare_entry;
    use git2::{ObjectFormat, Repository, RepositoryInitOptions};
    use proptest::prelude::*;

    fn init(format: ObjectFormat) -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_opts(
            dir.path(),
            RepositoryInitOptions::new().object_format(format),
        )
        .unwrap();
        (dir, repo)
    }

    /// An in-memory index of `entries` (path, mode, content); a gitlink's content names its
    /// commit. Entries libgit2 refuses (a file where a folder is) are left out.
    fn index_of(repo: &Repository, entries: &[(String, u32, String)]) -> Index {
        let mut index = Index::new_ext(repo.object_format()).unwrap();
        for (path, mode, text) in entries {
            let id = if *mode == 0o160_000 {
                Oid::hash_object_ext(ObjectType::Commit, text.as_bytes(), repo.object_format())
                    .unwrap()
            } else {
                repo.blob(text.as_bytes()).unwrap()
            };
            let _ = index.add(&bare_entry(path.as_bytes().to_vec(), *mode, id));
        }
        index
    }

    /// libgit2's tree of the same entries, from an index without a tree cache.
    fn libgit2s(repo: &Repository, index: &Index) -> Result<Oid, git2::Error> {
        let mut fresh = Index::new_ext(repo.object_format()).unwrap();
        for entry in index.iter() {
            fresh.add(&entry).unwrap();
        }
        fresh.write_tree_to(repo)
    }

    fn entries() -> impl Strategy<Value = Vec<(String, u32, String)>> {
        // Names around the ones git orders specially: a folder sorts as if it ended in `/`.
        let name = prop::sample::select(vec![
            "a",
            "a.txt",
            "a-b",
            "a0",
            "a.",
            "b",
            "Z",
            "x y",
            "é",
            "_",
            ".gitignore",
        ]);
        let path = prop::collection::vec(name, 1..5).prop_map(|parts| parts.join("/"));
        let mode = prop::sample::select(vec![0o100_644, 0o100_755, 0o120_000, 0o160_000]);
        let text = prop::sample::select(vec!["one", "two", "three"]);
        prop::collection::vec(
            (path, mode, text).prop_map(|(p, m, t)| (p, m, t.to_string())),
            0..40,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Whatever the index holds and whatever the base, the tree is libgit2's, byte for
        /// byte, and every folder of it is in the object database.
        #[test]
        fn the_tree_is_the_one_libgit2_writes_in_both_formats(
            now in entries(),
            before in entries(),
            sha256 in any::<bool>(),
            with_base in any::<bool>(),
        ) {
            let format = if sha256 { ObjectFormat::Sha256 } else { ObjectFormat::Sha1 };
            let (_dir, repo) = init(format);
            let base = with_base.then(|| libgit2s(&repo, &index_of(&repo, &before)).unwrap());
            let mut index = index_of(&repo, &now);
            let theirs = libgit2s(&repo, &index).unwrap();
            let ours = write_index_tree(&repo, &mut index, base).unwrap();
            prop_assert_eq!(ours, theirs);
            // Written here, not by libgit2 — unless a file and a folder share a path (an index
            // libgit2 holds in memory; its tree keeps the folder).
            let paths: Vec<Vec<u8>> = index.iter().map(|e| e.path).collect();
            let clash = paths.iter().any(|p| {
                paths.iter().any(|q| q.len() > p.len() && q.starts_with(p) && q[p.len()] == b'/')
            });
            prop_assert_eq!(write_changed(&repo, &index, base).unwrap().is_some(), !clash);
        }
    }

    /// A repository whose HEAD-like base tree holds `keep/` (many files) and `edit/one`.
    fn with_base(format: ObjectFormat) -> (tempfile::TempDir, Repository, Oid) {
        let (dir, repo) = init(format);
        let mut entries: Vec<(String, u32, String)> = (0..20)
            .map(|i| (format!("keep/deep/f{i}"), 0o100_644, format!("{i}")))
            .collect();
        entries.push(("edit/one".into(), 0o100_644, "1".into()));
        let base = libgit2s(&repo, &index_of(&repo, &entries)).unwrap();
        (dir, repo, base)
    }

    /// The loose object file of `id`.
    fn object_file(repo: &Repository, id: Oid) -> std::path::PathBuf {
        let hex = id.to_string();
        repo.path().join("objects").join(&hex[..2]).join(&hex[2..])
    }

    #[test]
    fn only_the_bases_trees_on_changed_paths_are_read() {
        for format in [ObjectFormat::Sha1, ObjectFormat::Sha256] {
            let (_dir, repo, base) = with_base(format);
            let base_tree = repo.find_tree(base).unwrap();
            let keep = base_tree.get_name("keep").unwrap().id();
            let deep = repo.find_tree(keep).unwrap().get_name("deep").unwrap().id();
            let mut index = Index::new_ext(format).unwrap();
            index.read_tree(&base_tree).unwrap();
            let two = repo.blob(b"2").unwrap();
            index
                .add(&bare_entry(b"edit/one".to_vec(), 0o100_644, two))
                .unwrap();
            let expected = libgit2s(&repo, &index).unwrap();
            // The unchanged folders' trees are gone: reading them would fail, and writing
            // them would bring them back.
            std::fs::remove_file(object_file(&repo, keep)).unwrap();
            std::fs::remove_file(object_file(&repo, deep)).unwrap();
            let written = write_index_tree(&repo, &mut index, Some(base)).unwrap();
            assert_eq!(written, expected);
            assert!(!object_file(&repo, keep).exists() && !object_file(&repo, deep).exists());
            assert!(repo.find_tree(written).is_ok());
        }
    }

    #[test]
    fn what_only_libgit2_handles_is_left_to_it_and_refused_in_its_words() {
        let (_dir, repo) = init(ObjectFormat::Sha1);
        let blob = repo.blob(b"x").unwrap();
        // An unmerged entry.
        let mut index = Index::new().unwrap();
        let mut ours = bare_entry(b"a".to_vec(), 0o100_644, blob);
        ours.flags = 2 << 12;
        index.add(&ours).unwrap();
        assert_eq!(write_changed(&repo, &index, None).unwrap(), None);
        let e = write_index_tree(&repo, &mut index, None).unwrap_err();
        assert!(e.message().contains("not fully merged"), "{e}");
        // An object that is not there, in a changed folder.
        let missing = Oid::hash_object(ObjectType::Blob, b"nowhere").unwrap();
        let mut index = Index::new().unwrap();
        index
            .add(&bare_entry(b"d/gone".to_vec(), 0o100_644, missing))
            .unwrap();
        assert_eq!(write_changed(&repo, &index, None).unwrap(), None);
        let e = write_index_tree(&repo, &mut index, None).unwrap_err();
        assert!(e.message().contains("invalid object"), "{e}");
        // A tree where the mode says a file.
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let mut index = Index::new().unwrap();
        index
            .add(&bare_entry(b"t".to_vec(), 0o100_644, tree))
            .unwrap();
        assert_eq!(write_changed(&repo, &index, None).unwrap(), None);
        assert!(write_index_tree(&repo, &mut index, None).is_err());
    }

    #[test]
    fn names_that_could_read_as_dot_git_are_left_to_libgit2() {
        for name in [
            ".git",
            ".GIT",
            "git~1",
            ".git.",
            ".git ",
            ".git::$INDEX_ALLOCATION",
        ] {
            assert!(!plain_name(name.as_bytes()), "{name}");
        }
        for name in [".gitignore", ".github", "gitk", "a", "digit", "..a"] {
            assert!(plain_name(name.as_bytes()), "{name}");
        }
        assert!(!plain_name(b"") && !plain_name(b".") && !plain_name(b".."));
    }

    #[test]
    fn a_folder_sorts_as_if_its_name_ended_in_a_slash() {
        let id = Oid::ZERO_SHA1;
        let e = |name: &str, mode| Entry {
            name: name.into(),
            mode,
            id,
        };
        let mut entries = vec![
            e("a0", 0o100_644),
            e("a", MODE_TREE),
            e("a.txt", 0o100_644),
            e("a-b", 0o100_644),
        ];
        sort(&mut entries).unwrap();
        let names: Vec<&[u8]> = entries.iter().map(|e| e.name.as_slice()).collect();
        assert_eq!(names, [&b"a-b"[..], b"a.txt", b"a", b"a0"]);
        assert_eq!(sort(&mut [e("a", MODE_TREE), e("a", 0o100_644)]), None);
        let mut apart = [e("a", 0o100_644), e("a.txt", 0o100_644), e("a", MODE_TREE)];
        assert_eq!(sort(&mut apart), None);
    }

    #[test]
    fn a_file_and_a_folder_of_one_name_are_written_as_libgit2_writes_them() {
        let (_dir, repo) = init(ObjectFormat::Sha1);
        let entries: Vec<(String, u32, String)> = ["a", "a0/a", "a0", "a0.txt", "a0-"]
            .iter()
            .map(|p| ((*p).to_string(), 0o100_644, "one".to_string()))
            .collect();
        let mut index = index_of(&repo, &entries);
        assert_eq!(index.len(), 5, "libgit2 holds both `a0`s");
        assert_eq!(write_changed(&repo, &index, None).unwrap(), None);
        let theirs = libgit2s(&repo, &index).unwrap();
        assert_eq!(write_index_tree(&repo, &mut index, None).unwrap(), theirs);
    }
}
