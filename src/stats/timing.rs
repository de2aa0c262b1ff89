//! Request and connection durations on the loop clock, and the stamps a
//! connection keeps for them: when it opened, when its request in progress
//! began, when its latest response left.
//!
//! The worker reads its clock after every poll, and what the poll
//! delivered is stamped with that reading: the request whose bytes it
//! brought began then, the response whose last byte went out in that turn
//! ended then. A duration is thus exact to within one turn's work, with
//! no clock read per request; a request that begins and is answered
//! within one turn lasts 0, and pipelined requests answered together share
//! the start of the first of them.
//!
//! The same stamps tell the observer (`observe`) the idle figures: a
//! request that begins on a connection idle since a response is a reuse,
//! whose gap runs from when that response left to when the request
//! arrived ([`Observed::reuse_gap_us`]); an idle connection that ends is
//! aged from its last response ([`ConnStamps::idle_age`]).

use super::Stats;
use crate::timers::Micros;

/// What the timing needs to know of a connection after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Responses queued so far on the connection (wrapping).
    pub served: u32,
    /// A request is in progress (head or body arriving, delayed).
    pub busy: bool,
    /// Response bytes wait for the socket.
    pub writing: bool,
}

/// A loop time, or none (eight bytes, not sixteen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(Micros);

impl Stamp {
    /// Nothing stamped.
    const NONE: Stamp = Stamp(Micros::MAX);

    fn at(self) -> Option<Micros> {
        (self != Stamp::NONE).then_some(self.0)
    }
}

/// One connection's stamps, kept in the connection itself (32 bytes).
#[derive(Debug, Clone, Copy)]
pub struct ConnStamps {
    opened: Micros,
    /// First byte of the request in progress.
    started: Stamp,
    /// When the latest response left (its last byte was written).
    last_end: Stamp,
    /// Responses fully written, counted so far (wrapping, as `served`).
    recorded: u32,
}

/// What an event did, as the stamps saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    /// Responses that finished.
    pub finished: u32,
    /// A request began on a connection idle since a response this long:
    /// a reuse.
    pub reuse_gap_us: Option<Micros>,
}

impl ConnStamps {
    /// A connection accepted at `now`.
    pub fn accepted(now: Micros) -> Self {
        ConnStamps {
            opened: now,
            started: Stamp::NONE,
            last_end: Stamp::NONE,
            recorded: 0,
        }
    }

    /// Responses counted so far (wrapping).
    pub fn recorded(&self) -> u32 {
        self.recorded
    }

    /// When the connection was opened.
    pub fn opened_at(&self) -> Micros {
        self.opened
    }

    /// When the latest response left; `None` before the first.
    pub fn last_end(&self) -> Option<Micros> {
        self.last_end.at()
    }

    /// How long an idle connection has been idle at `now`: since its last
    /// response left (`None`: it never answered).
    pub fn idle_age(&self, now: Micros) -> Option<Micros> {
        self.last_end.at().map(|end| now.saturating_sub(end))
    }

    /// After an event on the connection at `now` (the reading after the
    /// poll that delivered it): counts responses that finished into the
    /// request durations, and tells a request that began after an idle
    /// gap. A request begun in the same event as the previous response
    /// ended was pipelined behind it: not a reuse.
    #[inline]
    pub fn observe(&mut self, progress: Progress, now: Micros, stats: &Stats) -> Observed {
        // Counts wrap: compared by difference.
        let finished = match progress.writing {
            true => 0,
            false => progress.served.wrapping_sub(self.recorded),
        };
        let mut seen = Observed {
            finished,
            reuse_gap_us: None,
        };
        let began = finished > 0 || progress.busy || progress.writing;
        if began && self.started == Stamp::NONE {
            self.started = Stamp(now);
            seen.reuse_gap_us = self.idle_age(now);
        }
        if finished > 0 {
            self.recorded = progress.served;
            let from = self.started.at().unwrap_or(now);
            stats
                .request_duration
                .record_n(now.saturating_sub(from), u64::from(finished));
            self.last_end = Stamp(now);
            self.started = match progress.busy || progress.writing {
                true => Stamp(now), // pipelined behind: begun already
                false => Stamp::NONE,
            };
        }
        seen
    }

