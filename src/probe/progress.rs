//! What the probe is doing while it waits, on stderr. On a terminal, one
//! line redrawn in place: the phase, its detail, the time elapsed and the
//! bound. Anywhere else (a log file, a CI job, a pipe), a plain line when
//! a phase begins, so a long run is not silent until the report: no
//! redrawing, no escape codes. Or nothing at all, when the measurement
//! runs beside someone else's output (the guard's check of the other hop,
//! while COMMAND writes to the same stderr).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the terminal line is redrawn.
pub const REDRAW: Duration = Duration::from_millis(200);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One line redrawn in place.
    Terminal,
    /// A line per phase.
    Lines,
    /// Nothing.
    Silent,
}

/// The progress of one phase of the probe.
pub struct Progress {
    mode: Mode,
    drawn: bool,
    last: Option<Instant>,
    /// The phase last written as a line.
    said: String,
}

impl Progress {
    /// A redrawn line when stderr is a terminal, else a line per phase.
    pub fn on_stderr() -> Progress {
        Progress {
            mode: if std::io::stderr().is_terminal() {
                Mode::Terminal
            } else {
                Mode::Lines
            },
            drawn: false,
            last: None,
            said: String::new(),
        }
    }

    /// Shows nothing.
    pub fn silent() -> Progress {
        Progress {
            mode: Mode::Silent,
            drawn: false,
            last: None,
            said: String::new(),
        }
    }

    /// When the loop should wake to redraw, if a line is redrawn.
    pub fn next_redraw(&self, now: Instant) -> Option<Instant> {
        (self.mode == Mode::Terminal).then(|| self.last.map_or(now, |last| last + REDRAW))
    }

    /// Shows `phase` (what the probe waits for) with `detail` (how far it
    /// got), the elapsed time and its bound: redrawn at most every
    /// [`REDRAW`] on a terminal; elsewhere written once when the phase
    /// begins.
    pub fn show(&mut self, phase: &str, detail: &str, elapsed: Duration, bound: Duration) {
        let bound = humantime::format_duration(bound);
        if self.mode == Mode::Silent {
            return;
        }
        if self.mode == Mode::Lines {
            if self.said != phase {
                self.said = phase.to_owned();
                eprintln!("keepalive-server probe: {phase} (at most {bound})");
            }
            return;
        }
        let now = Instant::now();
        if self.last.is_some_and(|last| now < last + REDRAW) {
            return;
        }
        self.last = Some(now);
        self.drawn = true;
        let line = format!(
            "{phase}: {detail}, {:.1} s of at most {bound}",
            elapsed.as_secs_f64()
        );
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
    }

    /// Erases the terminal line.
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
