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
//! is written into the output as it drains, never more than
//! [`OUTPUT_HIGH_WATER`] at a time, whatever n.
//!
//! Keeping I/O out makes this the unit the fuzz target drives directly.

use crate::access_log::Entry;
use crate::config::Settings;
use crate::ctx::{Ctx, TimerEvent};
use crate::http::body::{BodyOut, BodySink};
use crate::http::response::{
    BodyLength, CHUNK_FRAMING, CONTINUE, LAST_CHUNK, Persistence, ResponseHead, push_chunk,
    push_decimal,
};
use crate::http::routes::Route;
use crate::http::{BodyDecoder, Framing, Method, RequestError, RequestHead, Status, parse_head};
use crate::lab::conn_controls::{AdvertiseOverride, ConnControls};
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

const HELLO: &[u8] = b"Hello, World!";

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
        answer: Answer,
        target: BodyTarget,
    },
    /// Received; the answer waits for the `/delay` timer.
    Delayed { ms: u64, answer: Answer },
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

/// How to answer a request once it has been received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answer {
    route: Route,
    method: Method,
    is_head: bool,
    persistence: Persistence,
}

/// Where the body of the request in progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyTarget {
    /// Counted and dropped: the route ignores the body; answered once it ends.
    Discard,
    /// Gathered in [`Buffers::body`] for the echo, up to [`ECHO_BUFFER`];
    /// answered whole once it ends.
    Gather,
    /// The response head is queued: the body follows it as it arrives.
    Stream(Echo),
}

