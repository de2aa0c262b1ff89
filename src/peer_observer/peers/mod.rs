//! What each client address does at the idle boundary, per worker: a
//! table of the [`MAX_PEERS`] most recently seen addresses, each with its
//! totals since the server started ([`PeerStats`]) and its figures over
//! the recent window ([`Recent`], kept in [`BUCKETS`] time buckets); a
//! peer pushed out by a newer one is folded into `other`, so the table's
//! memory is fixed whatever the number of peers.
//!
//! A proxy is one address, which is the point: its pool is one peer. The
//! table is written only by its worker, from the loop (no locks; lazy
//! closes alone are paired on a board the workers share, [`LazyBoard`],
//! of atomics, as a pool's next connection may land on another); the admin
//! view asks for a copy ([`PeerTable::snapshot`]), in which the window is
//! summed as of that moment, and merges the workers' copies
//! ([`PeersSnapshot::merge`]). Lookups go through a small open-addressing
//! index of one byte per slot, so recording an event for a known peer
//! costs a hash, a compare and a few additions.

use std::net::IpAddr;
use std::sync::Arc;

mod addressing;
mod lazy;
mod recent;
mod samples;

pub use addressing::{Addressing, HostShape, Listening};
pub use lazy::{LazyBoard, Paired};
pub use recent::{Recent, Terms};
pub use samples::{AgeSamples, Agents};

use super::NEAR_MISS_US;
use super::histogram::LogHistogram;
use crate::observe::{AfterFin, Closer, Event, IdleEnd, Reuse};
use crate::timers::Micros;
use recent::{Count, Stretch, Window};

/// Where in the window an event falls (its stretch), and where the server
/// listens.
#[derive(Debug, Clone, Copy)]
struct Moment {
    stretch: Stretch,
    listening: Option<Listening>,
}

/// Addresses a worker keeps apart; the rest are summed as "other".
pub const MAX_PEERS: usize = 64;
/// Client idle closes kept per peer for estimating its idle timeout.
pub const AGE_SAMPLES: usize = 32;
/// The recent window is kept in this many buckets, each a tenth of it.
pub const BUCKETS: usize = 10;
/// A client idle close within this of the client's next connection or
/// request was made lazily, when the pool was next used (httpx does so):
/// its age is an upper bound on the client's idle timeout.
pub const LAZY_CLOSE_US: Micros = 5_000;
/// A late request this close after the FIN, where no round trip was
/// measured, is too close to tell whether the client had the FIN.
pub const TOO_CLOSE_US: Micros = 1_000;
/// User-Agents remembered per peer.
pub const AGENTS: usize = 2;
/// The most of a User-Agent kept, in bytes.
pub const AGENT_BYTES: usize = 64;
/// Index slots: twice the peers, so probes stay short.
const INDEX_SLOTS: usize = 2 * MAX_PEERS;
const EMPTY: u8 = u8::MAX;

/// Where a late request fell against the server's idle FIN, as the wire
/// orders them. The delay runs from the FIN's send time (read just before
/// the call that sends it) to the request's kernel receive stamp; the FIN
/// then needs a one-way trip to reach the client, and the client's
/// request one more to come back, so a request that came within a round
/// trip after the FIN may have been sent before the FIN reached the
/// client or after: the server cannot tell which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// In before the FIN left (delay 0): it crossed the FIN in flight,
    /// and the client could not have known.
    Crossed,
    /// Within a round trip after the FIN (the kernel's smoothed round
    /// trip, or [`TOO_CLOSE_US`] where none was measured): too close to
    /// tell whether the client could have seen the FIN.
    TooClose,
    /// Later than that: sent when the client could have seen the FIN.
    AfterFin,
}

impl Crossing {
    /// Where a request `delay_us` after the FIN fell, on a connection with
    /// the smoothed round trip `round_trip_us`.
    pub fn of(delay_us: Micros, round_trip_us: Option<u32>) -> Crossing {
        let close = round_trip_us.map_or(TOO_CLOSE_US, Micros::from);
        match delay_us {
            0 => Crossing::Crossed,
            delay if delay < close => Crossing::TooClose,
            _ => Crossing::AfterFin,
        }
    }
}

/// One peer's totals since the server started, or the sum of several.
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
    /// The User-Agents its connections named, most recent first.
    pub agents: Agents,
    /// Some of its requests came through a proxy.
    pub forwarded: bool,
    /// How its connections' first requests were addressed: the signs of
    /// a proxy that does not say so.
    pub addressing: Addressing,
}

