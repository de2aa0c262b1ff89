//! The admin event loop: a mio `Poll` of its own with the listener, the
//! clients (`Token` = slab key), a waker the workers use to hand back
//! snapshots, and an alarm for its own timer lists (the same
//! [`TimerLists`] and timerfd the workers use). What each request is
//! answered is the `service`'s; this loop only carries it: the clients'
//! reads, writes, timeouts and linger, and which of them wait on a round
//! or watch the stream.
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

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use super::AdminTimer;
use super::client::{Client, Received, State};
use super::http::{self, Request, Route};
use super::rounds::Finished;
use super::service::{Answer, Service, Wanted};
use crate::clock::LoopClock;
use crate::http::Status;
use crate::readiness::{interrupted, would_block};
use crate::shared::Remote;
use crate::timers::{Micros, TimerLists};

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

/// The admin listener's loop and everything it owns.
pub struct AdminLoop {
    poll: Poll,
    listener: TcpListener,
    clients: Slab<Client>,
    timers: TimerLists<AdminTimer>,
    clock: LoopClock,
    /// What is answered: routes, rounds, ticks.
    service: Service,
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
            service: Service::new(remote, waker),
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
                    let finished = self.service.round_timed_out(&mut self.timers, now);
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
        match self.service.answer(request, &mut self.timers, now) {
            Answer::Now(response) => self.respond(key, response, now),
            Answer::AfterRound {
                round,
                route,
                head_only,
            } => {
                self.clear_timer(key);
                if let Some(client) = self.clients.get_mut(key) {
                    client.state = State::Waiting {
                        round,
                        route,
                        head_only,
                    };
                }
            }
            Answer::Stream {
                opening,
                interval_ms,
                round,
            } => {
                self.clear_timer(key);
                let Some(client) = self.clients.get_mut(key) else {
                    return self.service.unsubscribe(interval_ms, &mut self.timers);
                };
                client.queue(opening.into());
                let _ =
                    socket2::SockRef::from(&client.stream).set_send_buffer_size(VIEWER_SEND_BUFFER);
                client.state = State::Streaming {
                    interval_ms,
                    wants: Some(round),
                };
            }
        }
    }

    /// Queues a whole response; the client closes once it is sent.
    fn respond(&mut self, key: usize, response: Vec<u8>, now: Micros) {
        let Some(client) = self.clients.get_mut(key) else {
            return;
        };
        client.queue(response.into());
        client.state = State::Writing;
        self.set_timer(key, STALL_TIMEOUT_MS, now);
    }

    /// Viewers on `interval_ms` are due a snapshot: they share the round
    /// in flight, or start one.
    fn tick(&mut self, interval_ms: u64, now: Micros) {
        let Some(round) = self.service.tick(interval_ms, &mut self.timers, now) else {
            return;
        };
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
        while let Some(finished) = self.service.collect(&mut self.timers, now) {
            self.deliver(finished, now);
        }
    }

    /// A round has ended: answer everyone who waited for it. What they
    /// want is rendered once, and every viewer queues the same frame.
    fn deliver(&mut self, finished: Finished, now: Micros) {
        let id = finished.id;
        let waiting_for = |client: &Client| match client.state {
            State::Waiting { round, route, .. } => (round <= id).then_some(route),
            _ => None,
        };
        let streaming = |client: &Client| matches!(client.state, State::Streaming { wants: Some(round), .. } if round <= id);
        let mut wanted = Wanted::default();
        let mut keys = Vec::new();
        for (key, client) in self.clients.iter() {
            match waiting_for(client) {
                Some(Route::Metrics) => wanted.metrics = true,
                Some(Route::Peers) => wanted.peers = true,
                Some(_) => wanted.view = true,
                None if streaming(client) => wanted.view = true,
                None => continue,
            }
            keys.push(key);
        }
        let delivery = self.service.deliver(finished, wanted);
        for key in keys {
            let Some(client) = self.clients.get_mut(key) else {
                continue;
            };
            match client.state {
                State::Waiting {
                    route, head_only, ..
                } => self.respond(key, delivery.reply(route, head_only), now),
                State::Streaming { interval_ms, .. } => {
                    if let Some(frame) = &delivery.frame {
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
            self.service.unsubscribe(interval_ms, &mut self.timers);
        }
    }
}