    /// The connection closes at `now` after an event: what finished in it
    /// is counted, then its lifetime and requests.
    pub fn closed(mut self, progress: Progress, now: Micros, stats: &Stats) -> Observed {
        let seen = self.observe(progress, now, stats);
        stats
            .connection_duration
            .record(now.saturating_sub(self.opened));
        stats
            .requests_per_connection
            .record(u64::from(progress.served));
        seen
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
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(1_000);
        let seen = conn.observe(progress(1, false, false), 1_000, &stats);
        assert_eq!(seen.finished, 1);
        assert_eq!(durations(&stats), (1, 0));
    }

    #[test]
    fn response_counts_that_wrap_are_counted_by_difference() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(0);
        conn.recorded = u32::MAX - 1;
        // Three responses more: the connection's count went past u32::MAX.
        let seen = conn.observe(progress(1, false, false), 5, &stats);
        assert_eq!(seen.finished, 3);
        assert_eq!(conn.recorded(), 1);
        assert_eq!(durations(&stats).0, 3);
    }

    #[test]
    fn a_request_over_several_turns_runs_from_its_first_byte_to_its_end() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(100);
        // Half a head arrives in the turn read at 10_000.
        conn.observe(progress(0, true, false), 10_000, &stats);
        // The rest arrives; the response backs up.
        conn.observe(progress(1, false, true), 12_000, &stats);
        assert_eq!(durations(&stats), (0, 0), "not written yet");
        // The socket drains in the turn read at 15_000.
        conn.observe(progress(1, false, false), 15_000, &stats);
        assert_eq!(durations(&stats), (1, 5_000));
        assert_eq!(conn.last_end(), Some(15_000));
    }

    #[test]
    fn a_close_records_the_connection_and_its_last_response() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(1_000);
        conn.observe(progress(0, true, false), 2_000, &stats);
        conn.closed(progress(1, false, false), 4_000, &stats);
        assert_eq!(durations(&stats), (1, 2_000));
        let lifetime = stats.connection_duration.read();
        assert_eq!((lifetime.count(), lifetime.sum), (1, 3_000));
        let requests = stats.requests_per_connection.read();
        assert_eq!((requests.count(), requests.sum), (1, 1));
    }

    #[test]
    fn a_request_after_an_idle_wait_is_a_reuse_with_its_gap() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(1_000);
        // Request 1 arrives and is answered within a turn: no reuse.
        let seen = conn.observe(progress(1, false, false), 1_000, &stats);
        assert_eq!(seen.reuse_gap_us, None, "a first request");
        // 1.5 s later request 2 arrives and is answered in its turn: its
        // gap runs from when response 1 left to when request 2 arrived.
        let seen = conn.observe(progress(2, false, false), 1_501_000, &stats);
        assert_eq!(seen.reuse_gap_us, Some(1_500_000));
        // Request 3 arrives but takes several turns (a slow head).
        let seen = conn.observe(progress(2, true, false), 1_701_000, &stats);
        assert_eq!(seen.reuse_gap_us, Some(200_000));
        let seen = conn.observe(progress(3, false, false), 1_800_000, &stats);
        assert_eq!(seen.reuse_gap_us, None, "counted once");
        assert_eq!(conn.recorded(), 3);
    }

    #[test]
    fn pipelined_requests_are_not_reuses() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(1_000);
        conn.observe(progress(1, false, false), 1_000, &stats);
        // Two requests in one read after a gap: one reuse, not two; the
        // third, still arriving behind them, is not one either.
        let seen = conn.observe(progress(3, true, false), 8_000, &stats);
        assert_eq!(seen.reuse_gap_us, Some(7_000));
        let seen = conn.observe(progress(4, false, false), 9_500, &stats);
        assert_eq!(seen.reuse_gap_us, None);
    }

    #[test]
    fn idle_connections_are_aged_from_their_last_response() {
        let stats = Stats::default();
        let mut conn = ConnStamps::accepted(1_000);
        assert_eq!(conn.idle_age(5_000), None, "never answered");
        conn.observe(progress(1, false, false), 2_000, &stats);
        assert_eq!(conn.idle_age(1_202_000), Some(1_200_000));
    }
}
