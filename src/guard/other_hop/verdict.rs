//! The other hop's verdict in the guard, without sockets: which of the
//! check's idle closes are the service's own, and the probe's judgement
//! ([`lb_hop::judge_held`]) on them.
//!
//! A service that COMMAND started is stopped by COMMAND, and its idle
//! connections close with it: those closes say nothing of its idle
//! timeout. So when the service no longer answered once the check's
//! connections were closed, its closes short of the threshold are taken
//! for its going away, from the first of them on, and the check is cut
//! short there (inconclusive, not a pass). A close before the threshold
//! by a service that still answers after it is conclusive: the service
//! closes first.

use serde::Serialize;

use crate::advice::servers::Head;
use crate::probe::closes::{self, CloseSample};
use crate::probe::fingerprint;
use crate::probe::idle::Idle;
use crate::probe::lb_hop::{self, Front, LbHop, Verdict};

/// The guard's `lb_hop`: the probe's keys, with the service's URL and
/// how far the check got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceHop {
    /// The service (`--upstream`), checked straight, not through the lab.
    pub upstream: String,
    #[serde(flatten)]
    pub hop: LbHop,
    /// The longest a connection was held idle while the service accepted
    /// connections, ms (`None`: the check never ran).
    pub held_idle_ms: Option<f64>,
    /// Why the check stopped short of the threshold, when it did.
    pub cut_short: Option<String>,
}

impl ServiceHop {
    /// Whether the service closes idle connections before the balancer.
    pub fn closes_first(&self) -> bool {
        self.hop.verdict == Verdict::ClosesFirst
    }

    /// Whether the check showed neither a pass nor a failure.
    pub fn inconclusive(&self) -> bool {
        self.hop.verdict == Verdict::Inconclusive
    }
}

/// What the check measured: the idle connections, the fields of a fresh
/// response (asked for when the service came up), and whether the service
/// had stopped answering when they were done.
pub struct Measured<'a> {
    pub idle: &'a Idle,
    pub fields: Head,
    pub stopped: bool,
}

/// Judges the service at `upstream` against `front` from what the check
/// measured.
pub fn judge(upstream: &str, front: Front, measured: Measured<'_>) -> ServiceHop {
    let threshold_ms = front.threshold().as_secs_f64() * 1e3;
    let idle = measured.idle;
    // A stopped service's closes are trusted up to its first one.
    let cut = measured
        .stopped
        .then(|| idle.samples.iter().map(|s| s.closed_ms).reduce(f64::min))
        .flatten();
    let counted: Vec<CloseSample> = idle
        .samples
        .iter()
        .filter(|sample| counts(sample, threshold_ms, cut))
        .copied()
        .collect();
    let held = counted.len() == idle.samples.len();
    let head = fingerprint::with_promise(measured.fields, &idle.promise);
    let hop = lb_hop::judge_held(
        front,
        idle.promise.persistent(),
        closes::analyse(&counted).as_ref(),
        &head,
        held,
    );
    let held_idle_ms = idle
        .samples
        .iter()
        .map(|s| cut.map_or(s.closed_ms, |cut| s.closed_ms.min(cut)) - s.idle_from_ms)
        .chain((idle.still_open > 0).then_some(threshold_ms))
        .fold(0.0_f64, f64::max);
    let cut_short = (hop.verdict == Verdict::Inconclusive).then(|| match cut {
        Some(_) => format!(
            "the service no longer answered once its idle connections closed (COMMAND \
             stopped it?): they were held {:.1} s of the {:.1} s, and their closes are taken \
             for its going away, not its idle timeout",
            held_idle_ms / 1e3,
            threshold_ms / 1e3
        ),
        None => "its idle connections were not held to the end".to_owned(),
    });
    ServiceHop {
        upstream: upstream.to_owned(),
        hop,
        held_idle_ms: Some(round1(held_idle_ms)),
        cut_short,
    }
}

