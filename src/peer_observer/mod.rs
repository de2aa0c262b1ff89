//! The peer observer: what the server learns about the other side of its
//! connections at the idle boundary. It is the serving path's observer
//! ([`PeerObserver`], one per worker): it hears the events of `observe`
//! and keeps what they tell.
//!
//! - [`peers`]: per worker, what each client address did: who closed idle
//!   connections first and at what age, how close reuses came to the
//!   server's deadline, requests that lost the race.
//! - [`report`]: the `/peers` document: estimates, a verdict and advice.
//! - [`stats`]: the observer's counters and histograms behind `/metrics`.
//! - [`histogram`]: the compact per-peer histogram behind the quantiles
//!   (`tally`'s, named here for the peer table).
//! - [`clients`]: for the race guard only, clients told apart by address
//!   and User-Agent (a test suite's all come from 127.0.0.1).
//!
//! The controls a test uses to choose how the server behaves at the idle
//! boundary (`ka=`, `close=`, ...) are the application's (`app::controls`):
//! the observer only watches what follows.
//!
//! Everything here is pure: times are loop-clock microseconds passed in,
//! so the logic is tested without sockets or a clock.

pub mod clients;
pub use crate::tally::log_histogram as histogram;
pub mod peers;
pub mod report;
pub mod stats;

use std::net::IpAddr;
use std::sync::Arc;

pub use stats::ObserverStats;

use crate::config::Settings;
use crate::observe::{AfterFin, Event, Findings, Observer, WorkerObserver};
use crate::timers::Micros;
use clients::{AgentPeers, ClientTables};
use peers::{LazyBoard, Listening, PeerTable, PeersSnapshot};

/// A reuse with less than this left before the server's idle deadline is
/// a near miss.
pub const NEAR_MISS_US: u64 = 100_000;

/// What one worker's peer observer shows in the worker's snapshot (as
/// its [`Findings`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerFindings {
    /// What each client address did at the idle boundary; shown merged,
    /// as `peers` in the view and as `/peers`.
    pub peers: PeersSnapshot,
    /// The same by address and User-Agent, for the race guard (empty
    /// unless the guard runs the server).
    pub clients: Vec<AgentPeers>,
}

impl PeerFindings {
    /// What a worker's snapshot carries from its peer observer (nothing,
    /// from another observer).
    pub fn of(findings: &Findings) -> PeerFindings {
        findings.get::<PeerFindings>().cloned().unwrap_or_default()
    }
}

/// One worker's peer observer: its peer table, and the counters it shares
/// with the admin view.
#[derive(Debug)]
pub struct PeerObserver {
    peers: PeerTable,
    stats: Arc<ObserverStats>,
    /// The same events by address and User-Agent, when asked for.
    clients: Option<ClientTables>,
    /// Where lazy closes are paired with the uses after them.
    lazy: Arc<LazyBoard>,
}

impl PeerObserver {
    /// An observer writing its counters to `stats` (the worker's, which
    /// `/metrics` reads), whose peers' recent figures span `window` µs.
    pub fn new(stats: Arc<ObserverStats>, window: Micros) -> Self {
        PeerObserver {
            peers: PeerTable::new(window),
            stats,
            clients: None,
            lazy: Arc::new(LazyBoard::local()),
        }
    }

    /// This observer, pairing lazy closes on `lazy`, the board every
    /// worker's observer shares (a pool's next connection may land on another worker).
    /// Before [`PeerObserver::telling_agents_apart`].
    pub fn sharing_lazy_board(mut self, lazy: Arc<LazyBoard>) -> Self {
        // The same table, told the board: building a second one would free
        // the first's entries, a block big enough that glibc then serves the
        // worker's slabs from the heap, where their growth leaves holes
        // (+14 B of RSS per idle connection at 10,000).
        self.peers.share_lazy_board(Arc::clone(&lazy));
        self.lazy = lazy;
        self
    }

    /// This observer, also telling clients apart by User-Agent when `on` (see
    /// [`clients`]).
    pub fn telling_agents_apart(mut self, on: bool) -> Self {
        self.clients =
            on.then(|| ClientTables::new(self.peers.window()).sharing(Arc::clone(&self.lazy)));
        self
    }

