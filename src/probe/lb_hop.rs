//! The other hop (`--lb-idle-timeout`, `--lb`): whether a service keeps
//! idle connections longer than what pools connections in front of it (a
//! load balancer, nginx's upstream pool), judged by what it does; and,
//! when it does not, its own setting with a value that would.
//!
//! ```text
//!  balancer   reuses a pooled connection until its idle timeout L
//!  service    must keep it open past L + margin; the probe holds its idle
//!             connections that long and stops: a close before is "closes_first"
//! ```
//!
//! The margin covers the two timers starting a round trip apart and firing
//! late: 10% of L, at least 100 ms and at most 5 s, unless `--lb-margin`
//! says. The advised value is L plus the margin, rounded up to a whole
//! second, plus one more second, so the service passes the check with room.

use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;

use super::closes::Closes;
use crate::advice::servers::{self, Head, Service};

/// A front whose idle timeout for its backends is documented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// AWS Application Load Balancer: connection idle timeout, 60 s by
    /// default (AWS ELB docs, "Edit attributes for your Application Load
    /// Balancer", Connection idle timeout).
    AwsAlb,
    /// Google Cloud global external Application Load Balancer: its GFEs'
    /// backend keepalive timeout, 600 s, fixed (Google Cloud docs, "Request
    /// distribution for external Application Load Balancers").
    Gcp,
    /// nginx as a reverse proxy: the upstream block's `keepalive_timeout`,
    /// 60 s by default (nginx docs, ngx_http_upstream_module,
    /// keepalive_timeout).
    Nginx,
}

impl Preset {
    /// The front's idle timeout for its backends.
    pub fn idle_timeout(self) -> Duration {
        Duration::from_secs(match self {
            Preset::AwsAlb | Preset::Nginx => 60,
            Preset::Gcp => 600,
        })
    }

    /// The name as given on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Preset::AwsAlb => "aws-alb",
            Preset::Gcp => "gcp",
            Preset::Nginx => "nginx",
        }
    }

    /// Where the value comes from.
    pub fn source(self) -> &'static str {
        match self {
            Preset::AwsAlb => {
                "AWS Elastic Load Balancing docs, \"Edit attributes for your Application Load \
                 Balancer\", Connection idle timeout: 60 s by default, and the application's \
                 idle timeout should be larger"
            }
            Preset::Gcp => {
                "Google Cloud docs, \"Request distribution for external Application Load \
                 Balancers\": the GFE's backend keepalive timeout is 600 s, fixed (the 610 s is \
                 its client-side keepalive)"
            }
            Preset::Nginx => {
                "nginx docs, ngx_http_upstream_module: keepalive_timeout in an upstream block, \
                 60s by default"
            }
        }
    }
}

/// The default margin for a balancer timeout of `lb`.
pub fn default_margin(lb: Duration) -> Duration {
    (lb / 10).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

/// The question asked: the balancer's idle timeout, the margin beyond it,
/// and the preset it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Front {
    pub idle_timeout: Duration,
    pub margin: Duration,
    pub preset: Option<Preset>,
}

impl Front {
    /// The front `--lb-idle-timeout`, `--lb` and `--lb-margin` ask for
    /// (`None`: neither of the first two): the explicit duration wins
    /// over the preset, the margin defaults to [`default_margin`].
    pub fn from_flags(
        idle_timeout: Option<Duration>,
        preset: Option<Preset>,
        margin: Option<Duration>,
    ) -> Option<Front> {
        let preset = preset.filter(|_| idle_timeout.is_none());
        let idle_timeout = idle_timeout.or(preset.map(Preset::idle_timeout))?;
        Some(Front {
            idle_timeout,
            margin: margin.unwrap_or_else(|| default_margin(idle_timeout)),
            preset,
        })
    }

    /// How long the service must keep an idle connection.
    pub fn threshold(&self) -> Duration {
        self.idle_timeout + self.margin
    }

    /// The value advised for the service's own setting, whole seconds.
    pub fn advised_s(&self) -> u64 {
        self.threshold().as_millis().div_ceil(1000) as u64 + 1
    }
}

/// The judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No idle connection closed before the threshold.
    Ok,
    /// One closed sooner: the balancer can reuse a connection the service
    /// is closing.
    ClosesFirst,
    /// The service closes every connection after its response: nothing is
    /// pooled, so nothing races (each request pays a new connection).
    NoKeepAlive,
    /// The check did not hold idle connections to the threshold (the
    /// guard's, when the service stopped before, or never came up while
    /// COMMAND ran): not a pass. The probe never says it.
    Inconclusive,
}

