//! A connection's part in the admin listener's work (see `worker::admin`):
//! the answer it holds while a snapshot round runs, and the event stream
//! it carries to a dashboard viewer, fed a frame per tick; a viewer that
//! stops reading is dropped.

use super::{Conn, Flow};
use crate::admin::rounds::RoundId;
use crate::admin::service::Answer;
use crate::ctx::{ConnLabel, Ctx};
use crate::stats::CloseCause;

/// The kernel's send buffer for an admin event stream: what it may hold
/// beyond the frames queued (small, so a viewer that stops reading is
/// found out in seconds).
const VIEWER_SEND_BUFFER: usize = 32 * 1024;

impl Conn {
    /// The admin answer that waits on a round, if one does.
    pub fn awaited(&self) -> Option<Answer> {
        self.session.awaited(self.buffers.as_deref())
    }

    /// The event stream's interval and the round whose frame it wants
    /// next, when the connection carries the admin's event stream.
    pub fn stream(&self) -> Option<(u64, Option<RoundId>)> {
        self.session.stream(self.buffers.as_deref())
    }

    /// A tick of its event stream: it wants round `round`'s frame.
    pub fn want_frame(&mut self, round: RoundId) {
        if let Some(buffers) = self.buffers.as_deref_mut() {
            self.session.want_frame(round, buffers);
        }
    }

    /// A frame of its event stream: queued and sent; a viewer with more
    /// than `backlog` bytes still unsent has stopped reading, and is
    /// dropped. Its first frame keeps the kernel's send buffer small, so
    /// that a viewer that stops reading is found out in seconds.
    pub fn on_frame(&mut self, frame: &[u8], backlog: usize, ctx: &mut Ctx<'_>) -> Flow {
        let Some(buffers) = self.buffers.as_deref_mut() else {
            return Flow::Open;
        };
        if self.session.push_frame(frame, buffers) {
            self.transport.limit_send_buffer(VIEWER_SEND_BUFFER);
        }
        if buffers.output.pending() > backlog {
            let ConnLabel { id, .. } = ctx.conn;
            tracing::info!(
                conn = id,
                "dropping a dashboard viewer that stopped reading"
            );
            return Flow::Close(CloseCause::Inactivity);
        }
        self.drive(ctx)
    }
}
