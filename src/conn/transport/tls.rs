//! The TLS transport: the same read, flush and watch as [`super::plain`],
//! through the connection's [`TlsConn`] (see `crate::tls` for the
//! picture), and the handshake's outcome counted: completed by version,
//! failed by reason, once.
//!
//! The first read peeks at the first byte (see `crate::tls::plain_http`):
//! a plain HTTP request is answered there with a cleartext `400`, the
//! write side shut behind it, and counted as a failed handshake; from then
//! on the transport is refusing ([`is_refusing`]) and its reads drop what
//! comes, so the close that follows is a FIN and not a reset that could
//! cut the answer: the connection lingers (`Closing`) as after any error
//! response, to the peer's EOF or its silence. Anything else is TLS, for
//! rustls.
//!
//! A flush hands rustls the queued output (and a generated body behind
//! it, encrypted from its source) and sends its records; it works
//! without buffers too, as an idle connection may still owe a handshake
//! message or a ticket.

use std::io::{self, IoSlice, Read};
use std::net::Shutdown;
use std::time::SystemTime;

use mio::net::TcpStream;

use super::{Flushed, GENERATE_BUDGET, Generated, Got, Outgoing, Socket, WatchEnd, Watched};
use crate::ctx::{ConnLabel, Ctx};
use crate::readiness::{interrupted, would_block};
use crate::tls::plain_http::{self, Opening};
use crate::tls::{HandshakeFailure, Plain, TlsConn, WatchRead};

/// Plaintext handed to rustls per flush of a generated body before the
/// connection yields: as much as a plain connection sends in its
/// [`GENERATE_BUDGET`] writes of the body (256 KiB each).
const GENERATE_BYTES: usize = GENERATE_BUDGET as usize * 256 * 1024;

/// Reads plaintext into `into`, reading TLS records from `stream` as
/// needed; counts a completed handshake, and a failed one.
pub(super) fn read(
    tls: &mut TlsConn,
    stream: &mut TcpStream,
    into: &mut [u8],
    ctx: &Ctx<'_>,
) -> io::Result<Got> {
    match tls.opening() {
        Opening::Tls => {}
        Opening::Unread => {
            if let Some(got) = open(tls, stream, into, ctx)? {
                return Ok(got);
            }
        }
        Opening::PlainHttp => return drop_plain(stream, into),
    }
    let read = tls.read(stream, into);
    if let Some(version) = tls.take_completed() {
        ctx.stats.tls.handshake(version);
    }
    let failed = match &read {
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Some(HandshakeFailure::Error),
        Err(e) if !would_block(e) && !interrupted(e) => Some(HandshakeFailure::Closed),
        Ok(Plain::Eof) => Some(HandshakeFailure::Closed),
        _ => None,
    };
    if let Some(why) = failed {
        cut(tls, why, ctx);
    }
    match read? {
        Plain::Eof => Ok(Got::Eof),
        Plain::Data { n, short } => Ok(Got::Data { n, short }),
    }
}

/// The first read: peeks at the first byte. Plain HTTP is read, answered
/// and counted here (`Some`: what the connection is told it read);
/// `None`: TLS, or nothing to judge yet but the EOF or an error, which
/// rustls's own read meets and counts.
fn open(
    tls: &mut TlsConn,
    stream: &mut TcpStream,
    into: &mut [u8],
    ctx: &Ctx<'_>,
) -> io::Result<Option<Got>> {
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) => tls.set_opening(Opening::of(first[0])),
        Err(e) if would_block(&e) => return Err(e),
        _ => return Ok(None),
    }
    if tls.opening() == Opening::Tls {
        return Ok(None);
    }
    cut(tls, HandshakeFailure::PlainHttp, ctx);
    let n = stream.read(into)?;
    let answer = plain_http::answer(&into[..n], stream.local_addr().ok(), SystemTime::now());
    // A fresh socket's send buffer is empty and the answer a few hundred
    // bytes: it goes whole (the FIN in its segment), or the socket is
    // dead.
    let flags = libc::MSG_MORE | libc::MSG_NOSIGNAL;
    let sent = socket2::SockRef::from(&*stream).send_with_flags(&answer, flags)?;
    if sent < answer.len() {
        return Err(io::ErrorKind::WriteZero.into());
    }
    let _ = stream.shutdown(Shutdown::Write);
    Ok(Some(Got::Data {
        n: 0,
        short: n < into.len(),
    }))
}

