//! HTTPS (`--tls-cert`, `--tls-key`): the server on port 0 in-process with
//! a certificate made by the test, spoken to by a rustls client. Keep-alive
//! works as over plain HTTP (reuse, `Keep-Alive` headers, the access log
//! saying TLS, GoAccess still reading it), the idle close says `close_notify` before its FIN (and
//! `close=rst` still resets; a response cut short ends without it), a handshake is under the headers deadline
//! from accept, garbage fails the handshake and is counted, plain HTTP
//! gets a cleartext 400 (whole, then EOF; a quiet client is let go by
//! the linger) and is counted, ALPN takes
//! `http/1.0` or `http/1.1` and refuses (and logs) `h2` alone, and a bad
//! certificate path stops the binary at start with one line naming it.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use keepalive_server::config::AccessLogTarget;
use keepalive_server::stats::CloseCause;
use keepalive_server::tls::{HandshakeFailure, TlsVersion};
use support::binary::{Running, command, run_to_exit};
use support::client::post_turning_bad;
use support::files::{TempDir, TempFile};
use support::server::TestServer;
use support::tls::{End, TestCert};
use support::{SLACK, eventually};

fn handshakes(server: &TestServer, version: TlsVersion) -> u64 {
    server
        .handle
        .stats()
        .map(|s| s.tls.handshakes(version))
        .sum()
}

fn failures(server: &TestServer, why: HandshakeFailure) -> u64 {
    server.handle.stats().map(|s| s.tls.failures(why)).sum()
}

