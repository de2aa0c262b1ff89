//! What the controls have set on one connection, kept from the request that
//! set them until another changes them: its real idle timeout, what its
//! responses advertise, how its idle close is made, how many requests it
//! still takes, and the one-shot `after=` of the response being answered.
//!
//! Twelve bytes, held in every connection's session whether or not a test
//! ever sends a control; the server's settings (`--keep-alive-timeout`,
//! `--advertise`, `--idle-close`, `--max-requests-per-socket`) apply
//! wherever nothing was set.

use super::controls::{Advertise, After, Controls, IdleClose};
use crate::config::Settings;

/// `advertise` value: nothing set, the server's own header applies.
const ADVERTISE_DEFAULT: u16 = u16::MAX;
/// `advertise=none`: no `Keep-Alive` field.
const ADVERTISE_NOTHING: u16 = u16::MAX - 1;

/// One connection's controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepTerms {
    /// `ka=` in ms; 0: the server's `--keep-alive-timeout` + buffer.
    ka_ms: u32,
    /// `max=`: the connection's last request is number `last_request`
    /// (counting from 1); 0: no limit of its own.
    last_request: u32,
    /// `advertise=` in seconds (at most 600), or one of the sentinels above.
    advertise_secs: u16,
    /// `close=`; `None`: the server's `--idle-close`.
    close: Option<IdleClose>,
    /// What follows the response being answered (one request's worth).
    after: After,
}

impl Default for KeepTerms {
    fn default() -> Self {
        KeepTerms {
            ka_ms: 0,
            advertise_secs: ADVERTISE_DEFAULT,
            last_request: 0,
            close: None,
            after: After::Keep,
        }
    }
}

/// A `Keep-Alive` field to send in place of the server's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvertiseOverride {
    /// `Keep-Alive: timeout=N`.
    Secs(u32),
    /// No `Keep-Alive` field at all.
    Nothing,
}

impl KeepTerms {
    /// Takes what a request's controls set; `served`: responses queued
    /// before the one now being answered.
    pub fn apply(&mut self, controls: Controls, served: u32) {
        if let Some(ms) = controls.ka_ms {
            self.ka_ms = ms;
        }
        match controls.advertise {
            Some(Advertise::Secs(secs)) => {
                self.advertise_secs = u16::try_from(secs).unwrap_or(ADVERTISE_NOTHING - 1);
            }
            Some(Advertise::Nothing) => self.advertise_secs = ADVERTISE_NOTHING,
            None => {}
        }
        if let Some(close) = controls.close {
            self.close = Some(close);
        }
        if let Some(more) = controls.max {
            // This request is number served + 1; `more` follow it.
            self.last_request = served.saturating_add(1).saturating_add(more);
        }
        self.after = controls.after.unwrap_or(After::Keep);
    }

    /// The connection's real idle timeout, in ms.
    pub fn keep_alive_ms(&self, settings: &Settings) -> u64 {
        match self.ka_ms {
            0 => settings.keep_alive_ms,
            ms => u64::from(ms),
        }
    }

    /// What its responses advertise, when a control changed it.
    pub fn advertise_override(&self) -> Option<AdvertiseOverride> {
        match self.advertise_secs {
            ADVERTISE_DEFAULT => None,
            ADVERTISE_NOTHING => Some(AdvertiseOverride::Nothing),
            secs => Some(AdvertiseOverride::Secs(secs.into())),
        }
    }

    /// The `Keep-Alive: timeout=` its responses carry, in seconds (`None`:
    /// no such field).
    pub fn advertised_secs(&self, settings: &Settings) -> Option<u64> {
        match self.advertise_override() {
            None => settings.keep_alive_advertised_secs,
            Some(AdvertiseOverride::Nothing) => None,
            Some(AdvertiseOverride::Secs(secs)) => Some(u64::from(secs)),
        }
    }

    /// How its idle close is made: `close=`, else the server's
    /// `--idle-close`.
    pub fn idle_close(&self, settings: &Settings) -> IdleClose {
        self.close.unwrap_or(settings.idle_close)
    }

    /// What follows the response being answered.
    pub fn after(&self) -> After {
        self.after
    }

    /// The `after=` of a response is spent once it is answered.
    pub fn after_done(&mut self) {
        self.after = After::Keep;
    }

    /// Requests left after request number `request` (counting from 1)
    /// under the connection's own `max=`; `None`: no limit of its own.
    pub fn requests_left_after(&self, request: u32) -> Option<u32> {
        (self.last_request > 0).then(|| self.last_request.saturating_sub(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::controls::parse_controls;

    fn settings() -> Settings {
        crate::config::Config::with_listen("127.0.0.1:0".parse().unwrap()).settings()
    }

    #[test]
    fn twelve_bytes_per_connection() {
        assert!(std::mem::size_of::<KeepTerms>() <= 12);
    }

    #[test]
    fn nothing_set_means_the_server_settings() {
        let (controls, settings) = (KeepTerms::default(), settings());
        assert_eq!(controls.keep_alive_ms(&settings), settings.keep_alive_ms);
        assert_eq!(
            controls.advertised_secs(&settings),
            settings.keep_alive_advertised_secs
        );
        assert_eq!(controls.advertise_override(), None);
        assert_eq!(controls.requests_left_after(7), None);
        assert_eq!(
            (controls.idle_close(&settings), controls.after()),
            (IdleClose::Fin, After::Keep)
        );
    }

    #[test]
    fn the_servers_idle_close_applies_until_a_control_sets_one() {
        let mut settings = settings();
        settings.idle_close = IdleClose::Rst;
        let mut controls = KeepTerms::default();
        assert_eq!(controls.idle_close(&settings), IdleClose::Rst);
        controls.apply(parse_controls("/?close=fin").unwrap(), 0);
        assert_eq!(controls.idle_close(&settings), IdleClose::Fin);
        controls.apply(parse_controls("/?ka=1s").unwrap(), 1);
        assert_eq!(controls.idle_close(&settings), IdleClose::Fin, "kept");
    }

    #[test]
    fn controls_stay_until_changed_and_after_lasts_one_response() {
        let mut controls = KeepTerms::default();
        let set = parse_controls("/?ka=300ms&advertise=none&close=rst&after=silent&max=2");
        controls.apply(set.unwrap(), 4);
        assert_eq!(controls.keep_alive_ms(&settings()), 300);
        assert_eq!(controls.advertised_secs(&settings()), None);
        assert_eq!(
            controls.advertise_override(),
            Some(AdvertiseOverride::Nothing)
        );
        assert_eq!(controls.after(), After::Silent);
        // Request 5 set max=2: requests 6 and 7 follow, 7 is the last.
        assert_eq!(controls.requests_left_after(5), Some(2));
        assert_eq!(controls.requests_left_after(7), Some(0));
        controls.after_done();
        controls.apply(parse_controls("/?advertise=9s").unwrap(), 5);
        assert_eq!(controls.keep_alive_ms(&settings()), 300, "kept");
        assert_eq!(controls.advertised_secs(&settings()), Some(9));
        assert_eq!(controls.idle_close(&settings()), IdleClose::Rst, "kept");
        assert_eq!(controls.after(), After::Keep, "one-shot");
    }
}
