//! The admin listener's limits, as the settings its worker runs on: few
//! connections, short timeouts, small heads, nothing kept alive, no test
//! controls, no TLS and no access log. They are fixed: a reload of the
//! main listener's settings does not reach them.

use std::net::SocketAddr;

use crate::config::{AccessLogTarget, Config, Settings};

/// Admin connections served at once; past it, the oldest idle one (or
/// one accepted that has sent nothing) makes room, or the new one is
/// refused.
const MAX_CLIENTS: usize = 1024;
/// A client must send its whole request head within this; a request in
/// progress (and a response being written) must move within it.
const TIMEOUT_MS: u64 = 10_000;
/// The longest request head accepted; larger gets 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// The most header fields a request head may carry; more gets 431.
const MAX_HEADER_FIELDS: usize = 64;
/// A request body's largest announced size (none is wanted: GET and
/// HEAD only, and the body of another method is read and dropped).
const MAX_BODY: usize = 64 * 1024;

/// The settings the admin worker runs on, listening on `listen`.
pub fn admin_settings(listen: SocketAddr) -> Settings {
    Settings {
        workers: 1,
        keep_alive: false,
        keep_alive_advertised_secs: None,
        keep_alive_header: Vec::new(),
        inactivity_ms: Some(TIMEOUT_MS),
        headers_ms: Some(TIMEOUT_MS),
        request_ms: Some(TIMEOUT_MS),
        max_requests_per_socket: 0,
        max_header_size: MAX_HEAD,
        max_headers: MAX_HEADER_FIELDS,
        max_body_size: MAX_BODY,
        max_connections: MAX_CLIENTS,
        defer_accept: false,
        shutdown_ms: None,
        access_log: AccessLogTarget::Off,
        test_controls: false,
        clients_by_agent: false,
        tls: None,
        ..Config::with_listen(listen).settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_keeps_nothing_alive_and_obeys_no_controls() {
        let settings = admin_settings("127.0.0.1:0".parse().unwrap());
        assert!(!settings.keep_alive && !settings.test_controls);
        assert!(!settings.logs_access() && settings.tls.is_none());
        assert_eq!(settings.max_connections, MAX_CLIENTS);
        assert_eq!(settings.headers_ms, Some(TIMEOUT_MS));
    }
}
