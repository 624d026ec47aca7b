//! The fence's egress proxy: kern runs one per fenced process, outside the fence, on a unix
//! socket the fence's listeners carry their connections to (Linux), or on a loopback port
//! (macOS). It lets through only the allowed hosts and names every other one.
//!
//! The one decision a reader must know: the proxy speaks HTTP's own proxy protocol (`CONNECT
//! host:port`, and plain `GET http://host/…`), which every agent CLI, package manager and
//! `git` honours through `HTTPS_PROXY`/`HTTP_PROXY`; a connection the fence forwards for an
//! allowed local service arrives as `tcp <port>` and goes to that port on the machine's
//! loopback. A denied request is answered at once (`403` naming the fix, never a hang) and
//! recorded as "tried to reach host:port". A name allowed by the list that resolves to a
//! loopback or link-local address is denied too (only a rule naming that address allows it),
//! so an allowed name cannot be turned into a way to the machine's own services or a cloud's
//! metadata address. Threads, not the async runtime: the sync hook runner uses it as well, and
//! a fenced process holds a handful of connections.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::hosts::{self, HostRule};
use super::report::{DenialKind, FenceReport};

/// How long the proxy waits to connect to an allowed host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The longest request head the proxy reads.
const HEAD_LIMIT: usize = 64 * 1024;

/// A running proxy.
pub(crate) struct Proxy {
    stop: Arc<AtomicBool>,
    denied: Arc<Mutex<FenceReport>>,
    wake: Wake,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How to wake the accept loop to stop it.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
enum Wake {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// What a connection to the proxy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A tunnel to `host:port` (`CONNECT`).
    Tunnel { host: String, port: u16 },
    /// One plain HTTP request to `host:port`, sent on as `head`.
    Plain {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
    /// A connection the fence forwarded for the local service at `port`.
    Local(u16),
    /// Whether the local service at `port` takes connections now (the fence asks before a
    /// connection to it inside goes on, so that a refusal is a refusal there too).
    Probe(u16),
}

impl Proxy {
    /// Serves `rules` on the unix socket `path`.
    pub(crate) fn on_socket(path: &Path, rules: Vec<HostRule>) -> std::io::Result<Proxy> {
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        let (stop, denied) = shared(&rules);
        let thread = accept_each(
            move || listener.accept().map(|(conn, _)| conn),
            std::os::unix::net::UnixStream::try_clone,
            (rules, &stop, &denied),
            true,
        );
        Ok(Proxy {
            stop,
            denied,
            wake: Wake::Unix(path.to_path_buf()),
            thread: Some(thread),
        })
    }

    /// Serves `rules` on a loopback TCP port (where the fence has no network of its own:
    /// macOS).
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    pub(crate) fn on_loopback(rules: Vec<HostRule>) -> std::io::Result<(Proxy, u16)> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let (stop, denied) = shared(&rules);
        let thread = accept_each(
            move || listener.accept().map(|(conn, _)| conn),
            std::net::TcpStream::try_clone,
            (rules, &stop, &denied),
            false,
        );
        Ok((
            Proxy {
                stop,
                denied,
                wake: Wake::Tcp(addr),
                thread: Some(thread),
            },
            addr.port(),
        ))
    }

