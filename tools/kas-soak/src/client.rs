//! The soak itself: one thread, one mio `Poll`, opening the connections in
//! batches; each is a [`TimedConn`] from the server's measuring library
//! (request, response with its kernel receive stamp, then the EOF).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keepalive_server::measure::timed_conn::{Phase, TimedConn};
use keepalive_server::rx_stamps::{Scratch, Seen};
use mio::{Events, Poll, Token};

use crate::cli::Args;
use crate::http::REQUEST;
use crate::server::rss_bytes;

/// A batch that makes no progress for this long aborts the run.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// Events handled per poll, and connects per loop turn: small, so the loop
/// polls again within a fraction of a millisecond and timestamps stay close
/// to when data and EOFs really arrived.
const EVENTS_PER_POLL: usize = 8;
const CONNECTS_PER_TURN: usize = 8;
/// Errors kept for the report.
const ERRORS_KEPT: usize = 20;

/// What the event loop saw.
pub struct Soak {
    pub clients: Vec<TimedConn>,
    /// First connect to last response.
    pub open_time: Duration,
    pub rss_after: Option<u64>,
    /// Connections already closed when the "after" RSS sample was taken.
    pub closed_before_sample: usize,
    pub rss_closed: Option<u64>,
    pub errors: Vec<String>,
    /// Bytes received after a complete response (should never happen).
    pub stray_bytes: usize,
    pub close_headers: usize,
    /// Every connection got SO_TIMESTAMPNS.
    pub kernel_stamps: bool,
    /// When the first connection was opened: the CSV's zero.
    pub started: Instant,
}

/// Counts the loop keeps while connections move between phases.
#[derive(Default)]
struct Tally {
    outstanding: usize,
    idle: usize,
    closed: usize,
    close_headers: usize,
}

pub fn soak(args: &Args, pid: Option<u32>) -> Result<Soak, String> {
    let n = args.connections;
    let request: Arc<[u8]> = REQUEST.into();
    let tls = args.tls_target()?;
    let mut poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    let mut events = Events::with_capacity(EVENTS_PER_POLL);
    let mut clients: Vec<TimedConn> = Vec::with_capacity(n);
    let mut errors: Vec<String> = Vec::new();
    let mut tally = Tally::default();
    let mut batch_end = 0usize; // the current batch is clients[..batch_end]
    let mut last_response: Option<Instant> = None;
    let mut progress_at = Instant::now();
    let mut open_time = Duration::ZERO;
    let mut rss_after = None;
    let mut sampled = false;
    let mut closed_before_sample = 0usize;
    let mut kernel_stamps = true;
    let mut scratch = Scratch::new();
    let started = Instant::now();

    loop {
        // Start the next batch once the current one has all its answers;
        // open it a few connections per turn, polling in between.
        if clients.len() == batch_end && tally.outstanding == 0 && batch_end < n {
            batch_end = (batch_end + args.batch).min(n);
            progress_at = Instant::now();
        }
        if clients.len() < batch_end {
            let end = (clients.len() + CONNECTS_PER_TURN).min(batch_end);
            for i in clients.len()..end {
                let conn = TimedConn::connect(
                    args.addr,
                    request.clone(),
                    false,
                    tls.as_ref(),
                    poll.registry(),
                    Token(i),
                )
                .map_err(|e| format!("connect #{i}: {e}"))?;
                kernel_stamps &= conn.stamped;
                clients.push(conn);
                tally.outstanding += 1;
            }
        }
        let all_answered = clients.len() == n && tally.outstanding == 0;
        if all_answered && open_time.is_zero() {
            open_time = last_response.unwrap_or(started) - started;
        }

        // What the loop waits for next.
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        if all_answered {
            let last = last_response.unwrap_or(now);
            if !sampled {
                let at = last + args.settle;
                if now >= at {
                    rss_after = pid.map(rss_bytes).transpose()?;
                    closed_before_sample = tally.closed;
                    sampled = true;
                } else {
                    wake = Some(at);
                }
            }
            let end = last + args.expect_timeout + args.grace;
            if sampled && (tally.idle == 0 || now >= end) {
                break;
            }
            wake = Some(wake.map_or(end, |w| w.min(end)));
        } else if clients.len() < batch_end {
            wake = Some(now); // more of the batch to open
        } else {
            if now.duration_since(progress_at) > STALL_LIMIT {
                return Err(format!(
                    "no progress for {STALL_LIMIT:?}: {} of the batch still unanswered ({} opened)",
                    tally.outstanding,
                    clients.len()
                ));
            }
            wake = Some(progress_at + STALL_LIMIT + Duration::from_millis(1));
        }
        let timeout = wake.map(|w| w.saturating_duration_since(now));

        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        // One reading per wake-up: when the events were observed.
        let seen = Seen::now();
        for event in events.iter() {
            let i = event.token().0;
            let conn = &mut clients[i];
            let was_pending = conn.phase.awaits_response();
            let was_idle = conn.phase == Phase::Idle;
            conn.on_ready(seen, &mut scratch);
            if was_pending && !conn.phase.awaits_response() {
                tally.outstanding -= 1;
                progress_at = seen.at;
                if let Some(response) = &conn.response {
                    tally.close_headers += usize::from(response.close);
                    if response.status != 200 {
                        conn.fail(format!("status {}", response.status));
                    }
                }
                if conn.phase == Phase::Idle {
                    tally.idle += 1;
                    last_response = Some(seen.at);
                }
            }
            if was_idle && conn.phase != Phase::Idle {
                tally.idle -= 1;
                tally.closed += usize::from(matches!(conn.phase, Phase::Closed(_)));
            }
            if let Phase::Failed(why) = &conn.phase
                && errors.len() < ERRORS_KEPT
            {
                errors.push(format!("connection #{i}: {why}"));
            }
            if conn.phase.finished() {
                conn.close(poll.registry());
            }
        }
    }

    // Memory once the server has dropped every connection.
    let rss_closed = match pid {
        Some(pid) if tally.idle == 0 => {
            std::thread::sleep(args.settle);
            Some(rss_bytes(pid)?)
        }
        _ => None,
    };
    let stray_bytes = clients.iter().map(|c| c.stray_bytes).sum();
    Ok(Soak {
        clients,
        open_time,
        rss_after,
        closed_before_sample,
        rss_closed,
        errors,
        stray_bytes,
        close_headers: tally.close_headers,
        kernel_stamps,
        started,
    })
}
