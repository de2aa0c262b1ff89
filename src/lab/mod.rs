//! The keep-alive lab: what the server learns about the other side of its
//! connections at the idle boundary, and the controls that let a test
//! choose how the server behaves there.
//!
//! - [`controls`]: the query parameters (`ka=`, `advertise=`, `close=`,
//!   `after=`, `max=`) a request uses to set its connection's idle timeout,
//!   what it advertises, and how and when the server closes.
//! - [`peers`]: per worker, what each client address did: who closed idle
//!   connections first and at what age, how close reuses came to the
//!   server's deadline, requests that lost the race.
//! - [`report`]: the `/peers` document: estimates, a verdict and advice.
//! - [`histogram`]: the compact per-peer histogram behind the quantiles.
//!
//! Everything here is pure: times are loop-clock microseconds passed in,
//! so the logic is tested without sockets or a clock.

pub mod conn_controls;
pub mod controls;
pub mod histogram;
pub mod peers;
pub mod report;

/// A reuse with less than this left before the server's idle deadline is
/// a near miss.
pub const NEAR_MISS_US: u64 = 100_000;
