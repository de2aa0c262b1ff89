//! The access log, against the built binary: nginx `combined` lines with
//! request time and connection id, escaping, refused requests with what of
//! their request line arrived and their real duration, buffered writes
//! that still reach the file within a second and at shutdown, standard
//! output with `-`, independence from `RUST_LOG`, reopening on SIGUSR1, and
//! GoAccess parsing every line.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use support::binary::{Running, command, serve};
use support::client::Client;
use support::eventually;
use support::files::TempFile;

const WITHIN: Duration = Duration::from_secs(10);

/// The server with its access log in a fresh file.
struct Logged {
    server: Running,
    log: TempFile,
}

impl Logged {
    fn start(extra: &[&str]) -> Logged {
        let log = TempFile::new("access.log", "");
        let mut args = vec!["--workers", "1", "--access-log", log.arg()];
        args.extend_from_slice(extra);
        let server = serve(&args);
        Logged { server, log }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// Waits for the file to hold at least `count` lines, and returns them.
    fn lines(&self, count: usize) -> Vec<String> {
        lines_of(&self.log, count)
    }
}

fn lines_of(file: &TempFile, count: usize) -> Vec<String> {
    eventually(WITHIN, || {
        let text = std::fs::read_to_string(&file.path).map_err(|e| e.to_string())?;
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= count {
            Ok(lines)
        } else {
            Err(format!("{} of {count} lines: {lines:?}", lines.len()))
        }
    })
}

/// Sends raw bytes on a fresh connection and reads until the server closes.
fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WITHIN)).unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The request time (seconds) and connection id that end a line, before
/// its idle gap.
fn time_and_conn(line: &str) -> (f64, u64) {
    let mut words = line.rsplit(' ').skip(1);
    let conn = words.next().unwrap().parse().expect("a connection id");
    let time = words.next().unwrap().parse().expect("a request time");
    (time, conn)
}

/// The idle gap that ends a line: ms since the previous response on the
/// connection, `None` for its first request (`-`).
fn idle_gap(line: &str) -> Option<u64> {
    match line.rsplit(' ').next().unwrap() {
        "-" => None,
        ms => Some(ms.parse().expect("an idle gap in ms")),
    }
}

#[test]
fn lines_are_combined_format_with_time_and_connection_id() {
    let logged = Logged::start(&[]);
    let mut client = Client::connect(logged.addr());
    client.send(
        b"GET /a?b=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: probe/1.0\r\nReferer: http://r/x\r\n\r\n",
    );
    assert_eq!(client.read_response().status, 404);
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(client.read_response().status, 200);
    let mut other = Client::connect(logged.addr());
    other.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(other.read_response().status, 200);
    let head = exchange(
        logged.addr(),
        b"HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");

    let lines = logged.lines(4);
    let first = &lines[0];
    let prefix = "127.0.0.1 - - [";
    assert!(first.starts_with(prefix), "{first}");
    let time = &first[prefix.len()..first.find(']').unwrap()];
    assert_eq!(time.len(), 26, "dd/Mon/yyyy:HH:MM:SS +0000: {time}");
    assert!(
        time.ends_with(" +0000") && time.as_bytes()[2] == b'/',
        "{time}"
    );
    assert!(
        first.contains("] \"GET /a?b=1 HTTP/1.1\" 404 10 \"http://r/x\" \"probe/1.0\" "),
        "{first}"
    );
    assert!(
        lines[1].contains("\"GET / HTTP/1.1\" 200 13 \"-\" \"-\" "),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("\"POST / HTTP/1.1\" 200 5 "),
        "{}",
        lines[2]
    );
    let head = &lines[3];
    assert!(
        head.contains("\"HEAD / HTTP/1.1\" 200 0 "),
        "HEAD sends no body: {head}"
    );
    assert_eq!(idle_gap(&lines[0]), None, "a first request: {first}");
    let gap = idle_gap(&lines[1]).expect("a reuse has a gap");
    assert!(gap < 5_000, "{}", lines[1]);
    let ids: Vec<u64> = lines.iter().map(|l| time_and_conn(l).1).collect();
    assert_eq!(ids[0], ids[1], "one connection, one id: {lines:?}");
    assert_ne!(ids[0], ids[2], "two connections, two ids: {lines:?}");
    for line in &lines {
        let (seconds, _) = time_and_conn(line);
        assert!((0.0..5.0).contains(&seconds), "{line}");
        let text = line.rsplit(' ').nth(2).unwrap();
        assert_eq!(
            text.split('.').nth(1).map(str::len),
            Some(3),
            "ms resolution: {line}"
        );
    }
}

#[test]
fn quotes_backslashes_and_control_bytes_are_escaped() {
    let logged = Logged::start(&[]);
    let mut client = Client::connect(logged.addr());
    client.send(b"GET /q HTTP/1.1\r\nHost: t\r\nUser-Agent: say \"hi\" \\o/\r\n\r\n");
    client.read_response();
    // Refused (a control byte in the target), so logged as it arrived.
    exchange(logged.addr(), b"GET /\x01\"x\\ HTTP/1.1\r\nHost: t\r\n\r\n");
    let lines = logged.lines(2);
    assert!(
        lines[0].contains("\"say \\x22hi\\x22 \\x5Co/\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /\\x01\\x22x\\x5C HTTP/1.1\" 400 "),
        "{}",
        lines[1]
    );
    for line in &lines {
        assert!(line.bytes().all(|b| (0x20..0x7f).contains(&b)), "{line:?}");
    }
}

