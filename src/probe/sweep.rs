//! The race sweep: for each δ, several fresh connections (opened spread
//! over the stagger, so they meet the server's close passes at different
//! phases) send a request, wait until the earliest idle close seen + δ
//! after its response, and send the request again, as a pool reusing the
//! connection then would. Each try ends answered, at an EOF or at a reset;
//! a connection the server closed before the send counts by how it closed.
//!
//! When the lowest δ saw a failure the sweep widens: a point twice as far
//! below (at least 100 ms further) is tried, until one is answered every
//! time or the idle time would reach zero ("none found"). The idle time of
//! every send is measured, not assumed (a late wake-up sends later), and
//! the lowest idle time at which a try failed is what the advice must stay
//! under.

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

/// The sweep's points and what they show.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// Ascending δ, the widening's points included.
    pub points: Vec<SweepPoint>,
    /// The idle time δ counts from, ms: the earliest close seen.
    pub deadline_ms: f64,
    /// The lowest idle time at which a try failed, ms.
    pub lowest_failure_ms: Option<f64>,
    /// The highest idle time below that at which every try of a point was
    /// answered (the point's earliest send), ms.
    pub highest_success_below_failure_ms: Option<f64>,
    /// Points added below the ones asked for.
    pub widened: usize,
    /// Widening reached an idle time of zero with failures still.
    pub none_found: bool,
}

/// One try's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Answered,
    Eof,
    Reset,
}

/// One try: its point, when it was (or would have been) sent, how it ended.
#[derive(Debug, Clone, Copy)]
struct Try {
    delta_ms: i64,
    /// Response to send, ms: measured when sent, planned when the server
    /// closed first.
    idle_ms: f64,
    outcome: Outcome,
}

/// Runs `tries` tries at each of `points` (ms) around `deadline_ms`, the
/// connections of each batch opened over `stagger`, widening below while
/// the lowest point fails.
pub fn sweep(
    target: &Target,
    deadline_ms: f64,
    points: &[i64],
    tries: usize,
    stagger: Duration,
    timeout: Duration,
) -> Result<Sweep, Failure> {
    let mut all = batch(target, deadline_ms, points, tries, stagger, timeout)?;
    let mut widened = 0;
    let mut none_found = false;
    while let Some(lowest) = all.iter().map(|t| t.delta_ms).min() {
        let failed = all
            .iter()
            .any(|t| t.delta_ms == lowest && t.outcome != Outcome::Answered);
        if !failed {
            break;
        }
        let floor = -(deadline_ms.floor() as i64);
        let next = (2 * lowest).min(lowest - 100).max(floor);
        if next >= lowest {
            none_found = true;
            break;
        }
        widened += 1;
        all.extend(batch(
            target,
            deadline_ms,
            &[next],
            tries,
            stagger,
            timeout,
        )?);
    }
    let lowest_failure_ms = all
        .iter()
        .filter(|t| t.outcome != Outcome::Answered)
        .map(|t| t.idle_ms)
        .reduce(f64::min);
    let points = tally(&all);
    let highest_success_below_failure_ms = points
        .iter()
        .filter(|p| p.failed() == 0 && p.answered > 0)
        .filter_map(|p| {
            all.iter()
                .filter(|t| t.delta_ms == p.delta_ms)
                .map(|t| t.idle_ms)
                .reduce(f64::min)
        })
        .filter(|&ms| lowest_failure_ms.is_none_or(|failed| ms < failed))
        .reduce(f64::max);
    Ok(Sweep {
        points,
        deadline_ms,
        lowest_failure_ms,
        highest_success_below_failure_ms,
        widened,
        none_found,
    })
}

