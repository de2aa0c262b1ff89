//! `keepalive-server lab [SERVER FLAGS] -- COMMAND`: the keep-alive race
//! guard for CI. It starts the server with its test controls on, runs
//! COMMAND (a test suite) against it with the base URL in `KAS_LAB_URL`, and when
//! COMMAND ends judges every client that connected over the whole run:
//! a client that lost requests to the server's idle close, or reused a
//! connection past the deadline (`race`: the server keeps idle
//! connections open past it, the shadow deadline, and counts such a
//! reuse as a request production would have lost), or came near it (`at
//! risk`), fails the run; one whose limit the run did not show against
//! the deadline is `inconclusive` (see [`judge`]).
//!
//! ```text
//!  start server ─▶ run COMMAND ─▶ settle ─▶ judge ─▶ table (stderr), --json FILE ─▶ exit
//!  (free port)     (KAS_LAB_URL)  (open connections end: the client's
//!                                  closes, the watch after an idle FIN)
//!                  other hop ──────────────▶ (with --lb-idle-timeout: the
//!                  (the service, straight)    service against its balancer)
//! ```
//!
//! A run no client reached is not a pass (exit 3, unless
//! `--allow-no-clients`); the exit status and the table's last line are
//! one verdict ([`outcome`]).
//!
//! Clients are told apart by address and User-Agent (the peer
//! observer's `clients` tables), so a suite's several clients, all on 127.0.0.1, are
//! judged one by one.
//!
//! The pieces: [`cli`] (the command line, the server's flags among it),
//! [`run`] (COMMAND and the signals), `settle` (waiting for what the
//! server can still learn), [`judge`] (the verdicts: the peer observer's,
//! and what the client's reuses and closes show of its limit), [`table`]
//! (what is printed and written), [`outcome`] (the run's one verdict: the
//! exit status and the closing line that says it); with `--upstream`,
//! [`upstream_errors`] (the service's failures, apart from the clients)
//! and, with `--lb-idle-timeout`, [`other_hop`] (the service against its
//! balancer).

pub mod cli;
pub mod judge;
pub mod other_hop;
pub mod outcome;
pub mod run;
mod settle;
pub mod table;
pub mod upstream_errors;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::peer_observer::PeerFindings;
use crate::peer_observer::peers::PeersSnapshot;
use crate::peer_observer::report::{PeersReport, ServerIdle};
use crate::{Server, ServerHandle, logging};
use cli::GuardArgs;
use other_hop::verdict::ServiceHop;
use outcome::USAGE_ERROR;
use run::Ended;
use table::RunReport;
use upstream_errors::UpstreamErrors;

/// The guard's diagnostics level when `RUST_LOG` is unset: the server's
/// own startup and shutdown lines would only crowd COMMAND's output.
const LOG_LEVEL: &str = "warn";

/// Runs the subcommand: `args` are what follows `lab` on the command line.
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<OsString> = std::iter::once(OsString::from("keepalive-server lab"))
        .chain(args.into_iter().map(Into::into))
        .collect();
    let guard_args = cli::parse(args).unwrap_or_else(|e| e.exit());
    logging::init_at(guard_args.config.log_format, LOG_LEVEL);
    match guard(guard_args) {
        Ok(status) => ExitCode::from(status),
        Err(message) => {
            eprintln!("keepalive-server lab: {message}");
            ExitCode::from(1)
        }
    }
}

/// Serves, runs COMMAND, judges: the exit status.
fn guard(args: GuardArgs) -> Result<u8, String> {
    // Tried before COMMAND runs: a FILE that cannot be written is told at
    // once (a usage error), not after the whole suite.
    if let Some(path) = &args.json {
        if let Err(e) = check_writable(path) {
            eprintln!(
                "keepalive-server lab: cannot write --json {}: {e}",
                path.display()
            );
            return Ok(USAGE_ERROR);
        }
    }
    // Before COMMAND starts: from then on a signal is the guard's to pass on.
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let settings = args.config.settings();
    let tls = settings.tls.is_some();
    let server = Server::bind(settings).map_err(|e| e.to_string())?;
    let handle = server
        .start()
        .map_err(|e| format!("cannot start workers: {e}"))?;
    if let Some(addr) = args.config.admin {
        let (bound, _thread) = crate::admin::spawn(addr, handle.remote())
            .map_err(|e| format!("cannot listen for admin on {addr}: {e}"))?;
        eprintln!("keepalive-server lab: admin on {}", base_url(bound, false));
    }
    let started = Instant::now();
    let url = base_url(handle.local_addr(), tls);
    let child = match run::start(&args.command, &url) {
        Ok(child) => child,
        Err(not_started) => {
            eprintln!("keepalive-server lab: {}", not_started.message);
            return Ok(not_started.status);
        }
    };
    let other_hop = args
        .front
        .zip(args.config.upstream.as_ref())
        .map(|(front, upstream)| other_hop::start(upstream, front));
    let status = match run::wait(child, &mut signals) {
        Ok(Ended::Exited(status)) => run::shell_status(status),
        Ok(Ended::Interrupted(signal)) => return Ok(interrupted(signal)),
        Err(e) => return Err(format!("cannot wait for COMMAND: {e}")),
    };
    let left_open = match settle::settle(&handle, &mut signals) {
        Ok(left_open) => left_open,
        Err(signal) => return Ok(interrupted(signal)),
    };
    let lb_hop = match other_hop.map(|check| check.finish(&mut signals)) {
        Some(Err(signal)) => return Ok(interrupted(signal)),
        Some(Ok(hop)) => Some(hop),
        None => None,
    };
    let ran = Ran {
        command_status: status,
        started,
        connections_left_open: left_open,
        lab_url: url,
        lb_hop,
    };
    let report = judge_run(&handle, &args, ran)?;
    eprint!("{}", report.text());
    handle.shutdown();
    let exit = report.status();
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, report.json()) {
            eprintln!("keepalive-server lab: cannot write {}: {e}", path.display());
            return Ok(exit.max(1));
        }
    }
    Ok(exit)
}

