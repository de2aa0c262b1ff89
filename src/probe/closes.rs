//! What the idle connections' closes say, without sockets: whether the
//! server closes each connection on its own timer or in periodic passes,
//! the passes' period and whether their phase holds, which samples the
//! probe took while it was stalled, and the earliest idle time at which
//! the server may close a connection.
//!
//! ```text
//!  went idle   s1      s2      s3            (starts spread over ≥ 1 s)
//!  pass        |───────P───────|───────P───────|
//!  closes              c1=c2           c3     idle = c − s: T … T + P by phase
//! ```
//!
//! Each sample is one connection on the probe's timeline (ms), from one
//! round of connections: when its response arrived (`idle_from_ms`, a
//! kernel receive stamp), when the loop saw the close (`closed_ms`), and
//! the latest moment the loop is sure the close had not yet arrived
//! (`closed_lo_ms`: the previous poll, or older when that poll returned a
//! full buffer of events). A window wider than [`STALL_MS`] means the probe
//! was not running when the close came: the sample was taken during a
//! stall.
//!
//! - **Steady**: the idle times agree within 5 ms (0.5%): a timer per
//!   connection. The earliest close is the lowest `closed_lo − idle_from`.
//! - **Passes**: closes fall at shared instants, on a grid of period P or
//!   with most instants closing several connections that went idle at
//!   different times. Within a round whose closes came in two passes or
//!   more, the last connection a pass closed went idle less than the gap
//!   to the next start before the first one it left open, so it reached
//!   the timeout less than that gap before the pass: no close comes
//!   earlier than the round's lowest less the widest gap between its
//!   starts (in time, not in phase: passes drift, as waitress's do). On a
//!   fixed grid the phases of all rounds together, allowing the grid's
//!   tolerance either side, may give a closer bound. The rounds are
//!   judged alone and the lowest taken: a connection still open at a pass
//!   is not taken to bound the timeout (waitress kept one open through a
//!   pass 270 ms past its timeout, and closed another 5.0 s after its
//!   response).
//!   When the passes' phase moved between rounds and the rounds' lowest
//!   closes disagree beyond their gaps, where a pass falls decides the
//!   close: no round bounds the phases not seen, and the bound from the
//!   passes less a whole period is taken, cautiously.
//! - **Whole-second stamps** (lighttpd, known by name): the server stamps
//!   a connection with its clock's whole second as read at its last pass
//!   (up to a second old) and closes it at the first pass, once a second,
//!   with more than `N` seconds between the stamps: it keeps an idle
//!   connection more than `N − 1` s and at most `N + 2` s, whatever the
//!   lowest seen. The longest close bounds `N` from below; the earliest is
//!   the whole seconds that gives. A server not known by name is taken so
//!   when its passes come once a second, its closes spread over more than
//!   a period, and no one idle threshold explains them: one connection
//!   closed sooner after its response than another had been idle at a
//!   pass it outlived (see `stamps`); then never above what its passes
//!   gave. Spread alone is no sign: waitress compares float stamps
//!   exactly, and its passes, a second apart or nearly two as its loop
//!   wakes, spread its closes over 2.0 to 3.8 s of a 2 s timeout, none
//!   below it.
//! - **Too coarse**: when the gap is more than half the lowest close, the
//!   passes are too far apart for the connections of this run to pin the
//!   close down: the earliest is not known (the probe says how to measure
//!   it: more connections over a period).
//! - **One pass**: every close at one instant although the connections went
//!   idle at different times: the passes are further apart than the starts
//!   were spread, and how early one can close is not known.
//! - **Irregular**: the idle times vary, not in passes found: the earliest
//!   is taken a whole spread below the lowest seen.
//!
//! When most samples were taken during stalls of the probe (more stalled
//! than on time, after measuring them again), the closes are the probe's,
//! not the server's: the run is not reliable, and says so.
//!
//! The pieces: `passes` (closes grouped into passes, their period, phase
//! and gaps) and `stamps` (whole-second stamps told from exact
//! thresholds); this module judges the pattern and the earliest close.

mod passes;
mod stamps;

use crate::measure::stats::Spread;
use passes::{
    PASS_GAP_MS, find_period, grid_tolerance, lowest_of, pass_bound, pass_phase, passes_by_round,
    phase_gap, spread_of, start_gap,
};
pub use stamps::stamped_keep_ms;
use stamps::stamps_seen;

