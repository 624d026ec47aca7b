//! A watch on the work tree's folders (Linux inotify): which paths may have changed since kern
//! last looked, so that a status during a run looks at those paths and not at the whole tree.
//!
//! The one decision a reader must know: the watch only ever says "look here"; it never says a
//! path is unchanged on its own. Anything it cannot vouch for makes its caller walk the whole
//! tree again: the kernel's event queue overflowed, a `.gitignore` or `.gitattributes` changed
//! (what counts as untracked moved), reading the events failed. A folder is watched before it
//! is read, so a change is either seen by the read or reported as an event. A folder created or
//! moved in is reported so that the caller watches it (and looks at all of it); one deleted or
//! moved away is forgotten. Without inotify (another system, no watches left) there is no
//! watch, and every look is a whole walk.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// What the events since the last drain say.
#[derive(Debug, Default)]
pub(super) struct Touched {
    /// Paths (relative to the top) created, changed, deleted or moved; a folder stands for
    /// everything under it.
    pub(super) paths: BTreeSet<PathBuf>,
    /// Folders created or moved in: to be watched, with everything under them.
    pub(super) new_folders: Vec<PathBuf>,
    /// The events cannot be trusted: look at the whole tree.
    pub(super) rescan: bool,
}

/// Names whose change changes what status counts as untracked or how it reads files.
const RULE_FILES: [&str; 2] = [".gitignore", ".gitattributes"];

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::OsStr;

    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

    use super::{BTreeMap, HashMap, Path, PathBuf, RULE_FILES, Touched};

    /// An inotify instance and the folders it watches.
    pub(in crate::repository) struct Watch {
        inotify: Inotify,
        by_wd: HashMap<WatchDescriptor, PathBuf>,
        /// Ordered so that a folder's sub-folders follow it.
        by_path: BTreeMap<PathBuf, WatchDescriptor>,
    }

    /// Every change of a folder's entries or of a file in it; the folder itself deleted or
    /// moved; never through a symlink.
    fn mask() -> AddWatchFlags {
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
    }

    impl Watch {
        /// A new watch on nothing yet (close-on-exec: agents never inherit it).
        pub(in crate::repository) fn new() -> std::io::Result<Watch> {
            let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
            Ok(Watch {
                inotify,
                by_wd: HashMap::new(),
                by_path: BTreeMap::new(),
            })
        }

        /// Watches the folder `rel` (relative to `top`; empty for the top itself). `Ok(false)`
        /// when it is gone or not a folder (nothing to watch); an error when it cannot be
        /// watched (no inotify watches left): the caller then gives the watch up.
        pub(in crate::repository) fn add(
            &mut self,
            top: &Path,
            rel: &Path,
        ) -> std::io::Result<bool> {
            match self.inotify.add_watch(&top.join(rel), mask()) {
                Ok(wd) => {
                    if let Some(old) = self.by_wd.insert(wd, rel.to_path_buf())
                        && old != rel
                    {
                        self.by_path.remove(&old);
                    }
                    self.by_path.insert(rel.to_path_buf(), wd);
                    Ok(true)
                }
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::EACCES | Errno::ELOOP) => Ok(false),
                Err(e) => Err(e.into()),
            }
        }

        /// True when the folder `rel` is watched.
        pub(in crate::repository) fn watches(&self, rel: &Path) -> bool {
            self.by_path.contains_key(rel)
        }

        /// How many folders are watched.
        pub(in crate::repository) fn len(&self) -> usize {
            self.by_path.len()
        }

        /// Reads every event queued since the last drain.
        pub(in crate::repository) fn drain(&mut self) -> Touched {
            let mut touched = Touched::default();
            loop {
                match self.inotify.read_events() {
                    Ok(events) if events.is_empty() => break,
                    Ok(events) => {
                        for event in events {
                            self.note(event, &mut touched);
                        }
                    }
                    Err(Errno::EAGAIN) => break,
                    Err(Errno::EINTR) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "reading the work-tree watch failed");
                        touched.rescan = true;
                        break;
                    }
                }
            }
            touched
        }

        fn note(&mut self, event: InotifyEvent, touched: &mut Touched) {
            if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                touched.rescan = true;
                return;
            }
            if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                // The kernel dropped the watch (its folder is gone).
                if let Some(path) = self.by_wd.remove(&event.wd) {
                    self.by_path.remove(&path);
                }
                return;
            }
            let Some(folder) = self.by_wd.get(&event.wd) else {
                return;
            };
            let Some(name) = event.name.as_deref().filter(|n| !n.is_empty()) else {
                // The folder itself was deleted or moved: its parent reports the name too.
                touched.paths.insert(folder.clone());
                return;
            };
            if folder.as_os_str().is_empty() && name == OsStr::new(".git") {
                return;
            }
            if RULE_FILES.iter().any(|r| name == OsStr::new(r)) {
                touched.rescan = true;
            }
            let path = folder.join(name);
            if event.mask.contains(AddWatchFlags::IN_ISDIR) {
                if event
                    .mask
                    .intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM)
                {
                    self.forget_under(&path);
                }
                if event
                    .mask
                    .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                {
                    touched.new_folders.push(path.clone());
                }
            }
            touched.paths.insert(path);
        }

        /// Stops watching `rel` and every folder under it (deleted or moved away: a folder
        /// moved back in is watched afresh under its new name).
        fn forget_under(&mut self, rel: &Path) {
            let gone: Vec<PathBuf> = self
                .by_path
                .range(rel.to_path_buf()..)
                .map(|(p, _)| p)
                .take_while(|p| p.starts_with(rel))
                .cloned()
                .collect();
            for path in gone {
                if let Some(wd) = self.by_path.remove(&path) {
                    self.by_wd.remove(&wd);
                    // Already gone when the folder was deleted: nothing to undo.
                    let _ = self.inotify.rm_watch(wd);
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Path, Touched};

    /// No watch on this system: every status walks the whole tree.
    pub(in crate::repository) struct Watch {
        _never: std::convert::Infallible,
    }

    impl Watch {
        pub(in crate::repository) fn new() -> std::io::Result<Watch> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }

        pub(in crate::repository) fn add(&mut self, _: &Path, _: &Path) -> std::io::Result<bool> {
            match self._never {}
        }

        pub(in crate::repository) fn watches(&self, _: &Path) -> bool {
            match self._never {}
        }

        pub(in crate::repository) fn len(&self) -> usize {
            match self._never {}
        }

        pub(in crate::repository) fn drain(&mut self) -> Touched {
            match self._never {}
        }
    }
}