#[test]
fn refused_requests_show_what_arrived_and_how_long_they_took() {
    let logged = Logged::start(&["--headers-timeout", "1s", "--max-header-size", "1KiB"]);
    exchange(logged.addr(), b"BREW /pot HTCPCP/1.0\r\n\r\n");
    let big = format!(
        "GET /big HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "y".repeat(2048)
    );
    exchange(logged.addr(), big.as_bytes());
    exchange(logged.addr(), b"GET /slow HT");
    exchange(logged.addr(), b"");
    let lines = logged.lines(4);
    let find = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}: {lines:?}"))
    };
    assert!(find("\"BREW /pot HTCPCP/1.0\"").contains("\" 400 "));
    assert!(find("\"GET /big HTTP/1.1\"").contains("\" 431 "));
    let slow = find("\"GET /slow HT\"");
    assert!(slow.contains("\" 408 "), "{slow}");
    let silent = find("\"-\" 408 ");
    for line in [slow, silent] {
        let (seconds, _) = time_and_conn(line);
        assert!(
            (0.95..8.0).contains(&seconds),
            "a 1s headers timeout logged as {seconds}s: {line}"
        );
    }
}

#[test]
fn buffered_lines_reach_the_file_within_a_second_or_two_and_at_shutdown() {
    let mut logged = Logged::start(&[]);
    let mut client = Client::connect(logged.addr());
    assert_eq!(client.request("/").status, 200);
    // Nothing else happens: the Date tick flushes it.
    let lines = logged.lines(1);
    assert!(lines[0].contains("\"GET / HTTP/1.1\" 200 13"), "{lines:?}");

    assert_eq!(client.request("/last").status, 404);
    drop(client);
    logged.server.signal("TERM");
    logged.server.wait_exit(WITHIN).expect("exits on SIGTERM");
    let text = std::fs::read_to_string(&logged.log.path).unwrap();
    assert!(text.contains("\"GET /last HTTP/1.1\" 404"), "{text}");
}

#[test]
fn a_dash_writes_to_stdout_whatever_rust_log_says() {
    let mut cmd = command(&["--workers", "1", "--access-log", "-"]);
    cmd.env("RUST_LOG", "off");
    let mut server = Running::start_silent(cmd);
    let mut client = Client::connect(server.addr);
    assert_eq!(client.request("/stdout").status, 404);
    let line = server
        .stdout
        .recv_timeout(WITHIN)
        .expect("an access-log line on stdout");
    assert!(line.contains("\"GET /stdout HTTP/1.1\" 404"), "{line}");
    server.signal("TERM");
    server.wait_exit(WITHIN).expect("exits");
    server.wait_for_output_end(WITHIN);
    assert!(
        server.lines.try_recv().is_err(),
        "RUST_LOG=off, yet: {:?}",
        server.log()
    );
}

#[test]
fn sigusr1_reopens_the_file_after_it_was_moved() {
    let logged = Logged::start(&[]);
    let mut client = Client::connect(logged.addr());
    assert_eq!(client.request("/before").status, 404);
    logged.lines(1);
    let rotated = logged.log.path.with_extension("log.1");
    std::fs::rename(&logged.log.path, &rotated).unwrap();
    logged.server.signal("USR1");
    logged
        .server
        .wait_for_line("reopened the access log", WITHIN);
    assert_eq!(client.request("/after").status, 404);
    let lines = logged.lines(1);
    assert!(lines[0].contains("/after"), "{lines:?}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("/before") && !old.contains("/after"), "{old}");
}

#[test]
fn goaccess_parses_every_line() {
    let available = Command::new("goaccess").arg("--version").output().is_ok();
    if !available {
        support::skip::because(
            "goaccess is not installed (apt-get install goaccess; .ci/run does)",
        );
        return;
    }
    let logged = Logged::start(&["--headers-timeout", "1s"]);
    let mut client = Client::connect(logged.addr());
    for path in ["/", "/x", "/a%20b?c=d", "/delay/1"] {
        client.send(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nUser-Agent: a \"quoted\" \\ agent\r\nReferer: http://r/\"\r\n\r\n")
                .as_bytes(),
        );
        client.read_response();
    }
    client.send(
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    client.read_response();
    exchange(logged.addr(), b"BAD\r\n\r\n");
    exchange(logged.addr(), b"GET /q=\"d\" HTTP/1.1\r\nHost: t\r\n\r\n");
    exchange(logged.addr(), b"GET / HTTP/9.9\r\nHost: t\r\n\r\n");
    exchange(logged.addr(), b"GET /\x7f\x01 HTTP/1.1\r\n\r\n");
    exchange(logged.addr(), b"GET /half");
    let lines = logged.lines(10);

    let report = logged.log.path.with_extension("json");
    let output = Command::new("goaccess")
        .arg(&logged.log.path)
        .args(["--log-format=COMBINED", "--no-progress", "-o"])
        .arg(&report)
        .output()
        .expect("run goaccess");
    assert!(
        output.status.success(),
        "goaccess: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let general = &report["general"];
    assert_eq!(general["total_requests"], lines.len(), "{general}");
    assert_eq!(
        general["valid_requests"],
        lines.len(),
        "{general}\n{lines:#?}"
    );
    assert_eq!(general["failed_requests"], 0, "{general}\n{lines:#?}");
}

/// A line reaches the file once the loop has nothing more to do, not at
/// the next Date tick up to a second later: by the time a request on
/// another connection (handled in a later loop turn) is answered, the
/// first request's line is in the file.
#[test]
fn a_line_is_written_out_before_the_loop_sleeps() {
    let logged = Logged::start(&[]);
    let mut first = Client::connect(logged.addr());
    assert_eq!(first.request("/first").status, 404);
    let mut second = Client::connect(logged.addr());
    assert_eq!(second.request("/second").status, 404);
    let text = std::fs::read_to_string(&logged.log.path).unwrap();
    assert!(
        text.contains("GET /first "),
        "the first line still waits in the buffer: {text:?}"
    );
}
