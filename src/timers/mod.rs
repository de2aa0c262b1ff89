//! Timer lists: every timeout of the server in one structure, built the way
//! Node.js builds its timers (lib/internal/timers.js), in safe Rust with the
//! clock passed in. No I/O here: the event loop reads the clock once per turn
//! and hands that `now` to every call.
//!
//! # Why this shape
//!
//! A server arms an inactivity timer per socket and restarts it on every read
//! and every write. Restarting is the hot operation, far more frequent than
//! firing: most idle timers are restarted or cancelled long before they come
//! due. A binary heap of timers pays O(log n) per restart; a timer wheel pays a
//! relink plus bookkeeping per level. Here a restart is a relink inside a
//! doubly linked list, O(1), and never touches the heap.
//!
//! It works because a server uses only a handful of distinct durations
//! (keep-alive 65 s, socket timeout 120 s, header deadline 60 s, ...). All
//! timers of one duration share one list, and a list is kept sorted by
//! deadline simply by appending:
//!
//! * a timer is appended with `start = now`, and `now` never goes backwards,
//!   so its start is at least the start of every timer already in the list;
//! * every timer in the list has the same duration, so ordering by start is
//!   ordering by deadline (`start + duration`);
//! * unlinking a timer from anywhere leaves the rest in order.
//!
//! So the oldest timer, the next to come due, is always the head, and only
//! the heads need to be ordered against each other: a small binary heap with
//! one entry per list (L entries, L = number of distinct durations).
//!
//! ```text
//!   map (sorted Vec)       lists (Slab<List>)       nodes (Slab<Node<T>>)
//!  +----------+------+
//!  |  60000ms |  L0 -+---> L0  head -> [n7] <-> [n2] <-> [n9] <- tail
//!  |  65000ms |  L2 -+---> L2  head -> [n4] <-> [n1] <- tail
//!  | 120000ms |  L1 -+---> L1  head -> [n3] <- tail
//!  +----------+------+           oldest start ------> newest start
//!
//!   heap (Vec<Entry>), min by (expiry, id), one entry per list:
//!
//!                    (61.0s, id 9, L0)
//!                    /               \
//!        (65.2s, id 4, L2)       (120.5s, id 7, L1)
//!
//!   Each List stores its heap_pos, so it can be removed or re-keyed in
//!   place; links between nodes are u32 slab keys, u32::MAX = none.
//! ```
//!
//! # Operations and their costs
//!
//! D = number of durations (map size), L = number of lists in the heap
//! (L = D: every list in the map is in the heap).
//!
//! | operation | cost |
//! |---|---|
//! | `enroll` | O(1) link + O(log D) map lookup; O(log L) heap push if the list is new |
//! | `refresh` | O(1) relink, no map, no heap; nothing at all if already the tail with the same start |
//! | `rearm` | `refresh` if the duration is unchanged, else `unenroll` + `enroll` without freeing the node |
//! | `unenroll` | O(1) unlink; O(log L) heap removal + O(D) map removal if the list empties |
//! | `next_expiry` | O(1): the heap top |
//! | `expire` | O(log L) per timer fired, plus O(log L) per list whose key was stale |
//!
//! No allocation in steady state: nodes and lists are reused slab slots, the
//! heap and the map are `Vec`s that keep their capacity.
//!
//! # Invariants
//!
//! 1. **Oldest at head.** Within a list, `start` is non-decreasing from head
//!    to tail (argued above; `debug_assert`ed on every append).
//! 2. **No empty lists.** A list exists iff it holds a timer; it then has
//!    exactly one map entry and one heap entry, and `heap_pos` is that
//!    entry's index. An emptied list leaves the heap and the map at once.
//! 3. **Heap order.** The heap is a min-heap on `(expiry, id)`. `id` comes
//!    from a counter that only grows and is re-drawn on every re-key, so
//!    keys are unique and equal expiries come out in keying order.
//! 4. **Lazy keys.** A list's heap `expiry` is never later than its head's
//!    true deadline, but may be earlier. Refresh and unenroll only ever
//!    replace the head by a younger timer (a later deadline), so they leave
//!    the heap alone; `expire` repairs a stale key when the list reaches the
//!    top. Hence `next_expiry` may wake the loop early (cheap: one re-key),
//!    never late (a missed deadline).
//! 5. **Never early.** `expire(now)` fires a timer only if its own
//!    `start + duration * 1000 <= now`, checked on the node, not on the heap
//!    key.
//! 6. **Global deadline order.** `expire` fires the top list's head only
//!    when the top key equals that head's exact deadline. Every other key is
//!    at least the top key and at most its own head's deadline, so no other
//!    timer is due earlier.
//! 7. **The `now + 1` rule.** When the top list's head is not due yet, the
//!    list is re-keyed to `max(head deadline, now + 1)`, which is past `now`,
//!    and `expire` moves on to the next list. A list is therefore looked at a
//!    bounded number of times per call and the loop never spins on a list
//!    that is not due. After `expire` returns `None`, `next_expiry() > now`.
//!
//! # Units
//!
//! Times are [`Micros`] on the loop clock; durations are whole milliseconds
//! (what users configure and what the admin view shows), converted to µs
//! once per list. Arithmetic saturates, so a huge duration means "never".

