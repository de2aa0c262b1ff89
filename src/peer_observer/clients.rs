//! Clients told apart by address *and* User-Agent, for the race guard
//! (`keepalive-server lab`): a test suite's clients all connect from
//! 127.0.0.1, where the peer table (by address, as `/peers` shows it) would
//! judge them as one.
//!
//! One [`PeerTable`] per User-Agent (the first [`MAX_AGENTS`] seen; later
//! ones share one more table), each fed the events of the connections that
//! named that agent in their first request. A connection's agent is kept
//! by its id from that request ([`Event::ClientNamed`]) to its end, in a
//! map of at most [`MAX_TRACKED`] connections (the oldest forgotten first:
//! a connection that ends with no event to say so is not kept for ever).
//! Its acceptance is recorded when it names its agent; a connection that
//! never sent a request has no agent, and nothing to judge.
//!
//! Off unless the guard asks for it: the tables cost up to
//! [`MAX_AGENTS`] + 1 times a peer table per worker.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use super::peers::{AGENT_BYTES, LazyBoard, Listening, PeerTable, PeersSnapshot};
use crate::observe::{AfterFin, Closer, Event};
use crate::timers::Micros;

/// User-Agents given a table of their own, per worker.
pub const MAX_AGENTS: usize = 8;
/// Open connections whose agent is remembered, per worker.
pub const MAX_TRACKED: usize = 16_384;
/// The name of the table the agents past [`MAX_AGENTS`] share.
pub const OTHER_AGENTS: &str = "(other User-Agents)";

/// One worker's clients by User-Agent.
#[derive(Debug)]
pub struct ClientTables {
    /// The agents with a table (cut to [`AGENT_BYTES`]; empty: none sent),
    /// in the order first seen, then the shared one.
    agents: Vec<(Vec<u8>, PeerTable)>,
    /// Open connections' agents: connection id -> index into `agents`.
    conns: BTreeMap<u64, usize>,
    window: Micros,
    /// Where the tables pair lazy closes, each agent under keys of its own.
    lazy: Arc<LazyBoard>,
    /// Where the server listens (see [`PeerTable::listening`]).
    listening: Option<Listening>,
}

/// One User-Agent's peers, as a worker reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentPeers {
    /// The agent (lossy UTF-8, empty when none was sent), or
    /// [`OTHER_AGENTS`].
    pub agent: String,
    pub peers: PeersSnapshot,
}

impl ClientTables {
    /// No client yet; each table's recent figures span `window` µs.
    pub fn new(window: Micros) -> Self {
        ClientTables {
            agents: Vec::new(),
            conns: BTreeMap::new(),
            window,
            lazy: Arc::new(LazyBoard::local()),
            listening: None,
        }
    }

    /// These tables, judging `Host` fields against `listening`.
    pub fn listening(mut self, listening: Option<Listening>) -> Self {
        self.listening = listening;
        for (_, table) in &mut self.agents {
            table.set_listening(listening);
        }
        self
    }

    /// These tables, pairing lazy closes on `lazy` (every worker's).
    pub fn sharing(mut self, lazy: Arc<LazyBoard>) -> Self {
        self.lazy = lazy;
        self
    }

    /// Every table's window is `window` µs from now on.
    pub fn set_window(&mut self, window: Micros) {
        self.window = window;
        for (_, table) in &mut self.agents {
            table.set_window(window);
        }
    }

    /// Records `event` on connection `conn` from `peer` in the table of
    /// the agent the connection named.
    pub fn record(&mut self, conn: u64, peer: IpAddr, now: Micros, event: &Event<'_>) {
        if let Event::ClientNamed {
            user_agent,
            again: false,
            ..
        } = *event
        {
            let agent = user_agent.unwrap_or_default();
            let index = self.table_for(&agent[..agent.len().min(AGENT_BYTES)]);
            if self.conns.len() >= MAX_TRACKED {
                self.conns.pop_first();
            }
            self.conns.insert(conn, index);
            let table = &mut self.agents[index].1;
            table.record(peer, now, &Event::Accepted);
            table.record(peer, now, event);
            return;
        }
        let Some(&index) = self.conns.get(&conn) else {
            return;
        };
        self.agents[index].1.record(peer, now, event);
        let ended = match *event {
            Event::IdleEnded(end) => end.closer == Closer::Client || end.reset,
            Event::AfterFin(AfterFin::Closed { .. }) => true,
            _ => false,
        };
        if ended {
            self.conns.remove(&conn);
        }
    }

