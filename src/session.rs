//! The HTTP exchange on one connection, without the socket: bytes in the
//! input buffer become responses in the output buffer, request by request,
//! in order. An explicit state machine (`Exchange`) says where the request
//! in progress stands; [`Session::phase`] condenses it, with the buffers, into
//! what the connection's timers and the worker need to know.
//!
//! Memory per connection does not depend on what the client sends: input
//! is bounded by the head limit, output by [`OUTPUT_HIGH_WATER`] (no new
//! request is started and no more body echoed while that much is unsent),
//! and the echo route gathers at most [`ECHO_BUFFER`] of a body. A body
//! that ends within it is answered whole, with `Content-Length`; a longer
//! one is streamed: the response head goes out, then the body as it
//! arrives (`Content-Length` in, `Content-Length` out; chunked in, chunked
//! out). Once a response has begun, nothing can replace it: a body that
//! turns out malformed ends the connection with the response unfinished,
//! and a timeout closes it without a 408. A generated body (`/bytes/<n>`)
//! is never buffered: the connection writes it from the shared filler
//! block behind the output ([`Session::filler_due`]), whatever n.
//!
//! What is answered is the application's (`app`): once per request head
//! the session asks it for a [`Plan`], and carries that out here.
//!
//! Keeping I/O out makes this the unit the fuzz target drives directly.

mod body;

use body::BodyTarget;

use crate::app::{BodySource, KeepAliveScratch, Plan, ReplyHead, Request, Terms, read_controls};
use crate::config::Settings;
use crate::ctx::{Ctx, TimerEvent, loop_ms};
use crate::http::response::{BodyLength, CONTINUE, Persistence, ResponseHead};
use crate::http::{BodyDecoder, Framing, Method, RequestError, Status, parse_head};
use crate::lab::conn_controls::ConnControls;
use crate::lab::controls::{After, BadControl};
use crate::pool::Buffers;
use crate::stats::CloseCause;
use crate::timers::Micros;

/// No new pipelined request is started, and no more of a body echoed,
/// while this much output is unsent.
pub const OUTPUT_HIGH_WATER: usize = 32 * 1024;
/// The most of a body the echo route gathers before it streams instead.
pub const ECHO_BUFFER: usize = 16 * 1024;
/// Smallest input buffer limit, whatever `--max-header-size` says.
const MIN_INPUT_LIMIT: usize = 4096;

/// Where the request in progress stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exchange {
    /// Between requests, or reading a head.
    AwaitingHead,
    /// Reading a body; `target` says where it goes and whether the
    /// response has begun.
    Body {
        decoder: BodyDecoder,
        received: u64,
        answer: Plan,
        target: BodyTarget,
    },
    /// Received; the answer waits for the `/delay` timer.
    Delayed { ms: u64, answer: Plan },
    /// The head of a `/bytes` answer is queued; `remaining` bytes of its
    /// body are still to be generated, as the output drains.
    Sending {
        remaining: u64,
        persistence: Persistence,
    },
    /// The last response is queued; the connection only drains input now.
    Closing { cause: CloseCause },
    /// The idle timer ran out and the server sent its FIN at `fin_at`: the
    /// connection only watches what the peer still does (see `conn`).
    Watching { fin_at: Micros, late: bool },
}

/// A connection's state, condensed for choosing its timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, nothing received yet.
    Fresh,
    /// Persistent, between requests, nothing buffered.
    Idle,
    /// Part of a request head received.
    Head,
    Body,
    /// Waiting on `/delay` for this long.
    Delayed {
        ms: u64,
    },
    /// Output waits for the socket.
    Writing,
    Closing,
    /// Closed for writing after the idle timeout; watching the peer.
    Watching,
}

/// `last_response_ms` before the first response.
const NO_RESPONSE: u32 = u32::MAX;

