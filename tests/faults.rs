//! Faults and hostile clients over real sockets: resets mid-request and
//! mid-response, half-close, EPIPE on write; slowloris heads against the
//! headers timeout while another client is served; a pipelining client
//! that never reads (write backpressure), a close that drops pipelined
//! requests, and a backed-up connection gone idle. After each, the
//! open-connection count returns to 0 and the server still serves.
//! (Hang-ups during `/delay`: tests/hangups.rs; each receive timeout on
//! its own: tests/timeouts.rs.)
//!
//! Timing bounds are generous (the machine is shared and noisy): a timeout
//! must never fire early; it may fire late by up to [`SLACK`]. Tests that
//! load the machine or measure time run one at a time ([`serial`]).

mod support;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use support::client::{Client, find, is_timeout, post, reset};
use support::procfs::{cpu_ticks, vm_rss_kib};
use support::server::{TestServer, start};
use support::{HELLO, SLACK, ms, serial};

/// Open connections back to 0, and a fresh connection is served.
fn assert_recovered(server: &TestServer) {
    server.wait_for_open(0);
    server.assert_serves_fresh_connection();
    server.wait_for_open(0);
}

fn echo_request(body_len: usize) -> Vec<u8> {
    post(body_len, b'x', "")
}

#[test]
fn reset_mid_request() {
    let server = start(|_| {});
    for partial in [
        &b"GET / HTTP/1.1\r\nHo"[..],
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    ] {
        let mut client = server.client();
        client.send(partial);
        // Read in part: its deadline is armed.
        server.wait_until("the partial request read", |t| t.timers("request") == 1);
        reset(client.stream);
        assert_recovered(&server);
    }
    // The fresh connections of assert_recovered close with FIN.
    assert_eq!(server.closed_by(CloseCause::Reset), 3);
}

#[test]
fn reset_mid_response() {
    let server = start(|_| {});
    let mut client = server.client();
    client.send(&echo_request(1 << 20));
    let mut some = [0u8; 16 * 1024];
    let n = client
        .stream
        .read(&mut some)
        .expect("the start of the echo");
    assert!(some[..n].starts_with(b"HTTP/1.1 200 "));
    reset(client.stream);
    assert_recovered(&server);
    assert_eq!(server.closed_by(CloseCause::Reset), 1);
}

