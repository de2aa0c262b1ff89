//! A worker's loop clock and its one real timer.
//!
//! The clock is CLOCK_MONOTONIC in microseconds since the worker started,
//! read once per loop turn. The alarm is a timerfd on the same clock, armed
//! at the earliest expiry of the worker's timer lists and registered in its
//! poll, so one kernel timer stands for every timeout, as in Node.
//!
//! Why not simply the poll timeout: epoll_wait counts whole milliseconds
//! (mio rounds up), and Linux lets a wait of T oversleep by T/1000 (the
//! timer slack select, poll and epoll get: 2 ms on a 2 s wait, 65 ms on a
//! 65 s one). A timerfd fires at its absolute deadline without that slack.
//! It is re-armed only when the earliest expiry changes (lazy list keys make
//! that rare: refreshes never move it) and disarmed when no timer is left,
//! so an idle server never wakes up.
//!
//! [`LoopTime`] is the clock alone, which a connection borrows to place
//! a kernel receive stamp on the loop's timeline. [`RateLimit`] spaces
//! out repeated warnings by loop time.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::SystemTime;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{
    ClockId, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, clock_gettime,
    timerfd_create, timerfd_settime,
};

use crate::timers::Micros;

/// The loop clock and its alarm.
pub struct LoopClock {
    time: LoopTime,
    alarm: OwnedFd,
    /// Where the alarm is set, in loop time; `None` when disarmed.
    armed_at: Option<Micros>,
}

impl LoopClock {
    /// A clock that reads `start` now (see
    /// [`crate::Settings::loop_clock_start`]).
    pub fn starting_at(start: Micros) -> io::Result<Self> {
        let alarm = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        Ok(LoopClock {
            time: LoopTime::starting_at(start),
            alarm,
            armed_at: None,
        })
    }

    /// Registers the alarm in the worker's poll under `token`.
    pub fn register(&self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut SourceFd(&self.alarm.as_raw_fd()),
            token,
            Interest::READABLE,
        )
    }

    /// Microseconds since the worker started (see [`LoopTime::now`]).
    pub fn now(&self) -> Micros {
        self.time.now()
    }

    /// The clock's reading, without its alarm: for a connection that must
    /// place a kernel timestamp on the loop's timeline.
    pub fn time(&self) -> LoopTime {
        self.time
    }

    /// Sets the alarm to fire at loop time `at`, or disarms it (`None`).
    /// Costs a syscall only when `at` changes. Re-arming also resets the
    /// timerfd's expiry count, so it need never be read.
    pub fn arm(&mut self, at: Option<Micros>) -> io::Result<()> {
        if at == self.armed_at {
            return Ok(());
        }
        let value = match at {
            // A zero it_value disarms; the absolute deadline is never zero
            // because origin is a real CLOCK_MONOTONIC reading.
            None => Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            Some(at) => {
                let LoopTime { origin, start } = self.time;
                let since_origin = at.saturating_sub(start);
                let nanos = origin.tv_nsec as i128 + i128::from(since_origin) * 1000;
                Timespec {
                    tv_sec: origin.tv_sec + (nanos / 1_000_000_000) as i64,
                    tv_nsec: (nanos % 1_000_000_000) as i64,
                }
            }
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        timerfd_settime(&self.alarm, TimerfdTimerFlags::ABSTIME, &spec)?;
        self.armed_at = at;
        Ok(())
    }
}

/// Loop time itself: CLOCK_MONOTONIC in microseconds from an origin.
/// A copy reads the same clock as the worker's [`LoopClock`].
#[derive(Debug, Clone, Copy)]
pub struct LoopTime {
    /// CLOCK_MONOTONIC when the worker started: loop time `start`.
    origin: Timespec,
    /// The loop time at `origin`: zero, unless a test starts the clock
    /// just before a wrap point of some narrower stamp.
    start: Micros,
}

impl Default for LoopTime {
    /// A clock that reads zero now.
    fn default() -> Self {
        LoopTime::starting_at(0)
    }
}

/// Two loop readings further apart than this around a wall-clock reading
/// mean the thread was preempted between them: the pair is read again.
const PAIR_WITHIN_US: Micros = 200;

impl LoopTime {
    fn starting_at(start: Micros) -> Self {
        LoopTime {
            origin: clock_gettime(ClockId::Monotonic),
            start,
        }
    }

