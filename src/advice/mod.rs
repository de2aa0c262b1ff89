//! One advice model: what is known about a server's idle close turned into
//! the idle timeout that is safe for a client or proxy pool in front of it,
//! and the words that say why. Pure: no I/O, no clock.
//!
//! ```text
//!  server   response out ···· idle ···· close (earliest E, maybe in passes)
//!  client        response in ···· pool idle x ···· reuse ──▶ reaches the server at x + round trip
//!  safe pool idle timeout  =  E − round trip − guard, rounded down, and below every failed reuse
//! ```
//!
//! The server's idle timer starts when its response leaves; the pool's when
//! the response arrives, one way later; a reuse sent after `x` ms reaches
//! the server one more way later, at its idle time `x + round trip`. So the
//! reuse is safe while `x + round trip < E`, less a guard for the client's
//! own timer firing late (2% of `E`, at least 20 ms). Measured from the
//! client, the close times equal the server's (the response and the FIN
//! both travel one way), so both sources subtract the same round trip.
//!
//! The number and its words are apart: [`pool_limit`] gives the number
//! alone, a [`PoolLimit`] (a value, "do not pool", or "unknown"), from a
//! chain of steps kept as numbers, and [`safe_pool_idle_timeout`] renders the
//! words from the same steps.
//!
//! Rules, in order: a server that closes after every response gets
//! [`PoolLimit::DoNotPool`] (keep no idle connections); a close whose earliest point is unknown (closes in
//! passes too far apart to see) gets no number; reuses that failed below
//! where the closes put the limit mean only an idle time at which every
//! reuse was answered is offered, or no number; otherwise
//! `E − round trip − guard`, and never at or above a failed reuse. The
//! value is rounded down to two significant digits, and the explanation
//! says so. The value is never at or above any close or failure the facts
//! hold (a property test checks it).
//!
//! How each caller fills in [`IdleCloseFacts`]:
//! - **The probe** (`keepalive-server probe`, [`Source::MeasuredFromClient`]):
//!   `close` is [`Close::At`] with `earliest_ms` the lowest idle time at
//!   which its measurements allow a close (the earliest close seen, lowered
//!   for the probe's own timing uncertainty and for phases it did not see
//!   when the server closes in passes), `seen_ms` the range seen and
//!   `period_ms` the passes' period; [`Close::Unknown`] when every close
//!   came in one pass; [`Close::NotWithin`] when nothing closed within
//!   `--max-wait`. `round_trip_ms` is the fastest small request on a warm
//!   keep-alive connection; the failures come from the sweep.
//! - **`/peers`** (the server about itself, [`Source::Configured`]): `close`
//!   is [`Close::At`] with `earliest_ms` the configured close
//!   (`--keep-alive-timeout` + `--keep-alive-buffer`, or a `ka=` control's
//!   value, whichever the peer met: the youngest idle connection the server
//!   closed), `seen_ms` and `period_ms` `None` (its timer closes each
//!   connection on time, never early). The server measures no round trip
//!   of its own: `round_trip_ms` is the peer's smoothed RTT from `TCP_INFO`
//!   when recorded, else `None`, and the function then allows
//!   [`ASSUMED_ROUND_TRIP_MS`] and says so. `lowest_failure_ms` is the
//!   smallest reuse gap of a late request (a request that arrived after the
//!   server's FIN), and `highest_success_below_failure_ms` the largest
//!   reuse gap served below it. With the same round trip, both callers give
//!   the same number for one server; otherwise the explanations say which
//!   round trip each used.
//!
//! What to change is said once, in [`fix`], for both callers to render:
//! the headline with the value, and the fix in the terms of whoever keeps
//! the pool ([`clients`] holds the settings).

pub mod clients;
pub mod fix;
pub mod servers;

use std::fmt::Write as _;

/// The guard for the client's own timer: this share of the close time...
const GUARD_SHARE: f64 = 0.02;
/// ...and at least this many ms.
const GUARD_MIN_MS: f64 = 20.0;
/// The round trip allowed when none was measured, ms.
pub const ASSUMED_ROUND_TRIP_MS: f64 = 100.0;

