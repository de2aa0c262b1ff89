//! What a connection asks of its transport: registration with the
//! worker's poll, reads into the input buffer, and flushes of the output
//! and of a generated body behind it. The calls themselves, plain or TLS,
//! are the transport's ([`super::Transport`]).

use std::io;

use mio::{Interest, Registry, Token};

use super::Conn;
use super::transport::{Flushed, Got, Outgoing};
use crate::app::filler::FillerFile;
use crate::ctx::Ctx;
use crate::session::Session;

/// Outcome of one read.
pub(super) enum ReadOutcome {
    /// Bytes arrived; `short`: fewer than there was room for.
    Got {
        short: bool,
    },
    Eof,
    /// No room: the input waits on a response.
    Full,
}

/// What the worker's poll asks of a connection's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Registered {
    /// Not registered: a connection that is served and closed in the turn
    /// it was accepted never touches epoll.
    No,
    Readable,
    ReadableWritable,
}

impl Conn {
    /// Whether [`Conn::register`] has something to do.
    pub fn registration_due(&self) -> bool {
        let wanted = if self.polls_writable {
            Registered::ReadableWritable
        } else {
            Registered::Readable
        };
        self.registered != wanted
    }

    /// Registers the socket with the worker's poll, or widens what it
    /// asks for. Readable only until a write backs up: a fresh socket is
    /// writable at once, and an EPOLLOUT edge at registration would wake
    /// the worker for a connection with nothing to read yet. Registering
    /// after reading loses nothing: epoll reports what is already pending
    /// when a socket is added or modified, edge-triggered or not.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let (wanted, interest) = if self.polls_writable {
            (
                Registered::ReadableWritable,
                Interest::READABLE | Interest::WRITABLE,
            )
        } else {
            (Registered::Readable, Interest::READABLE)
        };
        let again = self.registered != Registered::No;
        self.transport.register(registry, token, interest, again)?;
        self.registered = wanted;
        Ok(())
    }

    /// Reads what the peer sent into the input buffer (taken from the
    /// pool if the connection has none); while closing, counts it and
    /// drops it.
    pub(super) fn read(&mut self, ctx: &mut Ctx<'_>) -> io::Result<ReadOutcome> {
        let limit = Session::input_limit(ctx.settings);
        let stamped = self.stamps_arrival(ctx);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        if spare.is_empty() {
            return Ok(ReadOutcome::Full);
        }
        let got = match stamped {
            false => self.transport.read(spare, ctx)?,
            true => {
                let (got, stamp) = self.transport.read_stamped(spare, ctx)?;
                ctx.stamp_arrival(stamp);
                got
            }
        };
        let (n, short) = match got {
            Got::Eof => return Ok(ReadOutcome::Eof),
            Got::Data { n, short } => (n, short),
        };
        // Activity is input given, or on its way: part of a TLS record.
        // A record that gives nothing (a key update, an empty record) is
        // not, or a client could hold an idle connection open with them.
        if n > 0 || self.transport.has_partial_input() {
            self.moved = true;
        }
        if self.session.closing().is_some() {
            // Draining: counted (a Done close that read nothing needs no
            // linger), then dropped.
            self.lingered = self.lingered.saturating_add(n as u32);
        } else {
            buffers.input.filled(n);
        }
        Ok(ReadOutcome::Got { short })
    }

    /// Sends queued output (and a generated body behind it) until it is
    /// all sent or the socket is full; `closes_next`: the connection
    /// closes right after (the transport may hold the last segment for the
    /// FIN). A blocked flush asks the poll for writability from then on.
    pub(super) fn flush(
        &mut self,
        closes_next: bool,
        file: Option<&FillerFile>,
    ) -> io::Result<Flushed> {
        let out = Outgoing {
            buffers: self.buffers.as_deref_mut(),
            session: &mut self.session,
            closes_next,
            file,
            moved: &mut self.moved,
        };
        let flushed = self.transport.flush(out);
        if let Ok(Flushed::Blocked) = flushed {
            self.polls_writable = true;
        }
        flushed
    }
}
