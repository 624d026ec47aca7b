//! Refs of a reftable repository (`extensions.refStorage = reftable`, Git 3.0's default), which
//! libgit2 cannot read: a libgit2 refdb backend whose reads and writes are git's own plumbing,
//! installed at open ([`install`]) for such a repository only. Everything else of libgit2 —
//! objects, the index, status, commits — is unchanged and sees the refs through it, so the rest
//! of kern never knows which ref store a repository has.
//!
//! Decisions a reader must know:
//! - Reads: one `git for-each-ref --include-root-refs` (plus `git symbolic-ref HEAD` when HEAD
//!   names an unborn branch) lists every ref; the list is kept while the reftable's
//!   `tables.list` files are byte for byte the same (every ref update and compaction rewrites
//!   them), so a run asks git again only after a ref moved.
//! - Writes: `git update-ref --no-deref --stdin`, always with the old value libgit2 expects
//!   (`update <ref> <new> <old>`, `create`, `delete <ref> <old>`): a ref someone else moved
//!   meanwhile is `GIT_EMODIFIED`, as with the files backend. git writes the reflog (with git's
//!   identity), atomically, so a kill -9 leaves the refs as they were or as written.
//! - Reflogs cannot be read through it (libgit2 has no way for a backend to build one): a
//!   reflog read is "not found", which kern treats as "nothing known" (a stash moved by an
//!   agent is then kept under `refs/kern/saved/`, as any other moved shared ref). Renaming a
//!   ref, reflog writes and ref transactions are refused; kern uses none of them.
//! - No panic crosses into C: every callback runs inside `catch_unwind`, and returns -1 with
//!   a libgit2 error message when anything fails.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use git2::{Binding, Oid};
use libgit2_sys as raw;

unsafe extern "C" {
    // libgit2's own constructors for a backend's references (include/git2/sys/refs.h);
    // libgit2-sys does not bind them.
    fn git_reference__alloc(
        name: *const c_char,
        oid: *const raw::git_oid,
        peel: *const raw::git_oid,
    ) -> *mut raw::git_reference;
    fn git_reference__alloc_symbolic(
        name: *const c_char,
        target: *const c_char,
    ) -> *mut raw::git_reference;
}

/// `GIT_REFDB_BACKEND_VERSION` of libgit2 1.9.
const BACKEND_VERSION: u32 = 1;

/// True when the repository keeps its refs in reftable files.
pub(super) fn is_reftable(config: &git2::Config) -> bool {
    config
        .get_string("extensions.refstorage")
        .is_ok_and(|v| v.eq_ignore_ascii_case("reftable"))
}

/// Where a ref points.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Direct(Oid),
    Symbolic(String),
}

/// Every ref, as git listed it while the `tables.list` files held `key`.
struct Listing {
    key: Vec<Option<Vec<u8>>>,
    refs: Arc<BTreeMap<String, Target>>,
}

/// The backend: libgit2's struct first (libgit2 hands back a pointer to it), then kern's.
#[repr(C)]
struct Backend {
    parent: raw::git_refdb_backend,
    store: Store,
}

/// The repository as git sees it, and the last listing of its refs.
struct Store {
    git_dir: PathBuf,
    format: git2::ObjectFormat,
    tables: Vec<PathBuf>,
    listing: Mutex<Option<Listing>>,
}

impl Store {
    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(&self.git_dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_COMMON_DIR")
            .env_remove("GIT_INDEX_FILE")
            .stdin(Stdio::null());
        cmd
    }

    fn key(&self) -> Vec<Option<Vec<u8>>> {
        self.tables.iter().map(|t| std::fs::read(t).ok()).collect()
    }

    /// Every ref now (HEAD and the root refs among them).
    fn refs(&self) -> Result<Arc<BTreeMap<String, Target>>, String> {
        let key = self.key();
        let mut guard = self
            .listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A `tables.list` that cannot be read says nothing about change: ask git every time.
        if let Some(listing) = guard.as_ref()
            && listing.key == key
            && key.iter().all(Option::is_some)
        {
            return Ok(Arc::clone(&listing.refs));
        }
        let refs = Arc::new(self.list()?);
        *guard = Some(Listing {
            key,
            refs: Arc::clone(&refs),
        });
        Ok(refs)
    }

