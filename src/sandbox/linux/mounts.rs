//! The fence's file system view, made inside its fresh mount namespace: every path's
//! treatment from the plan, then the whole tree read-only, then the writable mounts writable
//! again.
//!
//! The one decision a reader must know: each mount's source is opened (`O_PATH`) right after
//! the namespaces are made and before the first mount, so a deeper path stays reachable after
//! a shallower one is covered (the state root hidden, this stage's folder in it shown again);
//! binding from a descriptor opened before `unshare` would name the person's mount namespace,
//! which the kernel refuses. Read-only is set on the whole tree at once (`mount_setattr`
//! recursive; one `MS_REMOUNT` per mount on kernels before 5.12), after the mounts, and
//! cleared on the writable ones alone, so a read-only path inside a writable one (`.git`) keeps
//! it. Hidden folders are empty tmpfs holding empty placeholders of what they hid, made
//! read-only like the rest. The machine's temporary folders are each one empty writable tmpfs
//! (one mount, however many files others keep there); what the process needs inside one is
//! bound in after it, its mount point made in the tmpfs.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;

use crate::sandbox::plan::MountOp;

/// How many entries of a hidden folder get a placeholder (depth first, at most three levels).
const PLACEHOLDERS: usize = 512;

/// One mount about to be made, its sources opened.
pub(super) struct Prepared {
    op: MountOp,
    /// The source (`O_PATH`), for binds and the lower layer.
    source: Option<OwnedFd>,
    /// The upper and work folders of a layer (`O_PATH`).
    layer: Option<(OwnedFd, OwnedFd)>,
    /// What a hidden folder held, relative to it (`true`: a folder).
    entries: Vec<(PathBuf, bool)>,
}

/// A placeholder the init watches: a hidden file, or a hidden folder (watched for the files
/// opened in it and for being listed).
pub(crate) struct Placeholder {
    /// Its path inside the fence.
    pub path: PathBuf,
    /// The device it was made on: a folder the fence shows inside a hidden one (this stage's
    /// state folder) is mounted over its placeholder later, and the path then leads to the
    /// real folder, which is not watched.
    pub dev: Option<u64>,
}

impl Placeholder {
    /// The placeholder at `path`, as it is now.
    fn at(path: PathBuf) -> Placeholder {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::symlink_metadata(&path).ok().map(|m| m.dev());
        Placeholder { path, dev }
    }

    /// Whether `path` still leads to the placeholder (no later mount covers it).
    pub(crate) fn still_there(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.dev.is_some()
            && std::fs::symlink_metadata(&self.path).ok().map(|m| m.dev()) == self.dev
    }
}

/// What a hidden folder held (relative paths, folders first in each level), for its
/// placeholders; read before the folder is covered.
fn listing(dir: &Path) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    let mut todo: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            if out.len() >= PLACEHOLDERS {
                return out;
            }
            let path = rel.join(entry.file_name());
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            out.push((path.clone(), is_dir));
            if is_dir && depth < 2 {
                todo.push((path, depth + 1));
            }
        }
    }
    out
}

/// Opens every mount's sources; called in the new mount namespace before any mount. An op
/// whose source vanished since the plan was made is dropped.
pub(super) fn prepare(ops: &[MountOp]) -> Result<Vec<Prepared>, String> {
    let path_fd = |p: &Path| {
        open(p, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| format!("cannot open `{}`: {e}", p.display()))
    };
    let mut out = Vec::new();
    for op in ops {
        let mut prepared = Prepared {
            op: op.clone(),
            source: None,
            layer: None,
            entries: Vec::new(),
        };
        match op {
            MountOp::Bind { target, .. } | MountOp::Private { target } => match path_fd(target) {
                Ok(fd) => prepared.source = Some(fd),
                Err(_) if !target.exists() => continue,
                Err(e) => return Err(e),
            },
            MountOp::HideDir { target } => {
                if !target.is_dir() {
                    continue;
                }
                prepared.entries = listing(target);
            }
            MountOp::HideFile {
                target,
                placeholder,
            } => {
                if std::fs::symlink_metadata(target).is_err() {
                    continue;
                }
                prepared.source = Some(path_fd(placeholder)?);
            }
            MountOp::Overlay {
                target,
                upper,
                work,
                memory,
            } => {
                if !target.is_dir() {
                    continue;
                }
                prepared.source = Some(path_fd(target)?);
                if !*memory {
                    prepared.layer = Some((path_fd(upper)?, path_fd(work)?));
                }
            }
            MountOp::Temp { target } => {
                if !target.is_dir() {
                    continue;
                }
            }
        }
        out.push(prepared);
    }
    Ok(out)
}

fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Makes the mounts, in order, then the tree read-only but for the writable ones; returns the
/// placeholders to watch.
pub(super) fn apply(prepared: &[Prepared]) -> Result<Vec<Placeholder>, String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("cannot make the mount namespace private: {e}"))?;
    let mut watch = Vec::new();
    // The writable mounts actually made: only these get read-only cleared (clearing it at a
    // path where no mount of ours stands would make its parent's mount writable).
    let mut made: Vec<&Path> = Vec::new();
    // The empty folders mounted over hidden ones: a deeper mount inside one needs its mount
    // point made there first (this stage's state folder inside the hidden state root).
    let mut hiding: Vec<&Path> = Vec::new();
    for p in prepared {
        let target = p.op.target();
        let failed =
            |what: &str, e: nix::Error| format!("cannot {what} `{}`: {e}", target.display());
        if std::fs::symlink_metadata(target).is_err()
            && hiding.iter().any(|h| target.starts_with(h))
        {
            mount_point(target, p.source.as_ref())
                .map_err(|e| format!("cannot make `{}`: {e}", target.display()))?;
        }
        match &p.op {
            MountOp::Bind { .. } | MountOp::Private { .. } | MountOp::HideFile { .. } => {
                let Some(source) = &p.source else { continue };
                mount(
                    Some(&fd_path(source)),
                    target,
                    none,
                    MsFlags::MS_BIND | MsFlags::MS_REC,
                    none,
                )
                .map_err(|e| failed("bind", e))?;
                if p.op.writable() {
                    made.push(target);
                }
                if let MountOp::HideFile { .. } = p.op {
                    watch.push(Placeholder::at(target.to_path_buf()));
                }
            }
            MountOp::HideDir { .. } => {
                // Gone since the plan (a tmp cleaner took the state root): nothing is there
                // to hide, and kern makes what it needs inside again.
                if matches!(std::fs::symlink_metadata(target), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
                {
                    continue;
                }
                mount(
                    Some("tmpfs"),
                    target,
                    Some("tmpfs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                    Some("mode=0755,size=64k,nr_inodes=1024"),
                )
                .map_err(|e| failed("hide", e))?;
                hiding.push(target);
                watch.push(Placeholder::at(target.to_path_buf()));
                for (rel, is_dir) in &p.entries {
                    let path = target.join(rel);
                    let made = if *is_dir {
                        std::fs::create_dir(&path)
                    } else {
                        File::create(&path)
                            .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o444)))
                    };
                    if made.is_ok() && *is_dir {
                        watch.push(Placeholder::at(path));
                    }
                }
            }
            MountOp::Overlay {
                upper: upper_path,
                work: work_path,
                memory,
                ..
            } => {
                let Some(lower) = &p.source else { continue };
                let (upper, work) = match (&p.layer, memory) {
                    (Some((upper, work)), false) => (fd_path(upper), fd_path(work)),
                    (_, true) => match memory_layer(upper_path, work_path) {
                        Ok(()) => (upper_path.clone(), work_path.clone()),
                        Err(e) => {
                            tracing::debug!(target = %target.display(), error = %e, "no memory for a layer");
                            continue;
                        }
                    },
                    (None, false) => continue,
                };
                let data = format!(
                    "lowerdir={},upperdir={},workdir={},userxattr",
                    fd_path(lower).display(),
                    upper.display(),
                    work.display()
                );
                // `volatile`: the layer is thrown away, so nothing in it needs syncing — without
                // it, each layer's unmount at the stage's end syncs the whole file system under
                // it, tens to hundreds of milliseconds on a busy disk (benches/fence). Kernels
                // before 5.10 refuse the option: then without. A cache the kernel cannot layer
                // at all (an overlay below it, a file system that refuses) stays read-only:
                // safe, only slower for the tool.
                let layer = |data: &str| {
                    mount(
                        Some("overlay"),
                        target,
                        Some("overlay"),
                        MsFlags::empty(),
                        Some(data),
                    )
                };
                match layer(&format!("{data},volatile")).or_else(|_| layer(&data)) {
                    Ok(()) => made.push(target),
                    Err(e) => {
                        tracing::debug!(target = %target.display(), error = %e, "cache left read-only");
                    }
                }
            }
            MountOp::Temp { .. } => {
                // A temporary folder is one mount, whatever the machine keeps there: the
                // process's own empty one, as a tmpfs `/tmp` is. What it needs there is bound
                // in by the deeper mounts, their mount points made in it.
                mount(
                    Some("tmpfs"),
                    target,
                    Some("tmpfs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                    Some("mode=1777"),
                )
                .map_err(|e| failed("mount a tmpfs on", e))?;
                made.push(target);
                hiding.push(target);
            }
        }
    }
    read_only(Path::new("/"), true)?;
    for target in made {
        writable(target)?;
    }
    // A placeholder with a mount at or below it is not the hidden path's any more (this
    // session's TMPDIR, this stage's state folder and the folders above them): opening it is
    // the process's own business, not a read of something hidden.
    let targets: Vec<&Path> = prepared.iter().map(|p| p.op.target()).collect();
    watch.retain(|w| {
        !targets
            .iter()
            .any(|t| t.starts_with(&w.path) && !hides(prepared, t, &w.path))
    });
    Ok(watch)
}

