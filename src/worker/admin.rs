//! The admin listener's part of a worker: the admin's answers that wait
//! on a snapshot round are woken when it ends (as a `/delay` answer is by
//! its timer), and its event streams are fed a frame per tick, with a
//! viewer that stops reading dropped once its backlog passes a few frames.
//! The round's replies and frames are rendered once, by the admin's
//! service, for everyone who waits on them.
//!
//! Only the admin worker has a service: on the main listener's workers
//! none of this runs.

use super::Worker;
use crate::admin::AdminTimer;
use crate::admin::http::Route;
use crate::admin::rounds::Finished;
use crate::admin::service::{Answer, Service, Wanted};
use crate::timers::Micros;

/// Frames a viewer may have queued, unsent, before it is dropped.
const MAX_QUEUED_FRAMES: usize = 4;

impl Worker {
    /// Makes this the admin listener's worker, serving `service`'s routes.
    pub fn serving_admin(mut self, service: Service) -> Self {
        self.admin = Some(service);
        self
    }

    /// Takes the snapshots workers have handed back (their waker rang)
    /// and answers whoever waited on a round that has ended.
    pub(super) fn collect_rounds(&mut self, now: Micros) {
        loop {
            let Some(admin) = self.admin.as_mut() else {
                return;
            };
            let Some(finished) = admin.collect(&mut self.resources.timers, now) else {
                return;
            };
            self.deliver(finished, now);
        }
    }

    /// An admin timer fired: a round waited long enough (it ends with the
    /// answers so far), or viewers on an interval are due a frame (they
    /// share the round in flight, or start one).
    pub(super) fn on_admin_timer(&mut self, timer: AdminTimer, now: Micros) {
        let Some(admin) = self.admin.as_mut() else {
            return;
        };
        let timers = &mut self.resources.timers;
        match timer {
            AdminTimer::Round => {
                if let Some(finished) = admin.round_timed_out(timers, now) {
                    self.deliver(finished, now);
                }
            }
            AdminTimer::Tick(interval_ms) => {
                let interval_ms = u64::from(interval_ms);
                let Some(round) = admin.tick(interval_ms, timers, now) else {
                    return;
                };
                for (_, conn) in self.conns.iter_mut() {
                    if conn.stream().is_some_and(|(on, _)| on == interval_ms) {
                        conn.want_frame(round);
                    }
                }
            }
        }
    }

    /// A viewer's connection closed: one viewer fewer on its interval.
    pub(super) fn viewer_left(&mut self, interval_ms: u64) {
        if let Some(admin) = self.admin.as_mut() {
            admin.unsubscribe(interval_ms, &mut self.resources.timers);
        }
    }

    /// A round has ended: what its waiters want is rendered once, each
    /// answer that waited on it is sent, and each viewer that wanted it
    /// gets the same frame.
    fn deliver(&mut self, finished: Finished, now: Micros) {
        let id = finished.id;
        let mut wanted = Wanted::default();
        let mut answers = Vec::new();
        let mut viewers = Vec::new();
        for (key, conn) in self.conns.iter() {
            if let Some(Answer::AfterRound { round, route }) = conn.awaited()
                && round <= id
            {
                match route {
                    Route::Metrics => wanted.metrics = true,
                    Route::Peers => wanted.peers = true,
                    _ => wanted.view = true,
                }
                answers.push(key);
            } else if let Some((_, Some(round))) = conn.stream()
                && round <= id
            {
                wanted.view = true;
                viewers.push(key);
            }
        }
        let Some(admin) = self.admin.as_mut() else {
            return;
        };
        let frame = admin.deliver(finished, wanted);
        for key in answers {
            self.with_conn(key, now, |conn, ctx| conn.answer_delayed(ctx));
        }
        let Some(frame) = frame else {
            return;
        };
        let backlog = MAX_QUEUED_FRAMES * frame.len();
        for key in viewers {
            self.with_conn(key, now, |conn, ctx| conn.on_frame(&frame, backlog, ctx));
        }
    }
}