/// A close window wider than this, ms, was a stall of the probe.
pub const STALL_MS: f64 = 10.0;
/// Idle times within this many ms (or [`STEADY_SHARE`] of them) are one
/// timeout.
const STEADY_MS: f64 = 5.0;
const STEADY_SHARE: f64 = 0.005;

/// One connection's close on the probe's timeline, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloseSample {
    /// The round of connections it was one of.
    pub round: u32,
    /// The response arrived (the connection went idle).
    pub idle_from_ms: f64,
    /// The probe saw the close.
    pub closed_ms: f64,
    /// The close had not arrived yet.
    pub closed_lo_ms: f64,
    /// How much earlier than `idle_from_ms` the response may have
    /// arrived: 0 when the kernel stamped it, else the wake-up's own
    /// window (a late wake-up makes the idle time look shorter).
    pub response_window_ms: f64,
}

impl CloseSample {
    /// Response to close, as seen.
    pub fn idle_ms(&self) -> f64 {
        self.closed_ms - self.idle_from_ms
    }

    /// The earliest the close can have come, response to close.
    pub fn idle_lo_ms(&self) -> f64 {
        self.closed_lo_ms - self.idle_from_ms
    }

    /// How far the idle time seen may be from the true one: how late the
    /// probe may have seen the close, and its response.
    pub fn window_ms(&self) -> f64 {
        self.closed_ms - self.closed_lo_ms + self.response_window_ms
    }

    /// The probe was stalled when the close arrived.
    pub fn stalled(&self) -> bool {
        self.window_ms() > STALL_MS
    }
}

/// Whether the passes keep their phase from round to round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PassPhase {
    /// Seen in one round only.
    Unchecked,
    /// The same in every round (a fixed timer).
    Fixed,
    /// Moved this many ms between rounds (passes that follow the load).
    Moved { by_ms: f64 },
}

/// How the closes are made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// A timer per connection: one idle time.
    Steady,
    /// Periodic passes: `period_ms` apart (the grid's step when a round's
    /// passes lie on one, else the shortest interval seen between two).
    Passes {
        period_ms: f64,
        on_grid: bool,
        passes: usize,
        phase: PassPhase,
    },
    /// Every close in one pass: passes further apart than the starts.
    OnePass,
    /// Varying idle times, no passes found.
    Irregular,
}

/// The closes, reduced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Closes {
    /// Idle times seen, ms (samples taken while the probe ran on time;
    /// all of them when none did).
    pub spread: Spread,
    pub pattern: Pattern,
    /// The lowest idle time at which the server may close a connection,
    /// ms; `None` when not known (one pass).
    pub earliest_ms: Option<f64>,
    /// The widest gap between the moments sampled (starts in a round, or
    /// phases on a fixed grid), ms: how much below the lowest a close may come.
    pub start_gap_ms: Option<f64>,
    /// The earliest was lowered by a whole period: the passes moved and
    /// the close depends on where one falls.
    pub lowered_by_period: bool,
    /// The earliest is the whole seconds the server surely keeps, from
    /// whole-second stamps that may be a pass old ([`stamped_keep_ms`]):
    /// known by the server's name, or by closes spread over more than a
    /// pass once a second.
    pub whole_seconds: bool,
    /// Samples taken on time and during a stall.
    pub on_time: usize,
    pub stalled: usize,
    /// The widest window of a stalled sample, ms.
    pub worst_stall_ms: f64,
    /// Most samples were taken on time: the figures are the server's, not
    /// the probe's own stalls.
    pub reliable: bool,
}

/// Reduces `samples` (any order); `None` when there are none.
pub fn analyse(samples: &[CloseSample]) -> Option<Closes> {
    analyse_with(samples, false)
}

