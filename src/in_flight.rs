//! The request a connection is in the middle of, as data: a body still
//! arriving, an answer waiting on its `/delay` (or on an admin round, or
//! on the upstream), a generated body still owed, or the admin's event
//! stream. Only a connection with work has one, so it lives with the pooled
//! buffers ([`crate::pool::Buffers::in_flight`]) and an idle connection
//! pays nothing for it; the session (`crate::session`) drives it.

use crate::admin::rounds::RoundId;
use crate::app::Plan;
use crate::http::BodyDecoder;
use crate::http::response::Persistence;

/// A request whose head is parsed and whose exchange is not over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
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
    /// Received; the admin's answer waits for the end of snapshot round
    /// `round` (the worker wakes it, see `worker::admin`).
    Awaiting { round: RoundId, answer: Plan },
    /// The admin's event stream: its head is queued and the body runs
    /// until the close, a frame per tick of `interval_ms`; `wants` is the
    /// round whose frame it gets next, if a tick asked for one. `fresh`
    /// until its first frame.
    Streaming {
        interval_ms: u64,
        wants: Option<RoundId>,
        fresh: bool,
    },
    /// Received and sent up (`--upstream`): its answer is awaited from
    /// the upstream, or being relayed from it (the buffers' link says
    /// how far, see `crate::upstream::UpstreamLink`).
    Forward { answer: Plan },
    /// The head of a `/bytes` answer is queued; `remaining` bytes of its
    /// body are still to be written, as the output drains.
    Sending {
        remaining: u64,
        persistence: Persistence,
    },
}

impl InFlight {
    /// The method of the request, while its answer is not yet queued.
    pub fn method(&self) -> Option<crate::http::Method> {
        match self {
            InFlight::Body { answer, .. }
            | InFlight::Delayed { answer, .. }
            | InFlight::Awaiting { answer, .. }
            | InFlight::Forward { answer } => Some(answer.method),
            InFlight::Sending { .. } | InFlight::Streaming { .. } => None,
        }
    }
}

/// Where the body of the request in progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyTarget {
    /// Counted and dropped: the route ignores the body; answered once it ends.
    Discard,
    /// Gathered in the buffers' `body` for the echo, up to the session's
    /// echo limit; answered whole once it ends.
    Gather,
    /// The response head is queued: the body follows it as it arrives.
    Stream(Echo),
    /// Sent up to the upstream (`--upstream`) as it arrives: as is under
    /// its `Content-Length` ([`Echo::Raw`]), or chunked again
    /// ([`Echo::Chunks`]).
    Upstream(Echo),
}

/// How a streamed echo carries the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// As is, under the request's own `Content-Length`.
    Raw,
    /// As chunks (the request was chunked), ended by the last chunk.
    Chunks,
    /// Not at all: the answer to HEAD.
    Nothing,
}
