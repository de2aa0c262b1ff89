//! The probe's advice: what it measured, put as [`IdleCloseFacts`] for the
//! one advice model ([`crate::advice`], which `/peers` shares), and the
//! probe's own sentences after it: how the server closes (FIN or reset)
//! and whether the probe's own stalls touched the figures.

use std::fmt::Write as _;
use std::time::Duration;

use super::closes::{Closes, PassPhase, Pattern};
use super::idle::Idle;
use super::sweep::Sweep;
use crate::advice::{Close, IdleCloseFacts, PoolLimit, Source, safe_pool_idle_timeout};
use crate::measure::timed_conn::Closed;

/// The safe pool timeout and the words around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    pub limit: PoolLimit,
    pub paragraph: String,
    /// The advertised timeout is longer than the real one.
    pub warning: Option<String>,
}

/// Why the earliest close is not known when the passes are too far apart
/// for the run, and the command that would measure it.
fn too_far_apart(idle: &Idle, closes: &Closes, url: &str) -> String {
    let seconds = |ms: f64| (ms / 1000.0).round().max(1.0) as u64;
    match (closes.pattern, closes.start_gap_ms) {
        (Pattern::Passes { period_ms, .. }, Some(gap)) => {
            // Phases 5% of the lowest close apart over one period.
            let step = 0.05 * closes.spread.min.max(1.0);
            let n = ((period_ms / step).ceil() as u64 + 1).clamp(2, 1000);
            format!(
                "The server closes idle connections in passes about {:.0} s apart, too far \
                 apart for this run to tell how early one can close: its connections went idle \
                 at phases up to {:.1} s apart, and one between them may close that much sooner \
                 than the {:.0} ms seen. Measure it with connections closer together over a \
                 period (`keepalive-server probe --connections {n} --stagger {}s {url}`); until \
                 then",
                period_ms / 1000.0,
                gap / 1000.0,
                closes.spread.min,
                seconds(period_ms)
            )
        }
        _ => format!(
            "Every close came in one pass, {:.0} to {:.0} ms after the last response, although \
             the connections went idle over {}: the server closes idle connections in passes \
             further apart than that, so one can be closed anywhere from its timeout to a pass \
             later. See the passes with `keepalive-server probe --connections 64 --stagger {}s \
             {url}`; until then",
            closes.spread.min,
            closes.spread.max,
            humantime::format_duration(idle.stagger),
            seconds(2.0 * closes.spread.max).max(4 * idle.stagger.as_secs().max(1))
        ),
    }
}

/// Why a run taken mostly during the probe's own stalls gives no number.
fn unreliable(idle: &Idle, closes: &Closes) -> String {
    let late = match idle.late_wakeups {
        0 => String::new(),
        n => format!(
            "; its loop woke up to {:.0} ms later than it asked, {n} times",
            idle.worst_late_ms
        ),
    };
    format!(
        "The probe itself was stalled while it measured (starved of CPU?): {} of {} closes \
         were seen up to {:.0} ms late, even after measuring them again{late}. The figures are \
         the probe's, not the server's: run it again on a less busy machine, or with fewer \
         --connections; until then",
        closes.stalled,
        closes.stalled + closes.on_time,
        closes.worst_stall_ms
    )
}

/// The facts the probe measured.
pub fn facts(
    url: &str,
    idle: &Idle,
    sweep: Option<&Sweep>,
    round_trip_ms: Option<f64>,
    max_wait: Duration,
) -> IdleCloseFacts {
    let close = match &idle.closes {
        None => Close::NotWithin {
            watched_ms: max_wait.as_secs_f64() * 1e3,
        },
        Some(closes) if !closes.reliable => Close::Unknown {
            why: unreliable(idle, closes),
        },
        Some(closes) => match closes.earliest_ms {
            Some(earliest_ms) => Close::At {
                earliest_ms,
                seen_ms: Some((closes.spread.min, closes.spread.max)),
                period_ms: match closes.pattern {
                    Pattern::Passes { period_ms, .. } => Some(period_ms),
                    _ => None,
                },
            },
            None => Close::Unknown {
                why: too_far_apart(idle, closes, url),
            },
        },
    };
    IdleCloseFacts {
        source: Source::MeasuredFromClient,
        keeps_alive: idle.promise.persistent(),
        advertised_ms: idle
            .promise
            .keep_alive_timeout
            .map(|s| s.saturating_mul(1000)),
        close,
        round_trip_ms,
        lowest_failure_ms: sweep.and_then(|s| s.lowest_failure_ms),
        highest_success_below_failure_ms: sweep.and_then(|s| s.highest_success_below_failure_ms),
    }
}

