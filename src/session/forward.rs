//! A forwarded exchange (`--upstream`), without the sockets: the request
//! head written for the upstream into the buffers' link, its body sent
//! on as it arrives (`take_body`'s [`BodyTarget::Upstream`]), and the
//! upstream's answer relayed into the client's output as its bytes come:
//! interim 1xx heads passed on, the final head rewritten with this
//! connection's framing and terms, the body as it is framed (a
//! close-delimited one chunked for an HTTP/1.1 client, so its connection
//! stays alive). A failure before the client's head is queued is a 502
//! (504 for the timeout) naming the upstream; after it, the answer is cut
//! short and the connection closes, so the client sees a broken answer,
//! never a desynchronised one.
//!
//! The connection (`conn::upstream`) moves the bytes between the sockets
//! and the link, and asks [`Session::relay`] to go on after each move.

use super::{OUTPUT_HIGH_WATER, Session};
use crate::app::{KeepAliveScratch, Plan};
use crate::ctx::Ctx;
use crate::forward::{
    ClientFraming, ClientSide, Forwarding, ResponseFraming, parse_upstream_head, write_client_head,
    write_upstream_head,
};
use crate::http::body::{BodyOut, BodySink};
use crate::http::response::{CHUNK_FRAMING, LAST_CHUNK, Persistence, push_chunk};
use crate::http::{BodyDecoder, Framing, Method, Status};
use crate::in_flight::{BodyTarget, Echo, InFlight};
use crate::pool::Buffers;
use crate::stats::CloseCause;
use crate::timer_event::TimerEvent;
use crate::upstream::{Failure, Relay, UpstreamBody};

/// The methods a request may be sent twice with (RFC 9110 §9.2.2).
const IDEMPOTENT: [&[u8]; 6] = [
    b"GET ",
    b"HEAD ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"TRACE ",
];

impl Session {
    /// The head of `len` bytes at the front of the input, planned as
    /// `answer`, with its body framed as `framing`, on HTTP/1.`minor`, is
    /// to be forwarded: its upstream head is written into the link (made
    /// at the first forwarded request, then kept with the buffers).
    /// Returns whether processing may go on (`false`: refused, as an
    /// Upgrade is, 501).
    pub(super) fn start_forward(
        &mut self,
        answer: Plan,
        (len, framing, minor): (usize, Framing, u8),
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let Some(upstream) = ctx.settings.upstream.as_ref() else {
            return false;
        };
        let Buffers {
            input,
            upstream: link,
            ..
        } = &mut *buffers;
        let raw = &input.bytes()[..len];
        let link = link.get_or_insert_with(Box::default);
        let idempotent = IDEMPOTENT.iter().any(|method| raw.starts_with(method));
        link.reset(idempotent, minor == 0);
        link.request_done = framing == Framing::None;
        let how = Forwarding {
            client_ip: ctx.conn.peer.ip(),
            tls: ctx.conn.tls.is_some(),
            prefix: &upstream.prefix,
            authority: &upstream.authority,
            strip_controls: ctx.settings.test_controls,
        };
        if let Err(refused) = write_upstream_head(raw, framing, &how, &mut link.out) {
            let status = refused.status();
            let reason: &[u8] = match status {
                Status::NotImplemented => b"Upgrade is not forwarded\n",
                _ => status.reason_line(),
            };
            let cause = CloseCause::BadRequest;
            self.fail_with((status, reason, answer.method), cause, buffers, ctx);
            return false;
        }
        true
    }

    /// The forwarded request's body target: sent up as it came, or
    /// chunked again.
    pub(super) fn upstream_target(framing: Framing) -> BodyTarget {
        match framing {
            Framing::Chunked => BodyTarget::Upstream(Echo::Chunks),
            Framing::None | Framing::Length(_) => BodyTarget::Upstream(Echo::Raw),
        }
    }

    /// The forwarded request's body ended: the last chunk goes up too.
    pub(super) fn forward_body_done(target: BodyTarget, buffers: &mut Buffers) {
        if let Some(link) = buffers.upstream.as_deref_mut() {
            if target == BodyTarget::Upstream(Echo::Chunks) {
                link.out.extend_from_slice(LAST_CHUNK);
            }
            link.request_done = true;
        }
    }

    /// A forwarded exchange is in progress: its request is going up, or
    /// its answer is awaited or being relayed.
    pub fn is_forwarding(&self, buffers: Option<&Buffers>) -> bool {
        matches!(
            buffers.and_then(|b| b.in_flight.as_ref()),
            Some(
                InFlight::Forward { .. }
                    | InFlight::Body {
                        target: BodyTarget::Upstream(_),
                        ..
                    }
            )
        )
    }

