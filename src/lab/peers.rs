//! What each client address does at the idle boundary, per worker: a
//! table of the [`MAX_PEERS`] most recently seen addresses, each with its
//! totals since the server started ([`PeerStats`]) and its figures over
//! the recent window ([`Recent`], kept in [`BUCKETS`] time buckets); a
//! peer pushed out by a newer one is folded into `other`, so the table's
//! memory is fixed whatever the number of peers.
//!
//! A proxy is one address, which is the point: its pool is one peer. The
//! table is written only by its worker, from the loop (no locks); the admin
//! view asks for a copy ([`PeerTable::snapshot`]), in which the window is
//! summed as of that moment, and merges the workers' copies
//! ([`PeersSnapshot::merge`]). Lookups go through a small open-addressing
//! index of one byte per slot, so recording an event for a known peer
//! costs a hash, a compare and a few additions.

use std::net::IpAddr;

use super::NEAR_MISS_US;
use super::histogram::LogHistogram;
use crate::observe::{AfterFin, Closer, Event, IdleEnd, Reuse};
use crate::timers::Micros;

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
/// User-Agents remembered per peer.
pub const AGENTS: usize = 2;
/// The most of a User-Agent kept, in bytes.
pub const AGENT_BYTES: usize = 64;
/// Index slots: twice the peers, so probes stay short.
const INDEX_SLOTS: usize = 2 * MAX_PEERS;
const EMPTY: u8 = u8::MAX;

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
}

/// One peer's figures over the recent window, or the sum of several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    /// Requests that reused an idle connection.
    pub reuses: u64,
    /// Reuses with less than [`NEAR_MISS_US`] left before the deadline.
    pub near_misses: u64,
    /// Reuses after the advertised `Keep-Alive: timeout` had passed
    /// (served: the real deadline was later).
    pub past_advertised: u64,
    /// Requests that arrived after the server's idle FIN, sent when the
    /// client could have seen it (later than a round trip after it).
    pub late_after_fin: u64,
    /// Requests that crossed the server's idle FIN in flight (within a
    /// round trip of it): lost races the client could not see coming.
    pub late_crossing_fin: u64,
    /// Idle connections the server closed with a reset (`close=rst`),
    /// after which a request that lost the race cannot be seen.
    pub server_resets: u64,
    pub server_idle_closes: u64,
    pub client_idle_closes: u64,
    /// Client idle closes that came with its next connection or request.
    pub lazy_client_closes: u64,
    /// The shortest idle timeout of a connection that went wrong (a late
    /// request, a near miss, a reuse past the promise), with what it
    /// advertised; else the shortest the peer met.
    pub binding: Option<Terms>,
    /// The shortest idle time, ms, after which a request was lost: the
    /// connection's idle timeout plus how long after the FIN it came.
    pub lowest_failure_ms: Option<u64>,
    /// The longest idle gap, ms, after which a reuse was served.
    pub longest_served_gap_ms: Option<u64>,
    /// The longest round trip the kernel measured on its connections, µs.
    pub round_trip_us: Option<u32>,
}

/// The idle terms a connection was kept on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    pub idle_timeout_ms: u64,
    /// `Keep-Alive: timeout=`, seconds.
    pub advertised_secs: Option<u64>,
    /// Something went wrong under these terms.
    pub troubled: bool,
}

