//! `--defer-accept`: the kernel hands a connection over once its first bytes
//! have arrived, and the worker reads it at once, before registering it with
//! its poll. Whatever the path, a connection is served as without the flag:
//! one-request connections, requests that arrive in pieces, keep-alive
//! connections that outlive their first turn, and silent ones (handed over
//! after the kernel's wait) still meet the headers timeout.

mod support;

use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use support::server::start;
use support::{HELLO, SLACK, ms};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const GET_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

#[test]
fn one_request_connections_are_answered_whole_and_closed() {
    let server = start(|c| c.defer_accept = true);
    for i in 0..200 {
        let mut client = server.client();
        client.send(GET_CLOSE);
        let response = client.read_response();
        assert_eq!(response.status, 200, "connection {i}");
        assert_eq!(response.body, HELLO);
        assert!(response.closes());
        client.read_until_closed(SLACK);
    }
    server.wait_for_open(0);
    assert_eq!(server.accepted(), 200);
    assert_eq!(server.closed_by(CloseCause::Done), 200);
}

#[test]
fn a_connection_that_outlives_its_first_turn_is_polled_like_any_other() {
    let server = start(|c| c.defer_accept = true);
    let mut client = server.client();
    // Half a head first: accepted with it, read, then left waiting.
    client.send(b"GET / HTTP/1.1\r\n");
    server.wait_until("half a head read", |t| t.timers("request") == 1);
    client.send(b"Host: t\r\n\r\n");
    assert_eq!(client.read_response().body, HELLO);
    // Keep-alive: the next requests come by the poll, each once the
    // connection idles there.
    for _ in 0..3 {
        server.wait_until("the connection idle", |t| t.connections.idle == 1);
        client.send(GET);
        assert_eq!(client.read_response().body, HELLO);
    }
    assert_eq!(server.accepted(), 1);
}

#[test]
fn a_large_answer_on_a_fresh_connection_is_sent_whole() {
    // More than the socket takes at once: the connection is registered
    // for writability in the turn it was accepted.
    let server = start(|c| {
        c.defer_accept = true;
        c.max_body_size = 16 << 20;
    });
    let mut client = server.client();
    client.send(b"GET /bytes/10000000 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    // A reader slow to start: the server meets a full socket.
    std::thread::sleep(ms(100));
    assert_eq!(client.read_response().body.len(), 10_000_000);
    client.read_until_closed(SLACK);
}

#[test]
fn a_silent_connection_still_meets_the_headers_timeout() {
    let headers_timeout = ms(300);
    let server = start(|c| {
        c.defer_accept = true;
        c.headers_timeout = headers_timeout;
    });
    let begin = Instant::now();
    let mut client = server.client();
    let response = client.read_response();
    let answered = begin.elapsed();
    assert_eq!(response.status, 408, "{response:?}");
    assert!(answered >= headers_timeout, "408 after {answered:?}");
    // The kernel hands a silent connection over after about a second.
    assert!(
        answered < headers_timeout + Duration::from_secs(1) + SLACK,
        "408 after {answered:?}"
    );
    client.read_until_closed(SLACK);
    drop(client); // ends the server's linger
    server.wait_for_closed_by(CloseCause::HeadersTimeout, 1);
}
