//! What a worker shows of itself: the admin snapshot of its timer lists,
//! connections by what they are doing, and what its observer learned.

use super::Worker;
use crate::conn::Activity;
use crate::introspect::{ConnCounts, Snapshot, Timeouts, list_views};
use crate::stats::TimerKind;
use crate::timer_event::TimerEvent;
use crate::timers::Micros;

impl Worker {
    /// The admin view of this worker, at this turn.
    pub(super) fn snapshot(&self, now: Micros) -> Snapshot {
        let started = std::time::Instant::now();
        let timers = &self.resources.timers;
        let lists = list_views(timers, now, |event| self.timer_kind(event));
        Snapshot {
            worker: self.index,
            accepting: self.listener.is_some(),
            ref_count: timers.ref_count(),
            stays_alive: self.stays_alive(),
            timers: timers.len(),
            date: self.resources.date.cached().map(str::to_owned),
            connections: self.connection_counts(),
            upstream_open: self.resources.upstreams.counts().0,
            upstream_idle: self.resources.upstreams.counts().1,
            upstream_idle_limit_ms: self.resources.upstreams.idle_limit_ms(),
            timeouts: Timeouts::of(&self.settings),
            lists,
            findings: self.observer.findings(now),
            cost_us: started.elapsed().as_micros() as u64,
        }
    }

    /// What a timer stands for, asking its connection for theirs.
    pub(super) fn timer_kind(&self, event: &TimerEvent) -> TimerKind {
        match *event {
            TimerEvent::Conn { key, slot } => self
                .conns
                .get(key as usize)
                .map_or(TimerKind::Request, |conn| conn.timer_kind(slot)),
            TimerEvent::DateExpired => TimerKind::Date,
            TimerEvent::AcceptResume => TimerKind::AcceptPause,
            TimerEvent::ReturnMemory => TimerKind::MemoryReturn,
            TimerEvent::UpstreamIdle { .. } => TimerKind::UpstreamIdle,
            // The admin's round and ticks: answers waiting, as `/delay`'s
            // (on the admin worker, which is never asked for a snapshot).
            TimerEvent::Admin(_) => TimerKind::Delay,
        }
    }

    /// Open connections by what they are doing.
    pub(super) fn connection_counts(&self) -> ConnCounts {
        let mut counts = ConnCounts::default();
        for (_, conn) in &self.conns {
            let count = match conn.state().activity() {
                Activity::Reading => &mut counts.reading,
                Activity::Writing => &mut counts.writing,
                Activity::Idle => &mut counts.idle,
                Activity::Closing => &mut counts.closing,
            };
            *count += 1;
        }
        counts
    }
}
