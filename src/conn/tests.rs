//! Connection-level tests over real sockets that look inside: timer
//! deadlines under a clock the test sets, the state a connection holds,
//! and what it tells the observer, driven the way the worker drives it.
//! They wait on the kernel (bytes or a FIN in the socket), never for a
//! fixed time. What a client alone can see is tested in tests/ (hangups,
//! pipelining, the watch after an idle FIN).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::*;
use crate::config::{Config, Settings};
use crate::ctx::{Lending, Resources};
use crate::observe::{Event, Observer};
use crate::rx_stamps;
use crate::stats::Stats;
use crate::timer_event::TimerEvent;
use crate::timers::Micros;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/// What a worker would lend the connection.
struct Worker {
    resources: Resources,
    settings: Settings,
    stats: Stats,
    /// What the worker would say of descriptor pressure.
    watch_allowed: bool,
    /// Every event the connection reported.
    heard: Heard,
}

/// An observer that keeps what it hears.
#[derive(Default)]
struct Heard(Vec<String>);

impl Observer for Heard {
    fn observe(&mut self, _: std::net::IpAddr, _: Micros, event: Event<'_>) {
        self.0.push(format!("{event:?}"));
    }
}

impl Worker {
    fn new() -> Self {
        Worker {
            resources: Resources::default(),
            settings: Config::with_listen("127.0.0.1:0".parse().unwrap()).settings(),
            stats: Stats::default(),
            watch_allowed: true,
            heard: Heard::default(),
        }
    }

    fn ctx(&mut self) -> Ctx<'_> {
        self.ctx_at(0)
    }

    /// A context at loop time `now`.
    fn ctx_at(&mut self, now: Micros) -> Ctx<'_> {
        let lending = Lending {
            watch_allowed: self.watch_allowed,
            ..Lending::default()
        };
        let heard = &mut self.heard;
        let shared = (&self.settings, &self.stats);
        self.resources.lend_to(now, shared, heard, lending, None)
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
                .payload
            {
                TimerEvent::DateExpired => self.resources.date.invalidate(),
                event => {
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
    // Room for everything a test sends, so it can all be in the server's
    // socket (with the FIN behind it) before the connection reads.
    socket2::SockRef::from(&listener)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (server, peer) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (
        client,
        Conn::new(Transport::plain(TcpStream::from_std(server)), 1, peer, 0),
    )
}

/// Sends `bytes` and waits (no fixed sleep) until they are all in the
/// connection's socket, unread.
fn send(client: &mut std::net::TcpStream, conn: &Conn, bytes: &[u8]) {
    client.write_all(bytes).unwrap();
    landed(conn, |queued| queued >= bytes.len(), "the bytes sent");
}

/// Waits until the connection's socket holds what `arrived` accepts (the
/// count of unread bytes, 0 once only the EOF is left), for at most 5 s.
fn landed(conn: &Conn, arrived: impl Fn(usize) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut peeked = vec![0u8; 1 << 20];
    loop {
        if let Ok(queued) = conn.transport.peek(&mut peeked)
            && arrived(queued)
        {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never arrived");
        std::thread::yield_now();
    }
}

fn read_response(client: &mut std::net::TcpStream) -> String {
    let mut buffer = [0u8; 1024];
    let n = client.read(&mut buffer).unwrap();
    String::from_utf8_lossy(&buffer[..n]).into_owned()
}

/// A pair whose connection has answered one `GET /` and is idle.
fn answered_once(worker: &mut Worker) -> (std::net::TcpStream, Conn) {
    let (mut client, mut conn) = pair();
    send(&mut client, &conn, GET);
    {
        let mut ctx = worker.ctx();
        assert_eq!(conn.on_ready(Readiness::default(), &mut ctx), Flow::Open);
        conn.account(false, &mut ctx); // as the worker does after an event
    }
    assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));
    assert_eq!(conn.state(), State::Idle);
    assert_eq!(worker.heard.count("ResponsesDone(1)"), 1);
    (client, conn)
}

