//! Configuration: every flag, its `KAS_*` environment variable, its key in
//! the `--config` TOML file, its default, and the parsers for durations
//! (`150ms`, `5s`, `2m`) and sizes (`16KiB`, `1MiB`). Precedence is flag >
//! environment > file > default ([`Config::load_from`]). [`Config::settings`]
//! turns the result into the whole-millisecond [`Settings`] workers run on.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser};

/// keepalive-server: a non-blocking HTTP/1.0–1.1 server whose idle timeouts
/// live in Node.js-style per-duration timer lists.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None)]
pub struct Config {
    /// TOML file with any of these options as snake_case keys (keep_alive_timeout = "5s"); flags and KAS_* variables override it.
    #[arg(long, env = "KAS_CONFIG")]
    pub config: Option<PathBuf>,

    /// Address to listen on.
    #[arg(long, env = "KAS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Event-loop threads, each with its own SO_REUSEPORT listener [default: available cores].
    #[arg(long, env = "KAS_WORKERS")]
    pub workers: Option<NonZeroUsize>,

    /// Idle time allowed between requests on a persistent connection (advertised in Keep-Alive: timeout=N); 0 disables keep-alive.
    #[arg(long, env = "KAS_KEEP_ALIVE_TIMEOUT", default_value = "65s", value_parser = parse_duration)]
    pub keep_alive_timeout: Duration,

    /// Grace added past the advertised keep-alive timeout before the server closes, to dodge the close-versus-new-request race.
    #[arg(long, env = "KAS_KEEP_ALIVE_BUFFER", default_value = "1s", value_parser = parse_duration)]
    pub keep_alive_buffer: Duration,

    /// Socket inactivity allowed while a request is in progress (slow body, stalled write); 0 disables.
    #[arg(long, env = "KAS_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Deadline for a complete request head, from accept or from the next request's first byte; 0 disables.
    #[arg(long, env = "KAS_HEADERS_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub headers_timeout: Duration,

    /// Deadline for receiving a whole request (head and body), from its first byte; 0 disables.
    #[arg(long, env = "KAS_REQUEST_TIMEOUT", default_value = "300s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Requests served on one connection before it is closed; 0 is unlimited.
    #[arg(long, env = "KAS_MAX_REQUESTS_PER_SOCKET", default_value_t = 0)]
    pub max_requests_per_socket: u32,

    /// Largest request head accepted (request line and headers); larger gets 431.
    #[arg(long, env = "KAS_MAX_HEADER_SIZE", default_value = "16KiB", value_parser = parse_size)]
    pub max_header_size: usize,

    /// Largest request body accepted; larger gets 413.
    #[arg(long, env = "KAS_MAX_BODY_SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub max_body_size: usize,

    /// Open connections per worker; at the limit the longest-idle (or a silent new) connection is evicted, else new ones are refused; 0 is unlimited.
    #[arg(long, env = "KAS_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,

    /// On SIGINT/SIGTERM, how long in-flight requests may take before they are cut.
    #[arg(long, env = "KAS_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Serve /metrics, /timers and /healthz on this address (off unless set).
    #[arg(long, env = "KAS_ADMIN")]
    pub admin: Option<SocketAddr>,

    /// Log one line per request (common log format, duration, connection id).
    #[arg(long, env = "KAS_ACCESS_LOG")]
    pub access_log: bool,
}

/// The effective settings a worker runs with: durations as whole
/// milliseconds (the timer lists' unit), `None` where a timeout is disabled.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub workers: usize,
    /// Advertised keep-alive timeout in whole seconds; `None` disables keep-alive.
    pub keep_alive_advertised_secs: Option<u64>,
    /// How long an idle persistent connection is really kept: timeout + buffer.
    pub keep_alive_ms: u64,
    pub inactivity_ms: Option<u64>,
    pub headers_ms: Option<u64>,
    pub request_ms: Option<u64>,
    pub max_requests_per_socket: u32,
    pub max_header_size: usize,
    pub max_body_size: usize,
    /// Per worker; 0 is unlimited.
    pub max_connections: usize,
    pub shutdown_ms: u64,
    pub access_log: bool,
    /// The `Keep-Alive` response header line, built once: `Keep-Alive: timeout=N[, max=M]\r\n`.
    pub keep_alive_header: Vec<u8>,
}

impl Config {
    /// The settings the workers run on.
    pub fn settings(&self) -> Settings {
        let keep_alive_advertised_secs =
            (!self.keep_alive_timeout.is_zero()).then_some(self.keep_alive_timeout.as_secs());
        let mut keep_alive_header = Vec::new();
        if let Some(secs) = keep_alive_advertised_secs {
            keep_alive_header.extend_from_slice(format!("Keep-Alive: timeout={secs}").as_bytes());
            if self.max_requests_per_socket > 0 {
                let max = self.max_requests_per_socket;
                keep_alive_header.extend_from_slice(format!(", max={max}").as_bytes());
            }
            keep_alive_header.extend_from_slice(b"\r\n");
        }
        Settings {
            listen: self.listen,
            workers: self
                .workers
                .or_else(|| std::thread::available_parallelism().ok())
                .map_or(1, NonZeroUsize::get),
            keep_alive_advertised_secs,
            keep_alive_ms: whole_ms(self.keep_alive_timeout + self.keep_alive_buffer),
            inactivity_ms: enabled_ms(self.timeout),
            headers_ms: enabled_ms(self.headers_timeout),
            request_ms: enabled_ms(self.request_timeout),
            max_requests_per_socket: self.max_requests_per_socket,
            max_header_size: self.max_header_size,
            max_body_size: self.max_body_size,
            max_connections: self.max_connections,
            shutdown_ms: whole_ms(self.shutdown_timeout),
            access_log: self.access_log,
            keep_alive_header,
        }
    }

