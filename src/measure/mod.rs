//! The measuring client shared by `keepalive-server probe` and
//! tools/kas-soak: one response read from bytes as they arrive
//! ([`response`]), a non-blocking connection that stamps its request,
//! response and close ([`timed_conn`], over TLS too, with the kernel's
//! receive stamps of [`crate::rx_stamps`]), and the reduction of timings
//! to figures ([`stats`]).

pub mod response;
pub mod stats;
pub mod timed_conn;
mod timed_tls;
