//! A connection's lifecycle, held: one [`State`] per connection, changed
//! only by [`Conn::enter`], which also tells the observer of the idle
//! boundary's transitions and, as the connection closes, cancels its
//! timers and gives back what it holds. The worker asks the state its
//! questions (may it be evicted, what a drain does to it, has it work)
//! and decides with one `match`.
//!
//! ```text
//!  accept ─▶ Handshaking ─▶ Fresh ─▶ ReadingHead ─▶ ReadingBody ─▶ Delayed
//!   (TLS)         │                    ▲    │            │            │
//!                 │                    │    │            ▼            │
//!                 │                    │    └──────▶ Forwarding ──────┤
//!                 │                    │         (--upstream)         │
//!                 │                    │    ┌────────────┴────────────┘
//!                 │                    │    ▼
//!                 │                  Idle ◀──── Writing ──▶ Closing (linger)
//!                 │                    │                       ▲
//!                 │                    └─ idle timer ─▶ Watching (after our FIN)
//!                 │                    │                  ▲
//!                 │   (shadow) idle timer ─▶ Overdue ─────┘ shadow's end
//!                 │                          (a request: ReadingHead)
//!                 └─ plain HTTP on the TLS port (a 400) ───────┘
//!                                     any state ─▶ Closed
//! ```
//!
//! `Forwarding` (with `--upstream`) is a request sent up whose answer is
//! awaited from the upstream or relayed from it as it comes, the output
//! flushed: work, as `Delayed` is (never evicted; a drain lets it finish,
//! within `--shutdown-timeout`). Its timer is `--upstream-timeout` until
//! the answer's head has come (then 504), the inactivity timeout after;
//! while the relayed answer backs up the output it is `Writing`, and
//! while the request's body still arrives, `ReadingBody`.
//!
//! `Overdue` is the shadow deadline (the race guard's, see
//! `Settings::shadow_ms`): the idle timer ran out at the real deadline and
//! found nothing to read, but instead of closing, the connection stays
//! open for the shadow's length, holding no buffers, as an idle one does.
//! A request that comes then is served and told to the observer as a
//! reuse production would have lost (`Reuse::past_deadline`); a client's
//! close then is told as a client idle close, at its age. At the shadow's
//! end the connection closes as it would have at the deadline.
//!
//! Each event moves the connection explicitly, where it learns where it
//! stands: the read that completes a handshake (or refuses plain HTTP)
//! or brings a request's first bytes; the point where a pass of
//! `Conn::drive` stops (output backed up: `Writing`; output flushed and
//! input drained: what the exchange waits for, see [`Conn::waiting`]);
//! the idle close (`Watching`); the close (`Closed`). `Watching` and
//! `Closed` are left only by closing. The timers follow the state at the
//! turn's sync ([`Conn::sync_timers`], with a clock reading taken after
//! the activity).

use super::Conn;
use super::watch::FinWatch;
use crate::ctx::Ctx;
use crate::observe::{Closer, Event, IdleEnd};
use crate::stats::CloseCause;
use crate::stats::timing::Progress;

/// Where a connection stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Its transport's handshake (TLS) is in progress: no request can
    /// have come yet; under the headers deadline from accept, as `Fresh`.
    Handshaking,
    /// Accepted, nothing received yet.
    Fresh,
    /// Part of a request head has arrived.
    ReadingHead,
    /// A request's body is arriving.
    ReadingBody,
    /// A request is in, and its answer waits on something outside the
    /// exchange: its `/delay` timer or, on the admin listener, the end
    /// of a snapshot round (the worker wakes it), or the event stream's
    /// next frame.
    Delayed,
    /// A forwarded request (`--upstream`) is sent up and its answer is
    /// awaited from the upstream, or relayed as it comes: work, never
    /// evicted; a drain lets it finish.
    Forwarding,
    /// Output waits for the socket (or the transport's own backlog).
    Writing,
    /// Persistent, between requests, holding no buffers.
    Idle,
    /// Idle past its real deadline, kept open by the shadow deadline: a
    /// request now is one production would have lost.
    Overdue,
    /// The last response is sent; the write side is shut (or about to
    /// be) and input is drained before the close (the linger).
    Closing,
    /// The idle timer ran out and the FIN is out: watching the peer for
    /// a late request (see `watch`).
    Watching(FinWatch),
    /// Closed for this cause: timers and buffers given back.
    Closed(CloseCause),
}

