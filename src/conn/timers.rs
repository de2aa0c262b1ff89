//! A connection's two timer slots, as policy: what each should hold in
//! every state ([`Conn::sync_timers`] brings them in line once per loop
//! turn), what a timer stands for, and how a slot is enrolled, re-armed,
//! refreshed or flipped between ref'd and unref'd.
//!
//! The activity slot is refreshed by activity (keep-alive idle,
//! inactivity, the linger's silence) or fixed for a phase (the headers
//! deadline, `/delay`, the watch after an idle FIN); the deadline slot holds
//! the whole-request deadline, and the cap on a linger.

use super::{Conn, IDLE_WATCH_MS, LINGER_IDLE_MS, LINGER_TOTAL_MS, State};
use crate::config::Settings;
use crate::stats::TimerKind;
use crate::timer_event::{Slot, TimerEvent};
use crate::timers::{Micros, TimerId, TimerLists};

/// What a timer slot is measuring (one byte: which request a per-request
/// timer belongs to is told by [`Conn::sync_timers`] instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    KeepAlive,
    Headers,
    Inactivity,
    Delay,
    /// Draining input after the last response: silence ends it.
    Linger,
    /// The whole-request deadline.
    Request,
    /// The cap on the whole linger.
    LingerTotal,
    /// Watching the peer after the idle FIN.
    PeerAfterFin,
    /// The shadow deadline: idle past the real one (`State::Overdue`).
    Shadow,
    /// A forwarded request's answer head (`--upstream-timeout`).
    Upstream,
}

impl Purpose {
    /// Whether activity restarts it.
    fn refreshes(self) -> bool {
        matches!(
            self,
            Purpose::KeepAlive | Purpose::Inactivity | Purpose::Linger
        )
    }

    /// Whether it belongs to one request: the next request starts its own.
    fn per_request(self) -> bool {
        matches!(
            self,
            Purpose::Headers | Purpose::Delay | Purpose::Request | Purpose::Upstream
        )
    }
}

/// A connection's two timer slots, and what each measures (a purpose is
/// meaningful only while its slot holds a timer).
#[derive(Debug)]
pub(super) struct TimerSlots {
    activity: Option<TimerId>,
    deadline: Option<TimerId>,
    /// Requests received as of the last sync.
    received_at_sync: u32,
    activity_purpose: Purpose,
    deadline_purpose: Purpose,
}

impl TimerSlots {
    /// Both empty.
    pub fn new() -> Self {
        TimerSlots {
            activity: None,
            deadline: None,
            received_at_sync: 0,
            activity_purpose: Purpose::KeepAlive,
            deadline_purpose: Purpose::LingerTotal,
        }
    }

    /// The timer in `slot` fired (and is gone from the lists): what it
    /// measured.
    pub fn fired(&mut self, slot: Slot) -> Purpose {
        match slot {
            Slot::Activity => {
                self.activity = None;
                self.activity_purpose
            }
            Slot::Deadline => {
                self.deadline = None;
                self.deadline_purpose
            }
        }
    }

    /// Whether the shadow deadline's timer is armed: the connection was
    /// idle past its real deadline as of the last sync (a request read
    /// since is one production would have lost).
    pub fn in_shadow(&self) -> bool {
        self.activity.is_some() && self.activity_purpose == Purpose::Shadow
    }

    /// The keep-alive timer, while one is armed.
    pub fn keep_alive(&self) -> Option<TimerId> {
        self.activity
            .filter(|_| self.activity_purpose == Purpose::KeepAlive)
    }

    /// The activity slot's timer, for tests that watch it re-armed.
    #[cfg(test)]
    pub fn activity(&self) -> Option<TimerId> {
        self.activity
    }

    /// Takes both timers out of the lists (the connection closes).
    pub fn cancel(&mut self, timers: &mut TimerLists<TimerEvent>) {
        for slot in [&mut self.activity, &mut self.deadline] {
            if let Some(id) = slot.take() {
                timers.unenroll(id);
            }
        }
    }
}

/// What a timer slot should hold.
#[derive(Clone, Copy)]
struct WantedTimer {
    purpose: Purpose,
    ms: u64,
    refed: bool,
}

impl Conn {
    /// What the timer in `slot` stands for (for labels and counts).
    pub fn timer_kind(&self, slot: Slot) -> TimerKind {
        let purpose = match slot {
            Slot::Activity => self.slots.activity_purpose,
            Slot::Deadline => self.slots.deadline_purpose,
        };
        match purpose {
            Purpose::KeepAlive | Purpose::Shadow => TimerKind::KeepAlive,
            Purpose::Headers => TimerKind::Headers,
            Purpose::Inactivity => TimerKind::Inactivity,
            Purpose::Delay => TimerKind::Delay,
            Purpose::Linger | Purpose::LingerTotal => TimerKind::Linger,
            Purpose::Request => TimerKind::Request,
            Purpose::PeerAfterFin => TimerKind::IdleWatch,
            Purpose::Upstream => TimerKind::Upstream,
        }
    }

