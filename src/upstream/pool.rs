//! The worker's connections to its upstream: each in one slab for its
//! whole life, registered once under its own token, lent to one client
//! connection at a time or idle in a LIFO pool under an unref'd timer
//! (`--upstream-idle-timeout`), so the pool never holds a connection
//! longer than the upstream is trusted to keep it.

use std::io::{self, Read};
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use slab::Slab;

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
}

struct UpstreamConn {
    stream: TcpStream,
    owner: Owner,
}

/// At most one warning about a failing upstream per this many ms.
const WARNING_EVERY_MS: u64 = 10_000;

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
}

impl Default for Upstreams {
    fn default() -> Self {
        Upstreams {
            registry: None,
            conns: Slab::new(),
            idle: Vec::new(),
            warning: RateLimit::every_ms(WARNING_EVERY_MS),
            preferred: None,
        }
    }
}

impl Upstreams {
    /// Connections will be registered with `registry`.
    pub fn with_registry(registry: Registry) -> Self {
        Upstreams {
            registry: Some(registry),
            ..Upstreams::default()
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

    /// Open upstream connections, and how many of them are idle.
    pub fn counts(&self) -> (usize, usize) {
        (self.conns.len(), self.idle.len())
    }

    /// The client connection `key` is lent to, if it is lent.
    pub fn lent_to(&self, key: u32) -> Option<u32> {
        match self.conns.get(key as usize)?.owner {
            Owner::Lent { client } => Some(client),
            Owner::Idle { .. } => None,
        }
    }

    /// The socket of connection `key`.
    pub fn stream(&self, key: u32) -> Option<&TcpStream> {
        self.conns.get(key as usize).map(|conn| &conn.stream)
    }

    /// Lends the most recently pooled idle connection to `client`.
    pub fn take_idle(&mut self, client: u32, timers: &mut TimerLists<TimerEvent>) -> Option<u32> {
        let key = self.idle.pop()?;
        let conn = &mut self.conns[key as usize];
        if let Owner::Idle { timer } = conn.owner {
            timers.unenroll(timer);
        }
        conn.owner = Owner::Lent { client };
        Some(key)
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
        });
        Ok(key)
    }

    /// Takes back connection `key` after a whole exchange: pooled for
    /// `idle_ms` (at most `MAX_IDLE`: beyond, closed).
    pub fn give_back(
        &mut self,
        key: u32,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
        idle_ms: u64,
    ) {
        if self.idle.len() >= MAX_IDLE {
            return self.close(key, timers);
        }
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        let timer = timers.enroll(now, idle_ms, false, TimerEvent::UpstreamIdle { key });
        conn.owner = Owner::Idle { timer };
        self.idle.push(key);
    }

    /// Closes connection `key` (lent or idle).
    pub fn close(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>) {
        if let Some(conn) = self.conns.try_remove(key as usize)
            && let Owner::Idle { timer } = conn.owner
        {
            timers.unenroll(timer);
            self.idle.retain(|&idle| idle != key);
        }
    }

    /// Connection `key`'s idle timer fired (and is gone from the lists):
    /// it is closed.
    pub fn idle_expired(&mut self, key: u32) {
        if let Some(conn) = self.conns.get(key as usize)
            && matches!(conn.owner, Owner::Idle { .. })
        {
            self.conns.remove(key as usize);
            self.idle.retain(|&idle| idle != key);
        }
    }

    /// A readiness event on connection `key` while it is idle: the
    /// upstream closed it, reset it or sent what nobody asked for, and it
    /// is dropped; a spurious wake (nothing to read) leaves it pooled.
    pub fn idle_event(&mut self, key: u32, timers: &mut TimerLists<TimerEvent>) {
        let Some(conn) = self.conns.get(key as usize) else {
            return;
        };
        if !matches!(conn.owner, Owner::Idle { .. }) {
            return;
        }
        let mut probe = [0u8; 1];
        loop {
            match (&conn.stream).read(&mut probe) {
                Err(e) if would_block(&e) => return,
                Err(e) if interrupted(&e) => {}
                _ => break,
            }
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

    #[test]
    fn upstream_tokens_carry_their_key_apart_from_clients() {
        let token = Upstreams::token(7);
        assert_eq!(Upstreams::key_of(token), Some(7));
        assert_eq!(Upstreams::key_of(Token(7)), None, "a client's token");
    }
}
