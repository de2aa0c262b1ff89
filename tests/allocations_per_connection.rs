//! No allocation per connection in steady state: a counting global
//! allocator watches the whole process across 2,000 one-request
//! (`Connection: close`) connections after a warm-up, with the connection
//! registered with the poll (the default) and with `--defer-accept` (served
//! in the turn it is accepted). The only test in this binary, so nothing
//! else allocates meanwhile; the client side allocates nothing.

mod counting_alloc;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use keepalive_server::{Config, Server};

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
const BODY: &[u8] = b"Hello, World!";

/// One connection, one request, read to the server's close; allocation-free.
fn one_request(addr: SocketAddr, buffer: &mut [u8]) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(REQUEST).expect("send");
    let mut filled = 0;
    loop {
        let n = stream.read(&mut buffer[filled..]).expect("read");
        if n == 0 {
            break;
        }
        filled += n;
    }
    assert!(buffer[..filled].starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(buffer[..filled].ends_with(BODY));
}

/// Allocations across 2,000 one-request connections, after a warm-up.
fn allocations_per_2000_connections(defer_accept: bool) -> usize {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = NonZeroUsize::new(1);
    config.defer_accept = defer_accept;
    let handle = Server::bind(config.settings()).unwrap().start().unwrap();
    let addr = handle.local_addr();
    let mut buffer = [0u8; 1024];
    // Warm up for over a second (the Date value re-formatted, its timer
    // re-armed), so every pool, list and slot has reached its working size.
    let warm_until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < warm_until {
        one_request(addr, &mut buffer);
    }
    let before = counting_alloc::allocations();
    for _ in 0..2000 {
        one_request(addr, &mut buffer);
    }
    let allocations = counting_alloc::allocations() - before;
    handle.shutdown();
    handle.join().unwrap();
    allocations
}

#[test]
fn one_request_connections_allocate_nothing_in_steady_state() {
    assert_eq!(
        allocations_per_2000_connections(false),
        0,
        "allocations across 2,000 one-request connections"
    );
    assert_eq!(
        allocations_per_2000_connections(true),
        0,
        "allocations across 2,000 one-request connections with --defer-accept"
    );
}