/// [`analyse`] for a server that may compare whole-second stamps a pass
/// old (known so by its name: lighttpd), whose close depends on where its
/// passes fall, not on the idle time: the earliest is the whole seconds it
/// surely keeps ([`stamped_keep_ms`]), never more than the lowest seen.
pub fn analyse_with(samples: &[CloseSample], whole_seconds: bool) -> Option<Closes> {
    let on_time: Vec<CloseSample> = samples.iter().copied().filter(|s| !s.stalled()).collect();
    let stalled = samples.len() - on_time.len();
    let worst_stall_ms = samples
        .iter()
        .filter(|s| s.stalled())
        .map(CloseSample::window_ms)
        .fold(0.0, f64::max);
    let used = if on_time.is_empty() {
        samples
    } else {
        &on_time
    };
    let idle: Vec<f64> = used.iter().map(CloseSample::idle_ms).collect();
    let spread = Spread::of(&idle)?;
    // Every sample's lower bound counts: a stalled one only lowers it.
    let lowest = samples
        .iter()
        .map(CloseSample::idle_lo_ms)
        .fold(f64::INFINITY, f64::min)
        .max(0.0);
    let varies = spread.max - spread.min;
    let (pattern, mut earliest) = if varies <= STEADY_MS.max(STEADY_SHARE * spread.min) {
        (Pattern::Steady, Earliest::known(lowest))
    } else {
        passes_pattern(used, varies, lowest)
    };
    let stamps = stamps_seen(used, &pattern, varies);
    if whole_seconds || stamps {
        let keeps = stamped_keep_ms(used).min(lowest);
        // Seen in the closes alone: never above what the passes gave.
        let keeps = match (whole_seconds, earliest.ms) {
            (false, Some(ms)) => keeps.min(ms),
            _ => keeps,
        };
        earliest = Earliest {
            ms: Some(keeps),
            ..earliest
        };
    }
    let whole_seconds = whole_seconds || stamps;
    Some(Closes {
        spread,
        pattern,
        earliest_ms: earliest.ms,
        start_gap_ms: earliest.start_gap_ms,
        lowered_by_period: earliest.lowered_by_period && !whole_seconds,
        whole_seconds,
        on_time: on_time.len(),
        stalled,
        worst_stall_ms,
        reliable: on_time.len() >= 2.min(samples.len()) && stalled <= on_time.len(),
    })
}

/// The earliest close a pattern allows, and how it was found.
struct Earliest {
    ms: Option<f64>,
    start_gap_ms: Option<f64>,
    lowered_by_period: bool,
}

impl Earliest {
    fn known(ms: f64) -> Earliest {
        Earliest {
            ms: Some(ms.max(0.0)),
            start_gap_ms: None,
            lowered_by_period: false,
        }
    }
}

