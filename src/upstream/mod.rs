//! The worker's side of `--upstream`: its connections to the service
//! ([`Upstreams`]: connect, lend, take back, pool while idle) and the
//! per-exchange [`UpstreamLink`] a forwarding client connection holds in
//! its pooled buffers. The HTTP of the exchange (what goes up, what comes
//! back and how it is relayed) is the session's (`session::forward`); the
//! reads and writes are the connection's (`conn::upstream`).
//!
//! How the pieces fit:
//! - An upstream connection lives in the worker's [`Upstreams`] slab for
//!   its whole life, registered once, under its own token
//!   ([`Upstreams::token`]: the slab key with [`UPSTREAM_BIT`] set). It is
//!   either lent to one client connection (by slab key) or idle in the
//!   pool, LIFO, with an unref'd timer of the pool's idle limit:
//!   `--upstream-idle-timeout`, lowered for the worker's life by what the
//!   service shows (a pooled connection it closed while idle: ¾ of that
//!   life) or says (`Keep-Alive: timeout=N`: N s less 1 s), so the pool
//!   never races the service's own idle close (`idle_limit`). Past the
//!   limit a connection leaves the pool but is watched half the limit
//!   more, never lent, so a close at about the limit is seen and learned
//!   from without a request meeting it.
//! - The worker dispatches an upstream token's event to the client it is
//!   lent to (`Conn::on_upstream_ready`), or, idle, checks it: an upstream
//!   that closed (or spoke) while pooled or watched is dropped at once.
//! - A client connection forwarding a request holds an [`UpstreamLink`]
//!   in its buffers: the key of the upstream connection it borrowed, the
//!   bytes to send (kept until the first answer byte, so a retry can
//!   resend them) and the bytes received. An idle client connection holds
//!   no buffers, so no upstream connection: the exchange's end gives it
//!   back to the pool (when its answer was whole and it persists) or
//!   closes it.

mod idle_limit;
mod link;
mod pool;

pub use link::{Relay, UpstreamBody, UpstreamLink};
pub use pool::{UPSTREAM_BIT, Upstreams};

/// Why an exchange with the upstream failed: the `reason` label of
/// `kas_upstream_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connect was refused (or failed: unreachable, no route).
    Refused,
    /// The connection was reset or closed before an answer came.
    Reset,
    /// No answer head within `--upstream-timeout`.
    Timeout,
    /// The answer was not HTTP, or its head too large.
    BadResponse,
    /// The answer broke off mid-body.
    Cut,
}

impl Failure {
    pub const ALL: [Failure; 5] = [
        Failure::Refused,
        Failure::Reset,
        Failure::Timeout,
        Failure::BadResponse,
        Failure::Cut,
    ];

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::Reset => "reset",
            Failure::Timeout => "timeout",
            Failure::BadResponse => "bad_response",
            Failure::Cut => "cut",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}