    /// Stops accepting and returns what was denied (connections already carried go on until
    /// their ends close them, which the end of the fenced process brings).
    pub(crate) fn finish(mut self) -> FenceReport {
        self.shut();
        self.denied
            .lock()
            .map_or_else(|p| p.into_inner().clone(), |r| r.clone())
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        match &self.wake {
            Wake::Unix(path) => {
                let _ = std::os::unix::net::UnixStream::connect(path);
            }
            Wake::Tcp(addr) => {
                let _ = TcpStream::connect_timeout(addr, Duration::from_secs(1));
            }
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shut();
        }
    }
}

/// Accepts connections from `accept` until `stop` is set, each served on a thread of its own
/// (`framed`: the fence's own socket, whose first line names the destination).
fn accept_each<S, A>(
    mut accept: A,
    split: fn(&S) -> std::io::Result<S>,
    (rules, stop, denied): (Vec<HostRule>, &Arc<AtomicBool>, &Arc<Mutex<FenceReport>>),
    framed: bool,
) -> std::thread::JoinHandle<()>
where
    S: Read + Write + Shut + Send + 'static,
    A: FnMut() -> std::io::Result<S> + Send + 'static,
{
    let (stop, denied) = (stop.clone(), denied.clone());
    let rules = Arc::new(rules);
    std::thread::spawn(move || {
        loop {
            let conn = accept();
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let (rules, denied) = (rules.clone(), denied.clone());
            std::thread::spawn(move || {
                if let Ok(writer) = split(&conn) {
                    serve(BufReader::new(conn), writer, &rules, &denied, framed);
                }
            });
        }
    })
}

fn shared(rules: &[HostRule]) -> (Arc<AtomicBool>, Arc<Mutex<FenceReport>>) {
    let mut report = FenceReport::new(super::Mode::Kern);
    report.hosts = rules.iter().map(ToString::to_string).collect();
    (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Mutex::new(report)),
    )
}

