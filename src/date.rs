//! The cached `Date` header value (RFC 9110 §5.6.7, IMF-fixdate via httpdate).
//!
//! Formatting a date costs a wall-clock read and a few hundred nanoseconds,
//! so a worker formats it at most once per second: the value stays valid
//! until an unref'd timer, enrolled in the worker's own timer lists and
//! aligned to the next wall-clock second boundary, invalidates it. The timer
//! is armed only when a response asks for the date, so an idle server never
//! wakes up for it, and being unref'd it never keeps a draining server alive.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::timers::{Micros, TimerLists};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// `wall` as an IMF-fixdate, formatted in place (no allocation): for a
/// listener that answers too seldom to keep a cache (the admin's, the
/// plain-HTTP refusal on a TLS port).
pub fn format(wall: SystemTime) -> [u8; DATE_LEN] {
    let mut value = [0u8; DATE_LEN];
    let mut cursor = std::io::Cursor::new(&mut value[..]);
    let written = write!(cursor, "{}", httpdate::HttpDate::from(wall));
    debug_assert!(written.is_ok() && cursor.position() as usize == DATE_LEN);
    value
}

/// One worker's cached `Date` value.
#[derive(Debug, Default)]
pub struct DateCache {
    value: [u8; DATE_LEN],
    /// The Unix second `value` shows.
    unix_second: u64,
    /// True from formatting until the invalidation timer fires.
    valid: bool,
}

impl DateCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current date, formatting it (and arming the invalidation timer,
    /// carrying `event`) when the cached value has been invalidated.
    pub fn current<E>(
        &mut self,
        timers: &mut TimerLists<E>,
        now: Micros,
        event: E,
    ) -> &[u8; DATE_LEN] {
        if !self.valid {
            let delay_ms = self.refresh(SystemTime::now());
            timers.enroll(now, delay_ms, false, event);
        }
        &self.value
    }

    /// Formats `wall` and returns the milliseconds until the next wall-clock
    /// second boundary (1..=1000): when the invalidation timer must fire.
    pub fn refresh(&mut self, wall: SystemTime) -> u64 {
        // Formatted in place: no allocation, even once a second.
        self.value = format(wall);
        self.valid = true;
        let since = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        self.unix_second = since.as_secs();
        let into_second = since.subsec_micros();
        // Round up: firing a little after the boundary is fine, before is not.
        (1_000_000 - u64::from(into_second)).div_ceil(1000)
    }

    /// The Unix second of the last formatted value (the access log's time).
    pub fn unix_second(&self) -> u64 {
        self.unix_second
    }

    /// Called when the invalidation timer fires.
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    /// Whether a formatted value is cached (the admin view shows it).
    pub fn cached(&self) -> Option<&str> {
        self.valid
            .then(|| std::str::from_utf8(&self.value).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_imf_fixdate_and_aligns_to_the_next_second() {
        let mut cache = DateCache::new();
        let wall = UNIX_EPOCH + Duration::from_millis(784_111_777_250);
        let delay = cache.refresh(wall);
        assert_eq!(cache.cached(), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(delay, 750);
        let on_boundary = UNIX_EPOCH + Duration::from_secs(784_111_778);
        assert_eq!(cache.refresh(on_boundary), 1000);
    }

    #[test]
    fn one_unrefd_timer_per_second_at_most() {
        let mut cache = DateCache::new();
        let mut timers = TimerLists::new();
        let first = *cache.current(&mut timers, 0, 1u8);
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.ref_count(), 0, "the date timer must be unref'd");
        // Asking again while valid arms nothing more.
        assert_eq!(*cache.current(&mut timers, 10, 1u8), first);
        assert_eq!(timers.len(), 1);
        // The timer fires within a second and invalidates the value.
        let due = timers.expire(1_000_000).expect("date timer due");
        assert_eq!(due.payload, 1);
        cache.invalidate();
        assert_eq!(cache.cached(), None);
        cache.current(&mut timers, 1_000_000, 1u8);
        assert_eq!(timers.len(), 1);
    }
}
