//! The progress line while the probe waits: what it waits for, the time
//! elapsed and the bound, redrawn in place on stderr. Only on a terminal:
//! piped or redirected, nothing is written.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the line is redrawn.
pub const REDRAW: Duration = Duration::from_millis(200);

/// The line, if stderr is a terminal.
pub struct Progress {
    enabled: bool,
    drawn: bool,
    last: Option<Instant>,
}

impl Progress {
    /// On when stderr is a terminal.
    pub fn on_terminal() -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
            last: None,
        }
    }

    /// When the loop should wake to redraw, if the line is shown.
    pub fn next_redraw(&self, now: Instant) -> Option<Instant> {
        self.enabled
            .then(|| self.last.map_or(now, |last| last + REDRAW))
    }

    /// Redraws `what` with the elapsed time and its bound (at most every
    /// [`REDRAW`]).
    pub fn show(&mut self, what: &str, elapsed: Duration, bound: Duration) {
        let now = Instant::now();
        if !self.enabled || self.last.is_some_and(|last| now < last + REDRAW) {
            return;
        }
        self.last = Some(now);
        self.drawn = true;
        let line = format!(
            "{what}: {:.1} s of at most {}",
            elapsed.as_secs_f64(),
            humantime::format_duration(bound)
        );
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
    }

    /// Erases the line.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
            self.drawn = false;
        }
        self.last = None;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
