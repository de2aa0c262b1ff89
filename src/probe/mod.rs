//! `keepalive-server probe URL`: measures any server's real keep-alive
//! behaviour from the client side, and says what a pool in front of it
//! should do.
//!
//! ```text
//!  idle (N connections)    request ─ response ······ idle ······ FIN/RST
//!                                        rx stamp ───────────────▶ close: the real timeout
//!  limit (1 connection)    request, response, request, … until a close or --max-requests
//!  sweep (--sweep)         request ─ response ··· deadline+δ: request ─▶ answered | EOF | reset
//! ```
//!
//! The idle connections and the request limit run at once; the sweep
//! follows, since it needs the measured deadline. The pieces: [`cli`] (the
//! flags), [`target`] (the URL and the request), `conn_set` (one phase's
//! connections on a poll), [`idle`], [`limit`], [`sweep`], [`advice`],
//! [`report`] (text and JSON), `progress` (the terminal line) and
//! [`failure`] (exit statuses). Timing comes from [`crate::measure`].

pub mod advice;
pub mod cli;
mod conn_set;
pub mod failure;
pub mod idle;
pub mod limit;
mod progress;
pub mod report;
pub mod sweep;
pub mod target;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

pub use cli::ProbeArgs;
pub use failure::Failure;
pub use report::Report;

use crate::measure::rx_stamps;
use crate::measure::stats::Spread;
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
    let target = Target::new(&args.url, args.method, args.http1_0)?;
    let _stamps_on = rx_stamps::hold_switched_on();
    std::thread::sleep(rx_stamps::SWITCH_ON_DELAY);
    let points = args.sweep_points();
    let (idle, max_requests) = std::thread::scope(|scope| {
        let limit = (args.max_requests > 0).then(|| {
            let target = &target;
            scope.spawn(move || limit::max_requests(target, args.max_requests, args.timeout))
        });
        let idle = idle::measure(
            &target,
            args.connections as usize,
            args.timeout,
            args.max_wait,
        );
        let max_requests = match limit.map(|thread| thread.join()) {
            None => Ok(None),
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Failure::Server("the request-limit thread panicked".into())),
        };
        (idle, max_requests)
    });
    let idle = idle?;
    let max_requests = max_requests?;
    let persistent = idle.promise.persistent();
    let spread = Spread::of(&idle.timeouts_ms);
    let sweep = match (&points, spread) {
        (Some(points), Some(spread)) if persistent => Some(sweep::sweep(
            &target,
            spread.median,
            points,
            args.sweep_tries as usize,
            args.timeout,
        )?),
        (Some(_), _) => Some(Vec::new()),
        (None, _) => None,
    };
    let max_wait_text = humantime::format_duration(args.max_wait).to_string();
    let advice = advice::advise(&idle, spread, sweep.as_deref(), &max_wait_text);
    Ok(Report {
        url: args.url.clone(),
        method: args.method.as_str(),
        idle,
        idle_timeout_ms: spread,
        max_wait: args.max_wait,
        max_requests_tried: args.max_requests,
        max_requests,
        sweep,
        advice,
        elapsed: started.elapsed(),
    })
}
