//! The peer table: per-address counts, the recent window, lazy closes,
//! User-Agents, folding into "other", merging across workers, its bound.

use super::*;
use std::net::Ipv4Addr;

const MINUTE: Micros = 60_000_000;

fn table() -> PeerTable {
    PeerTable::new(10 * MINUTE)
}

fn ip(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x7f00_0000 + n))
}

fn reuse(gap_ms: u64, headroom_ms: i64) -> Event<'static> {
    Event::Reused(Reuse {
        gap_us: gap_ms * 1000,
        headroom_us: headroom_ms * 1000,
        idle_timeout_ms: 2000,
        advertised_secs: Some(2),
        past_deadline: false,
    })
}

fn idle_end(closer: Closer, age_ms: u64) -> Event<'static> {
    Event::IdleEnded(IdleEnd {
        closer,
        age_us: age_ms * 1000,
        idle_timeout_ms: 2000,
        reset: false,
        round_trip_us: Some(50),
    })
}

fn late(delay_us: u64) -> Event<'static> {
    Event::AfterFin(AfterFin::Request {
        delay_us,
        idle_timeout_ms: 2000,
        round_trip_us: Some(100),
    })
}

#[test]
fn events_are_counted_per_address() {
    let mut table = table();
    table.record(ip(2), 10, &Event::Accepted);
    table.record(ip(2), 11, &Event::ResponsesDone(3));
    table.record(ip(2), 12, &reuse(900, 1100));
    table.record(ip(2), 13, &reuse(1950, 50));
    table.record(ip(2), 14, &idle_end(Closer::Client, 1200));
    table.record(ip(3), 15, &late(7000));
    table.record(ip(3), 16, &late(30));
    let closed = Event::AfterFin(AfterFin::Closed { delay_us: 9000 });
    table.record(ip(3), 17, &closed);
    let snapshot = table.snapshot(20);
    let [two, three] = &snapshot.peers[..] else {
        panic!("{snapshot:?}");
    };
    assert_eq!((two.addr, two.seen_ago_us), (ip(2), 6));
    assert_eq!((two.stats.connections, two.stats.requests), (1, 3));
    assert_eq!(two.stats.reuse_gaps.count(), 2);
    assert_eq!(two.stats.near_misses, 1);
    assert_eq!(two.stats.client_idle_closes, 1);
    assert_eq!(two.stats.client_idle_ages.as_slice(), &[1200]);
    assert_eq!((two.recent.reuses, two.recent.near_misses), (2, 1));
    assert_eq!(two.recent.longest_served_gap_ms, Some(1950));
    assert_eq!(three.stats.late_requests, 2);
    assert_eq!(three.stats.late_request_delay_max_us, 7000);
    assert_eq!(three.stats.peer_close_delays.count(), 1);
    // 30 µs after the FIN, under the 100 µs round trip: too close to
    // tell whether the client had the FIN when it sent.
    assert_eq!(three.recent.late_too_close, 1);
    assert_eq!(three.recent.late_crossing_fin, 0);
    assert_eq!(three.recent.late_after_fin, 1);
    assert_eq!(three.recent.lowest_failure_ms, Some(2000));
    assert_eq!(snapshot.other, PeerStats::default());
}

