//! The verdict on a peer's recent window and the paragraph of advice: what
//! happened, which side to change and to what, in the client's own terms
//! where its `User-Agent` tells which client it is.

use super::{Seen, ServerIdle, Verdict};
use crate::advice::clients::{Client, PROXIES};
use crate::advice::{Close, IdleCloseFacts, Source, safe_pool_idle_timeout};
use crate::lab::peers::Terms;

/// A verdict, the safe pool idle timeout, and the words.
pub(super) struct Judgement {
    pub verdict: Verdict,
    pub safe_ms: Option<u64>,
    pub advice: String,
}

/// The verdict on the window, and a paragraph saying what happened, which
/// side to change and to what, in the client's own terms where known.
pub(super) fn judge(
    seen: Seen<'_>,
    estimate: Option<u32>,
    lazy: bool,
    terms: Terms,
    client: Option<&'static Client>,
    server: ServerIdle,
) -> Judgement {
    let Seen {
        stats,
        recent,
        window_s,
    } = seen;
    let real = terms.idle_timeout_ms;
    let promise = terms.advertised_secs.map(|s| s * 1000);
    let facts = IdleCloseFacts {
        source: Source::Configured,
        keeps_alive: true,
        advertised_ms: promise,
        close: Close::At {
            earliest_ms: real as f64,
            seen_ms: None,
            period_ms: None,
        },
        round_trip_ms: recent.round_trip_us.map(|us| f64::from(us) / 1000.0),
        lowest_failure_ms: recent.lowest_failure_ms.map(|ms| ms as f64),
        highest_success_below_failure_ms: recent
            .longest_served_gap_ms
            .filter(|&ok| recent.lowest_failure_ms.is_none_or(|failed| ok < failed))
            .map(|ms| ms as f64),
    };
    let safe = safe_pool_idle_timeout(&facts).safe_pool_idle_timeout_ms;
    let within = window_words(window_s);
    let about = match real == server.idle_timeout_ms {
        true => format!("the server's idle timeout of {real} ms"),
        false => format!("its connections' own idle timeout of {real} ms (set for them)"),
    };
    let fix = fix_words(safe, client, stats.forwarded);
    let mut verdict = Verdict::Ok;
    let mut says = Vec::new();
    let lost = recent.late_requests();
    if lost > 0 {
        verdict = Verdict::Race;
        let mut what = format!(
            "{lost} request{} lost the race {within} under {about}",
            plural(lost)
        );
        if recent.late_after_fin > 0 {
            let n = recent.late_after_fin;
            what.push_str(&format!(
                ": {n} arrived after the server had closed the connection, when the client \
                 could have seen its FIN"
            ));
        }
        if recent.late_crossing_fin > 0 {
            let n = recent.late_crossing_fin;
            let joint = if recent.late_after_fin > 0 { ";" } else { ":" };
            what.push_str(&format!(
                "{joint} {n} crossed the server's FIN in flight (sent before it could have \
                 arrived: the client could not have known)"
            ));
        }
        says.push(format!("{what}. {fix}"));
    }
    if recent.server_resets > 0 {
        verdict = verdict.max_with(Verdict::AtRisk);
        let n = recent.server_resets;
        let evidence = match recent.near_misses {
            0 => "no reuse came near the deadline, so none is likely".to_owned(),
            m => format!(
                "{m} reuse{} came within 100 ms of the deadline, so some probably did",
                plural(m)
            ),
        };
        says.push(format!(
            "The server closed {n} of its idle connections {within} with a reset, or without \
             its watch for lack of descriptors: a request that lost the race then meets a \
             reset and never reaches the server, so lost requests cannot be counted here; \
             {evidence}."
        ));
    }
    if verdict != Verdict::Race && (recent.near_misses > 0 || recent.past_advertised > 0) {
        verdict = Verdict::AtRisk;
        let mut what = Vec::new();
        if recent.near_misses > 0 {
            let n = recent.near_misses;
            what.push(format!(
                "{n} reuse{} came within 100 ms of {about}",
                plural(n)
            ));
        }
        if let (n @ 1.., Some(promise)) = (recent.past_advertised, promise) {
            what.push(format!(
                "{n} reuse{} came after the advertised Keep-Alive timeout of {promise} ms (served: \
                 the server kept the connection longer than it promised, this time)",
                plural(n)
            ));
        }
        says.push(format!("{} {within}. {fix}", capitalise(&what.join("; "))));
    }
    let keeps = promise.unwrap_or(real).min(real);
    let estimate_words = |estimate: u64| match lazy {
        true => format!(
            "at most about {estimate} ms (an upper bound: it closes an expired connection only \
             when it next needs one)"
        ),
        false => format!("about {estimate} ms"),
    };
    match estimate.map(u64::from) {
        Some(estimate) if estimate >= keeps && verdict == Verdict::Ok && !lazy => {
            verdict = Verdict::AtRisk;
            says.push(format!(
                "It keeps idle connections {}, not less than the server's {keeps} ms. {fix}",
                estimate_words(estimate)
            ));
        }
        Some(estimate) if verdict == Verdict::Ok && estimate < keeps => says.push(format!(
            "It closes idle connections first, after {}, {} ms before the server would ({real} \
             ms): nothing to change.",
            estimate_words(estimate),
            keeps - estimate
        )),
        Some(estimate) if verdict == Verdict::Ok => says.push(format!(
            "It keeps idle connections {}; with no reuse near the deadline {within}, nothing to \
             change yet. {fix}",
            estimate_words(estimate)
        )),
        _ if verdict != Verdict::Ok => {}
        _ if recent.server_idle_closes > 0 => says.push(format!(
            "The server closes its idle connections first ({real} ms) and no reuse came near that \
             deadline {within}: nothing to change. {fix}"
        )),
        _ => says.push(format!(
            "No connection of it ended idle {within}, and no reuse came near the server's \
             deadline: nothing to change so far."
        )),
    }
    if lost == 0 && stats.late_requests > 0 {
        says.push(format!(
            "(Since the server started: {} lost request{}, none {within}.)",
            stats.late_requests,
            plural(stats.late_requests)
        ));
    }
    Judgement {
        verdict,
        safe_ms: safe,
        advice: says.join(" "),
    }
}

