//! `/peers` as a peer's events make it: estimates, verdicts over the
//! window, the advice and the client's own setting, the document's keys.

use super::*;
use crate::observe::{AfterFin, Closer, Event, IdleEnd, Reuse};
use crate::peer_observer::peers::PeerTable;
use crate::timers::Micros;
use std::net::IpAddr;

const SERVER: ServerIdle = ServerIdle {
    advertised_timeout_s: Some(2),
    idle_timeout_ms: 2000,
};
const MINUTE: Micros = 60_000_000;

fn addr() -> IpAddr {
    "127.0.0.2".parse().unwrap()
}

/// The peer's view after `events`, all at loop time `at`, looked at `now`.
fn view_at(events: &[Event<'_>], at: Micros, now: Micros) -> PeerView {
    let mut table = PeerTable::new(10 * MINUTE);
    for event in events {
        table.record(addr(), at, event);
    }
    let report = PeersReport::new(&table.snapshot(now), SERVER);
    assert_eq!(report.window_s, 600.0);
    report.peers.into_iter().next().unwrap()
}

fn view_of(events: &[Event<'_>]) -> PeerView {
    view_at(events, 1, 2)
}

fn client_close(ms: u64) -> Event<'static> {
    Event::IdleEnded(IdleEnd {
        closer: Closer::Client,
        age_us: ms * 1000,
        idle_timeout_ms: 2000,
        reset: false,
        round_trip_us: None,
    })
}

fn server_close(idle_timeout_ms: u64, reset: bool) -> Event<'static> {
    Event::IdleEnded(IdleEnd {
        closer: Closer::Server,
        age_us: idle_timeout_ms * 1000 + 300,
        idle_timeout_ms,
        reset,
        round_trip_us: Some(200),
    })
}

fn reuse(gap_ms: u64, idle_timeout_ms: u64) -> Event<'static> {
    Event::Reused(Reuse {
        gap_us: gap_ms * 1000,
        headroom_us: (idle_timeout_ms as i64 - gap_ms as i64) * 1000,
        idle_timeout_ms,
        advertised_secs: Some(2),
        past_deadline: false,
    })
}

fn late(delay_us: u64, idle_timeout_ms: u64) -> Event<'static> {
    Event::AfterFin(AfterFin::Request {
        delay_us,
        idle_timeout_ms,
        round_trip_us: Some(100),
    })
}

