//! The `/peers` document: each peer's figures in milliseconds, the
//! estimate of its own idle timeout, and a verdict on whether it races the
//! server at the idle boundary, with one sentence of advice.
//!
//! - The estimate is where the peer's idle closes cluster: the densest run
//!   of its latest close ages that lie within 5% (at least 20 ms) of each
//!   other, and the median of that run. Closes younger than
//!   [`MIN_TIMEOUT_MS`] are a client done with the connection, not timing
//!   it out, and are left out.
//! - `race`: requests arrived after the server's idle FIN, or the peer
//!   reused connections after the advertised `Keep-Alive: timeout` had
//!   passed. `at risk`: reuses came within 100 ms of the server's deadline,
//!   or the peer keeps idle connections at least as long as the server
//!   promises. Otherwise `ok`.

use serde::Serialize;

use super::peers::{PeerStats, PeersSnapshot};

/// Close ages below this are not idle timeouts.
pub const MIN_TIMEOUT_MS: u32 = 100;
/// Ages within this fraction of the run's first are one cluster...
const CLUSTER_FRACTION: u32 = 20; // 1/20 = 5%
/// ...or within this many ms, whichever is wider.
const CLUSTER_MIN_MS: u32 = 20;

/// The server's own idle timeouts, which a peer's are judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServerIdle {
    /// What `Keep-Alive: timeout=` promises, in seconds (`None`: nothing).
    pub advertised_timeout_s: Option<u64>,
    /// When the server really closes an idle connection.
    pub idle_timeout_ms: u64,
}

impl ServerIdle {
    /// The timeouts as a peer met them: the real idle timeout no longer
    /// than the youngest idle connection the server closed under it (a
    /// `ka=` control may have shortened it for that peer's connections).
    pub fn as_met_by(self, stats: &PeerStats) -> ServerIdle {
        let met_ms = stats.server_idle_age_min_us.map(|us| us / 1000);
        ServerIdle {
            idle_timeout_ms: met_ms.map_or(self.idle_timeout_ms, |ms| ms.min(self.idle_timeout_ms)),
            ..self
        }
    }

    /// The longest a pool in front should keep an idle connection: under
    /// both the promise and the real timeout, by a margin of a second (a
    /// quarter of the timeout when that is shorter).
    pub fn safe_client_idle_ms(self) -> u64 {
        let promised = self.advertised_timeout_s.map_or(self.idle_timeout_ms, |s| {
            (s * 1000).min(self.idle_timeout_ms)
        });
        promised.saturating_sub((promised / 4).min(1000))
    }
}

/// A peer's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    #[serde(rename = "ok")]
    Ok,
    #[serde(rename = "at risk")]
    AtRisk,
    #[serde(rename = "race")]
    Race,
}

/// p50 / p99 / max of a duration, in ms (`None` before any sample).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// p50 / max of a duration, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Middle {
    pub p50: Option<f64>,
    pub max: Option<f64>,
}

/// A maximum, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Max {
    pub max: Option<f64>,
}

/// One peer (or "other") as `/peers` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerView {
    /// The client address, or `other` for the peers folded together.
    pub addr: String,
    /// Seconds since anything of it was last seen.
    pub seen_ago_s: f64,
    pub connections: u64,
    pub requests: u64,
    pub client_idle_closes: u64,
    pub client_idle_timeout_ms: Option<u64>,
    pub server_idle_closes: u64,
    pub reuse_gap_ms: Spread,
    pub near_misses: u64,
    pub reuses_past_advertised: u64,
    pub late_requests: u64,
    pub late_request_delay_ms: Max,
    pub peer_close_delay_ms: Middle,
    pub verdict: Verdict,
    pub advice: String,
}

/// The whole `/peers` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeersReport {
    pub server: ServerIdle,
    /// Most recently seen first; "other" last, when it has anything.
    pub peers: Vec<PeerView>,
}

impl PeersReport {
    pub fn new(snapshot: &PeersSnapshot, server: ServerIdle) -> Self {
        let mut peers: Vec<PeerView> = snapshot
            .peers
            .iter()
            .map(|peer| {
                let ago = peer.seen_ago_us as f64 / 1e6;
                PeerView::new(peer.addr.to_string(), ago, &peer.stats, server)
            })
            .collect();
        if snapshot.other != PeerStats::default() {
            peers.push(PeerView::new("other".into(), 0.0, &snapshot.other, server));
        }
        PeersReport { server, peers }
    }
}

