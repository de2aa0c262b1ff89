//! The guard's verdict on each client: the peer observer's own (`/peers`,
//! see [`crate::peer_observer::report`]) over the whole run, where it saw
//! the client do something wrong; otherwise what the run showed of the
//! client's own idle limit, from what it did, never from what it failed
//! to do.
//!
//! Under the shadow deadline (the guard's default, see
//! `Settings::shadow_ms`) a reuse past the server's deadline is served and
//! counted as a request production would have lost: the peer observer
//! calls that `race`. What else bounds the client's limit:
//!
//! - from below, the longest reuse served before the deadline (the
//!   client still held that connection as good);
//! - from above, the youngest connection it let go as it opened or reused
//!   another (a lazy pool: httpx, urllib3, aiohttp), or where its own idle
//!   closes cluster (a pool that times connections out itself; two at
//!   least: one alone may be the client's exit).
//!
//! A limit shown below the server's deadline is `ok`. A client that
//! reused no connection cannot race the idle close: `ok`. Anything else
//! the run did not settle (no pause fell between what the client was seen
//! to keep and the deadline, or `--real-close`, under which the server's
//! close hides what the client would have done) is `inconclusive`, with
//! the pause that would settle it.

use serde::Serialize;

use crate::advice::clients;
use crate::advice::fix::{self, Keeper};
use crate::peer_observer::NEAR_MISS_US;
use crate::peer_observer::report::{PeerView, PeersReport, Verdict};

use super::cli::FailOn;

/// A client's verdict over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GuardVerdict {
    #[serde(rename = "ok")]
    Ok,
    /// The run did not show the client's limit against the deadline.
    #[serde(rename = "inconclusive")]
    Inconclusive,
    #[serde(rename = "at risk")]
    AtRisk,
    #[serde(rename = "race")]
    Race,
}

/// What the run showed of a client's own idle limit, ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ShownLimit {
    /// It keeps idle connections longer than this: its longest reuse.
    pub above_ms: Option<u64>,
    /// It lets them go before this: its youngest lazy close, or where its
    /// own idle closes cluster.
    pub below_ms: Option<u64>,
}

/// One client as the guard reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientVerdict {
    /// Its address (`other`: the peers the observer had to fold together).
    pub addr: String,
    /// The last `User-Agent` it sent, and the others it sent before.
    pub user_agent: Option<String>,
    pub user_agents: Vec<String>,
    /// The client library its `User-Agent` names, when known.
    pub client: Option<&'static str>,
    pub verdict: GuardVerdict,
    pub connections: u64,
    pub requests: u64,
    /// Requests that arrived after the server had closed their connection.
    pub lost_requests: u64,
    /// Requests that reused a connection past the server's deadline,
    /// served under the shadow deadline: production would have lost them.
    pub requests_past_deadline: u64,
    /// Reuses with less than 100 ms left before the server's deadline.
    pub near_misses: u64,
    /// Idle connections the server closed before the client did.
    pub server_idle_closes: u64,
    /// What the run showed of the client's own idle limit.
    pub client_limit: ShownLimit,
    /// For `inconclusive`: the pauses, seconds, one of which in the suite
    /// would settle it (an idle gap before the client's next request).
    pub settling_pause_s: Option<[f64; 2]>,
    pub safe_pool_idle_timeout_ms: Option<u64>,
    pub advice: String,
}

/// Every client of the run, judged; `shadow`: the run kept idle
/// connections past the deadline (the shadow deadline), rather than
/// closing them (`--real-close`).
pub fn judge(report: &PeersReport, shadow: bool) -> Vec<ClientVerdict> {
    report
        .peers
        .iter()
        .map(|view| ClientVerdict::of(view, shadow))
        .collect()
}

impl ClientVerdict {
    fn of(view: &PeerView, shadow: bool) -> Self {
        let limit = shown_limit(view);
        let deadline = keeps_ms(view);
        let mut settling_pause_s = None;
        let (verdict, advice) = match view.verdict {
            Verdict::Race => (GuardVerdict::Race, view.advice.clone()),
            Verdict::AtRisk => (GuardVerdict::AtRisk, view.advice.clone()),
            Verdict::Ok if let Some(below) = limit.below_ms.filter(|&ms| ms <= deadline) => (
                GuardVerdict::Ok,
                format!(
                    "It let an idle connection go at {below} ms idle, before the server's \
                     {deadline} ms: its own limit is shorter. Nothing to change."
                ),
            ),
            Verdict::Ok if view.recent.reuses == 0 && view.server_idle_closes == 0 => (
                GuardVerdict::Ok,
                "It reused no connection and left none idle until the server's deadline: it \
                 cannot race the idle close as it ran."
                    .to_owned(),
            ),
            Verdict::Ok => {
                let pause = settling_pause(deadline);
                settling_pause_s = Some(pause);
                (
                    GuardVerdict::Inconclusive,
                    inconclusive_advice(view, limit, deadline, pause, shadow),
                )
            }
        };
        ClientVerdict {
            addr: view.addr.clone(),
            user_agent: view.user_agent.clone(),
            user_agents: view.user_agents.clone(),
            client: view.client,
            verdict,
            connections: view.connections,
            requests: view.requests,
            lost_requests: view.late_requests,
            requests_past_deadline: view.recent.reuses_past_deadline,
            near_misses: view.near_misses,
            server_idle_closes: view.server_idle_closes,
            client_limit: limit,
            settling_pause_s,
            safe_pool_idle_timeout_ms: view.safe_pool_idle_timeout_ms,
            advice,
        }
    }