/// A tmpfs on the folder of `upper` and `work`, both made in it: the writes of a layer over a
/// folder that holds the session's own (`/tmp`) stay in memory, as a tmpfs `/tmp` would.
fn memory_layer(upper: &Path, work: &Path) -> Result<(), String> {
    let base = upper
        .parent()
        .ok_or_else(|| format!("`{}` has no folder", upper.display()))?;
    mount(
        Some("tmpfs"),
        base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700"),
    )
    .map_err(|e| format!("cannot mount a tmpfs on `{}`: {e}", base.display()))?;
    for dir in [upper, work] {
        std::fs::create_dir(dir).map_err(|e| format!("cannot make `{}`: {e}", dir.display()))?;
    }
    Ok(())
}

/// True when the mount at `target` is the hiding of `placeholder` itself (a hidden folder's own
/// tmpfs, a hidden file's own placeholder), not a mount below it.
fn hides(prepared: &[Prepared], target: &Path, placeholder: &Path) -> bool {
    target == placeholder
        && prepared.iter().any(|p| {
            p.op.target() == target
                && matches!(p.op, MountOp::HideDir { .. } | MountOp::HideFile { .. })
        })
}

/// Makes the mount point `target` inside a hiding tmpfs: a folder when `source` is one (or
/// there is no source: a tmpfs), else an empty file, with the folders above it.
fn mount_point(target: &Path, source: Option<&OwnedFd>) -> std::io::Result<()> {
    let dir = match source {
        Some(fd) => nix::sys::stat::fstat(fd)
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
            .map_err(std::io::Error::from)?,
        None => true,
    };
    if dir {
        return std::fs::create_dir_all(target);
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    File::create(target).map(drop)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 1;

/// `mount_setattr(path, flags, attr)`; `Err(ENOSYS)` on kernels before 5.12.
fn mount_setattr(path: &Path, recursive: bool, set: u64, clear: u64) -> Result<(), nix::Error> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| nix::Error::EINVAL)?;
    let mut attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags: libc::c_uint = if recursive {
        libc::AT_RECURSIVE as libc::c_uint
    } else {
        0
    };
    // SAFETY: the path is a valid C string and `attr` a live `mount_attr` of the size passed;
    // the kernel only reads both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            std::ptr::from_mut(&mut attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(nix::Error::last())
    }
}