/// Requests placed on both sides of the FIN, at the offsets the wire
/// showed for real clients (aiohttp in before it; httpx 0.029 ms and
/// undici 0.052 and 0.450 ms after it): only the one in before it crossed
/// it, those within a round trip of it cannot be told, and none after it
/// is called crossed.
#[test]
fn late_requests_are_placed_against_the_fin_as_the_wire_would() {
    use Crossing::*;
    // The watch's delay: 0 for a request in before the FIN left, else µs
    // after it, rounded up.
    let delay = |offset_ms: f64| (offset_ms * 1000.0).ceil().max(0.0) as Micros;
    let offsets = [-0.5, 0.03, 0.05, 0.45, 5.0];
    let placed = |rtt: Option<u32>| offsets.map(|ms| Crossing::of(delay(ms), rtt));
    // Loopback's smoothed round trip, 100 µs.
    assert_eq!(
        placed(Some(100)),
        [Crossed, TooClose, TooClose, AfterFin, AfterFin]
    );
    // A longer one makes more of them too close to tell, never crossed.
    assert_eq!(
        placed(Some(600)),
        [Crossed, TooClose, TooClose, TooClose, AfterFin]
    );
    // None measured: the stated bound.
    assert_eq!(
        placed(None),
        [Crossed, TooClose, TooClose, TooClose, AfterFin]
    );
    // And so the table counts them.
    let mut table = table();
    for (i, ms) in offsets.into_iter().enumerate() {
        table.record(ip(4), 10 + i as Micros, &late(delay(ms)));
    }
    let recent = table.snapshot(20).peers[0].recent;
    assert_eq!(
        (
            recent.late_crossing_fin,
            recent.late_too_close,
            recent.late_after_fin
        ),
        (1, 2, 2)
    );
    assert_eq!(recent.late_requests(), 5);
}

#[test]
fn the_window_forgets_what_is_older_than_it_and_the_totals_do_not() {
    let mut table = table();
    table.record(ip(2), MINUTE, &late(5000));
    let soon = table.snapshot(5 * MINUTE);
    assert_eq!(soon.peers[0].recent.late_requests(), 1);
    let later = table.snapshot(12 * MINUTE);
    assert_eq!(
        later.peers[0].recent.late_requests(),
        0,
        "out of the window"
    );
    assert_eq!(later.peers[0].stats.late_requests, 1, "the total stays");
    // A bucket reused for a newer stretch starts empty.
    table.record(ip(2), 11 * MINUTE + 5, &reuse(100, 1900));
    let now = table.snapshot(11 * MINUTE + 10);
    assert_eq!(now.peers[0].recent.late_requests(), 0);
    assert_eq!(now.peers[0].recent.reuses, 1);
}

#[test]
fn the_binding_terms_are_the_shortest_that_went_wrong() {
    let mut table = table();
    let with = |ms, headroom_ms: i64| {
        Event::Reused(Reuse {
            gap_us: 100_000,
            headroom_us: headroom_ms * 1000,
            idle_timeout_ms: ms,
            advertised_secs: None,
            past_deadline: false,
        })
    };
    table.record(ip(2), 1, &with(300, 250));
    table.record(ip(2), 2, &with(1000, 30)); // a near miss
    let recent = table.snapshot(3).peers[0].recent;
    let binding = recent.binding.unwrap();
    assert_eq!((binding.idle_timeout_ms, binding.troubled), (1000, true));
}

#[test]
fn a_client_close_with_its_next_request_is_lazy() {
    let mut table = table();
    table.record(ip(2), 1_000_000, &idle_end(Closer::Client, 1990));
    table.record(ip(2), 1_000_300, &Event::Accepted); // right behind it
    table.record(ip(2), 9_000_000, &idle_end(Closer::Client, 1500));
    let recent = table.snapshot(9_000_001).peers[0].recent;
    assert_eq!(
        (recent.client_idle_closes, recent.lazy_client_closes),
        (2, 1)
    );
}

/// A lazy pool closes every expired connection it holds at once, when it
/// next needs one: each of those closes is lazy, not only the last (httpx
/// had 54 of 110 counted, under the half that flags a lazy pool).
#[test]
fn a_run_of_client_closes_before_the_next_request_is_lazy_every_one() {
    let mut table = table();
    table.record(ip(2), 1_000_000, &idle_end(Closer::Client, 1990));
    table.record(ip(2), 1_000_040, &idle_end(Closer::Client, 1992));
    table.record(ip(2), 1_000_090, &idle_end(Closer::Client, 2400));
    table.record(ip(2), 1_000_300, &Event::Accepted);
    // A close long after the previous ones, with no use behind it.
    table.record(ip(2), 9_000_000, &idle_end(Closer::Client, 1500));
    let recent = table.snapshot(9_000_001).peers[0].recent;
    assert_eq!(
        (recent.client_idle_closes, recent.lazy_client_closes),
        (4, 3)
    );
}

