//! One TLS connection's state beside its socket: the rustls
//! `ServerConnection`, and how the connection reads, writes, closes and
//! watches through it.
//!
//! The readiness contract holds through rustls: a read reports `short`
//! (the socket is empty, no need to ask again until an edge) only when the
//! socket gave fewer bytes than rustls asked for and no plaintext is left
//! buffered; a read that produced no plaintext but a handshake message to
//! send returns at once, so the connection flushes it before reading on.
//!
//! Output is bounded as a plain connection's is: rustls takes plaintext
//! only while its own backlog of TLS records is under [`BACKLOG_LIMIT`],
//! and that backlog counts as pending output (a response is not done, and
//! the connection is writing, until it has left), so a begun response is
//! sent whole and a slow reader holds at most the output buffer plus this.

use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

use super::TlsVersion;
use super::plain_http::Opening;
use crate::readiness::{interrupted, would_block};

/// Most TLS bytes rustls holds unsent before it refuses more plaintext:
/// the session's own output high-water mark, so one pass can encrypt what
/// the output buffer holds and send it in one `writev`.
pub const BACKLOG_LIMIT: usize = 32 * 1024;

/// What a read through TLS gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plain {
    /// `n` bytes of plaintext (possibly none: TLS records were read, and
    /// there may be a handshake message to send); `short`: the socket is
    /// empty and so is rustls.
    Data { n: usize, short: bool },
    /// The peer closed: `close_notify`, or a TCP FIN without one.
    Eof,
}

/// What the watch after an idle close saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchRead {
    /// Nothing more to read now.
    Nothing,
    /// The read budget ran out with more maybe waiting: read on next turn
    /// (no edge will come for what is already there).
    More,
    /// Application data arrived: a request after our `close_notify`.
    Request,
    /// The peer closed: its own `close_notify`, a FIN, a reset or garbage.
    Closed,
}

/// One connection's rustls state (heap: see `conn`'s size test).
pub struct TlsConn {
    tls: ServerConnection,
    /// The last `read_tls` took fewer bytes than rustls asked for.
    socket_drained: bool,
    /// The handshake's outcome (completed, or failed) has been reported.
    reported: bool,
    /// `close_notify` is queued (or the connection is being reset): the
    /// close adds nothing more.
    closed: bool,
    /// What the first byte said (see `plain_http`).
    opening: Opening,
}

impl TlsConn {
    pub(super) fn new(config: Arc<ServerConfig>) -> io::Result<TlsConn> {
        let mut tls = ServerConnection::new(config).map_err(io::Error::other)?;
        tls.set_buffer_limit(Some(BACKLOG_LIMIT));
        Ok(TlsConn {
            tls,
            socket_drained: false,
            reported: false,
            closed: false,
            opening: Opening::Unread,
        })
    }

    /// What the connection's first byte said (see `plain_http`).
    pub fn opening(&self) -> Opening {
        self.opening
    }

    /// The first byte has been read for what it says.
    pub fn set_opening(&mut self, opening: Opening) {
        self.opening = opening;
    }

    /// The handshake is still in progress.
    pub fn is_handshaking(&self) -> bool {
        self.tls.is_handshaking()
    }

    /// The negotiated version, once the handshake is done.
    pub fn version(&self) -> Option<TlsVersion> {
        self.tls.protocol_version().and_then(TlsVersion::of)
    }

    /// The handshake completed since the last call: its version, once.
    pub fn take_completed(&mut self) -> Option<TlsVersion> {
        if self.reported || self.tls.is_handshaking() {
            return None;
        }
        self.reported = true;
        self.version()
    }

    /// The handshake is ending without having completed: `true` the
    /// first time (while it is still in progress), so it is counted once.
    pub fn fail_handshake(&mut self) -> bool {
        if self.reported || !self.tls.is_handshaking() {
            return false;
        }
        self.reported = true;
        true
    }

    /// TLS bytes wait to be sent (handshake, records, alerts).
    pub fn has_backlog(&self) -> bool {
        self.tls.wants_write()
    }

