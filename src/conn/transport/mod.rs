//! The connection's transport: every call a connection makes on its
//! socket goes through here, plain or TLS ([`Layer`], chosen once at
//! accept). It moves bytes and knows nothing of what they say: the
//! connection hands it the output to send (a buffer's unsent bytes, and a
//! generated body behind them as a [`Generated`] source), and takes what
//! it reads. Whether the bytes are encrypted on the way is this module's
//! business alone (as nginx swaps a connection's `recv`/`send` for the TLS
//! ones, or hyper's `Conn<I>` takes TLS as just another `I`).
//!
//! ```text
//!   conn ── read / flush / watch / shut_write / abort ──▶ Transport
//!                                                 ├─ plain: the socket
//!                                                 └─ tls:   rustls ⇄ socket
//! ```
//!
//! It keeps what it knows of its socket and its peer: whether the peer
//! hung up or closed ([`Peer`]), what the worker's poll asks of the socket,
//! the options switched on (Nagle off, the write side shut, the kernel's
//! receive stamps), and whether bytes moved since the connection last
//! asked (its activity). It answers what it can do and holds: whether it
//! [can stamp arrivals](Transport::can_stamp_arrivals) (plain only: over
//! TLS rustls reads the socket), [has partial input](Transport::has_partial_input),
//! [has unsent bytes](Transport::has_unsent).
//!
//! Over TLS ([`tls`]): a handshake comes first (the transport says it is
//! still [`Transport::is_handshaking`], and the connection holds that as
//! its state), and its outcome is counted here; rustls' backlog of
//! records counts as output not yet sent; a generated body is encrypted
//! from its source rather than sent with `sendfile`; a graceful close
//! says `close_notify` before its FIN; plain HTTP sent to the TLS port is
//! told by its first byte and answered with a cleartext 400 (in [`tls`]'s
//! first read), after which the transport says it is refusing
//! ([`Transport::is_refusing`]) and the connection lingers, closing.
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

use crate::ctx::Ctx;
use crate::pool::Output;
use crate::rx_stamps;
use crate::stats::CloseCause;
use crate::tls::{HandshakeFailure, TlsConn, TlsVersion};

/// Writes of a generated body per flush before yielding, as the
/// connection's read budget does for reads: a fast reader of a large
/// `/bytes` answer cannot hold the worker for the whole body (2 × 256 KiB
/// per turn).
const GENERATE_BUDGET: u32 = 2;

/// What one read gave: the one read result, from the socket up to the
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Got {
    /// `n` bytes (possibly none over TLS: records were read, a handshake
    /// message may be owed); `short`: the socket is empty, wait for an edge.
    Data { n: usize, short: bool },
    /// The peer closed its side.
    Eof,
    /// No room to read into: the input waits on a response.
    Full,
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

/// What a flush sends: the queued output (none: only what the transport
/// itself owes), and a generated body behind it.
pub(super) struct Outgoing<'a> {
    pub output: Option<&'a mut Output>,
    /// Counted down as it goes out.
    pub generated: Option<Generated<'a>>,
    /// The connection closes right after this flush (see [`plain`]).
    pub closes_next: bool,
}

pub(super) use super::socket::Generated;

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

/// What the transport knows of its peer's side of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Sending,
    /// Sending, and the last read found the socket empty (a short read,
    /// or `WouldBlock`) with no readiness event since: under edge
    /// triggering, bytes arriving later bring an event of their own.
    Drained,
    /// A readiness event said it hung up: an EOF waits behind any data,
    /// so reads go on to it, even past short reads, in this pass and
    /// every later one (no edge will come again).
    HungUp,
    /// It shut its write side: a read returned the EOF.
    Closed,
}

/// What the worker's poll asks of the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registered {
    /// Not registered: a connection that is served and closed in the turn
    /// it was accepted never touches epoll.
    No,
    Readable,
    ReadableWritable,
}

/// Switches thrown once in the socket's life, one bit each, never reset.
#[derive(Debug, Clone, Copy, Default)]
struct Switched(u8);

impl Switched {
    /// TCP_NODELAY is on (set lazily, see [`Transport::disable_nagle`]).
    const NODELAY: u8 = 1;
    /// The write side is shut.
    const WRITE_SHUT: u8 = 2;
    /// SO_TIMESTAMPNS is on: the kernel's receive stamps come with reads
    /// (see [`Transport::stamp_arrivals`]).
    const STAMPING: u8 = 4;
    /// A write has backed up: from then on the poll asks the socket for
    /// writability too. Never cleared, on purpose: under edge triggering
    /// an EPOLLOUT edge comes only after a write found the send buffer
    /// full (the kernel wakes writers only then), so keeping the interest
    /// costs nothing, while dropping it would cost an `epoll_ctl` each
    /// time a response backs up and drains.
    const POLLS_WRITABLE: u8 = 8;