    /// Whether this verdict fails the run.
    pub fn fails(&self, fail_on: FailOn) -> bool {
        match self.verdict {
            GuardVerdict::Race => true,
            GuardVerdict::AtRisk => fail_on != FailOn::Race,
            GuardVerdict::Inconclusive => fail_on == FailOn::Inconclusive,
            GuardVerdict::Ok => false,
        }
    }
}

/// How long the server surely keeps an idle connection: its deadline, or
/// what it advertises when that is shorter (a pool may read it).
fn keeps_ms(view: &PeerView) -> u64 {
    let real = view.judged_idle_timeout_ms;
    let advertised = view
        .judged_advertised_timeout_s
        .map_or(real, |s| s.saturating_mul(1000));
    real.min(advertised)
}

/// What the client's reuses and closes showed of its own limit.
fn shown_limit(view: &PeerView) -> ShownLimit {
    // One close alone may be the client's exit, not its timer: a
    // cluster needs two.
    let eager = (view.recent.client_idle_closes).saturating_sub(view.recent.lazy_client_closes);
    let clustered = view
        .client_idle_timeout_ms
        .filter(|_| !view.client_idle_timeout_is_upper_bound && eager >= 2);
    let lazy = view.recent.shortest_lazy_close_ms;
    let below_ms = match (lazy, clustered) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    ShownLimit {
        above_ms: view.recent.longest_served_reuse_ms,
        below_ms,
    }
}

/// The pauses that settle a client against a server that keeps `keeps`
/// ms, in seconds: from a near miss's distance before the deadline to the
/// deadline. A reuse after such a pause is a near miss (`at risk`); a new
/// connection instead shows the client's limit under the deadline (`ok`).
fn settling_pause(keeps: u64) -> [f64; 2] {
    let from = keeps.saturating_sub(NEAR_MISS_US / 1000);
    [from as f64 / 1000.0, keeps as f64 / 1000.0]
}

/// What the guard says of a client whose limit the run did not settle:
/// what it showed, the pause that would settle it, and the fix should its
/// limit be too long, in its own terms where its `User-Agent` names it.
fn inconclusive_advice(
    view: &PeerView,
    limit: ShownLimit,
    keeps: u64,
    [from, to]: [f64; 2],
    shadow: bool,
) -> String {
    let kept = match limit.above_ms {
        Some(ms) => format!("it reused a connection idle {ms} ms"),
        None => "it reused no connection after a pause".to_owned(),
    };
    let let_go = match limit.below_ms {
        Some(ms) => format!(" and let one go at {ms} ms idle, as it opened another"),
        None => String::new(),
    };
    let hidden = match (shadow, view.server_idle_closes) {
        (false, n @ 1..) => format!(
            " The server closed {n} of its idle connections first (--real-close): that hides \
             whether it would have reused them past the deadline."
        ),
        _ => String::new(),
    };
    let keeper = match (
        view.user_agent.as_deref(),
        view.user_agent.as_deref().and_then(clients::recognise),
    ) {
        (_, Some(client)) => Keeper::Client(client),
        (None, None) => Keeper::Unnamed,
        (Some(_), None) => Keeper::Unknown,
    };
    let safe = view.safe_pool_idle_timeout_ms;
    let fix = fix::fix(safe.into(), keeper);
    let should = match safe {
        Some(ms) => format!("Should its limit be above {ms} ms: {}", lower_first(&fix)),
        None => fix,
    };
    format!(
        "Inconclusive: {kept}{let_go}, so its own idle limit is not known against the server's \
         {keeps} ms.{hidden} A pause between {} and {} s before a request in the suite would \
         settle it. {should}",
        trim(from),
        trim(to)
    )
}