/// Where the close times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The server's own configuration: exact, on the server's clock.
    Configured,
    /// A client's measurement: response received to FIN or reset received.
    MeasuredFromClient,
}

/// What is known of when the server closes an idle connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Close {
    /// It closes idle connections, at `earliest_ms` at the earliest.
    At {
        /// The lowest idle time, ms, at which it closes or may close one.
        earliest_ms: f64,
        /// The lowest and highest close times seen, ms, when measured.
        seen_ms: Option<(f64, f64)>,
        /// Closes come in passes this many ms apart, so a connection closes
        /// anywhere in one period, by when it went idle.
        period_ms: Option<f64>,
    },
    /// It closes idle connections, but how soon is not known: why.
    Unknown { why: String },
    /// No idle connection was closed within this many ms.
    NotWithin { watched_ms: f64 },
}

/// Everything the advice is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleCloseFacts {
    pub source: Source,
    /// The server keeps connections open after a response at all.
    pub keeps_alive: bool,
    /// `Keep-Alive: timeout=`, in ms.
    pub advertised_ms: Option<u64>,
    pub close: Close,
    /// The network round trip between the client and the server, ms.
    pub round_trip_ms: Option<f64>,
    /// The lowest idle time, ms, at which a reuse failed.
    pub lowest_failure_ms: Option<f64>,
    /// The highest idle time, ms, below `lowest_failure_ms`, at which every
    /// reuse tried was answered.
    pub highest_success_below_failure_ms: Option<f64>,
}

/// The safe pool idle timeout, the number alone: what a pool in front
/// should do with idle connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolLimit {
    /// Close idle connections after at most this many ms (above 0).
    AtMost(u64),
    /// Keep no idle connections: the server closes them too soon to
    /// reuse, or after every response.
    DoNotPool,
    /// No value is known safe, or (the server kept every connection)
    /// none is needed.
    Unknown,
}

impl PoolLimit {
    /// As a number of ms: `Some(0)` keeps no idle connections, `None` is
    /// no value (the JSON's `safe_pool_idle_timeout_ms`).
    pub fn ms(self) -> Option<u64> {
        match self {
            PoolLimit::AtMost(ms) => Some(ms),
            PoolLimit::DoNotPool => Some(0),
            PoolLimit::Unknown => None,
        }
    }
}

impl From<Option<u64>> for PoolLimit {
    /// The limit a number of ms stands for (as [`PoolLimit::ms`] gives it).
    fn from(ms: Option<u64>) -> Self {
        match ms {
            Some(0) => PoolLimit::DoNotPool,
            Some(ms) => PoolLimit::AtMost(ms),
            None => PoolLimit::Unknown,
        }
    }
}

/// The safe pool idle timeout and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    pub limit: PoolLimit,
    /// What the value is and how it follows from the facts.
    pub explanation: String,
    /// The server promises more than it keeps.
    pub warning: Option<String>,
}

/// The safe pool idle timeout for a server: the number alone, in three
/// steps: the limit the closes set, lowered below any failed reuse,
/// rounded down.
pub fn pool_limit(facts: &IdleCloseFacts) -> PoolLimit {
    Reasoning::of(facts).limit()
}

/// The safe pool idle timeout for a server and its explanation: the
/// number from [`pool_limit`]'s steps, the words rendered from them, then
/// what the advertised timeout is worth.
pub fn safe_pool_idle_timeout(facts: &IdleCloseFacts) -> Advice {
    let reasoning = Reasoning::of(facts);
    let limit = reasoning.limit();
    let mut words = reasoning.words(facts);
    judge_the_promise(facts, limit, &mut words);
    Advice {
        limit,
        explanation: words.trim().to_owned(),
        warning: broken_promise(facts),
    }
}

/// Why the closes set no limit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NoLimit {
    /// [`Close::Unknown`] or [`Close::NotWithin`]: the facts say why.
    FromCloses,
    /// A reuse failed below the closes' limit, and none below it was seen
    /// answered.
    NoneAnswered,
}

