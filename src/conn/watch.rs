//! The watch after an idle close: once the idle timer has run out and the
//! server's FIN is sent, the connection keeps its descriptor for at most
//! [`IDLE_WATCH_MS`], with no buffer and an unref'd timer, reading and
//! dropping what still arrives. A request that crosses the FIN thus meets
//! an orderly EOF rather than a reset, and the observer hears what the
//! peer did: the first bytes are a request that lost the race; the peer's
//! own FIN or reset ends the watch, and how long it took says how quickly
//! the client notices a closed connection.

use std::io::{self, Read};
use std::time::Duration;

use super::{Conn, Flow, READ_BUDGET, would_block};
use crate::ctx::{ConnLabel, Ctx};
use crate::observe::{AfterFin, Event};
use crate::stats::CloseCause;
use crate::timers::{Micros, ShortStamp};
use crate::tls::WatchRead;

/// The longest watch after an idle FIN: a peer that has neither closed
/// nor sent anything by then is not racing.
pub const IDLE_WATCH_MS: u64 = 1000;
/// What a watched connection reads into and drops, on the stack.
const WATCH_SINK: usize = 2048;

/// A watch in progress: when the FIN went out (a short stamp: the watch
/// lasts a second), and whether anything has arrived since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FinWatch {
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
        if self.tls.is_some() {
            return self.watch_peer_tls(watch, ctx);
        }
        let mut sink = [0u8; WATCH_SINK];
        for _ in 0..READ_BUDGET {
            match self.stream.read(&mut sink) {
                Ok(0) => return self.peer_closed_after_fin(watch, ctx),
                Ok(_) if watch.late => {}
                Ok(_) => self.late_request(&mut watch, ctx),
                Err(e) if would_block(&e) => return Flow::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.peer_closed_after_fin(watch, ctx),
            }
        }
        self.wants_more = true;
        Flow::Open
    }

    /// The watch over TLS: what arrives goes through rustls, so that the
    /// peer's own `close_notify` (an orderly reply to ours) counts as its
    /// close, and only application data as a late request.
    fn watch_peer_tls(&mut self, mut watch: FinWatch, ctx: &mut Ctx<'_>) -> Flow {
        match self.watch_tls(READ_BUDGET) {
            Ok(WatchRead::Nothing) => Flow::Open,
            Ok(WatchRead::More) => {
                self.wants_more = true;
                Flow::Open
            }
            Ok(WatchRead::Request) => {
                if !watch.late {
                    self.late_request(&mut watch, ctx);
                }
                self.wants_more = true; // read on next turn: to WouldBlock or the close
                Flow::Open
            }
            Ok(WatchRead::Closed) | Err(_) => self.peer_closed_after_fin(watch, ctx),
        }
    }

    /// The first bytes after the idle FIN: a request that lost the race.
    fn late_request(&mut self, watch: &mut FinWatch, ctx: &mut Ctx<'_>) {
        watch.late = true;
        self.fin_watch = Some(*watch);
        let delay_us = watch.fin.elapsed(ctx.now);
        let ConnLabel { id, peer, .. } = ctx.conn;
        tracing::debug!(conn = id, %peer, delay_us, "late request after the idle FIN");
        let late = AfterFin::Request {
            delay_us,
            idle_timeout_ms: self.idle_timeout_ms(ctx.settings),
            round_trip_us: self.round_trip_us(),
        };
        ctx.observe(Event::AfterFin(late));
    }

    /// The peer closed (FIN or reset) during the watch: the connection ends.
    pub(super) fn peer_closed_after_fin(&mut self, watch: FinWatch, ctx: &mut Ctx<'_>) -> Flow {
        let delay_us = watch.fin.elapsed(ctx.now);
        ctx.observe(Event::AfterFin(AfterFin::Closed { delay_us }));
        Flow::Close(CloseCause::KeepAliveTimeout)
    }

    /// Makes the close that follows an abortive one: a reset (SO_LINGER 0).
    pub(super) fn abort(&mut self) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.abort();
        }
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }
}