/// Under SO_REUSEPORT a lazy pool's next connection lands on any worker:
/// the close on one worker and the connection on the other still pair
/// (one table each saw half of them: 4 of 8 httpx closes lazy).
#[test]
fn a_lazy_close_pairs_with_a_connection_on_another_worker() {
    let board = Arc::new(LazyBoard::shared());
    let one = PeerTable::sharing(10 * MINUTE, Arc::clone(&board), 0);
    let two = PeerTable::sharing(10 * MINUTE, Arc::clone(&board), 0);
    assert_eq!(close_on_one_then_connect_on_two(one, two), (1, 1));
}

/// A worker's table is built on its own board and told the shared one
/// after (the server's order): from then on it pairs across workers too.
#[test]
fn a_table_told_the_shared_board_pairs_with_another_worker() {
    let board = Arc::new(LazyBoard::shared());
    let [mut one, mut two] = [PeerTable::new(10 * MINUTE), PeerTable::new(10 * MINUTE)];
    one.share_lazy_board(Arc::clone(&board));
    two.share_lazy_board(Arc::clone(&board));
    assert_eq!(close_on_one_then_connect_on_two(one, two), (1, 1));
}

/// A client idle close on `one`, then a new connection from the same
/// peer on `two`: the merged (client idle closes, lazy ones).
fn close_on_one_then_connect_on_two(mut one: PeerTable, mut two: PeerTable) -> (u64, u64) {
    // The workers' loop clocks read differently; the board keeps its own.
    one.record(ip(2), 5 * MINUTE, &idle_end(Closer::Client, 1992));
    two.record(ip(2), 17, &Event::Accepted);
    let merged = PeersSnapshot::merge([one.snapshot(5 * MINUTE + 1), two.snapshot(18)]);
    let recent = merged.peers[0].recent;
    (recent.client_idle_closes, recent.lazy_client_closes)
}

#[test]
fn user_agents_keep_the_latest_distinct_ones() {
    let mut table = table();
    for agent in [&b"a"[..], b"b", b"a", b"c", b"c"] {
        let named = Event::ClientNamed {
            user_agent: Some(agent),
            forwarded: false,
            again: false,
            minor_version: 1,
            host: None,
        };
        table.record(ip(2), 1, &named);
    }
    let stats = &table.snapshot(2).peers[0].stats;
    assert_eq!(stats.agents.texts().collect::<Vec<_>>(), ["c", "a"]);
    let long = [b'x'; 200];
    let named = Event::ClientNamed {
        user_agent: Some(&long),
        forwarded: true,
        again: false,
        minor_version: 1,
        host: None,
    };
    table.record(ip(2), 3, &named);
    let stats = &table.snapshot(4).peers[0].stats;
    assert_eq!(stats.agents.texts().next().unwrap().len(), AGENT_BYTES);
    assert!(stats.forwarded);
}

#[test]
fn the_table_keeps_the_most_recent_peers_and_folds_the_rest() {
    let mut table = table();
    for n in 0..10_000u32 {
        table.record(ip(n), u64::from(n), &Event::Accepted);
        // An old peer that keeps coming back stays.
        table.record(ip(1_000_000), u64::from(n), &Event::ResponsesDone(1));
    }
    let snapshot = table.snapshot(10_000);
    assert_eq!(snapshot.peers.len(), MAX_PEERS);
    assert!(snapshot.peers.iter().any(|p| p.addr == ip(1_000_000)));
    assert!(snapshot.peers.iter().any(|p| p.addr == ip(9_999)));
    assert!(!snapshot.peers.iter().any(|p| p.addr == ip(0)));
    let kept: u64 = snapshot.peers.iter().map(|p| p.stats.connections).sum();
    assert_eq!(kept + snapshot.other.connections, 10_000, "nothing lost");
    // Every kept peer is still found after the index rebuilds.
    for peer in &snapshot.peers {
        assert!(table.find(peer.addr).is_some(), "{}", peer.addr);
    }
}

