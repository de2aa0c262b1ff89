//! The idle measurement: `--connections` connections opened spread over
//! `--stagger` (at least a second), each sending one request and then
//! waiting, timed from the kernel receive stamp of the response's last
//! segment to the server's FIN or reset (bounded by `--max-wait`). The
//! first response also says what the server promises.
//!
//! Spreading the starts makes the connections go idle at different phases
//! of any periodic close pass, so the closes show the whole range a pool
//! can meet (see [`super::closes`]). Then, in further rounds:
//! - closes the probe saw during a stall of its own (a close window wider
//!   than [`super::closes::STALL_MS`]) are measured again, twice at most;
//! - when every close came in one pass, the passes are further apart than
//!   the starts were spread: the starts are spread four times wider, once
//!   (a wider round opens proportionally more connections, up to 256, so
//!   its starts are as close together as the first round's);
//! - when passes are found further apart than the spread, the starts are
//!   spread over one period, once;
//! - when passes are found, one more round, started half a period out of
//!   step, checks that they keep their phase (passes that follow the
//!   server's load do not, and a connection can then close up to a period
//!   earlier than one round shows).

use std::time::{Duration, Instant};

use super::closes::{self, CloseSample, Closes, PassPhase, Pattern};
use super::conn_set::{ConnSet, TICK};
use super::failure::Failure;
use super::progress::Progress;
use super::target::Target;
use crate::measure::response::ResponseHead;
use crate::measure::timed_conn::{Closed, Phase};
use crate::tls::TlsVersion;

/// Rounds that measure stalled closes again.
const REDO_ROUNDS: usize = 2;
/// A single pass widens the spread of starts this many times.
const WIDEN: u32 = 4;
/// The longest the phase check waits before its round.
const CHECK_DELAY_MAX: Duration = Duration::from_secs(5);

/// How the idle connections are run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub connections: usize,
    /// The first round's starts are spread over this.
    pub stagger: Duration,
    /// Connect and response bound.
    pub timeout: Duration,
    /// How long to wait for the closes after the last response.
    pub max_wait: Duration,
    /// Run the further rounds that find the earliest close of a server
    /// closing in passes; without them (the other hop's check, which needs
    /// only whether a close came before `max_wait`) only stalled closes
    /// are measured again.
    pub refine: bool,
    /// Show the progress on stderr (the probe's own); off beside
    /// another program's output (the guard's check of the other hop).
    pub progress: bool,
}

/// What the idle connections showed.
#[derive(Debug, Clone)]
pub struct Idle {
    /// The first response's head: the promise.
    pub promise: ResponseHead,
    /// Connections opened, every round.
    pub connections: usize,
    /// Every close kept (stalled ones measured again are dropped).
    pub samples: Vec<CloseSample>,
    /// The closes reduced; `None` when none closed.
    pub closes: Option<Closes>,
    /// Closes by FIN and by reset.
    pub fins: usize,
    pub resets: usize,
    /// Of the FIN closes, those that said `close_notify` first (TLS).
    pub close_notifies: usize,
    /// The TLS version the connections settled on (https only).
    pub tls_version: Option<TlsVersion>,
    /// Connections still open at `--max-wait`.
    pub still_open: usize,
    /// Every response was timed by the kernel's receive stamp.
    pub kernel_stamps: bool,
    /// Bytes after a complete response (a server bug).
    pub stray_bytes: usize,
    /// The widest spread of starts used.
    pub stagger: Duration,
    /// Rounds run.
    pub rounds: usize,
    /// Closes seen during a stall of the probe and measured again.
    pub redone: usize,
    /// The probe's own wake-ups later than asked (beyond the stall
    /// threshold), and the latest, ms: its loop was starved.
    pub late_wakeups: usize,
    pub worst_late_ms: f64,
}

impl Idle {
    /// The report before any round has run: nothing seen yet, every
    /// response so far timed by the kernel's stamp, starts spread over
    /// `stagger`.
    pub fn before_any_round(stagger: Duration) -> Idle {
        Idle {
            promise: ResponseHead::default(),
            connections: 0,
            samples: Vec::new(),
            closes: None,
            fins: 0,
            resets: 0,
            close_notifies: 0,
            tls_version: None,
            still_open: 0,
            kernel_stamps: true,
            stray_bytes: 0,
            stagger,
            rounds: 0,
            redone: 0,
            late_wakeups: 0,
            worst_late_ms: 0.0,
        }
    }

