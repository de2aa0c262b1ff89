//! Configuration: every flag, its `KAS_*` environment variable, its key in
//! the `--config` TOML file and its default ([`Config`]); where values come
//! from and in what precedence (`load`: flag > environment > file >
//! default); how values are written ([`values`]); clashes between them
//! (`consistency`); the effective listing
//! `--check` prints (`effective`). [`Config::settings`] turns the result
//! into the whole-millisecond [`Settings`] workers run on.

mod consistency;
mod credentials;
mod effective;
mod load;
mod subcommands;
pub mod values;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::{FromArgMatches, Parser, ValueEnum};

use crate::tls::ServerTls;

pub use effective::Change;
pub use load::{MAX_CONFIG_FILE, Origin, Origins, read_config_file};
pub use subcommands::{SUBCOMMANDS, help_as_flag};
pub use values::{
    AccessLogTarget, Advertised, IdleClose, Upstream, format_duration, format_size, parse_duration,
    parse_size,
};
use values::{
    AdminAddr, parse_access_log, parse_admin, parse_advertised, parse_bool, parse_count,
    parse_header_size, parse_idle_close, parse_listen, parse_peers_window, parse_upstream,
    parse_upstream_idle, parse_workers,
};

const AFTER_HELP: &str = "\
Every option also reads the environment variable KAS_<NAME> (KAS_KEEP_ALIVE_TIMEOUT=5s) \
and the key <name> in the --config file (keep_alive_timeout = \"5s\"); \
precedence is flag > environment > file > default.
Durations: 150ms, 5s, 1m5s (0 disables a timeout). Sizes: 512, 16KiB, 1MiB.

Logs go to stderr; RUST_LOG sets the level (default info; debug shows every timeout \
with its connection), NO_COLOR turns colour off.
Signals: SIGINT/SIGTERM finish in-flight requests and exit (a second one exits at once); \
SIGHUP reloads the --config file; SIGUSR1 reopens the access log.

To measure another server's keep-alive behaviour instead: keepalive-server probe URL \
(keepalive-server probe --help). To fail a test suite whose client pools would race the \
server: keepalive-server lab -- COMMAND (keepalive-server lab --help).";