    /// Microseconds since the origin (rounded down, so a deadline reads as
    /// reached only once it truly has).
    pub fn now(&self) -> Micros {
        let now = clock_gettime(ClockId::Monotonic);
        let seconds = (now.tv_sec - self.origin.tv_sec) as i128;
        let nanos = seconds * 1_000_000_000 + (now.tv_nsec - self.origin.tv_nsec) as i128;
        self.start.saturating_add((nanos / 1000).max(0) as Micros)
    }

    /// The loop time at which the wall clock read `wall` (a kernel
    /// receive stamp, which is CLOCK_REALTIME): both clocks are read now,
    /// back to back (again if a preemption split them), and `wall` is
    /// placed that long before. Never later than now.
    pub fn at_wall(&self, wall: SystemTime) -> Micros {
        let mut pair = (self.now(), SystemTime::now());
        for _ in 0..3 {
            let after = self.now();
            if after.saturating_sub(pair.0) <= PAIR_WITHIN_US {
                break;
            }
            pair = (after, SystemTime::now());
        }
        let (now, wall_now) = pair;
        let ago = wall_now.duration_since(wall).unwrap_or_default();
        now.saturating_sub(ago.as_micros() as Micros)
    }
}

/// At most one event per period of loop time: for warnings that could
/// otherwise repeat every turn.
#[derive(Debug)]
pub struct RateLimit {
    period: Micros,
    last: Option<Micros>,
}

impl RateLimit {
    pub fn every_ms(ms: u64) -> Self {
        RateLimit {
            period: ms * 1000,
            last: None,
        }
    }

    /// Whether an event may happen at `now` (then it is counted as done).
    pub fn allow(&mut self, now: Micros) -> bool {
        let quiet = self.last.is_some_and(|at| now < at + self.period);
        if !quiet {
            self.last = Some(now);
        }
        !quiet
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One wait, again if a signal cut it short (other tests in this
    /// process may take signals).
    fn poll_once(poll: &mut mio::Poll, events: &mut mio::Events, timeout: Duration) {
        loop {
            match poll.poll(events, Some(timeout)) {
                Err(e) if crate::readiness::interrupted(&e) => continue,
                result => return result.unwrap(),
            }
        }
    }

    #[test]
    fn the_alarm_fires_at_its_deadline_not_before() {
        let mut clock = LoopClock::starting_at(0).unwrap();
        let mut poll = mio::Poll::new().unwrap();
        clock.register(poll.registry(), Token(0)).unwrap();
        let mut events = mio::Events::with_capacity(4);
        let deadline = clock.now() + 30_000;
        clock.arm(Some(deadline)).unwrap();
        poll_once(&mut poll, &mut events, Duration::from_secs(5));
        assert!(events.iter().any(|e| e.token() == Token(0)), "alarm fired");
        assert!(clock.now() >= deadline, "never before its deadline");

        // Disarmed, it stays quiet.
        clock.arm(None).unwrap();
        poll_once(&mut poll, &mut events, Duration::from_millis(100));
        assert!(events.is_empty());
    }

    #[test]
    fn a_clock_started_late_reads_from_there_and_fires_on_time() {
        let start = (1u64 << 32) * 1000 - 10_000; // 10 ms before u32 ms wrap
        let mut clock = LoopClock::starting_at(start).unwrap();
        let first = clock.now();
        assert!((start..start + 5_000_000).contains(&first), "{first}");
        let mut poll = mio::Poll::new().unwrap();
        clock.register(poll.registry(), Token(0)).unwrap();
        let mut events = mio::Events::with_capacity(4);
        let deadline = first + 30_000;
        clock.arm(Some(deadline)).unwrap();
        poll_once(&mut poll, &mut events, Duration::from_secs(5));
        assert!(events.iter().any(|e| e.token() == Token(0)), "alarm fired");
        let fired = clock.now();
        assert!(fired >= deadline, "never before its deadline");
        assert!(
            fired < deadline + 2_000_000,
            "fired {fired}, due {deadline}"
        );
    }

    #[test]
    fn a_rate_limit_allows_one_event_per_period() {
        let mut limit = RateLimit::every_ms(10);
        assert!(limit.allow(5));
        assert!(!limit.allow(5));
        assert!(!limit.allow(10_004));
        assert!(limit.allow(10_005));
        assert!(!limit.allow(20_000));
    }
}
