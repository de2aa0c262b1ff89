//! Long uptimes: the loop clock started just before the wrap point of a
//! narrower stamp (2³² µs, 71.6 minutes; 2³² ms, 49.7 days), through the
//! settings' `loop_clock_start`, so that every timeout and every span
//! measured here straddles it. Idle, headers and request timeouts fire on
//! time (never early), the access log's idle gap and the lab's watch after
//! an idle FIN measure what happened, not a wrapped difference.

mod support;

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use keepalive_server::config::AccessLogTarget;
use support::files::TempFile;
use support::server::{TestServer, start};
use support::{SLACK, eventually, ms};

/// 2³² µs: where a `u32` of loop-clock microseconds wraps.
const MICROS_WRAP: u64 = 1 << 32;
/// 2³² ms: where a `u32` of loop-clock milliseconds wraps.
const MILLIS_WRAP: u64 = (1 << 32) * 1000;
/// How far before the wrap point the clock starts: each timeout below is
/// longer, so it is armed before the wrap and fires after it.
const LEAD: Duration = Duration::from_millis(400);
const IDLE: Duration = Duration::from_millis(600);
const HEADERS: Duration = Duration::from_millis(600);
const REQUEST: Duration = Duration::from_millis(700);
/// Runs a check that needs its setup done within [`LEAD`] of the server's
/// start; on a machine too loaded for that, tries again, a few times.
fn within_lead(check: impl Fn() -> Result<(), String>) {
    let mut slow = Vec::new();
    for _ in 0..5 {
        match check() {
            Ok(()) => return,
            Err(why) => slow.push(why),
        }
    }
    panic!("never set up before the wrap point: {slow:?}");
}

fn start_before(wrap: u64, log: &TempFile) -> TestServer {
    start(|config| {
        config.loop_clock_start = Duration::from_micros(wrap) - LEAD;
        config.keep_alive_timeout = IDLE;
        config.keep_alive_buffer = Duration::ZERO;
        config.headers_timeout = HEADERS;
        config.request_timeout = REQUEST;
        config.access_log = AccessLogTarget::File(log.path.clone());
    })
}

/// Every check, against a server whose clock starts `LEAD` before `wrap`.
/// Each lower bound on the server's timing is taken from an instant before
/// the client acted, so a client thread that runs late cannot make a
/// timeout look early.
fn straddling(wrap: u64) -> Result<(), String> {
    let log = TempFile::new("access.log", "");
    let server = start_before(wrap, &log);
    let started = Instant::now();

    // An idle connection, a half head and a head without its body, all
    // begun before the wrap point.
    let mut idle = server.client();
    let asked = Instant::now();
    assert_eq!(idle.request("/").status, 200);
    let mut half_head = server.client();
    let sent_head = Instant::now();
    half_head.send(b"GET / HTTP/1.1\r\nHo");
    let mut half_body = server.client();
    let sent_body = Instant::now();
    half_body.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nab");
    if started.elapsed() >= LEAD {
        return Err(format!("set up in {:?}", started.elapsed()));
    }

    // Each times out after the wrap point, on time.
    let waited = idle.read_until_closed(IDLE + SLACK) - asked;
    assert!(waited >= IDLE, "idle close after {waited:?}");
    assert!(waited < IDLE + SLACK, "idle close after {waited:?}");
    for (client, since, timeout, what) in [
        (&mut half_head, sent_head, HEADERS, "headers"),
        (&mut half_body, sent_body, REQUEST, "request"),
    ] {
        let response = client.read_response();
        let took = since.elapsed();
        assert_eq!(response.status, 408, "{what}: {response:?}");
        assert!(took >= timeout, "{what} timeout after {took:?}");
        assert!(took < timeout + SLACK, "{what} timeout after {took:?}");
    }

    // The access log's idle gap across the wrap point.
    let mut reused = server.client();
    assert_eq!(reused.request("/").status, 200);
    let pause = ms(300);
    thread::sleep(pause); // the gap being measured
    assert_eq!(reused.request("/").status, 200);
    let lines = eventually(SLACK + SLACK, || {
        let text = std::fs::read_to_string(&log.path).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        match lines.len() >= 5 {
            true => Ok(lines),
            false => Err(format!("{} lines logged", lines.len())),
        }
    });
    let gap: u64 = lines[4]
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("an idle gap: {}", lines[4]));
    let pause_ms = pause.as_millis() as u64;
    assert!(
        (pause_ms..pause_ms + SLACK.as_millis() as u64).contains(&gap),
        "idle gap {gap} ms for a {pause_ms} ms pause: {}",
        lines[4]
    );
    Ok(())
}

/// The lab's watch after an idle FIN, with the FIN sent before the wrap
/// point and the late request after it: one late request, measured from
/// the FIN to within the test's own pace (not a wrapped 71 minutes).
fn watch_straddling(wrap: u64) -> Result<(), String> {
    let server = start(|config| {
        config.loop_clock_start = Duration::from_micros(wrap) - LEAD;
    });
    let started = Instant::now();
    let mut client = server.client();
    let asked = Instant::now();
    assert_eq!(client.request("/?ka=100ms").status, 200);
    // Wait for the FIN (the read sees EOF), then send after the wrap point.
    client.read_until_closed(SLACK);
    let fin_seen = Instant::now();
    if started.elapsed() >= LEAD {
        return Err(format!("FIN after {:?}", started.elapsed()));
    }
    thread::sleep((LEAD + ms(50)).saturating_sub(started.elapsed()));
    let sending = Instant::now();
    let _ = client.try_send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    eventually(SLACK, || match server.late_requests() {
        1 => Ok(()),
        n => Err(format!("{n} late requests")),
    });
    let counted = Instant::now();
    let delay_us: u64 = server
        .handle
        .observer_stats()
        .map(|s| s.late_request_delay.read().sum)
        .sum();
    // The server's FIN came before the client saw it, and after the
    // request was asked; it read the late request after it was sent, and
    // before the count showed it. The delay is taken on the wall clock
    // (the kernel's receive stamp against the FIN's send time), which NTP
    // may slew by up to 500 ppm against the monotonic clock of these
    // bounds: the lower one gets a millisecond of room (a wrapped stamp
    // would be 71 minutes off, not one).
    let at_least = ((sending - fin_seen).as_micros() as u64).saturating_sub(1000);
    let at_most = (counted - asked).as_micros() as u64;
    assert!(
        (at_least..at_most).contains(&delay_us),
        "late request {delay_us} µs after the FIN (expected {at_least}..{at_most})"
    );
    drop(TcpStream::connect(server.addr)); // the server still accepts
    Ok(())
}

#[test]
fn timeouts_and_gaps_straddle_the_microsecond_wrap() {
    within_lead(|| straddling(MICROS_WRAP));
}

#[test]
fn timeouts_and_gaps_straddle_the_millisecond_wrap() {
    within_lead(|| straddling(MILLIS_WRAP));
}

#[test]
fn the_watch_after_an_idle_fin_straddles_the_microsecond_wrap() {
    within_lead(|| watch_straddling(MICROS_WRAP));
}

#[test]
fn the_watch_after_an_idle_fin_straddles_the_millisecond_wrap() {
    within_lead(|| watch_straddling(MILLIS_WRAP));
}
