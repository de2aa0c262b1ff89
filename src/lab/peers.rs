//! What each client address does at the idle boundary, per worker: a
//! table of the [`MAX_PEERS`] most recently seen addresses, each with its
//! [`PeerStats`]; a peer pushed out by a newer one is folded into
//! `other`, so the table's memory is fixed whatever the number of peers.
//!
//! A proxy is one address, which is the point: its pool is one peer. The
//! table is written only by its worker, from the loop (no locks); the admin
//! view asks for a copy ([`PeerTable::snapshot`]) and merges the workers'
//! copies ([`PeersSnapshot::merge`]). Lookups go through a small
//! open-addressing index of one byte per slot, so recording an event for
//! a known peer costs a hash, a compare and a few additions.

use std::net::IpAddr;

use super::NEAR_MISS_US;
use super::histogram::LogHistogram;
use crate::observe::Closer;
use crate::timers::Micros;

/// Addresses a worker keeps apart; the rest are summed as "other".
pub const MAX_PEERS: usize = 64;
/// Client idle closes kept per peer for estimating its idle timeout.
pub const AGE_SAMPLES: usize = 32;
/// Index slots: twice the peers, so probes stay short.
const INDEX_SLOTS: usize = 2 * MAX_PEERS;
const EMPTY: u8 = u8::MAX;

/// A request on a connection that had answered before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse {
    /// Since the previous response was flushed.
    pub gap_us: u64,
    /// Left before the server's idle deadline when the request arrived
    /// (negative: it arrived after the deadline, before the timer ran).
    pub headroom_us: i64,
    /// The gap was longer than the `Keep-Alive: timeout` the connection
    /// advertised: the client trusted nothing it was told.
    pub past_advertised: bool,
}

/// Something a peer did at the idle boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerEvent {
    /// A connection was accepted.
    Connected,
    /// Responses were sent.
    Responses(u32),
    /// A request reused a connection idle since its last response.
    Reuse(Reuse),
    /// A connection idle between requests (after at least one response)
    /// ended, this long after its last response was flushed.
    IdleClosed { closer: Closer, age_us: u64 },
    /// A request arrived after the server's idle FIN, this long after it.
    LateRequest { delay_us: u64 },
    /// The peer closed this long after the server's idle FIN.
    ClosedAfterFin { delay_us: u64 },
}

/// One peer's record, or the sum of several.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerStats {
    pub connections: u64,
    pub requests: u64,
    pub client_idle_closes: u64,
    pub server_idle_closes: u64,
    pub near_misses: u64,
    pub late_requests: u64,
    pub late_request_delay_max_us: u64,
    pub reuses_past_advertised: u64,
    pub reuse_gaps: LogHistogram,
    pub peer_close_delays: LogHistogram,
    /// The latest client idle-close ages, in ms.
    pub client_idle_ages: AgeSamples,
    /// The youngest idle connection the server closed under this peer, in
    /// µs: the real idle timeout it met (a `ka=` control may shorten it).
    pub server_idle_age_min_us: Option<u64>,
}

impl PeerStats {
    fn record(&mut self, event: PeerEvent) {
        match event {
            PeerEvent::Connected => self.connections += 1,
            PeerEvent::Responses(n) => self.requests += u64::from(n),
            PeerEvent::Reuse(reuse) => {
                self.reuse_gaps.record(reuse.gap_us);
                self.near_misses += u64::from(reuse.headroom_us < NEAR_MISS_US as i64);
                self.reuses_past_advertised += u64::from(reuse.past_advertised);
            }
            PeerEvent::IdleClosed {
                closer: Closer::Client,
                age_us,
            } => {
                self.client_idle_closes += 1;
                self.client_idle_ages.push(age_us);
            }
            PeerEvent::IdleClosed {
                closer: Closer::Server,
                age_us,
            } => {
                self.server_idle_closes += 1;
                self.server_idle_age_min_us = Some(
                    self.server_idle_age_min_us
                        .map_or(age_us, |min| min.min(age_us)),
                );
            }
            PeerEvent::LateRequest { delay_us } => {
                self.late_requests += 1;
                self.late_request_delay_max_us = self.late_request_delay_max_us.max(delay_us);
            }
            PeerEvent::ClosedAfterFin { delay_us } => self.peer_close_delays.record(delay_us),
        }
    }

