//! What threads share, in one low module that imports none of its users:
//! the server starts workers with it ([`Control`], [`WorkerShared`]), the
//! workers read it once per turn, and the admin listener, the signal
//! handlers and SIGHUP reloads reach the workers only through it
//! ([`Remote`]).
//!
//! - [`Control`]: one per process; the stop flag and the access log sink.
//! - [`WorkerShared`]: one per worker; its counters (the peer observer's apart,
//!   written by its observer), the snapshot [`Mailbox`] and the
//!   [`SettingsSlot`] of a reload.
//! - [`Remote`]: a cloneable handle on all of them, with the waker of each
//!   worker's poll.

mod mailbox;
mod settings_slot;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mio::{Poll, Waker};

pub use mailbox::Mailbox;
pub use settings_slot::SettingsSlot;

use crate::access_log::AccessLogSink;
use crate::config::Settings;
use crate::introspect::Snapshot;
use crate::peer_observer::ObserverStats;
use crate::stats::Stats;

/// What every worker shares: the stop flag and the access log.
#[derive(Debug, Default)]
pub struct Control {
    pub stopping: AtomicBool,
    pub access_log: AccessLogSink,
}

/// What a worker shares with the rest of the process.
#[derive(Debug, Default)]
pub struct WorkerShared {
    pub stats: Stats,
    /// The peer observer's figures, written by the worker's observer
    /// alone.
    pub observer: Arc<ObserverStats>,
    pub mailbox: Mailbox,
    /// Settings from a SIGHUP reload, swapped in at the worker's next turn.
    pub reloaded: SettingsSlot,
}

/// A cloneable, thread-safe view of a running server: counters, snapshots,
/// and the stop switch.
#[derive(Clone)]
pub struct Remote {
    control: Arc<Control>,
    workers: Vec<(Arc<WorkerShared>, Arc<Waker>)>,
}

impl Remote {
    /// A view of `workers` (each one's shared state and the waker of its
    /// poll), stopped through `control`.
    pub(crate) fn new(
        control: Arc<Control>,
        workers: Vec<(Arc<WorkerShared>, Arc<Waker>)>,
    ) -> Remote {
        Remote { control, workers }
    }

    /// Begins a graceful shutdown (see [`crate::ServerHandle::shutdown`]).
    pub fn shutdown(&self) {
        self.control.stopping.store(true, Ordering::Release);
        for (_, waker) in &self.workers {
            let _ = waker.wake();
        }
    }

    /// Opens the access log file again (SIGUSR1, after logrotate moved
    /// it); the path, or `None` when the log is standard output or off.
    pub fn reopen_access_log(&self) -> io::Result<Option<&std::path::PathBuf>> {
        self.control.access_log.reopen()
    }

    pub fn is_stopping(&self) -> bool {
        self.control.stopping.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> impl Iterator<Item = &Stats> {
        self.workers.iter().map(|(shared, _)| &shared.stats)
    }

    /// Each worker's peer observer figures.
    pub fn observer_stats(&self) -> impl Iterator<Item = &ObserverStats> {
        self.workers
            .iter()
            .map(|(shared, _)| shared.observer.as_ref())
    }

    /// Leaves `settings` for every worker and wakes it: each swaps them in
    /// at the top of its next turn (see [`crate::reload`]).
    pub fn offer_settings(&self, settings: &Arc<Settings>) {
        for (shared, waker) in &self.workers {
            shared.reloaded.offer(Arc::clone(settings));
            let _ = waker.wake();
        }
    }

    /// Workers that have not yet taken the settings last offered.
    pub fn workers_yet_to_take_settings(&self) -> usize {
        self.workers
            .iter()
            .filter(|(shared, _)| shared.reloaded.is_pending())
            .count()
    }

    /// Each worker's shared state and the waker of its poll.
    pub(crate) fn workers(&self) -> impl Iterator<Item = (&WorkerShared, &Waker)> {
        self.workers
            .iter()
            .map(|(shared, waker)| (shared.as_ref(), waker.as_ref()))
    }

    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// Asks every worker for a snapshot and blocks up to `timeout` for the
    /// answers (for tests and tools; the admin worker asks without blocking);
    /// a worker that does not answer in time is left out.
    pub fn snapshots(&self, timeout: std::time::Duration) -> io::Result<Vec<Snapshot>> {
        let mut poll = Poll::new()?;
        let reply_to = Arc::new(Waker::new(poll.registry(), mio::Token(0))?);
        let deadline = std::time::Instant::now() + timeout;
        let mut waiting: Vec<bool> = self
            .workers()
            .map(|(shared, waker)| shared.mailbox.post(waker, &reply_to))
            .collect();
        let mut snapshots = Vec::new();
        let mut events = mio::Events::with_capacity(4);
        loop {
            for ((shared, _), wait) in self.workers().zip(waiting.iter_mut()) {
                if !*wait {
                    continue;
                }
                if let Some(snapshot) = shared.mailbox.take() {
                    snapshots.push(snapshot);
                    *wait = false;
                } else if shared.mailbox.is_closed() {
                    *wait = false;
                }
            }
            if !waiting.contains(&true) {
                break; // every answer is in: no more waiting
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            poll.poll(&mut events, Some(left))?;
        }
        snapshots.sort_by_key(|s| s.worker);
        Ok(snapshots)
    }
}
