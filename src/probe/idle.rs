//! The idle measurement: `--connections` connections at once, each sending
//! one request and then waiting, timed from the kernel receive stamp of the
//! response's last segment to the server's FIN or reset (bounded by
//! `--max-wait`). The first response also says what the server promises.

use std::time::{Duration, Instant};

use super::conn_set::ConnSet;
use super::failure::Failure;
use super::progress::Progress;
use super::target::Target;
use crate::measure::response::ResponseHead;
use crate::measure::timed_conn::{Closed, Phase};

/// What the idle connections showed.
#[derive(Debug, Clone)]
pub struct Idle {
    /// The first response's head: the promise.
    pub promise: ResponseHead,
    /// Connections measured.
    pub connections: usize,
    /// Response to close, ms, one per connection the server closed.
    pub timeouts_ms: Vec<f64>,
    /// Closes by FIN and by reset.
    pub fins: usize,
    pub resets: usize,
    /// Connections still open at `--max-wait`.
    pub still_open: usize,
    /// Longest request-written to response-received time, ms.
    pub slowest_response_ms: f64,
    /// Every response was timed by the kernel's receive stamp.
    pub kernel_stamps: bool,
    /// Bytes after a complete response (a server bug).
    pub stray_bytes: usize,
}

impl Idle {
    /// How the server closes: by the majority of the closes seen.
    pub fn close_style(&self) -> Option<Closed> {
        match (self.fins, self.resets) {
            (0, 0) => None,
            (fins, resets) if resets > fins => Some(Closed::Rst),
            _ => Some(Closed::Fin),
        }
    }
}

/// Runs the idle measurement.
pub fn measure(
    target: &Target,
    connections: usize,
    timeout: Duration,
    max_wait: Duration,
) -> Result<Idle, Failure> {
    let mut set = ConnSet::open(target, connections, timeout)?;
    let mut progress = Progress::on_terminal();
    let started = Instant::now();
    let mut last_response: Option<Instant> = None;
    loop {
        let now = Instant::now();
        set.expire(now);
        if let Some(why) = set.first_failure() {
            return Err(Failure::Server(format!("{}: {why}", target.url)));
        }
        let waiting = set.conns.iter().filter(|c| !c.phase.finished()).count();
        if waiting == 0 {
            break;
        }
        let answered = set.conns.iter().all(|c| !c.phase.awaits_response());
        if answered && last_response.is_none() {
            last_response = Some(now);
        }
        let end = last_response.map(|at| at + max_wait);
        if end.is_some_and(|end| now >= end) {
            break;
        }
        let what = if answered {
            format!("waiting for {waiting} idle connections to close")
        } else {
            "waiting for responses".to_owned()
        };
        let bound = if answered { max_wait } else { timeout };
        progress.show(&what, now - last_response.unwrap_or(started), bound);
        let wake = [end, progress.next_redraw(now)].into_iter().flatten().min();
        set.turn(wake)?;
    }
    progress.clear();
    Ok(summarise(&set))
}

fn summarise(set: &ConnSet) -> Idle {
    let mut idle = Idle {
        promise: ResponseHead::default(),
        connections: set.conns.len(),
        timeouts_ms: Vec::new(),
        fins: 0,
        resets: 0,
        still_open: 0,
        slowest_response_ms: 0.0,
        kernel_stamps: true,
        stray_bytes: 0,
    };
    let first = set
        .conns
        .iter()
        .filter(|c| c.response.is_some())
        .min_by_key(|c| c.response_at());
    if let Some(head) = first.and_then(|c| c.response.clone()) {
        idle.promise = head;
    }
    for conn in &set.conns {
        idle.stray_bytes += conn.stray_bytes;
        idle.kernel_stamps &= conn.stamped && conn.rx_at.is_some();
        let (Some(written), Some(responded)) = (conn.written_at, conn.response_at()) else {
            continue;
        };
        idle.slowest_response_ms = idle
            .slowest_response_ms
            .max(ms(responded.saturating_duration_since(written)));
        match (&conn.phase, conn.closed_at) {
            (Phase::Closed(style), Some(closed)) => {
                idle.timeouts_ms
                    .push(ms(closed.saturating_duration_since(responded)));
                match style {
                    Closed::Fin => idle.fins += 1,
                    Closed::Rst => idle.resets += 1,
                }
            }
            _ => idle.still_open += 1,
        }
    }
    idle
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