    fn list(&self) -> Result<BTreeMap<String, Target>, String> {
        let out = self
            .git()
            .args([
                "for-each-ref",
                "--include-root-refs",
                "--format=%(refname)%00%(objectname)%00%(symref)",
            ])
            .output()
            .map_err(|e| format!("cannot run `git for-each-ref`: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`git for-each-ref` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let mut refs = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut parts = line.split('\0');
            let (Some(name), Some(id), symref) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let target = match symref.filter(|s| !s.is_empty()) {
                Some(to) => Target::Symbolic(to.to_string()),
                None => match Oid::from_str_ext(id, self.format) {
                    Ok(oid) => Target::Direct(oid),
                    Err(_) => continue,
                },
            };
            refs.insert(name.to_string(), target);
        }
        if !refs.contains_key("HEAD") {
            // HEAD names a branch with no commit yet: for-each-ref leaves it out.
            let out = self
                .git()
                .args(["symbolic-ref", "-q", "HEAD"])
                .output()
                .map_err(|e| format!("cannot run `git symbolic-ref`: {e}"))?;
            let to = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !to.is_empty() {
                refs.insert("HEAD".into(), Target::Symbolic(to));
            }
        }
        Ok(refs)
    }

    /// Runs `commands` through one `git update-ref --no-deref --stdin` (one transaction).
    fn update(&self, commands: &str, message: Option<&str>) -> Result<(), (c_int, String)> {
        let mut cmd = self.git();
        cmd.args(["update-ref", "--no-deref"]);
        if let Some(message) = message.filter(|m| !m.is_empty()) {
            cmd.arg("-m").arg(message.replace('\n', " "));
        }
        cmd.arg("--stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let result = (|| {
            let mut child = cmd.spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(commands.as_bytes())?;
            }
            child.wait_with_output()
        })();
        *self
            .listing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        let out = result.map_err(|e| (-1, format!("cannot run `git update-ref`: {e}")))?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let code = if err.contains("already exists") {
            raw::GIT_EEXISTS as c_int
        } else if err.contains("but expected") || err.contains("is at") {
            raw::GIT_EMODIFIED as c_int
        } else {
            -1
        };
        Err((
            code,
            format!("`git update-ref` refused `{}`: {err}", commands.trim()),
        ))
    }
}

/// Makes libgit2 read and write the refs of the reftable repository `repo` through git (see
/// the module docs). An error says why git could not list them (no git, or one too old).
pub(super) fn install(repo: &git2::Repository) -> Result<(), String> {
    let git_dir = repo.path().to_path_buf();
    let common = repo.commondir().to_path_buf();
    let mut tables = vec![common.join("reftable").join("tables.list")];
    if git_dir.components().ne(common.components()) {
        tables.push(git_dir.join("reftable").join("tables.list"));
    }
    let store = Store {
        git_dir,
        format: repo.object_format(),
        tables,
        listing: Mutex::new(None),
    };
    store.refs()?;
    // SAFETY: an all-zero git_refdb_backend is a valid value (a version and null callbacks);
    // every callback libgit2 requires is set before the struct is handed over.
    let mut parent: raw::git_refdb_backend = unsafe { std::mem::zeroed() };
    parent.version = BACKEND_VERSION;
    parent.exists = Some(exists);
    parent.lookup = Some(lookup);
    parent.iterator = Some(iterator);
    parent.write = Some(write);
    parent.rename = Some(rename);
    parent.del = Some(del);
    parent.has_log = Some(has_log);
    parent.ensure_log = Some(ensure_log);
    parent.free = Some(free);
    parent.reflog_read = Some(reflog_read);
    parent.reflog_write = Some(reflog_write);
    parent.reflog_rename = Some(reflog_rename);
    parent.reflog_delete = Some(reflog_delete);
    let backend = Box::into_raw(Box::new(Backend { parent, store }));
    let mut db: *mut raw::git_refdb = std::ptr::null_mut();
    // SAFETY: `repo.raw()` is a live repository for this call; `db` is written by libgit2.
    if unsafe { raw::git_refdb_new(&raw mut db, repo.raw()) } < 0 {
        // SAFETY: `backend` came from Box::into_raw above and was never handed over.
        drop(unsafe { Box::from_raw(backend) });
        return Err(last_error("making a ref database"));
    }
    // SAFETY: `db` is the refdb made above; `backend` points to a complete git_refdb_backend
    // (its first field). On success libgit2 owns it and frees it through `free`.
    if unsafe { raw::git_refdb_set_backend(db, backend.cast()) } < 0 {
        // SAFETY: not handed over: still ours to drop; `db` is ours to free.
        unsafe {
            drop(Box::from_raw(backend));
            raw::git_refdb_free(db);
        }
        return Err(last_error("installing the reftable refs"));
    }
    // SAFETY: both pointers are live; the repository takes its own reference to `db`, so ours
    // is released after.
    let set = unsafe { raw::git_repository_set_refdb(repo.raw(), db) };
    // SAFETY: `db` is ours; the repository keeps it alive when set above.
    unsafe { raw::git_refdb_free(db) };
    if set < 0 {
        return Err(last_error("installing the reftable refs"));
    }
    Ok(())
}

