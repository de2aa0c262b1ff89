//! One event loop: a mio `Poll`, its own SO_REUSEPORT listener, a slab of
//! connections (`Token` = slab key), its timer lists, buffer pool and Date
//! cache. Nothing is shared with other workers but counters and the stop flag.
//!
//! A loop turn reads the clock twice, never per request (and once more
//! after an event that may have cost much, see [`Worker::restamp`]):
//! 1. read the clock;
//! 2. sync the timers of every connection touched since the last turn,
//!    stamping them with that reading (taken after their activity, so no
//!    timer can fire early);
//! 3. fire due timers, in deadline order;
//! 4. set the alarm (a timerfd, see `clock`) to the earliest expiry, or
//!    disarm it when there are no timers (an idle server sleeps), and poll:
//!    without a timeout, or with zero when work is pending (before a poll
//!    that may sleep, buffered access-log lines are written out);
//! 5. read the clock again (the poll may have slept): what the poll
//!    delivered is stamped with this reading (a request's arrival, a
//!    response's end, see `stats::timing`);
//! 6. handle readiness events, then the ready list (connections that spent
//!    their read budget), so one busy client cannot starve the rest; after
//!    an event on a connection in a costly state (a TLS handshake), read
//!    the clock again and, once the turn's reading is stale, stamp what the
//!    turn has touched with the fresh one (`restamp`).
//!
//! Taking connections in lives in `accept`, the graceful shutdown in
//! `drain`, the admin snapshot in `view`. The admin listener is served by
//! a worker of this kind too, with the admin's routes: its part (answers
//! woken when a round ends, event streams fed per tick) is `admin`.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::admin::service::Service as AdminService;
use crate::app::filler::FillerFile;
use crate::clock::{LoopClock, RateLimit};
use crate::config::Settings;
use crate::conn::{Conn, Flow, Readiness};
use crate::ctx::{Ctx, Lending, Resources};
use crate::memory::MemoryReturn;
use crate::observe::WorkerObserver;
use crate::readiness::interrupted;
use crate::rx_stamps;
use crate::shared::{Control, WorkerShared};
use crate::stats::CloseCause;
use crate::timer_event::TimerEvent;
use crate::timers::Micros;
use crate::upstream::{UPSTREAM_BIT, Upstreams};

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);
pub const ALARM: Token = Token(usize::MAX - 3);
/// Connections accepted per turn before other work gets a go.
const ACCEPT_BUDGET: usize = 128;
/// Pause before retrying accept() when out of descriptors or memory.
const ACCEPT_PAUSE_MS: u64 = 100;
/// Events handled per turn. Timers touched in a turn are stamped with the
/// next turn's clock reading, so this bounds how late a stamp can be
/// (~128 × 6 µs ≈ 1 ms) at the price of one more epoll_wait per 128 events.
const EVENTS_CAPACITY: usize = 128;
/// Connections a worker has room for before its slab and lists grow;
/// each has up to two timers.
const INITIAL_CONNECTIONS: usize = 1024;
/// How old the worker lets the turn's clock reading get, after a costly
/// event, before it stamps what it has touched with a fresh one (see
/// `Worker::restamp`).
const RESTAMP_AFTER_US: Micros = 250;
/// At most one eviction warning per this many milliseconds.
const EVICTION_WARNING_EVERY_MS: u64 = 10_000;
/// At most one warning about a failing access log per this many milliseconds.
const ACCESS_LOG_WARNING_EVERY_MS: u64 = 10_000;

