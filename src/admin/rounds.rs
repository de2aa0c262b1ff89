//! Snapshot rounds: asking every worker for a snapshot without blocking.
//!
//! A round posts a request in each worker's mailbox (waking its poll) and
//! ends when every worker has answered (each answer wakes the admin worker)
//! or after [`ROUND_TIMEOUT_MS`], with the answers that came. One round is
//! in flight at a time and everyone waiting for it shares its snapshots:
//! a scrape needs one whose snapshots are taken after it arrived
//! ([`Rounds::fresh`]); a dashboard tick takes the one in flight
//! ([`Rounds::any`]). Nobody asking, no round: the workers sleep on.

use std::sync::Arc;

use mio::Waker;

use super::AdminTimer;
use crate::introspect::Snapshot;
use crate::shared::Remote;
use crate::timer_event::TimerEvent;
use crate::timers::{Micros, TimerId, TimerLists};

/// How long a round waits for a busy worker before answering without it.
pub const ROUND_TIMEOUT_MS: u64 = 500;

/// A round's number; rounds are numbered from 1 in the order they start.
pub type RoundId = u64;

/// The round in flight, if any, and whether another is wanted after it.
pub struct Rounds {
    reply_to: Arc<Waker>,
    current: Option<Round>,
    /// The id of the latest round started.
    started: RoundId,
    /// Someone needs the round after the current one.
    again: bool,
}

struct Round {
    id: RoundId,
    /// Per worker: still to answer.
    waiting: Vec<bool>,
    answers: Vec<Snapshot>,
    timeout: TimerId,
}

/// A round that has ended, with the snapshots that came (by worker index).
pub struct Finished {
    pub id: RoundId,
    pub snapshots: Vec<Snapshot>,
}

impl Rounds {
    /// Workers will wake `reply_to` when they answer.
    pub fn new(reply_to: Arc<Waker>) -> Self {
        Rounds {
            reply_to,
            current: None,
            started: 0,
            again: false,
        }
    }

    /// A round whose snapshots are all taken after this call.
    pub fn fresh(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> RoundId {
        if self.current.is_some() {
            self.again = true;
            return self.started + 1;
        }
        self.start(remote, timers, now)
    }

    /// The round in flight, or a new one.
    pub fn any(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> RoundId {
        match &self.current {
            Some(round) => round.id,
            None => self.start(remote, timers, now),
        }
    }

    /// Takes the answers that came in; ends the round once every worker
    /// has answered (or exited), and starts the next one if it is wanted.
    pub fn collect(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<Finished> {
        let round = self.current.as_mut()?;
        for ((shared, _), waiting) in remote.workers().zip(round.waiting.iter_mut()) {
            if !*waiting {
                continue;
            }
            if let Some(snapshot) = shared.mailbox.take() {
                round.answers.push(snapshot);
                *waiting = false;
            } else if shared.mailbox.is_closed() {
                *waiting = false;
            }
        }
        if round.waiting.contains(&true) {
            return None;
        }
        timers.unenroll(round.timeout);
        Some(self.finish(remote, timers, now))
    }

    /// The round's timeout fired: end it with the answers so far.
    pub fn time_out(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<Finished> {
        let round = self.current.as_ref()?;
        let late: Vec<usize> = round
            .waiting
            .iter()
            .enumerate()
            .filter(|(_, waiting)| **waiting)
            .map(|(worker, _)| worker)
            .collect();
        tracing::debug!(?late, "snapshot round timed out; answering without them");
        Some(self.finish(remote, timers, now))
    }

    fn finish(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Finished {
        let mut round = self.current.take().expect("a round in flight");
        round.answers.sort_by_key(|s| s.worker);
        if std::mem::take(&mut self.again) {
            self.start(remote, timers, now);
        }
        Finished {
            id: round.id,
            snapshots: round.answers,
        }
    }

    fn start(
        &mut self,
        remote: &Remote,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> RoundId {
        self.started += 1;
        let waiting = remote
            .workers()
            .map(|(shared, waker)| shared.mailbox.post(waker, &self.reply_to))
            .collect();
        let timeout = timers.enroll(
            now,
            ROUND_TIMEOUT_MS,
            false,
            TimerEvent::Admin(AdminTimer::Round),
        );
        self.current = Some(Round {
            id: self.started,
            waiting,
            answers: Vec::new(),
            timeout,
        });
        // Answers (or exits) may already be in: the caller collects next.
        let _ = self.reply_to.wake();
        self.started
    }
}
