//! A forwarded exchange's sockets (`--upstream`): the connection borrows
//! an upstream connection for it (the pool's warmest, else a new
//! non-blocking connect, completed on its writable edge), sends the
//! link's request bytes, reads the answer while its own output has room,
//! and hands each read to the session to relay. At the exchange's end
//! the upstream connection goes back to the worker's pool when its answer
//! was whole and persists, else it is closed.
//!
//! A pooled connection that turns out closed before any answer byte came
//! back is the pool's race with the upstream's idle close: the request is
//! sent once more on a fresh connection when that is safe
//! ([`UpstreamLink::can_retry`]), and the pool learns from its idle age
//! not to keep connections that long. Every other failure is the upstream's,
//! told to the session ([`Session::upstream_failed`]: 502, 504 or a cut
//! answer), counted and logged (rate-limited) with the upstream's address.
//!
//! Reading stops while the client's output is over the high-water mark;
//! the bytes already in the upstream socket bring no new edge, so the
//! connection's pass resumes the read once its output drains
//! ([`Conn::upstream_waits_on_output`]). Every pass processes its input through
//! [`Conn::process`], which moves a forwarded exchange on after the
//! session has taken what it can: without `--upstream` that is one
//! branch on the buffers' link, never taken.

use std::io::{self, Read, Write};

use super::{Conn, Readiness};
use crate::ctx::Ctx;
use crate::forward::response::MAX_UPSTREAM_HEAD;
use crate::pool::Buffers;
use crate::readiness::{interrupted, would_block};
use crate::session::{OUTPUT_HIGH_WATER, Session};
use crate::upstream::{Failure, Relay, UpstreamLink};

/// What went wrong on the upstream's side, and how to say it.
struct Fault {
    failure: Failure,
    error: Option<io::Error>,
}

impl Fault {
    fn of(failure: Failure) -> Self {
        Fault {
            failure,
            error: None,
        }
    }

    fn io(failure: Failure, error: io::Error) -> Self {
        Fault {
            failure,
            error: Some(error),
        }
    }

    /// The sentence a 502 says and the log line carries.
    fn describe(&self, ctx: &Ctx<'_>) -> String {
        let upstream = ctx
            .settings
            .upstream
            .as_ref()
            .map_or_else(String::new, |up| {
                let addrs: Vec<String> = up.addrs.iter().map(ToString::to_string).collect();
                format!("upstream {} ({})", up.url, addrs.join(", "))
            });
        let what = match self.failure {
            Failure::Refused => "cannot connect",
            Failure::Reset => "closed the connection before answering",
            Failure::Timeout => "no answer within --upstream-timeout",
            Failure::BadResponse => "answered with something that is not HTTP/1.x (or too large)",
            Failure::Cut => "broke off its answer mid-body",
        };
        match &self.error {
            Some(error) => format!("{upstream}: {what}: {error}"),
            None => format!("{upstream}: {what}"),
        }
    }
}

impl Conn {
    /// Parses and answers what the input holds (see `Session::process`),
    /// and moves a forwarded exchange on (here): its end, or room
    /// for the request body upstream, lets the session take more input.
    pub(super) fn process(&mut self, ctx: &mut Ctx<'_>) {
        loop {
            let Some(buffers) = self.buffers.as_deref_mut() else {
                return;
            };
            let dropped = self.session.process(buffers, ctx);
            self.dropped_input |= dropped > 0;
            if buffers.upstream.is_none() || !self.pump_upstream(ctx) {
                return;
            }
        }
    }

    /// A readiness event on the upstream connection this one borrowed:
    /// driven as a pass (which moves the upstream's bytes too). A hangup
    /// is remembered: its EOF may wait unread behind an answer read whole,
    /// and such a connection must not be pooled (no edge would tell).
    pub fn on_upstream_ready(&mut self, readiness: Readiness, ctx: &mut Ctx<'_>) -> super::Flow {
        if let Some(link) = self
            .buffers
            .as_deref_mut()
            .and_then(|b| b.upstream.as_deref_mut())
        {
            link.hung_up |= readiness.hangup || readiness.error;
        }
        // The client's socket was left empty and no event of its own has
        // come since: the pass relays the answer without reading it (a
        // read would find nothing, one wasted call per forwarded request).
        let drained = self.transport.found_drained();
        self.drive_from(drained, ctx)
    }

    /// The forwarded request's answer head did not come within
    /// `--upstream-timeout`: 504.
    pub(super) fn upstream_timed_out(&mut self, ctx: &mut Ctx<'_>) -> super::Flow {
        if let Some(buffers) = self.buffers.as_deref_mut() {
            fail(&mut self.session, Fault::of(Failure::Timeout), buffers, ctx);
        }
        self.release_upstream(ctx);
        self.drive(ctx)
    }