    /// This observer, judging a request's `Host` against the server's
    /// `listening` port (a proxy names its upstream there); after the
    /// other builders.
    pub fn listening_on(mut self, listening: Listening) -> Self {
        self.peers.set_listening(Some(listening));
        self.clients = self
            .clients
            .map(|clients| clients.listening(Some(listening)));
        self
    }

    /// The recent window is `window` µs long from now on (a reload).
    pub fn set_window(&mut self, window: Micros) {
        self.peers.set_window(window);
        if let Some(clients) = &mut self.clients {
            clients.set_window(window);
        }
    }

    /// Each User-Agent's peers at loop time `now` (none unless asked for
    /// with [`PeerObserver::telling_agents_apart`]).
    pub fn clients_snapshot(&self, now: Micros) -> Vec<AgentPeers> {
        self.clients
            .as_ref()
            .map_or_else(Vec::new, |clients| clients.snapshot(now))
    }

    /// The peer table as the admin view shows it, at loop time `now`.
    pub fn snapshot(&self, now: Micros) -> PeersSnapshot {
        self.peers.snapshot(now)
    }
}

impl WorkerObserver for PeerObserver {
    fn reload(&mut self, settings: &Settings) {
        self.set_window(settings.peers_window_us);
    }

    fn findings(&self, now: Micros) -> Findings {
        Findings::new(PeerFindings {
            peers: self.snapshot(now),
            clients: self.clients_snapshot(now),
        })
    }
}

impl Observer for PeerObserver {
    fn observe(&mut self, peer: IpAddr, now: Micros, event: Event<'_>) {
        let stats = &self.stats;
        match event {
            Event::Reused(reuse) => {
                stats.reuse_gap.record(reuse.gap_us);
                stats.reuse_headroom.record(reuse.headroom_us.max(0) as u64);
                if reuse.headroom_us < NEAR_MISS_US as i64 {
                    stats.near_misses.add(1);
                }
            }
            Event::IdleEnded(end) => stats.idle_close_age(end.closer).record(end.age_us),
            Event::AfterFin(AfterFin::Request { delay_us, .. }) => {
                stats.late_requests.add(1);
                stats.late_request_delay.record(delay_us);
            }
            Event::AfterFin(AfterFin::Closed { delay_us }) => {
                stats.peer_close_delay.record(delay_us);
            }
            Event::Accepted | Event::ClientNamed { .. } | Event::ResponsesDone(_) => {}
        }
        self.peers.record(peer, now, &event);
    }

    fn observe_conn(&mut self, conn: u64, peer: IpAddr, now: Micros, event: Event<'_>) {
        if let Some(clients) = &mut self.clients {
            clients.record(conn, peer, now, &event);
        }
        self.observe(peer, now, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn the_listening_port_reaches_every_table_that_judges_a_host() {
        let listening = Listening::on(8080, false);
        let mut observer = PeerObserver::new(Arc::default(), 60_000_000)
            .telling_agents_apart(true)
            .listening_on(listening);
        let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let named = Event::ClientNamed {
            user_agent: Some(b"curl/8.5.0"),
            forwarded: false,
            again: false,
            minor_version: 1,
            host: Some(b"backend"),
        };
        observer.observe_conn(1, peer, 10, Event::Accepted);
        observer.observe_conn(1, peer, 10, named);
        let by_addr = observer.snapshot(20);
        assert_eq!(by_addr.peers[0].stats.addressing.upstream_named, 1);
        let by_agent = observer.clients_snapshot(20);
        assert_eq!(
            by_agent[0].peers.peers[0].stats.addressing.upstream_named,
            1
        );
    }

    #[test]
    fn a_worker_snapshot_carries_the_peers_through_its_findings() {
        let mut observer = PeerObserver::new(Arc::default(), 60_000_000).telling_agents_apart(true);
        let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
        observer.observe_conn(1, peer, 10, Event::Accepted);
        let findings = observer.findings(20);
        let shown = PeerFindings::of(&findings);
        assert_eq!(shown.peers, observer.snapshot(20));
        assert_eq!(shown.peers.peers.len(), 1, "{shown:?}");
        assert_eq!(shown.clients, observer.clients_snapshot(20));
        assert_eq!(
            PeerFindings::of(&Findings::default()),
            PeerFindings::default()
        );
    }
}
