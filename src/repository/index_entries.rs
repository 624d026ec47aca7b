//! A compact copy of what the index says about each path — mode, object, stage and the flags
//! git writes, one fingerprint per path — so kern can tell which paths a change of the index
//! touched (an agent's `git add`, its own commit) without holding libgit2's index twice.
//!
//! The one decision a reader must know: stat data is left out. An index merely refreshed by
//! `git status` changes no path's status, so it touches nothing and is no change of the index.
//!
//! It also holds the index-entry vocabulary the other files of `repository/` share: the link
//! and gitlink modes, and [`bare_entry`] (an entry without stat data).

use std::collections::hash_map::DefaultHasher;
use std::ffi::OsStr;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::IndexEntryExtendedFlag;

/// The file mode of a symbolic link in the index.
pub(super) const MODE_LINK: u32 = 0o120_000;
/// The file mode of a submodule's commit in the index.
pub(super) const MODE_GITLINK: u32 = 0o160_000;

/// The index stage bits and assume-valid, as git writes them.
const FLAGS_KEPT: u16 = 0x3000 | 0x8000;

/// Every path of an index with its fingerprint, sorted by path bytes.
///
/// Held for a whole run beside libgit2's own index, so it is kept small: one record per
/// path, each path stored as what it does not share with the path before it (sorted paths
/// share most of their folders), about 17 bytes a path where a list of paths and
/// fingerprints took 30 (1.7 MB for 100,000 files instead of 3 MB). The records are kept in
/// chunks, so that [`IndexEntries::update`] can give the old ones up while it writes the
/// new: the two are never held whole at once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct IndexEntries {
    /// Per path: the length of the prefix it shares with the path before (a varint), the
    /// length of the rest (a varint), the rest, and its fingerprint (8 bytes, little endian).
    /// A record never spans two chunks.
    chunks: Vec<Vec<u8>>,
    /// Registered submodules (gitlinks).
    gitlinks: Vec<Vec<u8>>,
}

/// The size a chunk of records is cut at.
const CHUNK: usize = 64 * 1024;

/// An entry as the records take it: path, fingerprint, whether it is a gitlink.
type Item = (Vec<u8>, u64, bool);

impl IndexEntries {
    /// Reads `index` (as libgit2 holds it now).
    pub(super) fn of(index: &git2::Index) -> IndexEntries {
        IndexEntries::from_items(items(index))
    }

    /// From each entry's path, fingerprint and whether it is a gitlink. libgit2 keeps its
    /// entries sorted by path and stage; entries that are not (a case-insensitive index) are
    /// collected whole and sorted.
    fn from_items(items: impl Iterator<Item = Item>) -> IndexEntries {
        let mut builder = Builder::default();
        let mut unsorted: Option<Vec<Item>> = None;
        for item in items {
            match &mut unsorted {
                Some(all) => all.push(item),
                None if builder.takes(&item.0) => builder.push(item),
                None => {
                    let mut all = builder.take_all();
                    all.push(item);
                    unsorted = Some(all);
                }
            }
        }
        if let Some(mut all) = unsorted {
            all.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            for item in all {
                builder.push(item);
            }
        }
        builder.finish()
    }

    /// `index`'s entries now, and the paths whose entries differ from `self`'s (added,
    /// removed or changed), in order. `self` is given up chunk by chunk while the new
    /// entries are written. `None` when `index` is not sorted by path bytes (a
    /// case-insensitive index): only a whole look can tell then.
    pub(super) fn update(self, index: &git2::Index) -> Option<(IndexEntries, Vec<PathBuf>)> {
        IndexEntries::update_from(self, items(index))
    }

    fn update_from(
        self,
        items: impl Iterator<Item = Item>,
    ) -> Option<(IndexEntries, Vec<PathBuf>)> {
        let mut old = Consuming {
            chunks: self.chunks.into_iter(),
            current: Vec::new(),
            at: 0,
            path: Vec::new(),
        };
        let mut changed = Vec::new();
        let mut old_print = old.next();
        let mut builder = Builder::default();
        let mut compare =
            |path: &[u8], print: u64, old: &mut Consuming, old_print: &mut Option<u64>| {
                while let Some(was) = *old_print {
                    match old.path.as_slice().cmp(path) {
                        std::cmp::Ordering::Less => {
                            changed.push(as_path(&old.path).to_path_buf());
                            *old_print = old.next();
                        }
                        std::cmp::Ordering::Equal => {
                            if was != print {
                                changed.push(as_path(path).to_path_buf());
                            }
                            *old_print = old.next();
                            return;
                        }
                        std::cmp::Ordering::Greater => break,
                    }
                }
                changed.push(as_path(path).to_path_buf());
            };
        for item in items {
            if !builder.takes(&item.0) {
                return None;
            }
            if let Some((path, print)) = builder.push_written(item) {
                compare(&path, print, &mut old, &mut old_print);
            }
        }
        if let Some((path, print)) = builder.flush() {
            compare(&path, print, &mut old, &mut old_print);
        }
        while old_print.is_some() {
            changed.push(as_path(&old.path).to_path_buf());
            old_print = old.next();
        }
        Some((builder.finish(), changed))
    }