    /// Each agent's table as of `now`.
    pub fn snapshot(&self, now: Micros) -> Vec<AgentPeers> {
        self.agents
            .iter()
            .enumerate()
            .map(|(i, (agent, table))| AgentPeers {
                agent: match i {
                    MAX_AGENTS => OTHER_AGENTS.to_owned(),
                    _ => String::from_utf8_lossy(agent).into_owned(),
                },
                peers: table.snapshot(now),
            })
            .collect()
    }

    /// The index of `agent`'s table, made when it is new (the shared one
    /// once [`MAX_AGENTS`] have their own).
    fn table_for(&mut self, agent: &[u8]) -> usize {
        if let Some(i) = self.agents.iter().position(|(known, _)| known == agent) {
            return i.min(MAX_AGENTS);
        }
        if self.agents.len() > MAX_AGENTS {
            return MAX_AGENTS;
        }
        // Salted apart from the address-only table's keys and each other's.
        let mut salt = DefaultHasher::new();
        (b"agent", agent).hash(&mut salt);
        let table = PeerTable::sharing(self.window, Arc::clone(&self.lazy), salt.finish())
            .listening(self.listening);
        self.agents.push((agent.to_vec(), table));
        self.agents.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::IdleEnd;

    const WINDOW: Micros = 10_000_000;

    fn named(agent: &str) -> Event<'_> {
        Event::ClientNamed {
            user_agent: Some(agent.as_bytes()),
            forwarded: false,
            again: false,
            minor_version: 1,
            host: None,
        }
    }

    fn server_close() -> Event<'static> {
        Event::IdleEnded(IdleEnd {
            closer: Closer::Server,
            age_us: 2_000_000,
            idle_timeout_ms: 2000,
            reset: false,
            round_trip_us: None,
        })
    }

    #[test]
    fn one_address_with_two_agents_is_two_clients() {
        let mut tables = ClientTables::new(WINDOW);
        let local = IpAddr::from([127, 0, 0, 1]);
        tables.record(1, local, 10, &Event::Accepted);
        tables.record(2, local, 11, &Event::Accepted);
        tables.record(1, local, 12, &named("python-httpx/0.28.1"));
        tables.record(2, local, 13, &named("curl/8.0"));
        tables.record(1, local, 20, &Event::ResponsesDone(1));
        tables.record(2, local, 21, &Event::ResponsesDone(1));
        tables.record(1, local, 2_000_020, &server_close());
        let clients = tables.snapshot(2_000_030);
        assert_eq!(clients.len(), 2);
        let httpx = &clients[0];
        assert_eq!(httpx.agent, "python-httpx/0.28.1");
        assert_eq!(httpx.peers.peers.len(), 1);
        assert_eq!(httpx.peers.peers[0].stats.connections, 1);
        assert_eq!(httpx.peers.peers[0].stats.server_idle_closes, 1);
        let curl = &clients[1].peers.peers[0].stats;
        assert_eq!((curl.connections, curl.requests), (1, 1));
        assert_eq!(curl.server_idle_closes, 0);
    }

    #[test]
    fn agents_past_the_limit_share_a_table_and_connections_are_bounded() {
        let mut tables = ClientTables::new(WINDOW);
        let local = IpAddr::from([127, 0, 0, 1]);
        for n in 0..(MAX_AGENTS as u64 + 3) {
            tables.record(n, local, n, &named(&format!("agent-{n}")));
        }
        let clients = tables.snapshot(100);
        assert_eq!(clients.len(), MAX_AGENTS + 1);
        assert_eq!(clients[MAX_AGENTS].agent, OTHER_AGENTS);
        assert_eq!(clients[MAX_AGENTS].peers.peers[0].stats.connections, 3);
        for n in 0..(MAX_TRACKED as u64 + 10) {
            tables.record(1000 + n, local, 200, &named("agent-0"));
        }
        assert_eq!(tables.conns.len(), MAX_TRACKED);
    }
}