/// The pattern of closes that vary, and the earliest close it allows.
fn passes_pattern(samples: &[CloseSample], varies: f64, lowest: f64) -> (Pattern, Earliest) {
    let by_round = passes_by_round(samples);
    let most = by_round.iter().map(|(_, p)| p.len()).max().unwrap_or(0);
    if most < 2 {
        let unknown = Earliest {
            ms: None,
            ..Earliest::known(0.0)
        };
        return (Pattern::OnePass, unknown);
    }
    // The period from the round with the most passes.
    let irregular = (Pattern::Irregular, Earliest::known(lowest - varies));
    let Some((own, passes)) = by_round.iter().find(|(_, p)| p.len() == most) else {
        return irregular;
    };
    let Some((period_ms, on_grid)) = find_period(passes, spread_of(own)) else {
        return irregular;
    };
    let grid = on_grid.then_some(period_ms);
    let bound = by_round
        .iter()
        .filter_map(|(own, passes)| pass_bound(own, passes, grid))
        .reduce(f64::max);
    let phase = pass_phase(&by_round, period_ms);
    // Each round alone when the phase moved; all together when it held.
    // (A round of a few connections, measuring stalled closes again,
    // samples too few phases to judge alone; its closes still count in
    // `lowest`.)
    // Rounds whose closes came in two passes or more, of enough
    // connections: each judged alone, as passes drift between rounds.
    let rounds: Vec<(f64, f64)> = by_round
        .iter()
        .filter(|(own, passes)| own.len() >= MIN_ROUND && passes.len() >= 2)
        .map(|(own, _)| (lowest_of(own), start_gap(own)))
        .collect();
    let gap = match rounds.is_empty() {
        true => f64::INFINITY,
        false => rounds.iter().map(|&(_, gap)| gap).fold(0.0, f64::max),
    };
    // Each round's lowest less its gap is below the timeout; the lowest
    // of them is taken (a round's own bound can miss a close that depends
    // on where a pass falls).
    let bounds = rounds.iter().map(|&(lowest, gap)| lowest - gap);
    let by_idle = by_idle_time(&rounds);
    let from_starts = bounds.fold(f64::INFINITY, f64::min);
    let from_starts = if rounds.is_empty() {
        f64::NEG_INFINITY
    } else {
        from_starts
    };
    // Passes on a fixed grid: the phases of every round together, each
    // pass within the grid's tolerance of its place (either side).
    let (from_phases, gap) = match phase {
        PassPhase::Fixed if on_grid => {
            let grid_gap = phase_gap(samples, period_ms) + 2.0 * grid_tolerance(period_ms);
            let from_grid = lowest_of(samples) - grid_gap;
            (from_starts.max(from_grid), gap.min(grid_gap))
        }
        _ => (from_starts, gap),
    };
    let moved = matches!(phase, PassPhase::Moved { .. });
    // The close depends on the idle time alone (one phase throughout, or
    // rounds that agree): the starts and phases sampled bound it. (Not the
    // passes a connection outlived: waitress with a 30 s pass kept one
    // open through a pass 270 ms past its timeout and closed another
    // 5.0 s after its response.)
    let (earliest, lowered_by_period) = match bound {
        Some(bound) if moved && !by_idle => {
            ((bound.min(from_starts) - period_ms).min(lowest), true)
        }
        _ => (from_phases.min(lowest), false),
    };
    let pattern = Pattern::Passes {
        period_ms,
        on_grid,
        passes: by_round.iter().map(|(_, p)| p.len()).sum(),
        phase,
    };
    let known = gap <= COARSE_SHARE * lowest;
    let earliest = Earliest {
        ms: known.then_some(earliest.max(0.0)),
        start_gap_ms: gap.is_finite().then_some(gap),
        lowered_by_period,
    };
    (pattern, earliest)
}

/// Whether rounds whose passes moved closed at the same lowest idle time
/// (each round's `(lowest, phase gap)`), within what their phase gaps
/// allow: then the close depends on the idle time alone, not on where a
/// pass falls, and each round's lowest less its gap bounds it.
fn by_idle_time(rounds: &[(f64, f64)]) -> bool {
    let lows = rounds.iter().map(|&(lowest, _)| lowest);
    let (least, most) = lows.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), l| {
        (a.min(l), b.max(l))
    });
    let gap = rounds.iter().map(|&(_, gap)| gap).fold(0.0, f64::max);
    most - least <= gap + PASS_GAP_MS
}

/// Samples a round needs to be judged by its own phases.
const MIN_ROUND: usize = 3;

/// A phase gap wider than this share of the lowest close leaves the
/// earliest close unknown.
const COARSE_SHARE: f64 = 0.5;

#[cfg(test)]
pub mod samples;

#[cfg(test)]
mod tests {
    use super::samples::*;
    use super::*;

    #[test]
    fn a_timer_per_connection_is_steady_and_its_earliest_is_the_lowest_bound() {
        let samples: Vec<CloseSample> = spread_starts(100.0, 8, 1000.0)
            .iter()
            .enumerate()
            .map(|(i, &s)| CloseSample {
                round: 1,
                idle_from_ms: s,
                closed_ms: s + 2000.2 + i as f64 * 0.1,
                closed_lo_ms: s + 1998.0,
                response_window_ms: 0.0,
            })
            .collect();
        let closes = analyse(&samples).unwrap();
        assert_eq!(closes.pattern, Pattern::Steady);
        assert!(
            (closes.earliest_ms.unwrap() - 1998.0).abs() < 1e-6,
            "{closes:?}"
        );
        assert!((closes.spread.min - 2000.2).abs() < 1e-6);
    }

