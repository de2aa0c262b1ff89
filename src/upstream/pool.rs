//! The worker's connections to its upstream: each in one slab for its
//! whole life, registered once under its own token, lent to one client
//! connection at a time or idle in a LIFO pool under an unref'd timer
//! (`--upstream-idle-timeout`, or less: below), so the pool never holds
//! a connection longer than the upstream is trusted to keep it.
//!
//! The pool also learns that trust ([`IdleLimit`]): a pooled connection
//! the service closed while idle (seen here, or by a request that met it
//! closed before any answer, [`Upstreams::close_raced`]) and an answer's
//! `Keep-Alive: timeout=N` ([`Upstreams::advertised`]) lower the idle
//! limit for the worker's life, logged (info, rate-limited) and shown as
//! `kas_upstream_idle_limit_seconds`. So that a service closing at about
//! the limit is seen without a request meeting its close, a connection
//! at the limit leaves the pool but stays open, watched, half the limit
//! more: a close then is learned from, as one in the pool is.

use std::io::{self, Read};
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use slab::Slab;

use super::idle_limit::IdleLimit;
use crate::clock::RateLimit;
use crate::readiness::{interrupted, would_block};
use crate::timer_event::TimerEvent;
use crate::timers::{Micros, TimerId, TimerLists};

/// Set in the token of an upstream connection: its slab key is below it.
/// (Client connections' tokens are their slab keys, below 2³²; the
/// worker's own tokens are near `usize::MAX` and matched first.)
pub const UPSTREAM_BIT: usize = 1 << 40;
/// Idle upstream connections a worker keeps at most (nginx's `keepalive
/// 32` per worker, doubled): more go closed.
const MAX_IDLE: usize = 64;

/// Who holds an upstream connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// The client connection with this slab key.
    Lent { client: u32 },
    /// Nobody: pooled, until this timer.
    Idle { timer: TimerId },
    /// Nobody: out of the pool at the idle limit, and watched until this
    /// timer (half the limit more) for the service's own close, which
    /// then shows its idle life without a request ever meeting it.
    Watched { timer: TimerId },
}

impl Owner {
    /// The timer of an idle or watched connection.
    fn timer(self) -> Option<TimerId> {
        match self {
            Owner::Lent { .. } => None,
            Owner::Idle { timer } | Owner::Watched { timer } => Some(timer),
        }
    }
}

struct UpstreamConn {
    stream: TcpStream,
    owner: Owner,
    /// When it was last pooled.
    pooled_at: Micros,
    /// How long it had been idle when last lent (0 if never pooled): a
    /// request that finds it closed before any answer learns from it.
    idle_when_lent: Micros,
}

/// At most one warning about a failing upstream per this many ms.
const WARNING_EVERY_MS: u64 = 10_000;
/// At most one line about a shrinking idle limit per this many ms.
const LEARNED_EVERY_MS: u64 = 10_000;
/// The idle limit of a pool made without a setting (the flag's default).
const DEFAULT_IDLE_MS: u64 = 1_000;

/// What taught the pool a shorter idle limit.
#[derive(Debug, Clone, Copy)]
enum Evidence {
    ClosedIdle { age_ms: u64 },
    Advertised { timeout_s: u64 },
}

/// A worker's upstream connections.
pub struct Upstreams {
    /// The worker's poll, to register new connections (`None`: connects
    /// fail, as in unit tests with no poll).
    registry: Option<Registry>,
    conns: Slab<UpstreamConn>,
    /// Idle keys, the most recently pooled last (taken first: the
    /// warmest connection, and the rest age out).
    idle: Vec<u32>,
    /// How often a failing upstream is logged.
    warning: RateLimit,
    /// The last address of the upstream's name a connect reached: the
    /// first tried (of a name with several, see [`Upstreams::address`]).
    preferred: Option<SocketAddr>,
    /// How long an idle connection is pooled: the setting, or less.
    idle_limit: IdleLimit,
    /// How often a shrinking idle limit is logged.
    learned: RateLimit,
    /// The upstream as the log names it.
    name: String,
}

impl Default for Upstreams {
    fn default() -> Self {
        Upstreams::new(None, String::new(), DEFAULT_IDLE_MS)
    }
}

impl Upstreams {
    /// A pool for the upstream `name`, its connections registered with
    /// `registry` (`None`: connects fail), idle ones kept at most
    /// `idle_ms` (`--upstream-idle-timeout`) or what the service shows.
    pub fn new(registry: Option<Registry>, name: String, idle_ms: u64) -> Self {
        Upstreams {
            registry,
            conns: Slab::new(),
            idle: Vec::new(),
            warning: RateLimit::every_ms(WARNING_EVERY_MS),
            preferred: None,
            idle_limit: IdleLimit::new(idle_ms),
            learned: RateLimit::every_ms(LEARNED_EVERY_MS),
            name,
        }
    }

