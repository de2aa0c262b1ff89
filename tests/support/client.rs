//! The raw-socket HTTP/1.x client: it speaks bytes over a real TCP socket
//! and reads exactly one response at a time (bytes read past one stay
//! buffered for the next, so pipelined responses read back one by one).
//! Every read gives up after [`READ_TIMEOUT`]: generous, as the test
//! machine is shared and noisy. Also: requests built for the tests, one
//! request on a fresh connection ([`get`]), an error response and the
//! close after it, and a close by reset.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::SLACK;

/// How long any single read may block before a test gives up.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long any single write may block before a test gives up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

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

    /// The body as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
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
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Client::over(stream)
    }

    /// Connects from the source address `from` (a loopback address other
    /// than 127.0.0.1 makes the client a peer of its own to the server).
    pub fn connect_from(from: std::net::IpAddr, addr: SocketAddr) -> Client {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a socket");
        socket
            .bind(&SocketAddr::new(from, 0).into())
            .unwrap_or_else(|e| panic!("bind {from}: {e}"));
        socket
            .connect(&addr.into())
            .unwrap_or_else(|e| panic!("connect {addr} from {from}: {e}"));
        Client::over(socket.into())
    }

    /// A client over a stream already connected (with socket options set).
    pub fn over(stream: TcpStream) -> Client {
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(WRITE_TIMEOUT)).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Sends `GET path` (persistent HTTP/1.1).
    pub fn get(&mut self, path: &str) {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }

    /// `get` then `read_response`.
    pub fn request(&mut self, path: &str) -> Response {
        self.get(path);
        self.read_response()
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

    /// Reads more bytes into the buffer; EOF is `UnexpectedEof`.
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Reads exactly one response (an interim 1xx counts as one), with its
    /// Content-Length body; panics on EOF, error or timeout.
    pub fn read_response(&mut self) -> Response {
        self.read_one(false)
            .unwrap_or_else(|e| panic!("{e}; had {:?}", String::from_utf8_lossy(&self.buf)))
    }

    /// Reads one response, or the error (EOF is `UnexpectedEof`).
    pub fn try_read_response(&mut self) -> io::Result<Response> {
        self.read_one(false)
    }

    /// Reads one response to a HEAD request: headers only, never a body.
    pub fn read_head_response(&mut self) -> Response {
        self.read_one(true)
            .unwrap_or_else(|e| panic!("{e}; had {:?}", String::from_utf8_lossy(&self.buf)))
    }

    /// Reads one response whose body is chunked (the body decoded);
    /// panics on EOF, error or timeout, or another framing.
    pub fn read_chunked_response(&mut self) -> Response {
        let mut response = self.read_head_response();
        assert!(
            response.has_token("transfer-encoding", "chunked"),
            "expected a chunked response: {response:?}"
        );
        let (body, used) = loop {
            if let Some(done) = super::upstream::decode_chunked(&self.buf) {
                break done;
            }
            self.fill()
                .unwrap_or_else(|e| panic!("{e} in a chunked body; had {:?}", self.buf));
        };
        self.buf.drain(..used);
        response.body = body;
        response
    }

    /// Reads whatever comes until the server closes (or `READ_TIMEOUT`):
    /// the bytes buffered before included.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        while self.fill().is_ok() {}
        std::mem::take(&mut self.buf)
    }

    fn read_one(&mut self, head_request: bool) -> io::Result<Response> {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().map_err(|e| context(e, "a response head"))?;
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
            return Ok(response);
        }
        assert!(
            response.header("transfer-encoding").is_none(),
            "this client expects Content-Length framing: {response:?}"
        );
        let length = response
            .content_length()
            .unwrap_or_else(|| panic!("no Content-Length in {response:?}"));
        while self.buf.len() < length {
            self.fill().map_err(|e| context(e, "a response body"))?;
        }
        response.body = self.buf.drain(..length).collect();
        Ok(response)
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

    /// [`Client::read_until_closed`], returning how long the close took.
    pub fn expect_closed(&mut self, within: Duration) -> Duration {
        let start = Instant::now();
        self.read_until_closed(within) - start
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

/// `error`, saying what was being read.
fn context(error: io::Error, what: &str) -> io::Error {
    io::Error::new(error.kind(), format!("reading {what}: {error}"))
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

/// One request on a fresh connection (`Connection: close`), its response.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    let mut client = Client::connect(addr);
    client.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    client.read_response()
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

/// A chunked POST to `/` whose body turns bad after 20 good 1 KiB
/// chunks: by then its echo has begun, so it can only end unfinished.
pub fn post_turning_bad() -> Vec<u8> {
    let mut request = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..20 {
        request.extend_from_slice(b"400\r\n");
        request.resize(request.len() + 0x400, b'q');
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"zz\r\n");
    request
}

/// Asserts an error response: `status`, `Connection: close`, no
/// `Keep-Alive`, then the server closes the connection.
#[track_caller]
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

/// Closes with SO_LINGER 0: the kernel sends RST instead of FIN (and
/// drops whatever was unsent).
pub fn reset(stream: TcpStream) {
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER 0");
    drop(stream);
}
