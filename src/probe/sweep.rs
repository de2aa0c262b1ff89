//! The race sweep: for each δ, several fresh connections send a request,
//! wait until the measured idle deadline + δ after its response, and send
//! the request again, as a pool reusing the connection then would. Each try
//! ends answered, at an EOF or at a reset; a connection the server closed
//! before the send counts by how it closed.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::conn_set::ConnSet;
use super::failure::Failure;
use super::progress::Progress;
use super::target::Target;
use crate::measure::timed_conn::{Closed, Phase};

/// The outcomes at one δ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SweepPoint {
    pub delta_ms: i64,
    pub answered: u32,
    pub eof: u32,
    pub reset: u32,
}

impl SweepPoint {
    /// Tries that did not get a response.
    pub fn failed(&self) -> u32 {
        self.eof + self.reset
    }
}

/// One try's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Answered,
    Eof,
    Reset,
}

/// Runs `tries` tries at each of `points` (ms) around `deadline_ms`.
pub fn sweep(
    target: &Target,
    deadline_ms: f64,
    points: &[i64],
    tries: usize,
    timeout: Duration,
) -> Result<Vec<SweepPoint>, Failure> {
    let n = points.len() * tries;
    let mut set = ConnSet::open(target, n, timeout)?;
    let mut resent = vec![false; n];
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    let mut progress = Progress::on_terminal();
    let started = Instant::now();
    let longest = Duration::from_secs_f64(
        ((deadline_ms + points.iter().copied().max().unwrap_or(0) as f64) / 1e3).max(0.0),
    );
    let send_at = |conn_at: Instant, i: usize| {
        let offset = deadline_ms + points[i / tries] as f64;
        if offset <= 0.0 {
            conn_at
        } else {
            conn_at + Duration::from_secs_f64(offset / 1e3)
        }
    };
    loop {
        let now = Instant::now();
        set.expire(now);
        if let Some(why) = set.first_failure() {
            return Err(Failure::Server(format!("{} (sweep): {why}", target.url)));
        }
        let mut next_send: Option<Instant> = None;
        for i in 0..n {
            if outcomes[i].is_some() {
                continue;
            }
            let conn = &set.conns[i];
            outcomes[i] = match (&conn.phase, resent[i]) {
                (Phase::Idle, true) => Some(Outcome::Answered),
                (Phase::Closed(Closed::Fin), _) => Some(Outcome::Eof),
                (Phase::Closed(Closed::Rst), _) => Some(Outcome::Reset),
                // No answer to the reuse within --timeout, a cut response,
                // or a connection error while idle.
                (Phase::Failed(_), _) => Some(Outcome::Eof),
                _ => None,
            };
            if outcomes[i].is_some() || resent[i] || conn.phase != Phase::Idle {
                continue;
            }
            let Some(responded) = conn.response_at() else {
                continue;
            };
            let at = send_at(responded, i);
            if now >= at {
                set.resend(i);
                resent[i] = true;
            } else {
                next_send = Some(next_send.map_or(at, |t: Instant| t.min(at)));
            }
        }
        let left = outcomes.iter().filter(|o| o.is_none()).count();
        if left == 0 {
            break;
        }
        progress.show(
            &format!("sweep: {left} of {n} tries to go"),
            now - started,
            longest + timeout,
        );
        let wake = [next_send, progress.next_redraw(now)]
            .into_iter()
            .flatten()
            .min();
        // Sends within the next millisecond go now: poll's timeout is whole ms.
        if next_send.is_some_and(|at| at <= now + Duration::from_micros(500)) {
            continue;
        }
        set.turn(wake)?;
    }
    progress.clear();
    Ok(tally(points, tries, &outcomes))
}

fn tally(points: &[i64], tries: usize, outcomes: &[Option<Outcome>]) -> Vec<SweepPoint> {
    points
        .iter()
        .enumerate()
        .map(|(k, &delta_ms)| {
            let mut point = SweepPoint {
                delta_ms,
                answered: 0,
                eof: 0,
                reset: 0,
            };
            for outcome in outcomes[k * tries..(k + 1) * tries].iter().flatten() {
                match outcome {
                    Outcome::Answered => point.answered += 1,
                    Outcome::Eof => point.eof += 1,
                    Outcome::Reset => point.reset += 1,
                }
            }
            point
        })
        .collect()
}
