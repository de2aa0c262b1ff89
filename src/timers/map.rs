//! The map from a duration (whole milliseconds) to the key of its list.
//!
//! A sorted `Vec<(duration_ms, list)>` searched by binary search. Why not a
//! `HashMap`: the server has a handful of durations (keep-alive, socket
//! timeout, header and request deadlines, the Date tick), so the whole map
//! fits in a cache line or two and a binary search over it beats hashing a
//! `u64` with SipHash. It is also deterministic and cannot be pushed into
//! bad hash behaviour by a client choosing durations (`/delay/<ms>`): the
//! worst case is O(log D) lookups and an O(D) memmove when a list is created
//! or dropped, which happens far less often than enroll or rearm.
//! A refresh never consults the map (the node knows its list).

/// Duration -> list key, sorted by duration, durations unique.
#[derive(Default)]
pub(super) struct DurationMap {
    entries: Vec<(u64, u32)>,
}

impl DurationMap {
    pub(super) fn with_capacity(durations: usize) -> Self {
        DurationMap {
            entries: Vec::with_capacity(durations),
        }
    }

    /// The list for `duration_ms`, if there is one.
    pub(super) fn get(&self, duration_ms: u64) -> Option<u32> {
        self.entries
            .binary_search_by_key(&duration_ms, |&(d, _)| d)
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// Record a new list. `duration_ms` must not be present.
    pub(super) fn insert(&mut self, duration_ms: u64, list: u32) {
        match self.entries.binary_search_by_key(&duration_ms, |&(d, _)| d) {
            Ok(_) => panic!("a list for {duration_ms} ms already exists"),
            Err(i) => self.entries.insert(i, (duration_ms, list)),
        }
    }

    /// Forget the list for `duration_ms`, which must be present.
    pub(super) fn remove(&mut self, duration_ms: u64) {
        match self.entries.binary_search_by_key(&duration_ms, |&(d, _)| d) {
            Ok(i) => {
                self.entries.remove(i);
            }
            Err(_) => panic!("no list for {duration_ms} ms to remove"),
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}
