//! The advice: the idle timeout that is safe for a client or proxy pool in
//! front of the server (its real timeout minus the race margin), in one
//! paragraph, and the warning when the advertised timeout is longer than
//! the real one.
//!
//! The margin: the server's timer starts when it sends a response, which
//! reaches the client one way later; its FIN comes back the same way, so
//! the probe measures the server's true timeout, and a reuse must leave
//! by then minus a round trip to arrive in time. To that go the spread of
//! the server's closes (median − min), how far before the deadline the
//! sweep saw failures, and a guard for the client's own timer and event
//! loop: 2% of the timeout, at least 20 ms.

use super::idle::Idle;
use super::sweep::SweepPoint;
use crate::measure::stats::Spread;
use crate::measure::timed_conn::Closed;

/// The guard for the client's timers: this share of the timeout...
const GUARD_SHARE: f64 = 0.02;
/// ...and at least this many ms.
const GUARD_MIN_MS: f64 = 20.0;

/// The safe pool timeout and the words around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// ms; `Some(0)`: keep no idle connections; `None`: not limited by this server.
    pub safe_pool_idle_timeout_ms: Option<u64>,
    pub paragraph: String,
    /// The advertised timeout is longer than the real one.
    pub warning: Option<String>,
}

/// Advice from what the probe measured.
pub fn advise(
    idle: &Idle,
    spread: Option<Spread>,
    sweep: Option<&[SweepPoint]>,
    max_wait_text: &str,
) -> Advice {
    let advertised_ms = idle
        .promise
        .keep_alive_timeout
        .map(|s| s.saturating_mul(1000));
    if !idle.promise.persistent() {
        return Advice {
            safe_pool_idle_timeout_ms: Some(0),
            paragraph: "The server closes the connection after every response (it does not keep \
                connections alive): a pool gains nothing by keeping idle connections to it; \
                open a new one per request."
                .to_owned(),
            warning: None,
        };
    }
    let Some(spread) = spread else {
        return Advice {
            safe_pool_idle_timeout_ms: None,
            paragraph: format!(
                "The server kept idle connections more than {max_wait_text}: its idle timeout \
                 does not limit a pool in front of it (use the pool's own, and a longer \
                 --max-wait to measure the server's)."
            ),
            warning: None,
        };
    };
    let round_trip = idle.slowest_response_ms;
    let jitter = spread.median - spread.min;
    let swept = sweep.map_or(0.0, race_before_deadline);
    let guard = (spread.min * GUARD_SHARE).max(GUARD_MIN_MS);
    let margin = round_trip + jitter + swept + guard;
    let safe = round_down((spread.min - margin).max(0.0));
    let close_words = match idle.close_style() {
        Some(Closed::Rst) => {
            "It closes with a reset: a request that loses the race fails with ECONNRESET."
        }
        _ => {
            "It closes with a FIN: a request that loses the race meets an EOF (\"socket hang up\", \
             \"Server disconnected without sending a response\", a 502 from a proxy)."
        }
    };
    let swept_words = match sweep {
        Some(_) => format!(", failures the sweep saw {swept:.0} ms before the deadline"),
        None => String::new(),
    };
    let mut paragraph = format!(
        "A client or proxy pool in front of this server should close idle connections after at \
         most {safe} ms ({}). The server really closes them after {:.0} ms (the shortest of {} \
         measured); the margin of {margin:.0} ms covers the slowest round trip ({round_trip:.1} \
         ms), the spread of its closes ({jitter:.1} ms){swept_words} and {guard:.0} ms for the \
         client's own timers. {close_words}",
        seconds(safe),
        spread.min,
        idle.timeouts_ms.len(),
    );
    let mut warning = None;
    match advertised_ms {
        Some(advertised) if advertised as f64 > spread.min => {
            warning = Some(format!(
                "the server advertises Keep-Alive: timeout={} but closes idle connections after \
                 {:.0} ms: clients that trust the header will race",
                advertised / 1000,
                spread.min
            ));
        }
        Some(advertised) if advertised > safe => paragraph.push_str(&format!(
            " Its Keep-Alive: timeout={} leaves less than that margin: a client that waits the \
             whole advertised time may still race.",
            advertised / 1000
        )),
        Some(advertised) => paragraph.push_str(&format!(
            " Its Keep-Alive: timeout={} is safe to trust.",
            advertised / 1000
        )),
        None => paragraph.push_str(" It advertises no Keep-Alive timeout: configure the pool's."),
    }
    Advice {
        safe_pool_idle_timeout_ms: Some(safe),
        paragraph,
        warning,
    }
}

