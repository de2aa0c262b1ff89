//! Per-worker counters and histograms: connections accepted, open and
//! closed by cause; responses by status code and method; request and
//! connection durations; timer expirations by kind and how late they fired.
//!
//! Each worker owns its `Stats` and is its only writer ([`Counter`]: a
//! plain load and store, no locked instruction); the admin thread sums
//! the workers' values on a scrape. Durations are stamped with the loop
//! clock (see [`timing`]), never with a clock read per request.

pub mod timing;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub use crate::tally::{Counter, Histogram, HistogramData};

use crate::http::{Method, Status};
use crate::tally::time_bounds;
use crate::timers::Micros;
use crate::tls::TlsStats;
use crate::upstream::Failure;

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
    /// Closed right after a keep-alive response, as a test control asked
    /// (`after=silent` or `after=rst`).
    Control,
    /// Its forwarded exchange failed on the upstream's side (a 502 or 504
    /// sent, or the answer cut short).
    Upstream,
}

impl CloseCause {
    pub const ALL: [CloseCause; 13] = [
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
        CloseCause::Control,
        CloseCause::Upstream,
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
            CloseCause::Control => "test_control",
            CloseCause::Upstream => "upstream",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a timer in a worker's lists stands for, in the words a user knows:
/// how `/timers` labels a list and `kas_timer_expirations_total` its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// Idle between requests (`--keep-alive-timeout` + buffer).
    KeepAlive,
    /// The head deadline (`--headers-timeout`).
    Headers,
    /// Socket inactivity while a request is in progress (`--timeout`).
    Inactivity,
    /// The whole-request deadline (`--request-timeout`).
    Request,
    /// A `/delay/<ms>` answer waiting.
    Delay,
    /// Draining input after a final response, before the close.
    Linger,
    /// The cached Date value's one-second tick.
    Date,
    /// accept() paused after running out of descriptors.
    AcceptPause,
    /// Memory freed by a burst, to be handed back to the system.
    MemoryReturn,
    /// Watching the peer after an idle close's FIN.
    IdleWatch,
    /// A forwarded request waiting for its answer head (`--upstream-timeout`).
    Upstream,
    /// An idle upstream connection pooled (`--upstream-idle-timeout`).
    UpstreamIdle,
}

impl TimerKind {
    pub const COUNT: usize = 12;
    pub const ALL: [TimerKind; TimerKind::COUNT] = [
        TimerKind::KeepAlive,
        TimerKind::Headers,
        TimerKind::Inactivity,
        TimerKind::Request,
        TimerKind::Delay,
        TimerKind::Linger,
        TimerKind::Date,
        TimerKind::AcceptPause,
        TimerKind::MemoryReturn,
        TimerKind::IdleWatch,
        TimerKind::Upstream,
        TimerKind::UpstreamIdle,
    ];

    pub fn label(self) -> &'static str {
        match self {
            TimerKind::KeepAlive => "keep-alive",
            TimerKind::Headers => "headers",
            TimerKind::Inactivity => "inactivity",
            TimerKind::Request => "request",
            TimerKind::Delay => "delay",
            TimerKind::Linger => "linger",
            TimerKind::Date => "date",
            TimerKind::AcceptPause => "accept-pause",
            TimerKind::MemoryReturn => "memory-return",
            TimerKind::IdleWatch => "idle-watch",
            TimerKind::Upstream => "upstream",
            TimerKind::UpstreamIdle => "upstream-idle",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Histogram bounds for request durations, in µs: 25 µs to 60 s.
pub static REQUEST_DURATION_US: [u64; 20] = time_bounds(&[], 25, 60_000_000);
/// Histogram bounds for connection lifetimes, in µs: 1 ms to 1 h.
pub static CONNECTION_DURATION_US: [u64; 14] = time_bounds(
    &[1_000, 10_000, 100_000, 1_000_000],
    5_000_000,
    3_600_000_000,
);
/// Histogram bounds for requests served per connection.
pub static REQUESTS_PER_CONNECTION: [u64; 12] = [
    0, 1, 2, 5, 10, 20, 50, 100, 1_000, 10_000, 100_000, 1_000_000,
];
/// Histogram bounds for timer lateness (fired after the deadline), in µs.
pub static TIMER_LATENESS_US: [u64; 16] = [
    10, 50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000,
];

/// Status codes counted exactly: 100..=599.
const CODES: usize = 500;

/// One worker's counters.
#[derive(Debug)]
pub struct Stats {
    pub accepted: AtomicU64,
    /// Refused at accept (over `--max-connections` with nothing idle to evict).
    pub refused: AtomicU64,
    pub open: AtomicU64,
    closed: [Counter; CloseCause::ALL.len()],
    /// Responses by status code (100..=599) and method: `code * methods + method`.
    responses: Box<[Counter]>,
    /// Responses on a connection that had answered before (keep-alive reuse).
    pub reused: Counter,
    /// First byte of a request to the last byte of its response, in µs.
    pub request_duration: Histogram,
    /// Accept to close, in µs.
    pub connection_duration: Histogram,
    /// Responses per connection, recorded at its close.
    pub requests_per_connection: Histogram,
    timer_expirations: [Counter; TimerKind::COUNT],
    /// How long after its deadline a connection timer fired, in µs (loop
    /// clock).
    pub timer_lateness: Histogram,
    /// Snapshots built for the admin view (each one woke the worker).
    pub snapshots: Counter,
    /// Idle closes made without the watch after their FIN, for lack of
    /// descriptors.
    pub watch_skipped: Counter,
    /// TLS handshakes and their failures.
    pub tls: TlsStats,
    /// Forwarded exchanges that failed on the upstream's side, by
    /// [`Failure`] (`kas_upstream_errors_total{reason}`): the service's
    /// failures, never a client's.
    pub upstream_errors: [Counter; Failure::ALL.len()],
    /// Requests sent again on a fresh upstream connection after a pooled
    /// one closed before answering (`kas_upstream_retries_total`).
    pub upstream_retries: Counter,
    /// Upstream connections opened (`kas_upstream_connections_total`).
    pub upstream_connections: Counter,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            accepted: AtomicU64::default(),
            refused: AtomicU64::default(),
            open: AtomicU64::default(),
            closed: Default::default(),
            responses: (0..CODES * Method::ALL.len())
                .map(|_| Counter::default())
                .collect(),
            reused: Counter::default(),
            request_duration: Histogram::new(&REQUEST_DURATION_US),
            connection_duration: Histogram::new(&CONNECTION_DURATION_US),
            requests_per_connection: Histogram::new(&REQUESTS_PER_CONNECTION),
            timer_expirations: Default::default(),
            timer_lateness: Histogram::new(&TIMER_LATENESS_US),
            snapshots: Counter::default(),
            watch_skipped: Counter::default(),
            tls: TlsStats::default(),
            upstream_errors: Default::default(),
            upstream_retries: Counter::default(),
            upstream_connections: Counter::default(),
        }
    }
}

impl Stats {
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
        self.open.fetch_add(1, Relaxed);
    }

