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
//!   server's idle FIN (those within a round trip of it crossed it in
//!   flight: the client could not have known). Nothing else is a race.
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
//! ([`crate::advice::clients`]).

use serde::Serialize;

use super::peers::{PeerStats, PeersSnapshot, Recent, Terms};
use crate::advice::clients::{self, Client, PROXIES};
use crate::advice::{Close, IdleCloseFacts, Source, safe_pool_idle_timeout};

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
    /// Lost: crossed the server's FIN in flight.
    pub late_requests_crossed_fin: u64,
    /// Idle connections the server closed with a reset.
    pub server_resets: u64,
    pub client_idle_closes: u64,
    pub lazy_client_closes: u64,
    pub server_idle_closes: u64,
}

impl From<&Recent> for RecentView {
    fn from(recent: &Recent) -> Self {
        RecentView {
            reuses: recent.reuses,
            near_misses: recent.near_misses,
            reuses_past_advertised: recent.past_advertised,
            late_requests: recent.late_after_fin,
            late_requests_crossed_fin: recent.late_crossing_fin,
            server_resets: recent.server_resets,
            client_idle_closes: recent.client_idle_closes,
            lazy_client_closes: recent.lazy_client_closes,
            server_idle_closes: recent.server_idle_closes,
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
    /// The longest round trip the kernel measured on its connections in
    /// the window.
    pub round_trip_ms: Option<f64>,
    /// The idle timeout the verdict and advice are about (the peer's
    /// connections may have had one of their own).
    pub judged_idle_timeout_ms: u64,
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
                };
                PeerView::new(peer.addr.to_string(), ago, seen, server)
            })
            .collect();
        if snapshot.other != PeerStats::default() {
            let seen = Seen {
                stats: &snapshot.other,
                recent: &snapshot.other_recent,
                window_s,
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
        let judgement = judge(seen, estimate, lazy, terms, client, server);
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
            round_trip_ms: recent.round_trip_us.map(|us| f64::from(us) / 1000.0),
            judged_idle_timeout_ms: terms.idle_timeout_ms,
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

/// A verdict, the safe pool idle timeout, and the words.
struct Judgement {
    verdict: Verdict,
    safe_ms: Option<u64>,
    advice: String,
}

/// The verdict on the window, and a paragraph saying what happened, which
/// side to change and to what, in the client's own terms where known.
fn judge(
    seen: Seen<'_>,
    estimate: Option<u32>,
    lazy: bool,
    terms: Terms,
    client: Option<&'static Client>,
    server: ServerIdle,
) -> Judgement {
    let Seen {
        stats,
        recent,
        window_s,
    } = seen;
    let real = terms.idle_timeout_ms;
    let promise = terms.advertised_secs.map(|s| s * 1000);
    let facts = IdleCloseFacts {
        source: Source::Configured,
        keeps_alive: true,
        advertised_ms: promise,
        close: Close::At {
            earliest_ms: real as f64,
            seen_ms: None,
            period_ms: None,
        },
        round_trip_ms: recent.round_trip_us.map(|us| f64::from(us) / 1000.0),
        lowest_failure_ms: recent.lowest_failure_ms.map(|ms| ms as f64),
        highest_success_below_failure_ms: recent
            .longest_served_gap_ms
            .filter(|&ok| recent.lowest_failure_ms.is_none_or(|failed| ok < failed))
            .map(|ms| ms as f64),
    };
    let safe = safe_pool_idle_timeout(&facts).safe_pool_idle_timeout_ms;
    let within = window_words(window_s);
    let about = match real == server.idle_timeout_ms {
        true => format!("the server's idle timeout of {real} ms"),
        false => format!("its connections' own idle timeout of {real} ms (set for them)"),
    };
    let fix = fix_words(safe, client, stats.forwarded);
    let mut verdict = Verdict::Ok;
    let mut says = Vec::new();
    let lost = recent.late_requests();
    if lost > 0 {
        verdict = Verdict::Race;
        let mut what = format!(
            "{lost} request{} lost the race {within} under {about}",
            plural(lost)
        );
        if recent.late_after_fin > 0 {
            let n = recent.late_after_fin;
            what.push_str(&format!(
                ": {n} arrived after the server had closed the connection, when the client \
                 could have seen its FIN"
            ));
        }
        if recent.late_crossing_fin > 0 {
            let n = recent.late_crossing_fin;
            let joint = if recent.late_after_fin > 0 { ";" } else { ":" };
            what.push_str(&format!(
                "{joint} {n} crossed the server's FIN in flight (sent before it could have \
                 arrived: the client could not have known)"
            ));
        }
        says.push(format!("{what}. {fix}"));
    }
    if recent.server_resets > 0 {
        verdict = verdict.max_with(Verdict::AtRisk);
        let n = recent.server_resets;
        let evidence = match recent.near_misses {
            0 => "no reuse came near the deadline, so none is likely".to_owned(),
            m => format!(
                "{m} reuse{} came within 100 ms of the deadline, so some probably did",
                plural(m)
            ),
        };
        says.push(format!(
            "The server closed {n} of its idle connections with a reset {within}: a request \
             that lost the race then meets the reset and never reaches the server, so lost \
             requests cannot be counted here; {evidence}."
        ));
    }
    if verdict != Verdict::Race && (recent.near_misses > 0 || recent.past_advertised > 0) {
        verdict = Verdict::AtRisk;
        let mut what = Vec::new();
        if recent.near_misses > 0 {
            let n = recent.near_misses;
            what.push(format!(
                "{n} reuse{} came within 100 ms of {about}",
                plural(n)
            ));
        }
        if let (n @ 1.., Some(promise)) = (recent.past_advertised, promise) {
            what.push(format!(
                "{n} reuse{} came after the advertised Keep-Alive timeout of {promise} ms (served: \
                 the server kept the connection longer than it promised, this time)",
                plural(n)
            ));
        }
        says.push(format!("{} {within}. {fix}", capitalise(&what.join("; "))));
    }
    let keeps = promise.unwrap_or(real).min(real);
    let estimate_words = |estimate: u64| match lazy {
        true => format!(
            "at most about {estimate} ms (an upper bound: it closes an expired connection only \
             when it next needs one)"
        ),
        false => format!("about {estimate} ms"),
    };
    match estimate.map(u64::from) {
        Some(estimate) if estimate >= keeps && verdict == Verdict::Ok && !lazy => {
            verdict = Verdict::AtRisk;
            says.push(format!(
                "It keeps idle connections {}, not less than the server's {keeps} ms. {fix}",
                estimate_words(estimate)
            ));
        }
        Some(estimate) if verdict == Verdict::Ok && estimate < keeps => says.push(format!(
            "It closes idle connections first, after {}, {} ms before the server would ({real} \
             ms): nothing to change.",
            estimate_words(estimate),
            keeps - estimate
        )),
        Some(estimate) if verdict == Verdict::Ok => says.push(format!(
            "It keeps idle connections {}; with no reuse near the deadline {within}, nothing to \
             change yet. {fix}",
            estimate_words(estimate)
        )),
        _ if verdict != Verdict::Ok => {}
        _ if recent.server_idle_closes > 0 => says.push(format!(
            "The server closes its idle connections first ({real} ms) and no reuse came near that \
             deadline {within}: nothing to change. {fix}"
        )),
        _ => says.push(format!(
            "No connection of it ended idle {within}, and no reuse came near the server's \
             deadline: nothing to change so far."
        )),
    }
    if lost == 0 && stats.late_requests > 0 {
        says.push(format!(
            "(Since the server started: {} lost request{}, none {within}.)",
            stats.late_requests,
            plural(stats.late_requests)
        ));
    }
    Judgement {
        verdict,
        safe_ms: safe,
        advice: says.join(" "),
    }
}

impl Verdict {
    /// The graver of two verdicts.
    fn max_with(self, other: Verdict) -> Verdict {
        let rank = |v: Verdict| match v {
            Verdict::Ok => 0,
            Verdict::AtRisk => 1,
            Verdict::Race => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// What the client should change, in its own terms where it is known.
fn fix_words(safe: Option<u64>, client: Option<&Client>, forwarded: bool) -> String {
    let Some(safe) = safe else {
        return "No pool idle timeout is known to be safe: raise the server's keep-alive \
                timeout above how long the client keeps idle connections, or have the client \
                retry a request that meets a closed connection."
            .to_owned();
    };
    match client {
        _ if forwarded => {
            let proxies: Vec<String> = PROXIES
                .iter()
                .map(|proxy| format!("{}: {}", proxy.name, proxy.advice(safe)))
                .collect();
            format!(
                "A proxy forwards these requests: keep its idle upstream connections {safe} ms \
                 or less ({}).",
                proxies.join("; ")
            )
        }
        Some(client) if client.has_setting() => format!(
            "Set {}'s {} ({safe} ms or less).",
            client.name,
            client.advice(safe)
        ),
        Some(client) => format!(
            "{} has no such setting: {}.",
            client.name,
            client.advice(safe)
        ),
        None => format!(
            "Lower this client's pool idle timeout to {safe} ms or less (or raise the server's \
             keep-alive timeout above how long the client keeps idle connections)."
        ),
    }
}

/// "in the last 10 min" for a window of `seconds`.
fn window_words(seconds: f64) -> String {
    match seconds {
        s if s >= 120.0 && s % 60.0 == 0.0 => format!("in the last {} min", s / 60.0),
        s => format!("in the last {s} s"),
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::peers::PeerTable;
    use crate::observe::{AfterFin, Closer, Event, IdleEnd, Reuse};
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
    fn a_request_within_a_round_trip_of_the_fin_crossed_it_in_flight() {
        let view = view_of(&[late(4, 2000)]);
        assert_eq!(view.verdict, Verdict::Race);
        assert_eq!(view.recent.late_requests_crossed_fin, 1);
        assert_eq!(view.recent.late_requests, 0);
        assert!(
            view.advice.contains("crossed the server's FIN in flight"),
            "{}",
            view.advice
        );
        assert!(!view.advice.contains("could have seen"), "{}", view.advice);
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
        assert!(view.advice.contains("no such setting"), "{}", view.advice);
        assert!(view.advice.contains("retry"), "{}", view.advice);
        let proxied = Event::ClientNamed {
            user_agent: Some(b"Mozilla/5.0"),
            forwarded: true,
        };
        let view = view_of(&[proxied, late(5000, 2000)]);
        assert!(
            view.advice.contains("keepalive_timeout 1s;"),
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
}
