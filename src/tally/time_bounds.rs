//! The bounds histograms of durations take their buckets from, written
//! once: a 1–2.5–5 ladder from 25 µs to 10 s, then the minutes where idle
//! timeouts and connection lifetimes live, up to an hour. Each histogram
//! takes a stretch of it ([`time_bounds`]), so the server's request and
//! connection durations and the peer observer's reuse gaps share their
//! bounds where they overlap.

/// Every time bound, in µs, in increasing order.
pub const TIME_BOUNDS_US: [u64; 26] = [
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
    300_000_000,
    600_000_000,
    1_200_000_000,
    1_800_000_000,
    3_600_000_000,
];

/// `head`, then the bounds of [`TIME_BOUNDS_US`] from `from` to `to` µs
/// (both included): `N` bounds in all, or the build fails (evaluated in a
/// `static`, a wrong `N` or a `head` not below `from` is a compile error).
pub const fn time_bounds<const N: usize>(head: &[u64], from: u64, to: u64) -> [u64; N] {
    let mut bounds = [0; N];
    let mut n = 0;
    while n < head.len() {
        assert!(n < N, "more bounds than N");
        bounds[n] = head[n];
        n += 1;
    }
    let mut i = 0;
    while i < TIME_BOUNDS_US.len() {
        let bound = TIME_BOUNDS_US[i];
        if bound >= from && bound <= to {
            assert!(n < N, "more bounds than N");
            assert!(n == 0 || bounds[n - 1] < bound, "bounds must increase");
            bounds[n] = bound;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "fewer bounds than N");
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_increases() {
        assert!(TIME_BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_stretch_is_the_head_then_the_ladder_between_its_ends() {
        let bounds: [u64; 5] = time_bounds(&[1, 10], 100, 500);
        assert_eq!(bounds, [1, 10, 100, 250, 500]);
        let whole: [u64; 26] = time_bounds(&[], 0, u64::MAX);
        assert_eq!(whole, TIME_BOUNDS_US);
    }

    #[test]
    #[should_panic(expected = "fewer bounds than N")]
    fn a_stretch_shorter_than_its_length_is_refused() {
        let _: [u64; 4] = time_bounds(&[], 100, 500);
    }
}
