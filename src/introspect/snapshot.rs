//! The snapshot a worker builds when asked: its timer lists, each labelled
//! with what it holds and drawn as ages (the oldest [`AGE_SAMPLE`] exactly,
//! the rest as a histogram), its ref count, cached Date and connections by
//! state. Serialized as-is by `/timers` and the dashboard feed.
//!
//! Built on demand, off the hot path: one walk over every timer (no
//! allocation per timer or connection; a few `Vec`s per list).

use serde::Serialize;

use crate::config::Settings;
use crate::observe::Findings;
use crate::stats::TimerKind;
use crate::timers::{Micros, TimerLists};

/// How many of a list's oldest timers are sampled with their exact age.
pub const AGE_SAMPLE: usize = 256;
/// The ages of the timers past the sample, in this many equal buckets
/// over the list's duration.
pub const REST_BUCKETS: usize = 32;

/// Connections by what they are doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ConnCounts {
    /// Accepted or between reads of a request.
    pub reading: u64,
    /// Writing a response, or waiting to (`/delay`).
    pub writing: u64,
    /// Persistent, between requests.
    pub idle: u64,
    /// Answered for the last time, draining before the close.
    pub closing: u64,
}

/// How many timers of one kind a list holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindCount {
    pub kind: &'static str,
    pub count: usize,
}

/// One timer list as the admin view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListView {
    /// What the list holds, in the words a user knows: `keep-alive`, or
    /// `headers + keep-alive` when two kinds share a duration (most first).
    pub label: String,
    pub holds: Vec<KindCount>,
    pub duration_ms: u64,
    pub length: usize,
    /// Whether any of its timers is ref'd (keeps the process alive).
    pub refed: bool,
    pub refed_timers: usize,
    /// Until the head's deadline (negative: overdue, about to fire).
    pub next_expiry_in_ms: i64,
    /// Ages of the oldest timers, oldest first, in ms (at most [`AGE_SAMPLE`]).
    pub ages_ms: Vec<u32>,
    /// The rest by age: bucket `i` covers `[i, i + 1) * duration / REST_BUCKETS`
    /// (the last also holds anything overdue). Empty when all were sampled.
    pub rest: Vec<u32>,
}

/// The timeouts a worker runs on (after any reload), in ms; `None` is off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Timeouts {
    /// Advertised as `Keep-Alive: timeout=N`; `None`: keep-alive is off.
    pub keep_alive_advertised_s: Option<u64>,
    /// What an idle connection is really kept: the timeout plus its buffer.
    pub keep_alive_ms: u64,
    pub inactivity_ms: Option<u64>,
    pub headers_ms: Option<u64>,
    pub request_ms: Option<u64>,
    pub shutdown_ms: Option<u64>,
}

impl Timeouts {
    pub fn of(settings: &Settings) -> Self {
        Timeouts {
            keep_alive_advertised_s: settings.keep_alive_advertised_secs,
            keep_alive_ms: settings.keep_alive_ms,
            inactivity_ms: settings.inactivity_ms,
            headers_ms: settings.headers_ms,
            request_ms: settings.request_ms,
            shutdown_ms: settings.shutdown_ms,
        }
    }
}

/// A worker's state at one loop turn.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub worker: usize,
    /// Its listener is open (the "handle" that keeps a serving loop alive).
    pub accepting: bool,
    /// Ref'd timers: what a draining worker waits for.
    pub ref_count: usize,
    /// Whether the loop would keep running if asked to stop now: it stays
    /// while it listens or while any ref'd timer is left (Node's rule).
    pub stays_alive: bool,
    pub timers: usize,
    /// The cached `Date` value, if a response formatted one this second.
    pub date: Option<String>,
    pub connections: ConnCounts,
    /// Its connections to the upstream (`--upstream`): open, and of them
    /// idle in its pool.
    pub upstream_open: usize,
    pub upstream_idle: usize,
    /// How long its pool keeps an idle upstream connection now, in ms:
    /// `--upstream-idle-timeout`, or less once the service showed or
    /// said it keeps them less (0: not pooled at all).
    pub upstream_idle_limit_ms: u64,
    pub timeouts: Timeouts,
    /// Sorted by duration.
    pub lists: Vec<ListView>,
    /// What building this snapshot cost the worker, in µs.
    pub cost_us: u64,
    /// What its observer has learned (the peer observer's
    /// `PeerFindings`, in a server), passed on unread.
    #[serde(skip)]
    pub findings: Findings,
}