/// Whether `path` can be written, leaving it as it was: opened to append
/// (a report already there is kept until this run's replaces it), and
/// removed again if this made it, so an interrupted run leaves none.
fn check_writable(path: &Path) -> std::io::Result<()> {
    let existed = path.exists();
    OpenOptions::new().append(true).create(true).open(path)?;
    if !existed {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// What the run gave, besides the lab's peers.
struct Ran {
    command_status: i32,
    /// When the lab started.
    started: Instant,
    connections_left_open: u64,
    lab_url: String,
    /// The other hop's check, if asked for.
    lb_hop: Option<ServiceHop>,
}

/// The peer observer's peers, judged against the server's own idle
/// timeouts over the whole run, with the rest of what the run gave: the
/// report and its one verdict.
fn judge_run(handle: &ServerHandle, args: &GuardArgs, ran: Ran) -> Result<RunReport, String> {
    let snapshots = handle
        .remote()
        .snapshots(settle::SNAPSHOT_TIMEOUT)
        .map_err(|e| format!("cannot read the lab: {e}"))?;
    if snapshots.len() < handle.remote().worker_count() {
        return Err("a worker did not report its peers".into());
    }
    let settings = args.config.settings();
    let server = ServerIdle {
        advertised_timeout_s: settings.keep_alive_advertised_secs,
        idle_timeout_ms: settings.keep_alive_ms,
    };
    // The window spans the whole run (see `cli`): the verdicts' words say
    // "in the last N s" of the run, not of the window's nominal length.
    let window_us = run_window_us(ran.started.elapsed());
    let mut by_agent: BTreeMap<String, Vec<PeersSnapshot>> = BTreeMap::new();
    for agent in snapshots
        .into_iter()
        .flat_map(|s| PeerFindings::of(&s.findings).clients)
    {
        by_agent.entry(agent.agent).or_default().push(agent.peers);
    }
    let mut clients = Vec::new();
    for workers in by_agent.into_values() {
        let mut peers = PeersSnapshot::merge(workers);
        peers.window_us = window_us;
        let shadow = !args.real_close;
        clients.extend(judge::judge(&PeersReport::new(&peers, server), shadow));
    }
    clients.sort_by(|a, b| (&a.addr, &a.user_agent).cmp(&(&b.addr, &b.user_agent)));
    let clients_pass = !clients.iter().any(|c| c.fails(args.fail_on));
    Ok(RunReport {
        command: args
            .command
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect(),
        command_status: ran.command_status,
        duration_s: window_us as f64 / 1e6,
        keep_alive: settings.keep_alive,
        server,
        fail_on: args.fail_on.name(),
        shadow_ms: settings.shadow_ms,
        connections_left_open: ran.connections_left_open,
        clients,
        clients_pass,
        lab_url: ran.lab_url,
        allow_no_clients: args.allow_no_clients,
        upstream: args
            .config
            .upstream
            .as_ref()
            .map(|upstream| UpstreamErrors::read(&handle.remote(), upstream)),
        lb_hop: ran.lb_hop,
    })
}

/// The window the verdicts are judged on, µs: the run's length rounded up
/// to a tenth of a second (so it holds the whole run), the same figure
/// the table's first line gives as the run's length.
fn run_window_us(run: Duration) -> u64 {
    let tenths = u64::try_from(run.as_micros().div_ceil(100_000)).unwrap_or(u64::MAX);
    tenths.max(1).saturating_mul(100_000)
}

/// Says the run was cut by `signal`: a shell's status for it.
fn interrupted(signal: i32) -> u8 {
    eprintln!("keepalive-server lab: interrupted (signal {signal}): COMMAND stopped");
    interrupted_status(signal)
}

/// A shell's status for a run cut by `signal`: 128 + the signal.
fn interrupted_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(1)
}

/// The base URL COMMAND is given, and the one the server's start-up line
/// shows: the bound address (loopback for every interface), `https` when
/// the server speaks TLS.
pub fn base_url(bound: SocketAddr, tls: bool) -> String {
    let host = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}/", SocketAddr::new(host, bound.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_the_whole_run_in_tenths() {
        assert_eq!(run_window_us(Duration::ZERO), 100_000);
        assert_eq!(run_window_us(Duration::from_millis(9_720)), 9_800_000);
        assert_eq!(run_window_us(Duration::from_millis(9_800)), 9_800_000);
    }

    #[test]
    fn the_url_names_loopback_for_every_interface() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(base_url(any, false), "http://127.0.0.1:8080/");
        let v6: SocketAddr = "[::]:443".parse().unwrap();
        assert_eq!(base_url(v6, true), "https://[::1]:443/");
    }
}
