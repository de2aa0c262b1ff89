//! Dead and departing peers, noticed in the turn their hangup arrives:
//! clients that send a burst of body and reset, a flood of them from one
//! client while others are served, half-closes after large and pipelined
//! bodies (and pipelined echoes at the buffer limits), and each kind of
//! hang-up while an answer waits on `/delay`.
//! The server's descriptors are counted in /proc (it runs in-process, so
//! /proc/self), its connections through its own counters.
//!
//! These tests count the process's descriptors, so they run one at a time
//! ([`serial`]). Timing bounds are generous: the machine is shared and noisy.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use keepalive_server::session::ECHO_BUFFER;
use keepalive_server::stats::CloseCause;
use support::client::{Client, post, reset};
use support::procfs::open_fds;
use support::server::{TestServer, start};
use support::{HELLO, SLACK, eventually, ms, serial};

/// Polls until the process is back to `baseline` descriptors; how long it took.
fn wait_for_fds(baseline: usize, within: Duration) -> Duration {
    let started = Instant::now();
    eventually(within, || match open_fds().saturating_sub(baseline) {
        0 => Ok(()),
        left => Err(format!("{left} descriptors left over")),
    });
    started.elapsed()
}

/// Connects, sends a POST head and as much of a 1 MB body as the socket
/// takes at once (up to `burst` bytes), then resets (SO_LINGER 0).
fn burst_and_reset(addr: SocketAddr, burst: usize) {
    let Ok(stream) = TcpStream::connect(addr) else {
        return; // refused under load: nothing to clean up
    };
    stream.set_nonblocking(true).unwrap();
    let mut request = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n".to_vec();
    request.resize(request.len() + burst, b'b');
    let _ = (&stream).write(&request);
    reset(stream);
}

#[test]
fn reset_clients_leave_no_connection_behind() {
    const CLIENTS: u64 = 300;
    let _serial = serial();
    let server = start(|config| config.workers = std::num::NonZeroUsize::new(2));
    let baseline = open_fds();
    for _ in 0..CLIENTS {
        burst_and_reset(server.addr, 200_000);
    }
    let took = wait_for_fds(baseline, SLACK);
    server.wait_for_open(0);
    eprintln!("{CLIENTS} reset clients: descriptors back to baseline {took:?} after the last");
    assert!(
        server.closed_by(CloseCause::Reset) >= CLIENTS - 5,
        "closed by reset: {} of {CLIENTS}",
        server.closed_by(CloseCause::Reset)
    );
    server.assert_serves_fresh_connection();
}

