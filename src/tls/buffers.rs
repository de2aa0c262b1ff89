//! The TLS bytes a connection holds between the socket and rustls: what
//! was read and not yet processed ([`Received`]), and records not yet
//! sent ([`Unsent`]), each in a buffer borrowed from the worker's spares
//! only while it holds bytes, as nginx does with
//! `SSL_MODE_RELEASE_BUFFERS`: an idle TLS connection holds neither.
//!
//! Part of a record that waits for the peer's next bytes is not left in a
//! lent buffer: it moves to one of its own size (with room for half as
//! much again) and the lent one goes back. A connection stalled mid-record
//! (a half-sent ClientHello, a request record cut short) then holds what
//! it was sent, not 34 KiB. That also keeps an attack's second round as
//! cheap as its first: a new buffer is zeroed by `calloc` for free, its
//! untouched pages never resident, but one reused from what the first
//! round freed is zeroed whole, so lent buffers held by stalled
//! connections were resident in full from the second round on.
//!
//! The spares are per worker thread (each worker runs one event loop on
//! its own thread), so taking and giving back is a `Vec` push and pop, no
//! lock and no zeroing once warm; at most [`MAX_SPARE`] are kept.

use std::cell::RefCell;

/// One spare buffer's size: a whole record of the largest kind (TLS 1.2's
/// 18,437 B on the wire) to read into, or the backlog limit's worth of
/// plaintext encrypted (32 KiB plus each record's header and tag) behind
/// a response head's record.
pub const BUFFER_SIZE: usize = 34 * 1024;
/// Most bytes received and not yet processed: a handshake flight rustls
/// must see whole (its messages may reach 64 KiB) and a record behind it.
const RECEIVE_LIMIT: usize = 0xffff + 4 + 18_437;
/// Least room given to the part of a record kept while waiting.
const MIN_KEPT: usize = 512;
/// How many spare buffers a worker keeps: enough for the connections
/// busy at once in one turn.
const MAX_SPARE: usize = 64;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of [`BUFFER_SIZE`], fully initialised: a spare, or a new one.
fn take() -> Vec<u8> {
    SPARE
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| vec![0; BUFFER_SIZE])
}

/// Keeps `buf` as a spare if it has the usual size and room remains;
/// frees it otherwise (one grown for a large handshake goes back to the
/// allocator).
fn give(buf: Vec<u8>) {
    if buf.len() == BUFFER_SIZE {
        SPARE.with_borrow_mut(|spare| {
            if spare.len() < MAX_SPARE {
                spare.push(buf);
            }
        });
    }
}

/// TLS bytes read from the socket and not yet processed: `buf[..used]`.
#[derive(Debug, Default)]
pub struct Received {
    buf: Option<Vec<u8>>,
    used: usize,
}

impl Received {
    /// Nothing waits to be processed.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// The bytes to process (empty when none).
    pub fn bytes(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Some(buf) => &mut buf[..self.used],
            None => &mut [],
        }
    }

    /// Drops the first `n` bytes (processed).
    pub fn discard(&mut self, n: usize) {
        if let Some(buf) = self.buf.as_mut()
            && n > 0
        {
            buf.copy_within(n..self.used, 0);
            self.used -= n;
        }
    }

    /// Drops everything (the connection failed).
    pub fn clear(&mut self) {
        self.used = 0;
        self.release(false);
    }

    /// Room to read into, borrowing a buffer first (or moving a part kept
    /// while waiting back into one, once that is full) and growing it when
    /// a handshake flight fills it; `None` when [`RECEIVE_LIMIT`] is reached.
    pub fn spare(&mut self) -> Option<&mut [u8]> {
        let buf = self.buf.get_or_insert_with(take);
        if self.used == buf.len() {
            if buf.len() >= RECEIVE_LIMIT {
                return None;
            }
            if buf.len() < BUFFER_SIZE {
                let mut lent = take();
                lent[..self.used].copy_from_slice(&buf[..self.used]);
                *buf = lent;
            } else {
                buf.resize((buf.len() * 2).min(RECEIVE_LIMIT), 0);
            }
        }
        Some(&mut buf[self.used..])
    }

    /// `n` bytes were read into [`Self::spare`].
    pub fn filled(&mut self, n: usize) {
        self.used += n;
    }

    /// Gives the buffer back if it holds nothing. If it holds part of a
    /// record and the peer must send more first (`waiting`: the socket is
    /// empty), keeps only that part, in a buffer of its own with room for
    /// half as much again, and gives the larger one back.
    pub fn release(&mut self, waiting: bool) {
        let Some(buf) = self.buf.take() else {
            return;
        };
        let kept = (self.used + self.used / 2).max(MIN_KEPT);
        if self.used == 0 {
            give(buf);
        } else if waiting && kept < buf.len() {
            let mut own = vec![0; kept];
            own[..self.used].copy_from_slice(&buf[..self.used]);
            give(buf);
            self.buf = Some(own);
        } else {
            self.buf = Some(buf);
        }
    }
}

