//! Timer lists against the two usual alternatives, on the operations a
//! server performs: enroll (accept), refresh (every read/write), unenroll
//! (close) and expire-all (a burst of idle connections timing out).
//!
//! Contenders, all behind the small `Timers` trait (src/lib.rs):
//! - `lists`: our `TimerLists` (per-duration lists + heap of list heads).
//! - `binheap`: `std::collections::BinaryHeap<Reverse<(deadline, seq, slot)>>`
//!   with one entry per arming. Refresh and unenroll use a *generation check*
//!   (lazy deletion): each slot remembers the `seq` of its live entry; refresh
//!   pushes a new entry and bumps the slot's `seq`, unenroll just marks the
//!   slot dead, and stale entries are skipped when popped. To keep memory
//!   bounded the heap is compacted (`retain` live entries, O(n)) whenever it
//!   holds more than twice the live count; that cost is amortised into the
//!   figures. (libuv instead removes from an intrusive heap in O(log n); the
//!   lazy variant is the faster of the two with `std`'s heap.)
//! - `uvheap`: libuv's own design, one entry per timer in an indexed binary
//!   min-heap ordered by (deadline, start id), each timer knowing its heap
//!   position. Refresh is `uv_timer_again`: remove, then insert, O(log n)
//!   sifts with a position update per move; unenroll removes in O(log n).
//! - `delayqueue`: `tokio_util::time::DelayQueue` (hierarchical wheel, 1 ms
//!   resolution) inside a current-thread runtime with time enabled. Deadlines
//!   are given as `Instant`s (`insert_at` / `reset_at`) computed from a fixed
//!   base, so no contender reads the clock inside the measured loop.
//!   Expire-all drives `poll_expired` to exhaustion with `block_on` after the
//!   deadlines have passed in real time; it includes the runtime's driver
//!   turns (one per distinct millisecond deadline), which is how it runs in
//!   production too.
//!
//! Sizes: 1k, 10k, 100k and 1M timers spread round-robin over four
//! durations; with `KAS_BENCH_10M=1` also 10M (minutes per contender and
//! several GB of memory, so not in the default run). Sizes from 100k up use
//! 10 samples and a short measurement time, and from 1M flat sampling (one
//! iteration per sample: each needs its own multi-second setup).
//! Bytes per timer come from `cargo bench -p timer-bench --bench timer_memory`.
//! Run one comparison: `cargo bench -p timer-bench --bench timers --
//! 'refresh/.*/100000'`.
//! Tables and charts: `scripts/charts.py timers` (reads target/criterion).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use keepalive_server::timers::{Micros, TimerLists};
use timer_bench::{DURATIONS, Delay, HeapTimers, Timers, UvHeap, filled, runtime, shuffled};

/// Timer counts measured by default.
const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// Added with `KAS_BENCH_10M=1`.
const HUGE: usize = 10_000_000;

/// Short durations (ms) for expire-all, so DelayQueue's deadlines can pass
/// in real time during setup.
const SHORT_DURATIONS: [u64; 4] = [1, 2, 3, 4];

fn sizes() -> Vec<usize> {
    let mut sizes = SIZES.to_vec();
    if std::env::var_os("KAS_BENCH_10M").is_some_and(|v| v != "0") {
        sizes.push(HUGE);
    }
    sizes
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    group.sampling_mode(if n >= 1_000_000 {
        SamplingMode::Flat
    } else {
        SamplingMode::Auto
    });
    if n >= 100_000 {
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
    } else {
        group.sample_size(30);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(1));
    }
}

fn bench_enroll<X: Timers>(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    group.bench_function(format!("{}/{n}", X::NAME), |b| {
        b.iter_batched(
            || X::with_capacity(n),
            |mut timers| {
                for i in 0..n {
                    black_box(timers.enroll(i as Micros, DURATIONS[i % 4], i as u64));
                }
                timers // dropped outside the measurement
            },
            BatchSize::PerIteration,
        )
    });
}