/// Reads what `reader` asks for: the fence's `proxy`/`tcp <port>` line first when `framed`,
/// then an HTTP proxy request.
pub(crate) fn read_ask(reader: &mut dyn BufRead, framed: bool) -> Result<Ask, String> {
    if framed {
        let mut line = String::new();
        reader
            .take(64)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let line = line.trim_end();
        if let Some(port) = line.strip_prefix("tcp ") {
            return port
                .parse()
                .map(Ask::Local)
                .map_err(|_| format!("bad forward `{line}`"));
        }
        if let Some(port) = line.strip_prefix("probe ") {
            return port
                .parse()
                .map(Ask::Probe)
                .map_err(|_| format!("bad probe `{line}`"));
        }
        if line != "proxy" {
            return Err(format!("bad frame `{line}`"));
        }
    }
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader
            .take((HEAD_LIMIT - head.len().min(HEAD_LIMIT)) as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the request ended early".into());
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        if head.len() >= HEAD_LIMIT {
            return Err("the request head is too long".into());
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or("");
    let mut words = first.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next())
    else {
        return Err(format!("bad request line `{first}`"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let rule: HostRule = target
            .parse()
            .map_err(|_| format!("bad CONNECT target `{target}`"))?;
        let port = rule
            .port
            .ok_or_else(|| format!("CONNECT `{target}` names no port"))?;
        return Ok(Ask::Tunnel {
            host: rule
                .host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
        });
    }
    let rule = hosts::url_host(target)
        .ok_or_else(|| format!("`{method} {target}`: a proxy request names an http:// URL"))?;
    let rest = target.split_once("://").map(|(_, r)| r).unwrap_or_default();
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    let mut sent = format!("{method} {path} {version}\r\n").into_bytes();
    for line in text.lines().skip(1) {
        let name = line.split(':').next().unwrap_or("").trim();
        if name.eq_ignore_ascii_case("proxy-connection")
            || name.eq_ignore_ascii_case("proxy-authorization")
        {
            continue;
        }
        sent.extend_from_slice(line.as_bytes());
        sent.extend_from_slice(b"\r\n");
    }
    Ok(Ask::Plain {
        host: rule
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: rule.port.unwrap_or(80),
        head: sent,
    })
}

/// Why the proxy does not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The fence refuses it (recorded as a denial).
    Denied(String),
    /// It is allowed, but the machine cannot reach it (a name that does not resolve).
    Unreachable(String),
}

/// The addresses `host:port` may be reached at under `rules`, or why not. An address a name
/// resolves to that is loopback, link-local or unspecified is allowed only by a rule naming
/// that address.
pub(crate) fn admit(
    rules: &[HostRule],
    host: &str,
    port: u16,
    resolve: &dyn Fn(&str, u16) -> Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, Refusal> {
    if !hosts::allowed(rules, host, port) {
        return Err(Refusal::Denied(format!(
            "{host}:{port} is not on the fence's allowed hosts"
        )));
    }
    let literal = host.parse::<IpAddr>().is_ok() || host == "localhost";
    let addrs = resolve(host, port);
    if addrs.is_empty() {
        return Err(Refusal::Unreachable(format!("{host} does not resolve")));
    }
    let kept: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| {
            let ip = a.ip();
            let special = ip.is_loopback()
                || ip.is_unspecified()
                || match ip {
                    IpAddr::V4(v4) => v4.is_link_local(),
                    IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
                };
            literal || !special || hosts::allowed(rules, &ip.to_string(), port)
        })
        .collect();
    if kept.is_empty() {
        return Err(Refusal::Denied(format!(
            "{host} resolves to a local address only a rule naming it may reach"
        )));
    }
    Ok(kept)
}

fn resolve(host: &str, port: u16) -> Vec<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default()
}

/// Serves one connection.
fn serve<R, W>(
    mut reader: BufReader<R>,
    mut writer: W,
    rules: &[HostRule],
    denied: &Mutex<FenceReport>,
    framed: bool,
) where
    R: Read + Send + 'static,
    W: Write + Send + 'static + Shut,
{
    let ask = match read_ask(&mut reader, framed) {
        Ok(ask) => ask,
        Err(e) => {
            let _ = respond(
                &mut writer,
                400,
                "Bad Request",
                &format!("kern's fence: {e}\n"),
            );
            return;
        }
    };
    if let Ask::Probe(port) = ask {
        let open = rules.iter().any(|r| r.loopback() == Some(port))
            && [
                SocketAddr::from(([127, 0, 0, 1], port)),
                SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
            ]
            .iter()
            .any(|a| TcpStream::connect_timeout(a, Duration::from_secs(2)).is_ok());
        let _ = writer.write_all(if open { b"open\n" } else { b"refused\n" });
        return;
    }
    let (host, port) = match &ask {
        Ask::Tunnel { host, port } | Ask::Plain { host, port, .. } => (host.clone(), *port),
        Ask::Local(port) | Ask::Probe(port) => ("127.0.0.1".to_string(), *port),
    };
    let deny = |why: &str, writer: &mut W| {
        if let Ok(mut report) = denied.lock() {
            report.deny(DenialKind::Connect, &format!("{host}:{port}"));
        }
        if !matches!(ask, Ask::Local(_)) {
            let _ = respond(
                writer,
                403,
                "Forbidden",
                &format!(
                    "kern's fence: {why} — add it to `[sandbox] allow_hosts` in .kern/config.toml if the agent should reach it\n"
                ),
            );
        }
    };
    let addrs = match &ask {
        Ask::Local(port) | Ask::Probe(port) => {
            if rules.iter().any(|r| r.loopback() == Some(*port)) {
                vec![
                    SocketAddr::from(([127, 0, 0, 1], *port)),
                    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, *port)),
                ]
            } else {
                deny("not on the fence's allowed hosts", &mut writer);
                return;
            }
        }
        _ => match admit(rules, &host, port, &resolve) {
            Ok(addrs) => addrs,
            Err(Refusal::Denied(why)) => {
                deny(&why, &mut writer);
                return;
            }
            // Allowed, but the machine's own network cannot find it: not the fence's doing.
            Err(Refusal::Unreachable(why)) => {
                let _ = respond(
                    &mut writer,
                    502,
                    "Bad Gateway",
                    &format!("kern's fence: {why}\n"),
                );
                return;
            }
        },
    };
    let Some(upstream) = addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
    else {
        if !matches!(ask, Ask::Local(_)) {
            let _ = respond(
                &mut writer,
                502,
                "Bad Gateway",
                &format!("kern's fence: cannot connect to {host}:{port}\n"),
            );
        }
        return;
    };
    let Ok(mut up_write) = upstream.try_clone() else {
        return;
    };
    match &ask {
        Ask::Tunnel { .. } => {
            if writer
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
        Ask::Plain { head, .. } => {
            if up_write.write_all(head).is_err() {
                return;
            }
        }
        Ask::Local(_) | Ask::Probe(_) => {}
    }
    // What the reader already buffered goes first.
    let buffered = reader.buffer().to_vec();
    if !buffered.is_empty() && up_write.write_all(&buffered).is_err() {
        return;
    }
    let mut inner = reader.into_inner();
    let up = std::thread::spawn(move || {
        let _ = copy(&mut inner, &mut up_write);
        let _ = up_write.shutdown(Shutdown::Write);
    });
    let mut down = upstream;
    let _ = copy(&mut down, &mut writer);
    writer.shut();
    let _ = up.join();
}

