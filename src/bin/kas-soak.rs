//! kas-soak: idle keep-alive connection soak for keepalive-server.
//!
//! Opens N keep-alive connections (in batches, so the accept backlog is not
//! overrun), sends one `GET /` on each, waits for every response, then:
//!
//! 1. samples the server's RSS before and after (all N idle) and reports the
//!    growth per idle connection;
//! 2. times, per connection, last response byte -> EOF, minus the expected
//!    idle timeout: the close lateness (never negative on a correct server);
//! 3. optionally draws the lateness distribution as an SVG histogram, and
//!    counts the server threads' context switches while it sits idle.
//!
//! One thread, one mio `Poll`, few events per poll so the loop stays
//! responsive. EOFs are timed when poll returns. Responses are timed by the
//! kernel (SO_TIMESTAMPNS on each socket, read with `recvmsg`): a user-space
//! stamp trails the true arrival by however long this loop was busy writing
//! other requests (several ms with batches of 200), which would report closes
//! as early that are not. The report also counts closes that were early even
//! against the request's send time (proof of a server bug) and those that a
//! poll-time stamp would have called early. `--csv` dumps every connection.
//!
//! Linux only (/proc, SO_TIMESTAMPNS).
//!
//! ```text
//! kas-soak -n 2000 --expect-timeout 1s --svg target/soak.svg \
//!     --server-bin target/release/keepalive-server -- \
//!     --keep-alive-timeout 1s --keep-alive-buffer 0s --workers 1
//! ```

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use keepalive_server::config::parse_duration;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use socket2::{MaybeUninitSlice, MsgHdrMut, SockRef};

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const EXPECTED_BODY: &[u8] = b"Hello, World!";
/// A batch that makes no progress for this long aborts the run.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// Events handled per poll, and connects per loop turn: small, so the loop
/// polls again within a fraction of a millisecond and timestamps stay close
/// to when data and EOFs really arrived.
const EVENTS_PER_POLL: usize = 8;
const CONNECTS_PER_TURN: usize = 8;