#[test]
fn a_request_begun_behind_another_in_one_read_gets_its_own_headers_timer() {
    let mut worker = Worker::new();
    let headers_us = worker.settings.headers_ms.expect("on by default") * 1000;
    let (mut client, mut conn) = pair();
    send(&mut client, &conn, b"GET / HTTP/1.1\r\nHo");
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Open
    );
    assert_eq!(conn.state(), State::ReadingHead);
    let timers = &mut worker.resources.timers;
    conn.sync_timers(0, timers, 0, &worker.settings);
    let first = conn.slots.activity().expect("the headers timer");
    assert_eq!(timers.deadline(first), headers_us);

    // The rest of request 1 and the start of request 2 arrive together:
    // the slot wants a headers timer before and after, but for another
    // request, so it starts afresh from this sync.
    send(&mut client, &conn, b"st: t\r\n\r\nGET / HTTP/1.1\r\n");
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Open
    );
    assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));
    assert_eq!(conn.state(), State::ReadingHead);
    let timers = &mut worker.resources.timers;
    conn.sync_timers(0, timers, 5_000_000, &worker.settings);
    let second = conn.slots.activity().expect("the headers timer");
    assert_eq!(timers.deadline(second), 5_000_000 + headers_us);

    // More of request 2 in a later turn: the same request, the same
    // deadline.
    send(&mut client, &conn, b"Host: t\r\n");
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Open
    );
    let timers = &mut worker.resources.timers;
    conn.sync_timers(0, timers, 9_000_000, &worker.settings);
    let third = conn.slots.activity().expect("the headers timer");
    assert_eq!(timers.deadline(third), 5_000_000 + headers_us);
}

#[test]
fn a_request_racing_the_keep_alive_timer_is_served_not_reset() {
    let mut worker = Worker::new();
    let (mut client, mut conn) = answered_once(&mut worker);

    // The next request is in the socket, unread, when the timer runs out.
    send(&mut client, &conn, GET);
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));

    // With nothing to read, the expiry sends FIN and watches the peer.
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert!(matches!(conn.state(), State::Watching(_)));
    assert_eq!(client.read(&mut [0u8; 64]).unwrap(), 0, "FIN");
}

impl Heard {
    /// How many events heard so far start with `prefix` (their Debug form).
    fn count(&self, prefix: &str) -> usize {
        self.0.iter().filter(|e| e.starts_with(prefix)).count()
    }
}

#[test]
fn the_watch_after_an_idle_fin_reports_a_late_request_then_the_peer_close() {
    let mut worker = Worker::new();
    let (mut client, mut conn) = answered_once(&mut worker);
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert!(matches!(conn.state(), State::Watching(_)));
    assert_eq!(worker.heard.count("IdleEnded(IdleEnd { closer: Server"), 1);

    // The client's pool sends on the connection the server gave up.
    send(&mut client, &conn, &[GET, GET].concat());
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Open
    );
    let late = "AfterFin(Request";
    assert_eq!(worker.heard.count(late), 1, "one per connection");
    assert_eq!(client.read(&mut [0u8; 64]).unwrap(), 0, "nothing answered");

    drop(client);
    landed(&conn, |queued| queued == 0, "the peer's FIN");
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Close(CloseCause::KeepAliveTimeout)
    );
    assert_eq!(worker.heard.count("AfterFin(Closed"), 1);
}

#[test]
fn an_idle_close_without_room_for_the_watch_is_at_once() {
    let mut worker = Worker::new();
    let (_client, mut conn) = answered_once(&mut worker);
    worker.watch_allowed = false;
    assert_eq!(
        worker.fire_activity(&mut conn),
        Flow::Close(CloseCause::KeepAliveTimeout)
    );
    conn.release(CloseCause::KeepAliveTimeout, &mut worker.ctx()); // as the worker does
    assert_eq!(worker.stats.watch_skipped.get(), 1);
    // A late request would meet the kernel's reset, unseen: the observer
    // hears the idle end as one that cannot count lost requests.
    let end = worker
        .heard
        .0
        .iter()
        .find(|e| e.starts_with("IdleEnded"))
        .unwrap();
    assert!(end.contains("reset: true"), "{end}");
}

