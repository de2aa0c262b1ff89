//! The watch after an idle close (the keep-alive lab): once the server's
//! idle timer has run out and its FIN is sent, the connection keeps its
//! descriptor for at most [`IDLE_WATCH_MS`], with no buffer and an
//! unref'd timer, reading and dropping what still arrives. The first bytes
//! are a *late request*: the client sent on a connection the server had
//! already given up. The peer's own FIN or reset ends the watch, and how
//! long it took says how race-prone the client's pool is.

use std::io::{self, Read};
use std::time::Duration;

use super::{Conn, Flow, READ_BUDGET, would_block};
use crate::ctx::{ConnLabel, Ctx};
use crate::lab::peers::PeerEvent;
use crate::stats::CloseCause;
use crate::timers::Micros;

/// The longest watch after an idle FIN: a peer that has neither closed
/// nor sent anything by then is not racing.
pub const IDLE_WATCH_MS: u64 = 1000;
/// What a watched connection reads into and drops, on the stack.
const WATCH_SINK: usize = 2048;

impl Conn {
    /// During the watch, `since_fin` after the idle FIN: reads and drops
    /// what arrives until the socket is empty, noting a late request and
    /// the peer's close.
    pub(super) fn watch_peer(&mut self, since_fin: Micros, ctx: &mut Ctx<'_>) -> Flow {
        self.wants_more = false;
        let mut sink = [0u8; WATCH_SINK];
        for _ in 0..READ_BUDGET {
            match self.stream.read(&mut sink) {
                Ok(0) => return self.peer_closed_after_fin(since_fin, ctx),
                Ok(_) => {
                    if self.session.note_late_data() {
                        let delay_us = since_fin;
                        let ConnLabel { id, peer, .. } = ctx.conn;
                        tracing::debug!(conn = id, %peer, delay_us, "late request after the idle FIN");
                        ctx.stats.lab.late_requests.add(1);
                        ctx.stats.lab.late_request_delay.record(delay_us);
                        let event = PeerEvent::LateRequest { delay_us };
                        ctx.peers.record(peer.ip(), ctx.now, event);
                    }
                }
                Err(e) if would_block(&e) => return Flow::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.peer_closed_after_fin(since_fin, ctx),
            }
        }
        self.wants_more = true;
        Flow::Open
    }

    /// The peer closed (FIN or reset) during the watch: the connection ends.
    pub(super) fn peer_closed_after_fin(&mut self, since_fin: Micros, ctx: &mut Ctx<'_>) -> Flow {
        let delay_us = since_fin;
        ctx.stats.lab.peer_close_delay.record(delay_us);
        let event = PeerEvent::ClosedAfterFin { delay_us };
        ctx.peers.record(ctx.conn.peer.ip(), ctx.now, event);
        Flow::Close(CloseCause::KeepAliveTimeout)
    }

    /// Makes the close that follows an abortive one: a reset (SO_LINGER 0).
    pub(super) fn abort(&mut self) {
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }
}
