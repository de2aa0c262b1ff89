//! Request and connection durations on the loop clock, stamped lazily.
//!
//! The worker reads its clock once per turn, before it polls; events are
//! handled after the poll with that (older) reading. Stamping an event with
//! it would count the poll's sleep, so a request whose head arrived after
//! ten idle seconds would look ten seconds long. Instead an event is
//! stamped with the *next* reading, the first one taken after it (as the
//! connection timers are): the worker notes what happened during the turn
//! and [`ConnStamps::stamp`] resolves it at the top of the next turn, when the
//! connection's timers are synced. Both ends of a duration are shifted the
//! same way, so it is exact to within one turn's work, with no clock read
//! per request and no allocation (the stamps live in the connection; what
//! ends waits in per-turn lists that keep their capacity).
//!
//! A request that begins and is answered within one turn lasts 0 (it took
//! less than a turn). Pipelined requests answered together share the start
//! of the first of them.
//!
//! The keep-alive lab's idle figures come from the same stamps: the end of
//! a connection's last response, and what follows it, is either a request
//! that reuses the connection (its gap: [`ConnStamps::stamp`] returns it) or
//! an idle close, by the client or by the server's idle timer, at the age
//! since that end ([`Timing::stamp_turn`] records it).

use std::net::IpAddr;

use super::Stats;
use crate::lab::peers::{Closer, PeerEvent, PeerTable};
use crate::timers::Micros;

/// What the timing needs to know of a connection after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Responses queued so far on the connection.
    pub served: u32,
    /// A request is in progress (head or body arriving, delayed).
    pub busy: bool,
    /// Response bytes wait for the socket.
    pub writing: bool,
}

/// A stamp that is known, or owed by the next clock reading: a loop time,
/// or one of two values no loop time reaches (eight bytes, not sixteen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(Micros);

impl Stamp {
    /// Nothing to stamp.
    const NONE: Stamp = Stamp(Micros::MAX);
    /// Happened this turn: the next reading stamps it.
    const PENDING: Stamp = Stamp(Micros::MAX - 1);

    fn at(self) -> Option<Micros> {
        (self.0 < Stamp::PENDING.0).then_some(self.0)
    }

    fn is_set(self) -> bool {
        self != Stamp::NONE
    }

    fn resolve(&mut self, now: Micros) -> Micros {
        match self.at() {
            Some(at) => at,
            None => {
                *self = Stamp(now);
                now
            }
        }
    }

    /// A pending stamp takes `now`; others stay.
    fn settle(&mut self, now: Micros) {
        if *self == Stamp::PENDING {
            *self = Stamp(now);
        }
    }
}

impl Default for Stamp {
    fn default() -> Self {
        Stamp::NONE
    }
}

/// One connection's stamps, kept in the connection itself (36 bytes): what
/// it needs between turns. Responses that finished are handed to the
/// [`Timing`] at once, to be stamped with the next reading.
#[derive(Debug, Clone, Copy)]
pub struct ConnStamps {
    opened: Stamp,
    /// First byte of the request in progress.
    started: Stamp,
    /// The last byte of the latest response.
    last_end: Stamp,
    /// A request reused the connection this turn, idle since this end: the
    /// next reading gives its gap.
    reuse_from: Stamp,
    /// Responses fully written, counted so far.
    recorded: u32,
}

impl ConnStamps {
    /// A connection accepted this turn.
    pub fn accepted() -> Self {
        ConnStamps {
            opened: Stamp::PENDING,
            started: Stamp::NONE,
            last_end: Stamp::NONE,
            reuse_from: Stamp::NONE,
            recorded: 0,
        }
    }

    /// Responses counted so far.
    pub fn recorded(&self) -> u32 {
        self.recorded
    }

    /// When the connection was opened, or `now` in the turn it was.
    pub fn opened_at(&self, now: Micros) -> Micros {
        self.opened.at().unwrap_or(now)
    }

    /// When the latest response ended, `now` in the turn it did; `None`
    /// before the first.
    pub fn last_end_at(&self, now: Micros) -> Option<Micros> {
        self.last_end
            .is_set()
            .then(|| self.last_end.at().unwrap_or(now))
    }

