//! What a worker lends a connection while it handles one event (the turn's
//! clock reading, the timer lists, the buffer pool, the Date cache, the
//! access log, the settings and counters, and the observer that hears
//! what happens at the idle boundary), and the [`Resources`] it lends
//! them from. What a timer in those lists stands for is
//! [`crate::timer_event`]'s.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::access_log::{AccessLog, AccessRecord, Entry};
use crate::admin::service::Service as AdminService;
use crate::app::filler::FillerFile;
use crate::clock::LoopTime;
use crate::config::Settings;
use crate::date::DateCache;
use crate::observe::{Event, Observer};
use crate::pool::BufferPool;
use crate::stats::Stats;
use crate::timer_event::TimerEvent;
use crate::timers::{Micros, TimerLists};
use crate::tls::TlsVersion;
use crate::upstream::Upstreams;

/// The worker's resources, lent for one event.
pub struct Ctx<'a> {
    /// The loop time of this turn.
    pub now: Micros,
    pub timers: &'a mut TimerLists<TimerEvent>,
    pub pool: &'a mut BufferPool,
    pub date: &'a mut DateCache,
    /// This worker's buffered access-log lines.
    pub access_log: &'a mut AccessLog,
    pub settings: &'a Settings,
    pub stats: &'a Stats,
    /// The server is shutting down: no new persistence.
    pub draining: bool,
    /// Which connection, for logs.
    pub conn: ConnLabel,
    /// Its key in the worker's slab: what its upstream connection is lent
    /// to (`--upstream`).
    pub key: u32,
    /// The worker's connections to its upstream (`--upstream`).
    pub upstreams: &'a mut Upstreams,
    /// Who hears what happens at the idle boundary (see `observe`).
    pub observer: &'a mut dyn Observer,
    /// Descriptors are plentiful: an idle close may keep its socket for
    /// the watch after its FIN.
    pub watch_allowed: bool,
    /// The `/bytes` filler as a file, when the worker has one.
    pub filler: Option<&'a FillerFile>,
    /// The admin's routes, rounds and ticks, on the admin listener's
    /// worker; `None` on the main listener's.
    pub admin: Option<&'a mut AdminService>,
    /// The loop clock, for placing a kernel receive stamp on its timeline.
    clock: LoopTime,
    /// The event's wire times, written by the connection as it reads and
    /// writes and read back by it when it accounts for the event: see
    /// [`Ctx::stamp_arrival`] and [`Ctx::stamp_departure`].
    arrived: Option<Micros>,
    departed: Option<Micros>,
}

impl Ctx<'_> {
    /// This event's first bytes reached the socket at `wall` (the kernel's
    /// receive stamp, `None` when the read had none): noted in loop time.
    /// Only a read near the end of the keep-alive promise is stamped
    /// (`conn::Conn::read`).
    pub fn stamp_arrival(&mut self, wall: Option<SystemTime>) {
        self.arrived = wall.map(|wall| self.clock.at_wall(wall));
    }

    /// When this event's first bytes reached the socket, in loop time, if
    /// the read that took them was stamped ([`Ctx::stamp_arrival`]).
    pub fn arrived(&self) -> Option<Micros> {
        self.arrived
    }

    /// The response's last write begins now: noted by a fresh clock
    /// reading (the turn's was taken before the request was even read).
    pub fn stamp_departure(&mut self) {
        self.departed = Some(self.clock.now());
    }

    /// When the response's last write began, if noted
    /// ([`Ctx::stamp_departure`]).
    pub fn departed(&self) -> Option<Micros> {
        self.departed
    }

    /// Tells the observer that `event` happened, now, on this connection.
    pub fn observe(&mut self, event: Event<'_>) {
        let ConnLabel { id, peer, .. } = self.conn;
        self.observer.observe_conn(id, peer.ip(), self.now, event);
    }

    /// Writes the access-log line of the response just queued, from the
    /// request `record` kept while it arrived (then cleared): the time is
    /// the Date cache's second, and asking for it keeps the Date tick armed,
    /// which is what flushes the line within a second.
    ///
    /// The line's idle gap runs from the end of the connection's previous
    /// response ([`ConnLabel::last_response_end`]) to this request's first
    /// byte; this response then becomes the previous one.
    pub fn log_response(&mut self, record: &mut AccessRecord, status: u16, bytes: u64) {
        self.date
            .current(self.timers, self.now, TimerEvent::DateExpired);
        let started = record.started.unwrap_or(self.conn.accepted);
        let idle_gap_ms = self
            .conn
            .last_response_end
            .map(|end| started.saturating_sub(end) / 1000);
        self.conn.last_response_end = Some(self.now);
        self.access_log.write(&Entry {
            peer: self.conn.peer.ip(),
            unix_second: self.date.unix_second(),
            record,
            status,
            bytes,
            micros: self.now.saturating_sub(started),
            conn: self.conn.id,
            idle_gap_ms,
            tls: self.conn.tls,
        });
        record.clear();
    }
}