/// How diagnostics are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// keepalive-server: a non-blocking HTTP/1.0–1.1 server whose idle timeouts
/// live in Node.js-style per-duration timer lists.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Config {
    /// TOML file with any of these options as snake_case keys (keep_alive_timeout = "5s"); reloaded on SIGHUP.
    #[arg(long, env = "KAS_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Validate the flags, environment and config file, print the effective configuration and exit (0 if valid, 2 if not).
    #[arg(long)]
    pub check: bool,

    /// Address to listen on: PORT or :PORT (every interface), HOST:PORT or `[IPv6]:PORT`.
    #[arg(long, env = "KAS_LISTEN", value_name = "ADDR", default_value = "127.0.0.1:8080", value_parser = parse_listen, allow_hyphen_values = true)]
    pub listen: SocketAddr,

    /// Event-loop threads, each with its own SO_REUSEPORT listener [default: available cores].
    #[arg(long, env = "KAS_WORKERS", value_name = "N", value_parser = parse_workers, allow_hyphen_values = true)]
    pub workers: Option<NonZeroUsize>,

    /// Idle time allowed between requests on a persistent connection (advertised in Keep-Alive: timeout=N); 0 disables keep-alive.
    #[arg(long, env = "KAS_KEEP_ALIVE_TIMEOUT", value_name = "DURATION", default_value = "65s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub keep_alive_timeout: Duration,

    /// Grace added past the advertised keep-alive timeout before the server closes, to dodge the close-versus-new-request race.
    #[arg(long, env = "KAS_KEEP_ALIVE_BUFFER", value_name = "DURATION", default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub keep_alive_buffer: Duration,

    /// Socket inactivity allowed while a request is in progress (slow body, stalled write); 0 disables.
    #[arg(long, env = "KAS_TIMEOUT", value_name = "DURATION", default_value = "120s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub timeout: Duration,

    /// Deadline for a complete request head, from accept or from the next request's first byte; 0 disables.
    #[arg(long, env = "KAS_HEADERS_TIMEOUT", value_name = "DURATION", default_value = "60s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub headers_timeout: Duration,

    /// Deadline for receiving a whole request (head and body), from its first byte; 0 disables.
    #[arg(long, env = "KAS_REQUEST_TIMEOUT", value_name = "DURATION", default_value = "300s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub request_timeout: Duration,

    /// Requests served on one connection before it is closed (counted down in Keep-Alive: max=N); 0 is unlimited.
    #[arg(long, env = "KAS_MAX_REQUESTS_PER_SOCKET", value_name = "N", default_value = "0", value_parser = parse_count::<u32>, allow_hyphen_values = true)]
    pub max_requests_per_socket: u32,

    /// Largest request head accepted (request line and headers), at least 1KiB; larger gets 431.
    #[arg(long, env = "KAS_MAX_HEADER_SIZE", value_name = "SIZE", default_value = "16KiB", value_parser = parse_header_size, allow_hyphen_values = true)]
    pub max_header_size: usize,

    /// Most header fields in a request head (Node's maxHeadersCount); more gets 431; 0 leaves the count to --max-header-size.
    #[arg(long, env = "KAS_MAX_HEADERS", value_name = "N", default_value = "2000", value_parser = parse_count::<usize>, allow_hyphen_values = true)]
    pub max_headers: usize,

    /// Largest request body accepted; larger gets 413.
    #[arg(long, env = "KAS_MAX_BODY_SIZE", value_name = "SIZE", default_value = "1MiB", value_parser = values::parse_size, allow_hyphen_values = true)]
    pub max_body_size: usize,

    /// Open connections per worker; at the limit the longest-idle (or a silent new) connection is evicted, else new ones are refused; 0 is unlimited.
    #[arg(long, env = "KAS_MAX_CONNECTIONS", value_name = "N", default_value = "0", value_parser = parse_count::<usize>, allow_hyphen_values = true)]
    pub max_connections: usize,

    /// Let the kernel hand over a connection only once its first bytes have arrived (TCP_DEFER_ACCEPT), and serve it at once; a connection that stays silent arrives about a second after its connect.
    #[arg(long, env = "KAS_DEFER_ACCEPT")]
    pub defer_accept: bool,

    /// On SIGINT/SIGTERM, how long in-flight requests may take before they are cut; 0 waits as long as they take.
    #[arg(long, env = "KAS_SHUTDOWN_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub shutdown_timeout: Duration,

    /// Serve the dashboard (/, fed by /events; /peers for the lab), /metrics, /timers and /healthz on this address, or off.
    #[arg(long, env = "KAS_ADMIN", value_name = "ADDR", default_value = "off", value_parser = parse_admin, allow_hyphen_values = true)]
    pub admin: AdminAddr,

    /// Access log (nginx combined format, then request time and connection id): a file, - for stdout, or off.
    #[arg(long, env = "KAS_ACCESS_LOG", value_name = "PATH", default_value = "off", value_parser = parse_access_log, allow_hyphen_values = true)]
    pub access_log: AccessLogTarget,

    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key. A relative path is looked up in $CREDENTIALS_DIRECTORY when systemd sets it (LoadCredential=).
    #[arg(long, env = "KAS_TLS_CERT", value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1); relative: as --tls-cert.
    #[arg(long, env = "KAS_TLS_KEY", value_name = "PATH")]
    pub tls_key: Option<PathBuf>,

    /// Forward every request on the listener to this HTTP/1.1 service (http://HOST:PORT[/prefix], resolved at start) and stream its answers back; the demo routes are off.
    #[arg(long, env = "KAS_UPSTREAM", value_name = "URL", value_parser = parse_upstream)]
    pub upstream: Option<Upstream>,

    /// With --upstream: how long the service may take to start its answer before the client gets 504; 0 waits as long as it takes.
    #[arg(long, env = "KAS_UPSTREAM_TIMEOUT", value_name = "DURATION", default_value = "60s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub upstream_timeout: Duration,

    /// With --upstream: how long an idle connection to the service is kept for reuse; keep it well under the service's own idle timeout (gunicorn 2s, uvicorn and Node 5s).
    #[arg(long, env = "KAS_UPSTREAM_IDLE_TIMEOUT", value_name = "DURATION", default_value = "1s", value_parser = parse_upstream_idle, allow_hyphen_values = true)]
    pub upstream_idle_timeout: Duration,

    /// Obey the keep-alive lab's query controls (ka=, advertise=, close=, after=, max=) on any route: on or off.
    #[arg(long, env = "KAS_TEST_CONTROLS", value_name = "on|off", default_value = "on", value_parser = parse_bool, action = clap::ArgAction::Set, allow_hyphen_values = true)]
    pub test_controls: bool,

    /// What `Keep-Alive: timeout=` says on every persistent response: a duration (sent in whole seconds, rounded down), none (Connection: keep-alive and no Keep-Alive field, as a server that advertises nothing), or auto (the --keep-alive-timeout); an advertise= control overrides it on its connection.
    #[arg(long, env = "KAS_ADVERTISE", value_name = "DURATION|none|auto", default_value = "auto", value_parser = parse_advertised, allow_hyphen_values = true)]
    pub advertise: Advertised,

    /// How an idle connection is closed at its keep-alive deadline: fin (shut the write side, then watch for a late request) or rst (SO_LINGER 0: the client sees a reset, ECONNRESET); a close= control overrides it on its connection.
    #[arg(long, env = "KAS_IDLE_CLOSE", value_name = "fin|rst", default_value = "fin", value_parser = parse_idle_close, allow_hyphen_values = true)]
    pub idle_close: IdleClose,

    /// How far back the admin listener's /peers looks for its verdicts and advice (totals since start are shown too); at least 1s.
    #[arg(long, env = "KAS_PEERS_WINDOW", value_name = "DURATION", default_value = "10m", value_parser = parse_peers_window, allow_hyphen_values = true)]
    pub peers_window: Duration,

    /// How diagnostics are written to stderr.
    #[arg(long, env = "KAS_LOG_FORMAT", value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Where each value came from (filled by [`Config::load_from`]).
    #[arg(skip)]
    pub origins: Origins,

    /// Not a flag: see [`Settings::loop_clock_start`].
    #[arg(skip)]
    pub loop_clock_start: Duration,

    /// Not a flag: see [`Settings::clients_by_agent`] (the guard sets it).
    #[arg(skip)]
    pub clients_by_agent: bool,

    /// Not a flag: see [`Settings::shadow_ms`] (the guard sets it).
    #[arg(skip)]
    pub shadow: Option<Duration>,

    /// Not a flag: the certificate and key of `tls_cert` and `tls_key`,
    /// as loaded (and matched) when the configuration loaded.
    #[arg(skip)]
    pub tls: Option<ServerTls>,
}