/// Makes `path`'s mount (with `recursive`, every mount beneath too) read-only.
fn read_only(path: &Path, recursive: bool) -> Result<(), String> {
    match mount_setattr(path, recursive, MOUNT_ATTR_RDONLY, 0) {
        Ok(()) => Ok(()),
        Err(nix::Error::ENOSYS) => remount_all(path, true),
        Err(e) => Err(format!("cannot make `{}` read-only: {e}", path.display())),
    }
}

/// Makes `path`'s own mount writable again (not the ones beneath it).
fn writable(path: &Path) -> Result<(), String> {
    match mount_setattr(path, false, 0, MOUNT_ATTR_RDONLY) {
        Ok(()) => Ok(()),
        Err(nix::Error::ENOSYS) => remount(path, &locked_flags(path), false),
        Err(e) => Err(format!("cannot make `{}` writable: {e}", path.display())),
    }
}

/// Before `mount_setattr`: every mount at or under `top` remounted read-only, one by one,
/// keeping the flags a user namespace may not clear.
fn remount_all(top: &Path, read_only: bool) -> Result<(), String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read the mount table: {e}"))?;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        if !point.starts_with(top) {
            continue;
        }
        // A mount the namespace cannot see whole (an over-mounted /proc entry) may refuse:
        // it is read-only already or out of reach; the rest still must not fail.
        if let Err(e) = remount(&point, &option_flags(options), read_only) {
            tracing::debug!(point = %point.display(), error = %e, "remount refused");
        }
    }
    Ok(())
}

fn remount(path: &Path, keep: &MsFlags, read_only: bool) -> Result<(), String> {
    let none: Option<&str> = None;
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | *keep;
    if read_only {
        flags |= MsFlags::MS_RDONLY;
    } else {
        flags.remove(MsFlags::MS_RDONLY);
    }
    mount(none, path, none, flags, none)
        .map_err(|e| format!("cannot remount `{}`: {e}", path.display()))
}

/// The flags of the mount at `path` that a remount must keep.
fn locked_flags(path: &Path) -> MsFlags {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = unescape(fields.get(4)?);
            let options = fields.get(5)?;
            (Path::new(&point) == path).then(|| option_flags(options))
        })
        .next_back()
        .unwrap_or_else(MsFlags::empty)
}

fn option_flags(options: &str) -> MsFlags {
    let mut flags = MsFlags::empty();
    for option in options.split(',') {
        flags |= match option {
            "nosuid" => MsFlags::MS_NOSUID,
            "nodev" => MsFlags::MS_NODEV,
            "noexec" => MsFlags::MS_NOEXEC,
            "noatime" => MsFlags::MS_NOATIME,
            "nodiratime" => MsFlags::MS_NODIRATIME,
            "relatime" => MsFlags::MS_RELATIME,
            "ro" => MsFlags::MS_RDONLY,
            _ => MsFlags::empty(),
        };
    }
    flags
}

/// A mount point as mountinfo escapes it (`\040` for a space).
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(n) = u8::from_str_radix(&text[i + 1..i + 4], 8)
        {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_is_watched_only_while_its_path_still_leads_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let here = Placeholder::at(dir.path().to_path_buf());
        assert!(here.still_there());
        // Another device now at the path (a folder the fence shows, mounted over it).
        let covered = Placeholder {
            dev: here.dev.map(|d| d + 1),
            ..Placeholder::at(dir.path().to_path_buf())
        };
        assert!(!covered.still_there());
        let gone = Placeholder::at(dir.path().join("missing"));
        assert!(!gone.still_there());
    }

    #[test]
    fn mountinfo_fields_read_back() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(
            option_flags("rw,nosuid,nodev,relatime"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_RELATIME
        );
        assert_eq!(option_flags("ro"), MsFlags::MS_RDONLY);
    }

    #[test]
    fn a_hidden_folder_is_listed_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b/c/d")).unwrap();
        std::fs::write(dir.path().join("id_ed25519"), "key").unwrap();
        let mut got: Vec<String> = listing(dir.path())
            .into_iter()
            .map(|(p, d)| format!("{}{}", p.display(), if d { "/" } else { "" }))
            .collect();
        got.sort();
        assert_eq!(got, ["a/", "a/b/", "a/b/c/", "id_ed25519"]);
    }
}
