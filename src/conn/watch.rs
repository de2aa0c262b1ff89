//! The watch after an idle close: once the idle timer has run out and the
//! server's FIN is sent, the connection keeps its descriptor for at most
//! [`IDLE_WATCH_MS`], with no buffer and an unref'd timer, reading and
//! dropping what still arrives (through its transport: over TLS, the
//! peer's `close_notify` is its close, not a request). A request that
//! crosses the FIN thus meets an orderly EOF rather than a reset, and the
//! observer hears what the peer did: the first bytes are a request that
//! lost the race; the peer's own FIN or reset ends the watch, and how long
//! it took says how quickly the client notices a closed connection.
//!
//! How long after the FIN a late request came is taken on the kernel's
//! clock where it can be: the FIN's send time is a wall-clock reading at
//! the `shutdown` call, and the request's arrival the kernel's receive
//! stamp (SO_TIMESTAMPNS, CLOCK_REALTIME too, asked for on this socket
//! only as the watch begins). Two loop readings would add the server's own
//! wake-up, always longer than a loopback round trip, and no request would
//! ever seem to have crossed the FIN in flight. Without a stamp (TLS, or
//! the kernel's stamping not yet switched on) the loop readings serve.

use std::time::{SystemTime, UNIX_EPOCH};

use super::transport::WatchEnd;
use super::{Conn, Flow, READ_BUDGET, State};
use crate::ctx::{ConnLabel, Ctx};
use crate::observe::{AfterFin, Event};
use crate::stats::CloseCause;
use crate::timers::{Micros, ShortStamp};

/// The longest watch after an idle FIN: a peer that has neither closed
/// nor sent anything by then is not racing.
pub const IDLE_WATCH_MS: u64 = 1000;

/// A watch in progress: when the FIN went out (short stamps: the watch
/// lasts a second), and whether anything has arrived since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinWatch {
    /// On the loop clock.
    fin: ShortStamp,
    /// On the wall clock, at the `shutdown` call: the low 32 bits of its
    /// nanoseconds, read only for spans the loop clock shows are short
    /// enough (see [`WallNanos::since`]).
    fin_sent: WallNanos,
    late: bool,
}

impl From<Micros> for FinWatch {
    /// A watch whose FIN went out at loop time `now` (and now).
    fn from(now: Micros) -> Self {
        FinWatch::sent(now, SystemTime::now())
    }
}

impl FinWatch {
    /// A watch whose FIN went out at loop time `now`, wall-clock time
    /// `sent`.
    pub fn sent(now: Micros, sent: SystemTime) -> Self {
        FinWatch {
            fin: ShortStamp::at(now),
            fin_sent: WallNanos::of(sent),
            late: false,
        }
    }

    /// How long after the FIN a request arrived, µs: by the kernel's
    /// receive stamp `arrived` if there is one (rounded up: 0 only if the
    /// request was in before the FIN left, so it crossed it), else by loop
    /// time `now`. The loop time also serves when it shows a span too long
    /// for the stamps' four bytes to tell (a loop stalled past the watch's
    /// second): the delay is then the loop's, a little long, never wrapped.
    pub fn delay_us(&self, arrived: Option<SystemTime>, now: Micros) -> Micros {
        let by_loop = self.fin.elapsed(now);
        let by_stamps =
            arrived.and_then(|arrived| WallNanos::of(arrived).since(self.fin_sent, by_loop));
        match by_stamps {
            Some(nanos) => (nanos.max(0) as Micros).div_ceil(1000),
            None => by_loop,
        }
    }
}

/// A wall-clock time's nanoseconds since the epoch, low 32 bits: four
/// bytes for a stamp compared with one taken within the watch's second.
/// The difference of two tells a span exactly only under 2³¹ ns (2.1 s)
/// either way, so it is read only with a bound on the span from another
/// clock ([`WallNanos::since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WallNanos(u32);

/// The longest span, by the bound given, whose stamps' difference is
/// read: under 2³¹ ns with room to spare for the wall clock's slewing
/// against the loop's and for a stamp a little past the loop's reading.
const WALL_SPAN_READ_US: Micros = 2_000_000;
const _: () = assert!(WALL_SPAN_READ_US * 1000 < 1 << 31, "under the exact span");

impl WallNanos {
    fn of(time: SystemTime) -> Self {
        let nanos = time
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        WallNanos(nanos as u32)
    }