    /// How long an idle connection is pooled now, in ms (0: not at all).
    pub fn idle_limit_ms(&self) -> u64 {
        self.idle_limit.ms()
    }

    /// An answer said `Keep-Alive: timeout=<timeout_s>`: the idle limit
    /// goes under it.
    pub fn advertised(&mut self, timeout_s: u64, now: Micros) {
        let shrunk = self.idle_limit.advertised(timeout_s);
        self.tell(shrunk, Evidence::Advertised { timeout_s }, now);
    }

    /// The service closed a pooled connection idle for `idle`: the idle
    /// limit goes under that life.
    fn closed_while_idle(&mut self, idle: Micros, now: Micros) {
        let age_ms = idle / 1_000;
        let shrunk = self.idle_limit.closed_idle_after(age_ms);
        self.tell(shrunk, Evidence::ClosedIdle { age_ms }, now);
    }

    /// Logs a shrunk limit (one line per `LEARNED_EVERY_MS`).
    fn tell(&mut self, shrunk: Option<u64>, evidence: Evidence, now: Micros) {
        let Some(limit_ms) = shrunk else {
            return;
        };
        if self.learned.allow(now) {
            let upstream = &self.name;
            let why = match evidence {
                Evidence::ClosedIdle { age_ms } => {
                    format!("it closed a connection idle for {age_ms} ms")
                }
                Evidence::Advertised { timeout_s } => {
                    format!("it answered Keep-Alive: timeout={timeout_s}")
                }
            };
            tracing::info!(
                "upstream {upstream}: idle connections now pooled at most {limit_ms} ms ({why})"
            );
        }
    }

    /// Whether a failure at `now` may be logged (one per
    /// `WARNING_EVERY_MS`; each is counted all the same).
    pub fn warning_allowed(&mut self, now: Micros) -> bool {
        self.warning.allow(now)
    }

    /// Where a connect goes after `tries` refusals: the address that
    /// worked last, then the others in the resolver's order (IPv4 first).
    pub fn address(&self, addrs: &[SocketAddr], tries: u8) -> SocketAddr {
        let first = self
            .preferred
            .and_then(|preferred| addrs.iter().position(|&addr| addr == preferred))
            .unwrap_or(0);
        addrs[(first + usize::from(tries)) % addrs.len()]
    }

    /// A connect reached `addr`: tried first from now on.
    pub fn connected_to(&mut self, addr: SocketAddr) {
        self.preferred = Some(addr);
    }

    /// The poll token of upstream connection `key`.
    pub fn token(key: u32) -> Token {
        Token(UPSTREAM_BIT | key as usize)
    }

    /// The upstream key a token names, if it is an upstream token.
    pub fn key_of(token: Token) -> Option<u32> {
        (token.0 & UPSTREAM_BIT != 0).then_some((token.0 & !UPSTREAM_BIT) as u32)
    }

    /// Open upstream connections, and how many of them are idle (pooled
    /// or watched).
    pub fn counts(&self) -> (usize, usize) {
        let lent = self
            .conns
            .iter()
            .filter(|(_, conn)| matches!(conn.owner, Owner::Lent { .. }))
            .count();
        (self.conns.len(), self.conns.len() - lent)
    }

    /// The client connection `key` is lent to, if it is lent.
    pub fn lent_to(&self, key: u32) -> Option<u32> {
        match self.conns.get(key as usize)?.owner {
            Owner::Lent { client } => Some(client),
            Owner::Idle { .. } | Owner::Watched { .. } => None,
        }
    }

    /// The socket of connection `key`.
    pub fn stream(&self, key: u32) -> Option<&TcpStream> {
        self.conns.get(key as usize).map(|conn| &conn.stream)
    }