/// The effective settings a worker runs with: durations as whole
/// milliseconds (the timer lists' unit), `None` where a timeout is disabled.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub workers: usize,
    /// Connections may persist (`--keep-alive-timeout` is not zero).
    pub keep_alive: bool,
    /// What `Keep-Alive: timeout=` advertises, in whole seconds (rounded
    /// down, so it never promises more than is kept); `None` when keep-alive
    /// is off, under `--advertise none`, or under a second with `--advertise
    /// auto`: `timeout=0` would read as "do not reuse" (Node's agent then
    /// never reuses), so no `Keep-Alive` field is sent. An `--advertise`
    /// duration is sent as it is, even one that promises more than is kept,
    /// or `0`: the lab imitates such servers on purpose.
    pub keep_alive_advertised_secs: Option<u64>,
    /// How long an idle persistent connection is really kept: timeout + buffer.
    pub keep_alive_ms: u64,
    pub inactivity_ms: Option<u64>,
    pub headers_ms: Option<u64>,
    pub request_ms: Option<u64>,
    pub max_requests_per_socket: u32,
    pub max_header_size: usize,
    /// Header fields a request head may carry; 0: no count, only the size.
    pub max_headers: usize,
    pub max_body_size: usize,
    /// Per worker; 0 is unlimited.
    pub max_connections: usize,
    /// Listeners defer accept until data arrives; accepted sockets are read at once.
    pub defer_accept: bool,
    /// How long a graceful shutdown waits for ref'd work; `None` waits as
    /// long as it takes.
    pub shutdown_ms: Option<u64>,
    /// Where the access log goes (`Off`: no access log).
    pub access_log: AccessLogTarget,
    /// What a persistent response says, built once, without the final CRLF
    /// (the encoder adds `, max=N` when requests are limited):
    /// `Connection: keep-alive\r\nKeep-Alive: timeout=N`.
    pub keep_alive_header: Vec<u8>,
    /// How idle connections are closed at their deadline, where no
    /// `close=` control says otherwise.
    pub idle_close: IdleClose,
    /// The keep-alive lab's query controls are obeyed.
    pub test_controls: bool,
    /// How far back `/peers` judges a peer, in µs.
    pub peers_window_us: u64,
    /// What each worker's loop clock reads when it starts, in µs: zero,
    /// except in tests that start it just before the wrap point of a
    /// narrower stamp (2³² µs, 2³² ms) to show that nothing wraps.
    /// Read once, when the workers start.
    pub loop_clock_start: u64,
    /// The peer observer also tells clients apart by User-Agent, for the
    /// race guard (`peer_observer::clients`; off for a server).
    pub clients_by_agent: bool,
    /// The shadow deadline, for the race guard (`None`: off, as for a
    /// server): an idle connection whose timer runs out is kept open as
    /// long again, and at least this many ms, instead of closed, and a request that reuses it then
    /// is told as one production would have lost (`conn::state`'s
    /// `Overdue`). At its end the connection closes as it would have at
    /// the deadline.
    pub shadow_ms: Option<u64>,
    /// The listener speaks TLS with this identity (`None`: plain HTTP).
    /// Each connection takes it at accept, so a reload changes it for new
    /// connections only.
    pub tls: Option<ServerTls>,
    /// Every request is forwarded here (`None`: the demo routes answer).
    pub upstream: Option<Upstream>,
    /// How long an upstream may take to begin its answer (`None`: no
    /// limit): then 504.
    pub upstream_timeout_ms: Option<u64>,
    /// How long an idle upstream connection is pooled; above zero.
    pub upstream_idle_ms: u64,
}

