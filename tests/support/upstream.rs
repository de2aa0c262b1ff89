//! Fake upstreams for `--upstream` tests: a listener on 127.0.0.1:0 whose
//! connections are each served on a thread by the test's closure, with
//! counts of connections accepted and still open; the request reader
//! such a closure uses; and a reader for the chunked answers the server
//! relays.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use keepalive_server::Config;
use keepalive_server::config::values::parse_upstream;

use super::client::find;

/// A fake upstream, serving until the test ends.
pub struct FakeUpstream {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
}

impl FakeUpstream {
    /// Serves each accepted connection with `serve`, on its own thread.
    pub fn start(serve: impl Fn(&mut Upstreamed) + Send + Sync + 'static) -> FakeUpstream {
        Self::start_on("127.0.0.1:0", serve)
    }

    /// [`FakeUpstream::start`], listening on `addr`.
    pub fn start_on(
        addr: &str,
        serve: impl Fn(&mut Upstreamed) + Send + Sync + 'static,
    ) -> FakeUpstream {
        let listener = TcpListener::bind(addr).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let serve = Arc::new(serve);
        let (counted, still) = (Arc::clone(&accepted), Arc::clone(&open));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                counted.fetch_add(1, SeqCst);
                still.fetch_add(1, SeqCst);
                let (serve, still) = (Arc::clone(&serve), Arc::clone(&still));
                std::thread::spawn(move || {
                    stream
                        .set_read_timeout(Some(Duration::from_secs(10)))
                        .unwrap();
                    let mut conn = Upstreamed {
                        stream,
                        buf: Vec::new(),
                    };
                    serve(&mut conn);
                    drop(conn);
                    still.fetch_sub(1, SeqCst);
                });
            }
        });
        FakeUpstream {
            addr,
            accepted,
            open,
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(SeqCst)
    }

    /// Connections whose serving closure has not returned (it returns
    /// when the server closes, for a closure that reads to the end).
    pub fn open(&self) -> usize {
        self.open.load(SeqCst)
    }

    /// Points `config` at this upstream.
    pub fn configure(&self, config: &mut Config) {
        config.upstream = Some(parse_upstream(&format!("http://{}", self.addr)).unwrap());
    }
}

/// A request as the upstream got it.
#[derive(Debug)]
pub struct Got {
    /// The head, request line and fields, without the empty line.
    pub head: String,
    /// The body, decoded from its framing.
    pub body: Vec<u8>,
    /// It came chunked.
    pub chunked: bool,
}

impl Got {
    /// The value of field `name` (the first), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|line| {
            let (field, value) = line.split_once(':')?;
            field.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    /// The request line.
    pub fn line(&self) -> &str {
        self.head.split("\r\n").next().unwrap_or("")
    }
}

/// One connection to the fake upstream.
pub struct Upstreamed {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Upstreamed {
    /// Reads one request, its body decoded; `None` at EOF (or an error)
    /// before a whole one came.
    pub fn read_request(&mut self) -> Option<Got> {
        let end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().ok()?;
        };
        let head = String::from_utf8_lossy(&self.buf[..end - 4]).into_owned();
        self.buf.drain(..end);
        let mut got = Got {
            head,
            body: Vec::new(),
            chunked: false,
        };
        if got
            .header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            got.chunked = true;
            got.body = self.read_chunked().ok()?;
        } else if let Some(n) = got.header("content-length").and_then(|v| v.parse().ok()) {
            while self.buf.len() < n {
                self.fill().ok()?;
            }
            got.body = self.buf.drain(..n).collect();
        }
        Some(got)
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let (body, used) = loop {
            if let Some(done) = decode_chunked(&self.buf) {
                break done;
            }
            self.fill()?;
        };
        self.buf.drain(..used);
        Ok(body)
    }

    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Writes `bytes` (ignoring a peer gone).
    pub fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// Answers 200 with `body` under its Content-Length.
    pub fn answer(&mut self, body: &[u8]) {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        self.send(head.as_bytes());
        self.send(body);
    }

    /// Reads until the server closes the connection (or 10 s pass).
    pub fn wait_closed(&mut self) {
        while self.fill().is_ok() {}
    }
}

/// Decodes a whole chunked body at the front of `bytes`: the body and
/// the bytes it took, or `None` when it is not all there.
pub fn decode_chunked(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + find(&bytes[at..], b"\r\n")?;
        let line = std::str::from_utf8(&bytes[at..line_end]).ok()?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            // No trailers from this server: the empty line ends it.
            if bytes.len() < at + 2 {
                return None;
            }
            return Some((body, at + 2));
        }
        if bytes.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&bytes[at..at + size]);
        at += size + 2;
    }
}
