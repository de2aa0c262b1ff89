//! Running COMMAND: started as a shell would start it (exit status 127
//! when it is not found, 126 when it cannot be executed), with
//! `KAS_LAB_URL` added to an otherwise unchanged environment and the
//! standard streams shared; then waited for while SIGINT and SIGTERM are
//! watched. SIGTERM is passed on to COMMAND at once; SIGINT a second
//! later if COMMAND still runs (Ctrl-C at a terminal reaches the whole
//! foreground group, COMMAND included: a second SIGINT straight after
//! would cut short what it does on the first, such as pytest's summary).
//! COMMAND is killed if it still runs a few seconds after that (or at a
//! second signal).

use std::ffi::OsString;
use std::io;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use signal_hook::iterator::Signals;

/// The variable COMMAND finds the server's base URL in.
pub const URL_VARIABLE: &str = "KAS_LAB_URL";
/// How often the wait looks at the signals.
const TICK: Duration = Duration::from_millis(20);
/// How long COMMAND has to end on a terminal's SIGINT before the guard
/// passes one on.
const OWN_SIGINT: Duration = Duration::from_secs(1);
/// How long COMMAND has to end after a signal was passed on to it.
const GRACE: Duration = Duration::from_secs(5);

/// How the wait for COMMAND ended.
#[derive(Debug)]
pub enum Ended {
    /// It exited (or a signal ended it) on its own.
    Exited(ExitStatus),
    /// The guard was interrupted by this signal; COMMAND was stopped.
    Interrupted(i32),
}

/// COMMAND could not be started: the message and the shell's status.
#[derive(Debug)]
pub struct NotStarted {
    pub message: String,
    pub status: u8,
}

/// Starts `command` with `url` in `KAS_LAB_URL`.
pub fn start(command: &[OsString], url: &str) -> Result<Child, NotStarted> {
    let program = command.first().cloned().unwrap_or_default();
    let shown = program.to_string_lossy().into_owned();
    Command::new(&program)
        .args(&command[1..])
        .env(URL_VARIABLE, url)
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => NotStarted {
                message: format!("{shown}: command not found"),
                status: 127,
            },
            io::ErrorKind::PermissionDenied => NotStarted {
                message: format!("{shown}: permission denied (not an executable file)"),
                status: 126,
            },
            _ => NotStarted {
                message: format!("{shown}: cannot run it: {e}"),
                status: 126,
            },
        })
}

/// Waits for `child` to end, passing SIGINT or SIGTERM on to it. (Polled:
/// the child is reaped here, so a signal never reaches a reused pid.)
pub fn wait(mut child: Child, signals: &mut Signals) -> io::Result<Ended> {
    let pid = Pid::from_child(&child);
    let mut interrupted: Option<Interrupt> = None;
    loop {
        if let Some(status) = child.try_wait()? {
            // Ctrl-C at a terminal reaches COMMAND and the guard together:
            // COMMAND may be seen gone before the guard's signal is read.
            let signal = interrupted
                .map(|interrupt| interrupt.signal)
                .or_else(|| signals.pending().next());
            return Ok(match signal {
                Some(signal) => Ended::Interrupted(signal),
                None => Ended::Exited(status),
            });
        }
        for signal in signals.pending() {
            match interrupted {
                None => interrupted = Some(Interrupt::new(signal)),
                Some(_) => {
                    let _ = child.kill();
                }
            }
        }
        if let Some(interrupt) = &mut interrupted {
            interrupt.pass_on(pid);
            if interrupt.at.elapsed() > OWN_SIGINT + GRACE {
                let _ = child.kill();
            }
        }
        std::thread::sleep(TICK);
    }
}

/// A signal the guard received, and whether COMMAND has been sent it.
struct Interrupt {
    signal: i32,
    at: Instant,
    passed_on: bool,
}

impl Interrupt {
    fn new(signal: i32) -> Self {
        Interrupt {
            signal,
            at: Instant::now(),
            passed_on: false,
        }
    }

    /// Sends the signal to COMMAND once: SIGTERM at once, SIGINT when
    /// COMMAND has not ended on the terminal's own within [`OWN_SIGINT`].
    fn pass_on(&mut self, pid: Pid) {
        let (signal, after) = match self.signal {
            signal_hook::consts::SIGINT => (Signal::INT, OWN_SIGINT),
            _ => (Signal::TERM, Duration::ZERO),
        };
        if !self.passed_on && self.at.elapsed() >= after {
            self.passed_on = true;
            let _ = kill_process(pid, signal);
        }
    }
}

/// The status a shell would report for `status`: its code, or 128 + the
/// signal that ended it.
pub fn shell_status(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_command_is_127_and_a_directory_126() {
        let missing = start(&["kas-no-such-command".into()], "http://x/").unwrap_err();
        assert_eq!(missing.status, 127);
        assert!(missing.message.contains("command not found"), "{missing:?}");
        let directory = start(&["/".into()], "http://x/").unwrap_err();
        assert_eq!(directory.status, 126, "{directory:?}");
    }

    #[test]
    fn the_url_is_in_the_environment_and_statuses_pass_through() {
        let child = start(
            &[
                "sh".into(),
                "-c".into(),
                "test \"$KAS_LAB_URL\" = http://lab/ && exit 7".into(),
            ],
            "http://lab/",
        )
        .unwrap();
        let mut signals = Signals::new([signal_hook::consts::SIGUSR2]).unwrap();
        match wait(child, &mut signals).unwrap() {
            Ended::Exited(status) => assert_eq!(shell_status(status), 7),
            other => panic!("{other:?}"),
        }
    }
}