    /// How the server closes: by the majority of the closes seen.
    pub fn close_style(&self) -> Option<Closed> {
        match (self.fins, self.resets) {
            (0, 0) => None,
            (fins, resets) if resets > fins => Some(Closed::Rst),
            _ => Some(Closed::Fin),
        }
    }

    /// One round of `samples`, each closed by a FIN, from a keep-alive
    /// HTTP/1.1 server: for tests of what is made of them.
    #[cfg(test)]
    pub fn of_samples(samples: &[CloseSample]) -> Idle {
        Idle {
            promise: ResponseHead {
                minor_version: 1,
                status: 200,
                ..ResponseHead::default()
            },
            connections: samples.len(),
            samples: samples.to_vec(),
            closes: closes::analyse(samples),
            fins: samples.len(),
            rounds: 1,
            ..Idle::before_any_round(Duration::from_secs(1))
        }
    }
}

/// Runs the idle measurement; `epoch` is the start of the probe's timeline.
pub fn measure(target: &Target, plan: Plan, epoch: Instant) -> Result<Idle, Failure> {
    let mut idle = Idle::before_any_round(plan.stagger);
    let mut span = plan.stagger;
    round(target, &plan, plan.connections, span, epoch, &mut idle)?;
    let (mut redos, mut widened, mut checked) = (0, false, false);
    while idle.promise.persistent() {
        let stalled = idle.samples.iter().filter(|s| s.stalled()).count();
        if stalled > 0 && redos < REDO_ROUNDS {
            redos += 1;
            idle.samples.retain(|s| !s.stalled());
            idle.redone += stalled;
            round(target, &plan, stalled, span, epoch, &mut idle)?;
            continue;
        }
        let Some(closes) = closes::analyse_with(&idle.samples, whole_seconds(&idle.promise))
            .filter(|_| plan.refine)
        else {
            break;
        };
        span = match closes.pattern {
            Pattern::OnePass if !widened => {
                widened = true;
                span * WIDEN
            }
            Pattern::Passes { period_ms, .. }
                if !widened && period_ms > 1.05 * span.as_secs_f64() * 1e3 =>
            {
                widened = true;
                Duration::from_secs_f64(period_ms / 1e3)
            }
            Pattern::Passes {
                phase: PassPhase::Unchecked,
                period_ms,
                ..
            } if !checked => {
                // Half a period out of step with the last round: passes
                // on a fixed timer keep their phase; passes that follow
                // the server's load (its last event) move with the probe.
                checked = true;
                std::thread::sleep(Duration::from_secs_f64(period_ms / 2e3).min(CHECK_DELAY_MAX));
                span
            }
            _ => break,
        };
        idle.stagger = idle.stagger.max(span);
        round(target, &plan, spaced(&plan, span), span, epoch, &mut idle)?;
    }
    idle.closes = closes::analyse_with(&idle.samples, whole_seconds(&idle.promise));
    Ok(idle)
}

/// The server is one known to compare whole-second stamps in its idle
/// passes (lighttpd, by its `Server` field).
fn whole_seconds(promise: &ResponseHead) -> bool {
    promise
        .server
        .as_deref()
        .is_some_and(|server| server.to_ascii_lowercase().starts_with("lighttpd"))
}

/// Connections for a round over `span`: as many more than
/// `--connections` as `span` is longer than `--stagger`, so a wider round
/// starts its connections as close together as the first (the gap between
/// starts bounds how far below the lowest close the earliest may be).
fn spaced(plan: &Plan, span: Duration) -> usize {
    let wider = span.as_secs_f64() / plan.stagger.as_secs_f64();
    ((plan.connections as f64 * wider).round() as usize).clamp(plan.connections, MAX_ROUND)
}

/// The most connections a widened round opens.
const MAX_ROUND: usize = 256;

