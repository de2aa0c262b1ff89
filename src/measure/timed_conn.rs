//! One measuring client connection on a mio loop: connect, write a request,
//! read its response, then sit idle until the server closes it, stamping
//! each step. The response's arrival is the kernel receive stamp of its
//! last segment ([`crate::rx_stamps`]); the other steps are the
//! poll wake-up that saw them ([`Seen`]). [`TimedConn::resend`] writes the
//! request again on an idle connection, for the race sweep.
//!
//! The readiness contract is mio's: on every event, write and read until
//! `WouldBlock`. The caller owns the `Poll`, the tokens and the clock.
//!
//! Over TLS (`timed_tls`) the same steps go through rustls: the request
//! is written once the handshake is done, and the server's idle close may
//! come as a `close_notify` alert, whose segment carries a receive stamp
//! as a response does.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::response::{Fed, ResponseHead, ResponseReader};
use crate::readiness::would_block;
use crate::rx_stamps::{self, Scratch, Seen};
use crate::tls::TlsVersion;
use crate::tls::client::TlsTarget;

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The server's FIN (an orderly close).
    Fin,
    /// A reset (an abortive close, or data sent to a closed socket).
    Rst,
}

/// Where a connection is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Connecting, or the request not fully written.
    Sending,
    /// The request is written, its response is incomplete.
    Receiving,
    /// A response has arrived; waiting for the server to close.
    Idle,
    /// The server closed the connection (or reset it) after a response.
    Closed(Closed),
    /// Nothing usable came back: why, in words.
    Failed(String),
}

impl Phase {
    /// Connecting, sending or receiving: a response is awaited.
    pub fn awaits_response(&self) -> bool {
        matches!(self, Phase::Sending | Phase::Receiving)
    }

    /// Closed or failed: nothing more will happen.
    pub fn finished(&self) -> bool {
        matches!(self, Phase::Closed(_) | Phase::Failed(_))
    }
}

/// A client connection and the times of its steps.
pub struct TimedConn {
    pub(super) stream: Option<TcpStream>,
    pub(super) request: Arc<[u8]>,
    pub(super) sent: usize,
    pub(super) reader: ResponseReader,
    /// The TLS client, for an https server.
    pub(super) tls: Option<Box<rustls::ClientConnection>>,
    /// The https server spoken to (for the words of a TLS error).
    pub(super) tls_target: Option<TlsTarget>,
    /// The TLS version the handshake settled on.
    pub tls_version: Option<TlsVersion>,
    /// The server's close came as `close_notify` (then, or with, its FIN).
    pub close_notify: bool,
    pub phase: Phase,
    /// The wake-up at which the request was fully written.
    pub written_at: Option<Instant>,
    /// Kernel receive time of the response's last segment, when stamped.
    pub rx_at: Option<Instant>,
    /// The wake-up that delivered the response's last bytes.
    pub responded_at: Option<Instant>,
    /// The wake-up that saw the close.
    pub closed_at: Option<Instant>,
    /// The (last) response head.
    pub response: Option<ResponseHead>,
    /// Bytes that came after a complete response (a server bug).
    pub stray_bytes: usize,
    /// Receive stamps are on for this socket.
    pub stamped: bool,
}

impl TimedConn {
    /// Starts a non-blocking connect to `addr` and registers it under
    /// `token`; `request` is written as soon as the socket is writable.
    /// `head_request`: the request is HEAD (its response has no body).
    pub fn connect(
        addr: SocketAddr,
        request: Arc<[u8]>,
        head_request: bool,
        tls: Option<&TlsTarget>,
        registry: &Registry,
        token: Token,
    ) -> io::Result<TimedConn> {
        let tls_target = tls;
        let tls = tls.map(TlsTarget::connection).transpose()?.map(Box::new);
        let mut stream = TcpStream::connect(addr)?;
        let stamped = rx_stamps::enable(&stream).is_ok();
        let _ = stream.set_nodelay(true);
        registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        Ok(TimedConn {
            stream: Some(stream),
            request,
            sent: 0,
            reader: ResponseReader::new(head_request),
            tls,
            tls_target: tls_target.cloned(),
            tls_version: None,
            close_notify: false,
            phase: Phase::Sending,
            written_at: None,
            rx_at: None,
            responded_at: None,
            closed_at: None,
            response: None,
            stray_bytes: 0,
            stamped,
        })
    }

    /// The server reset the connection.
    pub fn was_reset(&self) -> bool {
        self.phase == Phase::Closed(Closed::Rst)
    }

    /// When the response arrived: the kernel stamp, else the wake-up.
    pub fn response_at(&self) -> Option<Instant> {
        self.rx_at.or(self.responded_at)
    }

    /// Advances on a readiness event seen at `seen`.
    pub fn on_ready(&mut self, seen: Seen, scratch: &mut Scratch) {
        if self.tls.is_some() {
            return self.on_ready_tls(seen, scratch);
        }
        if self.phase == Phase::Sending {
            self.write(seen);
        }
        if !self.phase.finished() && self.phase != Phase::Sending {
            self.read(seen, scratch);
        }
    }

    /// Writes the request again on an idle connection (a reuse, as a pool
    /// would make), now. A write error is a reset.
    pub fn resend(&mut self) {
        if self.phase != Phase::Idle {
            return;
        }
        self.reader.reset();
        self.sent = 0;
        self.rx_at = None;
        self.responded_at = None;
        self.phase = Phase::Sending;
        match self.tls.is_some() {
            true => self.write_tls(Seen::now()),
            false => self.write(Seen::now()),
        }
    }