    #[test]
    fn passes_every_250_ms_are_found_and_bound_the_timeout_from_below() {
        for phase in [0.0, 37.0, 111.0, 249.0] {
            let mut samples = periodic(1, 400.0, 250.0, phase, &spread_starts(100.0, 8, 1000.0));
            samples.extend(periodic(
                2,
                400.0,
                250.0,
                phase,
                &spread_starts(2170.0, 8, 1000.0),
            ));
            let closes = analyse(&samples).unwrap();
            let Pattern::Passes {
                period_ms,
                phase: pass_phase,
                ..
            } = closes.pattern
            else {
                panic!("phase {phase}: {closes:?}");
            };
            assert!((period_ms - 250.0).abs() < 3.0, "phase {phase}: {closes:?}");
            assert_eq!(pass_phase, PassPhase::Fixed, "phase {phase}");
            // Below the timeout by at most the phases' gap (8 starts a
            // round, two rounds: ~36 ms) and the grid's tolerance each way.
            let earliest = closes.earliest_ms.unwrap();
            assert!(
                earliest <= 400.0 && earliest > 340.0,
                "phase {phase}: {closes:?}"
            );
            assert!(closes.spread.max > 600.0, "{closes:?}");
        }
    }

    #[test]
    fn two_passes_a_second_apart_bound_the_timeout() {
        // Exact idle times checked once a second: 8 connections over 1 s
        // close in two passes.
        for phase in [10.0, 420.0, 990.0] {
            let samples = periodic(1, 2000.0, 1000.0, phase, &spread_starts(100.0, 8, 1000.0));
            let closes = analyse(&samples).unwrap();
            assert!(
                matches!(closes.pattern, Pattern::Passes { period_ms, phase: PassPhase::Unchecked, .. } if (period_ms - 1000.0).abs() < 5.0),
                "phase {phase}: {closes:?}"
            );
            let earliest = closes.earliest_ms.unwrap();
            assert!(
                earliest <= 2000.0 && earliest > 1850.0,
                "phase {phase}: {closes:?}"
            );
        }
    }

    #[test]
    fn passes_that_move_between_rounds_lower_the_bound_by_a_period() {
        // Fresh whole-second stamps at 2 s, passes 146 ms past the second
        // in one round and 346 ms in the next: one round alone bounds at
        // 2146 ms, but a connection can close from 2000 ms on. (Within a
        // period of idle time: not taken for stamps by the closes alone.)
        let mut samples = stamped(1, 2.0, 146.0, &spread_starts(100.0, 8, 1000.0));
        let alone = analyse(&samples).unwrap();
        assert!(alone.earliest_ms.unwrap() > 2000.0, "{alone:?}");
        samples.extend(stamped(2, 2.0, 346.0, &spread_starts(4250.0, 8, 1000.0)));
        let closes = analyse(&samples).unwrap();
        let Pattern::Passes {
            period_ms, phase, ..
        } = closes.pattern
        else {
            panic!("{closes:?}");
        };
        assert!((period_ms - 1000.0).abs() < 5.0, "{closes:?}");
        assert!(
            matches!(phase, PassPhase::Moved { by_ms } if (by_ms - 200.0).abs() < 2.0),
            "{closes:?}"
        );
        // A period below the lower of the passes' bound and the starts'
        // (real lighttpd was seen closing at 1714 ms with a 2 s setting).
        let earliest = closes.earliest_ms.unwrap();
        assert!(earliest <= 2000.0 && earliest > 1000.0, "{closes:?}");
        assert!(closes.lowered_by_period, "{closes:?}");
    }

    #[test]
    fn whole_second_stamps_a_pass_old_keep_only_n_less_one_second() {
        // Whatever the stamps' lag and the passes' phases, lighttpd keeps
        // more than n − 1 s, and no more is promised.
        for n in [2.0, 5.0] {
            for lag in [0.0, 300.0, 700.0, 990.0] {
                for (a, b) in [(5.0, 8.0), (400.0, 30.0), (900.0, 650.0)] {
                    let mut samples = lighttpd(1, n, lag, a, &spread_starts(100.0, 8, 1000.0));
                    samples.extend(lighttpd(2, n, lag, b, &spread_starts(9350.0, 8, 1000.0)));
                    let guaranteed = (n - 1.0) * 1000.0;
                    let truly = samples
                        .iter()
                        .map(CloseSample::idle_ms)
                        .fold(f64::MAX, f64::min);
                    assert!(truly > guaranteed, "the model: {truly}");
                    let closes = analyse_with(&samples, true).unwrap();
                    let earliest = closes.earliest_ms.unwrap();
                    assert!(
                        earliest <= guaranteed,
                        "n {n} lag {lag} {a}/{b}: {closes:?}"
                    );
                    // Every stamp a second old (lag 990): the closes all
                    // fall below n s and prove only n − 3.
                    assert!(earliest >= guaranteed - 2000.0, "{closes:?}");
                    // A pass later into its second than the stamp's lag
                    // (and the starts' gap) shows a close past n + 1 s.
                    if a.max(b) - lag >= 200.0 {
                        assert_eq!(earliest, guaranteed, "n {n} lag {lag} {a}/{b}");
                    }
                    assert!(closes.whole_seconds && !closes.lowered_by_period);
                }
            }
        }
    }