/// The `lb_hop` object of the JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LbHop {
    pub lb_idle_timeout_ms: u64,
    pub margin_ms: u64,
    /// `--lb`'s name, and its documentation.
    pub preset: Option<&'static str>,
    pub preset_source: Option<&'static str>,
    pub verdict: Verdict,
    /// The earliest idle close seen, ms; `None` when none came before the
    /// probe stopped at the threshold.
    pub service_closed_after_ms: Option<f64>,
    /// How much sooner than the threshold it closed, ms.
    pub short_by_ms: Option<f64>,
    /// What the service advertises (`Keep-Alive: timeout=N`), reported
    /// beside what it does.
    pub advertised_timeout_s: Option<u64>,
    /// The server recognised (`null`: not told, the advice lists them all).
    pub server: Option<&'static str>,
    /// Its idle-timeout setting's name.
    pub setting: Option<&'static str>,
    /// The value advised for it, seconds.
    pub advised_s: u64,
    /// The judgement in words, with the change to make.
    pub advice: String,
}

/// Judges the service from its closes (`None`: none within the probe's
/// wait) and what it says of itself.
pub fn judge(front: Front, persistent: bool, closes: Option<&Closes>, head: &Head) -> LbHop {
    judge_held(front, persistent, closes, head, true)
}

/// [`judge`], for a check that may have stopped early: unless `held` (its
/// idle connections were held to the threshold), no close before the
/// threshold is [`Verdict::Inconclusive`], not a pass; a close before it
/// still closes first.
pub fn judge_held(
    front: Front,
    persistent: bool,
    closes: Option<&Closes>,
    head: &Head,
    held: bool,
) -> LbHop {
    let threshold_ms = front.threshold().as_secs_f64() * 1e3;
    let closed_after = closes.map(|c| c.earliest_ms.unwrap_or(c.spread.min).min(c.spread.min));
    let verdict = match closed_after {
        _ if !persistent => Verdict::NoKeepAlive,
        Some(ms) if ms < threshold_ms => Verdict::ClosesFirst,
        _ if !held => Verdict::Inconclusive,
        _ => Verdict::Ok,
    };
    let service = servers::identify(head);
    let advised_s = front.advised_s();
    let short_by_ms = closed_after
        .filter(|_| verdict == Verdict::ClosesFirst)
        .map(|ms| round1(threshold_ms - ms));
    let mut hop = LbHop {
        lb_idle_timeout_ms: front.idle_timeout.as_millis() as u64,
        margin_ms: front.margin.as_millis() as u64,
        preset: front.preset.map(Preset::key),
        preset_source: front.preset.map(Preset::source),
        verdict,
        service_closed_after_ms: closed_after.map(round1),
        short_by_ms,
        advertised_timeout_s: head.keep_alive_timeout,
        server: service.map(Service::key),
        setting: service.map(Service::setting),
        advised_s,
        advice: String::new(),
    };
    hop.advice = words(&hop, front, service);
    hop
}

/// The judgement in words.
fn words(hop: &LbHop, front: Front, service: Option<Service>) -> String {
    let lb = seconds(front.idle_timeout);
    let margin = seconds(front.margin);
    let behind = match front.preset {
        Some(preset) => format!("behind {} ({lb} idle timeout)", preset.key()),
        None => format!("behind a front with a {lb} idle timeout"),
    };
    let who = service.map_or_else(
        || "The service (not recognised from its head)".to_owned(),
        |s| format!("The service, {},", s.name()),
    );
    let advertised = match (hop.advertised_timeout_s, hop.service_closed_after_ms) {
        (Some(n), Some(ms)) => format!(
            " It advertises Keep-Alive: timeout={n} and was seen to close after {:.1} s: it is \
             judged by what it does.",
            ms / 1e3
        ),
        (Some(n), None) => format!(" It advertises Keep-Alive: timeout={n}."),
        (None, _) => String::new(),
    };
    let change = match service {
        Some(s) => format!("Set {}.", s.set_to(hop.advised_s)),
        None => format!(
            "Set its idle timeout to {} s, in its own setting: {}.",
            hop.advised_s,
            servers::every_setting(hop.advised_s)
        ),
    };
    match hop.verdict {
        Verdict::Ok => format!(
            "{who} {behind}: ok, no idle connection closed within {} (the balancer's timeout \
             plus a {margin} margin).{advertised}{}",
            seconds(front.threshold()),
            service
                .and_then(Service::passes)
                .map_or(String::new(), |passes| format!(" {passes}"))
        ),
        Verdict::Inconclusive => format!(
            "{who} {behind}: inconclusive, not a pass: the check did not hold idle connections \
             to the {} they must be kept (the balancer's {lb} plus a {margin} margin).",
            seconds(front.threshold())
        ),
        Verdict::NoKeepAlive => format!(
            "{who} {behind}: it closes every connection after its response, so nothing is \
             pooled and nothing races; each request pays a new connection."
        ),
        Verdict::ClosesFirst => format!(
            "{who} {behind}: closes first. It closed an idle connection after {:.1} s, {:.1} s \
             short of the {} it must keep (the balancer's {lb} plus a {margin} margin): the \
             balancer can reuse a connection just as the service closes it, and answer \
             502.{advertised} {change}",
            hop.service_closed_after_ms.unwrap_or(0.0) / 1e3,
            hop.short_by_ms.unwrap_or(0.0) / 1e3,
            seconds(front.threshold())
        ),
    }
}

