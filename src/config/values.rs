//! Option values as people write them, and back: durations (`150ms`, `5s`,
//! `1m5s`), sizes (`16KiB`, `1MiB`), counts, listen addresses (`8080`,
//! `:8080`, `localhost:8080`, `[::1]:8080`), the upstream URL
//! (`http://HOST:PORT[/prefix]`, resolved as it is read), the access-log
//! target (`PATH`, `-`, `off`), what `Keep-Alive: timeout=` advertises
//! (`auto`, a duration, `none`), how an idle connection is closed (`fin`,
//! `rst`) and booleans (`1/0/true/false/yes/no/on/off`). Every parser
//! returns an error a person can act on: what was wrong and what would do.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

/// The longest duration accepted.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// The smallest `--max-header-size`: a request line and a Host header.
pub const MIN_HEADER_SIZE: usize = 1024;
/// Most worker threads accepted.
const MAX_WORKERS: usize = 1024;

/// Parses a humantime duration: `150ms`, `5s`, `2m`, `1m5s`, `1h 30m`; a
/// bare `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.starts_with('-') {
        return Err(format!(
            "'{text}' is negative; use 0 to disable, or a duration such as 150ms, 5s or 2m"
        ));
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{text}' has no unit (write {text}s for seconds or {text}ms for milliseconds)"
        ));
    }
    let duration = humantime::parse_duration(text).map_err(|e| {
        let accepted = "write a number and a unit, e.g. 150ms, 5s, 2m or 1m5s (0 disables)";
        match e {
            humantime::DurationError::UnknownUnit { unit, .. } => {
                format!("'{text}': unknown unit '{unit}'; {accepted}")
            }
            humantime::DurationError::NumberOverflow => {
                format!("'{text}' is over a year, the longest supported")
            }
            _ => format!("'{text}' is not a duration; {accepted}"),
        }
    })?;
    if duration > MAX_DURATION {
        return Err(format!("'{text}' is over a year, the longest supported"));
    }
    Ok(duration)
}

/// A duration the way this server prints it, and parses it back: `0`,
/// `150ms`, `5s`, `1m5s`, `1h30m`, `1m5s250ms`; below a millisecond, `µs`.
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0".into();
    }
    let mut out = String::new();
    let total_ms = duration.as_millis();
    let parts = [
        (total_ms / 86_400_000, "d"),
        (total_ms / 3_600_000 % 24, "h"),
        (total_ms / 60_000 % 60, "m"),
        (total_ms / 1000 % 60, "s"),
        (total_ms % 1000, "ms"),
    ];
    for (value, unit) in parts {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    let micros = duration.subsec_micros() % 1000;
    if micros > 0 || out.is_empty() {
        out.push_str(&format!("{micros}us"));
    }
    out
}

/// Parses a byte size: `512`, `16KiB`, `1MiB`, `2GiB` (also `KB`/`MB`/`K`/`M`,
/// as binary units).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "'{text}' is not a size (expected e.g. 512, 16KiB or 1MiB)"
        ));
    }
    let number: usize = digits
        .parse()
        .map_err(|_| format!("'{text}' is too large"))?;
    let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "'{text}': unknown size unit '{other}' (use KiB, MiB or GiB)"
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// A size the way this server prints it: `16KiB`, `1MiB`, or plain bytes.
pub fn format_size(bytes: usize) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// `--max-header-size`: a size of at least [`MIN_HEADER_SIZE`] (smaller
/// would refuse every real request with 431).
pub fn parse_header_size(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    if size < MIN_HEADER_SIZE {
        return Err(format!(
            "'{text}' is too small: every request would get 431 (at least 1KiB; the default is 16KiB)"
        ));
    }
    Ok(size)
}

/// The shortest recent window `/peers` judges a peer over.
const MIN_PEERS_WINDOW: Duration = Duration::from_secs(1);

/// How far back `/peers` looks for its verdicts: a duration of a second
/// or more.
pub fn parse_peers_window(text: &str) -> Result<Duration, String> {
    let window = parse_duration(text)?;
    if window < MIN_PEERS_WINDOW {
        return Err(format!(
            "'{text}' is too short: the recent window is at least 1s (the default is 10m)"
        ));
    }
    Ok(window)
}