/// The request/response state of one connection.
#[derive(Debug)]
pub struct Session {
    exchange: Exchange,
    /// Requests fully received: the next one is number `received`.
    received: u32,
    /// Responses queued.
    served: u32,
    /// What the keep-alive lab's controls set on this connection.
    controls: ConnControls,
    /// When the last response was queued, in loop-clock ms (wrapping), for
    /// the access log's idle gap; [`NO_RESPONSE`] before the first.
    last_response_ms: u32,
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Session {
    pub fn new() -> Self {
        Session {
            exchange: Exchange::AwaitingHead,
            received: 0,
            served: 0,
            controls: ConnControls::default(),
            last_response_ms: NO_RESPONSE,
        }
    }

    /// What the lab's controls set on this connection.
    pub fn controls(&self) -> &ConnControls {
        &self.controls
    }

    /// The idle timer ran out and the server sent its FIN: from now on the
    /// connection only watches the peer.
    pub fn start_watch(&mut self, now: Micros) {
        self.exchange = Exchange::Watching {
            fin_at: now,
            late: false,
        };
    }

    /// When the server's idle FIN went out, while the connection watches.
    pub fn watching_since(&self) -> Option<Micros> {
        match self.exchange {
            Exchange::Watching { fin_at, .. } => Some(fin_at),
            _ => None,
        }
    }

    /// Data arrived during the watch: true the first time (a late request).
    pub fn note_late_data(&mut self) -> bool {
        match &mut self.exchange {
            Exchange::Watching { late, .. } => !std::mem::replace(late, true),
            _ => false,
        }
    }

    /// The response just flushed ends with a reset (`after=rst`).
    pub fn aborts(&self) -> bool {
        self.closing() == Some(CloseCause::Control) && self.controls.after() == After::Rst
    }

    /// The largest input a connection buffers: at least the head limit, so
    /// an over-long head is seen as such (the limit itself applies to heads).
    pub fn input_limit(settings: &Settings) -> usize {
        settings.max_header_size.max(MIN_INPUT_LIMIT)
    }

    /// Requests fully received so far.
    pub fn received(&self) -> u32 {
        self.received
    }

    /// Responses queued so far.
    pub fn served(&self) -> u32 {
        self.served
    }

    /// The method of the request being received, if its head was read.
    fn method_in_progress(&self) -> Method {
        match self.exchange {
            Exchange::Body { answer, .. } | Exchange::Delayed { answer, .. } => answer.method,
            Exchange::AwaitingHead
            | Exchange::Sending { .. }
            | Exchange::Closing { .. }
            | Exchange::Watching { .. } => Method::Other,
        }
    }

    /// Set once the last response is queued: why the connection will close.
    pub fn closing(&self) -> Option<CloseCause> {
        match self.exchange {
            Exchange::Closing { cause } => Some(cause),
            _ => None,
        }
    }

    /// A generated body is still owed beyond what the output holds.
    pub fn is_generating(&self) -> bool {
        matches!(self.exchange, Exchange::Sending { .. })
    }

    /// Bytes of filler still owed to the response being sent, written by
    /// the connection after the output (see `app::filler`).
    pub fn filler_due(&self) -> Option<u64> {
        match self.exchange {
            Exchange::Sending { remaining, .. } => Some(remaining),
            _ => None,
        }
    }

    /// `n` bytes of the owed filler went out.
    pub fn filler_sent(&mut self, n: u64) {
        if let Exchange::Sending {
            remaining,
            persistence,
        } = self.exchange
        {
            let remaining = remaining.saturating_sub(n);
            self.exchange = match remaining {
                0 => self.after_response(persistence),
                _ => Exchange::Sending {
                    remaining,
                    persistence,
                },
            };
        }
    }

    pub fn is_delayed(&self) -> bool {
        matches!(self.exchange, Exchange::Delayed { .. })
    }

    /// Between requests: no more are taken; the connection closes (for
    /// `cause`) once its input is drained.
    pub fn stop_persisting(&mut self, cause: CloseCause) {
        if self.exchange == Exchange::AwaitingHead {
            self.exchange = Exchange::Closing { cause };
        }
    }

    /// A response has begun and is not finished (a streamed echo, whose
    /// request is still arriving, or a generated body): a timeout can no
    /// longer be answered, only end the connection.
    pub fn response_begun(&self) -> bool {
        matches!(
            self.exchange,
            Exchange::Body {
                target: BodyTarget::Stream(_),
                ..
            } | Exchange::Sending { .. }
        )
    }

    /// Between requests with nothing buffered: the buffers can go back.
    pub fn is_idle(&self, buffers: Option<&Buffers>) -> bool {
        self.exchange == Exchange::AwaitingHead && buffers.is_none_or(Buffers::is_drained)
    }

    /// A request has started arriving and is not yet fully received.
    pub fn is_receiving(&self, buffers: Option<&Buffers>) -> bool {
        match self.exchange {
            Exchange::Body { .. } => true,
            Exchange::AwaitingHead => buffers.is_some_and(|b| !b.input.is_empty()),
            Exchange::Delayed { .. }
            | Exchange::Sending { .. }
            | Exchange::Closing { .. }
            | Exchange::Watching { .. } => false,
        }
    }

    /// A closing connection counts as writing until its output is flushed:
    /// the last response is sent whole before the linger drain begins.
    pub fn phase(&self, buffers: Option<&Buffers>) -> Phase {
        match self.exchange {
            Exchange::Delayed { ms, .. } => Phase::Delayed { ms },
            Exchange::Watching { .. } => Phase::Watching,
            Exchange::Sending { .. } => Phase::Writing,
            _ if buffers.is_some_and(|b| b.output.pending() > 0) => Phase::Writing,
            Exchange::Closing { .. } => Phase::Closing,
            Exchange::Body { .. } => Phase::Body,
            _ if buffers.is_some_and(|b| !b.input.is_empty()) => Phase::Head,
            _ if self.received == 0 => Phase::Fresh,
            _ => Phase::Idle,
        }
    }

    /// Parses and answers what is buffered, in order, until more input is
    /// needed, a response must wait, or output backs up.
    pub fn process(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        loop {
            // A generated body goes from the connection's writes
            // ([`Session::filler_due`]); what follows it waits.
            if self.is_generating() {
                return;
            }
            if buffers.output.pending() >= OUTPUT_HIGH_WATER || buffers.input.is_empty() {
                return;
            }
            match self.exchange {
                Exchange::AwaitingHead => {
                    if ctx.settings.logs_access() {
                        buffers.log.begin(ctx.now);
                    }
                    let limit = ctx.settings.max_header_size;
                    if !worth_parsing(buffers, limit) {
                        return;
                    }
                    let max_body = ctx.settings.max_body_size;
                    match parse_head(buffers.input.bytes_mut(), limit, max_body) {
                        Ok(Some((head, len))) => {
                            match read_controls(&head, ctx.settings) {
                                Ok(set) if set.is_empty() => {}
                                Ok(set) => self.controls.apply(set, self.served),
                                Err(bad) => {
                                    let method = head.method;
                                    buffers.head_scanned = 0;
                                    return self.refuse_control(bad, method, buffers, ctx);
                                }
                            }
                            let request = Request {
                                head: &head,
                                served: self.served,
                                draining: ctx.draining,
                                controls: self.controls,
                            };
                            let answer = Plan::of(request, ctx.settings);
                            let body = (head.framing, head.expect_continue);
                            if ctx.settings.logs_access() {
                                let Buffers { input, log, .. } = &mut *buffers;
                                log.remember_head(&input.bytes()[..len]);
                            }
                            buffers.input.consume(len);
                            buffers.head_scanned = 0;
                            self.begin(answer, body, buffers, ctx);
                        }
                        Ok(None) => {
                            buffers.head_scanned = buffers.input.len();
                            return;
                        }
                        Err(error) => {
                            buffers.head_scanned = 0;
                            return self.refuse(error, buffers, ctx);
                        }
                    }
                }
                Exchange::Body {
                    decoder,
                    received,
                    answer,
                    target,
                } => {
                    if !self.take_body(decoder, received, answer, target, buffers, ctx) {
                        return;
                    }
                }
                Exchange::Delayed { .. } | Exchange::Sending { .. } => return,
                Exchange::Closing { .. } | Exchange::Watching { .. } => {
                    buffers.input.clear();
                    return;
                }
            }
        }
    }

    /// The `/delay` timer fired: queue the waiting answer.
    pub fn delay_elapsed(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        if let Exchange::Delayed { answer, .. } = self.exchange {
            self.respond(answer, buffers, ctx);
        }
    }

    /// A receive timer ran out: queue a 408 (after any response still
    /// being written) and close, unless the response to this request has
    /// begun (then there is nothing more to say: `false`, close now).
    /// Already closing (a second timer due in the same turn): the last
    /// response is queued, nothing is added, the close goes on (`true`).
    pub fn time_out(
        &mut self,
        cause: CloseCause,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        if self.closing().is_some() {
            return true;
        }
        if self.response_begun() {
            self.log_stream(buffers, ctx);
            return false;
        }
        self.fail(Status::RequestTimeout, cause, buffers, ctx);
        true
    }

    /// A head has been parsed and planned for: start its body, framed as
    /// `framing`, with a 100 (Continue) first when `expect_continue`.
    fn begin(
        &mut self,
        answer: Plan,
        (framing, expect_continue): (Framing, bool),
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        let decoder = match framing {
            Framing::None => return self.complete(answer, buffers, ctx),
            Framing::Length(length) => BodyDecoder::Length { remaining: length },
            // Trailers count against the head limit.
            Framing::Chunked => BodyDecoder::chunked(ctx.settings.max_header_size),
        };
        // RFC 9110 §10.1.1: no interim response once the body is arriving.
        if expect_continue && buffers.input.is_empty() {
            buffers.output.buf.extend_from_slice(CONTINUE);
        }
        buffers.body.clear();
        let target = if answer.keeps_body() {
            BodyTarget::Gather
        } else {
            BodyTarget::Discard
        };
        self.exchange = Exchange::Body {
            decoder,
            received: 0,
            answer,
            target,
        };
    }

    /// The whole request is in: answer now, or after its delay.
    fn complete(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        self.received += 1;
        match answer.wait_ms() {
            Some(ms) => self.exchange = Exchange::Delayed { ms, answer },
            None => self.respond(answer, buffers, ctx),
        }
    }

    /// Queues the response to a received request.
    fn respond(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        let terms = answer.terms.when_draining(ctx.draining);
        let persistence = terms.persistence;
        let Buffers { output, body, .. } = buffers;
        let reply = answer.reply(body, ctx.settings);
        // Bytes of a `/bytes` body, generated after the head as it drains.
        let (payload, generated): (&[u8], u64) = match reply.body {
            BodySource::Bytes(payload) => (payload, 0),
            BodySource::Filler(n) => (b"", n),
        };
        let content_length = payload.len() + generated as usize;
        let length = BodyLength::Known(content_length as u64);
        write_head(&mut output.buf, reply.head, length, terms, ctx);
        if !answer.is_head {
            output.buf.extend_from_slice(payload);
        }
        let status = reply.head.status;
        body.clear();
        ctx.stats.responded(status, answer.method, self.served > 0);
        self.served += 1;
        if ctx.settings.logs_access() {
            let sent = if answer.is_head { 0 } else { content_length };
            let previous = self.previous_response_ms();
            ctx.log_response(&mut buffers.log, status, sent as u64, previous);
        }
        self.last_response_ms = loop_ms(ctx.now);
        self.exchange = match generated {
            0 => self.after_response(persistence),
            _ if answer.is_head => self.after_response(persistence),
            remaining => Exchange::Sending {
                remaining,
                persistence,
            },
        };
    }

    /// Where the exchange stands once a response is complete: waiting for
    /// the next request, or closing (after `Connection: close`, or at once
    /// behind a keep-alive response when `after=silent|rst` asked for it).
    fn after_response(&mut self, persistence: Persistence) -> Exchange {
        match (persistence, self.controls.after()) {
            (Persistence::KeepAlive, After::Silent | After::Rst)
            | (Persistence::Close, After::Rst) => Exchange::Closing {
                cause: CloseCause::Control,
            },
            (Persistence::Close, _) => Exchange::Closing {
                cause: CloseCause::Done,
            },
            (Persistence::KeepAlive, _) => {
                self.controls.after_done();
                Exchange::AwaitingHead
            }
        }
    }

    /// Loop-clock ms of the previous response, for the access log's gap.
    fn previous_response_ms(&self) -> Option<u32> {
        (self.last_response_ms != NO_RESPONSE).then_some(self.last_response_ms)
    }

    /// Answers a bad request with its status and closes.
    fn refuse(&mut self, error: RequestError, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        tracing::debug!(?error, "refusing request");
        self.fail(error.status(), CloseCause::BadRequest, buffers, ctx);
    }

    /// Answers a request whose lab control has a bad value: 400, with a
    /// body naming the control and what it takes, and closes.
    fn refuse_control(
        &mut self,
        bad: BadControl,
        method: Method,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        tracing::debug!(control = bad.name, "refusing a bad lab control");
        let body = format!("{bad}\n");
        let answer = (Status::BadRequest, body.as_bytes(), method);
        self.fail_with(answer, CloseCause::BadRequest, buffers, ctx);
    }

    /// Queues an error response with `Connection: close` and starts closing.
    fn fail(
        &mut self,
        status: Status,
        cause: CloseCause,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        let answer = (status, status.reason_line(), self.method_in_progress());
        self.fail_with(answer, cause, buffers, ctx);
    }

    /// [`Session::fail`] with a body of its own: `(status, body, method)`.
    fn fail_with(
        &mut self,
        (status, reason, method): (Status, &[u8], Method),
        cause: CloseCause,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        if ctx.settings.logs_access() {
            let Buffers { input, log, .. } = &mut *buffers;
            log.remember_partial(input.bytes());
        }
        buffers.input.clear();
        buffers.head_scanned = 0;
        let length = BodyLength::Known(reason.len() as u64);
        let out = &mut buffers.output.buf;
        let head = ReplyHead {
            status,
            content_type: "text/plain",
        };
        write_head(out, head, length, Terms::CLOSE, ctx);
        buffers.output.buf.extend_from_slice(reason);
        ctx.stats.responded(status, method, self.served > 0);
        if ctx.settings.logs_access() {
            let previous = self.previous_response_ms();
            ctx.log_response(&mut buffers.log, status, reason.len() as u64, previous);
        }
        self.exchange = Exchange::Closing { cause };
    }
}

/// Appends a response head carrying the cached Date and, when it persists,
/// the Keep-Alive parameters of `terms`.
fn write_head(
    out: &mut Vec<u8>,
    reply: ReplyHead,
    length: BodyLength,
    terms: Terms,
    ctx: &mut Ctx<'_>,
) {
    let mut scratch: KeepAliveScratch = [0; 64];
    ResponseHead {
        status: reply.status,
        content_type: reply.content_type,
        length,
        persistence: terms.persistence,
        date: ctx
            .date
            .current(ctx.timers, ctx.now, TimerEvent::DateExpired),
        keep_alive_header: terms.keep_alive_header(ctx.settings, &mut scratch),
        requests_left: terms.requests_left,
    }
    .encode(out);
}

/// Heads are parsed on every arrival up to this size, so garbage in a
/// request line is refused at once however the bytes are split.
const EAGER_PARSE_BYTES: usize = 256;

/// Whether parsing the buffered head again could tell anything new: while
/// it is short, whenever bytes arrive; past that, when a line has ended
/// since the last try, or when the buffer is full. A head trickled byte by
/// byte thus costs at most a few hundred short parses plus one per line,
/// and the header-count limit bounds the lines.
fn worth_parsing(buffers: &Buffers, limit: usize) -> bool {
    let input = buffers.input.bytes();
    let scanned = buffers.head_scanned.min(input.len());
    input.len() <= EAGER_PARSE_BYTES || input[scanned..].contains(&b'\n') || input.len() >= limit
}
