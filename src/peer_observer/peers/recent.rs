//! A peer's figures over the recent window (`--peers-window`): kept in
//! [`BUCKETS`] time buckets, each a tenth of the window, of 32-bit counts,
//! and summed into a [`Recent`] as of a moment; the verdict is judged on
//! that. A bucket that comes round again for a newer stretch starts empty,
//! so what is older than the window is forgotten without a sweep.

use super::BUCKETS;
use crate::peer_observer::report::MIN_TIMEOUT_MS;
use crate::timers::Micros;

/// One peer's figures over the recent window, or the sum of several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    /// Requests that reused an idle connection.
    pub reuses: u64,
    /// Reuses with less than [`crate::peer_observer::NEAR_MISS_US`] left before the
    /// deadline.
    pub near_misses: u64,
    /// Reuses after the advertised `Keep-Alive: timeout` had passed
    /// (served: the real deadline was later).
    pub past_advertised: u64,
    /// Requests that arrived after the server's idle FIN, sent when the
    /// client could have seen it (later than a round trip after it).
    pub late_after_fin: u64,
    /// Requests that crossed the server's idle FIN in flight (in before it
    /// left): lost races the client could not see coming.
    pub late_crossing_fin: u64,
    /// Requests that came within a round trip after the FIN: too close to
    /// tell whether the client could have seen it.
    pub late_too_close: u64,
    /// Idle connections the server closed with a reset (`close=rst`), or
    /// without the watch after its FIN (no descriptor to spare): a request
    /// that lost the race then met a reset and cannot be seen.
    pub server_resets: u64,
    pub server_idle_closes: u64,
    pub client_idle_closes: u64,
    /// Client idle closes that came with its next connection or request.
    pub lazy_client_closes: u64,
    /// Reuses that came after the real deadline, served only because the
    /// shadow deadline kept the connection open (the race guard's):
    /// requests production would have lost.
    pub past_deadline: u64,
    /// The youngest idle age, ms, at which the client let a connection go
    /// lazily (closed it as it opened or reused another): its pool's
    /// limit is below it.
    pub shortest_lazy_close_ms: Option<u64>,
    /// The shortest idle timeout of a connection that went wrong (a late
    /// request, a near miss, a reuse past the promise), with what it
    /// advertised; else the shortest the peer met.
    pub binding: Option<Terms>,
    /// The shortest idle time, ms, after which a request was lost: the
    /// connection's idle timeout plus how long after the FIN it came.
    pub lowest_failure_ms: Option<u64>,
    /// The longest idle gap, ms, after which a reuse was served (before
    /// the deadline, when a shadow deadline runs).
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
        self.late_too_close += other.late_too_close;
        self.server_resets += other.server_resets;
        self.server_idle_closes += other.server_idle_closes;
        self.client_idle_closes += other.client_idle_closes;
        self.lazy_client_closes += other.lazy_client_closes;
        self.past_deadline += other.past_deadline;
        self.shortest_lazy_close_ms =
            min_some(self.shortest_lazy_close_ms, other.shortest_lazy_close_ms);
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
        self.late_after_fin + self.late_crossing_fin + self.late_too_close
    }
}

/// A stretch of the window: when it began, and its figures, in 32-bit
/// fields (a stretch is a tenth of the window: no count in it nears 2³²).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Bucket {
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
    /// `u32::MAX`: none yet.
    shortest_lazy_close_ms: u32,
}

/// The counts a bucket keeps, by index.
#[derive(Debug, Clone, Copy)]
pub(super) enum Count {
    Reuses,
    NearMisses,
    PastAdvertised,
    LateAfterFin,
    LateCrossingFin,
    LateTooClose,
    ServerResets,
    ServerIdleCloses,
    ClientIdleCloses,
    LazyClientCloses,
    PastDeadline,
}

impl Count {
    const ALL: usize = 11;
}

impl Bucket {
    fn empty(start: Micros) -> Bucket {
        Bucket {
            start,
            binding_advertised: u16::MAX,
            lowest_failure_ms: u32::MAX,
            shortest_lazy_close_ms: u32::MAX,
            ..Bucket::default()
        }
    }

    pub(super) fn add(&mut self, count: Count) {
        self.add_many(count, 1);
    }

    pub(super) fn add_many(&mut self, count: Count, many: u32) {
        let n = &mut self.counts[count as usize];
        *n = n.saturating_add(many);
    }