    /// The paths with their fingerprints, in order.
    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            chunks: &self.chunks,
            records: &[],
            path: Vec::new(),
        }
    }

    /// The paths whose entries differ between `self` and `newer`: added, removed or changed
    /// (what [`IndexEntries::update`] finds, told apart by reading both whole: the tests'
    /// measure of it).
    #[cfg(test)]
    fn changed(&self, newer: &IndexEntries) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let (mut a, mut b) = (self.cursor(), newer.cursor());
        let (mut x, mut y) = (a.next(), b.next());
        loop {
            match (x, y) {
                (None, None) => break,
                (Some(_), None) => {
                    out.push(a.path_buf());
                    x = a.next();
                }
                (None, Some(_)) => {
                    out.push(b.path_buf());
                    y = b.next();
                }
                (Some(px), Some(py)) => match a.path.cmp(&b.path) {
                    std::cmp::Ordering::Less => {
                        out.push(a.path_buf());
                        x = a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        out.push(b.path_buf());
                        y = b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if px != py {
                            out.push(b.path_buf());
                        }
                        x = a.next();
                        y = b.next();
                    }
                },
            }
        }
        out
    }

    /// [`IndexEntries::digest`] of `index`'s entries, without keeping them.
    pub(super) fn digest_of(index: &git2::Index) -> u64 {
        let mut builder = Builder {
            discard: true,
            ..Builder::default()
        };
        let mut h = DefaultHasher::new();
        for item in items(index) {
            if !builder.takes(&item.0) {
                return IndexEntries::of(index).digest();
            }
            if let Some((path, print)) = builder.push_written(item) {
                path.hash(&mut h);
                print.hash(&mut h);
            }
        }
        if let Some((path, print)) = builder.flush() {
            path.hash(&mut h);
            print.hash(&mut h);
        }
        h.finish()
    }

    /// One number for all paths and fingerprints: equal digests, equal entries.
    pub(super) fn digest(&self) -> u64 {
        let mut h = DefaultHasher::new();
        let mut cursor = self.cursor();
        while let Some(print) = cursor.next() {
            cursor.path.hash(&mut h);
            print.hash(&mut h);
        }
        h.finish()
    }

    /// The folders holding an entry (each once, the top as the empty path).
    pub(super) fn folders(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let mut cursor = self.cursor();
        while cursor.next().is_some() {
            let path = &cursor.path;
            let folder = match path.iter().rposition(|&b| b == b'/') {
                Some(slash) => &path[..slash],
                None => &path[..0],
            };
            if out
                .last()
                .is_none_or(|last| last.as_os_str().as_bytes() != folder)
            {
                out.push(as_path(folder).to_path_buf());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The registered submodules' paths.
    pub(super) fn gitlinks(&self) -> impl Iterator<Item = &Path> {
        self.gitlinks.iter().map(|p| as_path(p))
    }
}

/// `index`'s entries, in its order, as the records take them: stat data left out.
fn items(index: &git2::Index) -> impl Iterator<Item = Item> + '_ {
    let kept_extended =
        (IndexEntryExtendedFlag::INTENT_TO_ADD | IndexEntryExtendedFlag::SKIP_WORKTREE).bits();
    index.iter().map(move |entry| {
        let mut h = DefaultHasher::new();
        entry.mode.hash(&mut h);
        entry.id.as_bytes().hash(&mut h);
        (entry.flags & FLAGS_KEPT).hash(&mut h);
        (entry.flags_extended & kept_extended).hash(&mut h);
        let gitlink = entry.mode == MODE_GITLINK;
        (entry.path, h.finish(), gitlink)
    })
}

/// Builds the records of sorted paths, one record per path: the entries of a conflicted
/// path (one per stage) get one fingerprint for all of them.
#[derive(Default)]
struct Builder {
    chunks: Vec<Vec<u8>>,
    /// The path last pushed, its fingerprint so far and whether it is a gitlink: written
    /// when a different path comes.
    pending: Option<Item>,
    /// The last path written.
    last: Vec<u8>,
    gitlinks: Vec<Vec<u8>>,
    /// Write nothing: only the paths and fingerprints [`Builder::flush`] returns count.
    discard: bool,
}

impl Builder {
    /// True when `path` keeps the order (it sorts at or after the path before).
    fn takes(&self, path: &[u8]) -> bool {
        self.pending
            .as_ref()
            .is_none_or(|(p, ..)| p.as_slice() <= path)
    }

    fn push(&mut self, item: Item) {
        self.push_written(item);
    }

    /// Pushes `item`; returns the path and fingerprint written because of it, if any.
    fn push_written(&mut self, (path, print, gitlink): Item) -> Option<(Vec<u8>, u64)> {
        if let Some((pending, kept, link)) = &mut self.pending
            && *pending == path
        {
            let mut h = DefaultHasher::new();
            (*kept, print).hash(&mut h);
            *kept = h.finish();
            *link |= gitlink;
            return None;
        }
        let written = self.flush();
        self.pending = Some((path, print, gitlink));
        written
    }

    /// Writes the pending path; returns it with its fingerprint.
    fn flush(&mut self) -> Option<(Vec<u8>, u64)> {
        let (path, print, gitlink) = self.pending.take()?;
        if self.discard {
            return Some((path, print));
        }
        let shared = self
            .last
            .iter()
            .zip(&path)
            .take_while(|(a, b)| a == b)
            .count();
        let rest = &path[shared..];
        let size = rest.len() + 8 + 2 * 10;
        if self
            .chunks
            .last()
            .is_none_or(|c| !c.is_empty() && c.len() + size > CHUNK)
        {
            self.chunks.push(Vec::with_capacity(CHUNK.max(size)));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            put_varint(chunk, shared);
            put_varint(chunk, rest.len());
            chunk.extend_from_slice(rest);
            chunk.extend_from_slice(&print.to_le_bytes());
        }
        self.last.truncate(shared);
        self.last.extend_from_slice(rest);
        if gitlink {
            self.gitlinks.push(path.clone());
        }
        Some((path, print))
    }

    /// Everything pushed so far, as it was pushed (for sorting it all).
    fn take_all(&mut self) -> Vec<Item> {
        self.flush();
        let done = std::mem::take(self).finish();
        let mut all = Vec::new();
        let mut cursor = done.cursor();
        while let Some(print) = cursor.next() {
            let gitlink = done.gitlinks.contains(&cursor.path);
            all.push((cursor.path.clone(), print, gitlink));
        }
        all
    }

    fn finish(mut self) -> IndexEntries {
        self.flush();
        // Held for the run: no room to spare.
        if let Some(last) = self.chunks.last_mut() {
            last.shrink_to_fit();
        }
        IndexEntries {
            chunks: self.chunks,
            gitlinks: self.gitlinks,
        }
    }
}

/// Reads the records one by one, the current path in `path`.
struct Cursor<'a> {
    chunks: &'a [Vec<u8>],
    /// What is left of the current chunk.
    records: &'a [u8],
    path: Vec<u8>,
}