/// The hop of a check that could not run, or broke off, and why.
pub fn not_checked(upstream: &str, front: Front, why: String) -> ServiceHop {
    ServiceHop {
        upstream: upstream.to_owned(),
        hop: lb_hop::judge_held(front, true, None, &Head::default(), false),
        held_idle_ms: None,
        cut_short: Some(why),
    }
}

/// Whether a close is the service's own idle close: it came before the
/// cut (none: the service still answered), or after the threshold anyway.
fn counts(sample: &CloseSample, threshold_ms: f64, cut_ms: Option<f64>) -> bool {
    cut_ms.is_none_or(|cut| sample.closed_ms < cut || sample.idle_lo_ms() >= threshold_ms)
}

fn round1(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

#[cfg(test)]
pub(in crate::guard) mod tests {
    use std::time::Duration;

    use super::*;

    fn front() -> Front {
        Front::from_flags(Some(Duration::from_secs(2)), None, None).unwrap()
    }

    /// Four connections idle from 0, 100, 200 and 300 ms, each closed
    /// `after` ms later.
    fn idle_closing_after(after: f64) -> Idle {
        let samples: Vec<CloseSample> = (0..4)
            .map(|i| {
                let from = f64::from(i) * 100.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: from,
                    closed_ms: from + after,
                    closed_lo_ms: from + after - 1.0,
                    response_window_ms: 0.0,
                }
            })
            .collect();
        Idle::of_samples(&samples)
    }

    /// The hop of four closes `after` ms idle against a 2 s balancer, by
    /// a service that had `stopped` or not (for the outcome's tests).
    pub(in crate::guard) fn hop_closing_after(after: f64, stopped: bool) -> ServiceHop {
        judge(
            "http://s/",
            front(),
            measured(&idle_closing_after(after), stopped),
        )
    }

    fn measured(idle: &Idle, stopped: bool) -> Measured<'_> {
        Measured {
            idle,
            fields: Head::default(),
            stopped,
        }
    }

    #[test]
    fn a_close_by_a_service_that_still_answers_closes_first() {
        let idle = idle_closing_after(1000.0);
        let hop = judge("http://s/", front(), measured(&idle, false));
        assert!(hop.closes_first(), "{hop:?}");
        assert_eq!(hop.cut_short, None);
        assert_eq!(
            hop.hop.service_closed_after_ms,
            Some(999.0),
            "the earliest it can have been"
        );
    }

    #[test]
    fn closes_by_a_service_that_stopped_cut_the_check_short() {
        let idle = idle_closing_after(1000.0);
        let hop = judge("http://s/", front(), measured(&idle, true));
        assert!(hop.inconclusive(), "{hop:?}");
        let why = hop.cut_short.as_deref().unwrap();
        assert!(
            why.contains("no longer answered") && why.contains("held 1.0 s of the 2.2 s"),
            "{why}"
        );
        assert_eq!(hop.held_idle_ms, Some(1000.0));
    }

    #[test]
    fn closes_past_the_threshold_pass_whatever_came_after() {
        let idle = idle_closing_after(2500.0);
        let hop = judge("http://s/", front(), measured(&idle, true));
        assert_eq!(hop.hop.verdict, Verdict::Ok, "{hop:?}");
        assert_eq!(hop.cut_short, None);
        let json = serde_json::to_value(&hop).unwrap();
        assert_eq!(json["upstream"], "http://s/");
        assert_eq!(json["verdict"], "ok");
        assert_eq!(json["lb_idle_timeout_ms"], 2000);
    }

    #[test]
    fn a_check_that_never_ran_is_inconclusive_and_says_why() {
        let hop = not_checked("http://s/", front(), "never up".into());
        assert!(hop.inconclusive());
        assert_eq!(hop.cut_short.as_deref(), Some("never up"));
        assert_eq!(hop.held_idle_ms, None);
    }
}
