//! The admin event loop: a mio `Poll` of its own with the listener, the
//! clients (`Token` = slab key), a waker the workers use to hand back
//! snapshots, and an alarm for its own timer lists (the same
//! [`TimerLists`] and timerfd the workers use).
//!
//! A turn: fire due timers (client deadlines and stalls, the snapshot
//! round's timeout, dashboard ticks); arm the alarm at the earliest expiry
//! or disarm it; poll; read the clock, once; handle events with that
//! reading. With no client and no viewer there is no timer, so the loop
//! sleeps until someone connects, and the workers are never asked.
//!
//! Each client holds at most one timer: a deadline for its request head,
//! a stall timer while output waits (refreshed by every write that moves
//! bytes), or a short linger after its response. Timers are enrolled with
//! the reading taken just after the poll, so they may start a few µs
//! early; that is nothing against timeouts of seconds.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use super::client::{Client, Received, State};
use super::http::{self, Reply, Request, Route};
use super::rounds::{Finished, Rounds};
use super::view::{View, peers_report};
use super::{AdminTimer, metrics, page};
use crate::clock::LoopClock;
use crate::http::Status;
use crate::readiness::{interrupted, would_block};
use crate::shared::Remote;
use crate::timers::{Micros, TimerId, TimerLists};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
const ALARM: Token = Token(usize::MAX - 3);
/// Readiness events handled per turn of the admin loop.
const EVENTS_CAPACITY: usize = 256;

/// Admin connections served at once; more are closed on accept.
const MAX_CLIENTS: usize = 1024;
/// A client must send its whole request head within this.
const REQUEST_TIMEOUT_MS: u64 = 10_000;
/// A client whose output has not moved for this long is dropped.
const STALL_TIMEOUT_MS: u64 = 10_000;
/// After a response, how long to drain the client's input before closing
/// (so the close sends FIN, not RST, and the client reads the response).
const LINGER_MS: u64 = 1_000;
/// Snapshots a viewer may have queued, unsent, before it is dropped.
const MAX_QUEUED_FRAMES: usize = 4;
/// The kernel's send buffer for a viewer: what it may hold beyond the
/// queue (small, so a viewer that stops reading is found out in seconds).
const VIEWER_SEND_BUFFER: usize = 32 * 1024;

const CSP: &str = "Content-Security-Policy: default-src 'self'\r\n";

/// Viewers on one push interval and their shared tick.
struct Tick {
    viewers: usize,
    timer: TimerId,
}

/// The admin listener's loop and everything it owns.
pub struct AdminLoop {
    poll: Poll,
    listener: TcpListener,
    clients: Slab<Client>,
    timers: TimerLists<AdminTimer>,
    clock: LoopClock,
    remote: Remote,
    rounds: Rounds,
    /// Push interval (ms) -> its viewers' tick.
    ticks: BTreeMap<u64, Tick>,
}

impl AdminLoop {
    pub fn bind(addr: SocketAddr, remote: Remote) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let clock = LoopClock::new()?;
        clock.register(poll.registry(), ALARM)?;
        Ok(AdminLoop {
            poll,
            listener,
            clients: Slab::new(),
            timers: TimerLists::new(),
            clock,
            remote,
            rounds: Rounds::new(waker),
            ticks: BTreeMap::new(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process exits.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        let mut now = self.clock.now();
        loop {
            self.fire_due_timers(now);
            self.clock.arm(self.timers.next_expiry())?;
            match self.poll.poll(&mut events, None) {
                Ok(()) => {}
                Err(e) if interrupted(&e) => continue,
                Err(e) => return Err(e),
            }
            now = self.clock.now();
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(now),
                    WAKER => self.collect_rounds(now),
                    ALARM => {} // the next turn fires what is due
                    Token(key) => self.on_client_event(key, now),
                }
            }
        }
    }

    fn fire_due_timers(&mut self, now: Micros) {
        while let Some(due) = self.timers.expire(now) {
            match due.payload {
                AdminTimer::Client(key) => {
                    if let Some(client) = self.clients.get_mut(key) {
                        client.timer = None;
                        tracing::debug!(key, state = ?client.state, "admin client timed out");
                    }
                    self.close(key);
                }
                AdminTimer::Round => {
                    let finished = self.rounds.time_out(&self.remote, &mut self.timers, now);
                    if let Some(finished) = finished {
                        self.deliver(finished, now);
                    }
                }
                AdminTimer::Tick(interval_ms) => self.tick(interval_ms, now),
            }
        }
    }