#[test]
fn a_merge_joins_an_address_across_workers_and_keeps_the_most_recent() {
    let mut first = table();
    let mut second = table();
    first.record(ip(2), 100, &Event::Accepted);
    first.record(ip(2), 100, &late(5000));
    second.record(ip(2), 5, &Event::Accepted);
    second.record(ip(2), 5, &late(9000));
    second.record(ip(3), 9, &Event::Accepted);
    for n in 0..MAX_PEERS as u32 {
        second.record(ip(100 + n), 1, &Event::Accepted);
    }
    let merged = PeersSnapshot::merge([first.snapshot(100), second.snapshot(10)]);
    assert_eq!(merged.peers.len(), MAX_PEERS);
    assert_eq!(merged.window_us, 10 * MINUTE);
    assert_eq!(merged.peers[0].addr, ip(2), "seen 0 µs ago on the first");
    assert_eq!(merged.peers[0].stats.connections, 2);
    assert_eq!(merged.peers[0].recent.late_requests(), 2);
    assert_eq!(merged.peers[1].addr, ip(3));
    let total: u64 = merged.peers.iter().map(|p| p.stats.connections).sum();
    assert_eq!(total + merged.other.connections, 2 + 1 + MAX_PEERS as u64);
}

#[test]
fn the_table_stays_under_200_kib_per_worker() {
    // The most memory the table ever holds: its full entries and its
    // index (inline), whatever the number of peers.
    let bytes = std::mem::size_of::<PeerTable>() + MAX_PEERS * std::mem::size_of::<Entry>();
    eprintln!("peer table at most {bytes} bytes per worker");
    assert!(bytes < 200 * 1024, "{bytes} bytes");
    let mut table = table();
    for n in 0..10_000 {
        table.record(ip(n), u64::from(n), &Event::Accepted);
    }
    assert_eq!(table.entries.capacity(), MAX_PEERS, "never grown");
}

#[test]
fn ipv6_peers_are_told_apart() {
    let mut table = table();
    let a: IpAddr = "::1".parse().unwrap();
    let b: IpAddr = "::2".parse().unwrap();
    table.record(a, 1, &Event::Accepted);
    table.record(b, 1, &Event::Accepted);
    table.record(b, 1, &Event::Accepted);
    let snapshot = table.snapshot(1);
    let count = |addr| {
        let peer = snapshot.peers.iter().find(|p| p.addr == addr).unwrap();
        peer.stats.connections
    };
    assert_eq!((count(a), count(b)), (1, 2));
}

#[test]
fn past_the_promise_is_judged_by_the_gap_the_wire_sees() {
    let mut table = table();
    // A server that keeps 3 s and promises 2: the gap (from the response's
    // departure to the request's arrival, as the connection measures them
    // near the promise) decides, not the headroom the grace leaves.
    let inside = Reuse {
        gap_us: 2_000_000,
        headroom_us: 1_000_000,
        idle_timeout_ms: 3000,
        advertised_secs: Some(2),
        past_deadline: false,
    };
    table.record(ip(2), 1, &Event::Reused(inside));
    let past = Reuse {
        gap_us: 2_000_001,
        headroom_us: 999_999,
        ..inside
    };
    table.record(ip(2), 2, &Event::Reused(past));
    // Nothing advertised, nothing promised: never past.
    let unadvertised = Reuse {
        gap_us: 2_900_000,
        advertised_secs: None,
        ..inside
    };
    table.record(ip(2), 3, &Event::Reused(unadvertised));
    let snapshot = table.snapshot(4);
    let peer = &snapshot.peers[0];
    assert_eq!(peer.stats.reuses_past_advertised, 1);
    assert_eq!(peer.recent.past_advertised, 1);
}

