//! TLS records as the network delivers them: a handshake and a request
//! arriving a few bytes at a time, a body many records long echoed back
//! (more than the server reads or sends in one go), a filler answer far
//! over the server's TLS backlog, the client's KeyUpdate (followed, and
//! answered as soon as it is read, with no request behind it, and no
//! keep-alive for an idle connection), and a
//! ClientHello larger than the buffer the worker lends. The server
//! holds TLS buffers only while bytes are in flight (see
//! `tests/tls_memory.rs`), so each of these crosses the moment it takes
//! and gives them back.

mod support;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::{Duration, Instant};

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

#[test]
fn the_clients_key_update_is_answered_at_once_without_a_request() {
    // RFC 8446 §4.6.3 lets the answer wait for the server's next record,
    // but a client with Nagle on then waits for a delayed ACK before its
    // next request leaves: the answer goes as soon as the update is read.
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let mut client: TlsClient = cert.connect(server.addr);
    assert_eq!(client.get("/").1, "Hello, World!");
    let stream = &mut client.stream;
    stream.conn.refresh_traffic_keys().unwrap();
    while stream.conn.wants_write() {
        stream.conn.write_tls(&mut stream.sock).unwrap();
    }
    stream.sock.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let begun = Instant::now();
    let mut chunk = [0u8; 4096];
    let n = match stream.sock.read(&mut chunk) {
        Ok(n) => n,
        Err(e) => panic!(
            "no answer to the KeyUpdate after {:?}: {e}",
            begun.elapsed()
        ),
    };
    assert!(n > 0, "closed instead of answering the KeyUpdate");
    // A KeyUpdate and nothing else: no application data came with it.
    stream.conn.read_tls(&mut &chunk[..n]).unwrap();
    stream.conn.process_new_packets().unwrap();
    let mut plain = [0u8; 64];
    assert!(
        matches!(stream.conn.reader().read(&mut plain), Err(e) if e.kind() == io::ErrorKind::WouldBlock),
        "application data came with the KeyUpdate's answer"
    );
    // The connection goes on in the new keys, both ways.
    let (head, body) = client.get("/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "Hello, World!");
}

#[test]
fn key_updates_do_not_keep_an_idle_connection_open() {
    // Each KeyUpdate is answered at once, and neither it nor the answer
    // is activity: the keep-alive timer runs on from the last response.
    let cert = TestCert::new();
    let server = cert.serve(|c| {
        c.keep_alive_timeout = Duration::from_secs(1);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let mut client: TlsClient = cert.connect(server.addr);
    assert_eq!(client.get("/").1, "Hello, World!");
    let idle_from = Instant::now();
    let stream = &mut client.stream;
    stream
        .sock
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let mut chunk = [0u8; 4096];
    let closed_after = loop {
        let elapsed = idle_from.elapsed();
        assert!(
            elapsed < Duration::from_secs(8),
            "still open after {elapsed:?} of key updates"
        );
        stream.conn.refresh_traffic_keys().unwrap();
        while stream.conn.wants_write() {
            if stream.conn.write_tls(&mut stream.sock).is_err() {
                break;
            }
        }
        match stream.sock.read(&mut chunk) {
            // Answers to the key updates, or the close_notify before the FIN.
            // A few a second: rustls allows 32 in a row without data.
            Ok(n) if n > 0 => sleep(Duration::from_millis(200)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            // The FIN (or a reset): the idle close.
            _ => break idle_from.elapsed(),
        }
    };
    // Never early: not before the keep-alive timeout; and not put off by
    // the key updates (refreshed by each, it would close only when rustls
    // refuses the 33rd, over 6 s in).
    assert!(closed_after >= Duration::from_secs(1), "{closed_after:?}");
    assert!(closed_after < Duration::from_secs(4), "{closed_after:?}");
}

#[test]
fn a_request_record_trickled_after_a_response_meets_the_headers_timeout() {
    let cert = TestCert::new();
    let server = cert.serve(|c| {
        c.headers_timeout = Duration::from_secs(1);
        c.keep_alive_timeout = Duration::from_secs(10);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let mut client = cert.connect(server.addr);
    assert_eq!(client.get("/").1, "Hello, World!");
    let conn = &mut client.stream.conn;
    conn.writer()
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut record = Vec::new();
    conn.write_tls(&mut record).unwrap();
    let tcp = &mut client.stream.sock;
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // All of the record but its last byte, one byte per 200 ms: each byte
    // is activity, none is a whole request.
    let begun = Instant::now();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    for byte in &record[..record.len() - 1] {
        tcp.write_all(std::slice::from_ref(byte)).unwrap();
        match tcp.read(&mut chunk) {
            Ok(n) => {
                answer.extend_from_slice(&chunk[..n]);
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("{e} before an answer"),
        }
    }
    let answered = begun.elapsed();
    assert!(
        !answer.is_empty(),
        "still open, unanswered, after {answered:?} of a request trickling in"
    );
    // Timers never fire early: not before the headers timeout from the
    // record's first byte; and before the keep-alive timeout would have.
    assert!(answered >= Duration::from_secs(1), "{answered:?}");
    assert!(answered < Duration::from_secs(10), "{answered:?}");
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
        }
    }
    conn.read_tls(&mut &answer[..]).unwrap();
    conn.process_new_packets().unwrap();
    let mut plain = Vec::new();
    let _ = conn.reader().read_to_end(&mut plain);
    let plain = String::from_utf8_lossy(&plain);
    assert!(plain.starts_with("HTTP/1.1 408"), "{plain:?}");
}

/// A TLS 1.3 ClientHello padded to `padding` more bytes (the padding
/// extension), cut into records of at most 16 KiB as a client must.
fn padded_client_hello(padding: usize) -> Vec<u8> {
    fn extension(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut e = kind.to_be_bytes().to_vec();
        e.extend_from_slice(&(body.len() as u16).to_be_bytes());
        e.extend_from_slice(body);
        e
    }
    let mut extensions = Vec::new();
    extensions.extend(extension(43, &[2, 0x03, 0x04])); // TLS 1.3
    extensions.extend(extension(10, &[0, 2, 0x00, 0x1d])); // X25519
    extensions.extend(extension(13, &[0, 4, 0x04, 0x03, 0x08, 0x04])); // ECDSA P-256, RSA-PSS
    let mut share = vec![0, 36, 0x00, 0x1d, 0, 32];
    share.extend_from_slice(&[9; 32]); // a public key (any 32 bytes)
    extensions.extend(extension(51, &share));
    extensions.extend(extension(21, &vec![0; padding]));
    let mut hello = vec![0x03, 0x03];
    hello.extend_from_slice(&[7; 32]); // random
    hello.push(0); // no session id
    hello.extend_from_slice(&[0, 4, 0x13, 0x02, 0x13, 0x01, 1, 0]);
    hello.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    hello.extend(extensions);
    let mut message = vec![1];
    message.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    message.extend(hello);
    let mut records = Vec::new();
    for fragment in message.chunks(16 * 1024) {
        records.extend_from_slice(&[0x16, 0x03, 0x01]);
        records.extend_from_slice(&(fragment.len() as u16).to_be_bytes());
        records.extend_from_slice(fragment);
    }
    records
}

#[test]
fn a_client_hello_larger_than_a_tls_buffer_is_answered_with_a_server_hello() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    // 40 KiB: over the 34 KiB buffer the worker lends, under rustls's
    // 64 KiB bound on a handshake message.
    let hello = padded_client_hello(40 * 1024);
    let mut tcp = TcpStream::connect(server.addr).unwrap();
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    tcp.write_all(&hello).unwrap();
    let mut header = [0u8; 6];
    tcp.read_exact(&mut header).unwrap();
    // A handshake record holding a ServerHello (2), not an alert (21).
    assert_eq!(
        [header[0], header[5]],
        [0x16, 2],
        "record header {header:?}"
    );
}
