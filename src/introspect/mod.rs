//! What a worker shows of itself when asked: the [`Snapshot`] it builds at
//! the top of a turn when the admin loop has posted a request in its
//! mailbox (see [`crate::shared::Mailbox`]).

mod snapshot;

use crate::config::Settings;
use crate::observe::{Ignore, Observer};
use crate::peer_observer::PeerObserver;
use crate::peer_observer::clients::AgentPeers;
use crate::peer_observer::peers::PeersSnapshot;
use crate::timers::Micros;

pub use snapshot::{
    AGE_SAMPLE, ConnCounts, KindCount, ListView, REST_BUCKETS, Snapshot, Timeouts, list_views,
};

/// The observer a worker holds, by this trait alone: it hears the
/// serving path's events (see `observe`), takes the settings of a reload,
/// and shows what it has learned in the worker's snapshot.
pub trait WorkerObserver: Observer + Send {
    /// Settings were reloaded (SIGHUP): what it keeps follows them.
    fn reload(&mut self, settings: &Settings);
    /// What it knows of the worker's peers at loop time `now`.
    fn peers(&self, now: Micros) -> PeersSnapshot;
    /// The same by address and User-Agent, for the race guard (empty
    /// unless the observer tells clients apart).
    fn clients(&self, _now: Micros) -> Vec<AgentPeers> {
        Vec::new()
    }
}

impl WorkerObserver for PeerObserver {
    fn reload(&mut self, settings: &Settings) {
        self.set_window(settings.peers_window_us);
    }

    fn peers(&self, now: Micros) -> PeersSnapshot {
        self.snapshot(now)
    }

    fn clients(&self, now: Micros) -> Vec<AgentPeers> {
        self.clients_snapshot(now)
    }
}

impl WorkerObserver for Ignore {
    fn reload(&mut self, _: &Settings) {}

    fn peers(&self, _: Micros) -> PeersSnapshot {
        PeersSnapshot::default()
    }
}