/// The steps from the facts to the limit, as numbers: what the words are
/// rendered from.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reasoning {
    /// The server keeps connections alive at all.
    keeps_alive: bool,
    /// The highest idle time, ms, a reuse may leave at by the closes
    /// alone (`E − round trip − guard`, within the promise).
    from_closes: Option<f64>,
    /// A failed reuse below that limit: when it failed, and the idle time
    /// at which every reuse below it was answered, if one was.
    failure: Option<(f64, Option<f64>)>,
    /// The highest idle time, ms, before rounding, or why there is none.
    limit: Result<f64, NoLimit>,
}

impl Reasoning {
    fn of(facts: &IdleCloseFacts) -> Reasoning {
        let from_closes = limit_from_closes(facts);
        let mut reasoning = Reasoning {
            keeps_alive: facts.keeps_alive,
            from_closes,
            failure: None,
            limit: from_closes.ok_or(NoLimit::FromCloses),
        };
        let Some(failed) = facts.lowest_failure_ms else {
            return reasoning;
        };
        let below_failure = failed - guard(failed);
        // Closes too soon to keep anything: no reuse, nothing to fail.
        if from_closes.is_some_and(|limit| limit <= 0.0 || limit <= below_failure) {
            return reasoning;
        }
        let answered = facts
            .highest_success_below_failure_ms
            .filter(|&ok| ok < failed);
        reasoning.failure = Some((failed, answered));
        reasoning.limit = answered
            .map(|ok| ok.min(below_failure))
            .ok_or(NoLimit::NoneAnswered);
        reasoning
    }

    /// The value: rounded down to two significant digits.
    fn limit(&self) -> PoolLimit {
        match (self.keeps_alive, self.limit) {
            (false, _) => PoolLimit::DoNotPool,
            (true, Err(_)) => PoolLimit::Unknown,
            (true, Ok(limit)) => match round_down(limit) {
                0 => PoolLimit::DoNotPool,
                ms => PoolLimit::AtMost(ms),
            },
        }
    }

    /// The words: the value first (or why there is none last), then the
    /// closes' sentences and the failure's.
    fn words(&self, facts: &IdleCloseFacts) -> String {
        if !self.keeps_alive {
            return "The server closes the connection after every response (it does not keep \
                    connections alive): a pool gains nothing by keeping idle connections to it; \
                    open a new one per request."
                .to_owned();
        }
        let mut words = match self.from_closes {
            Some(_) => closes_words(facts),
            None => no_close_words(&facts.close),
        };
        if let Some((failed, answered)) = self.failure {
            let _ = write!(
                words,
                " A reuse failed after {failed:.0} ms idle, earlier than the closes allow for"
            );
            match answered {
                Some(ok) => {
                    let _ = write!(
                        words,
                        "; every reuse after {ok:.0} ms idle was answered, so that is the limit."
                    );
                }
                None => words.push_str(
                    ", and none below it was seen answered: no idle timeout is known to be safe.",
                ),
            }
        }
        if let Ok(limit) = self.limit {
            words = format!("{} {words}", fix::headline(self.limit(), limit.max(0.0)));
        }
        words
    }
}

/// The guard for the client's own timer against a close at `ms`.
fn guard(ms: f64) -> f64 {
    (ms * GUARD_SHARE).max(GUARD_MIN_MS)
}

/// The round trip a reuse must allow for, and how the words name it.
fn round_trip(facts: &IdleCloseFacts) -> (f64, String) {
    match facts.round_trip_ms {
        Some(ms) => (
            ms.max(0.0),
            format!("the round trip ({}, measured)", round_trip_text(ms)),
        ),
        None => (
            ASSUMED_ROUND_TRIP_MS,
            format!("a round trip of {ASSUMED_ROUND_TRIP_MS:.0} ms (not measured here: assumed)"),
        ),
    }
}

/// What a server advertises below its earliest close, ms: what a server
/// keeps past its promise is grace against the race, not room for a pool
/// to use, so the advice stays within the promise.
fn promise_below(facts: &IdleCloseFacts, earliest: f64) -> Option<f64> {
    facts
        .advertised_ms
        .map(|ms| ms as f64)
        .filter(|&promise| promise < earliest)
}

