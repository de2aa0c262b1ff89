//! The admin listener's routes: what a request target names (the
//! dashboard's page and assets, its event stream and the stream's push
//! interval, the figures, the health check). Request heads are parsed,
//! and responses written, by the server's own core, as on the main
//! listener.

/// The event stream's push interval: default and bounds, in ms.
pub const DEFAULT_INTERVAL_MS: u64 = 250;
pub const MIN_INTERVAL_MS: u64 = 100;
pub const MAX_INTERVAL_MS: u64 = 5_000;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`: the dashboard page.
    Page,
    Script,
    Style,
    Icon,
    /// `/events`: the dashboard's feed, pushed every `interval_ms`.
    Events {
        interval_ms: u64,
    },
    /// `/events` with an `interval=` that is not a whole number of ms in
    /// [`MIN_INTERVAL_MS`]..=[`MAX_INTERVAL_MS`] (400, naming the range).
    BadInterval,
    Metrics,
    Timers,
    /// `/peers`: the peer observer's per-client report.
    Peers,
    Healthz,
    NotFound,
}

/// Routes a request target (`/path?query`).
pub fn route(target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/" | "/index.html" => Route::Page,
        "/dashboard.js" => Route::Script,
        "/dashboard.css" => Route::Style,
        "/favicon.svg" | "/favicon.ico" => Route::Icon,
        "/events" => match interval(query) {
            Some(interval_ms) => Route::Events { interval_ms },
            None => Route::BadInterval,
        },
        "/metrics" => Route::Metrics,
        "/timers" => Route::Timers,
        "/peers" => Route::Peers,
        "/healthz" => Route::Healthz,
        _ => Route::NotFound,
    }
}

/// `interval=` from a query string, in ms (absent: the default); `None`
/// when it is not a whole number of ms within the allowed range, which is
/// refused rather than quietly clamped.
fn interval(query: &str) -> Option<u64> {
    match query
        .split('&')
        .find_map(|pair| pair.strip_prefix("interval="))
    {
        None => Some(DEFAULT_INTERVAL_MS),
        Some(value) => value
            .parse::<u64>()
            .ok()
            .filter(|ms| (MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(ms)),
    }
}

/// The body of the 400 for a bad `interval=`.
pub const BAD_INTERVAL: &str = "interval= must be a whole number of milliseconds from 100 \
                                to 5000 (default 250), e.g. /events?interval=500\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_routed_by_path_whatever_the_query() {
        assert_eq!(route("/healthz?x=1"), Route::Healthz);
        assert_eq!(route("/metrics"), Route::Metrics);
        assert_eq!(route("/index.html"), Route::Page);
        assert_eq!(route("/nope"), Route::NotFound);
        assert_eq!(route("/"), Route::Page);
    }

    #[test]
    fn the_event_interval_is_read_within_its_range_or_refused() {
        let interval_of = |target| match route(target) {
            Route::Events { interval_ms } => interval_ms,
            other => panic!("{other:?}"),
        };
        assert_eq!(interval_of("/events"), 250);
        assert_eq!(interval_of("/events?interval=1000"), 1000);
        assert_eq!(interval_of("/events?a=b&interval=100"), 100);
        assert_eq!(interval_of("/events?interval=5000"), 5000);
        for bad in ["1", "50", "99", "5001", "60000", "abc", "", "-5", "1.5"] {
            let target = format!("/events?interval={bad}");
            assert_eq!(route(&target), Route::BadInterval, "{target}");
        }
        assert!(BAD_INTERVAL.contains(&format!("{MIN_INTERVAL_MS} to {MAX_INTERVAL_MS}")));
    }
}
