//! The probe's findings and their two renderings: a readable text report,
//! and `--json`, one object with exactly the documented keys.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::advice::Advice;
use super::closes::{Closes, PassPhase, Pattern};
use super::failure::Failure;
use super::idle::{Idle, connections};
use super::lb_hop::LbHop;
use super::sweep::{Sweep, SweepPoint};
use super::tls::{TlsClose, TlsJson};
use crate::advice::fix::{self, Keeper};
use crate::measure::stats::Spread;
use crate::measure::timed_conn::Closed;

/// Everything a probe found.
#[derive(Debug, Clone)]
pub struct Report {
    pub url: String,
    pub method: &'static str,
    pub idle: Idle,
    /// `None` when no connection closed within `--max-wait`, or when the
    /// closes were mostly seen during the probe's own stalls (not reliable:
    /// the figures would be the probe's, not the server's).
    pub idle_timeout_ms: Option<Spread>,
    pub max_wait: Duration,
    /// Requests tried on one connection (`--max-requests`; 0: skipped).
    pub max_requests_tried: u32,
    /// Requests answered before the server closed; `None` if not reached.
    pub max_requests: Option<u32>,
    /// The fastest request on a warm connection, ms, and how many were timed.
    pub round_trip_ms: Option<f64>,
    pub round_trips: u32,
    /// `None` without `--sweep`.
    pub sweep: Option<Sweep>,
    pub advice: Advice,
    pub elapsed: Duration,
    /// The server was spoken to over TLS (an https URL).
    pub tls: bool,
    /// The other hop's judgement (`--lb-idle-timeout`, `--lb`).
    pub lb_hop: Option<LbHop>,
}

/// The `--json` document.
#[derive(Serialize)]
struct Json<'a> {
    url: &'a str,
    http_version: &'static str,
    advertised_timeout_s: Option<u64>,
    advertised_max: Option<u64>,
    idle_timeout_ms: Option<Spread>,
    close_period_ms: Option<f64>,
    close_style: Option<&'static str>,
    max_requests: Option<u32>,
    sweep: &'a [SweepPoint],
    safe_pool_idle_timeout_ms: Option<u64>,
    advice: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<TlsJson>,
    advice_basis: Basis,
    #[serde(skip_serializing_if = "Option::is_none")]
    lb_hop: Option<&'a LbHop>,
}

/// The JSON's `advice_basis`: the figures the advice was made from, so a
/// consumer can see why it is what it is.
#[derive(Serialize)]
struct Basis {
    /// The earliest idle close assumed possible, ms (`null`: not known).
    earliest_close_ms: Option<f64>,
    /// The round trip allowed for, ms (`null`: not measured, 100 assumed).
    round_trip_ms: Option<f64>,
    /// Closes in passes: their period, ms, and whether their phase held
    /// between rounds ("fixed"), moved (and by how much), or was seen in
    /// one round ("unchecked").
    pass_period_ms: Option<f64>,
    pass_phase: Option<&'static str>,
    pass_moved_ms: Option<f64>,
    /// The widest gap between the moments a round's connections went idle
    /// at (or their phases on a fixed grid), ms: how far below the lowest
    /// close the earliest may be.
    start_gap_ms: Option<f64>,
    /// The earliest was lowered by a whole period (passes whose phase
    /// decides the close).
    lowered_by_period: bool,
    /// The earliest is the whole seconds a server comparing whole-second
    /// stamps a pass old surely keeps (lighttpd's N − 1 s).
    whole_second_stamps: bool,
    /// Closes seen during a stall of the probe: measured again, and left.
    stalled_closes_redone: usize,
    stalled_closes_left: usize,
    /// The longest such stall, ms.
    worst_stall_ms: f64,
    /// The probe's own wake-ups later than it asked, and the latest, ms.
    probe_late_wakeups: usize,
    probe_worst_late_ms: f64,
    /// Most closes were seen on time: the figures are the server's.
    reliable: bool,
}