    fn has(self, switch: u8) -> bool {
        self.0 & switch != 0
    }

    /// Throws `switch`; whether it was off until now.
    fn throw(&mut self, switch: u8) -> bool {
        let was_off = !self.has(switch);
        self.0 |= switch;
        was_off
    }
}

/// What rides on the socket: nothing, or TLS.
enum Layer {
    Plain,
    /// Boxed, so a plain connection pays one pointer for it.
    Tls(Box<TlsConn>),
}

/// One connection's socket, and its TLS when the listener speaks TLS.
pub struct Transport {
    stream: TcpStream,
    layer: Layer,
    peer: Peer,
    registered: Registered,
    switched: Switched,
    /// Bytes moved since the connection last took this (its activity).
    moved: bool,
}

impl Transport {
    /// A plain connection's transport: the socket itself.
    pub fn plain(stream: TcpStream) -> Self {
        Transport {
            stream,
            layer: Layer::Plain,
            peer: Peer::Sending,
            registered: Registered::No,
            switched: Switched::default(),
            moved: false,
        }
    }

    /// A TLS connection's: `tls` (its handshake still to come) over the
    /// socket.
    pub fn tls(stream: TcpStream, tls: Box<TlsConn>) -> Self {
        Transport {
            layer: Layer::Tls(tls),
            ..Transport::plain(stream)
        }
    }

    /// Its TLS state, if it has one.
    fn tls_state(&self) -> Option<&TlsConn> {
        match &self.layer {
            Layer::Plain => None,
            Layer::Tls(tls) => Some(tls),
        }
    }

    /// Whether [`Transport::register`] has something to do.
    pub(super) fn registration_due(&self) -> bool {
        self.registered != self.wanted_registration().0
    }

    fn wanted_registration(&self) -> (Registered, Interest) {
        match self.switched.has(Switched::POLLS_WRITABLE) {
            true => (
                Registered::ReadableWritable,
                Interest::READABLE | Interest::WRITABLE,
            ),
            false => (Registered::Readable, Interest::READABLE),
        }
    }

