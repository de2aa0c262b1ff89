//! Close samples of model servers, for the tests here and in
//! [`super::super::advice`].

use super::CloseSample;

/// Connections of `round` going idle at `starts` and closed at
/// `close(start)`, seen 0.3 ms after each close with a 3 ms window.
pub fn closed(round: u32, starts: &[f64], close: impl Fn(f64) -> f64) -> Vec<CloseSample> {
    starts
        .iter()
        .map(|&s| CloseSample {
            round,
            idle_from_ms: s,
            closed_ms: close(s) + 0.3,
            closed_lo_ms: close(s) - 2.7,
            response_window_ms: 0.0,
        })
        .collect()
}

/// A server with timeout `t` closing in passes every `p` ms at
/// `phase + k p`.
pub fn periodic(round: u32, t: f64, p: f64, phase: f64, starts: &[f64]) -> Vec<CloseSample> {
    closed(round, starts, |s| phase + ((s + t - phase) / p).ceil() * p)
}

/// lighttpd at `n` s: a pass each second, `phase` ms past its clock's
/// whole second, closing what has more than `n` whole seconds between
/// its stamps.
pub fn stamped(round: u32, n: f64, phase: f64, starts: &[f64]) -> Vec<CloseSample> {
    closed(round, starts, |s| {
        ((s / 1000.0).floor() + n + 1.0) * 1000.0 + phase
    })
}

/// lighttpd 1.4 at `n` s, as its source has it: a connection's stamp
/// is the whole second of its loop's last pass, `lag` ms before its
/// response (up to its 1 s poll: the first response on a connection is
/// made in the accept callback, before the clock is read again); it
/// closes at the first pass, `phase` ms into a second, whose whole
/// second is more than `n` past the stamp.
pub fn lighttpd(round: u32, n: f64, lag: f64, phase: f64, starts: &[f64]) -> Vec<CloseSample> {
    closed(round, starts, |s| {
        (((s - lag) / 1000.0).floor() + n + 1.0) * 1000.0 + phase
    })
}

/// waitress with `channel_timeout` `t` ms: a float stamp (`time.time()`)
/// a moment after the response left, compared exactly at the passes
/// `intervals` apart from `first` (its cleanup runs at the first wake-up
/// of its loop a cleanup interval after the last; its loop sleeps up to
/// a second, so a wake-up just before the interval ends puts the next
/// pass nearly two seconds on).
pub fn waitress(
    round: u32,
    t: f64,
    first: f64,
    intervals: &[f64],
    starts: &[f64],
) -> Vec<CloseSample> {
    let passes: Vec<f64> = std::iter::once(first)
        .chain(intervals.iter().scan(first, |at, step| {
            *at += step;
            Some(*at)
        }))
        .collect();
    closed(round, starts, |s| {
        *passes
            .iter()
            .find(|&&p| p > s + 0.5 + t)
            .expect("a pass after the timeout")
    })
}

pub fn spread_starts(from: f64, n: usize, span: f64) -> Vec<f64> {
    (0..n)
        .map(|i| from + i as f64 * span / (n - 1) as f64)
        .collect()
}
