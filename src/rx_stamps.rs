//! Kernel receive timestamps (Linux SO_TIMESTAMPNS): the time the segment
//! reached the socket, independent of when this loop got round to it.
//! Enabling them, reading data with its stamp (`recvmsg` and its
//! SCM_TIMESTAMPNS control message, through nix), and moving the stamp
//! onto the `Instant` timeline. Both sides use them: the measuring client
//! (`measure`, the probe and tools/kas-soak) reads every response this
//! way; the serving path (`conn`) stamps only where microseconds decide a
//! verdict. It reads with the stamp a request that reuses an idle
//! connection near the end of its keep-alive promise (`conn::reuse`: was
//! it inside the promise, or before the deadline?), and the first bytes a
//! peer sends after the server's idle FIN (the watch, `conn::watch`: did
//! the request cross the FIN?). Its other reads are plain ones.
//!
//! What they buy shows in kas-soak's report (the closes a poll-time stamp
//! would call early): a stamp taken when poll returns trails the true
//! arrival by however long the loop was busy, several ms with 200
//! connections opening at once.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use nix::sys::time::TimeSpec;

/// Asks the kernel to stamp every segment received on `socket`
/// (SO_TIMESTAMPNS).
pub fn enable(socket: &impl AsFd) -> io::Result<()> {
    setsockopt(socket, sockopt::ReceiveTimestampns, &true)?;
    Ok(())
}

/// How long the kernel may take to switch stamping on after the first
/// socket asks for it (it does so from a work queue).
pub const SWITCH_ON_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// A socket that holds the kernel's receive stamping switched on while it
/// lives. Linux stamps packets only while some socket wants stamps, and
/// turns that on (and off, when the last one closes) from a work queue:
/// without this, the first responses after a quiet spell may arrive
/// unstamped. A bound, unconnected UDP socket: nothing is sent.
pub fn hold_switched_on() -> Option<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
    enable(&socket).ok()?;
    Some(socket)
}

/// Room for the one control message a stamped read brings, as a heap
/// buffer (the probe keeps one per connection).
pub fn control_buffer() -> Vec<u8> {
    nix::cmsg_space!(TimeSpec)
}

/// The same room on the stack, for a read that keeps no buffer (the
/// server's stamped reads, near the promise's end and in the watch after
/// an idle FIN): one `SCM_TIMESTAMPNS` message is 32 bytes on 64-bit
/// Linux; this leaves twice that.
pub const CONTROL_LEN: usize = 64;

/// One `recvmsg` into `data` (`control` from [`control_buffer`]): bytes
/// read and the kernel receive time (wall clock, CLOCK_REALTIME), if the
/// socket asked for stamps and the kernel had stamping on when the first
/// of them arrived.
pub fn recv_stamped(
    socket: &impl AsFd,
    data: &mut [u8],
    control: &mut [u8],
) -> io::Result<(usize, Option<SystemTime>)> {
    let mut iov = [IoSliceMut::new(data)];
    let fd = socket.as_fd().as_raw_fd();
    let msg = recvmsg::<()>(fd, &mut iov, Some(control), MsgFlags::empty())?;
    let stamp = msg.cmsgs()?.find_map(|cmsg| match cmsg {
        ControlMessageOwned::ScmTimestampns(stamp) => wall_time(stamp),
        _ => None,
    });
    Ok((msg.bytes, stamp))
}

/// A kernel receive stamp as wall-clock time.
fn wall_time(stamp: TimeSpec) -> Option<SystemTime> {
    let secs = u64::try_from(stamp.tv_sec()).ok()?;
    let nanos = u32::try_from(stamp.tv_nsec()).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// When poll returned, on both clocks: kernel receive stamps are wall-clock
/// times, and are moved onto the monotonic timeline through this pair.
#[derive(Clone, Copy)]
pub struct Seen {
    pub at: Instant,
    wall: SystemTime,
}

/// Two monotonic reads further apart than this around the wall-clock read
/// mean the thread was preempted between them: the pair is read again.
const PAIR_WITHIN: Duration = Duration::from_micros(200);

impl Seen {
    /// Both clocks, read back to back. A preemption between the two reads
    /// would shift every stamp mapped through the pair by its length (a
    /// stall of the probe would lengthen the idle times it measures), so a
    /// pair read across one is read again (a few times at most).
    pub fn now() -> Seen {
        let mut best: Option<(Duration, Seen)> = None;
        for _ in 0..4 {
            let at = Instant::now();
            let wall = SystemTime::now();
            let gap = at.elapsed();
            if best.as_ref().is_none_or(|(least, _)| gap < *least) {
                best = Some((gap, Seen { at, wall }));
            }
            if gap <= PAIR_WITHIN {
                break;
            }
        }
        best.map(|(_, seen)| seen).unwrap_or(Seen {
            at: Instant::now(),
            wall: SystemTime::now(),
        })
    }

    /// The `Instant` at which the wall clock read `wall`.
    pub fn instant_of(&self, wall: SystemTime) -> Instant {
        match self.wall.duration_since(wall) {
            Ok(ago) => self.at.checked_sub(ago).unwrap_or(self.at),
            // Received after this wake-up (read later in the same pass).
            Err(after) => self.at + after.duration(),
        }
    }
}

/// Receive buffers for `recvmsg`: data, and control for the timestamp.
/// One per event loop, shared by all its connections.
pub struct Scratch {
    data: Vec<u8>,
    control: Vec<u8>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            data: vec![0; 4096],
            control: control_buffer(),
        }
    }

    /// One `recvmsg`: bytes read and the kernel receive time, if stamped.
    pub fn recv(&mut self, stream: &impl AsFd) -> io::Result<(usize, Option<SystemTime>)> {
        recv_stamped(stream, &mut self.data, &mut self.control)
    }

    /// The first `n` bytes of the last `recv`.
    pub fn data(&self, n: usize) -> &[u8] {
        &self.data[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_control_buffer_holds_a_stamp() {
        assert!(control_buffer().len() <= CONTROL_LEN);
    }
}
