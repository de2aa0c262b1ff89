//! Shared helpers for the integration tests: an in-process server on port 0,
//! a raw-socket HTTP/1.x client that reads exactly one response at a time,
//! and polling helpers with generous deadlines (the test machine is shared
//! and noisy: lower bounds on timing are strict, upper bounds are generous).

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use keepalive_server::{Config, Server, ServerHandle};

/// Slack added to every upper bound on timing.
pub const SLACK: Duration = Duration::from_secs(2);
/// How long any single read may block before the test gives up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The body `/` answers to a request without one.
pub const HELLO: &[u8] = b"Hello, World!";

/// A running in-process server (shut down when dropped).
pub struct TestServer {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
}

/// Starts a one-worker server on 127.0.0.1:0 with every default, after
/// `tweak` has had its say on the configuration.
pub fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = Some(NonZeroUsize::new(1).unwrap());
    tweak(&mut config);
    let handle = Server::bind(config.settings())
        .expect("bind")
        .start()
        .expect("start");
    let addr = handle.local_addr();
    TestServer { handle, addr }
}

impl TestServer {
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Connections accepted so far, over all workers.
    pub fn accepted(&self) -> u64 {
        self.handle.stats().map(|s| s.accepted.load(Relaxed)).sum()
    }

    /// Connections closed for `cause`, over all workers.
    pub fn closed_by(&self, cause: CloseCause) -> u64 {
        self.handle.stats().map(|s| s.closed_by(cause)).sum()
    }

    /// Polls until the server has exactly `n` open connections.
    pub fn wait_for_open(&self, n: u64) {
        wait_for_open(&self.handle, n);
    }

    /// Polls until `closed_by(cause) >= n`.
    pub fn wait_for_closed_by(&self, cause: CloseCause, n: u64) {
        let deadline = Instant::now() + SLACK + SLACK;
        while self.closed_by(cause) < n {
            assert!(
                Instant::now() < deadline,
                "closed_by({cause:?}) stayed at {} (wanted >= {n})",
                self.closed_by(cause)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asserts the server still answers `GET /` on a brand-new connection.
    pub fn assert_serves_fresh_connection(&self) {
        let mut client = self.client();
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let response = client.read_response();
        assert_eq!(response.status, 200, "fresh connection after an error");
        assert_eq!(response.body, HELLO);
    }
}

/// This process's resident set (a server started here runs in-process), in KiB.
pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// A POST to `/` with a `body_len`-byte body of `fill` and extra header
/// lines (each ending in CRLF).
pub fn post(body_len: usize, fill: u8, extra: &str) -> Vec<u8> {
    let mut request =
        format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {body_len}\r\n{extra}\r\n")
            .into_bytes();
    request.resize(request.len() + body_len, fill);
    request
}

/// Polls (generously) until `handle.open_connections() == n`.
pub fn wait_for_open(handle: &ServerHandle, n: u64) {
    let deadline = Instant::now() + SLACK + SLACK;
    loop {
        let open = handle.open_connections();
        if open == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "open_connections() stayed at {open}, wanted {n}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    /// e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the only field named `name` (case-insensitive); panics
    /// if it is repeated.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        let first = values.next();
        assert!(values.next().is_none(), "{name} repeated in {self:?}");
        first
    }

    /// Whether a list-valued field (e.g. `Connection`) holds `token`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length")
            .map(|v| v.trim().parse().expect("Content-Length is a number"))
    }

    pub fn closes(&self) -> bool {
        self.has_token("connection", "close")
    }

    pub fn body_str(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }
}

/// A raw-socket client. Bytes read past one response stay buffered for the
/// next, so pipelined responses read back one by one.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Sends, ignoring errors (for writes racing a server-side close).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Half-closes: no more bytes from this side.
    pub fn shutdown_write(&mut self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shutdown(Write)");
    }

    /// Reads more bytes into the buffer; panics on EOF, error or timeout.
    fn fill(&mut self, what: &str) {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!(
                "connection closed while reading {what}; had {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!(
                "read error while reading {what}: {e}; had {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// Reads exactly one response (an interim 1xx counts as one), with its
    /// Content-Length body.
    pub fn read_response(&mut self) -> Response {
        self.read_one(false)
    }

    /// Reads one response to a HEAD request: headers only, never a body.
    pub fn read_head_response(&mut self) -> Response {
        self.read_one(true)
    }

    fn read_one(&mut self, head_request: bool) -> Response {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill("a response head");
        };
        let head = String::from_utf8(self.buf[..head_end - 4].to_vec()).expect("UTF-8 head");
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap().to_string();
        assert!(
            version.starts_with("HTTP/1."),
            "bad status line {status_line:?}"
        );
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let reason = parts.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad header line {line:?}"));
                (name.to_string(), value.trim().to_string())
            })
            .collect();
        let mut response = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        if (100..200).contains(&status) || head_request {
            return response;
        }
        assert!(
            response.header("transfer-encoding").is_none(),
            "this client expects Content-Length framing: {response:?}"
        );
        let length = response
            .content_length()
            .unwrap_or_else(|| panic!("no Content-Length in {response:?}"));
        while self.buf.len() < length {
            self.fill("a response body");
        }
        response.body = self.buf.drain(..length).collect();
        response
    }

    /// Asserts the server closes the connection (EOF or reset) within
    /// `within`, with no further bytes; returns when it saw the close.
    pub fn read_until_closed(&mut self, within: Duration) -> Instant {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes before close: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let deadline = Instant::now() + within;
        let mut chunk = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "connection not closed within {within:?}");
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => panic!(
                    "unexpected bytes before close: {:?}",
                    String::from_utf8_lossy(&chunk[..n])
                ),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    break;
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("read error while waiting for close: {e}"),
            }
        }
        let closed = Instant::now();
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        closed
    }

    /// Asserts that nothing at all (no byte, no EOF, no reset) arrives
    /// before `until`.
    pub fn assert_quiet_until(&mut self, until: Instant, what: &str) {
        assert!(self.buf.is_empty(), "unexpected buffered bytes");
        let mut chunk = [0u8; 4096];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut chunk) {
                // Seen at or after `until`: not early (a later read sees
                // the EOF again).
                Ok(0) if Instant::now() >= until => break,
                Ok(0) => panic!(
                    "{what}: connection closed {:?} too early",
                    until - Instant::now()
                ),
                Ok(n) => panic!(
                    "{what}: unexpected bytes {:?}",
                    String::from_utf8_lossy(&chunk[..n])
                ),
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("{what}: connection failed early: {e}"),
            }
        }
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    }
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Asserts an error response: `status`, `Connection: close`, then the
/// server closes the connection.
pub fn assert_error_then_close(client: &mut Client, status: u16, context: &str) {
    let response = client.read_response();
    assert_eq!(response.status, status, "{context}: {response:?}");
    assert!(
        response.closes(),
        "{context}: error response without Connection: close: {response:?}"
    );
    assert!(
        response.header("keep-alive").is_none(),
        "{context}: error response advertises Keep-Alive: {response:?}"
    );
    client.read_until_closed(SLACK);
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