/// A connection as logs name it: an id unique over the process's life,
/// the peer's address (as accept() returned it, so no lookup is needed),
/// when it was accepted and when its previous response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLabel {
    pub id: u64,
    pub peer: SocketAddr,
    pub accepted: Micros,
    /// When the connection last finished a response, or `now` while one
    /// is still going out (it has not been idle since); `None` before its
    /// first. The access log's idle gap runs from here.
    pub last_response_end: Option<Micros>,
    /// The TLS version it speaks (`None`: plain, or still shaking hands).
    pub tls: Option<TlsVersion>,
}

impl Default for ConnLabel {
    fn default() -> Self {
        ConnLabel {
            id: 0,
            peer: SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
            accepted: 0,
            last_response_end: None,
            tls: None,
        }
    }
}

impl ConnLabel {
    /// The next connection id (ids start at 1).
    pub fn next_id() -> u64 {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    }
}

/// What a worker owns and lends its connections, one event at a time.
#[derive(Default)]
pub struct Resources {
    pub timers: TimerLists<TimerEvent>,
    pub pool: BufferPool,
    pub date: DateCache,
    pub access_log: AccessLog,
    /// The `/bytes` filler as a file, for `sendfile` (`None` where no
    /// filler file could be made: the filler is then written from memory).
    pub filler: Option<FillerFile>,
    /// The worker's loop clock (see [`Ctx::stamp_arrival`]).
    pub clock: LoopTime,
    /// Its connections to the upstream (none without `--upstream`).
    pub upstreams: Upstreams,
}

impl Resources {
    /// Room for `timers` timers before the lists allocate.
    pub fn with_capacity(timers: usize) -> Self {
        Resources {
            timers: TimerLists::with_capacity(timers),
            ..Resources::default()
        }
    }

    /// A context at loop time `now`, not draining, for an unlabelled
    /// connection (for tests and benchmarks of one exchange).
    pub fn lend<'a>(
        &'a mut self,
        now: Micros,
        settings: &'a Settings,
        stats: &'a Stats,
        observer: &'a mut dyn Observer,
    ) -> Ctx<'a> {
        self.lend_to(now, (settings, stats), observer, Lending::default(), None)
    }

    /// A context at loop time `now` for the connection and worker state
    /// that `lending` describes.
    pub fn lend_to<'a>(
        &'a mut self,
        now: Micros,
        (settings, stats): (&'a Settings, &'a Stats),
        observer: &'a mut dyn Observer,
        lending: Lending,
        admin: Option<&'a mut AdminService>,
    ) -> Ctx<'a> {
        Ctx {
            now,
            timers: &mut self.timers,
            pool: &mut self.pool,
            date: &mut self.date,
            access_log: &mut self.access_log,
            settings,
            stats,
            draining: lending.draining,
            conn: lending.conn,
            key: lending.key,
            upstreams: &mut self.upstreams,
            observer,
            watch_allowed: lending.watch_allowed,
            filler: self.filler.as_ref(),
            admin,
            clock: self.clock,
            arrived: None,
            departed: None,
        }
    }
}

/// What the worker says, per event, of the connection it lends to and of
/// itself (see the fields of the same names on [`Ctx`]).
#[derive(Debug, Clone, Copy)]
pub struct Lending {
    pub conn: ConnLabel,
    pub key: u32,
    pub draining: bool,
    pub watch_allowed: bool,
}

impl Default for Lending {
    /// An unlabelled connection on a worker that is not draining and has
    /// descriptors to spare.
    fn default() -> Self {
        Lending {
            conn: ConnLabel::default(),
            key: 0,
            draining: false,
            watch_allowed: true,
        }
    }
}
