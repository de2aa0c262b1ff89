//! Upstreams for the forwarding tests (`--upstream`), each on a loopback
//! port of its own, and the lab in front of one:
//!
//! - Python's `http.server` serving a directory, and a WSGI echo on
//!   `wsgiref` (tests/upstreams/echo.py: method, path, query, fields and
//!   body as JSON; `/until-close/N` answers N bytes ended by its close),
//!   run as child processes killed when dropped. Python is a tool CI
//!   installs: missing, the test fails under `CI=true` and skips outside.
//!   For shapes no real server sends (garbage, more than declared), the
//!   tests use `support::upstream::FakeUpstream`.
//! - [`lab`]: the server in-process with `--upstream` and its admin
//!   listener; [`Reader`]: a client reading any framing a forwarded
//!   answer may have (`Content-Length`, chunked, until the close).

#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keepalive_server::config::values::parse_upstream;

use super::support::client::{Response, find, is_timeout};
use super::support::exposition::Exposition;
use super::support::server::{AdminFixture, config};
use super::support::upstream::decode_chunked;
use super::support::{client, skip};

/// The WSGI echo's source, run with `python3 -c`.
const ECHO: &str = include_str!("echo.py");

/// `http.server` serving the directory named by its first argument.
const FILES: &str = "\
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
print(server.server_address[1], flush=True)
server.serve_forever()
";

/// A server running as a child process, killed when dropped.
pub struct Process {
    child: Child,
    pub addr: SocketAddr,
}

impl Process {
    /// The child's pid, for /proc.
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `python3 -c script args...`, once it has printed the port it listens
/// on. `None` (having said so) when there is no python3 outside CI.
fn python(script: &str, args: &[&str]) -> Option<Process> {
    if Command::new("python3").arg("--version").output().is_err() {
        skip::because("python3 is not installed (.ci/run installs it)");
        return None;
    }
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read the port");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("python3 printed {line:?}, not its port"));
    Some(Process {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    })
}

/// Python's `http.server` (HTTP/1.0, one request per connection) serving
/// `dir`.
pub fn file_server(dir: &Path) -> Option<Process> {
    python(FILES, &[dir.to_str().unwrap()])
}

/// The WSGI echo (tests/upstreams/echo.py).
pub fn wsgi_echo() -> Option<Process> {
    python(ECHO, &[])
}

/// The lab in-process with `--upstream http://ADDR{prefix}`, one worker,
/// its admin listener beside it, after `tweak`.
pub fn lab(
    upstream: SocketAddr,
    prefix: &str,
    tweak: impl FnOnce(&mut keepalive_server::Config),
) -> AdminFixture {
    let config = config(|config| {
        config.upstream = Some(parse_upstream(&format!("http://{upstream}{prefix}")).unwrap());
        tweak(config);
    });
    AdminFixture::start(config)
}

/// The sample `name{labels}` of the lab's `/metrics`; 0 when absent.
pub fn metric(fixture: &AdminFixture, name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = client::get(fixture.admin, "/metrics").text();
    Exposition::parse(&text).value(name, labels).unwrap_or(0.0)
}

/// The sum of every sample of `name` in the lab's `/metrics`, whatever
/// its labels.
pub fn metric_sum(fixture: &AdminFixture, name: &str) -> f64 {
    let text = client::get(fixture.admin, "/metrics").text();
    Exposition::parse(&text)
        .samples
        .iter()
        .filter(|sample| sample.name == name)
        .map(|sample| sample.value)
        .sum()
}

/// How a response's body was delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framed {
    Nothing,
    Length,
    Chunked,
    UntilClose,
}

/// A client connection reading forwarded answers in any framing; bytes
/// read past one answer stay for the next.
pub struct Reader {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    pub fn connect(addr: SocketAddr) -> Reader {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(client::READ_TIMEOUT)).unwrap();
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Reads one response (a 1xx counts as one) to a request that was
    /// HEAD or not; panics on a read error, EOF mid-answer, or a cut
    /// chunked body.
    pub fn read(&mut self, head_request: bool) -> (Response, Framed) {
        self.try_read(head_request)
            .unwrap_or_else(|e| panic!("{e}; had {:?}", String::from_utf8_lossy(&self.buf)))
    }

    /// [`Reader::read`], or the error: EOF before or inside an answer is
    /// `UnexpectedEof`, a chunk that does not parse `InvalidData`.
    pub fn try_read(&mut self, head_request: bool) -> io::Result<(Response, Framed)> {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        self.buf.drain(..head_end);
        let mut response = parse_head(&head)?;
        let status = response.status;
        if (100..200).contains(&status) || status == 204 || status == 304 || head_request {
            return Ok((response, Framed::Nothing));
        }
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|coding| coding.eq_ignore_ascii_case("chunked"));
        if chunked {
            response.body = self.read_chunks()?;
            return Ok((response, Framed::Chunked));
        }
        if let Some(length) = response.content_length() {
            while self.buf.len() < length {
                self.fill()?;
            }
            response.body = self.buf.drain(..length).collect();
            return Ok((response, Framed::Length));
        }
        loop {
            match self.fill() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
        }
        response.body = std::mem::take(&mut self.buf);
        Ok((response, Framed::UntilClose))
    }

    /// A whole chunked body, decoded; a malformed one waits for more
    /// and ends as `UnexpectedEof` when the server closes.
    fn read_chunks(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some((body, used)) = decode_chunked(&self.buf) {
                self.buf.drain(..used);
                return Ok(body);
            }
            self.fill()?;
        }
    }

    /// Reads more; EOF is `UnexpectedEof`, a timeout panics.
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if is_timeout(&e) => panic!("no answer within {:?}", client::READ_TIMEOUT),
            Err(e) => Err(e),
        }
    }

    /// Bytes read past the last answer.
    pub fn leftover(&self) -> &[u8] {
        &self.buf
    }
}

fn parse_head(head: &str) -> io::Result<Response> {
    let bad =
        |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{what} in {head:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_owned();
    if !version.starts_with("HTTP/1.") {
        return Err(bad("bad status line"));
    }
    let status = parts
        .next()
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| bad("bad status code"))?;
    let reason = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| bad("bad field line"))?;
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Response {
        version,
        status,
        reason,
        headers,
        body: Vec::new(),
    })
}

/// Waits `pause` on purpose (an idle gap the test is about).
pub fn idle(pause: Duration) {
    std::thread::sleep(pause);
}
