//! Pipelined requests answer the same however the byte stream is split.
//!
//! A random mix of valid requests (GET, HEAD, 404, POST with a
//! Content-Length body, POST chunked with random chunk sizes, extensions and
//! trailers, HTTP/1.0 keep-alive, `/delay`, HTTP/1.x served as 1.1) is
//! concatenated into one stream.
//! Fed to a socket-free `Session` whole, and fed again cut at random
//! boundaries, it must give byte-identical output (the Date is pinned).
//! `Expect: 100-continue` is left out on purpose: whether the interim 100 is
//! sent depends on whether the body arrived with the head (RFC 9110 §10.1.1).
//!
//! A second property sends the pieces over a real socket to an in-process
//! server, with small pauses, and compares its responses modulo Date.

mod session_driver;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use keepalive_server::{Config, Server, Settings};
use proptest::prelude::*;
use proptest::sample::Index;
use session_driver::{Driver, normalise_dates};

/// One request of the pipeline.
#[derive(Debug, Clone)]
enum Request {
    Get,
    Head,
    NotFound {
        head: bool,
    },
    Post {
        body: Vec<u8>,
    },
    Chunked {
        chunks: Vec<Vec<u8>>,
        extensions: bool,
        trailers: bool,
        upper_hex: bool,
    },
    Http10KeepAlive {
        path_root: bool,
    },
    Delay {
        ms: u16,
    },
    /// `HTTP/1.x` with x > 1 is served as HTTP/1.1.
    LaterMinor {
        digit: u8,
    },
}

