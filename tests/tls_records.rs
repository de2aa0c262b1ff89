//! TLS records as the network delivers them: a handshake and a request
//! arriving a few bytes at a time, a body many records long echoed back
//! (more than the server reads or sends in one go), a filler answer far
//! over the server's TLS backlog, and the client's KeyUpdate. The server
//! holds TLS buffers only while bytes are in flight (see
//! `tests/tls_memory.rs`), so each of these crosses the moment it takes
//! and gives them back.

mod support;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use support::client::READ_TIMEOUT;
use support::tls::{TestCert, TlsClient};

/// The socket, written a few bytes per segment.
struct Trickle(TcpStream);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Trickle {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.0.write(&buf[..buf.len().min(7)])?;
        sleep(Duration::from_micros(300));
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[test]
fn a_handshake_and_a_request_arriving_a_few_bytes_at_a_time_are_answered() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let tcp = TcpStream::connect(server.addr).unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(cert.client_config(), name).unwrap();
    let mut stream = StreamOwned::new(conn, Trickle(tcp));
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).unwrap();
    }
    for _ in 0..2 {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        stream.flush().unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        while !got.ends_with(b"Hello, World!") {
            let n = stream.read(&mut chunk).expect("a response");
            assert!(n > 0, "closed before the response: {got:?}");
            got.extend_from_slice(&chunk[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
    }
}

#[test]
fn a_body_many_records_long_is_echoed_whole() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let mut client = cert.connect(server.addr);
    let body: String = (0..256 * 1024u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    for _ in 0..2 {
        let head = format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        client.send(head.as_bytes());
        client.send(body.as_bytes());
        let (head, echoed) = client.read_response();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(echoed == body, "the echo differs ({} bytes)", echoed.len());
    }
}

#[test]
fn a_filler_answer_far_over_the_tls_backlog_arrives_whole() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let mut client = cert.connect(server.addr);
    for size in [300_000usize, 5] {
        let (head, body) = client.get(&format!("/bytes/{size}"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body.len(), size);
        // Whole filler lines, in order, behind the first one's tail.
        assert!(body.ends_with('\n'), "{}", &body[size - 5..]);
        let line = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk";
        assert!(body.lines().skip(1).all(|l| l == line), "a line differs");
    }
}

#[test]
fn the_clients_key_update_is_followed_and_answered_in_new_keys() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let mut client: TlsClient = cert.connect(server.addr);
    assert_eq!(client.get("/").1, "Hello, World!");
    for _ in 0..2 {
        client.stream.conn.refresh_traffic_keys().unwrap();
        let (head, body) = client.get("/");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, "Hello, World!");
    }
}
