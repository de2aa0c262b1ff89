//! What a peer's record keeps of its clients in fixed room: the latest
//! client idle-close ages ([`AgeSamples`], for the estimate of the
//! client's own idle timeout) and the User-Agents its connections named
//! ([`Agents`]).

use super::{AGE_SAMPLES, AGENT_BYTES, AGENTS};

/// The latest [`AGE_SAMPLES`] client idle-close ages, in whole ms; the
/// oldest is overwritten first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgeSamples {
    ms: [u32; AGE_SAMPLES],
    len: u8,
    next: u8,
}

impl AgeSamples {
    pub(super) fn push(&mut self, age_us: u64) {
        self.push_ms(u32::try_from(age_us / 1000).unwrap_or(u32::MAX));
    }

    pub(super) fn push_ms(&mut self, ms: u32) {
        self.ms[usize::from(self.next)] = ms;
        self.next = ((usize::from(self.next) + 1) % AGE_SAMPLES) as u8;
        self.len = (usize::from(self.len) + 1).min(AGE_SAMPLES) as u8;
    }

    /// The samples, in no particular order.
    pub fn as_slice(&self) -> &[u32] {
        &self.ms[..usize::from(self.len)]
    }
}

/// The User-Agents a peer's connections named: the [`AGENTS`] most recent
/// distinct ones, each cut to [`AGENT_BYTES`] (enough to tell which client
/// it is), in fixed room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agents {
    slots: [Agent; AGENTS],
    /// Times a connection named another User-Agent than the connection
    /// before it (an upgrade makes one; clients taking turns, many).
    switches: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Agent {
    bytes: [u8; AGENT_BYTES],
    len: u8,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            bytes: [0; AGENT_BYTES],
            len: 0,
        }
    }
}

impl Agent {
    fn of(value: &[u8]) -> Agent {
        let mut agent = Agent::default();
        let len = value.len().min(AGENT_BYTES);
        agent.bytes[..len].copy_from_slice(&value[..len]);
        agent.len = len as u8;
        agent
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Agents {
    /// Remembers `value` as the most recent.
    pub(super) fn note(&mut self, value: &[u8]) {
        let agent = Agent::of(value);
        if self.slots[0] == agent || agent.len == 0 {
            return;
        }
        if self.slots[0].len > 0 {
            self.switches = self.switches.saturating_add(1);
        }
        let at = self
            .slots
            .iter()
            .position(|known| *known == agent)
            .unwrap_or(AGENTS - 1);
        self.slots[..=at].rotate_right(1);
        self.slots[0] = agent;
    }

    /// The ones remembered, most recent first, as (lossy) text.
    pub fn texts(&self) -> impl Iterator<Item = String> + '_ {
        self.slots
            .iter()
            .filter(|agent| agent.len > 0)
            .map(|agent| String::from_utf8_lossy(agent.as_bytes()).into_owned())
    }

    /// Several clients took turns on this address's connections: at least
    /// two User-Agents, switched between back and forth (A, B, A), not
    /// just once (a client upgraded).
    pub fn take_turns(&self) -> bool {
        self.slots.iter().all(|agent| agent.len > 0) && self.switches >= 2
    }

    /// Adds another peer's (the older kept behind this one's).
    pub(super) fn merge(&mut self, other: &Agents) {
        self.switches = self.switches.saturating_add(other.switches);
        for agent in other.slots.iter().rev().filter(|agent| agent.len > 0) {
            if !self.slots.contains(agent) {
                if let Some(free) = self.slots.iter_mut().find(|slot| slot.len == 0) {
                    *free = agent.clone();
                }
            }
        }
    }
}
