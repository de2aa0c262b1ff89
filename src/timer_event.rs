//! What a timer in a worker's lists stands for: the payload of its
//! [`TimerLists`](crate::timers::TimerLists). The lists themselves are
//! generic and know nothing of connections; the worker dispatches a due
//! timer by this payload (a connection's timer, by its slab key and
//! [`Slot`], or one of the worker's own).

/// What a timer in a worker's lists stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerEvent {
    /// One of a connection's two timers.
    Conn { key: u32, slot: Slot },
    /// The cached Date value is a second old.
    DateExpired,
    /// Try accept() again after running out of descriptors.
    AcceptResume,
    /// Give memory freed by a burst back to the system (see `memory`).
    ReturnMemory,
    /// An idle upstream connection (`--upstream`), by its key in the
    /// worker's `Upstreams`, has been pooled for `--upstream-idle-timeout`.
    UpstreamIdle { key: u32 },
    /// The admin's own (on the admin listener's worker only).
    Admin(crate::admin::AdminTimer),
}

/// Which of a connection's two timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Refreshed by activity (keep-alive idle, inactivity) or fixed for a
    /// phase (headers deadline, `/delay`, linger).
    Activity,
    /// The whole-request deadline: activity never moves it.
    Deadline,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timers_payload_stays_eight_bytes() {
        // Every idle connection holds one timer node carrying this: a wider
        // payload (an admin tick's u64 made it 16) costs every connection.
        assert!(std::mem::size_of::<TimerEvent>() <= 8);
    }
}