#[test]
fn a_reset_flood_leaves_the_server_answering() {
    let _serial = serial();
    let server = start(|config| config.workers = std::num::NonZeroUsize::new(2));
    let baseline = open_fds();
    let stop = Arc::new(AtomicBool::new(false));
    let flooded = Arc::new(AtomicU64::new(0));
    let flooder = {
        let (stop, flooded, addr) = (Arc::clone(&stop), Arc::clone(&flooded), server.addr);
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                burst_and_reset(addr, 1_000_000);
                flooded.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut worst = Duration::ZERO;
    let mut probes = 0;
    let flooding = Instant::now();
    while flooding.elapsed() < Duration::from_secs(3) {
        let sent = Instant::now();
        let mut probe = server.client();
        probe.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(probe.read_response().body, HELLO, "probe {probes}");
        worst = worst.max(sent.elapsed());
        probes += 1;
        thread::sleep(ms(100).saturating_sub(sent.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    let took = wait_for_fds(baseline, SLACK);
    server.wait_for_open(0);
    eprintln!(
        "reset flood: {} connections in 3 s; {probes} probes all answered, worst {worst:?}; \
         descriptors back to baseline {took:?} after",
        flooded.load(Ordering::Relaxed)
    );
    assert!(worst < SLACK, "a probe waited {worst:?}");
}

/// Sends `bytes` on `client`'s connection, then its FIN, from a thread
/// (the caller reads the answers meanwhile).
fn send_then_fin(client: &Client, bytes: Vec<u8>) -> thread::JoinHandle<()> {
    let mut stream = client.stream.try_clone().unwrap();
    thread::spawn(move || {
        stream.write_all(&bytes).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
    })
}

/// Half-close after a complete request: the answer, then the server's FIN
/// at once, not at the keep-alive timeout (65 s here).
#[test]
fn half_close_after_large_or_pipelined_bodies_gets_fin_at_once() {
    let _serial = serial();
    let server = start(|_| {});
    let cases = [
        ("a 100,000-byte POST", post(100_000, b'p', ""), 1),
        (
            "100 pipelined 1 KB POSTs",
            post(1000, b'p', "").repeat(100),
            100,
        ),
    ];
    for (what, request, responses) in cases {
        let mut client = server.client();
        let writer = send_then_fin(&client, request);
        for i in 0..responses {
            let response = client.read_response();
            assert_eq!(response.status, 200, "{what}: response {i}");
        }
        let answered = Instant::now();
        let closed = client.read_until_closed(Duration::from_secs(1));
        eprintln!(
            "{what} + SHUT_WR: FIN {:?} after the last response",
            closed - answered
        );
        writer.join().unwrap();
    }
    server.wait_for_open(0);
    assert_eq!(server.closed_by(CloseCause::KeepAliveTimeout), 0);
}

/// Pipelined echoes, each as large as the echo gathers, then a FIN:
/// input and output take turns at their limits (no new request while
/// 32 KiB of output is unsent, no more read while the input is full), and
/// every response comes, in order, then the server's FIN, without a stall
/// that only a timeout would end (65 s here). (The pass that frees output
/// also processes a full input again; this covers the interplay, not that
/// one interleaving, which needs a narrower race.)
#[test]
fn pipelined_echoes_at_the_buffer_limits_then_a_fin_are_all_answered() {
    let _serial = serial();
    let server = start(|_| {});
    let requests = 8;
    let pipelined = post(ECHO_BUFFER, b'e', "").repeat(requests);
    let mut client = server.client();
    let writer = send_then_fin(&client, pipelined);
    for i in 0..requests {
        let response = client.read_response();
        assert_eq!(response.status, 200, "response {i}");
        assert_eq!(response.body.len(), ECHO_BUFFER, "response {i}");
    }
    client.read_until_closed(SLACK);
    writer.join().unwrap();
    eventually(SLACK, || match server.closed_by(CloseCause::Client) {
        1 => Ok(()),
        n => Err(format!("{n} connections closed by the client's FIN")),
    });
}

/// A client that hangs up while its answer waits on `/delay` still gets it
/// whole (FIN: it may read), one that resets is gone at once (long before
/// its delay ends), and one that closes altogether is written to when its
/// answer is due, and gone then. The server serves on.
#[test]
fn hangups_during_a_delay() {
    let _serial = serial();
    let server: TestServer = start(|_| {});
    let mut half_closed = Client::connect(server.addr);
    half_closed.send(b"GET /delay/300 HTTP/1.1\r\nHost: t\r\n\r\n");
    half_closed.shutdown_write();
    let mut resetting = Client::connect(server.addr);
    resetting.send(b"GET /delay/5000 HTTP/1.1\r\nHost: t\r\n\r\n");
    server.wait_until("both requests read", |t| t.timers("delay") == 2);
    reset(resetting.stream);
    server.wait_for_closed_by(CloseCause::Reset, 1);
    assert_eq!(half_closed.read_response().body, b"delayed 300ms\n");
    half_closed.read_until_closed(SLACK);
    server.wait_for_open(0);

    // Closed altogether: the answer is still owed, and written to a
    // closed peer.
    let mut closed = Client::connect(server.addr);
    closed.send(b"GET /delay/200 HTTP/1.1\r\nHost: t\r\n\r\n");
    server.wait_until("the request read", |t| t.timers("delay") == 1);
    drop(closed);
    server.wait_for_open(0);
    server.assert_serves_fresh_connection();
    server.wait_for_open(0);
}
