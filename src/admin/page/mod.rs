//! The dashboard's files, embedded in the binary at build time: no CDN,
//! no build step, nothing read from disk at run time.

/// `GET /`.
pub const INDEX_HTML: &str = include_str!("index.html");
/// `GET /dashboard.js`.
pub const DASHBOARD_JS: &str = include_str!("dashboard.js");
/// `GET /dashboard.css`.
pub const DASHBOARD_CSS: &str = include_str!("dashboard.css");
/// `GET /favicon.svg`.
pub const FAVICON_SVG: &str = include_str!("favicon.svg");
