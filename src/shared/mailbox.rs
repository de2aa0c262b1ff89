//! The admin worker's line to one worker: it posts a request for a
//! [`Snapshot`] and wakes the worker's poll; the worker builds the snapshot
//! at the top of its next turn, leaves it here and wakes the asker back.
//! Nobody blocks on the other, and nothing is published unasked, so an idle
//! server with no viewer never wakes up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use mio::Waker;

use crate::introspect::Snapshot;

/// The admin worker's line to one worker.
#[derive(Debug, Default)]
pub struct Mailbox {
    /// A snapshot is wanted (the worker checks this once per turn).
    asked: AtomicBool,
    letter: Mutex<Letter>,
}

#[derive(Debug, Default)]
struct Letter {
    answer: Option<Snapshot>,
    /// Woken when the answer is in.
    reply_to: Option<Arc<Waker>>,
    /// The worker has exited and will answer no more.
    closed: bool,
}

impl Mailbox {
    /// Asks the worker for a snapshot at its next turn, without waiting:
    /// `reply_to` is woken once it is in ([`Mailbox::take`]). False if the
    /// worker has exited (or cannot be woken): no answer will come.
    pub fn post(&self, worker: &Waker, reply_to: &Arc<Waker>) -> bool {
        {
            let mut letter = self.letter();
            if letter.closed {
                return false;
            }
            letter.answer = None;
            letter.reply_to = Some(Arc::clone(reply_to));
            self.asked.store(true, Ordering::Release);
        }
        worker.wake().is_ok()
    }

    /// Whether a snapshot is wanted.
    pub fn is_asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    /// The worker's answer: kept for [`Mailbox::take`], and the asker woken.
    pub fn reply(&self, snapshot: Snapshot) {
        self.asked.store(false, Ordering::Release);
        let reply_to = {
            let mut letter = self.letter();
            letter.answer = Some(snapshot);
            letter.reply_to.take()
        };
        if let Some(waker) = reply_to {
            let _ = waker.wake();
        }
    }

    /// The answer to the last post, once given.
    pub fn take(&self) -> Option<Snapshot> {
        self.letter().answer.take()
    }

    /// The worker is gone: later posts fail at once, and a waiting asker
    /// is woken so it stops waiting.
    pub fn close(&self) {
        let reply_to = {
            let mut letter = self.letter();
            letter.closed = true;
            letter.reply_to.take()
        };
        if let Some(waker) = reply_to {
            let _ = waker.wake();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.letter().closed
    }

    /// A panic elsewhere cannot leave the letter half-written (every
    /// update is a single assignment), so a poisoned lock is still usable.
    fn letter(&self) -> std::sync::MutexGuard<'_, Letter> {
        self.letter.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    #[test]
    fn a_reply_wakes_the_asker_and_a_closed_mailbox_refuses_posts() {
        let mut worker_poll = Poll::new().unwrap();
        let worker = Waker::new(worker_poll.registry(), Token(1)).unwrap();
        let mut admin_poll = Poll::new().unwrap();
        let admin = Arc::new(Waker::new(admin_poll.registry(), Token(2)).unwrap());
        let mut events = Events::with_capacity(4);
        let mailbox = Mailbox::default();

        assert!(mailbox.post(&worker, &admin));
        worker_poll
            .poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == Token(1)), "worker woken");
        assert!(mailbox.is_asked());
        assert_eq!(mailbox.take().map(|s| s.worker), None, "no answer yet");

        mailbox.reply(Snapshot {
            worker: 3,
            ..Snapshot::default()
        });
        assert!(!mailbox.is_asked());
        admin_poll
            .poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == Token(2)), "asker woken");
        assert_eq!(mailbox.take().map(|s| s.worker), Some(3));
        assert!(mailbox.take().is_none(), "taken once");

        mailbox.close();
        assert!(!mailbox.post(&worker, &admin), "nobody left to answer");
    }
}