    #[test]
    fn whole_second_stamps_are_not_trusted_to_the_lowest_seen() {
        // Fresh stamps (no lag) close 2.1 s and later; the stamps of a
        // busier moment could close a connection at 1.1 s: the earliest
        // stays at 1 s, far below the lowest seen.
        let samples = lighttpd(1, 2.0, 0.0, 600.0, &spread_starts(100.0, 8, 1000.0));
        let closes = analyse_with(&samples, true).unwrap();
        assert!(closes.spread.min > 2000.0, "{closes:?}");
        assert_eq!(closes.earliest_ms, Some(1000.0), "{closes:?}");
        // Unknown by name, the same closes (within a period) are judged by
        // their passes.
        let unnamed = analyse(&samples).unwrap();
        assert!(!unnamed.whole_seconds && unnamed.earliest_ms != Some(1000.0));
    }

    #[test]
    fn closes_spread_over_more_than_a_pass_are_taken_for_whole_second_stamps() {
        // lighttpd not known by name, stamps of varying age: closes from
        // 1.3 to 3.5 s of a 2 s setting are no exact threshold.
        let mut samples = lighttpd(1, 2.0, 700.0, 20.0, &spread_starts(100.0, 8, 1000.0));
        samples.extend(lighttpd(
            2,
            2.0,
            0.0,
            650.0,
            &spread_starts(9350.0, 8, 1000.0),
        ));
        let closes = analyse(&samples).unwrap();
        assert!(closes.spread.max - closes.spread.min > 1100.0, "{closes:?}");
        assert!(closes.whole_seconds, "{closes:?}");
        // Not known by name: n − 1 s at most, and no more than the passes
        // gave.
        assert!(closes.earliest_ms.unwrap() <= 1000.0, "{closes:?}");
        // An exact threshold checked in passes a second apart is not.
        let exact = periodic(1, 2000.0, 1000.0, 300.0, &spread_starts(100.0, 8, 1000.0));
        assert!(!analyse(&exact).unwrap().whole_seconds);
    }

    #[test]
    fn float_stamps_checked_in_passes_up_to_two_seconds_apart_are_no_whole_seconds() {
        // waitress, channel_timeout 2 s, cleanup_interval 1 s: passes
        // about a second apart, one nearly two (its loop woke just before
        // the interval ended), the phase moved 64 ms between rounds. Its
        // closes spread over 2.0 to 3.8 s, all at or past 2 s: one exact
        // threshold, no stamps of a coarser clock.
        let one = [1000.4; 4];
        let mut samples = waitress(1, 2000.0, 210.0, &one, &spread_starts(100.0, 8, 1000.0));
        let two = [1000.4, 1064.0, 1000.4, 1843.2, 1000.4];
        samples.extend(waitress(
            2,
            2000.0,
            5212.0,
            &two,
            &spread_starts(5350.0, 8, 1000.0),
        ));
        let closes = analyse(&samples).unwrap();
        assert!(closes.spread.min >= 2000.0, "{closes:?}");
        assert!(closes.spread.max - closes.spread.min > 1500.0, "{closes:?}");
        assert!(
            matches!(closes.pattern, Pattern::Passes { period_ms, phase: PassPhase::Moved { .. }, .. }
                if (period_ms - 1000.0).abs() < 5.0),
            "{closes:?}"
        );
        assert!(!closes.whole_seconds, "{closes:?}");
        assert!(!closes.lowered_by_period, "{closes:?}");
        // No more than a start gap (8 starts over 1 s: 143 ms) below it.
        let earliest = closes.earliest_ms.unwrap();
        assert!((1850.0..=2000.0).contains(&earliest), "{closes:?}");
    }