/// Plain HTTP came and was answered (or is being): the connection is
/// refused, its input dropped.
pub(super) fn is_refusing(tls: &TlsConn) -> bool {
    tls.opening() == Opening::PlainHttp
}

/// After the answer to plain HTTP: reads what still comes and drops it
/// (as none of it is the connection's input), to the EOF.
fn drop_plain(stream: &mut TcpStream, into: &mut [u8]) -> io::Result<Got> {
    match super::plain::read(stream, into)? {
        Got::Data { short, .. } => Ok(Got::Data { n: 0, short }),
        other => Ok(other),
    }
}

/// A handshake still in progress ends, for `why`: counted once.
pub(super) fn cut(tls: &mut TlsConn, why: HandshakeFailure, ctx: &Ctx<'_>) {
    if tls.fail_handshake() {
        ctx.stats.tls.failure(why);
        let ConnLabel { id, peer, .. } = ctx.conn;
        tracing::debug!(conn = id, %peer, reason = why.label(), "TLS handshake failed");
    }
}

/// Hands rustls the queued output (and a generated body behind it) and
/// sends its records, until all is sent or the socket is full.
pub(super) fn flush(
    tls: &mut TlsConn,
    mut socket: Socket<'_>,
    out: &mut Outgoing<'_>,
) -> io::Result<Flushed> {
    let mut wrote = false;
    let mut generated = 0;
    loop {
        let mut owed = false;
        // Nothing but the handshake goes out before it completes (no
        // request can have been read, so nothing is queued).
        let handshaking = tls.is_handshaking();
        if let Some(output) = out.output.as_deref_mut().filter(|_| !handshaking) {
            let pending = output.pending();
            let taken = tls.take_plaintext(output.unsent());
            output.advance(taken);
            owed = taken < pending;
            if let Some(body) = out.generated.as_mut().filter(|g| !owed && !g.is_done()) {
                if generated >= GENERATE_BYTES {
                    return Ok(Flushed::Yielded);
                }
                let mut iov = [IoSlice::new(&[]); Generated::MAX_SLICES];
                let slices = body.slices(&mut iov);
                let taken = tls.take_slices(&iov[..slices]);
                generated += taken;
                body.sent(taken);
                owed = !body.is_done();
                socket.disable_nagle();
            }
        }
        let had_backlog = tls.has_backlog();
        let control = tls.backlog_is_control();
        let sent = tls.send(socket.stream, out.closes_next && !owed)?;
        if had_backlog {
            *socket.moved |= !control;
            wrote = true;
        }
        if !sent {
            return Ok(Flushed::Blocked);
        }
        if !owed {
            return Ok(Flushed::All { wrote });
        }
    }
}

/// The watch through rustls: the peer's own `close_notify` (an orderly
/// reply to ours) counts as its close, and only application data as a
/// request; after one, read on next turn, to `WouldBlock` or the close.
pub(super) fn watch(tls: &mut TlsConn, stream: &mut TcpStream, budget: u32) -> Watched {
    let (request, end) = match tls.watch(stream, budget) {
        Ok(WatchRead::Nothing) => (false, WatchEnd::Drained),
        Ok(WatchRead::More) => (false, WatchEnd::More),
        Ok(WatchRead::Request) => (true, WatchEnd::More),
        Ok(WatchRead::Closed) | Err(_) => (false, WatchEnd::Closed),
    };
    Watched { request, end }
}
