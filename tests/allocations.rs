//! No allocation per request in steady state, with the access log off and
//! on: a counting global allocator watches the whole process (server worker
//! and client alike) across 10,000 keep-alive requests after a warm-up. The
//! only test in this binary, so nothing else allocates meanwhile; the
//! client side allocates nothing.

mod counting_alloc;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use keepalive_server::config::AccessLogTarget;
use keepalive_server::{Config, Server};

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n";
const BODY: &[u8] = b"Hello, World!";

/// Sends one request and reads its response into `buffer`, allocation-free.
fn round_trip(stream: &mut TcpStream, buffer: &mut [u8]) {
    stream.write_all(REQUEST).expect("send");
    let mut filled = 0;
    while !buffer[..filled].ends_with(BODY) {
        let n = stream.read(&mut buffer[filled..]).expect("read");
        assert!(n > 0, "server closed the connection");
        filled += n;
    }
    assert!(buffer.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

/// Allocations across 10,000 keep-alive requests to a one-worker server
/// on `config`, after a warm-up.
fn allocations_per_10k_requests(mut config: Config) -> usize {
    config.workers = NonZeroUsize::new(1);
    let handle = Server::bind(config.settings()).unwrap().start().unwrap();
    let mut stream = TcpStream::connect(handle.local_addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buffer = [0u8; 1024];

    // Warm up for over a second, so the Date value has been re-formatted
    // and its timer re-armed at least once (and the access log flushed by
    // it), and every pool, list and buffer has reached its working size.
    let warm_until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < warm_until {
        round_trip(&mut stream, &mut buffer);
    }

    let before = counting_alloc::allocations();
    for _ in 0..10_000 {
        round_trip(&mut stream, &mut buffer);
    }
    let allocations = counting_alloc::allocations() - before;
    drop(stream);
    handle.shutdown();
    handle.join().unwrap();
    allocations
}

/// One test, two servers in turn, so nothing else allocates meanwhile.
#[test]
fn keep_alive_requests_allocate_nothing_in_steady_state() {
    let config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    assert_eq!(
        allocations_per_10k_requests(config.clone()),
        0,
        "allocations across 10,000 keep-alive requests"
    );

    let log = std::env::temp_dir().join(format!("kas-alloc-{}.log", std::process::id()));
    let mut logged = config;
    logged.access_log = AccessLogTarget::File(log.clone());
    let allocations = allocations_per_10k_requests(logged);
    let lines = std::fs::read_to_string(&log).map_or(0, |text| text.lines().count());
    let _ = std::fs::remove_file(&log);
    assert!(lines >= 10_000, "{lines} access-log lines");
    assert_eq!(
        allocations, 0,
        "allocations across 10,000 keep-alive requests with the access log on"
    );
}
