//! The last steps before the fenced command runs, in its own process: no capability survives
//! the `exec` (also for root), no privilege can be gained again (`no_new_privs`), and Landlock
//! beneath the mounts where the kernel has it.
//!
//! The one decision a reader must know: inside its user namespace the init holds every
//! capability, and a command run as root there would keep them — and could unmount the
//! fence's over-mounts. So the bounding set is emptied and the inheritable set cleared before
//! `exec`: a root command then starts with none. Landlock adds, where the kernel has it, a
//! second wall for writes (only the writable paths, `/dev` and `/proc` files) and keeps
//! signals and abstract sockets inside the fenced tree; an older kernel without it is not an
//! error (the namespaces are the fence), and docs/safety.md says so.

use std::path::PathBuf;

/// Empties the bounding set and the inheritable set, and sets `no_new_privs`.
pub(super) fn drop_privileges() -> Result<(), String> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only; EINVAL past the last capability is the end.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 {
            let e = nix::Error::last();
            if e == nix::Error::EINVAL {
                break;
            }
            return Err(format!("cannot drop capability {cap}: {e}"));
        }
    }
    // SAFETY: clears the ambient set; integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    clear_inheritable()?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("cannot set no_new_privs: {e}"))
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Keeps the effective and permitted sets as they are and clears the inheritable one.
fn clear_inheritable() -> Result<(), String> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and a two-element data array, as version 3 requires.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            std::ptr::from_mut(&mut header),
            data.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(format!("cannot read capabilities: {}", nix::Error::last()));
    }
    for d in &mut data {
        d.inheritable = 0;
    }
    // SAFETY: as above; the kernel only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capset,
            std::ptr::from_mut(&mut header),
            data.as_ptr(),
        )
    };
    if r != 0 {
        return Err(format!("cannot clear capabilities: {}", nix::Error::last()));
    }
    Ok(())
}

/// Landlock: writes only beneath `writable` (and files of `/dev` and `/proc`), signals and
/// abstract sockets only inside the fenced tree. Best effort: what the kernel lacks is left
/// out; a kernel without Landlock returns `Ok(false)`.
pub(super) fn landlock(writable: &[PathBuf]) -> Result<bool, String> {
    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let write = AccessFs::from_write(abi);
    let built = (|| {
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(write)?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(writable, write))?
            .add_rules(path_beneath_rules(
                ["/dev", "/proc"],
                AccessFs::WriteFile | AccessFs::Truncate,
            ))?;
        created.restrict_self()
    })();
    match built {
        Ok(status) => Ok(status.ruleset != RulesetStatus::NotEnforced),
        Err(e) => Err(format!("cannot apply Landlock: {e}")),
    }
}
