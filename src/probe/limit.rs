//! The request limit and the round trip: sequential requests on one
//! connection until the server closes it (after a `Connection: close` or
//! silently) or the count is reached, each timed from its write to the end
//! of its response. The fastest request after the first (on a warm
//! keep-alive connection: no handshake, no worker to start) is the round
//! trip the advice allows for. Blocking I/O on its own thread beside the
//! idle measurement, `--timeout` bounding the connect and each request's
//! whole exchange (the socket's read timeout is set to what is left before
//! every read, so a server that trickles its response cannot stretch it);
//! over TLS through a rustls stream (its handshake is the first request's
//! cost, not the round trip's).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::failure::{self, Failure};
use super::target::Target;
use crate::measure::response::{Fed, ResponseReader};

/// Requests sent for the round trip when the limit is not measured.
pub const ROUND_TRIP_REQUESTS: u32 = 6;

/// What the sequential requests showed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// Requests answered before the server closed the connection; `None`
    /// when it answered all and kept it.
    pub max_requests: Option<u32>,
    /// The fastest request on the warm connection, ms.
    pub round_trip_ms: Option<f64>,
    /// Requests that timed it.
    pub round_trips: u32,
}

/// Sends up to `max` requests on one connection.
pub fn measure(target: &Target, max: u32, timeout: Duration) -> Result<Limit, Failure> {
    let fail = |what: &str, e: io::Error| {
        let why = (target.tls.as_ref())
            .and_then(|tls| tls.explain_io(&e))
            .unwrap_or_else(|| e.to_string());
        Failure::Server(format!("{} ({what}): {why}", target.url))
    };
    let tcp = TcpStream::connect_timeout(&target.addr, timeout)
        .map_err(|e| fail("request limit, connect", e))?;
    let _ = tcp.set_nodelay(true);
    tcp.set_write_timeout(Some(timeout))
        .map_err(|e| fail("request limit", e))?;
    // The same socket, to set its read timeout under the TLS stream.
    let control = tcp.try_clone().map_err(|e| fail("request limit", e))?;
    let mut stream: Box<dyn Stream> = match &target.tls {
        None => Box::new(tcp),
        Some(tls) => {
            let client = tls
                .connection()
                .map_err(|e| fail("request limit, TLS", e))?;
            Box::new(rustls::StreamOwned::new(client, tcp))
        }
    };
    let mut reader = ResponseReader::new(target.head_request);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut limit = Limit {
        max_requests: None,
        round_trip_ms: None,
        round_trips: 0,
    };
    for answered in 0..max {
        let asked = Instant::now();
        let deadline = asked + timeout;
        let overdue = |reader: &ResponseReader| {
            let why = failure::overdue(timeout, reader.unfinished());
            Failure::Server(format!("{} (request limit): {why}", target.url))
        };
        if let Err(e) = control.set_read_timeout(Some(timeout)) {
            return Err(fail("request limit", e));
        }
        if let Err(e) = stream.write_all(&target.request) {
            return closed_or(limit, answered, e, |e| fail("request limit, write", e));
        }
        reader.reset();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(overdue(&reader));
            }
            if let Err(e) = control.set_read_timeout(Some(left)) {
                return Err(fail("request limit", e));
            }
            let n = match stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if timed_out(&e) => return Err(overdue(&reader)),
                // TLS: the server closed without close_notify.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return closed_or(limit, answered, e, |e| fail("request limit, read", e));
                }
            };
            if n == 0 {
                if answered > 0 && !reader.started() {
                    limit.max_requests = Some(answered);
                    return Ok(limit);
                }
                reader
                    .eof()
                    .map_err(|e| Failure::Server(format!("{} (request limit): {e}", target.url)))?;
                limit.max_requests = Some(answered + 1);
                return Ok(limit);
            }
            match reader.feed(&chunk[..n]) {
                Ok(Fed::Partial) => {}
                Ok(Fed::Done { .. }) => break,
                Err(e) => return Err(Failure::Server(format!("{}: {e}", target.url))),
            }
        }
        if answered > 0 {
            let ms = asked.elapsed().as_secs_f64() * 1e3;
            limit.round_trip_ms = Some(limit.round_trip_ms.map_or(ms, |least| least.min(ms)));
            limit.round_trips += 1;
        }
        if reader.head().is_some_and(|head| !head.persistent()) {
            limit.max_requests = Some(answered + 1);
            return Ok(limit);
        }
    }
    Ok(limit)
}

/// A blocking read that ran into the socket's read timeout.
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A connection to the server, plain or TLS.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// A reset after at least one answer is the server closing; else an error.
fn closed_or(
    mut limit: Limit,
    answered: u32,
    e: io::Error,
    fail: impl FnOnce(io::Error) -> Failure,
) -> Result<Limit, Failure> {
    let reset = matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    );
    if reset && answered > 0 {
        limit.max_requests = Some(answered);
        Ok(limit)
    } else {
        Err(fail(e))
    }
}
