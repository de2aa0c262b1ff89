//! Handing freed memory back to the system once a burst is over.
//!
//! glibc's malloc keeps what a thread frees in that thread's arena and
//! returns only the free space at the very top of each heap, so after a
//! burst of connections the resident size stays near its peak although
//! nearly all of it is free (measured with `scripts/faults.py partial`:
//! 2,000 connections with bodies in flight, then none: 100 MB still
//! resident). `malloc_trim` releases the free pages of every arena.
//!
//! A worker reports what its buffer pool turned away ([`MemoryReturn::freed`])
//! and trims once [`TRIM_AFTER_BYTES`] have been freed, at most once per
//! [`TRIM_EVERY_MS`]. What is freed just after a trim is left to a one-shot
//! retry the worker enrolls as an unref'd timer, so an idle server with
//! nothing to give back never wakes up for it.
//!
//! A burst can also leave the pool holding more spare sets than it turned
//! away (a hundred answers waiting on an upstream at once, say): the
//! worker then asks for the same one-shot timer ([`MemoryReturn::surplus`]),
//! frees the spares that went unused until it fired, and trims whatever
//! that freed ([`MemoryReturn::settled`]), however little: the burst is over.

use crate::timers::Micros;

/// Freed bytes that make a trim worth its cost (a walk over the arenas).
pub const TRIM_AFTER_BYTES: usize = 4 << 20;
/// Least time between two trims.
pub const TRIM_EVERY_MS: u64 = 1000;

/// One worker's account of memory freed but maybe not yet returned.
#[derive(Debug, Default)]
pub struct MemoryReturn {
    /// Bytes freed since the last trim.
    freed: usize,
    /// Loop time of the last trim.
    last_trim: Option<Micros>,
    /// A retry is enrolled in the worker's timer lists.
    retry_armed: bool,
}

impl MemoryReturn {
    /// `bytes` more were freed at loop time `now`. Trims if enough has
    /// been freed and the last trim is old enough; returns the delay in ms
    /// after which the worker must call [`MemoryReturn::settled`], when a
    /// trim is due but must wait.
    pub fn freed(&mut self, bytes: usize, now: Micros) -> Option<u64> {
        self.freed += bytes;
        if self.freed < TRIM_AFTER_BYTES {
            return None;
        }
        self.trim_or_defer(now)
    }

    /// The buffer pool holds spares beyond what it settles at: the timer
    /// that frees the unused ones is due in [`TRIM_EVERY_MS`], unless it is
    /// armed already.
    pub fn surplus(&mut self) -> Option<u64> {
        if self.retry_armed {
            return None;
        }
        self.retry_armed = true;
        Some(TRIM_EVERY_MS)
    }

    /// The one-shot timer fired (a retry, or the pool's surplus) and the
    /// pool freed `bytes` of unused spares: trim what was freed since the
    /// last trim, however little, unless a trim was too recent (then the
    /// timer is asked for again).
    pub fn settled(&mut self, bytes: usize, now: Micros) -> Option<u64> {
        self.retry_armed = false;
        self.freed += bytes;
        if self.freed == 0 {
            return None;
        }
        self.trim_or_defer(now)
    }

    fn trim_or_defer(&mut self, now: Micros) -> Option<u64> {
        let allowed_at = self.last_trim.map_or(0, |at| at + TRIM_EVERY_MS * 1000);
        if now >= allowed_at {
            trim_allocator(self.freed);
            self.freed = 0;
            self.last_trim = Some(now);
            return None;
        }
        if self.retry_armed {
            return None;
        }
        self.retry_armed = true;
        Some((allowed_at - now).div_ceil(1000))
    }
}

/// Asks the allocator to give its free pages back to the system.
fn trim_allocator(freed: usize) {
    let started = std::time::Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and has no preconditions; glibc
    // locks each arena while it releases that arena's free pages, so it is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    tracing::debug!(
        freed,
        took_us = started.elapsed().as_micros() as u64,
        "returned free memory to the system"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Micros = 1_000_000;

    #[test]
    fn a_surplus_asks_for_one_timer_and_its_freed_spares_are_trimmed() {
        let mut memory = MemoryReturn::default();
        assert_eq!(memory.surplus(), Some(TRIM_EVERY_MS));
        assert_eq!(memory.surplus(), None, "armed once");
        assert_eq!(memory.settled(0, SECOND), None, "nothing freed: no trim");
        assert_eq!(memory.last_trim, None);
        assert_eq!(
            memory.surplus(),
            Some(TRIM_EVERY_MS),
            "disarmed by the fire"
        );
        assert_eq!(memory.settled(64 << 10, 2 * SECOND), None);
        assert_eq!(memory.last_trim, Some(2 * SECOND), "little, but trimmed");
        assert_eq!(memory.freed, 0);
    }

    #[test]
    fn trims_once_enough_is_freed_and_at_most_once_a_second() {
        let mut memory = MemoryReturn::default();
        assert_eq!(memory.freed(TRIM_AFTER_BYTES - 1, 0), None);
        assert_eq!(memory.last_trim, None, "not enough yet");
        assert_eq!(memory.freed(1, 10), None);
        assert_eq!(memory.last_trim, Some(10), "trimmed");
        assert_eq!(memory.freed, 0);

        // More freed right after: deferred to a retry, armed once.
        assert_eq!(memory.freed(TRIM_AFTER_BYTES, 10 + SECOND / 4), Some(750));
        assert_eq!(memory.freed(TRIM_AFTER_BYTES, 10 + SECOND / 2), None);
        assert_eq!(memory.last_trim, Some(10));
        assert_eq!(memory.settled(0, 10 + SECOND), None);
        assert_eq!(memory.last_trim, Some(10 + SECOND), "the retry trimmed");
        assert_eq!(memory.freed, 0);

        // A retry with nothing freed does nothing.
        assert_eq!(memory.settled(0, 10 + 3 * SECOND), None);
        assert_eq!(memory.last_trim, Some(10 + SECOND));
    }
}