/// A stream whose writing half can be closed.
trait Shut {
    fn shut(&mut self);
}

impl Shut for TcpStream {
    fn shut(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Shut for std::os::unix::net::UnixStream {
    fn shut(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// Copies until end of input, each chunk flushed; an error ends it like an end.
pub(crate) fn copy(from: &mut dyn Read, to: &mut dyn Write) -> std::io::Result<u64> {
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
        total += n as u64;
    }
}

fn respond(writer: &mut dyn Write, code: u16, reason: &str, body: &str) -> std::io::Result<()> {
    write!(
        writer,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(text: &str, framed: bool) -> Result<Ask, String> {
        read_ask(&mut std::io::Cursor::new(text.as_bytes().to_vec()), framed)
    }

    #[test]
    fn requests_are_read_as_a_proxy_reads_them() {
        assert_eq!(
            ask(
                "proxy\nCONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
                true
            ),
            Ok(Ask::Tunnel {
                host: "api.anthropic.com".into(),
                port: 443
            })
        );
        assert_eq!(ask("tcp 4321\n", true), Ok(Ask::Local(4321)));
        assert_eq!(ask("probe 4321\n", true), Ok(Ask::Probe(4321)));
        assert_eq!(
            ask(
                "GET http://example.com:8080/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n",
                false
            ),
            Ok(Ask::Plain {
                host: "example.com".into(),
                port: 8080,
                head: b"GET /a?b HTTP/1.1\r\nHost: example.com\r\n\r\n".to_vec()
            })
        );
        assert!(ask("hello\n", true).is_err());
        assert!(ask("proxy\nCONNECT host HTTP/1.1\r\n\r\n", true).is_err());
        assert!(ask("GET /relative HTTP/1.1\r\n\r\n", false).is_err());
    }

    #[test]
    fn only_listed_hosts_pass_and_names_cannot_reach_local_addresses() {
        let rules: Vec<HostRule> = ["api.anthropic.com", "rebind.example", "127.0.0.1:9000"]
            .iter()
            .map(|r| r.parse().unwrap())
            .collect();
        let table = |host: &str, _: u16| -> Vec<SocketAddr> {
            match host {
                "api.anthropic.com" => vec!["160.79.104.10:443".parse().unwrap()],
                "rebind.example" => vec![
                    "127.0.0.1:443".parse().unwrap(),
                    "169.254.169.254:443".parse().unwrap(),
                ],
                "127.0.0.1" => vec!["127.0.0.1:9000".parse().unwrap()],
                _ => Vec::new(),
            }
        };
        let denied = |host: &str, port: u16| match admit(&rules, host, port, &table) {
            Err(Refusal::Denied(why)) => why,
            other => panic!("{host}:{port}: {other:?}"),
        };
        assert!(admit(&rules, "api.anthropic.com", 443, &table).is_ok());
        assert!(denied("api.anthropic.com", 22).contains("not on the fence's allowed hosts"));
        assert!(denied("evil.example", 443).contains("not on the fence's allowed hosts"));
        assert!(denied("rebind.example", 443).contains("local address"));
        assert!(admit(&rules, "127.0.0.1", 9000, &table).is_ok());
        denied("127.0.0.1", 9001);
        let unresolved: Vec<HostRule> = vec!["nowhere.example".parse().unwrap()];
        assert_eq!(
            admit(&unresolved, "nowhere.example", 443, &table),
            Err(Refusal::Unreachable(
                "nowhere.example does not resolve".into()
            ))
        );
    }
}