    /// Nanoseconds from `earlier` to this, negative if it is in fact
    /// later, given `at_most_us`, a bound on the span from another clock
    /// (the loop's, read after this stamp and before `earlier`'s): `None`
    /// when the bound is past [`WALL_SPAN_READ_US`], where the low bits
    /// could have wrapped.
    fn since(self, earlier: WallNanos, at_most_us: Micros) -> Option<i64> {
        (at_most_us <= WALL_SPAN_READ_US).then(|| i64::from(self.0.wrapping_sub(earlier.0) as i32))
    }
}

impl Conn {
    /// During the watch: reads and drops what arrives until the socket is
    /// empty, telling the observer of a late request and of the peer's
    /// close.
    pub(super) fn watch_peer(&mut self, mut watch: FinWatch, ctx: &mut Ctx<'_>) -> Flow {
        let (watched, arrived) = self.transport.watch(READ_BUDGET);
        if watched.request && !watch.late {
            self.late_request(&mut watch, arrived, ctx);
        }
        match watched.end {
            WatchEnd::Drained => Flow::Open,
            WatchEnd::More => Flow::More,
            WatchEnd::Closed => self.peer_closed_after_fin(watch, ctx),
        }
    }

    /// The first bytes after the idle FIN (`arrived`: when, by the
    /// kernel's stamp): a request that lost the race.
    fn late_request(
        &mut self,
        watch: &mut FinWatch,
        arrived: Option<SystemTime>,
        ctx: &mut Ctx<'_>,
    ) {
        watch.late = true;
        self.enter(State::Watching(*watch), ctx);
        let delay_us = watch.delay_us(arrived, ctx.now);
        let ConnLabel { id, peer, .. } = ctx.conn;
        let stamped = arrived.is_some();
        tracing::debug!(conn = id, %peer, delay_us, stamped, "late request after the idle FIN");
        let late = AfterFin::Request {
            delay_us,
            idle_timeout_ms: self.idle_timeout_ms(ctx.settings),
            round_trip_us: self.transport.round_trip_us(),
        };
        ctx.observe(Event::AfterFin(late));
    }

    /// The peer closed (FIN or reset) during the watch: the connection ends.
    pub(super) fn peer_closed_after_fin(&mut self, watch: FinWatch, ctx: &mut Ctx<'_>) -> Flow {
        let delay_us = watch.fin.elapsed(ctx.now);
        ctx.observe(Event::AfterFin(AfterFin::Closed { delay_us }));
        Flow::Close(CloseCause::KeepAliveTimeout)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_delay_is_taken_on_the_kernel_stamp_when_there_is_one() {
        let sent = UNIX_EPOCH + Duration::from_nanos(4_294_967_000); // near a wrap
        let watch = FinWatch::sent(1_000_000, sent);
        let stamp = |nanos: i64| Some(sent + Duration::from_nanos(nanos as u64));
        assert_eq!(watch.delay_us(stamp(12_345), 1_900_000), 13);
        // A nanosecond after the FIN is after it, not in before it.
        assert_eq!(watch.delay_us(stamp(1), 1_900_000), 1);
        assert_eq!(watch.delay_us(stamp(900_000_000), 1_000_050), 900_000);
        // In before the FIN left (its `shutdown` still returning): crossed.
        let before = sent - Duration::from_micros(3);
        assert_eq!(watch.delay_us(Some(before), 1_900_000), 0);
        // No stamp: the loop clock.
        assert_eq!(watch.delay_us(None, 1_000_250), 250);
    }

    #[test]
    fn a_delay_past_what_the_stamps_tell_is_the_loops_not_a_wrapped_one() {
        // A loop stalled 3 s into the watch: 3e9 ns is past 2³¹ ns, and the
        // stamps' low bits alone would read it as -1.29 s (a crossing).
        let sent = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let watch = FinWatch::sent(1_000_000, sent);
        let arrived = sent + Duration::from_millis(3_000);
        let delay_us = watch.delay_us(Some(arrived), 4_000_100);
        assert_eq!(delay_us, 3_000_100, "by the loop clock");
        // Right under the bound the stamps still decide.
        let arrived = sent + Duration::from_millis(1_990);
        assert_eq!(watch.delay_us(Some(arrived), 3_000_000), 1_990_000);
    }

    #[test]
    fn the_stamps_difference_is_read_only_under_its_exact_span() {
        let fin = WallNanos(u32::MAX - 10);
        let later = WallNanos(100);
        assert_eq!(later.since(fin, 1), Some(111), "across the wrap");
        assert_eq!(fin.since(later, 1), Some(-111));
        assert_eq!(later.since(fin, WALL_SPAN_READ_US + 1), None);
    }
}