/// The earliest close, ms, when the facts hold one.
fn earliest(facts: &IdleCloseFacts) -> Option<f64> {
    match facts.close {
        Close::At { earliest_ms, .. } => Some(earliest_ms),
        _ => None,
    }
}

/// Step 1: the limit the closes set (`E − round trip − guard`, within the
/// promise): the highest idle time, ms, a reuse may leave at, if the
/// closes set one.
fn limit_from_closes(facts: &IdleCloseFacts) -> Option<f64> {
    let earliest = earliest(facts)?;
    let basis = promise_below(facts, earliest).unwrap_or(earliest);
    Some(basis - round_trip(facts).0 - guard(basis))
}

/// Step 1's words where the closes set a limit: when the server closes,
/// the promise kept within, and the margin a reuse leaves.
fn closes_words(facts: &IdleCloseFacts) -> String {
    let Close::At {
        earliest_ms,
        seen_ms,
        period_ms,
    } = facts.close
    else {
        return String::new();
    };
    let mut words = close_words(facts.source, earliest_ms, seen_ms, period_ms);
    let promise = promise_below(facts, earliest_ms);
    if let Some(promise) = promise {
        let _ = write!(
            words,
            " It promises less (Keep-Alive: timeout={}), and the advice keeps within the \
             promise: what a server keeps past it is grace against the race, not room to use.",
            promise / 1000.0
        );
    }
    let basis = promise.unwrap_or(earliest_ms);
    let (round_trip, round_trip_words) = round_trip(facts);
    let _ = write!(
        words,
        " A reuse must leave {:.0} ms before that: {round_trip_words} and {:.0} ms for the \
         client's own timer.",
        round_trip + guard(basis),
        guard(basis)
    );
    words
}

/// Step 1's words where the closes set no limit.
fn no_close_words(close: &Close) -> String {
    match close {
        Close::At { .. } => String::new(),
        Close::Unknown { why } => format!("{why}: no idle timeout is known to be safe."),
        Close::NotWithin { watched_ms } => format!(
            "The server kept idle connections more than {} s: its idle timeout does not limit a \
             pool in front of it (use the pool's own).",
            trim(watched_ms / 1000.0)
        ),
    }
}

/// A warning when the advertised `Keep-Alive: timeout` promises more
/// than the server keeps.
fn broken_promise(facts: &IdleCloseFacts) -> Option<String> {
    let earliest = earliest(facts)?;
    let advertised = facts.advertised_ms?;
    // A measured close may read a few ms early (the measurement's own
    // uncertainty is taken off it): only a clear shortfall is a warning.
    let tolerance = match facts.source {
        Source::Configured => 0.0,
        Source::MeasuredFromClient => (earliest * 0.005).max(5.0),
    };
    (facts.keeps_alive && advertised as f64 > earliest + tolerance).then(|| {
        format!(
            "the server advertises Keep-Alive: timeout={} but closes idle connections after \
             {earliest:.0} ms: clients that trust the header will race",
            advertised / 1000
        )
    })
}

/// Step 4: what the advertised `Keep-Alive: timeout` is worth, a sentence
/// added to `words` when there is a value and no warning.
fn judge_the_promise(facts: &IdleCloseFacts, limit: PoolLimit, words: &mut String) {
    if !facts.keeps_alive || limit == PoolLimit::Unknown || broken_promise(facts).is_some() {
        return;
    }
    match (facts.advertised_ms, earliest(facts)) {
        (Some(advertised), Some(earliest))
            if advertised as f64 + trust_margin(round_trip(facts).0) > earliest =>
        {
            let _ = write!(
                words,
                " Its Keep-Alive: timeout={} leaves {:.0} ms before the close, less than a reuse \
                 sent at that time needs ({:.0} ms: the round trip and {GUARD_MIN_MS:.0} ms for \
                 the client's timer): a client that waits the whole advertised time may still \
                 race.",
                advertised / 1000,
                (earliest - advertised as f64).max(0.0),
                trust_margin(round_trip(facts).0)
            );
        }
        (Some(advertised), _) => {
            let _ = write!(
                words,
                " Its Keep-Alive: timeout={} is safe to trust.",
                advertised / 1000
            );
        }
        (None, _) => words.push_str(" It advertises no Keep-Alive timeout: configure the pool's."),
    }
}

