//! Signals against the built binary: SIGTERM drains (idle sockets closed at
//! once, in-flight requests finished with `Connection: close`, exit 0), a
//! second signal exits at once, `--shutdown-timeout` cuts a drain short
//! (`0` never does), and a stderr nobody reads any more stops nothing.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStderr, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::binary::{Running, STARTUP_TIMEOUT, command, serve, wait_timeout};
use support::client::{Client, get};
use support::eventually;
use support::exposition::Exposition;

/// Generous: the machine is shared.
const EXIT_WITHIN: Duration = Duration::from_secs(10);

/// The servers' flags: two workers, as a rule.
const TWO_WORKERS: [&str; 2] = ["--workers", "2"];
/// One worker, so one listener: once it is closed, every connect is refused.
const ONE_WORKER: [&str; 2] = ["--workers", "1"];
/// Two workers and the admin listener, whose `/metrics` shows requests in
/// flight.
const WATCHED: [&str; 4] = ["--workers", "2", "--admin", "127.0.0.1:0"];

/// A persistent connection with one request answered.
fn idle_client(server: &Running) -> Client {
    let mut client = Client::connect(server.addr);
    let response = client.request("/");
    assert_eq!(response.status, 200);
    assert!(!response.closes());
    client
}

/// Sends `GET path` (a `/delay`) on a new connection to a server started
/// with [`start_watched`], and waits until the server has read it: its
/// answer is owed (a connection `writing`), so it is in flight before a
/// signal.
fn in_flight(server: &Running, path: &str) -> Client {
    let mut client = Client::connect(server.addr);
    client.get(path);
    eventually(EXIT_WITHIN, || {
        let writing = server
            .metrics()
            .value("kas_connections", &[("state", "writing")]);
        match writing {
            Some(n) if n >= 1.0 => Ok(()),
            other => Err(format!("{path} not read yet: writing {other:?}")),
        }
    });
    client
}

/// Waits until every listener is closed (the drain has begun in every
/// worker): a connect is refused.
fn wait_until_draining(server: &Running) {
    eventually(EXIT_WITHIN, || match TcpStream::connect(server.addr) {
        Ok(_) => Err("still accepting after SIGTERM".to_owned()),
        Err(_) => Ok(()),
    });
}

#[test]
fn sigterm_closes_idle_finishes_in_flight_and_exits_zero() {
    let mut server = serve(&WATCHED);
    let mut idle = idle_client(&server);
    let mut delayed = in_flight(&server, "/delay/800");

    let signalled = Instant::now();
    server.signal("TERM");

    let waited = idle.expect_closed(Duration::from_secs(5));
    assert!(
        waited < Duration::from_secs(1),
        "idle socket closed {waited:?} after SIGTERM"
    );

    // New connections are not served: every listener closes.
    wait_until_draining(&server);

    let response = delayed.read_response();
    assert_eq!(response.status, 200, "{response:?}");
    assert!(
        response.closes(),
        "in-flight response during drain: {response:?}"
    );
    assert!(response.header("keep-alive").is_none(), "{response:?}");
    delayed.expect_closed(Duration::from_secs(5));

    let status = server
        .wait_exit(EXIT_WITHIN)
        .unwrap_or_else(|| panic!("still running; log:\n{}", server.output()));
    let took = signalled.elapsed();
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        server.output()
    );
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after SIGTERM"
    );
    assert!(server.output().contains("stopped"));
}

#[test]
fn sigint_on_an_idle_server_exits_zero_at_once() {
    let mut server = serve(&TWO_WORKERS);
    let idle = idle_client(&server);
    let signalled = Instant::now();
    server.signal("INT");
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(status.success(), "exit status {status}");
    // Nothing ref'd: no waiting for the idle socket's 65 s keep-alive.
    assert!(signalled.elapsed() < Duration::from_secs(3));
    drop(idle);
}

#[test]
fn sigterm_right_after_the_startup_line_is_graceful() {
    // The startup line promises a server that handles signals.
    for _ in 0..5 {
        let mut server = serve(&TWO_WORKERS);
        server.signal("TERM");
        let status = server.wait_exit(EXIT_WITHIN).expect("exited");
        assert!(
            status.success(),
            "exit status {status}; log:\n{}",
            server.output()
        );
    }
}

