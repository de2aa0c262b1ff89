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
use crate::http::body::{BodyOut, BodySink};
use crate::http::response::{BodyLength, CHUNK_FRAMING, LAST_CHUNK, Persistence, push_chunk};
use crate::http::{BodyDecoder, Framing, Method, Status, parse_head};
use crate::in_flight::{BodyTarget, Echo, InFlight};
use crate::pool::Buffers;
use crate::stats::CloseCause;
use crate::upstream::stand_in::{
    ClientTerms, Forwarding, ResponseFraming, parse_upstream_head, write_client_head,
    write_upstream_head,
};
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
    /// The head of `len` bytes at the front of the input is to be
    /// forwarded: its upstream head is written into the link (made at the
    /// first forwarded request, then kept with the buffers). Returns
    /// whether processing may go on (`false`: refused, as an Upgrade is,
    /// 501).
    pub(super) fn start_forward(
        &mut self,
        len: usize,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let Some(upstream) = ctx.settings.upstream.as_ref() else {
            return false;
        };
        let Buffers {
            input,
            body,
            upstream: link,
            ..
        } = &mut *buffers;
        // The head is parsed again, from the input, beside a copy of its
        // bytes: the parsed head borrows what it was parsed from.
        body.clear();
        body.extend_from_slice(&input.bytes()[..len]);
        let parsed = parse_head(input.bytes_mut(), super::head::head_limits(ctx.settings));
        let Ok(Some((head, _))) = parsed else {
            return false; // parsed once already: cannot happen
        };
        let link = link.get_or_insert_with(Box::default);
        let idempotent = IDEMPOTENT.iter().any(|method| body.starts_with(method));
        link.reset(idempotent, head.minor_version == 0);
        link.request_done = head.framing == Framing::None;
        let how = Forwarding {
            client_ip: ctx.conn.peer.ip(),
            tls: ctx.conn.tls.is_some(),
            prefix: &upstream.prefix,
        };
        let written = write_upstream_head(body, &head, &how, &mut link.out);
        body.clear();
        if written.is_err() {
            let answer = (
                Status::NotImplemented,
                &b"Upgrade is not forwarded\n"[..],
                head.method,
            );
            self.fail_with(answer, CloseCause::BadRequest, buffers, ctx);
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
            Err(_) => return Err(Failure::BadResponse),
        };
        if head.interim {
            if !link.client_http10 {
                output
                    .buf
                    .extend_from_slice(&link.input.bytes()[..head.len]);
            }
            link.input.consume(head.len);
            return Ok(true);
        }
        let terms = answer.terms.when_draining(ctx.draining);
        let http10 = link.client_http10;
        // (what the upstream sends, how the client gets it, and whether
        // the client's connection must close to end it)
        let (body, length, chunks, closes) = match head.framing {
            ResponseFraming::Empty => (None, BodyLength::UntilClose, false, false),
            ResponseFraming::Length(n) => (
                Some(UpstreamBody::Framed(BodyDecoder::Length { remaining: n })),
                BodyLength::Known(n),
                false,
                false,
            ),
            ResponseFraming::Chunked => (
                Some(UpstreamBody::Framed(BodyDecoder::chunked(
                    ctx.settings.max_header_size,
                ))),
                if http10 {
                    BodyLength::UntilClose
                } else {
                    BodyLength::Chunked
                },
                !http10,
                http10,
            ),
            ResponseFraming::UntilClose => (
                Some(UpstreamBody::UntilClose),
                if http10 {
                    BodyLength::UntilClose
                } else {
                    BodyLength::Chunked
                },
                !http10,
                http10,
            ),
        };
        let persistence = match closes {
            true => Persistence::Close,
            false => terms.persistence,
        };
        let mut scratch: KeepAliveScratch = [0; 64];
        let client_terms = ClientTerms {
            length,
            persistence,
            keep_alive_header: terms.keep_alive_header(ctx.settings, &mut scratch),
            requests_left: terms.requests_left,
        };
        write_client_head(
            &link.input.bytes()[..head.len],
            &client_terms,
            &mut output.buf,
        );
        link.input.consume(head.len);
        link.status = head.status;
        link.client_closes = persistence == Persistence::Close;
        link.relay = match body {
            None => Relay::Done {
                reusable: head.reusable,
            },
            Some(body) => Relay::Body {
                body,
                chunks,
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
/// output has room (the upstream's framing decoded, the client's
/// written). Returns whether relaying may go on (the body ended).
fn relay_body(buffers: &mut Buffers) -> Result<bool, Failure> {
    let Buffers {
        output, upstream, ..
    } = buffers;
    let Some(link) = upstream.as_deref_mut() else {
        return Ok(false);
    };
    let Relay::Body {
        body,
        chunks,
        reusable,
    } = link.relay
    else {
        return Ok(false);
    };
    let framing = if chunks { CHUNK_FRAMING } else { 0 };
    let room = OUTPUT_HIGH_WATER.saturating_sub(output.pending() + framing);
    if room == 0 {
        link.paused = true;
        return Ok(false);
    }
    let available = link.input.bytes();
    let offered = &available[..available.len().min(room)];
    let out = &mut output.buf;
    let (consumed, done) = match body {
        UpstreamBody::Framed(mut decoder) => {
            let mut sink = BodySink {
                out: if chunks {
                    BodyOut::Chunks(out)
                } else {
                    BodyOut::Raw(out)
                },
                received: &mut link.relayed,
                limit: u64::MAX,
                response_begun: true,
            };
            let progress = decoder
                .decode(offered, &mut sink)
                .map_err(|_| Failure::BadResponse)?;
            link.relay = Relay::Body {
                body: UpstreamBody::Framed(decoder),
                chunks,
                reusable,
            };
            (progress.consumed, progress.done)
        }
        UpstreamBody::UntilClose => {
            match chunks {
                true => push_chunk(out, offered),
                false => out.extend_from_slice(offered),
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
