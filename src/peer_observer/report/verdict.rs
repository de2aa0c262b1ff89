//! The verdict on a peer's recent window and the paragraph of advice: what
//! happened, which side to change and to what, in the client's own terms
//! where its `User-Agent` tells which client it is (the fix's words are
//! [`crate::advice::fix`]'s, which the probe renders too).

use super::{Seen, ServerIdle, Verdict};
use crate::advice::fix::{Keeper, fix, unless_a_proxy};
use crate::advice::{Close, IdleCloseFacts, PoolLimit, Source, pool_limit};
use crate::peer_observer::NEAR_MISS_US;
use crate::peer_observer::peers::{PeerStats, Recent, Terms};

/// A verdict, the safe pool idle timeout, and the words.
pub(super) struct Judgement {
    pub verdict: Verdict,
    pub safe_ms: Option<u64>,
    pub advice: String,
}

/// What the peer's own idle closes say of its pool.
#[derive(Debug, Clone, Copy)]
pub(super) struct OwnTimeout {
    /// Where its idle closes cluster, ms.
    pub estimate_ms: Option<u32>,
    /// It closes lazily, when next used: the estimate is an upper bound.
    pub lazy: bool,
}

/// The verdict on the window, and a paragraph saying what happened, which
/// side to change and to what, in the keeper's own terms where known.
pub(super) fn judge(
    seen: Seen<'_>,
    own: OwnTimeout,
    terms: Terms,
    keeper: Keeper,
    server: ServerIdle,
) -> Judgement {
    let safe = safe_limit(seen.recent, terms);
    let real = terms.idle_timeout_ms;
    let mut judging = Judging {
        recent: seen.recent,
        real,
        promise: terms.advertised_secs.map(|s| s * 1000),
        within: window_words(seen.window_s),
        about: match real == server.idle_timeout_ms {
            true => format!("the server's idle timeout of {real} ms"),
            false => format!("its connections' own idle timeout of {real} ms (set for them)"),
        },
        fix: fix(safe, keeper),
        unless_a_proxy: unless_a_proxy(safe, keeper),
        verdict: Verdict::Ok,
        says: Vec::new(),
    };
    judging.lost_requests();
    judging.lost_past_deadline();
    judging.resets();
    judging.served_near_the_deadline();
    judging.own_timeout(own);
    judging.lost_before(seen.stats);
    Judgement {
        verdict: judging.verdict,
        safe_ms: safe.ms(),
        advice: judging.says.join(" "),
    }
}

