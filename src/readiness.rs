//! The readiness contract's named predicates, for every non-blocking
//! socket in the process (mio: read or write until the call would block;
//! retry a call a signal interrupted), so that match arms read as policy:
//! `Err(e) if would_block(&e) => return`. A leaf: it imports nothing of
//! the project.

use std::io;

/// The socket has nothing more to give or take now: wait for an edge.
pub fn would_block(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::WouldBlock
}

/// A signal interrupted the call: make it again.
pub fn interrupted(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Interrupted
}
