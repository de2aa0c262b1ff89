//! The measuring client shared by `keepalive-server probe` and
//! tools/kas-soak: kernel receive stamps ([`rx_stamps`]), one response read
//! from bytes as they arrive ([`response`]), a non-blocking connection that
//! stamps its request, response and close ([`timed_conn`], over TLS too), and the
//! reduction of timings to figures ([`stats`]).

pub mod response;
pub mod rx_stamps;
pub mod stats;
pub mod timed_conn;
mod timed_tls;