    /// Resolves a connection's stamps with `now`, the first reading after
    /// its latest event (the worker calls this as it syncs timers).
    /// Returns the gap before a request that reused the connection.
    #[inline]
    pub fn stamp(&mut self, now: Micros) -> Option<Micros> {
        self.started.settle(now);
        self.opened.settle(now);
        let reuse = self.reuse_from.is_set().then(|| {
            let from = std::mem::take(&mut self.reuse_from).resolve(now);
            now.saturating_sub(from)
        });
        self.last_end.settle(now);
        reuse
    }
}

/// Responses that finished this turn, begun at `from`.
#[derive(Debug, Clone, Copy)]
struct Ends {
    from: Micros,
    count: u32,
}

/// A connection closed this turn, waiting for the next reading.
#[derive(Debug, Clone, Copy)]
struct Closed {
    opened: Stamp,
    requests: u32,
}

/// A connection that was idle between requests, ended this turn by
/// `closer` (with the server's idle FIN, or closed).
#[derive(Debug, Clone, Copy)]
pub struct IdleEnd {
    pub peer: IpAddr,
    pub closer: Closer,
}

/// An idle end waiting for the next reading.
#[derive(Debug, Clone, Copy)]
struct PendingIdleEnd {
    end: IdleEnd,
    last_end: Stamp,
}

/// What a worker's connections did this turn that the next clock reading
/// stamps: responses that finished, connections closed, idle ends. Each
/// list is drained every turn and keeps its capacity.
#[derive(Debug, Default)]
pub struct Timing {
    ends: Vec<Ends>,
    closed: Vec<Closed>,
    idle_ends: Vec<PendingIdleEnd>,
}

impl Timing {
    /// Room for a turn with this many events before anything allocates.
    pub fn with_capacity(events: usize) -> Self {
        Timing {
            ends: Vec::with_capacity(events),
            closed: Vec::with_capacity(events),
            idle_ends: Vec::with_capacity(events),
        }
    }

    /// After an event on a connection: note responses that finished and a
    /// request that began. Returns how many responses finished.
    #[inline]
    pub fn observe(&mut self, stamps: &mut ConnStamps, progress: Progress, stats: &Stats) -> u32 {
        let mut finished = 0;
        // Counts wrap: compared by difference.
        if !progress.writing && progress.served != stamps.recorded {
            finished = progress.served.wrapping_sub(stamps.recorded);
            stamps.recorded = progress.served;
            match stamps.started.at() {
                // Begun in an earlier turn: ends at the next reading.
                Some(from) => self.ends.push(Ends {
                    from,
                    count: finished,
                }),
                // Begun and answered within this turn.
                None => {
                    if !stamps.started.is_set() {
                        note_reuse(stamps);
                    }
                    stats.request_duration.record_n(0, u64::from(finished));
                }
            }
            stamps.started = Stamp::NONE;
            stamps.last_end = Stamp::PENDING;
        }
        if (progress.busy || progress.writing) && !stamps.started.is_set() {
            stamps.started = Stamp::PENDING;
            // After a response in this same event, a request that follows
            // at once was pipelined behind it: not a reuse of an idle
            // connection.
            if finished == 0 {
                note_reuse(stamps);
            }
        }
        finished
    }

    /// A connection closes after this event; `idle`: it was idle between
    /// requests, and who ended it.
    pub fn closed(
        &mut self,
        mut stamps: ConnStamps,
        progress: Progress,
        stats: &Stats,
        idle: Option<IdleEnd>,
    ) {
        self.observe(&mut stamps, progress, stats);
        if let Some(end) = idle {
            self.idle_ends.push(PendingIdleEnd {
                end,
                last_end: stamps.last_end,
            });
        }
        self.closed.push(Closed {
            opened: stamps.opened,
            requests: progress.served,
        });
    }

    /// A connection idle between requests got the server's idle FIN and
    /// stays open for the watch: its idle end is recorded now.
    pub fn idle_fin(&mut self, stamps: &mut ConnStamps, peer: IpAddr) {
        let end = IdleEnd {
            peer,
            closer: Closer::Server,
        };
        self.idle_ends.push(PendingIdleEnd {
            end,
            last_end: std::mem::take(&mut stamps.last_end),
        });
    }

