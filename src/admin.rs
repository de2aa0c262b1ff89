//! The opt-in admin listener (`--admin ADDR`): a small blocking HTTP/1.1
//! server on its own thread, one request per connection.
//!
//! - `GET /metrics`: Prometheus text exposition, series prefixed `kas_`.
//! - `GET /timers`: JSON per worker: each timer list (duration, length,
//!   ref'd timers, ms to its next expiry), the ref count and the cached Date:
//!   the "active handles" view.
//! - `GET /healthz`: 200 while accepting, 503 once shutting down.
//!
//! It reads workers only through [`Remote`]: counters directly, everything
//! else by asking each worker for a snapshot at its next loop turn.

use std::fmt::{Display, Write as _};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::introspect::{ConnCounts, Snapshot};
use crate::server::Remote;
use crate::stats::{CloseCause, Stats};

const READ_TIMEOUT: Duration = Duration::from_secs(2);
const SNAPSHOT_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_REQUEST: usize = 8 * 1024;

/// Binds the admin listener and serves it on a thread of its own.
pub fn spawn(addr: SocketAddr, remote: Remote) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let thread = std::thread::Builder::new()
        .name("admin".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => {
                        if let Err(e) = serve(stream, &remote) {
                            tracing::debug!(error = %e, "admin request failed");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "admin accept failed");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
    Ok((local, thread))
}

fn serve(mut stream: TcpStream, remote: &Remote) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let (path, head) = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&request) {
            Ok(httparse::Status::Complete(_)) => {
                let method = parsed.method.unwrap_or_default();
                let path = parsed.path.unwrap_or_default();
                break if method == "GET" || method == "HEAD" {
                    (path.to_owned(), method == "HEAD")
                } else {
                    (String::new(), false)
                };
            }
            Ok(httparse::Status::Partial) if request.len() < MAX_REQUEST => {}
            _ => {
                return respond(
                    &mut stream,
                    false,
                    "400 Bad Request",
                    "text/plain",
                    "bad request\n",
                );
            }
        }
    };
    let path = path.split('?').next().unwrap_or_default();
    let (status, content_type, body) = match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4",
            metrics(remote, &remote.snapshots(SNAPSHOT_TIMEOUT)),
        ),
        "/timers" => (
            "200 OK",
            "application/json",
            timers_json(remote, &remote.snapshots(SNAPSHOT_TIMEOUT)),
        ),
        "/healthz" if remote.is_stopping() => {
            ("503 Service Unavailable", "text/plain", "stopping\n".into())
        }
        "/healthz" => ("200 OK", "text/plain", "ok\n".into()),
        "" => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
        _ => (
            "404 Not Found",
            "text/plain",
            "try /metrics, /timers or /healthz\n".into(),
        ),
    };
    respond(&mut stream, head, status, content_type, &body)
}

/// Writes one response and closes; a HEAD response carries the headers only.
fn respond(
    stream: &mut TcpStream,
    head: bool,
    status: &str,
    content_type: &str,
    body: &str,
) -> io::Result<()> {
    let head_text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head_text.as_bytes())?;
    if !head {
        stream.write_all(body.as_bytes())?;
    }
    stream.shutdown(std::net::Shutdown::Write)
}