impl Settings {
    /// Whether requests are written to the access log.
    pub fn logs_access(&self) -> bool {
        self.access_log != AccessLogTarget::Off
    }
}

impl Config {
    /// The settings the workers run on.
    pub fn settings(&self) -> Settings {
        let keep_alive = !self.keep_alive_timeout.is_zero();
        let keep_alive_advertised_secs = match self.advertise {
            _ if !keep_alive => None,
            Advertised::KeepAliveTimeout => {
                Some(self.keep_alive_timeout.as_secs()).filter(|&secs| secs > 0)
            }
            Advertised::Timeout(advertised) => Some(advertised.as_secs()),
            Advertised::Nothing => None,
        };
        // Keep-Alive is hop-by-hop, so Connection names it (as nginx and
        // Node do): some proxies drop it otherwise.
        let keep_alive_header = match keep_alive_advertised_secs {
            Some(secs) => format!("Connection: keep-alive\r\nKeep-Alive: timeout={secs}"),
            None if keep_alive => "Connection: keep-alive".to_owned(),
            None => String::new(),
        }
        .into_bytes();
        Settings {
            listen: self.listen,
            workers: self
                .workers
                .or_else(|| std::thread::available_parallelism().ok())
                .map_or(1, NonZeroUsize::get),
            keep_alive,
            keep_alive_advertised_secs,
            keep_alive_ms: whole_ms(self.keep_alive_timeout + self.keep_alive_buffer),
            inactivity_ms: enabled_ms(self.timeout),
            headers_ms: enabled_ms(self.headers_timeout),
            request_ms: enabled_ms(self.request_timeout),
            max_requests_per_socket: self.max_requests_per_socket,
            max_header_size: self.max_header_size,
            max_headers: self.max_headers,
            max_body_size: self.max_body_size,
            max_connections: self.max_connections,
            defer_accept: self.defer_accept,
            shutdown_ms: enabled_ms(self.shutdown_timeout),
            access_log: self.access_log.clone(),
            keep_alive_header,
            idle_close: self.idle_close,
            test_controls: self.test_controls,
            peers_window_us: self.peers_window.as_micros() as u64,
            loop_clock_start: self.loop_clock_start.as_micros() as u64,
            clients_by_agent: self.clients_by_agent,
            shadow_ms: self.shadow.map(whole_ms).filter(|&ms| ms > 0),
            tls: self.tls.clone(),
            upstream: self.upstream.clone(),
            upstream_timeout_ms: enabled_ms(self.upstream_timeout),
            upstream_idle_ms: whole_ms(self.upstream_idle_timeout).max(1),
        }
    }

    /// Parses `args` (program name first) and the `KAS_*` environment,
    /// then fills whatever neither set from the `--config` file. A bad
    /// value, an unreadable file, bad TOML or an unknown key is an error
    /// naming the flag, variable or key (exit status 2).
    pub fn load_from<I, T>(args: I) -> Result<Config, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        load::load(args.into_iter().map(Into::into).collect())
    }

    /// What this valid configuration does that its author may not expect,
    /// one sentence each: `--check` and the startup print them as warnings.
    pub fn warnings(&self) -> Vec<String> {
        consistency::warnings(self)
    }

    /// A configuration with every default (the environment ignored),
    /// listening on `listen`: for tests and embedding.
    pub fn with_listen(listen: SocketAddr) -> Self {
        let matches = load::parser()
            .try_get_matches_from(["keepalive-server"])
            .expect("the defaults parse");
        let mut config = Config::from_arg_matches(&matches).expect("the defaults parse");
        config.listen = listen;
        config
    }
}

/// Rounds up to whole milliseconds, so a timer never fires before the
/// configured duration.
fn whole_ms(duration: Duration) -> u64 {
    duration
        .as_micros()
        .div_ceil(1000)
        .try_into()
        .unwrap_or(u64::MAX)
}

