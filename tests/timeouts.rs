//! Request timeouts: the headers deadline (not moved by activity), the
//! inactivity timeout for a stalled body, the whole-request deadline, and
//! `/delay/<ms>` (alone and ahead of pipelined requests).

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use support::client::{Client, assert_error_then_close};
use support::server::start;
use support::{HELLO, SLACK, ms};

/// Writes `bytes` one at a time, every `every`, on a clone of the socket,
/// until done, stopped, or the socket fails.
struct Trickle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<usize>>,
}

impl Trickle {
    fn start(stream: &TcpStream, bytes: Vec<u8>, every: Duration) -> Trickle {
        let mut stream = stream.try_clone().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            for byte in bytes {
                if stopped.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                    break;
                }
                sent += 1;
                std::thread::sleep(every);
            }
            sent
        });
        Trickle {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns how many bytes were sent.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads the 408 that `timeout`, counted from `since`, brings: no earlier
/// than `timeout` and within SLACK of it, with `Connection: close`; then
/// waits for the server to close.
#[track_caller]
fn assert_408_and_close(client: &mut Client, since: Instant, timeout: Duration) {
    let response = client.read_response();
    let answered = since.elapsed();
    assert_eq!(response.status, 408, "{response:?}");
    assert!(response.closes(), "{response:?}");
    assert!(answered >= timeout, "408 after {answered:?}");
    assert!(answered < timeout + SLACK, "408 after {answered:?}");
    client.read_until_closed(SLACK);
}

#[test]
fn trickled_head_gets_408_at_the_headers_timeout() {
    let server = start(|c| {
        c.headers_timeout = ms(400);
        c.timeout = Duration::from_secs(30);
    });
    let mut head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: ".to_vec();
    head.extend_from_slice(&[b'a'; 80]);
    head.extend_from_slice(b"\r\n\r\n");
    let full_trickle = ms(50) * head.len() as u32; // about 6s
    let begin = Instant::now();
    let mut client = server.client();
    let trickle = Trickle::start(&client.stream, head.clone(), ms(50));
    let response = client.read_response();
    let answered = begin.elapsed();
    let sent = trickle.stop();
    assert_eq!(response.status, 408, "{response:?}");
    assert!(response.closes(), "{response:?}");
    assert!(
        answered >= ms(400),
        "408 after {answered:?}, before the headers timeout"
    );
    assert!(
        answered < ms(400) + SLACK && sent < head.len(),
        "trickling refreshed the headers deadline: 408 after {answered:?}, \
         {sent} of {} bytes sent (the whole trickle takes {full_trickle:?})",
        head.len()
    );
    client.read_until_closed(SLACK);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::HeadersTimeout), 1);
    server.assert_serves_fresh_connection();
}

#[test]
fn silent_fresh_connection_gets_408_at_the_headers_timeout() {
    let server = start(|c| c.headers_timeout = ms(300));
    let begin = Instant::now();
    let mut client = server.client();
    assert_408_and_close(&mut client, begin, ms(300));
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::HeadersTimeout), 1);
}

#[test]
fn headers_timeout_applies_to_the_second_request_from_its_first_byte() {
    // Idle time between requests is the keep-alive timer's business; the
    // headers deadline for request 2 starts at its first byte.
    let server = start(|c| {
        c.headers_timeout = ms(300);
        c.keep_alive_timeout = Duration::from_secs(5);
    });
    let mut client = server.client();
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().status, 200);
    // Idle for longer than the headers timeout: still fine.
    std::thread::sleep(ms(500));
    let begin = Instant::now();
    client.send(b"GET / HTTP/1.1\r\n");
    let response = client.read_response();
    let answered = begin.elapsed();
    assert_eq!(response.status, 408, "{response:?}");
    assert!(answered >= ms(300), "408 after {answered:?}");
    assert!(answered < ms(300) + SLACK, "408 after {answered:?}");
    client.read_until_closed(SLACK);
}

#[test]
fn stalled_body_gets_408_after_the_inactivity_timeout() {
    let server = start(|c| {
        c.timeout = ms(300);
        c.headers_timeout = Duration::from_secs(30);
        c.request_timeout = Duration::from_secs(30);
    });
    let mut client = server.client();
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n");
    // 10 of the 100 body bytes, one every 50 ms (each refreshes the
    // timer), then nothing: the 408 comes a timeout after the last.
    let mut last = Instant::now();
    for &byte in b"0123456789" {
        std::thread::sleep(ms(50));
        last = Instant::now();
        client.send(&[byte]);
    }
    assert_408_and_close(&mut client, last, ms(300));
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::Inactivity), 1);
    server.assert_serves_fresh_connection();
}

