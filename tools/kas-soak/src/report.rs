//! Output: the plain-text and JSON reports, and the per-connection CSV.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::client::Soak;
use crate::server::IdleCheck;
use crate::stats::Report;

pub fn per_connection_csv(soak: &Soak, expect: Duration) -> String {
    let ms = |t: Option<Instant>| {
        t.map_or_else(String::new, |t| {
            format!(
                "{:.3}",
                t.saturating_duration_since(soak.started).as_secs_f64() * 1e3
            )
        })
    };
    let mut out = String::from(
        "conn,request_written_ms,response_rx_ms,response_seen_ms,eof_seen_ms,reset,lateness_ms\n",
    );
    for (i, c) in soak.clients.iter().enumerate() {
        let base = c.rx_at.filter(|_| soak.kernel_stamps).or(c.responded_at);
        let late = match (base, c.closed_at) {
            (Some(from), Some(to)) => format!(
                "{:.3}",
                (to - from).as_secs_f64() * 1e3 - expect.as_secs_f64() * 1e3
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{i},{},{},{},{},{},{late}",
            ms(c.written_at),
            ms(c.rx_at),
            ms(c.responded_at),
            ms(c.closed_at),
            u8::from(c.was_reset())
        );
    }
    out
}

impl Report {
    pub fn text(&self) -> String {
        let mut s = String::new();
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "kas-soak: {} connections to {} (batches of {}), expect timeout {}, grace {}",
            self.n,
            self.addr,
            self.batch,
            humantime::format_duration(self.expect),
            humantime::format_duration(self.grace)
        );
        if let Some(cmd) = &self.command {
            let _ = writeln!(
                s,
                "server:    pid {} started as: {cmd}",
                self.pid.unwrap_or(0)
            );
        } else if let Some(pid) = self.pid {
            let _ = writeln!(s, "server:    pid {pid}");
        }
        let _ = writeln!(
            s,
            "requests:  {} answered, {} failed; all open and answered in {:.1} ms",
            self.responded, self.failed, self.open_ms
        );
        match (self.rss_before, self.rss_after) {
            (Some(before), Some(after)) => {
                let _ = writeln!(
                    s,
                    "memory:    RSS before {} B ({:.2} MiB), with {} idle {} B ({:.2} MiB): +{} B = {:.1} B per idle connection",
                    before,
                    mib(before),
                    self.responded,
                    after,
                    mib(after),
                    self.rss_growth().unwrap_or(0),
                    self.rss_per_conn().unwrap_or(0.0)
                );
                if let Some(closed) = self.rss_closed {
                    let _ = writeln!(
                        s,
                        "           RSS after all closed {closed} B ({:.2} MiB)",
                        mib(closed)
                    );
                }
                if self.closed_before_sample > 0 {
                    let _ = writeln!(
                        s,
                        "           WARNING: {} connections had already closed at the RSS sample: per-connection figure is low",
                        self.closed_before_sample
                    );
                }
            }
            _ => {
                let _ = writeln!(s, "memory:    not measured (give --pid or --server-bin)");
            }
        }
        let _ = writeln!(
            s,
            "close:     closed {}/{} (by reset {}), EARLY {}, not closed within timeout+grace {}",
            self.closed, self.responded, self.resets, self.early, self.not_closed
        );
        let _ = writeln!(
            s,
            "           response stamps: {}; client lag (kernel receive -> poll wake-up) max {} ms; \
             closed before wake-up + timeout {}; closed before request-sent + timeout {}; request->response max {} ms",
            if self.kernel_stamps {
                "kernel (SO_TIMESTAMPNS)"
            } else {
                "poll wake-up (no kernel stamps)"
            },
            ms(self.receive_lag_max),
            self.early_vs_wakeup,
            self.early_vs_request,
            ms(self.request_to_response_max)
        );
        let stats = self.stats();
        let _ = writeln!(
            s,
            "lateness:  ms from response received to EOF seen, minus the timeout: {}",
            stats
                .iter()
                .map(|(name, v)| format!("{name} {}", ms(*v)))
                .collect::<Vec<_>>()
                .join("  ")
        );
        if self.stray_bytes > 0 || self.close_headers > 0 {
            let _ = writeln!(
                s,
                "anomalies: {} stray bytes after responses, {} responses with Connection: close",
                self.stray_bytes, self.close_headers
            );
        }
        for (label, check) in [
            ("before soak", &self.idle_before),
            ("after soak", &self.idle_after),
        ] {
            if let Some(check) = check {
                let _ = writeln!(
                    s,
                    "idle {label}: {} context switches over {} with no connections ({})",
                    check.total(),
                    humantime::format_duration(check.span),
                    check
                        .threads
                        .iter()
                        .map(|t| format!(
                            "{}[{}] vol {} invol {}",
                            t.name, t.tid, t.voluntary, t.involuntary
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        for e in &self.errors {
            let _ = writeln!(s, "error:     {e}");
        }
        s
    }

    pub fn json(&self) -> String {
        let num = |v: Option<f64>| v.map_or_else(|| "null".to_string(), |v| format!("{v:.3}"));
        let int = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
        let idle = |c: &Option<IdleCheck>| {
            c.as_ref().map_or_else(
                || "null".to_string(),
                |c| {
                    let threads = c
                        .threads
                        .iter()
                        .map(|t| {
                            format!(
                                "{{\"tid\":{},\"name\":\"{}\",\"voluntary\":{},\"involuntary\":{}}}",
                                t.tid,
                                json_escape(&t.name),
                                t.voluntary,
                                t.involuntary
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    format!("{{\"seconds\":{:.3},\"total\":{},\"threads\":[{threads}]}}", c.span.as_secs_f64(), c.total())
                },
            )
        };
        let stats = self.stats();
        let lateness = stats
            .iter()
            .map(|(name, v)| format!("\"{name}\":{}", num(*v)))
            .collect::<Vec<_>>()
            .join(",");
        let errors = self
            .errors
            .iter()
            .map(|e| format!("\"{}\"", json_escape(e)))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            concat!(
                "{{\"connections\":{},\"addr\":\"{}\",\"batch\":{},\"expect_timeout_ms\":{:.3},\"grace_ms\":{:.3},",
                "\"server_pid\":{},\"server_command\":{},\"open_ms\":{:.3},\"answered\":{},\"failed\":{},",
                "\"closed\":{},\"resets\":{},\"early\":{},\"early_vs_request\":{},\"request_to_response_max_ms\":{},",
                "\"kernel_stamps\":{},\"early_vs_wakeup\":{},\"receive_lag_max_ms\":{},",
                "\"not_closed\":{},\"lateness_ms\":{{{}}},",
                "\"rss_before\":{},\"rss_idle\":{},\"rss_closed\":{},\"rss_bytes_per_idle_connection\":{},",
                "\"closed_before_rss_sample\":{},\"stray_bytes\":{},\"connection_close_headers\":{},",
                "\"idle_before\":{},\"idle_after\":{},\"errors\":[{}]}}"
            ),
            self.n,
            self.addr,
            self.batch,
            self.expect.as_secs_f64() * 1e3,
            self.grace.as_secs_f64() * 1e3,
            int(self.pid.map(u64::from)),
            self.command
                .as_ref()
                .map_or_else(|| "null".to_string(), |c| format!("\"{}\"", json_escape(c))),
            self.open_ms,
            self.responded,
            self.failed,
            self.closed,
            self.resets,
            self.early,
            self.early_vs_request,
            num(self.request_to_response_max),
            self.kernel_stamps,
            self.early_vs_wakeup,
            num(self.receive_lag_max),
            self.not_closed,
            lateness,
            int(self.rss_before),
            int(self.rss_after),
            int(self.rss_closed),
            num(self.rss_per_conn()),
            self.closed_before_sample,
            self.stray_bytes,
            self.close_headers,
            idle(&self.idle_before),
            idle(&self.idle_after),
            errors,
        )
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}