    /// With `--upstream`, whether something waited for the output to
    /// drain, which it has since: the upstream's read stopped for lack of
    /// room, or a request in hand was not started (the output was over
    /// the high-water mark when the exchange before it ended). The pass
    /// goes on to it: no edge will come for either.
    pub(super) fn upstream_waits_on_output(&self) -> bool {
        let Some(buffers) = self.buffers.as_deref() else {
            return false;
        };
        buffers.upstream.as_deref().is_some_and(|link| {
            link.paused
                || (!buffers.input.is_empty()
                    && self.session.closing().is_none()
                    && buffers.in_flight.is_none())
        })
    }

    /// Moves the forwarded exchange on: connect, send, read, relay.
    /// Returns whether the session may take more of the input (the
    /// exchange ended, or the request body found room upstream).
    pub(super) fn pump_upstream(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(buffers) = self.buffers.as_deref_mut() else {
            return false;
        };
        let mut went_on = false;
        if self.session.is_forwarding(Some(buffers)) {
            let before = buffers.upstream.as_deref().map_or(0, UpstreamLink::pending);
            if let Err(fault) = exchange(&mut self.session, buffers, ctx) {
                fail(&mut self.session, fault, buffers, ctx);
            }
            let after = buffers.upstream.as_deref().map_or(0, UpstreamLink::pending);
            // The request body found room upstream, or the exchange ended
            // here (its answer relayed, its body in): what the input holds
            // already (a request behind it) brings no new edge.
            let ended = !self.session.is_forwarding(Some(buffers));
            went_on = (after < before || ended) && !buffers.input.is_empty();
        }
        if !self.session.is_forwarding(self.buffers.as_deref()) {
            went_on |= self.release_upstream(ctx);
        }
        went_on
    }

    /// The exchange is over (or abandoned): its upstream connection goes
    /// back to the pool if it may carry another, else it is closed.
    /// Returns whether one was held.
    pub(super) fn release_upstream(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let Some(link) = self
            .buffers
            .as_deref_mut()
            .and_then(|b| b.upstream.as_deref_mut())
        else {
            return false;
        };
        let Some(key) = link.key.take() else {
            return false;
        };
        if link.reusable() && !ctx.draining {
            ctx.upstreams.give_back(key, ctx.timers, ctx.now);
        } else {
            ctx.upstreams.close(key, ctx.timers);
        }
        true
    }
}

/// Tells the session of `fault` (a 502, 504 or a cut answer), counted
/// and logged with the upstream's address.
fn fail(session: &mut Session, fault: Fault, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
    let detail = fault.describe(ctx);
    if ctx.upstreams.warning_allowed(ctx.now) {
        tracing::warn!(reason = fault.failure.label(), "{detail}");
    }
    session.upstream_failed(fault.failure, &detail, buffers, ctx);
}

/// One go at the exchange's I/O: a connection, the request's bytes up,
/// the answer's in (relayed as they come), until the sockets would block
/// or the client's output is full. A pooled connection found closed
/// before any answer is retried once on a fresh one, when that is safe.
fn exchange(session: &mut Session, buffers: &mut Buffers, ctx: &mut Ctx<'_>) -> Result<(), Fault> {
    loop {
        match exchange_once(session, buffers, ctx) {
            Err(fault) if fault.failure == Failure::Refused => {
                // The name's next address, if it has one not yet tried
                // (`localhost` is 127.0.0.1 and ::1; a service may listen
                // on either alone).
                let Some(link) = buffers.upstream.as_deref_mut() else {
                    return Err(fault);
                };
                let addresses = ctx
                    .settings
                    .upstream
                    .as_ref()
                    .map_or(1, |up| up.addrs.len());
                link.tries += 1;
                if usize::from(link.tries) >= addresses {
                    return Err(fault);
                }
                if let Some(key) = link.key.take() {
                    ctx.upstreams.close(key, ctx.timers);
                }
                link.connected = false;
            }
            Err(fault) if fault.failure == Failure::Reset => {
                let Some(link) = buffers.upstream.as_deref_mut() else {
                    return Err(fault);
                };
                if !link.can_retry() {
                    return Err(fault);
                }
                if let Some(key) = link.key.take() {
                    ctx.upstreams.close_raced(key, ctx.timers, ctx.now);
                }
                link.restart();
                ctx.stats.upstream_retries.add(1);
                tracing::debug!("a pooled upstream connection was closed: sending again");
            }
            outcome => return outcome,
        }
    }
}

fn exchange_once(
    session: &mut Session,
    buffers: &mut Buffers,
    ctx: &mut Ctx<'_>,
) -> Result<(), Fault> {
    let Some(link) = buffers.upstream.as_deref_mut() else {
        return Ok(());
    };
    if matches!(link.relay, Relay::Done { .. }) {
        // Answered whole; only the request's end is awaited.
        return session.relay(buffers, ctx).map_err(Fault::of);
    }
    if !connected(link, ctx)? {
        return Ok(());
    }
    if let Err(fault) = send(link, ctx) {
        if link.can_retry() {
            return Err(fault);
        }
        // Its answer (maybe an early one, already in the socket) decides.
        link.send_broken = true;
        link.trimmed = true;
    }
    receive(session, buffers, ctx)
}

