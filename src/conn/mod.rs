//! One client connection: its transport (the socket, plain or TLS), its
//! buffers while it has work, its HTTP [`Session`], its two timer slots,
//! and the one lifecycle [`State`] it holds (see [`state`]: changed only by
//! `Conn::enter`, asked by the worker whether it may be evicted, what a
//! drain does to it, whether it has work).
//!
//! The readiness contract (mio, edge-triggered): on every event the
//! connection reads until `WouldBlock`, unless it stops on purpose: read
//! budget spent (the worker puts it on its ready list), output backed up (a
//! writable edge will come), or input full behind a delayed or backed-up
//! response (finishing that response drives it again).
//!
//! Hangups are state, not just an event flag: a peer that hung up is
//! remembered (by the transport, which knows its peer) so that every
//! later pass, from the ready list or a writable edge, reads on to the EOF
//! instead of stopping at a short read and waiting for an edge that will
//! never come again. An error
//! (a reset) ends the connection in the turn it arrives: nothing sent can
//! reach the peer any more.
//!
//! Closing never cuts a response: a connection that has its last response
//! queued counts as writing (the inactivity timer, refreshed by write
//! progress, governs it) until the output is flushed; only then does it
//! shut its write side and linger, draining input so that the close sends
//! FIN rather than RST. The linger lasts while input keeps coming, up to
//! [`LINGER_IDLE_MS`] of silence and [`LINGER_TOTAL_MS`] in all.
//!
//! An idle connection whose keep-alive timer runs out sends FIN and is
//! then watched for a late request ([`watch`]), or is reset under a
//! `close=rst` control; `after=silent|rst` closes right behind a response.
//! Timer policy lives in [`timers`]; every socket call goes through the
//! connection's [`Transport`] (plain or TLS, chosen at accept), which
//! [`socket`] drives for reads, flushes and registration; what the
//! connection tells of its idle gaps (a reuse, judged near the end of the
//! promise on kernel stamps) is [`reuse`]'s; its part in the admin
//! listener's work (an answer waiting on a round, the event stream) is
//! [`admin`]'s, and a forwarded exchange's sockets (`--upstream`) are
//! [`upstream`]'s.
//!
//! Timers are not touched while bytes move. Its transport only records
//! that bytes moved; once per loop turn the worker calls
//! [`Conn::sync_timers`] with a clock reading taken after that activity, and
//! the connection decides in one place ([`Conn::wanted_activity`],
//! [`Conn::wanted_deadline`]) what its two slots hold. Stamping with a
//! reading taken *after* the activity is what makes "never fire early" hold,
//! and a request that arrives and is answered within one turn costs one
//! timer refresh and nothing else.

use std::net::{IpAddr, SocketAddr};
use std::time::SystemTime;

use crate::app::controls::IdleClose;
use crate::ctx::{ConnLabel, Ctx};
use crate::pool::Buffers;
use crate::readiness::{interrupted, would_block};
use crate::session::Session;
use crate::stats::CloseCause;
use crate::stats::timing::ConnStamps;
use crate::timer_event::Slot;
use crate::timers::Micros;

/// Reads per readiness event before yielding to other connections.
const READ_BUDGET: u32 = 16;
/// A lingering connection closes after this long without input (nginx's
/// `lingering_timeout`): a client that has stopped sending will send nothing
/// that could turn the close into a reset.
const LINGER_IDLE_MS: u64 = 1000;
/// And after this long in all, however it trickles (nginx's `lingering_time`).
const LINGER_TOTAL_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readiness {
    /// The peer shut its write side (or both): an EOF waits behind any data.
    pub hangup: bool,
    /// The socket has an error pending (a reset): the connection is dead.
    pub error: bool,
}

impl Readiness {
    /// Reads the peer's state off an epoll event (EPOLLRDHUP/EPOLLHUP,
    /// EPOLLERR).
    pub fn of(event: &mio::event::Event) -> Self {
        Readiness {
            hangup: event.is_read_closed(),
            error: event.is_error(),
        }
    }
}

/// Whether the connection lives on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Open,
    /// Open, and stopped with input maybe waiting (a read or write budget
    /// spent): the worker drives it again next turn (its ready list).
    More,
    Close(CloseCause),
}

impl Flow {
    /// The connection lives on.
    pub fn is_open(self) -> bool {
        !matches!(self, Flow::Close(_))
    }
}

