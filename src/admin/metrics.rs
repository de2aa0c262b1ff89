//! `/metrics`: the Prometheus text exposition (format 0.0.4). Counters and
//! histograms are summed over the workers' [`Stats`]; gauges of state come
//! from the snapshot round that the scrape asked for; `process_*` from
//! /proc; dropped diagnostic lines from the process-wide count in
//! `crate::logging`. Every family is listed in the README.
//!
//! Why not the `prometheus-client` crate: its label families are hash maps
//! behind a lock, looked up (and the label set cloned) on every increment,
//! which the hot path cannot afford; our counters are plain per-worker
//! arrays indexed by enum, so only the text format is left to write, and
//! that is this file.

use std::fmt::{Display, Write as _};

use crate::http::Method;
use crate::introspect::{ConnCounts, Snapshot};
use crate::observe::Closer;
use crate::peer_observer::ObserverStats;
use crate::peer_observer::stats::{AFTER_FIN_US, IDLE_CLOSE_AGE_US, REUSE_US};
use crate::shared::Remote;
use crate::stats::{
    CONNECTION_DURATION_US, CloseCause, HistogramData, REQUEST_DURATION_US,
    REQUESTS_PER_CONNECTION, Stats, TIMER_LATENESS_US, TimerKind,
};

use super::process;
use crate::tls::{HandshakeFailure, TlsVersion};
use crate::upstream::Failure;

/// The exposition for one scrape; `viewers`: dashboard feeds open now.
/// Families in a fixed order, each group written by one step.
pub fn render(remote: &Remote, snapshots: &[Snapshot], viewers: usize) -> String {
    let scrape = Scrape { remote, snapshots };
    let mut out = Exposition::default();
    render_connections(&mut out, &scrape);
    render_requests(&mut out, &scrape);
    render_lab(&mut out, remote);
    render_tls(&mut out, remote);
    render_timers(&mut out, &scrape);
    render_self(&mut out, &scrape, viewers);
    render_process(&mut out);
    out.text
}

/// What one scrape reads: the workers' counters (summed) and the
/// snapshot round's gauges (summed over the workers).
struct Scrape<'a> {
    remote: &'a Remote,
    snapshots: &'a [Snapshot],
}

impl Scrape<'_> {
    /// A counter summed over the workers.
    fn sum(&self, read: impl Fn(&Stats) -> u64) -> u64 {
        self.remote.stats().map(read).sum()
    }

    /// Connections in one state, over the workers' snapshots.
    fn state(&self, pick: fn(&ConnCounts) -> u64) -> u64 {
        self.snapshots.iter().map(|s| pick(&s.connections)).sum()
    }

    /// A count over the workers' snapshots.
    fn total(&self, pick: fn(&Snapshot) -> usize) -> usize {
        self.snapshots.iter().map(pick).sum()
    }

    /// A histogram summed over the workers.
    fn histogram(
        &self,
        bounds: &'static [u64],
        pick: fn(&Stats) -> HistogramData,
    ) -> HistogramData {
        HistogramData::sum_of(bounds, self.remote.stats().map(pick))
    }
}

/// Connections by state, accepted, refused, closed by cause, and their
/// lifetimes and requests.
fn render_connections(out: &mut Exposition, scrape: &Scrape<'_>) {
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    out.family("kas_connections", "gauge", "Open connections by state.");
    for (label, value) in [
        ("reading", scrape.state(|c| c.reading)),
        ("writing", scrape.state(|c| c.writing)),
        ("idle", scrape.state(|c| c.idle)),
        ("closing", scrape.state(|c| c.closing)),
    ] {
        out.sample("kas_connections", &[("state", label)], value);
    }
    out.single(
        "kas_connections_accepted_total",
        "counter",
        "Connections accepted.",
        scrape.sum(|s| s.accepted.load(relaxed)),
    );
    out.single(
        "kas_connections_refused_total",
        "counter",
        "Connections refused at --max-connections with none idle to evict.",
        scrape.sum(|s| s.refused.load(relaxed)),
    );
    out.family(
        "kas_connections_closed_total",
        "counter",
        "Connections closed, by cause.",
    );
    for cause in CloseCause::ALL {
        let value = scrape.sum(|s| s.closed_by(cause));
        out.sample(
            "kas_connections_closed_total",
            &[("cause", cause.label())],
            value,
        );
    }
    render_upstream(out, scrape);
    out.histogram(
        "kas_connection_duration_seconds",
        "Connection lifetimes, accept to close.",
        &scrape.histogram(&CONNECTION_DURATION_US, |s| s.connection_duration.read()),
        1e6,
    );
    out.histogram(
        "kas_requests_per_connection",
        "Responses sent per connection, counted at its close.",
        &scrape.histogram(&REQUESTS_PER_CONNECTION, |s| {
            s.requests_per_connection.read()
        }),
        1.0,
    );
}