impl Cursor<'_> {
    /// The next path's fingerprint (its path in `self.path`); `None` at the end.
    fn next(&mut self) -> Option<u64> {
        while self.records.is_empty() {
            let (first, rest) = self.chunks.split_first()?;
            self.records = first;
            self.chunks = rest;
        }
        let (print, used) = read_record(self.records, &mut self.path)?;
        self.records = &self.records[used..];
        Some(print)
    }

    #[cfg(test)]
    fn path_buf(&self) -> PathBuf {
        as_path(&self.path).to_path_buf()
    }
}

/// Reads records as [`Cursor`] does, dropping each chunk once it is read.
struct Consuming {
    chunks: std::vec::IntoIter<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    path: Vec<u8>,
}

impl Consuming {
    fn next(&mut self) -> Option<u64> {
        while self.at >= self.current.len() {
            // The chunk read is dropped here, before the next is read.
            self.current = self.chunks.next()?;
            self.at = 0;
        }
        let (print, used) = read_record(&self.current[self.at..], &mut self.path)?;
        self.at += used;
        Some(print)
    }
}

/// Reads one record from the start of `records` into `path` (which holds the path before);
/// its fingerprint and the bytes it took.
fn read_record(records: &[u8], path: &mut Vec<u8>) -> Option<(u64, usize)> {
    let mut rest = records;
    let shared = take_varint(&mut rest)?;
    let len = take_varint(&mut rest)?;
    let (bytes, tail) = rest.split_at_checked(len)?;
    let (print, tail) = tail.split_first_chunk::<8>()?;
    path.truncate(shared);
    path.extend_from_slice(bytes);
    Some((u64::from_le_bytes(*print), records.len() - tail.len()))
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<usize> {
    let mut n = 0usize;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        n |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

fn as_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

/// An index entry without stat data: git re-hashes the file on the next status, which is
/// exactly right for an entry whose work-tree file may differ.
pub(super) fn bare_entry(path: Vec<u8>, mode: u32, id: git2::Oid) -> git2::IndexEntry {
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: 0,
        flags_extended: 0,
        path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, id: u8, mode: u32, flags: u16) -> git2::IndexEntry {
        let mut entry = super::bare_entry(
            path.as_bytes().to_vec(),
            mode,
            git2::Oid::from_bytes(&[id; 20]).unwrap(),
        );
        entry.flags = flags | path.len() as u16;
        entry
    }

    fn entries(list: &[(&str, u8, u32)]) -> IndexEntries {
        let mut index = git2::Index::new().unwrap();
        for &(path, id, mode) in list {
            index.add(&entry(path, id, mode, 0)).unwrap();
        }
        IndexEntries::of(&index)
    }

    #[test]
    fn changed_names_added_removed_and_changed_paths_only() {
        let before = entries(&[
            ("a.txt", 1, 0o100644),
            ("d/kept.txt", 2, 0o100644),
            ("d/mode.sh", 3, 0o100644),
            ("gone.txt", 4, 0o100644),
            ("sub", 5, 0o160000),
        ]);
        let after = entries(&[
            ("a.txt", 9, 0o100644),
            ("d/kept.txt", 2, 0o100644),
            ("d/mode.sh", 3, 0o100755),
            ("new/x.txt", 6, 0o100644),
            ("sub", 5, 0o160000),
        ]);
        let show = |v: Vec<PathBuf>| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            show(before.changed(&after)),
            ["a.txt", "d/mode.sh", "gone.txt", "new/x.txt"]
        );
        assert!(before.changed(&before).is_empty());
        assert_ne!(before.digest(), after.digest());
        assert_eq!(before.digest(), before.clone().digest());
        assert_eq!(show(after.folders()), ["", "d", "new"]);
        assert_eq!(
            show(after.gitlinks().map(Path::to_path_buf).collect()),
            ["sub"]
        );
    }

    #[test]
    fn stat_data_is_no_change_but_stage_and_skip_worktree_are() {
        let mut index = git2::Index::new().unwrap();
        index.add(&entry("a", 1, 0o100644, 0)).unwrap();
        let before = IndexEntries::of(&index);
        let mut refreshed = entry("a", 1, 0o100644, 0);
        refreshed.mtime = git2::IndexTime::new(99, 99);
        refreshed.file_size = 12;
        index.add(&refreshed).unwrap();
        assert_eq!(IndexEntries::of(&index), before);
        let mut sparse = entry("a", 1, 0o100644, 0x4000);
        sparse.flags_extended = IndexEntryExtendedFlag::SKIP_WORKTREE.bits();
        index.add(&sparse).unwrap();
        assert_eq!(IndexEntries::of(&index).changed(&before).len(), 1);
    }

    #[test]
    fn paths_come_back_byte_for_byte_however_much_they_share() {
        // Longer than 127 bytes, so that its lengths take two bytes.
        let long = format!("{}x", "deep/".repeat(60));
        let list: Vec<String> = [
            "a.txt",
            "a/b/c.txt",
            "a/bc",
            "ab",
            "b",
            long.as_str(),
            "d\u{e9}j\u{e0}/vu.txt",
            "zz",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let before = entries(
            &list
                .iter()
                .map(|p| (p.as_str(), 1, 0o100644))
                .collect::<Vec<_>>(),
        );
        let empty = IndexEntries::default();
        let names = |v: Vec<PathBuf>| {
            v.iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let mut sorted = list.clone();
        sorted.sort();
        assert_eq!(names(empty.changed(&before)), sorted);
        assert_eq!(names(before.changed(&empty)), sorted);
        let renamed = entries(
            &list
                .iter()
                .map(|p| {
                    if *p == long {
                        ("deep/x", 1, 0o100644)
                    } else {
                        (p.as_str(), 1, 0o100644)
                    }
                })
                .collect::<Vec<_>>(),
        );
        assert_eq!(names(before.changed(&renamed)), [long.as_str(), "deep/x"]);
        assert_eq!(
            names(before.folders()),
            [
                "",
                "a",
                "a/b",
                long.strip_suffix("/x").unwrap(),
                "d\u{e9}j\u{e0}"
            ]
        );
    }

    #[test]
    fn a_conflicted_path_is_one_path_and_its_stages_count() {
        let mut index = git2::Index::new().unwrap();
        for (stage, id) in [(1u16, 1u8), (2, 2), (3, 3)] {
            index
                .add(&entry("c.txt", id, 0o100644, stage << 12))
                .unwrap();
        }
        index.add(&entry("d.txt", 4, 0o100644, 0)).unwrap();
        let conflicted = IndexEntries::of(&index);
        assert_eq!(conflicted.folders(), [PathBuf::new()]);
        let mut resolved_index = git2::Index::new().unwrap();
        resolved_index.add(&entry("c.txt", 3, 0o100644, 0)).unwrap();
        resolved_index.add(&entry("d.txt", 4, 0o100644, 0)).unwrap();
        let resolved = IndexEntries::of(&resolved_index);
        assert_eq!(conflicted.changed(&resolved), [PathBuf::from("c.txt")]);
        assert_eq!(resolved.changed(&resolved), Vec::<PathBuf>::new());
    }

    #[test]
    fn entries_out_of_order_are_sorted_as_if_they_came_in_order() {
        let item = |p: &str, print: u64, link: bool| (p.as_bytes().to_vec(), print, link);
        let sorted = [
            item("A.txt", 1, false),
            item("b/x", 2, false),
            item("sub", 3, true),
            item("sub", 4, true),
            item("z", 5, false),
        ];
        let shuffled = [
            item("b/x", 2, false),
            item("z", 5, false),
            item("sub", 3, true),
            item("A.txt", 1, false),
            item("sub", 4, true),
        ];
        let a = IndexEntries::from_items(sorted.into_iter());
        let b = IndexEntries::from_items(shuffled.into_iter());
        assert_eq!(a.digest(), b.digest());
        assert!(a.changed(&b).is_empty());
        assert_eq!(b.gitlinks().collect::<Vec<_>>(), [Path::new("sub")]);
    }

    #[test]
    fn an_update_names_what_changed_and_holds_what_reading_anew_holds() {
        // Enough paths for many chunks, so that the old ones are given up along the way.
        let many = |skip: usize, id: u8| -> Vec<(String, u8, u32)> {
            (0..20_000)
                .filter(|n| n % 1000 != skip)
                .map(|n| {
                    (
                        format!("d{:03}/f{n:05}.txt", n / 100),
                        if n == 7_777 { id } else { 1 },
                        0o100644,
                    )
                })
                .collect()
        };
        let index_of = |list: &[(String, u8, u32)]| {
            let mut index = git2::Index::new().unwrap();
            for (path, id, mode) in list {
                index.add(&entry(path, *id, *mode, 0)).unwrap();
            }
            index
        };
        let before_index = index_of(&many(3, 1));
        let after_index = index_of(&many(5, 2));
        let before = IndexEntries::of(&before_index);
        assert!(before.chunks.len() > 3, "{}", before.chunks.len());
        let after = IndexEntries::of(&after_index);
        let want = before.changed(&after);
        assert_eq!(want.len(), 41);
        let (updated, changed) = before.clone().update(&after_index).unwrap();
        assert_eq!(changed, want);
        assert_eq!(updated, after);
        assert_eq!(updated.digest(), after.digest());
        assert_eq!(IndexEntries::digest_of(&after_index), after.digest());
        assert_ne!(IndexEntries::digest_of(&before_index), after.digest());
        let (same, none) = after.clone().update(&after_index).unwrap();
        assert!(none.is_empty());
        assert_eq!(same, after);
        let item = |p: &str| (p.as_bytes().to_vec(), 1, false);
        assert!(
            after
                .update_from([item("b"), item("a")].into_iter())
                .is_none()
        );
    }
}
