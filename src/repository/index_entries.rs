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
use std::path::Path;

use git2::IndexEntryExtendedFlag;

/// The file mode of a symbolic link in the index.
pub(super) const MODE_LINK: u32 = 0o120_000;
/// The file mode of a submodule's commit in the index.
pub(super) const MODE_GITLINK: u32 = 0o160_000;

/// The index stage bits and assume-valid, as git writes them.
const FLAGS_KEPT: u16 = 0x3000 | 0x8000;

/// Every path of an index with its fingerprint, sorted by path bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct IndexEntries {
    /// All paths, one after another.
    arena: Vec<u8>,
    items: Vec<Item>,
    /// Registered submodules (gitlinks), as indices into `items`.
    gitlinks: Vec<u32>,
}

/// 16 bytes per path: a 100,000-file index costs about 3 MB, paths included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    print: u64,
    start: u32,
    len: u32,
}

/// While an [`IndexEntries`] is built, this bit of [`Item::len`] marks a gitlink.
const GITLINK_BIT: u32 = 1 << 31;

impl IndexEntries {
    /// Reads `index` (as libgit2 holds it now).
    pub(super) fn of(index: &git2::Index) -> IndexEntries {
        let kept_extended =
            (IndexEntryExtendedFlag::INTENT_TO_ADD | IndexEntryExtendedFlag::SKIP_WORKTREE).bits();
        let mut arena = Vec::new();
        let mut items = Vec::with_capacity(index.len());
        for entry in index.iter() {
            let mut h = DefaultHasher::new();
            entry.mode.hash(&mut h);
            entry.id.as_bytes().hash(&mut h);
            (entry.flags & FLAGS_KEPT).hash(&mut h);
            (entry.flags_extended & kept_extended).hash(&mut h);
            let start = arena.len() as u32;
            arena.extend_from_slice(&entry.path);
            let gitlink = entry.mode == MODE_GITLINK;
            items.push(Item {
                print: h.finish(),
                start,
                len: entry.path.len() as u32 | if gitlink { GITLINK_BIT } else { 0 },
            });
        }
        let path = |i: &Item| {
            let start = i.start as usize;
            &arena[start..start + (i.len & !GITLINK_BIT) as usize]
        };
        // libgit2 keeps its entries sorted by path and stage: sorting (a copy of every item)
        // is only for an index it does not (a case-insensitive one).
        if !items.is_sorted_by(|a, b| path(a) <= path(b)) {
            items.sort_unstable_by(|a, b| path(a).cmp(path(b)).then(a.print.cmp(&b.print)));
        }
        // A conflicted path has one entry per stage: one fingerprint for all of them.
        items.dedup_by(|later, kept| {
            if path(later) != path(kept) {
                return false;
            }
            let mut h = DefaultHasher::new();
            (kept.print, later.print).hash(&mut h);
            kept.print = h.finish();
            kept.len |= later.len & GITLINK_BIT;
            true
        });
        let mut gitlinks = Vec::new();
        for (n, item) in items.iter_mut().enumerate() {
            if item.len & GITLINK_BIT != 0 {
                gitlinks.push(n as u32);
                item.len &= !GITLINK_BIT;
            }
        }
        // Held until the next change of the index, beside the one read then.
        arena.shrink_to_fit();
        items.shrink_to_fit();
        IndexEntries {
            arena,
            items,
            gitlinks,
        }
    }

    fn path(&self, item: &Item) -> &[u8] {
        &self.arena[item.start as usize..(item.start + item.len) as usize]
    }

    /// The paths whose entries differ between `self` and `newer`: added, removed or changed.
    pub(super) fn changed<'a>(&'a self, newer: &'a IndexEntries) -> Vec<&'a Path> {
        let mut out = Vec::new();
        let (mut a, mut b) = (self.items.iter().peekable(), newer.items.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(x), None) => {
                    out.push(as_path(self.path(x)));
                    a.next();
                }
                (None, Some(y)) => {
                    out.push(as_path(newer.path(y)));
                    b.next();
                }
                (Some(x), Some(y)) => match self.path(x).cmp(newer.path(y)) {
                    std::cmp::Ordering::Less => {
                        out.push(as_path(self.path(x)));
                        a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        out.push(as_path(newer.path(y)));
                        b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if x.print != y.print {
                            out.push(as_path(newer.path(y)));
                        }
                        a.next();
                        b.next();
                    }
                },
            }
        }
        out
    }

    /// One number for all paths and fingerprints: equal digests, equal entries.
    pub(super) fn digest(&self) -> u64 {
        let mut h = DefaultHasher::new();
        for item in &self.items {
            self.path(item).hash(&mut h);
            item.print.hash(&mut h);
        }
        h.finish()
    }

    /// The folders holding an entry (each once, the top as the empty path).
    pub(super) fn folders(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for item in &self.items {
            let path = self.path(item);
            let folder = match path.iter().rposition(|&b| b == b'/') {
                Some(slash) => &path[..slash],
                None => &path[..0],
            };
            if out
                .last()
                .is_none_or(|last| last.as_os_str().as_bytes() != folder)
            {
                out.push(as_path(folder));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The registered submodules' paths.
    pub(super) fn gitlinks(&self) -> impl Iterator<Item = &Path> {
        self.gitlinks
            .iter()
            .map(|&n| as_path(self.path(&self.items[n as usize])))
    }
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
        let show = |v: Vec<&Path>| {
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
        assert_eq!(show(after.gitlinks().collect()), ["sub"]);
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
}