    /// Reads into `out` what the peer sent, reading TLS records from
    /// `tcp` as needed. `Err(WouldBlock)`: the socket is empty with no
    /// plaintext to give; `Err(InvalidData)`: the peer's TLS failed (the
    /// alert rustls queued is sent first, best effort).
    pub fn read(&mut self, tcp: &mut TcpStream, out: &mut [u8]) -> io::Result<Plain> {
        loop {
            match self.tls.reader().read(out) {
                Ok(0) if !out.is_empty() => return Ok(Plain::Eof),
                Ok(n) => {
                    let short = n < out.len() && self.socket_drained;
                    return Ok(Plain::Data { n, short });
                }
                Err(e) if would_block(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Plain::Eof),
                Err(e) => return Err(e),
            }
            let mut source = Source { tcp, short: false };
            let got = self.tls.read_tls(&mut source)?;
            self.socket_drained = source.short || got == 0;
            let state = match self.tls.process_new_packets() {
                Ok(state) => state,
                Err(e) => {
                    let _ = self.tls.write_tls(&mut Sink { tcp, more: false });
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            };
            let nothing_to_give = state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed();
            if nothing_to_give && got > 0 && (self.tls.wants_write() || self.socket_drained) {
                // A handshake message to answer (flush it before reading
                // on), or a record still arriving on an empty socket.
                return Ok(Plain::Data {
                    n: 0,
                    short: self.socket_drained,
                });
            }
        }
    }

    /// Hands rustls as much of `data` as its backlog limit allows;
    /// returns how much it took.
    pub fn take_plaintext(&mut self, data: &[u8]) -> usize {
        self.tls.writer().write(data).unwrap_or(0)
    }

    /// Hands rustls as much of `slices` as its backlog limit allows.
    pub fn take_slices(&mut self, slices: &[IoSlice<'_>]) -> usize {
        self.tls.writer().write_vectored(slices).unwrap_or(0)
    }

    /// Sends what rustls holds until it is all out (`Ok(true)`) or the
    /// socket is full (`Ok(false)`). `more`: the close follows at once,
    /// so the kernel may hold the last segment for the FIN (MSG_MORE).
    pub fn send(&mut self, tcp: &TcpStream, more: bool) -> io::Result<bool> {
        let mut sink = Sink { tcp, more };
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut sink) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Queues `close_notify` (once) and sends it with whatever is still
    /// queued, best effort: the close or shutdown that follows at once is
    /// the FIN, so the alert goes with MSG_MORE and the FIN rides in its
    /// segment. Nothing is sent for a handshake that never completed, nor
    /// after [`Self::abort`].
    pub fn close_notify(&mut self, tcp: &TcpStream) {
        if std::mem::replace(&mut self.closed, true) || self.tls.is_handshaking() {
            return;
        }
        self.tls.send_close_notify();
        let _ = self.send(tcp, true);
    }

    /// The connection is about to be reset: nothing more is sent.
    pub fn abort(&mut self) {
        self.closed = true;
    }

    /// During the watch after an idle close: reads what arrives and
    /// drops it, telling a request (application data) from the peer's
    /// close (its `close_notify`, a FIN, a reset, or anything rustls
    /// cannot read). Reads at most `budget` times.
    pub fn watch(&mut self, tcp: &mut TcpStream, budget: u32) -> io::Result<WatchRead> {
        let mut request = false;
        for _ in 0..budget {
            let mut source = Source { tcp, short: false };
            let got = match self.tls.read_tls(&mut source) {
                Ok(got) => got,
                Err(e) if would_block(&e) => {
                    return Ok(match request {
                        true => WatchRead::Request,
                        false => WatchRead::Nothing,
                    });
                }
                Err(e) if interrupted(&e) => continue,
                Err(_) => return Ok(WatchRead::Closed),
            };
            let Ok(state) = self.tls.process_new_packets() else {
                return Ok(WatchRead::Closed);
            };
            let pending = state.plaintext_bytes_to_read();
            if pending > 0 {
                request = true;
                let mut sink = [0u8; 512];
                let mut reader = self.tls.reader();
                while reader.read(&mut sink).is_ok_and(|n| n > 0) {}
            }
            if got == 0 || state.peer_has_closed() {
                return Ok(WatchRead::Closed);
            }
        }
        Ok(if request {
            WatchRead::Request
        } else {
            WatchRead::More
        })
    }
}

/// The socket as rustls reads it, noting a short read (the socket is
/// empty: under edge triggering no need to ask again).
struct Source<'a> {
    tcp: &'a mut TcpStream,
    short: bool,
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// The socket as rustls writes to it: with MSG_MORE when the close
/// follows (as the plain transport's flush does), and never SIGPIPE.
struct Sink<'a> {
    tcp: &'a TcpStream,
    more: bool,
}

impl Sink<'_> {
    fn flags(&self) -> libc::c_int {
        match self.more {
            true => libc::MSG_MORE | libc::MSG_NOSIGNAL,
            false => libc::MSG_NOSIGNAL,
        }
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        socket2::SockRef::from(self.tcp).send_with_flags(buf, self.flags())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        socket2::SockRef::from(self.tcp).send_vectored_with_flags(bufs, self.flags())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
