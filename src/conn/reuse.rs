//! What a connection tells of its idle gaps: after each event its stamps
//! count the responses that finished, and a request that reused it after
//! a response is reported ([`Reuse`]) with its gap and the headroom left
//! before the idle deadline.
//!
//! Near the end of the keep-alive promise (the advertised
//! `Keep-Alive: timeout`, before the grace kept past it) both ends of the
//! gap are taken close to the wire. The request's arrival is the kernel's
//! receive stamp on the read (the loop may read it a while after it came),
//! and the response that follows such a request is stamped with a fresh
//! clock reading as its write begins (the turn's reading comes before the
//! request was even read, the idle timer's start after the response
//! left). So a reuse at 1999.97 ms on the wire is not called past a 2 s
//! promise, and one the loop read late is judged by when it came.
//! Everywhere else a connection pays no syscall and no clock read for this.

use super::{Conn, State};
use crate::config::Settings;
use crate::ctx::Ctx;
use crate::observe::{Event, Reuse};
use crate::timers::Micros;

/// How close to the end of its keep-alive promise an idle connection
/// reads with the kernel's receive stamp: wider than the loop is ever late to a
/// readable socket, short enough that few reuses pay for the stamp.
pub(super) const STAMP_ARRIVAL_WITHIN_US: Micros = 100_000;

impl Conn {
    /// This connection's real idle timeout in ms (the application may set
    /// one of its own, see `app::KeepTerms`).
    pub fn idle_timeout_ms(&self, settings: &Settings) -> u64 {
        self.session.kept_on().keep_alive_ms(settings)
    }

    /// How long it is kept idle past what its responses advertise, µs
    /// (none when they advertise nothing).
    pub fn grace_us(&self, settings: &Settings) -> Micros {
        let kept = self.idle_timeout_ms(settings).saturating_mul(1000);
        let promised = self
            .advertised_secs(settings)
            .map(|secs| secs.saturating_mul(1_000_000));
        promised.map_or(0, |promised| kept.saturating_sub(promised))
    }

    /// What its responses advertise as `Keep-Alive: timeout=`, in seconds.
    pub fn advertised_secs(&self, settings: &Settings) -> Option<u64> {
        self.session.kept_on().advertised_secs(settings)
    }

    /// After an event (or before a close, `closing`): the stamps count
    /// what finished, and the observer hears of responses done and of a
    /// request that reused the connection.
    ///
    /// A request that came near the end of the keep-alive promise (its
    /// read took the kernel's stamp, [`Ctx::arrived`]) is likely followed
    /// by another such: its response's end is stamped with the fresh clock
    /// reading taken as its last write began ([`Ctx::departed`]) rather
    /// than the turn's, taken before the request was even read, so that
    /// the next reuse's gap runs from when the response left, as on the
    /// wire. Other responses cost no clock read.
    pub fn account(&mut self, closing: bool, ctx: &mut Ctx<'_>) {
        let progress = self.progress();
        let now = ctx.departed().map_or(ctx.now, |at| at.max(ctx.now));
        let seen = match closing {
            false => self.stamps.observe(progress, now, ctx.stats),
            true => self.stamps.closed(progress, now, ctx.stats),
        };
        if let Some(gap_us) = seen.reuse_gap_us {
            let reuse = self.reuse(gap_us, now, ctx);
            ctx.observe(Event::Reused(reuse));
        }
        if seen.finished > 0 {
            ctx.observe(Event::ResponsesDone(seen.finished));
        }
    }

    /// A request began on this connection, idle for `gap_us` since its
    /// last response as of loop time `seen`: the reuse as the observer
    /// hears it, with what was left before the idle deadline (the
    /// keep-alive timer's own, while it is still armed) when the request
    /// arrived. Near the end of the promise the read took the kernel's
    /// receive stamp ([`Ctx::arrived`]): a request the loop read after the
    /// deadline may have come before it, and is then judged by when it
    /// came; its gap, too, ends when it came.
    fn reuse(&self, gap_us: Micros, seen: Micros, ctx: &Ctx<'_>) -> Reuse {
        let (now, settings) = (ctx.now, ctx.settings);
        let idle_timeout_ms = self.idle_timeout_ms(settings);
        let deadline = self.slots.keep_alive().map(|id| ctx.timers.deadline(id));
        let arrived = ctx.arrived().unwrap_or(now);
        let gap_us = gap_us.saturating_sub(seen.saturating_sub(arrived));
        let headroom_us = match deadline {
            Some(deadline) => signed(deadline) - signed(arrived),
            None => signed(idle_timeout_ms.saturating_mul(1000)) - signed(gap_us),
        };
        if let Some(deadline) = deadline.filter(|&deadline| deadline < now) {
            // The request cancels a timer that was already due: the loop
            // was late for it, as it would be had the timer fired now.
            ctx.stats.timer_overdue(now - deadline);
        }
        Reuse {
            gap_us,
            headroom_us,
            idle_timeout_ms,
            advertised_secs: self.advertised_secs(settings),
            past_deadline: self.slots.in_shadow(),
        }
    }

    /// An idle connection within [`STAMP_ARRIVAL_WITHIN_US`] of the end of
    /// its promise (the advertised `Keep-Alive: timeout`, before the grace
    /// kept past it), or beyond: whether the request that reuses it came
    /// inside the promise, or before the deadline, is a matter of
    /// microseconds, and the loop may read it a while after it came, so
    /// this read asks the kernel when it arrived (see `Conn::reuse`). Any
    /// other read is a plain one: the stamp costs a `setsockopt` and a
    /// `recvmsg`.
    pub(super) fn stamps_arrival(&self, ctx: &Ctx<'_>) -> bool {
        match (self.state, self.slots.keep_alive()) {
            (State::Idle, Some(id)) => {
                let promise = ctx
                    .timers
                    .deadline(id)
                    .saturating_sub(self.grace_us(ctx.settings));
                promise <= ctx.now.saturating_add(STAMP_ARRIVAL_WITHIN_US)
            }
            _ => false,
        }
    }

    /// Before a write on a connection whose request came near the end of
    /// its promise: when the response leaves, by a fresh clock reading
    /// (see `Conn::account`). A reading after the write would be late by
    /// the write itself, which on loopback delivers the segment to the
    /// peer and wakes it.
    pub(super) fn note_departure(&self, ctx: &mut Ctx<'_>) {
        let output = || {
            let buffers = self.buffers.as_deref();
            buffers.is_some_and(|b| b.output.pending() > 0)
        };
        if ctx.arrived().is_some() && output() {
            ctx.stamp_departure();
        }
    }
}

/// A loop time or span as a signed count, for differences that may be
/// negative.
fn signed(us: Micros) -> i64 {
    i64::try_from(us).unwrap_or(i64::MAX)
}
