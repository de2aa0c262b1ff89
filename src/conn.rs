//! One client connection: its socket, its buffers while it has work, the
//! request in progress, and its two timer slots.
//!
//! The readiness contract (mio, edge-triggered): on every event the
//! connection reads until `WouldBlock`, unless it stops on purpose (read
//! budget spent: the worker puts it on its ready list; output backed up: a
//! writable edge will come; input full behind a delayed or backed-up
//! response: that response's completion drives it again).
//!
//! Timers are not touched while bytes move. A connection only records that
//! something happened; once per loop turn the worker calls
//! [`Conn::sync_timers`] with the freshly read clock, and the connection
//! decides in one place ([`Conn::wanted_activity`], [`Conn::wanted_deadline`])
//! what its two slots should hold. Stamping with a clock read *after* the
//! activity is what makes "never fire early" hold.

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;

use crate::config::Settings;
use crate::date::DateCache;
use crate::http::body::BodySink;
use crate::http::response::{CONTINUE, Persistence, ResponseHead, push_decimal};
use crate::http::routes::Route;
use crate::http::{BodyDecoder, Framing, RequestError, RequestHead, Status, parse_head};
use crate::pool::{BufferPool, Buffers};
use crate::stats::{CloseCause, Stats};
use crate::timers::{Micros, TimerId, TimerLists};
use crate::worker::TimerEvent;

/// Reads per readiness event before yielding to other connections.
const READ_BUDGET: u32 = 16;
/// Stop starting new pipelined requests while this much output is unsent.
const OUTPUT_HIGH_WATER: usize = 64 * 1024;
/// How long a closing connection drains input so the client reads the
/// response instead of a reset, and how much it drains at most.
const LINGER_MS: u64 = 1000;
const LINGER_MAX_BYTES: u64 = 1 << 20;
/// Smallest input buffer limit, whatever `--max-header-size` says.
const MIN_INPUT_LIMIT: usize = 4096;

const HELLO: &[u8] = b"Hello, World!";

/// Which of a connection's two timers fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Refreshed by activity (keep-alive idle, inactivity) or fixed for a
    /// phase (headers deadline, `/delay`, linger).
    Activity,
    /// The whole-request deadline: activity never moves it.
    Deadline,
}

/// What the activity timer is measuring. Tags carry the request number
/// where a new request must start a new timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    KeepAlive,
    Headers { request: u32 },
    Inactivity,
    Delay { request: u32 },
    Linger,
}

impl Watch {
    /// Whether activity restarts it.
    fn refreshes(self) -> bool {
        matches!(self, Watch::KeepAlive | Watch::Inactivity)
    }
}

/// What the activity slot should hold: the watch, its duration, ref'd?
struct WantedTimer {
    watch: Watch,
    ms: u64,
    refed: bool,
}

/// Where the request in progress stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exchange {
    /// Between requests, or reading a head.
    AwaitingHead,
    /// Reading (or discarding) a body; `answer` is sent once it ends.
    Body { decoder: BodyDecoder, received: u64, answer: Answer },
    /// Received; the answer waits for the `/delay` timer.
    Delayed { ms: u64, answer: Answer },
    /// The last response is queued; drain input until the client closes.
    Closing { cause: CloseCause },
}

/// How to answer a request once it has been received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answer {
    route: Route,
    is_head: bool,
    persistence: Persistence,
}

/// Coarse state, for choosing timers and for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, nothing received yet.
    Fresh,
    /// Persistent, between requests, nothing buffered.
    Idle,
    /// Part of a request head received.
    Head,
    Body,
    Delayed { ms: u64 },
    /// Output waits for the socket.
    Writing,
    Closing,
}

/// Whether the connection lives on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Open,
    Close(CloseCause),
}

/// What a connection may use while it handles an event.
pub struct Ctx<'a> {
    pub now: Micros,
    pub timers: &'a mut TimerLists<TimerEvent>,
    pub pool: &'a mut BufferPool,
    pub date: &'a mut DateCache,
    pub settings: &'a Settings,
    pub stats: &'a Stats,
    /// The server is shutting down: no new persistence.
    pub draining: bool,
}