/// The shared advice model's safe pool idle timeout for the terms that
/// bound the peer, from what the window saw.
fn safe_limit(recent: &Recent, terms: Terms) -> PoolLimit {
    let facts = IdleCloseFacts {
        source: Source::Configured,
        keeps_alive: true,
        advertised_ms: terms.advertised_secs.map(|s| s * 1000),
        close: Close::At {
            earliest_ms: terms.idle_timeout_ms as f64,
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
    pool_limit(&facts)
}

/// The judgement as it is made: each step may raise the verdict and adds
/// its sentences.
struct Judging<'a> {
    recent: &'a Recent,
    /// The idle timeout judged, ms.
    real: u64,
    /// What the server advertised, ms.
    promise: Option<u64>,
    /// "in the last 10 min".
    within: String,
    /// "the server's idle timeout of 2000 ms".
    about: String,
    /// What to change, in the keeper's terms.
    fix: String,
    /// The fix should the keeper be a proxy that does not say so.
    unless_a_proxy: Option<String>,
    verdict: Verdict,
    says: Vec<String>,
}

impl Judging<'_> {
    /// Requests lost in the window: a race, and how they were lost.
    fn lost_requests(&mut self) {
        let recent = self.recent;
        let lost = recent.late_requests();
        if lost == 0 {
            return;
        }
        self.verdict = Verdict::Race;
        let (within, about) = (&self.within, &self.about);
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
                "{joint} {n} crossed the server's FIN in flight (in before the FIN left: the \
                 client could not have known)"
            ));
        }
        if recent.late_too_close > 0 {
            let n = recent.late_too_close;
            let joint = match recent.late_after_fin + recent.late_crossing_fin {
                0 => ":",
                _ => ";",
            };
            what.push_str(&format!(
                "{joint} {n} came within a round trip after the FIN, too close to tell whether \
                 the client could have seen it"
            ));
        }
        self.says.push(format!("{what}. {}", self.fix));
        // Lost requests are where advice to the wrong party costs most.
        self.says.extend(self.unless_a_proxy.clone());
    }

    /// Reuses past the real deadline, seen only under the race guard's
    /// shadow deadline: requests production would have lost, a race.
    fn lost_past_deadline(&mut self) {
        let n = self.recent.past_deadline;
        if n == 0 {
            return;
        }
        self.verdict = Verdict::Race;
        let youngest = self
            .recent
            .lowest_failure_ms
            .map_or_else(String::new, |ms| {
                format!(" (the soonest after {ms} ms idle)")
            });
        self.says.push(format!(
            "{n} request{} reused a connection past {}{youngest} {}: served only because the \
             guard's shadow deadline kept {} open; production would have lost {}. {}",
            plural(n),
            self.about,
            self.within,
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "them" },
            self.fix
        ));
    }

    /// Idle closes made with a reset hide lost requests: never `ok`.
    fn resets(&mut self) {
        let recent = self.recent;
        if recent.server_resets == 0 {
            return;
        }
        self.verdict = self.verdict.max_with(Verdict::AtRisk);
        let n = recent.server_resets;
        let evidence = match recent.near_misses {
            0 => "no reuse came near the deadline, so none is likely".to_owned(),
            m => format!(
                "{m} reuse{} came within {} of the deadline, so some probably did",
                plural(m),
                near_miss_words()
            ),
        };
        self.says.push(format!(
            "The server closed {n} of its idle connections {} with a reset, or without its \
             watch for lack of descriptors: a request that lost the race then meets a reset and \
             never reaches the server, so lost requests cannot be counted here; {evidence}.",
            self.within
        ));
    }

    /// Served reuses near the deadline or past the promise: at risk.
    fn served_near_the_deadline(&mut self) {
        let recent = self.recent;
        if self.verdict == Verdict::Race || (recent.near_misses == 0 && recent.past_advertised == 0)
        {
            return;
        }
        self.verdict = Verdict::AtRisk;
        let mut what = Vec::new();
        if recent.near_misses > 0 {
            let n = recent.near_misses;
            what.push(format!(
                "{n} reuse{} came within {} of {}",
                plural(n),
                near_miss_words(),
                self.about
            ));
        }
        if let (n @ 1.., Some(promise)) = (recent.past_advertised, self.promise) {
            what.push(format!(
                "{n} reuse{} came after the advertised Keep-Alive timeout of {promise} ms (served: \
                 the server kept the connection longer than it promised, this time)",
                plural(n)
            ));
        }
        let what = capitalise(&what.join("; "));
        self.says
            .push(format!("{what} {}. {}", self.within, self.fix));
    }

    /// What the peer's own idle timeout says, or what the server's closes
    /// do, when nothing went wrong so far.
    fn own_timeout(&mut self, own: OwnTimeout) {
        let (real, within, fix) = (self.real, &self.within, &self.fix);
        let keeps = self.promise.unwrap_or(real).min(real);
        let estimate_words = |estimate: u64| match own.lazy {
            true => format!(
                "at most about {estimate} ms (an upper bound: it closes an expired connection \
                 only when it next needs one)"
            ),
            false => format!("about {estimate} ms"),
        };
        let ok = self.verdict == Verdict::Ok;
        let said = match own.estimate_ms.map(u64::from) {
            Some(estimate) if estimate >= keeps && ok && !own.lazy => {
                self.verdict = Verdict::AtRisk;
                format!(
                    "It keeps idle connections {}, not less than the server's {keeps} ms. {fix}",
                    estimate_words(estimate)
                )
            }
            Some(estimate) if ok && estimate < keeps => format!(
                "It closes idle connections first, after {}, {} ms before {}: nothing to change.",
                estimate_words(estimate),
                keeps - estimate,
                match keeps == real {
                    true => format!("the server would ({real} ms)"),
                    false => format!("the server's advertised {keeps} ms (it closes at {real} ms)"),
                },
            ),
            Some(estimate) if ok => format!(
                "It keeps idle connections {}; with no reuse near the deadline {within}, nothing \
                 to change yet. {fix}",
                estimate_words(estimate)
            ),
            _ if !ok => return,
            _ if self.recent.server_idle_closes > 0 => format!(
                "The server closes its idle connections first ({real} ms) and no reuse came near \
                 that deadline {within}: nothing to change. {fix}"
            ),
            _ => format!(
                "No connection of it ended idle {within}, and no reuse came near the server's \
                 deadline: nothing to change so far."
            ),
        };
        self.says.push(said);
    }

    /// Requests lost since the server started, none of them in the window.
    fn lost_before(&mut self, stats: &PeerStats) {
        if self.recent.late_requests() == 0 && stats.late_requests > 0 {
            self.says.push(format!(
                "(Since the server started: {} lost request{}, none {}.)",
                stats.late_requests,
                plural(stats.late_requests),
                self.within
            ));
        }
    }
}

/// "100 ms": how near the deadline a reuse is a near miss.
fn near_miss_words() -> String {
    format!("{} ms", NEAR_MISS_US / 1000)
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