    /// Records what ended last turn with `now`: response durations,
    /// connection lifetimes, idle ends (which go to `peers` too).
    pub fn stamp_turn(&mut self, now: Micros, stats: &Stats, peers: &mut PeerTable) {
        for Ends { from, count } in self.ends.drain(..) {
            let took = now.saturating_sub(from);
            stats.request_duration.record_n(took, u64::from(count));
        }
        for Closed {
            mut opened,
            requests,
        } in self.closed.drain(..)
        {
            let opened = opened.resolve(now);
            stats.connection_duration.record(now.saturating_sub(opened));
            stats.requests_per_connection.record(u64::from(requests));
        }
        for PendingIdleEnd { end, mut last_end } in self.idle_ends.drain(..) {
            // Never answered: not an idle connection in the lab's sense.
            if !last_end.is_set() {
                continue;
            }
            let age_us = now.saturating_sub(last_end.resolve(now));
            stats.lab.idle_close_age(end.closer).record(age_us);
            let closer = end.closer;
            peers.record(end.peer, now, PeerEvent::IdleClosed { closer, age_us });
        }
    }
}

/// A request began: if the connection was idle since a response, it is a
/// reuse, whose gap the next reading gives.
#[inline]
fn note_reuse(stamps: &mut ConnStamps) {
    if stamps.last_end.is_set() {
        stamps.reuse_from = std::mem::take(&mut stamps.last_end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(served: u32, busy: bool, writing: bool) -> Progress {
        Progress {
            served,
            busy,
            writing,
        }
    }

    fn durations(stats: &Stats) -> (u64, u64) {
        let data = stats.request_duration.read();
        (data.count(), data.sum)
    }

    /// A worker's turn boundary: what ended is stamped, then the
    /// connection's own stamps.
    fn next_turn(
        timing: &mut Timing,
        conn: &mut ConnStamps,
        now: Micros,
        stats: &Stats,
    ) -> Option<Micros> {
        timing.stamp_turn(now, stats, &mut PeerTable::default());
        conn.stamp(now)
    }

    #[test]
    fn a_request_answered_within_its_turn_lasts_zero() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 1_000, &stats);
        timing.observe(&mut conn, progress(1, false, false), &stats);
        assert_eq!(durations(&stats), (1, 0));
    }

    #[test]
    fn response_counts_that_wrap_are_counted_by_difference() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        conn.recorded = u32::MAX - 1;
        // Three responses more: the connection's count went past u32::MAX.
        let finished = timing.observe(&mut conn, progress(1, false, false), &stats);
        assert_eq!(finished, 3);
        assert_eq!(conn.recorded(), 1);
        assert_eq!(durations(&stats).0, 3);
    }

    #[test]
    fn a_request_over_several_turns_is_stamped_with_the_readings_after_its_ends() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        // Turn read at 100 (before a long sleep); half a head arrives.
        timing.observe(&mut conn, progress(0, true, false), &stats);
        // Next turn reads 10_000: the head's first byte is stamped then,
        // not with the 100 taken before the sleep.
        next_turn(&mut timing, &mut conn, 10_000, &stats);
        // The rest arrives; the response backs up.
        timing.observe(&mut conn, progress(1, false, true), &stats);
        next_turn(&mut timing, &mut conn, 12_000, &stats);
        assert_eq!(durations(&stats), (0, 0), "not written yet");
        // The socket drains; the next reading ends it.
        timing.observe(&mut conn, progress(1, false, false), &stats);
        next_turn(&mut timing, &mut conn, 15_000, &stats);
        assert_eq!(durations(&stats), (1, 5_000));
    }

    #[test]
    fn a_close_records_the_connection_and_its_last_response() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 1_000, &stats);
        timing.observe(&mut conn, progress(0, true, false), &stats);
        next_turn(&mut timing, &mut conn, 2_000, &stats);
        timing.closed(conn, progress(1, false, false), &stats, None);
        timing.stamp_turn(4_000, &stats, &mut PeerTable::default());
        assert_eq!(durations(&stats), (1, 2_000));
        let lifetime = stats.connection_duration.read();
        assert_eq!((lifetime.count(), lifetime.sum), (1, 3_000));
        let requests = stats.requests_per_connection.read();
        assert_eq!((requests.count(), requests.sum), (1, 1));
    }

    #[test]
    fn a_connection_closed_in_the_turn_it_opened_lasts_zero() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let conn = ConnStamps::accepted();
        assert_eq!(conn.opened_at(500), 500, "not stamped yet");
        timing.closed(conn, progress(1, false, false), &stats, None);
        timing.stamp_turn(4_000, &stats, &mut PeerTable::default());
        let lifetime = stats.connection_duration.read();
        assert_eq!((lifetime.count(), lifetime.sum), (1, 0));
    }

    fn peer() -> IpAddr {
        "127.0.0.9".parse().unwrap()
    }

    #[test]
    fn a_request_after_an_idle_wait_is_a_reuse_with_its_gap() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 1_000, &stats);
        assert_eq!(conn.opened_at(9_999), 1_000);
        // Request 1 arrives and is answered within a turn: no reuse.
        assert_eq!(
            timing.observe(&mut conn, progress(1, false, false), &stats),
            1
        );
        let gap = next_turn(&mut timing, &mut conn, 2_000, &stats);
        assert_eq!(gap, None, "a first request");
        // 1.5 s later request 2 arrives and is answered in its turn: its
        // gap runs from the reading after response 1 to the one after it.
        timing.observe(&mut conn, progress(2, false, false), &stats);
        let gap = next_turn(&mut timing, &mut conn, 1_502_000, &stats);
        assert_eq!(gap, Some(1_500_000));
        // Request 3 arrives but takes several turns (a slow head).
        timing.observe(&mut conn, progress(2, true, false), &stats);
        let gap = next_turn(&mut timing, &mut conn, 1_702_000, &stats);
        assert_eq!(gap, Some(200_000));
        timing.observe(&mut conn, progress(3, false, false), &stats);
        let gap = next_turn(&mut timing, &mut conn, 1_800_000, &stats);
        assert_eq!(gap, None, "counted once");
        assert_eq!(conn.recorded(), 3);
    }

    #[test]
    fn pipelined_requests_are_not_reuses() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 1_000, &stats);
        timing.observe(&mut conn, progress(1, false, false), &stats);
        next_turn(&mut timing, &mut conn, 2_000, &stats);
        // Two requests in one read after a gap: one reuse, not two; the
        // third, still arriving behind them, is not one either.
        timing.observe(&mut conn, progress(3, true, false), &stats);
        let gap = next_turn(&mut timing, &mut conn, 9_000, &stats);
        assert_eq!(gap, Some(7_000));
        timing.observe(&mut conn, progress(4, false, false), &stats);
        assert_eq!(next_turn(&mut timing, &mut conn, 9_500, &stats), None);
    }

    #[test]
    fn idle_closes_are_aged_from_the_last_response() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut peers = PeerTable::default();
        let client = Some(IdleEnd {
            peer: peer(),
            closer: Closer::Client,
        });
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 1_000, &stats);
        timing.observe(&mut conn, progress(1, false, false), &stats);
        next_turn(&mut timing, &mut conn, 2_000, &stats);
        timing.closed(conn, progress(1, false, false), &stats, client);
        timing.stamp_turn(1_202_000, &stats, &mut peers);
        let ages = stats.lab.idle_close_age(Closer::Client).read();
        assert_eq!((ages.count(), ages.sum), (1, 1_200_000));
        // The server's idle FIN: aged at the turn it fired.
        let mut conn = ConnStamps::accepted();
        next_turn(&mut timing, &mut conn, 3_000, &stats);
        timing.observe(&mut conn, progress(1, false, false), &stats);
        next_turn(&mut timing, &mut conn, 4_000, &stats);
        timing.idle_fin(&mut conn, peer());
        timing.stamp_turn(5_004_000, &stats, &mut peers);
        let ages = stats.lab.idle_close_age(Closer::Server).read();
        assert_eq!((ages.count(), ages.sum), (1, 5_000_000));
        let snapshot = peers.snapshot(5_004_000);
        let stats_of_peer = &snapshot.peers[0].stats;
        assert_eq!(
            (
                stats_of_peer.client_idle_closes,
                stats_of_peer.server_idle_closes
            ),
            (1, 1)
        );
        // A connection never answered is no idle close.
        let conn = ConnStamps::accepted();
        timing.closed(conn, progress(0, false, false), &stats, client);
        timing.stamp_turn(6_000_000, &stats, &mut peers);
        assert_eq!(stats.lab.idle_close_age(Closer::Client).read().count(), 1);
    }
}
