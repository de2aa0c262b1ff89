//! What a worker shows of itself when asked: its timer lists, ref count,
//! cached Date and connections by state. The admin thread posts a request
//! in the worker's [`Mailbox`] and wakes its poll; the worker answers at the
//! top of its next turn. Nothing is published unasked, so an idle server
//! still never wakes up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use mio::Waker;

use crate::stats::Stats;

/// One timer list as the admin view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListView {
    pub duration_ms: u64,
    pub len: usize,
    /// How many of its timers are ref'd.
    pub refed: usize,
    /// Until the head's deadline (negative: overdue, about to fire).
    pub next_expiry_in_ms: i64,
}

/// Connections by what they are doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnCounts {
    /// Accepted or between reads of a request.
    pub reading: u64,
    /// Writing a response, or waiting to (`/delay`).
    pub writing: u64,
    /// Persistent, between requests.
    pub idle: u64,
    /// Answered for the last time, draining before the close.
    pub closing: u64,
}

/// A worker's state at one loop turn.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub worker: usize,
    pub lists: Vec<ListView>,
    pub timers: usize,
    pub ref_count: usize,
    pub date: Option<String>,
    pub connections: ConnCounts,
    pub accepting: bool,
}

/// The admin thread's line to one worker.
#[derive(Debug, Default)]
pub struct Mailbox {
    asked: AtomicBool,
    answer: Mutex<Option<Snapshot>>,
    answered: Condvar,
}

impl Mailbox {
    /// Asks the worker for a snapshot and waits up to `timeout` for it.
    pub fn ask(&self, waker: &Waker, timeout: Duration) -> Option<Snapshot> {
        let mut answer = self.answer.lock().ok()?;
        *answer = None;
        self.asked.store(true, Ordering::Release);
        waker.wake().ok()?;
        let (mut answer, _) = self
            .answered
            .wait_timeout_while(answer, timeout, |answer| answer.is_none())
            .ok()?;
        answer.take()
    }

    /// Whether a snapshot is wanted (the worker checks once per turn).
    pub fn is_asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    pub fn reply(&self, snapshot: Snapshot) {
        self.asked.store(false, Ordering::Release);
        if let Ok(mut answer) = self.answer.lock() {
            *answer = Some(snapshot);
            self.answered.notify_all();
        }
    }
}

/// What a worker shares with the rest of the process.
#[derive(Debug, Default)]
pub struct WorkerShared {
    pub stats: Stats,
    pub mailbox: Mailbox,
}