    /// How far the response awaited got, for a message that begins "the
    /// server" (see [`ResponseReader::unfinished`]).
    pub fn unfinished(&self) -> Option<String> {
        self.reader.unfinished()
    }

    /// Gives up on a connection that is still waiting for something.
    pub fn fail(&mut self, why: String) {
        self.phase = Phase::Failed(why);
    }

    /// Removes the socket from `registry` and closes it.
    pub fn close(&mut self, registry: &Registry) {
        if let Some(mut stream) = self.stream.take() {
            let _ = registry.deregister(&mut stream);
        }
    }

    fn write(&mut self, seen: Seen) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        while self.sent < self.request.len() {
            match stream.write(&self.request[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Not connected yet: the connect's result comes as an event.
                Err(e) if would_block(&e) || e.kind() == io::ErrorKind::NotConnected => {
                    if let Ok(Some(error)) = stream.take_error() {
                        self.phase = connect_failed(&error, self.written_at.is_some());
                    }
                    return;
                }
                Err(e) if self.written_at.is_some() && is_reset(&e) => {
                    self.closed_at = Some(seen.at);
                    self.phase = Phase::Closed(Closed::Rst);
                    return;
                }
                Err(e) => {
                    self.phase = connect_failed(&e, self.written_at.is_some());
                    return;
                }
            }
        }
        self.written_at = Some(seen.at);
        self.phase = Phase::Receiving;
    }

    fn read(&mut self, seen: Seen, scratch: &mut Scratch) {
        while let Some((n, stamp)) = self.recv(seen, scratch) {
            if !self.take(scratch.data(n), stamp, seen) {
                return;
            }
        }
    }

    /// One segment's bytes into `scratch`, with their receive stamp;
    /// `None` once the socket would block or the connection has ended
    /// (EOF, reset or error, its phase set accordingly).
    pub(super) fn recv(
        &mut self,
        seen: Seen,
        scratch: &mut Scratch,
    ) -> Option<(usize, Option<std::time::SystemTime>)> {
        loop {
            let stream = self.stream.as_ref()?;
            match scratch.recv(stream) {
                Ok((0, _)) => {
                    let error = stream.take_error().ok().flatten();
                    self.on_eof(seen, error);
                    return None;
                }
                Ok(got) => return Some(got),
                Err(e) if would_block(&e) => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_reset(&e) && self.phase == Phase::Idle => {
                    self.closed_at = Some(seen.at);
                    self.phase = Phase::Closed(Closed::Rst);
                    return None;
                }
                Err(e) if is_reset(&e) && self.reused() && !self.reader.started() => {
                    self.closed_at = Some(seen.at);
                    self.phase = Phase::Closed(Closed::Rst);
                    return None;
                }
                Err(e) => {
                    self.phase = connect_failed(&e, self.written_at.is_some());
                    return None;
                }
            }
        }
    }

    /// Response bytes that arrived in a segment stamped `stamp` (kernel
    /// receive time), seen at `seen`; false once the connection failed.
    pub(super) fn take(
        &mut self,
        data: &[u8],
        stamp: Option<std::time::SystemTime>,
        seen: Seen,
    ) -> bool {
        if self.phase != Phase::Receiving {
            self.stray_bytes += data.len();
            return true;
        }
        self.rx_at = stamp.map(|wall| seen.instant_of(wall));
        match self.reader.feed(data) {
            Ok(Fed::Partial) => {}
            Ok(Fed::Done { extra }) => {
                self.stray_bytes += extra;
                self.responded(seen);
            }
            Err(e) => {
                self.phase = Phase::Failed(e.to_string());
                return false;
            }
        }
        true
    }

    fn responded(&mut self, seen: Seen) {
        self.responded_at = Some(seen.at);
        self.response = self.reader.head().cloned();
        self.phase = Phase::Idle;
    }

    /// A request was answered on this connection before the current one.
    pub(super) fn reused(&self) -> bool {
        self.response.is_some()
    }

    pub(super) fn on_eof(&mut self, seen: Seen, error: Option<io::Error>) {
        let reset = error.as_ref().is_some_and(is_reset);
        match self.phase {
            Phase::Receiving if self.reader.eof().is_ok() => {
                // A response delimited by the close: answered, then closed.
                self.responded(seen);
                self.closed_at = Some(seen.at);
                self.phase = Phase::Closed(Closed::Fin);
            }
            Phase::Idle => {
                self.closed_at = Some(seen.at);
                self.phase = Phase::Closed(if reset { Closed::Rst } else { Closed::Fin });
            }
            // A reused connection closed before any of the new response.
            Phase::Receiving | Phase::Sending if self.reused() && !self.reader.started() => {
                self.closed_at = Some(seen.at);
                self.phase = Phase::Closed(if reset { Closed::Rst } else { Closed::Fin });
            }
            _ => {
                let why = self
                    .reader
                    .eof()
                    .err()
                    .map_or_else(|| "closed early".to_owned(), |e| e.to_string());
                self.phase = Phase::Failed(why);
            }
        }
    }
}

/// A connect error (before the request was written) or a send/receive
/// error, in words.
pub(super) fn connect_failed(error: &io::Error, connected: bool) -> Phase {
    if connected {
        Phase::Failed(format!("connection error: {error}"))
    } else {
        Phase::Failed(format!("cannot connect: {error}"))
    }
}

/// A reset, or a write to a socket the peer has reset (EPIPE after a FIN).
pub(super) fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}
