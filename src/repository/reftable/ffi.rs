//! libgit2's side of the reftable refs: the refdb backend libgit2 calls (a C vtable of
//! callbacks), translating each call onto the safe [`Store`] of `mod.rs`. Every `unsafe` block
//! of the reftable support is here, each with the reason it is sound.
//!
//! The one decision a reader must know: no panic crosses into C — every callback runs inside
//! [`guarded`] (`catch_unwind`) and answers -1 with a libgit2 error message when anything
//! fails; the backend and the iterators are boxes libgit2 hands back to `free`/`iter_free`
//! exactly once.

use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use git2::{Binding, Oid};
use libgit2_sys as raw;

use super::{Refused, Store, Target, Why, delete_command, write_command};

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

/// The backend: libgit2's struct first (libgit2 hands back a pointer to it), then kern's.
#[repr(C)]
struct Backend {
    parent: raw::git_refdb_backend,
    store: Store,
}

/// Hands `store` to libgit2 as the refdb backend of `repo`.
pub(super) fn install(repo: &git2::Repository, store: Store) -> Result<(), String> {
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

/// A refused update as the callback's answer: the error message set, libgit2's code returned.
fn refused(result: Result<(), Refused>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(Refused { why, message }) => {
            set_error(&message);
            match why {
                Why::Exists => raw::GIT_EEXISTS as c_int,
                Why::Modified => raw::GIT_EMODIFIED as c_int,
                Why::Failed => -1,
            }
        }
    }
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
        let refs = match store.under_refs(glob) {
            Ok(refs) => refs
                .into_iter()
                .filter_map(|(name, target)| CString::new(name).ok().map(|n| (n, target)))
                .collect(),
            Err(e) => {
                set_error(&e);
                return -1;
            }
        };
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
        refused(store.update(&command, message))
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
        let command = delete_command(name, old.as_deref(), old_target);
        refused(store.update(&command, None))
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
