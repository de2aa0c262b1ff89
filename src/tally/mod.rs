//! Counting, with nothing of the project imported: the leaf every module
//! that keeps figures builds on (`stats`, `tls`, `peer_observer`), so
//! none of them has to import another to count.
//!
//! - [`Counter`], [`Histogram`] (`counter`): one writer (the worker that
//!   owns them), any reader; a bump is a plain load and store. Read as
//!   [`HistogramData`], summed over workers on a scrape.
//! - [`LogHistogram`] (`log_histogram`): a compact log-linear histogram
//!   of durations for quantiles, owned and read by one thread.
//! - [`time_bounds`](mod@time_bounds): the bounds of the duration histograms, written once.

mod counter;
pub mod log_histogram;
pub mod time_bounds;

pub use counter::{Counter, Histogram, HistogramData};
pub use log_histogram::LogHistogram;
pub use time_bounds::time_bounds;
