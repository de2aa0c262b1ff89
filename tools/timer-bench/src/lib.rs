//! The four timer structures the benchmarks compare, behind one small
//! trait, and the fixtures both benchmark binaries build them with
//! (`benches/timers.rs` for time per operation, `benches/timer_memory.rs`
//! for bytes per timer). See `benches/timers.rs` for what each contender is.
//!
//! A package of its own, outside the workspace's default members, because
//! the `delayqueue` contender needs tokio: the server's `cargo build` and
//! `cargo test` never compile it. `cargo bench -p timer-bench`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use keepalive_server::timers::{Micros, TimerId, TimerLists};
use tokio::runtime::Runtime;
use tokio_util::time::{DelayQueue, delay_queue};

/// Server-like durations (ms) for enroll / refresh / unenroll.
pub const DURATIONS: [u64; 4] = [5_000, 60_000, 65_000, 120_000];

/// The operations being compared.
pub trait Timers {
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
        while let Some(due) = self.expire(now) {
            black_box(due.payload);
            fired += 1;
        }
        fired
    }
}

/// `BinaryHeap` with lazy deletion by generation check (see the file doc).
pub struct HeapTimers {
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
        let key = claim(&mut self.slots, &mut self.free, slot);
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
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime")
    })
}

/// `DelayQueue` with deadlines as `base + now + duration`.
pub struct Delay {
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
    pub fn wait_past(&self, max_offset: Duration) {
        let target = self.base + max_offset + Duration::from_millis(2);
        if let Some(left) = target.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
    }
}

/// libuv's timer heap: per-timer entries, positions tracked for removal.
pub struct UvHeap {
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
        let key = claim(&mut self.slots, &mut self.free, slot);
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

/// Puts `slot` in a free place of `slots` (reusing one from `free` first)
/// and returns its index.
fn claim<S>(slots: &mut Vec<S>, free: &mut Vec<u32>, slot: S) -> u32 {
    match free.pop() {
        Some(key) => {
            slots[key as usize] = slot;
            key
        }
        None => {
            slots.push(slot);
            (slots.len() - 1) as u32
        }
    }
}

/// A fixed pseudo-random permutation of `0..n` (xorshift + Fisher-Yates), so
/// refresh and unenroll touch timers in no cache-friendly order.
pub fn shuffled(n: usize) -> Vec<usize> {
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
pub fn filled<X: Timers>(n: usize, durations: &[u64]) -> (X, Vec<X::Handle>) {
    let mut timers = X::with_capacity(n);
    let handles = (0..n)
        .map(|i| timers.enroll(i as Micros, durations[i % durations.len()], i as u64))
        .collect();
    (timers, handles)
}