/// Advice from what the probe measured (at `url`).
pub fn advise(
    url: &str,
    idle: &Idle,
    sweep: Option<&Sweep>,
    round_trip_ms: Option<f64>,
    max_wait: Duration,
) -> Advice {
    let facts = facts(url, idle, sweep, round_trip_ms, max_wait);
    let shared = safe_pool_idle_timeout(&facts);
    let mut paragraph = shared.explanation;
    if facts.keeps_alive && idle.close_style().is_some() {
        paragraph.push(' ');
        paragraph.push_str(match idle.close_style() {
            Some(Closed::Rst) => {
                "It closes with a reset: a request that loses the race fails with ECONNRESET."
            }
            _ => {
                "It closes with a FIN: a request that loses the race meets an EOF (\"socket hang \
                 up\", \"Server disconnected without sending a response\", a 502 from a proxy)."
            }
        });
    }
    if let Some(closes) = idle.closes.as_ref().filter(|c| c.earliest_ms.is_some()) {
        passes_words(closes, &mut paragraph);
    }
    if let Some(sweep) = sweep.filter(|s| s.none_found) {
        let _ = write!(
            paragraph,
            " The sweep found no idle time at which every reuse was answered (down to {:.0} ms).",
            (sweep.deadline_ms + sweep.points.first().map_or(0, |p| p.delta_ms) as f64).max(0.0)
        );
    }
    if let Some(closes) = idle.closes.filter(|c| c.stalled > 0 && c.reliable) {
        let _ = write!(
            paragraph,
            " {} of the closes arrived while the probe itself was stalled (seen up to {:.0} ms \
             late, again after measuring them anew): they count from the last moment the probe \
             was sure they had not come.",
            closes.stalled, closes.worst_stall_ms
        );
    }
    Advice {
        limit: shared.limit,
        paragraph,
        warning: shared.warning,
    }
}