    /// The forwarded request is in and its answer's head has not come:
    /// the upstream timeout runs.
    pub fn awaits_upstream_head(&self, buffers: Option<&Buffers>) -> bool {
        buffers.is_some_and(|b| {
            matches!(b.in_flight, Some(InFlight::Forward { .. }))
                && b.upstream
                    .as_deref()
                    .is_some_and(|link| !link.answer_begun())
        })
    }

    /// The client's head for a forwarded answer is queued and its answer
    /// not done: a timeout or failure can only cut it short.
    pub(super) fn forward_begun(&self, buffers: Option<&Buffers>) -> bool {
        self.is_forwarding(buffers)
            && buffers
                .and_then(|b| b.upstream.as_deref())
                .is_some_and(|link| link.answer_begun())
    }

    /// Relays what the link holds of the upstream's answer into the
    /// output, as far as the output has room; ends the exchange once the
    /// answer is relayed whole and the request went up whole. An error
    /// is the upstream's failure, for [`Session::upstream_failed`].
    pub fn relay(&mut self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) -> Result<(), Failure> {
        let answer = match buffers.in_flight {
            Some(InFlight::Forward { answer }) => answer,
            Some(InFlight::Body {
                answer,
                target: BodyTarget::Upstream(_),
                ..
            }) => answer,
            _ => return Ok(()),
        };
        loop {
            let Some(link) = buffers.upstream.as_deref() else {
                return Ok(());
            };
            let went_on = match link.relay {
                Relay::Head => self.relay_head(answer, buffers, ctx)?,
                Relay::Body { .. } => relay_body(buffers)?,
                Relay::Done { .. } => {
                    self.answer_relayed(answer, buffers, ctx);
                    return Ok(());
                }
            };
            if !went_on {
                return Ok(());
            }
        }
    }

