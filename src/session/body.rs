//! The body of the request in progress, fed to its target as far as the
//! target has room: dropped, gathered for the echo, or, once the echo
//! outgrows [`ECHO_BUFFER`], passed through into a response that has
//! begun (its head queued, the body following as it arrives).

use super::{ECHO_BUFFER, OUTPUT_HIGH_WATER, Session, write_head};
use crate::app::Plan;
use crate::ctx::Ctx;
use crate::http::body::{BodyOut, BodySink};
use crate::http::response::{BodyLength, CHUNK_FRAMING, LAST_CHUNK, push_chunk};
use crate::http::{BodyDecoder, RequestError};
use crate::in_flight::{BodyTarget, Echo, InFlight};
use crate::pool::Buffers;

impl Session {
    /// Feeds buffered input to the body in progress, as far as its target
    /// has room. Returns whether processing may go on (`false`: wait for
    /// input or for output to drain, or the request was refused).
    pub(super) fn take_body(
        &mut self,
        mut decoder: BodyDecoder,
        mut received: u64,
        answer: Plan,
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
        let upstream_pending = buffers.upstream.as_deref().map_or(0, |link| link.pending());
        let room = match target {
            BodyTarget::Discard | BodyTarget::Stream(Echo::Nothing) => usize::MAX,
            BodyTarget::Upstream(Echo::Chunks) => {
                OUTPUT_HIGH_WATER.saturating_sub(upstream_pending + CHUNK_FRAMING)
            }
            BodyTarget::Upstream(_) => OUTPUT_HIGH_WATER.saturating_sub(upstream_pending),
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
            upstream,
            ..
        } = buffers;
        let out = match (target, upstream.as_deref_mut()) {
            (BodyTarget::Discard | BodyTarget::Stream(Echo::Nothing), _) => BodyOut::Discard,
            (BodyTarget::Gather, _) => BodyOut::Raw(body),
            (BodyTarget::Stream(Echo::Raw), _) => BodyOut::Raw(&mut output.buf),
            (BodyTarget::Stream(Echo::Chunks), _) => BodyOut::Chunks(&mut output.buf),
            (BodyTarget::Upstream(Echo::Chunks), Some(link)) => BodyOut::Chunks(&mut link.out),
            (BodyTarget::Upstream(_), Some(link)) => BodyOut::Raw(&mut link.out),
            (BodyTarget::Upstream(_), None) => BodyOut::Discard,
        };
        let available = input.bytes();
        let offered = &available[..available.len().min(room)];
        let mut sink = BodySink {
            out,
            received: &mut received,
            limit: ctx.settings.max_body_size as u64,
            response_begun: matches!(target, BodyTarget::Stream(_)),
        };
        let outcome = decoder.decode(offered, &mut sink);
        buffers.in_flight = Some(InFlight::Body {
            decoder,
            received,
            answer,
            target,
        });
        match outcome {
            Ok(progress) => {
                buffers.input.consume(progress.consumed);
                if progress.done {
                    match target {
                        BodyTarget::Stream(_) => self.finish_stream(answer, buffers, ctx),
                        BodyTarget::Upstream(_) => {
                            Self::forward_body_done(target, buffers);
                            self.complete(answer, buffers, ctx);
                        }
                        BodyTarget::Discard | BodyTarget::Gather => {
                            self.complete(answer, buffers, ctx)
                        }
                    }
                }
                progress.consumed > 0
            }
            Err(error) if self.response_begun(Some(buffers)) => {
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
    pub(super) fn start_stream(
        &mut self,
        answer: Plan,
        length: Option<u64>,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) -> BodyTarget {
        let terms = answer.terms.when_draining(ctx.draining);
        let Buffers { output, body, .. } = buffers;
        let reply = answer.streamed_reply();
        let framing = length.map_or(BodyLength::Chunked, BodyLength::Known);
        write_head(&mut output.buf, reply, framing, terms, ctx);
        let echo = match length {
            _ if answer.is_head => Echo::Nothing,
            Some(_) => Echo::Raw,
            None => Echo::Chunks,
        };
        match echo {
            Echo::Raw => output.buf.extend_from_slice(body),
            Echo::Chunks => push_chunk(&mut output.buf, body),
            Echo::Nothing => {}
        }
        body.clear();
        let reused = self.count_served();
        ctx.stats.responded(reply.status, answer.method, reused);
        BodyTarget::Stream(echo)
    }

    /// The streamed body ended: end the response too.
    pub(super) fn finish_stream(&mut self, answer: Plan, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        self.count_received();
        if let Some(InFlight::Body {
            target: BodyTarget::Stream(Echo::Chunks),
            ..
        }) = buffers.in_flight
        {
            buffers.output.buf.extend_from_slice(LAST_CHUNK);
        }
        self.log_stream(buffers, ctx);
        let persistence = answer.terms.when_draining(ctx.draining).persistence;
        self.end_exchange(persistence, buffers);
    }

    /// Logs the streamed response in progress, as far as it went: it ended,
    /// or it will stay unfinished.
    pub(super) fn log_stream(&self, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        let Some(InFlight::Body {
            received,
            answer,
            target: BodyTarget::Stream(echo),
            ..
        }) = buffers.in_flight
        else {
            return;
        };
        if ctx.settings.logs_access() {
            let sent = if echo == Echo::Nothing { 0 } else { received };
            let status = answer.streamed_reply().status;
            ctx.log_response(&mut buffers.log, status.code(), sent);
        }
    }

    /// The body turned out bad after its echo began: no status can be sent
    /// any more, so the response stays unfinished (short of its length, or
    /// without its last chunk) and the connection closes once it is flushed,
    /// which tells the client the exchange failed.
    pub(super) fn abandon_stream(
        &mut self,
        error: RequestError,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        tracing::debug!(
            ?error,
            "request body refused after its echo began: the response ends unfinished"
        );
        self.log_stream(buffers, ctx);
        buffers.input.clear();
        self.cut(buffers);
    }
}