#[test]
fn second_sigterm_exits_at_once() {
    let mut server = serve(&WATCHED);
    let mut delayed = in_flight(&server, "/delay/5000");
    let first = Instant::now();
    server.signal("TERM");
    // The first signal drains: the 5 s request keeps the process alive.
    server.wait_for_line("shutting down", EXIT_WITHIN);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "exited before the in-flight request finished"
    );
    server.signal("TERM");
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    let took = first.elapsed();
    assert!(!status.success(), "exit status {status}");
    assert!(
        took < Duration::from_millis(3000),
        "exited {took:?} after the first signal (delay 5 s)"
    );
    // The in-flight request was cut, not answered.
    assert!(delayed.try_read_response().is_err());
}

#[test]
fn shutdown_timeout_cuts_a_long_drain() {
    let mut server = serve(&[&WATCHED[..], &["--shutdown-timeout", "300ms"]].concat());
    let mut delayed = in_flight(&server, "/delay/3000");
    let signalled = Instant::now();
    server.signal("TERM");
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    let took = signalled.elapsed();
    assert!(
        took >= Duration::from_millis(300),
        "exited {took:?} after SIGTERM, before --shutdown-timeout 300ms"
    );
    assert!(
        took < Duration::from_millis(1500),
        "exited {took:?} after SIGTERM (--shutdown-timeout 300ms)"
    );
    assert!(status.success(), "exit status {status}");
    let output = server.output();
    let cut_line = output
        .lines()
        .find(|line| line.contains("shutdown timeout: cutting connections"))
        .unwrap_or_else(|| panic!("no line about the cut: {output}"));
    assert!(
        cut_line.contains("writing_or_delayed_responses=1"),
        "the line names what was cut: {cut_line}"
    );
    assert!(
        delayed.try_read_response().is_err(),
        "the cut request was answered"
    );
}

#[test]
fn shutdown_timeout_0_waits_as_long_as_in_flight_requests_take() {
    let mut server = serve(&[&WATCHED[..], &["--shutdown-timeout", "0"]].concat());
    let mut delayed = in_flight(&server, "/delay/1500");
    let signalled = Instant::now();
    server.signal("TERM");
    let response = delayed.read_response();
    assert_eq!(response.status, 200, "{response:?}");
    assert!(response.closes(), "{response:?}");
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(
        signalled.elapsed() >= Duration::from_millis(1000),
        "exited {:?} after SIGTERM, before the 1.5 s request could finish",
        signalled.elapsed()
    );
    assert!(status.success(), "exit status {status}");
    let output = server.output();
    assert!(!output.contains("cutting connections"), "{output}");
}

/// SIGTERM while pipelined 1 MB echoes are being read slowly: every
/// response the client receives is whole (those begun before the signal,
/// and any answered after it with `Connection: close`), the connection
/// ends with FIN, not RST, and nothing is logged as cut: the shutdown
/// timeout has not passed.
#[test]
fn sigterm_during_slowly_read_pipelined_echoes_cuts_nothing() {
    const ECHOES: usize = 6;
    const SIZE: usize = 1_000_000;
    let mut server = serve(&TWO_WORKERS);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    let mut request =
        format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {SIZE}\r\n\r\n").into_bytes();
    request.resize(request.len() + SIZE, b'e');
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        let pipelined = request.repeat(ECHOES);
        std::thread::spawn(move || {
            let _ = stream.write_all(&pipelined);
        })
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The signal once the answers have begun.
    let mut chunk = vec![0u8; 64 * 1024];
    let n = stream.read(&mut chunk).expect("the first answer begins");
    let mut received = chunk[..n].to_vec();
    server.signal("TERM");
    // Read at about 3 MB/s until the server closes.
    let started = Instant::now();
    let reset = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break false,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(e) => panic!("read failed after {} bytes: {e}", received.len()),
        }
        let due = Duration::from_secs_f64(received.len() as f64 / 3e6);
        std::thread::sleep(due.saturating_sub(started.elapsed()));
    };
    drop(stream);
    writer.join().unwrap();
    // Every response received is whole.
    let mut rest = &received[..];
    let mut whole = Vec::new();
    while !rest.is_empty() {
        let text = String::from_utf8_lossy(&rest[..rest.len().min(512)]).into_owned();
        let head_end = text.find("\r\n\r\n").expect("a whole head") + 4;
        let length: usize = text[..head_end]
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .and_then(|n| n.parse().ok())
            .expect("Content-Length");
        assert!(
            rest.len() >= head_end + length,
            "response {} cut at {} of {length} bytes",
            whole.len() + 1,
            rest.len() - head_end
        );
        whole.push(text[..head_end].to_string());
        rest = &rest[head_end + length..];
    }
    assert!(!whole.is_empty(), "nothing answered");
    assert!(!reset, "ended by RST after {} whole responses", whole.len());
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(status.success(), "exit status {status}");
    let log = server.log().join("\n");
    assert!(
        !log.contains("cutting"),
        "nothing was due to be cut:\n{log}"
    );
}

