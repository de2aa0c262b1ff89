//! Shared helpers for the integration tests: an in-process server on port 0,
//! the raw-socket HTTP/1.x client (tests/raw_client) that reads exactly one
//! response at a time, and polling helpers with generous deadlines (the test machine is shared
//! and noisy: lower bounds on timing are strict, upper bounds are generous).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use keepalive_server::stats::CloseCause;
use keepalive_server::{Config, Server, ServerHandle};

// cli and limits use both common and common_ops, which share this client.
#[allow(clippy::duplicate_mod)]
#[path = "../raw_client/mod.rs"]
mod raw_client;
// Each test uses some of these.
#[allow(unused_imports)]
pub use raw_client::{Client, READ_TIMEOUT, Response, find, is_timeout};

/// Slack added to every upper bound on timing.
pub const SLACK: Duration = Duration::from_secs(2);

/// The body `/` answers to a request without one.
pub const HELLO: &[u8] = b"Hello, World!";

/// A running in-process server (shut down when dropped).
pub struct TestServer {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
}

/// Starts a one-worker server on 127.0.0.1:0 with every default, after
/// `tweak` has had its say on the configuration.
pub fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = Some(NonZeroUsize::new(1).unwrap());
    tweak(&mut config);
    let handle = Server::bind(config.settings())
        .expect("bind")
        .start()
        .expect("start");
    let addr = handle.local_addr();
    TestServer { handle, addr }
}

impl TestServer {
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Connections accepted so far, over all workers.
    pub fn accepted(&self) -> u64 {
        self.handle.stats().map(|s| s.accepted.load(Relaxed)).sum()
    }

    /// Connections closed for `cause`, over all workers.
    pub fn closed_by(&self, cause: CloseCause) -> u64 {
        self.handle.stats().map(|s| s.closed_by(cause)).sum()
    }

    /// Polls until the server has exactly `n` open connections.
    pub fn wait_for_open(&self, n: u64) {
        wait_for_open(&self.handle, n);
    }

    /// Polls until `closed_by(cause) >= n`.
    pub fn wait_for_closed_by(&self, cause: CloseCause, n: u64) {
        let deadline = Instant::now() + SLACK + SLACK;
        while self.closed_by(cause) < n {
            assert!(
                Instant::now() < deadline,
                "closed_by({cause:?}) stayed at {} (wanted >= {n})",
                self.closed_by(cause)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asserts the server still answers `GET /` on a brand-new connection.
    pub fn assert_serves_fresh_connection(&self) {
        let mut client = self.client();
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let response = client.read_response();
        assert_eq!(response.status, 200, "fresh connection after an error");
        assert_eq!(response.body, HELLO);
    }
}

/// This process's resident set (a server started here runs in-process), in KiB.
pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// A POST to `/` with a `body_len`-byte body of `fill` and extra header
/// lines (each ending in CRLF).
pub fn post(body_len: usize, fill: u8, extra: &str) -> Vec<u8> {
    let mut request =
        format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {body_len}\r\n{extra}\r\n")
            .into_bytes();
    request.resize(request.len() + body_len, fill);
    request
}

/// Polls (generously) until `handle.open_connections() == n`.
pub fn wait_for_open(handle: &ServerHandle, n: u64) {
    let deadline = Instant::now() + SLACK + SLACK;
    loop {
        let open = handle.open_connections();
        if open == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "open_connections() stayed at {open}, wanted {n}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Asserts an error response: `status`, `Connection: close`, then the
/// server closes the connection.
pub fn assert_error_then_close(client: &mut Client, status: u16, context: &str) {
    let response = client.read_response();
    assert_eq!(response.status, status, "{context}: {response:?}");
    assert!(
        response.closes(),
        "{context}: error response without Connection: close: {response:?}"
    );
    assert!(
        response.header("keep-alive").is_none(),
        "{context}: error response advertises Keep-Alive: {response:?}"
    );
    client.read_until_closed(SLACK);
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
