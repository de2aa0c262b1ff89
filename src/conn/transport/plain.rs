//! The plain transport: the socket itself. A flush writes the output and
//! a generated body behind it in one `writev` (or the body by `sendfile`),
//! and holds the last segment for the FIN when the close follows.

use std::io::{IoSlice, Read, Write};
use std::time::SystemTime;

use mio::net::TcpStream;

use super::{Flushed, GENERATE_BUDGET, Generated, Got, Outgoing, Socket, WatchEnd, Watched};
use crate::readiness::{interrupted, would_block};
use crate::rx_stamps;
use std::io;

/// What a watched connection reads into and drops, on the stack.
const WATCH_SINK: usize = 2048;

pub(super) fn read(stream: &mut TcpStream, into: &mut [u8]) -> io::Result<Got> {
    Ok(got(stream.read(into)?, into.len()))
}

/// A read that also asks when its first bytes reached the socket: one
/// `recvmsg` on a socket whose stamps are on (the worker keeps the kernel
/// stamping every segment, so what was queued before has its stamp too).
pub(super) fn read_stamped(
    stream: &mut TcpStream,
    into: &mut [u8],
) -> io::Result<(Got, Option<SystemTime>)> {
    let mut control = [0u8; rx_stamps::CONTROL_LEN];
    let (n, stamp) = rx_stamps::recv_stamped(stream, into, &mut control)?;
    Ok((got(n, into.len()), stamp))
}

/// `n` bytes read where there was room for `asked`.
fn got(n: usize, asked: usize) -> Got {
    match n {
        0 => Got::Eof,
        n => Got::Data {
            n,
            short: n < asked,
        },
    }
}

/// Writes queued output until it is all sent or the socket is full.
///
/// `closes_next`: the connection closes right after this flush. Its
/// writes then go with MSG_MORE, so the kernel holds the last segment
/// back and the close sends the FIN in it: one segment (and one ACK)
/// fewer per one-request connection. The close pushes whatever is held.
///
/// A generated body owed behind the output goes in the same writes, as
/// slices of its source after what the output holds (one `writev`, no
/// copy), at most [`GENERATE_BUDGET`] of them per pass.
///
/// When its source is a file, the body goes by `sendfile` after the head
/// (sent with MSG_MORE so both share segments): the kernel copies from
/// its own pages, and this process not at all.
pub(super) fn flush(mut socket: Socket<'_>, out: &mut Outgoing<'_>) -> io::Result<Flushed> {
    let mut wrote = false;
    let mut generated_writes = 0;
    let stream = socket.stream;
    let Some(output) = out.output.as_deref_mut() else {
        return Ok(Flushed::All { wrote });
    };
    loop {
        let pending = output.pending();
        let generated = out.generated.as_mut().filter(|g| !g.is_done());
        if pending == 0 && generated.is_none() {
            return Ok(Flushed::All { wrote });
        }
        let sent = if let Some(generated) = generated {
            if generated_writes == GENERATE_BUDGET {
                return Ok(Flushed::Yielded);
            }
            generated_writes += 1;
            // Its writes follow one another: without Nagle, the last
            // short segment need not wait for the previous one's ACK.
            socket.disable_nagle();
            match generated.sends_file() {
                true if pending > 0 => send_more(stream, output.unsent()),
                true => generated.send_file(stream),
                false => {
                    let mut iov = [IoSlice::new(&[]); 1 + Generated::MAX_SLICES];
                    iov[0] = IoSlice::new(output.unsent());
                    let slices = generated.slices(&mut iov[1..]);
                    (&*stream).write_vectored(&iov[..1 + slices])
                }
            }
        } else if out.closes_next {
            send_more(stream, output.unsent())
        } else {
            (&*stream).write(output.unsent())
        };
        match sent {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                let from_output = n.min(pending);
                output.advance(from_output);
                if let Some(generated) = out.generated.as_mut() {
                    generated.sent(n - from_output);
                }
                *socket.moved = true;
                wrote = true;
            }
            Err(e) if would_block(&e) => return Ok(Flushed::Blocked),
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

/// A write the kernel may hold for what follows (MSG_MORE), never SIGPIPE.
fn send_more(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    socket2::SockRef::from(stream).send_with_flags(bytes, libc::MSG_MORE | libc::MSG_NOSIGNAL)
}

/// Reads and drops what arrives, at most `budget` times: a request's
/// bytes, then maybe the peer's FIN (both are told, in that order), and
/// when the first of those bytes reached the socket by the kernel's
/// receive stamp (if the watch asked for stamps, see
/// [`super::Transport::stamp_arrivals`]). Only that first read is a
/// `recvmsg`.
pub(super) fn watch(stream: &mut TcpStream, budget: u32) -> (Watched, Option<SystemTime>) {
    let mut sink = [0u8; WATCH_SINK];
    let mut control = [0u8; rx_stamps::CONTROL_LEN];
    let mut request = false;
    let mut arrived = None;
    for _ in 0..budget {
        let read = match request {
            false => rx_stamps::recv_stamped(stream, &mut sink, &mut control),
            true => stream.read(&mut sink).map(|n| (n, None)),
        };
        let end = match read {
            Ok((0, _)) => WatchEnd::Closed,
            Ok((_, stamp)) => {
                arrived = arrived.or(stamp);
                request = true;
                continue;
            }
            Err(e) if would_block(&e) => WatchEnd::Drained,
            Err(e) if interrupted(&e) => continue,
            Err(_) => WatchEnd::Closed,
        };
        return (Watched { request, end }, arrived);
    }
    let more = Watched {
        request,
        end: WatchEnd::More,
    };
    (more, arrived)
}
