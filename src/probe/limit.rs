//! The request limit: sequential requests on one connection until the
//! server closes it (after a `Connection: close` or silently) or
//! `--max-requests` is reached. Blocking I/O with `--timeout` on every
//! connect, read and write, on its own thread beside the idle measurement.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::failure::Failure;
use super::target::Target;
use crate::measure::response::{Fed, ResponseReader};

/// How many requests the server answered on one connection before closing
/// it; `None` when it answered all `max` and kept the connection.
pub fn max_requests(target: &Target, max: u32, timeout: Duration) -> Result<Option<u32>, Failure> {
    let fail = |what: &str, e: io::Error| Failure::Server(format!("{} ({what}): {e}", target.url));
    let mut stream = TcpStream::connect_timeout(&target.addr, timeout)
        .map_err(|e| fail("request limit, connect", e))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| fail("request limit", e))?;
    let mut reader = ResponseReader::new(target.head_request);
    let mut chunk = vec![0u8; 16 * 1024];
    for answered in 0..max {
        if let Err(e) = stream.write_all(&target.request) {
            return closed_or(answered, e, |e| fail("request limit, write", e));
        }
        reader.reset();
        loop {
            let n = match stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return closed_or(answered, e, |e| fail("request limit, read", e)),
            };
            if n == 0 {
                if answered > 0 && !reader.started() {
                    return Ok(Some(answered));
                }
                reader
                    .eof()
                    .map_err(|e| Failure::Server(format!("{} (request limit): {e}", target.url)))?;
                return Ok(Some(answered + 1));
            }
            match reader.feed(&chunk[..n]) {
                Ok(Fed::Partial) => {}
                Ok(Fed::Done { .. }) => break,
                Err(e) => return Err(Failure::Server(format!("{}: {e}", target.url))),
            }
        }
        if reader.head().is_some_and(|head| !head.persistent()) {
            return Ok(Some(answered + 1));
        }
    }
    Ok(None)
}

/// A reset after at least one answer is the server closing; else an error.
fn closed_or(
    answered: u32,
    e: io::Error,
    fail: impl FnOnce(io::Error) -> Failure,
) -> Result<Option<u32>, Failure> {
    let reset = matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    );
    if reset && answered > 0 {
        Ok(Some(answered))
    } else {
        Err(fail(e))
    }
}