    pub(super) fn note_terms(
        &mut self,
        idle_timeout_ms: u64,
        advertised_secs: Option<u64>,
        troubled: bool,
    ) {
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

    /// A request was lost after `idle_ms` idle.
    pub(super) fn note_failure(&mut self, idle_ms: u64) {
        let idle_ms = u32::try_from(idle_ms).unwrap_or(u32::MAX - 1);
        self.lowest_failure_ms = self.lowest_failure_ms.min(idle_ms);
    }

    /// A reuse after `gap_ms` idle was served.
    pub(super) fn note_served_gap(&mut self, gap_ms: u64) {
        let gap_ms = u32::try_from(gap_ms).unwrap_or(u32::MAX);
        self.longest_served_gap_ms = self.longest_served_gap_ms.max(gap_ms);
    }

    /// The client let a connection go lazily after `age_ms` idle (younger
    /// than [`MIN_TIMEOUT_MS`]: a client done with it, not timing it out).
    pub(super) fn note_lazy_close(&mut self, age_ms: u64) {
        if age_ms < u64::from(MIN_TIMEOUT_MS) {
            return;
        }
        let age_ms = u32::try_from(age_ms).unwrap_or(u32::MAX - 1);
        self.shortest_lazy_close_ms = self.shortest_lazy_close_ms.min(age_ms);
    }

    pub(super) fn note_round_trip(&mut self, round_trip_us: Option<u32>) {
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
            late_too_close: count(Count::LateTooClose),
            server_resets: count(Count::ServerResets),
            server_idle_closes: count(Count::ServerIdleCloses),
            client_idle_closes: count(Count::ClientIdleCloses),
            lazy_client_closes: count(Count::LazyClientCloses),
            past_deadline: count(Count::PastDeadline),
            shortest_lazy_close_ms: (self.shortest_lazy_close_ms != u32::MAX)
                .then_some(u64::from(self.shortest_lazy_close_ms)),
            binding: self.binding(),
            lowest_failure_ms: (self.lowest_failure_ms != u32::MAX)
                .then_some(u64::from(self.lowest_failure_ms)),
            longest_served_gap_ms: (self.longest_served_gap_ms > 0)
                .then_some(u64::from(self.longest_served_gap_ms)),
            round_trip_us: (self.round_trip_us > 0).then_some(self.round_trip_us),
        }
    }

    /// Adds a folded peer's bucket of the same stretch.
    pub(super) fn merge(&mut self, other: &Bucket) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine = mine.saturating_add(theirs);
        }
        if let Some(terms) = other.binding() {
            self.note_terms(terms.idle_timeout_ms, terms.advertised_secs, terms.troubled);
        }
        self.lowest_failure_ms = self.lowest_failure_ms.min(other.lowest_failure_ms);
        self.longest_served_gap_ms = self.longest_served_gap_ms.max(other.longest_served_gap_ms);
        self.round_trip_us = self.round_trip_us.max(other.round_trip_us);
        self.shortest_lazy_close_ms = self
            .shortest_lazy_close_ms
            .min(other.shortest_lazy_close_ms);
    }
}

/// A peer's recent figures, bucket by bucket.
#[derive(Debug, Clone)]
pub(super) struct Window {
    buckets: [Bucket; BUCKETS],
}

impl Default for Window {
    fn default() -> Self {
        Window {
            buckets: [Bucket::empty(Micros::MAX); BUCKETS],
        }
    }
}

/// The stretch of the window a moment falls in: when it began, and which
/// bucket holds it. Worked out once per stretch by the table (a division),
/// not once per event.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stretch {
    start: Micros,
    index: usize,
}

impl Stretch {
    /// The stretch of buckets `width` wide that holds `now`.
    pub(super) fn of(now: Micros, width: Micros) -> Stretch {
        let n = now / width;
        Stretch {
            start: n * width,
            index: (n % BUCKETS as u64) as usize,
        }
    }

    /// Whether `now` falls in it.
    pub(super) fn holds(&self, now: Micros, width: Micros) -> bool {
        now >= self.start && now - self.start < width
    }
}

impl Window {
    /// The bucket for `stretch`, emptied first if it held an older one.
    pub(super) fn at(&mut self, stretch: Stretch) -> &mut Bucket {
        let bucket = &mut self.buckets[stretch.index];
        if bucket.start != stretch.start {
            *bucket = Bucket::empty(stretch.start);
        }
        bucket
    }

    /// Adds this window's buckets into `into`'s (a peer folded into
    /// "other").
    pub(super) fn fold_into(&self, into: &mut Window, width: Micros) {
        for bucket in self.buckets.iter().filter(|b| b.start != Micros::MAX) {
            into.at(Stretch::of(bucket.start, width)).merge(bucket);
        }
    }

    /// The figures of every bucket that overlaps the `BUCKETS × width`
    /// before `now`.
    pub(super) fn sum(&self, now: Micros, width: Micros) -> Recent {
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
