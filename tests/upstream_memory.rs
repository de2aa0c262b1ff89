//! What an idle keep-alive connection costs the server with `--upstream`:
//! heap bytes still live (a counting global allocator) once 200
//! connections have each had one request forwarded and sit idle between
//! requests, against the same without `--upstream`. An idle client holds
//! no buffers, so no upstream link and no upstream connection: the cost
//! is the same. The only test in this binary, so nothing else allocates
//! meanwhile (the fake upstream serves the one pooled connection the
//! sequential requests share; what it holds is warm before the count).

mod counting_alloc;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::upstream::FakeUpstream;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

const CONNECTIONS: usize = 200;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Heap bytes the server keeps per idle connection, forwarding to
/// `upstream` or answering itself.
fn idle_bytes_per_connection(upstream: Option<&FakeUpstream>) -> isize {
    let server = support::server::start(|config| {
        if let Some(upstream) = upstream {
            upstream.configure(config);
            config.upstream_idle_timeout = Duration::from_secs(60);
        }
        config.keep_alive_timeout = Duration::from_secs(60);
    });
    let open = |n: usize| -> Vec<TcpStream> {
        (0..n)
            .map(|_| {
                let mut tcp = TcpStream::connect(server.addr).unwrap();
                tcp.write_all(REQUEST).unwrap();
                let mut buf = [0u8; 512];
                let mut got = 0;
                while !buf[..got].ends_with(b"Hello, World!") {
                    let n = tcp.read(&mut buf[got..]).unwrap();
                    assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&buf[..got]));
                    got += n;
                }
                assert!(buf.starts_with(b"HTTP/1.1 200"));
                tcp
            })
            .collect()
    };
    // Pools, the slab and the timer lists at their working size first.
    let warm = open(20);
    server.wait_for_open(20);
    let before = counting_alloc::live_bytes();
    let idle = open(CONNECTIONS);
    server.wait_for_open((20 + CONNECTIONS) as u64);
    let after = counting_alloc::live_bytes();
    drop((warm, idle));
    (after - before) / CONNECTIONS as isize
}

#[test]
fn an_idle_client_costs_the_same_with_an_upstream() {
    let upstream = FakeUpstream::start(|conn| {
        while conn.read_request().is_some() {
            conn.answer(b"Hello, World!");
        }
    });
    let own = idle_bytes_per_connection(None);
    let forwarding = idle_bytes_per_connection(Some(&upstream));
    eprintln!("idle heap bytes per connection: own answers {own}, forwarded {forwarding}");
    assert!(own < 256, "an idle connection holds no heap buffer: {own}");
    assert!(
        forwarding < 256,
        "an idle client of a forwarding server holds no link, no upstream: {forwarding}"
    );
    assert!(
        upstream.accepted() <= 2,
        "one pooled upstream connection shared"
    );
}
