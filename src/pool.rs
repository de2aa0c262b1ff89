//! Per-worker pool of connection buffers.
//!
//! A connection borrows a [`Buffers`] (input, output and body buffers plus
//! the state of the request in progress) while it has something to do and
//! gives it back the moment it goes idle, so an idle keep-alive connection
//! holds no heap buffer at all. Most connections read, answer and go idle
//! within one readiness event, so a busy worker cycles the same few buffers.
//!
//! The pool keeps at most [`MAX_POOLED`] spare sets: what comes back beyond
//! that is freed, and counted ([`BufferPool::take_released`]) so the worker
//! can hand the memory back to the system once a burst is over.

use crate::access_log::AccessRecord;
use crate::in_flight::InFlight;
use crate::upstream::UpstreamLink;

/// Initial input buffer size; it grows up to the head limit when a head needs it.
const INPUT_START: usize = 4096;
/// Buffers that grew past this are shrunk before going back to the pool.
const KEEP_CAPACITY: usize = 64 * 1024;
/// How many spare buffer sets a worker keeps (each at most a few tens of
/// KiB): enough for the connections busy at once in one turn.
pub const MAX_POOLED: usize = 64;

/// Received bytes not yet consumed: `buf[start..end]`. `buf` stays fully
/// initialised (`len == capacity`), so reading into it needs no zeroing.
#[derive(Debug)]
pub struct Input {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for Input {
    fn default() -> Self {
        Self::new()
    }
}

impl Input {
    pub fn new() -> Self {
        Input {
            buf: vec![0; INPUT_START],
            start: 0,
            end: 0,
        }
    }

    /// The unconsumed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len(), "consume {n} of {}", self.len());
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Bytes of room held.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Free space to read into, making room first: compacts consumed bytes
    /// away and grows up to `limit` total. Empty when the buffer holds
    /// `limit` unconsumed bytes already.
    pub fn spare(&mut self, limit: usize) -> &mut [u8] {
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() && self.buf.len() < limit {
            let grown = (self.buf.len() * 2).clamp(INPUT_START, limit.max(INPUT_START));
            self.buf.resize(grown, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Marks `n` bytes of [`Input::spare`] as received.
    pub fn filled(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }

    /// Empty, and shrunk back if it grew past what a pooled set keeps.
    pub fn reset(&mut self) {
        self.clear();
        if self.buf.len() > KEEP_CAPACITY {
            self.buf.truncate(INPUT_START);
            self.buf.shrink_to_fit();
        }
    }
}

/// Bytes to send: `buf[sent..]` is still unsent.
#[derive(Debug, Default)]
pub struct Output {
    pub buf: Vec<u8>,
    pub sent: usize,
}

impl Output {
    pub fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    pub fn unsent(&self) -> &[u8] {
        &self.buf[self.sent..]
    }

    pub fn advance(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        }
    }

    fn reset(&mut self) {
        self.buf.clear();
        self.sent = 0;
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        }
    }
}

/// How far a partial request head has been looked at, so that parsing it
/// again as it trickles in costs time linear in its size (the session's
/// `worth_parsing` decides when). All zero: nothing yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadProgress {
    /// Input bytes the last parse found to be an incomplete head.
    pub parsed: usize,
    /// Input bytes searched for the empty line that ends a head.
    pub searched: usize,
}

impl HeadProgress {
    /// The whole input was parsed and found incomplete.
    pub fn incomplete(len: usize) -> Self {
        HeadProgress {
            parsed: len,
            searched: len,
        }
    }
}

/// What a connection holds while it is not idle.
#[derive(Debug)]
pub struct Buffers {
    pub input: Input,
    pub output: Output,
    /// The request body, kept for the echo route.
    pub body: Vec<u8>,
    /// How far a partial head has been looked at.
    pub head_progress: HeadProgress,
    /// The request being answered, for the access log (only when it is on).
    pub log: AccessRecord,
    /// The request in progress, once its head is parsed, until its
    /// exchange is over.
    pub in_flight: Option<InFlight>,
    /// A forwarded exchange's link to its upstream (`--upstream`): made
    /// at the first forwarded request and kept, its buffers' room with
    /// it, as these buffers are pooled; it holds an upstream connection
    /// only while an exchange lasts.
    pub upstream: Option<Box<UpstreamLink>>,
}

impl Buffers {
    fn new() -> Self {
        Buffers {
            input: Input::new(),
            output: Output::default(),
            body: Vec::new(),
            head_progress: HeadProgress::default(),
            log: AccessRecord::default(),
            in_flight: None,
            upstream: None,
        }
    }

