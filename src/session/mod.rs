//! The HTTP exchange on one connection, without the socket: bytes in the
//! input buffer become responses in the output buffer, request by request,
//! in order. An explicit state machine says where the exchange stands: the
//! connection's stage, and the request in progress ([`InFlight`]), kept
//! with the pooled buffers (they hold what the connection's state cannot:
//! a body's decoder, a delayed answer's plan); the connection asks them
//! where its exchange waits as it enters its next state (`conn::state`).
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
//! the session asks it for a [`Plan`], and carries that out here. On the
//! admin listener's worker (`ctx.admin` lent) the plan holds the admin's
//! answer instead: one that waits on a snapshot round waits as a
//! `/delay` answer does, and the event stream is a response whose body
//! runs until the close, fed a frame per tick ([`Session::push_frame`]).
//!
//! Keeping I/O out makes this the unit the fuzz target drives directly.

mod body;
mod forward;
mod head;
mod refusal;

use crate::admin::rounds::RoundId;
use crate::admin::service::Answer;
use crate::app::controls::After;
use crate::app::keep_terms::KeepTerms;
use crate::app::{BodySource, KeepAliveScratch, Plan, ReplyHead, Terms, Wait};
use crate::config::Settings;
use crate::ctx::Ctx;
use crate::http::response::{BodyLength, CONTINUE, Persistence, ResponseHead};
use crate::http::{BodyDecoder, Framing, Status};
use crate::in_flight::{BodyTarget, InFlight};
use crate::pool::Buffers;
use crate::stats::CloseCause;
use crate::timer_event::TimerEvent;

/// No new pipelined request is started, and no more of a body echoed,
/// while this much output is unsent.
pub const OUTPUT_HIGH_WATER: usize = 32 * 1024;
/// The most of a body the echo route gathers before it streams instead.
pub const ECHO_BUFFER: usize = 16 * 1024;
/// Smallest input buffer limit, whatever `--max-header-size` says.
const MIN_INPUT_LIMIT: usize = 4096;

/// Where a connection stands, as it keeps it between requests (a few
/// bytes). A request in progress is the pooled buffers' [`InFlight`],
/// present only while [`Stage::Serving`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Taking requests: between them, reading a head, or in the middle of
    /// the one in `Buffers::in_flight`.
    Serving,
    /// The last response is queued; the connection only drains input now.
    Closing { cause: CloseCause },
    /// As `Closing` for a bad request, after a response was cut short (see
    /// [`Session::output_whole`]). A variant of its own, not a flag: the
    /// stage stays one byte.
    Cut,
}

/// The request/response state of one connection: what it keeps while
/// idle (the request in progress is in its buffers, see [`InFlight`]).
#[derive(Debug)]
pub struct Session {
    stage: Stage,
    /// Requests fully received, wrapping: a connection kept for billions
    /// of requests must neither stop nor panic, so the counts are only
    /// compared by difference, and whether any has happened is kept
    /// apart (`received_any`, `served_any`), not read off a count that
    /// may come back to zero.
    received: u32,
    /// Responses queued, wrapping.
    served: u32,
    received_any: bool,
    served_any: bool,
    /// Which User-Agent the latest request named ([`agent_key`]): a
    /// later request that names another is told to the observer too.
    agent: u8,
    /// The terms the application keeps the connection on (its idle
    /// timeout, what it advertises, how its idle close is made).
    kept_on: KeepTerms,
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

/// The request in progress, if the connection has buffers and one.
fn in_flight(buffers: Option<&Buffers>) -> Option<&InFlight> {
    buffers.and_then(|b| b.in_flight.as_ref())
}

impl Session {
    pub fn new() -> Self {
        Session {
            stage: Stage::Serving,
            received: 0,
            served: 0,
            received_any: false,
            served_any: false,
            agent: 0,
            kept_on: KeepTerms::default(),
        }
    }

    /// The terms the application keeps the connection on.
    pub fn kept_on(&self) -> &KeepTerms {
        &self.kept_on
    }

    /// The response just flushed ends with a reset (`after=rst`).
    pub fn aborts(&self) -> bool {
        self.closing() == Some(CloseCause::Control) && self.kept_on.after() == After::Rst
    }

    /// The largest input a connection buffers: at least the head limit, so
    /// an over-long head is seen as such (the limit itself applies to heads).
    pub fn input_limit(settings: &Settings) -> usize {
        settings.max_header_size.max(MIN_INPUT_LIMIT)
    }

