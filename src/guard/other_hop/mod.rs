//! The other hop in the guard (`lab --upstream URL --lb-idle-timeout D`):
//! while COMMAND runs, the service behind the lab is checked as
//! `probe --lb-idle-timeout` checks it, with the probe's own pieces
//! ([`idle::measure`], [`fingerprint`], [`crate::probe::lb_hop`]): a few
//! connections of the guard's own, straight to the service (not through
//! the lab), each sends a request and is held idle beside the suite's
//! traffic until the balancer's timeout plus the margin.
//!
//! ```text
//!  COMMAND    start ──────────────────────────────────────── end
//!  service        (COMMAND may start it) up ──────────────────── (may stop with COMMAND)
//!  check      connect, retry ─▶ fields, idle connections held to D + margin ─▶ still answering? ─▶ verdict
//! ```
//!
//! - The check starts once the service accepts a connection (retried
//!   every 100 ms until COMMAND ends: COMMAND may start the service).
//! - When COMMAND ends, the guard waits for the check while its idle
//!   connections stay open (a service started outside COMMAND): the
//!   verdict is then whole.
//! - When the idle connections are closed, or held to the end, the check
//!   asks the service once more on a fresh connection. A service that no
//!   longer answers has stopped (COMMAND's own, stopped with it, or by
//!   it): its closes were its going away, not its idle timeout, and the
//!   check is cut short, `inconclusive` (not a pass; see [`verdict`]).
//! - Nothing is printed while COMMAND runs: its output is its own.

pub mod verdict;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use signal_hook::iterator::Signals;

use crate::config::Upstream;
use crate::probe::cli::Method;
use crate::probe::fingerprint;
use crate::probe::idle::{self, Plan};
use crate::probe::lb_hop::Front;
use crate::probe::target::Target;
use crate::rx_stamps;
use crate::tls::client::Trust;
use verdict::{Measured, ServiceHop};

/// Idle connections the check holds (the probe's default is 8: the guard
/// shares the machine with COMMAND and the service).
const CONNECTIONS: usize = 4;
/// Their starts are spread over this (the probe's least `--stagger`).
const STAGGER: Duration = Duration::from_secs(1);
/// A connect or a whole response may take this long.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How often a service not yet up is tried again.
const RETRY: Duration = Duration::from_millis(100);
/// How long the last question may take: a service that does not answer
/// within it has stopped.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// How often the guard looks whether the check is done.
const TICK: Duration = Duration::from_millis(20);
/// How long the guard waits for the check before it says so.
const SAY_WAITING_AFTER: Duration = Duration::from_millis(500);

/// The check, running beside COMMAND.
pub struct Check {
    thread: JoinHandle<ServiceHop>,
    command_ended: Arc<AtomicBool>,
    upstream: String,
    front: Front,
}

/// Starts checking the service at `upstream` against `front`.
pub fn start(upstream: &Upstream, front: Front) -> Check {
    let command_ended = Arc::new(AtomicBool::new(false));
    let url = upstream.url.clone();
    let addr = upstream.addrs[0];
    let ended = Arc::clone(&command_ended);
    let thread = std::thread::Builder::new()
        .name("other-hop".into())
        .spawn(move || check(&url, addr, front, &ended))
        .expect("a thread for the other hop's check");
    Check {
        thread,
        command_ended,
        upstream: upstream.url.clone(),
        front,
    }
}

impl Check {
    /// COMMAND has ended: waits for the check while the service still
    /// accepts connections; the hop, or the signal that stopped the wait.
    pub fn finish(self, signals: &mut Signals) -> Result<ServiceHop, i32> {
        self.command_ended.store(true, Ordering::Relaxed);
        let since = Instant::now();
        let mut said = false;
        while !self.thread.is_finished() {
            if let Some(signal) = signals.pending().next() {
                return Err(signal);
            }
            if !said && since.elapsed() >= SAY_WAITING_AFTER {
                said = true;
                eprintln!(
                    "keepalive-server lab: COMMAND ended; checking {} goes on while it accepts \
                     connections (its idle connections are held to {:.1} s)",
                    self.upstream,
                    self.front.threshold().as_secs_f64()
                );
            }
            std::thread::sleep(TICK);
        }
        Ok(self.thread.join().unwrap_or_else(|_| {
            verdict::not_checked(&self.upstream, self.front, "the check panicked".into())
        }))
    }
}

/// The check itself, on its own thread.
fn check(url: &str, addr: SocketAddr, front: Front, command_ended: &AtomicBool) -> ServiceHop {
    if !wait_until_accepting(addr, command_ended) {
        return verdict::not_checked(
            url,
            front,
            format!("the service at {url} never accepted a connection while COMMAND ran"),
        );
    }
    let target = match Target::new(url, Method::Get, false, &Trust::System) {
        Ok(target) => target,
        Err(e) => {
            return verdict::not_checked(url, front, format!("the check could not start: {e}"));
        }
    };
    // As the probe does: the kernel stamps every response from the first.
    let _stamps_on = rx_stamps::hold_switched_on();
    std::thread::sleep(rx_stamps::SWITCH_ON_DELAY);
    let epoch = Instant::now();
    let fields = fingerprint::fields(&target, TIMEOUT);
    let plan = Plan {
        connections: CONNECTIONS,
        stagger: STAGGER,
        timeout: TIMEOUT,
        max_wait: front.threshold(),
        refine: false,
        progress: false,
    };
    let measured = idle::measure(&target, plan, epoch);
    let stopped = !fingerprint::answers(&target, ANSWER_WITHIN);
    match measured {
        Ok(idle) => verdict::judge(
            url,
            front,
            Measured {
                idle: &idle,
                fields,
                stopped,
            },
        ),
        Err(failure) if stopped => verdict::not_checked(
            url,
            front,
            format!("the service stopped during the check (COMMAND stopped it?): {failure}"),
        ),
        Err(failure) => verdict::not_checked(url, front, format!("the check failed: {failure}")),
    }
}

/// Tries `addr` until it accepts a connection (true), or COMMAND ends
/// first (false).
fn wait_until_accepting(addr: SocketAddr, command_ended: &AtomicBool) -> bool {
    loop {
        if TcpStream::connect_timeout(&addr, TIMEOUT).is_ok() {
            return true;
        }
        if command_ended.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(RETRY);
    }
}
