//! Resource limits: `--max-connections` (evict the oldest idle keep-alive
//! connection, refuse when none is idle) and running out of descriptors at
//! accept() (pause and log once, no busy loop, resume when descriptors free).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{Client, HELLO, SLACK, TestServer, ms, start};
use keepalive_server::stats::CloseCause;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn refused(server: &TestServer) -> u64 {
    server.handle.stats().map(|s| s.refused.load(Relaxed)).sum()
}

/// A connection that has been answered once and now sits idle.
fn idle_client(server: &TestServer) -> Client {
    let mut client = server.client();
    assert_ok(&mut client);
    client
}

fn assert_ok(client: &mut Client) {
    client.send(GET);
    let response = client.read_response();
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body, HELLO);
}

/// A connection with part of a request head sent.
fn mid_request_client(server: &TestServer) -> Client {
    let mut client = server.client();
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
    client
}

/// Waits until the server has `n` open connections and has had a moment to
/// read what they sent.
fn settle(server: &TestServer, n: u64) {
    server.wait_for_open(n);
    thread::sleep(ms(100));
}

#[test]
fn at_the_limit_the_oldest_idle_connection_is_evicted() {
    let server = start(|config| config.max_connections = 4);
    let mut clients: Vec<Client> = (0..4).map(|_| idle_client(&server)).collect();
    settle(&server, 4);

    // A fifth: the first one opened (idle the longest) makes room.
    let mut fifth = server.client();
    assert_ok(&mut fifth);
    clients[0].read_until_closed(SLACK);
    assert_eq!(server.closed_by(CloseCause::Evicted), 1);
    for client in &mut clients[1..] {
        assert_ok(client); // still open; now idle more recently than the fifth
    }
    settle(&server, 4);

    // A sixth: the fifth is now the one idle the longest.
    let mut sixth = server.client();
    assert_ok(&mut sixth);
    fifth.read_until_closed(SLACK);
    assert_eq!(server.closed_by(CloseCause::Evicted), 2);
    for client in &mut clients[1..] {
        assert_ok(client);
    }
    assert_eq!(refused(&server), 0);
    assert_eq!(server.handle.open_connections(), 4);
}

#[test]
fn with_none_idle_the_oldest_silent_connection_is_evicted() {
    // Accepted connections that have sent nothing hold no request either;
    // like nginx, the server reuses them rather than refuse newcomers.
    let server = start(|config| config.max_connections = 3);
    let mut silent: Vec<Client> = (0..3).map(|_| server.client()).collect();
    settle(&server, 3);

    let mut newcomer = server.client();
    assert_ok(&mut newcomer);
    silent[0].read_until_closed(SLACK);
    assert_eq!(server.closed_by(CloseCause::Evicted), 1);
    assert_eq!(refused(&server), 0);
    for client in &mut silent[1..] {
        assert_ok(client); // the younger silent ones were left alone
    }
}

#[test]
fn at_the_limit_with_every_connection_mid_request_new_ones_are_refused() {
    let server = start(|config| config.max_connections = 3);
    let mut clients: Vec<Client> = (0..3).map(|_| mid_request_client(&server)).collect();
    settle(&server, 3);

    // Nothing idle to evict: closed at once, without a response.
    let mut turned_away = server.client();
    let asked = Instant::now();
    turned_away.read_until_closed(SLACK);
    eprintln!("refused connection closed after {:?}", asked.elapsed());
    assert_eq!(refused(&server), 1);
    assert_eq!(server.closed_by(CloseCause::Evicted), 0);
    assert_eq!(server.handle.open_connections(), 3);

    // The connections in progress are unharmed.
    for client in &mut clients {
        client.send(b"\r\n");
        let response = client.read_response();
        assert_eq!(response.status, 200, "{response:?}");
    }
}

