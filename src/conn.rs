//! One client connection: its socket, its buffers while it has work, its
//! HTTP [`Session`], and its two timer slots.
//!
//! The readiness contract (mio, edge-triggered): on every event the
//! connection reads until `WouldBlock`, unless it stops on purpose: read
//! budget spent (the worker puts it on its ready list), output backed up (a
//! writable edge will come), or input full behind a delayed or backed-up
//! response (finishing that response drives it again).
//!
//! Timers are not touched while bytes move. A connection only records that
//! something happened; once per loop turn the worker calls
//! [`Conn::sync_timers`] with a clock reading taken after that activity, and
//! the connection decides in one place ([`Conn::wanted_activity`],
//! [`Conn::wanted_deadline`]) what its two slots hold. Stamping with a
//! reading taken *after* the activity is what makes "never fire early" hold,
//! and a request that arrives and is answered within one turn costs one
//! timer refresh and nothing else.

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;

use crate::config::Settings;
use crate::ctx::{Ctx, Slot, TimerEvent};
use crate::pool::Buffers;
use crate::session::{Phase, Session};
use crate::stats::CloseCause;
use crate::timers::{Micros, TimerId, TimerLists};

/// Reads per readiness event before yielding to other connections.
const READ_BUDGET: u32 = 16;
/// How long a closing connection drains input so the client reads the
/// response instead of a reset, and how much it drains at most.
const LINGER_MS: u64 = 1000;
const LINGER_MAX_BYTES: u32 = 1 << 20;

/// What the activity timer is measuring. Tags carry the request number
/// where a new request must start a new timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    KeepAlive,
    Headers { request: u32 },
    Inactivity,
    Delay { request: u32 },
    Linger,
}

impl Watch {
    /// Whether activity restarts it.
    fn refreshes(self) -> bool {
        matches!(self, Watch::KeepAlive | Watch::Inactivity)
    }
}

/// What the activity slot should hold.
struct WantedTimer {
    watch: Watch,
    ms: u64,
    refed: bool,
}

/// Whether the connection lives on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Open,
    Close(CloseCause),
}

/// Outcome of one read.
enum ReadOutcome {
    /// Bytes arrived; `short`: fewer than there was room for.
    Got {
        short: bool,
    },
    Eof,
    /// No room: the input waits on a response.
    Full,
}

