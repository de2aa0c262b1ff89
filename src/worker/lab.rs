//! What the worker tells the keep-alive lab about its connections: who
//! ended an idle one, and how a reuse stood against the connection's own
//! idle timeout and what it advertised.

use crate::config::Settings;
use crate::conn::Conn;
use crate::lab::NEAR_MISS_US;
use crate::lab::peers::{Closer, PeerEvent, PeerTable, Reuse};
use crate::session::Phase;
use crate::stats::{CloseCause, Stats};
use crate::timers::Micros;

/// Records a request that reused `conn` after `gap_us` idle: in the
/// counters and in the peer's record.
pub fn record_reuse(
    conn: &Conn,
    gap_us: Micros,
    settings: &Settings,
    stats: &Stats,
    peers: &mut PeerTable,
    now: Micros,
) {
    let reuse = reuse_of(conn, gap_us, settings);
    stats.lab.reuse_gap.record(gap_us);
    let headroom = reuse.headroom_us.max(0) as u64;
    stats.lab.reuse_headroom.record(headroom);
    if reuse.headroom_us < NEAR_MISS_US as i64 {
        stats.lab.near_misses.add(1);
    }
    peers.record(conn.peer_ip(), now, PeerEvent::Reuse(reuse));
}

/// Who ended a connection closing for `cause`, if it was idle between
/// requests (after at least one response): the client (FIN or reset) or
/// the server's idle timer.
pub fn idle_closer(conn: &Conn, cause: CloseCause) -> Option<Closer> {
    if !conn.has_served() || conn.phase() != Phase::Idle {
        return None;
    }
    match cause {
        CloseCause::Client | CloseCause::Reset => Some(Closer::Client),
        CloseCause::KeepAliveTimeout => Some(Closer::Server),
        _ => None,
    }
}

/// A reuse of `conn` after `gap_us` idle, against its idle timeout and
/// what it advertised.
fn reuse_of(conn: &Conn, gap_us: Micros, settings: &Settings) -> Reuse {
    let (idle_ms, advertised_secs) = conn.keep_alive(settings);
    let gap = gap_us.min(i64::MAX as u64) as i64;
    Reuse {
        gap_us,
        headroom_us: (idle_ms * 1000).min(i64::MAX as u64) as i64 - gap,
        past_advertised: advertised_secs.is_some_and(|secs| gap_us > secs * 1_000_000),
    }
}