    /// Registers the socket with the worker's poll, or widens what it
    /// asks for. Readable only until a write backs up: a fresh socket is
    /// writable at once, and an EPOLLOUT edge at registration would wake
    /// the worker for a connection with nothing to read yet. Registering
    /// after reading loses nothing: epoll reports what is already pending
    /// when a socket is added or modified, edge-triggered or not.
    pub(super) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let (wanted, interest) = self.wanted_registration();
        match self.registered {
            Registered::No => registry.register(&mut self.stream, token, interest)?,
            _ => registry.reregister(&mut self.stream, token, interest)?,
        }
        self.registered = wanted;
        Ok(())
    }

    /// A readiness event said the peer hung up: from now on reads go on
    /// to the EOF (see [`Peer::HungUp`]).
    pub(super) fn peer_hung_up(&mut self) {
        if matches!(self.peer, Peer::Sending | Peer::Drained) {
            self.peer = Peer::HungUp;
        }
    }

    /// Whether a short read may stop the reading: not once the peer has
    /// hung up, with its EOF still to read.
    pub(super) fn short_read_drains(&self) -> bool {
        self.peer != Peer::HungUp
    }

    /// Whether the last read left the socket empty (`drained`), as the
    /// connection saw it; a readiness event says it may not be
    /// ([`Transport::readiness_came`]).
    pub(super) fn note_drained(&mut self, drained: bool) {
        self.peer = match (self.peer, drained) {
            (Peer::Sending | Peer::Drained, true) => Peer::Drained,
            (Peer::Drained, false) => Peer::Sending,
            (peer, _) => peer,
        };
    }

    /// A readiness event came for the socket: bytes may wait in it.
    pub(super) fn readiness_came(&mut self) {
        self.note_drained(false);
    }

    /// Whether the socket was found empty and no event has come since
    /// (see [`Transport::note_drained`]).
    pub(super) fn found_drained(&self) -> bool {
        self.peer == Peer::Drained
    }

    /// The peer shut its write side (a read returned the EOF).
    pub(super) fn peer_closed(&self) -> bool {
        self.peer == Peer::Closed
    }

    /// Bytes moved since the last call: the connection's activity, taken.
    pub(super) fn take_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    /// Bytes moved since [`Transport::take_moved`] last took them.
    pub(super) fn moved(&self) -> bool {
        self.moved
    }

    /// A TLS handshake is still in progress: no application bytes yet
    /// (a connection being refused is not).
    pub(super) fn is_handshaking(&self) -> bool {
        self.tls_state().is_some_and(TlsConn::is_handshaking) && !self.is_refusing()
    }

    /// The transport has answered the connection itself with an error and
    /// shut its write side (plain HTTP on the TLS port: a cleartext
    /// `400`): from now on it drops what arrives, and the connection
    /// lingers as after any error response.
    pub(super) fn is_refusing(&self) -> bool {
        self.tls_state().is_some_and(tls::is_refusing)
    }

    /// The negotiated TLS version (`None`: plain, or still shaking hands).
    pub(super) fn version(&self) -> Option<TlsVersion> {
        self.tls_state().and_then(TlsConn::version)
    }

    /// Bytes the transport holds that the socket has not taken yet (TLS
    /// records): output still pending, like the connection's own.
    pub(super) fn has_unsent(&self) -> bool {
        self.tls_state().is_some_and(TlsConn::has_backlog)
    }

    /// Bytes the peer sent are held here, not yet given to the connection
    /// (part of a TLS record): input has begun, as a plain connection's
    /// first byte of a request begins it. Plain: never.
    pub(super) fn has_partial_input(&self) -> bool {
        self.tls_state().is_some_and(TlsConn::has_partial_input)
    }

    /// Whether a read can say when its bytes reached the socket, by the
    /// kernel's receive stamp: plain only (over TLS rustls reads the
    /// socket, records at a time).
    pub(super) fn can_stamp_arrivals(&self) -> bool {
        matches!(self.layer, Layer::Plain)
    }

    /// Reads into `into` what the peer sent ([`Got::Full`]: `into` has no
    /// room). Bytes given, or on their way (part of a TLS record), are
    /// activity; a record that gives nothing (a key update, an empty
    /// record) is not, or a client could hold an idle connection open
    /// with them.
    pub(super) fn read(&mut self, into: &mut [u8], ctx: &Ctx<'_>) -> io::Result<Got> {
        if into.is_empty() {
            return Ok(Got::Full);
        }
        let got = match &mut self.layer {
            Layer::Plain => plain::read(&mut self.stream, into)?,
            Layer::Tls(tls) => tls::read(tls, &mut self.stream, into, ctx)?,
        };
        Ok(self.note(got))
    }

    /// Reads as [`Transport::read`] does, and says when the first bytes
    /// reached the socket, by the kernel's receive stamp (`None` where the
    /// transport [cannot stamp arrivals](Transport::can_stamp_arrivals)).
    pub(super) fn read_stamped(
        &mut self,
        into: &mut [u8],
        ctx: &Ctx<'_>,
    ) -> io::Result<(Got, Option<SystemTime>)> {
        if into.is_empty() || !self.can_stamp_arrivals() {
            return Ok((self.read(into, ctx)?, None));
        }
        self.stamp_arrivals();
        let (got, stamp) = plain::read_stamped(&mut self.stream, into)?;
        Ok((self.note(got), stamp))
    }

    /// What a read tells of the peer and of activity.
    fn note(&mut self, got: Got) -> Got {
        match got {
            Got::Data { n, .. } if n > 0 || self.has_partial_input() => self.moved = true,
            Got::Eof => self.peer = Peer::Closed,
            _ => {}
        }
        got
    }

    /// Sends the queued output (and a generated body behind it) until all
    /// is sent or the socket is full. A blocked write turns Nagle off (the
    /// response's next segments need not wait for an ACK) and asks the
    /// poll for writability from then on.
    pub(super) fn flush(&mut self, out: &mut Outgoing<'_>) -> io::Result<Flushed> {
        let socket = Socket {
            stream: &self.stream,
            switched: &mut self.switched,
            moved: &mut self.moved,
        };
        let flushed = match &mut self.layer {
            Layer::Plain => plain::flush(socket, out),
            Layer::Tls(tls) => tls::flush(tls, socket, out),
        };
        if let Ok(Flushed::Blocked) = flushed {
            self.disable_nagle();
            self.switched.throw(Switched::POLLS_WRITABLE);
        }
        flushed
    }

    /// During the watch after an idle close: reads and drops what arrives,
    /// at most `budget` times, telling a request from the peer's close;
    /// and when a request's first bytes reached the socket, by the
    /// kernel's stamp (where the transport can stamp arrivals).
    pub(super) fn watch(&mut self, budget: u32) -> (Watched, Option<SystemTime>) {
        match &mut self.layer {
            Layer::Plain => plain::watch(&mut self.stream, budget),
            Layer::Tls(tls) => (tls::watch(tls, &mut self.stream, budget), None),
        }
    }

    /// Asks the kernel to stamp what arrives from now on (SO_TIMESTAMPNS:
    /// one `setsockopt`, the first time a connection reads near the end
    /// of its promise (from [`Transport::read_stamped`]) or closes idle,
    /// as the watch begins), so a request's arrival is known to the
    /// microsecond whenever the loop gets to it. Nothing where the
    /// transport cannot stamp arrivals.
    pub(super) fn stamp_arrivals(&mut self) {
        if self.can_stamp_arrivals()
            && !self.switched.has(Switched::STAMPING)
            && rx_stamps::enable(&self.stream).is_ok()
        {
            self.switched.throw(Switched::STAMPING);
        }
    }

    /// Turns Nagle's algorithm off, once, when it could first matter: as the
    /// connection goes idle between requests (the next response may follow
    /// a segment still unacknowledged), before a generated body's writes,
    /// or when a write backs up. A response on a fresh connection has
    /// nothing in flight for Nagle to wait on, so one-request connections
    /// never pay the syscall (nginx does the same).
    pub(super) fn disable_nagle(&mut self) {
        disable_nagle(&self.stream, &mut self.switched);
    }

    /// Keeps the kernel's send buffer to about `bytes`, so what waits
    /// unsent for a peer that stopped reading is found out soon (the
    /// admin's event stream).
    pub(super) fn limit_send_buffer(&self, bytes: usize) {
        let _ = socket2::SockRef::from(&self.stream).set_send_buffer_size(bytes);
    }

    /// Shuts the write side once, after saying the close (`close_notify`
    /// over TLS) if the output `ending` is whole; false if the socket is
    /// already gone.
    pub(super) fn shut_write(&mut self, ending: Ending) -> bool {
        if self.switched.throw(Switched::WRITE_SHUT) {
            self.say_close(ending);
            return self.stream.shutdown(Shutdown::Write).is_ok();
        }
        true
    }

    /// Before a graceful close's FIN: an orderly end the peer can tell
    /// from a truncation (`close_notify` over TLS; plain: the FIN says it),
    /// said only when the output is [`Ending::Whole`].
    fn say_close(&mut self, ending: Ending) {
        if let (Layer::Tls(tls), Ending::Whole) = (&mut self.layer, ending) {
            tls.close_notify(&self.stream);
        }
    }

    /// Makes the close that follows an abortive one: a reset (SO_LINGER
    /// 0), with nothing said before it.
    pub(super) fn abort(&mut self) {
        if let Layer::Tls(tls) = &mut self.layer {
            tls.abort();
        }
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }

    /// The socket reported an error (a reset): a handshake still in
    /// progress failed, closed.
    pub(super) fn peer_reset(&mut self, ctx: &Ctx<'_>) {
        if let Layer::Tls(tls) = &mut self.layer {
            tls::cut(tls, HandshakeFailure::Closed, ctx);
        }
    }

    /// The connection closes for `cause`. A handshake still in progress
    /// fails: by its deadline, or closed (the peer's own close or reset
    /// was counted where it was seen, by the read or [`Self::peer_reset`]).
    /// A close that is not a reset is said first (`close_notify`), when
    /// the output `ending` is whole.
    pub(super) fn close(&mut self, cause: CloseCause, ending: Ending, ctx: &Ctx<'_>) {
        if let Layer::Tls(tls) = &mut self.layer {
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

    /// Registers the socket with `registry` for `interest`, as a test's
    /// own poll asks (the worker's goes through [`Transport::register`]).
    pub(super) fn register_for(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        registry.register(&mut self.stream, token, interest)
    }
}

/// TCP_NODELAY on `stream`, once (`switched` remembers).
fn disable_nagle(stream: &TcpStream, switched: &mut Switched) {
    if switched.throw(Switched::NODELAY) {
        let _ = stream.set_nodelay(true);
    }
}

/// The socket as a flush writes to it: its switches, and the activity
/// its writes make.
struct Socket<'a> {
    stream: &'a TcpStream,
    switched: &'a mut Switched,
    /// Set when bytes the connection asked for moved.
    moved: &'a mut bool,
}

impl Socket<'_> {
    /// TCP_NODELAY, once.
    fn disable_nagle(&mut self) {
        disable_nagle(self.stream, self.switched);
    }
}