impl PeerStats {
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
        self.reuse_gaps.merge(&other.reuse_gaps);
        self.peer_close_delays.merge(&other.peer_close_delays);
        for &ms in other.client_idle_ages.as_slice() {
            self.client_idle_ages.push_ms(ms);
        }
        self.agents.merge(&other.agents);
        self.forwarded |= other.forwarded;
        self.addressing.merge(&other.addressing);
    }
}

/// A peer in the table.
#[derive(Debug, Clone)]
struct Entry {
    addr: IpAddr,
    last_seen: Micros,
    stats: PeerStats,
    window: Window,
}

/// One worker's peers.
#[derive(Debug)]
pub struct PeerTable {
    entries: Vec<Entry>,
    /// Open addressing by address hash: an index into `entries`, or EMPTY.
    index: [u8; INDEX_SLOTS],
    other: PeerStats,
    other_window: Window,
    /// The width of a window bucket: a tenth of the window.
    width: Micros,
    /// The stretch the latest event fell in.
    stretch: Stretch,
    /// The entry found last, and for which address: a request's events
    /// come in a row for one peer, and all of a proxy's for one.
    last_found: Option<(IpAddr, u8)>,
    /// Where client closes meet the uses after them, across workers.
    lazy: Arc<LazyBoard>,
    /// Mixed into this table's keys on the board (the guard's tables, one
    /// per User-Agent, share it).
    lazy_salt: u64,
    /// Where the server listens, against which a request's `Host` is
    /// judged (`None`: not known, and not judged).
    listening: Option<Listening>,
}

impl PeerTable {
    /// An empty table whose recent figures span `window` µs, telling lazy
    /// closes on its own (one worker).
    pub fn new(window: Micros) -> Self {
        Self::sharing(window, Arc::new(LazyBoard::local()), 0)
    }

    /// An empty table whose recent figures span `window` µs, telling lazy
    /// closes on `lazy` (every worker's), its keys mixed with `salt`.
    pub fn sharing(window: Micros, lazy: Arc<LazyBoard>, salt: u64) -> Self {
        PeerTable {
            lazy,
            lazy_salt: salt,
            entries: Vec::with_capacity(MAX_PEERS),
            index: [EMPTY; INDEX_SLOTS],
            other: PeerStats::default(),
            other_window: Window::default(),
            width: (window / BUCKETS as u64).max(1),
            stretch: Stretch::of(0, 1),
            last_found: None,
            listening: None,
        }
    }

    /// This table, judging its peers' `Host` fields against `listening`.
    pub fn listening(mut self, listening: Option<Listening>) -> Self {
        self.set_listening(listening);
        self
    }

    /// Judges its peers' `Host` fields against `listening` from now on.
    pub fn set_listening(&mut self, listening: Option<Listening>) {
        self.listening = listening;
    }

    /// This table tells lazy closes on `lazy` (every worker's) from now
    /// on, under its own keys.
    pub fn share_lazy_board(&mut self, lazy: Arc<LazyBoard>) {
        self.lazy = lazy;
    }

    /// How long the recent window is, µs.
    pub fn window(&self) -> Micros {
        self.width * BUCKETS as u64
    }

    /// Makes the recent window `window` µs long from now on; the figures
    /// of the old one, cut to other widths, are forgotten (the totals
    /// stay).
    pub fn set_window(&mut self, window: Micros) {
        let width = (window / BUCKETS as u64).max(1);
        if width != self.width {
            self.width = width;
            self.stretch = Stretch::of(0, width);
            for entry in &mut self.entries {
                entry.window = Window::default();
            }
            self.other_window = Window::default();
        }
    }

    /// Records `event` for the peer at `addr`, seen at loop time `now`.
    pub fn record(&mut self, addr: IpAddr, now: Micros, event: &Event<'_>) {
        let width = self.width;
        if !self.stretch.holds(now, width) {
            self.stretch = Stretch::of(now, width);
        }
        let stretch = self.stretch;
        let i = match self.last_found {
            Some((last, i)) if last == addr => usize::from(i),
            _ => self.find(addr).unwrap_or_else(|| self.admit(addr)),
        };
        self.last_found = Some((addr, i as u8));
        let lazy = Lazy {
            board: &self.lazy,
            key: addr_bits(addr) ^ self.lazy_salt,
        };
        let at = Moment {
            stretch,
            listening: self.listening,
        };
        let entry = &mut self.entries[i];
        entry.last_seen = entry.last_seen.max(now);
        entry.record(now, at, lazy, event);
    }

