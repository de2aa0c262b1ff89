//! Kernel receive timestamps (Linux SO_TIMESTAMPNS): the time the segment
//! reached the socket, independent of when this loop got round to it.
//! Enabling them, reading data with its stamp (`recvmsg`), and moving the
//! stamp onto the `Instant` timeline.
//!
//! Neither socket2 nor rustix exposes SO_TIMESTAMPNS or its control
//! message, hence the two small `unsafe` blocks below. What they buy shows in
//! kas-soak's report (the closes a poll-time stamp would call early): a
//! stamp taken when poll returns trails the true arrival by however long
//! the loop was busy, several ms with 200 connections opening at once.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant, SystemTime};

use socket2::{MaybeUninitSlice, MsgHdrMut, SockRef};

/// Asks the kernel to stamp every segment received on `socket`
/// (SO_TIMESTAMPNS; the control message type SCM_TIMESTAMPNS is the same
/// number).
pub fn enable(socket: &impl AsRawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `socket` is an open descriptor for the duration of the call,
    // and the value is a live, aligned c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS && data.len() >= 16 {
            let secs = i64::from_ne_bytes(data[..8].try_into().ok()?);
            let nanos = i64::from_ne_bytes(data[8..16].try_into().ok()?);
            let since_epoch = Duration::new(u64::try_from(secs).ok()?, u32::try_from(nanos).ok()?);
            return SystemTime::UNIX_EPOCH.checked_add(since_epoch);
        }
        at += align(len);
    }
    None
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
    data: Vec<MaybeUninit<u8>>,
    control: Vec<MaybeUninit<u8>>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Scratch {
    pub fn new() -> Scratch {
        // Zero-filled, so every byte is initialized from the start.
        Scratch {
            data: vec![MaybeUninit::new(0); 4096],
            control: vec![MaybeUninit::new(0); 256],
        }
    }

    /// One `recvmsg`: bytes read and the kernel receive time, if stamped.
    pub fn recv(&mut self, stream: &impl AsFd) -> io::Result<(usize, Option<SystemTime>)> {
        let socket = SockRef::from(stream);
        let mut bufs = [MaybeUninitSlice::new(&mut self.data)];
        let mut msg = MsgHdrMut::new()
            .with_buffers(&mut bufs)
            .with_control(&mut self.control);
        let n = socket.recvmsg(&mut msg, 0)?;
        let control_len = msg.control_len();
        let stamp = parse(init(&self.control[..control_len]));
        Ok((n, stamp))
    }

    /// The first `n` bytes of the last `recv`.
    pub fn data(&self, n: usize) -> &[u8] {
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
