//! What TLS connections stalled mid-record cost the server, and that a
//! second round of them costs what the first did: connections that sent
//! half a ClientHello, or half an application-data record after their
//! handshake, and then nothing. Heap bytes live come from a counting
//! global allocator, resident bytes from /proc; the server is in-process
//! and the clients are bare sockets, so what grows is the server's. The
//! only test in this binary, so nothing else allocates meanwhile.
//! BENCHMARKS.md ("TLS stalls, round after round") has the figures
//! `scripts/tls-rounds.py` measures on the release binary.

mod counting_alloc;
mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use rustls::ClientConnection;
use rustls::pki_types::ServerName;
use support::procfs::vm_rss_kib;
use support::server::TestServer;
use support::tls::TestCert;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// Stalled connections per round (with the clients' ends, well under a
/// default limit of 1,024 descriptors).
const CONNECTIONS: usize = 300;
const ROUNDS: usize = 3;

/// The first half of a fresh ClientHello (its own random and key share).
fn half_hello(config: &Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = ClientConnection::new(Arc::clone(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello.truncate(hello.len() / 2);
    hello
}

/// Bytes waiting unread in the receive queues of the server's
/// established connections on `port`, and how many there are
/// (/proc/net/tcp: `local_address` is hex `ip:port`, `st` 01 is
/// ESTABLISHED, `rx_queue` the second half of `tx_queue:rx_queue`).
fn unread_at(port: u16) -> (u64, usize) {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!(":{port:04X}");
    let mut unread = 0;
    let mut connections = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields[1].ends_with(&local) && fields[3] == "01" {
            let queues = fields[4].split_once(':').expect("tx:rx");
            unread += u64::from_str_radix(queues.1, 16).unwrap();
            connections += 1;
        }
    }
    (unread, connections)
}

/// Waits until the server holds `n` connections and has read all they sent.
fn wait_until_read(server: &TestServer, n: usize) {
    server.wait_for_open(n as u64);
    let port = server.addr.port();
    support::eventually(support::SLACK, || match unread_at(port) {
        (0, open) if open >= n => Ok(()),
        (unread, open) => Err(format!("{open} connections, {unread} bytes still unread")),
    });
}

/// One round: `CONNECTIONS` sockets each send what `send` makes, and are
/// held until the server has read it. Returns the heap bytes the server
/// holds per connection and the process's resident KiB at that moment.
fn round(server: &TestServer, send: &mut dyn FnMut(SocketAddr) -> TcpStream) -> (isize, u64) {
    let before = counting_alloc::live_bytes();
    let held: Vec<TcpStream> = (0..CONNECTIONS).map(|_| send(server.addr)).collect();
    wait_until_read(server, CONNECTIONS);
    let heap = (counting_alloc::live_bytes() - before) / CONNECTIONS as isize;
    let rss = vm_rss_kib();
    drop(held);
    server.wait_for_open(0);
    (heap, rss)
}

#[test]
fn stalled_tls_connections_hold_what_they_sent_round_after_round() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let config = cert.client_config();
    let mut send_half_hello = |addr| {
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.write_all(&half_hello(&config)).unwrap();
        tcp
    };
    // No warm-up: the first round is the one that gets fresh memory.
    let rss_start = vm_rss_kib();
    let rounds: Vec<(isize, u64)> = (0..ROUNDS)
        .map(|_| round(&server, &mut send_half_hello))
        .collect();
    eprintln!(
        "half ClientHello, {CONNECTIONS} connections: (heap B/connection, RSS KiB) \
         by round {rounds:?}, from {rss_start} KiB"
    );
    // rustls' state before a ClientHello and the ~100 bytes received, not
    // a 34 KiB lent buffer (the first round also grows the slab and lists).
    let (heap, _) = rounds[ROUNDS - 1];
    assert!(heap < 8 * 1024, "a half ClientHello holds {heap} B");
    // A new buffer's untouched pages are not resident, a reused one's are:
    // what stalled connections hold must not cost more once reused.
    let first = rounds[0].1.saturating_sub(rss_start);
    let last = rounds[ROUNDS - 1].1.saturating_sub(rss_start);
    assert!(
        last <= first + 4096,
        "round {ROUNDS} grew RSS by {last} KiB, round 1 by {first} KiB"
    );

    // After a handshake: half of a 16 KiB record, and nothing more.
    let mut send_half_record = |addr| {
        let mut client = cert.connect(addr);
        let conn = &mut client.stream.conn;
        conn.writer().write_all(&[b'x'; 16 * 1024]).unwrap();
        let mut record = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut record).unwrap();
        }
        let mut tcp = client.stream.sock;
        tcp.write_all(&record[..record.len() / 2]).unwrap();
        tcp
    };
    let (heap, _) = round(&server, &mut send_half_record);
    eprintln!("half a 16 KiB record: {heap} B/connection");
    // rustls' keys, the ~8 KiB received with half as much room again, and
    // the request's buffers: under what the lent buffer alone was.
    assert!(heap < 30 * 1024, "half a record holds {heap} B");
}
