//! The lab's per-connection controls, read from a request's query string:
//! `ka=` (the real idle timeout), `advertise=` (what `Keep-Alive: timeout=`
//! says), `close=` (how the idle close is made), `after=` (what happens
//! right after this response) and `max=` (requests left on the connection).
//! `advertise=` and `close=` override, on their connection, what the
//! server-wide `--advertise` and `--idle-close` set for every one.
//!
//! Parsing is pure and allocation-free; a request without a query costs
//! one byte search. Unknown parameters are ignored (the query belongs to
//! the application too); a control with a bad value is a [`BadControl`],
//! which the server answers with 400 and a body saying what the control
//! takes. A value past a limit is refused the same way, never clamped: a
//! test that asked for something else than it gets would measure the wrong
//! thing without knowing.

use std::fmt;
use std::time::Duration;

use crate::config::parse_duration;

/// The longest idle timeout (`ka=`) or advertised timeout (`advertise=`)
/// a control may set: ten minutes, the longest `/delay` too.
pub const MAX_CONTROL_TIMEOUT_MS: u32 = 600_000;
/// The most requests `max=` may leave on a connection.
pub const MAX_CONTROL_REQUESTS: u32 = 1_000_000;

/// The query parameters the controls are read from: a forwarded target
/// loses them (`crate::forward`), so the service never sees them.
pub const NAMES: [&str; 5] = ["ka", "advertise", "close", "after", "max"];

/// What `Keep-Alive: timeout=` says on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advertise {
    /// `timeout=N`, whole seconds (rounded down, as the server's own is).
    Secs(u32),
    /// No `Keep-Alive` field at all (`Connection: keep-alive` stays).
    Nothing,
}

/// How the connection is closed when its idle timer runs out: the
/// server-wide `--idle-close` takes the same values.
pub use crate::config::values::IdleClose;

/// What happens right after the response to this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum After {
    /// The connection persists as usual.
    #[default]
    Keep,
    /// `Connection: close`, then FIN: the polite close.
    Close,
    /// The response says keep-alive, then FIN at once: a server that
    /// closes without warning.
    Silent,
    /// The response says keep-alive, then a reset.
    Rst,
}

/// The controls one request asked for; `None` leaves a setting as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Controls {
    pub ka_ms: Option<u32>,
    pub advertise: Option<Advertise>,
    pub close: Option<IdleClose>,
    pub after: Option<After>,
    /// Requests the connection takes after this one.
    pub max: Option<u32>,
}

impl Controls {
    /// Whether the request asked for anything.
    pub fn is_empty(&self) -> bool {
        *self == Controls::default()
    }
}

/// A control with a value it does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadControl {
    /// The parameter's name.
    pub name: &'static str,
    /// What it takes, in words.
    pub takes: &'static str,
}

impl fmt::Display for BadControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad value for the {} control: it takes {}",
            self.name, self.takes
        )
    }
}

const KA_TAKES: &str = "a duration from 1ms to 10m, such as 300ms or 2s";
const ADVERTISE_TAKES: &str = "a duration up to 10m, such as 5s (sent in whole seconds), or none";
const CLOSE_TAKES: &str = "fin or rst";
const AFTER_TAKES: &str = "keep, close, silent or rst";
const MAX_TAKES: &str = "a count of requests from 0 to 1000000";

/// Reads the controls from `target` (a path with its query, as routed).
/// Only the query is looked at; a fragment should already be gone.
pub fn parse_controls(target: &str) -> Result<Controls, BadControl> {
    let mut controls = Controls::default();
    let Some((_, query)) = target.split_once('?') else {
        return Ok(controls);
    };
    let query = query
        .split_once('#')
        .map_or(query, |(query, _fragment)| query);
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "ka" => controls.ka_ms = Some(parse_ka(value)?),
            "advertise" => controls.advertise = Some(parse_advertise(value)?),
            "close" => controls.close = Some(parse_close(value)?),
            "after" => controls.after = Some(parse_after(value)?),
            "max" => controls.max = Some(parse_max(value)?),
            _ => {}
        }
    }
    Ok(controls)
}

fn parse_ka(value: &str) -> Result<u32, BadControl> {
    let bad = BadControl {
        name: "ka",
        takes: KA_TAKES,
    };
    match timeout_ms(value) {
        Some(ms) if ms >= 1 => Ok(ms),
        _ => Err(bad),
    }
}

fn parse_advertise(value: &str) -> Result<Advertise, BadControl> {
    if value == "none" {
        return Ok(Advertise::Nothing);
    }
    timeout_ms(value)
        .map(|ms| Advertise::Secs(ms / 1000))
        .ok_or(BadControl {
            name: "advertise",
            takes: ADVERTISE_TAKES,
        })
}

