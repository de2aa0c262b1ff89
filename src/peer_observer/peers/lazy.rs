//! Lazy closes told across workers. A lazy pool (httpx, urllib3, aiohttp)
//! closes an expired connection only when it next needs one, then opens a
//! new connection or reuses another: its close comes within
//! [`LAZY_CLOSE_US`] of that use. Under `SO_REUSEPORT` the new connection
//! lands on any worker, so a worker's table alone paired a close with it
//! about half the time with two workers (httpx, one pooled connection:
//! 4 of 8 closes lazy; `/peers` once counted 54 of 110, under the half that
//! flags a lazy pool).
//!
//! The tables meet here instead, by a key (the address, and for the
//! guard's tables the User-Agent): the latest new connection, and the
//! latest run of client closes not yet paired (closes each within
//! [`LAZY_CLOSE_US`] of the one before: a pool closes every expired
//! connection it holds at once). A close right after a new connection is
//! lazy at once; a use right after a run pairs the whole run, which the
//! table that saw the use counts (the windows are summed across workers).
//!
//! A shared board keeps its own monotonic clock, read only for a client
//! close, a new connection, and a reuse with closes waiting (the workers'
//! loop clocks start apart); a table's own board (one worker, the tests)
//! takes the table's loop time. Keys share [`SLOTS`] slots: two that
//! collide may pair each other's closes, rarely.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::LAZY_CLOSE_US;
use crate::timers::Micros;

/// Slots on the board, by key.
pub const SLOTS: usize = 256;
/// The bits of a packed run that hold its count.
const COUNT_BITS: u32 = 16;

/// Where the workers' tables pair client closes with the uses after them.
#[derive(Debug)]
pub struct LazyBoard {
    /// `None`: the caller's loop time is the board's time.
    origin: Option<Instant>,
    slots: Box<[Slot]>,
}

#[derive(Debug)]
struct Slot {
    /// The latest new connection's time + 1 (0: none).
    accepted: AtomicU64,
    /// The unpaired run: its latest close's time, shifted, and its count
    /// in the low [`COUNT_BITS`] (0: none).
    closes: AtomicU64,
    /// The youngest idle age, ms, of a close in the unpaired run
    /// (`u64::MAX`: none): a lazy close's age bounds the pool's limit.
    youngest_ms: AtomicU64,
}

/// Client closes a use showed lazy: how many, and the youngest's idle
/// age, ms (the pool's limit is below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Paired {
    pub count: u32,
    pub youngest_ms: Option<u64>,
}

impl LazyBoard {
    /// A board for every worker's tables, on a clock of its own.
    pub fn shared() -> Self {
        Self::with_origin(Some(Instant::now()))
    }

    /// A board for one table, on that table's loop clock.
    pub fn local() -> Self {
        Self::with_origin(None)
    }

    fn with_origin(origin: Option<Instant>) -> Self {
        LazyBoard {
            origin,
            slots: (0..SLOTS)
                .map(|_| Slot {
                    accepted: AtomicU64::new(0),
                    closes: AtomicU64::new(0),
                    youngest_ms: AtomicU64::new(u64::MAX),
                })
                .collect(),
        }
    }

    fn now(&self, loop_now: Micros) -> Micros {
        match self.origin {
            Some(origin) => origin.elapsed().as_micros() as Micros,
            None => loop_now,
        }
    }

    fn slot(&self, key: u64) -> &Slot {
        &self.slots[(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SLOTS]
    }

    /// A client idle close for `key`, of a connection idle `age_ms`:
    /// whether it is lazy already (it came right after a new connection);
    /// else it waits for the next use.
    pub fn client_closed(&self, key: u64, loop_now: Micros, age_ms: u64) -> bool {
        let now = self.now(loop_now);
        let slot = self.slot(key);
        let accepted = slot.accepted.load(Relaxed);
        if accepted != 0 && now.saturating_sub(accepted - 1) < LAZY_CLOSE_US {
            return true;
        }
        let mut extends = false;
        let _ = slot.closes.fetch_update(Relaxed, Relaxed, |old| {
            let (last, count) = unpack(old);
            extends = old != 0 && now.saturating_sub(last) < LAZY_CLOSE_US;
            Some(match extends {
                true => pack(now.max(last), count.saturating_add(1)),
                false => pack(now, 1),
            })
        });
        match extends {
            true => slot.youngest_ms.fetch_min(age_ms, Relaxed),
            false => slot.youngest_ms.swap(age_ms, Relaxed),
        };
        false
    }

    /// A new connection for `key`: the waiting closes it shows lazy.
    pub fn accepted(&self, key: u64, loop_now: Micros) -> Paired {
        let now = self.now(loop_now);
        let slot = self.slot(key);
        slot.accepted.store(now + 1, Relaxed);
        paired(slot, now)
    }

    /// A reuse for `key`: the waiting closes it shows lazy. Reads the
    /// clock only when closes are waiting.
    pub fn reused(&self, key: u64, loop_now: Micros) -> Paired {
        let slot = self.slot(key);
        if slot.closes.load(Relaxed) == 0 {
            return Paired::default();
        }
        paired(slot, self.now(loop_now))
    }
}

/// The waiting run, taken: its count and youngest age if it ended within
/// [`LAZY_CLOSE_US`] before `now`, else none (it was not lazy).
fn paired(slot: &Slot, now: Micros) -> Paired {
    let run = slot.closes.swap(0, Relaxed);
    let youngest = slot.youngest_ms.swap(u64::MAX, Relaxed);
    let (last, count) = unpack(run);
    match run != 0 && now.saturating_sub(last) < LAZY_CLOSE_US {
        true => Paired {
            count,
            youngest_ms: (youngest != u64::MAX).then_some(youngest),
        },
        false => Paired::default(),
    }
}

fn pack(time: Micros, count: u32) -> u64 {
    (time << COUNT_BITS) | u64::from(count.min((1 << COUNT_BITS) - 1))
}

fn unpack(run: u64) -> (Micros, u32) {
    (run >> COUNT_BITS, (run & ((1 << COUNT_BITS) - 1)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_closes_is_paired_by_the_next_use_from_any_worker() {
        let board = LazyBoard::local();
        // Two closes 40 µs apart, then a new connection 300 µs later (as
        // if on another worker: the board is all they share).
        assert!(!board.client_closed(7, 1_000_000, 2500));
        assert!(!board.client_closed(7, 1_000_040, 2400));
        let paired = board.accepted(7, 1_000_340);
        assert_eq!(paired.count, 2);
        assert_eq!(paired.youngest_ms, Some(2400), "the youngest close's age");
        // Taken once.
        assert_eq!(board.reused(7, 1_000_400), Paired::default());
        // A close right after a new connection is lazy at once.
        assert!(board.client_closed(7, 1_002_000, 900));
        // A close long before the use is not lazy.
        assert!(!board.client_closed(9, 2_000_000, 900));
        assert_eq!(board.reused(9, 2_000_000 + LAZY_CLOSE_US).count, 0);
        // Another key's closes are its own.
        assert!(!board.client_closed(11, 3_000_000, 900));
        assert_eq!(board.accepted(12, 3_000_100).count, 0);
        assert_eq!(board.reused(11, 3_000_200).count, 1);
    }

    #[test]
    fn a_shared_board_keeps_its_own_clock() {
        let board = LazyBoard::shared();
        // The loop times differ wildly (two workers' clocks); the board's
        // own clock pairs them.
        assert!(!board.client_closed(3, 5, 900));
        assert_eq!(board.accepted(3, 999_999_999).count, 1);
    }
}
