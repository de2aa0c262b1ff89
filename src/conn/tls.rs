//! A connection's socket calls when it speaks TLS: the same read, flush,
//! close and watch as `socket` and `watch` make on a plain socket, through
//! the connection's [`TlsConn`] (see `crate::tls` for the picture).
//!
//! What differs from plain: a handshake comes first (the connection's
//! phase is `Handshake` until it completes, under the headers deadline
//! from accept); output goes through rustls, whose backlog of records
//! counts as pending output; a `/bytes` body is encrypted from the filler
//! block rather than sent with `sendfile`; a close says `close_notify`
//! before its FIN (a reset says nothing).

use std::io::{self, IoSlice};

use super::socket::{Flushed, ReadOutcome};
use super::{Conn, GENERATE_BUDGET, would_block};
use crate::app::filler;
use crate::ctx::{ConnLabel, Ctx};
use crate::session::Session;
use crate::tls::{HandshakeFailure, Plain, TlsConn, TlsVersion, WatchRead};

/// Plaintext handed to rustls per flush of a generated body before the
/// connection yields: as much as a plain connection sends in its
/// [`GENERATE_BUDGET`] writes of the filler.
const GENERATE_BYTES: usize = GENERATE_BUDGET as usize * 256 * 1024;

impl Conn {
    /// Reads plaintext into the input buffer through TLS (see
    /// [`Conn::read`] for the plain one); counts a completed handshake,
    /// and a failed one.
    pub(super) fn read_tls(&mut self, ctx: &mut Ctx<'_>) -> io::Result<ReadOutcome> {
        let limit = Session::input_limit(ctx.settings);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        if spare.is_empty() {
            return Ok(ReadOutcome::Full);
        }
        let Some(tls) = self.tls.as_deref_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let handshaking = tls.is_handshaking();
        let read = tls.read(&mut self.stream, spare);
        if let Some(version) = tls.take_completed() {
            ctx.stats.tls.handshake(version);
        }
        let failed = match &read {
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Some(HandshakeFailure::Error),
            Err(e) if !would_block(e) && e.kind() != io::ErrorKind::Interrupted => {
                Some(HandshakeFailure::Closed)
            }
            Ok(Plain::Eof) => Some(HandshakeFailure::Closed),
            _ => None,
        };
        if let Some(why) = failed.filter(|_| handshaking) {
            ctx.stats.tls.failure(why);
            let ConnLabel { id, peer, .. } = ctx.conn;
            tracing::debug!(conn = id, %peer, reason = why.label(), "TLS handshake failed");
        }
        match read? {
            Plain::Eof => Ok(ReadOutcome::Eof),
            Plain::Data { n, short } => {
                self.moved = true;
                if self.session.closing().is_some() {
                    self.lingered = self.lingered.saturating_add(n as u32);
                } else {
                    buffers.input.filled(n);
                }
                Ok(ReadOutcome::Got { short })
            }
        }
    }

    /// Hands rustls the queued output (and a generated body behind it) and
    /// sends its records, until all is sent or the socket is full (see
    /// [`Conn::flush`] for the plain one). Works without buffers too: an
    /// idle connection may still owe a handshake message or a ticket.
    pub(super) fn flush_tls(&mut self, closes_next: bool) -> io::Result<Flushed> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let mut wrote = false;
        let mut generated = 0;
        loop {
            let mut owed = false;
            // Nothing but the handshake goes out before it completes (no
            // request can have been read, so nothing is queued).
            let handshaking = tls.is_handshaking();
            if let Some(buffers) = self.buffers.as_deref_mut().filter(|_| !handshaking) {
                let pending = buffers.output.pending();
                let taken = tls.take_plaintext(buffers.output.unsent());
                buffers.output.advance(taken);
                owed = taken < pending;
                if !owed && let Some(remaining) = self.session.filler_due(buffers) {
                    if generated >= GENERATE_BYTES {
                        return Ok(Flushed::Yielded);
                    }
                    let mut iov = [IoSlice::new(&[]); filler::MAX_SLICES];
                    let slices = filler::slices(remaining, &mut iov);
                    let taken = tls.take_slices(&iov[..slices]);
                    generated += taken;
                    self.session.filler_sent(taken as u64, buffers);
                    owed = self.session.filler_due(buffers).is_some();
                    if !self.nodelay {
                        self.nodelay = true;
                        let _ = self.stream.set_nodelay(true);
                    }
                }
            }
            let had_backlog = tls.has_backlog();
            let sent = tls.send(&self.stream, closes_next && !owed)?;
            if had_backlog {
                self.moved = true;
                wrote = true;
            }
            if !sent {
                if !self.nodelay {
                    self.nodelay = true;
                    let _ = self.stream.set_nodelay(true);
                }
                self.polls_writable = true;
                return Ok(Flushed::Blocked);
            }
            if !owed {
                return Ok(Flushed::All { wrote });
            }
        }
    }

    /// Before the FIN: `close_notify`, so the peer's TLS sees an orderly
    /// end rather than a truncation.
    pub(super) fn say_close_notify(&mut self) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.close_notify(&self.stream);
        }
    }

    /// During the watch after an idle close over TLS: whether what came
    /// is a request or the peer's close.
    pub(super) fn watch_tls(&mut self, budget: u32) -> io::Result<WatchRead> {
        match self.tls.as_deref_mut() {
            Some(tls) => tls.watch(&mut self.stream, budget),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// The connection's TLS, if it speaks TLS.
    pub(super) fn tls(&self) -> Option<&TlsConn> {
        self.tls.as_deref()
    }

    /// The negotiated TLS version, for the access log.
    pub fn tls_version(&self) -> Option<TlsVersion> {
        self.tls().and_then(TlsConn::version)
    }

    /// A handshake still in progress is ending (its deadline passed, or
    /// the connection is closing for another reason): counted once.
    pub(super) fn handshake_cut(&self, why: HandshakeFailure, ctx: &Ctx<'_>) {
        if self.tls().is_some_and(TlsConn::is_handshaking) {
            ctx.stats.tls.failure(why);
        }
    }
}
