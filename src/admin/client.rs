//! One admin client: its socket, what it has sent, what waits to be sent
//! (shared frames, so many dashboard viewers hold one copy of a snapshot),
//! where it stands, and its one timer in the admin loop's lists.
//!
//! Non-blocking throughout: reads and writes go until `WouldBlock`, and a
//! client that stops reading only ever fills its own outbox, which is
//! bounded by the caller.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;

use mio::net::TcpStream;

use super::http::{MAX_HEAD, Route};
use super::rounds::RoundId;
use crate::readiness::{interrupted, would_block};
use crate::timers::TimerId;

/// Bytes a client may send past its request before it is cut off.
const MAX_DISCARD: usize = 64 * 1024;

/// Where a client stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Reading the request head.
    Reading,
    /// Waiting for snapshot round `round` to answer `route`.
    Waiting {
        round: RoundId,
        route: Route,
        head_only: bool,
    },
    /// Sending a response; closes once it is out.
    Writing,
    /// Response sent and write side shut: draining until the client closes.
    Lingering,
    /// Subscribed to the event stream; `wants` is the round whose snapshot
    /// it gets next, if a tick asked for one.
    Streaming {
        interval_ms: u64,
        wants: Option<RoundId>,
    },
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// The socket is drained (for now).
    Drained,
    /// The client shut its write side.
    Eof,
    /// More than it may send: the input limit or the discard limit.
    TooMuch,
}

/// One admin connection.
pub struct Client {
    pub stream: TcpStream,
    pub input: Vec<u8>,
    outbox: VecDeque<Arc<[u8]>>,
    /// Bytes of the front frame already sent.
    sent: usize,
    discarded: usize,
    pub state: State,
    /// The client shut its write side (it may still read).
    pub eof: bool,
    /// Its deadline (reading), stall timer (writing) or linger timer.
    pub timer: Option<TimerId>,
}

impl Client {
    pub fn new(stream: TcpStream) -> Self {
        Client {
            stream,
            input: Vec::new(),
            outbox: VecDeque::new(),
            sent: 0,
            discarded: 0,
            state: State::Reading,
            eof: false,
            timer: None,
        }
    }

    /// Reads what the socket holds: into the request buffer while reading
    /// the head (up to [`MAX_HEAD`]), discarded afterwards (up to a limit).
    pub fn receive(&mut self) -> io::Result<Received> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(Received::Eof),
                Ok(n) if self.state == State::Reading => {
                    self.input.extend_from_slice(&chunk[..n]);
                    if self.input.len() > MAX_HEAD {
                        return Ok(Received::TooMuch);
                    }
                }
                Ok(n) => {
                    self.discarded += n;
                    if self.discarded > MAX_DISCARD {
                        return Ok(Received::TooMuch);
                    }
                }
                Err(e) if would_block(&e) => return Ok(Received::Drained),
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Queues bytes to send.
    pub fn queue(&mut self, frame: Arc<[u8]>) {
        if !frame.is_empty() {
            self.outbox.push_back(frame);
        }
    }

    /// Frames not yet fully sent.
    pub fn queued(&self) -> usize {
        self.outbox.len()
    }

    /// Sends what is queued until done or the socket is full. `Ok(true)`:
    /// everything is out; `moved` says whether any byte went.
    pub fn flush(&mut self, moved: &mut bool) -> io::Result<bool> {
        while let Some(front) = self.outbox.front() {
            match self.stream.write(&front[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    *moved = true;
                    self.sent += n;
                    if self.sent == front.len() {
                        self.outbox.pop_front();
                        self.sent = 0;
                    }
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Shuts the write side: the response is complete.
    pub fn finish(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