mod heap;
mod list;
mod map;

#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;

use std::num::NonZeroU32;

use slab::Slab;

use heap::ListHeap;
use list::{List, NIL, Node};
use map::DurationMap;

/// A point on the loop clock, in microseconds since the clock's origin.
pub type Micros = u64;

/// A loop-clock reading kept in four bytes, its low 32 bits: it tells
/// exactly how long ago it was taken for spans under [`ShortStamp::SPAN`]
/// (71.6 minutes), whatever the clock reads, wrap points included. For
/// stamps whose span something else bounds (a one-second timer), where
/// eight bytes per connection would be waste.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortStamp(u32);

impl ShortStamp {
    /// The longest span it measures: 2³² µs.
    pub const SPAN: Micros = 1 << 32;

    /// The reading `now`.
    pub fn at(now: Micros) -> Self {
        ShortStamp(now as u32)
    }

    /// How long before `now` it was taken: exact while that is under
    /// [`ShortStamp::SPAN`] (the difference of the low bits, wrapping).
    pub fn elapsed(self, now: Micros) -> Micros {
        Micros::from((now as u32).wrapping_sub(self.0))
    }
}

/// Handle to one enrolled timer: its slab key, stored complemented. Keys
/// stay below `NIL` (`u32::MAX`), so the complement is never zero and an
/// `Option<TimerId>` takes four bytes, not eight: a connection holds two.
///
/// Valid from `enroll` until the timer is unenrolled or returned by
/// `expire`; after that the key may be reused by another timer, so using a
/// stale id is a caller bug (it panics if the slot is vacant, and otherwise
/// names whichever timer now lives there).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimerId(NonZeroU32);

impl TimerId {
    fn from_key(key: u32) -> Self {
        match NonZeroU32::new(!key) {
            Some(complement) => TimerId(complement),
            None => panic!("timer key {key} is NIL"),
        }
    }

    fn key(self) -> u32 {
        !self.0.get()
    }
}

/// What the admin view shows of one list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListInfo {
    /// The duration shared by the list's timers, in whole milliseconds.
    pub duration_ms: u64,
    /// Number of timers in the list (never 0: empty lists do not exist).
    pub len: usize,
    /// Number of those timers that are ref'd.
    pub refed: usize,
    /// Exact deadline of the head (oldest) timer: `head.start + duration`.
    /// Unlike the heap key this is never stale.
    pub next_expiry: Micros,
}

/// A timer popped by [`TimerLists::expire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due<T> {
    pub id: TimerId,
    pub payload: T,
    /// When it was due: `start + duration`, at or before the `now` it fired at.
    pub deadline: Micros,
}

/// One live timer as [`TimerLists::walk_list`] shows it.
#[derive(Clone, Copy, Debug)]
pub struct TimerView<'a, T> {
    pub id: TimerId,
    /// When it was (re)started; its age is `now - start`.
    pub start: Micros,
    pub refed: bool,
    pub payload: &'a T,
}