impl Report {
    /// How the server closes, as the JSON names it.
    pub fn close_style(&self) -> Option<&'static str> {
        self.idle.close_style().map(|style| match style {
            Closed::Fin => "fin",
            Closed::Rst => "rst",
        })
    }

    /// The closes, reduced, when they are the server's: `None` when none
    /// closed, or when most were seen during the probe's own stalls.
    fn server_closes(&self) -> Option<Closes> {
        self.idle.closes.filter(|closes| closes.reliable)
    }

    /// The idle times seen, ms, when they are the server's.
    fn server_idle_ms(&self) -> Option<Spread> {
        self.idle_timeout_ms
            .filter(|_| self.idle.closes.is_none_or(|closes| closes.reliable))
    }

    /// Why the run measured nothing of the server's, as the failure it
    /// exits with: most closes came during the probe's own stalls, so
    /// every figure of them would be the probe's.
    pub fn unmeasured(&self) -> Option<Failure> {
        let closes = self.idle.closes.filter(|closes| !closes.reliable)?;
        Some(Failure::Server(format!(
            "{}: nothing measured: {} of {} closes came during stalls of the probe itself (seen \
             up to {:.0} ms late), so their figures would be the probe's, not the server's",
            self.url,
            closes.stalled,
            closes.stalled + closes.on_time,
            closes.worst_stall_ms
        )))
    }

    /// The period of the server's close passes, ms, when it closes in passes.
    pub fn close_period_ms(&self) -> Option<f64> {
        match self.server_closes()?.pattern {
            Pattern::Passes { period_ms, .. } => Some(period_ms),
            _ => None,
        }
    }

    /// The advice paragraph, with the warning after it, then the safe
    /// value in common clients' and proxies' own settings.
    pub fn advice_text(&self) -> String {
        let mut text = match &self.advice.warning {
            Some(warning) => format!("{} Warning: {warning}.", self.advice.paragraph),
            None => self.advice.paragraph.clone(),
        };
        if self.advice.limit.ms().is_some() {
            let _ = write!(text, " {}", fix::fix(self.advice.limit, Keeper::Anyone));
        }
        text
    }

    pub fn json(&self) -> String {
        let promise = &self.idle.promise;
        let json = Json {
            url: &self.url,
            http_version: promise.version(),
            advertised_timeout_s: promise.keep_alive_timeout,
            advertised_max: promise.keep_alive_max,
            idle_timeout_ms: self.server_idle_ms().map(|s| Spread {
                min: hundredths(s.min),
                median: hundredths(s.median),
                max: hundredths(s.max),
            }),
            close_period_ms: self.close_period_ms().map(hundredths),
            close_style: self.close_style(),
            max_requests: self.max_requests,
            sweep: self.sweep.as_ref().map_or(&[], |s| s.points.as_slice()),
            safe_pool_idle_timeout_ms: self.advice.limit.ms(),
            advice: self.advice_text(),
            tls: self.tls.then(|| self.idle.tls_json()),
            advice_basis: self.basis(),
            lb_hop: self.lb_hop.as_ref(),
        };
        serde_json::to_string_pretty(&json).unwrap_or_default()
    }

    /// The figures behind the advice, for the JSON: those of the closes
    /// only when they are the server's; the probe's own stalls always.
    fn basis(&self) -> Basis {
        let closes = self.server_closes();
        let stalls = self.idle.closes;
        let (period, phase, moved) = match closes.map(|c| c.pattern) {
            Some(Pattern::Passes {
                period_ms, phase, ..
            }) => match phase {
                PassPhase::Unchecked => (Some(period_ms), Some("unchecked"), None),
                PassPhase::Fixed => (Some(period_ms), Some("fixed"), None),
                PassPhase::Moved { by_ms } => (Some(period_ms), Some("moved"), Some(by_ms)),
            },
            _ => (None, None, None),
        };
        Basis {
            earliest_close_ms: closes.and_then(|c| c.earliest_ms).map(hundredths),
            round_trip_ms: self.round_trip_ms.map(|ms| (ms * 1e3).round() / 1e3),
            pass_period_ms: period.map(hundredths),
            pass_phase: phase,
            pass_moved_ms: moved.map(hundredths),
            start_gap_ms: closes.and_then(|c| c.start_gap_ms).map(hundredths),
            lowered_by_period: closes.is_some_and(|c| c.lowered_by_period),
            whole_second_stamps: closes.is_some_and(|c| c.whole_seconds),
            stalled_closes_redone: self.idle.redone,
            stalled_closes_left: stalls.map_or(0, |c| c.stalled),
            worst_stall_ms: hundredths(stalls.map_or(0.0, |c| c.worst_stall_ms)),
            probe_late_wakeups: self.idle.late_wakeups,
            probe_worst_late_ms: hundredths(self.idle.worst_late_ms),
            reliable: stalls.is_none_or(|c| c.reliable),
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        self.text_promise(&mut s);
        self.text_idle(&mut s);
        self.text_passes(&mut s);
        self.text_requests(&mut s);
        self.text_sweep(&mut s);
        if let Some(hop) = &self.lb_hop {
            s.push_str(&labelled("lb hop:", &hop.advice));
        }
        self.text_advice(&mut s);
        s
    }

    /// The first lines: what was probed, and what the server promises.
    fn text_promise(&self, s: &mut String) {
        let idle = &self.idle;
        let promise = &idle.promise;
        let _ = writeln!(
            s,
            "keepalive-server probe: {} ({}, {}), {:.1} s",
            self.url,
            connections(idle.connections, "idle "),
            self.method,
            self.elapsed.as_secs_f64()
        );
        let connection = match (promise.close, promise.keep_alive) {
            (true, _) => "close",
            (false, true) => "keep-alive",
            (false, false) => "(none)",
        };
        let keep_alive = match (promise.keep_alive_timeout, promise.keep_alive_max) {
            (None, None) => "(none)".to_owned(),
            (timeout, max) => [
                timeout.map(|t| format!("timeout={t}")),
                max.map(|m| format!("max={m}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", "),
        };
        let _ = writeln!(
            s,
            "promises:  {} {}, Connection: {connection}, Keep-Alive: {keep_alive}, Server: {}",
            promise.version(),
            promise.status,
            promise.server.as_deref().unwrap_or("(none)")
        );
    }

    /// When idle connections close, over TLS how, and how they were timed.
    fn text_idle(&self, s: &mut String) {
        let idle = &self.idle;
        let promise = &idle.promise;
        let closes = format!(
            "{} of {} closed ({} by FIN, {} by reset); started over {}",
            idle.fins + idle.resets,
            idle.connections,
            idle.fins,
            idle.resets,
            humantime::format_duration(idle.stagger)
        );
        match self.server_idle_ms() {
            _ if !promise.persistent() => {
                let _ = writeln!(s, "idle:      no keep-alive: closes after every response");
            }
            None if self.unmeasured().is_some() => {
                let line = format!(
                    "not measured: the closes came during stalls of the probe itself; {closes}"
                );
                s.push_str(&labelled("idle:", &line));
            }
            Some(spread) => {
                let _ = writeln!(
                    s,
                    "idle:      closes after {:.1} ms (min {:.1}, max {:.1}); {closes}",
                    spread.median, spread.min, spread.max
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "idle:      keeps idle connections more than {}",
                    humantime::format_duration(self.max_wait)
                );
            }
        }
        if self.tls {
            let json = idle.tls_json();
            let close = match idle.tls_close() {
                Some(TlsClose::CloseNotify) => "close_notify, then FIN",
                Some(TlsClose::Fin) => "a bare FIN (no close_notify)",
                Some(TlsClose::Rst) => "a reset (no close_notify)",
                None => "(none seen)",
            };
            let _ = writeln!(
                s,
                "tls:       {}; idle close: {close} ({} of {} FIN closes said close_notify)",
                json.version.unwrap_or("(no handshake)"),
                idle.close_notifies,
                idle.fins
            );
        }
        if idle.still_open > 0 && self.idle_timeout_ms.is_some() {
            let _ = writeln!(
                s,
                "           {} still open after {}",
                idle.still_open,
                humantime::format_duration(self.max_wait)
            );
        }
        if !idle.kernel_stamps {
            let _ = writeln!(
                s,
                "           (timed from poll wake-ups: no kernel receive stamps)"
            );
        }
    }

    /// Closes in passes, and the probe's own stalls.
    fn text_passes(&self, s: &mut String) {
        let idle = &self.idle;
        let promise = &idle.promise;
        if let Some(closes) = idle.closes.filter(|_| promise.persistent()) {
            if closes.reliable {
                self.text_pattern(&closes, s);
            }
            if idle.redone > 0 || closes.stalled > 0 {
                self.text_stalls(&closes, s);
            }
        }
    }

    /// How the closes came: one line unless each connection has a timer.
    fn text_pattern(&self, closes: &Closes, s: &mut String) {
        let idle = &self.idle;
        let earliest = closes
            .earliest_ms
            .map_or("not known".to_owned(), |ms| format!("{ms:.1} ms"));
        let line = match closes.pattern {
            Pattern::Steady => None,
            Pattern::Passes {
                period_ms,
                on_grid,
                passes,
                phase,
            } => Some(format!(
                "every {period_ms:.1} ms ({passes} seen{}{}): a connection closes {:.1} to \
                 {:.1} ms after its response, by when it went idle; the earliest possible \
                 {earliest}",
                if on_grid { ", on a grid" } else { "" },
                match phase {
                    PassPhase::Unchecked => String::new(),
                    PassPhase::Fixed => ", the same phase every round".to_owned(),
                    PassPhase::Moved { by_ms } => {
                        format!(", moving {by_ms:.0} ms between rounds")
                    }
                },
                closes.spread.min,
                closes.spread.max
            )),
            Pattern::OnePass => Some(format!(
                "every close came in one pass: passes are further apart than {}; the \
                 earliest possible close is {earliest}",
                humantime::format_duration(idle.stagger)
            )),
            Pattern::Irregular => Some(format!(
                "closes vary with when the connection went idle, in no passes found; the \
                 earliest is taken as {earliest}"
            )),
        };
        if let Some(line) = line {
            s.push_str(&labelled("passes:", &line));
        }
    }

    /// The probe's own stalls, and whether they leave the run reliable.
    fn text_stalls(&self, closes: &Closes, s: &mut String) {
        let idle = &self.idle;
        let late = match idle.late_wakeups {
            0 => String::new(),
            1 => format!(
                "; the probe woke up late once, by {:.0} ms",
                idle.worst_late_ms
            ),
            n => format!(
                "; the probe woke up late {n} times, by up to {:.0} ms",
                idle.worst_late_ms
            ),
        };
        let line = format!(
            "{} closes seen during a stall of the probe were measured again; {} left \
             (up to {:.0} ms late), counted from before the stall{late}{}",
            idle.redone,
            closes.stalled,
            closes.worst_stall_ms,
            if closes.reliable {
                ""
            } else {
                ": this run is not reliable"
            }
        );
        s.push_str(&labelled("stalls:", &line));
    }

    /// The round trip and the request limit.
    fn text_requests(&self, s: &mut String) {
        let _ = match self.round_trip_ms {
            Some(ms) => writeln!(
                s,
                "rtt:       {ms:.3} ms, the fastest of {} requests on a warm connection",
                self.round_trips
            ),
            None => writeln!(
                s,
                "rtt:       not measured (no second request on a connection)"
            ),
        };
        let _ = match (self.max_requests_tried, self.max_requests) {
            (0, _) => writeln!(s, "requests:  not measured (--max-requests 0)"),
            (tried, None) => writeln!(
                s,
                "requests:  {tried} on one connection without a close (no limit up to --max-requests {tried})"
            ),
            (_, Some(1)) => writeln!(s, "requests:  closes a connection after 1 request"),
            (_, Some(n)) => writeln!(s, "requests:  closes a connection after {n} requests"),
        };
    }

    /// The race sweep's table.
    fn text_sweep(&self, s: &mut String) {
        if let Some(sweep) = &self.sweep {
            let _ = writeln!(
                s,
                "sweep:     requests sent at the earliest close ({:.1} ms) + δ on idle connections",
                sweep.deadline_ms
            );
            let _ = writeln!(
                s,
                "           {:>8} {:>9} {:>5} {:>6}",
                "δ ms", "answered", "eof", "reset"
            );
            for p in &sweep.points {
                let _ = writeln!(
                    s,
                    "           {:>8} {:>9} {:>5} {:>6}",
                    p.delta_ms, p.answered, p.eof, p.reset
                );
            }
            if sweep.widened > 0 {
                let found = if sweep.none_found {
                    "no point had every try answered (none found)"
                } else {
                    "until a point had every try answered"
                };
                let _ = writeln!(
                    s,
                    "           widened {} times below the points asked for, {found}",
                    sweep.widened
                );
            }
        }
    }

    /// Stray bytes, the advice, the warning and the pools' settings.
    fn text_advice(&self, s: &mut String) {
        let idle = &self.idle;
        if idle.stray_bytes > 0 {
            let _ = writeln!(
                s,
                "note:      {} bytes arrived after complete responses",
                idle.stray_bytes
            );
        }
        s.push_str(&labelled("advice:", &self.advice.paragraph));
        if let Some(warning) = &self.advice.warning {
            s.push_str(&labelled("warning:", warning));
        }
        // The other hop's check asks about the service, not its clients:
        // the clients' table would bury the answer.
        if let Some(safe) = self.advice.limit.ms().filter(|_| self.lb_hop.is_none()) {
            s.push_str("in a pool in front, that is:\n");
            s.push_str(&fix::table(safe));
            s.push('\n');
        }
    }
}

/// `v` to two decimals, as the JSON gives times in ms.
fn hundredths(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// `text` after `label`, wrapped at 80 columns under an indent.
fn labelled(label: &str, text: &str) -> String {
    const WIDTH: usize = 80;
    const INDENT: usize = 11;
    let mut out = format!("{label:<INDENT$}");
    let mut column = INDENT;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if column > INDENT && column + 1 + len > WIDTH {
            out.push('\n');
            out.push_str(&" ".repeat(INDENT));
            column = INDENT;
        } else if column > INDENT {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += len;
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::closes::CloseSample;

    /// A report of `samples` as the probe would make it.
    fn report(samples: &[CloseSample]) -> Report {
        let idle = Idle::of_samples(samples);
        let max_wait = Duration::from_secs(300);
        let advice = super::super::advice::advise("http://h/", &idle, None, Some(0.1), max_wait);
        Report {
            url: "http://h/".to_owned(),
            method: "GET",
            idle_timeout_ms: idle.closes.filter(|c| c.reliable).map(|c| c.spread),
            idle,
            max_wait,
            max_requests_tried: 0,
            max_requests: None,
            round_trip_ms: Some(0.1),
            round_trips: 5,
            sweep: None,
            advice,
            elapsed: Duration::from_secs(3),
            tls: false,
            lb_hop: None,
        }
    }

    /// Connections going idle 200 ms apart, closed by a server's 2 s
    /// timer, seen `late(i)` ms late with `window(i)` ms of doubt about
    /// their responses.
    fn closed_at_2s(late: impl Fn(usize) -> f64, window: f64) -> Vec<CloseSample> {
        (0..6)
            .map(|i| {
                let s = i as f64 * 200.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: s + window,
                    closed_ms: s + 2000.5 + late(i),
                    closed_lo_ms: s + 1999.5,
                    response_window_ms: window,
                }
            })
            .collect()
    }

    #[test]
    fn a_starved_probe_reports_none_of_its_own_stalls_as_the_servers() {
        // Every close seen 100-300 ms late, every response read late: the
        // idle times seen (1.7 to 2.1 s) are the probe's.
        let starved = report(&closed_at_2s(|i| 100.0 + 100.0 * (i % 3) as f64, 150.0));
        let json: serde_json::Value = serde_json::from_str(&starved.json()).unwrap();
        assert_eq!(json["idle_timeout_ms"], serde_json::Value::Null, "{json:#}");
        assert_eq!(json["close_period_ms"], serde_json::Value::Null, "{json:#}");
        let basis = &json["advice_basis"];
        for key in ["earliest_close_ms", "pass_period_ms", "start_gap_ms"] {
            assert_eq!(basis[key], serde_json::Value::Null, "{key}: {json:#}");
        }
        assert_eq!(basis["reliable"], false, "{json:#}");
        assert_eq!(basis["stalled_closes_left"], 6, "{json:#}");
        let failure = starved.unmeasured().expect("nothing measured");
        assert_eq!(failure.exit_code(), 1);
        assert!(failure.to_string().contains("6 of 6 closes"), "{failure}");
        let text = starved.text();
        assert!(text.contains("idle:      not measured"), "{text}");
        assert!(!text.contains("closes after"), "{text}");
        assert!(!text.contains("passes:"), "{text}");
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains("this run is not reliable"), "{text}");
        // The same closes seen on time are the server's.
        let on_time = report(&closed_at_2s(|_| 0.0, 0.0));
        assert!(on_time.unmeasured().is_none());
        let json: serde_json::Value = serde_json::from_str(&on_time.json()).unwrap();
        let min = json["idle_timeout_ms"]["min"].as_f64().unwrap();
        assert!((2000.0..2001.0).contains(&min), "{json:#}");
        assert!(on_time.text().contains("closes after 2000.5 ms"));
    }

    #[test]
    fn long_paragraphs_wrap_under_their_label() {
        let text = "word ".repeat(40);
        let wrapped = labelled("advice:", &text);
        assert!(wrapped.starts_with("advice:    word word"), "{wrapped}");
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
        assert!(
            wrapped
                .lines()
                .skip(1)
                .all(|l| l.starts_with("           word"))
        );
        assert_eq!(wrapped.split_whitespace().count(), 41);
    }
}
