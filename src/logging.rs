//! Diagnostics: `tracing` to stderr, as text or JSON lines
//! (`--log-format`), at the level `RUST_LOG` sets (default `info`). Text is
//! coloured only when stderr is a terminal and `NO_COLOR` is unset or
//! empty (no-color.org). The access log is not a diagnostic and does not
//! pass through here.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The level when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "info";

/// Installs the global subscriber. A `RUST_LOG` that does not parse falls
/// back to `info`, and says so.
pub fn init(format: LogFormat) {
    let from_env = EnvFilter::try_from_default_env();
    let rejected = match &from_env {
        Err(e) if std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty()) => {
            Some(e.to_string())
        }
        _ => None,
    };
    let filter = from_env.unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(colour(std::io::stderr().is_terminal()))
            .init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
    if let Some(error) = rejected {
        tracing::warn!(%error, "RUST_LOG does not parse; logging at {DEFAULT_FILTER}");
    }
}

/// Whether to colour text written to a terminal (`is_terminal`), given
/// `NO_COLOR`.
fn colour(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_colour_a_pipe_or_a_file() {
        assert!(!colour(false));
    }
}