impl Verdict {
    /// The graver of two verdicts.
    fn max_with(self, other: Verdict) -> Verdict {
        let rank = |v: Verdict| match v {
            Verdict::Ok => 0,
            Verdict::AtRisk => 1,
            Verdict::Race => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// What the client should change, in its own terms where it is known.
fn fix_words(safe: Option<u64>, client: Option<&Client>, forwarded: bool) -> String {
    let Some(safe) = safe else {
        return "No pool idle timeout is known to be safe: raise the server's keep-alive \
                timeout above how long the client keeps idle connections, or have the client \
                retry a request that meets a closed connection."
            .to_owned();
    };
    match client {
        _ if forwarded => {
            let proxies: Vec<String> = PROXIES
                .iter()
                .map(|proxy| format!("{}: {}", proxy.name, proxy.advice(safe)))
                .collect();
            format!(
                "A proxy forwards these requests: keep its idle upstream connections {safe} ms \
                 or less ({}).",
                proxies.join("; ")
            )
        }
        Some(client) if client.has_setting() => format!(
            "Set {}'s {} ({safe} ms or less).",
            client.name,
            client.advice(safe)
        ),
        Some(client) => format!(
            "{} has no such setting: {}.",
            client.name,
            client.advice(safe)
        ),
        None => format!(
            "Lower this client's pool idle timeout to {safe} ms or less (or raise the server's \
             keep-alive timeout above how long the client keeps idle connections)."
        ),
    }
}

/// "in the last 10 min" for a window of `seconds`.
fn window_words(seconds: f64) -> String {
    match seconds {
        s if s >= 120.0 && s % 60.0 == 0.0 => format!("in the last {} min", s / 60.0),
        s => format!("in the last {s} s"),
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