#[test]
fn clients_taking_turns_on_one_address_are_told_from_an_upgrade() {
    let mut table = table();
    let name = |table: &mut PeerTable, n: u32, agent: &'static [u8]| {
        let named = Event::ClientNamed {
            user_agent: Some(agent),
            forwarded: false,
            again: false,
            minor_version: 1,
            host: None,
        };
        table.record(ip(n), 1, &named);
    };
    // One client, upgraded once.
    for agent in [&b"app/1.0"[..], b"app/1.0", b"app/1.1", b"app/1.1"] {
        name(&mut table, 2, agent);
    }
    // Two clients behind one address, taking turns.
    for agent in [
        &b"python-requests/2.32"[..],
        b"curl/8.5.0",
        b"python-requests/2.32",
    ] {
        name(&mut table, 3, agent);
    }
    // A client that names itself and one that does not (Node's http.Agent).
    name(&mut table, 4, b"curl/8.5.0");
    let unnamed = Event::ClientNamed {
        user_agent: None,
        forwarded: false,
        again: false,
        minor_version: 1,
        host: None,
    };
    for _ in 0..3 {
        table.record(ip(4), 1, &unnamed);
        table.record(ip(5), 1, &unnamed);
    }
    let snapshot = table.snapshot(2);
    let turns = |n: u32| {
        let peer = snapshot.peers.iter().find(|p| p.addr == ip(n)).unwrap();
        peer.stats.agents.take_turns()
    };
    assert!(!turns(2), "an upgrade is one client");
    assert!(turns(3), "clients taking turns");
    assert!(turns(4), "one client that names itself, one that does not");
    assert!(!turns(5), "one client that never names itself");
}

#[test]
fn two_user_agents_on_one_connection_are_several_clients() {
    let mut table = table();
    let name = |agent: &'static [u8], again: bool| Event::ClientNamed {
        user_agent: Some(agent),
        forwarded: false,
        again,
        minor_version: 1,
        host: None,
    };
    // One connection: its first request from one client, a later one
    // from another (once: no turns taken across connections).
    table.record(ip(2), 1, &name(b"python-requests/2.32", false));
    table.record(ip(2), 2, &name(b"curl/8.5.0", true));
    // Another address: the same two, on two connections, one after the
    // other (an upgrade, as far as it can tell).
    table.record(ip(3), 1, &name(b"python-requests/2.32", false));
    table.record(ip(3), 2, &name(b"curl/8.5.0", false));
    let snapshot = table.snapshot(3);
    let turns = |n: u32| {
        let peer = snapshot.peers.iter().find(|p| p.addr == ip(n)).unwrap();
        peer.stats.agents.take_turns()
    };
    assert!(turns(2), "two clients' requests on one connection");
    assert!(!turns(3), "one after the other, on their own connections");
}

#[test]
fn a_reuse_past_the_deadline_is_a_failure_not_a_near_miss() {
    let mut table = table();
    let past = Event::Reused(Reuse {
        gap_us: 2_500_000,
        headroom_us: -500_000,
        idle_timeout_ms: 2000,
        advertised_secs: Some(2),
        past_deadline: true,
    });
    table.record(ip(2), 10, &reuse(500, 1500));
    table.record(ip(2), 20, &past);
    let recent = table.snapshot(30).peers[0].recent;
    assert_eq!(recent.reuses, 2);
    assert_eq!(recent.past_deadline, 1);
    assert_eq!(recent.near_misses, 0);
    assert_eq!(recent.lowest_failure_ms, Some(2500));
    assert_eq!(
        recent.longest_served_gap_ms,
        Some(500),
        "only before the deadline"
    );
}

#[test]
fn a_lazy_close_keeps_its_age_and_a_young_one_is_left_out() {
    let mut table = table();
    // Let go at 2.5 s idle, as the pool opened a new connection.
    table.record(ip(2), 1_000_000, &idle_end(Closer::Client, 2500));
    table.record(ip(2), 1_000_300, &Event::Accepted);
    // A close right after a new connection, 3 ms idle: a client done.
    table.record(ip(2), 2_000_000, &Event::Accepted);
    table.record(ip(2), 2_000_100, &idle_end(Closer::Client, 3));
    let recent = table.snapshot(3_000_000).peers[0].recent;
    assert_eq!(recent.lazy_client_closes, 2);
    assert_eq!(recent.shortest_lazy_close_ms, Some(2500));
}
