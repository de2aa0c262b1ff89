//! The peer observer's counters and histograms (see `peer_observer`): who
//! closed an idle connection first and at what age, how much of the server's idle
//! timeout was left when a connection was reused, and what the peer did
//! after the server's idle FIN. Written by the worker, like every `Stats`.

use crate::observe::Closer;
use crate::tally::{Counter, Histogram, time_bounds};

/// Idle close ages, in µs: coarse below a second, then steps of 4% from
/// 1 s to 120 s (where pool and proxy timeouts live, so a client's timeout
/// shows to within 2%), then coarse again up to an hour.
pub static IDLE_CLOSE_AGE_US: [u64; IDLE_AGE_BUCKETS] = idle_age_bounds();
const IDLE_AGE_BUCKETS: usize = 5 + FINE_STEPS + 5;
const FINE_STEPS: usize = 124;

const fn idle_age_bounds() -> [u64; IDLE_AGE_BUCKETS] {
    let mut bounds = [0; IDLE_AGE_BUCKETS];
    let coarse_below = [10_000, 50_000, 100_000, 250_000, 500_000];
    let coarse_above = [
        180_000_000,
        300_000_000,
        600_000_000,
        1_200_000_000,
        3_600_000_000,
    ];
    let mut i = 0;
    while i < 5 {
        bounds[i] = coarse_below[i];
        i += 1;
    }
    // Whole milliseconds, each 4% above the last: 1 s, 1.04 s, 1.082 s …
    let mut ms = 1000;
    let mut step = 0;
    while step < FINE_STEPS {
        bounds[5 + step] = ms * 1000;
        ms = (ms * 104 + 50) / 100;
        step += 1;
    }
    let mut j = 0;
    while j < 5 {
        bounds[5 + FINE_STEPS + j] = coarse_above[j];
        j += 1;
    }
    bounds
}

/// Reuse gaps and headroom, in µs: 100 µs to 10 min.
pub static REUSE_US: [u64; 21] = time_bounds(&[], 100, 600_000_000);

/// What happens within the watch after the server's idle FIN, in µs: up to
/// its one second.
pub static AFTER_FIN_US: [u64; 13] = [
    100, 250, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000,
];

/// One worker's peer observer figures.
#[derive(Debug)]
pub struct ObserverStats {
    /// Idle close ages, by who closed (`Closer` as index).
    idle_close_age: [Histogram; 2],
    pub reuse_gap: Histogram,
    /// Time left before the idle deadline at a reuse (0 when past it).
    pub reuse_headroom: Histogram,
    pub near_misses: Counter,
    pub late_requests: Counter,
    pub late_request_delay: Histogram,
    pub peer_close_delay: Histogram,
}

impl Default for ObserverStats {
    fn default() -> Self {
        ObserverStats {
            idle_close_age: [
                Histogram::new(&IDLE_CLOSE_AGE_US),
                Histogram::new(&IDLE_CLOSE_AGE_US),
            ],
            reuse_gap: Histogram::new(&REUSE_US),
            reuse_headroom: Histogram::new(&REUSE_US),
            near_misses: Counter::default(),
            late_requests: Counter::default(),
            late_request_delay: Histogram::new(&AFTER_FIN_US),
            peer_close_delay: Histogram::new(&AFTER_FIN_US),
        }
    }
}

impl ObserverStats {
    pub fn idle_close_age(&self, closer: Closer) -> &Histogram {
        &self.idle_close_age[closer as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_age_buckets_rise_by_four_percent_across_common_timeouts() {
        assert!(IDLE_CLOSE_AGE_US.windows(2).all(|w| w[0] < w[1]));
        let fine = &IDLE_CLOSE_AGE_US[5..5 + FINE_STEPS];
        assert_eq!(fine[0], 1_000_000);
        assert!(
            *fine.last().unwrap() >= 120_000_000,
            "{}",
            fine.last().unwrap()
        );
        for pair in fine.windows(2) {
            let step = pair[1] as f64 / pair[0] as f64;
            assert!((1.035..=1.045).contains(&step), "{pair:?}");
        }
    }
}
