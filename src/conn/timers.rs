//! A connection's two timer slots, as policy: what each should hold in
//! every phase ([`Conn::sync_timers`] brings them in line once per loop
//! turn), what a timer stands for, and how a slot is enrolled, re-armed,
//! refreshed or flipped between ref'd and unref'd.
//!
//! The activity slot is refreshed by activity (keep-alive idle,
//! inactivity, the linger's silence) or fixed for a phase (the headers
//! deadline, `/delay`, the watch after an idle FIN); the deadline slot holds
//! the whole-request deadline, and the cap on a linger.

use super::{Conn, IDLE_WATCH_MS, LINGER_IDLE_MS, LINGER_TOTAL_MS};
use crate::config::Settings;
use crate::ctx::{Slot, TimerEvent};
use crate::session::Phase;
use crate::stats::TimerKind;
use crate::timers::{Micros, TimerId, TimerLists};

/// What a timer slot is measuring. Tags carry the request number where a
/// new request must start a new timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watch {
    KeepAlive,
    Headers {
        request: u32,
    },
    Inactivity,
    Delay {
        request: u32,
    },
    /// Draining input after the last response: silence ends it.
    Linger,
    /// The whole-request deadline.
    Request {
        request: u32,
    },
    /// The cap on the whole linger.
    LingerTotal,
    /// Watching the peer after the idle FIN.
    PeerAfterFin,
}

impl Watch {
    /// Whether activity restarts it.
    fn refreshes(self) -> bool {
        matches!(self, Watch::KeepAlive | Watch::Inactivity | Watch::Linger)
    }
}

/// What a timer slot should hold.
#[derive(Clone, Copy)]
struct WantedTimer {
    watch: Watch,
    ms: u64,
    refed: bool,
}

/// What a readiness event says about the peer.
impl Conn {
    /// What the timer in `slot` stands for (for labels and counts).
    pub fn timer_kind(&self, slot: Slot) -> TimerKind {
        let watch = match slot {
            Slot::Activity => self.watch,
            Slot::Deadline => self.deadline_watch,
        };
        match watch {
            Watch::KeepAlive => TimerKind::KeepAlive,
            Watch::Headers { .. } => TimerKind::Headers,
            Watch::Inactivity => TimerKind::Inactivity,
            Watch::Delay { .. } => TimerKind::Delay,
            Watch::Linger | Watch::LingerTotal => TimerKind::Linger,
            Watch::Request { .. } => TimerKind::Request,
            Watch::PeerAfterFin => TimerKind::IdleWatch,
        }
    }

    /// A readiness event.
    /// Brings both timer slots in line with the connection's state,
    /// stamping with `now`, a clock reading taken after all recent activity.
    pub fn sync_timers(
        &mut self,
        key: u32,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
        settings: &Settings,
    ) {
        let moved = std::mem::take(&mut self.moved);
        let phase = self.phase();
        let activity = self.wanted_activity(phase, settings);
        let deadline = self.wanted_deadline(phase, settings);
        sync_slot(
            &mut self.activity,
            &mut self.watch,
            activity,
            moved,
            timers,
            now,
            TimerEvent::Conn {
                key,
                slot: Slot::Activity,
            },
        );
        sync_slot(
            &mut self.deadline,
            &mut self.deadline_watch,
            deadline,
            moved,
            timers,
            now,
            TimerEvent::Conn {
                key,
                slot: Slot::Deadline,
            },
        );
    }

    /// The activity slot's policy, in one place (the README's timeout table).
    /// Ref'd exactly while there is something to finish (a request in
    /// flight, a response to deliver, a close to complete), so a draining
    /// server waits for those and no others.
    fn wanted_activity(&self, phase: Phase, settings: &Settings) -> Option<WantedTimer> {
        let want = |watch, ms, refed| Some(WantedTimer { watch, ms, refed });
        let request = self.session.received();
        match phase {
            Phase::Fresh => settings
                .headers_ms
                .and_then(|ms| want(Watch::Headers { request }, ms, false)),
            Phase::Idle => {
                let ms = self.session.controls().keep_alive_ms(settings);
                want(Watch::KeepAlive, ms, false)
            }
            Phase::Watching => want(Watch::PeerAfterFin, IDLE_WATCH_MS, false),
            Phase::Head => settings
                .headers_ms
                .and_then(|ms| want(Watch::Headers { request }, ms, true)),
            Phase::Body | Phase::Writing => settings
                .inactivity_ms
                .and_then(|ms| want(Watch::Inactivity, ms, true)),
            Phase::Delayed { ms } => want(Watch::Delay { request }, ms, true),
            Phase::Closing => want(Watch::Linger, LINGER_IDLE_MS, true),
        }
    }

    /// The deadline slot's policy: from a request's first byte until it has
    /// been received; while lingering, the cap on the whole linger.
    fn wanted_deadline(&self, phase: Phase, settings: &Settings) -> Option<WantedTimer> {
        if phase == Phase::Closing {
            return Some(WantedTimer {
                watch: Watch::LingerTotal,
                ms: LINGER_TOTAL_MS,
                refed: true,
            });
        }
        let request = self.session.received();
        settings
            .request_ms
            .filter(|_| self.session.is_receiving(self.buffers.as_deref()))
            .map(|ms| WantedTimer {
                watch: Watch::Request { request },
                ms,
                refed: true,
            })
    }
}

/// Brings one timer slot in line with what its policy wants: enroll, drop,
/// re-arm for a new purpose, refresh on activity, or flip ref'd.
fn sync_slot(
    slot: &mut Option<TimerId>,
    current: &mut Watch,
    wanted: Option<WantedTimer>,
    moved: bool,
    timers: &mut TimerLists<TimerEvent>,
    now: Micros,
    event: TimerEvent,
) {
    match (wanted, *slot) {
        (None, None) => {}
        (None, Some(id)) => {
            timers.unenroll(id);
            *slot = None;
        }
        (Some(want), None) => {
            *slot = Some(timers.enroll(now, want.ms, want.refed, event));
            *current = want.watch;
        }
        (Some(want), Some(id)) => {
            if want.watch != *current {
                timers.rearm(id, want.ms, now);
                *current = want.watch;
            } else if moved && want.watch.refreshes() {
                // A refresh, unless a reload changed the duration.
                timers.rearm(id, want.ms, now);
            }
            if timers.is_refed(id) != want.refed {
                timers.set_ref(id, want.refed);
            }
        }
    }
}
