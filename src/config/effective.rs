//! The effective configuration as text: every option with its value written
//! as the config file would take it, and where the value came from
//! (`--check` prints this), and what differs between two configurations (a
//! SIGHUP reload logs it).

use std::fmt::Write as _;

use clap::ValueEnum;

use super::values::{format_duration, format_size};
use super::{Config, Origin};

/// Options a running server cannot change: a reload reports them as ignored
/// until the next restart.
pub const RESTART_ONLY: &[&str] = &[
    "listen",
    "workers",
    "defer_accept",
    "admin",
    "log_format",
    "access_log",
    "upstream",
];

/// One option whose value a reload would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: &'static str,
    pub old: String,
    pub new: String,
    /// The running server keeps the old value until restarted.
    pub needs_restart: bool,
}

impl Config {
    /// Every option's value as a TOML value (`"5s"`, `3`), in `--help`
    /// order; `None` for an option that is off (`admin` unset).
    pub fn effective(&self) -> Vec<(&'static str, Option<String>)> {
        let text = |value: &str| Some(toml::Value::String(value.to_owned()).to_string());
        let duration = |d| text(&format_duration(d));
        let size = |bytes| text(&format_size(bytes));
        let path = |path: &Option<std::path::PathBuf>| {
            path.as_ref().and_then(|p| text(&p.display().to_string()))
        };
        let workers = self
            .workers
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, |n| n.get());
        let log_format = self
            .log_format
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned());
        vec![
            ("listen", text(&self.listen.to_string())),
            ("workers", Some(workers.to_string())),
            ("keep_alive_timeout", duration(self.keep_alive_timeout)),
            ("keep_alive_buffer", duration(self.keep_alive_buffer)),
            ("timeout", duration(self.timeout)),
            ("headers_timeout", duration(self.headers_timeout)),
            ("request_timeout", duration(self.request_timeout)),
            (
                "max_requests_per_socket",
                Some(self.max_requests_per_socket.to_string()),
            ),
            ("max_header_size", size(self.max_header_size)),
            ("max_headers", Some(self.max_headers.to_string())),
            ("max_body_size", size(self.max_body_size)),
            ("max_connections", Some(self.max_connections.to_string())),
            ("defer_accept", Some(self.defer_accept.to_string())),
            ("shutdown_timeout", duration(self.shutdown_timeout)),
            ("admin", self.admin.and_then(|addr| text(&addr.to_string()))),
            ("access_log", text(&self.access_log.to_string())),
            ("tls_cert", path(&self.tls_cert)),
            ("tls_key", path(&self.tls_key)),
            (
                "upstream",
                self.upstream.as_ref().and_then(|up| text(&up.url)),
            ),
            ("upstream_timeout", duration(self.upstream_timeout)),
            (
                "upstream_idle_timeout",
                duration(self.upstream_idle_timeout),
            ),
            (
                "test_controls",
                text(if self.test_controls { "on" } else { "off" }),
            ),
            ("advertise", text(&self.advertise.to_string())),
            ("idle_close", text(self.idle_close.name())),
            ("peers_window", duration(self.peers_window)),
            ("log_format", text(&log_format)),
        ]
    }

    /// What `--check` prints: a config file holding the effective value of
    /// every option, each commented with where it came from.
    pub fn check_report(&self) -> String {
        let mut out = String::new();
        let file = self
            .config
            .as_ref()
            .map_or_else(|| "no config file".to_owned(), |p| p.display().to_string());
        let _ = writeln!(
            out,
            "# keepalive-server {}: configuration OK ({file}).",
            env!("CARGO_PKG_VERSION")
        );
        let _ = writeln!(
            out,
            "# Effective values; precedence is flag > environment > file > default."
        );
        for (key, value) in self.effective() {
            let origin = match (key, self.origins.of(key)) {
                ("workers", Origin::Default) => "default: available cores".to_owned(),
                (_, origin) => origin.to_string(),
            };
            let line = match value {
                Some(value) => format!("{key} = {value}"),
                None => format!("# {key}: off"),
            };
            let _ = writeln!(out, "{line:<40} # {origin}");
        }
        out
    }

    /// The options whose value differs in `new`, in `--help` order.
    pub fn changes(&self, new: &Config) -> Vec<Change> {
        let shown = |value: Option<String>| {
            value.map_or_else(|| "off".into(), |v| v.trim_matches('"').to_owned())
        };
        self.effective()
            .into_iter()
            .zip(new.effective())
            .filter(|((_, old), (_, new))| old != new)
            .map(|((key, old), (_, new))| Change {
                key,
                old: shown(old),
                new: shown(new),
                needs_restart: RESTART_ONLY.contains(&key),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::super::load::in_file;
    use super::*;

    fn defaults() -> Config {
        Config::with_listen("127.0.0.1:8080".parse().unwrap())
    }

    #[test]
    fn every_file_option_is_listed_once() {
        let listed: Vec<&str> = defaults().effective().iter().map(|(k, _)| *k).collect();
        let options: Vec<String> = Config::command()
            .get_arguments()
            .filter(|arg| in_file(arg))
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert_eq!(listed, options);
    }

    #[test]
    fn the_check_report_loads_back_as_the_same_configuration() {
        let mut config = defaults();
        config.keep_alive_timeout = std::time::Duration::from_millis(65_250);
        config.max_body_size = 3 << 20;
        let report = config.check_report();
        assert!(
            report.contains("keep_alive_timeout = \"1m5s250ms\""),
            "{report}"
        );
        assert!(report.contains("# admin: off"), "{report}");
        let table: toml::Table = report.parse().expect("the report is TOML");
        assert_eq!(table["max_body_size"].as_str(), Some("3MiB"));
        assert_eq!(table["listen"].as_str(), Some("127.0.0.1:8080"));
    }

    #[test]
    fn changes_name_the_key_and_flag_restart_only_ones() {
        let old = defaults();
        let mut new = defaults();
        new.keep_alive_timeout = std::time::Duration::from_secs(5);
        new.listen = "127.0.0.1:9000".parse().unwrap();
        let changes = old.changes(&new);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0].key, "listen");
        assert!(changes[0].needs_restart);
        assert_eq!(
            (
                changes[1].key,
                changes[1].old.as_str(),
                changes[1].new.as_str()
            ),
            ("keep_alive_timeout", "1m5s", "5s")
        );
        assert!(!changes[1].needs_restart);
    }
}
