//! Counters and histograms with one writer: the worker that owns them.
//!
//! A worker bumps its own counters on the hot path and the admin thread
//! reads them on a scrape. With a single writer an increment needs no locked
//! read-modify-write: a relaxed load and store is enough (a reader sees a
//! value at most one update old), which keeps a request's bookkeeping to a
//! few plain memory operations.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A monotonic counter written by one thread, read by any.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker calls this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A histogram over fixed upper bounds (Prometheus `le`, inclusive), plus
/// an overflow bucket and the sum of what was recorded, in the unit the
/// bounds are given in.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    /// `bounds.len() + 1` buckets: `counts[i]` holds values `<= bounds[i]`
    /// and `> bounds[i - 1]`; the last holds what exceeds every bound.
    counts: Box<[Counter]>,
    sum: Counter,
}

impl Histogram {
    /// A histogram over `bounds`, which must be increasing.
    pub fn new(bounds: &'static [u64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| Counter::default()).collect(),
            sum: Counter::default(),
        }
    }

    /// Counts one observation: a binary search and two plain stores.
    #[inline]
    pub fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        self.counts[bucket].add(1);
        self.sum.add(value);
    }

    /// Counts `n` observations of `value`.
    pub fn record_n(&self, value: u64, n: u64) {
        if n > 0 {
            let bucket = self.bounds.partition_point(|&bound| bound < value);
            self.counts[bucket].add(n);
            self.sum.add(value.saturating_mul(n));
        }
    }

    /// What has been recorded so far.
    pub fn read(&self) -> HistogramData {
        HistogramData {
            bounds: self.bounds,
            counts: self.counts.iter().map(Counter::get).collect(),
            sum: self.sum.get(),
        }
    }
}

/// A histogram's contents at one moment (or summed over workers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramData {
    pub bounds: &'static [u64],
    /// Per bucket, not cumulative; one more than `bounds`.
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl HistogramData {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another reading of a histogram with the same bounds.
    pub fn merge(&mut self, other: &HistogramData) {
        debug_assert_eq!(self.bounds, other.bounds);
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }

    /// Sums readings of the same histogram from every worker.
    pub fn sum_of(
        bounds: &'static [u64],
        readings: impl IntoIterator<Item = HistogramData>,
    ) -> Self {
        let mut total = HistogramData {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        };
        for reading in readings {
            total.merge(&reading);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        static BOUNDS: [u64; 3] = [10, 100, 1000];
        let histogram = Histogram::new(&BOUNDS);
        for value in [0, 10, 11, 100, 1000, 1001, 5000] {
            histogram.record(value);
        }
        histogram.record_n(50, 3);
        let data = histogram.read();
        assert_eq!(data.counts, vec![2, 5, 1, 2]);
        assert_eq!(data.count(), 10);
        assert_eq!(data.sum, 7122 + 150);
        let twice = HistogramData::sum_of(&BOUNDS, [data.clone(), data]);
        assert_eq!(twice.counts, vec![4, 10, 2, 4]);
    }
}