    /// Adds another record (the same peer on another worker, or a peer
    /// folded into "other").
    pub fn merge(&mut self, other: &PeerStats) {
        self.connections += other.connections;
        self.requests += other.requests;
        self.client_idle_closes += other.client_idle_closes;
        self.server_idle_closes += other.server_idle_closes;
        self.near_misses += other.near_misses;
        self.late_requests += other.late_requests;
        self.late_request_delay_max_us = self
            .late_request_delay_max_us
            .max(other.late_request_delay_max_us);
        self.reuses_past_advertised += other.reuses_past_advertised;
        self.server_idle_age_min_us =
            match (self.server_idle_age_min_us, other.server_idle_age_min_us) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        self.reuse_gaps.merge(&other.reuse_gaps);
        self.peer_close_delays.merge(&other.peer_close_delays);
        for &ms in other.client_idle_ages.as_slice() {
            self.client_idle_ages.push_ms(ms);
        }
    }
}

/// The latest [`AGE_SAMPLES`] client idle-close ages, in whole ms; the
/// oldest is overwritten first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgeSamples {
    ms: [u32; AGE_SAMPLES],
    len: u8,
    next: u8,
}

impl AgeSamples {
    fn push(&mut self, age_us: u64) {
        self.push_ms(u32::try_from(age_us / 1000).unwrap_or(u32::MAX));
    }

    fn push_ms(&mut self, ms: u32) {
        self.ms[usize::from(self.next)] = ms;
        self.next = ((usize::from(self.next) + 1) % AGE_SAMPLES) as u8;
        self.len = (usize::from(self.len) + 1).min(AGE_SAMPLES) as u8;
    }

    /// The samples, in no particular order.
    pub fn as_slice(&self) -> &[u32] {
        &self.ms[..usize::from(self.len)]
    }
}

/// A peer in the table.
#[derive(Debug, Clone)]
struct Entry {
    addr: IpAddr,
    last_seen: Micros,
    stats: PeerStats,
}

/// One worker's peers.
#[derive(Debug)]
pub struct PeerTable {
    entries: Vec<Entry>,
    /// Open addressing by address hash: an index into `entries`, or EMPTY.
    index: [u8; INDEX_SLOTS],
    other: PeerStats,
}

impl Default for PeerTable {
    fn default() -> Self {
        PeerTable {
            entries: Vec::with_capacity(MAX_PEERS),
            index: [EMPTY; INDEX_SLOTS],
            other: PeerStats::default(),
        }
    }
}

impl PeerTable {
    /// Records `event` for the peer at `addr`, seen at loop time `now`.
    pub fn record(&mut self, addr: IpAddr, now: Micros, event: PeerEvent) {
        let entry = match self.find(addr) {
            Some(i) => &mut self.entries[i],
            None => self.admit(addr),
        };
        entry.last_seen = entry.last_seen.max(now);
        entry.stats.record(event);
    }

    /// The table as the admin view shows it: each peer with how long ago
    /// it was last seen (loop clocks differ between workers; ages do not).
    pub fn snapshot(&self, now: Micros) -> PeersSnapshot {
        PeersSnapshot {
            peers: self
                .entries
                .iter()
                .map(|entry| PeerSnapshot {
                    addr: entry.addr,
                    seen_ago_us: now.saturating_sub(entry.last_seen),
                    stats: entry.stats.clone(),
                })
                .collect(),
            other: self.other.clone(),
        }
    }

    /// The most memory the table ever holds, in bytes: its full entries
    /// and its index, whatever the number of peers.
    pub fn max_bytes() -> usize {
        std::mem::size_of::<PeerTable>() + MAX_PEERS * std::mem::size_of::<Entry>()
    }

    fn find(&self, addr: IpAddr) -> Option<usize> {
        let mut slot = slot_of(addr);
        loop {
            match self.index[slot] {
                EMPTY => return None,
                i if self.entries[usize::from(i)].addr == addr => return Some(usize::from(i)),
                _ => slot = (slot + 1) % INDEX_SLOTS,
            }
        }
    }