/// libgit2's last error message, for `doing`.
fn last_error(doing: &str) -> String {
    format!("{doing}: {}", git2::Error::last_error(-1).message())
}

/// Sets libgit2's error message, as a callback must before returning an error.
fn set_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: `text` is a valid C string for the call; libgit2 copies it.
    unsafe {
        raw::git_error_set_str(raw::GIT_ERROR_REFERENCE as c_int, text.as_ptr());
    }
}

/// Runs a callback's body, turning a panic into an error: nothing unwinds into C.
fn guarded(body: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        set_error("kern's reftable refs failed unexpectedly");
        -1
    })
}

/// The store of the backend libgit2 passes back.
///
/// # Safety
/// `backend` must be a pointer [`install`] handed to libgit2, not yet freed.
unsafe fn store<'a>(backend: *mut raw::git_refdb_backend) -> &'a Store {
    // SAFETY: per the contract, `backend` is the first field of a live, boxed `Backend`.
    unsafe { &(*backend.cast::<Backend>()).store }
}

/// A C string argument as text (`None` for null).
///
/// # Safety
/// `text` must be null or a valid C string for the call.
unsafe fn text<'a>(text: *const c_char) -> Option<&'a str> {
    // SAFETY: per the contract.
    (!text.is_null()).then(|| unsafe { CStr::from_ptr(text) }.to_str().ok())?
}

/// A libgit2 reference for `name` at `target` (null when allocation failed).
fn alloc(name: &str, target: &Target) -> *mut raw::git_reference {
    let Ok(name) = CString::new(name) else {
        return std::ptr::null_mut();
    };
    match target {
        // SAFETY: `name` is a valid C string and `oid.raw()` a valid oid for the call; libgit2
        // copies both.
        Target::Direct(oid) => unsafe {
            git_reference__alloc(name.as_ptr(), oid.raw(), std::ptr::null())
        },
        Target::Symbolic(to) => match CString::new(to.as_str()) {
            // SAFETY: both are valid C strings for the call; libgit2 copies them.
            Ok(to) => unsafe { git_reference__alloc_symbolic(name.as_ptr(), to.as_ptr()) },
            Err(_) => std::ptr::null_mut(),
        },
    }
}

extern "C" fn exists(
    out: *mut c_int,
    backend: *mut raw::git_refdb_backend,
    name: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes the installed backend and a valid name.
        let (store, name) = unsafe { (store(backend), text(name)) };
        match store.refs() {
            Ok(refs) => {
                let found = name.is_some_and(|n| refs.contains_key(n));
                // SAFETY: `out` is libgit2's int to fill.
                unsafe { *out = c_int::from(found) };
                0
            }
            Err(e) => {
                set_error(&e);
                -1
            }
        }
    })
}

extern "C" fn lookup(
    out: *mut *mut raw::git_reference,
    backend: *mut raw::git_refdb_backend,
    name: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes the installed backend and a valid name.
        let (store, name) = unsafe { (store(backend), text(name).unwrap_or_default()) };
        let refs = match store.refs() {
            Ok(refs) => refs,
            Err(e) => {
                set_error(&e);
                return -1;
            }
        };
        let Some(target) = refs.get(name) else {
            set_error(&format!("reference '{name}' not found"));
            return raw::GIT_ENOTFOUND as c_int;
        };
        let reference = alloc(name, target);
        if reference.is_null() {
            set_error(&format!("cannot make the reference '{name}'"));
            return -1;
        }
        // SAFETY: `out` is libgit2's pointer to fill; it owns the reference from now on.
        unsafe { *out = reference };
        0
    })
}

/// An iteration over refs: libgit2's struct first, then the refs and the name handed out last.
#[repr(C)]
struct Iter {
    parent: raw::git_reference_iterator,
    refs: Vec<(CString, Target)>,
    next: usize,
}