/// How the earliest close was found from passes that moved.
fn passes_words(closes: &Closes, paragraph: &mut String) {
    if closes.whole_seconds {
        let _ = write!(
            paragraph,
            " Its closes are those of whole-second stamps compared in a pass once a second (as \
             lighttpd's: a connection's stamp is its clock as read at the last pass, which may \
             be a second old, so with `server.max-keep-alive-idle = N` it surely keeps an idle \
             connection only N − 1 s), however long the closes seen: the earliest possible is \
             the whole seconds the longest close ({:.0} ms) proves it keeps, cautious by design, \
             as a close can come up to a second before the lowest seen.",
            closes.spread.max
        );
        return;
    }
    let Pattern::Passes {
        period_ms,
        phase: PassPhase::Moved { by_ms },
        ..
    } = closes.pattern
    else {
        return;
    };
    let _ = write!(
        paragraph,
        " Its passes moved {by_ms:.0} ms between rounds of the probe: they follow the server's \
         load."
    );
    let _ = match (closes.lowered_by_period, closes.start_gap_ms) {
        (true, _) => write!(
            paragraph,
            " The rounds' earliest closes disagree, so where a pass falls decides the close (as \
             with lighttpd's whole-second stamps) and the phases not seen may close sooner: the \
             earliest possible is taken a period ({period_ms:.0} ms) below what the rounds \
             showed, which is cautious; unsure, not measured."
        ),
        (false, Some(gap)) => write!(
            paragraph,
            " Each round's earliest close agreed with the others: the close depends on the idle \
             time alone, so none comes more than the widest gap between the moments sampled \
             ({gap:.0} ms) before the earliest seen."
        ),
        (false, None) => Ok(()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::closes::samples::{periodic, spread_starts};
    use crate::probe::closes::{self, CloseSample};
    use crate::probe::sweep::SweepPoint;

    fn idle(advertised: Option<u64>, samples: &[CloseSample]) -> Idle {
        let mut idle = Idle::of_samples(samples);
        idle.promise.keep_alive_timeout = advertised;
        idle
    }

    fn steady(ms: f64, n: usize) -> Vec<CloseSample> {
        (0..n)
            .map(|i| {
                let from = i as f64 * 140.0;
                CloseSample {
                    round: 1,
                    idle_from_ms: from,
                    closed_ms: from + ms + 0.3,
                    closed_lo_ms: from + ms - 1.0,
                    response_window_ms: 0.0,
                }
            })
            .collect()
    }

    #[test]
    fn the_safe_timeout_is_the_earliest_close_less_the_margin() {
        let unpromised = idle(None, &steady(3000.0, 4));
        let advice = advise(
            "http://t/",
            &unpromised,
            None,
            Some(0.2),
            Duration::from_secs(300),
        );
        // 2999 - (0.2 + 60) = 2938.8, rounded down.
        assert_eq!(advice.limit.ms(), Some(2900));
        assert_eq!(advice.warning, None);
        // A promise shorter than the real close bounds the advice: what is
        // kept past it is grace, not room.
        let promised = idle(Some(2), &steady(3000.0, 4));
        let advice = advise(
            "http://t/",
            &promised,
            None,
            Some(0.2),
            Duration::from_secs(300),
        );
        assert_eq!(advice.limit.ms(), Some(1900));
        assert!(
            advice.paragraph.contains("promises less"),
            "{}",
            advice.paragraph
        );
        assert!(
            advice.paragraph.contains("rounded down"),
            "{}",
            advice.paragraph
        );
        assert!(advice.paragraph.contains("FIN"), "{}", advice.paragraph);
    }

    #[test]
    fn a_sweep_that_found_nothing_answered_gives_no_number() {
        let idle = idle(None, &steady(1000.0, 4));
        let sweep = Sweep {
            points: vec![SweepPoint {
                delta_ms: -999,
                answered: 0,
                eof: 3,
                reset: 0,
            }],
            deadline_ms: 1000.3,
            lowest_failure_ms: Some(1.0),
            highest_success_below_failure_ms: None,
            widened: 4,
            none_found: true,
        };
        let advice = advise(
            "http://t/",
            &idle,
            Some(&sweep),
            Some(0.2),
            Duration::from_secs(300),
        );
        assert_eq!(advice.limit.ms(), None);
        assert!(
            advice.paragraph.contains("no idle time"),
            "{}",
            advice.paragraph
        );
    }

    #[test]
    fn a_stall_left_in_the_samples_is_said() {
        let mut samples = steady(1000.0, 3);
        samples.push(CloseSample {
            round: 1,
            idle_from_ms: 10.0,
            closed_ms: 1200.0,
            closed_lo_ms: 1000.0,
            response_window_ms: 0.0,
        });
        let advice = advise(
            "http://t/",
            &idle(None, &samples),
            None,
            Some(0.2),
            Duration::from_secs(9),
        );
        assert!(advice.paragraph.contains("stalled"), "{}", advice.paragraph);
        // Counted from 990 ms: 990 - 0.2 - 20 = 969.8.
        assert_eq!(advice.limit.ms(), Some(960));
    }

    #[test]
    fn a_promise_a_second_short_of_the_close_is_safe_to_trust() {
        // The README's server: Keep-Alive: timeout=65, closing at 66 s.
        let readme = idle(Some(65), &steady(66_000.0, 4));
        let advice = advise(
            "http://t/",
            &readme,
            None,
            Some(0.1),
            Duration::from_secs(300),
        );
        assert!(
            advice.paragraph.contains("safe to trust"),
            "{}",
            advice.paragraph
        );
        assert!(
            !advice.paragraph.contains("may still race"),
            "{}",
            advice.paragraph
        );
        // Within the promise, less the pool's guard: 65000 - 1300.1.
        assert_eq!(advice.limit.ms(), Some(63_000));
        // A promise the server keeps to the ms leaves no room for the trip.
        let exact = idle(Some(2), &steady(2000.0, 4));
        let advice = advise(
            "http://t/",
            &exact,
            None,
            Some(0.1),
            Duration::from_secs(300),
        );
        assert!(
            advice.paragraph.contains("may still race"),
            "{}",
            advice.paragraph
        );
    }

    #[test]
    fn passes_that_follow_the_load_get_nine_tenths_of_what_is_kept() {
        // gunicorn gthread at 2 s and 5 s: passes each second, moving
        // with the probe's own traffic between rounds.
        for t in [2000.0, 5000.0] {
            let mut samples = periodic(1, t, 1000.0, 140.0, &spread_starts(100.0, 8, 1000.0));
            samples.extend(periodic(
                2,
                t,
                1000.0,
                655.0,
                &spread_starts(9000.0, 8, 1000.0),
            ));
            let idle = idle(Some(t as u64 / 1000), &samples);
            let advice = advise("http://t/", &idle, None, Some(0.2), Duration::from_secs(30));
            let safe = advice.limit.ms().unwrap() as f64;
            assert!(
                safe >= 0.9 * t && safe < t,
                "{t}: {safe}: {}",
                advice.paragraph
            );
            assert!(advice.paragraph.contains("agreed"), "{}", advice.paragraph);
        }
    }

    #[test]
    fn whole_second_stamps_get_n_less_one_second_and_say_why() {
        // lighttpd at 2 s with fresh stamps: closes seen from 2.1 s, but a
        // stamp a pass old closes at 1.01 s: advice under 1 s, and why.
        use crate::probe::closes::samples::lighttpd;
        let mut samples = lighttpd(1, 2.0, 0.0, 600.0, &spread_starts(100.0, 8, 1000.0));
        samples.extend(lighttpd(
            2,
            2.0,
            250.0,
            80.0,
            &spread_starts(9000.0, 8, 1000.0),
        ));
        let mut named = idle(None, &samples);
        named.closes = closes::analyse_with(&samples, true);
        let advice = advise(
            "http://t/",
            &named,
            None,
            Some(0.05),
            Duration::from_secs(30),
        );
        let safe = advice.limit.ms().unwrap();
        assert!((900..1000).contains(&safe), "{safe}: {}", advice.paragraph);
        assert!(
            advice.paragraph.contains("only N − 1 s"),
            "{}",
            advice.paragraph
        );
    }

    #[test]
    fn a_pass_longer_than_the_run_is_said_with_the_command_to_measure_it() {
        // waitress, cleanup_interval 30 s, 5 s idle: 8 connections over
        // 40 s see two passes, at phases 5.7 s apart.
        let mut samples = periodic(
            1,
            5000.0,
            30_000.0,
            1200.0,
            &spread_starts(100.0, 8, 40_000.0),
        );
        samples.extend(periodic(
            2,
            5000.0,
            30_000.0,
            16_000.0,
            &spread_starts(80_000.0, 8, 40_000.0),
        ));
        let idle = idle(None, &samples);
        let advice = advise(
            "http://w:8080/",
            &idle,
            None,
            Some(0.2),
            Duration::from_secs(99),
        );
        assert_eq!(advice.limit.ms(), None, "{}", advice.paragraph);
        for words in [
            "passes about 30",
            "keepalive-server probe --connections",
            "--stagger 30s http://w:8080/",
        ] {
            assert!(
                advice.paragraph.contains(words),
                "{words}: {}",
                advice.paragraph
            );
        }
        // One pass in the whole run: the command to see two.
        let one = periodic(
            1,
            5000.0,
            30_000.0,
            20_000.0,
            &spread_starts(100.0, 8, 1000.0),
        );
        let advice = advise(
            "http://w/",
            &idle_one(&one),
            None,
            Some(0.2),
            Duration::from_secs(99),
        );
        assert_eq!(advice.limit.ms(), None);
        assert!(
            advice.paragraph.contains("--stagger"),
            "{}",
            advice.paragraph
        );
    }

    fn idle_one(samples: &[CloseSample]) -> Idle {
        idle(None, samples)
    }
}
