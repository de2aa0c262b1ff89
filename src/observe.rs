//! What the serving path tells the one observer that watches it: a handful
//! of named events in a connection's life at the idle boundary. It was
//! accepted; a request began on it after an idle gap (against which
//! deadline); responses finished; it ended while idle, and by whom; and,
//! after the server's idle FIN, whether the peer still sent a request or
//! closed.
//!
//! The serving path (worker, conn, session, http, timers) knows only
//! this interface: a connection reports through the [`Observer`] its
//! context lends it, and the worker holds its observer by a trait
//! ([`WorkerObserver`]), never by type. What is learned from the events
//! (the peer table, histograms, verdicts and their metrics,
//! `peer_observer::ObserverStats`) lives behind it, in `peer_observer`,
//! which the server hands each worker; a server without it would hand
//! [`Ignore`]. The worker passes what its observer shows ([`Findings`])
//! on to the admin listener without looking inside.
//!
//! Times are loop-clock microseconds ([`Micros`]): `now` is the reading
//! taken after the poll that delivered what the event reports, so a gap
//! runs from when a response left to when the next request arrived, not
//! from the loop's next turn (but it holds the loop's wake-up: only the
//! delay after an idle FIN is taken on the kernel's stamps).

use std::any::Any;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::config::Settings;
use crate::timers::Micros;

/// Who is told what happens on the server's connections.
pub trait Observer {
    /// `event` happened at loop time `now` on a connection from `peer`.
    fn observe(&mut self, peer: IpAddr, now: Micros, event: Event<'_>);

    /// The same, on the connection with id `conn` (unique over the
    /// process's life), for an observer that tells connections apart; by
    /// default it is [`Observer::observe`].
    fn observe_conn(&mut self, conn: u64, peer: IpAddr, now: Micros, event: Event<'_>) {
        let _ = conn;
        self.observe(peer, now, event);
    }
}

/// An observer that learns nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Ignore;

impl Observer for Ignore {
    fn observe(&mut self, _: IpAddr, _: Micros, _: Event<'_>) {}
}

impl WorkerObserver for Ignore {
    fn reload(&mut self, _: &Settings) {}
}

/// The observer a worker holds, by this trait alone: it hears the
/// serving path's events, takes the settings of a reload, and shows what
/// it has learned in the worker's snapshot.
pub trait WorkerObserver: Observer + Send {
    /// Settings were reloaded (SIGHUP): what it keeps follows them.
    fn reload(&mut self, settings: &Settings);

    /// What it has learned by loop time `now`, for the worker's snapshot
    /// (by default, nothing).
    fn findings(&self, _now: Micros) -> Findings {
        Findings::default()
    }
}

/// What an observer has learned, as a worker's snapshot carries it: the
/// serving path passes it on without knowing its type, and the observer's
/// own module reads it back ([`Findings::get`]) for the admin listener.
#[derive(Clone, Default)]
pub struct Findings(Option<Arc<dyn Any + Send + Sync>>);

impl Findings {
    /// `what` an observer shows.
    pub fn new<T: Any + Send + Sync>(what: T) -> Self {
        Findings(Some(Arc::new(what)))
    }

    /// What was shown, if it is a `T` (`None`: nothing, or another type).
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref().and_then(|what| what.downcast_ref())
    }
}

impl fmt::Debug for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.0.is_some() {
            "Findings(..)"
        } else {
            "Findings(none)"
        };
        f.write_str(shown)
    }
}

/// Something that happened on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The connection was accepted.
    Accepted,
    /// Its first request's head, or a later one's that named another
    /// `User-Agent` than the request before it (`again`: requests from
    /// several clients on one connection, as a proxy's are): the client's
    /// `User-Agent` (as sent), whether a proxy said it forwarded the
    /// request, and what shows one that does not say so: the request's
    /// HTTP minor version (nginx speaks 1.0 upstream by default) and its
    /// `Host` (nginx sends its upstream's name), both as sent.
    ClientNamed {
        user_agent: Option<&'a [u8]>,
        forwarded: bool,
        again: bool,
        minor_version: u8,
        host: Option<&'a [u8]>,
    },
    /// A request began on it after it had been idle since a response.
    Reused(Reuse),
    /// This many responses finished (their last byte left).
    ResponsesDone(u32),
    /// It was idle between requests (after at least one response) and
    /// ended.
    IdleEnded(IdleEnd),
    /// After the server's idle FIN (see [`Closer::Server`]), the peer did
    /// this.
    AfterFin(AfterFin),
}

