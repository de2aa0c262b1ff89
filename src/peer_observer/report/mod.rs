//! The `/peers` document: each peer's figures in milliseconds, the
//! estimate of its own idle timeout, and a verdict on whether it races the
//! server at the idle boundary, with one paragraph of advice.
//!
//! The verdict and advice describe the recent window (`--peers-window`,
//! ten minutes by default: shown as `window_s`, the figures behind them as
//! `recent`); the other figures are totals since the server started. A peer
//! that raced and has since been fixed reads `ok` again once the window
//! has passed.
//!
//! - `race`: requests were lost in the window: they arrived after the
//!   server's idle FIN, or in before it left (they crossed it in flight:
//!   the client could not have known); those within a round trip after it
//!   are too close to tell which ([`crate::peer_observer::peers::Crossing`]);
//!   or, under the race guard's shadow deadline (never on a server), a
//!   request reused a connection past the deadline, which production
//!   would have lost. Nothing else is a race.
//! - `at risk`: served reuses came within [`super::NEAR_MISS_US`] of the
//!   idle deadline, or after the advertised `Keep-Alive: timeout` (the
//!   server kept its connection longer than it promised, this time), or
//!   the peer keeps idle connections at least as long as the server, or
//!   the server reset its idle connections (`close=rst`), after which a
//!   request that lost cannot be seen: never `ok` then.
//! - otherwise `ok`.
//!
//! The estimate of the peer's own idle timeout is where its idle closes
//! cluster: the densest run of its latest close ages within 5% (at least
//! 20 ms) of each other, and the median of that run; closes younger than
//! [`MIN_TIMEOUT_MS`] are a client done with the connection, not timing it
//! out, and are left out. When most of its closes came with its next
//! request (a pool that drops expired connections only when it is used),
//! the estimate is an upper bound.
//!
//! The advice is [`crate::advice`]'s, the same model the probe uses, about
//! the idle timeout that bound this peer (see [`Recent::binding`]), with
//! the round trip the kernel measured on its connections; it names the
//! client's own setting where its `User-Agent` says which client it is
//! ([`crate::advice::clients`]), the proxies' where its requests say a
//! proxy forwarded them, and both where the peer may be a proxy that does
//! not say so: the proxy's first where its requests show one likely, with
//! equal weight where that cannot be told (`proxy` weighs the signs).
//! The words are [`crate::advice::fix`]'s.

use serde::Serialize;

mod proxy;
mod verdict;

use super::peers::{PeerStats, PeersSnapshot, Recent, Terms};
use crate::advice::clients;
use verdict::{OwnTimeout, judge};

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

/// What the verdict is judged on: the peer's figures in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecentView {
    pub reuses: u64,
    pub near_misses: u64,
    /// Served, though past the advertised timeout.
    pub reuses_past_advertised: u64,
    /// Lost: arrived after the server's FIN, sent when the client could
    /// have seen it.
    pub late_requests: u64,
    /// Lost: crossed the server's FIN in flight (in before it left).
    pub late_requests_crossed_fin: u64,
    /// Lost: within a round trip after the FIN, too close to tell whether
    /// the client could have seen it.
    pub late_requests_too_close_to_tell: u64,
    /// Idle connections the server closed so that a late request meets a
    /// reset (`close=rst`, or no descriptor to spare for the watch).
    pub server_resets: u64,
    pub client_idle_closes: u64,
    pub lazy_client_closes: u64,
    pub server_idle_closes: u64,
    /// Reuses after the real deadline, served only because the race
    /// guard's shadow deadline kept the connection open: requests
    /// production would have lost (0 outside the guard).
    pub reuses_past_deadline: u64,
    /// The longest idle gap, ms, after which a reuse was served before
    /// the deadline: the client's own limit is longer.
    pub longest_served_reuse_ms: Option<u64>,
    /// The shortest idle time, ms, after which a request was (or, past
    /// the deadline, would have been) lost.
    pub shortest_lost_reuse_ms: Option<u64>,
    /// The youngest idle age, ms, at which the client let a connection go
    /// as it opened or reused another: its own limit is shorter.
    pub shortest_lazy_close_ms: Option<u64>,
}