    /// Lends the most recently pooled idle connection to `client`.
    pub fn take_idle(
        &mut self,
        client: u32,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<u32> {
        let key = self.idle.pop()?;
        let conn = &mut self.conns[key as usize];
        if let Owner::Idle { timer } = conn.owner {
            timers.unenroll(timer);
        }
        conn.owner = Owner::Lent { client };
        conn.idle_when_lent = now.saturating_sub(conn.pooled_at);
        Some(key)
    }

    /// Closes connection `key`, lent from the pool and found closed
    /// before any answer (the race the retry hides): its idle age when
    /// lent lowers the idle limit.
    pub fn close_raced(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>, now: Micros) {
        if let Some(conn) = self.conns.get(key as usize)
            && conn.idle_when_lent > 0
        {
            let idle = conn.idle_when_lent;
            self.closed_while_idle(idle, now);
        }
        self.close(key, timers);
    }

    /// Starts a connect to `addr` for `client` (non-blocking: it completes
    /// on the socket's writable edge) and registers it.
    pub fn connect(&mut self, addr: SocketAddr, client: u32) -> io::Result<u32> {
        let Some(registry) = &self.registry else {
            return Err(io::Error::other("no poll to register with"));
        };
        let mut stream = TcpStream::connect(addr)?;
        let entry = self.conns.vacant_entry();
        let key = entry.key() as u32;
        registry.register(
            &mut stream,
            Self::token(key),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let _ = stream.set_nodelay(true);
        entry.insert(UpstreamConn {
            stream,
            owner: Owner::Lent { client },
            pooled_at: 0,
            idle_when_lent: 0,
        });
        Ok(key)
    }

    /// Takes back connection `key` after a whole exchange: pooled for the
    /// idle limit (at most `MAX_IDLE`, and not at all under a limit of 0:
    /// else closed).
    pub fn give_back(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>, now: Micros) {
        let idle_ms = self.idle_limit.ms();
        if self.idle.len() >= MAX_IDLE || idle_ms == 0 {
            return self.close(key, timers);
        }
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        let timer = timers.enroll(now, idle_ms, false, TimerEvent::UpstreamIdle { key });
        conn.owner = Owner::Idle { timer };
        conn.pooled_at = now;
        self.idle.push(key);
    }

    /// Closes connection `key` (lent, idle or watched).
    pub fn close(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>) {
        if let Some(conn) = self.conns.try_remove(key as usize)
            && let Some(timer) = conn.owner.timer()
        {
            timers.unenroll(timer);
            self.idle.retain(|&idle| idle != key);
        }
    }

    /// Connection `key`'s timer fired (and is gone from the lists): an
    /// idle one leaves the pool, watched half its limit more; a watched
    /// one is closed.
    pub fn idle_expired(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>, now: Micros) {
        let watch_ms = (self.idle_limit.ms() / 2).max(1);
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        match conn.owner {
            Owner::Idle { .. } => {
                let timer = timers.enroll(now, watch_ms, false, TimerEvent::UpstreamIdle { key });
                conn.owner = Owner::Watched { timer };
                self.idle.retain(|&idle| idle != key);
            }
            Owner::Watched { .. } => {
                self.conns.remove(key as usize);
            }
            Owner::Lent { .. } => {}
        }
    }

    /// A readiness event on connection `key` while it is idle or watched:
    /// the upstream closed it, reset it or sent what nobody asked for,
    /// and it is dropped; a spurious wake (nothing to read) leaves it be.
    /// A close (EOF or error) teaches the pool the service's idle life.
    pub fn idle_event(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>, now: Micros) {
        let Some(conn) = self.conns.get(key as usize) else {
            return;
        };
        if conn.owner.timer().is_none() {
            return;
        }
        let mut probe = [0u8; 1];
        let closed = loop {
            match (&conn.stream).read(&mut probe) {
                Err(e) if would_block(&e) => return,
                Err(e) if interrupted(&e) => {}
                Ok(0) | Err(_) => break true,
                Ok(_) => break false,
            }
        };
        if closed {
            let idle = now.saturating_sub(conn.pooled_at);
            self.closed_while_idle(idle, now);
        }
        self.close(key, timers);
    }

    /// Closes every connection (the worker stops).
    pub fn close_all(&mut self, timers: &mut TimerLists<TimerEvent>) {
        let keys: Vec<u32> = self.conns.iter().map(|(key, _)| key as u32).collect();
        for key in keys {
            self.close(key, timers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connects_go_first_where_the_last_one_went() {
        let addrs: Vec<SocketAddr> =
            vec!["127.0.0.1:80".parse().unwrap(), "[::1]:80".parse().unwrap()];
        let mut upstreams = Upstreams::default();
        assert_eq!(upstreams.address(&addrs, 0), addrs[0]);
        assert_eq!(upstreams.address(&addrs, 1), addrs[1]);
        upstreams.connected_to(addrs[1]);
        assert_eq!(upstreams.address(&addrs, 0), addrs[1]);
        assert_eq!(upstreams.address(&addrs, 1), addrs[0]);
    }

    /// A pool of one connection to a local listener, lent to client 0
    /// and connected, with the listener's end of it.
    fn one_connection(idle_ms: u64) -> (Upstreams, mio::Poll, std::net::TcpStream, u32) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let poll = mio::Poll::new().unwrap();
        let registry = poll.registry().try_clone().unwrap();
        let mut upstreams = Upstreams::new(Some(registry), "http://test".into(), idle_ms);
        let key = upstreams
            .connect(listener.local_addr().unwrap(), 0)
            .unwrap();
        let (service, _) = listener.accept().unwrap();
        (upstreams, poll, service, key)
    }

    /// The readiness the worker would hand on: waits until the service's
    /// close reaches the pool's socket.
    fn until_readable(poll: &mut mio::Poll) {
        let mut events = mio::Events::with_capacity(4);
        for _ in 0..100 {
            poll.poll(&mut events, Some(std::time::Duration::from_millis(20)))
                .unwrap();
            if events.iter().any(|event| event.is_readable()) {
                return;
            }
        }
        panic!("the close never reached the pool");
    }

    const MS: Micros = 1_000;

    #[test]
    fn a_close_seen_while_pooled_lowers_the_limit_for_the_next_pooling() {
        let (mut upstreams, mut poll, service, key) = one_connection(1_000);
        let mut timers = TimerLists::new();
        upstreams.give_back(key, &mut timers, 10 * MS);
        assert_eq!(upstreams.counts(), (1, 1));
        drop(service); // its idle close
        until_readable(&mut poll);
        upstreams.idle_event(key, &mut timers, 410 * MS);
        assert_eq!(upstreams.counts(), (0, 0), "dropped");
        assert_eq!(upstreams.idle_limit_ms(), 300, "¾ of the 400 ms it lived");
        assert_eq!(timers.len(), 0);
    }

    #[test]
    fn past_the_limit_a_connection_is_watched_not_lent_and_its_close_learned() {
        let (mut upstreams, mut poll, service, key) = one_connection(1_000);
        let mut timers = TimerLists::new();
        upstreams.give_back(key, &mut timers, 0);
        let due = timers.expire(1_000 * MS).expect("the idle limit");
        assert_eq!(due.payload, TimerEvent::UpstreamIdle { key });
        upstreams.idle_expired(key, &mut timers, 1_000 * MS);
        assert_eq!(upstreams.counts(), (1, 1), "open, idle, watched");
        assert_eq!(upstreams.take_idle(1, &mut timers, 1_001 * MS), None);
        assert_eq!(upstreams.lent_to(key), None);
        drop(service); // the service's close, a little after the lab's limit
        until_readable(&mut poll);
        upstreams.idle_event(key, &mut timers, 1_004 * MS);
        assert_eq!(upstreams.counts(), (0, 0));
        assert_eq!(upstreams.idle_limit_ms(), 753);
        assert_eq!(timers.len(), 0, "the watch's timer went with it");
    }

    #[test]
    fn a_watched_connection_the_service_keeps_is_closed_after_half_the_limit() {
        let (mut upstreams, _poll, _service, key) = one_connection(1_000);
        let mut timers = TimerLists::new();
        upstreams.give_back(key, &mut timers, 0);
        timers.expire(1_000 * MS).expect("the idle limit");
        upstreams.idle_expired(key, &mut timers, 1_000 * MS);
        assert!(
            timers.expire(1_499 * MS).is_none(),
            "watched half the limit"
        );
        timers.expire(1_500 * MS).expect("the watch's end");
        upstreams.idle_expired(key, &mut timers, 1_500 * MS);
        assert_eq!(upstreams.counts(), (0, 0));
        assert_eq!(upstreams.idle_limit_ms(), 1_000, "nothing learned");
    }

    #[test]
    fn a_request_meeting_a_pooled_connection_closed_teaches_its_idle_age() {
        let (mut upstreams, _poll, _service, key) = one_connection(1_000);
        let mut timers = TimerLists::new();
        upstreams.give_back(key, &mut timers, 0);
        assert_eq!(upstreams.take_idle(1, &mut timers, 800 * MS), Some(key));
        upstreams.close_raced(key, &mut timers, 801 * MS);
        assert_eq!(upstreams.counts(), (0, 0));
        assert_eq!(upstreams.idle_limit_ms(), 600);
    }

    #[test]
    fn a_pool_told_not_to_keep_connections_closes_them_at_once() {
        let (mut upstreams, _poll, _service, key) = one_connection(1_000);
        let mut timers = TimerLists::new();
        upstreams.advertised(1, 0);
        assert_eq!(upstreams.idle_limit_ms(), 0);
        upstreams.give_back(key, &mut timers, 0);
        assert_eq!(upstreams.counts(), (0, 0));
        assert_eq!(timers.len(), 0);
    }

    #[test]
    fn upstream_tokens_carry_their_key_apart_from_clients() {
        let token = Upstreams::token(7);
        assert_eq!(Upstreams::key_of(token), Some(7));
        assert_eq!(Upstreams::key_of(Token(7)), None, "a client's token");
    }
}
