//! Drives a socket-free `Session` in-process, as a connection does (and as
//! fuzz/fuzz_targets/session.rs does): bytes go into the input buffer as far
//! as its limit allows, `process` runs after every piece, `/delay` timers
//! fire at once, and output is drained into `wire`. The Date cache is pinned
//! to one instant, so the output depends only on the input.

#![allow(dead_code)]

use std::time::{Duration, UNIX_EPOCH};

use keepalive_server::Settings;
use keepalive_server::app::filler;
use keepalive_server::ctx::{Ctx, Resources};
use keepalive_server::pool::Buffers;
use keepalive_server::session::Session;
use keepalive_server::stats::{CloseCause, Stats};
use keepalive_server::timers::Micros;

/// The instant the pinned Date cache shows: Sun, 06 Nov 1994 08:49:37 GMT.
pub const PINNED_DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

pub struct Driver {
    pub settings: Settings,
    pub resources: Resources,
    pub stats: Stats,
    pub now: Micros,
    /// The server is shutting down (`ctx.draining`).
    pub draining: bool,
    pub session: Session,
    pub buffers: Box<Buffers>,
    /// Everything sent so far.
    pub wire: Vec<u8>,
}

impl Driver {
    pub fn new(settings: Settings) -> Self {
        let mut resources = Resources::default();
        let buffers = resources.pool.take();
        // Valid until invalidated, which only the Date timer does: pinned.
        resources
            .date
            .refresh(UNIX_EPOCH + Duration::from_secs(784_111_777));
        Driver {
            settings,
            resources,
            stats: Stats::default(),
            now: 0,
            draining: false,
            session: Session::new(),
            buffers,
            wire: Vec::new(),
        }
    }

    /// Runs `f` on the session with a context a millisecond after the last.
    pub fn with_ctx<R>(
        &mut self,
        f: impl FnOnce(&mut Session, &mut Buffers, &mut Ctx<'_>) -> R,
    ) -> R {
        self.now += 1000;
        let observer = &mut keepalive_server::observe::Ignore;
        let mut ctx = self
            .resources
            .lend(self.now, &self.settings, &self.stats, observer);
        ctx.draining = self.draining;
        ctx.conn.id = 7;
        f(&mut self.session, &mut self.buffers, &mut ctx)
    }

    /// Sends all pending output into `wire`, then what the connection
    /// would write of a generated body behind it (one vectored write's
    /// worth).
    pub fn drain(&mut self) {
        let output = &mut self.buffers.output;
        self.wire.extend_from_slice(output.unsent());
        output.advance(output.pending());
        if let Some(remaining) = self.session.filler_due(&self.buffers) {
            let mut iov = [std::io::IoSlice::new(&[]); filler::MAX_SLICES];
            let slices = filler::slices(remaining, &mut iov);
            let before = self.wire.len();
            for slice in &iov[..slices] {
                self.wire.extend_from_slice(slice);
            }
            self.session
                .filler_sent((self.wire.len() - before) as u64, &mut self.buffers);
        }
    }

    /// Processes what is buffered, answers delays, drains the output (and
    /// goes on while a generated body is owed).
    pub fn process(&mut self) {
        loop {
            self.process_once();
            self.drain();
            if self.session.is_generating(Some(&self.buffers)) {
                continue;
            }
            if !self.session.is_delayed(Some(&self.buffers)) {
                return;
            }
            self.with_ctx(|session, buffers, ctx| session.delay_elapsed(buffers, ctx));
        }
    }

    /// One `process` call, the output left unsent.
    pub fn process_once(&mut self) {
        self.with_ctx(|session, buffers, ctx| session.process(buffers, ctx));
    }

    /// Feeds `piece` as the input buffer takes it, processing after each
    /// read. Panics if the session stops taking input before closing.
    pub fn feed(&mut self, mut piece: &[u8]) {
        let limit = Session::input_limit(&self.settings);
        while !piece.is_empty() {
            let spare = self.buffers.input.spare(limit);
            let take = spare.len().min(piece.len());
            spare[..take].copy_from_slice(&piece[..take]);
            self.buffers.input.filled(take);
            piece = &piece[take..];
            self.process();
            if take == 0 {
                assert!(
                    self.session.closing().is_some(),
                    "input full and nothing moves: {:?}",
                    self.buffers.in_flight
                );
                return;
            }
        }
    }

    /// A receive timer fires; the output is left unsent.
    pub fn time_out(&mut self, cause: CloseCause) -> bool {
        self.with_ctx(|session, buffers, ctx| session.time_out(cause, buffers, ctx))
    }

    pub fn wire_text(&self) -> String {
        String::from_utf8_lossy(&self.wire).into_owned()
    }
}

/// Replaces every `Date: <IMF-fixdate>` value with the pinned one, for
/// comparing output from a real server.
pub fn normalise_dates(wire: &[u8]) -> Vec<u8> {
    let mut out = wire.to_vec();
    let key = b"\r\nDate: ";
    let mut at = 0;
    while let Some(found) = out[at..].windows(key.len()).position(|w| w == key) {
        let start = at + found + key.len();
        let end = (start + PINNED_DATE.len()).min(out.len());
        out[start..end].copy_from_slice(&PINNED_DATE.as_bytes()[..end - start]);
        at = end;
    }
    out
}