    /// A new entry for `addr`, making room by folding the least recently
    /// seen peer into `other` when the table is full.
    fn admit(&mut self, addr: IpAddr) -> &mut Entry {
        if self.entries.len() == MAX_PEERS {
            let oldest = (0..self.entries.len())
                .min_by_key(|&i| self.entries[i].last_seen)
                .unwrap_or(0);
            let gone = self.entries.swap_remove(oldest);
            self.other.merge(&gone.stats);
            self.rebuild_index();
        }
        self.entries.push(Entry {
            addr,
            last_seen: 0,
            stats: PeerStats::default(),
        });
        let i = self.entries.len() - 1;
        self.insert_index(addr, i as u8);
        &mut self.entries[i]
    }

    fn insert_index(&mut self, addr: IpAddr, i: u8) {
        let mut slot = slot_of(addr);
        while self.index[slot] != EMPTY {
            slot = (slot + 1) % INDEX_SLOTS;
        }
        self.index[slot] = i;
    }

    /// After a removal: a probe chain may run through the freed slot, so
    /// the index is rebuilt (128 bytes, only when a peer is pushed out).
    fn rebuild_index(&mut self) {
        self.index = [EMPTY; INDEX_SLOTS];
        for i in 0..self.entries.len() {
            self.insert_index(self.entries[i].addr, i as u8);
        }
    }
}

/// A slot for `addr`: a multiplicative hash of its bits.
fn slot_of(addr: IpAddr) -> usize {
    let bits = match addr {
        IpAddr::V4(v4) => u64::from(u32::from(v4)),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            (bits as u64) ^ ((bits >> 64) as u64)
        }
    };
    (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57) as usize % INDEX_SLOTS
}

/// One peer as a worker (or the merge of all workers) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSnapshot {
    pub addr: IpAddr,
    /// How long ago anything of it was last seen.
    pub seen_ago_us: u64,
    pub stats: PeerStats,
}

/// A worker's table, or the merge of every worker's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeersSnapshot {
    pub peers: Vec<PeerSnapshot>,
    pub other: PeerStats,
}

