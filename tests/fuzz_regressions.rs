//! Regression tests for what fuzzing the socket-free `Session` found
//! (fuzz/fuzz_targets/session.rs; see fuzz/README.md).

mod session_driver;

use keepalive_server::Config;
use keepalive_server::stats::CloseCause;
use session_driver::Driver;

fn driver() -> Driver {
    Driver::new(Config::with_listen("127.0.0.1:0".parse().unwrap()).settings())
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Found by the session target: two receive timers due in the same loop
/// turn (say `--headers-timeout` equal to `--request-timeout`, both armed
/// at the first byte) each called `time_out`, and the second queued another
/// 408 after the `Connection: close` one. Now a session already closing adds
/// nothing and stays closing for the first cause.
#[test]
fn second_timeout_while_closing_adds_nothing() {
    let mut driver = driver();
    driver.feed(b"GET / HTT");
    assert!(driver.time_out(CloseCause::HeadersTimeout));
    driver.drain();
    let first = driver.wire.clone();
    let text = driver.wire_text();
    assert!(
        text.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{text}"
    );
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(driver.time_out(CloseCause::RequestTimeout), "keep closing");
    driver.process();
    assert_eq!(driver.wire, first, "nothing after the closing response");
    assert_eq!(driver.session.closing(), Some(CloseCause::HeadersTimeout));
}

/// The same with the 408 still unsent: nothing is appended to it.
#[test]
fn second_timeout_with_the_408_unsent_adds_nothing() {
    let mut driver = driver();
    driver.feed(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\nabc");
    assert!(driver.wire.is_empty());
    assert!(driver.time_out(CloseCause::Inactivity));
    assert!(driver.time_out(CloseCause::RequestTimeout));
    driver.drain();
    let text = driver.wire_text();
    assert_eq!(count(&text, "HTTP/1.1 408"), 1, "{text}");
    assert!(text.ends_with("Request Timeout\n"), "{text}");
    assert_eq!(driver.session.closing(), Some(CloseCause::Inactivity));
}

/// Found by the parse_head target: a request line cut right after its
/// later minor version (`HTTP/1.7`, served as 1.1) was refused 505 when the
/// cut fell there, and served when it did not.
#[test]
fn later_minor_version_cut_after_the_digit_is_served() {
    for cut in ["GET / HTTP/1.7".len(), "GET / HTTP/1.7\r".len()] {
        let request = b"GET / HTTP/1.7\r\nHost: a\r\n\r\n";
        let mut driver = driver();
        driver.feed(&request[..cut]);
        assert!(driver.wire.is_empty(), "answered before the line ended");
        driver.feed(&request[cut..]);
        let text = driver.wire_text();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "cut {cut}: {text}");
        assert!(text.ends_with("Hello, World!"), "{text}");
        assert_eq!(driver.session.closing(), None);
    }
}

/// Noted while fuzzing: garbage arriving after the first read of a head,
/// with no newline, waited for a line end (or the headers timeout) because a
/// partial head was parsed again only per line. Short heads are now parsed
/// on every arrival, so the split does not change the answer.
#[test]
fn garbage_after_the_first_read_is_refused_at_once() {
    let mut driver = driver();
    driver.feed(b"GET");
    driver.feed(b" /\x01x");
    driver.drain();
    let text = driver.wire_text();
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text:?}");
    assert_eq!(driver.session.closing(), Some(CloseCause::BadRequest));
}