#[test]
fn body_activity_refreshes_the_inactivity_timeout() {
    // 20 body bytes, one per 100ms (2s in all) with a 400ms inactivity
    // timeout: the request completes.
    let server = start(|c| c.timeout = ms(400));
    let mut client = server.client();
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n");
    let body = b"abcdefghijklmnopqrst";
    for &byte in body {
        std::thread::sleep(ms(100));
        client.send(&[byte]);
    }
    let response = client.read_response();
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body, body);
    assert_eq!(server.closed_by(CloseCause::Inactivity), 0);
}

#[test]
fn request_timeout_caps_a_body_trickled_faster_than_the_inactivity_timeout() {
    let server = start(|c| {
        c.timeout = ms(300);
        c.request_timeout = ms(600);
        c.headers_timeout = Duration::from_secs(30);
    });
    let mut client = server.client();
    let begin = Instant::now();
    client.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n");
    // One byte per 50ms: never 300ms quiet, but 5s for the whole body.
    let trickle = Trickle::start(&client.stream, vec![b'x'; 100], ms(50));
    let response = client.read_response();
    let answered = begin.elapsed();
    let sent = trickle.stop();
    assert_eq!(response.status, 408, "{response:?}");
    assert!(response.closes(), "{response:?}");
    assert!(
        answered >= ms(600),
        "408 after {answered:?}, before the request timeout"
    );
    assert!(
        answered < ms(600) + SLACK && sent < 100,
        "408 after {answered:?}, {sent} of 100 body bytes sent"
    );
    client.read_until_closed(SLACK);
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::RequestTimeout), 1);
    assert_eq!(server.closed_by(CloseCause::Inactivity), 0);
    server.assert_serves_fresh_connection();
}

#[test]
fn delay_answers_no_earlier_than_asked() {
    let server = start(|_| {});
    let mut client = server.client();
    let begin = Instant::now();
    client.send(b"GET /delay/300 HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_response();
    let answered = begin.elapsed();
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body_str(), "delayed 300ms\n");
    assert!(answered >= ms(300), "answered after {answered:?}");
    assert!(answered < ms(300) + SLACK, "answered after {answered:?}");
    // The connection is still persistent afterwards.
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().body, HELLO);
    assert_eq!(server.accepted(), 1);
}

#[test]
fn delay_is_not_cut_by_a_shorter_inactivity_timeout() {
    // The delay is the server's own doing, not the client's inactivity.
    let server = start(|c| {
        c.timeout = ms(200);
        c.keep_alive_timeout = ms(200);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let mut client = server.client();
    client.send(b"GET /delay/600 HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body_str(), "delayed 600ms\n");
}

#[test]
fn pipelined_requests_after_a_delay_are_answered_in_order_after_it() {
    let server = start(|_| {});
    let mut client = server.client();
    let begin = Instant::now();
    client.send(
        b"GET /delay/300 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET / HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /nope HTTP/1.1\r\nHost: t\r\n\r\n\
          POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nping\
          GET /delay/100 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let delayed = client.read_response();
    let first_at = begin.elapsed();
    assert_eq!(delayed.status, 200);
    assert_eq!(delayed.body_str(), "delayed 300ms\n");
    assert!(first_at >= ms(300), "first response after {first_at:?}");
    let hello = client.read_response();
    assert_eq!(hello.status, 200);
    assert_eq!(hello.body, HELLO);
    let missing = client.read_response();
    assert_eq!(missing.status, 404);
    let echo = client.read_response();
    assert_eq!(echo.status, 200);
    assert_eq!(echo.body, b"ping");
    let delayed = client.read_response();
    assert_eq!(delayed.body_str(), "delayed 100ms\n");
    let last_delay_at = begin.elapsed();
    assert!(
        last_delay_at >= ms(400),
        "second delay answered after {last_delay_at:?}: delays run one after another"
    );
    let last = client.read_response();
    assert_eq!(last.body, HELLO);
    assert!(last.closes());
    assert!(begin.elapsed() < ms(400) + SLACK);
    client.read_until_closed(SLACK);
}

#[test]
fn error_after_timeout_leaves_the_server_serving() {
    let server = start(|c| c.headers_timeout = ms(200));
    let mut client = server.client();
    client.send(b"GET / HT");
    assert_error_then_close(&mut client, 408, "partial request line");
    server.assert_serves_fresh_connection();
    server.wait_for_open(0);
}
