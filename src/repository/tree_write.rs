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
    let hashed = fold(
        index,
        |_| true,
        |folder, content| {
            let id = Oid::hash_object_ext(ObjectType::Tree, content, format).ok()?;
            ids.insert(folder.to_vec(), id);
            Some(id)
        },
    );
    let Some(root) = hashed else {
        return Ok(None);
    };
    let changed = changed_folders(repo, &ids, base)?;
    if changed.is_empty() {
        return Ok(Some(root));
    }
    // The second pass: the changed folders checked as libgit2 checks them, and written.
    let odb = repo.odb()?;
    let size = root.as_bytes().len();
    let mut failure = None;
    let written = fold(
        index,
        |folder| changed.contains(folder),
        |folder, content| {
            let known = ids.get(folder).copied();
            if !changed.contains(folder) {
                return known;
            }
            if !entries_of(content, size).all(|e| acceptable(&odb, &e)) {
                return None;
            }
            match odb.write(ObjectType::Tree, content) {
                Ok(id) if Some(id) == known => Some(id),
                Ok(_) => None,
                Err(e) => {
                    failure = Some(e);
                    None
                }
            }
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(written)
}

/// A tree entry: its name, mode and object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry<'a> {
    name: &'a [u8],
    mode: u32,
    id: Oid,
}

/// A folder being read: its path (empty for the top), its tree's content so far — when it is
/// wanted — and where each entry's name is in it.
struct Open {
    path: Vec<u8>,
    wanted: bool,
    content: Vec<u8>,
    names: Vec<(usize, usize)>,
}

impl Open {
    fn new(path: Vec<u8>, wanted: bool) -> Open {
        Open {
            path,
            wanted,
            content: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Adds an entry, as a tree holds it: its mode in octal, a space, its name, a NUL and its
    /// id. `None` for a folder whose name a file of this folder has.
    fn push(&mut self, name: &[u8], mode: u32, id: Oid) -> Option<()> {
        if !self.wanted {
            return Some(());
        }
        if mode == MODE_TREE && self.has_file(name) {
            return None;
        }
        self.content.extend_from_slice(mode_text(mode)?);
        self.content.push(b' ');
        self.names.push((self.content.len(), name.len()));
        self.content.extend_from_slice(name);
        self.content.push(0);
        self.content.extend_from_slice(id.as_bytes());
        Some(())
    }

    /// Whether a file named `name` is in the folder. The index's order is git's tree order (a
    /// folder's name compared as if it ended in `/`), so such a file comes just before the
    /// entries whose names are `name` and a byte below `/`, all at the end.
    fn has_file(&self, name: &[u8]) -> bool {
        self.names
            .iter()
            .rev()
            .map(|&(at, len)| &self.content[at..at + len])
            .take_while(|n| n.starts_with(name))
            .any(|n| n == name)
    }
}

/// A mode as a tree writes it.
fn mode_text(mode: u32) -> Option<&'static [u8]> {
    Some(match mode {
        0o100_644 => b"100644",
        0o100_755 => b"100755",
        0o120_000 => b"120000",
        0o160_000 => b"160000",
        MODE_TREE => b"40000",
        _ => return None,
    })
}

/// Visits every folder of `index` bottom-up — its path (empty for the top, no trailing `/`)
/// and its tree's content, each subfolder with the id `visit` returned for it; a folder not
/// `wanted` is visited with no content (and nothing under it is wanted) — and returns the
/// top's id. The index's order is the trees' order, so nothing is sorted. `None` when `visit`
/// refused a folder, or the index holds what only libgit2 writes: an entry unmerged or
/// intent-to-add, paths not in strict byte order, a mode no tree holds, a file and a folder
/// of one name.
fn fold(
    index: &Index,
    wanted: impl Fn(&[u8]) -> bool,
    mut visit: impl FnMut(&[u8], &[u8]) -> Option<Oid>,
) -> Option<Oid> {
    let mut open: Vec<Open> = vec![Open::new(Vec::new(), wanted(b""))];
    let mut previous: &[u8] = b"";
    for (i, entry) in entries(index).enumerate() {
        if entry.stage != 0 || entry.intent || !MODES.contains(&entry.mode) {
            return None;
        }
        let path = entry.path;
        if i > 0 && previous >= path {
            return None;
        }
        previous = path;
        // Close the open folders this path is not inside.
        while open.len() > 1 && !inside(path, &open[open.len() - 1].path) {
            close(&mut open, &mut visit)?;
        }
        // Open the folders between the innermost open one and the file.
        let parent = &open[open.len() - 1];
        let mut from = if parent.path.is_empty() {
            0
        } else {
            parent.path.len() + 1
        };
        while let Some(slash) = path[from..].iter().position(|&b| b == b'/') {
            let folder = path[..from + slash].to_vec();
            let is_wanted = open[open.len() - 1].wanted && wanted(&folder);
            open.push(Open::new(folder, is_wanted));
            from += slash + 1;
        }
        let last = open.len() - 1;
        open[last].push(&path[from..], entry.mode, entry.id)?;
    }
    while open.len() > 1 {
        close(&mut open, &mut visit)?;
    }
    let top = open.pop()?;
    visit(&top.path, &top.content)
}

/// Closes the innermost open folder: its id, through `visit`, becomes an entry of its parent.
fn close(open: &mut Vec<Open>, visit: &mut impl FnMut(&[u8], &[u8]) -> Option<Oid>) -> Option<()> {
    let folder = open.pop()?;
    let id = visit(&folder.path, &folder.content)?;
    let name = folder.path.rsplit(|&b| b == b'/').next()?;
    open.last_mut()?.push(name, MODE_TREE, id)
}

/// Whether `path` is inside the folder `folder` (not the top).
fn inside(path: &[u8], folder: &[u8]) -> bool {
    path.len() > folder.len() && path.starts_with(folder) && path[folder.len()] == b'/'
}

/// An index entry as this module reads it, borrowed from libgit2's index.
struct Borrowed<'a> {
    path: &'a [u8],
    mode: u32,
    id: Oid,
    stage: u16,
    intent: bool,
}

