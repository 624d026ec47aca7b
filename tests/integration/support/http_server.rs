//! A small HTTP/1.1 server on 127.0.0.1 for the mocks of the model APIs: one accept thread,
//! one thread per connection (keep-alive, content-length or chunked bodies), and a handler
//! that turns each request into the complete response bytes.
//!
//! The one decision a reader must know: every loop is bounded by a stop flag checked at least
//! every [`POLL_INTERVAL`], and dropping the [`HttpServer`] sets it and joins every thread, so
//! a test can never leave a server behind. std only.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often blocked reads and the accept loop look at the stop flag.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Largest request head (request line and headers) accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body accepted; the CLI's requests are a few hundred KiB at most.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Most requests served on one keep-alive connection before it is closed.
const MAX_REQUESTS_PER_CONNECTION: usize = 10_000;

/// Turns one request into the whole response.
pub(crate) type Handler = dyn Fn(&HttpRequest) -> Vec<u8> + Send + Sync;

/// The server; it runs until dropped.
pub(crate) struct HttpServer {
    address: SocketAddr,
    server: Arc<Server>,
    accept_thread: Option<JoinHandle<()>>,
}

struct Server {
    handler: Box<Handler>,
    stop: AtomicBool,
    connections: Mutex<Vec<JoinHandle<()>>>,
}

impl HttpServer {
    /// Starts serving on `127.0.0.1` with an ephemeral port, in a background thread.
    ///
    /// Panics when the loopback address cannot be bound: a test helper has no better answer.
    pub(crate) fn start(handler: Box<Handler>) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 for the mock");
        let address = listener.local_addr().expect("local address of the mock");
        listener
            .set_nonblocking(true)
            .expect("non-blocking mock listener");
        let server = Arc::new(Server {
            handler,
            stop: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
        });
        let accept_server = Arc::clone(&server);
        let accept_thread = std::thread::Builder::new()
            .name("mock-http".into())
            .spawn(move || accept_loop(&listener, &accept_server))
            .expect("spawn the mock's accept thread");
        HttpServer {
            address,
            server,
            accept_thread: Some(accept_thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.server.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
        let connections = std::mem::take(&mut *lock(&self.server.connections));
        for connection in connections {
            let _ = connection.join();
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection thread must not take the assertions down with it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, server: &Arc<Server>) {
    while !server.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let connection_server = Arc::clone(server);
                let spawned = std::thread::Builder::new()
                    .name("mock-http-conn".into())
                    .spawn(move || serve_connection(stream, &connection_server));
                if let Ok(handle) = spawned {
                    lock(&server.connections).push(handle);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(POLL_INTERVAL / 4);
            }
            Err(_) => std::thread::sleep(POLL_INTERVAL / 4),
        }
    }
}

/// A reader over the socket whose reads wait in slices of [`POLL_INTERVAL`] and report the end
/// of the stream once the stop flag is set, so that no connection thread outlives the mock.
struct StoppableStream<'a> {
    stream: &'a TcpStream,
    stop: &'a AtomicBool,
}

impl Read for StoppableStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(0);
            }
            match (&*self.stream).read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

fn serve_connection(stream: TcpStream, server: &Server) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(POLL_INTERVAL)).is_err()
    {
        return;
    }
    let mut reader = BufReader::new(StoppableStream {
        stream: &stream,
        stop: &server.stop,
    });
    let mut writer = &stream;
    for _ in 0..MAX_REQUESTS_PER_CONNECTION {
        let Ok(Some(request)) = read_request(&mut reader, &mut writer) else {
            break;
        };
        let response = (server.handler)(&request);
        if writer
            .write_all(&response)
            .and_then(|()| writer.flush())
            .is_err()
        {
            break;
        }
        if request.close {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// One parsed HTTP request.
pub(crate) struct HttpRequest {
    /// `POST`, `GET`, `HEAD`, …
    pub method: String,
    /// The request path, query included.
    pub path: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// The client asked to close the connection after this request.
    pub close: bool,
}

/// Reads one request; `Ok(None)` at a clean end of the connection.
pub(crate) fn read_request(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
) -> io::Result<Option<HttpRequest>> {
    let mut head_bytes = 0usize;
    let mut request_line = String::new();
    // Tolerate blank lines between requests (RFC 9112 section 2.2).
    while request_line.trim().is_empty() {
        request_line.clear();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(None);
        }
        head_bytes += request_line.len();
        if head_bytes > MAX_HEAD_BYTES {
            return Err(invalid("request head too large"));
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let http10 = parts.next() == Some("HTTP/1.0");

    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("connection closed inside the request head"));
        }
        head_bytes += line.len();
        if head_bytes > MAX_HEAD_BYTES {
            return Err(invalid("request head too large"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked =
        header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let length: usize = match header("content-length") {
            Some(v) => v.parse().map_err(|_| invalid("bad content-length"))?,
            None => 0,
        };
        if length > MAX_BODY_BYTES {
            return Err(invalid("request body too large"));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let connection = header("connection").map(str::to_ascii_lowercase);
    let close = match connection.as_deref() {
        Some(v) if v.contains("close") => true,
        Some(v) if v.contains("keep-alive") => false,
        _ => http10,
    };
    Ok(Some(HttpRequest {
        method,
        path,
        body,
        close,
    }))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        if reader.read_line(&mut size_line)? == 0 {
            return Err(invalid("connection closed inside a chunked body"));
        }
        let size_text = size_line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("request body too large"));
        }
        if size == 0 {
            // Trailers, up to the blank line that ends the message.
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = String::new();
        reader.read_line(&mut crlf)?;
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// A complete HTTP/1.1 response with `content-length`, keep-alive, and `extra` headers.
pub(crate) fn http_response(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: keep-alive\r\n",
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut response = head.into_bytes();
    response.extend_from_slice(body);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_length_chunked_and_connection_headers() {
        let cases: [(&[u8], &[u8], bool, &str); 5] = [
            (b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", b"hello", false, ""),
            (
                b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nhel\r\n2\r\nlo\r\n0\r\nT: v\r\n\r\n",
                b"hello",
                false,
                "",
            ),
            (b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\n", b"", true, ""),
            (b"GET /a HTTP/1.0\r\n\r\n", b"", true, ""),
            (
                b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\ncontent-length: 2\r\n\r\nhi",
                b"hi",
                false,
                "HTTP/1.1 100 Continue\r\n\r\n",
            ),
        ];
        for (input, body, close, interim) in cases {
            let mut reader = BufReader::new(input);
            let mut written = Vec::new();
            let request = read_request(&mut reader, &mut written)
                .expect("parses")
                .expect("a request");
            assert_eq!(request.path, "/a");
            assert_eq!(request.body, body, "{}", String::from_utf8_lossy(input));
            assert_eq!(request.close, close, "{}", String::from_utf8_lossy(input));
            assert_eq!(String::from_utf8_lossy(&written), interim);
            assert!(
                read_request(&mut reader, &mut written)
                    .expect("clean end")
                    .is_none()
            );
        }
        let bad: [&[u8]; 3] = [
            b"POST /a HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST /a HTTP/1.1\r\nContent-Length: 9\r\n\r\nshort",
        ];
        for input in bad {
            let mut reader = BufReader::new(input);
            assert!(
                read_request(&mut reader, &mut Vec::new()).is_err(),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
