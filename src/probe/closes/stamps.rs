//! Whole-second stamps, without sockets: a server that stamps an idle
//! connection with its clock's whole second as read at its last pass (up
//! to a second old, as lighttpd does) and compares the stamps in a pass
//! once a second. It closes some connections below its setting `N` and
//! keeps others past `N + 1` s, so no one idle threshold explains its
//! closes; it surely keeps an idle connection only `N − 1` s.
//!
//! A server that stamps with a float clock and compares exactly (waitress,
//! `time.time()`) closes every connection at or past its timeout, however
//! far apart its passes come: its closes may spread over two periods (its
//! loop wakes a second after its last event, so a pass can come nearly two
//! seconds after the one before) and still fit one threshold. The closes
//! tell the two apart, not their spread alone.

use super::passes::{Pass, grid_tolerance, passes_by_round};
use super::{CloseSample, Pattern};

/// How late, ms, a server that passes once a second may run its pass
/// (its loop's own work, a coarse clock's tick).
const PASS_LATE_MS: f64 = 20.0;

/// The whole seconds, ms, a server that compares whole-second stamps in a
/// pass once a second surely keeps an idle connection (lighttpd: its
/// stamp is the clock read at its last pass, which may be a second old,
/// and it closes at the first pass with more than `N` seconds between the
/// stamps; so it keeps more than `N − 1` s and at most `N + 2` s). The
/// longest close seen bounds `N` from below: `N > longest − 2 s`, so
/// `N − 1 ≥ ⌊longest − 2 s⌋` in whole seconds. The closes seen do not
/// give `N` from above closer than a second: the earliest is never taken
/// from the lowest alone.
pub fn stamped_keep_ms(samples: &[CloseSample]) -> f64 {
    let longest = samples
        .iter()
        .map(CloseSample::idle_lo_ms)
        .fold(0.0, f64::max);
    (((longest - 2000.0 - PASS_LATE_MS) / 1000.0).floor() * 1000.0).max(0.0)
}

/// How far, ms, idle times may spread beyond a pass period before they
/// may be taken for stamps coarser than the idle time.
const STAMPS_MARGIN_MS: f64 = 100.0;

/// How far, ms, the closes may stray from one idle threshold before they
/// are taken for stamps coarser than the idle time. A float-stamp server
/// stamps a connection when its worker has finished the request, a little
/// after the response left: waitress, probed three times, had kept every
/// connection it left open at a pass idle 67 ms or more less than its
/// lowest close. lighttpd with its name hidden, probed five times, strayed 282
/// to 571 ms. Taking stamps for a threshold is the unsafe mistake (the
/// advice would stand above closes lighttpd can make), so the slack sits
/// nearer the threshold's side.
const ONE_THRESHOLD_SLACK_MS: f64 = 100.0;

/// Passes once a second whose closes no one idle threshold explains: they
/// spread over more than a period of idle time, and a connection was
/// closed sooner after its response, by more than
/// [`ONE_THRESHOLD_SLACK_MS`], than another had been idle at a pass it
/// outlived. So the server compares something coarser than the idle
/// time, as lighttpd's whole-second stamps a pass old. (Not every such
/// server shows it: fresh stamps close as an exact threshold does.)
pub(super) fn stamps_seen(samples: &[CloseSample], pattern: &Pattern, varies: f64) -> bool {
    let once_a_second = matches!(*pattern, Pattern::Passes { period_ms, .. }
        if (period_ms - 1000.0).abs() <= grid_tolerance(1000.0)
            && varies > period_ms + STAMPS_MARGIN_MS);
    once_a_second && beyond_one_threshold_ms(samples) > ONE_THRESHOLD_SLACK_MS
}

/// How much longer, ms, a connection had surely been idle at a pass it
/// surely outlived than another connection may have been when it closed:
/// above 0, no one idle threshold explains the closes (each connection
/// closes at the first pass at or past it, and none before).
fn beyond_one_threshold_ms(samples: &[CloseSample]) -> f64 {
    // The longest each close may have come after its response.
    let closed_by = samples
        .iter()
        .map(|s| s.idle_ms() + s.response_window_ms)
        .fold(f64::INFINITY, f64::min);
    let outlived = passes_by_round(samples)
        .iter()
        .flat_map(|(own, passes)| own.iter().map(|s| outlived_ms(s, passes)))
        .fold(f64::NEG_INFINITY, f64::max);
    outlived - closed_by
}

/// The longest `sample`'s connection had surely been idle at a pass that
/// surely came before its close: one before its own, whose first close
/// was seen before the earliest moment this one can have closed.
fn outlived_ms(sample: &CloseSample, passes: &[Pass]) -> f64 {
    let own = passes
        .iter()
        .rposition(|pass| pass.at_ms <= sample.closed_ms)
        .unwrap_or(0);
    passes[..own]
        .iter()
        .filter(|pass| pass.at_ms <= sample.closed_lo_ms)
        .map(|pass| pass.lo_ms - sample.idle_from_ms)
        .fold(f64::NEG_INFINITY, f64::max)
}