extern "C" fn iterator(
    out: *mut *mut raw::git_reference_iterator,
    backend: *mut raw::git_refdb_backend,
    glob: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes the installed backend and a null or valid glob.
        let (store, glob) = unsafe { (store(backend), text(glob)) };
        let refs = match store.refs() {
            Ok(refs) => refs,
            Err(e) => {
                set_error(&e);
                return -1;
            }
        };
        let matcher = match glob.map(|g| globset::Glob::new(g).map(|g| g.compile_matcher())) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => {
                set_error(&format!("bad ref pattern: {e}"));
                return -1;
            }
            None => None,
        };
        // As the files backend: refs under `refs/`, not HEAD or the other root refs.
        let refs = refs
            .range::<str, _>((
                std::ops::Bound::Included("refs/"),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(name, _)| name.starts_with("refs/"))
            .filter(|(name, _)| matcher.as_ref().is_none_or(|m| m.is_match(name)))
            .filter_map(|(name, target)| {
                CString::new(name.as_str())
                    .ok()
                    .map(|n| (n, target.clone()))
            })
            .collect();
        let iter = Box::new(Iter {
            parent: raw::git_reference_iterator {
                db: std::ptr::null_mut(),
                next: Some(iter_next),
                next_name: Some(iter_next_name),
                free: Some(iter_free),
            },
            refs,
            next: 0,
        });
        // SAFETY: `out` is libgit2's pointer to fill; it frees the iterator through `iter_free`.
        unsafe { *out = Box::into_raw(iter).cast() };
        0
    })
}

extern "C" fn iter_next(
    out: *mut *mut raw::git_reference,
    iter: *mut raw::git_reference_iterator,
) -> c_int {
    guarded(|| {
        // SAFETY: `iter` is an `Iter` made by `iterator` (its first field), live until freed.
        let iter = unsafe { &mut *iter.cast::<Iter>() };
        let Some((name, target)) = iter.refs.get(iter.next) else {
            return raw::GIT_ITEROVER as c_int;
        };
        iter.next += 1;
        let reference = alloc(&name.to_string_lossy(), target);
        if reference.is_null() {
            set_error("cannot make a reference");
            return -1;
        }
        // SAFETY: `out` is libgit2's pointer to fill; it owns the reference from now on.
        unsafe { *out = reference };
        0
    })
}

extern "C" fn iter_next_name(
    out: *mut *const c_char,
    iter: *mut raw::git_reference_iterator,
) -> c_int {
    guarded(|| {
        // SAFETY: `iter` is an `Iter` made by `iterator`, live until freed.
        let iter = unsafe { &mut *iter.cast::<Iter>() };
        let Some((name, _)) = iter.refs.get(iter.next) else {
            return raw::GIT_ITEROVER as c_int;
        };
        iter.next += 1;
        // SAFETY: `out` is libgit2's pointer to fill; the name lives as long as the iterator.
        unsafe { *out = name.as_ptr() };
        0
    })
}

extern "C" fn iter_free(iter: *mut raw::git_reference_iterator) {
    // SAFETY: `iter` came from Box::into_raw in `iterator`; libgit2 frees it once.
    let _ = catch_unwind(|| drop(unsafe { Box::from_raw(iter.cast::<Iter>()) }));
}

/// The hex of the oid at `oid` (`None` for null).
///
/// # Safety
/// `oid` must be null or a valid oid for the call.
unsafe fn hex(oid: *const raw::git_oid) -> Option<String> {
    // SAFETY: per the contract.
    (!oid.is_null()).then(|| unsafe { Oid::from_raw(oid) }.to_string())
}

/// The `update-ref --stdin` line that makes `name` what `new` says, if it still is what `old`
/// and `old_target` say (`force` without either: whatever it is now; neither and no force: it
/// must not exist).
fn write_command(
    name: &str,
    new: &Target,
    force: bool,
    old: Option<&str>,
    old_target: Option<&str>,
) -> String {
    match new {
        Target::Direct(oid) => match (old, old_target) {
            (Some(old), _) => format!("update {name} {oid} {old}\n"),
            (None, Some(to)) => format!("symref-verify {name} {to}\nupdate {name} {oid}\n"),
            (None, None) if force => format!("update {name} {oid}\n"),
            (None, None) => format!("create {name} {oid}\n"),
        },
        Target::Symbolic(to) => match (old, old_target) {
            (Some(old), _) => format!("symref-update {name} {to} oid {old}\n"),
            (None, Some(was)) => format!("symref-update {name} {to} ref {was}\n"),
            (None, None) if force => format!("symref-update {name} {to}\n"),
            (None, None) => format!("symref-create {name} {to}\n"),
        },
    }
}