/// TLS records made and not yet sent: `buf[start..end]`.
#[derive(Debug, Default)]
pub struct Unsent {
    buf: Option<Vec<u8>>,
    start: usize,
    end: usize,
}

impl Unsent {
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// How many bytes wait.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// The bytes to send.
    pub fn bytes(&self) -> &[u8] {
        match &self.buf {
            Some(buf) => &buf[self.start..self.end],
            None => &[],
        }
    }

    /// Room for at least `needed` more bytes (a buffer borrowed, or grown
    /// past the usual size for a large handshake flight).
    pub fn spare(&mut self, needed: usize) -> &mut [u8] {
        let buf = self.buf.get_or_insert_with(take);
        if buf.len() - self.end < needed {
            buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if buf.len() - self.end < needed {
                buf.resize(self.end + needed, 0);
            }
        }
        &mut buf[self.end..]
    }

    /// `n` bytes were written into [`Self::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// `n` bytes were sent; the buffer goes back once all are.
    pub fn advance(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if let Some(buf) = self.buf.take() {
                give(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_bytes_are_kept_in_order_and_the_buffer_goes_back_when_empty() {
        let mut received = Received::default();
        let room = received.spare().unwrap();
        room[..5].copy_from_slice(b"hello");
        received.filled(5);
        received.discard(2);
        assert_eq!(received.bytes(), b"llo");
        received.release(false);
        assert_eq!(
            received.capacity(),
            BUFFER_SIZE,
            "more to read: the lent buffer stays"
        );
        received.discard(3);
        received.release(false);
        assert!(received.buf.is_none());
    }

    /// Reads `bytes` as the socket would give them.
    fn receive(received: &mut Received, bytes: &[u8]) {
        let room = received.spare().unwrap();
        room[..bytes.len()].copy_from_slice(bytes);
        received.filled(bytes.len());
    }

    impl Received {
        fn capacity(&self) -> usize {
            self.buf.as_ref().map_or(0, Vec::len)
        }
    }

    #[test]
    fn part_of_a_record_waiting_for_the_peer_keeps_only_its_size() {
        let mut received = Received::default();
        let record: Vec<u8> = (0..8000u32).map(|i| i as u8).collect();
        receive(&mut received, &record[..3000]);
        received.release(true);
        assert_eq!(received.capacity(), 4500, "its bytes and half as much room");
        receive(&mut received, &record[3000..4500]);
        received.release(true);
        assert_eq!(
            received.capacity(),
            4500,
            "read into the room it had: not moved"
        );
        receive(&mut received, &record[4500..]);
        assert_eq!(
            received.capacity(),
            BUFFER_SIZE,
            "full: moved into a lent buffer"
        );
        assert_eq!(received.bytes(), &record[..]);
        received.discard(7990);
        received.release(true);
        assert_eq!(received.capacity(), MIN_KEPT, "what is left is small");
        assert_eq!(received.bytes(), &record[7990..]);
    }

    #[test]
    fn received_grows_for_a_large_flight_up_to_its_limit() {
        let mut received = Received::default();
        while let Some(room) = received.spare() {
            let n = room.len();
            received.filled(n);
        }
        assert_eq!(received.used, RECEIVE_LIMIT);
        received.clear();
        assert!(received.buf.is_none());
    }

    #[test]
    fn unsent_bytes_go_out_in_order_and_the_buffer_goes_back_when_sent() {
        let mut unsent = Unsent::default();
        unsent.spare(3)[..3].copy_from_slice(b"abc");
        unsent.filled(3);
        unsent.advance(1);
        let room = unsent.spare(BUFFER_SIZE);
        assert!(room.len() >= BUFFER_SIZE, "grown for a large flight");
        room[..2].copy_from_slice(b"de");
        unsent.filled(2);
        assert_eq!(unsent.bytes(), b"bcde");
        unsent.advance(4);
        assert!(unsent.is_empty() && unsent.buf.is_none());
    }
}