/// The server side of a pair, registered in a poll of its own, so tests
/// see the very events the kernel reports.
struct Events1 {
    poll: Poll,
    events: Events,
}

impl Events1 {
    fn register(conn: &mut Conn) -> Self {
        let poll = Poll::new().unwrap();
        let interest = Interest::READABLE | Interest::WRITABLE;
        conn.transport
            .register_for(poll.registry(), Token(0), interest)
            .unwrap();
        Events1 {
            poll,
            events: Events::with_capacity(8),
        }
    }

    /// The next event's readiness, or `None` if nothing comes for `quiet`.
    fn next(&mut self, quiet: Duration) -> Option<Readiness> {
        self.poll.poll(&mut self.events, Some(quiet)).unwrap();
        self.events.iter().next().map(Readiness::of)
    }
}

/// One turn's worth of handling, as the worker gives it: the event, then
/// one more pass if the read budget ran out (the ready list).
fn handle(conn: &mut Conn, readiness: Readiness, worker: &mut Worker) -> Flow {
    match conn.on_ready(readiness, &mut worker.ctx()) {
        Flow::More => conn.on_ready_again(&mut worker.ctx()),
        flow => flow,
    }
}

/// Reads everything until EOF (or a reset) on a thread.
fn read_to_end(client: &std::net::TcpStream) -> JoinHandle<Vec<u8>> {
    let mut client = client.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        while let Ok(n) = client.read(&mut chunk) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&chunk[..n]);
        }
        all
    })
}

fn responses_in(bytes: &[u8]) -> usize {
    bytes.windows(13).filter(|w| w == b"HTTP/1.1 200 ").count()
}

/// For every point a pipelined stream can be cut at, a FIN or a reset
/// there ends the connection in the turn whose event carries it, having
/// answered (after a FIN) exactly the requests that arrived whole.
#[test]
fn every_cut_point_ends_in_the_turn_its_hangup_arrives() {
    let requests: [&[u8]; 3] = [
        GET,
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n",
    ];
    let stream = requests.concat();
    // Where each request ends in the stream.
    let ends: Vec<usize> = requests
        .iter()
        .scan(0, |at, request| {
            *at += request.len();
            Some(*at)
        })
        .collect();
    let mut worker = Worker::new();
    for cut in 0..=stream.len() {
        for reset in [false, true] {
            let (mut client, mut conn) = pair();
            let mut events = Events1::register(&mut conn);
            client.write_all(&stream[..cut]).unwrap();
            if reset {
                socket2::SockRef::from(&client)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            } else {
                client.shutdown(std::net::Shutdown::Write).unwrap();
            }
            let reader = (!reset).then(|| read_to_end(&client));
            if reset {
                drop(client);
            }
            let context = format!("cut at {cut}, {}", if reset { "RST" } else { "FIN" });
            let flow = loop {
                let readiness = events
                    .next(Duration::from_secs(5))
                    .unwrap_or_else(|| panic!("{context}: no hangup event"));
                let flow = handle(&mut conn, readiness, &mut worker);
                if readiness.hangup || readiness.error || matches!(flow, Flow::Close(_)) {
                    break flow;
                }
            };
            assert!(matches!(flow, Flow::Close(_)), "{context}: {flow:?}");
            drop(conn);
            if let Some(reader) = reader {
                let whole = ends.iter().filter(|&&end| end <= cut).count();
                assert_eq!(responses_in(&reader.join().unwrap()), whole, "{context}");
            }
        }
    }
}

