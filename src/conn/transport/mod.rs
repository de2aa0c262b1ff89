//! The connection's transport: every call a connection makes on its
//! socket goes through here, plain or TLS, chosen once at accept. The
//! connection reads, flushes, shuts down, watches and aborts; whether the
//! bytes are encrypted on the way is this module's business alone (as
//! nginx swaps a connection's `recv`/`send` for the TLS ones, or hyper's
//! `Conn<I>` takes TLS as just another `I`).
//!
//! ```text
//!   conn ── read / flush / watch / shut_write / abort ──▶ Transport
//!                                                 ├─ plain: the socket
//!                                                 └─ tls:   rustls ⇄ socket
//! ```
//!
//! Over TLS ([`tls`]): a handshake comes first (the transport says it is
//! still [`Transport::is_handshaking`], and the connection holds that as
//! its state), and its outcome is counted here; rustls' backlog of
//! records counts as output not yet sent ([`Transport::has_unsent`]); a
//! generated body is encrypted from the filler block rather than sent with
//! `sendfile`; a graceful close says `close_notify` before its FIN; plain
//! HTTP sent to the TLS port is told by its first byte and answered with a
//! cleartext 400 (in [`tls`]'s first read), after which the transport
//! says it is refusing ([`Transport::is_refusing`]) and the connection
//! lingers, closing.
//!
//! An idle connection holds no TLS buffer either: the TLS bytes received
//! and not yet processed, and the records not yet sent, sit in buffers
//! borrowed from the worker only while there are some (`crate::tls`), so
//! the connection has no call to make as it goes idle.

mod plain;
mod tls;

use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::app::filler::FillerFile;
use crate::ctx::Ctx;
use crate::pool::Buffers;
use crate::rx_stamps;
use crate::session::Session;
use crate::stats::CloseCause;
use crate::tls::{HandshakeFailure, TlsConn, TlsVersion};

/// What one read gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Got {
    /// `n` bytes (possibly none over TLS: records were read, a handshake
    /// message may be owed); `short`: the socket is empty, wait for an edge.
    Data { n: usize, short: bool },
    /// The peer closed its side.
    Eof,
}

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

/// How a connection's output ends, for its close to say so or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Every response ends where its framing says: a graceful close says
    /// it is one (`close_notify` over TLS).
    Whole,
    /// A response was cut short: the close must not look orderly (no
    /// `close_notify`), so the client can tell the truncation.
    Cut,
}

/// What a flush sends: the output queued in `buffers` (none: only what
/// the transport itself owes), and a generated body behind it.
pub(super) struct Outgoing<'a> {
    pub buffers: Option<&'a mut Buffers>,
    pub session: &'a mut Session,
    /// The connection closes right after this flush (see [`plain`]).
    pub closes_next: bool,
    /// The `/bytes` filler as a file, for `sendfile`.
    pub file: Option<&'a FillerFile>,
    /// Set when bytes moved (the connection's activity).
    pub moved: &'a mut bool,
}

/// What the watch after an idle close saw in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Watched {
    /// Bytes of a request arrived.
    pub request: bool,
    pub end: WatchEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WatchEnd {
    /// Nothing more to read now: wait for an edge.
    Drained,
    /// The read budget ran out, or more may wait: read on next turn.
    More,
    /// The peer closed (FIN, reset, or its own `close_notify`).
    Closed,
}

/// One connection's socket, and its TLS when the listener speaks TLS.
pub struct Transport {
    stream: TcpStream,
    /// Boxed, so a plain connection pays one pointer for it.
    tls: Option<Box<TlsConn>>,
    /// TCP_NODELAY is on (set lazily, see [`Transport::disable_nagle`]).
    nodelay: bool,
    write_shut: bool,
    /// SO_TIMESTAMPNS is on: the kernel's receive stamps come with reads
    /// (set once, see [`Transport::stamp_arrivals`]).
    stamping: bool,
}