impl PeerView {
    fn new(addr: String, seen_ago_s: f64, stats: &PeerStats, server: ServerIdle) -> Self {
        let estimate = estimate_idle_timeout_ms(stats.client_idle_ages.as_slice());
        let server = server.as_met_by(stats);
        let (verdict, advice) = judge(stats, estimate, server);
        let ms = |us: Option<u64>| us.map(|us| (us as f64 / 100.0).round() / 10.0);
        let gaps = &stats.reuse_gaps;
        let closes = &stats.peer_close_delays;
        let max_of = |count: u64, max_us: u64| ms((count > 0).then_some(max_us));
        PeerView {
            addr,
            seen_ago_s: (seen_ago_s * 10.0).round() / 10.0,
            connections: stats.connections,
            requests: stats.requests,
            client_idle_closes: stats.client_idle_closes,
            client_idle_timeout_ms: estimate.map(u64::from),
            server_idle_closes: stats.server_idle_closes,
            reuse_gap_ms: Spread {
                p50: ms(gaps.quantile_us(0.5)),
                p99: ms(gaps.quantile_us(0.99)),
                max: max_of(gaps.count(), gaps.max_us()),
            },
            near_misses: stats.near_misses,
            reuses_past_advertised: stats.reuses_past_advertised,
            late_requests: stats.late_requests,
            late_request_delay_ms: Max {
                max: max_of(stats.late_requests, stats.late_request_delay_max_us),
            },
            peer_close_delay_ms: Middle {
                p50: ms(closes.quantile_us(0.5)),
                max: max_of(closes.count(), closes.max_us()),
            },
            verdict,
            advice,
        }
    }
}

/// Where idle-close ages cluster: the median of the densest run of ages
/// within 5% (or 20 ms) of its first; a later run wins a tie.
pub fn estimate_idle_timeout_ms(ages_ms: &[u32]) -> Option<u32> {
    let mut ages: Vec<u32> = ages_ms
        .iter()
        .copied()
        .filter(|&ms| ms >= MIN_TIMEOUT_MS)
        .collect();
    ages.sort_unstable();
    let mut best = None::<(usize, usize)>;
    let mut end = 0;
    for start in 0..ages.len() {
        let reach =
            ages[start].saturating_add((ages[start] / CLUSTER_FRACTION).max(CLUSTER_MIN_MS));
        end = end.max(start);
        while end < ages.len() && ages[end] <= reach {
            end += 1;
        }
        if best.is_none_or(|(s, e)| end - start >= e - s) {
            best = Some((start, end));
        }
    }
    best.map(|(start, end)| ages[start + (end - start - 1) / 2])
}