#[test]
fn half_close_after_full_requests_is_still_answered() {
    let server = start(|_| {});
    let mut client = server.client();
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    client.send(&echo_request(10));
    client.send(b"GET /delay/50 HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    client.shutdown_write();
    assert_eq!(client.read_response().body, HELLO);
    assert_eq!(client.read_response().body, b"xxxxxxxxxx");
    assert_eq!(client.read_response().body, b"delayed 50ms\n");
    assert_eq!(client.read_response().status, 404);
    client.read_until_closed(SLACK);
    assert_recovered(&server);
}

#[test]
fn epipe_on_write() {
    let _serial = serial();
    let server = start(|config| config.max_body_size = 8 << 20);
    // The whole request, then a close with nothing unread (a FIN): the echo
    // (larger than the socket buffers) is written into a closed socket,
    // which answers with RST; the next write fails with EPIPE/ECONNRESET.
    let mut client = server.client();
    client.send(&echo_request(6 << 20));
    drop(client);
    server.wait_for_open(0);
    eprintln!(
        "epipe: closed by reset {}, by client {}",
        server.closed_by(CloseCause::Reset),
        server.closed_by(CloseCause::Client)
    );
    assert_eq!(server.closed_by(CloseCause::Reset), 1, "the write failed");
    assert_recovered(&server);
}

/// One slowloris connection's outcome.
struct Trickler {
    stream: TcpStream,
    connected: Instant,
    sent: usize,
    got: Vec<u8>,
    closed: Option<Instant>,
}

const SLOW_HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ";

/// Sends each open trickler its next byte and collects what came back,
/// every `every`, until all are closed or `until`.
fn trickle(tricklers: &mut [Trickler], every: Duration, until: Instant) {
    let mut chunk = [0u8; 1024];
    while Instant::now() < until && tricklers.iter().any(|t| t.closed.is_none()) {
        for t in tricklers.iter_mut().filter(|t| t.closed.is_none()) {
            let byte = SLOW_HEAD.get(t.sent).copied().unwrap_or(b'a');
            match t.stream.write(&[byte]) {
                Ok(n) => t.sent += n,
                Err(e) if is_timeout(&e) => {}
                Err(_) => {} // reset after the 408: the read below sees it
            }
            loop {
                match t.stream.read(&mut chunk) {
                    Ok(0) => t.closed = Some(Instant::now()),
                    Ok(n) => {
                        t.got.extend_from_slice(&chunk[..n]);
                        continue;
                    }
                    Err(e) if is_timeout(&e) => {}
                    Err(_) => t.closed = Some(Instant::now()),
                }
                break;
            }
        }
        thread::sleep(every);
    }
}

#[test]
fn slowloris_heads_are_cut_at_the_headers_timeout() {
    const CONNECTIONS: usize = 200;
    const HEADERS_TIMEOUT: Duration = Duration::from_secs(1);
    let _serial = serial();
    let server = start(|config| config.headers_timeout = HEADERS_TIMEOUT);
    let started = Instant::now();
    let mut tricklers: Vec<Trickler> = (0..CONNECTIONS)
        .map(|_| {
            let stream = TcpStream::connect(server.addr).expect("connect");
            let connected = Instant::now();
            stream.set_nonblocking(true).unwrap();
            stream.set_nodelay(true).unwrap();
            Trickler {
                stream,
                connected,
                sent: 0,
                got: Vec::new(),
                closed: None,
            }
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    // A normal client, meanwhile: requests in a loop, a new connection
    // every 10 requests; every one must succeed.
    let normal = {
        let done = Arc::clone(&done);
        let addr = server.addr;
        thread::spawn(move || {
            let (mut requests, mut worst) = (0u32, Duration::ZERO);
            let mut client = Client::connect(addr);
            while !done.load(Ordering::Relaxed) {
                if requests % 10 == 9 {
                    client = Client::connect(addr);
                }
                let sent = Instant::now();
                client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                let response = client.read_response();
                worst = worst.max(sent.elapsed());
                assert_eq!(response.status, 200);
                assert_eq!(response.body, HELLO);
                requests += 1;
                thread::sleep(ms(10));
            }
            (requests, worst)
        })
    };
    trickle(&mut tricklers, ms(100), started + Duration::from_secs(4));
    done.store(true, Ordering::Relaxed);
    let (requests, worst) = normal
        .join()
        .expect("the normal client succeeded throughout");

    let lifetimes: Vec<Option<Duration>> = tricklers
        .iter()
        .map(|t| t.closed.map(|closed| closed - t.connected))
        .collect();
    let by_deadline = lifetimes
        .iter()
        .filter(|l| l.is_some_and(|l| l <= HEADERS_TIMEOUT + ms(500)))
        .count();
    let closed = lifetimes.iter().filter(|l| l.is_some()).count();
    let with_408 = tricklers
        .iter()
        .filter(|t| {
            t.got.starts_with(b"HTTP/1.1 408 ") && find(&t.got, b"Connection: close").is_some()
        })
        .count();
    let longest = lifetimes
        .iter()
        .flatten()
        .max()
        .copied()
        .unwrap_or_default();
    let shortest = lifetimes
        .iter()
        .flatten()
        .min()
        .copied()
        .unwrap_or_default();
    eprintln!(
        "slowloris: {CONNECTIONS} trickling (a byte per 100 ms, headers timeout {HEADERS_TIMEOUT:?}): \
         {closed} closed, {with_408} with a 408, {by_deadline} within timeout + 500 ms; \
         lifetimes {shortest:?}..{longest:?}; normal client: {requests} requests, \
         worst latency {worst:?}"
    );
    assert_eq!(closed, CONNECTIONS, "tricklers survived");
    assert_eq!(with_408, CONNECTIONS, "tricklers closed without a 408");
    assert!(
        shortest >= HEADERS_TIMEOUT,
        "a head was cut early: {shortest:?}"
    );
    assert!(
        longest <= HEADERS_TIMEOUT + SLACK,
        "a trickler lived {longest:?}"
    );
    assert!(
        requests > 10,
        "the normal client starved: {requests} requests"
    );
    assert!(worst < SLACK, "the normal client waited {worst:?}");
    drop(tricklers);
    server.wait_for_closed_by(CloseCause::HeadersTimeout, CONNECTIONS as u64);
    assert_recovered(&server);
}

/// Writes `request` over and over from a thread until `total` bytes are
/// sent, the socket fails, or `stop`; the count of bytes sent is shared.
fn flood(
    stream: TcpStream,
    request: Vec<u8>,
    total: u64,
    stop: Arc<AtomicBool>,
) -> (thread::JoinHandle<()>, Arc<AtomicU64>) {
    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    let batch: Vec<u8> = request.repeat((64 * 1024 / request.len()).max(1));
    let thread = thread::spawn(move || {
        let mut stream = stream;
        stream.set_write_timeout(Some(ms(100))).unwrap();
        let mut at = 0;
        while counter.load(Ordering::Relaxed) < total && !stop.load(Ordering::Relaxed) {
            match stream.write(&batch[at..]) {
                Ok(n) => {
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                    at = (at + n) % batch.len();
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    });
    (thread, sent)
}

#[test]
fn pipelining_client_that_never_reads_is_held_back() {
    const FLOOD: u64 = 20 << 20;
    const ECHOES: u64 = 40;
    const ECHO_LEN: usize = 256 * 1024;
    let _serial = serial();
    let server = start(|_| {});
    let rss_before = vm_rss_kib();

    // A: 20 MB of pipelined GETs, never read.
    let gets = server.client();
    let stop_gets = Arc::new(AtomicBool::new(false));
    let (gets_writer, gets_sent) = flood(
        gets.stream.try_clone().unwrap(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        FLOOD,
        Arc::clone(&stop_gets),
    );
    // B: 40 pipelined 256 KiB echo POSTs, not read until later.
    let mut echoes = server.client();
    let echo = echo_request(ECHO_LEN);
    let (echo_writer, echo_sent) = flood(
        echoes.stream.try_clone().unwrap(),
        echo.clone(),
        ECHOES * echo.len() as u64,
        Arc::new(AtomicBool::new(false)),
    );

    // Meanwhile, other clients are served promptly.
    let mut worst = Duration::ZERO;
    let flooding = Instant::now();
    while flooding.elapsed() < Duration::from_millis(1500) {
        let sent = Instant::now();
        let mut other = server.client();
        other.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(other.read_response().body, HELLO);
        worst = worst.max(sent.elapsed());
        thread::sleep(ms(50));
    }
    let rss_during = vm_rss_kib();
    let (a, b) = (
        gets_sent.load(Ordering::Relaxed),
        echo_sent.load(Ordering::Relaxed),
    );
    eprintln!(
        "backpressure: GET flood sent {} KiB of {} KiB, echo flood {} KiB of {} KiB; \
         RSS {rss_before} -> {rss_during} KiB; other clients' worst latency {worst:?}",
        a >> 10,
        FLOOD >> 10,
        b >> 10,
        (ECHOES * echo.len() as u64) >> 10,
    );
    assert!(
        rss_during.saturating_sub(rss_before) < 64 * 1024,
        "RSS grew by {} KiB",
        rss_during.saturating_sub(rss_before)
    );
    assert!(worst < SLACK, "other clients waited {worst:?}");

    // A gives up: closes with its responses unread.
    stop_gets.store(true, Ordering::Relaxed);
    gets_writer.join().unwrap();
    drop(gets);
    // B reads every echo it is owed, in order, while its writer finishes.
    for i in 0..ECHOES {
        let response = echoes.read_response();
        assert_eq!(response.status, 200, "echo {i}");
        assert_eq!(response.body.len(), ECHO_LEN, "echo {i}");
    }
    echo_writer.join().unwrap();
    drop(echoes);
    assert_recovered(&server);
}

/// A request pipelined behind a `Connection: close` one is dropped unread,
/// so the client may still be sending: the close lingers (FIN, then drain)
/// instead of closing at once. Closed at once, the socket met the next
/// request the client sent with a reset, which destroyed the part of the
/// response still queued for a slow reader.
#[test]
fn a_close_that_drops_pipelined_requests_lingers_instead_of_resetting() {
    const SIZE: usize = 1 << 20;
    let server = start(|config| config.max_body_size = 2 * SIZE);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(SLACK)).unwrap();
    let request = format!(
        "GET /bytes/{SIZE} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n\
         GET / HTTP/1.1\r\nHost: t\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut got = vec![0u8; 1024];
    stream.read_exact(&mut got).unwrap();
    // Wait (reading no more) until the server has handed the whole answer
    // to the kernel and is closing (or, before, had closed), then send
    // more, as a client that has not seen the close yet would.
    server.wait_until("the answer all written", |t| {
        t.connections.closing > 0 || t.open() == 0
    });
    let _ = stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    if let Err(e) = stream.read_to_end(&mut got) {
        panic!("after {} bytes: {e} (the close was a reset)", got.len());
    }
    let head_end = find(&got, b"\r\n\r\n").expect("a head") + 4;
    assert_eq!(got.len() - head_end, SIZE, "the answer was cut");
}

/// Once a write has backed up, the poll asks the socket for
/// writability for good (see `Conn::polls_writable`). That costs nothing
/// once the connection is idle: no writable edges keep waking the worker.
#[test]
fn a_connection_whose_writes_backed_up_sleeps_quietly_when_idle() {
    let _serial = serial();
    const SIZE: usize = 4 << 20;
    let server = start(|config| config.max_body_size = SIZE);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    let mut client = Client::over(stream);
    let response = client.request(&format!("/bytes/{SIZE}"));
    assert_eq!(response.body.len(), SIZE);
    assert_eq!(client.request("/").status, 200); // idle, and persistent
    // This process's CPU time: the in-process server's, while the test's
    // own threads sleep.
    let before = cpu_ticks("self");
    thread::sleep(ms(1000));
    let spent = cpu_ticks("self") - before;
    assert!(spent <= 5, "{spent} ticks of CPU in 1 s of idleness");
    assert_eq!(client.request("/").status, 200);
}