pub(super) use imp::Watch;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::fs;

    use super::*;

    fn drained(watch: &mut Watch) -> (Vec<String>, Vec<String>, bool) {
        let t = watch.drain();
        let show = |p: &PathBuf| p.display().to_string();
        (
            t.paths.iter().map(show).collect(),
            t.new_folders.iter().map(show).collect(),
            t.rescan,
        )
    }

    #[test]
    fn events_name_the_paths_new_folders_and_rule_files() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        fs::create_dir_all(top.join("a/b")).unwrap();
        fs::write(top.join("a/b/f.txt"), "x").unwrap();
        let mut watch = Watch::new().unwrap();
        for rel in ["", "a", "a/b"] {
            assert!(watch.add(top, Path::new(rel)).unwrap());
        }
        assert!(!watch.add(top, Path::new("missing")).unwrap());
        assert_eq!(watch.len(), 3);
        assert_eq!(drained(&mut watch), (vec![], vec![], false));

        fs::write(top.join("a/b/f.txt"), "y").unwrap();
        fs::write(top.join("top.txt"), "t").unwrap();
        fs::create_dir(top.join("a/new")).unwrap();
        fs::write(top.join("a/new/inside.txt"), "unseen: not watched yet").unwrap();
        assert_eq!(
            drained(&mut watch),
            (
                vec!["a/b/f.txt".into(), "a/new".into(), "top.txt".into()],
                vec!["a/new".into()],
                false
            )
        );

        fs::write(top.join("a/.gitignore"), "*.log\n").unwrap();
        let (paths, _, rescan) = drained(&mut watch);
        assert_eq!((paths, rescan), (vec!["a/.gitignore".to_string()], true));

        // A folder moved away is forgotten with everything under it; moved back in, it is new.
        fs::rename(top.join("a"), top.join("moved")).unwrap();
        assert_eq!(
            drained(&mut watch),
            (
                vec!["a".into(), "moved".into()],
                vec!["moved".into()],
                false
            )
        );
        assert!(!watch.watches(Path::new("a")) && !watch.watches(Path::new("a/b")));
        assert_eq!(watch.len(), 1);
        fs::write(top.join("moved/b/f.txt"), "z").unwrap();
        assert_eq!(drained(&mut watch), (vec![], vec![], false));
    }
}
