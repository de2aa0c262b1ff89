//! The `keepalive-server` binary: load the configuration (`--check` stops
//! there), bind, log where to find the server and what it runs with, then
//! serve until SIGINT/SIGTERM has drained it (a second signal exits at
//! once). SIGHUP reloads the `--config` file; SIGUSR1 reopens the access log.

use std::ffi::OsString;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use keepalive_server::config::{self, format_duration};
use keepalive_server::{Config, Remote, Server, admin, guard, logging, probe, reload};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

fn main() -> ExitCode {
    let args = config::help_as_flag(std::env::args_os().collect());
    if args.get(1).is_some_and(|first| first == "probe") {
        return probe::main(args.into_iter().skip(2));
    }
    if args.get(1).is_some_and(|first| first == "lab") {
        return guard::main(args.into_iter().skip(2));
    }
    let config = Config::load_from(&args).unwrap_or_else(|e| e.exit());
    if config.check {
        // Written without print!, which panics on a closed pipe: the exit
        // status says whether the configuration is valid, read or not
        // (`--check | head -1`).
        for warning in config.warnings() {
            let _ = writeln!(std::io::stderr(), "warning: {warning}");
        }
        let _ = std::io::stdout().write_all(config.check_report().as_bytes());
        return ExitCode::SUCCESS;
    }
    logging::init(config.log_format);
    match run(config, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::from(1)
        }
    }
}

fn run(config: Config, args: Vec<OsString>) -> Result<(), String> {
    // Registered before anything is logged: a signal sent as soon as the
    // startup line appears must be handled, not kill by default action.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let settings = config.settings();
    // The error names what failed: the listen address or the access log.
    let server = Server::bind(settings.clone()).map_err(|e| e.to_string())?;
    let handle = server
        .start()
        .map_err(|e| format!("cannot start workers: {e}"))?;
    let admin_addr = match config.admin {
        Some(addr) => {
            let (bound, _thread) = admin::spawn(addr, handle.remote())
                .map_err(|e| format!("cannot listen for admin on {addr}: {e}"))?;
            Some(bound)
        }
        None => None,
    };
    // Before the startup line, which tells a reader the server is up.
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        workers = settings.workers,
        keep_alive_timeout = %format_duration(config.keep_alive_timeout),
        keep_alive_buffer = %format_duration(config.keep_alive_buffer),
        timeout = %format_duration(config.timeout),
        headers_timeout = %format_duration(config.headers_timeout),
        request_timeout = %format_duration(config.request_timeout),
        shutdown_timeout = %format_duration(config.shutdown_timeout),
        admin = %admin_addr.map_or_else(|| "off".to_owned(), |addr| bound(addr, false)),
        access_log = %config.access_log,
        tls = %config.tls_cert.as_deref().map_or_else(|| "off".to_owned(), |cert| cert.display().to_string()),
        upstream = %config.upstream.as_ref().map_or("off", |up| up.url.as_str()),
        advertise = %config.advertise,
        idle_close = %config.idle_close.name(),
        test_controls = %if config.test_controls { "on" } else { "off" },
        "listening on {}",
        bound(handle.local_addr(), config.tls.is_some())
    );
    watch_signals(signals, handle.remote(), config, args)
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    handle.join().map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// A bound address as the startup line shows it: the URL to open, and
/// `(every interface)` after it for an unspecified address (whose URL
/// names loopback).
fn bound(addr: SocketAddr, tls: bool) -> String {
    let every_interface = if addr.ip().is_unspecified() {
        " (every interface)"
    } else {
        ""
    };
    format!("{}{every_interface}", guard::base_url(addr, tls))
}

/// First SIGINT/SIGTERM: graceful shutdown. Second: exit at once. SIGHUP:
/// reload the config file. SIGUSR1: reopen the access log.
fn watch_signals(
    mut signals: Signals,
    remote: Remote,
    mut config: Config,
    args: Vec<OsString>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut stopping = false;
            for signal in signals.forever() {
                match signal {
                    SIGHUP => {
                        reload::reload(&mut config, &args, &remote);
                    }
                    SIGUSR1 => match remote.reopen_access_log() {
                        Ok(Some(path)) => {
                            tracing::info!(path = %path.display(), "reopened the access log");
                        }
                        Ok(None) => tracing::info!(
                            access_log = %config.access_log,
                            "SIGUSR1: no access log file to reopen"
                        ),
                        Err(e) => tracing::error!(
                            error = %e,
                            "cannot reopen the access log: still writing to the old file"
                        ),
                    },
                    _ if !stopping => {
                        stopping = true;
                        tracing::info!(signal, "shutting down: finishing in-flight requests");
                        remote.shutdown();
                    }
                    _ => {
                        tracing::warn!(signal, "second signal: exiting now");
                        std::process::exit(130);
                    }
                }
            }
        })?;
    Ok(())
}