/// How far before the deadline (ms, ≥ 0) the first failed try was sent.
fn race_before_deadline(points: &[SweepPoint]) -> f64 {
    points
        .iter()
        .filter(|p| p.failed() > 0)
        .map(|p| -p.delta_ms)
        .max()
        .map_or(0.0, |ms| ms.max(0) as f64)
}

/// Rounds down to two significant digits (2934 → 2900, 456 → 450).
fn round_down(ms: f64) -> u64 {
    let ms = ms.floor() as u64;
    if ms < 100 {
        return ms;
    }
    let step = 10u64.pow(ms.ilog10() - 1);
    ms / step * step
}

fn seconds(ms: u64) -> String {
    format!("{} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::response::ResponseHead;

    fn idle(advertised: Option<u64>, timeouts: &[f64]) -> Idle {
        Idle {
            promise: ResponseHead {
                minor_version: 1,
                status: 200,
                keep_alive_timeout: advertised,
                ..ResponseHead::default()
            },
            connections: timeouts.len(),
            timeouts_ms: timeouts.to_vec(),
            fins: timeouts.len(),
            resets: 0,
            still_open: 0,
            slowest_response_ms: 1.0,
            kernel_stamps: true,
            stray_bytes: 0,
        }
    }

    #[test]
    fn safe_timeout_is_the_real_one_minus_the_margin() {
        let idle = idle(Some(2), &[3000.0, 3002.0, 3004.0]);
        let advice = advise(&idle, Spread::of(&idle.timeouts_ms), None, "5m");
        // 3000 - (1 + 2 + 60) = 2937, rounded down.
        assert_eq!(advice.safe_pool_idle_timeout_ms, Some(2900));
        assert_eq!(advice.warning, None);
        assert!(advice.paragraph.contains("2900 ms"), "{}", advice.paragraph);
    }

    #[test]
    fn an_advertised_timeout_longer_than_the_real_one_is_a_warning() {
        let idle = idle(Some(5), &[2000.0, 2001.0]);
        let advice = advise(&idle, Spread::of(&idle.timeouts_ms), None, "5m");
        let warning = advice.warning.expect("a warning");
        assert!(warning.contains("timeout=5"), "{warning}");
    }

    #[test]
    fn sweep_failures_before_the_deadline_widen_the_margin() {
        let idle = idle(None, &[1000.0]);
        let points = [
            SweepPoint {
                delta_ms: -50,
                answered: 3,
                eof: 0,
                reset: 0,
            },
            SweepPoint {
                delta_ms: -20,
                answered: 2,
                eof: 1,
                reset: 0,
            },
            SweepPoint {
                delta_ms: 5,
                answered: 0,
                eof: 3,
                reset: 0,
            },
        ];
        let advice = advise(&idle, Spread::of(&idle.timeouts_ms), Some(&points), "5m");
        // 1000 - (1 + 0 + 20 + 20) = 959.
        assert_eq!(advice.safe_pool_idle_timeout_ms, Some(950));
    }

    #[test]
    fn round_down_keeps_two_digits() {
        assert_eq!(round_down(2934.9), 2900);
        assert_eq!(round_down(456.0), 450);
        assert_eq!(round_down(63_700.0), 63_000);
        assert_eq!(round_down(42.5), 42);
    }
}
