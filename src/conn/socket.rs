//! What a connection asks of its transport: registration with the
//! worker's poll, reads into the input buffer, and flushes of the output
//! and of a generated body behind it. The calls themselves, plain or TLS,
//! are the transport's ([`super::Transport`]); this is where the
//! session's output is handed to it, as bytes and a [`Generated`] source,
//! and where what went of a generated body is told back to the session.

use std::io::{self, IoSlice};

use mio::net::TcpStream;
use mio::{Registry, Token};

use super::Conn;
use super::transport::{Flushed, Got, Outgoing};
use crate::app::filler::{self, FillerFile};
use crate::ctx::Ctx;
use crate::session::Session;

/// A generated body owed behind the output (`/bytes/<n>`), never
/// buffered: written from the shared filler block (slices of it, no
/// copy), or from the worker's filler file by `sendfile`.
pub(super) struct Generated<'a> {
    remaining: u64,
    file: Option<&'a FillerFile>,
}

impl Generated<'_> {
    /// Most slices one write takes of it.
    pub const MAX_SLICES: usize = filler::MAX_SLICES;

    /// All of it has gone.
    pub fn is_done(&self) -> bool {
        self.remaining == 0
    }

    /// Fills `out` with slices of what is owed next; how many.
    pub fn slices(&self, out: &mut [IoSlice<'_>]) -> usize {
        filler::slices(self.remaining, out)
    }

    /// Whether it goes by `sendfile` ([`Generated::send_file`]).
    pub fn sends_file(&self) -> bool {
        self.file.is_some()
    }

    /// Sends what is owed next from the file to `stream` (none: nothing).
    pub fn send_file(&self, stream: &TcpStream) -> io::Result<usize> {
        match self.file {
            Some(file) => file.send(stream, self.remaining),
            None => Ok(0),
        }
    }

    /// `n` bytes of it went out.
    pub fn sent(&mut self, n: usize) {
        self.remaining = self.remaining.saturating_sub(n as u64);
    }
}

impl Conn {
    /// Whether [`Conn::register`] has something to do.
    pub fn registration_due(&self) -> bool {
        self.transport.registration_due()
    }

    /// Registers the socket with the worker's poll, or widens what it
    /// asks for (see the transport's `register`).
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.transport.register(registry, token)
    }

    /// Reads what the peer sent into the input buffer (taken from the
    /// pool if the connection has none); while closing, counts it and
    /// drops it.
    pub(super) fn read(&mut self, ctx: &mut Ctx<'_>) -> io::Result<Got> {
        let limit = Session::input_limit(ctx.settings);
        let stamped = self.stamps_arrival(ctx);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        let got = match stamped {
            false => self.transport.read(spare, ctx)?,
            true => {
                let (got, stamp) = self.transport.read_stamped(spare, ctx)?;
                ctx.stamp_arrival(stamp);
                got
            }
        };
        if let Got::Data { n, .. } = got {
            if self.session.closing().is_some() {
                // Draining: noted (a Done close that read nothing needs
                // no linger), then dropped.
                self.dropped_input |= n > 0;
            } else {
                buffers.input.filled(n);
            }
            self.after_read(n, ctx);
        }
        Ok(got)
    }

    /// Sends queued output (and a generated body behind it) until it is
    /// all sent or the socket is full; `closes_next`: the connection
    /// closes right after (the transport may hold the last segment for the
    /// FIN). What went of a generated body is told to the session.
    pub(super) fn flush(
        &mut self,
        closes_next: bool,
        file: Option<&FillerFile>,
    ) -> io::Result<Flushed> {
        let buffers = self.buffers.as_deref_mut();
        let due = buffers.as_deref().and_then(|b| self.session.filler_due(b));
        let mut out = Outgoing {
            output: buffers.map(|b| &mut b.output),
            generated: due.map(|remaining| Generated { remaining, file }),
            closes_next,
        };
        let flushed = self.transport.flush(&mut out);
        let left = out.generated.map(|g| g.remaining);
        if let (Some(due), Some(left), Some(buffers)) = (due, left, self.buffers.as_deref_mut())
            && left < due
        {
            self.session.filler_sent(due - left, buffers);
        }
        flushed
    }
}