fn enabled_ms(duration: Duration) -> Option<u64> {
    (!duration.is_zero()).then(|| whole_ms(duration))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn settings_round_up_and_advertise_whole_seconds() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.keep_alive_timeout = Duration::from_millis(1500);
        config.keep_alive_buffer = Duration::from_micros(1);
        config.max_requests_per_socket = 7;
        let settings = config.settings();
        assert_eq!(settings.keep_alive_ms, 1501);
        assert_eq!(settings.keep_alive_advertised_secs, Some(1));
        assert_eq!(
            settings.keep_alive_header,
            b"Connection: keep-alive\r\nKeep-Alive: timeout=1".to_vec()
        );
    }

    /// config/server.toml names every option, and loads once uncommented.
    /// The lines already in force (not commented) load as they are.
    #[test]
    fn sample_config_lists_every_option() {
        let sample = include_str!("../../config/server.toml");
        let uncommented: String = sample
            .lines()
            .map(|line| line.strip_prefix("# ").unwrap_or(line))
            .filter(|line| {
                line.split_once(" = ")
                    .is_some_and(|(key, _)| !key.contains(' '))
            })
            .map(|line| format!("{line}\n"))
            .collect();
        let table: toml::Table = uncommented.parse().expect("sample keys parse as TOML");
        for arg in Config::command().get_arguments() {
            let id = arg.get_id().as_str();
            if load::in_file(arg) {
                assert!(table.contains_key(id), "config/server.toml lacks `{id}`");
            }
        }
        // The sample's certificate paths are examples, not files here:
        // loading them is tests/tls.rs's business.
        let uncommented: String = uncommented
            .lines()
            .filter(|line| !line.starts_with("tls_"))
            .map(|line| format!("{line}\n"))
            .collect();
        let path = std::env::temp_dir().join(format!("kas-sample-{}.toml", std::process::id()));
        std::fs::write(&path, uncommented).unwrap();
        let loaded = Config::load_from(["kas", "--config", path.to_str().unwrap()]);
        std::fs::remove_file(&path).unwrap();
        let loaded = loaded.expect("the uncommented sample loads");
        assert_eq!(loaded.keep_alive_timeout, Duration::from_secs(65));
        assert_eq!(loaded.admin, Some("127.0.0.1:9901".parse().unwrap()));
        assert!(!loaded.test_controls, "the packaged file turns them off");
    }

    #[test]
    fn unknown_config_keys_are_errors_naming_the_key() {
        let path = std::env::temp_dir().join(format!("kas-bad-{}.toml", std::process::id()));
        std::fs::write(&path, "keep_alive_timout = \"5s\"\n").unwrap();
        let error = Config::load_from(["kas", "--config", path.to_str().unwrap()]).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(error.to_string().contains("keep_alive_timout"), "{error}");
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn a_sub_second_keep_alive_advertises_no_timeout() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.keep_alive_timeout = Duration::from_millis(500);
        let settings = config.settings();
        assert!(settings.keep_alive);
        assert_eq!(settings.keep_alive_advertised_secs, None);
        assert_eq!(settings.keep_alive_header, b"Connection: keep-alive");
    }

    #[test]
    fn advertise_sets_the_field_for_every_connection() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.keep_alive_timeout = Duration::from_secs(2);
        config.advertise = Advertised::Nothing;
        let settings = config.settings();
        assert_eq!(settings.keep_alive_advertised_secs, None);
        assert_eq!(settings.keep_alive_header, b"Connection: keep-alive");
        assert_eq!(settings.keep_alive_ms, 3000, "what is kept is unchanged");
        config.advertise = Advertised::Timeout(Duration::from_millis(30_900));
        let settings = config.settings();
        assert_eq!(settings.keep_alive_advertised_secs, Some(30));
        assert_eq!(
            settings.keep_alive_header,
            b"Connection: keep-alive\r\nKeep-Alive: timeout=30".to_vec()
        );
        config.keep_alive_timeout = Duration::ZERO;
        let settings = config.settings();
        assert_eq!(settings.keep_alive_advertised_secs, None, "keep-alive off");
        assert!(settings.keep_alive_header.is_empty());
    }

    #[test]
    fn zero_disables_a_timeout() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.timeout = Duration::ZERO;
        config.keep_alive_timeout = Duration::ZERO;
        config.shutdown_timeout = Duration::ZERO;
        let settings = config.settings();
        assert_eq!(settings.shutdown_ms, None);
        assert_eq!(settings.inactivity_ms, None);
        assert_eq!(settings.keep_alive_advertised_secs, None);
        assert!(!settings.keep_alive);
        assert!(settings.keep_alive_header.is_empty());
    }
}