/// Responses by status class, by code and method, reuses, durations.
fn render_requests(out: &mut Exposition, scrape: &Scrape<'_>) {
    out.family(
        "kas_requests_total",
        "counter",
        "Responses sent, by status class.",
    );
    for class in 1..=5 {
        let value = scrape.sum(|s| s.responses_in_class(class));
        out.sample(
            "kas_requests_total",
            &[("class", &format!("{class}xx"))],
            value,
        );
    }
    out.family(
        "kas_responses_total",
        "counter",
        "Responses sent, by status code and request method (other: any other method, or unread).",
    );
    let mut by_code: std::collections::BTreeMap<(u16, usize), u64> = Default::default();
    for (code, method, count) in scrape.remote.stats().flat_map(Stats::responses) {
        *by_code.entry((code, method.index())).or_default() += count;
    }
    for ((code, method), count) in by_code {
        let code = code.to_string();
        let method = Method::ALL[method].label();
        out.sample(
            "kas_responses_total",
            &[("code", &code), ("method", method)],
            count,
        );
    }
    out.single(
        "kas_keepalive_reused_requests_total",
        "counter",
        "Requests served on a connection that had served one before.",
        scrape.sum(|s| s.reused.get()),
    );
    out.histogram(
        "kas_request_duration_seconds",
        "First byte of a request to the last byte of its response, on the loop clock \
         (0 when both fall in one loop turn).",
        &scrape.histogram(&REQUEST_DURATION_US, |s| s.request_duration.read()),
        1e6,
    );
}

/// The timer lists: how many, their timers, the ref'd ones, expirations
/// by kind and lateness.
fn render_timers(out: &mut Exposition, scrape: &Scrape<'_>) {
    out.single(
        "kas_timer_lists",
        "gauge",
        "Timer lists (one per distinct duration per worker).",
        scrape.total(|s| s.lists.len()),
    );
    out.single(
        "kas_timers",
        "gauge",
        "Timers enrolled in all lists.",
        scrape.total(|s| s.timers),
    );
    out.single(
        "kas_timers_refed",
        "gauge",
        "Ref'd timers: what keeps a draining server alive.",
        scrape.total(|s| s.ref_count),
    );
    out.family(
        "kas_timer_expirations_total",
        "counter",
        "Timers that fired, by what they measured.",
    );
    for kind in TimerKind::ALL {
        let value = scrape.sum(|s| s.timer_expirations(kind));
        out.sample(
            "kas_timer_expirations_total",
            &[("timer", kind.label())],
            value,
        );
    }
    out.histogram(
        "kas_timer_lateness_seconds",
        "How long after its deadline a connection timer fired, or was cancelled while overdue (loop clock).",
        &scrape.histogram(&TIMER_LATENESS_US, |s| s.timer_lateness.read()),
        1e6,
    );
}