/// Every list of `timers` at `now`, sorted by duration, each timer
/// classified by `kind_of`.
pub fn list_views<T>(
    timers: &TimerLists<T>,
    now: Micros,
    kind_of: impl Fn(&T) -> TimerKind,
) -> Vec<ListView> {
    let mut views: Vec<ListView> = timers
        .lists()
        .map(|info| {
            let mut kinds = [0usize; TimerKind::COUNT];
            let mut ages_ms = Vec::with_capacity(info.len.min(AGE_SAMPLE));
            let mut rest = Vec::new();
            if info.len > AGE_SAMPLE {
                rest.resize(REST_BUCKETS, 0u32);
            }
            let duration_us = info.duration_ms.saturating_mul(1000).max(1);
            for (i, timer) in timers.walk_list(info.duration_ms).enumerate() {
                kinds[kind_of(timer.payload).index()] += 1;
                let age = now.saturating_sub(timer.start);
                if i < AGE_SAMPLE {
                    ages_ms.push(u32::try_from(age / 1000).unwrap_or(u32::MAX));
                } else {
                    let bucket = (age.saturating_mul(REST_BUCKETS as u64) / duration_us) as usize;
                    rest[bucket.min(REST_BUCKETS - 1)] += 1;
                }
            }
            let holds = held_kinds(&kinds);
            ListView {
                label: holds.iter().map(|k| k.kind).collect::<Vec<_>>().join(" + "),
                holds,
                duration_ms: info.duration_ms,
                length: info.len,
                refed: info.refed > 0,
                refed_timers: info.refed,
                next_expiry_in_ms: (info.next_expiry as i64 - now as i64) / 1000,
                ages_ms,
                rest,
            }
        })
        .collect();
    views.sort_by_key(|list| list.duration_ms);
    views
}

/// The kinds present, most numerous first (ties in [`TimerKind`] order).
fn held_kinds(kinds: &[usize; TimerKind::COUNT]) -> Vec<KindCount> {
    let mut held: Vec<(TimerKind, usize)> = TimerKind::ALL
        .iter()
        .map(|&kind| (kind, kinds[kind.index()]))
        .filter(|&(_, count)| count > 0)
        .collect();
    held.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    held.into_iter()
        .map(|(kind, count)| KindCount {
            kind: kind.label(),
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_labelled_by_what_they_hold_and_drawn_by_age() {
        let mut timers = TimerLists::new();
        // 60 s: two headers deadlines and one keep-alive share a duration.
        timers.enroll(0, 60_000, false, TimerKind::Headers);
        timers.enroll(1_000_000, 60_000, false, TimerKind::KeepAlive);
        timers.enroll(2_000_000, 60_000, true, TimerKind::Headers);
        // A long keep-alive list: 300 timers 100 ms apart.
        for i in 0..300u64 {
            timers.enroll(i * 100_000, 65_000, false, TimerKind::KeepAlive);
        }
        timers.enroll(0, 1_000, false, TimerKind::Date);
        let now = 30_000_000;
        let views = list_views(&timers, now, |kind| *kind);

        let labels: Vec<&str> = views.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["date", "headers + keep-alive", "keep-alive"]);
        let shared = &views[1];
        assert_eq!(shared.length, 3);
        assert_eq!((shared.refed, shared.refed_timers), (true, 1));
        assert_eq!(shared.ages_ms, [30_000, 29_000, 28_000], "oldest first");
        assert!(shared.rest.is_empty());
        assert_eq!(shared.next_expiry_in_ms, 30_000);
        assert_eq!(
            shared.holds[0],
            KindCount {
                kind: "headers",
                count: 2
            }
        );

        let long = &views[2];
        assert_eq!(long.ages_ms.len(), AGE_SAMPLE);
        assert_eq!(long.ages_ms[0], 30_000);
        assert_eq!(long.rest.len(), REST_BUCKETS);
        assert_eq!(long.rest.iter().sum::<u32>(), 300 - AGE_SAMPLE as u32);
        // The 44 youngest are 0.1 s to 4.4 s old: the first buckets of 65 s / 32.
        assert_eq!(long.rest[0] + long.rest[1] + long.rest[2], 44);
        // The date list is overdue by 29 s.
        assert!(views[0].next_expiry_in_ms < 0);
    }
}
