//! The document `/timers` answers and `/events` pushes: every worker's
//! snapshot, their lists merged into one total view, and the counters the
//! dashboard turns into rates. Built with serde from typed structs, once
//! per snapshot round however many clients share it.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::introspect::{AGE_SAMPLE, ConnCounts, KindCount, ListView, REST_BUCKETS, Snapshot};
use crate::peer_observer::PeerFindings;
use crate::peer_observer::peers::PeersSnapshot;
use crate::peer_observer::report::{PeersReport, ServerIdle};
use crate::shared::Remote;
use crate::stats::{CloseCause, HistogramData, TIMER_LATENESS_US, TimerKind};

/// The whole admin view at one snapshot round.
#[derive(Debug, Serialize)]
pub struct View {
    /// Wall-clock time of the round, ms since the Unix epoch.
    pub at_ms: u64,
    pub stopping: bool,
    /// Workers that answered, by index.
    pub workers: Vec<Snapshot>,
    /// All workers together.
    pub total: Total,
    pub counters: Counters,
    /// Who closes first: each client address at the idle boundary.
    pub peers: PeersReport,
}

/// The workers' views summed: lists of one duration merged.
#[derive(Debug, Serialize)]
pub struct Total {
    pub accepting: bool,
    pub ref_count: usize,
    pub stays_alive: bool,
    pub timers: usize,
    pub connections: ConnCounts,
    pub lists: Vec<ListView>,
}

/// Counters since start, summed over workers (rates are the page's job).
#[derive(Debug, Serialize)]
pub struct Counters {
    pub accepted: u64,
    pub refused: u64,
    /// Responses sent.
    pub responses: u64,
    /// Connections closed, by cause label.
    pub closed: BTreeMap<&'static str, u64>,
    /// Timers fired, by kind label.
    pub expirations: BTreeMap<&'static str, u64>,
    /// How late timers fired: bucket upper bounds (µs) and per-bucket
    /// counts (one more: beyond the last bound).
    pub lateness_bounds_us: &'static [u64],
    pub lateness_counts: Vec<u64>,
}

impl View {
    pub fn new(remote: &Remote, workers: Vec<Snapshot>) -> View {
        View {
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            stopping: remote.is_stopping(),
            total: Total::of(&workers),
            peers: peers_report(&workers),
            workers,
            counters: Counters::of(remote),
        }
    }

    /// The document as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "admin view did not serialize");
            b"{}".to_vec()
        })
    }
}

impl Total {
    fn of(workers: &[Snapshot]) -> Total {
        let mut connections = ConnCounts::default();
        for c in workers.iter().map(|w| &w.connections) {
            connections.reading += c.reading;
            connections.writing += c.writing;
            connections.idle += c.idle;
            connections.closing += c.closing;
        }
        let mut by_duration: BTreeMap<u64, Vec<&ListView>> = BTreeMap::new();
        for list in workers.iter().flat_map(|w| &w.lists) {
            by_duration.entry(list.duration_ms).or_default().push(list);
        }
        Total {
            accepting: workers.iter().any(|w| w.accepting),
            ref_count: workers.iter().map(|w| w.ref_count).sum(),
            stays_alive: workers.iter().any(|w| w.stays_alive),
            timers: workers.iter().map(|w| w.timers).sum(),
            connections,
            lists: by_duration.into_values().map(merge_lists).collect(),
        }
    }
}

/// The workers' peer tables merged, judged against the server's own idle
/// timeouts (as the first worker runs them).
pub fn peers_report(workers: &[Snapshot]) -> PeersReport {
    let server = workers.first().map_or(
        ServerIdle {
            advertised_timeout_s: None,
            idle_timeout_ms: 0,
        },
        |w| ServerIdle {
            advertised_timeout_s: w.timeouts.keep_alive_advertised_s,
            idle_timeout_ms: w.timeouts.keep_alive_ms,
        },
    );
    let merged = PeersSnapshot::merge(workers.iter().map(|w| PeerFindings::of(&w.findings).peers));
    PeersReport::new(&merged, server)
}

