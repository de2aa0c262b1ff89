//! What one option's parser cannot see: options that clash with each other
//! (`admin` on the `listen` address) and paths the filesystem already
//! rules out (an access log in a missing directory, or naming a
//! directory). Checked when the configuration loads, so `--check` refuses
//! what would fail at start, without binding or creating anything.

use std::net::SocketAddr;
use std::path::Path;

use super::values::{AccessLogTarget, Advertised};
use super::{Config, Origin};
use crate::tls::{ServerTls, TlsFile};

/// The first clash or impossible path, as a message naming the option
/// (as the user set it: flag, variable or config file key).
pub(super) fn check(config: &Config) -> Result<(), String> {
    if let Some(admin) = config.admin
        && same_socket(admin, config.listen)
    {
        return Err(format!(
            "{}: {admin} is also the {} address; give the admin endpoints a port of their own",
            named(config, "admin"),
            named(config, "listen"),
        ));
    }
    if let AccessLogTarget::File(path) = &config.access_log {
        access_log_path(path).map_err(|why| format!("{}: {why}", named(config, "access_log")))?;
    }
    Ok(())
}

/// The certificate and key of `tls_cert` and `tls_key`, loaded and
/// matched (`None` without them): a file that is missing, unreadable, not
/// PEM, or a key that is not the certificate's is an error naming the
/// option and the file.
pub(super) fn load_tls(config: &Config) -> Result<Option<ServerTls>, String> {
    match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => ServerTls::load(cert, key).map(Some).map_err(|e| {
            let key = match e.file {
                TlsFile::Cert => "tls_cert",
                TlsFile::Key => "tls_key",
            };
            format!("{}: {e}", named(config, key))
        }),
        (None, None) => Ok(None),
        (Some(_), None) => Err(half_a_pair(config, "tls_cert", "tls_key")),
        (None, Some(_)) => Err(half_a_pair(config, "tls_key", "tls_cert")),
    }
}

/// `set` was given without `missing`: both named as the user set the one
/// (`--tls-cert` asks for `--tls-key`, a config file key for the other
/// key, a variable for the other variable).
fn half_a_pair(config: &Config, set: &str, missing: &str) -> String {
    let missing_named = match config.origins.of(set) {
        Origin::Default | Origin::Flag => format!("--{}", missing.replace('_', "-")),
        Origin::Env(_) => format!("KAS_{}", missing.to_uppercase()),
        Origin::File => format!("`{missing}`"),
    };
    format!(
        "{} is set but {missing_named} is not: HTTPS needs both the certificate \
         chain and its private key",
        named(config, set)
    )
}

/// The shortest idle timeout of a common service (gunicorn's `keepalive`,
/// 2 s): an upstream pool that keeps connections this long races it.
const SMALLEST_SERVICE_IDLE: std::time::Duration = std::time::Duration::from_secs(2);

/// What a valid configuration does that its author may not expect: a
/// keep-alive timeout below a second is not advertised at all, and a
/// fractional one rounded down (Keep-Alive counts whole seconds); an
/// `--advertise` that promises more than is kept, or says `timeout=0`; an
/// admin listener that other hosts can reach; an upstream pool kept as
/// long as a common service keeps its idle connections.
pub(super) fn warnings(config: &Config) -> Vec<String> {
    let timeout = config.keep_alive_timeout;
    let mut warnings = Vec::new();
    if let Some(admin) = config.admin
        && !admin.ip().to_canonical().is_loopback()
    {
        let reach = if admin.ip().is_unspecified() {
            "every interface"
        } else {
            "an address other hosts can reach"
        };
        warnings.push(format!(
            "{} {admin}: the admin listener is on {reach}; it serves /metrics, /peers \
             (client addresses) and live connection details to anyone who connects: \
             bind it to 127.0.0.1 or firewall its port",
            named(config, "admin"),
        ));
    }
    if let Some(warning) = advertise_warning(config) {
        warnings.push(warning);
    }
    if config.upstream.is_some() && config.upstream_idle_timeout >= SMALLEST_SERVICE_IDLE {
        warnings.push(format!(
            "{} {}: at or over 2s, gunicorn's idle timeout (uvicorn and Node keep 5s): \
             the lab's pool may reuse a connection the service is closing; a request \
             that meets one is retried once only when idempotent (the default is 1s)",
            named(config, "upstream_idle_timeout"),
            super::format_duration(config.upstream_idle_timeout),
        ));
    }
    let auto = config.advertise == Advertised::KeepAliveTimeout;
    if auto && !timeout.is_zero() && timeout.subsec_nanos() != 0 {
        let named = named(config, "keep_alive_timeout");
        let timeout_text = super::format_duration(timeout);
        warnings.push(match timeout.as_secs() {
            0 => format!(
                "{named} {timeout_text}: under a second, so responses send no `Keep-Alive` \
                 timeout (`timeout=0` would read as \"do not reuse\"): clients fall back on \
                 their own pool idle timeouts"
            ),
            secs => format!(
                "{named} {timeout_text}: responses advertise `Keep-Alive: timeout={secs}` \
                 (whole seconds, rounded down)"
            ),
        });
    }
    warnings
}