/// What a drain (a graceful shutdown) does to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Nothing in flight: it closes at once.
    CloseNow,
    /// It finishes what it has (answered with `Connection: close`).
    Finish,
}

/// What the admin view counts a connection as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Reading,
    Writing,
    Idle,
    Closing,
}

impl State {
    /// Under `--max-connections`, whether it may be evicted to make room,
    /// and in what order: the lower first (idle between requests, then
    /// accepted with nothing sent, then still shaking hands), as nginx
    /// reuses both kinds.
    pub fn eviction_rank(self) -> Option<u8> {
        match self {
            State::Idle | State::Overdue => Some(0),
            State::Fresh => Some(1),
            State::Handshaking => Some(2),
            _ => None,
        }
    }

    /// What a drain does to it.
    pub fn on_drain(self) -> Drain {
        match self {
            State::Idle | State::Overdue | State::Fresh | State::Handshaking => Drain::CloseNow,
            _ => Drain::Finish,
        }
    }

    /// Whether it has something to finish before a drain may end: a
    /// request arriving, a response to deliver, a close to complete.
    pub fn has_work(self) -> bool {
        !matches!(
            self,
            State::Fresh
                | State::Handshaking
                | State::Idle
                | State::Overdue
                | State::Watching(_)
                | State::Closed(_)
        )
    }

    /// Whether an event in it may cost much CPU (a handshake's signature):
    /// the worker reads the clock again after one (see `Worker::restamp`).
    pub fn is_costly(self) -> bool {
        self == State::Handshaking
    }

    /// What the admin view counts it as.
    pub fn activity(self) -> Activity {
        match self {
            State::Handshaking | State::Fresh | State::ReadingHead | State::ReadingBody => {
                Activity::Reading
            }
            State::Delayed | State::Forwarding | State::Writing => Activity::Writing,
            State::Idle | State::Overdue => Activity::Idle,
            State::Closing | State::Watching(_) | State::Closed(_) => Activity::Closing,
        }
    }
}

impl Conn {
    /// Where the connection stands.
    pub fn state(&self) -> State {
        self.state
    }

    /// The one place the state changes. Tells the observer when an idle
    /// connection ends (and who ended it: the server's idle close, with
    /// the watch after it or without; the client's FIN or reset); on
    /// `Closed`, cancels the timers and gives the buffers back.
    pub(super) fn enter(&mut self, next: State, ctx: &mut Ctx<'_>) {
        let was = std::mem::replace(&mut self.state, next);
        let idle = |state| matches!(state, State::Idle | State::Overdue);
        match (was, next) {
            (was, State::Watching(_)) if idle(was) => {
                self.report_idle_end(Closer::Server, false, ctx);
            }
            // Without the watch (a reset, or a FIN with no descriptor to
            // spare for it), a request that loses the race meets the
            // kernel's reset and is never seen here.
            (was, State::Closed(CloseCause::KeepAliveTimeout)) if idle(was) => {
                self.report_idle_end(Closer::Server, true, ctx);
            }
            (was, State::Closed(cause @ (CloseCause::Client | CloseCause::Reset))) if idle(was) => {
                self.report_idle_end(Closer::Client, cause == CloseCause::Reset, ctx);
            }
            _ => {}
        }
        if let State::Closed(cause) = next {
            self.free(cause, ctx);
        }
    }

    /// What a read that gave `n` bytes tells: a handshake that completed
    /// (or turned out to be plain HTTP, refused) leaves `Handshaking`; the
    /// first bytes of a request (or part of a TLS record, begun as a plain
    /// connection's first byte begins it) leave `Fresh` or `Idle`.
    pub(super) fn after_read(&mut self, n: usize, ctx: &mut Ctx<'_>) {
        if self.state == State::Handshaking && !self.transport.is_handshaking() {
            let next = match self.transport.is_refusing() {
                true => State::Closing,
                false => State::Fresh,
            };
            self.enter(next, ctx);
        }
        let begun = n > 0 || self.transport.has_partial_input();
        if begun && matches!(self.state, State::Fresh | State::Idle | State::Overdue) {
            self.enter(State::ReadingHead, ctx);
        }
    }