/// The server itself: dashboard viewers, snapshots taken for them,
/// dropped diagnostic lines, the running version.
fn render_self(out: &mut Exposition, scrape: &Scrape<'_>, viewers: usize) {
    out.single(
        "kas_admin_viewers",
        "gauge",
        "Dashboard event streams open.",
        viewers,
    );
    out.single(
        "kas_snapshots_total",
        "counter",
        "Snapshots the workers built for the admin view (each woke a worker).",
        scrape.sum(|s| s.snapshots.get()),
    );
    out.single(
        "kas_log_lines_dropped_total",
        "counter",
        "Diagnostic lines dropped because stderr was closed, failing or full (never waited for).",
        crate::logging::lines_dropped(),
    );
    out.family(
        "kas_build_info",
        "gauge",
        "Always 1; the version that is running.",
    );
    out.sample(
        "kas_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
}

/// The standard `process_*` families, from /proc (none where it cannot
/// be read).
fn render_process(out: &mut Exposition) {
    let Some(p) = process::read() else {
        return;
    };
    out.single(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        p.resident_memory_bytes,
    );
    out.single(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        p.open_fds,
    );
    if let Some(max) = p.max_fds {
        out.single(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    out.single(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        p.cpu_seconds,
    );
    out.single(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        p.start_time_seconds,
    );
}

/// TLS handshakes by negotiated version, and handshakes that failed by
/// why (zero on a plain listener).
fn render_tls(out: &mut Exposition, remote: &Remote) {
    out.family(
        "kas_tls_handshakes_total",
        "counter",
        "TLS handshakes completed, by protocol version.",
    );
    for version in TlsVersion::ALL {
        let value: u64 = remote.stats().map(|s| s.tls.handshakes(version)).sum();
        out.sample(
            "kas_tls_handshakes_total",
            &[("version", version.label())],
            value,
        );
    }
    out.family(
        "kas_tls_handshake_failures_total",
        "counter",
        "TLS handshakes that did not complete: bad or refused TLS (error), the headers deadline from accept (timeout), the connection ending first: the peer left, or shutdown or eviction (closed), plain HTTP, answered with a cleartext 400 (plain_http).",
    );
    for why in HandshakeFailure::ALL {
        let value: u64 = remote.stats().map(|s| s.tls.failures(why)).sum();
        out.sample(
            "kas_tls_handshake_failures_total",
            &[("reason", why.label())],
            value,
        );
    }
}

/// The peer observer's families: who closes idle connections first and
/// when, reuse headroom, and what peers do after the server's idle FIN.
fn render_lab(out: &mut Exposition, remote: &Remote) {
    let sum = |read: fn(&ObserverStats) -> u64| remote.observer_stats().map(read).sum::<u64>();
    let histogram = |bounds: &'static [u64], pick: fn(&ObserverStats) -> HistogramData| {
        HistogramData::sum_of(bounds, remote.observer_stats().map(pick))
    };
    let by_closer: Vec<(&str, HistogramData)> = Closer::ALL
        .iter()
        .map(|&closer| {
            let data = match closer {
                Closer::Client => histogram(&IDLE_CLOSE_AGE_US, |s| {
                    s.idle_close_age(Closer::Client).read()
                }),
                Closer::Server => histogram(&IDLE_CLOSE_AGE_US, |s| {
                    s.idle_close_age(Closer::Server).read()
                }),
            };
            (closer.label(), data)
        })
        .collect();
    out.histogram_series(
        "kas_idle_close_age_seconds",
        "Keep-alive connections ended while idle between requests, by who closed first \
         (client: FIN or reset; server: its idle timer), at their idle age.",
        "closer",
        &by_closer,
        1e6,
    );
    out.histogram(
        "kas_reuse_gap_seconds",
        "Requests that reused an idle connection: time since its previous response.",
        &histogram(&REUSE_US, |s| s.reuse_gap.read()),
        1e6,
    );
    out.histogram(
        "kas_reuse_headroom_seconds",
        "Requests that reused an idle connection: time left before its idle deadline.",
        &histogram(&REUSE_US, |s| s.reuse_headroom.read()),
        1e6,
    );
    out.single(
        "kas_near_misses_total",
        "counter",
        &format!(
            "Reuses with less than {} ms left before the idle deadline.",
            crate::peer_observer::NEAR_MISS_US / 1000
        ),
        sum(|s| s.near_misses.get()),
    );
    out.single(
        "kas_late_requests_total",
        "counter",
        "Requests that arrived after the server's idle FIN (the client lost the race).",
        sum(|s| s.late_requests.get()),
    );
    out.histogram(
        "kas_late_request_delay_seconds",
        "How long after the server's idle FIN a late request arrived.",
        &histogram(&AFTER_FIN_US, |s| s.late_request_delay.read()),
        1e6,
    );
    out.histogram(
        "kas_peer_close_delay_seconds",
        "How long peers took to close after the server's idle FIN (within the 1 s watch).",
        &histogram(&AFTER_FIN_US, |s| s.peer_close_delay.read()),
        1e6,
    );
    out.single(
        "kas_idle_watch_skipped_total",
        "counter",
        "Idle closes made without the watch after the FIN, for lack of descriptors.",
        remote.stats().map(|s| s.watch_skipped.get()).sum::<u64>(),
    );
}

/// The forwarding's failures and retries (`--upstream`): the service's
/// own, apart from any client's.
fn render_upstream(out: &mut Exposition, scrape: &Scrape<'_>) {
    out.family(
        "kas_upstream_errors_total",
        "counter",
        "Forwarded requests that failed on the upstream's side, by reason (refused, reset, timeout, bad_response, cut).",
    );
    for failure in Failure::ALL {
        let value = scrape.sum(|s| s.upstream_errors_by(failure));
        out.sample(
            "kas_upstream_errors_total",
            &[("reason", failure.label())],
            value,
        );
    }
    out.single(
        "kas_upstream_retries_total",
        "counter",
        "Requests sent again on a fresh upstream connection after a pooled one closed before answering.",
        scrape.sum(|s| s.upstream_retries.get()),
    );
    out.family(
        "kas_upstream_connections",
        "gauge",
        "Open connections to the upstream: lent to a forwarded request, or idle in the pool.",
    );
    let open = scrape.total(|s| s.upstream_open);
    let idle = scrape.total(|s| s.upstream_idle);
    for (label, value) in [("lent", open.saturating_sub(idle)), ("idle", idle)] {
        out.sample("kas_upstream_connections", &[("state", label)], value);
    }
    out.single(
        "kas_upstream_connections_total",
        "counter",
        "Connections opened to the upstream.",
        scrape.sum(|s| s.upstream_connections.get()),
    );
    // Each worker learns on its own: the lowest is what the lab learned.
    if let Some(limit_ms) = scrape
        .snapshots
        .iter()
        .map(|s| s.upstream_idle_limit_ms)
        .min()
    {
        out.single(
            "kas_upstream_idle_limit_seconds",
            "gauge",
            "How long an idle upstream connection is pooled at most: --upstream-idle-timeout, or less once the service closed one sooner or said Keep-Alive: timeout=N (0: not pooled).",
            limit_ms as f64 / 1_000.0,
        );
    }
}

/// The text being written.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// `# HELP` and `# TYPE` lines.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{key}=\"{}\"", escape(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// A family with one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A histogram family: cumulative `_bucket`s up to `+Inf`, `_sum` and
    /// `_count`; bounds and sum divided by `per_unit` (1e6: µs to seconds;
    /// dividing by an exact power of ten prints `0.0005`, not `0.00049…`).
    fn histogram(&mut self, name: &str, help: &str, data: &HistogramData, per_unit: f64) {
        self.family(name, "histogram", help);
        self.histogram_samples(name, &[], data, per_unit);
    }

    /// A histogram family with one series per value of the label `key`.
    fn histogram_series(
        &mut self,
        name: &str,
        help: &str,
        key: &str,
        series: &[(&str, HistogramData)],
        per_unit: f64,
    ) {
        self.family(name, "histogram", help);
        for (value, data) in series {
            self.histogram_samples(name, &[(key, value)], data, per_unit);
        }
    }

    fn histogram_samples(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        data: &HistogramData,
        per_unit: f64,
    ) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (bound, count) in data.bounds.iter().zip(&data.counts) {
            cumulative += count;
            let le = (*bound as f64 / per_unit).to_string();
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, data.count());
        self.sample(&format!("{name}_sum"), labels, data.sum as f64 / per_unit);
        self.sample(&format!("{name}_count"), labels, data.count());
    }
}

/// A label value escaped as the text format wants (`\\`, `\"`, `\n`).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_scaled_to_seconds() {
        static BOUNDS: [u64; 2] = [500, 2_000_000];
        let mut out = Exposition::default();
        let data = HistogramData {
            bounds: &BOUNDS,
            counts: vec![3, 1, 2],
            sum: 7_000_000,
        };
        out.histogram("x_seconds", "A test.", &data, 1e6);
        let expected = "# HELP x_seconds A test.\n# TYPE x_seconds histogram\n\
                        x_seconds_bucket{le=\"0.0005\"} 3\nx_seconds_bucket{le=\"2\"} 4\n\
                        x_seconds_bucket{le=\"+Inf\"} 6\nx_seconds_sum 7\nx_seconds_count 6\n";
        assert_eq!(out.text, expected);
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::default();
        out.sample("x", &[("a", "q\"b\\n\n")], 1);
        assert_eq!(out.text, "x{a=\"q\\\"b\\\\n\\n\"} 1\n");
    }
}