/// A request on a connection idle since its previous response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reuse {
    /// From when the previous response left to when this request arrived.
    pub gap_us: Micros,
    /// Left before the server's idle deadline when the request arrived
    /// (negative: it arrived after the deadline, before the timer ran).
    pub headroom_us: i64,
    /// The connection's real idle timeout at the time, in ms.
    pub idle_timeout_ms: u64,
    /// What its responses advertised (`Keep-Alive: timeout=`), in seconds.
    pub advertised_secs: Option<u64>,
    /// It came after the idle timer had run out and found nothing, while
    /// the shadow deadline kept the connection open (the race guard's,
    /// `Settings::shadow_ms`): served here, lost in production, where the
    /// server would have closed the connection.
    pub past_deadline: bool,
}

/// An idle connection's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleEnd {
    pub closer: Closer,
    /// Since its last response left.
    pub age_us: Micros,
    /// The connection's real idle timeout, in ms.
    pub idle_timeout_ms: u64,
    /// The close was a reset, or meets a late request with one: the
    /// client's reset, the server's own when the connection's terms asked
    /// for one (`close=rst`), or the server's FIN without the watch after
    /// it (no descriptor to spare). A request that lost the race then
    /// cannot be seen.
    pub reset: bool,
    /// The connection's smoothed round trip as the kernel measured it
    /// (`TCP_INFO`), µs, at its end.
    pub round_trip_us: Option<u32>,
}

/// Who ended a connection that was idle between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closer {
    /// The client: a FIN or a reset while idle.
    Client,
    /// The server: its idle timer ran out.
    Server,
}

impl Closer {
    pub const ALL: [Closer; 2] = [Closer::Client, Closer::Server];

    /// The label used in metrics and `/peers`.
    pub fn label(self) -> &'static str {
        match self {
            Closer::Client => "client",
            Closer::Server => "server",
        }
    }
}

/// What the peer did after the server's idle FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFin {
    /// Sent a request (the first bytes after the FIN), this long after it:
    /// a request that lost the race. It crossed the FIN in flight (the
    /// client could not have known) when the delay is 0; within a round
    /// trip after the FIN, whether the client could have seen it cannot be
    /// told (`lab::peers::Crossing`).
    /// The delay runs from the FIN's `shutdown` to the request's kernel
    /// receive stamp (0: it was in before the FIN left), or between loop
    /// readings where there is no stamp (TLS).
    Request {
        delay_us: Micros,
        /// The connection's idle timeout, ms: the request came this plus
        /// the delay after the last response left.
        idle_timeout_ms: u64,
        /// The connection's smoothed round trip (`TCP_INFO`), µs.
        round_trip_us: Option<u32>,
    },
    /// Closed (FIN or reset), this long after it.
    Closed { delay_us: Micros },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naming_the_host_does_not_make_the_event_larger() {
        // The serving path passes an event by value per call: the
        // borrowed Host fits in the room the largest variant takes.
        assert!(std::mem::size_of::<Event<'_>>() <= 48);
    }

    #[test]
    fn findings_give_back_what_was_shown_and_only_as_its_type() {
        let shown = Findings::new(vec![1u32, 2]);
        assert_eq!(shown.get::<Vec<u32>>(), Some(&vec![1, 2]));
        assert_eq!(shown.get::<String>(), None);
        assert_eq!(Findings::default().get::<Vec<u32>>(), None);
        assert_eq!(Ignore.findings(0).get::<Vec<u32>>(), None);
    }
}
