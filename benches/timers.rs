//! Timer lists against the two usual alternatives, on the operations a
//! server performs: enroll (accept), refresh (every read/write), unenroll
//! (close) and expire-all (a burst of idle connections timing out).
//!
//! Contenders, all behind the small `Timers` trait below:
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
//! Sizes: 1k, 100k and 1M timers spread round-robin over four durations.
//! The big sizes use 10 samples and a short measurement time.
//! Run one comparison: `cargo bench --bench timers -- 'refresh/.*/100000'`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use keepalive_server::timers::{Micros, TimerId, TimerLists};
use tokio::runtime::Runtime;
use tokio_util::time::{DelayQueue, delay_queue};

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];

/// Server-like durations (ms) for enroll / refresh / unenroll.
const DURATIONS: [u64; 4] = [5_000, 60_000, 65_000, 120_000];

/// Short durations (ms) for expire-all, so DelayQueue's deadlines can pass
/// in real time during setup.
const SHORT_DURATIONS: [u64; 4] = [1, 2, 3, 4];

/// The operations being compared.
trait Timers {
    type Handle: Copy;
    const NAME: &'static str;
    fn with_capacity(n: usize) -> Self;
    fn enroll(&mut self, now: Micros, duration_ms: u64, payload: u64) -> Self::Handle;
    fn refresh(&mut self, h: Self::Handle, now: Micros);
    fn unenroll(&mut self, h: Self::Handle);
    /// Fire everything due at `now`; returns how many fired.
    fn expire_all(&mut self, now: Micros) -> usize;
}

impl Timers for TimerLists<u64> {
    type Handle = TimerId;
    const NAME: &'static str = "lists";
    fn with_capacity(n: usize) -> Self {
        TimerLists::with_capacity(n)
    }
    fn enroll(&mut self, now: Micros, duration_ms: u64, payload: u64) -> TimerId {
        TimerLists::enroll(self, now, duration_ms, false, payload)
    }
    fn refresh(&mut self, h: TimerId, now: Micros) {
        TimerLists::refresh(self, h, now);
    }
    fn unenroll(&mut self, h: TimerId) {
        black_box(TimerLists::unenroll(self, h));
    }
    fn expire_all(&mut self, now: Micros) -> usize {
        let mut fired = 0;
        while let Some((_, payload)) = self.expire(now) {
            black_box(payload);
            fired += 1;
        }
        fired
    }
}

/// `BinaryHeap` with lazy deletion by generation check (see the file doc).
struct HeapTimers {
    heap: BinaryHeap<Reverse<(Micros, u64, u32)>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    seq: u64,
    live: usize,
}

struct Slot {
    /// `seq` of the live heap entry for this slot; `DEAD` when free.
    seq: u64,
    duration_us: Micros,
    payload: u64,
}

const DEAD: u64 = u64::MAX;

impl HeapTimers {
    fn push(&mut self, slot: u32, deadline: Micros) {
        self.seq += 1;
        self.slots[slot as usize].seq = self.seq;
        self.heap.push(Reverse((deadline, self.seq, slot)));
        if self.heap.len() > 2 * self.live + 64 {
            let slots = &self.slots;
            self.heap
                .retain(|Reverse((_, seq, slot))| slots[*slot as usize].seq == *seq);
        }
    }
}

impl Timers for HeapTimers {
    type Handle = u32;
    const NAME: &'static str = "binheap";
    fn with_capacity(n: usize) -> Self {
        HeapTimers {
            heap: BinaryHeap::with_capacity(2 * n + 64),
            slots: Vec::with_capacity(n),
            free: Vec::new(),
            seq: 0,
            live: 0,
        }
    }
    fn enroll(&mut self, now: Micros, duration_ms: u64, payload: u64) -> u32 {
        let slot = Slot {
            seq: DEAD,
            duration_us: duration_ms * 1000,
            payload,
        };
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key as usize] = slot;
                key
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        self.push(key, now + duration_ms * 1000);
        key
    }
    fn refresh(&mut self, h: u32, now: Micros) {
        let deadline = now + self.slots[h as usize].duration_us;
        self.push(h, deadline);
    }
    fn unenroll(&mut self, h: u32) {
        let slot = &mut self.slots[h as usize];
        black_box(slot.payload);
        slot.seq = DEAD;
        self.free.push(h);
        self.live -= 1;
    }
    fn expire_all(&mut self, now: Micros) -> usize {
        let mut fired = 0;
        while let Some(&Reverse((deadline, seq, slot))) = self.heap.peek() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            let s = &mut self.slots[slot as usize];
            if s.seq == seq {
                black_box(s.payload);
                s.seq = DEAD;
                self.free.push(slot);
                self.live -= 1;
                fired += 1;
            }
        }
        fired
    }
}

/// One runtime for every DelayQueue bench (its driver backs the queue's sleep).
fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime")
    })
}

/// `DelayQueue` with deadlines as `base + now + duration`.
struct Delay {
    queue: DelayQueue<u64>,
    base: Instant,
}