/// What the advertised timeout must leave before the earliest close for a
/// client that trusts it: its last reuse, sent when its own timer says the
/// advertised time is up, reaches the server a round trip later, the timer
/// firing late by up to [`GUARD_MIN_MS`]. (The pool advice's guard, a share
/// of the close time, is a margin on a value the probe chose; applied to
/// the header it would call a 65 s promise kept 66 s a race, which is what
/// Node's and this server's 1 s buffer is made to prevent.)
fn trust_margin(round_trip: f64) -> f64 {
    round_trip + GUARD_MIN_MS
}

/// The sentence on when the server closes.
fn close_words(
    source: Source,
    earliest: f64,
    seen: Option<(f64, f64)>,
    period: Option<f64>,
) -> String {
    let origin = match source {
        Source::Configured => "configured, on the server's clock",
        Source::MeasuredFromClient => {
            "measured from the client: response received to close received"
        }
    };
    match (seen, period) {
        (Some((min, max)), Some(period)) => format!(
            "The server closes idle connections in passes every {period:.0} ms, so a connection \
             closes {min:.0} to {max:.0} ms after its last response by when it went idle \
             ({origin}); the earliest possible is {earliest:.0} ms."
        ),
        (Some((min, max)), None) if max - min > (0.005 * min).max(5.0) => format!(
            "The server's closes came {min:.0} to {max:.0} ms after the last response, varying \
             with when the connection went idle ({origin}); the earliest is taken as \
             {earliest:.0} ms."
        ),
        (Some((min, _)), None) => format!(
            "The server closes idle connections after {min:.0} ms ({origin}; {earliest:.0} ms \
             allowing for the measurement)."
        ),
        (None, _) => format!(
            "The server closes idle connections {earliest:.0} ms after their last response \
             ({origin})."
        ),
    }
}

/// A round trip with the digits that matter: 0.031 ms, 1.2 ms, 85 ms.
fn round_trip_text(ms: f64) -> String {
    match ms {
        ms if ms < 1.0 => format!("{ms:.3} ms"),
        ms if ms < 10.0 => format!("{ms:.1} ms"),
        ms => format!("{ms:.0} ms"),
    }
}

/// Rounds down to two significant digits (2934 → 2900, 456 → 450).
pub fn round_down(ms: f64) -> u64 {
    let ms = ms.max(0.0).floor() as u64;
    if ms < 100 {
        return ms;
    }
    let step = 10u64.pow(ms.ilog10() - 1);
    ms / step * step
}

