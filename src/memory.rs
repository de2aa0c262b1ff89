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
    /// after which the worker must call [`MemoryReturn::retry`], when a
    /// trim is due but must wait.
    pub fn freed(&mut self, bytes: usize, now: Micros) -> Option<u64> {
        self.freed += bytes;
        if self.freed < TRIM_AFTER_BYTES {
            return None;
        }
        self.trim_or_defer(now)
    }

    /// The retry timer fired: trim whatever was freed since the last trim.
    pub fn retry(&mut self, now: Micros) -> Option<u64> {
        self.retry_armed = false;
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
        assert_eq!(memory.retry(10 + SECOND), None);
        assert_eq!(memory.last_trim, Some(10 + SECOND), "the retry trimmed");
        assert_eq!(memory.freed, 0);

        // A retry with nothing freed does nothing.
        assert_eq!(memory.retry(10 + 3 * SECOND), None);
        assert_eq!(memory.last_trim, Some(10 + SECOND));
    }
}
