//! Bytes per timer: the heap memory each contender of `benches/timers.rs`
//! holds for n timers, counted by the tests' global allocator
//! (tests/counting_alloc), which tracks live bytes. Each structure is sized
//! for n up front (`with_capacity`, as a server sizing for its connections
//! would), then n timers are enrolled
//! and every one refreshed once in a shuffled order (the lazy heap's stale
//! entries included, as in steady state). The handles the caller keeps are
//! not counted. Prints a Markdown table.
//!
//! `cargo bench -p timer-bench --bench timer_memory` (1k to 1M);
//! `KAS_BENCH_10M=1` adds 10M.

#[path = "../../../tests/counting_alloc/mod.rs"]
mod counting_alloc;

use keepalive_server::timers::{Micros, TimerLists};
use timer_bench::{DURATIONS, Delay, HeapTimers, Timers, UvHeap, runtime, shuffled};

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// Heap bytes per timer that `X` holds for `n` timers in steady state.
fn bytes_per_timer<X: Timers>(n: usize, order: &[usize]) -> f64 {
    let mut handles = Vec::with_capacity(n);
    let before = counting_alloc::live_bytes();
    let mut timers = X::with_capacity(n);
    for i in 0..n {
        handles.push(timers.enroll(i as Micros, DURATIONS[i % 4], i as u64));
    }
    for (step, &i) in order.iter().enumerate() {
        timers.refresh(handles[i], (n + step) as Micros);
    }
    let held = counting_alloc::live_bytes() - before;
    drop(timers);
    held as f64 / n as f64
}

fn main() {
    // `cargo bench` passes `--bench`; a filter is not supported here.
    let _rt = runtime().enter();
    let mut sizes = vec![1_000, 10_000, 100_000, 1_000_000];
    if std::env::var_os("KAS_BENCH_10M").is_some_and(|v| v != "0") {
        sizes.push(10_000_000);
    }
    println!("| timers | lists | binheap | uvheap | delayqueue |");
    println!("|---|---|---|---|---|");
    for n in sizes {
        let order = shuffled(n);
        println!(
            "| {n} | {:.1} | {:.1} | {:.1} | {:.1} |",
            bytes_per_timer::<TimerLists<u64>>(n, &order),
            bytes_per_timer::<HeapTimers>(n, &order),
            bytes_per_timer::<UvHeap>(n, &order),
            bytes_per_timer::<Delay>(n, &order),
        );
    }
}
