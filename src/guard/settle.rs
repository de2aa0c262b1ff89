//! Waiting, once COMMAND has ended, until the server can learn nothing
//! more of its clients: every connection has ended. A client that exited
//! closed its connections as it went (the server hears those closes at
//! once); an idle connection the server has just closed is watched for
//! at most a second for a request that lost the race (the watch after an
//! idle FIN), then closed. So the wait is bounded: past [`MAX_SETTLE`],
//! what is still open belongs to a process COMMAND left behind, and the
//! guard judges without it (and says so).

use std::time::{Duration, Instant};

use signal_hook::iterator::Signals;

use crate::ServerHandle;

/// The longest wait: the one-second watch after an idle FIN, and time
/// for the server's loop to hear the last closes on a busy machine.
pub const MAX_SETTLE: Duration = Duration::from_millis(2500);
/// How long the workers may take to answer for their peers.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the open connections are counted.
const TICK: Duration = Duration::from_millis(20);

/// Waits until no connection is open, at most [`MAX_SETTLE`]: how many
/// are left, or the signal that interrupted the wait.
pub fn settle(handle: &ServerHandle, signals: &mut Signals) -> Result<u64, i32> {
    let since = Instant::now();
    loop {
        if let Some(signal) = signals.pending().next() {
            return Err(signal);
        }
        let open = handle.open_connections();
        if open == 0 || since.elapsed() >= MAX_SETTLE {
            return Ok(open);
        }
        std::thread::sleep(TICK);
    }
}