fn bench_refresh<X: Timers>(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    // Built on first use, so a filter that skips this bench skips the setup;
    // kept across criterion's calls of the closure (warm-up, samples).
    let mut state: Option<(X, Vec<X::Handle>, Vec<usize>)> = None;
    let (mut i, mut now) = (0, n as Micros);
    group.bench_function(format!("{}/{n}", X::NAME), |b| {
        let (timers, handles, order) = state.get_or_insert_with(|| {
            let (timers, handles) = filled::<X>(n, &DURATIONS);
            (timers, handles, shuffled(n))
        });
        b.iter(|| {
            // The clock moves 1 µs per refresh, so no refresh is a no-op.
            now += 1;
            i = if i + 1 == n { 0 } else { i + 1 };
            timers.refresh(handles[order[i]], now);
        })
    });
}

fn bench_unenroll<X: Timers>(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    let order = shuffled(n);
    group.bench_function(format!("{}/{n}", X::NAME), |b| {
        b.iter_batched(
            || filled::<X>(n, &DURATIONS),
            |(mut timers, handles)| {
                for &i in &order {
                    timers.unenroll(handles[i]);
                }
                timers
            },
            BatchSize::PerIteration,
        )
    });
}

fn bench_expire_all<X: Timers>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    n: usize,
    before_drain: impl Fn(&X),
) {
    group.bench_function(format!("{}/{n}", X::NAME), |b| {
        b.iter_batched(
            || {
                // Starts spread over 1 ms so deadlines span ~5 ms.
                let mut timers = X::with_capacity(n);
                for i in 0..n {
                    let start = (i as u64 * 1000) / n as u64;
                    timers.enroll(start, SHORT_DURATIONS[i % 4], i as u64);
                }
                before_drain(&timers);
                timers
            },
            |mut timers| {
                let fired = timers.expire_all(10_000_000);
                assert_eq!(fired, n);
                timers
            },
            BatchSize::PerIteration,
        )
    });
}

fn enroll(c: &mut Criterion) {
    let _rt = runtime().enter();
    let mut group = c.benchmark_group("enroll");
    for n in sizes() {
        configure(&mut group, n);
        group.throughput(Throughput::Elements(n as u64));
        bench_enroll::<TimerLists<u64>>(&mut group, n);
        bench_enroll::<HeapTimers>(&mut group, n);
        bench_enroll::<UvHeap>(&mut group, n);
        bench_enroll::<Delay>(&mut group, n);
    }
    group.finish();
}

fn refresh(c: &mut Criterion) {
    let _rt = runtime().enter();
    let mut group = c.benchmark_group("refresh");
    for n in sizes() {
        configure(&mut group, n);
        group.throughput(Throughput::Elements(1));
        bench_refresh::<TimerLists<u64>>(&mut group, n);
        bench_refresh::<HeapTimers>(&mut group, n);
        bench_refresh::<UvHeap>(&mut group, n);
        bench_refresh::<Delay>(&mut group, n);
    }
    group.finish();
}

fn unenroll(c: &mut Criterion) {
    let _rt = runtime().enter();
    let mut group = c.benchmark_group("unenroll");
    for n in sizes() {
        configure(&mut group, n);
        group.throughput(Throughput::Elements(n as u64));
        bench_unenroll::<TimerLists<u64>>(&mut group, n);
        bench_unenroll::<HeapTimers>(&mut group, n);
        bench_unenroll::<UvHeap>(&mut group, n);
        bench_unenroll::<Delay>(&mut group, n);
    }
    group.finish();
}

fn expire_all(c: &mut Criterion) {
    let _rt = runtime().enter();
    let mut group = c.benchmark_group("expire_all");
    let last_deadline = Duration::from_micros(1000 + 4000);
    for n in sizes() {
        configure(&mut group, n);
        group.throughput(Throughput::Elements(n as u64));
        bench_expire_all::<TimerLists<u64>>(&mut group, n, |_| {});
        bench_expire_all::<HeapTimers>(&mut group, n, |_| {});
        bench_expire_all::<UvHeap>(&mut group, n, |_| {});
        bench_expire_all::<Delay>(&mut group, n, |d| d.wait_past(last_deadline));
    }
    group.finish();
}

criterion_group!(benches, enroll, refresh, unenroll, expire_all);
criterion_main!(benches);
