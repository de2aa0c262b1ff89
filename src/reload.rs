//! SIGHUP: read the `--config` file again, validated exactly as at startup,
//! and hand the new settings to every worker; log what changed.
//!
//! Each worker has a [`SettingsSlot`](crate::shared::SettingsSlot) beside
//! its snapshot mailbox: the reload puts the new settings there and wakes
//! the worker's poll; the worker swaps them in at the top of its next turn,
//! before it handles another event. Connections stay open; a timer armed
//! after the swap uses the new durations, one already running keeps its
//! own. Options the running server cannot change (the listening address,
//! the number of workers, TCP_DEFER_ACCEPT on the listeners, the admin
//! address, the log format, the access log, the upstream) keep their old values and are
//! reported as ignored until a restart. An invalid file changes nothing.
//!
//! With HTTPS on, a reload also reads the certificate and key again (even
//! without `--config`: renewing a certificate is the usual reason to send
//! SIGHUP): new connections shake hands with the new pair, open ones keep
//! theirs. Files that do not load, or do not match, change nothing and the
//! log says why. Turning TLS on or off takes a restart.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, Settings};
use crate::shared::Remote;

/// How long a reload waits for every worker to take the new settings.
const APPLY_WITHIN: Duration = Duration::from_secs(5);

/// What a reload did.
#[derive(Debug)]
pub enum Outcome {
    /// Started without `--config`: nothing to read.
    NoConfigFile,
    /// The file (or the environment) is invalid: the message, which names
    /// the key; nothing changed.
    Invalid(String),
    /// The new configuration is in force (restart-only options kept as
    /// they were); `workers` is how many took it in time.
    Applied { workers: usize },
}

/// Reloads from `args` (the process's own command line) on behalf of a
/// running server whose configuration is `running`; on success `running`
/// becomes the configuration now in force. Logs the outcome.
pub fn reload(running: &mut Config, args: &[OsString], remote: &Remote) -> Outcome {
    let path = match (&running.config, &running.tls) {
        (Some(path), _) => path.display().to_string(),
        (None, Some(_)) => "no config file".to_owned(),
        (None, None) => {
            tracing::info!("SIGHUP: nothing to reload (started without --config or TLS)");
            return Outcome::NoConfigFile;
        }
    };
    let loaded = match Config::load_from(args) {
        Ok(loaded) => loaded,
        Err(e) => {
            let rendered = e.to_string();
            let message = rendered.trim().trim_start_matches("error: ").to_owned();
            tracing::error!(
                config = %path,
                "reload failed, the running configuration stays in force: {message}"
            );
            return Outcome::Invalid(message);
        }
    };
    let mut next = loaded.clone();
    next.listen = running.listen;
    next.workers = running.workers;
    next.defer_accept = running.defer_accept;
    next.admin = running.admin;
    next.log_format = running.log_format;
    next.access_log = running.access_log.clone();
    next.upstream = running.upstream.clone();
    if next.tls.is_some() != running.tls.is_some() {
        tracing::warn!(
            config = %path,
            "reload: TLS turned {}, ignored until restart",
            if next.tls.is_some() { "on" } else { "off" }
        );
        next.tls_cert = running.tls_cert.clone();
        next.tls_key = running.tls_key.clone();
        next.tls = running.tls.clone();
    } else if next.tls.is_some() {
        tracing::info!(
            config = %path,
            cert = %next.tls_cert.as_deref().unwrap_or(std::path::Path::new("")).display(),
            "reload: certificate and key read again; new connections use them"
        );
    }
    for ignored in running.changes(&loaded).iter().filter(|c| c.needs_restart) {
        tracing::warn!(
            config = %path,
            "reload: {} changed ({} -> {}), ignored until restart",
            ignored.key,
            ignored.old,
            ignored.new
        );
    }
    let changed: Vec<String> = running
        .changes(&next)
        .iter()
        .map(|c| format!("{} {} -> {}", c.key, c.old, c.new))
        .collect();
    let workers = apply(remote, Arc::new(next.settings()));
    *running = next;
    let summary = if changed.is_empty() {
        "no changes".to_owned()
    } else {
        changed.join(", ")
    };
    tracing::info!(config = %path, applied_by = workers, "reloaded: {summary}");
    Outcome::Applied { workers }
}

/// Offers `settings` to every worker and waits until each has taken them
/// (so a request sent after the log line meets them), up to
/// [`APPLY_WITHIN`]. Returns how many did.
fn apply(remote: &Remote, settings: Arc<Settings>) -> usize {
    remote.offer_settings(&settings);
    let deadline = Instant::now() + APPLY_WITHIN;
    loop {
        let waiting = remote.workers_yet_to_take_settings();
        if waiting == 0 || Instant::now() >= deadline {
            return remote.worker_count() - waiting;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
