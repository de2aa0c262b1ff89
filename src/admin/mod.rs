//! The opt-in admin listener (`--admin ADDR`): a non-blocking HTTP/1.1
//! server on a mio event loop of its own thread, serving many clients at
//! once, each with its own timeouts in the loop's timer lists, so no
//! client can delay another.
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
//! dashboard ticks); how it is carried is the loop's (`event_loop`, with
//! each connection in `client`).

mod client;
mod event_loop;
pub mod http;
pub mod metrics;
mod page;
pub mod process;
mod rounds;
mod service;
pub mod view;

use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;

use crate::shared::Remote;

/// What a timer in the admin loop's lists stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminTimer {
    /// A client's deadline, stall timer or linger, by slab key.
    Client(usize),
    /// The snapshot round in flight waited long enough.
    Round,
    /// Dashboard viewers on this interval (ms) are due a snapshot.
    Tick(u64),
}

/// Binds the admin listener and serves it on a thread of its own.
pub fn spawn(addr: SocketAddr, remote: Remote) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let admin = event_loop::AdminLoop::bind(addr, remote)?;
    let local = admin.local_addr()?;
    let thread = std::thread::Builder::new()
        .name("admin".into())
        .spawn(move || {
            if let Err(e) = admin.run() {
                tracing::error!(error = %e, "admin listener stopped");
            }
        })?;
    Ok((local, thread))
}