/// `text` with its first letter in lower case, to follow a colon.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A number of seconds without trailing zeros: 1.9, 2, 0.05.
fn trim(seconds: f64) -> String {
    let text = format!("{seconds:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::observe::Event;
    use crate::peer_observer::peers::{PeerStats, PeerTable, PeersSnapshot, Recent};
    use crate::peer_observer::report::ServerIdle;

    /// `--keep-alive-timeout 1s` with the default grace: keeps 2 s.
    const GRACED: ServerIdle = ServerIdle {
        advertised_timeout_s: Some(1),
        idle_timeout_ms: 2000,
    };
    /// `--keep-alive-timeout 2s --keep-alive-buffer 0s`.
    const EXACT: ServerIdle = ServerIdle {
        advertised_timeout_s: Some(2),
        idle_timeout_ms: 2000,
    };

    fn report_as(
        agent: Option<&str>,
        stats: PeerStats,
        recent: Recent,
        server: ServerIdle,
    ) -> PeersReport {
        let addr = IpAddr::from([127, 0, 0, 1]);
        let mut table = PeerTable::new(10_000_000);
        if let Some(agent) = agent {
            let named = Event::ClientNamed {
                user_agent: Some(agent.as_bytes()),
                forwarded: false,
                again: false,
                minor_version: 1,
                host: None,
            };
            table.record(addr, 1, &named);
        }
        let mut snapshot: PeersSnapshot = table.snapshot(1);
        snapshot.window_us = 10_000_000;
        let agents = snapshot
            .peers
            .first()
            .map(|p| p.stats.agents.clone())
            .unwrap_or_default();
        snapshot.peers = vec![crate::peer_observer::peers::PeerSnapshot {
            addr,
            seen_ago_us: 0,
            stats: PeerStats { agents, ..stats },
            recent,
        }];
        PeersReport::new(&snapshot, server)
    }

    fn report(stats: PeerStats, recent: Recent) -> PeersReport {
        report_as(None, stats, recent, GRACED)
    }

    const HTTPX: Option<&str> = Some("python-httpx/0.28.1");

    #[test]
    fn a_client_kept_until_the_server_closed_is_inconclusive_not_at_risk() {
        let stats = PeerStats {
            connections: 2,
            requests: 3,
            server_idle_closes: 1,
            ..PeerStats::default()
        };
        let recent = Recent {
            reuses: 1,
            longest_served_gap_ms: Some(300),
            server_idle_closes: 1,
            ..Recent::default()
        };
        let clients = judge(&report(stats, recent), false);
        let client = &clients[0];
        assert_eq!(
            client.verdict,
            GuardVerdict::Inconclusive,
            "{}",
            client.advice
        );
        assert!(client.advice.contains("--real-close"), "{}", client.advice);
        assert!(
            client.advice.contains("A pause between 0.9 and 1 s"),
            "{}",
            client.advice
        );
        assert_eq!(client.settling_pause_s, Some([0.9, 1.0]));
        assert_eq!(client.client_limit.above_ms, Some(300));
        assert!(!client.fails(FailOn::AtRisk));
        assert!(client.fails(FailOn::Inconclusive));
    }

    #[test]
    fn a_client_that_only_used_fresh_connections_is_ok() {
        let stats = PeerStats {
            connections: 3,
            requests: 3,
            client_idle_closes: 3,
            ..PeerStats::default()
        };
        let recent = Recent {
            client_idle_closes: 3,
            ..Recent::default()
        };
        let clients = judge(&report(stats, recent), true);
        assert_eq!(clients[0].verdict, GuardVerdict::Ok);
        assert_eq!(clients[0].requests, 3);
        assert!(!clients[0].fails(FailOn::Inconclusive));
    }

    #[test]
    fn lost_requests_are_a_race_whatever_fail_on_says() {
        let stats = PeerStats {
            connections: 2,
            requests: 2,
            late_requests: 1,
            server_idle_closes: 1,
            ..PeerStats::default()
        };
        let recent = Recent {
            late_after_fin: 1,
            server_idle_closes: 1,
            ..Recent::default()
        };
        let clients = judge(&report(stats, recent), false);
        assert_eq!(clients[0].verdict, GuardVerdict::Race);
        assert_eq!(clients[0].lost_requests, 1);
        assert!(clients[0].fails(FailOn::Race));
    }

    /// httpx's pool with pauses of 0.5, 2.5 and 3 s against a 2 s
    /// deadline, under the shadow deadline: `keepalive_expiry=5` reuses
    /// its connection after 2.5 and 3 s.
    #[test]
    fn a_lazy_pool_that_reuses_past_the_deadline_races_and_is_told_to_go_below_it() {
        let stats = PeerStats {
            connections: 1,
            requests: 4,
            ..PeerStats::default()
        };
        let recent = Recent {
            reuses: 3,
            past_deadline: 2,
            longest_served_gap_ms: Some(500),
            lowest_failure_ms: Some(2500),
            ..Recent::default()
        };
        let clients = judge(&report_as(HTTPX, stats, recent, EXACT), true);
        let client = &clients[0];
        assert_eq!(client.verdict, GuardVerdict::Race, "{}", client.advice);
        assert_eq!(client.requests_past_deadline, 2);
        assert!(
            client.advice.contains("production would have lost"),
            "{}",
            client.advice
        );
        assert!(
            client.advice.contains("soonest after 2500 ms"),
            "{}",
            client.advice
        );
        let safe = client.safe_pool_idle_timeout_ms.expect("a safe value");
        assert!(safe < 2000, "{safe}");
        assert!(
            client.advice.contains("keepalive_expiry=1."),
            "{}",
            client.advice
        );
    }

    /// The same with `keepalive_expiry=1.5`: reused after 0.5 s, opened a
    /// new connection after 2.5 s. Its limit lies between: the 2 s
    /// deadline too, so the run cannot tell; it passes by default.
    #[test]
    fn a_lazy_pool_whose_limit_the_pauses_straddle_is_inconclusive_and_passes() {
        let stats = PeerStats {
            connections: 3,
            requests: 4,
            client_idle_closes: 2,
            ..PeerStats::default()
        };
        let recent = Recent {
            reuses: 1,
            longest_served_gap_ms: Some(500),
            client_idle_closes: 2,
            lazy_client_closes: 2,
            shortest_lazy_close_ms: Some(2500),
            ..Recent::default()
        };
        let clients = judge(&report_as(HTTPX, stats, recent, EXACT), true);
        let client = &clients[0];
        assert_eq!(
            client.verdict,
            GuardVerdict::Inconclusive,
            "{}",
            client.advice
        );
        assert_eq!(
            client.client_limit,
            ShownLimit {
                above_ms: Some(500),
                below_ms: Some(2500)
            }
        );
        assert!(
            client.advice.contains("between 1.9 and 2 s"),
            "{}",
            client.advice
        );
        assert!(client.advice.contains("not known"), "{}", client.advice);
        assert!(
            client.advice.contains(" ms: set httpx's keepalive_expiry="),
            "{}",
            client.advice
        );
        assert!(!client.fails(FailOn::AtRisk));
    }

    #[test]
    fn a_pool_seen_letting_go_before_the_deadline_is_ok() {
        let recent = Recent {
            reuses: 1,
            longest_served_gap_ms: Some(500),
            client_idle_closes: 1,
            lazy_client_closes: 1,
            shortest_lazy_close_ms: Some(1950),
            ..Recent::default()
        };
        let stats = PeerStats {
            connections: 2,
            requests: 3,
            client_idle_closes: 1,
            ..PeerStats::default()
        };
        let clients = judge(&report_as(HTTPX, stats, recent, EXACT), true);
        let client = &clients[0];
        assert_eq!(client.verdict, GuardVerdict::Ok, "{}", client.advice);
        assert!(
            client.advice.contains("at 1950 ms idle"),
            "{}",
            client.advice
        );
        assert!(
            !client.advice.contains("keepalive_expiry"),
            "{}",
            client.advice
        );
    }

    #[test]
    fn one_close_alone_is_not_a_limit_two_at_one_age_are() {
        let ages = |ms: &[u32]| {
            let mut stats = PeerStats {
                connections: 1,
                requests: 2,
                client_idle_closes: ms.len() as u64,
                ..PeerStats::default()
            };
            for &ms in ms {
                stats.client_idle_ages.push_ms(ms);
            }
            let recent = Recent {
                reuses: 1,
                longest_served_gap_ms: Some(300),
                client_idle_closes: ms.len() as u64,
                ..Recent::default()
            };
            judge(&report_as(HTTPX, stats, recent, EXACT), true).remove(0)
        };
        // The client's exit, 1.2 s after its last response.
        let exit = ages(&[1200]);
        assert_eq!(exit.verdict, GuardVerdict::Inconclusive, "{}", exit.advice);
        // A pool that times idle connections out itself at 500 ms.
        let timed = ages(&[500, 502]);
        assert_eq!(timed.verdict, GuardVerdict::Ok, "{}", timed.advice);
        assert_eq!(timed.client_limit.below_ms, Some(500));
    }

    #[test]
    fn a_near_miss_is_at_risk_failing_by_default_and_passing_under_fail_on_race() {
        let stats = PeerStats {
            connections: 1,
            requests: 2,
            near_misses: 1,
            ..PeerStats::default()
        };
        let recent = Recent {
            reuses: 1,
            near_misses: 1,
            longest_served_gap_ms: Some(1950),
            ..Recent::default()
        };
        let client = judge(&report_as(HTTPX, stats, recent, EXACT), true).remove(0);
        assert_eq!(client.verdict, GuardVerdict::AtRisk, "{}", client.advice);
        assert!(client.fails(FailOn::AtRisk));
        assert!(!client.fails(FailOn::Race));
        assert!(
            client.advice.contains("keepalive_expiry="),
            "{}",
            client.advice
        );
    }
}