/// `index`'s entries in its order, borrowed: reading 100,000 entries through `Index::iter`
/// copies each path into an allocation of its own, twice a commit.
fn entries(index: &Index) -> impl Iterator<Item = Borrowed<'_>> {
    use git2::Binding;
    let raw = index.raw();
    // SAFETY: `raw` is the live index `index` borrows; counting its entries reads it only.
    let count = unsafe { libgit2_sys::git_index_entrycount(raw) };
    let intent = IndexEntryExtendedFlag::INTENT_TO_ADD.bits();
    (0..count).map_while(move |i| {
        // SAFETY: `i` is below the entry count of the index `index` borrows, which nothing
        // changes while the borrow lasts (it is shared: no `&mut` method can run), so the
        // entry, its path (a NUL-terminated string libgit2 owns) and its id stay where they
        // are for the borrow's lifetime.
        unsafe {
            let entry = libgit2_sys::git_index_get_byindex(raw, i).as_ref()?;
            Some(Borrowed {
                path: std::ffi::CStr::from_ptr(entry.path).to_bytes(),
                mode: entry.mode,
                id: Oid::from_raw(&raw const entry.id),
                stage: (entry.flags >> 12) & 3,
                intent: entry.flags_extended & intent != 0,
            })
        }
    })
}

/// The entries of a tree's `content`, ids of `size` bytes.
fn entries_of(content: &[u8], size: usize) -> impl Iterator<Item = Entry<'_>> {
    let mut rest = content;
    std::iter::from_fn(move || {
        let space = rest.iter().position(|&b| b == b' ')?;
        let nul = space + rest[space..].iter().position(|&b| b == 0)?;
        let mode = u32::from_str_radix(std::str::from_utf8(&rest[..space]).ok()?, 8).ok()?;
        let name = &rest[space + 1..nul];
        let id = Oid::from_bytes(rest.get(nul + 1..nul + 1 + size)?).ok()?;
        rest = &rest[nul + 1 + size..];
        Some(Entry { name, mode, id })
    })
}