impl Terms {
    /// Which terms bind a pool: troubled ones before untroubled, then the
    /// shortest timeout.
    fn tighter(self, other: Terms) -> Terms {
        let key = |t: Terms| (!t.troubled, t.idle_timeout_ms);
        if key(other) < key(self) { other } else { self }
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn max_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl Recent {
    /// Adds another window's figures.
    pub fn merge(&mut self, other: &Recent) {
        self.reuses += other.reuses;
        self.near_misses += other.near_misses;
        self.past_advertised += other.past_advertised;
        self.late_after_fin += other.late_after_fin;
        self.late_crossing_fin += other.late_crossing_fin;
        self.server_resets += other.server_resets;
        self.server_idle_closes += other.server_idle_closes;
        self.client_idle_closes += other.client_idle_closes;
        self.lazy_client_closes += other.lazy_client_closes;
        self.binding = match (self.binding, other.binding) {
            (Some(a), Some(b)) => Some(a.tighter(b)),
            (a, b) => a.or(b),
        };
        self.lowest_failure_ms = min_some(self.lowest_failure_ms, other.lowest_failure_ms);
        self.longest_served_gap_ms =
            max_some(self.longest_served_gap_ms, other.longest_served_gap_ms);
        self.round_trip_us = max_some(self.round_trip_us, other.round_trip_us);
    }

    /// Requests lost in the window, wherever they crossed the FIN.
    pub fn late_requests(&self) -> u64 {
        self.late_after_fin + self.late_crossing_fin
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

/// The User-Agents a peer's connections named: the [`AGENTS`] most recent
/// distinct ones, each cut to [`AGENT_BYTES`] (enough to tell which client
/// it is), in fixed room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agents {
    slots: [Agent; AGENTS],
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Agent {
    bytes: [u8; AGENT_BYTES],
    len: u8,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            bytes: [0; AGENT_BYTES],
            len: 0,
        }
    }
}

impl Agent {
    fn of(value: &[u8]) -> Agent {
        let mut agent = Agent::default();
        let len = value.len().min(AGENT_BYTES);
        agent.bytes[..len].copy_from_slice(&value[..len]);
        agent.len = len as u8;
        agent
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Agents {
    /// Remembers `value` as the most recent.
    fn note(&mut self, value: &[u8]) {
        let agent = Agent::of(value);
        if self.slots[0] == agent || agent.len == 0 {
            return;
        }
        let at = self
            .slots
            .iter()
            .position(|known| *known == agent)
            .unwrap_or(AGENTS - 1);
        self.slots[..=at].rotate_right(1);
        self.slots[0] = agent;
    }

    /// The ones remembered, most recent first, as (lossy) text.
    pub fn texts(&self) -> impl Iterator<Item = String> + '_ {
        self.slots
            .iter()
            .filter(|agent| agent.len > 0)
            .map(|agent| String::from_utf8_lossy(agent.as_bytes()).into_owned())
    }

    /// Adds another peer's (the older kept behind this one's).
    fn merge(&mut self, other: &Agents) {
        for agent in other.slots.iter().rev().filter(|agent| agent.len > 0) {
            if !self.slots.contains(agent) {
                if let Some(free) = self.slots.iter_mut().find(|slot| slot.len == 0) {
                    *free = agent.clone();
                }
            }
        }
    }
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
    }
}

/// A stretch of the window: when it began, and its figures, in 32-bit
/// fields (a stretch is a tenth of the window: no count in it nears 2³²).
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Its start on the loop clock, a multiple of the bucket width.
    start: Micros,
    counts: [u32; Count::ALL],
    /// The binding terms: idle timeout ms (0: none yet), advertised
    /// seconds (`u16::MAX`: none), and whether they went wrong.
    binding_ms: u32,
    binding_advertised: u16,
    binding_troubled: bool,
    /// `u32::MAX`: none yet.
    lowest_failure_ms: u32,
    /// 0: none yet (a gap is at least a millisecond to count).
    longest_served_gap_ms: u32,
    /// 0: none yet.
    round_trip_us: u32,
}

/// The counts a bucket keeps, by index.
#[derive(Debug, Clone, Copy)]
enum Count {
    Reuses,
    NearMisses,
    PastAdvertised,
    LateAfterFin,
    LateCrossingFin,
    ServerResets,
    ServerIdleCloses,
    ClientIdleCloses,
    LazyClientCloses,
}

impl Count {
    const ALL: usize = 9;
}

impl Bucket {
    fn empty(start: Micros) -> Bucket {
        Bucket {
            start,
            binding_advertised: u16::MAX,
            lowest_failure_ms: u32::MAX,
            ..Bucket::default()
        }
    }

    fn add(&mut self, count: Count) {
        let n = &mut self.counts[count as usize];
        *n = n.saturating_add(1);
    }

    fn note_terms(&mut self, idle_timeout_ms: u64, advertised_secs: Option<u64>, troubled: bool) {
        let terms = Terms {
            idle_timeout_ms,
            advertised_secs,
            troubled,
        };
        let tighter = match self.binding() {
            Some(known) => known.tighter(terms),
            None => terms,
        };
        self.binding_ms = u32::try_from(tighter.idle_timeout_ms).unwrap_or(u32::MAX);
        self.binding_advertised = tighter
            .advertised_secs
            .map_or(u16::MAX, |secs| u16::try_from(secs).unwrap_or(u16::MAX - 1));
        self.binding_troubled = tighter.troubled;
    }