    /// Brings both timer slots in line with the connection's state,
    /// stamping with `now`, a clock reading taken after all recent activity.
    /// A request received since the last sync is a new request: its
    /// per-request timers start afresh. (Every event ends in a sync within
    /// its turn, so this is the same as tagging each timer with its
    /// request number, at four bytes for both slots instead of eight.)
    pub fn sync_timers(
        &mut self,
        key: u32,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
        settings: &Settings,
    ) {
        let moved = self.transport.take_moved();
        let received = self.session.received();
        let slots = &mut self.slots;
        let new_request = std::mem::replace(&mut slots.received_at_sync, received) != received;
        let activity = self.wanted_activity(settings);
        let deadline = self.wanted_deadline(settings);
        let slots = &mut self.slots;
        sync_slot(
            &mut slots.activity,
            &mut slots.activity_purpose,
            activity,
            (moved, new_request),
            timers,
            now,
            TimerEvent::Conn {
                key,
                slot: Slot::Activity,
            },
        );
        sync_slot(
            &mut slots.deadline,
            &mut slots.deadline_purpose,
            deadline,
            (moved, new_request),
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
    fn wanted_activity(&self, settings: &Settings) -> Option<WantedTimer> {
        let want = |purpose, ms, refed| Some(WantedTimer { purpose, ms, refed });
        match self.state {
            // A handshake is under the same deadline from accept.
            State::Fresh | State::Handshaking => settings
                .headers_ms
                .and_then(|ms| want(Purpose::Headers, ms, false)),
            State::Idle => {
                let ms = self.session.kept_on().keep_alive_ms(settings);
                want(Purpose::KeepAlive, ms, false)
            }
            // Past the deadline, as long again, at least the shadow's
            // length (a reload that turned the shadow off ends it at once).
            State::Overdue => {
                let ms = settings.shadow_ms.map_or(0, |ms| {
                    ms.max(self.session.kept_on().keep_alive_ms(settings))
                });
                want(Purpose::Shadow, ms, false)
            }
            State::Watching(_) => want(Purpose::PeerAfterFin, IDLE_WATCH_MS, false),
            State::ReadingHead => settings
                .headers_ms
                .and_then(|ms| want(Purpose::Headers, ms, true)),
            State::ReadingBody | State::Writing => settings
                .inactivity_ms
                .and_then(|ms| want(Purpose::Inactivity, ms, true)),
            State::Delayed => self
                .session
                .delay_ms(self.buffers.as_deref())
                .and_then(|ms| want(Purpose::Delay, ms, true)),
            // Until the answer's head comes, the upstream's timeout; then
            // as any response being written.
            State::Forwarding if self.session.awaits_upstream_head(self.buffers.as_deref()) => {
                settings
                    .upstream_timeout_ms
                    .and_then(|ms| want(Purpose::Upstream, ms, true))
            }
            State::Forwarding => settings
                .inactivity_ms
                .and_then(|ms| want(Purpose::Inactivity, ms, true)),
            State::Closing => want(Purpose::Linger, LINGER_IDLE_MS, true),
            State::Closed(_) => None,
        }
    }

    /// The deadline slot's policy: from a request's first byte until it has
    /// been received; while lingering, the cap on the whole linger.
    fn wanted_deadline(&self, settings: &Settings) -> Option<WantedTimer> {
        if self.state == State::Closing {
            return Some(WantedTimer {
                purpose: Purpose::LingerTotal,
                ms: LINGER_TOTAL_MS,
                refed: true,
            });
        }
        // A head still held by the transport (see `Conn::waiting`) is
        // being received too.
        let receiving =
            self.state == State::ReadingHead || self.session.is_receiving(self.buffers.as_deref());
        settings
            .request_ms
            .filter(|_| receiving)
            .map(|ms| WantedTimer {
                purpose: Purpose::Request,
                ms,
                refed: true,
            })
    }
}

/// Brings one timer slot in line with what its policy wants: enroll, drop,
/// re-arm for a new purpose or a new request, refresh on activity (`moved`),
/// or flip ref'd.
fn sync_slot(
    slot: &mut Option<TimerId>,
    current: &mut Purpose,
    wanted: Option<WantedTimer>,
    (moved, new_request): (bool, bool),
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
            *current = want.purpose;
        }
        (Some(want), Some(id)) => {
            if want.purpose != *current || (new_request && want.purpose.per_request()) {
                timers.rearm(id, want.ms, now);
                *current = want.purpose;
            } else if moved && want.purpose.refreshes() {
                // A refresh, unless a reload changed the duration.
                timers.rearm(id, want.ms, now);
            }
            if timers.is_refed(id) != want.refed {
                timers.set_ref(id, want.refed);
            }
        }
    }
}
