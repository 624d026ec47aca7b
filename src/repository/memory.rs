//! A long run's memory: process-wide settings that keep it near what the run holds, not near
//! what its largest moment needed, and the trim after the moments it allocates most.

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
/// 4.5 MB pack on 100,000 files). Older windows are unmapped when the limit is reached.
const PACK_WINDOW: usize = 256 * 1024;
const PACK_MAPPED: usize = 1024 * 1024;

/// Gives the pages glibc holds free back to the system, after the moments a run's process
/// allocates most and frees it (a whole walk, a read of the index, a look that asked
/// libgit2, a commit): glibc keeps them otherwise, for the rest of the run.
pub(super) fn trim_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's heaps to the system; any
    // thread may call it at any time.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}