/// One event loop and everything it owns.
pub struct Worker {
    index: usize,
    poll: Poll,
    listener: Option<TcpListener>,
    /// accept() failed for lack of resources; a timer resumes it.
    accept_paused: bool,
    /// The accept budget ran out with connections maybe still queued.
    accept_pending: bool,
    /// The current resource shortage has been logged.
    accept_warned: bool,
    /// Evictions since the last warning, and how often one is given.
    evictions_unreported: u64,
    eviction_warning: RateLimit,
    /// How often a failed access-log write is reported.
    access_log_warning: RateLimit,
    conns: Slab<Conn>,
    /// Timer lists, buffer pool and Date cache, lent to connections.
    resources: Resources,
    settings: Arc<Settings>,
    shared: Arc<WorkerShared>,
    control: Arc<Control>,
    /// Connections whose timers need syncing at the start of the next
    /// turn (or sooner, see [`Worker::restamp`]). A key may appear twice:
    /// the second sync, with the same reading, finds nothing to do.
    touched: Vec<u32>,
    /// Connections that stopped reading with input left: drive next turn.
    ready: Vec<u32>,
    /// The loop clock, and the one kernel timer armed at the earliest expiry.
    clock: LoopClock,
    /// Set once shutdown began: the loop ends when nothing ref'd is left.
    draining: bool,
    /// When a drain cuts what is left (`None`: never, or not draining).
    drain_deadline: Option<Micros>,
    /// Memory freed by the buffer pool, to hand back to the system.
    memory: MemoryReturn,
    /// The observer that hears what happens at the idle boundary (the
    /// peer observer, in a server), known only by its trait.
    observer: Box<dyn WorkerObserver>,
    /// The admin's routes, rounds and ticks, on the admin listener's
    /// worker (see `admin`); `None` on the main listener's, which serve
    /// the demonstration routes.
    admin: Option<AdminService>,
    /// Holds the kernel's receive stamping switched on (see
    /// `rx_stamps::hold_switched_on`): a late request that
    /// crosses an idle FIN arrives microseconds after the watch asks its
    /// socket for stamps, before the kernel could switch them on for it.
    _stamping: Option<std::net::UdpSocket>,
}