/// Where a pass of [`Conn::drive`] stopped, which says the state it
/// enters (see [`Conn::writing`], [`Conn::waiting`]).
enum Stop {
    /// Output waits for the socket: a writable edge will come.
    Blocked,
    /// A generated body's write budget is spent: writing, and driven
    /// again next turn.
    Yielded,
    /// The read budget is spent: driven again next turn.
    ReadBudget,
    /// The output is flushed, and the input drained (or waiting on a
    /// response): the connection waits where its exchange stands.
    Waits,
    Close(CloseCause),
}

/// One client connection.
pub struct Conn {
    /// Its socket, plain or TLS: every byte in or out goes through it.
    transport: Transport,
    /// Its id, unique over the process's life, for logs.
    id: u64,
    /// The peer's address, as accept() returned it (without the IPv6 flow
    /// and scope fields, which nothing reads: 19 bytes, not 32).
    peer_ip: IpAddr,
    peer_port: u16,
    /// Its request and lifetime stamps (see `stats::timing`).
    pub stamps: ConnStamps,
    /// Where it stands in its life (see [`state`]): changed only by
    /// [`Conn::enter`].
    state: State,
    /// Present while the connection has work; back in the pool when idle.
    buffers: Option<Box<Buffers>>,
    /// Its HTTP exchange (see `session`).
    session: Session,
    /// Its two timers (see [`timers`]).
    slots: TimerSlots,
    /// Input was dropped unread since the exchange began closing (its
    /// last response queued): the close must drain, not reset.
    dropped_input: bool,
}

// An idle connection costs this slab entry and a 32-byte timer node
// (issue 19): checked when the crate compiles, so a release build, where
// no padding hides a byte more, fails as soon as the entry grows. (A
// debug build's mio stream carries a selector id: 16 bytes more.)
const _: () = assert!(
    std::mem::size_of::<Conn>() <= 136 + if cfg!(debug_assertions) { 16 } else { 0 },
    "Conn outgrew its 136-byte slab entry",
);

impl Conn {
    /// A connection accepted at loop time `now` from `peer` over
    /// `transport`, named `id` in logs.
    pub fn new(transport: Transport, id: u64, peer: SocketAddr, now: Micros) -> Self {
        let state = match transport.is_handshaking() {
            true => State::Handshaking,
            false => State::Fresh,
        };
        Conn {
            transport,
            id,
            peer_ip: peer.ip(),
            peer_port: peer.port(),
            stamps: ConnStamps::accepted(now),
            state,
            buffers: None,
            session: Session::new(),
            slots: TimerSlots::new(),
            dropped_input: false,
        }
    }

    /// A connection the kernel handed over with its first bytes in the
    /// socket (TCP_DEFER_ACCEPT): read and answered before the socket is
    /// registered with the poll. A one-request connection that completes
    /// here costs accept, recv, send and close, nothing more.
    pub fn on_accept(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        self.drive(ctx)
    }