#[test]
fn eviction_skips_connections_in_progress_and_refuses_when_none_is_idle() {
    let server = start(|config| config.max_connections = 3);
    let mut a = idle_client(&server);
    let mut b = mid_request_client(&server);
    let mut c = idle_client(&server);
    settle(&server, 3);

    // D: A is the oldest idle connection (B, older than C, is not idle).
    let _d = mid_request_client(&server);
    a.read_until_closed(SLACK);
    settle(&server, 3);
    // E: C is the only idle connection left.
    let _e = mid_request_client(&server);
    c.read_until_closed(SLACK);
    settle(&server, 3);
    // F: B, D and E are all mid-request.
    let mut f = server.client();
    f.read_until_closed(SLACK);

    assert_eq!(server.closed_by(CloseCause::Evicted), 2);
    assert_eq!(refused(&server), 1);
    b.send(b"\r\n");
    assert_eq!(b.read_response().status, 200);
}

/// The server binary, killed when dropped.
struct ServerProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServerProcess {
    fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// utime + stime, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("/proc/<pid>/stat");
        // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
        let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

/// Removes ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Starts the built binary through `sh -c "ulimit -n LIMIT && exec ..."`
/// and reads its address from the `listen=` field of its startup line.
fn start_binary_with_fd_limit(limit: u32) -> (ServerProcess, SocketAddr) {
    let bin = env!("CARGO_BIN_EXE_keepalive-server");
    let script = format!("ulimit -n {limit} && exec \"$0\" --listen 127.0.0.1:0 --workers 1");
    let mut child = Command::new("sh")
        .args(["-c", &script, bin])
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (addr_tx, addr_rx) = mpsc::channel();
    let readers: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for reader in readers {
        let lines = Arc::clone(&lines);
        let addr_tx = addr_tx.clone();
        thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                let line = strip_ansi(&line);
                let addr = line
                    .split_whitespace()
                    .find_map(|field| field.strip_prefix("listen="))
                    .and_then(|addr| addr.parse::<SocketAddr>().ok());
                if let Some(addr) = addr {
                    let _ = addr_tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
    }
    let server = ServerProcess { child, lines };
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no listen= line; log: {:?}", server.log()));
    (server, addr)
}

#[test]
fn out_of_descriptors_at_accept_pauses_without_spinning_and_logs_once() {
    const CONNECTIONS: usize = 100;
    let (server, addr) = start_binary_with_fd_limit(64);
    // More connections than descriptors: the kernel completes them all (the
    // backlog is long); the server runs out while accepting them.
    let clients: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let warnings = |server: &ServerProcess| -> Vec<String> {
        server
            .log()
            .into_iter()
            .filter(|line| line.contains("WARN") && line.contains("accept"))
            .collect()
    };
    let deadline = Instant::now() + SLACK;
    while warnings(&server).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no accept warning; log: {:?}",
            server.log()
        );
        thread::sleep(ms(20));
    }

    // Paused, not spinning: next to no CPU over the next 2 s.
    let window = Duration::from_secs(2);
    let ticks_before = server.cpu_ticks();
    let measured = Instant::now();
    thread::sleep(window);
    let ticks = server.cpu_ticks() - ticks_before;
    let elapsed = measured.elapsed();
    let share = ticks as f64 / 100.0 / elapsed.as_secs_f64();
    let warned = warnings(&server);
    eprintln!(
        "EMFILE: {ticks} ticks of CPU in {elapsed:?} ({:.1}% of a core); warnings: {warned:?}",
        share * 100.0
    );
    assert!(
        share < 0.2,
        "accept loop spins: {:.0}% of a core",
        share * 100.0
    );
    assert_eq!(warned.len(), 1, "one warning per shortage: {warned:?}");

    // Descriptors free up: accepting resumes and a new connection is served.
    drop(clients);
    let deadline = Instant::now() + SLACK + SLACK;
    loop {
        let mut client = Client::connect(addr);
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let mut answer = Vec::new();
        let _ = client.stream.read_to_end(&mut answer);
        if answer.starts_with(b"HTTP/1.1 200 ") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not served after the descriptors freed up: {:?}; log: {:?}",
            String::from_utf8_lossy(&answer),
            server.log()
        );
        thread::sleep(ms(100));
    }
}
