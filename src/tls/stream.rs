//! One TLS connection's state beside its socket: rustls'
//! `UnbufferedServerConnection`, the TLS bytes around it (borrowed from
//! the worker's spares only while it holds some, see `buffers`), and how
//! the connection reads, writes, closes and watches through it.
//!
//! The readiness contract holds through rustls: a read reports `short`
//! (the socket is empty, no need to ask again until an edge) only when the
//! socket gave fewer bytes than asked for and no plaintext is left
//! aside; a read that produced no plaintext but a handshake message to
//! send returns at once, so the connection flushes it before reading on.
//!
//! Output is bounded as a plain connection's is: plaintext is encrypted,
//! [`BACKLOG_LIMIT`] at a time, only once the records before it are sent
//! (or are a few bytes, as a response's head), and those count as pending
//! output (a response is not done, and the connection is writing, until
//! they have left), so a begun response is sent whole and a slow reader
//! holds at most the output buffer plus this.

use std::io::{self, IoSlice, Read};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::ServerConfig;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{EncryptError, WriteTraffic};

use super::TlsVersion;
use super::buffers::{BUFFER_SIZE, Received, Unsent};
use super::plain_http::Opening;
use super::records::{Encrypt, EncryptResult, Leftover, PlainSink, Records};
use crate::readiness::{interrupted, would_block};

/// Most plaintext encrypted at a time, its records then sent before more:
/// the session's own output high-water mark, so one pass can encrypt what
/// the output buffer holds and send it in one write.
pub const BACKLOG_LIMIT: usize = 32 * 1024;
/// Room kept per record encrypted, beyond its plaintext: header, nonce,
/// tag and content type (29 B at most with TLS 1.2's AES-GCM), rounded up.
const RECORD_OVERHEAD: usize = 64;
/// Plaintext per record.
const RECORD_PLAINTEXT: usize = 16 * 1024;
/// Most unsent bytes more plaintext is encrypted behind: a response's
/// head encrypted just before its body, so both go in one write.
const FEW_UNSENT: usize = 1024;
// Those and a whole backlog's records fit a lent buffer as it is.
const _: () = assert!(FEW_UNSENT + BACKLOG_LIMIT + 3 * RECORD_OVERHEAD <= BUFFER_SIZE);

/// What a read through TLS gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plain {
    /// `n` bytes of plaintext (possibly none: TLS records were read, and
    /// there may be a handshake message to send); `short`: the socket is
    /// empty and nothing decrypted is left aside.
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

/// One connection's TLS state (heap: see `tests/tls_memory.rs`).
pub struct TlsConn {
    tls: UnbufferedServerConnection,
    received: Received,
    unsent: Unsent,
    leftover: Leftover,
    /// The last socket read gave fewer bytes than asked for.
    socket_drained: bool,
    /// The peer closed: its `close_notify`, or the socket's EOF.
    peer_closed: bool,
    /// The peer's TLS failed: nothing more is processed.
    failed: bool,
    /// The handshake's outcome (completed, or failed) has been reported.
    reported: bool,
    /// `close_notify` is queued, or the connection failed or is being
    /// reset: nothing more is encrypted.
    closed: bool,
    /// What the first byte said (see `plain_http`).
    opening: Opening,
    /// The unsent records are only a key update's answer (see
    /// [`TlsConn::backlog_is_control`]).
    control_only: bool,
}

