//! Request and connection durations on the loop clock, stamped lazily.
//!
//! The worker reads its clock once per turn, before it polls; events are
//! handled after the poll with that (older) reading. Stamping an event with
//! it would count the poll's sleep, so a request whose head arrived after
//! ten idle seconds would look ten seconds long. Instead an event is
//! stamped with the *next* reading, the first one taken after it (as the
//! connection timers are): the worker notes what happened during the turn
//! and [`Timing::stamp`] resolves it at the top of the next turn, when the
//! connection's timers are synced. Both ends of a duration are shifted the
//! same way, so it is exact to within one turn's work, with no clock read
//! per request and no allocation (a slot per connection key, reused).
//!
//! A request that begins and is answered within one turn lasts 0 (it took
//! less than a turn). Pipelined requests answered together share the start
//! of the first of them.
//!
//! The keep-alive lab's idle figures come from the same stamps: the end of
//! a connection's last response, and what follows it, is either a request
//! that reuses the connection (its gap: [`Timing::stamp`] returns it) or
//! an idle close, by the client or by the server's idle timer, at the age
//! since that end ([`Timing::stamp_closed`] records it).

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

/// One connection's stamps.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
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
    /// Responses whose last byte went out this turn, begun at `ends_from`.
    ends_pending: u32,
    ends_from: Micros,
}

/// A connection closed this turn, waiting for the next reading.
#[derive(Debug, Clone, Copy)]
struct Closed {
    slot: Slot,
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

/// A worker's request and connection stamps.
#[derive(Debug, Default)]
pub struct Timing {
    /// Indexed by connection key; grows to the largest key once.
    slots: Vec<Slot>,
    closed: Vec<Closed>,
    idle_ends: Vec<PendingIdleEnd>,
}

impl Timing {
    /// Room for `connections` keys and closes before anything allocates.
    pub fn with_capacity(connections: usize) -> Self {
        Timing {
            slots: Vec::with_capacity(connections),
            closed: Vec::with_capacity(connections.min(1024)),
            idle_ends: Vec::with_capacity(connections.min(1024)),
        }
    }

    /// Connection `key` was accepted this turn.
    pub fn opened(&mut self, key: usize) {
        if self.slots.len() <= key {
            self.slots.resize(key + 1, Slot::default());
        }
        self.slots[key] = Slot {
            opened: Stamp::PENDING,
            ..Slot::default()
        };
    }

    /// After an event on connection `key`: note responses that finished
    /// and a request that began. Returns how many responses finished.
    #[inline]
    pub fn observe(&mut self, key: usize, progress: Progress, stats: &Stats) -> u32 {
        let Some(slot) = self.slots.get_mut(key) else {
            return 0;
        };
        let mut finished = 0;
        if !progress.writing && progress.served > slot.recorded {
            finished = progress.served - slot.recorded;
            slot.recorded = progress.served;
            match slot.started.at() {
                // Begun in an earlier turn: ends at the next reading.
                Some(at) => {
                    slot.ends_pending += finished;
                    slot.ends_from = at;
                }
                // Begun and answered within this turn.
                None => {
                    if !slot.started.is_set() {
                        note_reuse(slot);
                    }
                    stats.request_duration.record_n(0, u64::from(finished));
                }
            }
            slot.started = Stamp::NONE;
            slot.last_end = Stamp::PENDING;
        }
        if (progress.busy || progress.writing) && !slot.started.is_set() {
            slot.started = Stamp::PENDING;
            // After a response in this same event, a request that follows
            // at once was pipelined behind it: not a reuse of an idle
            // connection.
            if finished == 0 {
                note_reuse(slot);
            }
        }
        finished
    }

    /// Responses counted so far on connection `key`.
    pub fn recorded(&self, key: usize) -> u32 {
        self.slots.get(key).map_or(0, |slot| slot.recorded)
    }