    fn accept(&mut self, now: Micros) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if would_block(&e) => return,
                Err(e) if interrupted(&e) => continue,
                Err(e) => {
                    // Out of descriptors, most likely: the backlog waits
                    // for the next connection's event.
                    tracing::warn!(error = %e, "admin accept failed");
                    return;
                }
            };
            if self.clients.len() >= MAX_CLIENTS {
                tracing::debug!("admin listener full; closing a new connection");
                continue; // dropping it closes it
            }
            let entry = self.clients.vacant_entry();
            let key = entry.key();
            let registered = self.poll.registry().register(
                &mut stream,
                Token(key),
                Interest::READABLE | Interest::WRITABLE,
            );
            if let Err(e) = registered {
                tracing::warn!(error = %e, "could not register an admin connection");
                continue;
            }
            let mut client = Client::new(stream);
            client.timer =
                Some(
                    self.timers
                        .enroll(now, REQUEST_TIMEOUT_MS, false, AdminTimer::Client(key)),
                );
            entry.insert(client);
        }
    }

    fn on_client_event(&mut self, key: usize, now: Micros) {
        let Some(client) = self.clients.get_mut(key) else {
            return; // closed earlier this turn
        };
        let received = match client.receive() {
            Ok(received) => received,
            Err(_) => return self.close(key),
        };
        if received == Received::Eof {
            client.eof = true;
        }
        match (client.state, received) {
            (State::Reading, Received::TooMuch) => {
                let refused = Request::Refused(Status::RequestHeaderFieldsTooLarge);
                self.dispatch(key, refused, now);
            }
            (State::Reading, _) => match http::parse(&mut client.input) {
                Request::Partial if client.eof => return self.close(key),
                Request::Partial => {}
                request => self.dispatch(key, request, now),
            },
            (_, Received::TooMuch) => return self.close(key),
            (State::Lingering | State::Streaming { .. }, Received::Eof) => {
                return self.close(key);
            }
            _ => {}
        }
        self.flush(key, now);
    }

    /// Answers a complete request, or starts waiting for what it needs.
    fn dispatch(&mut self, key: usize, request: Request, now: Micros) {
        let (route, head_only) = match request {
            Request::Partial => return,
            Request::MethodNotAllowed => {
                let reply = Reply::error(Status::MethodNotAllowed, b"GET or HEAD only\n");
                return self.respond(key, reply.with_extra("Allow: GET, HEAD\r\n"), false, now);
            }
            Request::Refused(status) => {
                let reply = Reply::error(status, status.reason_line());
                return self.respond(key, reply, false, now);
            }
            Request::Get { route, head_only } => (route, head_only),
        };
        let (content_type, body): (&str, &[u8]) = match route {
            Route::Page => ("text/html; charset=utf-8", page::INDEX_HTML.as_bytes()),
            Route::Script => (
                "text/javascript; charset=utf-8",
                page::DASHBOARD_JS.as_bytes(),
            ),
            Route::Style => ("text/css; charset=utf-8", page::DASHBOARD_CSS.as_bytes()),
            Route::Icon => ("image/svg+xml", page::FAVICON_SVG.as_bytes()),
            Route::Healthz if self.remote.is_stopping() => {
                let reply = Reply::error(Status::ServiceUnavailable, b"stopping\n");
                return self.respond(key, reply, head_only, now);
            }
            Route::Healthz => ("text/plain", b"ok\n"),
            Route::NotFound => {
                let reply = Reply::error(
                    Status::NotFound,
                    b"try / (the dashboard), /events, /metrics, /timers, /peers or /healthz\n",
                );
                return self.respond(key, reply, head_only, now);
            }
            Route::Metrics | Route::Timers | Route::Peers => {
                let round = self.rounds.fresh(&self.remote, &mut self.timers, now);
                self.clear_timer(key);
                if let Some(client) = self.clients.get_mut(key) {
                    client.state = State::Waiting {
                        round,
                        route,
                        head_only,
                    };
                }
                return;
            }
            Route::Events { interval_ms } => {
                return self.subscribe(key, interval_ms, head_only, now);
            }
            Route::BadInterval => {
                let reply = Reply::error(Status::BadRequest, http::BAD_INTERVAL.as_bytes());
                return self.respond(key, reply, head_only, now);
            }
        };
        let reply = Reply::ok(content_type, body).with_extra(CSP);
        self.respond(key, reply, head_only, now);
    }

    /// Queues a whole response (its head only, for HEAD); the client
    /// closes once it is sent.
    fn respond(&mut self, key: usize, reply: Reply<'_>, head_only: bool, now: Micros) {
        let bytes = http::response(reply, head_only);
        let Some(client) = self.clients.get_mut(key) else {
            return;
        };
        client.queue(bytes.into());
        client.state = State::Writing;
        self.set_timer(key, STALL_TIMEOUT_MS, now);
    }

    /// `/events`: the stream's head now, then a snapshot per tick.
    fn subscribe(&mut self, key: usize, interval_ms: u64, head_only: bool, now: Micros) {
        let head = http::head(Status::Ok, "text/event-stream", None, "");
        if head_only {
            let Some(client) = self.clients.get_mut(key) else {
                return;
            };
            client.queue(head.into());
            client.state = State::Writing;
            return self.set_timer(key, STALL_TIMEOUT_MS, now);
        }
        let round = self.rounds.any(&self.remote, &mut self.timers, now);
        self.clear_timer(key);
        let Some(client) = self.clients.get_mut(key) else {
            return;
        };
        let mut opening = head;
        opening.extend_from_slice(b"retry: 2000\n\n");
        client.queue(opening.into());
        let _ = socket2::SockRef::from(&client.stream).set_send_buffer_size(VIEWER_SEND_BUFFER);
        client.state = State::Streaming {
            interval_ms,
            wants: Some(round),
        };
        match self.ticks.get_mut(&interval_ms) {
            Some(tick) => tick.viewers += 1,
            None => {
                let timer =
                    self.timers
                        .enroll(now, interval_ms, false, AdminTimer::Tick(interval_ms));
                self.ticks.insert(interval_ms, Tick { viewers: 1, timer });
            }
        }
        tracing::debug!(
            key,
            interval_ms,
            viewers = self.viewers(),
            "dashboard viewer subscribed"
        );
    }

    /// Viewers on `interval_ms` are due a snapshot: they share the round
    /// in flight, or start one.
    fn tick(&mut self, interval_ms: u64, now: Micros) {
        if !self.ticks.contains_key(&interval_ms) {
            return;
        }
        let timer = self
            .timers
            .enroll(now, interval_ms, false, AdminTimer::Tick(interval_ms));
        if let Some(tick) = self.ticks.get_mut(&interval_ms) {
            tick.timer = timer;
        }
        let round = self.rounds.any(&self.remote, &mut self.timers, now);
        for (_, client) in self.clients.iter_mut() {
            match &mut client.state {
                State::Streaming {
                    interval_ms: interval,
                    wants,
                } if *interval == interval_ms && wants.is_none() => *wants = Some(round),
                _ => {}
            }
        }
    }

    fn collect_rounds(&mut self, now: Micros) {
        while let Some(finished) = self.rounds.collect(&self.remote, &mut self.timers, now) {
            self.deliver(finished, now);
        }
    }

    /// A round has ended: answer everyone who waited for it. The view and
    /// the metrics text are built once, only if someone wants them, and
    /// every viewer queues the same frame.
    fn deliver(&mut self, finished: Finished, now: Micros) {
        let id = finished.id;
        let waiting_for = |client: &Client, wanted: Option<Route>| match client.state {
            State::Waiting { round, route, .. } => round <= id && wanted.is_none_or(|w| w == route),
            _ => false,
        };
        let streaming = |client: &Client| matches!(client.state, State::Streaming { wants: Some(round), .. } if round <= id);
        let needs_view = self
            .clients
            .iter()
            .any(|(_, c)| waiting_for(c, Some(Route::Timers)) || streaming(c));
        let needs_metrics = self
            .clients
            .iter()
            .any(|(_, c)| waiting_for(c, Some(Route::Metrics)));
        let needs_peers = self
            .clients
            .iter()
            .any(|(_, c)| waiting_for(c, Some(Route::Peers)));
        let peers_json = needs_peers
            .then(|| serde_json::to_vec(&peers_report(&finished.snapshots)).unwrap_or_default());
        let metrics_text = needs_metrics
            .then(|| metrics::render(&self.remote, &finished.snapshots, self.viewers()));
        let json = needs_view.then(|| View::new(&self.remote, finished.snapshots).to_json());
        let frame: Option<Arc<[u8]>> = json.as_ref().map(|json| {
            let mut frame = Vec::with_capacity(json.len() + 8);
            frame.extend_from_slice(b"data: ");
            frame.extend_from_slice(json);
            frame.extend_from_slice(b"\n\n");
            frame.into()
        });

        let keys: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| waiting_for(c, None) || streaming(c))
            .map(|(key, _)| key)
            .collect();
        for key in keys {
            let Some(client) = self.clients.get_mut(key) else {
                continue;
            };
            match client.state {
                State::Waiting {
                    route: Route::Metrics,
                    head_only,
                    ..
                } => {
                    let body = metrics_text.as_deref().unwrap_or_default().as_bytes();
                    let reply = Reply::ok("text/plain; version=0.0.4; charset=utf-8", body);
                    self.respond(key, reply, head_only, now);
                }
                State::Waiting {
                    route: Route::Peers,
                    head_only,
                    ..
                } => {
                    let body = peers_json.as_deref().unwrap_or(b"{}");
                    self.respond(key, Reply::ok("application/json", body), head_only, now);
                }
                State::Waiting { head_only, .. } => {
                    let body = json.as_deref().unwrap_or(b"{}");
                    self.respond(key, Reply::ok("application/json", body), head_only, now);
                }
                State::Streaming { interval_ms, .. } => {
                    if let Some(frame) = &frame {
                        client.queue(Arc::clone(frame));
                    }
                    client.state = State::Streaming {
                        interval_ms,
                        wants: None,
                    };
                    if client.queued() > MAX_QUEUED_FRAMES {
                        tracing::info!(key, "dropping a dashboard viewer that stopped reading");
                        self.close(key);
                        continue;
                    }
                }
                _ => continue,
            }
            self.flush(key, now);
        }
    }

    /// Sends what the client has queued; a finished response shuts the
    /// write side and lingers, a stalled one keeps its stall timer.
    fn flush(&mut self, key: usize, now: Micros) {
        let Some(client) = self.clients.get_mut(key) else {
            return;
        };
        let mut moved = false;
        match client.flush(&mut moved) {
            Err(_) => self.close(key),
            Ok(true) => match client.state {
                State::Writing => {
                    client.finish();
                    if client.eof {
                        return self.close(key);
                    }
                    client.state = State::Lingering;
                    self.set_timer(key, LINGER_MS, now);
                }
                State::Streaming { .. } => self.clear_timer(key),
                _ => {}
            },
            Ok(false) => {
                if moved || client.timer.is_none() {
                    self.set_timer(key, STALL_TIMEOUT_MS, now);
                }
            }
        }
    }

    /// Starts (or restarts) the client's one timer.
    fn set_timer(&mut self, key: usize, ms: u64, now: Micros) {
        let Some(client) = self.clients.get_mut(key) else {
            return;
        };
        match client.timer {
            Some(id) => self.timers.rearm(id, ms, now),
            None => {
                client.timer = Some(self.timers.enroll(now, ms, false, AdminTimer::Client(key)));
            }
        }
    }

    fn clear_timer(&mut self, key: usize) {
        if let Some(id) = self.clients.get_mut(key).and_then(|c| c.timer.take()) {
            self.timers.unenroll(id);
        }
    }

    fn close(&mut self, key: usize) {
        self.clear_timer(key);
        let Some(mut client) = self.clients.try_remove(key) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut client.stream);
        if let State::Streaming { interval_ms, .. } = client.state {
            self.unsubscribe(interval_ms);
        }
    }

    /// A viewer left; the last one on an interval stops its tick.
    fn unsubscribe(&mut self, interval_ms: u64) {
        let Some(tick) = self.ticks.get_mut(&interval_ms) else {
            return;
        };
        tick.viewers -= 1;
        if tick.viewers == 0 {
            let timer = tick.timer;
            self.ticks.remove(&interval_ms);
            self.timers.unenroll(timer);
        }
        tracing::debug!(viewers = self.viewers(), "dashboard viewer left");
    }

    /// Event streams open.
    fn viewers(&self) -> usize {
        self.ticks.values().map(|tick| tick.viewers).sum()
    }
}