/// One client connection.
pub struct Conn {
    stream: TcpStream,
    /// Present while the connection has work; back in the pool when idle.
    buffers: Option<Box<Buffers>>,
    session: Session,
    activity: Option<TimerId>,
    /// What `activity` measures; meaningful only while it is `Some`.
    watch: Watch,
    deadline: Option<TimerId>,
    /// The request `deadline` was armed for.
    deadline_for: u32,
    /// Bytes drained while closing.
    lingered: u32,
    /// Bytes moved since the last timer sync.
    moved: bool,
    /// On the worker's list of connections to sync this turn.
    pub touched: bool,
    /// Stopped reading with input maybe waiting: drive again next turn.
    pub wants_more: bool,
    /// The client shut its write side (read returned 0).
    peer_closed: bool,
    write_shut: bool,
    /// TCP_NODELAY is on (set lazily, see [`Conn::disable_nagle`]).
    nodelay: bool,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buffers: None,
            session: Session::new(),
            activity: None,
            watch: Watch::KeepAlive,
            deadline: None,
            deadline_for: 0,
            lingered: 0,
            moved: false,
            touched: false,
            wants_more: false,
            peer_closed: false,
            write_shut: false,
            nodelay: false,
        }
    }

    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer_addr().ok()
    }

    pub fn phase(&self) -> Phase {
        self.session.phase(self.buffers.as_deref())
    }

    /// A readiness event, or a turn on the ready list. `hangup`: the event
    /// says the peer closed, so read on to the end even after a short read.
    pub fn on_ready(&mut self, hangup: bool, ctx: &mut Ctx<'_>) -> Flow {
        self.drive(hangup, ctx)
    }

    /// One of this connection's timers fired (and is gone from the lists).
    pub fn on_timer(&mut self, slot: Slot, ctx: &mut Ctx<'_>) -> Flow {
        tracing::debug!(?slot, watch = ?self.watch, phase = ?self.phase(), "timer expired");
        let cause = match slot {
            Slot::Deadline => {
                self.deadline = None;
                CloseCause::RequestTimeout
            }
            Slot::Activity => {
                self.activity = None;
                match self.watch {
                    Watch::KeepAlive => return self.expire_idle(ctx),
                    Watch::Linger => {
                        return Flow::Close(self.session.closing().unwrap_or(CloseCause::Error));
                    }
                    Watch::Delay { .. } => {
                        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
                        self.session.delay_elapsed(buffers, ctx);
                        return self.drive(true, ctx);
                    }
                    Watch::Headers { .. } => CloseCause::HeadersTimeout,
                    Watch::Inactivity => CloseCause::Inactivity,
                }
            }
        };
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        if self.session.time_out(cause, buffers, ctx) {
            self.drive(true, ctx)
        } else {
            Flow::Close(cause)
        }
    }

    /// The keep-alive timer ran out. A request may have arrived in the same
    /// instant and not been read yet (its event is still in the poll queue):
    /// closing now would reset it, the close-versus-new-request race. So read
    /// first: a request that made it is served (and the timer re-armed);
    /// only a connection with nothing to read is closed.
    fn expire_idle(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        match self.drive(true, ctx) {
            Flow::Open if !self.moved => Flow::Close(CloseCause::KeepAliveTimeout),
            flow => flow,
        }
    }

    /// Gives back the connection's timers and buffers before it is dropped.
    pub fn release(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(id) = self.activity.take() {
            ctx.timers.unenroll(id);
        }
        if let Some(id) = self.deadline.take() {
            ctx.timers.unenroll(id);
        }
        if let Some(buffers) = self.buffers.take() {
            ctx.pool.give(buffers);
        }
    }

    /// Brings both timer slots in line with the connection's state,
    /// stamping with `now`, a clock reading taken after all recent activity.
    pub fn sync_timers(
        &mut self,
        key: u32,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
        settings: &Settings,
    ) {
        let moved = std::mem::take(&mut self.moved);
        let activity_event = TimerEvent::Conn {
            key,
            slot: Slot::Activity,
        };
        match (self.wanted_activity(settings), self.activity) {
            (None, None) => {}
            (None, Some(id)) => {
                timers.unenroll(id);
                self.activity = None;
            }
            (Some(want), None) => {
                self.activity = Some(timers.enroll(now, want.ms, want.refed, activity_event));
                self.watch = want.watch;
            }
            (Some(want), Some(id)) => {
                if want.watch != self.watch {
                    timers.rearm(id, want.ms, now);
                    self.watch = want.watch;
                } else if moved && want.watch.refreshes() {
                    timers.refresh(id, now);
                }
                if timers.is_refed(id) != want.refed {
                    timers.set_ref(id, want.refed);
                }
            }
        }
        let request = self.session.received();
        let deadline_event = TimerEvent::Conn {
            key,
            slot: Slot::Deadline,
        };
        match (self.wanted_deadline(settings), self.deadline) {
            (None, None) => {}
            (None, Some(id)) => {
                timers.unenroll(id);
                self.deadline = None;
            }
            (Some(ms), None) => {
                self.deadline = Some(timers.enroll(now, ms, true, deadline_event));
                self.deadline_for = request;
            }
            (Some(ms), Some(id)) if self.deadline_for != request => {
                timers.rearm(id, ms, now);
                self.deadline_for = request;
            }
            (Some(_), Some(_)) => {}
        }
    }

    /// The activity slot's policy, in one place (DESIGN.md's timer table).
    /// Ref'd exactly while a request is in flight, so a draining server
    /// waits for those and no others.
    fn wanted_activity(&self, settings: &Settings) -> Option<WantedTimer> {
        let want = |watch, ms, refed| Some(WantedTimer { watch, ms, refed });
        let request = self.session.received();
        match self.phase() {
            Phase::Fresh => settings
                .headers_ms
                .and_then(|ms| want(Watch::Headers { request }, ms, false)),
            Phase::Idle => want(Watch::KeepAlive, settings.keep_alive_ms, false),
            Phase::Head => settings
                .headers_ms
                .and_then(|ms| want(Watch::Headers { request }, ms, true)),
            Phase::Body | Phase::Writing => settings
                .inactivity_ms
                .and_then(|ms| want(Watch::Inactivity, ms, true)),
            Phase::Delayed { ms } => want(Watch::Delay { request }, ms, true),
            Phase::Closing => want(Watch::Linger, LINGER_MS, false),
        }
    }

    /// The deadline slot's policy: from a request's first byte until it has
    /// been received.
    fn wanted_deadline(&self, settings: &Settings) -> Option<u64> {
        settings
            .request_ms
            .filter(|_| self.session.is_receiving(self.buffers.as_deref()))
    }

    /// Reads, answers and writes until the socket would block or the
    /// connection must wait for something else.
    ///
    /// A read that returns less than it asked for has emptied the socket;
    /// under edge triggering new data brings a new event, so the loop stops
    /// there instead of spending a syscall on the `WouldBlock` (as nginx
    /// does), unless the peer hung up and its EOF is still to be read.
    fn drive(&mut self, hangup: bool, ctx: &mut Ctx<'_>) -> Flow {
        self.wants_more = false;
        let mut reads = 0;
        let mut drained = false;
        loop {
            if let Some(buffers) = self.buffers.as_deref_mut() {
                self.session.process(buffers, ctx);
            }
            match self.flush() {
                Ok(true) => {}
                Ok(false) => return Flow::Open,
                Err(_) => return Flow::Close(CloseCause::Reset),
            }
            if let Some(cause) = self.session.closing() {
                if self.peer_closed || self.lingered > LINGER_MAX_BYTES {
                    return Flow::Close(cause);
                }
                // An error response may interrupt a body still arriving:
                // send FIN now and drain, so the client reads the response
                // rather than a reset.
                if cause != CloseCause::Done && !self.shut_write() {
                    return Flow::Close(cause);
                }
            } else if self.peer_closed && !self.session.is_delayed() {
                return Flow::Close(CloseCause::Client);
            }
            if self.peer_closed {
                return Flow::Open; // a delayed answer is still owed
            }
            if drained {
                return self.settle(ctx);
            }
            if reads == READ_BUDGET {
                self.wants_more = true;
                return Flow::Open;
            }
            reads += 1;
            match self.read(ctx) {
                Ok(ReadOutcome::Got { short }) => drained = short && !hangup,
                Ok(ReadOutcome::Eof) => self.peer_closed = true,
                Ok(ReadOutcome::Full) => return Flow::Open,
                Err(e) if would_block(&e) => return self.settle(ctx),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Flow::Close(CloseCause::Reset),
            }
        }
    }

    /// After the socket is drained: an idle connection gives its buffers
    /// back, and closes if the server is draining. A connection answered
    /// with `Connection: close` closes now if the client sent nothing more
    /// (no unread data, so the close sends FIN, not RST); otherwise it
    /// lingers, draining, until the client closes or the linger timer fires.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> Flow {
        match self.session.closing() {
            Some(CloseCause::Done) if self.lingered == 0 => return Flow::Close(CloseCause::Done),
            Some(cause) if !self.shut_write() => return Flow::Close(cause),
            Some(_) | None => {}
        }
        if self.session.is_idle(self.buffers.as_deref()) {
            if let Some(buffers) = self.buffers.take() {
                ctx.pool.give(buffers);
            }
            self.disable_nagle();
            if ctx.draining {
                return Flow::Close(CloseCause::Shutdown);
            }
        }
        Flow::Open
    }

    /// Turns Nagle's algorithm off, once, when it could first matter: as the
    /// connection goes idle between requests (the next response may follow
    /// a segment still unacknowledged) or when a write backs up. A response
    /// on a fresh connection has nothing in flight for Nagle to wait on, so
    /// one-request connections never pay the syscall (nginx does the same).
    fn disable_nagle(&mut self) {
        if !self.nodelay {
            self.nodelay = true;
            let _ = self.stream.set_nodelay(true);
        }
    }

    /// Shuts the write side once; false if the socket is already gone.
    fn shut_write(&mut self) -> bool {
        if !self.write_shut {
            self.write_shut = true;
            return self.stream.shutdown(Shutdown::Write).is_ok();
        }
        true
    }

    fn read(&mut self, ctx: &mut Ctx<'_>) -> io::Result<ReadOutcome> {
        let limit = Session::input_limit(ctx.settings);
        let buffers = self.buffers.get_or_insert_with(|| ctx.pool.take());
        let spare = buffers.input.spare(limit);
        if spare.is_empty() {
            return Ok(ReadOutcome::Full);
        }
        let asked = spare.len();
        let n = self.stream.read(spare)?;
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        self.moved = true;
        if self.session.closing().is_some() {
            self.lingered = self.lingered.saturating_add(n as u32);
        } else {
            buffers.input.filled(n);
        }
        Ok(ReadOutcome::Got { short: n < asked })
    }

    /// Writes queued output; `Ok(true)` once all of it is sent.
    fn flush(&mut self) -> io::Result<bool> {
        let Some(buffers) = self.buffers.as_deref_mut() else {
            return Ok(true);
        };
        while buffers.output.pending() > 0 {
            match self.stream.write(buffers.output.unsent()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buffers.output.advance(n);
                    self.moved = true;
                }
                Err(e) if would_block(&e) => {
                    self.disable_nagle();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

pub fn would_block(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;
    use crate::config::Config;
    use crate::ctx::Resources;
    use crate::stats::Stats;

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

    /// What a worker would lend the connection.
    struct Worker {
        resources: Resources,
        settings: Settings,
        stats: Stats,
    }

    impl Worker {
        fn new() -> Self {
            Worker {
                resources: Resources::default(),
                settings: Config::with_listen("127.0.0.1:0".parse().unwrap()).settings(),
                stats: Stats::default(),
            }
        }

        fn ctx(&mut self) -> Ctx<'_> {
            self.resources.lend(0, &self.settings, &self.stats)
        }

        /// Fires the connection's activity timer the way the loop does:
        /// sync it, pop due timers (the Date tick among them), hand it over.
        fn fire_activity(&mut self, conn: &mut Conn) -> Flow {
            conn.sync_timers(0, &mut self.resources.timers, 0, &self.settings);
            loop {
                match self
                    .resources
                    .timers
                    .expire(Micros::MAX)
                    .expect("a timer is due")
                {
                    (_, TimerEvent::DateExpired) => self.resources.date.invalidate(),
                    (_, event) => {
                        let activity = TimerEvent::Conn {
                            key: 0,
                            slot: Slot::Activity,
                        };
                        assert_eq!(event, activity);
                        return conn.on_timer(Slot::Activity, &mut self.ctx());
                    }
                }
            }
        }
    }

    /// A connected client and the server side of it, non-blocking.
    fn pair() -> (std::net::TcpStream, Conn) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (client, Conn::new(TcpStream::from_std(server)))
    }

    /// Sends a request and lets it land in the server's socket.
    fn send(client: &mut std::net::TcpStream, bytes: &[u8]) {
        client.write_all(bytes).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }

    fn read_response(client: &mut std::net::TcpStream) -> String {
        let mut buffer = [0u8; 1024];
        let n = client.read(&mut buffer).unwrap();
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    }

    #[test]
    fn a_request_racing_the_keep_alive_timer_is_served_not_reset() {
        let mut worker = Worker::new();
        let (mut client, mut conn) = pair();
        send(&mut client, GET);
        assert_eq!(conn.on_ready(false, &mut worker.ctx()), Flow::Open);
        assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));
        assert_eq!(conn.phase(), Phase::Idle);

        // The next request is in the socket, unread, when the timer runs out.
        send(&mut client, GET);
        assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
        assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));

        // With nothing to read, the expiry closes the connection.
        assert_eq!(
            worker.fire_activity(&mut conn),
            Flow::Close(CloseCause::KeepAliveTimeout)
        );
    }
}
