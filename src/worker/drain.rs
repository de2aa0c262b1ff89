//! A worker's graceful shutdown: stop accepting, close at once what a
//! drain closes (asked of each connection's state), let the rest finish,
//! and at the end (nothing ref'd left, or `--shutdown-timeout`) cut what
//! is still open.

use super::Worker;
use crate::conn::{Drain, Flow};
use crate::stats::CloseCause;
use crate::timers::Micros;

impl Worker {
    /// Shutdown: stop accepting and close idle connections at once (they
    /// are unref'd); in-flight requests finish with `Connection: close`.
    pub(super) fn start_draining(&mut self, now: Micros) {
        self.draining = true;
        self.drain_deadline = self.settings.shutdown_ms.map(|ms| now + ms * 1000);
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, conn)| conn.state().on_drain() == Drain::CloseNow)
            .map(|(key, _)| key)
            .collect();
        for key in idle {
            self.with_conn(key, now, |_, _| Flow::Close(CloseCause::Shutdown));
        }
    }

    /// Draining and nothing is left to finish (or the shutdown timeout
    /// passed).
    pub(super) fn drained(&self, now: Micros) -> bool {
        self.draining
            && (self.drain_deadline.is_some_and(|deadline| now >= deadline) || !self.stays_alive())
    }

    /// Whether anything keeps the worker alive: its listener, a ref'd
    /// timer, or a connection with work to finish. Work is ref'd through
    /// its timers; a connection whose timeouts are disabled (`--timeout 0`
    /// and the like) has none, so connections are asked too, which costs
    /// a scan only once no ref'd timer is left.
    pub(super) fn stays_alive(&self) -> bool {
        self.listener.is_some()
            || self.resources.timers.ref_count() > 0
            || self.conns.iter().any(|(_, conn)| conn.state().has_work())
    }

    /// The end of a shutdown. Once nothing ref'd is left, whatever is still
    /// open has nothing to finish; at the shutdown timeout, whatever is
    /// still open is cut, and the log says what that was.
    pub(super) fn close_all(&mut self, now: Micros) {
        let keys: Vec<usize> = self.conns.iter().map(|(key, _)| key).collect();
        let timed_out = self.drain_deadline.is_some_and(|deadline| now >= deadline);
        if timed_out && !keys.is_empty() {
            let cut = self.connection_counts();
            tracing::warn!(
                connections = keys.len(),
                reading_requests = cut.reading,
                writing_or_delayed_responses = cut.writing,
                closing = cut.closing,
                refed_timers = self.resources.timers.ref_count(),
                "shutdown timeout: cutting connections still in flight"
            );
        }
        for key in keys {
            self.with_conn(key, now, |conn, ctx| conn.cut_for_shutdown(ctx));
        }
    }
}