impl Transport {
    /// A plain connection's transport: the socket itself.
    pub fn plain(stream: TcpStream) -> Self {
        Transport {
            stream,
            tls: None,
            nodelay: false,
            write_shut: false,
            stamping: false,
        }
    }

    /// A TLS connection's: `tls` (its handshake still to come) over the
    /// socket.
    pub fn tls(stream: TcpStream, tls: Box<TlsConn>) -> Self {
        Transport {
            tls: Some(tls),
            ..Transport::plain(stream)
        }
    }

    /// Registers the socket with the worker's poll (`again`: it already
    /// is, and asks for `interest` from now on).
    pub(super) fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
        again: bool,
    ) -> io::Result<()> {
        match again {
            false => registry.register(&mut self.stream, token, interest),
            true => registry.reregister(&mut self.stream, token, interest),
        }
    }

    /// A TLS handshake is still in progress: no application bytes yet
    /// (a connection being refused is not).
    pub(super) fn is_handshaking(&self) -> bool {
        self.tls.as_deref().is_some_and(TlsConn::is_handshaking) && !self.is_refusing()
    }

    /// The transport has answered the connection itself with an error and
    /// shut its write side (plain HTTP on the TLS port: a cleartext
    /// `400`): from now on it drops what arrives, and the connection
    /// lingers as after any error response.
    pub(super) fn is_refusing(&self) -> bool {
        self.tls.as_deref().is_some_and(tls::is_refusing)
    }

    /// The negotiated TLS version (`None`: plain, or still shaking hands).
    pub(super) fn version(&self) -> Option<TlsVersion> {
        self.tls.as_deref().and_then(TlsConn::version)
    }

    /// Bytes the transport holds that the socket has not taken yet (TLS
    /// records): output still pending, like the connection's own.
    pub(super) fn has_unsent(&self) -> bool {
        self.tls.as_deref().is_some_and(TlsConn::has_backlog)
    }

    /// Bytes the peer sent are held here, not yet given to the connection
    /// (part of a TLS record): input has begun, as a plain connection's
    /// first byte of a request begins it. Plain: never.
    pub(super) fn has_partial_input(&self) -> bool {
        self.tls.as_deref().is_some_and(TlsConn::has_partial_input)
    }

    /// Reads into `into` what the peer sent.
    pub(super) fn read(&mut self, into: &mut [u8], ctx: &Ctx<'_>) -> io::Result<Got> {
        match self.tls.as_deref_mut() {
            None => plain::read(&mut self.stream, into),
            Some(tls) => tls::read(tls, &mut self.stream, into, ctx),
        }
    }

    /// Reads as [`Transport::read`] does, and says when the first bytes
    /// reached the socket, by the kernel's receive stamp (plain only: over
    /// TLS rustls reads the socket, and the answer is `None`).
    pub(super) fn read_stamped(
        &mut self,
        into: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> io::Result<(Got, Option<SystemTime>)> {
        self.stamp_arrivals();
        match self.tls.as_deref_mut() {
            None => plain::read_stamped(&mut self.stream, into),
            Some(tls) => Ok((tls::read(tls, &mut self.stream, into, ctx)?, None)),
        }
    }

    /// Sends the queued output (and a generated body behind it) until all
    /// is sent or the socket is full. A blocked write turns Nagle off: the
    /// response's next segments need not wait for an ACK.
    pub(super) fn flush(&mut self, out: Outgoing<'_>) -> io::Result<Flushed> {
        let flushed = match self.tls.as_deref_mut() {
            None => plain::flush(&self.stream, &mut self.nodelay, out),
            Some(tls) => tls::flush(tls, &self.stream, &mut self.nodelay, out),
        };
        if let Ok(Flushed::Blocked) = flushed {
            self.disable_nagle();
        }
        flushed
    }

    /// During the watch after an idle close: reads and drops what arrives,
    /// at most `budget` times, telling a request from the peer's close;
    /// and when a request's first bytes reached the socket, by the
    /// kernel's stamp (plain only: over TLS rustls reads the socket).
    pub(super) fn watch(&mut self, budget: u32) -> (Watched, Option<SystemTime>) {
        match self.tls.as_deref_mut() {
            None => plain::watch(&mut self.stream, budget),
            Some(tls) => (tls::watch(tls, &mut self.stream, budget), None),
        }
    }

    /// As the watch begins: asks the kernel to stamp what arrives from
    /// now on (SO_TIMESTAMPNS: one `setsockopt`, the first time a
    /// connection reads near the end of its promise or closes idle), so a
    /// request's arrival is known to the microsecond whenever the loop
    /// gets to it.
    pub(super) fn stamp_arrivals(&mut self) {
        if self.tls.is_none() && !self.stamping {
            self.stamping = rx_stamps::enable(&self.stream).is_ok();
        }
    }

    /// Turns Nagle's algorithm off, once, when it could first matter: as the
    /// connection goes idle between requests (the next response may follow
    /// a segment still unacknowledged), before a generated body's writes,
    /// or when a write backs up. A response on a fresh connection has
    /// nothing in flight for Nagle to wait on, so one-request connections
    /// never pay the syscall (nginx does the same).
    pub(super) fn disable_nagle(&mut self) {
        disable_nagle(&self.stream, &mut self.nodelay);
    }

    /// Shuts the write side once, after saying the close (`close_notify`
    /// over TLS) if the output `ending` is whole; false if the socket is
    /// already gone.
    pub(super) fn shut_write(&mut self, ending: Ending) -> bool {
        if !self.write_shut {
            self.write_shut = true;
            self.say_close(ending);
            return self.stream.shutdown(Shutdown::Write).is_ok();
        }
        true
    }

    /// Before a graceful close's FIN: an orderly end the peer can tell
    /// from a truncation (`close_notify` over TLS; plain: the FIN says it),
    /// said only when the output is [`Ending::Whole`].
    fn say_close(&mut self, ending: Ending) {
        if let (Some(tls), Ending::Whole) = (self.tls.as_deref_mut(), ending) {
            tls.close_notify(&self.stream);
        }
    }

    /// Makes the close that follows an abortive one: a reset (SO_LINGER
    /// 0), with nothing said before it.
    pub(super) fn abort(&mut self) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.abort();
        }
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }

    /// The socket reported an error (a reset): a handshake still in
    /// progress failed, closed.
    pub(super) fn peer_reset(&mut self, ctx: &Ctx<'_>) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls::cut(tls, HandshakeFailure::Closed, ctx);
        }
    }

    /// The connection closes for `cause`. A handshake still in progress
    /// fails: by its deadline, or closed (the peer's own close or reset
    /// was counted where it was seen, by the read or [`Self::peer_reset`]).
    /// A close that is not a reset is said first (`close_notify`), when
    /// the output `ending` is whole.
    pub(super) fn close(&mut self, cause: CloseCause, ending: Ending, ctx: &Ctx<'_>) {
        if let Some(tls) = self.tls.as_deref_mut() {
            match cause {
                CloseCause::Client | CloseCause::Reset => {}
                CloseCause::HeadersTimeout => tls::cut(tls, HandshakeFailure::Timeout, ctx),
                _ => tls::cut(tls, HandshakeFailure::Closed, ctx),
            }
        }
        if cause != CloseCause::Reset {
            self.say_close(ending);
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
}

#[cfg(test)]
impl Transport {
    /// What the socket holds unread, as far as `into` reaches (0: the
    /// EOF); for tests waiting on the kernel.
    pub(super) fn peek(&self, into: &mut [u8]) -> io::Result<usize> {
        self.stream.peek(into)
    }
}

/// TCP_NODELAY on `stream`, once (`nodelay` remembers).
fn disable_nagle(stream: &TcpStream, nodelay: &mut bool) {
    if !*nodelay {
        *nodelay = true;
        let _ = stream.set_nodelay(true);
    }
}