    /// Parses `args` (program name first) and the environment, then fills
    /// whatever neither set from the `--config` file. An unreadable file,
    /// bad TOML, an unknown key or a bad value is an error naming it.
    pub fn load_from<I, T>(args: I) -> Result<Config, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let command = Config::command();
        let matches = command.clone().try_get_matches_from(&args)?;
        if let Some(path) = matches.get_one::<PathBuf>("config") {
            args.extend(file_arguments(path, &matches, &command)?);
            let matches = command.try_get_matches_from(&args)?;
            return Config::from_arg_matches(&matches);
        }
        Config::from_arg_matches(&matches)
    }

    /// A configuration with every default, listening on `listen` (for tests
    /// and embedding).
    pub fn with_listen(listen: SocketAddr) -> Self {
        let mut config = Config::parse_from(["keepalive-server"]);
        config.listen = listen;
        config
    }
}

/// The file's settings as extra arguments, for the options that neither a
/// flag nor an environment variable set.
fn file_arguments(
    path: &Path,
    matches: &ArgMatches,
    command: &clap::Command,
) -> Result<Vec<OsString>, clap::Error> {
    let error = |message: String| clap::Error::raw(ErrorKind::InvalidValue, format!("{message}\n"));
    let text = std::fs::read_to_string(path)
        .map_err(|e| error(format!("cannot read config file {}: {e}", path.display())))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| error(format!("config file {}: {e}", path.display())))?;
    let mut extra = Vec::new();
    for (key, value) in table {
        let arg = command
            .get_arguments()
            .find(|arg| arg.get_id() == key.as_str() && arg.get_long().is_some() && key != "config")
            .ok_or_else(|| {
                error(format!(
                    "config file {}: unknown key `{key}`",
                    path.display()
                ))
            })?;
        let set_elsewhere = matches!(
            matches.value_source(&key),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if set_elsewhere {
            continue;
        }
        let flag = format!("--{}", arg.get_long().unwrap_or_default());
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        match value {
            toml::Value::Boolean(on) if is_switch => {
                if on {
                    extra.push(flag.into());
                }
            }
            toml::Value::String(_) | toml::Value::Integer(_) if !is_switch => {
                let text = match &value {
                    toml::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                // Checked here so a bad value is reported as the file's,
                // not as a flag the user never passed.
                let single = [
                    OsString::from("keepalive-server"),
                    format!("{flag}={text}").into(),
                ];
                command.clone().try_get_matches_from(single).map_err(|e| {
                    let reason = std::error::Error::source(&e)
                        .map_or_else(|| e.kind().to_string(), ToString::to_string);
                    error(format!(
                        "config file {}: invalid value {value} for `{key}`: {reason}",
                        path.display()
                    ))
                })?;
                extra.push(format!("{flag}={text}").into());
            }
            other => {
                let expected = if is_switch {
                    "true or false"
                } else {
                    "a string or an integer"
                };
                return Err(error(format!(
                    "config file {}: `{key}` must be {expected}, not {other}",
                    path.display()
                )));
            }
        }
    }
    Ok(extra)
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

/// Parses a humantime duration: `150ms`, `5s`, `2m`, `1h 30m`; a bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let duration = humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 150ms, 5s or 2m)"))?;
    if duration > Duration::from_secs(365 * 24 * 3600) {
        return Err("durations over a year are not supported".into());
    }
    Ok(duration)
}

/// Parses a byte size: `512`, `16KiB`, `1MiB`, `2GiB` (also `KB`/`MB`/`K`/`M`, as binary units).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size (expected e.g. 512, 16KiB, 1MiB)"))?;
    let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit '{other}' (use KiB, MiB or GiB)")),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("16KiB"), Ok(16 * 1024));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2 gib"), Ok(2 << 30));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999GiB").is_err());
    }

    #[test]
    fn durations_parse_as_humantime() {
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
    }

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
            b"Keep-Alive: timeout=1, max=7\r\n".to_vec()
        );
    }

    /// config/server.toml names every option, and loads once uncommented.
    #[test]
    fn sample_config_lists_every_option() {
        let sample = include_str!("../config/server.toml");
        let uncommented: String = sample
            .lines()
            .filter_map(|line| line.strip_prefix("# "))
            .filter(|line| {
                line.split_once(" = ")
                    .is_some_and(|(key, _)| !key.contains(' '))
            })
            .map(|line| format!("{line}\n"))
            .collect();
        let table: toml::Table = uncommented.parse().expect("sample keys parse as TOML");
        for arg in Config::command().get_arguments() {
            let id = arg.get_id().as_str();
            if arg.get_long().is_some() && !matches!(id, "config" | "help" | "version") {
                assert!(table.contains_key(id), "config/server.toml lacks `{id}`");
            }
        }
        let path = std::env::temp_dir().join(format!("kas-sample-{}.toml", std::process::id()));
        std::fs::write(&path, uncommented).unwrap();
        let loaded = Config::load_from(["kas", "--config", path.to_str().unwrap()]);
        std::fs::remove_file(&path).unwrap();
        let loaded = loaded.expect("the uncommented sample loads");
        assert_eq!(loaded.keep_alive_timeout, Duration::from_secs(65));
        assert_eq!(loaded.admin, Some("127.0.0.1:9901".parse().unwrap()));
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
    fn zero_disables_a_timeout() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.timeout = Duration::ZERO;
        config.keep_alive_timeout = Duration::ZERO;
        let settings = config.settings();
        assert_eq!(settings.inactivity_ms, None);
        assert_eq!(settings.keep_alive_advertised_secs, None);
        assert!(settings.keep_alive_header.is_empty());
    }
}
