//! The figures: per-connection timings reduced to counts, lateness and
//! its percentiles, and RSS growth per idle connection.

use std::net::SocketAddr;
use std::time::Duration;

use keepalive_server::measure::stats::percentile;

use crate::cli::Args;
use crate::client::Soak;
use crate::server::IdleCheck;

pub struct Report {
    pub n: usize,
    pub addr: SocketAddr,
    pub batch: usize,
    pub expect: Duration,
    pub grace: Duration,
    pub pid: Option<u32>,
    pub command: Option<String>,
    pub open_ms: f64,
    pub responded: usize,
    pub failed: usize,
    pub closed: usize,
    pub resets: usize,
    pub early: usize,
    /// Closed before (request written + timeout): early for certain.
    pub early_vs_request: usize,
    /// Longest request-written -> response-seen span, ms: how far a response
    /// timestamp can trail its true arrival.
    pub request_to_response_max: Option<f64>,
    /// Closed before (poll wake-up that delivered the response + timeout):
    /// what a user-space stamp alone would call early.
    pub early_vs_wakeup: usize,
    /// Longest kernel-receive -> poll-wake-up delay, ms: this loop's lag.
    pub receive_lag_max: Option<f64>,
    /// Lateness is measured from kernel receive stamps (else poll wake-ups).
    pub kernel_stamps: bool,
    pub not_closed: usize,
    /// Sorted, in ms; closed connections only.
    pub lateness: Vec<f64>,
    pub rss_before: Option<u64>,
    pub rss_after: Option<u64>,
    pub rss_closed: Option<u64>,
    pub closed_before_sample: usize,
    pub errors: Vec<String>,
    pub stray_bytes: usize,
    pub close_headers: usize,
    pub idle_before: Option<IdleCheck>,
    pub idle_after: Option<IdleCheck>,
}

impl Report {
    pub fn new(
        args: &Args,
        pid: Option<u32>,
        command: Option<String>,
        rss_before: Option<u64>,
        soak: Soak,
        idle_before: Option<IdleCheck>,
        idle_after: Option<IdleCheck>,
    ) -> Report {
        let expect_ms = args.expect_timeout.as_secs_f64() * 1e3;
        let grace_ms = args.grace.as_secs_f64() * 1e3;
        let mut lateness = Vec::new();
        let mut not_closed = 0;
        let mut resets = 0;
        let mut responded = 0;
        let mut early_vs_request = 0;
        let mut early_vs_wakeup = 0;
        let mut request_to_response = Vec::new();
        let mut receive_lag = Vec::new();
        for c in &soak.clients {
            let Some(seen_at) = c.responded_at else {
                continue;
            };
            responded += 1;
            let written_at = c.written_at.unwrap_or(seen_at);
            request_to_response.push((seen_at - written_at).as_secs_f64() * 1e3);
            // The kernel's receive time when stamped; else the poll wake-up.
            let responded_at = match c.rx_at {
                Some(rx_at) if soak.kernel_stamps => {
                    receive_lag.push((seen_at - rx_at).as_secs_f64() * 1e3);
                    rx_at
                }
                _ => seen_at,
            };
            if c.closed_at
                .is_some_and(|closed_at| closed_at < seen_at + args.expect_timeout)
            {
                early_vs_wakeup += 1;
            }
            match c.closed_at {
                Some(closed_at) => {
                    // Closed before the request was even sent + timeout: early
                    // beyond any doubt about when the response arrived.
                    if closed_at < written_at + args.expect_timeout {
                        early_vs_request += 1;
                    }
                    let late = (closed_at - responded_at).as_secs_f64() * 1e3 - expect_ms;
                    if late > grace_ms {
                        not_closed += 1;
                    } else {
                        lateness.push(late);
                        resets += usize::from(c.was_reset());
                    }
                }
                None => not_closed += 1,
            }
        }
        lateness.sort_by(f64::total_cmp);
        let request_to_response_max = request_to_response.iter().copied().reduce(f64::max);
        let receive_lag_max = receive_lag.iter().copied().reduce(f64::max);
        let kernel_stamps = soak.kernel_stamps && receive_lag.len() == responded;
        let failed = soak
            .clients
            .iter()
            .filter(|c| c.responded_at.is_none())
            .count();
        Report {
            n: args.connections,
            addr: args.addr,
            batch: args.batch,
            expect: args.expect_timeout,
            grace: args.grace,
            pid,
            command,
            open_ms: soak.open_time.as_secs_f64() * 1e3,
            responded,
            failed,
            closed: lateness.len(),
            resets,
            early: lateness.iter().filter(|&&l| l < 0.0).count(),
            early_vs_request,
            early_vs_wakeup,
            request_to_response_max,
            receive_lag_max,
            kernel_stamps,
            not_closed,
            lateness,
            rss_before,
            rss_after: soak.rss_after,
            rss_closed: soak.rss_closed,
            closed_before_sample: soak.closed_before_sample,
            errors: soak.errors,
            stray_bytes: soak.stray_bytes,
            close_headers: soak.close_headers,
            idle_before,
            idle_after,
        }
    }

    /// Nearest-rank percentile of the sorted lateness, in ms.
    fn percentile(&self, p: f64) -> Option<f64> {
        percentile(&self.lateness, p)
    }

    pub fn stats(&self) -> [(&'static str, Option<f64>); 4] {
        [
            ("min", self.lateness.first().copied()),
            ("p50", self.percentile(50.0)),
            ("p99", self.percentile(99.0)),
            ("max", self.lateness.last().copied()),
        ]
    }

    pub fn rss_growth(&self) -> Option<i64> {
        Some(self.rss_after? as i64 - self.rss_before? as i64)
    }

    pub fn rss_per_conn(&self) -> Option<f64> {
        Some(self.rss_growth()? as f64 / self.responded.max(1) as f64)
    }
}