    /// The table as the admin view shows it: each peer with how long ago
    /// it was last seen (loop clocks differ between workers; ages do not)
    /// and its window summed as of `now`.
    pub fn snapshot(&self, now: Micros) -> PeersSnapshot {
        PeersSnapshot {
            window_us: self.window(),
            peers: self
                .entries
                .iter()
                .map(|entry| PeerSnapshot {
                    addr: entry.addr,
                    seen_ago_us: now.saturating_sub(entry.last_seen),
                    stats: entry.stats.clone(),
                    recent: entry.window.sum(now, self.width),
                })
                .collect(),
            other: self.other.clone(),
            other_recent: self.other_window.sum(now, self.width),
        }
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
    /// seen peer into `other` when the table is full: its index.
    fn admit(&mut self, addr: IpAddr) -> usize {
        if self.entries.len() == MAX_PEERS {
            let oldest = (0..self.entries.len())
                .min_by_key(|&i| self.entries[i].last_seen)
                .unwrap_or(0);
            let gone = self.entries.swap_remove(oldest);
            self.other.merge(&gone.stats);
            gone.window.fold_into(&mut self.other_window, self.width);
            self.rebuild_index();
        }
        self.entries.push(Entry {
            addr,
            last_seen: 0,
            stats: PeerStats::default(),
            window: Window::default(),
        });
        let i = self.entries.len() - 1;
        self.insert_index(addr, i as u8);
        i
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

/// A table's place on the lazy board for one peer.
#[derive(Clone, Copy)]
struct Lazy<'a> {
    board: &'a LazyBoard,
    key: u64,
}

impl Entry {
    fn record(&mut self, now: Micros, at: Moment, lazy: Lazy<'_>, event: &Event<'_>) {
        let stats = &mut self.stats;
        match *event {
            Event::Accepted => {
                stats.connections += 1;
                let paired = lazy.board.accepted(lazy.key, now);
                self.lazy_closes(paired, at);
            }
            Event::ClientNamed {
                user_agent,
                forwarded,
                again,
                minor_version,
                host,
            } => {
                stats.agents.note(user_agent, again);
                stats.forwarded |= forwarded;
                if !again {
                    let named = user_agent.is_some();
                    (stats.addressing).note(minor_version, named, host, at.listening);
                }
            }
            Event::ResponsesDone(n) => stats.requests += u64::from(n),
            Event::Reused(reuse) => {
                self.reused(reuse, at);
                let paired = lazy.board.reused(lazy.key, now);
                self.lazy_closes(paired, at);
            }
            Event::IdleEnded(end) => self.idle_ended(end, now, at, lazy),
            Event::AfterFin(AfterFin::Request {
                delay_us,
                idle_timeout_ms,
                round_trip_us,
            }) => {
                stats.late_requests += 1;
                stats.late_request_delay_max_us = stats.late_request_delay_max_us.max(delay_us);
                let bucket = self.window.at(at.stretch);
                bucket.add(match Crossing::of(delay_us, round_trip_us) {
                    Crossing::Crossed => Count::LateCrossingFin,
                    Crossing::TooClose => Count::LateTooClose,
                    Crossing::AfterFin => Count::LateAfterFin,
                });
                bucket.note_failure(idle_timeout_ms + delay_us / 1000);
                bucket.note_terms(idle_timeout_ms, None, true);
                bucket.note_round_trip(round_trip_us);
            }
            Event::AfterFin(AfterFin::Closed { delay_us }) => {
                stats.peer_close_delays.record(delay_us);
            }
        }
    }

    fn reused(&mut self, reuse: Reuse, at: Moment) {
        if reuse.past_deadline {
            return self.reused_past_deadline(reuse, at);
        }
        let stats = &mut self.stats;
        let near = reuse.headroom_us < NEAR_MISS_US as i64;
        let past = past_advertised(&reuse);
        stats.reuse_gaps.record(reuse.gap_us);
        stats.near_misses += u64::from(near);
        stats.reuses_past_advertised += u64::from(past);
        let bucket = self.window.at(at.stretch);
        bucket.add(Count::Reuses);
        if near {
            bucket.add(Count::NearMisses);
        }
        if past {
            bucket.add(Count::PastAdvertised);
        }
        bucket.note_served_gap(reuse.gap_us / 1000);
        bucket.note_terms(reuse.idle_timeout_ms, reuse.advertised_secs, near || past);
    }

    /// A reuse after the real deadline, served under the shadow deadline
    /// (the race guard's): production would have lost it, after this long
    /// idle. Neither a near miss nor a served gap: a failure.
    fn reused_past_deadline(&mut self, reuse: Reuse, at: Moment) {
        self.stats.reuse_gaps.record(reuse.gap_us);
        let bucket = self.window.at(at.stretch);
        bucket.add(Count::Reuses);
        bucket.add(Count::PastDeadline);
        bucket.note_failure(reuse.gap_us / 1000);
        bucket.note_terms(reuse.idle_timeout_ms, reuse.advertised_secs, true);
    }

    fn idle_ended(&mut self, end: IdleEnd, now: Micros, at: Moment, lazy: Lazy<'_>) {
        let bucket = self.window.at(at.stretch);
        match end.closer {
            Closer::Client => {
                self.stats.client_idle_closes += 1;
                self.stats.client_idle_ages.push(end.age_us);
                bucket.add(Count::ClientIdleCloses);
                bucket.note_round_trip(end.round_trip_us);
                let age_ms = end.age_us / 1000;
                if lazy.board.client_closed(lazy.key, now, age_ms) {
                    bucket.add(Count::LazyClientCloses);
                    bucket.note_lazy_close(age_ms);
                }
            }
            Closer::Server => {
                self.stats.server_idle_closes += 1;
                bucket.add(Count::ServerIdleCloses);
                if end.reset {
                    bucket.add(Count::ServerResets);
                }
                bucket.note_terms(end.idle_timeout_ms, None, false);
                bucket.note_round_trip(end.round_trip_us);
            }
        }
    }

    /// The peer opened or reused a connection, which showed `paired`
    /// client idle closes just before it (on any worker) lazy.
    fn lazy_closes(&mut self, paired: Paired, at: Moment) {
        if paired.count > 0 {
            let bucket = self.window.at(at.stretch);
            bucket.add_many(Count::LazyClientCloses, paired.count);
            if let Some(age_ms) = paired.youngest_ms {
                bucket.note_lazy_close(age_ms);
            }
        }
    }
}

/// Whether a reuse came after the advertised `Keep-Alive: timeout`, as
/// the wire would say: its gap, from when the previous response left to
/// when the request arrived, is longer. Near the end of the promise both
/// ends are taken close to the wire (see `Conn::account`): the arrival is
/// the kernel's receive stamp, not the loop's later reading, and a
/// response that follows such a request has its end read after its write
/// (the turn's reading, taken before the write, would start the gap early
/// and call a reuse at 1999.97 ms on the wire past the promise; the idle
/// timer's start, taken at the next turn, would start it late).
fn past_advertised(reuse: &Reuse) -> bool {
    reuse
        .advertised_secs
        .is_some_and(|secs| reuse.gap_us > secs.saturating_mul(1_000_000))
}

/// A slot for `addr`: a multiplicative hash of its bits.
fn slot_of(addr: IpAddr) -> usize {
    (addr_bits(addr).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57) as usize % INDEX_SLOTS
}

/// An address's bits, folded to 64.
fn addr_bits(addr: IpAddr) -> u64 {
    match addr {
        IpAddr::V4(v4) => u64::from(u32::from(v4)),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            (bits as u64) ^ ((bits >> 64) as u64)
        }
    }
}

/// One peer as a worker (or the merge of all workers) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSnapshot {
    pub addr: IpAddr,
    /// How long ago anything of it was last seen.
    pub seen_ago_us: u64,
    pub stats: PeerStats,
    pub recent: Recent,
}

