//! `keepalive-server probe URL`: measures any server's real keep-alive
//! behaviour from the client side, and says what a pool in front of it
//! should do.
//!
//! ```text
//!  idle (N connections,    request ─ response ······ idle ······ FIN/RST
//!   started over ≥ 1 s)                  rx stamp ───────────────▶ close: the real timeout
//!  limit (1 connection)    request, response, request, … until a close or --max-requests;
//!                          the fastest warm request is the round trip
//!  sweep (--sweep)         request ─ response ··· earliest+δ: request ─▶ answered | EOF | reset
//! ```
//!
//! The idle connections and the request limit run at once; the sweep
//! follows, since it needs the measured deadline. The idle connections
//! start spread over `--stagger`, so a server that closes in periodic
//! passes shows the whole range of its closes; closes the probe saw while
//! it was itself stalled are measured again. The pieces: [`cli`] (the
//! flags), [`target`] (the URL and the request), `conn_set` (one round's
//! connections on a poll), [`idle`], [`closes`] (passes, stalls and the
//! earliest close, without sockets), [`limit`], [`sweep`], [`advice`] (the
//! facts for [`crate::advice`]), [`tls`] (how an https server ends an idle
//! connection), [`report`] (text and JSON), `progress`
//! (the terminal line) and [`failure`] (exit statuses). Timing comes from
//! [`crate::measure`].

pub mod advice;
pub mod cli;
pub mod closes;
mod conn_set;
pub mod failure;
pub mod idle;
pub mod limit;
mod progress;
pub mod report;
pub mod sweep;
pub mod target;
pub mod tls;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

pub use cli::ProbeArgs;
pub use conn_set::STALL_HOOK;
pub use failure::Failure;
pub use report::Report;

use crate::rx_stamps;
use crate::tls::client::speaks_tls;
use target::Target;

/// Runs the subcommand: `args` are what follows `probe` on the command
/// line. Prints the report on stdout, or one line on stderr and exits 1 or 2.
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = std::iter::once(OsString::from("keepalive-server probe"))
        .chain(args.into_iter().map(Into::into));
    let args = ProbeArgs::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match probe(&args) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("keepalive-server probe: error: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Measures the server `args` names.
pub fn probe(args: &ProbeArgs) -> Result<Report, Failure> {
    let started = Instant::now();
    let target = Target::new(&args.url, args.method, args.http1_0, &args.trust())?;
    let _stamps_on = rx_stamps::hold_switched_on();
    std::thread::sleep(rx_stamps::SWITCH_ON_DELAY);
    let points = args.sweep_points();
    let plan = idle::Plan {
        connections: args.connections as usize,
        stagger: args.stagger,
        timeout: args.timeout,
        max_wait: args.max_wait,
    };
    // The limit thread also times the round trip: a few requests even
    // when the limit is not measured.
    let requests = args.max_requests.max(limit::ROUND_TRIP_REQUESTS);
    let (idle, limit) = std::thread::scope(|scope| {
        let limit = {
            let target = &target;
            scope.spawn(move || limit::measure(target, requests, args.timeout))
        };
        let idle = idle::measure(&target, plan, started);
        let limit = limit
            .join()
            .unwrap_or_else(|_| Err(Failure::Server("the request-limit thread panicked".into())));
        (idle, limit)
    });
    let idle = idle?;
    if target.tls.is_none() && idle.promise.status == 400 && speaks_tls(target.addr, args.timeout) {
        return Err(Failure::Server(format!(
            "{}: the server answered 400 to a plain-HTTP request and speaks TLS on this port: \
             use https:// in place of http://",
            args.url
        )));
    }
    // Only the round trip was asked for: a server that fails the later
    // requests leaves it unmeasured, and the probe goes on.
    let limit = match limit {
        Err(_) if args.max_requests == 0 => limit::Limit {
            max_requests: None,
            round_trip_ms: None,
            round_trips: 0,
        },
        limit => limit?,
    };
    let max_requests = limit
        .max_requests
        .filter(|&n| args.max_requests > 0 && n <= args.max_requests);
    let persistent = idle.promise.persistent();
    let spread = idle.closes.map(|closes| closes.spread);
    let sweep = match (&points, spread) {
        (Some(points), Some(spread)) if persistent => Some(sweep::sweep(
            &target,
            spread.min,
            points,
            args.sweep_tries as usize,
            idle.stagger,
            args.timeout,
        )?),
        _ => None,
    };
    let mut advice = advice::advise(
        &args.url,
        &idle,
        sweep.as_ref(),
        limit.round_trip_ms,
        args.max_wait,
    );
    if let Some(close) = idle.tls_close().filter(|_| target.tls.is_some()) {
        advice.paragraph.push(' ');
        advice.paragraph.push_str(close.advice());
    }
    Ok(Report {
        url: args.url.clone(),
        method: args.method.as_str(),
        idle,
        idle_timeout_ms: spread,
        max_wait: args.max_wait,
        max_requests_tried: args.max_requests,
        max_requests,
        round_trip_ms: limit.round_trip_ms,
        round_trips: limit.round_trips,
        sweep,
        advice,
        elapsed: started.elapsed(),
        tls: target.tls.is_some(),
    })
}
