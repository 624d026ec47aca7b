//! A long run's memory: process-wide settings that keep it near what the run holds, not near
//! what its largest moment needed, and the trim after the moments it allocates most.
//!
//! The one decision a reader must know: besides glibc's free heap, the trim drops this
//! process's pages of the pack indexes libgit2 keeps mapped (read-only file mappings): the
//! first whole walk looks up every tree of HEAD and touches most of a pack's `.idx` (2.5 MB on
//! 100,000 files), which then stays resident for the run although later looks read a few
//! trees; a dropped page is read again from the file (the page cache) when a lookup needs it.

/// Process-wide settings that keep a long run's memory near what it holds, not near what its
/// largest moment needed (on 100,000 files: 48 MB of peak RSS without them, 36 MB with):
/// - libgit2's object cache off: the first whole walk reads every tree of HEAD (7 MB) and the
///   cache would keep them all for the run, while every later look reads only the trees on
///   the changed paths (tree_diff.rs);
/// - with glibc, allocations of 128 KiB and more always mapped and returned when freed: after
///   the first read of a large index glibc would otherwise serve every buffer under 8 MB (the
///   index's entry lists, rebuilt after each commit) from a heap that only grows.
pub(super) fn bound_memory() {
    git2::opts::enable_caching(false);
    // SAFETY: these only set two of libgit2's global sizes, read when a pack window is
    // mapped; a run sets them once, before its first look, and no other thread uses libgit2
    // then (the runtime runs the loop on one thread). A refusal changes nothing.
    unsafe {
        let _ = git2::opts::set_mwindow_size(PACK_WINDOW);
        let _ = git2::opts::set_mwindow_mapped_limit(PACK_MAPPED);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets one of glibc's allocator parameters; any thread may call it
    // at any time, and a refusal (a zero return) changes nothing.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// How much of a pack file libgit2 maps at a time, and in all, during a run: reading every
/// tree of HEAD touches most of a pack, and the pages mapped count as the run's memory
/// (libgit2's defaults, 1 GiB windows up to 8 GiB, keep the whole pack mapped: 2.5 MB of a
/// 4.5 MB pack on 100,000 files). Older windows are unmapped when the limit is reached. Two
/// windows of 128 KiB: a read of every tree (the first whole walk; libgit2's own tree writer,
/// which reads the tree back and which kern now uses only for what tree_write.rs leaves to it)
/// held 0.9 MB of windows with 256 KiB × 4, 0.2 MB now, at no time measurable on 100,000 files
/// (docs/benchmarks.md).
const PACK_WINDOW: usize = 128 * 1024;
const PACK_MAPPED: usize = 256 * 1024;

/// Gives the pages glibc holds free back to the system, after the moments a run's process
/// allocates most and frees it (a whole walk, a read of the index, a look that asked
/// libgit2, a commit): glibc keeps them otherwise, for the rest of the run. Drops the pages
/// of the pack indexes libgit2 mapped, too (see the module docs).
pub(super) fn trim_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's heaps to the system; any
    // thread may call it at any time.
    unsafe {
        nix::libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for (start, len) in pack_index_mappings(&maps) {
            // SAFETY: the range is a whole read-only mapping of a pack's index file (never
            // written through): MADV_DONTNEED only drops its pages from this process, and the
            // next read of the range maps them again from the file. libgit2 keeps the mapping.
            unsafe {
                nix::libc::madvise(
                    start as *mut nix::libc::c_void,
                    len,
                    nix::libc::MADV_DONTNEED,
                );
            }
        }
    }
}

/// The read-only mappings of pack index files (`…/objects/pack/*.idx`) in `maps`, the text of
/// `/proc/self/maps`: each as its start address and length. A writable mapping, a deleted
/// file's and anything else are left out.
fn pack_index_mappings(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?.trim_start();
            // git names them `pack-<id>.idx`, in lower case.
            let is_index = path.contains("/objects/pack/")
                && std::path::Path::new(path)
                    .extension()
                    .is_some_and(|ext| ext == "idx");
            if !is_index || !perms.starts_with("r-") || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end - start))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::pack_index_mappings;

    #[test]
    fn only_read_only_mappings_of_pack_indexes_are_dropped() {
        let maps = "\
55d0c0a00000-55d0c0b00000 r--p 00000000 fd:00 123 /usr/bin/kern
7f0000000000-7f0000280000 r--s 00000000 fd:00 456 /r/.git/objects/pack/pack-1a2b.idx
7f0000300000-7f0000310000 r--s 00000000 fd:00 457 /r/.git/objects/pack/pack-1a2b.pack
7f0000400000-7f0000401000 rw-s 00000000 fd:00 458 /r/.git/objects/pack/pack-3c4d.idx
7f0000500000-7f0000502000 r--s 00000000 fd:00 459 /my repo/.git/objects/pack/pack-5e6f.idx
7f0000600000-7f0000601000 r--s 00000000 fd:00 460 /r/.git/objects/pack/pack-7a8b.idx (deleted)
7f0000700000-7f0000701000 r--p 00000000 00:00 0 
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
";
        assert_eq!(
            pack_index_mappings(maps),
            [(0x7f00_0000_0000, 0x28_0000), (0x7f00_0050_0000, 0x2000)]
        );
        assert!(pack_index_mappings("").is_empty());
        assert!(pack_index_mappings("garbage\n- - -\n").is_empty());
    }
}
