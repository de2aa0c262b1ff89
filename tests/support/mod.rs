//! The one helper module of the integration tests. Every test file that
//! needs it says `mod support;` and imports what it uses from the part
//! that has it (tests/README.md lists what each part offers):
//!
//! - [`server`]: a server started in-process on port 0 ([`server::start`],
//!   [`server::TestServer`]), with the admin listener beside it
//!   ([`server::AdminFixture`]); its counters, and waiting for what its
//!   workers report (connections by state, timers by kind).
//! - [`client`]: the raw-socket HTTP/1.x client, reading exactly one
//!   response at a time, and request builders.
//! - [`binary`]: the built binary as a child process ([`binary::Running`],
//!   its address read from the startup line), run to its exit, signalled,
//!   its log read line by line.
//! - [`exposition`]: a strict reader of `/metrics` (Prometheus text).
//! - [`files`]: temporary directories and files, and paths in the
//!   repository.
//! - [`procfs`]: what /proc says of a process (memory, descriptors, CPU).
//! - [`skip`]: how a test skips when a tool it needs is missing (and fails
//!   instead under `CI=true`).
//! - [`tls`]: a certificate made for the test, and a rustls client that
//!   trusts it.
//! - [`upstream`]: fake upstreams for `--upstream` (a listener whose
//!   connections the test's closure serves), and a chunked-body reader.
//! - [`venv`]: the Python venv of the guard's examples (httpx, pytest,
//!   uvicorn), found or skipped.
//!
//! Here: [`SLACK`], [`eventually`] (and [`poll`], its one wait loop) and
//! [`serial`].
//!
//! Timing: the test machine is shared and noisy. A lower bound on the
//! server's timing is strict (a timeout never fires early); an upper bound
//! gets [`SLACK`]. A test waits for the event it needs (a worker's
//! snapshot, a counter, a log line, a refused connect), never for a pause
//! to be long enough; a sleep in a test is time that has to pass on
//! purpose (an idle gap, a trickle, a quiet window).
//!
//! Each test binary uses a part of this module: hence `dead_code` allowed.

#![allow(dead_code)]

pub mod binary;
pub mod client;
pub mod exposition;
pub mod files;
pub mod procfs;
pub mod server;
pub mod skip;
pub mod tls;
pub mod upstream;
pub mod venv;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Slack added to every upper bound on timing.
pub const SLACK: Duration = Duration::from_secs(2);

/// The body `/` answers to a request without one.
pub const HELLO: &[u8] = b"Hello, World!";

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How often [`poll`] and [`eventually`] ask again.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Polls `probe` every 20 ms until it returns `Ok`, or until `within` has
/// passed: then its last `Err` (what it saw instead). The one wait loop of
/// the tests; [`eventually`] when giving up is a failure.
pub fn poll<T>(
    within: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    loop {
        match probe() {
            Ok(value) => return Ok(value),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => std::thread::sleep(POLL_EVERY),
        }
    }
}

/// [`poll`], panicking with the last `Err` after `within`.
#[track_caller]
pub fn eventually<T>(within: Duration, probe: impl FnMut() -> Result<T, String>) -> T {
    poll(within, probe).unwrap_or_else(|why| panic!("gave up after {within:?}: {why}"))
}

/// Serialises the tests of one file that load the machine or measure
/// time, memory or descriptors: each holds the guard while it runs.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