    /// Requests fully received so far (wrapping: compare by difference).
    pub fn received(&self) -> u32 {
        self.received
    }

    /// Responses queued so far (wrapping: compare by difference).
    pub fn served(&self) -> u32 {
        self.served
    }

    /// Whether any request has been fully received on this connection.
    pub fn has_received(&self) -> bool {
        self.received_any
    }

    /// Whether any response has been queued on this connection.
    pub fn has_served(&self) -> bool {
        self.served_any
    }

    /// Counts a response queued; returns whether the connection had
    /// served one before (a reuse).
    fn count_served(&mut self) -> bool {
        self.served = self.served.wrapping_add(1);
        std::mem::replace(&mut self.served_any, true)
    }

    /// Counts a request fully received.
    fn count_received(&mut self) {
        self.received = self.received.wrapping_add(1);
        self.received_any = true;
    }

    /// Set once the last response is queued: why the connection will close.
    pub fn closing(&self) -> Option<CloseCause> {
        match self.stage {
            Stage::Closing { cause } => Some(cause),
            Stage::Cut => Some(CloseCause::BadRequest),
            _ => None,
        }
    }

    /// A generated body is still owed beyond what the output holds.
    pub fn is_generating(&self, buffers: Option<&Buffers>) -> bool {
        matches!(in_flight(buffers), Some(InFlight::Sending { .. }))
    }

    /// Bytes of filler still owed to the response being sent, written by
    /// the connection after the output (see `app::filler`).
    pub fn filler_due(&self, buffers: &Buffers) -> Option<u64> {
        match buffers.in_flight {
            Some(InFlight::Sending { remaining, .. }) => Some(remaining),
            _ => None,
        }
    }

    /// `n` bytes of the owed filler went out.
    pub fn filler_sent(&mut self, n: u64, buffers: &mut Buffers) {
        if let Some(InFlight::Sending {
            remaining,
            persistence,
        }) = &mut buffers.in_flight
        {
            *remaining = remaining.saturating_sub(n);
            if *remaining == 0 {
                let persistence = *persistence;
                self.end_exchange(persistence, buffers);
            }
        }
    }

    /// A request's body is arriving (its head is in).
    pub fn is_in_body(&self, buffers: Option<&Buffers>) -> bool {
        matches!(in_flight(buffers), Some(InFlight::Body { .. }))
    }

    /// The answer waits on something outside the exchange: its `/delay`
    /// timer, an admin round, or (the event stream) its next frame.
    pub fn is_delayed(&self, buffers: Option<&Buffers>) -> bool {
        matches!(
            in_flight(buffers),
            Some(InFlight::Delayed { .. } | InFlight::Awaiting { .. } | InFlight::Streaming { .. })
        )
    }

    /// The admin answer that waits on a round, if one does.
    pub fn awaited(&self, buffers: Option<&Buffers>) -> Option<Answer> {
        match in_flight(buffers) {
            Some(InFlight::Awaiting { answer, .. }) => answer.admin_answer(),
            _ => None,
        }
    }

    /// The answer waits on its `/delay` timer or an admin round: it is
    /// owed even to a client that has shut its write side.
    pub fn owes_answer(&self, buffers: Option<&Buffers>) -> bool {
        matches!(
            in_flight(buffers),
            Some(InFlight::Delayed { .. } | InFlight::Awaiting { .. } | InFlight::Forward { .. })
        )
    }

    /// The event stream's interval and the round it wants a frame from,
    /// when the response is the admin's event stream.
    pub fn stream(&self, buffers: Option<&Buffers>) -> Option<(u64, Option<RoundId>)> {
        match in_flight(buffers) {
            Some(InFlight::Streaming {
                interval_ms, wants, ..
            }) => Some((*interval_ms, *wants)),
            _ => None,
        }
    }

    /// A tick: the event stream wants round `round`'s frame, unless it
    /// already waits for one.
    pub fn want_frame(&mut self, round: RoundId, buffers: &mut Buffers) {
        if let Some(InFlight::Streaming { wants, .. }) = &mut buffers.in_flight {
            wants.get_or_insert(round);
        }
    }

    /// Queues a frame of the event stream; returns whether it was its
    /// first.
    pub fn push_frame(&mut self, frame: &[u8], buffers: &mut Buffers) -> bool {
        let Some(InFlight::Streaming { wants, fresh, .. }) = &mut buffers.in_flight else {
            return false;
        };
        *wants = None;
        buffers.output.buf.extend_from_slice(frame);
        std::mem::replace(fresh, false)
    }

