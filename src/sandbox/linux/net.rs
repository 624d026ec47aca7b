//! The fence's network, inside its own network namespace: loopback up, and on it kern's proxy
//! and the allowed local services, each a listener whose connections are carried over a unix
//! socket to kern's proxy outside (the only way out of the namespace).
//!
//! The one decision a reader must know: nothing inside can reach anything outside but through
//! these listeners, and every connection they carry starts with one line saying which
//! listener took it (`proxy`, or `tcp <port>` for a local service at the same port outside),
//! so kern's proxy applies the allow list to each. A connection to any other address inside is
//! refused at once (nothing listens; no route leaves).

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Brings the namespace's loopback interface up.
pub(super) fn loopback_up() -> Result<(), String> {
    // SAFETY: a plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("cannot open a socket: {}", nix::Error::last()));
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&sock);
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills the flags of the named interface in `ifr`.
    if unsafe { libc::ioctl(raw, libc::SIOCGIFFLAGS, std::ptr::from_mut(&mut ifr)) } < 0 {
        return Err(format!(
            "cannot read loopback's flags: {}",
            nix::Error::last()
        ));
    }
    // SAFETY: the union's flags member is the one SIOCGIFFLAGS set.
    unsafe {
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads `ifr`.
    if unsafe { libc::ioctl(raw, libc::SIOCSIFFLAGS, std::ptr::from_mut(&mut ifr)) } < 0 {
        return Err(format!("cannot bring loopback up: {}", nix::Error::last()));
    }
    Ok(())
}

/// A listener inside and the first line its connections carry.
pub(super) struct Listener {
    socket: TcpListener,
    header: String,
}

/// Listens on loopback (IPv4, and IPv6 where the namespace has it) at `proxy_port` and at each
/// of `forwards`.
pub(super) fn listen(proxy_port: u16, forwards: &[u16]) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    let ports = std::iter::once((proxy_port, "proxy".to_string()))
        .chain(forwards.iter().map(|p| (*p, format!("tcp {p}"))));
    for (port, header) in ports {
        let v4 = TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("cannot listen on 127.0.0.1:{port} inside: {e}"))?;
        out.push(Listener {
            socket: v4,
            header: header.clone(),
        });
        if let Ok(v6) = TcpListener::bind(("::1", port)) {
            out.push(Listener { socket: v6, header });
        }
    }
    Ok(out)
}

/// Serves every listener on its own thread, carrying each connection to `socket`.
pub(super) fn serve(listeners: Vec<Listener>, socket: &Path) {
    for listener in listeners {
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            for conn in listener.socket.incoming().flatten() {
                let socket = socket.clone();
                let header = listener.header.clone();
                std::thread::spawn(move || carry(conn, &socket, &header));
            }
        });
    }
}

/// Carries one connection to kern's proxy and back.
fn carry(inside: TcpStream, socket: &PathBuf, header: &str) {
    let Ok(mut outside) = UnixStream::connect(socket) else {
        return;
    };
    if outside.write_all(format!("{header}\n").as_bytes()).is_err() {
        return;
    }
    let (Ok(mut inside_r), Ok(mut outside_w)) = (inside.try_clone(), outside.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = crate::sandbox::proxy::copy(&mut inside_r, &mut outside_w);
        let _ = outside_w.shutdown(Shutdown::Write);
    });
    let mut inside_w = inside;
    let _ = crate::sandbox::proxy::copy(&mut outside, &mut inside_w);
    let _ = inside_w.shutdown(Shutdown::Write);
    let _ = up.join();
}