    /// Heap bytes held, roughly: what freeing this set gives back.
    fn footprint(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.input.buf.len()
            + self.output.buf.capacity()
            + self.body.capacity()
            + self.log.capacity()
            + self
                .upstream
                .as_ref()
                .map_or(0, |link| link.out.capacity() + link.input.capacity())
    }

    /// Whether nothing is buffered in either direction and no request is
    /// in progress: the set can go back to the pool.
    pub fn is_drained(&self) -> bool {
        self.input.is_empty() && self.output.pending() == 0 && self.in_flight.is_none()
    }

    fn reset(&mut self) {
        debug_assert!(
            self.upstream.as_ref().is_none_or(|link| link.key.is_none()),
            "buffers pooled with an upstream connection"
        );
        self.input.reset();
        self.output.reset();
        self.head_progress = HeadProgress::default();
        self.in_flight = None;
        self.log.reset();
        self.body.clear();
        if self.body.capacity() > KEEP_CAPACITY {
            self.body = Vec::new();
        }
        if let Some(link) = self.upstream.as_deref_mut() {
            link.input.reset();
            if link.out.capacity() > KEEP_CAPACITY {
                link.out = Vec::new();
            }
        }
    }
}

/// Spare [`Buffers`], reused last-in first-out.
#[derive(Debug, Default)]
pub struct BufferPool {
    // Connections hold `Box<Buffers>` (one pointer while active, none
    // idle); pooling the boxes themselves keeps take and give free of
    // allocation.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Buffers>>,
    /// Bytes freed because the pool was full, since the last
    /// [`BufferPool::take_released`].
    released: usize,
}

impl BufferPool {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn take(&mut self) -> Box<Buffers> {
        self.spare.pop().unwrap_or_else(|| Box::new(Buffers::new()))
    }

    /// Takes buffers back: kept for reuse, or freed when the pool is full.
    pub fn give(&mut self, mut buffers: Box<Buffers>) {
        if self.spare.len() < MAX_POOLED {
            buffers.reset();
            self.spare.push(buffers);
        } else {
            self.released += buffers.footprint();
        }
    }

    /// Bytes freed since the last call (buffers the full pool turned away).
    pub fn take_released(&mut self) -> usize {
        std::mem::take(&mut self.released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_compacts_then_grows_to_the_limit() {
        let mut input = Input::new();
        let room = input.spare(10_000).len();
        assert_eq!(room, INPUT_START);
        input.filled(room);
        input.consume(100);
        assert_eq!(input.spare(10_000).len(), 100, "compacted before growing");
        input.filled(100);
        let grown = input.spare(10_000).len();
        assert_eq!(grown, 8192 - INPUT_START);
        input.filled(grown);
        assert_eq!(input.spare(8192).len(), 0, "full at the limit");
    }

    #[test]
    fn pool_reuses_and_resets() {
        let mut pool = BufferPool::new();
        let mut buffers = pool.take();
        buffers.output.buf.extend_from_slice(b"abc");
        buffers.input.filled(3);
        pool.give(buffers);
        assert_eq!(pool.spare.len(), 1);
        let buffers = pool.take();
        assert!(buffers.is_drained());
        assert_eq!(pool.spare.len(), 0);
    }

    #[test]
    fn a_full_pool_frees_and_counts_what_comes_back() {
        let mut pool = BufferPool::new();
        let taken: Vec<_> = (0..MAX_POOLED + 3).map(|_| pool.take()).collect();
        for buffers in taken {
            pool.give(buffers);
        }
        assert_eq!(pool.spare.len(), MAX_POOLED);
        let released = pool.take_released();
        assert!(released >= 3 * INPUT_START, "released {released}");
        assert_eq!(pool.take_released(), 0);
    }
}