    /// Takes the answer head at the front of the link's input, if it is
    /// all in: an interim one is passed on (not to an HTTP/1.0 client), a
    /// final one becomes the client's head. Returns whether relaying may
    /// go on.
    fn relay_head(
        &mut self,
        answer: Plan,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> Result<bool, Failure> {
        let Buffers {
            output, upstream, ..
        } = &mut *buffers;
        let Some(link) = upstream.as_deref_mut() else {
            return Ok(false);
        };
        let head = match parse_upstream_head(link.input.bytes(), answer.is_head) {
            Ok(Some(head)) => head,
            Ok(None) if link.eof && link.input.is_empty() => return Err(Failure::Reset),
            Ok(None) if link.eof => return Err(Failure::BadResponse),
            Ok(None) => return Ok(false),
            Err(bad) => {
                tracing::debug!(why = bad.why(), "a bad answer head from the upstream");
                return Err(Failure::BadResponse);
            }
        };
        let terms = answer.terms.when_draining(ctx.draining);
        let mut scratch: KeepAliveScratch = [0; 64];
        let client = ClientSide {
            minor_version: u8::from(!link.client_http10),
            is_head: answer.is_head,
            persistence: terms.persistence,
            keep_alive_header: terms.keep_alive_header(ctx.settings, &mut scratch),
            requests_left: terms.requests_left,
            date: ctx
                .date
                .current(ctx.timers, ctx.now, TimerEvent::DateExpired),
        };
        let written = write_client_head(link.input.bytes(), &head, client, &mut output.buf);
        link.input.consume(head.len);
        if head.interim {
            return Ok(true);
        }
        if let Some(timeout_s) = head.keep_alive_timeout_s {
            ctx.upstreams.advertised(timeout_s, ctx.now);
        }
        let body = match (head.framing, written.framing) {
            (_, ClientFraming::None) => None,
            (ResponseFraming::Length(n), _) => {
                Some(UpstreamBody::Framed(BodyDecoder::Length { remaining: n }))
            }
            (ResponseFraming::Chunked, _) => Some(UpstreamBody::Framed(BodyDecoder::chunked(
                ctx.settings.max_header_size,
            ))),
            (ResponseFraming::UntilClose | ResponseFraming::Empty, _) => {
                Some(UpstreamBody::UntilClose)
            }
        };
        link.status = head.status;
        link.client_closes = written.persistence == Persistence::Close;
        link.relay = match body {
            None => Relay::Done {
                reusable: head.reusable,
            },
            Some(body) => Relay::Body {
                body,
                out: written.framing,
                reusable: head.reusable,
            },
        };
        let reused = self.count_served();
        ctx.stats.responded_code(head.status, answer.method, reused);
        Ok(true)
    }

    /// The answer is relayed whole. With the request in too, the exchange
    /// ends; with its body still arriving (the upstream answered early),
    /// the rest of the body is read and dropped, and the exchange ends
    /// with it.
    fn answer_relayed(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        if let Some(InFlight::Body { target, .. }) = &mut buffers.in_flight {
            *target = BodyTarget::Discard;
            return;
        }
        let Some(link) = buffers.upstream.as_deref() else {
            return;
        };
        let (status, relayed, closes) = (link.status, link.relayed, link.client_closes);
        if ctx.settings.logs_access() {
            let sent = if answer.is_head { 0 } else { relayed };
            ctx.log_response(&mut buffers.log, status, sent);
        }
        let persistence = match closes {
            true => Persistence::Close,
            false => answer.terms.when_draining(ctx.draining).persistence,
        };
        self.end_exchange(persistence, buffers);
    }

    /// Logs the forwarded answer in progress, as far as it went (it will
    /// stay unfinished).
    pub(super) fn log_forward(&self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        if !self.forward_begun(Some(buffers)) || !ctx.settings.logs_access() {
            return;
        }
        if let Some(link) = buffers.upstream.as_deref() {
            let (status, relayed) = (link.status, link.relayed);
            ctx.log_response(&mut buffers.log, status, relayed);
        }
    }

    /// The forwarded exchange failed on the upstream's side (`detail`
    /// says how, naming the upstream): before the client's head, a 502
    /// (504 for the timeout) with `detail` as its body, and the
    /// connection closes; after it, the answer is cut short.
    pub fn upstream_failed(
        &mut self,
        failure: Failure,
        detail: &str,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        ctx.stats.upstream_errors[failure.index()].add(1);
        let Some(link) = buffers.upstream.as_deref() else {
            return;
        };
        if link.answer_begun() {
            self.log_forward(buffers, ctx);
            buffers.input.clear();
            self.cut(buffers);
            return;
        }
        let status = match failure {
            Failure::Timeout => Status::GatewayTimeout,
            _ => Status::BadGateway,
        };
        let method = buffers
            .in_flight
            .and_then(|request| request.method())
            .unwrap_or(Method::Other);
        let body = format!(
            "{}{detail}\n",
            String::from_utf8_lossy(status.reason_line())
        );
        self.fail_with(
            (status, body.as_bytes(), method),
            CloseCause::Upstream,
            buffers,
            ctx,
        );
    }
}

/// Relays what the link holds of the answer's body, as far as the
/// output has room, as the client's head framed it (see
/// [`ClientFraming`]). Returns whether relaying may go on (the body
/// ended).
fn relay_body(buffers: &mut Buffers) -> Result<bool, Failure> {
    let Buffers {
        output, upstream, ..
    } = buffers;
    let Some(link) = upstream.as_deref_mut() else {
        return Ok(false);
    };
    let Relay::Body {
        body,
        out,
        reusable,
    } = link.relay
    else {
        return Ok(false);
    };
    let chunks = out == ClientFraming::Chunks;
    let framing = if chunks { CHUNK_FRAMING } else { 0 };
    let room = OUTPUT_HIGH_WATER.saturating_sub(output.pending() + framing);
    if room == 0 {
        link.paused = true;
        return Ok(false);
    }
    let available = link.input.bytes();
    let offered = &available[..available.len().min(room)];
    let (consumed, done) = match body {
        UpstreamBody::Framed(mut decoder) => {
            // Raw: the upstream's own bytes, its framing with them (the
            // decoder only finds the end); else the data alone.
            let raw = out == ClientFraming::Raw;
            let mut decoded = 0;
            let mut sink = BodySink {
                out: match raw {
                    true => BodyOut::Discard,
                    false => BodyOut::Raw(&mut output.buf),
                },
                received: &mut decoded,
                limit: u64::MAX,
                response_begun: true,
            };
            let progress = decoder
                .decode(offered, &mut sink)
                .map_err(|_| Failure::BadResponse)?;
            if raw {
                output.buf.extend_from_slice(&offered[..progress.consumed]);
            }
            link.relayed += progress.consumed as u64;
            link.relay = Relay::Body {
                body: UpstreamBody::Framed(decoder),
                out,
                reusable,
            };
            (progress.consumed, progress.done)
        }
        UpstreamBody::UntilClose => {
            match chunks {
                true => push_chunk(&mut output.buf, offered),
                false => output.buf.extend_from_slice(offered),
            }
            link.relayed += offered.len() as u64;
            let n = offered.len();
            (n, link.eof && n == available.len())
        }
    };
    link.input.consume(consumed);
    if done {
        if chunks {
            output.buf.extend_from_slice(LAST_CHUNK);
        }
        link.relay = Relay::Done {
            reusable: reusable && body != UpstreamBody::UntilClose,
        };
        return Ok(true);
    }
    if !link.input.is_empty() {
        // The rest waits for the output to drain.
        link.paused = true;
        return Ok(false);
    }
    match link.eof {
        true => Err(Failure::Cut),
        false => Ok(false),
    }
}