    /// How long the answer waiting on `/delay` waits, in ms.
    pub fn delay_ms(&self, buffers: Option<&Buffers>) -> Option<u64> {
        match in_flight(buffers) {
            Some(InFlight::Delayed { ms, .. }) => Some(*ms),
            _ => None,
        }
    }

    /// Between requests (the caller has seen [`Session::is_idle`]): no more
    /// are taken; the connection closes (for `cause`) once its input is
    /// drained.
    pub fn stop_persisting(&mut self, cause: CloseCause) {
        if self.stage == Stage::Serving {
            self.stage = Stage::Closing { cause };
        }
    }

    /// A response has begun and is not finished (a streamed echo, whose
    /// request is still arriving, or a generated body): a timeout can no
    /// longer be answered, only end the connection.
    pub fn response_begun(&self, buffers: Option<&Buffers>) -> bool {
        self.forward_begun(buffers)
            || matches!(
                in_flight(buffers),
                Some(
                    InFlight::Body {
                        target: BodyTarget::Stream(_),
                        ..
                    } | InFlight::Sending { .. }
                )
            )
    }

    /// Whether the output, as far as it goes, ends where HTTP framing says
    /// it does: no response is begun and unfinished, or was left so. Over
    /// TLS only such an end is said with `close_notify`; a cut one ends
    /// without it, as nginx skips `SSL_shutdown` after an error, so the
    /// client can tell a truncation from an end.
    pub fn output_whole(&self, buffers: Option<&Buffers>) -> bool {
        self.stage != Stage::Cut && !self.response_begun(buffers)
    }

    /// Between requests with nothing buffered: the buffers can go back.
    pub fn is_idle(&self, buffers: Option<&Buffers>) -> bool {
        self.stage == Stage::Serving && buffers.is_none_or(Buffers::is_drained)
    }

    /// A request has started arriving and is not yet fully received.
    pub fn is_receiving(&self, buffers: Option<&Buffers>) -> bool {
        match (self.stage, in_flight(buffers)) {
            (_, Some(InFlight::Body { .. })) => true,
            (Stage::Serving, None) => buffers.is_some_and(|b| !b.input.is_empty()),
            _ => false,
        }
    }

    /// Parses and answers what is buffered, in order, until more input is
    /// needed, a response must wait, or output backs up.
    ///
    /// Returns how many buffered bytes were dropped unread because the
    /// exchange is closing (requests pipelined behind its last response):
    /// the client sent more than will be answered, so the close must
    /// drain rather than reset.
    pub fn process(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) -> usize {
        while self.stage == Stage::Serving
            && buffers.output.pending() < OUTPUT_HIGH_WATER
            && !buffers.input.is_empty()
        {
            let went_on = match buffers.in_flight {
                None => self.take_head(buffers, ctx),
                Some(InFlight::Body {
                    decoder,
                    received,
                    answer,
                    target,
                }) => self.take_body(decoder, received, answer, target, buffers, ctx),
                // A generated body goes from the connection's writes
                // ([`Session::filler_due`]); what follows it waits, as it
                // waits on a delayed answer.
                // So do requests behind an admin answer waiting on a
                // round, or behind the event stream.
                // And requests behind a forwarded one (its answer comes
                // from the upstream, see `forward`).
                Some(
                    InFlight::Delayed { .. }
                    | InFlight::Sending { .. }
                    | InFlight::Awaiting { .. }
                    | InFlight::Streaming { .. }
                    | InFlight::Forward { .. },
                ) => false,
            };
            if !went_on {
                break;
            }
        }
        if self.stage == Stage::Serving {
            return 0;
        }
        let dropped = buffers.input.len();
        buffers.input.clear();
        dropped
    }