/// One round: `n` connections over `span`, their closes added to `idle`.
fn round(
    target: &Target,
    plan: &Plan,
    n: usize,
    span: Duration,
    epoch: Instant,
    idle: &mut Idle,
) -> Result<(), Failure> {
    idle.rounds += 1;
    let mut set = ConnSet::staggered(target, n, span, plan.timeout, Some(TICK))?;
    let mut progress = match plan.progress {
        true => Progress::on_stderr(),
        false => Progress::silent(),
    };
    let started = Instant::now();
    let mut last_response: Option<Instant> = None;
    let label = match idle.rounds {
        1 => String::new(),
        r => format!("round {r}: "),
    };
    loop {
        let now = Instant::now();
        set.open_due(now)?;
        set.expire(now);
        if let Some(why) = set.first_failure() {
            return Err(Failure::Server(format!("{}: {why}", target.url)));
        }
        let open = set.conns.iter().filter(|c| !c.phase.finished()).count();
        if open + set.unopened() == 0 {
            break;
        }
        let answered = set.unopened() == 0 && set.conns.iter().all(|c| !c.phase.awaits_response());
        if answered && last_response.is_none() {
            last_response = Some(now);
        }
        let end = last_response.map(|at| at + plan.max_wait);
        if end.is_some_and(|end| now >= end) {
            break;
        }
        let (phase, detail, bound) = if answered {
            (
                format!("{label}waiting for {} to close", connections(n, "idle ")),
                format!("{open} open"),
                plan.max_wait,
            )
        } else {
            (
                format!(
                    "{label}opening {} over {}",
                    connections(n, ""),
                    seconds(span)
                ),
                format!(
                    "{} answered",
                    set.conns
                        .iter()
                        .filter(|c| !c.phase.awaits_response())
                        .count()
                ),
                plan.timeout + span,
            )
        };
        let elapsed = now - last_response.unwrap_or(started);
        progress.show(&phase, &detail, elapsed, bound);
        let wake = [end, progress.next_redraw(now)].into_iter().flatten().min();
        set.turn(wake)?;
    }
    progress.clear();
    summarise(&set, epoch, idle);
    Ok(())
}

fn summarise(set: &ConnSet, epoch: Instant, idle: &mut Idle) {
    if idle.connections == 0 {
        let first = set
            .conns
            .iter()
            .filter(|c| c.response.is_some())
            .min_by_key(|c| c.response_at());
        if let Some(head) = first.and_then(|c| c.response.clone()) {
            idle.promise = head;
        }
    }
    idle.connections += set.conns.len();
    idle.late_wakeups += set.late_wakeups;
    idle.worst_late_ms = idle.worst_late_ms.max(set.worst_late_ms);
    let ms = |at: Instant| at.saturating_duration_since(epoch).as_secs_f64() * 1e3;
    let timed = set.conns.iter().zip(&set.closed_after);
    for ((conn, closed_after), responded_after) in timed.zip(&set.responded_after) {
        idle.stray_bytes += conn.stray_bytes;
        idle.tls_version = idle.tls_version.or(conn.tls_version);
        idle.kernel_stamps &= conn.stamped && conn.rx_at.is_some();
        let Some(responded) = conn.response_at() else {
            continue;
        };
        match (&conn.phase, conn.closed_at, closed_after) {
            (Phase::Closed(style), Some(closed), Some(after)) => {
                idle.samples.push(CloseSample {
                    round: idle.rounds as u32,
                    idle_from_ms: ms(responded),
                    closed_ms: ms(closed),
                    closed_lo_ms: ms(*after),
                    // No kernel stamp: the wake-up that read the response
                    // may have come late.
                    response_window_ms: match (conn.rx_at, responded_after) {
                        (None, Some(after)) => ms(responded) - ms(*after),
                        _ => 0.0,
                    },
                });
                match style {
                    Closed::Fin => idle.fins += 1,
                    Closed::Rst => idle.resets += 1,
                }
                idle.close_notifies += usize::from(conn.close_notify);
            }
            _ => idle.still_open += 1,
        }
    }
}

/// "1 idle connection", "8 idle connections".
pub fn connections(n: usize, kind: &str) -> String {
    match n {
        1 => format!("1 {kind}connection"),
        n => format!("{n} {kind}connections"),
    }
}

fn seconds(span: Duration) -> String {
    humantime::format_duration(Duration::from_millis(span.as_millis() as u64)).to_string()
}
