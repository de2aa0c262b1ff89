//! Per-worker counters: connections accepted, open and closed by cause, and
//! responses by status class. Each worker owns its `Stats` and bumps it with
//! relaxed atomics (no contention: one writer); readers sum across workers.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::http::Status;

/// Why a connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// The client closed (or half-closed with nothing left to answer).
    Client,
    KeepAliveTimeout,
    HeadersTimeout,
    RequestTimeout,
    Inactivity,
    /// Closed to make room under `--max-connections`.
    Evicted,
    /// Answered a bad request, then closed.
    BadRequest,
    /// The socket failed (reset, broken pipe).
    Reset,
    /// Answered with `Connection: close`.
    Done,
    /// Closed by a graceful shutdown.
    Shutdown,
    Error,
}

impl CloseCause {
    pub const ALL: [CloseCause; 11] = [
        CloseCause::Client,
        CloseCause::KeepAliveTimeout,
        CloseCause::HeadersTimeout,
        CloseCause::RequestTimeout,
        CloseCause::Inactivity,
        CloseCause::Evicted,
        CloseCause::BadRequest,
        CloseCause::Reset,
        CloseCause::Done,
        CloseCause::Shutdown,
        CloseCause::Error,
    ];

    /// The label used in metrics.
    pub fn label(self) -> &'static str {
        match self {
            CloseCause::Client => "client",
            CloseCause::KeepAliveTimeout => "keep_alive_timeout",
            CloseCause::HeadersTimeout => "headers_timeout",
            CloseCause::RequestTimeout => "request_timeout",
            CloseCause::Inactivity => "inactivity",
            CloseCause::Evicted => "evicted",
            CloseCause::BadRequest => "bad_request",
            CloseCause::Reset => "reset",
            CloseCause::Done => "done",
            CloseCause::Shutdown => "shutdown",
            CloseCause::Error => "error",
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

/// One worker's counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub accepted: AtomicU64,
    /// Refused at accept (over `--max-connections` with nothing idle to evict).
    pub refused: AtomicU64,
    pub open: AtomicU64,
    closed: [AtomicU64; CloseCause::ALL.len()],
    /// Responses by status class: index 1..=5 for 1xx..5xx.
    responses: [AtomicU64; 6],
    /// Responses on a connection that had answered before (keep-alive reuse).
    pub reused: AtomicU64,
}

impl Stats {
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
        self.open.fetch_add(1, Relaxed);
    }

    pub fn closed(&self, cause: CloseCause) {
        self.closed[cause.index()].fetch_add(1, Relaxed);
        self.open.fetch_sub(1, Relaxed);
    }

    /// A response was queued; `reused` if the connection had answered before.
    pub fn responded(&self, status: Status, reused: bool) {
        let class = usize::from(status.code() / 100).min(5);
        self.responses[class].fetch_add(1, Relaxed);
        if reused {
            self.reused.fetch_add(1, Relaxed);
        }
    }

    pub fn closed_by(&self, cause: CloseCause) -> u64 {
        self.closed[cause.index()].load(Relaxed)
    }

    /// Responses sent with status class `class` (1..=5).
    pub fn responses_in_class(&self, class: usize) -> u64 {
        self.responses.get(class).map_or(0, |c| c.load(Relaxed))
    }

    pub fn open_connections(&self) -> u64 {
        self.open.load(Relaxed)
    }
}