    pub fn closed(&self, cause: CloseCause) {
        self.closed[cause.index()].add(1);
        self.open.fetch_sub(1, Relaxed);
    }

    /// A response was queued; `reused` if the connection had answered before.
    #[inline]
    pub fn responded(&self, status: Status, method: Method, reused: bool) {
        self.responded_code(status.code(), method, reused);
    }

    /// A response with status `code` (any, as a forwarded one) was queued.
    pub fn responded_code(&self, code: u16, method: Method, reused: bool) {
        let code = usize::from(code).clamp(100, 599) - 100;
        self.responses[code * Method::ALL.len() + method.index()].add(1);
        if reused {
            self.reused.add(1);
        }
    }

    /// A timer fired, `late` µs after its deadline where that is measured.
    #[inline]
    pub fn timer_fired(&self, kind: TimerKind, late: Option<Micros>) {
        self.timer_expirations[kind.index()].add(1);
        if let Some(late) = late {
            self.timer_lateness.record(late);
        }
    }

    /// A connection timer that was due `late` µs ago was cancelled or
    /// moved by the activity it waited for (a request reusing an idle
    /// connection) before it could fire: the loop was that late for it,
    /// and the lateness figures say so, though nothing fired.
    pub fn timer_overdue(&self, late: Micros) {
        self.timer_lateness.record(late);
    }

    /// Forwarded exchanges failed on the upstream's side so far, for any
    /// reason.
    pub fn upstream_errors_total(&self) -> u64 {
        self.upstream_errors.iter().map(Counter::get).sum()
    }

    /// Forwarded exchanges failed for `failure` so far.
    pub fn upstream_errors_by(&self, failure: Failure) -> u64 {
        self.upstream_errors[failure.index()].get()
    }

    pub fn closed_by(&self, cause: CloseCause) -> u64 {
        self.closed[cause.index()].get()
    }

    /// Every non-zero `(code, method, count)`.
    pub fn responses(&self) -> impl Iterator<Item = (u16, Method, u64)> + '_ {
        self.responses
            .iter()
            .enumerate()
            .filter_map(|(i, counter)| {
                let count = counter.get();
                let code = (i / Method::ALL.len() + 100) as u16;
                let method = Method::ALL[i % Method::ALL.len()];
                (count > 0).then_some((code, method, count))
            })
    }

    /// Responses sent with status class `class` (1..=5).
    pub fn responses_in_class(&self, class: usize) -> u64 {
        self.responses()
            .filter(|(code, _, _)| usize::from(code / 100) == class)
            .map(|(_, _, count)| count)
            .sum()
    }

    pub fn timer_expirations(&self, kind: TimerKind) -> u64 {
        self.timer_expirations[kind.index()].get()
    }

    pub fn open_connections(&self) -> u64 {
        self.open.load(Relaxed)
    }
}
