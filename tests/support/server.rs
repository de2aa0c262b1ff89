//! A server started in-process on 127.0.0.1:0 (one worker unless the test
//! says otherwise), shut down when dropped; the same with the admin
//! listener beside it; and waiting for what the server itself reports:
//! its open-connection count, closes by cause, and its workers' snapshots
//! (connections by state, timers by kind).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::Ordering::Relaxed;

use keepalive_server::introspect::ConnCounts;
use keepalive_server::stats::CloseCause;
use keepalive_server::{Config, Server, ServerHandle};

use super::client::Client;
use super::{HELLO, SLACK, eventually};

/// A running in-process server (shut down when dropped).
pub struct TestServer {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
}

/// The test servers' configuration: 127.0.0.1:0, one worker, every
/// default, after `tweak` has had its say.
pub fn config(tweak: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = Some(NonZeroUsize::new(1).unwrap());
    tweak(&mut config);
    config
}

/// Sets the keep-alive timeout and buffer as `--keep-alive-timeout` and
/// `--keep-alive-buffer` spell them (`5s`, `0s`): a common `tweak`.
pub fn keep_alive(config: &mut Config, timeout: &str, buffer: &str) {
    config.keep_alive_timeout = keepalive_server::config::parse_duration(timeout).unwrap();
    config.keep_alive_buffer = keepalive_server::config::parse_duration(buffer).unwrap();
}

/// Starts a server with [`config`]`(tweak)`.
pub fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
    let config = config(tweak);
    let handle = Server::bind(config.settings())
        .expect("bind")
        .start()
        .expect("start");
    let addr = handle.local_addr();
    TestServer { handle, addr }
}

/// What the workers report when asked, summed over them.
#[derive(Debug, Default)]
pub struct Totals {
    /// Open connections by what they are doing (`reading` counts the
    /// accepted ones that have sent nothing yet too).
    pub connections: ConnCounts,
    /// Timers by kind (`keep-alive`, `headers`, `request`, `delay`, ...).
    /// A `request` timer is a request's deadline, armed at its first byte:
    /// one per connection whose request the server has begun reading.
    pub timers: BTreeMap<&'static str, usize>,
    /// Ref'd timers: what keeps a draining worker running.
    pub refed_timers: usize,
}

impl Totals {
    /// Timers of `kind` (0 when there are none).
    pub fn timers(&self, kind: &str) -> usize {
        self.timers.get(kind).copied().unwrap_or(0)
    }

    /// Connections in any state.
    pub fn open(&self) -> u64 {
        let c = &self.connections;
        c.reading + c.writing + c.idle + c.closing
    }
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

    /// Requests that arrived after an idle FIN (the lab's late requests),
    /// over all workers.
    pub fn late_requests(&self) -> u64 {
        self.handle
            .observer_stats()
            .map(|s| s.late_requests.get())
            .sum()
    }

    /// Polls until the server has exactly `n` open connections.
    #[track_caller]
    pub fn wait_for_open(&self, n: u64) {
        wait_for_open(&self.handle, n);
    }

    /// Polls until `closed_by(cause) >= n`.
    #[track_caller]
    pub fn wait_for_closed_by(&self, cause: CloseCause, n: u64) {
        eventually(SLACK + SLACK, || match self.closed_by(cause) {
            closed if closed >= n => Ok(()),
            closed => Err(format!(
                "closed_by({cause:?}) stayed at {closed} (wanted >= {n})"
            )),
        });
    }

    /// Every worker's snapshot, summed (each worker builds one in its next
    /// loop turn: what it has read by then is in it).
    pub fn totals(&self) -> Totals {
        let snapshots = self.handle.remote().snapshots(SLACK).expect("snapshots");
        let mut totals = Totals::default();
        for snapshot in snapshots {
            let c = snapshot.connections;
            totals.connections.reading += c.reading;
            totals.connections.writing += c.writing;
            totals.connections.idle += c.idle;
            totals.connections.closing += c.closing;
            totals.refed_timers += snapshot.ref_count;
            for list in &snapshot.lists {
                for held in &list.holds {
                    *totals.timers.entry(held.kind).or_default() += held.count;
                }
            }
        }
        totals
    }

    /// Polls [`TestServer::totals`] until `ok` holds, and returns them;
    /// panics naming `what` (and the last totals seen) after a generous
    /// deadline. E.g. `wait_until("the request read", |t| t.timers("request") == 1)`.
    #[track_caller]
    pub fn wait_until(&self, what: &str, ok: impl Fn(&Totals) -> bool) -> Totals {
        eventually(SLACK + SLACK, || {
            let totals = self.totals();
            if ok(&totals) {
                Ok(totals)
            } else {
                Err(format!("never {what}: the workers report {totals:?}"))
            }
        })
    }

    /// Asserts the server still answers `GET /` on a brand-new connection.
    #[track_caller]
    pub fn assert_serves_fresh_connection(&self) {
        let mut client = self.client();
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let response = client.read_response();
        assert_eq!(response.status, 200, "fresh connection after an error");
        assert_eq!(response.body, HELLO);
    }
}

/// Polls (generously) until `handle.open_connections() == n`.
#[track_caller]
pub fn wait_for_open(handle: &ServerHandle, n: u64) {
    eventually(SLACK + SLACK, || match handle.open_connections() {
        open if open == n => Ok(()),
        open => Err(format!("open_connections() stayed at {open}, wanted {n}")),
    });
}

/// A server started in-process with the admin listener beside it, both
/// on port 0 (the configuration as given: set `workers` for exact counts).
pub struct AdminFixture {
    pub handle: ServerHandle,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
}

/// Starts a server with [`config`]`(tweak)` and its admin listener.
pub fn start_with_admin(tweak: impl FnOnce(&mut Config)) -> AdminFixture {
    AdminFixture::start(config(tweak))
}

impl AdminFixture {
    pub fn start(config: Config) -> AdminFixture {
        let handle = Server::bind(config.settings()).unwrap().start().unwrap();
        let (admin, _thread) =
            keepalive_server::admin::spawn("127.0.0.1:0".parse().unwrap(), handle.remote())
                .unwrap();
        let addr = handle.local_addr();
        AdminFixture {
            handle,
            addr,
            admin,
        }
    }
}