    /// Connection `key` closes after this event; `idle`: it was idle
    /// between requests, and who ended it.
    pub fn closed(&mut self, key: usize, progress: Progress, stats: &Stats, idle: Option<IdleEnd>) {
        self.observe(key, progress, stats);
        if let Some(slot) = self.slots.get_mut(key) {
            let slot = std::mem::take(slot);
            if let Some(end) = idle {
                self.idle_ends.push(PendingIdleEnd {
                    end,
                    last_end: slot.last_end,
                });
            }
            self.closed.push(Closed {
                slot,
                requests: progress.served,
            });
        }
    }

    /// Connection `key`, idle between requests, got the server's idle FIN
    /// and stays open for the watch: its idle end is recorded now.
    pub fn idle_fin(&mut self, key: usize, peer: IpAddr) {
        if let Some(slot) = self.slots.get_mut(key) {
            let end = IdleEnd {
                peer,
                closer: Closer::Server,
            };
            self.idle_ends.push(PendingIdleEnd {
                end,
                last_end: std::mem::take(&mut slot.last_end),
            });
        }
    }

    /// Resolves connection `key`'s stamps with `now`, the first reading
    /// after its latest event (the worker calls this as it syncs timers).
    /// Returns the gap before a request that reused the connection.
    #[inline]
    pub fn stamp(&mut self, key: usize, now: Micros, stats: &Stats) -> Option<Micros> {
        self.slots
            .get_mut(key)
            .and_then(|slot| settle(slot, now, stats))
    }

    /// Records the connections closed last turn, and the idle ends, with
    /// `now`; idle ends go to `peers` too.
    pub fn stamp_closed(&mut self, now: Micros, stats: &Stats, peers: &mut PeerTable) {
        for mut closed in self.closed.drain(..) {
            settle(&mut closed.slot, now, stats);
            let opened = closed.slot.opened.resolve(now);
            stats.connection_duration.record(now.saturating_sub(opened));
            stats
                .requests_per_connection
                .record(u64::from(closed.requests));
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
fn note_reuse(slot: &mut Slot) {
    if slot.last_end.is_set() {
        slot.reuse_from = std::mem::take(&mut slot.last_end);
    }
}

fn settle(slot: &mut Slot, now: Micros, stats: &Stats) -> Option<Micros> {
    if slot.ends_pending > 0 {
        let took = now.saturating_sub(slot.ends_from);
        stats
            .request_duration
            .record_n(took, u64::from(slot.ends_pending));
        slot.ends_pending = 0;
    }
    slot.started.settle(now);
    slot.opened.settle(now);
    let reuse = slot.reuse_from.is_set().then(|| {
        let from = std::mem::take(&mut slot.reuse_from).resolve(now);
        now.saturating_sub(from)
    });
    slot.last_end.settle(now);
    reuse
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

    #[test]
    fn a_request_answered_within_its_turn_lasts_zero() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        timing.opened(3);
        timing.stamp(3, 1_000, &stats);
        timing.observe(3, progress(1, false, false), &stats);
        assert_eq!(durations(&stats), (1, 0));
    }

    #[test]
    fn a_request_over_several_turns_is_stamped_with_the_readings_after_its_ends() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        timing.opened(0);
        // Turn read at 100 (before a long sleep); half a head arrives.
        timing.observe(0, progress(0, true, false), &stats);
        // Next turn reads 10_000: the head's first byte is stamped then,
        // not with the 100 taken before the sleep.
        timing.stamp(0, 10_000, &stats);
        // The rest arrives; the response backs up.
        timing.observe(0, progress(1, false, true), &stats);
        timing.stamp(0, 12_000, &stats);
        assert_eq!(durations(&stats), (0, 0), "not written yet");
        // The socket drains; the next reading ends it.
        timing.observe(0, progress(1, false, false), &stats);
        timing.stamp(0, 15_000, &stats);
        assert_eq!(durations(&stats), (1, 5_000));
    }

    #[test]
    fn a_close_records_the_connection_and_its_last_response() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        timing.opened(7);
        timing.stamp(7, 1_000, &stats);
        timing.observe(7, progress(0, true, false), &stats);
        timing.stamp(7, 2_000, &stats);
        timing.closed(7, progress(1, false, false), &stats, None);
        // The key is reused at once; the close is still its own.
        timing.opened(7);
        timing.stamp_closed(4_000, &stats, &mut PeerTable::default());
        assert_eq!(durations(&stats), (1, 2_000));
        let lifetime = stats.connection_duration.read();
        assert_eq!((lifetime.count(), lifetime.sum), (1, 3_000));
        let requests = stats.requests_per_connection.read();
        assert_eq!((requests.count(), requests.sum), (1, 1));
    }