/// A large answer being read at the client's own pace when SIGTERM
/// arrives is sent whole, even with `--timeout 0`: a response in progress
/// keeps the drain alive whether or not a timer stands for it. (It was cut
/// after a few MB, the process exiting at once: with the inactivity
/// timeout disabled nothing ref'd was left.)
#[test]
fn sigterm_with_timeout_0_finishes_a_response_in_progress() {
    const SIZE: usize = 24 << 20;
    let mut server = serve(
        &[
            &ONE_WORKER[..],
            &["--timeout", "0", "--max-body-size", "32MiB"],
        ]
        .concat(),
    );
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /bytes/{SIZE} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut received = vec![0u8; 1024];
    stream.read_exact(&mut received).unwrap(); // the answer has begun
    server.signal("TERM");
    wait_until_draining(&server);
    stream.read_to_end(&mut received).expect("read to the end");
    let head_end = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    assert_eq!(
        received.len() - head_end,
        SIZE,
        "the body was cut; log:\n{}",
        server.output()
    );
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(status.success(), "exit status {status}");
    assert!(!server.output().contains("cutting"), "nothing was cut");
}

/// A request still arriving when the drain's deadline passes is answered
/// 408 before the close (it was closed silently after the whole
/// `--shutdown-timeout`): half a head, and a head with half its body.
#[test]
fn a_partial_request_at_the_shutdown_timeout_gets_a_408() {
    let mut server = serve(&[&ONE_WORKER[..], &["--shutdown-timeout", "500ms"]].concat());
    let mut half_head = Client::connect(server.addr);
    half_head.send(b"GET / HTTP/1.1\r\nHo");
    let mut half_body = Client::connect(server.addr);
    half_body.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    // Both are read before the signal: epoll reports readiness in the
    // order it came, so their bytes are read before a third connection's
    // request is answered.
    let mut third = Client::connect(server.addr);
    assert_eq!(third.request("/").status, 200);
    drop(third);
    let signalled = Instant::now();
    server.signal("TERM");
    for (client, what) in [
        (&mut half_head, "half a head"),
        (&mut half_body, "half a body"),
    ] {
        let response = client.read_response();
        assert_eq!(response.status, 408, "{what}: {response:?}");
        assert!(response.closes(), "{what}: {response:?}");
        client.expect_closed(Duration::from_secs(5));
    }
    assert!(
        signalled.elapsed() >= Duration::from_millis(500),
        "answered before --shutdown-timeout"
    );
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(status.success(), "exit status {status}");
}

/// A partial request's own timeouts keep running during the drain: the
/// one that fires first ends it with a 408, and then the process exits
/// (long before `--shutdown-timeout`).
#[test]
fn a_partial_requests_own_timeout_ends_it_during_the_drain() {
    let mut server = serve(&[&ONE_WORKER[..], &["--headers-timeout", "400ms"]].concat());
    let mut half_head = Client::connect(server.addr);
    half_head.send(b"GET / HTTP/1.1\r\nHo");
    let mut third = Client::connect(server.addr);
    assert_eq!(third.request("/").status, 200);
    drop(third);
    let signalled = Instant::now();
    server.signal("TERM");
    let response = half_head.read_response();
    assert_eq!(response.status, 408, "{response:?}");
    let status = server.wait_exit(EXIT_WITHIN).expect("exited");
    assert!(status.success(), "exit status {status}");
    assert!(
        signalled.elapsed() < Duration::from_secs(8),
        "held for {:?}: the 30 s shutdown timeout, not the 400 ms headers timeout",
        signalled.elapsed()
    );
}