/// `--upstream-idle-timeout`: a duration above zero (an upstream
/// connection kept for no time would never be reused; to keep none, the
/// upstream can close them).
pub fn parse_upstream_idle(text: &str) -> Result<Duration, String> {
    let idle = parse_duration(text)?;
    if idle.is_zero() {
        return Err(format!(
            "'{text}': give a duration above 0, under the upstream's own idle timeout (the default is 1s)"
        ));
    }
    Ok(idle)
}

/// A whole number, refused with a message people understand.
pub fn parse_count<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    let text = text.trim();
    if let Ok(value) = text.parse() {
        return Ok(value);
    }
    Err(if text.starts_with('-') {
        format!("'{text}' is negative (use 0 for unlimited)")
    } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        format!("'{text}' is too large")
    } else {
        format!("'{text}' is not a whole number")
    })
}

/// `--workers`: 1 to 1024 event-loop threads.
pub fn parse_workers(text: &str) -> Result<NonZeroUsize, String> {
    let count: usize = parse_count(text).map_err(|e| e.replace(" (use 0 for unlimited)", ""))?;
    match NonZeroUsize::new(count) {
        None => Err(
            "0 workers would serve nothing: give at least 1 (leave --workers out for one per core)"
                .into(),
        ),
        Some(_) if count > MAX_WORKERS => Err(format!(
            "{count} workers is more than the {MAX_WORKERS} supported (one per core is usual)"
        )),
        Some(workers) => Ok(workers),
    }
}

/// An address to listen on: `8080` or `:8080` (every interface, as nginx's
/// `listen 8080`), `127.0.0.1:8080`, `[::1]:8080`, or `HOST:PORT` with a
/// name that resolves (`localhost:8080`; the first IPv4 address it resolves
/// to, else the first address).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    let expected = "expected PORT, :PORT, HOST:PORT or [IPv6]:PORT, e.g. 127.0.0.1:8080";
    let all_interfaces = |port: &str| {
        parse_port(port, text).map(|port| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
    };
    if text.matches(':').count() > 1 && !text.starts_with('[') {
        return Err(format!(
            "'{text}': put an IPv6 address in brackets, e.g. [::1]:8080"
        ));
    }
    if let Some(port) = text.strip_prefix(':') {
        return all_interfaces(port);
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return all_interfaces(text);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("'{text}' has no port ({expected})"));
    };
    let port = parse_port(port, text)?;
    if host.parse::<IpAddr>().is_ok() || host.starts_with('[') {
        return Err(format!("'{text}' is not a valid address ({expected})"));
    }
    let resolved: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?
        .collect();
    resolved
        .iter()
        .find(|addr| addr.is_ipv4())
        .or(resolved.first())
        .copied()
        .ok_or_else(|| format!("'{host}' resolves to no address"))
}

/// Where `--upstream` forwards: an `http://` URL resolved when the
/// configuration loads, so a name that does not resolve is refused at
/// start rather than at the first request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// The URL as `--check` prints it and parses it back:
    /// `http://HOST:PORT[/prefix]`.
    pub url: String,
    /// `HOST:PORT` as written (the port added when left out): how errors
    /// name the upstream.
    pub authority: String,
    /// The addresses `HOST` resolved to, IPv4 first; connects go to the
    /// first.
    pub addrs: Vec<SocketAddr>,
    /// Prepended to every forwarded target: empty, or `/` and a path
    /// without a trailing `/`.
    pub prefix: String,
}

/// `--upstream`: `http://HOST[:PORT][/prefix]` (port 80 when left out);
/// `https://` is refused as not supported yet, and `HOST` must resolve.
pub fn parse_upstream(text: &str) -> Result<Upstream, String> {
    let text = text.trim();
    let expected =
        "expected http://HOST:PORT or http://HOST:PORT/prefix, e.g. http://127.0.0.1:8000";
    let scheme_end = text.find("://").unwrap_or(0);
    let (scheme, rest) = (
        &text[..scheme_end],
        text.get(scheme_end + 3..).unwrap_or(""),
    );
    if scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "'{text}': https upstreams are not supported yet; give the service's plain http:// address"
        ));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("'{text}' is not an http:// URL ({expected})"));
    }
    if rest.contains(['?', '#']) || rest.contains(char::is_whitespace) {
        return Err(format!(
            "'{text}': an upstream URL takes no query, fragment or spaces ({expected})"
        ));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("'{text}' has no host ({expected})"));
    }
    let authority = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_owned()
    };
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Err(format!("'{text}' has no host ({expected})"));
    };
    let port = parse_port(port, text)?;
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs: Vec<SocketAddr> = (bare_host, port)
        .to_socket_addrs()
        .map_err(|e| format!("'{text}': cannot resolve '{bare_host}': {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("'{text}': '{bare_host}' resolves to no address"));
    }
    addrs.sort_by_key(|addr| addr.is_ipv6());
    let prefix = path.trim_end_matches('/').to_owned();
    Ok(Upstream {
        url: format!("http://{authority}{prefix}"),
        authority,
        addrs,
        prefix,
    })
}