    fn peer() -> IpAddr {
        "127.0.0.9".parse().unwrap()
    }

    #[test]
    fn a_request_after_an_idle_wait_is_a_reuse_with_its_gap() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        timing.opened(1);
        timing.stamp(1, 1_000, &stats);
        // Request 1 arrives and is answered within a turn: no reuse.
        assert_eq!(timing.observe(1, progress(1, false, false), &stats), 1);
        assert_eq!(timing.stamp(1, 2_000, &stats), None, "a first request");
        // 1.5 s later request 2 arrives and is answered in its turn: its
        // gap runs from the reading after response 1 to the one after it.
        timing.observe(1, progress(2, false, false), &stats);
        assert_eq!(timing.stamp(1, 1_502_000, &stats), Some(1_500_000));
        // Request 3 arrives but takes several turns (a slow head).
        timing.observe(1, progress(2, true, false), &stats);
        assert_eq!(timing.stamp(1, 1_702_000, &stats), Some(200_000));
        timing.observe(1, progress(3, false, false), &stats);
        assert_eq!(timing.stamp(1, 1_800_000, &stats), None, "counted once");
    }

    #[test]
    fn pipelined_requests_are_not_reuses() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        timing.opened(2);
        timing.stamp(2, 1_000, &stats);
        timing.observe(2, progress(1, false, false), &stats);
        timing.stamp(2, 2_000, &stats);
        // Two requests in one read after a gap: one reuse, not two; the
        // third, still arriving behind them, is not one either.
        timing.observe(2, progress(3, true, false), &stats);
        assert_eq!(timing.stamp(2, 9_000, &stats), Some(7_000));
        timing.observe(2, progress(4, false, false), &stats);
        assert_eq!(timing.stamp(2, 9_500, &stats), None);
    }

    #[test]
    fn idle_closes_are_aged_from_the_last_response() {
        let (mut timing, stats) = (Timing::default(), Stats::default());
        let mut peers = PeerTable::default();
        let client = Some(IdleEnd {
            peer: peer(),
            closer: Closer::Client,
        });
        timing.opened(3);
        timing.stamp(3, 1_000, &stats);
        timing.observe(3, progress(1, false, false), &stats);
        timing.stamp(3, 2_000, &stats);
        timing.closed(3, progress(1, false, false), &stats, client);
        timing.stamp_closed(1_202_000, &stats, &mut peers);
        let ages = stats.lab.idle_close_age(Closer::Client).read();
        assert_eq!((ages.count(), ages.sum), (1, 1_200_000));
        // The server's idle FIN: aged at the turn it fired.
        timing.opened(4);
        timing.stamp(4, 3_000, &stats);
        timing.observe(4, progress(1, false, false), &stats);
        timing.stamp(4, 4_000, &stats);
        timing.idle_fin(4, peer());
        timing.stamp_closed(5_004_000, &stats, &mut peers);
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
        timing.opened(5);
        timing.closed(5, progress(0, false, false), &stats, client);
        timing.stamp_closed(6_000_000, &stats, &mut peers);
        assert_eq!(stats.lab.idle_close_age(Closer::Client).read().count(), 1);
    }
}