/// How a streamed echo carries the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    /// As is, under the request's own `Content-Length`.
    Raw,
    /// As chunks (the request was chunked), ended by the last chunk.
    Chunks,
    /// Not at all: the answer to HEAD.
    Nothing,
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
            if let Exchange::Sending {
                remaining,
                persistence,
            } = self.exchange
            {
                let remaining = generate(remaining, &mut buffers.output.buf);
                self.exchange = match remaining {
                    0 => self.after_response(persistence),
                    _ => Exchange::Sending {
                        remaining,
                        persistence,
                    },
                };
                if remaining > 0 {
                    return;
                }
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
                            if ctx.settings.logs_access() {
                                let Buffers { input, log, .. } = &mut *buffers;
                                log.remember_head(&input.bytes()[..len]);
                            }
                            buffers.input.consume(len);
                            buffers.head_scanned = 0;
                            self.begin(head, buffers, ctx);
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

    /// A head has been parsed: decide persistence and start the body.
    fn begin(&mut self, head: RequestHead, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        if ctx.settings.test_controls {
            match head.controls {
                Ok(controls) if controls.is_empty() => {}
                Ok(controls) => self.controls.apply(controls, self.served),
                Err(bad) => return self.refuse_control(bad, head.method, buffers, ctx),
            }
        }
        let answer = Answer {
            route: head.route,
            method: head.method,
            is_head: head.is_head,
            persistence: self.persistence(&head, ctx.settings, ctx.draining),
        };
        let decoder = match head.framing {
            Framing::None => return self.complete(answer, buffers, ctx),
            Framing::Length(length) => BodyDecoder::Length { remaining: length },
            // Trailers count against the head limit.
            Framing::Chunked => BodyDecoder::chunked(ctx.settings.max_header_size),
        };
        // RFC 9110 §10.1.1: no interim response once the body is arriving.
        if head.expect_continue && buffers.input.is_empty() {
            buffers.output.buf.extend_from_slice(CONTINUE);
        }
        buffers.body.clear();
        let target = match answer.route {
            Route::Root => BodyTarget::Gather,
            _ => BodyTarget::Discard,
        };
        self.exchange = Exchange::Body {
            decoder,
            received: 0,
            answer,
            target,
        };
    }

    /// Feeds buffered input to the body in progress, as far as its target
    /// has room. Returns whether processing may go on (`false`: wait for
    /// input or for output to drain, or the request was refused).
    fn take_body(
        &mut self,
        mut decoder: BodyDecoder,
        mut received: u64,
        answer: Answer,
        mut target: BodyTarget,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        if target == BodyTarget::Gather && buffers.body.len() >= ECHO_BUFFER {
            let length = decoder.remaining_length().map(|rest| received + rest);
            target = self.start_stream(answer, length, buffers, ctx);
        }
        // Input is handed over no faster than its target can take it, so an
        // echo never grows the output past the high-water mark.
        let room = match target {
            BodyTarget::Discard | BodyTarget::Stream(Echo::Nothing) => usize::MAX,
            BodyTarget::Gather => ECHO_BUFFER - buffers.body.len(),
            BodyTarget::Stream(Echo::Raw) => {
                OUTPUT_HIGH_WATER.saturating_sub(buffers.output.pending())
            }
            BodyTarget::Stream(Echo::Chunks) => {
                OUTPUT_HIGH_WATER.saturating_sub(buffers.output.pending() + CHUNK_FRAMING)
            }
        };
        let Buffers {
            input,
            output,
            body,
            ..
        } = buffers;
        let out = match target {
            BodyTarget::Discard | BodyTarget::Stream(Echo::Nothing) => BodyOut::Discard,
            BodyTarget::Gather => BodyOut::Raw(body),
            BodyTarget::Stream(Echo::Raw) => BodyOut::Raw(&mut output.buf),
            BodyTarget::Stream(Echo::Chunks) => BodyOut::Chunks(&mut output.buf),
        };
        let available = input.bytes();
        let offered = &available[..available.len().min(room)];
        let mut sink = BodySink {
            out,
            received: &mut received,
            limit: ctx.settings.max_body_size as u64,
        };
        let outcome = decoder.decode(offered, &mut sink);
        self.exchange = Exchange::Body {
            decoder,
            received,
            answer,
            target,
        };
        match outcome {
            Ok(progress) => {
                buffers.input.consume(progress.consumed);
                if progress.done {
                    match target {
                        BodyTarget::Stream(_) => self.finish_stream(answer, buffers, ctx),
                        BodyTarget::Discard | BodyTarget::Gather => {
                            self.complete(answer, buffers, ctx)
                        }
                    }
                }
                progress.consumed > 0
            }
            Err(error) if self.response_begun() => {
                self.abandon_stream(error, buffers, ctx);
                false
            }
            Err(error) => {
                self.refuse(error, buffers, ctx);
                false
            }
        }
    }

    /// The echo outgrew [`ECHO_BUFFER`]: queue the response head (with the
    /// request's length, or chunked when it had none) and what was gathered.
    fn start_stream(
        &mut self,
        answer: Answer,
        length: Option<u64>,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> BodyTarget {
        let persistence = self.final_persistence(answer, ctx);
        let Buffers { output, body, .. } = buffers;
        let length = length.map_or(BodyLength::Chunked, BodyLength::Known);
        let kind = "application/octet-stream";
        let keep_alive = self.keep_alive_field(ctx.settings);
        write_head(
            &mut output.buf,
            Status::Ok,
            kind,
            length,
            persistence,
            keep_alive.as_ref(),
            ctx,
        );
        let echo = match length {
            _ if answer.is_head => Echo::Nothing,
            BodyLength::Known(_) => Echo::Raw,
            BodyLength::Chunked => Echo::Chunks,
        };
        match echo {
            Echo::Raw => output.buf.extend_from_slice(body),
            Echo::Chunks => push_chunk(&mut output.buf, body),
            Echo::Nothing => {}
        }
        body.clear();
        ctx.stats
            .responded(Status::Ok, answer.method, self.served > 0);
        self.served += 1;
        self.last_response_ms = loop_ms(ctx.now);
        BodyTarget::Stream(echo)
    }

    /// The streamed body ended: end the response too.
    fn finish_stream(&mut self, answer: Answer, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        self.received += 1;
        if let Exchange::Body {
            target: BodyTarget::Stream(Echo::Chunks),
            ..
        } = self.exchange
        {
            buffers.output.buf.extend_from_slice(LAST_CHUNK);
        }
        self.log_stream(buffers, ctx);
        self.exchange = self.after_response(self.final_persistence(answer, ctx));
    }

    /// Logs the streamed response in progress, as far as it went: it ended,
    /// or it will stay unfinished.
    fn log_stream(&self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        let Exchange::Body {
            received,
            target: BodyTarget::Stream(echo),
            ..
        } = self.exchange
        else {
            return;
        };
        if ctx.settings.logs_access() {
            let sent = if echo == Echo::Nothing { 0 } else { received };
            access_log(buffers, Status::Ok, sent, self.previous_response_ms(), ctx);
        }
    }

    /// Requests the connection will take after the one being answered,
    /// when `--max-requests-per-socket` or a `max=` control limits them
    /// (`Keep-Alive: max=N`).
    fn requests_left(&self, settings: &Settings) -> Option<u32> {
        let request = self.served + 1;
        let limit = settings.max_requests_per_socket;
        let by_settings = (limit > 0).then(|| limit.saturating_sub(request));
        match (by_settings, self.controls.requests_left_after(request)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The `Keep-Alive` field a persistent response carries: the server's
    /// own, or what an `advertise=` control set, with `max=N` when requests
    /// are limited.
    fn keep_alive_field(&self, settings: &Settings) -> KeepAliveField {
        let left = self.requests_left(settings);
        match self.controls.advertise_override() {
            None => KeepAliveField::Server { left },
            Some(AdvertiseOverride::Secs(secs)) => KeepAliveField::Secs { secs, left },
            Some(AdvertiseOverride::Nothing) => KeepAliveField::Nothing,
        }
    }

    /// The keep-alive decision, in one place.
    fn persistence(&self, head: &RequestHead, settings: &Settings, draining: bool) -> Persistence {
        let allowed = settings.keep_alive_advertised_secs.is_some()
            && !draining
            && self.requests_left(settings) != Some(0)
            && self.controls.after() != After::Close
            && head.wants_persistence();
        if allowed {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        }
    }

    /// Where the exchange stands once a response is complete: waiting for
    /// the next request, or closing (after `Connection: close`, or at once
    /// behind a keep-alive response when `after=silent|rst` asked for it).
    fn after_response(&mut self, persistence: Persistence) -> Exchange {
        match (persistence, self.controls.after()) {
            (Persistence::KeepAlive, After::Silent | After::Rst) => Exchange::Closing {
                cause: CloseCause::Control,
            },
            (Persistence::Close, After::Rst) => Exchange::Closing {
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

    /// The body turned out bad after its echo began: no status can be sent
    /// any more, so the response stays unfinished (short of its length, or
    /// without its last chunk) and the connection closes once it is flushed,
    /// which tells the client the exchange failed.
    fn abandon_stream(&mut self, error: RequestError, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        tracing::debug!(
            ?error,
            "request body refused after its echo began: the response ends unfinished"
        );
        self.log_stream(buffers, ctx);
        buffers.input.clear();
        self.exchange = Exchange::Closing {
            cause: CloseCause::BadRequest,
        };
    }

    /// A response decided to persist before shutdown began does not: a
    /// draining server keeps nothing.
    fn final_persistence(&self, answer: Answer, ctx: &Ctx<'_>) -> Persistence {
        if ctx.draining {
            Persistence::Close
        } else {
            answer.persistence
        }
    }

    /// The whole request is in: answer now, or after its delay.
    fn complete(&mut self, answer: Answer, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        self.received += 1;
        match answer.route {
            Route::Delay { ms } => self.exchange = Exchange::Delayed { ms, answer },
            _ => self.respond(answer, buffers, ctx),
        }
    }

    /// Queues the response to a received request.
    fn respond(&mut self, answer: Answer, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        let persistence = self.final_persistence(answer, ctx);
        let Buffers { output, body, .. } = buffers;
        // Bytes of a `/bytes` body, generated after the head as it drains.
        let mut generated = 0;
        let (status, content_type, payload): (Status, &'static str, &[u8]) = match answer.route {
            Route::Root if body.is_empty() => (Status::Ok, "text/plain", HELLO),
            Route::Bytes { n } if n <= ctx.settings.max_body_size as u64 => {
                generated = n;
                (Status::Ok, "application/octet-stream", b"")
            }
            Route::Root => (Status::Ok, "application/octet-stream", body),
            Route::Delay { ms } => {
                body.clear();
                body.extend_from_slice(b"delayed ");
                push_decimal(body, ms);
                body.extend_from_slice(b"ms\n");
                (Status::Ok, "text/plain", body)
            }
            Route::Asterisk => (Status::Ok, "text/plain", b""),
            Route::Bytes { .. } | Route::NotFound => (
                Status::NotFound,
                "text/plain",
                Status::NotFound.reason_line(),
            ),
        };
        let content_length = payload.len() + generated as usize;
        let length = BodyLength::Known(content_length as u64);
        let keep_alive = self.keep_alive_field(ctx.settings);
        write_head(
            &mut output.buf,
            status,
            content_type,
            length,
            persistence,
            keep_alive.as_ref(),
            ctx,
        );
        if !answer.is_head {
            output.buf.extend_from_slice(payload);
        }
        body.clear();
        ctx.stats.responded(status, answer.method, self.served > 0);
        self.served += 1;
        if ctx.settings.logs_access() {
            let sent = if answer.is_head { 0 } else { content_length };
            access_log(
                buffers,
                status,
                sent as u64,
                self.previous_response_ms(),
                ctx,
            );
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
        write_head(
            out,
            status,
            "text/plain",
            length,
            Persistence::Close,
            KeepAliveField::Nothing.as_ref(),
            ctx,
        );
        buffers.output.buf.extend_from_slice(reason);
        ctx.stats.responded(status, method, self.served > 0);
        if ctx.settings.logs_access() {
            let previous = self.previous_response_ms();
            access_log(buffers, status, reason.len() as u64, previous, ctx);
        }
        self.exchange = Exchange::Closing { cause };
    }
}

/// The `Keep-Alive` parameters of a persistent response.
enum KeepAliveField {
    /// The server's prebuilt field (`--keep-alive-timeout`).
    Server { left: Option<u32> },
    /// `timeout=secs`, as an `advertise=` control set it.
    Secs { secs: u32, left: Option<u32> },
    /// No `Keep-Alive` field (`advertise=none`, or a closing response).
    Nothing,
}

/// A [`KeepAliveField`] ready to write: the header text without its final
/// CRLF, and the requests left.
struct KeepAliveText {
    text: [u8; 48],
    len: usize,
    server: bool,
    left: Option<u32>,
}

impl KeepAliveField {
    fn as_ref(&self) -> KeepAliveText {
        use std::io::Write as _;
        let mut text = [0u8; 48];
        let (len, server, left) = match *self {
            KeepAliveField::Server { left } => (0, true, left),
            KeepAliveField::Nothing => {
                let field = b"Connection: keep-alive";
                text[..field.len()].copy_from_slice(field);
                (field.len(), false, None)
            }
            KeepAliveField::Secs { secs, left } => {
                let mut cursor = &mut text[..];
                let _ = write!(
                    cursor,
                    "Connection: keep-alive\r\nKeep-Alive: timeout={secs}"
                );
                let len = 48 - cursor.len();
                (len, false, left)
            }
        };
        KeepAliveText {
            text,
            len,
            server,
            left,
        }
    }
}

/// Appends a response head carrying the cached Date and, when it persists,
/// its Keep-Alive parameters.
fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &'static str,
    length: BodyLength,
    persistence: Persistence,
    keep_alive: KeepAliveText,
    ctx: &mut Ctx<'_>,
) {
    let keep_alive_header = if keep_alive.server {
        &ctx.settings.keep_alive_header[..]
    } else {
        &keep_alive.text[..keep_alive.len]
    };
    ResponseHead {
        status,
        content_type,
        length,
        persistence,
        date: ctx
            .date
            .current(ctx.timers, ctx.now, TimerEvent::DateExpired),
        keep_alive_header,
        requests_left: keep_alive.left,
    }
    .encode(out);
}

/// The loop clock in wrapping milliseconds: what a session keeps of the
/// time of its last response.
fn loop_ms(now: Micros) -> u32 {
    (now / 1000) as u32
}

/// One line of the filler `/bytes` answers with, repeated.
const FILLER_LINE: usize = 64;
/// Filler lines, enough for a whole high-water mark from any offset in a
/// line: `abc…xyzabc…k\n`.
static FILLER: [u8; OUTPUT_HIGH_WATER + FILLER_LINE] = filler();

const fn filler() -> [u8; OUTPUT_HIGH_WATER + FILLER_LINE] {
    let mut bytes = [0; OUTPUT_HIGH_WATER + FILLER_LINE];
    let mut i = 0;
    while i < bytes.len() {
        let column = i % FILLER_LINE;
        bytes[i] = if column == FILLER_LINE - 1 {
            b'\n'
        } else {
            b'a' + (column % 26) as u8
        };
        i += 1;
    }
    bytes
}

/// Appends filler to `out` up to the high-water mark, continuing a body
/// of which `remaining` bytes are still owed; returns what is still owed.
/// The filler is the same for every body, so where a body stands in its
/// line follows from how much of it is left: the body ends on a full line.
fn generate(remaining: u64, out: &mut Vec<u8>) -> u64 {
    let room = OUTPUT_HIGH_WATER.saturating_sub(out.len()) as u64;
    let take = remaining.min(room) as usize;
    let start = (FILLER_LINE - (remaining % FILLER_LINE as u64) as usize) % FILLER_LINE;
    out.extend_from_slice(&FILLER[start..start + take]);
    remaining - take as u64
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

/// One access-log line for the response just queued (see `access_log`):
/// the time is the Date cache's second, and asking for it keeps the Date
/// tick armed, which is what flushes the line within a second.
fn access_log(
    buffers: &mut Buffers,
    status: Status,
    bytes: u64,
    previous_response_ms: Option<u32>,
    ctx: &mut Ctx<'_>,
) {
    ctx.date
        .current(ctx.timers, ctx.now, TimerEvent::DateExpired);
    let started = buffers.log.started.unwrap_or(ctx.conn.accepted);
    let idle_gap_ms = previous_response_ms.map(|at| loop_ms(started).wrapping_sub(at));
    ctx.access_log.write(&Entry {
        peer: ctx.conn.peer.ip(),
        unix_second: ctx.date.unix_second(),
        record: &buffers.log,
        status: status.code(),
        bytes,
        micros: ctx.now.saturating_sub(started),
        conn: ctx.conn.id,
        idle_gap_ms,
    });
    buffers.log.clear();
}
