//! No allocation per connection in steady state: a counting global
//! allocator watches the whole process across 2,000 one-request
//! (`Connection: close`) connections after a warm-up, with the connection
//! registered with the poll (the default) and with `--defer-accept` (served
//! in the turn it is accepted). The only test in this binary, so nothing
//! else allocates meanwhile; the client side allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keepalive_server::{Config, Server};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is the only addition.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

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
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..2000 {
        one_request(addr, &mut buffer);
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
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
