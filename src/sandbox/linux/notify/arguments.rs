//! Reading what a notified system call points at: its arguments are addresses in the calling
//! process, read here through `process_vm_readv` — the path it names (made absolute against
//! its folder argument or its working folder) and the socket address it connects or sends to.
//!
//! The one decision a reader must know: **everything read can be wrong by the time the call
//! runs**. The caller may change its memory or its folders after the notification, so what is
//! read here only names a denial in the log; it never decides what the call may do (the kernel
//! does, by the mounts and Landlock). A read that fails (the process is gone, the address is
//! bad) gives `None`, and the call is then simply not named.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// The path a call names, made absolute against its folder argument (or the caller's working
/// folder), `..` and `.` resolved by the names.
pub(super) fn path_arg(pid: i32, dirfd: Option<u64>, addr: u64) -> Option<PathBuf> {
    let text = read_string(pid, addr)?;
    let path =
        PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(text));
    let absolute = if path.is_absolute() {
        path
    } else {
        let base = match dirfd.map(|d| d as i64 as i32) {
            Some(fd) if fd != libc::AT_FDCWD => {
                std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?
            }
            _ => std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?,
        };
        base.join(path)
    };
    Some(normal(&absolute))
}

/// `path` with `.` dropped and `..` taken back, by its names alone.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `len` bytes at `addr` in process `pid`.
pub(super) fn read_memory(pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: reads another process's memory into `buf`, whose length is given; the remote
    // address is only used by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid, &raw const local, 1, &raw const remote, 1, 0) };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

/// The NUL-terminated string at `addr` in process `pid` (up to 4 KiB), read a page piece at a
/// time so that a string near the end of its mapping is still read.
fn read_string(pid: i32, addr: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < 4096 {
        let to_page = 4096 - (at % 4096) as usize;
        let chunk = read_memory(pid, at, to_page.min(256))?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(out);
        }
        at += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    None
}

/// The IP address and port of a `sockaddr_in` or `sockaddr_in6` (`None` for other families).
pub(super) fn socket_address(bytes: &[u8]) -> Option<(IpAddr, u16)> {
    let family = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]);
    let port = u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]);
    match i32::from(family) {
        libc::AF_INET => {
            let o: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some((IpAddr::V4(Ipv4Addr::from(o)), port))
        }
        libc::AF_INET6 => {
            let o: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            let v6 = Ipv6Addr::from(o);
            Some((v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4), port))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_are_read_from_their_bytes() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&443u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[203, 0, 113, 5]);
        assert_eq!(
            socket_address(&v4),
            Some(("203.0.113.5".parse().unwrap(), 443))
        );
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&53u16.to_be_bytes());
        v6[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        assert_eq!(socket_address(&v6), Some(("::1".parse().unwrap(), 53)));
        let mut unix = vec![0u8; 16];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(socket_address(&unix), None);
        assert_eq!(normal(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
