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

use super::Stats;
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

/// A stamp that is known, or owed by the next clock reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Stamp {
    #[default]
    None,
    /// Happened this turn: the next reading stamps it.
    Pending,
    At(Micros),
}

impl Stamp {
    fn resolve(&mut self, now: Micros) -> Micros {
        match *self {
            Stamp::At(at) => at,
            Stamp::None | Stamp::Pending => {
                *self = Stamp::At(now);
                now
            }
        }
    }
}

/// One connection's stamps.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    opened: Stamp,
    /// First byte of the request in progress.
    started: Stamp,
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

/// A worker's request and connection stamps.
#[derive(Debug, Default)]
pub struct Timing {
    /// Indexed by connection key; grows to the largest key once.
    slots: Vec<Slot>,
    closed: Vec<Closed>,
}

impl Timing {
    /// Room for `connections` keys and closes before anything allocates.
    pub fn with_capacity(connections: usize) -> Self {
        Timing {
            slots: Vec::with_capacity(connections),
            closed: Vec::with_capacity(connections.min(1024)),
        }
    }

    /// Connection `key` was accepted this turn.
    pub fn opened(&mut self, key: usize) {
        if self.slots.len() <= key {
            self.slots.resize(key + 1, Slot::default());
        }
        self.slots[key] = Slot {
            opened: Stamp::Pending,
            ..Slot::default()
        };
    }

    /// After an event on connection `key`: note responses that finished
    /// and a request that began.
    #[inline]
    pub fn observe(&mut self, key: usize, progress: Progress, stats: &Stats) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        if !progress.writing && progress.served > slot.recorded {
            let finished = progress.served - slot.recorded;
            slot.recorded = progress.served;
            match slot.started {
                // Begun in an earlier turn: ends at the next reading.
                Stamp::At(at) => {
                    slot.ends_pending += finished;
                    slot.ends_from = at;
                }
                // Begun and answered within this turn.
                Stamp::None | Stamp::Pending => {
                    stats.request_duration.record_n(0, u64::from(finished));
                }
            }
            slot.started = Stamp::None;
        }
        if (progress.busy || progress.writing) && slot.started == Stamp::None {
            slot.started = Stamp::Pending;
        }
    }

    /// Connection `key` closes after this event.
    pub fn closed(&mut self, key: usize, progress: Progress, stats: &Stats) {
        self.observe(key, progress, stats);
        if let Some(slot) = self.slots.get_mut(key) {
            self.closed.push(Closed {
                slot: std::mem::take(slot),
                requests: progress.served,
            });
        }
    }

    /// Resolves connection `key`'s stamps with `now`, the first reading
    /// after its latest event (the worker calls this as it syncs timers).
    #[inline]
    pub fn stamp(&mut self, key: usize, now: Micros, stats: &Stats) {
        if let Some(slot) = self.slots.get_mut(key) {
            settle(slot, now, stats);
        }
    }

    /// Records the connections closed last turn, with `now`.
    pub fn stamp_closed(&mut self, now: Micros, stats: &Stats) {
        for mut closed in self.closed.drain(..) {
            settle(&mut closed.slot, now, stats);
            let opened = closed.slot.opened.resolve(now);
            stats.connection_duration.record(now.saturating_sub(opened));
            stats
                .requests_per_connection
                .record(u64::from(closed.requests));
        }
    }
}

fn settle(slot: &mut Slot, now: Micros, stats: &Stats) {
    if slot.ends_pending > 0 {
        let took = now.saturating_sub(slot.ends_from);
        stats
            .request_duration
            .record_n(took, u64::from(slot.ends_pending));
        slot.ends_pending = 0;
    }
    if slot.started == Stamp::Pending {
        slot.started = Stamp::At(now);
    }
    if slot.opened == Stamp::Pending {
        slot.opened = Stamp::At(now);
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
        timing.closed(7, progress(1, false, false), &stats);
        // The key is reused at once; the close is still its own.
        timing.opened(7);
        timing.stamp_closed(4_000, &stats);
        assert_eq!(durations(&stats), (1, 2_000));
        let lifetime = stats.connection_duration.read();
        assert_eq!((lifetime.count(), lifetime.sum), (1, 3_000));
        let requests = stats.requests_per_connection.read();
        assert_eq!((requests.count(), requests.sum), (1, 1));
    }
}