#[test]
fn an_idle_connection_keeps_only_a_small_slab_entry() {
    // Issue 19: what only a connection with work needs is pooled, so an
    // idle one costs this entry and a 32-byte timer node. mio's stream
    // carries a selector id with debug assertions on (8 bytes more, 16
    // with the padding of the transport that holds it).
    let stream_extra = if cfg!(debug_assertions) { 16 } else { 0 };
    // 136 B in a release build (144 before issue 38 moved the peer's and
    // the socket's flags into the transport: 182 B per idle connection).
    assert!(std::mem::size_of::<Conn>() <= 136 + stream_extra);
    assert_eq!(std::mem::size_of::<Option<crate::timers::TimerId>>(), 4);
}

/// Holds the kernel's receive stamping on, and waits until it is: a TCP
/// segment (UDP would not do: a datagram without a stamp is stamped as it
/// is read) comes back with its stamp.
fn stamping_on() -> std::net::UdpSocket {
    let held = rx_stamps::hold_switched_on().expect("a UDP socket on loopback");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (receiver, _) = listener.accept().unwrap();
    rx_stamps::enable(&receiver).unwrap();
    let mut control = rx_stamps::control_buffer();
    let started = Instant::now();
    loop {
        sender.write_all(b"?").unwrap();
        let (_, stamp) = rx_stamps::recv_stamped(&receiver, &mut [0; 1], &mut control).unwrap();
        if stamp.is_some() {
            return held;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "stamping never came on"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A connection answered once at loop time 0 and idle since, its timers
/// synced: the client, the connection and its keep-alive deadline.
fn idle_after_one_answer(worker: &mut Worker) -> (std::net::TcpStream, Conn, i64) {
    let (client, mut conn) = answered_once(worker);
    conn.sync_timers(0, &mut worker.resources.timers, 0, &worker.settings);
    let deadline = (worker.settings.keep_alive_ms * 1000) as i64;
    (client, conn, deadline)
}

/// The reuse event the connection reported.
fn heard_reuse(worker: &Worker) -> &str {
    let reuse = worker.heard.0.iter().find(|e| e.starts_with("Reused"));
    reuse.expect("a reuse was reported")
}

/// `name: value` in an event's debug text, as a number.
fn field(event: &str, name: &str) -> i64 {
    let after = event.split(&format!("{name}: ")).nth(1).unwrap();
    let digits = after.split([',', ' ', '}']).next().unwrap();
    digits.parse().unwrap()
}

#[test]
fn a_request_that_cancels_an_overdue_idle_timer_counts_its_lateness() {
    // The loop stalled past the keep-alive deadline; the request that
    // reuses the connection is read before the timer could fire. Nothing
    // fired, yet the loop was late: the lateness figures say by how much.
    // The request itself came long before the deadline, and the kernel's
    // stamp on it (taken near the deadline) says so: the reuse had
    // headroom, which the loop's late reading alone would call -5 s.
    let _stamping = stamping_on();
    let mut worker = Worker::new();
    let (mut client, mut conn, deadline) = idle_after_one_answer(&mut worker);
    let sent_at = worker.resources.clock.now() as i64;
    send(&mut client, &conn, GET);
    let late = 5_000_000;
    {
        let mut ctx = worker.ctx_at(deadline as Micros + late);
        assert_eq!(conn.on_ready(Readiness::default(), &mut ctx), Flow::Open);
        conn.account(false, &mut ctx);
    }
    let read_at = worker.resources.clock.now() as i64;
    let lateness = worker.stats.timer_lateness.read();
    assert_eq!((lateness.count(), lateness.sum), (1, late));
    assert_eq!(worker.heard.count("Reused(Reuse { gap_us"), 1);
    let headroom = field(heard_reuse(&worker), "headroom_us");
    assert!(
        (deadline - read_at..=deadline - sent_at).contains(&headroom),
        "{headroom} µs left, sent at {sent_at}, read at {read_at}, due at {deadline}"
    );
    let gap = field(heard_reuse(&worker), "gap_us");
    assert!((sent_at..=read_at).contains(&gap), "gap {gap} µs");
}

#[test]
fn a_reuse_well_inside_the_promise_is_judged_by_the_loop_reading() {
    // Over 100 ms before the advertised timeout runs out, no stamp is
    // asked for: the turn's reading is the arrival.
    let _stamping = stamping_on();
    let mut worker = Worker::new();
    let (mut client, mut conn, deadline) = idle_after_one_answer(&mut worker);
    send(&mut client, &conn, GET);
    let grace = conn.grace_us(&worker.settings) as i64;
    assert!(grace > 0, "the default keeps a second past the promise");
    let left = grace + reuse::STAMP_ARRIVAL_WITHIN_US as i64 + 1;
    {
        let mut ctx = worker.ctx_at((deadline - left) as Micros);
        assert_eq!(conn.on_ready(Readiness::default(), &mut ctx), Flow::Open);
        conn.account(false, &mut ctx);
    }
    assert_eq!(field(heard_reuse(&worker), "headroom_us"), left);
}

#[test]
fn under_the_shadow_deadline_an_expired_connection_stays_open_and_a_reuse_is_marked() {
    let mut worker = Worker::new();
    worker.settings.shadow_ms = Some(2000);
    let (mut client, mut conn) = answered_once(&mut worker);

    // The idle timer runs out with nothing to read: no FIN, no idle end.
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert_eq!(conn.state(), State::Overdue);
    assert_eq!(worker.heard.count("IdleEnded"), 0);
    conn.sync_timers(0, &mut worker.resources.timers, 0, &worker.settings);
    let shadow = conn.slots.activity().expect("the shadow's timer");
    let kept_ms = worker.settings.keep_alive_ms.max(2000);
    assert_eq!(worker.resources.timers.deadline(shadow), kept_ms * 1000);
    assert!(conn.slots.in_shadow());

    // A request now is served, and reported as past the deadline.
    send(&mut client, &conn, GET);
    {
        let mut ctx = worker.ctx();
        assert_eq!(conn.on_ready(Readiness::default(), &mut ctx), Flow::Open);
        conn.account(false, &mut ctx);
    }
    assert!(read_response(&mut client).starts_with("HTTP/1.1 200 OK"));
    assert!(
        heard_reuse(&worker).contains("past_deadline: true"),
        "{:?}",
        worker.heard.0
    );
    assert_eq!(conn.state(), State::Idle);
}

#[test]
fn the_shadow_deadline_ends_in_the_close_the_deadline_would_have_made() {
    let mut worker = Worker::new();
    worker.settings.shadow_ms = Some(2000);
    let (mut client, mut conn) = answered_once(&mut worker);
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert_eq!(conn.state(), State::Overdue);
    // A readable edge with nothing to read keeps it overdue.
    assert_eq!(
        conn.on_ready(Readiness::default(), &mut worker.ctx()),
        Flow::Open
    );
    assert_eq!(conn.state(), State::Overdue);

    // The shadow's end: FIN, the watch, and the server's idle end.
    assert_eq!(worker.fire_activity(&mut conn), Flow::Open);
    assert!(matches!(conn.state(), State::Watching(_)));
    assert_eq!(worker.heard.count("IdleEnded(IdleEnd { closer: Server"), 1);
    assert_eq!(client.read(&mut [0u8; 64]).unwrap(), 0, "FIN");
}

#[test]
fn without_the_shadow_deadline_a_reuse_is_not_marked() {
    let mut worker = Worker::new();
    let (mut client, mut conn, _) = idle_after_one_answer(&mut worker);
    send(&mut client, &conn, GET);
    {
        let mut ctx = worker.ctx();
        assert_eq!(conn.on_ready(Readiness::default(), &mut ctx), Flow::Open);
        conn.account(false, &mut ctx);
    }
    assert!(heard_reuse(&worker).contains("past_deadline: false"));
}
