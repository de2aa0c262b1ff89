//! What a worker shows of itself when asked: the [`Snapshot`] it builds at
//! the top of a turn when the admin worker has posted a request in its
//! mailbox (see [`crate::shared::Mailbox`]).

mod snapshot;

pub use snapshot::{
    AGE_SAMPLE, ConnCounts, KindCount, ListView, REST_BUCKETS, Snapshot, Timeouts, list_views,
};
