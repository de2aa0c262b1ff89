//! The connections of one probe phase on one mio `Poll`: opened together,
//! advanced on readiness, each with a bound on how long it may wait for a
//! response (`--timeout`), so a server that never answers ends the probe
//! with a message instead of a hang.

use std::io;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::failure::Failure;
use super::target::Target;
use crate::measure::rx_stamps::{Scratch, Seen};
use crate::measure::timed_conn::{Phase, TimedConn};

/// Events handled per poll: few, so stamps taken at wake-up stay close to
/// when closes really arrived.
const EVENTS_PER_POLL: usize = 16;

pub struct ConnSet {
    poll: Poll,
    events: Events,
    scratch: Scratch,
    pub conns: Vec<TimedConn>,
    /// When each connection's current request began (connect or resend).
    asked_at: Vec<Instant>,
    timeout: Duration,
}

impl ConnSet {
    /// Opens `n` connections to `target`, each sending its request.
    pub fn open(target: &Target, n: usize, timeout: Duration) -> Result<ConnSet, Failure> {
        let poll =
            Poll::new().map_err(|e| Failure::Server(format!("cannot create a poll: {e}")))?;
        let now = Instant::now();
        let conns = (0..n)
            .map(|i| {
                TimedConn::connect(
                    target.addr,
                    target.request.clone(),
                    target.head_request,
                    poll.registry(),
                    Token(i),
                )
                .map_err(|e| Failure::Server(format!("cannot connect to {}: {e}", target.addr)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ConnSet {
            poll,
            events: Events::with_capacity(EVENTS_PER_POLL),
            scratch: Scratch::new(),
            conns,
            asked_at: vec![now; n],
            timeout,
        })
    }

    /// Writes connection `i`'s request again (a reuse after idling).
    pub fn resend(&mut self, i: usize) {
        self.asked_at[i] = Instant::now();
        self.conns[i].resend();
    }

    /// Polls once, waiting at most until `wake`, and advances every
    /// connection that is ready.
    pub fn turn(&mut self, wake: Option<Instant>) -> Result<(), Failure> {
        let wake = [wake, self.next_response_deadline()]
            .into_iter()
            .flatten()
            .min();
        let timeout = wake.map(|at| at.saturating_duration_since(Instant::now()));
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(Failure::Server(format!("poll: {e}"))),
        }
        let seen = Seen::now();
        for event in self.events.iter() {
            let i = event.token().0;
            let conn = &mut self.conns[i];
            conn.on_ready(seen, &mut self.scratch);
            if conn.phase.finished() {
                conn.close(self.poll.registry());
            }
        }
        Ok(())
    }

    /// Fails every connection that has waited longer than the timeout for
    /// its response; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        for (conn, asked_at) in self.conns.iter_mut().zip(&self.asked_at) {
            if conn.phase.awaits_response() && now >= *asked_at + self.timeout {
                let what = if conn.written_at.is_some() {
                    "no response"
                } else {
                    "no connection"
                };
                conn.fail(format!(
                    "{what} within {}",
                    humantime::format_duration(self.timeout)
                ));
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
