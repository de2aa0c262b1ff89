//! The `keepalive-server` binary: load the configuration, bind, log the
//! effective settings, serve until SIGINT/SIGTERM has drained it (a second
//! signal exits at once).

use std::process::ExitCode;

use keepalive_server::{Config, Remote, Server, admin};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

fn main() -> ExitCode {
    let config = Config::load_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(&config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(config: &Config) -> Result<(), String> {
    // Registered before anything is logged: a signal sent as soon as the
    // "listening" line appears must drain, not kill by default action.
    let signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let settings = config.settings();
    let server = Server::bind(settings.clone())
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
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
    let duration = |d| humantime::format_duration(d).to_string();
    tracing::info!(
        listen = %handle.local_addr(),
        admin = ?admin_addr,
        workers = settings.workers,
        keep_alive_timeout = %duration(config.keep_alive_timeout),
        keep_alive_buffer = %duration(config.keep_alive_buffer),
        timeout = %duration(config.timeout),
        headers_timeout = %duration(config.headers_timeout),
        request_timeout = %duration(config.request_timeout),
        max_requests_per_socket = config.max_requests_per_socket,
        max_header_size = config.max_header_size,
        max_body_size = config.max_body_size,
        max_connections = config.max_connections,
        shutdown_timeout = %duration(config.shutdown_timeout),
        "listening"
    );
    watch_signals(signals, handle.remote())
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    handle.join().map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// First SIGINT/SIGTERM: graceful shutdown. Second: exit at once.
fn watch_signals(mut signals: Signals, remote: Remote) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = 0;
            for signal in signals.forever() {
                received += 1;
                if received == 1 {
                    tracing::info!(signal, "shutting down: finishing in-flight requests");
                    remote.shutdown();
                } else {
                    tracing::warn!(signal, "second signal: exiting now");
                    std::process::exit(130);
                }
            }
        })?;
    Ok(())
}
