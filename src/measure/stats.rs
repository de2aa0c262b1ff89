//! Reducing timings to figures: nearest-rank percentiles of a sorted
//! sample, and the min / median / max spread the probe reports.

use serde::Serialize;

/// Nearest-rank percentile `p` (0–100) of an ascending `sorted` sample.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// The smallest, middle and largest of a sample, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `sample` (any order); `None` when it is empty.
    pub fn of(sample: &[f64]) -> Option<Spread> {
        let mut sorted = sample.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            min: *sorted.first()?,
            median: percentile(&sorted, 50.0)?,
            max: *sorted.last()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_and_spread() {
        let sample = [3.0, 1.0, 2.0, 10.0];
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 10.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 10.0], 99.0), Some(10.0));
        assert_eq!(
            Spread::of(&sample),
            Some(Spread {
                min: 1.0,
                median: 2.0,
                max: 10.0
            })
        );
        assert_eq!(Spread::of(&[]), None);
    }
}