/// All timers of an event loop: per-duration lists ordered by a heap of their
/// heads. See the module documentation for the design and its invariants.
///
/// ```
/// use keepalive_server::timers::TimerLists;
///
/// let mut timers = TimerLists::new();
/// // Two idle sockets with a 5 s timeout, enrolled at t = 0 and t = 1 ms.
/// let first = timers.enroll(0, 5_000, false, "socket 1");
/// timers.enroll(1_000, 5_000, false, "socket 2");
/// // Activity on socket 1 at t = 2 ms: a relink to the tail, O(1).
/// timers.refresh(first, 2_000);
/// assert_eq!(timers.lists().count(), 1, "one list per duration");
///
/// // The poll timeout comes from the earliest expiry (here still the
/// // stale, earlier key: lazy, never late).
/// assert!(timers.next_expiry().unwrap() <= 5_001_000);
/// // Nothing fires a microsecond early...
/// assert_eq!(timers.expire(5_000_999), None);
/// // ...then socket 2 (idle longest) fires, and socket 1 only at 5.002 s.
/// assert_eq!(timers.expire(5_001_000).map(|due| due.payload), Some("socket 2"));
/// assert_eq!(timers.expire(5_001_999), None);
/// assert_eq!(timers.expire(5_002_000).map(|due| due.payload), Some("socket 1"));
/// assert!(timers.is_empty());
/// ```
pub struct TimerLists<T> {
    /// Every live timer. Keys are `TimerId`s and link values; all < `NIL`.
    nodes: Slab<Node<T>>,
    /// Every live list; each is non-empty, in `by_duration` and in `heap`.
    lists: Slab<List>,
    /// duration_ms -> key in `lists`.
    by_duration: DurationMap,
    /// One entry per list, min by `(expiry, id)`; `expiry` may be stale-early.
    heap: ListHeap,
    /// Number of live timers with `refed == true`.
    refed: usize,
}

impl<T> Default for TimerLists<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TimerLists<T> {
    /// An empty set of timer lists.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty set with room for `timers` timers before the node slab grows.
    pub fn with_capacity(timers: usize) -> Self {
        const DURATIONS: usize = 8;
        TimerLists {
            nodes: Slab::with_capacity(timers),
            lists: Slab::with_capacity(DURATIONS),
            by_duration: DurationMap::with_capacity(DURATIONS),
            heap: ListHeap::with_capacity(DURATIONS),
            refed: 0,
        }
    }

    /// Append a new timer at the tail of the list for `duration_ms`
    /// (creating the list if needed), started at `now`.
    pub fn enroll(&mut self, now: Micros, duration_ms: u64, refed: bool, payload: T) -> TimerId {
        let list = self.list_for(duration_ms, now);
        let key = self.nodes.insert(Node {
            prev: NIL,
            next: NIL,
            list,
            refed,
            start: now,
            payload,
        });
        let key = match u32::try_from(key) {
            Ok(k) if k != NIL => k,
            _ => panic!("timer slab overflow: key {key} does not fit a u32 link"),
        };
        self.lists[list as usize].push_back(&mut self.nodes, key);
        self.refed += usize::from(refed);
        TimerId::from_key(key)
    }

    /// Restart: move to the tail of its list with `start = now`. O(1), no
    /// heap work (the list's key goes lazily stale, invariant 4). A refresh
    /// that changes nothing (already the tail, same start) returns at once.
    pub fn refresh(&mut self, id: TimerId, now: Micros) {
        let node = self.node(id);
        if node.next == NIL && node.start == now {
            return;
        }
        let list = node.list as usize;
        self.lists[list].restart(&mut self.nodes, id.key(), now);
    }

    /// Restart with a (possibly) different duration: relink into the list for
    /// `duration_ms` (same `TimerId`, no slab churn), `start = now`. Same as
    /// `refresh` when the duration is unchanged.
    pub fn rearm(&mut self, id: TimerId, duration_ms: u64, now: Micros) {
        let old = self.node(id).list;
        if self.lists[old as usize].duration_ms == duration_ms {
            self.refresh(id, now);
            return;
        }
        self.lists[old as usize].unlink(&mut self.nodes, id.key());
        self.drop_list_if_empty(old);
        let new = self.list_for(duration_ms, now);
        let node = &mut self.nodes[id.key() as usize];
        node.list = new;
        node.start = now;
        self.lists[new as usize].push_back(&mut self.nodes, id.key());
    }

