//! What a connection does to its socket: registration with the worker's
//! poll, reads into the input buffer, flushes of the output and of a
//! generated body behind it, Nagle, and the write shutdown.

use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;

use mio::{Interest, Registry, Token};

use super::{Conn, GENERATE_BUDGET, would_block};
use crate::app::filler::{self, FillerFile};
use crate::ctx::Ctx;
use crate::session::Session;

/// Outcome of one flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything queued is sent; `wrote`: some of it in this flush.
    All { wrote: bool },
    /// The socket took what it could; a writable edge will come.
    Blocked,
    /// A generated body's write budget is spent: go on next turn.
    Yielded,
}

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
        match self.registered {
            Registered::No => registry.register(&mut self.stream, token, interest)?,
            _ => registry.reregister(&mut self.stream, token, interest)?,
        }
        self.registered = wanted;
        Ok(())
    }

    /// Turns Nagle's algorithm off, once, when it could first matter: as the
    /// connection goes idle between requests (the next response may follow
    /// a segment still unacknowledged) or when a write backs up. A response
    /// on a fresh connection has nothing in flight for Nagle to wait on, so
    /// one-request connections never pay the syscall (nginx does the same).
    pub(super) fn disable_nagle(&mut self) {
        if !self.nodelay {
            self.nodelay = true;
            let _ = self.stream.set_nodelay(true);
        }
    }

    /// The connection's smoothed round trip as the kernel measures it
    /// (`TCP_INFO`'s `tcpi_rtt`), µs; `None` if the socket cannot say.
    /// One system call: made at an idle close and a late request only.
    pub(super) fn round_trip_us(&self) -> Option<u32> {
        let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `info`, a
        // buffer of exactly that size that lives here, for a descriptor
        // this connection owns. `tcp_info` holds only integers, so the
        // zeroed value, or one the kernel filled in part (an older kernel's
        // shorter struct), is a valid one to read. Neither socket2 nor
        // rustix offers TCP_INFO.
        let rc = unsafe {
            libc::getsockopt(
                self.stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        // SAFETY: as above, every bit pattern of it is valid.
        (rc == 0).then(|| unsafe { info.assume_init() }.tcpi_rtt)
    }

    /// Shuts the write side once (over TLS, after `close_notify`); false
    /// if the socket is already gone.
    pub(super) fn shut_write(&mut self) -> bool {
        if !self.write_shut {
            self.write_shut = true;
            self.say_close_notify();
            return self.stream.shutdown(Shutdown::Write).is_ok();
        }
        true
    }

    pub(super) fn read(&mut self, ctx: &mut Ctx<'_>) -> io::Result<ReadOutcome> {
        if self.tls.is_some() {
            return self.read_tls(ctx);
        }
        let limit = Session::input_limit(ctx.settings);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        if spare.is_empty() {
            return Ok(ReadOutcome::Full);
        }
        let asked = spare.len();
        let n = self.stream.read(spare)?;
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        self.moved = true;
        if self.session.closing().is_some() {
            // Draining: counted (a Done close that read nothing needs no
            // linger), then dropped.
            self.lingered = self.lingered.saturating_add(n as u32);
        } else {
            buffers.input.filled(n);
        }
        Ok(ReadOutcome::Got { short: n < asked })
    }

    /// Writes queued output until it is all sent or the socket is full.
    ///
    /// `closes_next`: the connection closes right after this flush. Its
    /// writes then go with MSG_MORE, so the kernel holds the last segment
    /// back and the close sends the FIN in it: one segment (and one ACK)
    /// fewer per one-request connection. The close pushes whatever is held.
    ///
    /// A generated body owed behind the output goes in the same writes, as
    /// slices of the shared filler block after what the output holds (one
    /// `writev`, no copy), at most [`GENERATE_BUDGET`] of them per pass.
    ///
    /// With the worker's filler file, the body goes by `sendfile` after the
    /// head (sent with MSG_MORE so both share segments): the kernel copies
    /// from its own pages, and this process not at all.
    pub(super) fn flush(
        &mut self,
        closes_next: bool,
        file: Option<&FillerFile>,
    ) -> io::Result<Flushed> {
        if self.tls.is_some() {
            return self.flush_tls(closes_next);
        }
        let mut wrote = false;
        let mut filler_writes = 0;
        let Some(buffers) = self.buffers.as_deref_mut() else {
            return Ok(Flushed::All { wrote });
        };
        loop {
            let pending = buffers.output.pending();
            let filler_due = self.session.filler_due(buffers);
            if pending == 0 && filler_due.is_none() {
                return Ok(Flushed::All { wrote });
            }
            let sent = if let Some(remaining) = filler_due {
                if filler_writes == GENERATE_BUDGET {
                    return Ok(Flushed::Yielded);
                }
                filler_writes += 1;
                // Its writes follow one another: without Nagle, the last
                // short segment need not wait for the previous one's ACK.
                if !self.nodelay {
                    self.nodelay = true;
                    let _ = self.stream.set_nodelay(true);
                }
                match file {
                    Some(_) if pending > 0 => socket2::SockRef::from(&self.stream).send_with_flags(
                        buffers.output.unsent(),
                        libc::MSG_MORE | libc::MSG_NOSIGNAL,
                    ),
                    Some(file) => file.send(&self.stream, remaining),
                    None => {
                        let mut iov = [IoSlice::new(&[]); 1 + filler::MAX_SLICES];
                        iov[0] = IoSlice::new(buffers.output.unsent());
                        let slices = filler::slices(remaining, &mut iov[1..]);
                        self.stream.write_vectored(&iov[..1 + slices])
                    }
                }
            } else if closes_next {
                socket2::SockRef::from(&self.stream)
                    .send_with_flags(buffers.output.unsent(), libc::MSG_MORE | libc::MSG_NOSIGNAL)
            } else {
                self.stream.write(buffers.output.unsent())
            };
            match sent {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    let from_output = n.min(pending);
                    buffers.output.advance(from_output);
                    if n > from_output {
                        self.session.filler_sent((n - from_output) as u64, buffers);
                    }
                    self.moved = true;
                    wrote = true;
                }
                Err(e) if would_block(&e) => {
                    self.disable_nagle();
                    self.polls_writable = true;
                    return Ok(Flushed::Blocked);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
