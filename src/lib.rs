//! keepalive-server: a non-blocking HTTP/1.0–1.1 server built to show socket
//! idle timeouts done right, on Node.js's design: per-duration timer lists
//! (O(1) enroll, refresh and cancel) under one heap of list heads that
//! drives a single kernel timer.
//!
//! The serving path, top-down:
//! - `worker` / `conn` / `clock`: the event loop, one connection (its one
//!   lifecycle state, its transport, plain or TLS, chosen at accept, its
//!   timers, the watch after an idle FIN), and the loop clock with its
//!   one kernel timer (a timerfd); [`tls`]: HTTPS on the same loop (the
//!   certificate, a connection's rustls state, the probe's TLS client).
//! - [`session`]: one connection's HTTP/1.1 exchange, without the socket;
//!   [`in_flight`]: the request in progress, kept with the pooled buffers.
//! - [`http`]: request parsing, body framing, responses.
//! - [`app`]: what is answered: the demonstration routes, each response's
//!   keep-alive terms, and the test controls that set a connection's;
//!   [`forward`]: with `--upstream`, the heads the lab writes on each side
//!   of itself and their framing, without the sockets.
//! - [`timers`]: the pure, clock-injected timer lists; [`timer_event`]:
//!   what a timer in a worker's lists stands for.
//! - [`pool`], [`ctx`], [`stats`], [`date`]: buffers, what a worker lends a
//!   connection, counters and request timing, the cached `Date` header;
//!   [`tally`]: the counters and histograms themselves, a leaf;
//!   [`readiness`]: the named predicates of the readiness contract;
//!   [`rx_stamps`]: kernel receive stamps, for reads whose arrival time
//!   decides a verdict (shared with the measuring client);
//!   `memory`: handing memory freed after a burst back to the system.
//!
//! Beside it:
//! - [`observe`]: the events the serving path reports (accepted, reused
//!   after an idle gap, responses done, an idle end, after the idle FIN);
//!   [`peer_observer`]: what learns from them (peers, verdicts,
//!   its metrics); [`advice`]: the one advice model turning what is known
//!   of a server's idle close into a safe pool idle timeout, for `/peers`
//!   and the probe alike.
//! - [`config`]: flags, environment variables, the config file, defaults;
//!   [`reload`]: re-reading the file on SIGHUP; [`logging`]: diagnostics;
//!   [`access_log`]: the nginx-format access log, buffered per worker.
//! - [`server`]: binding, worker threads, graceful shutdown.
//! - [`shared`]: what threads share (the stop flag, each worker's counters,
//!   snapshot mailbox and reload slot) and [`Remote`], the handle on it.
//! - [`admin`], [`introspect`]: the admin listener and the worker snapshots
//!   it shows.
//! - [`probe`]: `keepalive-server probe URL`, measuring any server's real
//!   keep-alive behaviour; [`measure`]: its timed client connections,
//!   shared with tools/kas-soak.
//! - [`guard`]: `keepalive-server lab -- COMMAND`, the race guard for CI:
//!   runs a test suite against a server it starts and fails it when a client would
//!   race the server at the idle boundary.

pub mod access_log;
pub mod admin;
pub mod advice;
pub mod app;
pub mod config;
pub mod ctx;
pub mod date;
pub mod forward;
pub mod guard;
pub mod http;
pub mod in_flight;
pub mod introspect;
pub mod logging;
pub mod measure;
pub mod observe;
pub mod peer_observer;
pub mod pool;
pub mod probe;
pub mod readiness;
pub mod reload;
pub mod rx_stamps;
pub mod server;
pub mod session;
pub mod shared;
pub mod stats;
pub mod tally;
pub mod timer_event;
pub mod timers;
pub mod tls;
pub mod upstream;

mod clock;
mod conn;
mod memory;
mod worker;

pub use config::{Config, Settings};
pub use server::{Server, ServerHandle};
pub use shared::Remote;