impl PeersSnapshot {
    /// The workers' tables as one: an address seen by several workers is
    /// one peer; the [`MAX_PEERS`] most recently seen are kept, most recent
    /// first, and the rest are folded into `other`.
    pub fn merge(snapshots: impl IntoIterator<Item = PeersSnapshot>) -> PeersSnapshot {
        let mut merged = PeersSnapshot::default();
        for snapshot in snapshots {
            merged.other.merge(&snapshot.other);
            for peer in snapshot.peers {
                match merged.peers.iter_mut().find(|p| p.addr == peer.addr) {
                    Some(known) => {
                        known.seen_ago_us = known.seen_ago_us.min(peer.seen_ago_us);
                        known.stats.merge(&peer.stats);
                    }
                    None => merged.peers.push(peer),
                }
            }
        }
        merged
            .peers
            .sort_by_key(|peer| (peer.seen_ago_us, peer.addr));
        for folded in merged.peers.drain(MAX_PEERS.min(merged.peers.len())..) {
            merged.other.merge(&folded.stats);
        }
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x7f00_0000 + n))
    }

    fn reuse(gap_ms: u64, headroom_ms: i64) -> PeerEvent {
        PeerEvent::Reuse(Reuse {
            gap_us: gap_ms * 1000,
            headroom_us: headroom_ms * 1000,
            past_advertised: false,
        })
    }

    #[test]
    fn events_are_counted_per_address() {
        let mut table = PeerTable::default();
        table.record(ip(2), 10, PeerEvent::Connected);
        table.record(ip(2), 11, PeerEvent::Responses(3));
        table.record(ip(2), 12, reuse(900, 1100));
        table.record(ip(2), 13, reuse(1950, 50));
        let client_close = PeerEvent::IdleClosed {
            closer: Closer::Client,
            age_us: 1_200_000,
        };
        table.record(ip(2), 14, client_close);
        table.record(ip(3), 15, PeerEvent::LateRequest { delay_us: 7000 });
        table.record(ip(3), 16, PeerEvent::LateRequest { delay_us: 3000 });
        table.record(ip(3), 17, PeerEvent::ClosedAfterFin { delay_us: 9000 });
        let snapshot = table.snapshot(20);
        let [two, three] = &snapshot.peers[..] else {
            panic!("{snapshot:?}");
        };
        assert_eq!((two.addr, two.seen_ago_us), (ip(2), 6));
        assert_eq!((two.stats.connections, two.stats.requests), (1, 3));
        assert_eq!(two.stats.reuse_gaps.count(), 2);
        assert_eq!(two.stats.near_misses, 1);
        assert_eq!(two.stats.client_idle_closes, 1);
        assert_eq!(two.stats.client_idle_ages.as_slice(), &[1200]);
        assert_eq!(three.stats.late_requests, 2);
        assert_eq!(three.stats.late_request_delay_max_us, 7000);
        assert_eq!(three.stats.peer_close_delays.count(), 1);
        assert_eq!(snapshot.other, PeerStats::default());
    }

    #[test]
    fn the_table_keeps_the_most_recent_peers_and_folds_the_rest() {
        let mut table = PeerTable::default();
        for n in 0..10_000u32 {
            table.record(ip(n), u64::from(n), PeerEvent::Connected);
            // An old peer that keeps coming back stays.
            table.record(ip(1_000_000), u64::from(n), PeerEvent::Responses(1));
        }
        let snapshot = table.snapshot(10_000);
        assert_eq!(snapshot.peers.len(), MAX_PEERS);
        assert!(snapshot.peers.iter().any(|p| p.addr == ip(1_000_000)));
        assert!(snapshot.peers.iter().any(|p| p.addr == ip(9_999)));
        assert!(!snapshot.peers.iter().any(|p| p.addr == ip(0)));
        let kept: u64 = snapshot.peers.iter().map(|p| p.stats.connections).sum();
        assert_eq!(kept + snapshot.other.connections, 10_000, "nothing lost");
        // Every kept peer is still found after the index rebuilds.
        for peer in &snapshot.peers {
            assert!(table.find(peer.addr).is_some(), "{}", peer.addr);
        }
    }

    #[test]
    fn a_merge_joins_an_address_across_workers_and_keeps_the_most_recent() {
        let mut first = PeerTable::default();
        let mut second = PeerTable::default();
        first.record(ip(2), 100, PeerEvent::Connected);
        second.record(ip(2), 5, PeerEvent::Connected);
        second.record(ip(3), 9, PeerEvent::Connected);
        for n in 0..MAX_PEERS as u32 {
            second.record(ip(100 + n), 1, PeerEvent::Connected);
        }
        let merged = PeersSnapshot::merge([first.snapshot(100), second.snapshot(10)]);
        assert_eq!(merged.peers.len(), MAX_PEERS);
        assert_eq!(merged.peers[0].addr, ip(2), "seen 0 µs ago on the first");
        assert_eq!(merged.peers[0].stats.connections, 2);
        assert_eq!(merged.peers[1].addr, ip(3));
        let total: u64 = merged.peers.iter().map(|p| p.stats.connections).sum();
        assert_eq!(total + merged.other.connections, 2 + 1 + MAX_PEERS as u64);
    }

    #[test]
    fn the_table_stays_under_200_kib_per_worker() {
        let bytes = PeerTable::max_bytes();
        eprintln!("peer table at most {bytes} bytes per worker");
        assert!(bytes < 200 * 1024, "{bytes} bytes");
        let mut table = PeerTable::default();
        for n in 0..10_000 {
            table.record(ip(n), u64::from(n), PeerEvent::Connected);
        }
        assert_eq!(table.entries.capacity(), MAX_PEERS, "never grown");
    }

    #[test]
    fn ipv6_peers_are_told_apart() {
        let mut table = PeerTable::default();
        let a: IpAddr = "::1".parse().unwrap();
        let b: IpAddr = "::2".parse().unwrap();
        table.record(a, 1, PeerEvent::Connected);
        table.record(b, 1, PeerEvent::Connected);
        table.record(b, 1, PeerEvent::Connected);
        let snapshot = table.snapshot(1);
        let count = |addr| {
            let peer = snapshot.peers.iter().find(|p| p.addr == addr).unwrap();
            peer.stats.connections
        };
        assert_eq!((count(a), count(b)), (1, 2));
    }
}
