//! The connections of one probe round on one mio `Poll`: opened spread
//! over a span (so they go idle at different phases of any periodic close
//! pass), advanced on readiness, each with a bound on how long it may wait
//! for a response (`--timeout`), so a server that never answers ends the
//! probe with a message instead of a hang.
//!
//! A close carries no data, so no kernel receive stamp: the probe sees it
//! when poll returns. Each close is therefore kept with the latest moment
//! it certainly had not arrived: the instant before the previous poll (an
//! event reported now came after that poll collected its events), or older
//! when that poll returned a full buffer (events may have waited). With a
//! tick the loop wakes at least every [`TICK`], so the window is a few ms
//! when the probe runs on time, and wide when it was stalled. A response
//! read without a kernel stamp keeps the same kind of window, and a
//! wake-up later than asked counts as the probe's own lateness.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::closes::STALL_MS;
use super::failure::{self, Failure};
use super::target::Target;
use crate::measure::timed_conn::{Phase, TimedConn};
use crate::rx_stamps::{Scratch, Seen};
use crate::tls::client::TlsTarget;

/// Events handled per poll: few, so stamps taken at wake-up stay close to
/// when closes really arrived.
const EVENTS_PER_POLL: usize = 16;
/// The longest the loop sleeps while it times closes.
pub const TICK: Duration = Duration::from_millis(2);
/// For tests: this environment variable, a number of ms, makes the loop
/// sleep that long after every poll, as a probe starved of CPU would be
/// late (a stalled probe must say so, not blame the server).
pub const STALL_HOOK: &str = "KAS_PROBE_TEST_STALL_MS";

pub struct ConnSet {
    poll: Poll,
    events: Events,
    scratch: Scratch,
    addr: SocketAddr,
    request: Arc<[u8]>,
    head_request: bool,
    /// Opened so far, in the order of `starts`.
    pub conns: Vec<TimedConn>,
    /// When each connection opens.
    starts: Vec<Instant>,
    /// TLS for an https server.
    tls: Option<TlsTarget>,
    /// When each open connection's current request began (connect or resend).
    asked_at: Vec<Instant>,
    /// For each finished connection: its close had not arrived by then.
    pub closed_after: Vec<Option<Instant>>,
    /// For each answered connection: its response had not arrived by then
    /// (matters when the kernel gave no receive stamp).
    pub responded_after: Vec<Option<Instant>>,
    /// Wake-ups later than asked by more than [`STALL_MS`]: how many,
    /// and the latest, ms.
    pub late_wakeups: usize,
    pub worst_late_ms: f64,
    /// [`STALL_HOOK`]'s delay.
    stall_hook: Option<Duration>,
    /// Events the next poll reports arrived after this.
    quiet_since: Instant,
    timeout: Duration,
    tick: Option<Duration>,
}

impl ConnSet {
    /// Plans `n` connections to `target`, opening over `span` (the first
    /// now, the last `span` later), each sending its request; with `tick`,
    /// the loop wakes at least that often.
    pub fn staggered(
        target: &Target,
        n: usize,
        span: Duration,
        timeout: Duration,
        tick: Option<Duration>,
    ) -> Result<ConnSet, Failure> {
        let poll =
            Poll::new().map_err(|e| Failure::Server(format!("cannot create a poll: {e}")))?;
        let now = Instant::now();
        let step = span
            .checked_div(n.saturating_sub(1) as u32)
            .unwrap_or_default();
        let starts = (0..n as u32).map(|i| now + step * i).collect();
        let mut set = ConnSet {
            poll,
            events: Events::with_capacity(EVENTS_PER_POLL),
            scratch: Scratch::new(),
            addr: target.addr,
            request: target.request.clone(),
            head_request: target.head_request,
            tls: target.tls.clone(),
            conns: Vec::with_capacity(n),
            starts,
            asked_at: Vec::with_capacity(n),
            closed_after: Vec::with_capacity(n),
            responded_after: Vec::with_capacity(n),
            late_wakeups: 0,
            worst_late_ms: 0.0,
            stall_hook: std::env::var(STALL_HOOK)
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map(Duration::from_millis),
            quiet_since: now,
            timeout,
            tick,
        };
        set.open_due(now)?;
        Ok(set)
    }