/// The admin address: `off` for none (the default, and how a flag or
/// variable switches off an address set in the file), else as
/// [`parse_listen`].
pub fn parse_admin(text: &str) -> Result<AdminAddr, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    parse_listen(text)
        .map(Some)
        .map_err(|e| format!("{e}, or off"))
}

/// Where the admin endpoints listen, `None` for off. An alias, so clap
/// takes `off` as a value rather than treating the option as optional.
pub type AdminAddr = Option<SocketAddr>;

fn parse_port(port: &str, whole: &str) -> Result<u16, String> {
    port.parse()
        .map_err(|_| format!("'{whole}': '{port}' is not a port (0 to 65535)"))
}

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AccessLogTarget {
    /// No access log.
    #[default]
    Off,
    /// Standard output (`-`).
    Stdout,
    /// Appended to this file, reopened on SIGUSR1.
    File(PathBuf),
}

impl fmt::Display for AccessLogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessLogTarget::Off => f.write_str("off"),
            AccessLogTarget::Stdout => f.write_str("-"),
            AccessLogTarget::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// `--access-log`: a file path, `-` for standard output, `off`; as a
/// switch (`KAS_ACCESS_LOG=1`, `access_log = true`), on means standard
/// output. (A file named like a boolean is written `./on`.)
pub fn parse_access_log(text: &str) -> Result<AccessLogTarget, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty path (use - for standard output, or off)".into());
    }
    if text == "-" {
        return Ok(AccessLogTarget::Stdout);
    }
    Ok(match parse_bool(text) {
        Ok(true) => AccessLogTarget::Stdout,
        Ok(false) => AccessLogTarget::Off,
        Err(_) => AccessLogTarget::File(PathBuf::from(text)),
    })
}

/// `--advertise`: what a persistent response's `Keep-Alive: timeout=`
/// says, for every connection (an `advertise=` control still overrides it
/// on its own connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Advertised {
    /// `auto`: the `--keep-alive-timeout`, in whole seconds (none under a
    /// second).
    #[default]
    KeepAliveTimeout,
    /// This duration, in whole seconds rounded down (`0` is sent as
    /// `timeout=0`).
    Timeout(Duration),
    /// `none`: `Connection: keep-alive` and no `Keep-Alive` field, as a
    /// production server that advertises nothing.
    Nothing,
}

impl fmt::Display for Advertised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Advertised::KeepAliveTimeout => f.write_str("auto"),
            Advertised::Timeout(duration) => f.write_str(&format_duration(*duration)),
            Advertised::Nothing => f.write_str("none"),
        }
    }
}

/// `--advertise`: a duration, `none`, or `auto` (the keep-alive timeout).
pub fn parse_advertised(text: &str) -> Result<Advertised, String> {
    match text.trim() {
        "auto" => Ok(Advertised::KeepAliveTimeout),
        "none" => Ok(Advertised::Nothing),
        duration => parse_duration(duration)
            .map(Advertised::Timeout)
            .map_err(|e| {
                format!("{e}; or none (no Keep-Alive field), or auto (the keep-alive timeout)")
            }),
    }
}

/// How an idle connection is closed when its keep-alive timer runs out:
/// `--idle-close` for every connection, the `close=` control for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdleClose {
    /// Shut the write side (FIN), then watch for what still arrives.
    #[default]
    Fin,
    /// An abortive close (SO_LINGER 0): the peer sees a reset.
    Rst,
}

impl IdleClose {
    /// The close named `fin` or `rst`.
    pub fn from_name(name: &str) -> Option<IdleClose> {
        match name {
            "fin" => Some(IdleClose::Fin),
            "rst" => Some(IdleClose::Rst),
            _ => None,
        }
    }

    /// Its name, as [`IdleClose::from_name`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            IdleClose::Fin => "fin",
            IdleClose::Rst => "rst",
        }
    }
}