/// Whether libgit2 would take `entry` into a tree it writes: a name a tree may hold (not
/// empty, `.`, `..`, nor anything that could be read as `.git` — those are left to libgit2),
/// an id that is not zero, and for a file an object of the kind its mode says. A subfolder's
/// entry's tree was written by this module.
fn acceptable(odb: &git2::Odb<'_>, entry: &Entry<'_>) -> bool {
    if !plain_name(entry.name) || entry.id.is_zero() {
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
        // A base tree that cannot be read (a partial clone's) leaves nothing to compare with:
        // every folder under it is written.
        let tree = was.and_then(|id| repo.find_tree(id).ok());
        for child in children(ids, &folder) {
            let name = child.rsplit(|&b| b == b'/').next().unwrap_or_default();
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
            // A fresh handle: nothing read before is in its object cache.
            let repo = Repository::open(repo.path()).unwrap();
            assert!(repo.find_tree(keep).is_err());
            let written = write_index_tree(&repo, &mut index, Some(base)).unwrap();
            assert_eq!(written, expected);
            assert!(!object_file(&repo, keep).exists() && !object_file(&repo, deep).exists());
            assert!(repo.find_tree(written).is_ok());
        }
    }

    #[test]
    fn a_base_tree_that_cannot_be_read_leaves_its_folders_written_anew() {
        let (_dir, repo, base) = with_base(ObjectFormat::Sha1);
        let base_tree = repo.find_tree(base).unwrap();
        let edit = base_tree.get_name("edit").unwrap().id();
        let mut index = Index::new().unwrap();
        index.read_tree(&base_tree).unwrap();
        let two = repo.blob(b"2").unwrap();
        index
            .add(&bare_entry(b"edit/new".to_vec(), 0o100_644, two))
            .unwrap();
        let expected = libgit2s(&repo, &index).unwrap();
        // The changed folder's tree in the base is gone (a partial clone's, say).
        std::fs::remove_file(object_file(&repo, edit)).unwrap();
        let repo = Repository::open(repo.path()).unwrap();
        assert!(repo.find_tree(edit).is_err());
        assert_eq!(
            write_index_tree(&repo, &mut index, Some(base)).unwrap(),
            expected
        );
        assert!(repo.find_tree(expected).is_ok());
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
    fn a_folder_whose_name_a_file_has_is_found_past_the_names_between_them() {
        let id = Oid::ZERO_SHA1;
        let folder = |files: &[&str]| {
            let mut open = Open::new(Vec::new(), true);
            for name in files {
                open.push(name.as_bytes(), 0o100_644, id).unwrap();
            }
            open
        };
        // In tree order `a` comes before `a!`, `a-b` and `a.txt`, and those before `a/`.
        assert_eq!(
            folder(&["a", "a!", "a-b", "a.txt"]).push(b"a", MODE_TREE, id),
            None
        );
        assert_eq!(
            folder(&["a!", "a-b", "a.txt"]).push(b"a", MODE_TREE, id),
            Some(())
        );
        assert_eq!(folder(&["a", "b"]).push(b"c", MODE_TREE, id), Some(()));
        let mut open = folder(&["x"]);
        open.push(b"a", MODE_TREE, id).unwrap();
        let entries: Vec<Entry<'_>> = entries_of(&open.content, 20).collect();
        let names: Vec<&[u8]> = entries.iter().map(|e| e.name).collect();
        assert_eq!(names, [&b"x"[..], b"a"]);
        assert_eq!(entries[1].mode, MODE_TREE);
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