/// Idle keep-alive soak: RSS per idle connection and close lateness.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Args {
    /// Server address to connect to (also passed as --listen to a server started with --server-bin, unless the server args set it).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,

    /// Number of keep-alive connections to open.
    #[arg(short = 'n', long, default_value_t = 2000)]
    connections: usize,

    /// Connections opened at a time; the next batch waits for this one's responses.
    #[arg(long, default_value_t = 200)]
    batch: usize,

    /// Idle timeout the server should close at (its --keep-alive-timeout plus --keep-alive-buffer).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    expect_timeout: Duration,

    /// Past expect-timeout + grace, a connection counts as not closed.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    grace: Duration,

    /// Quiet time after the last response before the "after" RSS sample.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    settle: Duration,

    /// PID of an already running server (for its RSS).
    #[arg(long, conflicts_with = "server_bin")]
    pid: Option<u32>,

    /// Start this server binary (with the args after `--`), measure it, stop it.
    #[arg(long)]
    server_bin: Option<PathBuf>,

    /// Where the started server's output goes [default: discarded].
    #[arg(long, requires = "server_bin")]
    server_log: Option<PathBuf>,

    /// Write the lateness histogram here as SVG.
    #[arg(long)]
    svg: Option<PathBuf>,

    /// Write one CSV row per connection here: its timestamps in ms since the
    /// first connect, and its lateness.
    #[arg(long)]
    csv: Option<PathBuf>,

    /// Print the report as JSON instead of plain text.
    #[arg(long)]
    json: bool,

    /// Also count the server threads' context switches over this long while
    /// idle with no connections: before the soak and after it.
    #[arg(long, value_parser = parse_duration)]
    idle_check: Option<Duration>,

    /// Arguments for the server started with --server-bin.
    #[arg(last = true)]
    server_args: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            if report.early > 0 || report.not_closed > 0 || report.failed > 0 {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("kas-soak: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A server this tool started; stopped (SIGTERM, then SIGKILL) on drop.
struct Spawned {
    child: Child,
    command: String,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(args: &Args) -> Result<Report, String> {
    if args.connections == 0 || args.batch == 0 {
        return Err("--connections and --batch must be at least 1".into());
    }
    check_fd_limit(args.connections)?;
    let mut spawned = match &args.server_bin {
        Some(bin) => Some(spawn_server(bin, args)?),
        None => None,
    };
    let pid = match (&spawned, args.pid) {
        (Some(s), _) => Some(s.child.id()),
        (None, pid) => pid,
    };
    wait_ready(args.addr, spawned.as_mut())?;

    // Idle before any request: no timers should be armed at all.
    let idle_before = match (args.idle_check, pid) {
        (Some(span), Some(pid)) => Some(idle_wakeups(pid, span)?),
        _ => None,
    };

    // Warm-up request: pages in the request path, the buffer pool, the
    // Date cache, so "before" is a served-once server, not a cold one.
    warm_up(args.addr)?;
    std::thread::sleep(args.settle);
    let rss_before = pid.map(rss_bytes).transpose()?;

    let soak = soak(args, pid)?;
    if let Some(path) = &args.csv {
        fs::write(path, per_connection_csv(&soak, args.expect_timeout))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }

    let idle_after = match (args.idle_check, pid) {
        // Past the one-second Date timer armed by the last response.
        (Some(span), Some(pid)) => {
            std::thread::sleep(Duration::from_millis(1100));
            Some(idle_wakeups(pid, span)?)
        }
        _ => None,
    };

    let report = Report::new(
        args,
        pid,
        spawned.as_ref().map(|s| s.command.clone()),
        rss_before,
        soak,
        idle_before,
        idle_after,
    );
    if let Some(path) = &args.svg {
        fs::write(path, report.svg())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    drop(spawned);
    Ok(report)
}

/// This process needs N descriptors plus a few; fail early with a hint.
fn check_fd_limit(connections: usize) -> Result<(), String> {
    let limits = fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok());
    match soft {
        Some(soft) if soft < connections + 32 => Err(format!(
            "open-file limit is {soft}, need {} for {connections} connections: run `ulimit -n {}` first \
             (a server started by this tool inherits it too)",
            connections + 32,
            (connections + 32).clamp(20000, 1 << 20)
        )),
        _ => Ok(()),
    }
}

fn spawn_server(bin: &PathBuf, args: &Args) -> Result<Spawned, String> {
    // Someone else listening there would answer instead of our server.
    if let Err(e) = std::net::TcpListener::bind(args.addr) {
        return Err(format!(
            "cannot use {} for the server: {e} (pick another with --addr)",
            args.addr
        ));
    }
    let mut server_args = args.server_args.clone();
    if !server_args
        .iter()
        .any(|a| a == "--listen" || a.starts_with("--listen="))
    {
        server_args.push("--listen".into());
        server_args.push(args.addr.to_string());
    }
    let (stdout, stderr) = match &args.server_log {
        Some(path) => {
            let file = fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let clone = file.try_clone().map_err(|e| e.to_string())?;
            (Stdio::from(file), Stdio::from(clone))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    let child = Command::new(bin)
        .args(&server_args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let command = std::iter::once(bin.display().to_string())
        .chain(server_args)
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Spawned { child, command })
}

/// Waits until the server accepts connections (a bare connect, no request:
/// it leaves no timer armed behind).
fn wait_ready(addr: SocketAddr, mut spawned: Option<&mut Spawned>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = spawned.as_deref_mut()
            && let Ok(Some(status)) = s.child.try_wait()
        {
            return Err(format!(
                "server exited at startup ({status}); see --server-log"
            ));
        }
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => {
                // Let the server see the close before anything is sampled.
                std::thread::sleep(Duration::from_millis(300));
                if let Some(s) = spawned.as_deref_mut()
                    && let Ok(Some(status)) = s.child.try_wait()
                {
                    return Err(format!(
                        "server exited at startup ({status}); see --server-log"
                    ));
                }
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("server at {addr} not reachable: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn warm_up(addr: SocketAddr) -> Result<(), String> {
    let mut stream =
        std::net::TcpStream::connect(addr).map_err(|e| format!("warm-up connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(REQUEST)
        .map_err(|e| format!("warm-up write: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match parse_response(&buf) {
            Parsed::Done { .. } => return Ok(()),
            Parsed::Bad(why) => return Err(format!("warm-up response: {why}")),
            Parsed::Partial => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("warm-up: server closed before responding".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("warm-up read: {e}")),
        }
    }
}

/// VmRSS of `pid`, in bytes.
fn rss_bytes(pid: u32) -> Result<u64, String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status_field(&status, "VmRSS:")
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))
}

fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// One thread's context switches over an idle span.
#[derive(Debug, Clone)]
struct ThreadWakeups {
    tid: u32,
    name: String,
    voluntary: u64,
    involuntary: u64,
}

fn thread_switches(pid: u32) -> Result<Vec<ThreadWakeups>, String> {
    let dir = format!("/proc/{pid}/task");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else {
            continue; // the thread exited
        };
        let name = status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .map_or_else(String::new, |n| n.trim().to_string());
        out.push(ThreadWakeups {
            tid,
            name,
            voluntary: status_field(&status, "voluntary_ctxt_switches:").unwrap_or(0),
            involuntary: status_field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0),
        });
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// Context-switch deltas of every server thread over `span`.
fn idle_wakeups(pid: u32, span: Duration) -> Result<IdleCheck, String> {
    let before = thread_switches(pid)?;
    std::thread::sleep(span);
    let after = thread_switches(pid)?;
    let threads = after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.tid == a.tid);
            ThreadWakeups {
                tid: a.tid,
                name: a.name.clone(),
                voluntary: a.voluntary - b.map_or(0, |b| b.voluntary),
                involuntary: a.involuntary - b.map_or(0, |b| b.involuntary),
            }
        })
        .collect();
    Ok(IdleCheck { span, threads })
}

#[derive(Debug)]
struct IdleCheck {
    span: Duration,
    threads: Vec<ThreadWakeups>,
}

impl IdleCheck {
    fn total(&self) -> u64 {
        self.threads
            .iter()
            .map(|t| t.voluntary + t.involuntary)
            .sum()
    }
}

enum Parsed {
    Partial,
    /// A whole, well-formed `200 Hello, World!` response of `len` bytes.
    Done {
        len: usize,
        close: bool,
    },
    Bad(String),
}

fn parse_response(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(e) => return Parsed::Bad(format!("malformed response: {e}")),
    };
    if response.code != Some(200) {
        return Parsed::Bad(format!("status {:?}", response.code));
    }
    let mut content_length = None;
    let mut close = false;
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            content_length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= h.value.eq_ignore_ascii_case(b"close");
        }
    }
    let Some(body_len) = content_length else {
        return Parsed::Bad("no Content-Length".into());
    };
    if buf.len() < head_len + body_len {
        return Parsed::Partial;
    }
    if &buf[head_len..head_len + body_len] != EXPECTED_BODY {
        return Parsed::Bad("unexpected body".into());
    }
    Parsed::Done {
        len: head_len + body_len,
        close,
    }
}

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