/// An explicit `--advertise` that a client trusting it would be hurt by:
/// `timeout=0` (read as "do not reuse"), or more than the server keeps
/// (the client reuses connections the server has closed). Both are things
/// a lab imitates on purpose, so they warn, not fail.
fn advertise_warning(config: &Config) -> Option<String> {
    let Advertised::Timeout(advertised) = config.advertise else {
        return None;
    };
    if config.keep_alive_timeout.is_zero() {
        return None;
    }
    let named = named(config, "advertise");
    let shown = super::format_duration(advertised);
    let secs = advertised.as_secs();
    let kept = config.keep_alive_timeout + config.keep_alive_buffer;
    if secs == 0 {
        Some(format!(
            "{named} {shown}: responses say `Keep-Alive: timeout=0`, which clients read as \
             \"do not reuse\" (Node's agent then never reuses a connection)"
        ))
    } else if std::time::Duration::from_secs(secs) > kept {
        Some(format!(
            "{named} {shown}: responses advertise `Keep-Alive: timeout={secs}` but idle \
             connections are closed after {} (keep-alive timeout + buffer): a client that \
             trusts the advertisement reuses connections already closed",
            super::format_duration(kept)
        ))
    } else {
        None
    }
}

/// Whether binding both would collide: one port (not 0, which picks a
/// free one each time) on one address, or on every address.
fn same_socket(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Why a file cannot be opened for appending at `path`, if the filesystem
/// already says so.
fn access_log_path(path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!("{shown} is a directory; name a file in it"));
    }
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(format!(
            "cannot create {shown}: directory {} does not exist",
            parent.display()
        ));
    }
    Ok(())
}

/// An option as the user set it: `--admin`, `KAS_ADMIN` or `admin` in the
/// config file.
fn named(config: &Config, key: &str) -> String {
    match config.origins.of(key) {
        Origin::Default | Origin::Flag => format!("--{}", key.replace('_', "-")),
        Origin::Env(var) => var.clone(),
        Origin::File => format!("`{key}` in the config file"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fractional_keep_alive_timeout_warns_what_is_advertised() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        assert!(warnings(&config).is_empty(), "the default is whole seconds");
        config.keep_alive_timeout = std::time::Duration::from_millis(500);
        let warned = warnings(&config).join("\n");
        assert!(warned.contains("--keep-alive-timeout 500ms"), "{warned}");
        assert!(warned.contains("send no `Keep-Alive` timeout"), "{warned}");
        config.keep_alive_timeout = std::time::Duration::from_millis(1500);
        assert!(warnings(&config)[0].contains("timeout=1`"));
    }

    #[test]
    fn an_advertisement_that_would_hurt_a_trusting_client_warns() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.keep_alive_timeout = std::time::Duration::from_secs(2);
        config.advertise = Advertised::Timeout(std::time::Duration::from_secs(3));
        assert!(warnings(&config).is_empty(), "2s + the 1s buffer is kept");
        config.advertise = Advertised::Timeout(std::time::Duration::from_secs(5));
        let warned = warnings(&config).join("\n");
        assert!(
            warned.contains("--advertise 5s") && warned.contains("closed after 3s"),
            "{warned}"
        );
        config.advertise = Advertised::Timeout(std::time::Duration::from_millis(500));
        assert!(warnings(&config)[0].contains("timeout=0"));
        config.advertise = Advertised::Nothing;
        config.keep_alive_timeout = std::time::Duration::from_millis(1500);
        assert!(
            warnings(&config).is_empty(),
            "nothing advertised, nothing rounded"
        );
    }

    #[test]
    fn an_upstream_pool_kept_as_long_as_a_service_keeps_its_own_warns() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.upstream_idle_timeout = std::time::Duration::from_secs(5);
        assert!(warnings(&config).is_empty(), "no upstream, no pool");
        config.upstream =
            Some(super::super::values::parse_upstream("http://127.0.0.1:8000").unwrap());
        let warned = warnings(&config).join("\n");
        assert!(warned.contains("--upstream-idle-timeout 5s"), "{warned}");
        config.upstream_idle_timeout = std::time::Duration::from_secs(1);
        assert!(warnings(&config).is_empty(), "the default is well under");
    }

    #[test]
    fn an_admin_listener_beyond_loopback_warns() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        for quiet in ["127.0.0.1:9901", "[::1]:9901", "[::ffff:127.0.0.1]:9901"] {
            config.admin = Some(quiet.parse().unwrap());
            assert!(warnings(&config).is_empty(), "{quiet}");
        }
        config.admin = Some("0.0.0.0:9907".parse().unwrap());
        let warned = warnings(&config).join("\n");
        assert!(
            warned.contains("--admin 0.0.0.0:9907") && warned.contains("every interface"),
            "{warned}"
        );
        config.admin = Some("192.0.2.7:9901".parse().unwrap());
        assert!(warnings(&config)[0].contains("other hosts can reach"));
    }

    #[test]
    fn an_admin_port_clashes_on_the_same_or_every_address_but_not_port_0() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        assert!(same_socket(addr("127.0.0.1:8080"), addr("127.0.0.1:8080")));
        assert!(same_socket(addr("0.0.0.0:8080"), addr("127.0.0.1:8080")));
        assert!(!same_socket(addr("127.0.0.1:8080"), addr("127.0.0.2:8080")));
        assert!(!same_socket(addr("127.0.0.1:9901"), addr("127.0.0.1:8080")));
        assert!(!same_socket(addr("127.0.0.1:0"), addr("127.0.0.1:0")));
    }

    #[test]
    fn an_access_log_needs_an_existing_directory_and_a_file_name() {
        let dir = std::env::temp_dir();
        assert!(
            access_log_path(&dir)
                .unwrap_err()
                .contains("is a directory")
        );
        let missing = dir.join("kas-no-such-dir").join("access.log");
        assert!(
            access_log_path(&missing)
                .unwrap_err()
                .contains("does not exist")
        );
        assert_eq!(access_log_path(&dir.join("access.log")), Ok(()));
        assert_eq!(access_log_path(Path::new("access.log")), Ok(()));
    }
}