/// `--idle-close`: `fin` or `rst`.
pub fn parse_idle_close(text: &str) -> Result<IdleClose, String> {
    IdleClose::from_name(text.trim()).ok_or_else(|| {
        format!("'{text}' is not a close: use fin (shut the write side) or rst (a reset)")
    })
}

/// A boolean as people write it in environment variables and files:
/// `1/0`, `true/false`, `yes/no`, `on/off`, in any case.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "'{text}' is not a boolean (use 1/0, true/false, yes/no or on/off)"
        )),
    }
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
        assert!(parse_size("12 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_size("-1").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999GiB").is_err());
    }

    #[test]
    fn sizes_print_in_the_largest_whole_unit() {
        assert_eq!(format_size(16 * 1024), "16KiB");
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size(1500), "1500");
        assert_eq!(format_size(0), "0");
    }

    #[test]
    fn header_sizes_below_a_kibibyte_are_refused() {
        assert!(parse_header_size("0").unwrap_err().contains("too small"));
        assert!(parse_header_size("1023").is_err());
        assert_eq!(parse_header_size("1KiB"), Ok(1024));
    }

    #[test]
    fn the_peers_window_is_a_second_or_more() {
        assert_eq!(parse_peers_window("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_peers_window("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_peers_window("0").unwrap_err().contains("too short"));
        assert!(parse_peers_window("500ms").is_err());
        assert!(parse_peers_window("soon").is_err());
    }

    #[test]
    fn durations_parse_as_humantime() {
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m5s"), Ok(Duration::from_secs(65)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["soon", "5 s s", "ms", "s5"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(
                error.contains("150ms, 5s, 2m or 1m5s (0 disables)") && !error.contains(" at "),
                "{error}"
            );
        }
        assert!(
            parse_duration("5x")
                .unwrap_err()
                .contains("unknown unit 'x'")
        );
        assert!(parse_duration("soon").unwrap_err().contains("soon"));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("5").unwrap_err().contains("5s"));
        assert!(parse_duration("2y").unwrap_err().contains("over a year"));
    }

    #[test]
    fn durations_print_compactly_and_parse_back() {
        for (ms, text) in [
            (0, "0"),
            (150, "150ms"),
            (5000, "5s"),
            (65_000, "1m5s"),
            (5_400_000, "1h30m"),
            (65_250, "1m5s250ms"),
            (90_000_000, "1d1h"),
        ] {
            let duration = Duration::from_millis(ms);
            assert_eq!(format_duration(duration), text);
            assert_eq!(parse_duration(text), Ok(duration), "{text}");
        }
        assert_eq!(format_duration(Duration::from_micros(1500)), "1ms500us");
    }

    #[test]
    fn counts_explain_what_is_wrong() {
        assert_eq!(parse_count::<u32>("7"), Ok(7));
        assert!(parse_count::<u32>("-3").unwrap_err().contains("negative"));
        assert!(
            parse_count::<u32>("99999999999")
                .unwrap_err()
                .contains("too large")
        );
        assert!(
            parse_count::<u32>("many")
                .unwrap_err()
                .contains("whole number")
        );
    }

    #[test]
    fn workers_must_be_between_one_and_the_cap() {
        assert_eq!(parse_workers("2").map(NonZeroUsize::get), Ok(2));
        assert!(parse_workers("0").unwrap_err().contains("at least 1"));
        assert!(parse_workers("100000").unwrap_err().contains("supported"));
        assert!(parse_workers("-1").unwrap_err().contains("negative"));
    }

    #[test]
    fn listen_accepts_port_forms_names_and_bracketed_ipv6() {
        let any = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        assert_eq!(parse_listen(":8080"), Ok(any(8080)));
        assert_eq!(parse_listen("8080"), Ok(any(8080)));
        assert_eq!(
            parse_listen("127.0.0.1:80"),
            Ok("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(parse_listen("[::1]:80"), Ok("[::1]:80".parse().unwrap()));
        let local = parse_listen("localhost:8080").expect("localhost resolves");
        assert!(local.ip().is_loopback() && local.port() == 8080, "{local}");
        assert!(parse_listen("nowhere").unwrap_err().contains("no port"));
        assert!(parse_listen(":99999").unwrap_err().contains("not a port"));
        assert!(parse_listen("::1:80").unwrap_err().contains("brackets"));
        assert!(parse_listen("300.1.1.1:80").is_err());
    }

    #[test]
    fn upstream_urls_resolve_and_keep_their_prefix() {
        let plain = parse_upstream("http://127.0.0.1:8000").unwrap();
        assert_eq!(plain.url, "http://127.0.0.1:8000");
        assert_eq!(plain.addrs, vec!["127.0.0.1:8000".parse().unwrap()]);
        assert_eq!(plain.prefix, "");
        let prefixed = parse_upstream("HTTP://localhost/api/v1/").unwrap();
        assert_eq!(prefixed.authority, "localhost:80");
        assert_eq!(prefixed.prefix, "/api/v1");
        assert_eq!(prefixed.url, "http://localhost:80/api/v1");
        assert!(prefixed.addrs[0].ip().is_loopback());
        let v6 = parse_upstream("http://[::1]:9000/").unwrap();
        assert_eq!(v6.addrs, vec!["[::1]:9000".parse().unwrap()]);
        assert_eq!(parse_upstream(&v6.url), Ok(v6));
    }

    #[test]
    fn bad_upstream_urls_say_why() {
        let error = |text| parse_upstream(text).unwrap_err();
        assert!(error("https://example.com").contains("https upstreams are not supported yet"));
        assert!(error("127.0.0.1:8000").contains("not an http:// URL"));
        assert!(error("ftp://x").contains("not an http:// URL"));
        assert!(error("http://").contains("no host"));
        assert!(error("http://user@host:80").contains("no host"));
        assert!(error("http://127.0.0.1:99999").contains("not a port"));
        assert!(error("http://127.0.0.1:80/?a=1").contains("no query"));
        assert!(error("http://no-such-host.invalid:80").contains("cannot resolve"));
    }

    #[test]
    fn the_upstream_idle_timeout_is_above_zero() {
        assert_eq!(parse_upstream_idle("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_upstream_idle("0").unwrap_err().contains("above 0"));
    }

    #[test]
    fn admin_takes_an_address_or_off() {
        assert_eq!(parse_admin("off"), Ok(None));
        assert_eq!(
            parse_admin("127.0.0.1:9901"),
            Ok(Some("127.0.0.1:9901".parse().unwrap()))
        );
        assert!(parse_admin("of").unwrap_err().ends_with("or off"));
    }

    #[test]
    fn access_log_takes_a_path_a_dash_or_a_switch() {
        assert_eq!(parse_access_log("-"), Ok(AccessLogTarget::Stdout));
        assert_eq!(parse_access_log("1"), Ok(AccessLogTarget::Stdout));
        assert_eq!(parse_access_log("off"), Ok(AccessLogTarget::Off));
        assert_eq!(parse_access_log("false"), Ok(AccessLogTarget::Off));
        assert_eq!(
            parse_access_log("/var/log/kas.log"),
            Ok(AccessLogTarget::File("/var/log/kas.log".into()))
        );
        assert_eq!(
            parse_access_log("./on"),
            Ok(AccessLogTarget::File("./on".into()))
        );
        assert!(parse_access_log("").is_err());
    }

    #[test]
    fn advertise_takes_a_duration_none_or_auto_and_prints_back() {
        for (text, value) in [
            ("auto", Advertised::KeepAliveTimeout),
            ("none", Advertised::Nothing),
            ("5s", Advertised::Timeout(Duration::from_secs(5))),
            ("0", Advertised::Timeout(Duration::ZERO)),
        ] {
            assert_eq!(parse_advertised(text), Ok(value), "{text}");
            assert_eq!(parse_advertised(&value.to_string()), Ok(value), "{text}");
        }
        let error = parse_advertised("never").unwrap_err();
        assert!(
            error.contains("'never'") && error.contains("none"),
            "{error}"
        );
    }

    #[test]
    fn idle_close_takes_fin_or_rst() {
        assert_eq!(parse_idle_close("fin"), Ok(IdleClose::Fin));
        assert_eq!(parse_idle_close("rst"), Ok(IdleClose::Rst));
        assert_eq!(IdleClose::Rst.name(), "rst");
        let error = parse_idle_close("reset").unwrap_err();
        assert!(
            error.contains("'reset'") && error.contains("fin"),
            "{error}"
        );
    }

    #[test]
    fn booleans_accept_the_usual_words() {
        for yes in ["1", "true", "YES", "On"] {
            assert_eq!(parse_bool(yes), Ok(true), "{yes}");
        }
        for no in ["0", "false", "no", "OFF"] {
            assert_eq!(parse_bool(no), Ok(false), "{no}");
        }
        assert!(parse_bool("maybe").is_err());
    }
}
