//! How long the pool may keep an idle upstream connection: the setting
//! (`--upstream-idle-timeout`), lowered by what the service has shown or
//! said of its own idle timeout, so the pool never races the service's
//! close (a race makes the lab blame the wrong party: a POST that meets a
//! connection the service just closed is a 502).
//!
//! - **Shown**: a pooled connection the service closed while idle, seen
//!   in the pool or by a request that met it closed before any answer,
//!   had lived its idle age. The limit becomes at most
//!   [`SHOWN_FRACTION`] (¾) of the shortest such age: the age is measured
//!   from when the lab pooled the connection, a little after the
//!   service's last write, and services' idle timers are coarse (gunicorn
//!   and uvicorn check theirs once per loop turn, nginx's close can come
//!   a few ms early), so the next close may come sooner than the one
//!   seen; a quarter of the life (250 ms of 1 s, 500 ms of 2 s) covers
//!   that and a loaded loop's lateness, and pooling for ¾ of the life
//!   still keeps most of the reuse.
//! - **Said**: an answer's `Keep-Alive: timeout=N` caps the limit at
//!   N s less [`ADVERTISED_MARGIN_MS`] (1 s), as Node's `http.Agent` does
//!   (`HTTP_AGENT_KEEP_ALIVE_TIMEOUT_BUFFER` in `lib/_http_agent.js`) and
//!   undici did with its `keepAliveTimeoutThreshold` (1 s, raised to 2 s
//!   in later releases): `timeout=1` means no reuse at all, as for both.
//!   nginx ignores the field.
//!
//! A close after less than [`FLOOR_MS`] (100 ms) idle teaches nothing:
//! no service keeps connections alive that briefly on purpose, so it is
//! an accident (a worker restarted, a crash, a request cap reached
//! without saying so), and learning from it would turn the pool off for
//! good on one accident; the retry covers it. A limit of 0 (not pooled at
//! all) comes only from what a service says (`timeout=1`, as for Node).
//! The limit only ever shrinks, for the worker's life: holding a
//! connection for less than the service keeps it never shows that the
//! service keeps it longer, and forgetting would bring the race back. A
//! service restarted under the lab a while after its last answer closes
//! its pooled connections early and the lab learns a shorter life than
//! the service's setting: that costs connects, never a wrong verdict.

/// The fraction of the shortest idle life seen that the pool keeps a
/// connection at most: numerator and denominator.
pub const SHOWN_FRACTION: (u64, u64) = (3, 4);
/// What is taken off a `Keep-Alive: timeout=N` (Node's `http.Agent`).
pub const ADVERTISED_MARGIN_MS: u64 = 1_000;
/// An idle close sooner than this is an accident, not learned from.
pub const FLOOR_MS: u64 = 100;

/// The pool's idle limit and what it was learned from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleLimit {
    /// `--upstream-idle-timeout`, in ms.
    setting_ms: u64,
    /// The limit the service's behaviour and fields allow, if they set
    /// one (0: no pooling).
    learned_ms: Option<u64>,
}

impl IdleLimit {
    pub fn new(setting_ms: u64) -> Self {
        IdleLimit {
            setting_ms,
            learned_ms: None,
        }
    }

    /// How long an idle connection may be pooled, in ms (0: not at all).
    pub fn ms(&self) -> u64 {
        self.learned_ms
            .map_or(self.setting_ms, |learned| learned.min(self.setting_ms))
    }

    /// The service closed a pooled connection idle for `age_ms`.
    /// Returns the new limit if it shrank.
    pub fn closed_idle_after(&mut self, age_ms: u64) -> Option<u64> {
        if age_ms < FLOOR_MS {
            return None;
        }
        let (numerator, denominator) = SHOWN_FRACTION;
        self.cap(age_ms.saturating_mul(numerator) / denominator)
    }

    /// An answer said `Keep-Alive: timeout=<timeout_s>`. Returns the new
    /// limit if it shrank.
    pub fn advertised(&mut self, timeout_s: u64) -> Option<u64> {
        self.cap(
            timeout_s
                .saturating_mul(1_000)
                .saturating_sub(ADVERTISED_MARGIN_MS),
        )
    }

    /// Lowers the limit to `ms`, if that is lower.
    fn cap(&mut self, ms: u64) -> Option<u64> {
        let before = self.ms();
        self.learned_ms = Some(self.learned_ms.map_or(ms, |learned| learned.min(ms)));
        let after = self.ms();
        (after < before).then_some(after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_holds_until_the_service_shows_or_says_less() {
        let limit = IdleLimit::new(1_000);
        assert_eq!(limit.ms(), 1_000);
    }

    #[test]
    fn an_idle_close_caps_the_limit_at_three_quarters_of_the_life_seen() {
        let mut limit = IdleLimit::new(1_000);
        assert_eq!(limit.closed_idle_after(1_002), Some(751));
        assert_eq!(limit.ms(), 751);
        assert_eq!(limit.closed_idle_after(300), Some(225));
        assert_eq!(limit.ms(), 225);
    }

    #[test]
    fn the_limit_never_grows_back() {
        let mut limit = IdleLimit::new(1_000);
        limit.closed_idle_after(400);
        assert_eq!(limit.closed_idle_after(2_000), None);
        assert_eq!(limit.advertised(60), None);
        assert_eq!(limit.ms(), 300);
    }

    #[test]
    fn a_close_later_than_the_setting_changes_nothing() {
        let mut limit = IdleLimit::new(1_000);
        assert_eq!(limit.closed_idle_after(5_000), None);
        assert_eq!(limit.ms(), 1_000);
    }

    #[test]
    fn a_close_sooner_than_the_floor_teaches_nothing() {
        let mut limit = IdleLimit::new(1_000);
        assert_eq!(limit.closed_idle_after(0), None);
        assert_eq!(limit.closed_idle_after(99), None);
        assert_eq!(limit.ms(), 1_000, "still pooled");
        assert_eq!(limit.closed_idle_after(100), Some(75), "the floor's own");
    }

    #[test]
    fn an_advertised_timeout_caps_the_limit_a_second_below_it() {
        let mut limit = IdleLimit::new(5_000);
        assert_eq!(limit.advertised(5), Some(4_000));
        assert_eq!(limit.advertised(2), Some(1_000));
        assert_eq!(limit.ms(), 1_000);
    }

    #[test]
    fn an_advertised_second_means_no_reuse() {
        let mut limit = IdleLimit::new(1_000);
        assert_eq!(limit.advertised(1), Some(0));
        let mut zero = IdleLimit::new(1_000);
        assert_eq!(zero.advertised(0), Some(0));
    }

    #[test]
    fn an_advertised_timeout_above_the_setting_changes_nothing() {
        let mut limit = IdleLimit::new(1_000);
        assert_eq!(limit.advertised(5), None);
        assert_eq!(limit.advertised(u64::MAX), None);
        assert_eq!(limit.ms(), 1_000);
    }

    #[test]
    fn a_setting_under_the_floor_is_kept_as_set() {
        let limit = IdleLimit::new(50);
        assert_eq!(limit.ms(), 50);
    }
}