/// The verdict, and one sentence saying which side to change and to what.
fn judge(stats: &PeerStats, estimate: Option<u32>, server: ServerIdle) -> (Verdict, String) {
    let safe = server.safe_client_idle_ms();
    let real = server.idle_timeout_ms;
    let promise = server.advertised_timeout_s.map(|s| s * 1000);
    if stats.late_requests > 0 {
        let n = stats.late_requests;
        let advice = format!(
            "{n} request{} arrived after the server had closed the connection: set this \
             client's pool idle timeout to {safe} ms or less, or raise the server's keep-alive \
             timeout above how long the client keeps idle connections.",
            plural(n)
        );
        return (Verdict::Race, advice);
    }
    if let (n @ 1.., Some(promise)) = (stats.reuses_past_advertised, promise) {
        let advice = format!(
            "{n} reuse{} came after the advertised Keep-Alive timeout of {promise} ms had \
             passed: set this client's pool idle timeout to {safe} ms or less (or make it \
             honour Keep-Alive: timeout).",
            plural(n)
        );
        return (Verdict::Race, advice);
    }
    if stats.near_misses > 0 {
        let n = stats.near_misses;
        let advice = format!(
            "{n} reuse{} came within 100 ms of the server's idle deadline ({real} ms): lower \
             this client's pool idle timeout to {safe} ms or less.",
            plural(n)
        );
        return (Verdict::AtRisk, advice);
    }
    match estimate.map(u64::from) {
        Some(estimate) if estimate >= promise.unwrap_or(real).min(real) => {
            let advice = format!(
                "It keeps idle connections about {estimate} ms, not less than the server's \
                 {} ms: lower its pool idle timeout to {safe} ms or less, or raise the server's \
                 keep-alive timeout above {estimate} ms.",
                promise.unwrap_or(real).min(real)
            );
            (Verdict::AtRisk, advice)
        }
        Some(estimate) => {
            let advice = format!(
                "It closes idle connections at about {estimate} ms, {} ms before the server \
                 would ({real} ms): nothing to change.",
                real - estimate
            );
            (Verdict::Ok, advice)
        }
        None if stats.server_idle_closes > 0 => {
            let advice = format!(
                "The server closes its idle connections first ({real} ms) and no reuse came \
                 near that deadline: nothing to change; a pool idle timeout of {safe} ms or \
                 less would make the client close first."
            );
            (Verdict::Ok, advice)
        }
        None => (
            Verdict::Ok,
            "No connection of it has ended idle yet, and no reuse came near the server's \
             deadline: nothing to change so far."
                .into(),
        ),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::peers::{PeerEvent, PeerTable, Reuse};
    use crate::observe::Closer;
    use std::net::IpAddr;

    const SERVER: ServerIdle = ServerIdle {
        advertised_timeout_s: Some(2),
        idle_timeout_ms: 2000,
    };

    fn view_of(events: &[PeerEvent]) -> PeerView {
        let mut table = PeerTable::default();
        let addr: IpAddr = "127.0.0.2".parse().unwrap();
        for &event in events {
            table.record(addr, 1, event);
        }
        let report = PeersReport::new(&table.snapshot(1), SERVER);
        report.peers.into_iter().next().unwrap()
    }

    fn client_close(ms: u64) -> PeerEvent {
        PeerEvent::IdleClosed {
            closer: Closer::Client,
            age_us: ms * 1000,
        }
    }

    fn reuse(gap_ms: u64, past_advertised: bool) -> PeerEvent {
        PeerEvent::Reuse(Reuse {
            gap_us: gap_ms * 1000,
            headroom_us: (2000 - gap_ms as i64) * 1000,
            past_advertised,
        })
    }

    #[test]
    fn the_estimate_is_where_the_closes_cluster() {
        assert_eq!(estimate_idle_timeout_ms(&[]), None);
        assert_eq!(
            estimate_idle_timeout_ms(&[0, 3, 99]),
            None,
            "closes after use"
        );
        assert_eq!(estimate_idle_timeout_ms(&[1204]), Some(1204));
        let ages = [1201, 1203, 1207, 1202, 300, 5000, 1205, 0, 0, 0, 0, 2];
        assert_eq!(estimate_idle_timeout_ms(&ages), Some(1203));
        // Two clusters: the larger wins, whatever the order.
        let ages = [4000, 4010, 1000, 1001, 1002, 4005];
        assert_eq!(estimate_idle_timeout_ms(&ages), Some(4005));
    }

    #[test]
    fn a_client_that_closes_first_is_ok_with_its_estimate() {
        let view = view_of(&[client_close(1200), client_close(1210), client_close(1205)]);
        assert_eq!(view.client_idle_timeout_ms, Some(1205));
        assert_eq!(view.verdict, Verdict::Ok, "{}", view.advice);
        assert!(view.advice.contains("1205 ms"), "{}", view.advice);
    }

    #[test]
    fn late_requests_are_a_race() {
        let view = view_of(&[
            reuse(500, false),
            PeerEvent::LateRequest { delay_us: 12_000 },
        ]);
        assert_eq!(view.verdict, Verdict::Race);
        assert_eq!(view.late_request_delay_ms.max, Some(12.0));
        assert!(view.advice.contains("1500 ms or less"), "{}", view.advice);
    }

    #[test]
    fn advice_follows_the_timeout_the_peer_met_not_the_configured_one() {
        // A ka=500ms control: the server closed this peer's connections
        // at 500 ms, though it is configured for 2000.
        let view = view_of(&[
            PeerEvent::IdleClosed {
                closer: Closer::Server,
                age_us: 501_000,
            },
            PeerEvent::LateRequest { delay_us: 40_000 },
        ]);
        assert_eq!(view.verdict, Verdict::Race);
        assert!(view.advice.contains("376 ms or less"), "{}", view.advice);
    }

    #[test]
    fn reuse_past_the_promise_is_a_race_and_near_misses_are_a_risk() {
        let view = view_of(&[reuse(2500, true)]);
        assert_eq!(view.verdict, Verdict::Race, "{}", view.advice);
        let view = view_of(&[reuse(1950, false), reuse(100, false)]);
        assert_eq!((view.verdict, view.near_misses), (Verdict::AtRisk, 1));
        assert_eq!(view.reuse_gap_ms.max, Some(1950.0));
    }

    #[test]
    fn a_client_that_keeps_connections_as_long_as_promised_is_at_risk() {
        let view = view_of(&[client_close(2005), client_close(2010)]);
        assert_eq!(view.verdict, Verdict::AtRisk, "{}", view.advice);
    }

    #[test]
    fn the_other_row_appears_only_when_peers_were_folded() {
        let mut snapshot = PeersSnapshot::default();
        assert!(PeersReport::new(&snapshot, SERVER).peers.is_empty());
        snapshot.other.connections = 3;
        let report = PeersReport::new(&snapshot, SERVER);
        assert_eq!(report.peers[0].addr, "other");
        let json = serde_json::to_value(&report).unwrap();
        for key in [
            "addr",
            "connections",
            "requests",
            "client_idle_closes",
            "client_idle_timeout_ms",
            "server_idle_closes",
            "reuse_gap_ms",
            "near_misses",
            "late_requests",
            "late_request_delay_ms",
            "peer_close_delay_ms",
            "verdict",
            "advice",
        ] {
            assert!(json["peers"][0].get(key).is_some(), "{key} in {json}");
        }
        assert_eq!(json["peers"][0]["verdict"], "ok");
    }
}
