//! Keep-alive: reuse on HTTP/1.1, opt-in on HTTP/1.0, `Connection: close`,
//! the idle timeout (+ buffer), the `Keep-Alive` header, the per-socket
//! request limit, and `--keep-alive-timeout 0`.

mod support;

use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use support::client::Client;
use support::server::start;
use support::{HELLO, SLACK, ms};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/// Reads a `200 Hello` that ends the connection (`Connection: close`, no
/// `Keep-Alive`), then waits for the server to close it.
#[track_caller]
fn assert_last_hello(client: &mut Client) {
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    assert!(response.closes(), "{response:?}");
    assert!(response.header("keep-alive").is_none(), "{response:?}");
    client.read_until_closed(SLACK);
}

#[test]
fn http11_reuses_one_connection_for_many_requests() {
    let server = start(|c| c.keep_alive_timeout = Duration::from_secs(5));
    let mut client = server.client();
    for i in 0..50 {
        client.send(GET);
        let response = client.read_response();
        assert_eq!(response.status, 200, "request {i}");
        assert_eq!(response.body, HELLO, "request {i}");
        assert!(!response.closes(), "request {i}: {response:?}");
        assert_eq!(response.header("keep-alive"), Some("timeout=5"));
    }
    assert_eq!(server.accepted(), 1, "all 50 requests on one connection");
    assert_eq!(server.handle.open_connections(), 1);
    drop(client);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::Client), 1);
}

#[test]
fn http10_closes_by_default() {
    let server = start(|c| c.keep_alive_timeout = Duration::from_secs(5));
    let mut client = server.client();
    client.send(b"GET / HTTP/1.0\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    assert!(
        !response.has_token("connection", "keep-alive"),
        "{response:?}"
    );
    assert!(response.header("keep-alive").is_none(), "{response:?}");
    client.read_until_closed(SLACK);
    server.wait_for_open(0);
}

#[test]
fn http10_persists_with_connection_keep_alive() {
    let server = start(|c| c.keep_alive_timeout = Duration::from_secs(5));
    let mut client = server.client();
    for i in 0..3 {
        client.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let response = client.read_response();
        assert_eq!(response.status, 200, "request {i}");
        assert_eq!(response.body, HELLO);
        assert!(
            response.has_token("connection", "keep-alive"),
            "request {i}: {response:?}"
        );
        assert!(!response.closes());
        assert_eq!(response.header("keep-alive"), Some("timeout=5"));
    }
    // A 1.0 request without the opt-in on the same socket ends it.
    client.send(b"GET / HTTP/1.0\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert!(!response.has_token("connection", "keep-alive"));
    client.read_until_closed(SLACK);
    assert_eq!(server.accepted(), 1);
}

#[test]
fn http11_connection_close_closes_after_the_response() {
    let server = start(|c| c.keep_alive_timeout = Duration::from_secs(5));
    let mut client = server.client();
    client.send(GET);
    assert_eq!(client.read_response().status, 200);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_last_hello(&mut client);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::Done), 1);
}

/// The idle connection is closed after timeout + buffer: not before (strict,
/// measured from before the request was sent, which is no later than when
/// the server's idle timer started), and not much after (generous).
fn idle_close_respects(timeout_ms: u64, buffer_ms: u64, quiet_ms: u64) {
    let server = start(|c| {
        c.keep_alive_timeout = ms(timeout_ms);
        c.keep_alive_buffer = ms(buffer_ms);
    });
    let mut client = server.client();
    let sent = Instant::now();
    client.send(GET);
    let response = client.read_response();
    let received = Instant::now();
    assert_eq!(response.status, 200);
    assert!(!response.closes(), "{response:?}");
    client.assert_quiet_until(sent + ms(quiet_ms), "idle keep-alive connection");
    let closed = client.read_until_closed(ms(timeout_ms + buffer_ms) + SLACK);
    assert!(
        closed >= sent + ms(timeout_ms + buffer_ms),
        "closed after {:?}, before timeout + buffer",
        closed - sent
    );
    assert!(closed <= received + ms(timeout_ms + buffer_ms) + SLACK);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::KeepAliveTimeout), 1);
}

