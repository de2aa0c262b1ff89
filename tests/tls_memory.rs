//! What an idle keep-alive connection costs the server over TLS: heap
//! bytes still live (a counting global allocator) once 200 connections
//! have each made their handshake and one request and sit idle between
//! requests, against the same over plain HTTP. The clients keep only their
//! sockets (their own TLS state is dropped), so what stays live is the
//! server's. The only test in this binary, so nothing else allocates
//! meanwhile. docs/https.md quotes the figures it prints.

mod counting_alloc;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use keepalive_server::tls::ServerTls;
use support::tls::TestCert;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

const CONNECTIONS: usize = 200;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Heap bytes the server keeps per idle connection, plain or TLS.
fn idle_bytes_per_connection(cert: Option<&TestCert>) -> isize {
    let tls = cert.map(|c| ServerTls::load(&c.cert, &c.key).unwrap());
    let server = support::server::start(|config| {
        config.tls = tls;
        config.keep_alive_timeout = Duration::from_secs(60);
    });
    let open = |n: usize| -> Vec<TcpStream> {
        (0..n)
            .map(|_| match cert {
                Some(cert) => {
                    let mut client = cert.connect(server.addr);
                    let (head, _) = client.get("/");
                    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                    client.stream.sock // the client's TLS state goes
                }
                None => {
                    let mut tcp = TcpStream::connect(server.addr).unwrap();
                    tcp.write_all(REQUEST).unwrap();
                    let mut buf = [0u8; 512];
                    let n = tcp.read(&mut buf).unwrap();
                    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
                    tcp
                }
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
fn an_idle_tls_connection_costs_the_server_a_few_kib() {
    let plain = idle_bytes_per_connection(None);
    let cert = TestCert::new();
    let tls = idle_bytes_per_connection(Some(&cert));
    eprintln!("idle heap bytes per connection: plain {plain}, TLS {tls}");
    assert!(
        plain < 256,
        "an idle plain connection holds no heap buffer: {plain}"
    );
    // rustls's keys and session state, ~3.4 KiB: no TLS buffer while idle
    // (BENCHMARKS.md, "What an idle TLS connection holds").
    assert!(tls < 4096, "an idle TLS connection: {tls} bytes");
}
