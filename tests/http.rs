//! HTTP behaviour over real sockets: pipelining, body echo (Content-Length
//! and chunked), HEAD, 404, `Expect: 100-continue`, the Date header,
//! half-close, and connection accounting; and bad requests (each answered
//! with `Connection: close`, then EOF) beyond the RFC table of
//! tests/conformance.rs: at limits set for the test, after good requests,
//! and with the one status we choose where the table allows two.

mod support;

use std::time::{Duration, SystemTime};

use keepalive_server::stats::CloseCause;
use support::client::assert_error_then_close;
use support::server::{TestServer, start};
use support::{HELLO, SLACK, ms};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn server() -> TestServer {
    start(|c| c.keep_alive_timeout = Duration::from_secs(5))
}

#[test]
fn ten_pipelined_gets_in_one_write_are_all_answered() {
    let server = server();
    let mut client = server.client();
    client.send(&GET.repeat(10));
    for i in 0..10 {
        let response = client.read_response();
        assert_eq!(response.status, 200, "response {i}");
        assert_eq!(response.body, HELLO, "response {i}");
    }
    client.send(GET);
    assert_eq!(client.read_response().body, HELLO);
    assert_eq!(server.accepted(), 1);
}

#[test]
fn mixed_pipelined_requests_are_answered_in_order() {
    let server = server();
    let mut client = server.client();
    client.send(
        b"GET / HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /nope HTTP/1.1\r\nHost: t\r\n\r\n\
          POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nfirst\
          HEAD / HTTP/1.1\r\nHost: t\r\n\r\n\
          PUT / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n\
          GET /?q=1 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let r = client.read_response();
    assert_eq!((r.status, r.body.as_slice()), (200, HELLO));
    let r = client.read_response();
    assert_eq!(r.status, 404);
    let r = client.read_response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"first"[..]));
    let r = client.read_head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(13));
    let r = client.read_response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"second"[..]));
    let r = client.read_response();
    assert_eq!((r.status, r.body.as_slice()), (200, HELLO));
    client.assert_quiet_until(std::time::Instant::now() + ms(100), "after 6 responses");
}

#[test]
fn echoes_a_content_length_body() {
    let server = server();
    let mut client = server.client();
    let body: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    client.send(&request);
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.content_length(), Some(body.len()));
    assert!(response.body == body, "echoed body differs");
    // The framing was right: the next request on the socket parses.
    client.send(GET);
    assert_eq!(client.read_response().body, HELLO);
}

#[test]
fn echoes_a_chunked_body_with_extensions_and_trailers() {
    let server = server();
    let mut client = server.client();
    client.send(
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n\
          1;ext=\"v\"\r\n \r\n\
          A\r\n0123456789\r\n\
          0\r\nX-Trailer: yes\r\n\r\n",
    );
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_str(), "hello 0123456789");
    client.send(GET);
    assert_eq!(client.read_response().body, HELLO);
}

#[test]
fn chunked_body_split_across_many_writes() {
    let server = server();
    let mut client = server.client();
    let request = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
                    3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    for piece in request.chunks(3) {
        client.send(piece);
        std::thread::sleep(ms(2)); // each piece a segment of its own
    }
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_str(), "abcdefg");
}

#[test]
fn head_has_headers_but_no_body() {
    let server = server();
    let mut client = server.client();
    client.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_head_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.content_length(), Some(13));
    // If body bytes had been sent, they would precede this response.
    client.send(GET);
    let next = client.read_response();
    assert_eq!(next.status, 200);
    assert_eq!(next.body, HELLO);

    client.send(b"HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_head_response();
    assert_eq!(response.status, 404);
    client.assert_quiet_until(std::time::Instant::now() + ms(100), "after HEAD 404");
}

#[test]
fn unknown_path_is_404_and_keeps_the_connection() {
    let server = server();
    let mut client = server.client();
    client.send(b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 404);
    assert!(!response.closes());
    client.send(GET);
    assert_eq!(client.read_response().status, 200);
}

#[test]
fn expect_100_continue_gets_an_interim_response_before_the_body() {
    let server = server();
    let mut client = server.client();
    client
        .send(b"POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n");
    let interim = client.read_response();
    assert_eq!(interim.status, 100, "{interim:?}");
    assert_eq!(interim.version, "HTTP/1.1");
    client.send(b"hello there");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_str(), "hello there");
}