/// "60 s", "1.5 s".
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_millis() as f64 / 1e3)
}

fn round1(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::closes::{self, CloseSample};

    fn front(lb_ms: u64) -> Front {
        let idle_timeout = Duration::from_millis(lb_ms);
        Front {
            idle_timeout,
            margin: default_margin(idle_timeout),
            preset: None,
        }
    }

    fn closes_at(ms: f64) -> Closes {
        let samples: Vec<CloseSample> = (0..4)
            .map(|i| CloseSample {
                round: 1,
                idle_from_ms: f64::from(i) * 100.0,
                closed_ms: f64::from(i) * 100.0 + ms,
                closed_lo_ms: f64::from(i) * 100.0 + ms - 1.0,
                response_window_ms: 0.0,
            })
            .collect();
        closes::analyse(&samples).unwrap()
    }

    fn ours(timeout: u64) -> Head {
        Head {
            content_type: Some("text/plain".into()),
            keep_alive_timeout: Some(timeout),
            field_names: [
                "date",
                "content-type",
                "content-length",
                "connection",
                "keep-alive",
            ]
            .map(String::from)
            .to_vec(),
            ..Head::default()
        }
    }

    #[test]
    fn presets_and_margins() {
        assert_eq!(Preset::AwsAlb.idle_timeout(), Duration::from_secs(60));
        assert_eq!(Preset::Gcp.idle_timeout(), Duration::from_secs(600));
        assert_eq!(
            default_margin(Duration::from_secs(60)),
            Duration::from_secs(5)
        );
        assert_eq!(
            default_margin(Duration::from_secs(600)),
            Duration::from_secs(5)
        );
        assert_eq!(
            default_margin(Duration::from_millis(500)),
            Duration::from_millis(100)
        );
        let alb = Front {
            idle_timeout: Preset::AwsAlb.idle_timeout(),
            margin: default_margin(Preset::AwsAlb.idle_timeout()),
            preset: Some(Preset::AwsAlb),
        };
        assert_eq!(alb.advised_s(), 66);
        assert_eq!(front(3000).advised_s(), 5);
    }

    #[test]
    fn a_close_before_the_threshold_closes_first_and_says_by_how_much() {
        let hop = judge(front(3000), true, Some(&closes_at(2000.0)), &ours(1));
        assert_eq!(hop.verdict, Verdict::ClosesFirst);
        let short = hop.short_by_ms.unwrap();
        assert!((1250.0..=1400.0).contains(&short), "{short}");
        assert_eq!(hop.server, Some("keepalive-server"));
        assert!(
            hop.advice.contains("--keep-alive-timeout 5s"),
            "{}",
            hop.advice
        );
        assert!(hop.advice.contains("timeout=1"), "{}", hop.advice);
    }

    #[test]
    fn no_close_or_a_later_one_is_ok_and_no_keep_alive_is_its_own() {
        assert_eq!(
            judge(front(1000), true, None, &ours(2)).verdict,
            Verdict::Ok
        );
        let later = judge(front(1000), true, Some(&closes_at(3000.0)), &ours(2));
        assert_eq!(later.verdict, Verdict::Ok);
        assert_eq!(later.short_by_ms, None);
        let none = judge(front(1000), false, Some(&closes_at(1.0)), &Head::default());
        assert_eq!(none.verdict, Verdict::NoKeepAlive);
        let waitress = Head {
            server: Some("waitress".into()),
            ..Head::default()
        };
        let passes = judge(front(1000), true, None, &waitress);
        assert_eq!(passes.verdict, Verdict::Ok);
        assert!(
            passes.advice.contains("cleanup_interval"),
            "{}",
            passes.advice
        );
    }

    #[test]
    fn a_check_stopped_early_is_inconclusive_unless_a_close_came_first() {
        let cut = judge_held(front(3000), true, None, &ours(2), false);
        assert_eq!(cut.verdict, Verdict::Inconclusive);
        assert!(cut.advice.contains("not a pass"), "{}", cut.advice);
        let first = judge_held(front(3000), true, Some(&closes_at(1000.0)), &ours(2), false);
        assert_eq!(first.verdict, Verdict::ClosesFirst);
    }

    #[test]
    fn an_unknown_service_gets_every_setting() {
        let hop = judge(front(3000), true, Some(&closes_at(500.0)), &Head::default());
        assert_eq!(hop.server, None);
        for setting in [
            "server.keepAliveTimeout",
            "--timeout-keep-alive",
            "keepalive_timeout",
        ] {
            assert!(hop.advice.contains(setting), "{}", hop.advice);
        }
    }
}