/// One client connection.
pub struct Conn {
    stream: TcpStream,
    /// Present while the connection has work; back in the pool when idle.
    buffers: Option<Box<Buffers>>,
    exchange: Exchange,
    activity: Option<TimerId>,
    /// What `activity` measures; meaningful only while it is `Some`.
    watch: Watch,
    deadline: Option<TimerId>,
    /// The request `deadline` was armed for.
    deadline_for: u32,
    /// Requests fully received: the next one is number `received`.
    received: u32,
    /// Responses queued.
    served: u32,
    /// Bytes drained while closing.
    lingered: u32,
    /// Bytes moved since the last timer sync.
    moved: bool,
    /// On the worker's list of connections to sync this turn.
    pub touched: bool,
    /// Stopped reading with input still waiting: drive again next turn.
    pub wants_more: bool,
    /// The client shut its write side (read returned 0).
    peer_closed: bool,
    write_shut: bool,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buffers: None,
            exchange: Exchange::AwaitingHead,
            activity: None,
            watch: Watch::KeepAlive,
            deadline: None,
            deadline_for: 0,
            received: 0,
            served: 0,
            lingered: 0,
            moved: false,
            touched: false,
            wants_more: false,
            peer_closed: false,
            write_shut: false,
        }
    }

    pub fn phase(&self) -> Phase {
        if let Exchange::Closing { .. } = self.exchange {
            return Phase::Closing;
        }
        if let Exchange::Delayed { ms, .. } = self.exchange {
            return Phase::Delayed { ms };
        }
        let buffers = self.buffers.as_deref();
        if buffers.is_some_and(|b| b.output.pending() > 0) {
            return Phase::Writing;
        }
        match self.exchange {
            Exchange::Body { .. } => Phase::Body,
            _ if buffers.is_some_and(|b| !b.input.is_empty()) => Phase::Head,
            _ if self.received == 0 => Phase::Fresh,
            _ => Phase::Idle,
        }
    }

    /// A readiness event, or a turn on the ready list.
    pub fn on_ready(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        self.drive(ctx)
    }

    /// One of this connection's timers fired (and is gone from the lists).
    pub fn on_timer(&mut self, slot: Slot, ctx: &mut Ctx<'_>) -> Flow {
        match slot {
            Slot::Deadline => {
                self.deadline = None;
                self.time_out(CloseCause::RequestTimeout, ctx)
            }
            Slot::Activity => {
                self.activity = None;
                match self.watch {
                    Watch::KeepAlive => Flow::Close(CloseCause::KeepAliveTimeout),
                    Watch::Headers { .. } => self.time_out(CloseCause::HeadersTimeout, ctx),
                    Watch::Inactivity => self.time_out(CloseCause::Inactivity, ctx),
                    Watch::Linger => match self.exchange {
                        Exchange::Closing { cause } => Flow::Close(cause),
                        _ => Flow::Close(CloseCause::Error),
                    },
                    Watch::Delay { .. } => {
                        if let Exchange::Delayed { answer, .. } = self.exchange {
                            self.respond(answer, ctx);
                        }
                        self.drive(ctx)
                    }
                }
            }
        }
    }

    /// Closes the connection for the server's own reasons (shutdown,
    /// eviction): gives back its timers and buffers.
    pub fn release(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(id) = self.activity.take() {
            ctx.timers.unenroll(id);
        }
        if let Some(id) = self.deadline.take() {
            ctx.timers.unenroll(id);
        }
        if let Some(buffers) = self.buffers.take() {
            ctx.pool.give(buffers);
        }
    }

    /// Brings both timer slots in line with the connection's state,
    /// stamping with `now`, a clock read taken after all recent activity.
    pub fn sync_timers(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>, now: Micros, settings: &Settings) {
        let moved = std::mem::take(&mut self.moved);
        let activity_event = TimerEvent::Conn { key, slot: Slot::Activity };
        match (self.wanted_activity(settings), self.activity) {
            (None, None) => {}
            (None, Some(id)) => {
                timers.unenroll(id);
                self.activity = None;
            }
            (Some(want), None) => {
                self.activity = Some(timers.enroll(now, want.ms, want.refed, activity_event));
                self.watch = want.watch;
            }
            (Some(want), Some(id)) => {
                if want.watch != self.watch {
                    timers.rearm(id, want.ms, now);
                    self.watch = want.watch;
                } else if moved && want.watch.refreshes() {
                    timers.refresh(id, now);
                }
                if timers.is_refed(id) != want.refed {
                    timers.set_ref(id, want.refed);
                }
            }
        }
        let deadline_event = TimerEvent::Conn { key, slot: Slot::Deadline };
        match (self.wanted_deadline(settings), self.deadline) {
            (None, None) => {}
            (None, Some(id)) => {
                timers.unenroll(id);
                self.deadline = None;
            }
            (Some(ms), None) => {
                self.deadline = Some(timers.enroll(now, ms, true, deadline_event));
                self.deadline_for = self.received;
            }
            (Some(ms), Some(id)) if self.deadline_for != self.received => {
                timers.rearm(id, ms, now);
                self.deadline_for = self.received;
            }
            (Some(_), Some(_)) => {}
        }
    }

    /// The activity slot's policy, in one place (DESIGN.md's timer table).
    fn wanted_activity(&self, settings: &Settings) -> Option<WantedTimer> {
        let want = |watch, ms, refed| Some(WantedTimer { watch, ms, refed });
        match self.phase() {
            Phase::Fresh => settings.headers_ms.and_then(|ms| want(Watch::Headers { request: 0 }, ms, false)),
            Phase::Idle => want(Watch::KeepAlive, settings.keep_alive_ms, false),
            Phase::Head => {
                let request = self.received;
                settings.headers_ms.and_then(|ms| want(Watch::Headers { request }, ms, true))
            }
            Phase::Body | Phase::Writing => settings.inactivity_ms.and_then(|ms| want(Watch::Inactivity, ms, true)),
            Phase::Delayed { ms } => want(Watch::Delay { request: self.received }, ms, true),
            Phase::Closing => want(Watch::Linger, LINGER_MS, false),
        }
    }

    /// The deadline slot's policy: armed from a request's first byte until
    /// it has been received.
    fn wanted_deadline(&self, settings: &Settings) -> Option<u64> {
        let receiving = match self.exchange {
            Exchange::Body { .. } => true,
            Exchange::AwaitingHead => self.buffers.as_deref().is_some_and(|b| !b.input.is_empty()),
            Exchange::Delayed { .. } | Exchange::Closing { .. } => false,
        };
        settings.request_ms.filter(|_| receiving)
    }

    /// Reads, answers and writes until the socket would block or the
    /// connection must wait for something else.
    fn drive(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        self.wants_more = false;
        let mut reads = 0;
        loop {
            self.process(ctx);
            match self.flush() {
                Ok(true) => {}
                Ok(false) => return Flow::Open,
                Err(_) => return Flow::Close(CloseCause::Reset),
            }
            if let Exchange::Closing { cause } = self.exchange {
                if !self.write_shut {
                    self.write_shut = true;
                    if self.stream.shutdown(Shutdown::Write).is_err() {
                        return Flow::Close(cause);
                    }
                }
                if self.peer_closed || u64::from(self.lingered) > LINGER_MAX_BYTES {
                    return Flow::Close(cause);
                }
            } else if self.peer_closed {
                return match self.exchange {
                    Exchange::Delayed { .. } => Flow::Open,
                    _ => Flow::Close(CloseCause::Client),
                };
            }
            if reads == READ_BUDGET {
                self.wants_more = true;
                return Flow::Open;
            }
            reads += 1;
            match self.read(ctx) {
                Ok(ReadOutcome::Got) => {}
                Ok(ReadOutcome::Eof) => self.peer_closed = true,
                Ok(ReadOutcome::Full) => return Flow::Open,
                Err(e) if would_block(&e) => return self.settle(ctx),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Flow::Close(CloseCause::Reset),
            }
        }
    }

    /// After the socket is drained: an idle connection gives its buffers back.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        let idle = self.exchange == Exchange::AwaitingHead
            && self.buffers.as_deref().is_none_or(Buffers::is_drained);
        if idle {
            if let Some(buffers) = self.buffers.take() {
                ctx.pool.give(buffers);
            }
            if ctx.draining {
                return Flow::Close(CloseCause::Shutdown);
            }
        }
        Flow::Open
    }

    fn read(&mut self, ctx: &mut Ctx<'_>) -> io::Result<ReadOutcome> {
        let limit = ctx.settings.max_header_size.max(MIN_INPUT_LIMIT);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        if spare.is_empty() {
            return Ok(ReadOutcome::Full);
        }
        let n = self.stream.read(spare)?;
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        self.moved = true;
        if let Exchange::Closing { .. } = self.exchange {
            self.lingered = self.lingered.saturating_add(n as u32);
            buffers.input.clear();
        } else {
            buffers.input.filled(n);
        }
        Ok(ReadOutcome::Got)
    }

    /// Writes queued output; `Ok(true)` once all of it is sent.
    fn flush(&mut self) -> io::Result<bool> {
        let Some(buffers) = self.buffers.as_deref_mut() else {
            return Ok(true);
        };
        while buffers.output.pending() > 0 {
            match self.stream.write(buffers.output.unsent()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buffers.output.advance(n);
                    self.moved = true;
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Parses and answers what is buffered, in order, until more input is
    /// needed, a response must wait, or output backs up.
    fn process(&mut self, ctx: &mut Ctx<'_>) {
        loop {
            let Some(buffers) = self.buffers.as_deref_mut() else {
                return;
            };
            if buffers.output.pending() >= OUTPUT_HIGH_WATER || buffers.input.is_empty() {
                return;
            }
            match self.exchange {
                Exchange::AwaitingHead => {
                    let limit = ctx.settings.max_header_size.max(MIN_INPUT_LIMIT);
                    match parse_head(buffers.input.bytes_mut(), limit, ctx.settings.max_body_size) {
                        Ok(Some((head, len))) => {
                            buffers.input.consume(len);
                            self.begin(head, ctx);
                        }
                        Ok(None) => return,
                        Err(error) => return self.refuse(error, ctx),
                    }
                }
                Exchange::Body { mut decoder, mut received, answer } => {
                    let keep = (answer.route == Route::Root).then_some(&mut buffers.body);
                    let limit = ctx.settings.max_body_size as u64;
                    let mut sink = BodySink { keep, received: &mut received, limit };
                    match decoder.decode(buffers.input.bytes(), &mut sink) {
                        Ok(progress) => {
                            buffers.input.consume(progress.consumed);
                            self.exchange = Exchange::Body { decoder, received, answer };
                            if !progress.done {
                                return;
                            }
                            self.complete(answer, ctx);
                        }
                        Err(error) => return self.refuse(error, ctx),
                    }
                }
                Exchange::Delayed { .. } => return,
                Exchange::Closing { .. } => {
                    buffers.input.clear();
                    return;
                }
            }
        }
    }

    /// A head has been parsed: decide persistence and start the body.
    fn begin(&mut self, head: RequestHead, ctx: &mut Ctx<'_>) {
        let answer = Answer {
            route: head.route,
            is_head: head.is_head,
            persistence: persistence(&head, self.served, ctx.settings, ctx.draining),
        };
        let decoder = match head.framing {
            Framing::None => return self.complete(answer, ctx),
            Framing::Length(length) => BodyDecoder::Length { remaining: length },
            Framing::Chunked => BodyDecoder::chunked(),
        };
        let buffers = self.buffers.as_deref_mut().expect("a head came from the buffers");
        if head.expect_continue && buffers.input.is_empty() {
            buffers.output.buf.extend_from_slice(CONTINUE);
        }
        buffers.body.clear();
        self.exchange = Exchange::Body { decoder, received: 0, answer };
    }

    /// The whole request is in: answer now, or after its delay.
    fn complete(&mut self, answer: Answer, ctx: &mut Ctx<'_>) {
        self.received += 1;
        match answer.route {
            Route::Delay { ms } => self.exchange = Exchange::Delayed { ms, answer },
            _ => self.respond(answer, ctx),
        }
    }

    /// Queues the response to a received request.
    fn respond(&mut self, answer: Answer, ctx: &mut Ctx<'_>) {
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let Buffers { output, body, .. } = &mut **buffers;
        let (status, content_type, payload): (Status, &'static str, &[u8]) = match answer.route {
            Route::Root if body.is_empty() => (Status::Ok, "text/plain", HELLO),
            Route::Root => (Status::Ok, "application/octet-stream", body),
            Route::Delay { ms } => {
                body.clear();
                body.extend_from_slice(b"delayed ");
                push_decimal(body, ms as usize);
                body.extend_from_slice(b"ms\n");
                (Status::Ok, "text/plain", body)
            }
            Route::Asterisk => (Status::Ok, "text/plain", b""),
            Route::NotFound => (Status::NotFound, "text/plain", b"Not Found\n"),
        };
        ResponseHead {
            status,
            content_type,
            content_length: payload.len(),
            persistence: answer.persistence,
            date: ctx.date.current(ctx.timers, ctx.now, TimerEvent::DateExpired),
            keep_alive_header: &ctx.settings.keep_alive_header,
        }
        .encode(&mut output.buf);
        if !answer.is_head {
            output.buf.extend_from_slice(payload);
        }
        body.clear();
        self.served += 1;
        ctx.stats.responded(status);
        self.exchange = match answer.persistence {
            Persistence::Close => Exchange::Closing { cause: CloseCause::Done },
            _ => Exchange::AwaitingHead,
        };
    }

    /// Answers a bad request with its status and closes (lingering).
    fn refuse(&mut self, error: RequestError, ctx: &mut Ctx<'_>) {
        tracing::debug!(?error, "refusing request");
        self.fail(error.status(), CloseCause::BadRequest, ctx);
    }

    /// A timer ran out while receiving: 408 if no response is under way.
    fn time_out(&mut self, cause: CloseCause, ctx: &mut Ctx<'_>) -> Flow {
        tracing::debug!(?cause, phase = ?self.phase(), "connection timed out");
        if self.phase() == Phase::Writing {
            return Flow::Close(cause);
        }
        self.fail(Status::RequestTimeout, cause, ctx);
        self.drive(ctx)
    }

    /// Queues an error response with `Connection: close` and starts closing.
    fn fail(&mut self, status: Status, cause: CloseCause, ctx: &mut Ctx<'_>) {
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        buffers.input.clear();
        let reason = status_text(status);
        ResponseHead {
            status,
            content_type: "text/plain",
            content_length: reason.len(),
            persistence: Persistence::Close,
            date: ctx.date.current(ctx.timers, ctx.now, TimerEvent::DateExpired),
            keep_alive_header: b"",
        }
        .encode(&mut buffers.output.buf);
        buffers.output.buf.extend_from_slice(reason);
        ctx.stats.responded(status);
        self.exchange = Exchange::Closing { cause };
    }
}

/// Outcome of one read.
enum ReadOutcome {
    Got,
    Eof,
    /// No room: the input waits on a response.
    Full,
}

/// The keep-alive decision, in one place.
fn persistence(head: &RequestHead, served: u32, settings: &Settings, draining: bool) -> Persistence {
    let limit = settings.max_requests_per_socket;
    let allowed = settings.keep_alive_advertised_secs.is_some()
        && !draining
        && (limit == 0 || served + 1 < limit)
        && head.wants_persistence();
    match (allowed, head.minor_version) {
        (false, _) => Persistence::Close,
        (true, 0) => Persistence::KeepAliveHttp10,
        (true, _) => Persistence::KeepAlive,
    }
}

fn status_text(status: Status) -> &'static [u8] {
    match status {
        Status::BadRequest => b"Bad Request\n",
        Status::RequestTimeout => b"Request Timeout\n",
        Status::ContentTooLarge => b"Content Too Large\n",
        Status::ExpectationFailed => b"Expectation Failed\n",
        Status::RequestHeaderFieldsTooLarge => b"Request Header Fields Too Large\n",
        Status::NotImplemented => b"Not Implemented\n",
        Status::HttpVersionNotSupported => b"HTTP Version Not Supported\n",
        Status::ServiceUnavailable => b"Service Unavailable\n",
        Status::NotFound => b"Not Found\n",
        Status::Continue | Status::Ok => b"",
    }
}

pub fn would_block(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::WouldBlock
}