impl Worker {
    pub fn new(
        index: usize,
        poll: Poll,
        mut listener: TcpListener,
        settings: Arc<Settings>,
        shared: Arc<WorkerShared>,
        control: Arc<Control>,
        observer: Box<dyn WorkerObserver>,
    ) -> io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let clock = LoopClock::starting_at(settings.loop_clock_start)?;
        clock.register(poll.registry(), ALARM)?;
        let upstreams = match &settings.upstream {
            Some(upstream) => Upstreams::new(
                Some(poll.registry().try_clone()?),
                upstream.url.clone(),
                settings.upstream_idle_ms,
            ),
            None => Upstreams::new(None, String::new(), settings.upstream_idle_ms),
        };
        Ok(Worker {
            index,
            poll,
            listener: Some(listener),
            accept_paused: false,
            accept_pending: false,
            accept_warned: false,
            evictions_unreported: 0,
            eviction_warning: RateLimit::every_ms(EVICTION_WARNING_EVERY_MS),
            access_log_warning: RateLimit::every_ms(ACCESS_LOG_WARNING_EVERY_MS),
            conns: Slab::with_capacity(INITIAL_CONNECTIONS),
            resources: Resources {
                filler: FillerFile::new()
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "no filler file for /bytes: writing it from memory");
                    })
                    .ok(),
                clock: clock.time(),
                upstreams,
                ..Resources::with_capacity(2 * INITIAL_CONNECTIONS)
            },
            settings,
            shared,
            control,
            touched: Vec::with_capacity(INITIAL_CONNECTIONS),
            ready: Vec::new(),
            clock,
            draining: false,
            drain_deadline: None,
            memory: MemoryReturn::default(),
            observer,
            admin: None,
            _stamping: rx_stamps::hold_switched_on(),
        })
    }

    /// Runs the loop until a shutdown has drained.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        loop {
            let now = self.clock.now();
            if let Some(settings) = self.shared.reloaded.take() {
                self.observer.reload(&settings);
                self.settings = settings; // SIGHUP: timers armed from now on use these
            }
            if self.control.stopping.load(Ordering::Acquire) && !self.draining {
                self.start_draining(now);
            }
            self.sync_touched(now);
            self.fire_due_timers(now);
            if self.admin.is_some() {
                self.collect_rounds(now);
            }
            if self.shared.mailbox.is_asked() {
                self.shared.stats.snapshots.add(1);
                self.shared.mailbox.reply(self.snapshot(now));
            }
            if self.drained(now) {
                self.close_all(now);
                self.flush_access_log();
                return Ok(());
            }
            self.clock.arm(self.next_deadline())?;
            let timeout = self.work_pending().then_some(Duration::ZERO);
            if timeout.is_none() && !self.resources.access_log.is_empty() {
                // About to sleep: what was logged reaches the file now, not
                // at the next Date tick (under load the loop seldom sleeps,
                // and lines go out in bufferfuls).
                self.flush_access_log();
            }
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if interrupted(&e) => continue,
                Err(e) => return Err(e),
            }
            // What the poll delivered is stamped with a reading taken
            // after it (it may have slept): when a request's bytes came,
            // when a response left (see `stats::timing`).
            let mut now = self.clock.now();
            for event in events.iter() {
                match event.token() {
                    LISTENER => {
                        if self.accept(now) {
                            now = self.restamp(now);
                        }
                    }
                    WAKER | ALARM => {} // the next turn reads the clock and fires
                    token if token.0 & UPSTREAM_BIT != 0 => {
                        self.on_upstream_event(token, Readiness::of(event), now);
                    }
                    Token(key) => {
                        let readiness = Readiness::of(event);
                        let costly =
                            self.with_conn(key, now, |conn, ctx| conn.on_ready(readiness, ctx));
                        if costly {
                            now = self.restamp(now);
                        }
                    }
                }
            }
            if self.accept_pending && self.accept(now) {
                now = self.restamp(now);
            }
            let mut ready = std::mem::take(&mut self.ready);
            for key in ready.drain(..) {
                let costly =
                    self.with_conn(key as usize, now, |conn, ctx| conn.on_ready_again(ctx));
                if costly {
                    now = self.restamp(now);
                }
            }
            if self.ready.is_empty() {
                self.ready = ready; // keep its capacity for the next turn
            }
            if self.resources.access_log.is_full() {
                self.flush_access_log();
            }
            self.return_memory(now);
        }
    }

    /// Hands what the buffer pool freed this turn to the memory account,
    /// which trims now or asks for a retry timer (unref'd: it never keeps
    /// the process alive, and is armed only after a burst); spares a burst
    /// left in the pool ask for the same timer, which frees the unused ones.
    fn return_memory(&mut self, now: Micros) {
        let pool = &mut self.resources.pool;
        let freed = pool.take_released();
        let retry = match freed {
            0 if pool.has_surplus() => self.memory.surplus(),
            0 => return,
            _ => self.memory.freed(freed, now),
        };
        if let Some(ms) = retry {
            let timers = &mut self.resources.timers;
            timers.enroll(now, ms, false, TimerEvent::ReturnMemory);
        }
    }

    /// Writes this worker's buffered access-log lines to the shared log.
    fn flush_access_log(&mut self) {
        if let Err(e) = self.resources.access_log.flush(&self.control.access_log) {
            if self.access_log_warning.allow(self.clock.now()) {
                tracing::warn!(error = %e, "cannot write the access log: lines dropped");
            }
        }
    }

    /// Work that must not wait for an event: poll without sleeping.
    fn work_pending(&self) -> bool {
        !self.touched.is_empty() || !self.ready.is_empty() || self.accept_pending
    }

    /// When the alarm must wake the loop: the earliest timer, or the end of
    /// a shutdown's grace; `None` (sleep until an event) when neither.
    fn next_deadline(&self) -> Option<Micros> {
        match (self.resources.timers.next_expiry(), self.drain_deadline) {
            (Some(timer), Some(drain)) => Some(timer.min(drain)),
            (timer, drain) => timer.or(drain),
        }
    }

    /// Runs `handle` on connection `key` with a context; closes it if
    /// asked. Returns whether the event may have cost much (the
    /// connection was in a costly state, see [`crate::conn::State::is_costly`]).
    fn with_conn(
        &mut self,
        key: usize,
        now: Micros,
        handle: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> Flow,
    ) -> bool {
        let limit = self.settings.max_connections;
        let crowded = limit > 0 && self.conns.len() >= limit - limit / 10;
        let Some(conn) = self.conns.get_mut(key) else {
            return false; // closed earlier this turn
        };
        let costly = conn.state().is_costly();
        let lending = Lending {
            conn: conn.label(now),
            key: key as u32,
            draining: self.draining,
            watch_allowed: !crowded && !self.accept_paused,
        };
        let mut ctx = self.resources.lend_to(
            now,
            (&self.settings, &self.shared.stats),
            &mut *self.observer,
            lending,
            self.admin.as_mut(),
        );
        let mut flow = handle(conn, &mut ctx);
        if flow.is_open()
            && conn.registration_due()
            && let Err(e) = conn.register(self.poll.registry(), Token(key))
        {
            tracing::warn!(error = %e, "could not register a connection");
            flow = Flow::Close(CloseCause::Error);
        }
        match flow {
            Flow::Open | Flow::More => {
                conn.account(false, &mut ctx);
                // Synced once a turn, however often touched: a second sync
                // with the same reading finds nothing to do.
                if self.touched.last() != Some(&(key as u32)) {
                    self.touched.push(key as u32);
                }
                if flow == Flow::More {
                    self.ready.push(key as u32);
                }
            }
            Flow::Close(cause) => {
                let viewing = conn.stream().map(|(interval_ms, _)| interval_ms);
                conn.account(true, &mut ctx);
                conn.release(cause, &mut ctx);
                let id = conn.id();
                self.conns.remove(key);
                if let Some(interval_ms) = viewing {
                    self.viewer_left(interval_ms);
                }
                self.shared.stats.closed(cause);
                tracing::trace!(conn = id, ?cause, "connection closed");
            }
        }
        costly
    }

    /// One event can cost a handshake (a TLS signature, ~0.3 ms), and a
    /// turn of them tens of milliseconds: stamped with the next turn's
    /// reading, a keep-alive timer started early in such a turn would
    /// start that much late. So the worker reads the clock after each
    /// event on a connection in a costly state ([`crate::conn::State::is_costly`]: an
    /// accept batch that took one in, a connection still handshaking; not
    /// a request on an established one) and, once the turn's reading is
    /// [`RESTAMP_AFTER_US`] old, stamps what the turn has touched so far
    /// and goes on with the fresh reading. Stamps stay taken after their
    /// activity: never early. A turn without costly events (every turn of
    /// a plain server) keeps its one reading.
    fn restamp(&mut self, now: Micros) -> Micros {
        let fresh = self.clock.now();
        if fresh.saturating_sub(now) < RESTAMP_AFTER_US {
            return now;
        }
        self.sync_touched(fresh);
        fresh
    }

    fn sync_touched(&mut self, now: Micros) {
        for key in self.touched.drain(..) {
            if let Some(conn) = self.conns.get_mut(key as usize) {
                conn.sync_timers(key, &mut self.resources.timers, now, &self.settings);
            }
        }
    }

    fn fire_due_timers(&mut self, now: Micros) {
        while let Some(due) = self.resources.timers.expire(now) {
            let kind = self.timer_kind(&due.payload);
            // Connection timers are stamped after their activity (see
            // `sync_touched`), so `now - deadline` is how late they fired.
            // The Date, accept-pause and memory-return timers are enrolled
            // mid-turn with the reading taken before the poll: their
            // deadlines are approximate (early, never late), so they are
            // not measured.
            if let TimerEvent::Admin(timer) = due.payload {
                self.on_admin_timer(timer, now);
                continue;
            }
            let measured = matches!(due.payload, TimerEvent::Conn { .. });
            let late = measured.then(|| now.saturating_sub(due.deadline));
            self.shared.stats.timer_fired(kind, late);
            match due.payload {
                TimerEvent::Conn { key, slot } => {
                    self.with_conn(key as usize, now, |conn, ctx| conn.on_timer(slot, ctx));
                }
                TimerEvent::DateExpired => {
                    self.resources.date.invalidate();
                    // Every logged response asked for the date, so this
                    // tick comes within a second of any buffered line, even
                    // on a loop too busy ever to sleep.
                    self.flush_access_log();
                }
                TimerEvent::AcceptResume => {
                    self.accept_paused = false;
                    self.accept(now);
                }
                TimerEvent::ReturnMemory => {
                    // Spares still beyond the settled count were in use
                    // before this: the next fire frees those left unused.
                    let pool = &mut self.resources.pool;
                    let unused = pool.settle();
                    let again = match self.memory.settled(unused, now) {
                        None if pool.has_surplus() => self.memory.surplus(),
                        retry => retry,
                    };
                    if let Some(ms) = again {
                        let timers = &mut self.resources.timers;
                        timers.enroll(now, ms, false, TimerEvent::ReturnMemory);
                    }
                }
                TimerEvent::UpstreamIdle { key } => {
                    let Resources {
                        upstreams, timers, ..
                    } = &mut self.resources;
                    upstreams.idle_expired(key, timers, now);
                }
                TimerEvent::Admin(_) => {} // handled above, unmeasured
            }
        }
    }
}

impl Worker {
    /// An event on an upstream connection (`--upstream`): the client
    /// connection it is lent to is driven; an idle one is checked (an
    /// upstream that closed it while pooled is dropped at once).
    fn on_upstream_event(&mut self, token: Token, readiness: Readiness, now: Micros) {
        let Some(key) = Upstreams::key_of(token) else {
            return;
        };
        match self.resources.upstreams.lent_to(key) {
            Some(client) => {
                self.with_conn(client as usize, now, |conn, ctx| {
                    conn.on_upstream_ready(readiness, ctx)
                });
            }
            None => {
                let Resources {
                    upstreams, timers, ..
                } = &mut self.resources;
                upstreams.idle_event(key, timers, now);
            }
        }
    }
}

impl Drop for Worker {
    /// However the loop ended, the admin view stops waiting for answers.
    fn drop(&mut self) {
        self.shared.mailbox.close();
    }
}

mod accept;
mod admin;
mod drain;
mod view;