    /// Remove the timer and return its payload. An emptied list leaves the
    /// heap and the map at once.
    pub fn unenroll(&mut self, id: TimerId) -> T {
        let list = self.node(id).list;
        self.lists[list as usize].unlink(&mut self.nodes, id.key());
        self.drop_list_if_empty(list);
        let node = self.nodes.remove(id.key() as usize);
        self.refed -= usize::from(node.refed);
        node.payload
    }

    /// Make the timer ref'd (keeps the loop alive) or unref'd.
    pub fn set_ref(&mut self, id: TimerId, refed: bool) {
        let node = self.node_mut(id);
        if node.refed == refed {
            return;
        }
        node.refed = refed;
        let list = node.list as usize;
        let list = &mut self.lists[list];
        if refed {
            list.refed += 1;
            self.refed += 1;
        } else {
            list.refed -= 1;
            self.refed -= 1;
        }
    }

    /// Whether the timer is ref'd.
    pub fn is_refed(&self, id: TimerId) -> bool {
        self.node(id).refed
    }

    /// Number of live ref'd timers: the loop may exit when this is 0.
    pub fn ref_count(&self) -> usize {
        self.refed
    }

    /// Number of live timers.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no timers at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The timer's exact deadline: `start + duration`.
    pub fn deadline(&self, id: TimerId) -> Micros {
        let node = self.node(id);
        self.lists[node.list as usize].deadline(node.start)
    }

    /// Earliest list expiry in the heap: the poll timeout. May be earlier
    /// than the true earliest deadline after lazy refreshes, never later.
    /// `None` when there are no timers.
    pub fn next_expiry(&self) -> Option<Micros> {
        self.heap.peek().map(|e| e.expiry)
    }

    /// Pop one due timer (deadline <= `now`), in global deadline order,
    /// removing it; `None` when nothing is due. Lists whose head is not due
    /// yet are re-keyed past `now` on the way (the `now + 1` rule). The
    /// timer comes with its exact deadline, so the caller can measure how
    /// late it fired (`now - deadline`).
    pub fn expire(&mut self, now: Micros) -> Option<Due<T>> {
        loop {
            let top = *self.heap.peek()?;
            if top.expiry > now {
                return None;
            }
            let list = &self.lists[top.list as usize];
            let head = list.head;
            let due = list.deadline(self.nodes[head as usize].start);
            debug_assert!(
                top.expiry <= due,
                "heap key {} later than head deadline {due}",
                top.expiry
            );
            if due > now {
                // Head refreshed or removed since the list was keyed: not due.
                self.rekey(top.list, due.max(now.saturating_add(1)));
            } else if due != top.expiry {
                // Due, but the key is stale-early: make it exact first so a
                // list with an earlier true deadline can go before it.
                self.rekey(top.list, due);
            } else {
                let id = TimerId::from_key(head);
                let payload = self.unenroll(id);
                return Some(Due {
                    id,
                    payload,
                    deadline: due,
                });
            }
        }
    }