    /// What the answer waited on has come (the `/delay` timer fired, the
    /// admin round ended): queue it.
    pub fn delay_elapsed(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        if let Some(InFlight::Delayed { answer, .. } | InFlight::Awaiting { answer, .. }) =
            buffers.in_flight
        {
            buffers.in_flight = None;
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
        if self.response_begun(Some(buffers)) {
            self.log_stream(buffers, ctx);
            self.log_forward(buffers, ctx);
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
        // A forwarded request's is the upstream's, relayed.
        if expect_continue && buffers.input.is_empty() && !answer.forwards() {
            buffers.output.buf.extend_from_slice(CONTINUE);
        }
        buffers.body.clear();
        let target = if answer.forwards() {
            Self::upstream_target(framing)
        } else if answer.keeps_body() {
            BodyTarget::Gather
        } else {
            BodyTarget::Discard
        };
        buffers.in_flight = Some(InFlight::Body {
            decoder,
            received: 0,
            answer,
            target,
        });
    }

    /// The whole request is in: answer now, or after its delay.
    fn complete(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        self.count_received();
        match answer.waits() {
            Wait::Ms(ms) => buffers.in_flight = Some(InFlight::Delayed { ms, answer }),
            Wait::Round(round) => buffers.in_flight = Some(InFlight::Awaiting { round, answer }),
            Wait::Upstream => buffers.in_flight = Some(InFlight::Forward { answer }),
            Wait::Nothing => {
                buffers.in_flight = None;
                self.respond(answer, buffers, ctx);
            }
        }
    }

    /// Queues the response to a received request.
    fn respond(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        let terms = answer.terms.when_draining(ctx.draining);
        let persistence = terms.persistence;
        let Buffers { output, body, .. } = buffers;
        let reply = answer.reply(body, ctx.settings, ctx.admin.as_deref());
        // Bytes of a `/bytes` body, generated after the head as it drains.
        let (payload, generated, streams): (&[u8], u64, bool) = match reply.body {
            BodySource::Bytes(payload) => (payload, 0, false),
            BodySource::Filler(n) => (b"", n, false),
            BodySource::Stream(opening) => (opening, 0, true),
        };
        let content_length = payload.len() + generated as usize;
        let length = match streams {
            true => BodyLength::UntilClose,
            false => BodyLength::Known(content_length as u64),
        };
        write_head(&mut output.buf, reply.head, length, terms, ctx);
        if !answer.is_head {
            output.buf.extend_from_slice(payload);
        }
        let status = reply.head.status;
        body.clear();
        let reused = self.count_served();
        ctx.stats.responded(status, answer.method, reused);
        if ctx.settings.logs_access() {
            let sent = if answer.is_head { 0 } else { content_length };
            ctx.log_response(&mut buffers.log, status.code(), sent as u64);
        }
        match generated {
            _ if streams && !answer.is_head => self.open_event_stream(answer, buffers),
            0 => self.end_exchange(persistence, buffers),
            _ if answer.is_head => self.end_exchange(persistence, buffers),
            remaining => {
                buffers.in_flight = Some(InFlight::Sending {
                    remaining,
                    persistence,
                });
            }
        }
    }

    /// The admin's event stream's opening is queued: the exchange stays
    /// in it, fed a frame per tick (the first from the round its answer
    /// named), until the connection closes.
    fn open_event_stream(&mut self, answer: Plan, buffers: &mut Buffers) {
        if let Some(Answer::Stream { interval_ms, round }) = answer.admin_answer() {
            buffers.in_flight = Some(InFlight::Streaming {
                interval_ms,
                wants: Some(round),
                fresh: true,
            });
        }
    }

    /// A response is complete: wait for the next request, or close (after
    /// `Connection: close`, or at once behind a keep-alive response when
    /// `after=silent|rst` asked for it).
    fn end_exchange(&mut self, persistence: Persistence, buffers: &mut Buffers) {
        buffers.in_flight = None;
        match (persistence, self.kept_on.after()) {
            (Persistence::KeepAlive, After::Silent | After::Rst)
            | (Persistence::Close, After::Rst) => {
                self.stage = Stage::Closing {
                    cause: CloseCause::Control,
                };
            }
            (Persistence::Close, _) => {
                self.stage = Stage::Closing {
                    cause: CloseCause::Done,
                };
            }
            (Persistence::KeepAlive, _) => self.kept_on.after_done(),
        }
    }

    /// Nothing more is answered: the connection drains its input and
    /// closes for `cause`.
    fn close_for(&mut self, cause: CloseCause, buffers: &mut Buffers) {
        buffers.in_flight = None;
        self.stage = Stage::Closing { cause };
    }

    /// The response being sent is cut short: the connection drains its
    /// input and closes as for a bad request, without saying the output
    /// ended whole.
    fn cut(&mut self, buffers: &mut Buffers) {
        buffers.in_flight = None;
        self.stage = Stage::Cut;
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
        extra: reply.extra,
    }
    .encode(out);
}