/// The child, killed if the test fails before it exits.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal}");
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the binary (`RUST_LOG` at `level`, the admin listener on) with
/// stderr a pipe, and reads that pipe up to the startup line. Returns the
/// server, its address, its admin address and the pipe's only read end,
/// left unread from there on.
fn start_with_stderr_pipe(
    level: &str,
) -> (KillOnDrop, SocketAddr, SocketAddr, BufReader<ChildStderr>) {
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--admin",
        "127.0.0.1:0",
    ];
    let mut child = command(&args)
        .env("RUST_LOG", level)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server binary");
    let stderr = child.stderr.take().unwrap();
    let server = KillOnDrop(child);
    let (startup_tx, startup) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.contains("listening on") {
                let _ = startup_tx.send((line, reader));
                return;
            }
            line.clear();
        }
    });
    let (line, reader) = startup
        .recv_timeout(STARTUP_TIMEOUT)
        .expect("a startup line in time");
    let addr = support::binary::listening_on(&line)
        .expect("listening on http://ADDR/")
        .parse()
        .unwrap();
    let (_, after) = line
        .split_once("admin=http://")
        .expect("admin= in the startup line");
    let admin = after.split_once('/').expect("admin=http://ADDR/").0;
    (server, addr, admin.parse().unwrap(), reader)
}

/// `kas_log_lines_dropped_total` from the admin listener.
fn log_lines_dropped(admin: SocketAddr) -> Option<f64> {
    Exposition::parse(&get(admin, "/metrics").text()).value("kas_log_lines_dropped_total", &[])
}

/// SIGTERM, then the exit: status 0, soon.
fn assert_sigterm_exits(server: &mut KillOnDrop) {
    let signalled = Instant::now();
    server.signal("-TERM");
    let status = wait_timeout(&mut server.0, EXIT_WITHIN)
        .unwrap_or_else(|| panic!("still running {EXIT_WITHIN:?} after SIGTERM"));
    assert!(status.success(), "exit status {status}");
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "exited {:?} after SIGTERM",
        signalled.elapsed()
    );
}

/// `keepalive-server 2>&1 | head -1`: once the startup line is read, the
/// reader of stderr is gone and every diagnostic line meets EPIPE. Each is
/// dropped and counted (SIGHUP's "nothing to reload" here), and SIGTERM
/// still drains and exits 0 (it used to kill the signal thread, through
/// tracing-subscriber's own panicking report of the failed write).
#[test]
fn a_closed_stderr_drops_log_lines_and_stops_no_signal() {
    let (mut server, _, admin, stderr) = start_with_stderr_pipe("info");
    drop(stderr);
    assert_eq!(log_lines_dropped(admin), Some(0.0), "nothing dropped yet");
    server.signal("-HUP");
    eventually(Duration::from_secs(10), || match log_lines_dropped(admin) {
        Some(n) if n >= 1.0 => Ok(()),
        other => Err(format!("kas_log_lines_dropped_total: {other:?}")),
    });
    assert_sigterm_exits(&mut server);
}

/// A stderr pipe that is open but never read fills up (64 KiB) under
/// debug logging (a line per refused request): the worker keeps answering
/// rather than wait in write(2), the lines that find the pipe full are
/// dropped and counted, and SIGTERM still exits.
#[test]
fn a_full_stderr_pipe_stalls_neither_requests_nor_shutdown() {
    const REQUESTS: usize = 2000; // about 120 bytes of log each
    let (mut server, addr, admin, _unread) = start_with_stderr_pipe("debug");
    for i in 0..REQUESTS {
        let mut client = Client::connect(addr);
        client.send(b"NOT HTTP\r\n\r\n");
        let response = client
            .try_read_response()
            .unwrap_or_else(|e| panic!("request {i} of {REQUESTS} unanswered: {e}"));
        assert_eq!(response.status, 400);
    }
    assert!(
        log_lines_dropped(admin).is_some_and(|n| n >= 1.0),
        "the pipe never filled: no line dropped"
    );
    assert_sigterm_exits(&mut server);
}