extern "C" fn write(
    backend: *mut raw::git_refdb_backend,
    reference: *const raw::git_reference,
    force: c_int,
    _who: *const raw::git_signature,
    message: *const c_char,
    old: *const raw::git_oid,
    old_target: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes the installed backend, a live reference and null or valid
        // strings and oids.
        let (store, name, new, message, old, old_target) = unsafe {
            let name = text(raw::git_reference_name(reference)).unwrap_or_default();
            let new = match text(raw::git_reference_symbolic_target(reference)) {
                Some(to) => Target::Symbolic(to.to_string()),
                None => {
                    let oid = raw::git_reference_target(reference);
                    if oid.is_null() {
                        set_error(&format!("the reference '{name}' has no target"));
                        return -1;
                    }
                    Target::Direct(Oid::from_raw(oid))
                }
            };
            (
                store(backend),
                name,
                new,
                text(message),
                hex(old),
                text(old_target),
            )
        };
        let command = write_command(name, &new, force != 0, old.as_deref(), old_target);
        match store.update(&command, message) {
            Ok(()) => 0,
            Err((code, e)) => {
                set_error(&e);
                code
            }
        }
    })
}

extern "C" fn del(
    backend: *mut raw::git_refdb_backend,
    name: *const c_char,
    old: *const raw::git_oid,
    old_target: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes the installed backend and null or valid strings and oids.
        let (store, name, old, old_target) = unsafe {
            (
                store(backend),
                text(name).unwrap_or_default(),
                hex(old),
                text(old_target),
            )
        };
        let command = match (old, old_target) {
            (Some(old), _) => format!("delete {name} {old}\n"),
            (None, Some(to)) => format!("symref-delete {name} {to}\n"),
            (None, None) => format!("delete {name}\n"),
        };
        match store.update(&command, None) {
            Ok(()) => 0,
            Err((code, e)) => {
                set_error(&e);
                code
            }
        }
    })
}

extern "C" fn rename(
    _out: *mut *mut raw::git_reference,
    _backend: *mut raw::git_refdb_backend,
    _old: *const c_char,
    _new: *const c_char,
    _force: c_int,
    _who: *const raw::git_signature,
    _message: *const c_char,
) -> c_int {
    guarded(|| {
        set_error("renaming a ref of a reftable repository is not supported (use `git branch -m`)");
        -1
    })
}

extern "C" fn has_log(_backend: *mut raw::git_refdb_backend, _name: *const c_char) -> c_int {
    // git decides about reflogs itself (`core.logAllRefUpdates`) when it writes.
    0
}

extern "C" fn ensure_log(_backend: *mut raw::git_refdb_backend, _name: *const c_char) -> c_int {
    0
}

extern "C" fn free(backend: *mut raw::git_refdb_backend) {
    // SAFETY: `backend` came from Box::into_raw in `install`; libgit2 frees it once.
    let _ = catch_unwind(|| drop(unsafe { Box::from_raw(backend.cast::<Backend>()) }));
}

extern "C" fn reflog_read(
    _out: *mut *mut raw::git_reflog,
    _backend: *mut raw::git_refdb_backend,
    name: *const c_char,
) -> c_int {
    guarded(|| {
        // SAFETY: libgit2 passes a valid name.
        let name = unsafe { text(name) }.unwrap_or_default();
        set_error(&format!("the reflog of '{name}' is kept by git (reftable)"));
        raw::GIT_ENOTFOUND as c_int
    })
}

extern "C" fn reflog_write(
    _backend: *mut raw::git_refdb_backend,
    _log: *mut raw::git_reflog,
) -> c_int {
    guarded(|| {
        set_error("writing a reflog of a reftable repository is not supported");
        -1
    })
}

extern "C" fn reflog_rename(
    _backend: *mut raw::git_refdb_backend,
    _old: *const c_char,
    _new: *const c_char,
) -> c_int {
    guarded(|| {
        set_error("renaming a reflog of a reftable repository is not supported");
        -1
    })
}

