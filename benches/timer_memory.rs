//! Bytes per timer: the heap memory each contender of `benches/timers.rs`
//! holds for n timers, counted by a global allocator that tracks live
//! bytes. Each structure is sized for n up front (`with_capacity`, as a
//! server sizing for its connections would), then n timers are enrolled
//! and every one refreshed once in a shuffled order (the lazy heap's stale
//! entries included, as in steady state). The handles the caller keeps are
//! not counted. Prints a Markdown table.
//!
//! `cargo bench --bench timer_memory` (1k to 1M); `KAS_BENCH_10M=1` adds 10M.

mod contenders;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use contenders::{DURATIONS, Delay, HeapTimers, Timers, UvHeap, runtime, shuffled};
use keepalive_server::timers::{Micros, TimerLists};

struct Tracking;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// live-byte count is the only addition.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Heap bytes per timer that `X` holds for `n` timers in steady state.
fn bytes_per_timer<X: Timers>(n: usize, order: &[usize]) -> f64 {
    let mut handles = Vec::with_capacity(n);
    let before = LIVE.load(Ordering::Relaxed);
    let mut timers = X::with_capacity(n);
    for i in 0..n {
        handles.push(timers.enroll(i as Micros, DURATIONS[i % 4], i as u64));
    }
    for (step, &i) in order.iter().enumerate() {
        timers.refresh(handles[i], (n + step) as Micros);
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
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