fn named(agent: &'static str) -> Event<'static> {
    Event::ClientNamed {
        user_agent: Some(agent.as_bytes()),
        forwarded: false,
        again: false,
        minor_version: 1,
        host: None,
    }
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
fn lost_requests_are_a_race_with_the_shared_advice() {
    let view = view_of(&[server_close(2000, false), late(12_000, 2000)]);
    assert_eq!(view.verdict, Verdict::Race);
    assert_eq!(view.late_request_delay_ms.max, Some(12.0));
    // The advice model: 2000 − 0.2 ms round trip − 40 ms guard → 1900.
    assert_eq!(view.safe_pool_idle_timeout_ms, Some(1900));
    assert!(view.advice.contains("1900 ms or less"), "{}", view.advice);
    assert!(
        view.advice.contains("could have seen its FIN"),
        "{}",
        view.advice
    );
}

#[test]
fn a_request_in_before_the_fin_left_crossed_it_in_flight() {
    let view = view_of(&[late(0, 2000)]);
    assert_eq!(view.verdict, Verdict::Race);
    assert_eq!(view.recent.late_requests_crossed_fin, 1);
    assert_eq!(view.recent.late_requests, 0);
    assert_eq!(view.recent.late_requests_too_close_to_tell, 0);
    assert!(
        view.advice.contains("crossed the server's FIN in flight"),
        "{}",
        view.advice
    );
    assert!(!view.advice.contains("could have seen"), "{}", view.advice);
}

#[test]
fn a_request_within_a_round_trip_after_the_fin_is_too_close_to_tell() {
    // httpx's lost request, 29 µs after the FIN on the wire.
    let view = view_of(&[late(29, 2000)]);
    assert_eq!(view.verdict, Verdict::Race);
    assert_eq!(view.recent.late_requests_too_close_to_tell, 1);
    assert_eq!(view.recent.late_requests_crossed_fin, 0);
    assert!(
        view.advice
            .contains("1 came within a round trip after the FIN, too close to tell"),
        "{}",
        view.advice
    );
    assert!(!view.advice.contains("crossed"), "{}", view.advice);
    assert!(
        !view.advice.contains("could not have known"),
        "{}",
        view.advice
    );
}

#[test]
fn a_race_is_forgotten_once_the_window_has_passed_but_the_total_stays() {
    let events = [reuse(500, 2000), late(12_000, 2000)];
    let now = view_at(&events, MINUTE, 2 * MINUTE);
    assert_eq!(now.verdict, Verdict::Race);
    let later = view_at(&events, MINUTE, 12 * MINUTE);
    assert_eq!(later.verdict, Verdict::Ok, "{}", later.advice);
    assert_eq!(later.late_requests, 1, "the total since start stays");
    assert!(
        later.advice.contains("none in the last 10 min"),
        "{}",
        later.advice
    );
}

#[test]
fn served_reuses_are_at_risk_at_worst_never_a_race() {
    let past_promise = Event::Reused(Reuse {
        gap_us: 2_100_000,
        headroom_us: 900_000,
        idle_timeout_ms: 3000,
        advertised_secs: Some(2),
        past_deadline: false,
    });
    let view = view_of(&[past_promise]);
    assert_eq!(view.verdict, Verdict::AtRisk, "{}", view.advice);
    assert_eq!(view.recent.reuses_past_advertised, 1);
    let view = view_of(&[reuse(1950, 2000), reuse(100, 2000)]);
    assert_eq!((view.verdict, view.near_misses), (Verdict::AtRisk, 1));
    assert_eq!(view.reuse_gap_ms.max, Some(1950.0));
}

#[test]
fn advice_is_about_the_timeout_that_went_wrong_and_says_so() {
    // Connections kept 300 ms (ka=300ms) and 1 s from one address; the
    // near miss was on a 1 s one.
    let view = view_of(&[reuse(100, 300), reuse(950, 1000)]);
    assert_eq!(view.verdict, Verdict::AtRisk);
    assert_eq!(view.judged_idle_timeout_ms, 1000);
    assert!(
        view.advice.contains("own idle timeout of 1000 ms"),
        "{}",
        view.advice
    );
    // Lost on a 300 ms one: that one binds.
    let view = view_of(&[reuse(950, 1000), late(5000, 300)]);
    assert_eq!(view.judged_idle_timeout_ms, 300);
    assert!(view.advice.contains("300 ms"), "{}", view.advice);
}

#[test]
fn resets_hide_lost_requests_and_the_verdict_says_so() {
    let view = view_of(&[server_close(2000, true), reuse(1960, 2000)]);
    assert_eq!(view.verdict, Verdict::AtRisk);
    assert_eq!(view.recent.server_resets, 1);
    assert!(view.advice.contains("cannot be counted"), "{}", view.advice);
    assert!(view.advice.contains("probably did"), "{}", view.advice);
    let view = view_of(&[server_close(2000, true)]);
    assert_ne!(
        view.verdict,
        Verdict::Ok,
        "a reset never reads as nothing lost"
    );
}

/// The headroom is counted from the timeout that binds (the promise, when
/// the server keeps connections longer) and said against that one.
#[test]
fn a_client_closing_first_is_told_its_headroom_against_the_promise() {
    let mut table = PeerTable::new(10 * MINUTE);
    for (i, age) in [500u64, 500, 500].into_iter().enumerate() {
        table.record(addr(), (i as u64 + 1) * 10_000_000, &client_close(age));
    }
    let buffered = ServerIdle {
        advertised_timeout_s: Some(1),
        idle_timeout_ms: 2000,
    };
    let report = PeersReport::new(&table.snapshot(40_000_000), buffered);
    let advice = &report.peers[0].advice;
    assert!(
        advice.contains("500 ms before the server's advertised 1000 ms (it closes at 2000 ms)"),
        "{advice}"
    );
    let report = PeersReport::new(&table.snapshot(40_000_000), SERVER);
    let advice = &report.peers[0].advice;
    assert!(
        advice.contains("1500 ms before the server would (2000 ms)"),
        "{advice}"
    );
}

#[test]
fn a_lazy_pool_estimate_is_an_upper_bound() {
    let mut table = PeerTable::new(10 * MINUTE);
    for (i, age) in [1990u64, 1985, 1995].into_iter().enumerate() {
        let at = (i as u64 + 1) * 10_000_000;
        table.record(addr(), at, &client_close(age));
        table.record(addr(), at + 200, &Event::Accepted); // its next request
    }
    let report = PeersReport::new(&table.snapshot(40_000_000), SERVER);
    let view = &report.peers[0];
    assert!(view.client_idle_timeout_is_upper_bound);
    assert!(view.advice.contains("upper bound"), "{}", view.advice);
}

/// httpx with two pooled connections closes both expired ones at once,
/// when it next needs one: every close of the run is lazy, so the pool is
/// (it was not when only the last of each run counted: half of them).
#[test]
fn a_lazy_pool_closing_several_at_once_is_still_lazy() {
    let mut table = PeerTable::new(10 * MINUTE);
    for i in 1..=3u64 {
        let at = i * 10_000_000;
        table.record(addr(), at, &client_close(1992));
        table.record(addr(), at + 30, &client_close(1994));
        table.record(addr(), at + 250, &Event::Accepted); // its next request
    }
    let report = PeersReport::new(&table.snapshot(40_000_000), SERVER);
    let view = &report.peers[0];
    assert_eq!(view.recent.lazy_client_closes, 6);
    assert!(view.client_idle_timeout_is_upper_bound);
    assert!(view.advice.contains("upper bound"), "{}", view.advice);
}

#[test]
fn advice_names_the_clients_own_setting() {
    let view = view_of(&[named("python-httpx/0.27.0"), late(5000, 2000)]);
    assert_eq!(view.client, Some("httpx"));
    assert!(
        view.advice.contains("keepalive_expiry=1.9"),
        "{}",
        view.advice
    );
    let view = view_of(&[named("python-requests/2.32.3"), late(5000, 2000)]);
    assert!(view.advice.contains("cannot be told so"), "{}", view.advice);
    assert!(view.advice.contains("retry"), "{}", view.advice);
    let proxied = Event::ClientNamed {
        user_agent: Some(b"Mozilla/5.0"),
        forwarded: true,
        again: false,
        minor_version: 1,
        host: None,
    };
    let view = view_of(&[proxied, late(5000, 2000)]);
    assert!(
        view.advice.contains("keepalive_timeout 1900ms;"),
        "{}",
        view.advice
    );
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
        "user_agent",
        "recent",
        "verdict",
        "safe_pool_idle_timeout_ms",
        "advice",
    ] {
        assert!(json["peers"][0].get(key).is_some(), "{key} in {json}");
    }
    assert!(json.get("window_s").is_some());
    assert_eq!(json["peers"][0]["verdict"], "ok");
}

#[test]
fn user_agents_taking_turns_without_forwarding_headers_name_both_fixes() {
    let view = view_of(&[
        named("python-requests/2.32.3"),
        named("curl/8.5.0"),
        named("python-requests/2.32.3"),
        late(5000, 2000),
    ]);
    assert!(view.likely_proxy && !view.forwarded);
    for words in ["likely a proxy", "keepalive_timeout 1900ms", "retry"] {
        assert!(
            view.advice.contains(words),
            "{words:?} not in {}",
            view.advice
        );
    }
    // One client that says so: its own fix first, the proxy's as the
    // other possibility where requests were lost.
    let view = view_of(&[named("python-requests/2.32.3"), late(5000, 2000)]);
    assert!(!view.likely_proxy);
    assert!(view.advice.contains("cannot be told so"), "{}", view.advice);
    assert!(
        view.advice.contains("If a proxy that adds no"),
        "{}",
        view.advice
    );
}

#[test]
fn a_reuse_past_the_deadline_under_the_shadow_deadline_is_a_race() {
    // 2.5 s idle against 2 s: served only under the shadow deadline.
    let Event::Reused(late_reuse) = reuse(2500, 2000) else {
        unreachable!("a reuse")
    };
    let past = Reuse {
        past_deadline: true,
        ..late_reuse
    };
    let view = view_of(&[reuse(500, 2000), Event::Reused(past)]);
    assert_eq!(view.verdict, Verdict::Race, "{}", view.advice);
    assert_eq!(view.recent.reuses_past_deadline, 1);
    assert_eq!(view.recent.shortest_lost_reuse_ms, Some(2500));
    assert_eq!(view.recent.longest_served_reuse_ms, Some(500));
    assert_eq!(view.near_misses, 0);
    assert!(
        view.advice.contains("production would have lost it"),
        "{}",
        view.advice
    );
    let safe = view.safe_pool_idle_timeout_ms.expect("a safe value");
    assert!(safe < 2000, "{safe}");
}
