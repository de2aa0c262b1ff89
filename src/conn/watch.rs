//! The watch after an idle close: once the idle timer has run out and the
//! server's FIN is sent, the connection keeps its descriptor for at most
//! [`IDLE_WATCH_MS`], with no buffer and an unref'd timer, reading and
//! dropping what still arrives (through its transport: over TLS, the
//! peer's `close_notify` is its close, not a request). A request that
//! crosses the FIN thus meets an orderly EOF rather than a reset, and the
//! observer hears what the peer did: the first bytes are a request that
//! lost the race; the peer's own FIN or reset ends the watch, and how long
//! it took says how quickly the client notices a closed connection.

use super::transport::WatchEnd;
use super::{Conn, Flow, READ_BUDGET, State};
use crate::ctx::{ConnLabel, Ctx};
use crate::observe::{AfterFin, Event};
use crate::stats::CloseCause;
use crate::timers::{Micros, ShortStamp};

/// The longest watch after an idle FIN: a peer that has neither closed
/// nor sent anything by then is not racing.
pub const IDLE_WATCH_MS: u64 = 1000;

/// A watch in progress: when the FIN went out (a short stamp: the watch
/// lasts a second), and whether anything has arrived since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinWatch {
    fin: ShortStamp,
    late: bool,
}

impl From<Micros> for FinWatch {
    /// A watch whose FIN went out at loop time `now`.
    fn from(now: Micros) -> Self {
        FinWatch {
            fin: ShortStamp::at(now),
            late: false,
        }
    }
}

impl Conn {
    /// During the watch: reads and drops what arrives until the socket is
    /// empty, telling the observer of a late request and of the peer's
    /// close.
    pub(super) fn watch_peer(&mut self, mut watch: FinWatch, ctx: &mut Ctx<'_>) -> Flow {
        self.wants_more = false;
        let watched = self.transport.watch(READ_BUDGET);
        if watched.request && !watch.late {
            self.late_request(&mut watch, ctx);
        }
        match watched.end {
            WatchEnd::Drained => Flow::Open,
            WatchEnd::More => {
                self.wants_more = true;
                Flow::Open
            }
            WatchEnd::Closed => self.peer_closed_after_fin(watch, ctx),
        }
    }

    /// The first bytes after the idle FIN: a request that lost the race.
    fn late_request(&mut self, watch: &mut FinWatch, ctx: &mut Ctx<'_>) {
        watch.late = true;
        self.enter(State::Watching(*watch), ctx);
        let delay_us = watch.fin.elapsed(ctx.now);
        let ConnLabel { id, peer, .. } = ctx.conn;
        tracing::debug!(conn = id, %peer, delay_us, "late request after the idle FIN");
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