    /// How logs name this connection at loop time `now`.
    pub fn label(&self, now: Micros) -> ConnLabel {
        let writing = self.session.served() != self.stamps.recorded();
        ConnLabel {
            id: self.id,
            peer: SocketAddr::new(self.peer_ip, self.peer_port),
            accepted: self.stamps.opened_at(),
            last_response_end: match writing {
                true => Some(now),
                false => self.stamps.last_end(),
            },
            tls: self.transport.version(),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// A readiness event: the watch after an idle FIN reads what comes;
    /// an error (a reset) ends any other connection at once; else it is
    /// driven.
    pub fn on_ready(&mut self, readiness: Readiness, ctx: &mut Ctx<'_>) -> Flow {
        match self.state {
            State::Watching(watch) if readiness.error => self.peer_closed_after_fin(watch, ctx),
            State::Watching(watch) => self.watch_peer(watch, ctx),
            _ if readiness.error => {
                self.transport.peer_reset(ctx);
                Flow::Close(CloseCause::Reset)
            }
            _ => {
                self.transport.readiness_came();
                if readiness.hangup {
                    self.transport.peer_hung_up();
                }
                self.drive(ctx)
            }
        }
    }

    /// A turn on the ready list: a budget ran out last time.
    pub fn on_ready_again(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        match self.state {
            State::Watching(watch) => self.watch_peer(watch, ctx),
            _ => self.drive(ctx),
        }
    }

    /// One of this connection's timers fired (and is gone from the lists).
    pub fn on_timer(&mut self, slot: Slot, ctx: &mut Ctx<'_>) -> Flow {
        let purpose = self.slots.fired(slot);
        let ConnLabel { id, peer, .. } = ctx.conn;
        tracing::debug!(conn = id, %peer, ?slot, ?purpose, state = ?self.state, "timer expired");
        let cause = match purpose {
            Purpose::KeepAlive => return self.expire_idle(ctx),
            Purpose::Shadow => return self.end_shadow(ctx),
            Purpose::Linger | Purpose::LingerTotal => {
                return Flow::Close(self.session.closing().unwrap_or(CloseCause::Error));
            }
            // The peer neither closed nor spoke within the watch.
            Purpose::PeerAfterFin => return Flow::Close(CloseCause::KeepAliveTimeout),
            Purpose::Delay => return self.answer_delayed(ctx),
            Purpose::Upstream => return self.upstream_timed_out(ctx),
            // The peer has read nothing for the whole timeout: the output
            // can never be delivered, and this timeout is what ends it.
            Purpose::Inactivity if self.state == State::Writing => {
                return Flow::Close(CloseCause::Inactivity);
            }
            Purpose::Inactivity => CloseCause::Inactivity,
            // A silent TLS client is closed as a silent plain one is, with
            // nothing sent: no 408 can be said before the handshake.
            Purpose::Headers if self.state == State::Handshaking => {
                return Flow::Close(CloseCause::HeadersTimeout);
            }
            Purpose::Headers => CloseCause::HeadersTimeout,
            Purpose::Request => CloseCause::RequestTimeout,
        };
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        if self.session.time_out(cause, buffers, ctx) {
            self.drive(ctx)
        } else {
            Flow::Close(cause)
        }
    }

    /// What a delayed answer waited on has come (its `/delay` timer, or
    /// the admin round it waited on, see `worker::admin`): it is queued
    /// and sent.
    pub fn answer_delayed(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        self.session.delay_elapsed(buffers, ctx);
        self.drive(ctx)
    }

    /// The keep-alive timer ran out. A request may have arrived in the same
    /// instant and not been read yet (its event is still in the poll queue):
    /// closing now would reset it, the close-versus-new-request race. So read
    /// first: a request that made it is served (and the timer re-armed);
    /// only a connection with nothing to read is closed.
    ///
    /// Under the shadow deadline (the race guard's) the connection is not
    /// closed but kept `Overdue` (see [`state`]), unless its terms ask for
    /// a reset, which a client would meet at once.
    fn expire_idle(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        match self.drive(ctx) {
            Flow::Open if !self.transport.moved() => {}
            flow => return flow,
        }
        let resets = self.session.kept_on().idle_close(ctx.settings) == IdleClose::Rst;
        if ctx.settings.shadow_ms.is_some() && !resets {
            self.enter(State::Overdue, ctx);
            return Flow::Open;
        }
        self.close_idle(ctx)
    }

    /// The shadow deadline ran out: read first, as at the real deadline,
    /// then close as the connection would have closed there.
    fn end_shadow(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        match self.drive(ctx) {
            Flow::Open if !self.transport.moved() => self.close_idle(ctx),
            flow => flow,
        }
    }

    /// Closes an idle connection at its deadline (or the shadow's end),
    /// nothing having arrived: a reset when the connection's terms ask for
    /// one (`close=rst`, or `--idle-close rst` for every connection); otherwise a FIN, and the watch, when descriptors
    /// allow it. Either way the observer hears that the server ended an
    /// idle connection.
    fn close_idle(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        // The observer hears of the idle end as the state changes: to
        // `Watching`, or to `Closed` (see `Conn::enter`).
        match self.session.kept_on().idle_close(ctx.settings) {
            IdleClose::Rst => {
                self.transport.abort();
                Flow::Close(CloseCause::KeepAliveTimeout)
            }
            IdleClose::Fin if !ctx.watch_allowed => {
                ctx.stats.watch_skipped.add(1);
                Flow::Close(CloseCause::KeepAliveTimeout)
            }
            IdleClose::Fin => {
                // The FIN right behind the read that found nothing: a
                // request arriving in between is lost, so the observer
                // hears of the close after it.
                self.transport.stamp_arrivals();
                // The FIN's send time, on the kernel stamps' clock, read
                // just before the call that sends it: the earliest it can
                // have left, so a request stamped before it surely came
                // before the FIN, as the wire would show.
                let sent = SystemTime::now();
                if !self.transport.shut_write(self.ending()) {
                    return Flow::Close(CloseCause::KeepAliveTimeout);
                }
                self.enter(State::Watching(FinWatch::sent(ctx.now, sent)), ctx);
                Flow::Open
            }
        }
    }

    /// The drain's deadline passed with the connection still open. A
    /// request still arriving, with nothing of its response queued, is
    /// answered 408 (one write, as far as the socket takes it) so the
    /// client knows it was not served; anything else ends as it stands.
    pub fn cut_for_shutdown(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        let receiving = matches!(self.state, State::ReadingHead | State::ReadingBody);
        if let Some(buffers) = self.buffers.as_deref_mut()
            && receiving
            && !self.session.response_begun(Some(buffers))
            && self.session.time_out(CloseCause::Shutdown, buffers, ctx)
        {
            let _ = self.flush(false, ctx.filler);
        }
        Flow::Close(CloseCause::Shutdown)
    }

    /// Whether its output ends whole, for the close (see
    /// [`Session::output_whole`]).
    fn ending(&self) -> Ending {
        match self.session.output_whole(self.buffers.as_deref()) {
            true => Ending::Whole,
            false => Ending::Cut,
        }
    }

    /// The connection is closed for `cause` and about to be dropped: it
    /// enters `Closed` (see [`Conn::enter`]).
    pub fn release(&mut self, cause: CloseCause, ctx: &mut Ctx<'_>) {
        self.enter(State::Closed(cause), ctx);
    }

    /// Gives back the connection's timers and buffers, closed for `cause`
    /// (its transport closes first: the FIN follows as the stream drops).
    fn free(&mut self, cause: CloseCause, ctx: &mut Ctx<'_>) {
        self.transport.close(cause, self.ending(), ctx);
        self.release_upstream(ctx);
        self.slots.cancel(ctx.timers);
        if let Some(buffers) = self.buffers.take() {
            ctx.pool.give(buffers);
        }
    }

    /// Reads, answers and writes until the socket would block or the
    /// connection must wait for something else.
    ///
    /// A read that returns less than it asked for has emptied the socket;
    /// under edge triggering new data brings a new event, so the loop stops
    /// there instead of spending a syscall on the `WouldBlock` (as nginx
    /// does), unless the peer hung up and its EOF is still to be read.
    ///
    /// Where the pass stops says the state the connection enters: the
    /// one writer, [`Conn::enter`], is called here (and by the read that
    /// begins a request or ends a handshake, see `Conn::read`), never
    /// after the event.
    fn drive(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        self.drive_from(false, ctx)
    }

    /// [`Conn::drive`], knowing whether the socket is `drained` already:
    /// then the pass reads it only once something else (a response
    /// finished, room made) gives a reason to.
    fn drive_from(&mut self, drained: bool, ctx: &mut Ctx<'_>) -> Flow {
        let (next, flow) = match self.pass(drained, ctx) {
            Stop::Blocked => (self.writing(), Flow::Open),
            Stop::Yielded => (State::Writing, Flow::More),
            Stop::ReadBudget => (self.waiting(), Flow::More),
            Stop::Waits => (self.waiting(), Flow::Open),
            Stop::Close(cause) => return Flow::Close(cause),
        };
        self.enter(next, ctx);
        flow
    }

    /// One pass of [`Conn::drive`]: where it stopped. `drained`: the
    /// socket is known to be empty (see [`Conn::drive_from`]).
    fn pass(&mut self, mut drained: bool, ctx: &mut Ctx<'_>) -> Stop {
        let mut reads = 0;
        loop {
            self.process(ctx);
            // Drained, with a `Connection: close` response queued: the
            // close follows this flush at once (see `settle`).
            // (Not before a reset: held back, the last segment would be
            // discarded with the connection instead of sent.)
            let closes_next = drained && self.closes_at_once(ctx) && !self.session.aborts();
            let generated = self.session.is_generating(self.buffers.as_deref());
            self.note_departure(ctx);
            let wrote = match self.flush(closes_next, ctx.filler) {
                Ok(Flushed::All { wrote }) => wrote,
                Ok(Flushed::Blocked) => return Stop::Blocked,
                Ok(Flushed::Yielded) => return Stop::Yielded,
                Err(_) => return Stop::Close(CloseCause::Reset),
            };
            if generated || (wrote && self.upstream_waits_on_output()) {
                // The generated body is out: requests buffered behind it
                // are processed now. Or the output made room for what a
                // forwarded exchange holds back (no edge will come for
                // it): an upstream's answer waiting in its socket, or a
                // request already in hand behind the last answer.
                continue;
            }
            // The output is flushed: every response queued so far is sent.
            if let Some(cause) = self.session.closing() {
                if self.transport.peer_closed() {
                    return Stop::Close(cause);
                }
                if self.session.aborts() {
                    self.transport.abort();
                    return Stop::Close(cause);
                }
                // An error response may interrupt a body still arriving:
                // send FIN now and drain, so the client reads the response
                // rather than a reset.
                if !closes_when_flushed(&self.session) && !self.transport.shut_write(self.ending())
                {
                    return Stop::Close(cause);
                }
            } else if self.transport.peer_closed()
                && !self.session.owes_answer(self.buffers.as_deref())
            {
                return Stop::Close(CloseCause::Client);
            }
            if self.transport.peer_closed() {
                return Stop::Waits; // a delayed answer is still owed
            }
            if drained {
                return self.settle(ctx);
            }
            if reads == READ_BUDGET {
                return Stop::ReadBudget;
            }
            reads += 1;
            match self.read(ctx) {
                Ok(Got::Data { short, .. }) => {
                    drained = short && self.transport.short_read_drains();
                    self.transport.note_drained(drained);
                }
                Ok(Got::Eof) => {} // the transport knows: `peer_closed`
                // The input waits on the output. If this pass just made room
                // there, process again: no edge would come to do it.
                Ok(Got::Full) if wrote => {}
                Ok(Got::Full) => return Stop::Waits,
                Err(e) if would_block(&e) => {
                    self.transport.note_drained(true);
                    return self.settle(ctx);
                }
                Err(e) if interrupted(&e) => {}
                Err(_) => return Stop::Close(CloseCause::Reset),
            }
        }
    }

    /// After the socket is drained, with the output flushed: an idle
    /// connection gives its buffers back, and starts closing if the server
    /// is draining. A connection answered with `Connection: close` closes now
    /// if the client sent nothing more (no unread data, so the close sends
    /// FIN, not RST); otherwise it lingers, draining, until the client
    /// closes or goes quiet.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> Stop {
        match self.session.closing() {
            Some(cause) if self.closes_at_once(ctx) => return Stop::Close(cause),
            Some(cause) if !self.transport.shut_write(self.ending()) => return Stop::Close(cause),
            Some(_) | None => {}
        }
        if self.session.is_idle(self.buffers.as_deref()) {
            if let Some(buffers) = self.buffers.take() {
                ctx.pool.give(buffers);
            }
            if self.session.has_served() {
                self.transport.disable_nagle();
            }
            if ctx.draining {
                // The response just finished said the connection persists,
                // so more requests may be on their way. End as after
                // `Connection: close`: FIN, then drain, so bytes arriving
                // after the close cannot turn it into a reset that cuts the
                // response still in flight.
                self.session.stop_persisting(CloseCause::Shutdown);
                if !self.transport.shut_write(self.ending()) {
                    return Stop::Close(CloseCause::Shutdown);
                }
            }
        }
        Stop::Waits
    }
}

impl Conn {
    /// Whether the connection, its last response flushed, may close at
    /// once rather than linger: the response said `Connection: close` (or
    /// `after=silent` asked for it), nothing the client sent since has
    /// been dropped unread, and the server is not draining. (A drain ends
    /// exchanges the client expected to go on: more requests may be on
    /// their way, and a close with unread input is a reset that can cut
    /// the response still in flight.)
    fn closes_at_once(&self, ctx: &Ctx<'_>) -> bool {
        !self.dropped_input && closes_when_flushed(&self.session) && !ctx.draining
    }
}

/// The last response ends the connection as soon as it is flushed, with
/// nothing to drain first: `Connection: close`, or `after=silent`.
fn closes_when_flushed(session: &Session) -> bool {
    matches!(
        session.closing(),
        Some(CloseCause::Done | CloseCause::Control)
    )
}

mod admin;
mod reuse;
mod socket;
mod state;
mod timers;
mod transport;
mod upstream;
mod watch;

pub use state::{Activity, Drain, State};
use timers::{Purpose, TimerSlots};
pub use transport::Transport;
use transport::{Ending, Flushed, Got};
use watch::FinWatch;
pub use watch::IDLE_WATCH_MS;

#[cfg(test)]
mod tests;
