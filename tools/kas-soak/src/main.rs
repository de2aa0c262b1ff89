//! kas-soak: idle keep-alive connection soak for keepalive-server.
//!
//! Opens N keep-alive connections (in batches, so the accept backlog is not
//! overrun), sends one `GET /` on each, waits for every response, then:
//!
//! 1. samples the server's RSS before and after (all N idle) and reports the
//!    growth per idle connection;
//! 2. times, per connection, last response byte -> EOF, minus the expected
//!    idle timeout: the close lateness (never negative on a correct server);
//! 3. optionally draws the lateness distribution as an SVG histogram, and
//!    counts the server threads' context switches while it sits idle.
//!
//! One thread, one mio `Poll`, few events per poll so the loop stays
//! responsive. EOFs are timed when poll returns. Responses are timed by the
//! kernel (SO_TIMESTAMPNS on each socket, read with `recvmsg`): a user-space
//! stamp trails the true arrival by however long this loop was busy writing
//! other requests (several ms with batches of 200), which would report closes
//! as early that are not. The report also counts closes that were early even
//! against the request's send time (proof of a server bug) and those that a
//! poll-time stamp would have called early. `--csv` dumps every connection.
//!
//! The connections, receive stamps and percentiles come from the server's
//! library (`keepalive_server::measure`), shared with `keepalive-server
//! probe`. Linux only (/proc, SO_TIMESTAMPNS).
//!
//! ```text
//! kas-soak -n 2000 --expect-timeout 1s --svg target/soak.svg \
//!     --server-bin target/release/keepalive-server -- \
//!     --keep-alive-timeout 1s --keep-alive-buffer 0s --workers 1
//! ```

mod cli;
mod client;
mod http;
mod report;
mod server;
mod stats;
mod svg;

use std::fs;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use keepalive_server::rx_stamps;

use crate::cli::Args;
use crate::client::soak;
use crate::http::warm_up;
use crate::report::per_connection_csv;
use crate::server::{idle_wakeups, rss_bytes, spawn_server, wait_ready};
use crate::stats::Report;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            if report.early > 0 || report.not_closed > 0 || report.failed > 0 {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("kas-soak: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<Report, String> {
    if args.connections == 0 || args.batch == 0 {
        return Err("--connections and --batch must be at least 1".into());
    }
    check_fd_limit(args.connections)?;
    let mut spawned = match &args.server_bin {
        Some(bin) => Some(spawn_server(bin, args)?),
        None => None,
    };
    let pid = match (&spawned, args.pid) {
        (Some(s), _) => Some(s.child.id()),
        (None, pid) => pid,
    };
    wait_ready(args.addr, spawned.as_mut())?;

    // Idle before any request: no timers should be armed at all.
    let idle_before = match (args.idle_check, pid) {
        (Some(span), Some(pid)) => Some(idle_wakeups(pid, span)?),
        _ => None,
    };

    // Warm-up request: pages in the request path, the buffer pool, the
    // Date cache, so "before" is a served-once server, not a cold one.
    warm_up(args.addr, args.tls_target()?.as_ref())?;
    std::thread::sleep(args.settle);
    let rss_before = pid.map(rss_bytes).transpose()?;

    let _stamps_on = rx_stamps::hold_switched_on();
    std::thread::sleep(rx_stamps::SWITCH_ON_DELAY);
    let soak = soak(args, pid)?;
    if let Some(path) = &args.csv {
        fs::write(path, per_connection_csv(&soak, args.expect_timeout))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }

    let idle_after = match (args.idle_check, pid) {
        // Past the one-second Date timer armed by the last response.
        (Some(span), Some(pid)) => {
            std::thread::sleep(Duration::from_millis(1100));
            Some(idle_wakeups(pid, span)?)
        }
        _ => None,
    };

    let report = Report::new(
        args,
        pid,
        spawned.as_ref().map(|s| s.command.clone()),
        rss_before,
        soak,
        idle_before,
        idle_after,
    );
    if let Some(path) = &args.svg {
        fs::write(path, report.svg()?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    drop(spawned);
    Ok(report)
}

/// This process needs N descriptors plus a few; fail early with a hint.
fn check_fd_limit(connections: usize) -> Result<(), String> {
    let limits = fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok());
    match soft {
        Some(soft) if soft < connections + 32 => Err(format!(
            "open-file limit is {soft}, need {} for {connections} connections: run `ulimit -n {}` first \
             (a server started by this tool inherits it too)",
            connections + 32,
            (connections + 32).clamp(20000, 1 << 20)
        )),
        _ => Ok(()),
    }
}
