//! The guard's verdict on each client: the peer observer's own (`/peers`,
//! see [`crate::peer_observer::report`]) over the whole run, made stricter
//! where the peer observer gives a client the benefit of the doubt that a guard must not.
//!
//! The peer observer reads a client whose idle connections the server closed first,
//! with no reuse near the deadline, as `ok`: the server closes first, so
//! nothing was lost. For a guard that is a client that keeps idle
//! connections at least as long as the server does: it lost nothing this
//! time only because it sent nothing at that moment. Such a client is
//! `at risk` here, unless its own idle closes show it lets connections go
//! sooner than the server (a pool that drops an expired connection only
//! when it next needs one leaves the closing to the server, harmlessly).

use serde::Serialize;

use crate::advice::clients;
use crate::advice::fix::{self, Keeper};
use crate::peer_observer::report::{PeerView, PeersReport, Verdict};

use super::cli::FailOn;

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
    pub verdict: Verdict,
    pub connections: u64,
    pub requests: u64,
    /// Requests that arrived after the server had closed their connection.
    pub lost_requests: u64,
    /// Reuses with less than 100 ms left before the server's deadline.
    pub near_misses: u64,
    /// Idle connections the server closed before the client did.
    pub server_idle_closes: u64,
    pub safe_pool_idle_timeout_ms: Option<u64>,
    pub advice: String,
}

/// Every client of the run, judged.
pub fn judge(report: &PeersReport) -> Vec<ClientVerdict> {
    report.peers.iter().map(ClientVerdict::of).collect()
}

impl ClientVerdict {
    fn of(view: &PeerView) -> Self {
        let (verdict, advice) = match kept_until_server_closed(view) {
            true => (Verdict::AtRisk, kept_advice(view)),
            false => (view.verdict, view.advice.clone()),
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
            near_misses: view.near_misses,
            server_idle_closes: view.server_idle_closes,
            safe_pool_idle_timeout_ms: view.safe_pool_idle_timeout_ms,
            advice,
        }
    }

    /// Whether this verdict fails the run.
    pub fn fails(&self, fail_on: FailOn) -> bool {
        match self.verdict {
            Verdict::Race => true,
            Verdict::AtRisk => fail_on == FailOn::AtRisk,
            Verdict::Ok => false,
        }
    }
}

/// The peer observer found nothing wrong, yet the server closed some of
/// the client's idle connections first, and nothing shows the client
/// letting idle connections go before the server would.
fn kept_until_server_closed(view: &PeerView) -> bool {
    let closes_sooner = view
        .client_idle_timeout_ms
        .is_some_and(|estimate| estimate < view.judged_idle_timeout_ms);
    view.verdict == Verdict::Ok && view.server_idle_closes > 0 && !closes_sooner
}

/// What the guard says of a client that kept idle connections until the
/// server closed them: what happened, and what to set, in the client's
/// own terms where its `User-Agent` names it.
fn kept_advice(view: &PeerView) -> String {
    let n = view.server_idle_closes;
    let real = view.judged_idle_timeout_ms;
    let happened = format!(
        "It kept {n} idle connection{} open until the server closed {} after {real} ms: its pool \
         keeps idle connections at least as long as the server, so a request it sends as the \
         server closes is lost (none was, this run).",
        if n == 1 { "" } else { "s" },
        if n == 1 { "it" } else { "them" },
    );
    let keeper = match (
        view.user_agent.as_deref(),
        view.user_agent.as_deref().and_then(clients::recognise),
    ) {
        (_, Some(client)) => Keeper::Client(client),
        (None, None) => Keeper::Unnamed,
        (Some(_), None) => Keeper::Unknown,
    };
    let fix = fix::fix(view.safe_pool_idle_timeout_ms.into(), keeper);
    format!("{happened} {fix}")
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::peer_observer::peers::{PeerSnapshot, PeerStats, PeersSnapshot, Recent};
    use crate::peer_observer::report::ServerIdle;

    const SERVER: ServerIdle = ServerIdle {
        advertised_timeout_s: Some(1),
        idle_timeout_ms: 2000,
    };

    fn report(stats: PeerStats, recent: Recent) -> PeersReport {
        let snapshot = PeersSnapshot {
            window_us: 10_000_000,
            peers: vec![PeerSnapshot {
                addr: IpAddr::from([127, 0, 0, 1]),
                seen_ago_us: 0,
                stats,
                recent,
            }],
            ..PeersSnapshot::default()
        };
        PeersReport::new(&snapshot, SERVER)
    }

    #[test]
    fn a_client_whose_idle_connections_the_server_closed_is_at_risk() {
        let stats = PeerStats {
            connections: 2,
            requests: 3,
            server_idle_closes: 1,
            ..PeerStats::default()
        };
        let recent = Recent {
            reuses: 1,
            server_idle_closes: 1,
            ..Recent::default()
        };
        let observed = report(stats, recent);
        assert_eq!(
            observed.peers[0].verdict,
            Verdict::Ok,
            "the peer observer's own verdict"
        );
        let clients = judge(&observed);
        assert_eq!(clients[0].verdict, Verdict::AtRisk);
        assert!(clients[0].advice.contains("until the server closed it"));
        assert!(
            clients[0].advice.contains("ms or less"),
            "{}",
            clients[0].advice
        );
        assert!(clients[0].fails(FailOn::AtRisk));
        assert!(!clients[0].fails(FailOn::Race));
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
        let clients = judge(&report(stats, recent));
        assert_eq!(clients[0].verdict, Verdict::Ok);
        assert_eq!(clients[0].requests, 3);
        assert!(!clients[0].fails(FailOn::AtRisk));
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
        let clients = judge(&report(stats, recent));
        assert_eq!(clients[0].verdict, Verdict::Race);
        assert_eq!(clients[0].lost_requests, 1);
        assert!(clients[0].fails(FailOn::Race));
    }
}
