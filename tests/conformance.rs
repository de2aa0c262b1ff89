//! Request conformance to RFC 9112 (HTTP/1.1 messages) and RFC 9110 (HTTP
//! semantics), from raw bytes on real sockets.
//!
//! Each case is one row: a name, the exact request bytes, the status the RFCs
//! call for (sometimes one of a few a server may choose), whether a
//! successful answer closes the connection, how to read the exchange, and the
//! RFC section in a comment. Every case runs on a fresh connection and then
//! checks that the server still answers a fresh connection. Errors must come
//! with `Connection: close` and then EOF; successes must keep the connection
//! (a follow-up request on it is answered) unless the case says it closes.
//!
//! The cases run in groups (one server each, in parallel); a group reports
//! every failing case before it fails, not just the first.

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use support::client::{Client, Response};
use support::server::{TestServer, start};
use support::{HELLO, SLACK};

/// How long a "refused at once" or "must not hang" case may take.
const AT_ONCE: Duration = Duration::from_secs(1);

/// How to drive and read one case.
#[derive(Clone, Copy)]
enum Kind {
    /// Send the bytes, read one response.
    Plain,
    /// A HEAD request: the response has no body.
    Head,
    /// Send the head, expect `100 Continue`, then send these body bytes.
    Continue(&'static [u8]),
    /// No interim response may come: the first response is the final one.
    NoInterim,
    /// More pipelined responses follow the first, with these statuses.
    Then(&'static [u16]),
    /// The head never completes: the answer must come within [`AT_ONCE`].
    AtOnce,
}

/// One conformance case.
struct Case {
    name: &'static str,
    request: Vec<u8>,
    /// The statuses the RFCs allow here (usually one).
    statuses: &'static [u16],
    /// For an answer that is not a refusal: whether it closes the
    /// connection. Refusals ([`refusal`]) always must.
    close: bool,
    kind: Kind,
    /// The expected response body, when it matters.
    body: Option<&'static [u8]>,
    /// An extra check on the (first final) response.
    check: Option<fn(&Response)>,
}

fn case(name: &'static str, request: impl Into<Vec<u8>>, statuses: &'static [u16]) -> Case {
    Case {
        name,
        request: request.into(),
        statuses,
        close: false,
        kind: Kind::Plain,
        body: None,
        check: None,
    }
}

impl Case {
    fn closes(mut self) -> Case {
        self.close = true;
        self
    }
    fn kind(mut self, kind: Kind) -> Case {
        self.kind = kind;
        self
    }
    fn body(mut self, body: &'static [u8]) -> Case {
        self.body = Some(body);
        self
    }
    fn check(mut self, check: fn(&Response)) -> Case {
        self.check = Some(check);
        self
    }
}

/// A request with `Host` and one extra header line.
fn with_header(line: &[u8]) -> Vec<u8> {
    let mut request = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    request.extend_from_slice(line);
    request.extend_from_slice(b"\r\n\r\n");
    request
}

/// A POST to `/` with the given framing header lines and body.
fn post(headers: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!("POST / HTTP/1.1\r\nHost: t\r\n{headers}\r\n").into_bytes();
    request.extend_from_slice(body);
    request
}

/// Reads one response, giving the reading at most `within`.
fn read_within(client: &mut Client, head: bool, within: Duration) -> Response {
    client.stream.set_read_timeout(Some(within)).unwrap();
    let response = if head {
        client.read_head_response()
    } else {
        client.read_response()
    };
    client
        .stream
        .set_read_timeout(Some(support::client::READ_TIMEOUT))
        .unwrap();
    response
}

/// A refusal, answered with `Connection: close`; a 404 is an answer like
/// any other and keeps the connection.
fn refusal(status: u16) -> bool {
    status >= 400 && status != 404
}

/// Runs one case on a fresh connection, panicking on the first mismatch.
fn run(server: &TestServer, case: &Case) {
    let mut client = server.client();
    let started = Instant::now();
    client.send(&case.request);
    let head = matches!(case.kind, Kind::Head);
    let response = match case.kind {
        Kind::AtOnce => {
            let response = read_within(&mut client, false, AT_ONCE);
            assert!(
                started.elapsed() < AT_ONCE,
                "answered after {:?}",
                started.elapsed()
            );
            response
        }
        Kind::Continue(body) => {
            let interim = client.read_response();
            assert_eq!(interim.status, 100, "interim response: {interim:?}");
            client.send(body);
            client.read_response()
        }
        Kind::Head => client.read_head_response(),
        Kind::Plain | Kind::NoInterim | Kind::Then(_) => client.read_response(),
    };
    assert!(
        case.statuses.contains(&response.status),
        "status {} (wanted one of {:?}): {response:?}",
        response.status,
        case.statuses
    );
    if head {
        assert_eq!(
            response.content_length(),
            Some(HELLO.len()),
            "HEAD carries GET's Content-Length (RFC 9110 §9.3.2)"
        );
    }
    if let Some(body) = case.body {
        assert_eq!(
            response.body,
            body,
            "body {:?}",
            String::from_utf8_lossy(&response.body)
        );
    }
    if let Some(check) = case.check {
        check(&response);
    }
    if let Kind::Then(more) = case.kind {
        for &status in more {
            let next = client.read_response();
            assert_eq!(next.status, status, "pipelined response: {next:?}");
        }
    }
    if refusal(response.status) || case.close {
        assert!(
            response.closes(),
            "no Connection: close on a closing response: {response:?}"
        );
        assert!(
            response.header("keep-alive").is_none(),
            "a closing response advertises Keep-Alive: {response:?}"
        );
        let left = SLACK.saturating_sub(started.elapsed()).max(AT_ONCE);
        client.read_until_closed(left);
        if matches!(case.kind, Kind::AtOnce) {
            assert!(
                started.elapsed() < AT_ONCE,
                "closed after {:?}",
                started.elapsed()
            );
        }
    } else {
        assert!(
            !response.closes(),
            "a persistent exchange was closed: {response:?}"
        );
        // Persistence, and that nothing stray (a HEAD body, a body left
        // unread) sits before the next response.
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let next = client.read_response();
        assert_eq!(
            next.status, 200,
            "follow-up on the same connection: {next:?}"
        );
        assert_eq!(next.body, HELLO, "follow-up on the same connection");
    }
}

/// Runs every case; fails listing all the cases that failed.
fn run_all(server: &TestServer, cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run(server, case);
            server.assert_serves_fresh_connection();
        }));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{}: {message}", case.name));
        }
    }
    eprintln!("{} cases, {} failed", cases.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn server() -> TestServer {
    start(|_| {})
}

#[test]
fn request_line() {
    let many_crlf = format!("{}GET / HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n".repeat(100));
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(12_000));
    let too_long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(20_000));
    let mut client_hello = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03];
    client_hello.extend_from_slice(&[0x03; 34]);
    let cases = [
        // RFC 9112 §3.2.2: absolute-form; the server uses its path.
        case(
            "absolute-form",
            "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
            &[200],
        )
        .body(HELLO),
        // RFC 9112 §3.2.2: an empty path in absolute-form is "/".
        case(
            "absolute-form, no path",
            "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n",
            &[200],
        ),
        // RFC 9112 §3.2.4: asterisk-form is for OPTIONS.
        case("OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", &[200]),
        // RFC 9112 §3.2.4: ... and only for OPTIONS; §3: invalid request-line → 400.
        case("GET *", "GET * HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        // RFC 9112 §2.2: SHOULD ignore at least one empty line before the request-line.
        case(
            "3 leading CRLFs",
            "\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
            &[200],
        ),
        // RFC 9112 §2.2: tolerance of leading empty lines is bounded.
        case("100 leading CRLFs", many_crlf, &[400]),
        // RFC 9110 §9.1: methods are case-sensitive tokens; `get` is just unknown.
        case(
            "lowercase method",
            "get / HTTP/1.1\r\nHost: t\r\n\r\n",
            &[200, 404, 405, 501],
        ),
        // RFC 9112 §3: one SP between the parts; two is an invalid request-line.
        case("two spaces", "GET  / HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        // RFC 9112 §3: whitespace inside the request-target → 400.
        case(
            "space in target",
            "GET /a b HTTP/1.1\r\nHost: t\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §2.3: HTTP-name is case-sensitive "HTTP".
        case(
            "lowercase http/1.1",
            "GET / http/1.1\r\nHost: t\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §2.3: HTTP-version is two single digits; anything else
        // is no version at all, an invalid request-line (§3) → 400.
        case(
            "version HTTP/1.10",
            "GET / HTTP/1.10\r\nHost: t\r\n\r\n",
            &[400],
        ),
        case(
            "version HTTP/01.1",
            "GET / HTTP/01.1\r\nHost: t\r\n\r\n",
            &[400],
        ),
        case("version HTTP/2", "GET / HTTP/2\r\nHost: t\r\n\r\n", &[400]),
        // RFC 9112 §3.2: a target in none of the four forms → 400.
        case("target abc", "GET abc HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case("target ?x", "GET ?x HTTP/1.1\r\nHost: t\r\n\r\n", &[400]),
        case(
            "target ht\"tp://h/",
            "GET ht\"tp://h/ HTTP/1.1\r\nHost: t\r\n\r\n",
            &[400],
        ),
        case(
            "absolute-form, port ffff1",
            "GET http://h:ffff1/ HTTP/1.1\r\nHost: h\r\n\r\n",
            &[400],
        ),
        // RFC 9110 §4.2.4: userinfo in an http URI is an error.
        case(
            "absolute-form with userinfo",
            "GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n",
            &[400],
        ),
        case(
            "authority-form without CONNECT",
            "GET h:443 HTTP/1.1\r\nHost: h\r\n\r\n",
            &[400],
        ),
        // RFC 9110 §9.3.6: this server is no proxy; §15.5.6: 405 names Allow.
        case(
            "CONNECT",
            "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
            &[405, 501],
        )
        .check(|r| assert!(r.header("allow").is_some(), "{r:?}")),
        // As `curl -X CONNECT http://a/` sends it; nginx: 405.
        case(
            "CONNECT with an origin-form target",
            "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
            &[405],
        )
        .check(|r| assert!(r.header("allow").is_some(), "{r:?}")),
        // RFC 9112 §3: a request-line longer than the server reads → 414.
        case("20 KB URI", too_long_uri, &[414]),
        // RFC 9112 §3: no HTTP/0.9 simple requests.
        case("HTTP/0.9 simple request", "GET /\r\n\r\n", &[400]),
        // RFC 9112 §2.6: a later 1.x minor version is served as 1.1.
        case("HTTP/1.2", "GET / HTTP/1.2\r\nHost: t\r\n\r\n", &[200]).check(|r| {
            assert_eq!(r.version, "HTTP/1.1", "responds with its own version");
        }),
        // RFC 9110 §15.6.6: another major version → 505 (or 400).
        case("HTTP/2.0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", &[505, 400]),
        case("HTTP/3.0", "GET / HTTP/3.0\r\nHost: t\r\n\r\n", &[505, 400]),
        // RFC 9113 §3.4 preface on an HTTP/1.1 port: refused at once.
        case(
            "h2 preface",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            &[505, 400],
        )
        .kind(Kind::AtOnce),
        // RFC 9112 §3: not an HTTP request at all (a TLS ClientHello) → 400 at once.
        case("TLS ClientHello", client_hello, &[400]).kind(Kind::AtOnce),
        // RFC 9112 §2.2: MAY accept a bare LF; this server does not (a
        // smuggling hole behind a proxy that reads lines otherwise).
        case(
            "bare LF line endings",
            "GET / HTTP/1.1\nHost: t\n\n",
            &[400],
        ),
        case("one bare LF", "GET / HTTP/1.1\r\nHost: t\n\r\n", &[400]),
        // RFC 9112 §2.2: a bare CR outside content → invalid or replaced.
        case(
            "bare CR in request line",
            "GET /\r HTTP/1.1\r\nHost: t\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §3: long URI within the head limit; unknown path.
        case("12 KB URI", long_uri, &[404]),
        // RFC 9110 §15.5.5: 404 keeps the connection.
        case(
            "unknown path",
            "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
            &[404],
        ),
    ];
    run_all(&server(), &cases);
}

#[test]
fn header_fields() {
    let mut obs_text = b"GET / HTTP/1.1\r\nHost: t\r\nX-Obs: caf".to_vec();
    obs_text.extend_from_slice(&[0xc3, 0xa9, 0x80, 0xff]);
    obs_text.extend_from_slice(b"\r\n\r\n");
    // Host and n - 1 short fields: even 2001 fit in the 16 KiB head.
    let fields = |n: usize| "X:1\r\n".repeat(n - 1);
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let cases = [
        // RFC 9110 §5.1: field names are case-insensitive.
        case(
            "lowercase names",
            "GET / HTTP/1.1\r\nhost: t\r\nconnection: keep-alive\r\n\r\n",
            &[200],
        ),
        case(
            "odd-case names",
            "GET / HTTP/1.1\r\nhOsT: t\r\nX-fOo: 1\r\n\r\n",
            &[200],
        ),
        // RFC 9110 §5.5: obs-text (0x80-0xFF) is allowed in field values.
        case("obs-text in value", obs_text, &[200]),
        // RFC 9110 §5.5: CTLs are invalid in field values (CR/LF/NUL MUST be refused).
        case("0x01 in value", with_header(b"X: a\x01b"), &[400]),
        case("0x7f in value", with_header(b"X: a\x7fb"), &[400]),
        case("NUL in value", with_header(b"X: a\x00b"), &[400]),
        case("bare CR in value", with_header(b"X: a\rb"), &[400]),
        // RFC 9112 §5.1: no whitespace between field name and colon → 400.
        case("space before colon", with_header(b"X-A : 1"), &[400]),
        // RFC 9110 §5.1: field names are tokens.
        case("space in name", with_header(b"X A: 1"), &[400]),
        case("non-token in name", with_header(b"X@A: 1"), &[400]),
        case("empty name", with_header(b": 1"), &[400]),
        case("no colon", with_header(b"NoColon"), &[400]),
        // RFC 9112 §5.2: obs-fold in a request → 400.
        case("obs-fold", with_header(b"X-A: 1\r\n 2"), &[400]),
        case("obs-fold with tab", with_header(b"X-A: 1\r\n\t2"), &[400]),
        // RFC 9112 §2.2 / RFC 9110 §5.5: HTAB is whitespace, fine in values.
        case("tab in value", with_header(b"X-A:\t1\t2\t"), &[200]),
        // RFC 9110 §5.5: an empty field value is valid.
        case("empty value", with_header(b"X-Empty:"), &[200]),
        case("whitespace-only value", with_header(b"X-Empty:   "), &[200]),
        // RFC 9112 §3.2: Host is required on 1.1 and must not repeat.
        case("Host missing on 1.1", "GET / HTTP/1.1\r\n\r\n", &[400]),
        case(
            "Host twice",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            &[400],
        ),
        case(
            "Host twice, same value",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §3.2 / RFC 9110 §7.2: an invalid Host value → 400.
        case(
            "Host with a space",
            "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            &[400],
        ),
        case(
            "Host with a slash",
            "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
            &[400],
        ),
        case(
            "Host with userinfo",
            "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n",
            &[400],
        ),
        case(
            "Host name:port",
            "GET / HTTP/1.1\r\nHost: a.example:8080\r\n\r\n",
            &[200],
        ),
        case(
            "Host IPv6 literal",
            "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
            &[200],
        ),
        // RFC 9112 §3.2: an empty Host is what a target without authority sends.
        case("Host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", &[200]),
        // RFC 9112 §3.2: a Host that is not uri-host [":" port] → 400.
        case("Host :a", "GET / HTTP/1.1\r\nHost: :a\r\n\r\n", &[400]),
        case("Host a:b", "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", &[400]),
        case("Host :80", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", &[400]),
        case("Host [::1", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", &[400]),
        // RFC 9112 §2.2: whitespace before the first field line → reject.
        case(
            "space before first field",
            "GET / HTTP/1.1\r\n Host: t\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §3.2: absolute-form does not excuse a missing Host on 1.1.
        case(
            "absolute-form without Host",
            "GET http://h/ HTTP/1.1\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §3.2: 1.0 may omit Host (and does not persist by default).
        case("Host missing on 1.0", "GET / HTTP/1.0\r\n\r\n", &[200]).closes(),
        // RFC 9110 §5.4: a server may refuse a head it finds too large → 431 (RFC 6585 §5).
        case("head over max-header-size", big_head, &[431]),
        // Node takes 2000 fields (maxHeadersCount), nginx counts none.
        case(
            "65 fields",
            with_header(fields(65).trim_end().as_bytes()),
            &[200],
        )
        .body(HELLO),
        case(
            "2000 fields",
            with_header(fields(2000).trim_end().as_bytes()),
            &[200],
        )
        .body(HELLO),
        case(
            "2001 fields, over --max-headers",
            with_header(fields(2001).trim_end().as_bytes()),
            &[431],
        ),
    ];
    run_all(&server(), &cases);
}

#[test]
fn message_framing() {
    let mut long_extension = b"5;x=".to_vec();
    long_extension.resize(5000, b'e');
    long_extension.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    let mut big_trailer = b"5\r\nhello\r\n0\r\nX-Big: ".to_vec();
    big_trailer.resize(20_000, b't');
    big_trailer.extend_from_slice(b"\r\n\r\n");
    let cases = [
        // RFC 9112 §6.2, RFC 9110 §8.6: Content-Length is 1*DIGIT.
        case("CL echo", post("Content-Length: 5\r\n", b"hello"), &[200]).body(b"hello"),
        case("CL with OWS", post("Content-Length:  5 \r\n", b"hello"), &[200]).body(b"hello"),
        case("CL 0", post("Content-Length: 0\r\n", b""), &[200]).body(HELLO),
        case("CL +5", post("Content-Length: +5\r\n", b"hello"), &[400]),
        case("CL -1", post("Content-Length: -1\r\n", b""), &[400]),
        case("CL 0x10", post("Content-Length: 0x10\r\n", b""), &[400]),
        case("CL 5 5", post("Content-Length: 5 5\r\n", b"hello"), &[400]),
        case("CL 5, 6", post("Content-Length: 5, 6\r\n", b"hello"), &[400]),
        case("CL empty", post("Content-Length:\r\n", b""), &[400]),
        // RFC 9110 §8.6: identical values in a list may be taken as one.
        case("CL 5, 5", post("Content-Length: 5, 5\r\n", b"hello"), &[200]).body(b"hello"),
        // RFC 9112 §6.3 (5): differing repeated Content-Length → 400.
        case(
            "CL repeated, differing",
            post("Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!"),
            &[400],
        ),
        // RFC 9112 §6.3 (5): a value that does not fit.
        case(
            "CL 25 digits",
            post("Content-Length: 1234567890123456789012345\r\n", b""),
            &[400, 413],
        ),
        // RFC 9110 §15.5.14: over the limit → 413, without waiting for the body.
        case("CL over max-body-size", post("Content-Length: 2000000\r\n", b""), &[413]),
        // RFC 9112 §6.1: CL with TE MAY be rejected (and MUST close) → 400 here.
        case(
            "CL + TE",
            post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
            &[400],
        ),
        // RFC 9112 §6.1: TE in HTTP/1.0 is faulty framing.
        case(
            "TE chunked on 1.0",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            &[400],
        ),
        // RFC 9112 §6.1: an unknown transfer coding → 501.
        case("TE gzip", post("Transfer-Encoding: gzip\r\n", b""), &[501, 400]),
        // RFC 9112 §6.3 (4): chunked must be the final coding.
        case("TE chunked, gzip", post("Transfer-Encoding: chunked, gzip\r\n", b""), &[400, 501]),
        // RFC 9112 §6.1: chunked must not be applied more than once.
        case(
            "TE chunked, chunked",
            post("Transfer-Encoding: chunked, chunked\r\n", b"0\r\n\r\n"),
            &[400],
        ),
        case(
            "TE chunked on two lines",
            post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
            &[400],
        ),
        // RFC 9112 §7: coding names are case-insensitive.
        case(
            "TE Chunked",
            post("Transfer-Encoding: Chunked\r\n", b"5\r\nhello\r\n0\r\n\r\n"),
            &[200],
        )
        .body(b"hello"),
        // RFC 9112 §7.1: chunk-size is 1*HEXDIG, then [chunk-ext] CRLF.
        case("chunk size bad hex", post("Transfer-Encoding: chunked\r\n", b"zz\r\n"), &[400]),
        case(
            "chunk size 0x5",
            post("Transfer-Encoding: chunked\r\n", b"0x5\r\nhello\r\n0\r\n\r\n"),
            &[400],
        ),
        case(
            "chunk size with junk after it",
            post("Transfer-Encoding: chunked\r\n", b"5zz\r\nhello\r\n0\r\n\r\n"),
            &[400],
        ),
        case(
            "chunk size overflow",
            post("Transfer-Encoding: chunked\r\n", b"fffffffffffffffffff\r\nx"),
            &[400, 413],
        ),
        case(
            "chunk size leading zeros",
            post("Transfer-Encoding: chunked\r\n", b"0005\r\nhello\r\n0\r\n\r\n"),
            &[200],
        )
        .body(b"hello"),
        case(
            "chunk data without CRLF",
            post("Transfer-Encoding: chunked\r\n", b"5\r\nhelloXX0\r\n\r\n"),
            &[400],
        ),
        case(
            "chunk size line with bare LF",
            post("Transfer-Encoding: chunked\r\n", b"5\nhello\r\n0\r\n\r\n"),
            &[400],
        ),
        // RFC 9112 §7.1.1: extensions are ignored when not understood.
        case(
            "chunk extensions",
            post(
                "Transfer-Encoding: chunked\r\n",
                b"5;a=b;c\r\nhello\r\n6 ; q=\"x y\"\r\n world\r\n0;z\r\n\r\n",
            ),
            &[200],
        )
        .body(b"hello world"),
        // RFC 9112 §7.1.2: trailers are read, and the next request still parses.
        case(
            "trailers, then a pipelined request",
            post(
                "Transfer-Encoding: chunked\r\n",
                b"5\r\nhello\r\n0\r\nX-Sum: 1\r\nX-More: 2\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
            ),
            &[200],
        )
        .body(b"hello")
        .kind(Kind::Then(&[404])),
        // RFC 9110 §15.5.14: a chunked body over the limit → 413.
        case(
            "chunked body over max-body-size",
            post("Transfer-Encoding: chunked\r\n", b"200000\r\n"),
            &[413],
        ),
        // Chunk extensions are bounded (4 KiB a line; CVE-2024-22019's class).
        case(
            "chunk extension over 4 KiB",
            post("Transfer-Encoding: chunked\r\n", long_extension.as_slice()),
            &[413],
        ),
        // Trailers count against the head limit (RFC 6585 §5).
        case(
            "trailers over max-header-size",
            post("Transfer-Encoding: chunked\r\n", big_trailer.as_slice()),
            &[431],
        ),
        // RFC 9112 §9.3.2: pipelined requests, answered in order.
        case(
            "pipelined CL body then GET",
            [
                post("Content-Length: 3\r\n", b"abc"),
                b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
            ]
            .concat(),
            &[200],
        )
        .body(b"abc")
        .kind(Kind::Then(&[404])),
    ];
    run_all(&server(), &cases);
}

#[test]
fn semantics() {
    let cases = [
        // RFC 9110 §10.1.1: 100 Continue, then the final response.
        case(
            "Expect: 100-continue",
            post("Expect: 100-continue\r\nContent-Length: 5\r\n", b""),
            &[200],
        )
        .kind(Kind::Continue(b"hello"))
        .body(b"hello"),
        // RFC 9110 §10.1.1: a final status instead of 100 when the body would be refused.
        case(
            "Expect: 100-continue, CL over max-body-size",
            post("Expect: 100-continue\r\nContent-Length: 2000000\r\n", b""),
            &[413],
        )
        .kind(Kind::NoInterim),
        // RFC 9110 §10.1.1: other expectations → 417.
        case(
            "Expect: something-else",
            with_header(b"Expect: something-else"),
            &[417],
        ),
        // RFC 9110 §10.1.1: a 1.0 request's 100-continue is ignored: no interim.
        case(
            "Expect: 100-continue on 1.0",
            b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            &[200],
        )
        .kind(Kind::NoInterim)
        .body(b"hello")
        .closes(),
        // RFC 9110 §9.3.2: HEAD has GET's headers and no body.
        case("HEAD", "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", &[200]).kind(Kind::Head),
        // RFC 9112 §9.6: close anywhere in Connection closes.
        case(
            "Connection: close, keep-alive",
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close, keep-alive\r\n\r\n",
            &[200],
        )
        .closes(),
        case(
            "Connection: CLOSE",
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: CLOSE\r\n\r\n",
            &[200],
        )
        .closes(),
        // RFC 9112 §9.3: 1.0 persists only on keep-alive, and says so.
        case(
            "1.0 keep-alive",
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            &[200],
        )
        .check(|r| {
            assert!(r.has_token("connection", "keep-alive"), "{r:?}");
        }),
        case("1.0 default close", "GET / HTTP/1.0\r\n\r\n", &[200]).closes(),
        // RFC 9112 §9.3: 1.1 persists by default and advertises Keep-Alive here.
        case(
            "1.1 default persistent",
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            &[200],
        )
        .check(|r| {
            assert!(r.header("keep-alive").is_some(), "{r:?}");
        }),
    ];
    run_all(&server(), &cases);
}
