//! A positional binary min-heap of timer lists, ordered by `(expiry, id)`.
//!
//! "Positional": whenever an entry moves, the heap reports its new index
//! through a `set_pos(list, pos)` callback, and the owner stores it in the
//! list. With that index a list can be removed or re-keyed in O(log L)
//! without searching (L = number of lists, a handful in practice).
//!
//! `id` is a tie-breaker drawn from a counter that only grows. A list gets a
//! fresh id when it enters the heap and each time it is re-keyed, so two
//! lists with the same expiry come out in the order they were keyed (Node's
//! `timerListId`), and no two entries ever compare equal.

use super::Micros;

/// One list's place in the heap. Copied around while sifting; 24 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    /// When the list should next be looked at. Never later than the true
    /// deadline of the list's head (see the invariants in `mod.rs`).
    pub(super) expiry: Micros,
    /// Tie-breaker: unique, increasing in keying order.
    id: u64,
    /// Key of the list in `TimerLists::lists`.
    pub(super) list: u32,
}

impl Entry {
    fn before(&self, other: &Entry) -> bool {
        (self.expiry, self.id) < (other.expiry, other.id)
    }
}

/// Min-heap of [`Entry`], smallest `(expiry, id)` at index 0.
pub(super) struct ListHeap {
    /// The implicit binary tree: children of `i` are `2i+1` and `2i+2`.
    entries: Vec<Entry>,
    /// Next tie-breaker to hand out.
    next_id: u64,
}

impl ListHeap {
    pub(super) fn with_capacity(lists: usize) -> Self {
        ListHeap {
            entries: Vec::with_capacity(lists),
            next_id: 0,
        }
    }

    /// The entry with the smallest `(expiry, id)`.
    pub(super) fn peek(&self) -> Option<&Entry> {
        self.entries.first()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(super) fn expiry_at(&self, pos: u32) -> Micros {
        self.entries[pos as usize].expiry
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Insert `list` keyed by `expiry`.
    pub(super) fn push(&mut self, expiry: Micros, list: u32, set_pos: &mut impl FnMut(u32, u32)) {
        let id = self.fresh_id();
        self.entries.push(Entry { expiry, id, list });
        self.sift_up(self.entries.len() - 1, set_pos);
    }

    /// Remove the entry at `pos` (the list's stored heap position).
    pub(super) fn remove(&mut self, pos: u32, set_pos: &mut impl FnMut(u32, u32)) {
        let pos = pos as usize;
        let last = self.entries.pop().expect("remove from an empty heap");
        if pos == self.entries.len() {
            return; // it was the last entry
        }
        self.entries[pos] = last;
        self.restore(pos, set_pos);
    }

    /// Give the entry at `pos` a new expiry (and a fresh id) and move it to
    /// its place.
    pub(super) fn rekey(&mut self, pos: u32, expiry: Micros, set_pos: &mut impl FnMut(u32, u32)) {
        let pos = pos as usize;
        let id = self.fresh_id();
        let entry = &mut self.entries[pos];
        entry.expiry = expiry;
        entry.id = id;
        self.restore(pos, set_pos);
    }

    /// Sift the entry at `pos` up or down, whichever its key needs.
    fn restore(&mut self, pos: usize, set_pos: &mut impl FnMut(u32, u32)) {
        if pos > 0 && self.entries[pos].before(&self.entries[(pos - 1) / 2]) {
            self.sift_up(pos, set_pos);
        } else {
            self.sift_down(pos, set_pos);
        }
    }

    /// Move the entry at `pos` towards the root while it beats its parent.
    /// Uses a hole: each step is one copy, the entry is written once at the end.
    fn sift_up(&mut self, mut pos: usize, set_pos: &mut impl FnMut(u32, u32)) {
        let entry = self.entries[pos];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !entry.before(&self.entries[parent]) {
                break;
            }
            self.entries[pos] = self.entries[parent];
            set_pos(self.entries[pos].list, pos as u32);
            pos = parent;
        }
        self.entries[pos] = entry;
        set_pos(entry.list, pos as u32);
    }

    /// Move the entry at `pos` towards the leaves while a child beats it.
    fn sift_down(&mut self, mut pos: usize, set_pos: &mut impl FnMut(u32, u32)) {
        let entry = self.entries[pos];
        let len = self.entries.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.entries[right].before(&self.entries[left]) {
                right
            } else {
                left
            };
            if !self.entries[child].before(&entry) {
                break;
            }
            self.entries[pos] = self.entries[child];
            set_pos(self.entries[pos].list, pos as u32);
            pos = child;
        }
        self.entries[pos] = entry;
        set_pos(entry.list, pos as u32);
    }

    /// Test helper: the heap property holds and `pos_of(list)` is each
    /// entry's index.
    #[cfg(test)]
    pub(super) fn check(&self, pos_of: impl Fn(u32) -> u32) {
        for (i, e) in self.entries.iter().enumerate() {
            assert_eq!(
                pos_of(e.list) as usize,
                i,
                "stale heap_pos for list {}",
                e.list
            );
            if i > 0 {
                let parent = &self.entries[(i - 1) / 2];
                assert!(
                    parent.before(e),
                    "heap order broken at {i}: {parent:?} / {e:?}"
                );
            }
        }
    }
}