    /// Opens every connection whose start has come.
    pub fn open_due(&mut self, now: Instant) -> Result<(), Failure> {
        while let Some(&start) = self.starts.get(self.conns.len()) {
            if start > now {
                break;
            }
            let conn = TimedConn::connect(
                self.addr,
                self.request.clone(),
                self.head_request,
                self.tls.as_ref(),
                self.poll.registry(),
                Token(self.conns.len()),
            )
            .map_err(|e| Failure::Server(format!("cannot connect to {}: {e}", self.addr)))?;
            self.conns.push(conn);
            self.asked_at.push(Instant::now());
            self.closed_after.push(None);
            self.responded_after.push(None);
        }
        Ok(())
    }

    /// Connections not opened yet.
    pub fn unopened(&self) -> usize {
        self.starts.len() - self.conns.len()
    }

    /// Writes connection `i`'s request again (a reuse after idling).
    pub fn resend(&mut self, i: usize) {
        self.asked_at[i] = Instant::now();
        self.conns[i].resend();
        if self.conns[i].phase.finished() {
            self.closed_after[i] = Some(self.quiet_since);
            self.conns[i].close(self.poll.registry());
        }
    }

    /// Polls once, waiting at most until `wake` (or the next start, a
    /// response deadline or the tick), and advances every connection that
    /// is ready.
    pub fn turn(&mut self, wake: Option<Instant>) -> Result<(), Failure> {
        let before = Instant::now();
        let wake = [
            wake,
            self.next_response_deadline(),
            self.starts.get(self.conns.len()).copied(),
            self.tick.map(|tick| before + tick),
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = wake.map(|at| at.saturating_duration_since(before));
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(Failure::Server(format!("poll: {e}"))),
        }
        if let Some(stall) = self.stall_hook {
            std::thread::sleep(stall);
        }
        let seen = Seen::now();
        if let Some(wake) = wake.filter(|_| self.events.is_empty()) {
            self.count_lateness(seen.at.saturating_duration_since(wake));
        }
        let quiet_since = self.quiet_since;
        let mut reported = 0;
        for event in self.events.iter() {
            reported += 1;
            let i = event.token().0;
            let conn = &mut self.conns[i];
            let awaited = conn.phase.awaits_response();
            conn.on_ready(seen, &mut self.scratch);
            if awaited && !conn.phase.awaits_response() {
                self.responded_after[i] = Some(quiet_since);
            }
            if conn.phase.finished() {
                self.closed_after[i] = Some(quiet_since);
                conn.close(self.poll.registry());
            }
        }
        // A full buffer may leave older events for the next poll.
        if reported < EVENTS_PER_POLL {
            self.quiet_since = before;
        }
        Ok(())
    }

    /// Counts a wake-up `late` past the moment asked for.
    fn count_lateness(&mut self, late: Duration) {
        let ms = late.as_secs_f64() * 1e3;
        if ms > STALL_MS {
            self.late_wakeups += 1;
            self.worst_late_ms = self.worst_late_ms.max(ms);
        }
    }

    /// Fails every connection that has waited longer than the timeout for
    /// its response; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        for (conn, asked_at) in self.conns.iter_mut().zip(&self.asked_at) {
            if conn.phase.awaits_response() && now >= *asked_at + self.timeout {
                conn.fail(overdue(conn, self.timeout));
                conn.close(self.poll.registry());
                expired += 1;
            }
        }
        expired
    }

    /// The first failure of a connection that never got a response.
    pub fn first_failure(&self) -> Option<&str> {
        self.conns.iter().find_map(|conn| match &conn.phase {
            Phase::Failed(why) if conn.response.is_none() => Some(why.as_str()),
            _ => None,
        })
    }

    /// The earliest moment a connection awaiting a response times out.
    fn next_response_deadline(&self) -> Option<Instant> {
        self.conns
            .iter()
            .zip(&self.asked_at)
            .filter(|(conn, _)| conn.phase.awaits_response())
            .map(|(_, asked_at)| *asked_at + self.timeout)
            .min()
    }
}

/// Why a connection that waited `timeout` for its response is given up.
fn overdue(conn: &TimedConn, timeout: Duration) -> String {
    if conn.written_at.is_none() {
        return format!(
            "no connection within {}",
            humantime::format_duration(timeout)
        );
    }
    failure::overdue(timeout, conn.unfinished())
}