/// One batch of tries on connections opened over `stagger`.
fn batch(
    target: &Target,
    deadline_ms: f64,
    points: &[i64],
    tries: usize,
    stagger: Duration,
    timeout: Duration,
) -> Result<Vec<Try>, Failure> {
    let n = points.len() * tries;
    // Point-major interleaving: each point's tries spread over the stagger.
    let delta = |i: usize| points[i % points.len()];
    let mut set = ConnSet::staggered(target, n, stagger, timeout, None)?;
    let mut sent: Vec<Option<f64>> = vec![None; n];
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    let mut progress = Progress::on_stderr();
    let started = Instant::now();
    let longest = Duration::from_secs_f64(
        ((deadline_ms + points.iter().copied().max().unwrap_or(0) as f64) / 1e3).max(0.0),
    );
    let send_at = |responded: Instant, i: usize| {
        let offset = deadline_ms + delta(i) as f64;
        if offset <= 0.0 {
            responded
        } else {
            responded + Duration::from_secs_f64(offset / 1e3)
        }
    };
    loop {
        let now = Instant::now();
        set.open_due(now)?;
        set.expire(now);
        if let Some(why) = set.first_failure() {
            return Err(Failure::Server(format!("{} (sweep): {why}", target.url)));
        }
        let mut next_send: Option<Instant> = None;
        for i in 0..set.conns.len() {
            if outcomes[i].is_some() {
                continue;
            }
            let conn = &set.conns[i];
            outcomes[i] = match (&conn.phase, sent[i].is_some()) {
                (Phase::Idle, true) => Some(Outcome::Answered),
                (Phase::Closed(Closed::Fin), _) => Some(Outcome::Eof),
                (Phase::Closed(Closed::Rst), _) => Some(Outcome::Reset),
                // No answer to the reuse within --timeout, a cut response,
                // or a connection error while idle.
                (Phase::Failed(_), _) => Some(Outcome::Eof),
                _ => None,
            };
            if outcomes[i].is_some() || sent[i].is_some() || conn.phase != Phase::Idle {
                continue;
            }
            let Some(responded) = conn.response_at() else {
                continue;
            };
            let at = send_at(responded, i);
            if now >= at {
                let idle = Instant::now().saturating_duration_since(responded);
                sent[i] = Some(idle.as_secs_f64() * 1e3);
                set.resend(i);
            } else {
                next_send = Some(next_send.map_or(at, |t: Instant| t.min(at)));
            }
        }
        let left = outcomes.iter().filter(|o| o.is_none()).count();
        if left == 0 {
            break;
        }
        progress.show(
            &format!("sweep: {n} tries at {} δ", points.len()),
            &format!("{left} to go"),
            now - started,
            longest + stagger + timeout,
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
    Ok((0..n)
        .map(|i| Try {
            delta_ms: delta(i),
            idle_ms: sent[i].unwrap_or((deadline_ms + delta(i) as f64).max(0.0)),
            outcome: outcomes[i].unwrap_or(Outcome::Eof),
        })
        .collect())
}

/// The tries counted per point, ascending δ.
fn tally(tries: &[Try]) -> Vec<SweepPoint> {
    let mut deltas: Vec<i64> = tries.iter().map(|t| t.delta_ms).collect();
    deltas.sort_unstable();
    deltas.dedup();
    deltas
        .into_iter()
        .map(|delta_ms| {
            let mut point = SweepPoint {
                delta_ms,
                answered: 0,
                eof: 0,
                reset: 0,
            };
            for t in tries.iter().filter(|t| t.delta_ms == delta_ms) {
                match t.outcome {
                    Outcome::Answered => point.answered += 1,
                    Outcome::Eof => point.eof += 1,
                    Outcome::Reset => point.reset += 1,
                }
            }
            point
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_are_counted_per_point_in_order() {
        let t = |delta_ms, outcome| Try {
            delta_ms,
            idle_ms: 0.0,
            outcome,
        };
        let points = tally(&[
            t(5, Outcome::Eof),
            t(-400, Outcome::Answered),
            t(5, Outcome::Reset),
            t(-400, Outcome::Answered),
        ]);
        assert_eq!(
            points,
            [
                SweepPoint {
                    delta_ms: -400,
                    answered: 2,
                    eof: 0,
                    reset: 0
                },
                SweepPoint {
                    delta_ms: 5,
                    answered: 0,
                    eof: 1,
                    reset: 1
                },
            ]
        );
    }
}
