//! The passes in a set of closes, without sockets: closes at one instant
//! grouped into a pass, the passes' period and whether they lie on a
//! grid, whether their phase held from round to round, the largest bound
//! on the timeout they give, and the gaps between the moments at which
//! the connections went idle (how far below the lowest close one may
//! come).

use super::{CloseSample, PassPhase};
use crate::measure::stats::Spread;

/// Closes this close together, ms, are one pass.
pub(super) const PASS_GAP_MS: f64 = 5.0;

/// Each round's samples and passes, rounds without a pass left out
/// (rounds follow one another, so a pass of one round closed none of
/// another's connections).
pub(super) fn passes_by_round(samples: &[CloseSample]) -> Vec<(Vec<CloseSample>, Vec<Pass>)> {
    let mut rounds: Vec<u32> = samples.iter().map(|s| s.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds
        .iter()
        .map(|&r| {
            let own: Vec<CloseSample> = samples.iter().copied().filter(|s| s.round == r).collect();
            let passes = passes(&own);
            (own, passes)
        })
        .filter(|(_, passes)| !passes.is_empty())
        .collect()
}

/// The lowest idle time at which `samples` allow a close, ms.
pub(super) fn lowest_of(samples: &[CloseSample]) -> f64 {
    samples
        .iter()
        .map(CloseSample::idle_lo_ms)
        .fold(f64::INFINITY, f64::min)
}

/// The widest gap, ms, between the phases at which `samples` went idle
/// (their start times modulo `period_ms`, on a circle).
pub(super) fn phase_gap(samples: &[CloseSample], period_ms: f64) -> f64 {
    let mut phases: Vec<f64> = samples
        .iter()
        .map(|s| s.idle_from_ms.rem_euclid(period_ms))
        .collect();
    phases.sort_by(f64::total_cmp);
    let (Some(first), Some(last)) = (phases.first(), phases.last()) else {
        return period_ms;
    };
    let around = first + period_ms - last;
    phases
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(around, f64::max)
}

/// How far a pass may stand from its place on a grid of `period_ms`.
pub(super) fn grid_tolerance(period_ms: f64) -> f64 {
    (0.02 * period_ms).max(2.0)
}

/// The widest gap, ms, between consecutive moments at which `samples`
/// went idle. Of the connections a pass closes, the one that went idle
/// last closes soonest; a pass that closes some but not all of a round's
/// connections closes one that reached the timeout less than this before
/// it. (The gap in time, not in phase modulo the period: passes drift.)
pub(super) fn start_gap(samples: &[CloseSample]) -> f64 {
    let mut starts: Vec<f64> = samples.iter().map(|s| s.idle_from_ms).collect();
    starts.sort_by(f64::total_cmp);
    starts.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max)
}

pub(super) fn spread_of(samples: &[CloseSample]) -> f64 {
    let idle: Vec<f64> = samples.iter().map(CloseSample::idle_ms).collect();
    Spread::of(&idle).map_or(0.0, |s| s.max - s.min)
}

/// Whether the first pass of every round falls on the first round's grid.
pub(super) fn pass_phase(by_round: &[(Vec<CloseSample>, Vec<Pass>)], period_ms: f64) -> PassPhase {
    let firsts: Vec<f64> = by_round.iter().map(|(_, passes)| passes[0].at_ms).collect();
    if firsts.len() < 2 {
        return PassPhase::Unchecked;
    }
    let moved = firsts[1..]
        .iter()
        .map(|at| {
            let off = (at - firsts[0]).rem_euclid(period_ms);
            off.min(period_ms - off)
        })
        .fold(0.0, f64::max);
    if moved > (0.02 * period_ms).max(PASS_GAP_MS) {
        PassPhase::Moved { by_ms: moved }
    } else {
        PassPhase::Fixed
    }
}

/// Closes at one instant: when the first was seen, the earliest it can
/// have come, and how many connections it closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pass {
    pub(super) at_ms: f64,
    pub(super) lo_ms: f64,
    pub(super) members: usize,
}

/// The samples' closes grouped into passes, in time order.
pub(super) fn passes(samples: &[CloseSample]) -> Vec<Pass> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.closed_ms.total_cmp(&b.closed_ms));
    let mut passes: Vec<Pass> = Vec::new();
    let mut last = f64::NEG_INFINITY;
    for sample in sorted {
        match passes.last_mut() {
            Some(pass) if sample.closed_ms - last <= PASS_GAP_MS => {
                pass.members += 1;
                pass.lo_ms = pass.lo_ms.min(sample.closed_lo_ms);
            }
            _ => passes.push(Pass {
                at_ms: sample.closed_ms,
                lo_ms: sample.closed_lo_ms,
                members: 1,
            }),
        }
        last = sample.closed_ms;
    }
    passes
}

/// The passes' period and whether they lie on a grid; `None` when the
/// closes do not look like passes. `varies`: the idle times' range, which
/// passes on a grid keep within one period.
pub(super) fn find_period(passes: &[Pass], varies: f64) -> Option<(f64, bool)> {
    let intervals: Vec<f64> = passes.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    let shortest = intervals.iter().copied().fold(f64::INFINITY, f64::min);
    let tolerance = grid_tolerance;
    if passes.len() >= 3 {
        let steps: Vec<f64> = intervals.iter().map(|d| (d / shortest).round()).collect();
        let total: f64 = steps.iter().sum();
        let period = (passes[passes.len() - 1].at_ms - passes[0].at_ms) / total;
        let mut k = 0.0;
        let fits = passes.iter().enumerate().all(|(i, pass)| {
            if i > 0 {
                k += steps[i - 1];
            }
            (pass.at_ms - passes[0].at_ms - k * period).abs() <= tolerance(period)
        });
        if fits && varies <= period + tolerance(period) {
            return Some((period, true));
        }
    }
    // Shared instants: most closes came with another connection's.
    let shared: usize = passes
        .iter()
        .filter(|p| p.members > 1)
        .map(|p| p.members)
        .sum();
    let total: usize = passes.iter().map(|p| p.members).sum();
    (2 * shared >= total).then_some((shortest, false))
}

/// The largest lower bound on the timeout the passes give: a connection
/// still open at a pass had been idle less than the timeout then.
pub(super) fn pass_bound(
    samples: &[CloseSample],
    passes: &[Pass],
    grid: Option<f64>,
) -> Option<f64> {
    let mut best: Option<f64> = None;
    for sample in samples {
        let own = passes
            .iter()
            .rposition(|p| p.at_ms <= sample.closed_ms)
            .unwrap_or(0);
        let mut bounds = Vec::new();
        if own > 0 {
            let before = passes[own - 1];
            if before.lo_ms > sample.idle_from_ms {
                bounds.push(before.lo_ms - sample.idle_from_ms);
            }
        }
        if let Some(period) = grid {
            let bound = sample.idle_lo_ms() - period;
            if bound > 0.0 {
                bounds.push(bound);
            }
        }
        for bound in bounds {
            best = Some(best.map_or(bound, |b: f64| b.max(bound)));
        }
    }
    best
}