impl Timers for Delay {
    type Handle = (delay_queue::Key, u64);
    const NAME: &'static str = "delayqueue";
    fn with_capacity(n: usize) -> Self {
        Delay {
            queue: DelayQueue::with_capacity(n),
            base: Instant::now(),
        }
    }
    fn enroll(&mut self, now: Micros, duration_ms: u64, payload: u64) -> Self::Handle {
        let when = self.base + Duration::from_micros(now + duration_ms * 1000);
        (self.queue.insert_at(payload, when.into()), duration_ms)
    }
    fn refresh(&mut self, (key, duration_ms): Self::Handle, now: Micros) {
        let when = self.base + Duration::from_micros(now + duration_ms * 1000);
        self.queue.reset_at(&key, when.into());
    }
    fn unenroll(&mut self, (key, _): Self::Handle) {
        black_box(self.queue.remove(&key).into_inner());
    }
    fn expire_all(&mut self, _now: Micros) -> usize {
        // Only valid once every deadline has passed in real time.
        let queue = &mut self.queue;
        runtime().block_on(async {
            let mut fired = 0;
            while let Some(expired) = std::future::poll_fn(|cx| queue.poll_expired(cx)).await {
                black_box(expired.into_inner());
                fired += 1;
            }
            fired
        })
    }
}

impl Delay {
    /// Block until every deadline enrolled with `max_offset` from `base` has
    /// passed in real time (plus the wheel's 1 ms rounding).
    fn wait_past(&self, max_offset: Duration) {
        let target = self.base + max_offset + Duration::from_millis(2);
        if let Some(left) = target.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
    }
}

/// libuv's timer heap: per-timer entries, positions tracked for removal.
struct UvHeap {
    /// Heap of slot indices, min by (deadline, start_id).
    heap: Vec<u32>,
    slots: Vec<UvSlot>,
    free: Vec<u32>,
    next_start_id: u64,
}

struct UvSlot {
    deadline: Micros,
    start_id: u64,
    duration_us: Micros,
    /// Index in `heap`; `u32::MAX` when not armed.
    pos: u32,
    payload: u64,
}

impl UvHeap {
    fn key(&self, slot: u32) -> (Micros, u64) {
        let s = &self.slots[slot as usize];
        (s.deadline, s.start_id)
    }

    fn place(&mut self, at: usize, slot: u32) {
        self.heap[at] = slot;
        self.slots[slot as usize].pos = at as u32;
    }

    fn sift_up(&mut self, mut at: usize) {
        let slot = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.key(self.heap[parent]) <= self.key(slot) {
                break;
            }
            self.place(at, self.heap[parent]);
            at = parent;
        }
        self.place(at, slot);
    }

    fn sift_down(&mut self, mut at: usize) {
        let slot = self.heap[at];
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                break;
            }
            let right = left + 1;
            let child = if right < self.heap.len()
                && self.key(self.heap[right]) < self.key(self.heap[left])
            {
                right
            } else {
                left
            };
            if self.key(slot) <= self.key(self.heap[child]) {
                break;
            }
            self.place(at, self.heap[child]);
            at = child;
        }
        self.place(at, slot);
    }

    fn insert(&mut self, slot: u32, deadline: Micros) {
        self.next_start_id += 1;
        let s = &mut self.slots[slot as usize];
        s.deadline = deadline;
        s.start_id = self.next_start_id;
        self.heap.push(slot);
        self.sift_up(self.heap.len() - 1);
    }

    fn remove(&mut self, slot: u32) {
        let at = self.slots[slot as usize].pos as usize;
        self.slots[slot as usize].pos = u32::MAX;
        let last = self.heap.pop().expect("armed timer in heap");
        if at < self.heap.len() {
            self.place(at, last);
            self.sift_down(at);
            self.sift_up(self.slots[last as usize].pos as usize);
        }
    }
}

impl Timers for UvHeap {
    type Handle = u32;
    const NAME: &'static str = "uvheap";
    fn with_capacity(n: usize) -> Self {
        UvHeap {
            heap: Vec::with_capacity(n),
            slots: Vec::with_capacity(n),
            free: Vec::new(),
            next_start_id: 0,
        }
    }
    fn enroll(&mut self, now: Micros, duration_ms: u64, payload: u64) -> u32 {
        let slot = UvSlot {
            deadline: 0,
            start_id: 0,
            duration_us: duration_ms * 1000,
            pos: u32::MAX,
            payload,
        };
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key as usize] = slot;
                key
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.insert(key, now + duration_ms * 1000);
        key
    }
    fn refresh(&mut self, h: u32, now: Micros) {
        // uv_timer_again: stop, then start with the same repeat.
        self.remove(h);
        let deadline = now + self.slots[h as usize].duration_us;
        self.insert(h, deadline);
    }
    fn unenroll(&mut self, h: u32) {
        self.remove(h);
        black_box(self.slots[h as usize].payload);
        self.free.push(h);
    }
    fn expire_all(&mut self, now: Micros) -> usize {
        let mut fired = 0;
        while let Some(&top) = self.heap.first() {
            if self.slots[top as usize].deadline > now {
                break;
            }
            self.unenroll(top);
            fired += 1;
        }
        fired
    }
}

/// A fixed pseudo-random permutation of `0..n` (xorshift + Fisher-Yates), so
/// refresh and unenroll touch timers in no cache-friendly order.
fn shuffled(n: usize) -> Vec<usize> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

/// `n` timers over `durations`, round-robin, started one µs apart.
fn filled<X: Timers>(n: usize, durations: &[u64]) -> (X, Vec<X::Handle>) {
    let mut timers = X::with_capacity(n);
    let handles = (0..n)
        .map(|i| timers.enroll(i as Micros, durations[i % durations.len()], i as u64))
        .collect();
    (timers, handles)
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
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
    for n in SIZES {
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
    for n in SIZES {
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
    for n in SIZES {
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
    for n in SIZES {
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