/// Gives the link a connection (the pool's warmest, or a new connect;
/// never a pooled one for a retry) and sees whether it is connected.
fn connected(link: &mut UpstreamLink, ctx: &mut Ctx<'_>) -> Result<bool, Fault> {
    let key = match link.key {
        Some(key) => key,
        None => {
            let pooled = match link.retried {
                false => ctx.upstreams.take_idle(ctx.key, ctx.timers, ctx.now),
                true => None,
            };
            if let Some(key) = pooled {
                link.key = Some(key);
                link.connected = true;
                link.reused = true;
                return Ok(true);
            }
            let Some(addrs) = ctx.settings.upstream.as_ref().map(|up| &up.addrs[..]) else {
                return Err(Fault::of(Failure::Refused));
            };
            let addr = ctx.upstreams.address(addrs, link.tries);
            let key = ctx
                .upstreams
                .connect(addr, ctx.key)
                .map_err(|e| Fault::io(Failure::Refused, e))?;
            ctx.stats.upstream_connections.add(1);
            link.key = Some(key);
            key
        }
    };
    if link.connected {
        return Ok(true);
    }
    let Some(stream) = ctx.upstreams.stream(key) else {
        return Err(Fault::of(Failure::Refused));
    };
    if let Ok(Some(error)) | Err(error) = stream.take_error() {
        return Err(Fault::io(Failure::Refused, error));
    }
    match stream.peer_addr() {
        Ok(addr) => {
            link.connected = true;
            ctx.upstreams.connected_to(addr);
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotConnected || would_block(&e) => Ok(false),
        Err(e) => Err(Fault::io(Failure::Refused, e)),
    }
}

/// Sends what the link holds of the request, until the socket is full.
fn send(link: &mut UpstreamLink, ctx: &mut Ctx<'_>) -> Result<(), Fault> {
    if link.send_broken {
        link.out.clear();
        link.sent = 0;
        return Ok(());
    }
    let Some(mut stream) = link.key.and_then(|key| ctx.upstreams.stream(key)) else {
        return Ok(());
    };
    while link.pending() > 0 {
        match stream.write(link.unsent()) {
            Ok(0) => return Err(Fault::of(Failure::Reset)),
            Ok(n) => link.wrote(n),
            Err(e) if would_block(&e) => break,
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(Fault::io(Failure::Reset, e)),
        }
    }
    Ok(())
}

/// Reads the answer while the output has room, relaying each read.
fn receive(session: &mut Session, buffers: &mut Buffers, ctx: &mut Ctx<'_>) -> Result<(), Fault> {
    loop {
        session.relay(buffers, ctx).map_err(|failure| Fault {
            failure: eof_failure(failure, buffers),
            error: None,
        })?;
        let full = buffers.output.pending() >= OUTPUT_HIGH_WATER;
        let Some(link) = buffers.upstream.as_deref_mut() else {
            return Ok(());
        };
        if !session_awaits_bytes(link) {
            return Ok(());
        }
        if full {
            link.paused = true;
            return Ok(());
        }
        link.paused = false;
        let Some(mut stream) = link.key.and_then(|key| ctx.upstreams.stream(key)) else {
            return Ok(());
        };
        let spare = link.input.spare(MAX_UPSTREAM_HEAD);
        if spare.is_empty() {
            link.paused = true; // a whole buffer waits on the output
            return Ok(());
        }
        match stream.read(spare) {
            Ok(0) => link.eof = true,
            Ok(n) => {
                link.input.filled(n);
                link.answered = true;
            }
            Err(e) if would_block(&e) => return Ok(()),
            Err(e) if interrupted(&e) => {}
            Err(e) if link.answered => return Err(Fault::io(cut_or_bad(link), e)),
            Err(e) => return Err(Fault::io(Failure::Reset, e)),
        }
    }
}

/// Whether the relay can use more of the answer: it is not relayed
/// whole, and the upstream has not closed.
fn session_awaits_bytes(link: &UpstreamLink) -> bool {
    !matches!(link.relay, Relay::Done { .. }) && !link.eof
}

/// A reset after the answer began: a cut body, or a broken head.
fn cut_or_bad(link: &UpstreamLink) -> Failure {
    match link.answer_begun() {
        true => Failure::Cut,
        false => Failure::BadResponse,
    }
}

/// The relay's failure as the connection counts it: a close before a
/// byte of the answer came back is a reset (maybe the pool's race).
fn eof_failure(failure: Failure, buffers: &Buffers) -> Failure {
    match buffers.upstream.as_deref() {
        Some(link) if failure == Failure::Reset && link.answered => Failure::BadResponse,
        _ => failure,
    }
}