impl Request {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Request::Get => out.extend_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Request::Head => {
                out.extend_from_slice(b"HEAD / HTTP/1.1\r\nHost: a\r\nUser-Agent: p\r\n\r\n")
            }
            Request::NotFound { head } => {
                let method = if *head { "HEAD" } else { "GET" };
                out.extend_from_slice(
                    format!("{method} /nope HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes(),
                );
            }
            Request::Post { body } => {
                let head = format!(
                    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(body);
            }
            Request::Chunked {
                chunks,
                extensions,
                trailers,
                upper_hex,
            } => {
                out.extend_from_slice(
                    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
                );
                for chunk in chunks {
                    let size = if *upper_hex {
                        format!("{:X}", chunk.len())
                    } else {
                        format!("{:x}", chunk.len())
                    };
                    out.extend_from_slice(size.as_bytes());
                    if *extensions {
                        out.extend_from_slice(b" ;name=\"v\";flag");
                    }
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n");
                if *trailers {
                    out.extend_from_slice(b"X-Trailer: yes\r\nX-Other: 1\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
            Request::Http10KeepAlive { path_root } => {
                let path = if *path_root { "/" } else { "/nope" };
                out.extend_from_slice(
                    format!("GET {path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes(),
                );
            }
            Request::Delay { ms } => out.extend_from_slice(
                format!("GET /delay/{ms} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes(),
            ),
            Request::LaterMinor { digit } => {
                out.extend_from_slice(format!("GET / HTTP/1.{digit}\r\nHost: a\r\n\r\n").as_bytes())
            }
        }
    }
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..40)
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        Just(Request::Get),
        Just(Request::Head),
        any::<bool>().prop_map(|head| Request::NotFound { head }),
        body().prop_map(|body| Request::Post { body }),
        (
            prop::collection::vec(body(), 0..5),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(
                |(chunks, extensions, trailers, upper_hex)| Request::Chunked {
                    chunks,
                    extensions,
                    trailers,
                    upper_hex
                }
            ),
        any::<bool>().prop_map(|path_root| Request::Http10KeepAlive { path_root }),
        (0u16..50).prop_map(|ms| Request::Delay { ms }),
        (2u8..10).prop_map(|digit| Request::LaterMinor { digit }),
    ]
}

/// The pipeline and where to cut it.
fn pipeline() -> impl Strategy<Value = (Vec<Request>, Vec<u8>, Vec<usize>)> {
    (
        prop::collection::vec(request(), 1..12),
        prop::collection::vec(any::<Index>(), 0..24),
    )
        .prop_map(|(requests, cuts)| {
            let mut stream = Vec::new();
            for request in &requests {
                request.encode(&mut stream);
            }
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            cuts.dedup();
            (requests, stream, cuts)
        })
}

fn pieces<'a>(stream: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain([&stream.len()]) {
        pieces.push(&stream[from..cut]);
        from = cut;
    }
    pieces
}

fn settings() -> Settings {
    Config::with_listen("127.0.0.1:0".parse().unwrap()).settings()
}

/// Feeds `stream` whole; returns the driver.
fn whole(stream: &[u8], settings: Settings) -> Driver {
    let mut driver = Driver::new(settings);
    driver.feed(stream);
    driver
}

/// Status codes of a wire full of responses to known requests, in order.
fn statuses(requests: &[Request], wire: &[u8]) -> Vec<u16> {
    let mut codes = Vec::new();
    let mut at = 0;
    for request in requests {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = response.parse(&wire[at..]) else {
            panic!("no response at byte {at} for {request:?}");
        };
        let length: usize = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
            .expect("Content-Length");
        let bodiless = matches!(request, Request::Head | Request::NotFound { head: true });
        codes.push(response.code.unwrap());
        at += len + if bodiless { 0 } else { length };
    }
    assert_eq!(at, wire.len(), "trailing output");
    codes
}

fn expected_status(request: &Request) -> u16 {
    match request {
        Request::NotFound { .. } | Request::Http10KeepAlive { path_root: false } => 404,
        _ => 200,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn split_stream_answers_like_the_whole((requests, stream, cuts) in pipeline()) {
        let reference = whole(&stream, settings());
        prop_assert_eq!(reference.session.received() as usize, requests.len());
        prop_assert!(reference.session.closing().is_none());
        let codes = statuses(&requests, &reference.wire);
        let expected: Vec<u16> = requests.iter().map(expected_status).collect();
        prop_assert_eq!(codes, expected);

        let mut split = Driver::new(settings());
        for piece in pieces(&stream, &cuts) {
            split.feed(piece);
        }
        prop_assert_eq!(split.session.received(), reference.session.received());
        if split.wire != reference.wire {
            prop_assert_eq!(split.wire_text(), reference.wire_text(), "cuts {:?}", cuts);
        }
    }

    /// Tight limits: a head limit below the input floor and bodies near the
    /// body limit still split alike (whatever the outcome).
    #[test]
    fn split_stream_answers_like_the_whole_under_tight_limits(
        (_requests, stream, cuts) in pipeline(),
        max_body in 0usize..48,
        max_requests in 0u32..6,
    ) {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.max_body_size = max_body;
        config.max_header_size = 70;
        config.max_requests_per_socket = max_requests;
        let reference = whole(&stream, config.settings());
        let mut split = Driver::new(config.settings());
        for piece in pieces(&stream, &cuts) {
            split.feed(piece);
        }
        prop_assert_eq!(split.session.closing(), reference.session.closing());
        if split.wire != reference.wire {
            prop_assert_eq!(split.wire_text(), reference.wire_text(), "cuts {:?}", cuts);
        }
    }
}

/// Reads from `stream` until `expected` bytes have come or the deadline.
fn read_exactly(stream: &mut TcpStream, expected: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::with_capacity(expected);
    let mut buf = [0u8; 8192];
    while got.len() < expected && Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// The same over a real socket: pieces written with pauses between them.
    #[test]
    fn split_stream_over_tcp_answers_like_the_whole((_requests, stream, cuts) in pipeline()) {
        let reference = whole(&stream, settings());
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.workers = Some(NonZeroUsize::new(1).unwrap());
        let handle = Server::bind(config.settings()).unwrap().start().unwrap();
        let mut client = TcpStream::connect(handle.local_addr()).unwrap();
        client.set_nodelay(true).unwrap();
        client.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        for piece in pieces(&stream, &cuts) {
            client.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let got = read_exactly(&mut client, reference.wire.len());
        client.shutdown(Shutdown::Both).ok();
        handle.shutdown();
        let got = String::from_utf8_lossy(&normalise_dates(&got)).into_owned();
        prop_assert_eq!(got, reference.wire_text());
    }
}
