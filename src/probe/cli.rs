//! The `probe` subcommand's flags, their defaults and help text.

use std::time::Duration;

use clap::{Parser, ValueEnum};

use super::lb_hop::{Front, Preset};
use crate::config::parse_duration;
use crate::tls::client::Trust;

const AFTER_HELP: &str = "\
Only the URL's server is contacted, with nothing but the request described (GET or HEAD of \
the URL's path). https:// URLs are spoken to over TLS, trusting the system's roots, \
--cacert FILE or (--insecure) anyone. Exit status: 0 measured, 1 the server could not be \
reached or misbehaved (refused, not HTTP, a TLS failure, no complete response within \
--timeout), 2 a usage error (a bad URL, scheme or port; --cacert or --insecure with http://). \
With --lb-idle-timeout or --lb: 0 when the service kept every idle connection past the \
balancer's timeout plus the margin, 1 when it closed one sooner (by how much, and the setting \
to change, on stderr).";

/// The request method the probe sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Method {
    Get,
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// Measures a server's real keep-alive behaviour: what it advertises, when
/// it really closes idle connections and how, how many requests it serves
/// on one connection, and (--sweep) what a request sent near its deadline
/// meets; then advises the idle timeout for a pool in front of it.
#[derive(Parser, Debug, Clone)]
#[command(name = "keepalive-server probe", version, long_about = None, after_help = AFTER_HELP)]
pub struct ProbeArgs {
    /// The server to measure: `http://HOST[:PORT][/PATH]` or `https://HOST[:PORT][/PATH]`.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Idle connections measured at once (each sends one request, then waits for the close).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub connections: u32,

    /// How long to wait for a server to close an idle connection.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub max_wait: Duration,

    /// How long a connect, or a whole response (head and body, interim 1xx ones included), may
    /// take before the server counts as not answering.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub timeout: Duration,

    /// The idle connections (and each batch of sweep tries) start spread over this long, so
    /// closes made in periodic passes show their range; at least 1s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = stagger)]
    pub stagger: Duration,

    /// Sequential requests on one connection, to find the server's per-connection limit; 0 skips
    /// it (a few requests still time the round trip).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub max_requests: u32,

    /// Also send requests at the measured deadline ± δ on fresh connections: the race window.
    #[arg(long)]
    pub sweep: bool,

    /// The sweep's δ values in ms, comma-separated (implies --sweep) [default: -200,-50,-20,-5,0,5,20,50].
    #[arg(
        long,
        value_name = "MS,...",
        value_delimiter = ',',
        allow_hyphen_values = true,
        num_args = 1
    )]
    pub sweep_points: Option<Vec<i64>>,

    /// Fresh connections per sweep point.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub sweep_tries: u32,

    /// The request method.
    #[arg(long, value_enum, default_value_t = Method::Get)]
    pub method: Method,

    /// Speak HTTP/1.0 (asking for keep-alive with Connection: keep-alive).
    #[arg(long = "http1.0")]
    pub http1_0: bool,

    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,

    /// For https: trust the certificates in this PEM file instead of the system's roots; a server
    /// certificate equal to one of them is trusted as is (a self-signed one, CA-marked or not).
    #[arg(long, value_name = "PATH", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,

    /// For https: accept any certificate (encrypted, not authenticated: for test servers).
    #[arg(long)]
    pub insecure: bool,

    /// The other hop: the idle timeout of what pools connections in front of the service (a load
    /// balancer, nginx's upstream keepalive_timeout). The probe holds its idle connections this
    /// long plus --lb-margin (in place of --max-wait) and exits 1 if the service closes one
    /// sooner; it wins over --lb.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub lb_idle_timeout: Option<Duration>,

    /// The other hop, by a front's documented idle timeout for its backends (its source below).
    #[arg(long, value_enum, value_name = "PRESET")]
    pub lb: Option<Preset>,

    /// How much longer than the balancer the service must keep an idle connection [default: 10%
    /// of the balancer's timeout, at least 100ms and at most 5s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub lb_margin: Option<Duration>,
}

impl ProbeArgs {
    /// Whom an https server's certificate must be vouched for by.
    pub fn trust(&self) -> Trust {
        match (&self.cacert, self.insecure) {
            (Some(path), _) => Trust::File(path.clone()),
            (None, true) => Trust::Insecure,
            (None, false) => Trust::System,
        }
    }
}

impl ProbeArgs {
    /// The front whose idle timeout the service is judged against, when
    /// --lb-idle-timeout or --lb asks: the explicit duration wins.
    pub fn front(&self) -> Option<Front> {
        Front::from_flags(self.lb_idle_timeout, self.lb, self.lb_margin)
    }
}

/// The sweep's δ values when --sweep-points is not given, ms.
pub const DEFAULT_SWEEP_POINTS: [i64; 8] = [-200, -50, -20, -5, 0, 5, 20, 50];

impl ProbeArgs {
    /// The sweep's δ values, ascending and without repeats, when the sweep
    /// runs (--sweep, or --sweep-points given).
    pub fn sweep_points(&self) -> Option<Vec<i64>> {
        let mut points = match &self.sweep_points {
            Some(points) => points.clone(),
            None if self.sweep => DEFAULT_SWEEP_POINTS.to_vec(),
            None => return None,
        };
        points.sort_unstable();
        points.dedup();
        Some(points)
    }
}

fn stagger(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d < Duration::from_secs(1) => Err("must be at least 1s".into()),
        d => Ok(d),
    }
}

/// A duration above zero (`--timeout`, `--lb-idle-timeout`).
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err("must be more than 0".into()),
        d => Ok(d),
    }
}