    fn binding(&self) -> Option<Terms> {
        (self.binding_ms > 0).then(|| Terms {
            idle_timeout_ms: u64::from(self.binding_ms),
            advertised_secs: (self.binding_advertised != u16::MAX)
                .then_some(u64::from(self.binding_advertised)),
            troubled: self.binding_troubled,
        })
    }

    fn note_round_trip(&mut self, round_trip_us: Option<u32>) {
        self.round_trip_us = self.round_trip_us.max(round_trip_us.unwrap_or(0));
    }

    /// Its figures, as the window shows them.
    fn recent(&self) -> Recent {
        let count = |c: Count| u64::from(self.counts[c as usize]);
        Recent {
            reuses: count(Count::Reuses),
            near_misses: count(Count::NearMisses),
            past_advertised: count(Count::PastAdvertised),
            late_after_fin: count(Count::LateAfterFin),
            late_crossing_fin: count(Count::LateCrossingFin),
            server_resets: count(Count::ServerResets),
            server_idle_closes: count(Count::ServerIdleCloses),
            client_idle_closes: count(Count::ClientIdleCloses),
            lazy_client_closes: count(Count::LazyClientCloses),
            binding: self.binding(),
            lowest_failure_ms: (self.lowest_failure_ms != u32::MAX)
                .then_some(u64::from(self.lowest_failure_ms)),
            longest_served_gap_ms: (self.longest_served_gap_ms > 0)
                .then_some(u64::from(self.longest_served_gap_ms)),
            round_trip_us: (self.round_trip_us > 0).then_some(self.round_trip_us),
        }
    }

    /// Adds a folded peer's bucket of the same stretch.
    fn merge(&mut self, other: &Bucket) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine = mine.saturating_add(theirs);
        }
        if let Some(terms) = other.binding() {
            self.note_terms(terms.idle_timeout_ms, terms.advertised_secs, terms.troubled);
        }
        self.lowest_failure_ms = self.lowest_failure_ms.min(other.lowest_failure_ms);
        self.longest_served_gap_ms = self.longest_served_gap_ms.max(other.longest_served_gap_ms);
        self.round_trip_us = self.round_trip_us.max(other.round_trip_us);
    }
}

/// A peer's recent figures, bucket by bucket.
#[derive(Debug, Clone)]
struct Window {
    buckets: [Bucket; BUCKETS],
}

impl Default for Window {
    fn default() -> Self {
        Window {
            buckets: [Bucket::empty(Micros::MAX); BUCKETS],
        }
    }
}

impl Window {
    /// The bucket for `now`, emptied first if it held an older stretch.
    fn at(&mut self, now: Micros, width: Micros) -> &mut Bucket {
        let start = now - now % width;
        let bucket = &mut self.buckets[((now / width) % BUCKETS as u64) as usize];
        if bucket.start != start {
            *bucket = Bucket::empty(start);
        }
        bucket
    }

    /// The figures of every bucket that overlaps the `BUCKETS × width`
    /// before `now`.
    fn sum(&self, now: Micros, width: Micros) -> Recent {
        let since = now.saturating_sub(width * BUCKETS as u64);
        let mut sum = Recent::default();
        for bucket in &self.buckets {
            let start = bucket.start;
            if start != Micros::MAX && start + width > since && start <= now {
                sum.merge(&bucket.recent());
            }
        }
        sum
    }
}

/// A peer in the table.
#[derive(Debug, Clone)]
struct Entry {
    addr: IpAddr,
    last_seen: Micros,
    stats: PeerStats,
    window: Window,
    /// When it last opened a connection or reused one (for lazy closes).
    last_use: Option<Micros>,
    /// Its last client idle close not yet known to be lazy.
    unpaired_close: Option<Micros>,
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
}

