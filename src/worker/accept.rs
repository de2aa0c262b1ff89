//! How a worker takes connections in: accept until the backlog is empty
//! (pausing on a timer when descriptors run out, never spinning), choose
//! each one's transport, and make room under `--max-connections` by
//! evicting the connection whose state ranks first for it.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use mio::net::TcpStream;

use super::{ACCEPT_BUDGET, ACCEPT_PAUSE_MS, Worker};
use crate::conn::{Conn, Flow, Transport};
use crate::ctx::ConnLabel;
use crate::observe::Event;
use crate::readiness::would_block;
use crate::stats::CloseCause;
use crate::timer_event::{Slot, TimerEvent};
use crate::timers::Micros;

impl Worker {
    /// Accepts until the backlog is empty, the budget is spent, or
    /// descriptors run out (then pauses on a timer instead of spinning).
    /// Returns whether a connection taken in may have cost much (see
    /// [`Worker::restamp`]).
    pub(super) fn accept(&mut self, now: Micros) -> bool {
        self.accept_pending = false;
        let mut costly = false;
        if self.accept_paused {
            return costly;
        }
        for _ in 0..ACCEPT_BUDGET {
            let Some(listener) = self.listener.as_ref() else {
                return costly;
            };
            match listener.accept() {
                Ok((stream, peer)) => {
                    self.accept_warned = false;
                    costly |= self.admit(stream, peer, now);
                }
                Err(e) if would_block(&e) => return costly,
                Err(e) if is_transient_accept_error(&e) => {}
                Err(e) => {
                    if !self.accept_warned {
                        tracing::warn!(error = %e, pause_ms = ACCEPT_PAUSE_MS, "accept failed; pausing accepts");
                        self.accept_warned = true;
                    }
                    self.accept_paused = true;
                    self.resources.timers.enroll(
                        now,
                        ACCEPT_PAUSE_MS,
                        false,
                        TimerEvent::AcceptResume,
                    );
                    return costly;
                }
            }
        }
        self.accept_pending = true;
        costly
    }

    /// Takes in a new connection, making room under `--max-connections` by
    /// evicting the oldest idle one, or refusing when none is idle.
    ///
    /// With `--defer-accept` the kernel hands a connection over once its
    /// request has arrived (or after a second of silence), so it is read
    /// and answered at once, and its socket joins the poll only if the
    /// connection outlives this turn: a one-request connection costs
    /// accept, recv, send and close. Without it, a connection is accepted
    /// as its handshake completes, nearly always before its request, so it
    /// is registered first (a read now would mostly find nothing).
    /// Returns whether its first event may have cost much.
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr, now: Micros) -> bool {
        let limit = self.settings.max_connections;
        if limit > 0 && self.conns.len() >= limit && !self.evict_oldest_idle(now) {
            self.shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            return false; // dropping the stream closes it
        }
        // The one choice made on TLS: the connection's transport.
        let transport = match self.settings.tls.as_ref().map(|tls| tls.accept()) {
            None => Transport::plain(stream),
            Some(Ok(tls)) => Transport::tls(stream, tls),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot start TLS on a connection: closing it");
                return false;
            }
        };
        let key = self
            .conns
            .insert(Conn::new(transport, ConnLabel::next_id(), peer, now));
        self.shared.stats.accepted();
        self.observer.observe(peer.ip(), now, Event::Accepted);
        if self.settings.defer_accept {
            self.with_conn(key, now, |conn, ctx| conn.on_accept(ctx))
        } else {
            self.with_conn(key, now, |_, _| Flow::Open) // registers it
        }
    }

    /// Makes room by closing a connection that has nothing in flight: the
    /// one idle the longest between requests, whatever list its keep-alive
    /// timer is on (a per-connection `ka=` timeout, or a duration from
    /// before a reload), else the oldest that was accepted but has sent
    /// nothing yet, as nginx reuses both kinds. See
    /// [`Worker::eviction_candidate`].
    fn evict_oldest_idle(&mut self, now: Micros) -> bool {
        let candidate = self.eviction_candidate();
        let Some(key) = candidate else {
            return false;
        };
        self.with_conn(key, now, |_, _| Flow::Close(CloseCause::Evicted));
        self.evictions_unreported += 1;
        if self.eviction_warning.allow(now) {
            tracing::warn!(
                evicted = self.evictions_unreported,
                max_connections = self.settings.max_connections,
                "at --max-connections: evicting idle connections"
            );
            self.evictions_unreported = 0;
        }
        true
    }

    /// The connection to evict: the lowest [`crate::conn::State::eviction_rank`], the
    /// oldest activity timer among those. Each timer list is oldest first,
    /// so a list is walked only until its first connection of the best
    /// rank; the lists are few (one per duration), so this costs a walk
    /// from each head past timers of other kinds, usually few.
    fn eviction_candidate(&self) -> Option<usize> {
        let timers = &self.resources.timers;
        let mut best: Option<(u8, Micros, usize)> = None;
        for list in timers.lists() {
            for timer in timers.walk_list(list.duration_ms) {
                let TimerEvent::Conn {
                    key,
                    slot: Slot::Activity,
                } = *timer.payload
                else {
                    continue;
                };
                let rank = self
                    .conns
                    .get(key as usize)
                    .map(|c| c.state().eviction_rank());
                let Some(Some(rank)) = rank else {
                    continue;
                };
                let candidate = (rank, timer.start, key as usize);
                if best.is_none_or(|best| candidate < best) {
                    best = Some(candidate);
                }
                if rank == 0 {
                    break; // nothing later in this list can beat it
                }
            }
        }
        best.map(|(_, _, key)| key)
    }
}

/// accept() errors that concern one connection, not the listener.
fn is_transient_accept_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::PermissionDenied
    )
}