impl TlsConn {
    pub(super) fn new(config: Arc<ServerConfig>) -> io::Result<TlsConn> {
        Ok(TlsConn {
            tls: UnbufferedServerConnection::new(config).map_err(io::Error::other)?,
            received: Received::default(),
            unsent: Unsent::default(),
            leftover: Leftover::default(),
            socket_drained: false,
            peer_closed: false,
            failed: false,
            reported: false,
            closed: false,
            opening: Opening::Unread,
            control_only: false,
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
        !self.unsent.is_empty()
    }

    /// Bytes of the peer's are held here, not yet given as plaintext: part
    /// of a record, or decrypted bytes the reader had no room for.
    pub fn has_partial_input(&self) -> bool {
        !self.received.is_empty() || !self.leftover.is_empty()
    }

    /// Reads into `out` what the peer sent, reading TLS records from
    /// `tcp` as needed. `Err(WouldBlock)`: the socket is empty with no
    /// plaintext to give; `Err(InvalidData)`: the peer's TLS failed (the
    /// alert rustls made is sent first, best effort).
    pub fn read(&mut self, tcp: &mut TcpStream, out: &mut [u8]) -> io::Result<Plain> {
        let read = self.read_records(tcp, out);
        self.received.release(self.socket_drained);
        read
    }

    fn read_records(&mut self, tcp: &mut TcpStream, out: &mut [u8]) -> io::Result<Plain> {
        let mut n = self.leftover.give(out);
        loop {
            if n > 0 || (out.is_empty() && !self.peer_closed) {
                let short = n < out.len() && self.socket_drained;
                return Ok(Plain::Data { n, short });
            }
            if self.peer_closed {
                return Ok(Plain::Eof);
            }
            if self.failed {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "TLS failed"));
            }
            let got = self.receive(tcp)?;
            let held = self.received.bytes().len();
            let processed;
            (n, processed) = self.process(out, None);
            if let Err(e) = processed {
                self.fail(tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            if n == 0 && self.received.bytes().len() < held && !self.tls.is_handshaking() {
                self.release_key_update();
            }
            if got == 0 {
                // A FIN, with or without `close_notify`.
                self.peer_closed = true;
            } else if n == 0 && !self.peer_closed && (self.has_backlog() || self.socket_drained) {
                // A handshake message to answer (flush it before reading
                // on), or a record still arriving on an empty socket.
                return Ok(Plain::Data {
                    n: 0,
                    short: self.socket_drained,
                });
            }
        }
    }

    /// After whole records that gave no plaintext (a KeyUpdate, say):
    /// rustls's unbuffered API holds its answer to the peer's
    /// KeyUpdate(update_requested) until application data is next
    /// encrypted, and nothing tells it is waiting (`wants_write` counts
    /// only records already made). An encrypt with no room for its
    /// record moves the waiting answer to the records to make, then fails
    /// without a record; the next pass makes it, and the connection's
    /// flush sends it now, not with the next response (a client with
    /// Nagle on would wait for a delayed ACK before its next request).
    /// Such records are not activity: a client cannot keep an idle
    /// connection open with key updates.
    fn release_key_update(&mut self) {
        let mut nudge =
            |write: &mut WriteTraffic<'_, ServerConnectionData>, _: &mut Unsent| -> EncryptResult {
                // Fails for want of room (nothing is written), after it has
                // queued a waiting KeyUpdate.
                let _ = write.encrypt(&[0], &mut []);
                Ok(())
            };
        let was_empty = self.unsent.is_empty();
        let _ = self.process(&mut [], Some(&mut nudge));
        let _ = self.process(&mut [], None);
        self.control_only |= was_empty && !self.unsent.is_empty();
    }

    /// The records waiting to be sent are only the TLS layer's own (the
    /// answer to a key update): sending them is not the connection's
    /// activity.
    pub fn backlog_is_control(&self) -> bool {
        self.control_only
    }

    /// One pass over the received bytes (see `records`): decrypted
    /// bytes into `out`, then aside; how many went into `out`.
    fn process(
        &mut self,
        out: &mut [u8],
        encrypt: Option<Encrypt<'_>>,
    ) -> (usize, Result<(), rustls::Error>) {
        let mut sink = PlainSink {
            out,
            n: 0,
            leftover: &mut self.leftover,
        };
        let processed = Records {
            tls: &mut self.tls,
            received: &mut self.received,
            unsent: &mut self.unsent,
            peer_closed: &mut self.peer_closed,
        }
        .process(&mut sink, encrypt);
        (sink.n, processed)
    }

    /// Reads what the socket holds into the received bytes, as far as
    /// they have room; `Ok(0)`: the peer's FIN. A handshake flight too
    /// large to hold is the peer's error.
    fn receive(&mut self, tcp: &mut TcpStream) -> io::Result<usize> {
        let Some(room) = self.received.spare() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS handshake message too large",
            ));
        };
        let asked = room.len();
        let got = tcp.read(room)?;
        self.received.filled(got);
        self.socket_drained = got < asked;
        Ok(got)
    }

    /// The peer's TLS failed: what it sent is dropped, nothing more is
    /// processed or encrypted, and the alert rustls made is sent, best
    /// effort.
    fn fail(&mut self, tcp: &TcpStream) {
        self.give_up();
        let _ = self.send(tcp, false);
    }

    /// After rustls failed: nothing more is processed or encrypted, and
    /// only its alert joins the unsent records.
    fn give_up(&mut self) {
        self.failed = true;
        self.closed = true;
        self.leftover.clear();
        Records {
            tls: &mut self.tls,
            received: &mut self.received,
            unsent: &mut self.unsent,
            peer_closed: &mut self.peer_closed,
        }
        .encode_alerts();
        self.received.clear();
    }

    /// Encrypts as much of `slices`, in order, as the backlog limit
    /// allows, once the connection may send application data; returns
    /// how much it took. Once nothing more can be sent (the connection
    /// failed, or is closing or being reset), it takes everything and
    /// drops it, so no flush waits on output that cannot leave.
    pub fn take_slices(&mut self, slices: &[IoSlice<'_>]) -> usize {
        if self.closed {
            return slices.iter().map(|s| s.len()).sum();
        }
        // Behind a few unsent bytes (a response's head, the tail of a
        // partial send), so they leave in the same write; behind more,
        // only once they are out, so at most these few ever move.
        if self.unsent.len() > FEW_UNSENT || slices.iter().all(|s| s.is_empty()) {
            return 0;
        }
        let room = BACKLOG_LIMIT;
        let mut taken = 0;
        let mut encrypt = |write: &mut WriteTraffic<'_, ServerConnectionData>,
                           unsent: &mut Unsent|
         -> EncryptResult {
            for slice in slices {
                let piece = &slice[..slice.len().min(room - taken)];
                encrypt_into(write, piece, unsent)?;
                taken += piece.len();
                if taken == room {
                    break;
                }
            }
            Ok(())
        };
        // Requests that arrived meanwhile wait aside for the next read.
        let (_, processed) = self.process(&mut [], Some(&mut encrypt));
        if processed.is_err() {
            // What arrived failed: its alert is sent with this flush.
            self.give_up();
        }
        if taken == 0 {
            // rustls would not encrypt: nothing more can be sent.
            self.closed = true;
            return slices.iter().map(|s| s.len()).sum();
        }
        taken
    }

    /// Encrypts as much of `data` as the backlog limit allows.
    pub fn take_plaintext(&mut self, data: &[u8]) -> usize {
        self.take_slices(&[IoSlice::new(data)])
    }

    /// Sends the records not yet sent until all are out (`Ok(true)`) or
    /// the socket is full (`Ok(false)`). `more`: the close follows at
    /// once, so the kernel may hold the last segment for the FIN
    /// (MSG_MORE).
    pub fn send(&mut self, tcp: &TcpStream, more: bool) -> io::Result<bool> {
        let flags = match more {
            true => libc::MSG_MORE | libc::MSG_NOSIGNAL,
            false => libc::MSG_NOSIGNAL,
        };
        while !self.unsent.is_empty() {
            match socket2::SockRef::from(tcp).send_with_flags(self.unsent.bytes(), flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.unsent.advance(n),
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        self.control_only = false;
        Ok(true)
    }

    /// Queues `close_notify` (once) and sends it with whatever is still
    /// unsent, best effort: the close or shutdown that follows at once is
    /// the FIN, so the alert goes with MSG_MORE and the FIN rides in its
    /// segment. Nothing is sent for a handshake that never completed, nor
    /// after [`Self::abort`] or a failure.
    pub fn close_notify(&mut self, tcp: &TcpStream) {
        if std::mem::replace(&mut self.closed, true) || self.tls.is_handshaking() {
            return;
        }
        let mut encrypt = |write: &mut WriteTraffic<'_, ServerConnectionData>,
                           unsent: &mut Unsent|
         -> EncryptResult {
            let mut needed = RECORD_OVERHEAD;
            loop {
                match write.queue_close_notify(unsent.spare(needed)) {
                    Ok(n) => {
                        unsent.filled(n);
                        return Ok(());
                    }
                    Err(EncryptError::InsufficientSize(e)) => needed = e.required_size,
                    Err(e) => return Err(e),
                }
            }
        };
        let _ = self.process(&mut [], Some(&mut encrypt));
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
        let watched = self.watch_records(tcp, budget);
        self.leftover.clear();
        self.received.release(true);
        watched
    }

    fn watch_records(&mut self, tcp: &mut TcpStream, budget: u32) -> io::Result<WatchRead> {
        let mut request = false;
        if self.failed {
            return Ok(WatchRead::Closed);
        }
        for _ in 0..budget {
            let got = match self.receive(tcp) {
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
            let (n, processed) = self.process(&mut [0u8; 512], None);
            request |= n > 0;
            self.leftover.clear();
            self.failed |= processed.is_err();
            if self.failed || got == 0 || self.peer_closed {
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

/// Encrypts `plaintext` into `unsent`, making room for its records.
fn encrypt_into(
    write: &mut WriteTraffic<'_, ServerConnectionData>,
    plaintext: &[u8],
    unsent: &mut Unsent,
) -> EncryptResult {
    let records = plaintext.len().div_ceil(RECORD_PLAINTEXT) + 1;
    let mut needed = plaintext.len() + records * RECORD_OVERHEAD;
    loop {
        match write.encrypt(plaintext, unsent.spare(needed)) {
            Ok(n) => {
                unsent.filled(n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(e)) => needed = e.required_size,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_adds_little_to_rustls_own_state() {
        let rustls = std::mem::size_of::<UnbufferedServerConnection>();
        let ours = std::mem::size_of::<TlsConn>() - rustls;
        eprintln!("TlsConn: rustls {rustls} B + ours {ours} B");
        assert!(ours <= 112, "TlsConn beyond rustls's connection: {ours} B");
    }
}