fn parse_close(value: &str) -> Result<IdleClose, BadControl> {
    IdleClose::from_name(value).ok_or(BadControl {
        name: "close",
        takes: CLOSE_TAKES,
    })
}

fn parse_after(value: &str) -> Result<After, BadControl> {
    match value {
        "keep" => Ok(After::Keep),
        "close" => Ok(After::Close),
        "silent" => Ok(After::Silent),
        "rst" => Ok(After::Rst),
        _ => Err(BadControl {
            name: "after",
            takes: AFTER_TAKES,
        }),
    }
}

fn parse_max(value: &str) -> Result<u32, BadControl> {
    let bad = BadControl {
        name: "max",
        takes: MAX_TAKES,
    };
    if value.is_empty() || value.len() > 7 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    match value.parse() {
        Ok(n) if n <= MAX_CONTROL_REQUESTS => Ok(n),
        _ => Err(bad),
    }
}

/// A duration in the server's syntax, in whole milliseconds, if it is at
/// most [`MAX_CONTROL_TIMEOUT_MS`].
fn timeout_ms(value: &str) -> Option<u32> {
    if value.is_empty() || value.len() > 32 {
        return None;
    }
    let duration = parse_duration(value).ok()?;
    (duration <= Duration::from_millis(u64::from(MAX_CONTROL_TIMEOUT_MS)))
        .then_some(duration.as_millis() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_without_controls_asks_nothing() {
        for target in [
            "/",
            "/delay/5",
            "/?",
            "/?a=1&b",
            "/?kab=1&xka=2&KA=3&max_=x",
        ] {
            let controls = parse_controls(target).unwrap();
            assert!(controls.is_empty(), "{target}: {controls:?}");
        }
    }

    #[test]
    fn every_name_is_read_as_a_control() {
        for name in NAMES {
            let bad = parse_controls(&format!("/?{name}=%")).unwrap_err();
            assert_eq!(bad.name, name);
        }
    }

    #[test]
    fn a_control_without_a_value_is_a_bad_value() {
        assert_eq!(parse_controls("/x?max").unwrap_err().name, "max");
        assert_eq!(parse_controls("/x?a&close").unwrap_err().name, "close");
    }

    #[test]
    fn each_control_reads_its_value() {
        let controls =
            parse_controls("/bytes/10?x=1&ka=300ms&advertise=5s&close=rst&after=silent&max=3")
                .unwrap();
        assert_eq!(
            controls,
            Controls {
                ka_ms: Some(300),
                advertise: Some(Advertise::Secs(5)),
                close: Some(IdleClose::Rst),
                after: Some(After::Silent),
                max: Some(3),
            }
        );
        let controls = parse_controls("/?advertise=none&ka=10m&close=fin&after=keep&max=0");
        assert_eq!(
            controls.unwrap(),
            Controls {
                ka_ms: Some(600_000),
                advertise: Some(Advertise::Nothing),
                close: Some(IdleClose::Fin),
                after: Some(After::Keep),
                max: Some(0),
            }
        );
    }

    #[test]
    fn the_last_of_a_repeated_control_wins_and_sub_second_advertising_rounds_down() {
        let controls = parse_controls("/?ka=1s&ka=2s&advertise=2500ms&after=close&after=rst");
        let controls = controls.unwrap();
        assert_eq!(controls.ka_ms, Some(2000));
        assert_eq!(controls.advertise, Some(Advertise::Secs(2)));
        assert_eq!(controls.after, Some(After::Rst));
        let zero = parse_controls("/?advertise=0").unwrap();
        assert_eq!(zero.advertise, Some(Advertise::Secs(0)));
    }

    #[test]
    fn bad_values_name_the_control_and_what_it_takes() {
        let cases = [
            ("/?ka=", "ka"),
            ("/?ka=0", "ka"),
            ("/?ka=5", "ka"),
            ("/?ka=11m", "ka"),
            ("/?ka=10m1ms", "ka"),
            ("/?ka=-1s", "ka"),
            ("/?ka=soon", "ka"),
            ("/?advertise=", "advertise"),
            ("/?advertise=11m", "advertise"),
            ("/?advertise=None", "advertise"),
            ("/?close=", "close"),
            ("/?close=FIN", "close"),
            ("/?after=reset", "after"),
            ("/?max=-1", "max"),
            ("/?max=1000001", "max"),
            ("/?max=99999999999999999999", "max"),
            ("/?max=+1", "max"),
            ("/?ok=1&max=x&ka=1s", "max"),
        ];
        for (target, name) in cases {
            let bad = parse_controls(target).unwrap_err();
            assert_eq!(bad.name, name, "{target}");
            let text = bad.to_string();
            assert!(text.contains(name) && text.contains(bad.takes), "{text}");
        }
    }
}
