//! The `keepalive-server` binary: parse flags, bind, log the effective
//! settings, serve until stopped.

use std::process::ExitCode;

use clap::Parser;
use keepalive_server::{Config, Server};

fn main() -> ExitCode {
    let config = Config::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let settings = config.settings();
    let server = match Server::bind(settings.clone()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.listen);
            return ExitCode::from(1);
        }
    };
    tracing::info!(
        listen = %server.local_addr(),
        workers = settings.workers,
        keep_alive_timeout = %humantime::format_duration(config.keep_alive_timeout),
        keep_alive_buffer = %humantime::format_duration(config.keep_alive_buffer),
        timeout = %humantime::format_duration(config.timeout),
        headers_timeout = %humantime::format_duration(config.headers_timeout),
        request_timeout = %humantime::format_duration(config.request_timeout),
        "listening"
    );
    let handle = match server.start() {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("error: cannot start workers: {e}");
            return ExitCode::from(1);
        }
    };
    match handle.join() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
