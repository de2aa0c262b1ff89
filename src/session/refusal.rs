//! Refusals: a bad request, or a bad test control, answered with its status
//! and `Connection: close`, after which the connection only drains.

use super::{Session, write_head};
use crate::app::controls::BadControl;
use crate::app::{ReplyHead, Terms};
use crate::ctx::Ctx;
use crate::http::response::{ALLOW, BodyLength};
use crate::http::{Method, RequestError, Status};
use crate::pool::{Buffers, HeadProgress};
use crate::stats::CloseCause;

impl Session {
    /// Answers a bad request with its status and closes.
    pub(super) fn refuse(&mut self, error: RequestError, buffers: &mut Buffers, ctx: &mut Ctx<'_>) {
        tracing::debug!(?error, "refusing request");
        self.fail(error.status(), CloseCause::BadRequest, buffers, ctx);
    }

    /// Answers a request whose test control has a bad value: 400, with a
    /// body naming the control and what it takes, and closes.
    pub(super) fn refuse_control(
        &mut self,
        bad: BadControl,
        method: Method,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        tracing::debug!(control = bad.name, "refusing a bad test control");
        let body = format!("{bad}\n");
        let answer = (Status::BadRequest, body.as_bytes(), method);
        self.fail_with(answer, CloseCause::BadRequest, buffers, ctx);
    }

    /// Queues an error response with `Connection: close` and starts closing.
    pub(super) fn fail(
        &mut self,
        status: Status,
        cause: CloseCause,
        buffers: &mut Buffers,
        ctx: &mut Ctx<'_>,
    ) {
        let method = buffers
            .in_flight
            .and_then(|request| request.method())
            .unwrap_or(Method::Other);
        let answer = (status, status.reason_line(), method);
        self.fail_with(answer, cause, buffers, ctx);
    }

    /// [`Session::fail`] with a body of its own: `(status, body, method)`.
    pub(super) fn fail_with(
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
        buffers.head_progress = HeadProgress::default();
        let length = BodyLength::Known(reason.len() as u64);
        let out = &mut buffers.output.buf;
        let head = ReplyHead {
            status,
            content_type: "text/plain",
            extra: match status {
                Status::MethodNotAllowed => ALLOW,
                _ => b"",
            },
        };
        write_head(out, head, length, Terms::CLOSE, ctx);
        buffers.output.buf.extend_from_slice(reason);
        ctx.stats.responded(status, method, self.served_any);
        if ctx.settings.logs_access() {
            ctx.log_response(&mut buffers.log, status.code(), reason.len() as u64);
        }
        self.close_for(cause, buffers);
    }
}