impl From<&Recent> for RecentView {
    fn from(recent: &Recent) -> Self {
        RecentView {
            reuses: recent.reuses,
            near_misses: recent.near_misses,
            reuses_past_advertised: recent.past_advertised,
            late_requests: recent.late_after_fin,
            late_requests_crossed_fin: recent.late_crossing_fin,
            late_requests_too_close_to_tell: recent.late_too_close,
            server_resets: recent.server_resets,
            client_idle_closes: recent.client_idle_closes,
            lazy_client_closes: recent.lazy_client_closes,
            server_idle_closes: recent.server_idle_closes,
            reuses_past_deadline: recent.past_deadline,
            longest_served_reuse_ms: recent.longest_served_gap_ms,
            shortest_lost_reuse_ms: recent.lowest_failure_ms,
            shortest_lazy_close_ms: recent.shortest_lazy_close_ms,
        }
    }
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
    /// The estimate is an upper bound: the client closed lazily, at its
    /// next request.
    pub client_idle_timeout_is_upper_bound: bool,
    pub server_idle_closes: u64,
    pub reuse_gap_ms: Spread,
    pub near_misses: u64,
    pub reuses_past_advertised: u64,
    pub late_requests: u64,
    pub late_request_delay_ms: Max,
    pub peer_close_delay_ms: Middle,
    /// The last `User-Agent` seen, and the client it names, if known.
    pub user_agent: Option<String>,
    pub user_agents: Vec<String>,
    pub client: Option<&'static str>,
    /// Some requests came through a proxy.
    pub forwarded: bool,
    /// Likely a proxy that adds no forwarding header, or possibly one:
    /// some sign in `proxy_signs` was seen (not for "other").
    pub likely_proxy: bool,
    /// What its requests showed of a proxy that does not say so, the
    /// weightiest first: "http/1.0 from an http/1.1 client" and "host is an
    /// upstream name" make one likely (its fix leads the advice); "user-agents
    /// take turns" and "host names another port or place" leave it open
    /// (both fixes, equal weight).
    pub proxy_signs: Vec<&'static str>,
    /// The longest round trip the kernel measured on its connections in
    /// the window.
    pub round_trip_ms: Option<f64>,
    /// The idle timeout the verdict and advice are about (the peer's
    /// connections may have had one of their own).
    pub judged_idle_timeout_ms: u64,
    /// What those connections advertised as `Keep-Alive: timeout`, s.
    pub judged_advertised_timeout_s: Option<u64>,
    pub recent: RecentView,
    pub verdict: Verdict,
    pub safe_pool_idle_timeout_ms: Option<u64>,
    pub advice: String,
}

/// The whole `/peers` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeersReport {
    pub server: ServerIdle,
    /// How far back the verdicts look, seconds.
    pub window_s: f64,
    /// Most recently seen first; "other" last, when it has anything.
    pub peers: Vec<PeerView>,
}

impl PeersReport {
    pub fn new(snapshot: &PeersSnapshot, server: ServerIdle) -> Self {
        let window_s = snapshot.window_us as f64 / 1e6;
        let mut peers: Vec<PeerView> = snapshot
            .peers
            .iter()
            .map(|peer| {
                let ago = peer.seen_ago_us as f64 / 1e6;
                let seen = Seen {
                    stats: &peer.stats,
                    recent: &peer.recent,
                    window_s,
                    folded: false,
                };
                PeerView::new(peer.addr.to_string(), ago, seen, server)
            })
            .collect();
        if snapshot.other != PeerStats::default() {
            let seen = Seen {
                stats: &snapshot.other,
                recent: &snapshot.other_recent,
                window_s,
                folded: true,
            };
            peers.push(PeerView::new("other".into(), 0.0, seen, server));
        }
        PeersReport {
            server,
            window_s,
            peers,
        }
    }
}

/// What is known of one peer.
#[derive(Clone, Copy)]
struct Seen<'a> {
    stats: &'a PeerStats,
    recent: &'a Recent,
    window_s: f64,
    /// Several peers folded into "other".
    folded: bool,
}

impl PeerView {
    fn new(addr: String, seen_ago_s: f64, seen: Seen<'_>, server: ServerIdle) -> Self {
        let Seen { stats, recent, .. } = seen;
        let estimate = estimate_idle_timeout_ms(stats.client_idle_ages.as_slice());
        let lazy = recent.client_idle_closes > 0
            && recent.lazy_client_closes * 2 >= recent.client_idle_closes;
        let agents: Vec<String> = stats.agents.texts().collect();
        let client = agents.first().and_then(|agent| clients::recognise(agent));
        let terms = judged_terms(recent, server);
        let own = OwnTimeout {
            estimate_ms: estimate,
            lazy,
        };
        let signs = match seen.folded || stats.forwarded {
            true => Vec::new(),
            false => proxy::signs(stats, client),
        };
        let keeper = proxy::keeper(stats, client, &signs, seen.folded);
        let judgement = judge(seen, own, terms, keeper, server);
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
            client_idle_timeout_is_upper_bound: lazy,
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
            user_agent: agents.first().cloned(),
            user_agents: agents,
            client: client.map(|c| c.name),
            forwarded: stats.forwarded,
            likely_proxy: !signs.is_empty(),
            proxy_signs: signs.into_iter().map(proxy::sign_name).collect(),
            round_trip_ms: recent.round_trip_us.map(|us| f64::from(us) / 1000.0),
            judged_idle_timeout_ms: terms.idle_timeout_ms,
            judged_advertised_timeout_s: terms.advertised_secs,
            recent: RecentView::from(recent),
            verdict: judgement.verdict,
            safe_pool_idle_timeout_ms: judgement.safe_ms,
            advice: judgement.advice,
        }
    }
}

/// The idle terms the verdict is about: those that went wrong, else the
/// shortest the peer met, else the server's own.
fn judged_terms(recent: &Recent, server: ServerIdle) -> Terms {
    let own = Terms {
        idle_timeout_ms: server.idle_timeout_ms,
        advertised_secs: server.advertised_timeout_s,
        troubled: false,
    };
    match recent.binding {
        // The server's own timeout: it advertised what it always does.
        Some(terms) if terms.idle_timeout_ms == server.idle_timeout_ms => Terms {
            advertised_secs: terms.advertised_secs.or(server.advertised_timeout_s),
            ..terms
        },
        Some(terms) => terms,
        None => own,
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

#[cfg(test)]
mod tests;
