//! One timer list: an intrusive doubly linked list of timer nodes threaded
//! through a `Slab` by `u32` keys.
//!
//! Every node of a list has the same duration, and nodes are only ever
//! appended with `start = now` where `now` never goes backwards, so a list is
//! always sorted by start (and so by deadline), oldest at the head. This file
//! knows nothing of the heap or the map; it only links and unlinks, and keeps
//! the per-list counters (`len`, `refed`) exact while doing so.

use slab::Slab;

use super::Micros;

/// "No node": the link value at either end of a list. Slab keys are checked
/// to stay below it when a node is created.
pub(super) const NIL: u32 = u32::MAX;

/// One enrolled timer. Kept small (32 bytes for an 8-byte payload): the
/// server holds one or two per connection and walks them on every expiry.
pub(super) struct Node<T> {
    /// Older neighbour (towards the head), or `NIL` when this is the head.
    pub(super) prev: u32,
    /// Newer neighbour (towards the tail), or `NIL` when this is the tail.
    pub(super) next: u32,
    /// Key of the owning list in `TimerLists::lists`. Always a live list.
    pub(super) list: u32,
    /// Whether this timer keeps the event loop alive (counted in `List::refed`
    /// and `TimerLists::refed`).
    pub(super) refed: bool,
    /// Loop time at which the timer was (re)started. Deadline is
    /// `start + list.duration_us`. Non-decreasing from head to tail.
    pub(super) start: Micros,
    /// The caller's data (typically a connection key).
    pub(super) payload: T,
}

/// All timers of one duration, oldest first.
///
/// Invariant: a `List` that exists is non-empty (an emptied list is dropped
/// by the caller at once), so `head` and `tail` are live node keys.
pub(super) struct List {
    /// Oldest node: the next one of this duration to come due.
    pub(super) head: u32,
    /// Newest node: where enroll and refresh append.
    pub(super) tail: u32,
    /// Index of this list's entry in the heap; kept current by the heap.
    pub(super) heap_pos: u32,
    /// Number of nodes linked in.
    pub(super) len: u32,
    /// Number of linked nodes with `refed == true`.
    pub(super) refed: u32,
    /// The duration shared by every node, as given (whole milliseconds).
    pub(super) duration_ms: u64,
    /// The same duration on the loop clock: `duration_ms * 1000`, saturated.
    pub(super) duration_us: Micros,
}

impl List {
    /// An empty list for `duration_ms`; the caller links a node in at once.
    pub(super) fn new(duration_ms: u64) -> Self {
        List {
            head: NIL,
            tail: NIL,
            heap_pos: 0,
            len: 0,
            refed: 0,
            duration_ms,
            duration_us: duration_ms.saturating_mul(1000),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// Deadline of a node of this list started at `start`.
    pub(super) fn deadline(&self, start: Micros) -> Micros {
        start.saturating_add(self.duration_us)
    }

    /// Link node `key` (already carrying its `start`) in at the tail.
    pub(super) fn push_back<T>(&mut self, nodes: &mut Slab<Node<T>>, key: u32) {
        let old_tail = self.tail;
        let node = &mut nodes[key as usize];
        node.prev = old_tail;
        node.next = NIL;
        let refed = node.refed;
        let start = node.start;
        if old_tail == NIL {
            self.head = key;
        } else {
            let tail = &mut nodes[old_tail as usize];
            debug_assert!(
                start >= tail.start,
                "clock went backwards: appending start {start} after tail start {}",
                tail.start
            );
            tail.next = key;
        }
        self.tail = key;
        self.len += 1;
        self.refed += u32::from(refed);
    }

    /// Unlink node `key` from this list, wherever it is. The node stays in
    /// the slab with `NIL` links.
    pub(super) fn unlink<T>(&mut self, nodes: &mut Slab<Node<T>>, key: u32) {
        let node = &mut nodes[key as usize];
        let (prev, next, refed) = (node.prev, node.next, node.refed);
        node.prev = NIL;
        node.next = NIL;
        if prev == NIL {
            debug_assert_eq!(self.head, key, "node without prev is not the head");
            self.head = next;
        } else {
            nodes[prev as usize].next = next;
        }
        if next == NIL {
            debug_assert_eq!(self.tail, key, "node without next is not the tail");
            self.tail = prev;
        } else {
            nodes[next as usize].prev = prev;
        }
        self.len -= 1;
        self.refed -= u32::from(refed);
    }

    /// Restart node `key` at `now`: move it to the tail. Free when it is the
    /// tail already (only `start` changes; the order still holds because
    /// `now` is at least every other start).
    pub(super) fn restart<T>(&mut self, nodes: &mut Slab<Node<T>>, key: u32, now: Micros) {
        if self.tail == key {
            let node = &mut nodes[key as usize];
            debug_assert!(
                now >= node.start,
                "clock went backwards: {now} < {}",
                node.start
            );
            node.start = now;
            return;
        }
        self.move_to_tail(nodes, key, now);
    }

    /// Moves node `key`, which is in this list but not its tail, to the tail
    /// with start `now`: one pass over the three nodes involved, and the
    /// list's counts stay as they are. The hot path of every refresh.
    fn move_to_tail<T>(&mut self, nodes: &mut Slab<Node<T>>, key: u32, now: Micros) {
        let old_tail = self.tail;
        debug_assert!(
            now >= nodes[old_tail as usize].start,
            "clock went backwards: {now} < tail start {}",
            nodes[old_tail as usize].start
        );
        let node = &mut nodes[key as usize];
        let (prev, next) = (node.prev, node.next);
        debug_assert_ne!(next, NIL, "the tail moves nowhere");
        node.prev = old_tail;
        node.next = NIL;
        node.start = now;
        if prev == NIL {
            self.head = next;
        } else {
            nodes[prev as usize].next = next;
        }
        nodes[next as usize].prev = prev;
        nodes[old_tail as usize].next = key;
        self.tail = key;
    }
}