/// Seconds without trailing zeros: 1.9, 2, 0.05.
pub(crate) fn trim(seconds: f64) -> String {
    let text = format!("{seconds:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The explanation holds `words`.
    fn says(advice: &Advice, words: &str) {
        let text = &advice.explanation;
        assert!(text.contains(words), "{words:?} not in: {text}");
    }

    fn measured(earliest: f64, round_trip: Option<f64>) -> IdleCloseFacts {
        IdleCloseFacts {
            source: Source::MeasuredFromClient,
            keeps_alive: true,
            advertised_ms: None,
            close: Close::At {
                earliest_ms: earliest,
                seen_ms: Some((earliest + 1.0, earliest + 2.0)),
                period_ms: None,
            },
            round_trip_ms: round_trip,
            lowest_failure_ms: None,
            highest_success_below_failure_ms: None,
        }
    }

    #[test]
    fn the_limit_is_the_earliest_close_less_round_trip_and_guard_rounded_down() {
        let advice = safe_pool_idle_timeout(&measured(3000.0, Some(1.0)));
        // 3000 - (1 + 60) = 2939, rounded down.
        assert_eq!(advice.limit.ms(), Some(2900));
        says(&advice, "2939 ms rounded down");
        says(&advice, "measured from the client");
    }

    #[test]
    fn probe_and_peers_agree_for_one_server_given_one_round_trip() {
        // --keep-alive-timeout 2s --keep-alive-buffer 0s: the server knows
        // 2000 ms; the probe measures a little later, less its uncertainty.
        let peers = IdleCloseFacts {
            source: Source::Configured,
            advertised_ms: Some(2000),
            close: Close::At {
                earliest_ms: 2000.0,
                seen_ms: None,
                period_ms: None,
            },
            ..measured(0.0, Some(0.1))
        };
        let probe = IdleCloseFacts {
            advertised_ms: Some(2000),
            ..measured(1997.5, Some(0.1))
        };
        let (peers, probe) = (
            safe_pool_idle_timeout(&peers),
            safe_pool_idle_timeout(&probe),
        );
        assert_eq!(peers.limit.ms(), Some(1900));
        assert_eq!(probe.limit.ms(), Some(1900));
        says(&peers, "configured");
        // Without a round trip the server side allows one, and says so.
        let unknown = IdleCloseFacts {
            round_trip_ms: None,
            ..measured(2000.0, None)
        };
        let advice = safe_pool_idle_timeout(&unknown);
        assert_eq!(advice.limit.ms(), Some(1800));
        says(&advice, "assumed");
    }

    #[test]
    fn passes_are_explained_and_the_earliest_possible_close_is_used() {
        let facts = IdleCloseFacts {
            close: Close::At {
                earliest_ms: 2010.0,
                seen_ms: Some((2042.0, 2956.0)),
                period_ms: Some(1000.0),
            },
            ..measured(0.0, Some(0.2))
        };
        let advice = safe_pool_idle_timeout(&facts);
        // 2010 - 0.2 - 40.2 = 1969.6.
        assert_eq!(advice.limit.ms(), Some(1900));
        says(&advice, "passes every 1000 ms");
    }

    #[test]
    fn failures_below_the_closes_limit_leave_only_what_was_seen_answered() {
        let mut facts = measured(1000.0, Some(1.0));
        facts.lowest_failure_ms = Some(900.0);
        facts.highest_success_below_failure_ms = Some(700.0);
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), Some(700));
        // None answered below the failure: no number.
        facts.highest_success_below_failure_ms = None;
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), None);
        says(&advice, "no idle timeout is known");
        // A failure past the deadline changes nothing.
        facts.lowest_failure_ms = Some(1005.0);
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), Some(970));
    }

    #[test]
    fn unknown_and_unlimited_closes_give_no_number() {
        let mut facts = measured(0.0, Some(1.0));
        facts.close = Close::Unknown {
            why: "every close came in one pass".into(),
        };
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), None);
        says(&advice, "one pass");
        facts.close = Close::NotWithin { watched_ms: 300.0 };
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), None);
        says(&advice, "more than 0.3 s");
    }

    #[test]
    fn no_keep_alive_and_too_soon_mean_keep_none() {
        let mut facts = measured(10.0, Some(1.0));
        assert_eq!(pool_limit(&facts).ms(), Some(0));
        facts.keeps_alive = false;
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit.ms(), Some(0));
        says(&advice, "after every response");
    }

    #[test]
    fn the_advertised_timeout_is_judged() {
        let mut facts = measured(2000.0, Some(1.0));
        facts.advertised_ms = Some(5000);
        let warning = safe_pool_idle_timeout(&facts).warning.expect("a warning");
        assert!(warning.contains("timeout=5"), "{warning}");
        facts.advertised_ms = Some(1000);
        let advice = safe_pool_idle_timeout(&facts);
        says(&advice, "safe to trust");
        facts.advertised_ms = Some(2000);
        let advice = safe_pool_idle_timeout(&facts);
        says(&advice, "may still race");
    }

    #[test]
    fn the_number_comes_without_the_words() {
        let facts = measured(2000.0, Some(0.1));
        assert_eq!(pool_limit(&facts), PoolLimit::AtMost(1900));
        let advice = safe_pool_idle_timeout(&facts);
        assert_eq!(advice.limit, PoolLimit::AtMost(1900));
        assert!(advice.explanation.starts_with("A client or proxy pool"));
        says(&advice, "at most 1900 ms");
        let closed = IdleCloseFacts {
            keeps_alive: false,
            ..facts.clone()
        };
        assert_eq!(pool_limit(&closed), PoolLimit::DoNotPool);
        assert_eq!(pool_limit(&measured(15.0, Some(0.1))), PoolLimit::DoNotPool);
        let unknown = IdleCloseFacts {
            close: Close::NotWithin { watched_ms: 9000.0 },
            ..facts
        };
        assert_eq!(pool_limit(&unknown), PoolLimit::Unknown);
        assert_eq!(PoolLimit::from(Some(0)), PoolLimit::DoNotPool);
        assert_eq!(PoolLimit::from(Some(1900)).ms(), Some(1900));
        assert_eq!(PoolLimit::Unknown.ms(), None);
    }

    #[test]
    fn round_down_keeps_two_digits() {
        assert_eq!(round_down(2934.9), 2900);
        assert_eq!(round_down(456.0), 450);
        assert_eq!(round_down(63_700.0), 63_000);
        assert_eq!(round_down(42.5), 42);
        assert_eq!(round_down(-3.0), 0);
    }

    fn close() -> impl Strategy<Value = Close> {
        prop_oneof![
            (
                1.0..200_000.0f64,
                proptest::option::of((0.0..5000.0f64, 0.0..5000.0f64)),
                proptest::option::of(1.0..5000.0f64)
            )
                .prop_map(|(earliest, seen, period)| Close::At {
                    earliest_ms: earliest,
                    seen_ms: seen.map(|(a, b)| (earliest + a, earliest + a + b)),
                    period_ms: period,
                }),
            Just(Close::Unknown {
                why: "one pass".into()
            }),
            (1.0..600_000.0f64).prop_map(|watched| Close::NotWithin {
                watched_ms: watched
            }),
        ]
    }

    fn facts() -> impl Strategy<Value = IdleCloseFacts> {
        (
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(0u64..300_000),
            close(),
            proptest::option::of(0.0..2000.0f64),
            proptest::option::of(1.0..200_000.0f64),
            proptest::option::of(0.0..200_000.0f64),
        )
            .prop_map(
                |(configured, keeps_alive, advertised, close, rtt, failure, success)| {
                    IdleCloseFacts {
                        source: if configured {
                            Source::Configured
                        } else {
                            Source::MeasuredFromClient
                        },
                        keeps_alive,
                        advertised_ms: advertised,
                        close,
                        round_trip_ms: rtt,
                        lowest_failure_ms: failure,
                        highest_success_below_failure_ms: success,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The advice is never at or above a close or a failure it was given.
        #[test]
        fn never_at_or_above_a_close_or_a_failure(facts in facts()) {
            let advice = safe_pool_idle_timeout(&facts);
            prop_assert_eq!(pool_limit(&facts), advice.limit);
            prop_assert!(!advice.explanation.is_empty());
            if let Some(safe) = advice.limit.ms() {
                let safe = safe as f64;
                if let Close::At { earliest_ms, seen_ms, .. } = facts.close {
                    prop_assert!(safe < earliest_ms, "{safe} vs close {earliest_ms}: {advice:?}");
                    if let Some((min, _)) = seen_ms {
                        prop_assert!(safe < min, "{safe} vs seen {min}");
                    }
                }
                if let Some(failed) = facts.lowest_failure_ms {
                    prop_assert!(safe < failed, "{safe} vs failure {failed}: {advice:?}");
                }
                let says_it = advice.explanation.contains(&format!("{safe} ms"));
                prop_assert!(safe == 0.0 || says_it, "{advice:?}");
            } else if facts.keeps_alive {
                let known = matches!(facts.close, Close::At { .. });
                prop_assert!(!known || facts.lowest_failure_ms.is_some(), "{advice:?}");
            }
        }
    }
}