    #[test]
    fn stamps_of_varying_age_close_below_the_setting_and_are_whole_seconds() {
        // lighttpd at 2 s, not known by name: each connection's stamp the
        // clock as read at its loop's last pass, up to a second old, so
        // some close well below 2 s while others outlive passes at which
        // they were idle longer.
        for phase in [30.0, 480.0, 910.0] {
            let starts = spread_starts(100.0, 16, 1000.0);
            let samples = closed(1, &starts, |s| {
                let lag = (s * 7.3).rem_euclid(1000.0);
                (((s - lag) / 1000.0).floor() + 3.0) * 1000.0 + phase
            });
            let closes = analyse(&samples).unwrap();
            if phase < 500.0 {
                assert!(closes.spread.min < 2000.0, "phase {phase}: {closes:?}");
            }
            assert!(closes.whole_seconds, "phase {phase}: {closes:?}");
            assert!(closes.earliest_ms.unwrap() <= 1000.0, "{closes:?}");
        }
    }

    #[test]
    fn every_close_in_one_pass_leaves_the_earliest_unknown() {
        let samples = periodic(
            1,
            2000.0,
            30_000.0,
            5000.0,
            &spread_starts(100.0, 8, 1000.0),
        );
        let closes = analyse(&samples).unwrap();
        assert_eq!(closes.pattern, Pattern::OnePass);
        assert_eq!(closes.earliest_ms, None);
    }