/// One list out of the same-duration lists of several workers: counts
/// summed, the oldest ages kept as the sample and the rest bucketed.
pub fn merge_lists(lists: Vec<&ListView>) -> ListView {
    let duration_ms = lists[0].duration_ms;
    let mut holds: BTreeMap<&'static str, usize> = BTreeMap::new();
    for held in lists.iter().flat_map(|l| &l.holds) {
        *holds.entry(held.kind).or_default() += held.count;
    }
    let mut holds: Vec<KindCount> = holds
        .into_iter()
        .map(|(kind, count)| KindCount { kind, count })
        .collect();
    holds.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(kind_order(a.kind).cmp(&kind_order(b.kind)))
    });

    let mut ages: Vec<u32> = lists
        .iter()
        .flat_map(|l| l.ages_ms.iter().copied())
        .collect();
    ages.sort_unstable_by(|a, b| b.cmp(a));
    let mut rest = vec![0u32; REST_BUCKETS];
    for list in &lists {
        for (sum, count) in rest.iter_mut().zip(&list.rest) {
            *sum += count;
        }
    }
    let bucket_ms = (duration_ms.max(1) as f64) / REST_BUCKETS as f64;
    for &age in ages.iter().skip(AGE_SAMPLE) {
        let bucket = (f64::from(age) / bucket_ms) as usize;
        rest[bucket.min(REST_BUCKETS - 1)] += 1;
    }
    ages.truncate(AGE_SAMPLE);
    if rest.iter().all(|&count| count == 0) {
        rest.clear();
    }
    let refed_timers = lists.iter().map(|l| l.refed_timers).sum();
    ListView {
        label: holds.iter().map(|k| k.kind).collect::<Vec<_>>().join(" + "),
        holds,
        duration_ms,
        length: lists.iter().map(|l| l.length).sum(),
        refed: refed_timers > 0,
        refed_timers,
        next_expiry_in_ms: lists
            .iter()
            .map(|l| l.next_expiry_in_ms)
            .min()
            .unwrap_or_default(),
        ages_ms: ages,
        rest,
    }
}

fn kind_order(label: &str) -> usize {
    TimerKind::ALL
        .iter()
        .position(|k| k.label() == label)
        .unwrap_or(usize::MAX)
}

impl Counters {
    fn of(remote: &Remote) -> Counters {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        let sum =
            |read: &dyn Fn(&crate::stats::Stats) -> u64| remote.stats().map(read).sum::<u64>();
        Counters {
            accepted: sum(&|s| s.accepted.load(relaxed)),
            refused: sum(&|s| s.refused.load(relaxed)),
            responses: sum(&|s| s.responses().map(|(_, _, n)| n).sum()),
            closed: CloseCause::ALL
                .iter()
                .map(|&cause| (cause.label(), sum(&|s| s.closed_by(cause))))
                .collect(),
            expirations: TimerKind::ALL
                .iter()
                .map(|&kind| (kind.label(), sum(&|s| s.timer_expirations(kind))))
                .collect(),
            lateness_bounds_us: &TIMER_LATENESS_US,
            lateness_counts: HistogramData::sum_of(
                &TIMER_LATENESS_US,
                remote.stats().map(|s| s.timer_lateness.read()),
            )
            .counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(duration_ms: u64, holds: &[(&'static str, usize)], ages: &[u32]) -> ListView {
        ListView {
            label: String::new(),
            holds: holds
                .iter()
                .map(|&(kind, count)| KindCount { kind, count })
                .collect(),
            duration_ms,
            length: holds.iter().map(|h| h.1).sum(),
            refed: false,
            refed_timers: 0,
            next_expiry_in_ms: i64::from(duration_ms as u32 - ages[0]),
            ages_ms: ages.to_vec(),
            rest: Vec::new(),
        }
    }

    #[test]
    fn lists_of_one_duration_merge_across_workers() {
        let a = list(6000, &[("keep-alive", 2)], &[5000, 100]);
        let b = list(
            6000,
            &[("keep-alive", 1), ("headers", 2)],
            &[5900, 3000, 10],
        );
        let merged = merge_lists(vec![&a, &b]);
        assert_eq!(merged.length, 5);
        assert_eq!(merged.label, "keep-alive + headers");
        assert_eq!(merged.ages_ms, [5900, 5000, 3000, 100, 10]);
        assert_eq!(merged.next_expiry_in_ms, 100);
        assert!(merged.rest.is_empty());
    }

    #[test]
    fn a_merged_sample_keeps_the_oldest_and_buckets_the_rest() {
        let ages: Vec<u32> = (0..AGE_SAMPLE as u32).map(|i| 3200 - i).collect();
        let a = list(3200, &[("keep-alive", AGE_SAMPLE)], &ages);
        let b = list(3200, &[("keep-alive", 2)], &[50, 150]);
        let merged = merge_lists(vec![&a, &b]);
        assert_eq!(merged.ages_ms.len(), AGE_SAMPLE);
        assert_eq!(merged.ages_ms[0], 3200);
        assert_eq!(merged.rest.len(), REST_BUCKETS);
        // 50 and 150 ms in 100 ms buckets.
        assert_eq!((merged.rest[0], merged.rest[1]), (1, 1));
    }
}