#[test]
fn keep_alive_over_tls_reuses_one_handshake_and_logs_the_version() {
    let cert = TestCert::new();
    let log = TempFile::new("access.log", "");
    let server = cert.serve(|c| {
        c.keep_alive_timeout = Duration::from_secs(5);
        c.access_log = AccessLogTarget::File(log.path.clone());
    });
    let mut client = cert.connect(server.addr);
    for path in ["/", "/", "/nope"] {
        let (head, body) = client.get(path);
        assert!(head.contains("Keep-Alive: timeout=5"), "{head}");
        if path == "/" {
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert_eq!(body, "Hello, World!");
        } else {
            assert!(head.starts_with("HTTP/1.1 404"), "{head}");
        }
    }
    assert_eq!(
        client.stream.conn.alpn_protocol(),
        Some(&b"http/1.1"[..]),
        "ALPN offers http/1.1"
    );
    assert_eq!(server.accepted(), 1, "three requests, one connection");
    assert_eq!(handshakes(&server, TlsVersion::Tls13), 1);
    drop(client);
    let handle = server.handle;
    handle.shutdown();
    handle.join().unwrap(); // a stopped worker has written its log lines out
    let text = std::fs::read_to_string(&log.path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for line in &lines {
        assert!(line.contains("\"GET / HTTP/1.1\"") || line.contains("\"GET /nope HTTP/1.1\""));
        assert!(line.ends_with(" TLSv1.3"), "the line says TLS: {line}");
    }
    goaccess_reads(&text, lines.len());
}

/// GoAccess's COMBINED format reads every line, the TLS version after
/// the combined prefix included.
fn goaccess_reads(text: &str, lines: usize) {
    if std::process::Command::new("goaccess")
        .arg("--version")
        .output()
        .is_err()
    {
        support::skip::because(
            "goaccess is not installed (apt-get install goaccess; .ci/run does)",
        );
        return;
    }
    let dir = TempDir::new();
    let log = dir.file("access.log", text.as_bytes());
    let report = dir.path.join("report.json");
    let output = std::process::Command::new("goaccess")
        .arg(&log)
        .args(["--log-format=COMBINED", "--no-progress", "-o"])
        .arg(&report)
        .output()
        .expect("run goaccess");
    let json = std::fs::read_to_string(&report);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
    assert_eq!(
        report["general"]["valid_requests"], lines,
        "{}",
        report["general"]
    );
    assert_eq!(
        report["general"]["failed_requests"], 0,
        "{}",
        report["general"]
    );
}

#[test]
fn the_idle_close_sends_close_notify_then_fin() {
    let cert = TestCert::new();
    let server = cert.serve(|c| {
        c.keep_alive_timeout = Duration::from_secs(1);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let mut client = cert.connect(server.addr);
    // Before the request: the idle timer starts after it, so a close
    // measured from here can look late, never early.
    let asked = Instant::now();
    let (head, _) = client.get("/");
    assert!(head.contains("Keep-Alive: timeout=1"), "{head}");
    assert_eq!(client.read_end(), End::CloseNotify);
    let waited = asked.elapsed();
    assert!(waited >= Duration::from_secs(1), "never early: {waited:?}");
    assert!(waited < Duration::from_secs(1) + SLACK, "late: {waited:?}");
    server.wait_for_closed_by(CloseCause::KeepAliveTimeout, 1);
}

#[test]
fn the_watch_after_close_notify_tells_a_late_request_from_the_peers_close() {
    let cert = TestCert::new();
    let server = cert.serve(|c| {
        c.keep_alive_timeout = Duration::from_secs(1);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let peer_closes = |server: &TestServer| -> u64 {
        server
            .handle
            .observer_stats()
            .map(|s| s.peer_close_delay.read().count())
            .sum()
    };
    // A client that answers the close_notify with its own: a close, not a
    // request.
    let mut polite = cert.connect(server.addr);
    polite.get("/");
    let mut buf = [0u8; 64];
    assert_eq!(polite.stream.read(&mut buf).unwrap(), 0, "close_notify");
    polite.stream.conn.send_close_notify();
    polite.stream.flush().unwrap();
    eventually(SLACK, || match peer_closes(&server) {
        0 => Err("no peer close seen".to_owned()),
        _ => Ok(()),
    });
    assert_eq!(server.late_requests(), 0, "a close_notify is not a request");
    // A client that writes a request after the close_notify lost the race.
    let mut racing = cert.connect(server.addr);
    racing.get("/");
    assert_eq!(racing.stream.read(&mut buf).unwrap(), 0, "close_notify");
    racing.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    eventually(SLACK, || match server.late_requests() {
        1 => Ok(()),
        n => Err(format!("{n} late requests")),
    });
}

#[test]
fn close_rst_still_resets_over_tls() {
    let cert = TestCert::new();
    let server = cert.serve(|c| c.keep_alive_buffer = Duration::ZERO);
    let mut client = cert.connect(server.addr);
    let (head, _) = client.get("/?ka=300ms&close=rst");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(
        client.read_end(),
        End::Reset,
        "no close_notify before a reset"
    );
}

/// An echo whose body turns out bad after it began ends unfinished (no
/// last chunk), and its close must not say `close_notify`: that would
/// call the cut an orderly end. The FIN comes alone, as nginx skips
/// `SSL_shutdown` after an error.
#[test]
fn a_response_cut_short_ends_without_close_notify() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let mut client = cert.connect(server.addr);
    client.send(&post_turning_bad());
    let mut received = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let end = loop {
        match client.stream.read(&mut chunk) {
            Ok(0) => break End::CloseNotify,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break End::Fin,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break End::Reset,
            Err(e) => panic!("reading the echo: {e}"),
        }
    };
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text:.200}");
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "the echo must not end properly"
    );
    assert_eq!(end, End::Fin, "a cut response ends without close_notify");
}

#[test]
fn a_client_that_never_says_hello_is_closed_at_the_headers_deadline() {
    let cert = TestCert::new();
    let server = cert.serve(|c| c.headers_timeout = Duration::from_millis(500));
    // Before the connect: the server's deadline runs from its accept.
    let connected = Instant::now();
    let mut silent = TcpStream::connect(server.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = silent
        .read(&mut buf)
        .expect("an orderly close, not a reset");
    let waited = connected.elapsed();
    assert_eq!(n, 0, "nothing is said before a handshake (no 408)");
    assert!(waited >= Duration::from_millis(500), "early: {waited:?}");
    assert!(
        waited < Duration::from_millis(500) + SLACK,
        "late: {waited:?}"
    );
    server.wait_for_closed_by(CloseCause::HeadersTimeout, 1);
    assert_eq!(failures(&server, HandshakeFailure::Timeout), 1);
}

#[test]
fn a_handshake_cut_short_by_the_deadline_counts_as_a_timeout() {
    let cert = TestCert::new();
    let server = cert.serve(|c| c.headers_timeout = Duration::from_millis(300));
    // The first five bytes of a record header promising more than is sent.
    let mut stalled = TcpStream::connect(server.addr).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(stalled.read(&mut buf).unwrap(), 0);
    server.wait_for_closed_by(CloseCause::HeadersTimeout, 1);
    assert_eq!(failures(&server, HandshakeFailure::Timeout), 1);
}

/// Sends `request` in `parts` (with a pause between them, so later parts
/// arrive after the answer is out), shuts the write side, and reads to
/// the end: what arrived, or the error a reset would make.
fn plain_exchange(addr: std::net::SocketAddr, parts: &[&[u8]]) -> std::io::Result<String> {
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        plain.write_all(part)?;
    }
    plain.shutdown(std::net::Shutdown::Write)?;
    let mut answer = Vec::new();
    plain.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[test]
fn plain_http_on_the_tls_port_gets_a_readable_400_then_eof() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let answer = plain_exchange(
        server.addr,
        &[b"GET / HTTP/1.1\r\nHost: localhost:8443\r\n\r\n"],
    )
    .expect("the answer, then EOF: no reset");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(head.ends_with("\r\nConnection: close"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{answer}"
    );
    assert!(
        body.contains("plain HTTP") && body.contains("https://localhost:8443/"),
        "{body}"
    );
    eventually(SLACK, || {
        match failures(&server, HandshakeFailure::PlainHttp) {
            1 => Ok(()),
            n => Err(format!("{n} plain_http failures counted")),
        }
    });
    assert_eq!(failures(&server, HandshakeFailure::Error), 0);
    server.wait_for_closed_by(CloseCause::Client, 1);
    server.wait_for_open(0);
    // A TLS client is served as ever.
    let mut client = cert.connect(server.addr);
    let (head, body) = client.get("/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "Hello, World!");
    assert_eq!(handshakes(&server, TlsVersion::Tls13), 1);
    assert_eq!(failures(&server, HandshakeFailure::PlainHttp), 1);
}

#[test]
fn the_400_arrives_whole_while_the_request_body_is_still_coming() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    // The first byte alone, then the rest of the head, then a body: all
    // of it after the answer is out. Left unread, it would turn the close
    // into a reset that can cut the answer.
    let body = vec![b'x'; 256 * 1024];
    let answer = plain_exchange(
        server.addr,
        &[
            b"P",
            b"OST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 262144\r\n\r\n",
            &body,
        ],
    )
    .expect("the answer, then EOF: no reset");
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with(" instead.\n"), "the whole body: {answer}");
    assert!(answer.contains("Use https://"), "{answer}");
    server.wait_for_open(0);
    assert_eq!(failures(&server, HandshakeFailure::PlainHttp), 1);
}

#[test]
fn after_the_400_a_quiet_client_is_let_go_by_the_linger_not_the_headers_deadline() {
    let cert = TestCert::new();
    let server = cert.serve(|c| c.headers_timeout = Duration::from_secs(30));
    let mut plain = TcpStream::connect(server.addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    plain
        .read_to_end(&mut answer)
        .expect("the answer, then EOF: no reset");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    // The client stays, quiet, without closing: the server lets go once
    // the linger's second of silence is up, long before the 30 s headers
    // deadline that held it before.
    eventually(Duration::from_secs(10), || {
        match server.handle.open_connections() {
            0 => Ok(()),
            open => Err(format!("{open} connections still open")),
        }
    });
    assert_eq!(server.closed_by(CloseCause::HeadersTimeout), 0);
    assert_eq!(failures(&server, HandshakeFailure::PlainHttp), 1);
    assert_eq!(failures(&server, HandshakeFailure::Timeout), 0);
    drop(plain);
}

#[test]
fn garbage_on_the_tls_port_still_gets_the_alert_and_is_counted() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    for garbage in [&b"\x00\x01\x02\x03\x04 not TLS\r\n"[..], b"hello\r\n\r\n"] {
        let mut peer = TcpStream::connect(server.addr).unwrap();
        peer.write_all(garbage).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut answer = Vec::new();
        let _ = peer.read_to_end(&mut answer); // an alert, then the close
        assert!(
            answer.first() == Some(&0x15),
            "a TLS alert record, no HTTP answer, for {garbage:?}: {answer:?}"
        );
    }
    eventually(SLACK, || match failures(&server, HandshakeFailure::Error) {
        2 => Ok(()),
        n => Err(format!("{n} failures counted")),
    });
    assert_eq!(failures(&server, HandshakeFailure::PlainHttp), 0);
    assert_eq!(handshakes(&server, TlsVersion::Tls13), 0);
    server.wait_for_open(0);
}

#[test]
fn alpn_accepts_http_1_0_and_http_1_1_or_no_offer_at_all() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    /// What the client offers, and the protocol it should end up with.
    type Offer<'a> = (&'a [&'a [u8]], Option<&'a [u8]>);
    let offers: [Offer; 4] = [
        (&[b"http/1.0"], Some(b"http/1.0")),
        (&[b"http/1.1"], Some(b"http/1.1")),
        (&[b"h2", b"http/1.0"], Some(b"http/1.0")),
        (&[], None),
    ];
    for (offer, chosen) in offers {
        let mut client = cert
            .try_connect_offering(server.addr, offer)
            .unwrap_or_else(|e| panic!("offering {offer:?}: {e}"));
        assert_eq!(client.stream.conn.alpn_protocol(), chosen, "{offer:?}");
        client.send(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n");
        let (head, body) = client.read_response();
        assert!(head.starts_with("HTTP/1.1 200"), "{offer:?}: {head}");
        assert_eq!(body, "Hello, World!");
    }
}

#[test]
fn a_client_offering_only_h2_is_refused_and_the_log_names_its_offer() {
    let cert = TestCert::new();
    let running = Running::start(command(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.cert_arg(),
        "--tls-key",
        cert.key_arg(),
    ]));
    let refused = cert
        .try_connect_offering(running.addr, &[b"h2"])
        .err()
        .expect("an h2-only client is refused");
    assert!(
        refused.to_string().contains("NoApplicationProtocol"),
        "the alert says why: {refused}"
    );
    let line = running.wait_for_line("ALPN", Duration::from_secs(10));
    assert!(line.contains("offered=h2"), "{line}");
    assert!(line.contains("http/1.1 and http/1.0"), "{line}");
}

#[test]
fn a_bad_certificate_path_stops_the_server_with_one_line_naming_it() {
    let cert = TestCert::new();
    let missing = "/nonexistent/kas-cert.pem";
    let (status, stdout, stderr) = run_to_exit(
        command(&[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            missing,
            "--tls-key",
            cert.key_arg(),
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let said: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(said.len(), 1, "one line: {stderr}");
    assert!(
        said[0].contains(missing) && said[0].contains("--tls-cert"),
        "{stderr}"
    );
}

/// Runs the built binary's `probe --json` with `args`; its exit status,
/// its document (when it printed one) and its stderr.
fn probe(args: &[&str]) -> (Option<i32>, Option<serde_json::Value>, String) {
    let mut all = vec!["probe", "--json"];
    all.extend_from_slice(args);
    let (status, stdout, stderr) = run_to_exit(command(&all), Duration::from_secs(60));
    (status.code(), serde_json::from_str(&stdout).ok(), stderr)
}

#[test]
fn the_probe_measures_the_tls_server_and_sees_close_notify() {
    let cert = TestCert::new();
    let server = cert.serve(|c| {
        c.keep_alive_timeout = Duration::from_secs(1);
        c.keep_alive_buffer = Duration::ZERO;
    });
    let url = format!("https://localhost:{}/", server.addr.port());
    let (code, report, stderr) = probe(&["--connections", "3", "--cacert", cert.cert_arg(), &url]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("a JSON report");
    assert_eq!(report["tls"]["version"], "TLSv1.3", "{report}");
    assert_eq!(report["tls"]["idle_close"], "close_notify", "{report}");
    assert_eq!(report["close_style"], "fin", "{report}");
    assert_eq!(report["advertised_timeout_s"], 1, "{report}");
    let min = report["idle_timeout_ms"]["min"]
        .as_f64()
        .expect("closes timed");
    let max = report["idle_timeout_ms"]["max"].as_f64().unwrap();
    assert!(
        min >= 995.0,
        "no close before the timeout, allowing the probe's own slack: {report}"
    );
    assert!(max < 1000.0 + SLACK.as_millis() as f64, "{report}");
    let advice = report["advice"].as_str().unwrap();
    assert!(advice.contains("close_notify"), "{advice}");
    // Three idle connections and the limit's one, each a full handshake.
    let handshakes = handshakes(&server, TlsVersion::Tls13);
    assert!(handshakes >= 4, "{handshakes} handshakes");
}

#[test]
fn the_probe_reports_a_reset_over_tls_as_rst() {
    let cert = TestCert::new();
    let server = cert.serve(|c| c.keep_alive_buffer = Duration::ZERO);
    let url = format!(
        "https://127.0.0.1:{}/?ka=400ms&close=rst",
        server.addr.port()
    );
    let (code, report, stderr) = probe(&["--connections", "2", "--insecure", &url]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("a JSON report");
    assert_eq!(report["tls"]["idle_close"], "rst", "{report}");
    assert_eq!(report["close_style"], "rst", "{report}");
}

#[test]
fn the_probe_refuses_a_certificate_it_cannot_verify() {
    let cert = TestCert::new();
    let server = cert.serve(|_| {});
    let stranger = TestCert::new();
    let url = format!("https://localhost:{}/", server.addr.port());
    let (code, _, stderr) = probe(&["--connections", "1", "--cacert", stranger.cert_arg(), &url]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    let (code, _, stderr) = probe(&["--insecure", "http://127.0.0.1:9/"]);
    assert_eq!(code, Some(2), "--insecure is for https: {stderr}");
}