#[test]
fn idle_connection_closes_after_timeout_plus_buffer_not_before() {
    // Still open at 400ms (past the 300ms timeout, inside the 200ms buffer).
    idle_close_respects(300, 200, 400);
}

#[test]
fn idle_connection_with_zero_buffer_closes_at_the_timeout_never_early() {
    idle_close_respects(300, 0, 300);
}

#[test]
fn activity_keeps_an_idle_connection_alive() {
    // Without refreshes the connection would die at 400ms; requests every
    // 150ms for 1.5s all succeed on one socket.
    let server = start(|c| {
        c.keep_alive_timeout = ms(400);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let mut client = server.client();
    let begin = Instant::now();
    let mut count = 0;
    while begin.elapsed() < ms(1500) {
        client.send(GET);
        let response = client.read_response();
        assert_eq!(response.status, 200, "request {count}");
        assert_eq!(response.body, HELLO);
        count += 1;
        std::thread::sleep(ms(150));
    }
    assert!(count >= 5);
    assert_eq!(server.accepted(), 1);
    assert_eq!(server.closed_by(CloseCause::KeepAliveTimeout), 0);
}

#[test]
fn keep_alive_header_advertises_whole_seconds_and_counts_max_down() {
    let server = start(|c| {
        c.keep_alive_timeout = ms(2500);
        c.max_requests_per_socket = 3;
    });
    let mut client = server.client();
    for i in 0..2 {
        client.send(GET);
        let response = client.read_response();
        assert_eq!(response.status, 200, "request {i}");
        assert!(!response.closes(), "request {i}: {response:?}");
        // Keep-Alive is hop-by-hop: Connection names it, on HTTP/1.1 too.
        assert_eq!(response.header("connection"), Some("keep-alive"));
        // max= counts down the requests the connection will still take.
        let left = 3 - i - 1;
        assert_eq!(
            response.header("keep-alive"),
            Some(format!("timeout=2, max={left}").as_str()),
            "request {i}"
        );
    }
    client.send(GET);
    let third = client.read_response();
    assert_eq!(third.status, 200);
    assert_eq!(third.body, HELLO);
    assert!(
        third.closes(),
        "the 3rd of max 3 must say Connection: close: {third:?}"
    );
    assert!(third.header("keep-alive").is_none(), "{third:?}");
    client.read_until_closed(SLACK);
    assert_eq!(server.accepted(), 1);
}

#[test]
fn max_requests_per_socket_applies_to_pipelined_requests() {
    let server = start(|c| {
        c.keep_alive_timeout = Duration::from_secs(5);
        c.max_requests_per_socket = 2;
    });
    let mut client = server.client();
    client.send(&GET.repeat(2));
    assert!(!client.read_response().closes());
    assert!(client.read_response().closes());
    client.read_until_closed(SLACK);
}

#[test]
fn a_sub_second_timeout_is_kept_but_not_advertised() {
    // Never promise more than the server keeps, and never `timeout=0`,
    // which reads as "do not reuse": no Keep-Alive field at all, not even
    // for a request limit (it would have no field to sit in).
    let server = start(|c| {
        c.keep_alive_timeout = ms(300);
        c.max_requests_per_socket = 5;
    });
    let mut client = server.client();
    client.send(GET);
    let response = client.read_response();
    assert_eq!(response.header("keep-alive"), None, "{response:?}");
    assert_eq!(response.header("connection"), Some("keep-alive"));
    client.send(GET);
    assert_eq!(client.read_response().status, 200, "kept and reused");
}

#[test]
fn zero_keep_alive_timeout_disables_persistence() {
    let server = start(|c| c.keep_alive_timeout = Duration::ZERO);
    let mut client = server.client();
    client.send(GET);
    assert_last_hello(&mut client);

    let mut client = server.client();
    client.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200);
    assert!(!response.has_token("connection", "keep-alive"));
    client.read_until_closed(SLACK);
    server.wait_for_open(0);
}
