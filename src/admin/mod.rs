//! The opt-in admin listener (`--admin ADDR`): one more worker of the
//! server's own (`worker`, `conn`, `session`), on a thread of its own,
//! serving the admin's routes (`service`) under the admin's limits
//! (`settings`), with its own timeouts in its own timer lists, so no
//! client can delay another and a saturated main listener cannot delay it.
//!
//! - `GET /`: the live dashboard (HTML, CSS and JS embedded in the binary).
//! - `GET /events`: its Server-Sent Events feed: the [`view::View`] JSON
//!   every 250 ms (`?interval=` 100 ms to 5 s), only while a viewer is on.
//! - `GET /metrics`: Prometheus text exposition.
//! - `GET /peers`: the peer observer's per-client report (verdicts and
//!   advice over the recent window, totals since start), as JSON.
//! - `GET /timers`: the same JSON as the feed, once: each worker's timer
//!   lists labelled with what they hold, the ref count, the cached Date.
//! - `GET /healthz`: 200 while accepting, 503 once shutting down.
//!
//! It reads workers only through [`Remote`]: counters directly, everything
//! else by asking each worker for a snapshot in a round (`rounds`), which
//! never blocks the loop and never runs unless a client asked for it.
//!
//! What a request is answered is `service`'s (routes, pages, rounds,
//! dashboard ticks); how it is carried is the core's, as on the main
//! listener, with the admin's part of the worker in `worker::admin`
//! (waking the answers a round ends, feeding the event streams).

pub mod http;
pub mod metrics;
mod page;
pub mod process;
pub(crate) mod rounds;
pub(crate) mod service;
mod settings;
pub mod view;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::observe::Ignore;
use crate::shared::{Control, Remote, WorkerShared};
use crate::worker::{WAKER, Worker};

/// What an admin timer in the admin worker's lists stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminTimer {
    /// The snapshot round in flight waited long enough.
    Round,
    /// Dashboard viewers on this interval (ms) are due a snapshot. A u16
    /// (intervals are at most `http::MAX_INTERVAL_MS`, 5 s), so the timer
    /// payload stays 8 bytes and every connection's timer node small.
    Tick(u16),
}

// Every interval the route admits fits a tick's u16.
const _: () = assert!(http::MAX_INTERVAL_MS <= u16::MAX as u64);

impl AdminTimer {
    /// The tick of viewers on `interval_ms` (within the route's bounds).
    pub fn tick(interval_ms: u64) -> AdminTimer {
        AdminTimer::Tick(interval_ms.min(u64::from(u16::MAX)) as u16)
    }
}

/// Binds the admin listener and serves it on a thread of its own: a
/// worker of the server's own kind, serving the admin's routes under the
/// admin's limits (`settings`), so it stays responsive
/// however busy the main listener's workers are.
pub fn spawn(addr: SocketAddr, remote: Remote) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let poll = mio::Poll::new()?;
    let listener = mio::net::TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
    let service = service::Service::new(remote, waker);
    // Its own stop flag, never set: the admin listener serves through a
    // drain (`/healthz` says 503 then) until the process exits.
    let control = Arc::new(Control::default());
    let worker = Worker::new(
        0,
        poll,
        listener,
        Arc::new(settings::admin_settings(local)),
        Arc::new(WorkerShared::default()),
        control,
        Box::new(Ignore),
    )?
    .serving_admin(service);
    let thread = std::thread::Builder::new()
        .name("admin".into())
        .spawn(move || {
            if let Err(e) = worker.run() {
                tracing::error!(error = %e, "admin listener stopped");
            }
        })?;
    Ok((local, thread))
}
