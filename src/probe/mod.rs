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
//! (the terminal line), [`failure`] (exit statuses), and for the other hop
//! (`--lb-idle-timeout`) [`lb_hop`] (the judgement) and [`fingerprint`]
//! (what the service says of itself). Timing comes from
//! [`crate::measure`].

pub mod advice;
pub mod cli;
pub mod closes;
mod conn_set;
pub mod failure;
pub mod fingerprint;
pub mod idle;
pub mod lb_hop;
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
/// A run that measured nothing of the server's (its closes came during the
/// probe's own stalls) prints its report, then that line, and exits 1.
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
            match report.unmeasured() {
                Some(failure) => failed(failure),
                None => report.lb_hop.as_ref().map_or(ExitCode::SUCCESS, lb_verdict),
            }
        }
        Err(failure) => failed(failure),
    }
}

/// Says why on stderr, and the exit status that goes with it.
fn failed(failure: Failure) -> ExitCode {
    eprintln!("keepalive-server probe: error: {failure}");
    ExitCode::from(failure.exit_code())
}

/// The other hop's exit status: 1, said on stderr, when the service
/// closes before the balancer.
fn lb_verdict(hop: &lb_hop::LbHop) -> ExitCode {
    if hop.verdict != lb_hop::Verdict::ClosesFirst {
        return ExitCode::SUCCESS;
    }
    eprintln!("keepalive-server probe: {}", hop.advice);
    ExitCode::FAILURE
}

/// Measures the server `args` names.
pub fn probe(args: &ProbeArgs) -> Result<Report, Failure> {
    let started = Instant::now();
    let target = Target::new(&args.url, args.method, args.http1_0, &args.trust())?;
    let _stamps_on = rx_stamps::hold_switched_on();
    std::thread::sleep(rx_stamps::SWITCH_ON_DELAY);
    let points = args.sweep_points();
    let front = args.front();
    let plan = idle::Plan {
        connections: args.connections as usize,
        stagger: args.stagger,
        timeout: args.timeout,
        max_wait: front.map_or(args.max_wait, |front| front.threshold()),
        refine: front.is_none(),
        progress: true,
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
    // Closes seen mostly during the probe's own stalls are not the
    // server's: no idle timeout from them, and no sweep at it.
    let spread = idle
        .closes
        .filter(|closes| closes.reliable)
        .map(|closes| closes.spread);
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
        plan.max_wait,
    );
    if let Some(close) = idle.tls_close().filter(|_| target.tls.is_some()) {
        advice.paragraph.push(' ');
        advice.paragraph.push_str(close.advice());
    }
    let lb_hop = front.map(|front| {
        let head = fingerprint::head(&target, &idle.promise, args.timeout);
        lb_hop::judge(front, persistent, idle.closes.as_ref(), &head)
    });
    Ok(Report {
        url: args.url.clone(),
        method: args.method.as_str(),
        idle,
        idle_timeout_ms: spread,
        max_wait: plan.max_wait,
        max_requests_tried: args.max_requests,
        max_requests,
        round_trip_ms: limit.round_trip_ms,
        round_trips: limit.round_trips,
        sweep,
        advice,
        elapsed: started.elapsed(),
        tls: target.tls.is_some(),
        lb_hop,
    })
}
