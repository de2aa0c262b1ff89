//! Whether a peer is a proxy, from what its requests really show, and
//! so who keeps the pool the advice is for ([`keeper`]).
//!
//! - It says so: `Forwarded`, `Via`, `X-Real-IP` or an `X-Forwarded-*`
//!   field on its requests: the proxy's fix alone.
//! - A proxy is likely, and its fix leads ([`Keeper::ProxyLikely`]):
//!   HTTP/1.0 requests naming a client that speaks HTTP/1.1 (nginx speaks
//!   1.0 upstream unless told otherwise; no such client does), or a `Host`
//!   that is an upstream's name ([`HostShape::UpstreamName`]: nginx sends
//!   `$proxy_host`, the name in its `proxy_pass`).
//! - It cannot be told, and both fixes carry equal weight
//!   ([`Keeper::ProxyOrClients`]): User-Agents taking turns on its
//!   connections (a proxy, or several clients behind one address), or a
//!   `Host` naming another port or place (a proxy passing its client's
//!   `Host` on, or a port mapping that relays the client's connection).
//! - Otherwise the client its `User-Agent` names.
//!
//! [`HostShape::UpstreamName`]: crate::peer_observer::peers::HostShape

use crate::advice::clients::Client;
use crate::advice::fix::{Alone, Keeper, Sign};
use crate::peer_observer::peers::PeerStats;

/// The signs of a proxy that does not say so, as `/peers` names them
/// (`proxy_signs`), in the order they weigh.
pub(super) fn signs(stats: &PeerStats, client: Option<&'static Client>) -> Vec<Sign> {
    let marks = stats.addressing;
    let latest = stats.agents.texts().next();
    // Every client the advice table names speaks HTTP/1.1, as browsers do.
    let speaks_1_1 = client.is_some() || latest.is_some_and(|agent| agent.starts_with("Mozilla/"));
    [
        (marks.http10_named > 0 && speaks_1_1, Sign::Downgraded),
        (marks.upstream_named > 0, Sign::UpstreamName),
        (stats.agents.take_turns(), Sign::AgentsTakeTurns),
        (marks.elsewhere > 0, Sign::HostElsewhere),
    ]
    .into_iter()
    .filter_map(|(seen, sign)| seen.then_some(sign))
    .collect()
}

/// Who keeps the pool the advice is for: a proxy when its requests say
/// so; likely a proxy, or a proxy or the clients, by the strongest of
/// `signs` (none for peers folded together); else the client its
/// `User-Agent` names, if any (or none, if it sent none).
pub(super) fn keeper(
    stats: &PeerStats,
    client: Option<&'static Client>,
    signs: &[Sign],
    folded: bool,
) -> Keeper {
    let alone = match client {
        Some(client) => Alone::Client(client),
        None if stats.agents.texts().next().is_none() => Alone::Unnamed,
        None => Alone::Unknown,
    };
    match signs.first() {
        _ if stats.forwarded => Keeper::Proxy,
        _ if folded => alone.keeper(),
        Some(&sign @ (Sign::Downgraded | Sign::UpstreamName)) => Keeper::ProxyLikely(sign, alone),
        Some(&sign) => Keeper::ProxyOrClients(sign, alone),
        None => alone.keeper(),
    }
}

