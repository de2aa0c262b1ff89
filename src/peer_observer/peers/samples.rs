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

    /// Adds an age in whole ms (the oldest goes when full).
    pub fn push_ms(&mut self, ms: u32) {
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
    /// Times a connection named another User-Agent (or none) than the
    /// connection before it (an upgrade makes one; clients taking turns,
    /// many).
    switches: u32,
    /// Times a connection's request named another User-Agent (or none)
    /// than the request before it on the same connection: requests from
    /// several clients interleaved on one connection, as a proxy's are.
    interleaved: u32,
    /// Some connection named none.
    unnamed_seen: bool,
    /// The latest connection named none.
    last_unnamed: bool,
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
    /// A connection's first request named `value` (or none), or a later
    /// one (`again`) named it in place of another: remembered as the most
    /// recent.
    pub(super) fn note(&mut self, value: Option<&[u8]>, again: bool) {
        if again {
            self.interleaved = self.interleaved.saturating_add(1);
        }
        let agent = Agent::of(value.unwrap_or_default());
        let seen_any = self.slots[0].len > 0 || self.unnamed_seen;
        let same = match agent.len {
            0 => self.last_unnamed,
            _ => !self.last_unnamed && self.slots[0] == agent,
        };
        if seen_any && !same {
            self.switches = self.switches.saturating_add(1);
        }
        self.last_unnamed = agent.len == 0;
        if agent.len == 0 {
            self.unnamed_seen = true;
            return;
        }
        if self.slots[0] == agent {
            return;
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

    /// Several clients shared this address's connections: some named a
    /// User-Agent and some none (one client library does one or the
    /// other), two User-Agents took turns (A, B, A: not one client
    /// upgraded once), or one connection carried requests of two (a
    /// client's pool keeps its connections to itself).
    pub fn take_turns(&self) -> bool {
        let named = self.slots.iter().filter(|agent| agent.len > 0).count();
        if self.interleaved > 0 {
            return true;
        }
        match self.unnamed_seen {
            true => named > 0,
            false => named > 1 && self.switches >= 2,
        }
    }

    /// Adds another peer's (the older kept behind this one's).
    pub(super) fn merge(&mut self, other: &Agents) {
        self.switches = self.switches.saturating_add(other.switches);
        self.interleaved = self.interleaved.saturating_add(other.interleaved);
        self.unnamed_seen |= other.unnamed_seen;
        for agent in other.slots.iter().rev().filter(|agent| agent.len > 0) {
            if !self.slots.contains(agent) {
                if let Some(free) = self.slots.iter_mut().find(|slot| slot.len == 0) {
                    *free = agent.clone();
                }
            }
        }
    }
}