#[test]
fn expect_100_continue_with_the_body_already_sent_still_echoes() {
    // A client may send the body without waiting; an interim 100 is then
    // optional, but the final response must follow.
    let server = server();
    let mut client = server.client();
    client.send(
        b"POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    );
    let mut response = client.read_response();
    if response.status == 100 {
        response = client.read_response();
    }
    assert_eq!(response.status, 200);
    assert_eq!(response.body_str(), "abc");
}

#[test]
fn date_header_is_an_imf_fixdate_close_to_now() {
    let server = server();
    let mut client = server.client();
    for _ in 0..2 {
        client.send(GET);
        let response = client.read_response();
        let date = response.header("date").expect("a Date header");
        let when = httpdate::parse_http_date(date).expect("IMF-fixdate");
        assert_eq!(httpdate::fmt_http_date(when), date, "canonical IMF-fixdate");
        let now = SystemTime::now();
        let skew = now.duration_since(when).unwrap_or_else(|e| e.duration());
        assert!(
            skew <= Duration::from_secs(2),
            "Date {date} is {skew:?} off"
        );
        std::thread::sleep(ms(1100)); // into the next second
    }
}

/// Sends `request` on a fresh connection and asserts `status`, `Connection:
/// close` and EOF; then that a fresh connection still works.
fn assert_rejected(server: &TestServer, request: &[u8], status: u16, context: &str) {
    let mut client = server.client();
    client.send(request);
    assert_error_then_close(&mut client, status, context);
    server.assert_serves_fresh_connection();
}

#[test]
fn unknown_transfer_coding_is_501() {
    let server = server();
    assert_rejected(
        &server,
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
        "gzip, chunked",
    );
}

#[test]
fn malformed_request_line_is_400() {
    let server = server();
    assert_rejected(&server, b"GARBAGE\r\n\r\n", 400, "garbage");
}

#[test]
fn head_over_max_header_size_is_431() {
    let server = start(|c| c.max_header_size = 1024);
    let mut request = b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    request.extend_from_slice(&[b'a'; 1500]);
    request.extend_from_slice(b"\r\n\r\n");
    assert_rejected(&server, &request, 431, "1.5KiB head over a 1KiB limit");
}

/// A GET carrying `fields` header fields: Host and `X-Field-N: v` lines.
fn get_with_fields(fields: usize) -> Vec<u8> {
    let mut request = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    for n in 1..fields {
        request.extend_from_slice(format!("X-{n}: v\r\n").as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request
}

#[test]
fn header_fields_over_max_headers_are_431() {
    let server = start(|c| c.max_headers = 100);
    let mut client = server.client();
    client.send(&get_with_fields(100));
    assert_eq!(
        client.read_response().status,
        200,
        "100 fields at --max-headers 100"
    );
    assert_rejected(&server, &get_with_fields(101), 431, "101 fields over 100");
    // The default, 2000: short fields, well inside the 16 KiB head.
    let server = start(|_| {});
    let mut over = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    over.extend(b"X:1\r\n".repeat(2000));
    over.extend_from_slice(b"\r\n");
    assert!(over.len() < 16 * 1024);
    assert_rejected(&server, &over, 431, "2001 fields over the default 2000");
}

#[test]
fn many_header_fields_over_max_header_size_are_431() {
    let server = start(|c| c.max_header_size = 4096);
    let request = get_with_fields(1000);
    assert!(request.len() > 4096);
    assert_rejected(&server, &request, 431, "1000 fields in a head over 4KiB");
}

#[test]
fn body_over_max_body_size_is_413() {
    let server = start(|c| c.max_body_size = 1024);
    assert_rejected(
        &server,
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n",
        413,
        "declared CL over the limit",
    );
    let mut chunked =
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n".to_vec();
    chunked.extend_from_slice(&[b'z'; 0x800]);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    assert_rejected(&server, &chunked, 413, "chunked body over the limit");
}

#[test]
fn http2_request_line_is_505() {
    let server = server();
    assert_rejected(
        &server,
        b"GET / HTTP/2.0\r\nHost: t\r\n\r\n",
        505,
        "HTTP/2.0",
    );
}

#[test]
fn error_after_good_requests_on_the_same_connection() {
    let server = server();
    let mut client = server.client();
    client.send(GET);
    assert_eq!(client.read_response().status, 200);
    client.send(b"GET / HTTP/1.1\r\n\r\n");
    assert_error_then_close(&mut client, 400, "missing Host on request 2");
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::BadRequest), 1);
}

#[test]
fn half_closed_client_still_gets_its_response() {
    let server = server();
    let mut client = server.client();
    client.send(GET);
    client.shutdown_write();
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    client.read_until_closed(SLACK);

    // Also with a body followed by a second pipelined request.
    let mut client = server.client();
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nbyeGET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    client.shutdown_write();
    let response = client.read_response();
    assert_eq!(response.body_str(), "bye");
    let response = client.read_response();
    assert_eq!(response.status, 404);
    client.read_until_closed(SLACK);
    server.wait_for_open(0);
}

#[test]
fn half_closed_client_gets_a_delayed_response() {
    let server = server();
    let mut client = server.client();
    client.send(b"GET /delay/200 HTTP/1.1\r\nHost: t\r\n\r\n");
    client.shutdown_write();
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_str(), "delayed 200ms\n");
    client.read_until_closed(SLACK);
}

#[test]
fn open_connections_returns_to_zero_after_clients_close() {
    let server = server();
    let mut clients: Vec<_> = (0..8).map(|_| server.client()).collect();
    for client in &mut clients {
        client.send(GET);
        assert_eq!(client.read_response().status, 200);
    }
    server.wait_for_open(8);
    assert_eq!(server.accepted(), 8);
    clients.truncate(3);
    server.wait_for_open(3);
    drop(clients);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::Client), 8);
}