    #[test]
    fn stalled_samples_are_counted_apart_and_only_lower_the_earliest() {
        let mut samples: Vec<CloseSample> = (0..4)
            .map(|i| {
                let s = i as f64 * 300.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: s,
                    closed_ms: s + 1000.5,
                    closed_lo_ms: s + 998.0,
                    response_window_ms: 0.0,
                }
            })
            .collect();
        // Seen up to 205 ms late: the probe was not running.
        samples.push(CloseSample {
            round: 1,
            idle_from_ms: 50.0,
            closed_ms: 1235.0,
            closed_lo_ms: 1030.0,
            response_window_ms: 0.0,
        });
        let closes = analyse(&samples).unwrap();
        assert_eq!((closes.on_time, closes.stalled), (4, 1));
        assert_eq!(closes.pattern, Pattern::Steady);
        assert!(closes.spread.max < 1001.0, "{closes:?}");
        assert!((closes.earliest_ms.unwrap() - 980.0).abs() < 1e-6);
        assert!((closes.worst_stall_ms - 205.0).abs() < 1e-6);
    }

    #[test]
    fn irregular_closes_are_taken_a_spread_below_the_lowest() {
        let jitter = [0.0, 37.0, 12.0, 80.0, 55.0];
        let samples: Vec<CloseSample> = jitter
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let s = i as f64 * 250.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: s,
                    closed_ms: s + 1000.0 + j,
                    closed_lo_ms: s + 1000.0 + j - 1.0,
                    response_window_ms: 0.0,
                }
            })
            .collect();
        let closes = analyse(&samples).unwrap();
        assert_eq!(closes.pattern, Pattern::Irregular, "{closes:?}");
        assert!(
            (closes.earliest_ms.unwrap() - 919.0).abs() < 1e-6,
            "{closes:?}"
        );
    }

    /// gunicorn's gthread loop: an exact idle threshold checked at passes
    /// that follow the load (their phase moves between rounds).
    fn load_following(round: u32, t: f64, phase: f64, starts: &[f64]) -> Vec<CloseSample> {
        periodic(round, t, 1000.0, phase, starts)
    }

    #[test]
    fn passes_that_follow_the_load_over_an_exact_threshold_keep_close_to_it() {
        for (a, b) in [(37.0, 611.0), (415.0, 880.0), (990.0, 452.0)] {
            let mut samples = load_following(1, 2000.0, a, &spread_starts(100.0, 8, 1000.0));
            samples.extend(load_following(
                2,
                2000.0,
                b,
                &spread_starts(4290.0, 8, 1000.0),
            ));
            let closes = analyse(&samples).unwrap();
            assert!(
                matches!(
                    closes.pattern,
                    Pattern::Passes {
                        phase: PassPhase::Moved { .. },
                        ..
                    }
                ),
                "{closes:?}"
            );
            let earliest = closes.earliest_ms.unwrap();
            // Never above the threshold; no more than a phase gap below it
            // (8 starts over 1 s: 143 ms), not a whole period.
            assert!(
                (2000.0 - 150.0..=2000.0).contains(&earliest),
                "{a}/{b}: {closes:?}"
            );
            assert!(closes.start_gap_ms.unwrap() < 150.0, "{closes:?}");
        }
    }

    #[test]
    fn passes_too_far_apart_for_the_phases_sampled_leave_the_earliest_unknown() {
        // waitress with cleanup_interval 30 s (5 s idle), probed with 8
        // connections over 40 s: phases 5.7 s apart, a quarter of a pass.
        let mut samples = load_following(1, 5000.0, 0.0, &[]);
        for (round, phase) in [(1, 1200.0), (2, 16_000.0)] {
            let from = if round == 1 { 100.0 } else { 80_000.0 };
            samples.extend(closed(round, &spread_starts(from, 8, 40_000.0), |s| {
                phase + ((s + 5000.0 - phase) / 30_000.0).ceil() * 30_000.0
            }));
        }
        let closes = analyse(&samples).unwrap();
        assert!(
            matches!(closes.pattern, Pattern::Passes { .. }),
            "{closes:?}"
        );
        assert_eq!(closes.earliest_ms, None, "{closes:?}");
        assert!(closes.start_gap_ms.unwrap() > 2500.0, "{closes:?}");
    }

    #[test]
    fn a_run_mostly_stalled_is_not_reliable() {
        // A probe starved of CPU: every close seen 100-300 ms late, the
        // responses read late without a stamp.
        let samples: Vec<CloseSample> = (0..6)
            .map(|i| {
                let s = i as f64 * 200.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: s + 150.0,
                    closed_ms: s + 2000.0 + 100.0 * (i % 3) as f64,
                    closed_lo_ms: s + 1995.0,
                    response_window_ms: 150.0,
                }
            })
            .collect();
        let closes = analyse(&samples).unwrap();
        assert!(!closes.reliable, "{closes:?}");
        assert_eq!(closes.stalled, 6);
        // An unstamped response read on time is no stall.
        let on_time: Vec<CloseSample> = samples
            .iter()
            .map(|s| CloseSample {
                idle_from_ms: s.idle_from_ms - 148.0,
                closed_ms: s.closed_lo_ms + 1.0,
                response_window_ms: 2.0,
                ..*s
            })
            .collect();
        let closes = analyse(&on_time).unwrap();
        assert!(closes.reliable && closes.stalled == 0, "{closes:?}");
    }

    #[test]
    fn a_round_of_one_redone_close_does_not_make_the_phases_coarse() {
        // waitress at 2 s: two rounds of 8, and a round measuring one
        // stalled close again (one phase: a gap of a whole period).
        let mut samples = load_following(1, 2000.0, 210.0, &spread_starts(100.0, 8, 1000.0));
        samples.extend(load_following(
            2,
            2000.0,
            770.0,
            &spread_starts(4290.0, 8, 1000.0),
        ));
        samples.extend(load_following(3, 2000.0, 430.0, &[9000.0]));
        let closes = analyse(&samples).unwrap();
        let earliest = closes.earliest_ms.expect("known");
        assert!((1850.0..=2000.0).contains(&earliest), "{closes:?}");
    }

    #[test]
    fn passes_that_drift_are_bounded_by_the_gap_between_starts() {
        // waitress, cleanup_interval 30 s, channel_timeout 5 s: each pass
        // 30 s after the last one ran, late by its loop's wake-up.
        let mut passes = vec![7_000.0];
        for late in [310.0, 620.0, 140.0, 480.0, 290.0] {
            let last = *passes.last().unwrap();
            passes.push(last + 30_000.0 + late);
        }
        let close = |s: f64| *passes.iter().find(|&&p| p >= s + 5000.0).unwrap();
        let samples = closed(1, &spread_starts(100.0, 64, 60_000.0), close);
        let closes = analyse(&samples).unwrap();
        let earliest = closes.earliest_ms.expect("known");
        assert!(
            earliest <= 5000.0 && earliest > 5000.0 - 1000.0,
            "{closes:?}"
        );
    }
}