struct Client {
    stream: Option<TcpStream>,
    state: State,
    sent: usize,
    buf: Vec<u8>,
    /// The poll wake-up that led to writing the request: a lower bound on
    /// when the response can have arrived.
    written_at: Option<Instant>,
    /// Kernel receive time of the response's last segment (SO_TIMESTAMPNS),
    /// moved onto the `Instant` timeline.
    rx_at: Option<Instant>,
    /// The poll wake-up that delivered the response's last bytes.
    responded_at: Option<Instant>,
    closed_at: Option<Instant>,
    reset: bool,
}

/// What the event loop saw.
struct Soak {
    clients: Vec<Client>,
    /// First connect to last response.
    open_time: Duration,
    rss_after: Option<u64>,
    /// Connections already closed when the "after" RSS sample was taken.
    closed_before_sample: usize,
    rss_closed: Option<u64>,
    errors: Vec<String>,
    /// Bytes received after a complete response (should never happen).
    stray_bytes: usize,
    close_headers: usize,
    /// Every connection got SO_TIMESTAMPNS.
    kernel_stamps: bool,
    /// When the first connection was opened: the CSV's zero.
    started: Instant,
}

fn per_connection_csv(soak: &Soak, expect: Duration) -> String {
    let ms = |t: Option<Instant>| {
        t.map_or_else(String::new, |t| {
            format!(
                "{:.3}",
                t.saturating_duration_since(soak.started).as_secs_f64() * 1e3
            )
        })
    };
    let mut out = String::from(
        "conn,request_written_ms,response_rx_ms,response_seen_ms,eof_seen_ms,reset,lateness_ms\n",
    );
    for (i, c) in soak.clients.iter().enumerate() {
        let base = c.rx_at.filter(|_| soak.kernel_stamps).or(c.responded_at);
        let late = match (base, c.closed_at) {
            (Some(from), Some(to)) => format!(
                "{:.3}",
                (to - from).as_secs_f64() * 1e3 - expect.as_secs_f64() * 1e3
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{i},{},{},{},{},{},{late}",
            ms(c.written_at),
            ms(c.rx_at),
            ms(c.responded_at),
            ms(c.closed_at),
            u8::from(c.reset)
        );
    }
    out
}

fn soak(args: &Args, pid: Option<u32>) -> Result<Soak, String> {
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

/// When poll returned, on both clocks: kernel receive stamps are wall-clock
/// times, and are moved onto the monotonic timeline through this pair.
#[derive(Clone, Copy)]
struct Seen {
    at: Instant,
    wall: SystemTime,
}

impl Seen {
    fn now() -> Seen {
        Seen {
            at: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// The `Instant` at which the wall clock read `wall`.
    fn instant_of(&self, wall: SystemTime) -> Instant {
        match self.wall.duration_since(wall) {
            Ok(ago) => self.at.checked_sub(ago).unwrap_or(self.at),
            // Received after this wake-up (read later in the same pass).
            Err(after) => self.at + after.duration(),
        }
    }
}

/// Receive buffers for `recvmsg`: data, and control for the timestamp.
struct Scratch {
    data: Vec<MaybeUninit<u8>>,
    control: Vec<MaybeUninit<u8>>,
}

impl Scratch {
    fn new() -> Scratch {
        // Zero-filled, so every byte is initialized from the start.
        Scratch {
            data: vec![MaybeUninit::new(0); 4096],
            control: vec![MaybeUninit::new(0); 256],
        }
    }

    /// One `recvmsg`: bytes read and the kernel receive time, if stamped.
    fn recv(&mut self, stream: &TcpStream) -> io::Result<(usize, Option<SystemTime>)> {
        let socket = SockRef::from(stream);
        let mut bufs = [MaybeUninitSlice::new(&mut self.data)];
        let mut msg = MsgHdrMut::new()
            .with_buffers(&mut bufs)
            .with_control(&mut self.control);
        let n = socket.recvmsg(&mut msg, 0)?;
        let control_len = msg.control_len();
        let stamp = rx_stamps::parse(init(&self.control[..control_len]));
        Ok((n, stamp))
    }

    fn data(&self, n: usize) -> &[u8] {
        init(&self.data[..n])
    }
}

/// Views bytes that are known to be initialized.
fn init(bytes: &[MaybeUninit<u8>]) -> &[u8] {
    // SAFETY: Scratch buffers are zero-filled at creation and only ever
    // written with initialized bytes (by the kernel), so every element is
    // initialized; MaybeUninit<u8> has u8's layout.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u8>(), bytes.len()) }
}

/// Kernel receive timestamps (Linux SO_TIMESTAMPNS): the time the segment
/// reached the socket, independent of when this loop got round to it.
mod rx_stamps {
    use std::io;
    use std::os::fd::AsRawFd;
    use std::time::{Duration, SystemTime};

    const SOL_SOCKET: i32 = 1;
    /// SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD: 64-bit timespec on 64-bit
    /// targets); the control message type SCM_TIMESTAMPNS is the same number.
    const SO_TIMESTAMPNS: i32 = 35;

    unsafe extern "C" {
        fn setsockopt(
            fd: i32,
            level: i32,
            name: i32,
            value: *const std::ffi::c_void,
            len: u32,
        ) -> i32;
    }

    pub fn enable(socket: &impl AsRawFd) -> io::Result<()> {
        let on: i32 = 1;
        // SAFETY: a valid descriptor, and a pointer to a live i32 with its size.
        let rc = unsafe {
            setsockopt(
                socket.as_raw_fd(),
                SOL_SOCKET,
                SO_TIMESTAMPNS,
                (&raw const on).cast(),
                size_of::<i32>() as u32,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Finds SCM_TIMESTAMPNS in a control buffer (struct cmsghdr: usize
    /// length, i32 level, i32 type, then the data, all native-endian).
    pub fn parse(control: &[u8]) -> Option<SystemTime> {
        const WORD: usize = size_of::<usize>();
        let header = WORD + 8;
        let align = |n: usize| n.div_ceil(WORD) * WORD;
        let mut at = 0;
        while at + header <= control.len() {
            let len = usize::from_ne_bytes(control[at..at + WORD].try_into().ok()?);
            let level = i32::from_ne_bytes(control[at + WORD..at + WORD + 4].try_into().ok()?);
            let kind = i32::from_ne_bytes(control[at + WORD + 4..at + WORD + 8].try_into().ok()?);
            if len < header || at + len > control.len() {
                return None;
            }
            let data = &control[at + align(header)..at + len];
            if level == SOL_SOCKET && kind == SO_TIMESTAMPNS && data.len() >= 16 {
                let secs = i64::from_ne_bytes(data[..8].try_into().ok()?);
                let nanos = i64::from_ne_bytes(data[8..16].try_into().ok()?);
                let since_epoch =
                    Duration::new(u64::try_from(secs).ok()?, u32::try_from(nanos).ok()?);
                return SystemTime::UNIX_EPOCH.checked_add(since_epoch);
            }
            at += align(len);
        }
        None
    }
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

struct Report {
    n: usize,
    addr: SocketAddr,
    batch: usize,
    expect: Duration,
    grace: Duration,
    pid: Option<u32>,
    command: Option<String>,
    open_ms: f64,
    responded: usize,
    failed: usize,
    closed: usize,
    resets: usize,
    early: usize,
    /// Closed before (request written + timeout): early for certain.
    early_vs_request: usize,
    /// Longest request-written -> response-seen span, ms: how far a response
    /// timestamp can trail its true arrival.
    request_to_response_max: Option<f64>,
    /// Closed before (poll wake-up that delivered the response + timeout):
    /// what a user-space stamp alone would call early.
    early_vs_wakeup: usize,
    /// Longest kernel-receive -> poll-wake-up delay, ms: this loop's lag.
    receive_lag_max: Option<f64>,
    /// Lateness is measured from kernel receive stamps (else poll wake-ups).
    kernel_stamps: bool,
    not_closed: usize,
    /// Sorted, in ms; closed connections only.
    lateness: Vec<f64>,
    rss_before: Option<u64>,
    rss_after: Option<u64>,
    rss_closed: Option<u64>,
    closed_before_sample: usize,
    errors: Vec<String>,
    stray_bytes: usize,
    close_headers: usize,
    idle_before: Option<IdleCheck>,
    idle_after: Option<IdleCheck>,
}

impl Report {
    fn new(
        args: &Args,
        pid: Option<u32>,
        command: Option<String>,
        rss_before: Option<u64>,
        soak: Soak,
        idle_before: Option<IdleCheck>,
        idle_after: Option<IdleCheck>,
    ) -> Report {
        let expect_ms = args.expect_timeout.as_secs_f64() * 1e3;
        let grace_ms = args.grace.as_secs_f64() * 1e3;
        let mut lateness = Vec::new();
        let mut not_closed = 0;
        let mut resets = 0;
        let mut responded = 0;
        let mut early_vs_request = 0;
        let mut early_vs_wakeup = 0;
        let mut request_to_response = Vec::new();
        let mut receive_lag = Vec::new();
        for c in &soak.clients {
            let Some(seen_at) = c.responded_at else {
                continue;
            };
            responded += 1;
            let written_at = c.written_at.unwrap_or(seen_at);
            request_to_response.push((seen_at - written_at).as_secs_f64() * 1e3);
            // The kernel's receive time when stamped; else the poll wake-up.
            let responded_at = match c.rx_at {
                Some(rx_at) if soak.kernel_stamps => {
                    receive_lag.push((seen_at - rx_at).as_secs_f64() * 1e3);
                    rx_at
                }
                _ => seen_at,
            };
            if c.closed_at
                .is_some_and(|closed_at| closed_at < seen_at + args.expect_timeout)
            {
                early_vs_wakeup += 1;
            }
            match c.closed_at {
                Some(closed_at) => {
                    // Closed before the request was even sent + timeout: early
                    // beyond any doubt about when the response arrived.
                    if closed_at < written_at + args.expect_timeout {
                        early_vs_request += 1;
                    }
                    let late = (closed_at - responded_at).as_secs_f64() * 1e3 - expect_ms;
                    if late > grace_ms {
                        not_closed += 1;
                    } else {
                        lateness.push(late);
                        resets += usize::from(c.reset);
                    }
                }
                None => not_closed += 1,
            }
        }
        lateness.sort_by(f64::total_cmp);
        let request_to_response_max = request_to_response.iter().copied().reduce(f64::max);
        let receive_lag_max = receive_lag.iter().copied().reduce(f64::max);
        let kernel_stamps = soak.kernel_stamps && receive_lag.len() == responded;
        let failed = soak
            .clients
            .iter()
            .filter(|c| c.responded_at.is_none())
            .count();
        Report {
            n: args.connections,
            addr: args.addr,
            batch: args.batch,
            expect: args.expect_timeout,
            grace: args.grace,
            pid,
            command,
            open_ms: soak.open_time.as_secs_f64() * 1e3,
            responded,
            failed,
            closed: lateness.len(),
            resets,
            early: lateness.iter().filter(|&&l| l < 0.0).count(),
            early_vs_request,
            early_vs_wakeup,
            request_to_response_max,
            receive_lag_max,
            kernel_stamps,
            not_closed,
            lateness,
            rss_before,
            rss_after: soak.rss_after,
            rss_closed: soak.rss_closed,
            closed_before_sample: soak.closed_before_sample,
            errors: soak.errors,
            stray_bytes: soak.stray_bytes,
            close_headers: soak.close_headers,
            idle_before,
            idle_after,
        }
    }

    /// Nearest-rank percentile of the sorted lateness, in ms.
    fn percentile(&self, p: f64) -> Option<f64> {
        let n = self.lateness.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        Some(self.lateness[rank.clamp(1, n) - 1])
    }

    fn stats(&self) -> [(&'static str, Option<f64>); 4] {
        [
            ("min", self.lateness.first().copied()),
            ("p50", self.percentile(50.0)),
            ("p99", self.percentile(99.0)),
            ("max", self.lateness.last().copied()),
        ]
    }

    fn rss_growth(&self) -> Option<i64> {
        Some(self.rss_after? as i64 - self.rss_before? as i64)
    }

    fn rss_per_conn(&self) -> Option<f64> {
        Some(self.rss_growth()? as f64 / self.responded.max(1) as f64)
    }

    fn text(&self) -> String {
        let mut s = String::new();
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "kas-soak: {} connections to {} (batches of {}), expect timeout {}, grace {}",
            self.n,
            self.addr,
            self.batch,
            humantime::format_duration(self.expect),
            humantime::format_duration(self.grace)
        );
        if let Some(cmd) = &self.command {
            let _ = writeln!(
                s,
                "server:    pid {} started as: {cmd}",
                self.pid.unwrap_or(0)
            );
        } else if let Some(pid) = self.pid {
            let _ = writeln!(s, "server:    pid {pid}");
        }
        let _ = writeln!(
            s,
            "requests:  {} answered, {} failed; all open and answered in {:.1} ms",
            self.responded, self.failed, self.open_ms
        );
        match (self.rss_before, self.rss_after) {
            (Some(before), Some(after)) => {
                let _ = writeln!(
                    s,
                    "memory:    RSS before {} B ({:.2} MiB), with {} idle {} B ({:.2} MiB): +{} B = {:.1} B per idle connection",
                    before,
                    mib(before),
                    self.responded,
                    after,
                    mib(after),
                    self.rss_growth().unwrap_or(0),
                    self.rss_per_conn().unwrap_or(0.0)
                );
                if let Some(closed) = self.rss_closed {
                    let _ = writeln!(
                        s,
                        "           RSS after all closed {closed} B ({:.2} MiB)",
                        mib(closed)
                    );
                }
                if self.closed_before_sample > 0 {
                    let _ = writeln!(
                        s,
                        "           WARNING: {} connections had already closed at the RSS sample: per-connection figure is low",
                        self.closed_before_sample
                    );
                }
            }
            _ => {
                let _ = writeln!(s, "memory:    not measured (give --pid or --server-bin)");
            }
        }
        let _ = writeln!(
            s,
            "close:     closed {}/{} (by reset {}), EARLY {}, not closed within timeout+grace {}",
            self.closed, self.responded, self.resets, self.early, self.not_closed
        );
        let _ = writeln!(
            s,
            "           response stamps: {}; client lag (kernel receive -> poll wake-up) max {} ms; \
             closed before wake-up + timeout {}; closed before request-sent + timeout {}; request->response max {} ms",
            if self.kernel_stamps {
                "kernel (SO_TIMESTAMPNS)"
            } else {
                "poll wake-up (no kernel stamps)"
            },
            ms(self.receive_lag_max),
            self.early_vs_wakeup,
            self.early_vs_request,
            ms(self.request_to_response_max)
        );
        let stats = self.stats();
        let _ = writeln!(
            s,
            "lateness:  ms from response received to EOF seen, minus the timeout: {}",
            stats
                .iter()
                .map(|(name, v)| format!("{name} {}", ms(*v)))
                .collect::<Vec<_>>()
                .join("  ")
        );
        if self.stray_bytes > 0 || self.close_headers > 0 {
            let _ = writeln!(
                s,
                "anomalies: {} stray bytes after responses, {} responses with Connection: close",
                self.stray_bytes, self.close_headers
            );
        }
        for (label, check) in [
            ("before soak", &self.idle_before),
            ("after soak", &self.idle_after),
        ] {
            if let Some(check) = check {
                let _ = writeln!(
                    s,
                    "idle {label}: {} context switches over {} with no connections ({})",
                    check.total(),
                    humantime::format_duration(check.span),
                    check
                        .threads
                        .iter()
                        .map(|t| format!(
                            "{}[{}] vol {} invol {}",
                            t.name, t.tid, t.voluntary, t.involuntary
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        for e in &self.errors {
            let _ = writeln!(s, "error:     {e}");
        }
        s
    }

    fn json(&self) -> String {
        let num = |v: Option<f64>| v.map_or_else(|| "null".to_string(), |v| format!("{v:.3}"));
        let int = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
        let idle = |c: &Option<IdleCheck>| {
            c.as_ref().map_or_else(
                || "null".to_string(),
                |c| {
                    let threads = c
                        .threads
                        .iter()
                        .map(|t| {
                            format!(
                                "{{\"tid\":{},\"name\":\"{}\",\"voluntary\":{},\"involuntary\":{}}}",
                                t.tid,
                                json_escape(&t.name),
                                t.voluntary,
                                t.involuntary
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    format!("{{\"seconds\":{:.3},\"total\":{},\"threads\":[{threads}]}}", c.span.as_secs_f64(), c.total())
                },
            )
        };
        let stats = self.stats();
        let lateness = stats
            .iter()
            .map(|(name, v)| format!("\"{name}\":{}", num(*v)))
            .collect::<Vec<_>>()
            .join(",");
        let errors = self
            .errors
            .iter()
            .map(|e| format!("\"{}\"", json_escape(e)))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            concat!(
                "{{\"connections\":{},\"addr\":\"{}\",\"batch\":{},\"expect_timeout_ms\":{:.3},\"grace_ms\":{:.3},",
                "\"server_pid\":{},\"server_command\":{},\"open_ms\":{:.3},\"answered\":{},\"failed\":{},",
                "\"closed\":{},\"resets\":{},\"early\":{},\"early_vs_request\":{},\"request_to_response_max_ms\":{},",
                "\"kernel_stamps\":{},\"early_vs_wakeup\":{},\"receive_lag_max_ms\":{},",
                "\"not_closed\":{},\"lateness_ms\":{{{}}},",
                "\"rss_before\":{},\"rss_idle\":{},\"rss_closed\":{},\"rss_bytes_per_idle_connection\":{},",
                "\"closed_before_rss_sample\":{},\"stray_bytes\":{},\"connection_close_headers\":{},",
                "\"idle_before\":{},\"idle_after\":{},\"errors\":[{}]}}"
            ),
            self.n,
            self.addr,
            self.batch,
            self.expect.as_secs_f64() * 1e3,
            self.grace.as_secs_f64() * 1e3,
            int(self.pid.map(u64::from)),
            self.command
                .as_ref()
                .map_or_else(|| "null".to_string(), |c| format!("\"{}\"", json_escape(c))),
            self.open_ms,
            self.responded,
            self.failed,
            self.closed,
            self.resets,
            self.early,
            self.early_vs_request,
            num(self.request_to_response_max),
            self.kernel_stamps,
            self.early_vs_wakeup,
            num(self.receive_lag_max),
            self.not_closed,
            lateness,
            int(self.rss_before),
            int(self.rss_after),
            int(self.rss_closed),
            num(self.rss_per_conn()),
            self.closed_before_sample,
            self.stray_bytes,
            self.close_headers,
            idle(&self.idle_before),
            idle(&self.idle_after),
            errors,
        )
    }

    /// The lateness histogram: bars per bin, axes in ms and connections,
    /// markers at 0 (the expected timeout), p50 and p99.
    fn svg(&self) -> String {
        const W: f64 = 960.0;
        const H: f64 = 540.0;
        const LEFT: f64 = 80.0;
        const RIGHT: f64 = 30.0;
        const TOP: f64 = 70.0;
        const BOTTOM: f64 = 70.0;
        let plot_w = W - LEFT - RIGHT;
        let plot_h = H - TOP - BOTTOM;
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        let stats = self.stats();
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Arial, sans-serif">"#
        );
        let _ = writeln!(s, r##"<rect width="{W}" height="{H}" fill="#ffffff"/>"##);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="28" font-size="18" text-anchor="middle" font-weight="bold">Idle keep-alive close lateness: N={} connections, expected timeout {}</text>"#,
            W / 2.0,
            self.n,
            humantime::format_duration(self.expect)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="52" font-size="14" text-anchor="middle">closed {}/{}, early {}, not closed {}; ms: {}</text>"#,
            W / 2.0,
            self.closed,
            self.responded,
            self.early,
            self.not_closed,
            stats
                .iter()
                .map(|(name, v)| format!("{name} {}", ms(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (Some(&min), Some(&max)) = (self.lateness.first(), self.lateness.last()) else {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="16" text-anchor="middle">no connection closed</text>"#,
                W / 2.0,
                H / 2.0
            );
            s.push_str("</svg>\n");
            return s;
        };
        // Bins: a 1-2-5 width giving about 60 bins over [min(min, 0), max].
        let lo_raw = min.min(0.0);
        let width = nice_step((max - lo_raw).max(0.001) / 60.0);
        let lo = (lo_raw / width).floor() * width;
        let bins = (((max - lo) / width).floor() as usize + 1).max(1);
        let hi = lo + bins as f64 * width;
        let mut counts = vec![0usize; bins];
        for &v in &self.lateness {
            counts[(((v - lo) / width).floor() as usize).min(bins - 1)] += 1;
        }
        let peak = counts.iter().copied().max().unwrap_or(1).max(1);
        let y_step = nice_step(peak as f64 / 5.0).max(1.0);
        let y_top = (peak as f64 / y_step).ceil() * y_step;
        let x_of = |v: f64| LEFT + (v - lo) / (hi - lo) * plot_w;
        let y_of = |c: f64| TOP + plot_h - c / y_top * plot_h;

        // Grid and y axis labels.
        let mut tick = 0.0;
        while tick <= y_top + 1e-9 {
            let y = y_of(tick);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 8.0,
                y + 4.0,
                tick as u64
            );
            tick += y_step;
        }
        // Bars.
        for (i, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let x0 = x_of(lo + i as f64 * width);
            let x1 = x_of(lo + (i + 1) as f64 * width);
            let y = y_of(count as f64);
            let fill = if lo + (i + 1) as f64 * width <= 0.0 {
                "#d62728"
            } else {
                "#1f77b4"
            };
            let _ = writeln!(
                s,
                r##"<rect x="{x0:.2}" y="{y:.2}" width="{:.2}" height="{:.2}" fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>[{:.3}, {:.3}) ms: {count}</title></rect>"##,
                (x1 - x0).max(0.5),
                TOP + plot_h - y,
                lo + i as f64 * width,
                lo + (i + 1) as f64 * width
            );
        }
        // X axis ticks: a 1-2-5 step giving about 10 labels.
        let x_step = nice_step((hi - lo) / 10.0);
        let decimals = decimals_for(x_step);
        let mut v = (lo / x_step).ceil() * x_step;
        while v <= hi + x_step * 1e-6 {
            let x = x_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000000"/><text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle">{:.*}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 6.0,
                TOP + plot_h + 22.0,
                decimals,
                if v.abs() < x_step * 1e-6 { 0.0 } else { v }
            );
            v += x_step;
        }
        // Axes.
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#000000"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000000"/>"##,
            TOP + plot_h,
            TOP + plot_h,
            LEFT + plot_w,
            TOP + plot_h
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="14" text-anchor="middle">close lateness: time from last response byte to EOF, minus {} (ms); bin {} ms</text>"#,
            LEFT + plot_w / 2.0,
            H - 18.0,
            humantime::format_duration(self.expect),
            fmt_trim(width)
        );
        let _ = writeln!(
            s,
            r#"<text x="20" y="{:.1}" font-size="14" text-anchor="middle" transform="rotate(-90 20 {:.1})">connections</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0
        );
        // Markers.
        let mut markers = vec![
            ("p50", stats[1].1, "#2ca02c"),
            ("p99", stats[2].1, "#ff7f0e"),
        ];
        if lo < 0.0 {
            markers.push(("timeout", Some(0.0), "#d62728"));
        }
        for (k, (label, value, color)) in markers.into_iter().enumerate() {
            let Some(value) = value else { continue };
            let x = x_of(value);
            let _ = writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" font-size="12" fill="{color}">{label} {value:.3}</text>"#,
                TOP + plot_h,
                x + 4.0,
                TOP + 14.0 + 16.0 * k as f64
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The smallest 1, 2 or 5 times a power of ten that is >= `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let base = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * base)
}

/// Decimals needed to print multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    (-step.log10().floor()).max(0.0) as usize
}

fn fmt_trim(v: f64) -> String {
    format!("{v:.*}", decimals_for(v))
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}
