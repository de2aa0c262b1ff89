//! What TLS connections stalled mid-record cost the server, and that a
//! second round of them costs what the first did: connections that sent
//! half a ClientHello, or half an application-data record after their
//! handshake, and then nothing. Heap bytes live come from a counting
//! global allocator around an in-process server (the clients are bare
//! sockets, so what grows is the server's); resident bytes from /proc for
//! the binary run as a child, so the test's own threads and their arenas
//! are not counted. BENCHMARKS.md ("TLS: 256 KiB answers, and stalls
//! round after round") has the figures `scripts/tls-rounds.py` measures
//! on the release binary.

mod counting_alloc;
mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use rustls::ClientConnection;
use rustls::pki_types::ServerName;
use support::procfs::vm_rss_kib_of;
use support::tls::TestCert;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// Stalled connections per round (with the clients' ends, well under a
/// default limit of 1,024 descriptors).
const CONNECTIONS: usize = 300;

/// The first half of a fresh ClientHello (its own random and key share).
fn half_hello(config: &Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = ClientConnection::new(Arc::clone(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello.truncate(hello.len() / 2);
    hello
}

/// A connection to `addr` that sent half a ClientHello.
fn send_half_hello(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.write_all(&half_hello(config)).unwrap();
    tcp
}

/// The server's connections on `port` (/proc/net/tcp: `local_address` is
/// hex `ip:port`; `st` 01 is ESTABLISHED, 08 CLOSE_WAIT, the server's
/// side of a connection the client closed): how many, and the bytes
/// waiting unread in their receive queues (`tx_queue:rx_queue`).
fn server_sockets(port: u16) -> (usize, u64) {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!(":{port:04X}");
    let mut count = 0;
    let mut unread = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields[1].ends_with(&local) && (fields[3] == "01" || fields[3] == "08") {
            let (_, rx) = fields[4].split_once(':').expect("tx:rx");
            unread += u64::from_str_radix(rx, 16).unwrap();
            count += 1;
        }
    }
    (count, unread)
}

/// Waits until the server on `port` holds `n` connections and has read
/// all they sent.
fn wait_until_read(port: u16, n: usize) {
    support::eventually(support::SLACK, || match server_sockets(port) {
        (open, 0) if open == n => Ok(()),
        (open, unread) => Err(format!("{open} connections, {unread} bytes unread")),
    });
}

/// Opens `CONNECTIONS` with `open`, waits until the server has read what
/// they sent, runs `measure`, then closes them and waits until the server
/// has closed its side too.
fn hold<T>(
    addr: SocketAddr,
    open: &mut dyn FnMut(SocketAddr) -> TcpStream,
    measure: impl FnOnce() -> T,
) -> T {
    let held: Vec<TcpStream> = (0..CONNECTIONS).map(|_| open(addr)).collect();
    wait_until_read(addr.port(), CONNECTIONS);
    let measured = measure();
    drop(held);
    wait_until_read(addr.port(), 0);
    measured
}

#[test]
fn a_stalled_tls_connection_holds_what_it_was_sent_not_a_lent_buffer() {
    let _serial = support::serial();
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let config = cert.client_config();
    let per_connection = |open: &mut dyn FnMut(SocketAddr) -> TcpStream| {
        let before = counting_alloc::live_bytes();
        hold(server.addr, open, || {
            (counting_alloc::live_bytes() - before) / CONNECTIONS as isize
        })
    };
    // The worker's slab and timer lists at their working size first.
    per_connection(&mut |addr| send_half_hello(addr, &config));
    let hello = per_connection(&mut |addr| send_half_hello(addr, &config));
    let record = per_connection(&mut |addr| {
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
    });
    eprintln!("heap per connection: half a ClientHello {hello} B, half a 16 KiB record {record} B");
    // rustls' state before a ClientHello and the ~100 bytes received (the
    // lent buffer alone was 34 KiB).
    assert!(hello < 8 * 1024, "half a ClientHello holds {hello} B");
    // rustls' keys and the ~8 KiB received, with half as much room again.
    assert!(record < 24 * 1024, "half a record holds {record} B");
}

#[test]
fn a_second_round_of_stalled_handshakes_costs_what_the_first_did() {
    let _serial = support::serial();
    let cert = TestCert::new();
    let server = support::binary::serve(&[
        "--workers",
        "1",
        "--tls-cert",
        cert.cert_arg(),
        "--tls-key",
        cert.key_arg(),
    ]);
    let pid = server.pid().to_string();
    let config = cert.client_config();
    let start = vm_rss_kib_of(&pid);
    // A fresh buffer's untouched pages are not resident, but one reused
    // from what the last round freed is zeroed whole: no round may cost
    // more than the first (before the fix: +2.8 MB, then +12 MB).
    let grown: Vec<u64> = (0..3)
        .map(|_| {
            hold(
                server.addr,
                &mut |addr| send_half_hello(addr, &config),
                || vm_rss_kib_of(&pid).saturating_sub(start),
            )
        })
        .collect();
    eprintln!("RSS growth by round, {CONNECTIONS} half ClientHellos: {grown:?} KiB");
    assert!(
        grown[2] <= grown[0] + 4096,
        "RSS grew {grown:?} KiB by round"
    );
}
