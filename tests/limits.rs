//! Resource limits: `--max-connections` (evict the oldest idle keep-alive
//! connection, refuse when none is idle) and running out of descriptors at
//! accept() (pause and log once, no busy loop, resume when descriptors free).

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use support::binary::{Running, command_with_fd_limit};
use support::client::Client;
use support::server::{TestServer, start};
use support::{HELLO, SLACK, eventually, poll};

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

/// Waits until the server sees `idle` connections idle and `mid_request`
/// with a request read in part (its deadline armed), and no more open
/// than those and `silent` ones: which one eviction picks depends on it.
fn settle(server: &TestServer, idle: u64, mid_request: usize, silent: u64) {
    let what = format!("{idle} idle, {mid_request} mid-request, {silent} silent");
    server.wait_until(&what, |t| {
        t.connections.idle == idle
            && t.timers("request") == mid_request
            && t.open() == idle + mid_request as u64 + silent
    });
}

#[test]
fn at_the_limit_the_oldest_idle_connection_is_evicted() {
    let server = start(|config| config.max_connections = 4);
    let mut clients: Vec<Client> = (0..4).map(|_| idle_client(&server)).collect();
    settle(&server, 4, 0, 0);

    // A fifth: the first one opened (idle the longest) makes room.
    let mut fifth = server.client();
    assert_ok(&mut fifth);
    clients[0].read_until_closed(SLACK);
    assert_eq!(server.closed_by(CloseCause::Evicted), 1);
    for client in &mut clients[1..] {
        assert_ok(client); // still open; now idle more recently than the fifth
    }
    settle(&server, 4, 0, 0);

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

/// A connection answered once on `path` and now idle on the timer list
/// that answer chose.
fn idle_client_on(server: &TestServer, path: &str) -> Client {
    let mut client = server.client();
    let response = client.request(path);
    assert_eq!(response.status, 200, "{path}: {response:?}");
    client
}

#[test]
fn idle_connections_on_any_timer_list_can_be_evicted_oldest_first() {
    // `ka=` parks a connection on a list of its own duration; before, only
    // the default keep-alive list was searched and newcomers were refused.
    let server = start(|config| config.max_connections = 4);
    let mut clients = vec![
        idle_client_on(&server, "/?ka=10m"),
        idle_client_on(&server, "/?ka=30s"),
        idle_client_on(&server, "/"),
        idle_client_on(&server, "/?ka=10m"),
    ];
    server.wait_for_open(4);

    // Each newcomer makes room by evicting the connection idle the longest,
    // whichever list it is on: first the 10-minute one, then the 30-second.
    for (newcomer, evicted) in [(0usize, 0usize), (1, 1)] {
        let mut fresh = server.client();
        assert_ok(&mut fresh);
        clients[evicted].read_until_closed(SLACK);
        assert_eq!(
            server.closed_by(CloseCause::Evicted),
            newcomer as u64 + 1,
            "newcomer {newcomer}"
        );
        clients.push(fresh);
    }
    assert_eq!(refused(&server), 0);
    for client in &mut clients[2..] {
        assert_ok(client); // the younger idle ones were left alone
    }
}

#[test]
fn idle_connections_enrolled_before_a_reload_can_be_evicted() {
    // A reload that changes the keep-alive timeout leaves connections that
    // went idle before it on the old duration's list.
    let server = start(|config| config.max_connections = 3);
    let mut old: Vec<Client> = (0..3).map(|_| idle_client(&server)).collect();
    server.wait_for_open(3);
    let mut config = keepalive_server::Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.max_connections = 3;
    config.keep_alive_timeout = Duration::from_secs(20);
    let remote = server.handle.remote();
    remote.offer_settings(&std::sync::Arc::new(config.settings()));
    eventually(SLACK, || match remote.workers_yet_to_take_settings() {
        0 => Ok(()),
        n => Err(format!("{n} workers never took the settings")),
    });

    let mut fresh = server.client();
    assert_ok(&mut fresh);
    old[0].read_until_closed(SLACK);
    assert_eq!(server.closed_by(CloseCause::Evicted), 1);
    assert_eq!(refused(&server), 0);
    for client in &mut old[1..] {
        assert_ok(client);
    }
}

#[test]
fn with_none_idle_the_oldest_silent_connection_is_evicted() {
    // Accepted connections that have sent nothing hold no request either;
    // like nginx, the server reuses them rather than refuse newcomers.
    let server = start(|config| config.max_connections = 3);
    let mut silent: Vec<Client> = (0..3).map(|_| server.client()).collect();
    settle(&server, 0, 0, 3);

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
    settle(&server, 0, 3, 0);

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
    settle(&server, 2, 1, 0);

    // D: A is the oldest idle connection (B, older than C, is not idle).
    let _d = mid_request_client(&server);
    a.read_until_closed(SLACK);
    settle(&server, 1, 2, 0);
    // E: C is the only idle connection left.
    let _e = mid_request_client(&server);
    c.read_until_closed(SLACK);
    settle(&server, 0, 3, 0);
    // F: B, D and E are all mid-request.
    let mut f = server.client();
    f.read_until_closed(SLACK);

    assert_eq!(server.closed_by(CloseCause::Evicted), 2);
    assert_eq!(refused(&server), 1);
    b.send(b"\r\n");
    assert_eq!(b.read_response().status, 200);
}

#[test]
fn out_of_descriptors_at_accept_pauses_without_spinning_and_logs_once() {
    const CONNECTIONS: usize = 100;
    let server = Running::start(command_with_fd_limit(
        64,
        &["--listen", "127.0.0.1:0", "--workers", "1"],
    ));
    let addr = server.addr;
    // More connections than descriptors: the kernel completes them all (the
    // backlog is long); the server runs out while accepting them.
    let clients: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let warnings = |server: &Running| -> Vec<String> {
        server
            .log()
            .into_iter()
            .filter(|line| line.contains("WARN") && line.contains("accept"))
            .collect()
    };
    let warned = poll(SLACK, || match warnings(&server).is_empty() {
        true => Err("none".to_owned()),
        false => Ok(()),
    });
    assert!(warned.is_ok(), "no accept warning; log: {:?}", server.log());

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
    let served = poll(SLACK + SLACK, || {
        let mut client = Client::connect(addr);
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let mut answer = Vec::new();
        let _ = client.stream.read_to_end(&mut answer);
        match answer.starts_with(b"HTTP/1.1 200 ") {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&answer).into_owned()),
        }
    });
    if let Err(answer) = served {
        panic!(
            "not served after the descriptors freed up: {answer:?}; log: {:?}",
            server.log()
        );
    }
}
