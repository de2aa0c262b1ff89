//! The soak itself: one thread, one mio `Poll`, opening the connections in
//! batches, sending the request, reading the response and timing the EOF.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::cli::Args;
use crate::http::{Parsed, REQUEST, parse_response};
use crate::rx_stamps::{self, Scratch, Seen};
use crate::server::rss_bytes;

/// A batch that makes no progress for this long aborts the run.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// Events handled per poll, and connects per loop turn: small, so the loop
/// polls again within a fraction of a millisecond and timestamps stay close
/// to when data and EOFs really arrived.
const EVENTS_PER_POLL: usize = 8;
const CONNECTS_PER_TURN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Connecting, or request not fully written.
    Sending,
    /// Request sent, response incomplete.
    Receiving,
    /// Response received; waiting for the server's close.
    Idle,
    Closed,
    Failed,
}

pub struct Client {
    stream: Option<TcpStream>,
    state: State,
    sent: usize,
    buf: Vec<u8>,
    /// The poll wake-up that led to writing the request: a lower bound on
    /// when the response can have arrived.
    pub written_at: Option<Instant>,
    /// Kernel receive time of the response's last segment (SO_TIMESTAMPNS),
    /// moved onto the `Instant` timeline.
    pub rx_at: Option<Instant>,
    /// The poll wake-up that delivered the response's last bytes.
    pub responded_at: Option<Instant>,
    pub closed_at: Option<Instant>,
    pub reset: bool,
}

/// What the event loop saw.
pub struct Soak {
    pub clients: Vec<Client>,
    /// First connect to last response.
    pub open_time: Duration,
    pub rss_after: Option<u64>,
    /// Connections already closed when the "after" RSS sample was taken.
    pub closed_before_sample: usize,
    pub rss_closed: Option<u64>,
    pub errors: Vec<String>,
    /// Bytes received after a complete response (should never happen).
    pub stray_bytes: usize,
    pub close_headers: usize,
    /// Every connection got SO_TIMESTAMPNS.
    pub kernel_stamps: bool,
    /// When the first connection was opened: the CSV's zero.
    pub started: Instant,
}

pub fn soak(args: &Args, pid: Option<u32>) -> Result<Soak, String> {
    let n = args.connections;
    let mut poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    let mut events = Events::with_capacity(EVENTS_PER_POLL);
    let mut clients: Vec<Client> = Vec::with_capacity(n);
    let mut errors: Vec<String> = Vec::new();
    let mut outstanding = 0usize; // opened, awaiting a response
    let mut batch_end = 0usize; // the current batch is clients[..batch_end]
    let mut idle = 0usize; // responded, not yet closed
    let mut last_response: Option<Instant> = None;
    let mut progress_at = Instant::now();
    let mut open_time = Duration::ZERO;
    let mut rss_after = None;
    let mut sampled = false;
    let mut closed_before_sample = 0usize;
    let mut closed = 0usize;
    let mut stray_bytes = 0usize;
    let mut close_headers = 0usize;
    let mut kernel_stamps = true;
    let mut scratch = Scratch::new();
    let started = Instant::now();

    loop {
        // Start the next batch once the current one has all its answers;
        // open it a few connections per turn, polling in between.
        if clients.len() == batch_end && outstanding == 0 && batch_end < n {
            batch_end = (batch_end + args.batch).min(n);
            progress_at = Instant::now();
        }
        if clients.len() < batch_end {
            let end = (clients.len() + CONNECTS_PER_TURN).min(batch_end);
            for i in clients.len()..end {
                let mut stream =
                    TcpStream::connect(args.addr).map_err(|e| format!("connect #{i}: {e}"))?;
                if rx_stamps::enable(&stream).is_err() {
                    kernel_stamps = false;
                }
                poll.registry()
                    .register(
                        &mut stream,
                        Token(i),
                        Interest::READABLE | Interest::WRITABLE,
                    )
                    .map_err(|e| format!("register: {e}"))?;
                clients.push(Client {
                    stream: Some(stream),
                    state: State::Sending,
                    sent: 0,
                    buf: Vec::new(),
                    written_at: None,
                    rx_at: None,
                    responded_at: None,
                    closed_at: None,
                    reset: false,
                });
                outstanding += 1;
            }
        }
        let all_answered = clients.len() == n && outstanding == 0;
        if all_answered && open_time.is_zero() {
            open_time = last_response.unwrap_or(started) - started;
        }

        // What the loop waits for next.
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        if all_answered {
            let last = last_response.unwrap_or(now);
            if !sampled {
                let at = last + args.settle;
                if now >= at {
                    rss_after = pid.map(rss_bytes).transpose()?;
                    closed_before_sample = closed;
                    sampled = true;
                } else {
                    wake = Some(at);
                }
            }
            let end = last + args.expect_timeout + args.grace;
            if sampled && (idle == 0 || now >= end) {
                break;
            }
            wake = Some(wake.map_or(end, |w| w.min(end)));
        } else if clients.len() < batch_end {
            wake = Some(now); // more of the batch to open
        } else {
            if now.duration_since(progress_at) > STALL_LIMIT {
                return Err(format!(
                    "no progress for {STALL_LIMIT:?}: {outstanding} of the batch still unanswered ({} opened)",
                    clients.len()
                ));
            }
            wake = Some(progress_at + STALL_LIMIT + Duration::from_millis(1));
        }
        let timeout = wake.map(|w| w.saturating_duration_since(now));

        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        // One reading per wake-up: when the events were observed.
        let seen = Seen::now();
        for event in events.iter() {
            let i = event.token().0;
            let client = &mut clients[i];
            let before = client.state;
            drive(
                client,
                seen,
                &mut scratch,
                &mut errors,
                &mut stray_bytes,
                &mut close_headers,
                i,
            );
            let after = client.state;
            if before == after {
                continue;
            }
            let was_pending = matches!(before, State::Sending | State::Receiving);
            if was_pending && !matches!(after, State::Sending | State::Receiving) {
                outstanding -= 1;
                progress_at = seen.at;
                if after == State::Idle {
                    idle += 1;
                    last_response = Some(seen.at);
                }
            }
            if before == State::Idle {
                idle -= 1;
                if after == State::Closed {
                    closed += 1;
                }
            }
            if matches!(after, State::Closed | State::Failed)
                && let Some(mut stream) = client.stream.take()
            {
                let _ = poll.registry().deregister(&mut stream);
            }
        }
    }

    // Memory once the server has dropped every connection.
    let rss_closed = match pid {
        Some(pid) if idle == 0 => {
            std::thread::sleep(args.settle);
            Some(rss_bytes(pid)?)
        }
        _ => None,
    };
    Ok(Soak {
        clients,
        open_time,
        rss_after,
        closed_before_sample,
        rss_closed,
        errors,
        stray_bytes,
        close_headers,
        kernel_stamps,
        started,
    })
}