/// A sign's name in `/peers`.
pub(super) fn sign_name(sign: Sign) -> &'static str {
    match sign {
        Sign::Downgraded => "http/1.0 from an http/1.1 client",
        Sign::UpstreamName => "host is an upstream name",
        Sign::AgentsTakeTurns => "user-agents take turns",
        Sign::HostElsewhere => "host names another port or place",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PeerView, PeersReport, ServerIdle};
    use crate::observe::{AfterFin, Event};
    use crate::peer_observer::peers::{Listening, PeerTable};
    use std::net::IpAddr;

    const SERVER: ServerIdle = ServerIdle {
        advertised_timeout_s: Some(2),
        idle_timeout_ms: 2000,
    };

    /// A connection's first request, as nginx or a client sends it.
    fn request(agent: &'static str, minor_version: u8, host: &'static str) -> Event<'static> {
        Event::ClientNamed {
            user_agent: Some(agent.as_bytes()),
            forwarded: false,
            again: false,
            minor_version,
            host: Some(host.as_bytes()),
        }
    }

    /// The view of a peer whose connections made `requests`, each but the
    /// first then losing a request, on a server listening on 8080.
    fn view(requests: &[Event<'_>]) -> PeerView {
        let mut table = PeerTable::new(600_000_000).listening(Some(Listening::on(8080, false)));
        let addr: IpAddr = "127.0.0.2".parse().unwrap();
        let late = Event::AfterFin(AfterFin::Request {
            delay_us: 5000,
            idle_timeout_ms: 2000,
            round_trip_us: Some(100),
        });
        for event in requests {
            table.record(addr, 1, &Event::Accepted);
            table.record(addr, 1, event);
        }
        table.record(addr, 1, &late);
        let report = PeersReport::new(&table.snapshot(2), SERVER);
        report.peers.into_iter().next().unwrap()
    }

    /// Where the advice's fix starts: after the sentence on what happened.
    fn fix_of(view: &PeerView) -> &str {
        let after = view.advice.find(". ").expect(&view.advice);
        &view.advice[after + 2..]
    }

    /// The fix says a proxy is likely, and nginx's setting comes before
    /// python-requests' own.
    fn assert_the_proxy_s_fix_leads(view: &PeerView) {
        let fix = fix_of(view);
        assert!(fix.starts_with("Likely a proxy"), "{fix}");
        let nginx = fix.find("nginx: keepalive_timeout").expect(fix);
        let client = fix.find("max_retries").expect(fix);
        assert!(nginx < client, "{fix}");
    }

    #[test]
    fn nginx_s_default_http_1_0_upstream_makes_a_proxy_likely_and_its_fix_lead() {
        // `proxy_pass http://127.0.0.1:8080;`: HTTP/1.0, Host the upstream
        // address (which a direct client sends too), the client's agent.
        let view = view(&[request("python-requests/2.32.3", 0, "127.0.0.1:8080")]);
        assert!(view.likely_proxy, "{view:?}");
        assert_eq!(view.proxy_signs, ["http/1.0 from an http/1.1 client"]);
        assert_the_proxy_s_fix_leads(&view);
    }

    #[test]
    fn nginx_s_upstream_name_in_host_makes_a_proxy_likely() {
        // `proxy_http_version 1.1; proxy_set_header Connection "";` to
        // `upstream backend { ... keepalive 8; }`.
        let view = view(&[request("python-requests/2.32.3", 1, "backend")]);
        assert_eq!(view.proxy_signs, ["host is an upstream name"]);
        assert_the_proxy_s_fix_leads(&view);
    }

    #[test]
    fn one_client_addressing_the_server_directly_shows_no_proxy() {
        for (minor, host) in [
            (1, "127.0.0.1:8080"),
            (1, "localhost:8080"),
            (1, "[::1]:8080"),
        ] {
            let view = view(&[request("python-requests/2.32.3", minor, host)]);
            assert!(!view.likely_proxy, "{host}: {view:?}");
            assert!(view.proxy_signs.is_empty(), "{view:?}");
            assert!(
                fix_of(&view).starts_with("python-requests"),
                "{}",
                view.advice
            );
        }
        // HTTP/1.0 from a tool that speaks it (ApacheBench) is no sign.
        let view = view(&[request("ApacheBench/2.3", 0, "127.0.0.1:8080")]);
        assert!(!view.likely_proxy, "{view:?}");
    }

    #[test]
    fn what_cannot_be_told_gets_both_fixes_with_equal_weight() {
        // nginx's `$host`, or a Kubernetes Service mapping port 80: the
        // same request.
        let view = view(&[request("python-requests/2.32.3", 1, "api.example.com")]);
        assert!(view.likely_proxy, "{view:?}");
        assert_eq!(view.proxy_signs, ["host names another port or place"]);
        let fix = fix_of(&view);
        assert!(fix.starts_with("Their Host named another port"), "{fix}");
        for words in ["cannot be told", "If a proxy, ", "If the clients: "] {
            assert!(fix.contains(words), "{words:?} not in {fix}");
        }
    }

    #[test]
    fn forwarding_headers_say_so_whatever_else_is_seen() {
        let mut forwarded = request("python-requests/2.32.3", 0, "backend");
        if let Event::ClientNamed {
            forwarded: said, ..
        } = &mut forwarded
        {
            *said = true;
        }
        let view = view(&[forwarded]);
        assert!(view.forwarded && !view.likely_proxy, "{view:?}");
        assert!(
            fix_of(&view).starts_with("A proxy forwards"),
            "{}",
            view.advice
        );
    }
}
