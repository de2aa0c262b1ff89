//! A small log-linear histogram of durations for one peer's quantiles
//! (p50, p99) and maximum: eight buckets per power of two of microseconds,
//! so a quantile is known to within 6% of its value, in under a kilobyte,
//! with no allocation and a few instructions per sample. Values below 8 µs
//! are exact; values beyond about 36 minutes share the last bucket.
//!
//! Why not `hdrhistogram` (measured with 7.6, 1 µs to 2^32 µs, `u32`
//! counts): at its coarsest precision (one significant digit) a histogram
//! holds 96 bytes inline and 1,920 on the heap, 2,016 against our 968, and
//! allocates when a peer is admitted or a snapshot cloned; two digits take
//! 13,920 bytes, three 98,400. Each peer keeps two, so the peer table
//! (64 peers and `other`) would grow from 142,080 bytes to about 278,000
//! per worker, past its 200 KiB bound. Recording costs the same (5.1 ns
//! here, 5.3 there).

/// Buckets per power of two.
const SUB_BUCKETS: usize = 8;
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// The largest power of two with buckets of its own: 2^31 µs ≈ 36 min.
const TOP_POWER: u32 = 31;
const BUCKETS: usize = (TOP_POWER as usize - SUB_BITS as usize + 2) * SUB_BUCKETS;

/// Durations in µs, counted by bucket.
#[derive(Clone, PartialEq, Eq)]
pub struct LogHistogram {
    counts: [u32; BUCKETS],
    max_us: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            counts: [0; BUCKETS],
            max_us: 0,
        }
    }
}

impl std::fmt::Debug for LogHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHistogram")
            .field("count", &self.count())
            .field("max_us", &self.max_us)
            .finish()
    }
}

impl LogHistogram {
    pub fn record(&mut self, us: u64) {
        let bucket = &mut self.counts[bucket_of(us)];
        *bucket = bucket.saturating_add(1);
        self.max_us = self.max_us.max(us);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|&n| u64::from(n)).sum()
    }

    /// The largest value recorded (0 when empty).
    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// The value below which a fraction `q` of the samples lie: the middle
    /// of the bucket holding it, never above the maximum. `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank && bucket == BUCKETS - 1 {
                return Some(self.max_us); // the overflow shares the last bucket
            }
            if seen >= rank {
                let (low, width) = bucket_range(bucket);
                return Some((low + width / 2).min(self.max_us));
            }
        }
        Some(self.max_us)
    }

    /// Adds another histogram's samples (the same peer seen by another
    /// worker, or a peer folded into "other").
    pub fn merge(&mut self, other: &LogHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.max_us = self.max_us.max(other.max_us);
    }
}

fn bucket_of(us: u64) -> usize {
    if us < SUB_BUCKETS as u64 {
        return us as usize;
    }
    let power = (63 - us.leading_zeros()).min(TOP_POWER);
    if power == TOP_POWER && us >> TOP_POWER > 1 {
        return BUCKETS - 1;
    }
    let sub = (us >> (power - SUB_BITS)) as usize & (SUB_BUCKETS - 1);
    (power - SUB_BITS + 1) as usize * SUB_BUCKETS + sub
}

/// The lowest value of a bucket and its width.
fn bucket_range(bucket: usize) -> (u64, u64) {
    if bucket < SUB_BUCKETS {
        return (bucket as u64, 1);
    }
    let power = (bucket / SUB_BUCKETS) as u32 + SUB_BITS - 1;
    let sub = (bucket % SUB_BUCKETS) as u64;
    let width = 1u64 << (power - SUB_BITS);
    ((SUB_BUCKETS as u64 + sub) * width, width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_histogram_has_no_quantiles() {
        let histogram = LogHistogram::default();
        assert_eq!(histogram.quantile_us(0.5), None);
        assert_eq!(histogram.max_us(), 0);
    }

    #[test]
    fn quantiles_follow_the_samples() {
        let mut histogram = LogHistogram::default();
        for ms in 1..=100u64 {
            histogram.record(ms * 1000);
        }
        let p50 = histogram.quantile_us(0.5).unwrap();
        let p99 = histogram.quantile_us(0.99).unwrap();
        assert!((47_000..=53_000).contains(&p50), "{p50}");
        assert!((93_000..=100_000).contains(&p99), "{p99}");
        assert_eq!(histogram.max_us(), 100_000);
        let mut twice = histogram.clone();
        twice.merge(&histogram);
        assert_eq!(twice.count(), 200);
        assert_eq!(twice.quantile_us(0.5), Some(p50));
    }

    #[test]
    fn huge_values_land_in_the_last_bucket() {
        let mut histogram = LogHistogram::default();
        histogram.record(u64::MAX);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(histogram.quantile_us(0.5), Some(u64::MAX));
    }

    proptest! {
        #[test]
        fn every_value_lies_in_its_bucket_within_a_sixteenth(us in 0u64..(1 << 32)) {
            let (low, width) = bucket_range(bucket_of(us));
            prop_assert!(low <= us && us < low + width, "{} not in {}+{}", us, low, width);
            prop_assert!(width == 1 || width * 8 <= low, "{} wide at {}", width, low);
        }
    }
}