extern "C" fn reflog_delete(_backend: *mut raw::git_refdb_backend, _name: *const c_char) -> c_int {
    // git deletes a ref's reflog with the ref.
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_keeps_its_expected_old_value() {
        let oid = Oid::from_str("1111111111111111111111111111111111111111").unwrap();
        let direct = Target::Direct(oid);
        let to = Target::Symbolic("refs/heads/b".into());
        let cases = [
            (
                &direct,
                false,
                Some("2222"),
                None,
                format!("update r {oid} 2222\n"),
            ),
            (&direct, true, None, None, format!("update r {oid}\n")),
            (&direct, false, None, None, format!("create r {oid}\n")),
            (
                &direct,
                true,
                None,
                Some("refs/heads/a"),
                format!("symref-verify r refs/heads/a\nupdate r {oid}\n"),
            ),
            (
                &to,
                false,
                None,
                None,
                "symref-create r refs/heads/b\n".into(),
            ),
            (
                &to,
                true,
                None,
                Some("refs/heads/a"),
                "symref-update r refs/heads/b ref refs/heads/a\n".into(),
            ),
            (
                &to,
                true,
                Some("2222"),
                None,
                "symref-update r refs/heads/b oid 2222\n".into(),
            ),
        ];
        for (new, force, old, old_target, want) in cases {
            assert_eq!(write_command("r", new, force, old, old_target), want);
        }
    }

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn libgit2_reads_and_writes_reftable_refs_through_git_with_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        git(top, &["init", "-q", "-b", "main", "--ref-format=reftable"]);
        super::super::accept_formats();
        let repo = git2::Repository::open(top).unwrap();
        assert!(repo.config().is_ok_and(|c| is_reftable(&c)));
        install(&repo).unwrap();
        // Unborn: HEAD names main, which does not exist yet.
        assert_eq!(
            repo.find_reference("HEAD")
                .unwrap()
                .symbolic_target()
                .unwrap(),
            Some("refs/heads/main")
        );
        assert!(repo.head().is_err());
        let sig = git2::Signature::now("T", "t@example.com").unwrap();
        let tree = repo
            .find_tree(repo.index().unwrap().write_tree().unwrap())
            .unwrap();
        let one = repo
            .commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
            .unwrap();
        assert_eq!(git(top, &["rev-parse", "main"]).trim(), one.to_string());
        let first = repo.find_commit(one).unwrap();
        let two = repo
            .commit(Some("HEAD"), &sig, &sig, "two", &tree, &[&first])
            .unwrap();
        assert_eq!(repo.head().unwrap().target(), Some(two));
        assert_eq!(
            git(top, &["reflog", "--format=%gs", "main"]),
            "commit: two\ncommit (initial): one\n"
        );
        // Someone else moves main: a write expecting the old value is refused, not applied.
        git(top, &["update-ref", "refs/heads/main", &one.to_string()]);
        let stale = repo
            .reference_matching("refs/heads/main", two, true, two, "stale")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(stale.code(), git2::ErrorCode::Modified, "{stale}");
        assert_eq!(git(top, &["rev-parse", "main"]).trim(), one.to_string());
        // Creating what exists is refused; forcing it is not.
        let exists = repo
            .reference("refs/heads/main", two, false, "again")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(exists.code(), git2::ErrorCode::Exists, "{exists}");
        repo.reference("refs/kern/saved/a/x", two, true, "keep")
            .unwrap();
        repo.reference("refs/kern/saved/b", one, true, "keep")
            .unwrap();
        let names = |glob: &str| -> Vec<String> {
            repo.references_glob(glob)
                .unwrap()
                .map(|r| r.unwrap().name().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names("refs/kern/saved/*"),
            ["refs/kern/saved/a/x", "refs/kern/saved/b"]
        );
        assert_eq!(
            repo.references().unwrap().count(),
            3,
            "refs/ only, HEAD apart"
        );
        // Deleting checks the old value too.
        let mut saved = repo.find_reference("refs/kern/saved/b").unwrap();
        git(top, &["update-ref", "refs/kern/saved/b", &two.to_string()]);
        assert!(saved.delete().is_err());
        repo.find_reference("refs/kern/saved/b")
            .unwrap()
            .delete()
            .unwrap();
        assert_eq!(names("refs/kern/saved/*"), ["refs/kern/saved/a/x"]);
        let fsck = Command::new("git")
            .args(["fsck", "--strict", "--no-progress"])
            .current_dir(top)
            .output()
            .unwrap();
        assert!(fsck.status.success() && fsck.stderr.is_empty(), "{fsck:?}");
    }
}
