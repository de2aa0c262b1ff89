//! Diagnostics: `tracing` to stderr, as text or JSON lines
//! (`--log-format`), at the level `RUST_LOG` sets (default `info`). Text is
//! coloured only when stderr is a terminal and `NO_COLOR` is unset or
//! empty (no-color.org). The access log is not a diagnostic and does not
//! pass through here.
//!
//! A diagnostic never waits and never fails its caller: each line is
//! written whole at once, or dropped and counted ([`lines_dropped`],
//! `kas_log_lines_dropped_total`) when stderr is closed (EPIPE after `|
//! head -1`), failing, or a pipe that is full because nobody reads it. A
//! worker thus never sleeps in write(2) on a log line, and the signal
//! thread, which logs before it acts, always gets to act. (By default
//! tracing-subscriber reports a failed write with `eprintln!`, which
//! panics when stderr is gone: that killed the signal thread.)

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::config::LogFormat;

/// The level when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "info";

/// Installs the global subscriber. A `RUST_LOG` that does not parse falls
/// back to `info`, and says so.
pub fn init(format: LogFormat) {
    init_at(format, DEFAULT_FILTER);
}

/// Like [`init`], at `default_filter` when `RUST_LOG` is unset or does
/// not parse (the guard, `lab`, logs only warnings by default).
pub fn init_at(format: LogFormat, default_filter: &str) {
    let from_env = EnvFilter::try_from_default_env();
    let rejected = match &from_env {
        Err(e) if std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty()) => {
            Some(e.to_string())
        }
        _ => None,
    };
    let filter = from_env.unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(DroppingStderr)
        .log_internal_errors(false);
    match format {
        LogFormat::Text => builder
            .with_ansi(colour(std::io::stderr().is_terminal()))
            .init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
    if let Some(error) = rejected {
        tracing::warn!(%error, "RUST_LOG does not parse; logging at {default_filter}");
    }
}

/// Diagnostic lines dropped since the process started.
static LINES_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Diagnostic lines that could not be written at once, since start.
pub fn lines_dropped() -> u64 {
    LINES_DROPPED.load(Relaxed)
}

/// The subscriber's writer: stderr, a line at a time, never waiting.
struct DroppingStderr;

impl MakeWriter<'_> for DroppingStderr {
    type Writer = DroppingStderr;

    fn make_writer(&self) -> Self::Writer {
        DroppingStderr
    }
}

impl Write for DroppingStderr {
    /// Takes `buf` whole, whatever becomes of it.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    /// tracing-subscriber hands over each formatted line in one call: it
    /// goes out whole, or is dropped and counted. Never an error.
    fn write_all(&mut self, line: &[u8]) -> io::Result<()> {
        if write_now(line).is_err() {
            LINES_DROPPED.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `line` to stderr if stderr takes it without waiting. Under the
/// stderr lock, so lines from threads neither interleave nor race for the
/// room poll(2) saw: a pipe that polls writable has a page free, which
/// holds a line of up to 4 KiB whole (a longer one may still wait for
/// the reader). A file or a terminal is always writable.
fn write_now(line: &[u8]) -> io::Result<()> {
    let mut stderr = io::stderr().lock();
    let mut ready = [PollFd::new(&stderr, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut ready, Some(&now))?;
    let revents = ready[0].revents();
    if !revents.contains(PollFlags::OUT) || revents.contains(PollFlags::ERR) {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    stderr.write_all(line)
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