    /// Per-list figures, in no particular order.
    pub fn lists(&self) -> impl Iterator<Item = ListInfo> + '_ {
        self.lists.iter().map(|(_, list)| ListInfo {
            duration_ms: list.duration_ms,
            len: list.len as usize,
            refed: list.refed as usize,
            next_expiry: list.deadline(self.nodes[list.head as usize].start),
        })
    }

    /// Timers of one duration, oldest first, with their start and ref
    /// state (what the admin view draws); empty if there is no such list.
    pub fn walk_list(&self, duration_ms: u64) -> impl Iterator<Item = TimerView<'_, T>> + '_ {
        let mut cur = match self.by_duration.get(duration_ms) {
            Some(list) => self.lists[list as usize].head,
            None => NIL,
        };
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let node = &self.nodes[cur as usize];
            let item = TimerView {
                id: TimerId::from_key(cur),
                start: node.start,
                refed: node.refed,
                payload: &node.payload,
            };
            cur = node.next;
            Some(item)
        })
    }

    fn node(&self, id: TimerId) -> &Node<T> {
        match self.nodes.get(id.key() as usize) {
            Some(node) => node,
            None => panic!("{id:?} is not an enrolled timer"),
        }
    }

    fn node_mut(&mut self, id: TimerId) -> &mut Node<T> {
        match self.nodes.get_mut(id.key() as usize) {
            Some(node) => node,
            None => panic!("{id:?} is not an enrolled timer"),
        }
    }

    /// The list for `duration_ms`, created (and keyed at `now + duration`,
    /// the exact deadline of the timer about to be appended) if missing.
    fn list_for(&mut self, duration_ms: u64, now: Micros) -> u32 {
        if let Some(list) = self.by_duration.get(duration_ms) {
            return list;
        }
        let list = List::new(duration_ms);
        let expiry = list.deadline(now);
        let key = self.lists.insert(list) as u32;
        self.by_duration.insert(duration_ms, key);
        let lists = &mut self.lists;
        self.heap
            .push(expiry, key, &mut |l, pos| lists[l as usize].heap_pos = pos);
        key
    }

    /// Remove list `key` from the heap, the map and the slab if it is empty.
    fn drop_list_if_empty(&mut self, key: u32) {
        let list = &self.lists[key as usize];
        if !list.is_empty() {
            return;
        }
        let (pos, duration_ms) = (list.heap_pos, list.duration_ms);
        let lists = &mut self.lists;
        self.heap
            .remove(pos, &mut |l, p| lists[l as usize].heap_pos = p);
        self.by_duration.remove(duration_ms);
        self.lists.remove(key as usize);
    }

    /// Give list `key` a new heap expiry (and a fresh tie-breaking id).
    fn rekey(&mut self, key: u32, expiry: Micros) {
        let pos = self.lists[key as usize].heap_pos;
        let lists = &mut self.lists;
        self.heap
            .rekey(pos, expiry, &mut |l, p| lists[l as usize].heap_pos = p);
    }

    /// Test helper: the payload of a live timer, `None` if the slot is
    /// vacant.
    #[cfg(test)]
    fn get(&self, id: TimerId) -> Option<&T> {
        self.nodes.get(id.key() as usize).map(|n| &n.payload)
    }

    /// Test helper: the timers of one duration, oldest first; empty if
    /// there is no such list.
    #[cfg(test)]
    fn iter_list(&self, duration_ms: u64) -> impl Iterator<Item = (TimerId, &T)> + '_ {
        self.walk_list(duration_ms)
            .map(|timer| (timer.id, timer.payload))
    }

    /// Test helper: check every structural invariant (1-4) exhaustively.
    #[cfg(test)]
    fn check_invariants(&self) {
        let lists = &self.lists;
        self.heap.check(|l| lists[l as usize].heap_pos);
        assert_eq!(self.heap.len(), self.lists.len(), "one heap entry per list");
        assert_eq!(
            self.by_duration.len(),
            self.lists.len(),
            "one map entry per list"
        );
        let (mut total, mut refed) = (0, 0);
        for (key, list) in self.lists.iter() {
            assert!(!list.is_empty(), "empty list {key} still exists");
            assert_eq!(self.by_duration.get(list.duration_ms), Some(key as u32));
            let (mut len, mut list_refed, mut prev, mut cur) = (0, 0, NIL, list.head);
            while cur != NIL {
                let node = &self.nodes[cur as usize];
                assert_eq!(node.list as usize, key);
                assert_eq!(node.prev, prev);
                if prev != NIL {
                    assert!(
                        node.start >= self.nodes[prev as usize].start,
                        "list {key} unsorted"
                    );
                }
                len += 1;
                list_refed += u32::from(node.refed);
                (prev, cur) = (cur, node.next);
            }
            assert_eq!(prev, list.tail);
            assert_eq!(
                (len, list_refed),
                (list.len, list.refed),
                "list {key} counters"
            );
            let key_expiry = self.heap.expiry_at(list.heap_pos);
            let head_due = list.deadline(self.nodes[list.head as usize].start);
            assert!(
                key_expiry <= head_due,
                "list {key} keyed later than its head"
            );
            total += len as usize;
            refed += list_refed as usize;
        }
        assert_eq!(total, self.nodes.len(), "every node is in a list");
        assert_eq!(refed, self.refed, "ref count");
    }
}
