//! Why a probe stopped without a report, and the exit status that says so:
//! 2 for a usage error (a URL the probe cannot use), 1 when the server is
//! unreachable or misbehaves (refused, not HTTP, no response in time).

use std::fmt;
use std::time::Duration;

/// A probe that could not run or finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The command line is wrong: exit status 2.
    Usage(String),
    /// The server could not be measured: exit status 1.
    Server(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Server(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(message) | Failure::Server(message) => f.write_str(message),
        }
    }
}

/// Why an exchange that waited `timeout` is given up: nothing came, or
/// what the server sent of a response it did not finish in time (the end
/// of a sentence beginning "the server", from
/// [`crate::measure::response::ResponseReader::unfinished`]).
pub fn overdue(timeout: Duration, unfinished: Option<String>) -> String {
    let within = humantime::format_duration(timeout);
    match unfinished {
        None => format!("no response within {within}"),
        Some(what) => format!(
            "no complete response within {within} (--timeout bounds the whole response, \
             interim ones included): the server {what}"
        ),
    }
}