impl PeerTable {
    /// An empty table whose recent figures span `window` µs.
    pub fn new(window: Micros) -> Self {
        PeerTable {
            entries: Vec::with_capacity(MAX_PEERS),
            index: [EMPTY; INDEX_SLOTS],
            other: PeerStats::default(),
            other_window: Window::default(),
            width: (window / BUCKETS as u64).max(1),
        }
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
            for entry in &mut self.entries {
                entry.window = Window::default();
            }
            self.other_window = Window::default();
        }
    }

    /// Records `event` for the peer at `addr`, seen at loop time `now`.
    pub fn record(&mut self, addr: IpAddr, now: Micros, event: &Event<'_>) {
        let width = self.width;
        let entry = match self.find(addr) {
            Some(i) => &mut self.entries[i],
            None => self.admit(addr),
        };
        entry.last_seen = entry.last_seen.max(now);
        entry.record(now, width, event);
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
            for bucket in gone
                .window
                .buckets
                .iter()
                .filter(|b| b.start != Micros::MAX)
            {
                self.other_window.at(bucket.start, self.width).merge(bucket);
            }
            self.rebuild_index();
        }
        self.entries.push(Entry {
            addr,
            last_seen: 0,
            stats: PeerStats::default(),
            window: Window::default(),
            last_use: None,
            unpaired_close: None,
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

impl Entry {
    fn record(&mut self, now: Micros, width: Micros, event: &Event<'_>) {
        let stats = &mut self.stats;
        match *event {
            Event::Accepted => {
                stats.connections += 1;
                self.used(now, width);
            }
            Event::ClientNamed {
                user_agent,
                forwarded,
            } => {
                if let Some(agent) = user_agent {
                    stats.agents.note(agent);
                }
                stats.forwarded |= forwarded;
            }
            Event::ResponsesDone(n) => stats.requests += u64::from(n),
            Event::Reused(reuse) => {
                self.reused(reuse, now, width);
                self.used(now, width);
            }
            Event::IdleEnded(end) => self.idle_ended(end, now, width),
            Event::AfterFin(AfterFin::Request {
                delay_us,
                idle_timeout_ms,
                round_trip_us,
            }) => {
                stats.late_requests += 1;
                stats.late_request_delay_max_us = stats.late_request_delay_max_us.max(delay_us);
                let bucket = self.window.at(now, width);
                // Sent before our FIN could have reached the client (and its
                // ACK come back): it crossed the FIN in flight.
                let crossing = round_trip_us.is_some_and(|rtt| delay_us < u64::from(rtt));
                bucket.add(match crossing {
                    true => Count::LateCrossingFin,
                    false => Count::LateAfterFin,
                });
                let idle_ms = idle_timeout_ms + delay_us / 1000;
                let idle_ms = u32::try_from(idle_ms).unwrap_or(u32::MAX - 1);
                bucket.lowest_failure_ms = bucket.lowest_failure_ms.min(idle_ms);
                bucket.note_terms(idle_timeout_ms, None, true);
                bucket.note_round_trip(round_trip_us);
            }
            Event::AfterFin(AfterFin::Closed { delay_us }) => {
                stats.peer_close_delays.record(delay_us);
            }
        }
    }

    fn reused(&mut self, reuse: Reuse, now: Micros, width: Micros) {
        let stats = &mut self.stats;
        let near = reuse.headroom_us < NEAR_MISS_US as i64;
        let past = reuse
            .advertised_secs
            .is_some_and(|secs| reuse.gap_us > secs * 1_000_000);
        stats.reuse_gaps.record(reuse.gap_us);
        stats.near_misses += u64::from(near);
        stats.reuses_past_advertised += u64::from(past);
        let bucket = self.window.at(now, width);
        bucket.add(Count::Reuses);
        if near {
            bucket.add(Count::NearMisses);
        }
        if past {
            bucket.add(Count::PastAdvertised);
        }
        let gap_ms = u32::try_from(reuse.gap_us / 1000).unwrap_or(u32::MAX);
        bucket.longest_served_gap_ms = bucket.longest_served_gap_ms.max(gap_ms);
        bucket.note_terms(reuse.idle_timeout_ms, reuse.advertised_secs, near || past);
    }

    fn idle_ended(&mut self, end: IdleEnd, now: Micros, width: Micros) {
        let bucket = self.window.at(now, width);
        match end.closer {
            Closer::Client => {
                self.stats.client_idle_closes += 1;
                self.stats.client_idle_ages.push(end.age_us);
                bucket.add(Count::ClientIdleCloses);
                let lazy = self
                    .last_use
                    .is_some_and(|used| now.saturating_sub(used) < LAZY_CLOSE_US);
                if lazy {
                    bucket.add(Count::LazyClientCloses);
                    self.unpaired_close = None;
                } else {
                    self.unpaired_close = Some(now);
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

    /// The peer opened or reused a connection: a client idle close just
    /// before it was a lazy one.
    fn used(&mut self, now: Micros, width: Micros) {
        self.last_use = Some(now);
        if let Some(closed) = self.unpaired_close.take()
            && now.saturating_sub(closed) < LAZY_CLOSE_US
        {
            self.window.at(closed, width).add(Count::LazyClientCloses);
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
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const MINUTE: Micros = 60_000_000;

    fn table() -> PeerTable {
        PeerTable::new(10 * MINUTE)
    }

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x7f00_0000 + n))
    }

    fn reuse(gap_ms: u64, headroom_ms: i64) -> Event<'static> {
        Event::Reused(Reuse {
            gap_us: gap_ms * 1000,
            headroom_us: headroom_ms * 1000,
            idle_timeout_ms: 2000,
            advertised_secs: Some(2),
        })
    }

    fn idle_end(closer: Closer, age_ms: u64) -> Event<'static> {
        Event::IdleEnded(IdleEnd {
            closer,
            age_us: age_ms * 1000,
            idle_timeout_ms: 2000,
            reset: false,
            round_trip_us: Some(50),
        })
    }

    fn late(delay_us: u64) -> Event<'static> {
        Event::AfterFin(AfterFin::Request {
            delay_us,
            idle_timeout_ms: 2000,
            round_trip_us: Some(100),
        })
    }

    #[test]
    fn events_are_counted_per_address() {
        let mut table = table();
        table.record(ip(2), 10, &Event::Accepted);
        table.record(ip(2), 11, &Event::ResponsesDone(3));
        table.record(ip(2), 12, &reuse(900, 1100));
        table.record(ip(2), 13, &reuse(1950, 50));
        table.record(ip(2), 14, &idle_end(Closer::Client, 1200));
        table.record(ip(3), 15, &late(7000));
        table.record(ip(3), 16, &late(30));
        let closed = Event::AfterFin(AfterFin::Closed { delay_us: 9000 });
        table.record(ip(3), 17, &closed);
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
        assert_eq!((two.recent.reuses, two.recent.near_misses), (2, 1));
        assert_eq!(two.recent.longest_served_gap_ms, Some(1950));
        assert_eq!(three.stats.late_requests, 2);
        assert_eq!(three.stats.late_request_delay_max_us, 7000);
        assert_eq!(three.stats.peer_close_delays.count(), 1);
        // 30 µs after the FIN, under the 100 µs round trip: it crossed it.
        assert_eq!(three.recent.late_crossing_fin, 1);
        assert_eq!(three.recent.late_after_fin, 1);
        assert_eq!(three.recent.lowest_failure_ms, Some(2000));
        assert_eq!(snapshot.other, PeerStats::default());
    }

    #[test]
    fn the_window_forgets_what_is_older_than_it_and_the_totals_do_not() {
        let mut table = table();
        table.record(ip(2), MINUTE, &late(5000));
        let soon = table.snapshot(5 * MINUTE);
        assert_eq!(soon.peers[0].recent.late_requests(), 1);
        let later = table.snapshot(12 * MINUTE);
        assert_eq!(
            later.peers[0].recent.late_requests(),
            0,
            "out of the window"
        );
        assert_eq!(later.peers[0].stats.late_requests, 1, "the total stays");
        // A bucket reused for a newer stretch starts empty.
        table.record(ip(2), 11 * MINUTE + 5, &reuse(100, 1900));
        let now = table.snapshot(11 * MINUTE + 10);
        assert_eq!(now.peers[0].recent.late_requests(), 0);
        assert_eq!(now.peers[0].recent.reuses, 1);
    }

    #[test]
    fn the_binding_terms_are_the_shortest_that_went_wrong() {
        let mut table = table();
        let with = |ms, headroom_ms: i64| {
            Event::Reused(Reuse {
                gap_us: 100_000,
                headroom_us: headroom_ms * 1000,
                idle_timeout_ms: ms,
                advertised_secs: None,
            })
        };
        table.record(ip(2), 1, &with(300, 250));
        table.record(ip(2), 2, &with(1000, 30)); // a near miss
        let recent = table.snapshot(3).peers[0].recent;
        let binding = recent.binding.unwrap();
        assert_eq!((binding.idle_timeout_ms, binding.troubled), (1000, true));
    }

    #[test]
    fn a_client_close_with_its_next_request_is_lazy() {
        let mut table = table();
        table.record(ip(2), 1_000_000, &idle_end(Closer::Client, 1990));
        table.record(ip(2), 1_000_300, &Event::Accepted); // right behind it
        table.record(ip(2), 9_000_000, &idle_end(Closer::Client, 1500));
        let recent = table.snapshot(9_000_001).peers[0].recent;
        assert_eq!(
            (recent.client_idle_closes, recent.lazy_client_closes),
            (2, 1)
        );
    }

    #[test]
    fn user_agents_keep_the_latest_distinct_ones() {
        let mut table = table();
        for agent in [&b"a"[..], b"b", b"a", b"c", b"c"] {
            let named = Event::ClientNamed {
                user_agent: Some(agent),
                forwarded: false,
            };
            table.record(ip(2), 1, &named);
        }
        let stats = &table.snapshot(2).peers[0].stats;
        assert_eq!(stats.agents.texts().collect::<Vec<_>>(), ["c", "a"]);
        let long = [b'x'; 200];
        let named = Event::ClientNamed {
            user_agent: Some(&long),
            forwarded: true,
        };
        table.record(ip(2), 3, &named);
        let stats = &table.snapshot(4).peers[0].stats;
        assert_eq!(stats.agents.texts().next().unwrap().len(), AGENT_BYTES);
        assert!(stats.forwarded);
    }

    #[test]
    fn the_table_keeps_the_most_recent_peers_and_folds_the_rest() {
        let mut table = table();
        for n in 0..10_000u32 {
            table.record(ip(n), u64::from(n), &Event::Accepted);
            // An old peer that keeps coming back stays.
            table.record(ip(1_000_000), u64::from(n), &Event::ResponsesDone(1));
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
        let mut first = table();
        let mut second = table();
        first.record(ip(2), 100, &Event::Accepted);
        first.record(ip(2), 100, &late(5000));
        second.record(ip(2), 5, &Event::Accepted);
        second.record(ip(2), 5, &late(9000));
        second.record(ip(3), 9, &Event::Accepted);
        for n in 0..MAX_PEERS as u32 {
            second.record(ip(100 + n), 1, &Event::Accepted);
        }
        let merged = PeersSnapshot::merge([first.snapshot(100), second.snapshot(10)]);
        assert_eq!(merged.peers.len(), MAX_PEERS);
        assert_eq!(merged.window_us, 10 * MINUTE);
        assert_eq!(merged.peers[0].addr, ip(2), "seen 0 µs ago on the first");
        assert_eq!(merged.peers[0].stats.connections, 2);
        assert_eq!(merged.peers[0].recent.late_requests(), 2);
        assert_eq!(merged.peers[1].addr, ip(3));
        let total: u64 = merged.peers.iter().map(|p| p.stats.connections).sum();
        assert_eq!(total + merged.other.connections, 2 + 1 + MAX_PEERS as u64);
    }

    #[test]
    fn the_table_stays_under_200_kib_per_worker() {
        let bytes = PeerTable::max_bytes();
        eprintln!("peer table at most {bytes} bytes per worker");
        assert!(bytes < 200 * 1024, "{bytes} bytes");
        let mut table = table();
        for n in 0..10_000 {
            table.record(ip(n), u64::from(n), &Event::Accepted);
        }
        assert_eq!(table.entries.capacity(), MAX_PEERS, "never grown");
    }

    #[test]
    fn ipv6_peers_are_told_apart() {
        let mut table = table();
        let a: IpAddr = "::1".parse().unwrap();
        let b: IpAddr = "::2".parse().unwrap();
        table.record(a, 1, &Event::Accepted);
        table.record(b, 1, &Event::Accepted);
        table.record(b, 1, &Event::Accepted);
        let snapshot = table.snapshot(1);
        let count = |addr| {
            let peer = snapshot.peers.iter().find(|p| p.addr == addr).unwrap();
            peer.stats.connections
        };
        assert_eq!((count(a), count(b)), (1, 2));
    }
}