/// Advances one connection on readiness: write the request, read the
/// response, then wait for EOF. `seen` is when poll reported the event.
fn drive(
    client: &mut Client,
    seen: Seen,
    scratch: &mut Scratch,
    errors: &mut Vec<String>,
    stray_bytes: &mut usize,
    close_headers: &mut usize,
    index: usize,
) {
    let Some(stream) = client.stream.as_mut() else {
        return;
    };
    let mut fail = |client_state: &mut State, why: String| {
        if errors.len() < 20 {
            errors.push(format!("connection #{index}: {why}"));
        }
        *client_state = State::Failed;
    };
    if client.state == State::Sending {
        while client.sent < REQUEST.len() {
            match stream.write(&REQUEST[client.sent..]) {
                Ok(n) => client.sent += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
                    ) =>
                {
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return fail(&mut client.state, format!("write: {e}")),
            }
        }
        client.written_at = Some(seen.at);
        client.state = State::Receiving;
    }
    loop {
        match scratch.recv(stream) {
            Ok((0, _)) => {
                match client.state {
                    State::Idle => {
                        client.closed_at = Some(seen.at);
                        client.state = State::Closed;
                    }
                    _ => fail(&mut client.state, "EOF before a full response".into()),
                }
                return;
            }
            Ok((n, stamp)) => match client.state {
                State::Receiving => {
                    client.buf.extend_from_slice(scratch.data(n));
                    client.rx_at = stamp.map(|wall| seen.instant_of(wall));
                    match parse_response(&client.buf) {
                        Parsed::Partial => {}
                        Parsed::Done { len, close } => {
                            *stray_bytes += client.buf.len() - len;
                            *close_headers += usize::from(close);
                            client.buf = Vec::new();
                            client.responded_at = Some(seen.at);
                            client.state = State::Idle;
                        }
                        Parsed::Bad(why) => return fail(&mut client.state, why),
                    }
                }
                _ => *stray_bytes += n,
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if client.state == State::Idle && e.kind() == io::ErrorKind::ConnectionReset => {
                client.closed_at = Some(seen.at);
                client.reset = true;
                client.state = State::Closed;
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected && client.state == State::Sending => {
                return;
            }
            Err(e) => return fail(&mut client.state, format!("read: {e}")),
        }
    }
}