/// The Prometheus text exposition: counters summed over workers, gauges
/// over their snapshots.
pub fn metrics(remote: &Remote, snapshots: &[Snapshot]) -> String {
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    let sum = |read: &dyn Fn(&Stats) -> u64| remote.stats().map(read).sum::<u64>();
    let state =
        |pick: fn(&ConnCounts) -> u64| snapshots.iter().map(|s| pick(&s.connections)).sum::<u64>();
    let accepted = sum(&|s| s.accepted.load(relaxed));
    let by_class: Vec<(String, u64)> = (1..=5)
        .map(|class| {
            (
                format!("class=\"{class}xx\""),
                sum(&|s| s.responses_in_class(class)),
            )
        })
        .collect();
    let requests: u64 = by_class.iter().map(|(_, count)| count).sum();
    let per_connection = if accepted == 0 {
        0.0
    } else {
        requests as f64 / accepted as f64
    };

    let mut out = String::new();
    family(
        &mut out,
        "kas_connections",
        "gauge",
        "Open connections by state.",
        [
            ("state=\"reading\"", state(|c| c.reading)),
            ("state=\"writing\"", state(|c| c.writing)),
            ("state=\"idle\"", state(|c| c.idle)),
            ("state=\"closing\"", state(|c| c.closing)),
        ],
    );
    family(
        &mut out,
        "kas_connections_accepted_total",
        "counter",
        "Connections accepted.",
        [("", accepted)],
    );
    family(
        &mut out,
        "kas_connections_refused_total",
        "counter",
        "Connections refused at --max-connections with none idle to evict.",
        [("", sum(&|s| s.refused.load(relaxed)))],
    );
    family(
        &mut out,
        "kas_connections_closed_total",
        "counter",
        "Connections closed, by cause.",
        CloseCause::ALL.map(|cause| {
            (
                format!("cause=\"{}\"", cause.label()),
                sum(&|s| s.closed_by(cause)),
            )
        }),
    );
    family(
        &mut out,
        "kas_requests_total",
        "counter",
        "Responses sent, by status class.",
        by_class,
    );
    family(
        &mut out,
        "kas_keepalive_reused_requests_total",
        "counter",
        "Requests served on a connection that had served one before.",
        [("", sum(&|s| s.reused.load(relaxed)))],
    );
    family(
        &mut out,
        "kas_requests_per_connection",
        "gauge",
        "Requests served per accepted connection (keep-alive reuse).",
        [("", format!("{per_connection:.3}"))],
    );
    let total = |pick: fn(&Snapshot) -> usize| snapshots.iter().map(pick).sum::<usize>();
    family(
        &mut out,
        "kas_timer_lists",
        "gauge",
        "Timer lists (one per distinct duration).",
        [("", total(|s| s.lists.len()))],
    );
    family(
        &mut out,
        "kas_timers",
        "gauge",
        "Timers enrolled in all lists.",
        [("", total(|s| s.timers))],
    );
    family(
        &mut out,
        "kas_timers_refed",
        "gauge",
        "Ref'd timers: what keeps a draining server alive.",
        [("", total(|s| s.ref_count))],
    );
    out
}

/// One metric family: its `# HELP` and `# TYPE` lines, then a sample per
/// `(labels, value)` (labels as `key="value"`, empty for none).
fn family<L: Display, V: Display>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, V)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        let labels = labels.to_string();
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// The `/timers` JSON document.
pub fn timers_json(remote: &Remote, snapshots: &[Snapshot]) -> String {
    let mut out = String::from("{\"stopping\":");
    let _ = write!(out, "{},\"workers\":[", remote.is_stopping());
    for (i, snapshot) in snapshots.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let c = &snapshot.connections;
        let _ = write!(
            out,
            "{{\"worker\":{},\"accepting\":{},\"ref_count\":{},\"timers\":{},\"date\":{},\
             \"connections\":{{\"reading\":{},\"writing\":{},\"idle\":{},\"closing\":{}}},\"lists\":[",
            snapshot.worker,
            snapshot.accepting,
            snapshot.ref_count,
            snapshot.timers,
            snapshot
                .date
                .as_deref()
                .map_or("null".to_string(), |d| format!("\"{d}\"")),
            c.reading,
            c.writing,
            c.idle,
            c.closing,
        );
        for (j, list) in snapshot.lists.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "{{\"duration_ms\":{},\"length\":{},\"refed\":{},\"refed_timers\":{},\"next_expiry_in_ms\":{}}}",
                list.duration_ms,
                list.len,
                list.refed > 0,
                list.refed,
                list.next_expiry_in_ms
            );
        }
        out.push_str("]}");
    }
    out.push_str("]}\n");
    out
}