    /// Where a connection whose output waits for the socket stands: still
    /// shaking hands (its flight backed up), or refusing; with a delayed
    /// answer pending behind the output (or the event stream's next
    /// frame), `Delayed`; else `Writing`.
    pub(super) fn writing(&self) -> State {
        match self.state {
            State::Handshaking => State::Handshaking,
            _ if self.transport.is_refusing() => State::Closing,
            _ if self.session.is_delayed(self.buffers.as_deref()) => State::Delayed,
            _ => State::Writing,
        }
    }

    /// Where a connection waits once a pass stops with its output flushed
    /// and its input drained (or waiting on a response): what its
    /// exchange waits for, and what its transport still holds (records
    /// not yet sent are output; part of a record is a request begun).
    pub(super) fn waiting(&self) -> State {
        let buffers = self.buffers.as_deref();
        match self.state {
            // Left by the read that completes the handshake.
            State::Handshaking => State::Handshaking,
            _ if self.transport.is_refusing() => State::Closing,
            _ if self.session.is_delayed(buffers) => State::Delayed,
            _ if self.transport.has_unsent() => State::Writing,
            _ if self.session.is_forwarding(buffers) && !self.session.is_in_body(buffers) => {
                State::Forwarding
            }
            _ if self.session.closing().is_some() => State::Closing,
            _ if self.session.is_in_body(buffers) => State::ReadingBody,
            _ if buffers.is_some_and(|b| !b.input.is_empty())
                || self.transport.has_partial_input() =>
            {
                State::ReadingHead
            }
            // Still past its deadline: only a request or a close ends that.
            _ if self.state == State::Overdue => State::Overdue,
            _ if self.session.has_received() => State::Idle,
            _ => State::Fresh,
        }
    }

    /// What the worker's request timing needs after an event.
    pub fn progress(&self) -> Progress {
        // A streamed echo's head is queued before its body has arrived:
        // that response is not finished until the exchange moves on.
        let buffers = self.buffers.as_deref();
        let streaming = u32::from(self.session.response_begun(buffers));
        Progress {
            served: self.session.served().wrapping_sub(streaming),
            busy: matches!(
                self.state,
                State::ReadingHead | State::ReadingBody | State::Delayed | State::Forwarding
            ),
            writing: self.session.is_generating(buffers)
                || buffers.is_some_and(|b| b.output.pending() > 0)
                || self.transport.has_unsent(),
        }
    }

    /// Tells the observer that this connection, idle between requests,
    /// ended now, closed by `closer` (with a reset when `reset`). A
    /// connection that never answered is not idle in this sense.
    fn report_idle_end(&self, closer: Closer, reset: bool, ctx: &mut Ctx<'_>) {
        if let Some(age_us) = self.stamps.idle_age(ctx.now) {
            let end = IdleEnd {
                closer,
                age_us,
                idle_timeout_ms: self.idle_timeout_ms(ctx.settings),
                reset,
                round_trip_us: self.transport.round_trip_us(),
            };
            ctx.observe(Event::IdleEnded(end));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timers::Micros;

    /// Every state but `Closed`, with a watch begun at loop time 0.
    fn all() -> [State; 11] {
        [
            State::Forwarding,
            State::Handshaking,
            State::Fresh,
            State::ReadingHead,
            State::ReadingBody,
            State::Delayed,
            State::Writing,
            State::Idle,
            State::Overdue,
            State::Closing,
            State::Watching(FinWatch::from(0 as Micros)),
        ]
    }

    #[test]
    fn only_connections_with_nothing_in_flight_are_evicted_idle_first() {
        let evictable: Vec<State> = all()
            .into_iter()
            .filter(|state| state.eviction_rank().is_some())
            .collect();
        assert_eq!(
            evictable,
            [
                State::Handshaking,
                State::Fresh,
                State::Idle,
                State::Overdue
            ],
            "evictable states"
        );
        let rank = |state: State| state.eviction_rank().unwrap();
        assert!(rank(State::Idle) < rank(State::Fresh));
        assert!(rank(State::Fresh) < rank(State::Handshaking));
    }

    #[test]
    fn a_drain_closes_at_once_exactly_what_has_no_work() {
        for state in all() {
            let closes_now = state.on_drain() == Drain::CloseNow;
            // The watch after an idle FIN has no work, and is not closed
            // by a drain either: it ends on its own within a second.
            let watching = matches!(state, State::Watching(_));
            assert_eq!(closes_now, !state.has_work() && !watching, "{state:?}");
        }
        assert!(!State::Closed(CloseCause::Done).has_work());
    }
}