/// A worker's table, or the merge of every worker's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeersSnapshot {
    /// How long the recent window is, µs.
    pub window_us: Micros,
    pub peers: Vec<PeerSnapshot>,
    pub other: PeerStats,
    pub other_recent: Recent,
}

impl PeersSnapshot {
    /// The workers' tables as one: an address seen by several workers is
    /// one peer; the [`MAX_PEERS`] most recently seen are kept, most recent
    /// first, and the rest are folded into `other`.
    pub fn merge(snapshots: impl IntoIterator<Item = PeersSnapshot>) -> PeersSnapshot {
        let mut merged = PeersSnapshot::default();
        for snapshot in snapshots {
            merged.window_us = merged.window_us.max(snapshot.window_us);
            merged.other.merge(&snapshot.other);
            merged.other_recent.merge(&snapshot.other_recent);
            for peer in snapshot.peers {
                match merged.peers.iter_mut().find(|p| p.addr == peer.addr) {
                    Some(known) => {
                        known.seen_ago_us = known.seen_ago_us.min(peer.seen_ago_us);
                        known.stats.merge(&peer.stats);
                        known.recent.merge(&peer.recent);
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
            merged.other_recent.merge(&folded.recent);
        }
        merged
    }
}

#[cfg(test)]
mod tests;
